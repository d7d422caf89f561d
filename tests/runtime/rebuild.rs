//! After a driver update: the working set rebuilt from the recipes kept with the entries, on the
//! simulated GPU (`amdgpu-sim`). A "driver update" is a new compiler identity: the device is
//! given a compiler whose `clang --version` names another build (a script of this test's; the
//! suite's kernels are prebuilt code objects, which it never has to compile), so the GPU id and
//! its cache folder change as after a real update. Process A uses the kernels, process B opens
//! the new identity and rebuilds (in the background, or in the foreground as
//! `sparkle cache rebuild` does), and process C with the new identity compiles nothing.
//! Bad recipes (damaged, of another folder or key, failing to compile) are refused or
//! reported, never compiled from, and the rebuild goes on.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sparkle::amdgpu::sim::{AmdgpuSim, SimDriver, SimOptions, Simulated};
use sparkle::amdgpu::{AmdgpuDevice, DeviceOptions};
use sparkle::cache::recipe::{self, RecipeProblem};
use sparkle::cache::{CacheConfig, CacheKey, WORKING_SET_FILE};
use sparkle::runtime::{RebuildOutcome, REBUILD_ENV};
use sparkle::Runtime;

#[path = "../support/fake_compiler.rs"]
mod fake_compiler;
use fake_compiler::compiler;

use super::isolated;

/// A process's runtime on the simulated gfx1100 with the compiler `build`, caching in `cache`.
fn open(tools: &Path, cache: &Path, build: &str) -> Runtime {
    let options = DeviceOptions { compiler: Some(compiler(tools, build)), ..DeviceOptions::default() };
    let device = AmdgpuDevice::<Simulated>::new(SimDriver::new(SimOptions::default()), options).unwrap();
    Runtime::from_device::<AmdgpuSim>(device, &CacheConfig::in_dir(cache))
}

fn gpu_dir(runtime: &Runtime) -> PathBuf {
    runtime.cache_dir().expect("the cache is on disk")
}

/// Process A: uses the suite's kernels with the first driver; returns its GPU folder.
fn first_driver_uses_the_suite(tools: &Path, cache: &Path) -> PathBuf {
    let a = open(tools, cache, "driver-a");
    for spec in sparkle::suite::kernels() {
        a.program(&spec).unwrap();
    }
    let stats = a.cache_stats();
    assert_eq!((stats.compiles, stats.disk_writes), (3, 3), "{stats}");
    let dir = gpu_dir(&a);
    assert_eq!(recipe::working_set(&dir).len(), 3);
    dir
}

#[test]
fn after_a_driver_update_the_background_rebuild_leaves_nothing_to_compile() {
    let tools = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let old = first_driver_uses_the_suite(tools.path(), cache.path());

    // Process B: the new driver; it asks for nothing and the rebuild runs behind it.
    let b = open(tools.path(), cache.path(), "driver-b");
    let new = gpu_dir(&b);
    assert_ne!(new, old, "a new compiler identity is a new GPU folder");
    let deadline = Instant::now() + Duration::from_secs(120);
    // Until its figures are in the ledger too: the rebuild's thread writes them after the last
    // program, at the lowest priority (on a loaded machine, well after the count reached 3).
    while b.cache_stats().rebuilt < 3 || recipe::read_ledger(&new).is_none() {
        assert!(Instant::now() < deadline, "the background rebuild did not finish: {}", b.cache_stats());
        std::thread::sleep(Duration::from_millis(20));
    }
    let stats = b.cache_stats();
    assert_eq!((stats.rebuilt, stats.compiles, stats.compile_errors), (3, 3, 0), "{stats}");
    drop(b);

    // Process C: the new driver again; every kernel loads from disk.
    let c = open(tools.path(), cache.path(), "driver-b");
    for spec in sparkle::suite::kernels() {
        c.program(&spec).unwrap();
    }
    let stats = c.cache_stats();
    assert_eq!((stats.compiles, stats.disk_hits, stats.rebuilt), (0, 3, 0), "{stats}");
    // The new folder keeps recipes too (the next update rebuilds from it), and says what it got.
    assert_eq!(recipe::working_set(&new).len(), 3);
    for key in recipe::working_set(&new) {
        assert!(recipe::read(&new, key).unwrap().is_some(), "no recipe for {key}");
    }
    let ledger = recipe::read_ledger(&new).expect("the rebuild is recorded");
    assert_eq!((ledger.rebuilt, ledger.failed, ledger.refused), (3, 0, 0));
    assert_eq!(ledger.from.as_deref(), old.file_name().and_then(|n| n.to_str()));
}

#[test]
fn a_process_of_the_same_driver_does_not_rebuild() {
    let tools = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let old = first_driver_uses_the_suite(tools.path(), cache.path());
    let again = open(tools.path(), cache.path(), "driver-a");
    assert_eq!(gpu_dir(&again), old);
    // Give a wrongly started rebuild time to show.
    std::thread::sleep(Duration::from_millis(300));
    let stats = again.cache_stats();
    assert_eq!((stats.rebuilt, stats.compiles), (0, 0), "{stats}");
}

/// Appends `key` to a GPU folder's working set as a process would.
fn write_working_set(dir: &Path, keys: &[CacheKey]) {
    let text: String = keys.iter().map(|key| format!("{} 1000\n", key.hex())).collect();
    fs::write(dir.join(WORKING_SET_FILE), text).unwrap();
}

fn folder_hash(dir: &Path) -> u64 {
    let name = dir.file_name().unwrap().to_str().unwrap();
    u64::from_str_radix(name.rsplit_once('-').unwrap().1, 16).unwrap()
}

#[test]
fn bad_recipes_are_refused_a_failing_program_is_reported_and_the_rebuild_goes_on() {
    // The foreground rebuild alone, without a background one beside it.
    if isolated::ran_in_own_process(
        module_path!(),
        "bad_recipes_are_refused_a_failing_program_is_reported_and_the_rebuild_goes_on",
        &[(REBUILD_ENV, Some("off"))],
    ) {
        return;
    }
    let tools = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let old = first_driver_uses_the_suite(tools.path(), cache.path());
    let [saxpy, sgemm, conv2d]: [CacheKey; 3] = recipe::working_set(&old).try_into().unwrap();
    let saxpy_recipe = fs::read(recipe::recipe_path(&old, saxpy)).unwrap();
    let saxpy_payload = recipe::read(&old, saxpy).unwrap().unwrap();

    // sgemm's recipe damaged: one flipped byte in its spec.
    let path = recipe::recipe_path(&old, sgemm);
    let mut damaged = fs::read(&path).unwrap();
    let last = damaged.len() - 2;
    damaged[last] ^= 0x01;
    fs::write(&path, damaged).unwrap();
    // conv2d's recipe is saxpy's: a whole, sealed recipe of another key.
    fs::write(recipe::recipe_path(&old, conv2d), &saxpy_recipe).unwrap();
    // A recipe sealed for another GPU folder, under a key of this one.
    let elsewhere = CacheKey::from_u128(0xe15e);
    recipe::write(&old, "amdgpu-sim", folder_hash(&old) ^ 1, elsewhere, &saxpy_payload).unwrap();
    // A whole recipe of a kernel the new driver cannot build (OpenCL C only; the compiler fails).
    let broken = CacheKey::from_u128(0xb0);
    let mut spec: serde_json::Value = serde_json::from_slice(&saxpy_payload).unwrap();
    spec["name"] = "no_code_object".into();
    spec["sources"] = serde_json::json!([{
        "language": "open-cl", "source": "__kernel void saxpy() {}", "entry_point": "saxpy", "options": []
    }]);
    recipe::write(&old, "amdgpu-sim", folder_hash(&old), broken, &serde_json::to_vec(&spec).unwrap())
        .unwrap();
    write_working_set(&old, &[broken, sgemm, elsewhere, conv2d, saxpy]);

    let b = open(tools.path(), cache.path(), "driver-b");
    let mut steps = Vec::new();
    let report = b
        .rebuild_working_set(None, &mut |step| {
            steps.push((
                step.done,
                step.total,
                step.key,
                step.kernel.map(str::to_owned),
                step.outcome.clone(),
            ))
        })
        .unwrap();
    assert_eq!(steps.len(), 5);
    assert!(steps.iter().enumerate().all(|(i, s)| s.0 == i + 1 && s.1 == 5));
    assert!(
        matches!(&steps[0].4, RebuildOutcome::Failed(why) if why.contains("no_code_object")),
        "{steps:?}"
    );
    let refused = |i: usize, problem: &RecipeProblem| {
        assert_eq!(steps[i].4, RebuildOutcome::Refused(problem.to_string()), "{steps:?}");
        assert_eq!(steps[i].3, None, "a refused recipe is never read as a kernel");
    };
    refused(1, &RecipeProblem::BadPayloadChecksum);
    refused(2, &RecipeProblem::Gpu(folder_hash(&old) ^ 1));
    refused(3, &RecipeProblem::Key(saxpy.as_u128()));
    assert_eq!(steps[4].4, RebuildOutcome::Rebuilt, "the rebuild goes on after failures: {steps:?}");
    assert_eq!(steps[4].3.as_deref(), Some("saxpy"));
    assert_eq!((report.planned, report.rebuilt, report.failed.len(), report.refused.len()), (5, 1, 1, 3));

    // Nothing was compiled from a refused recipe: one compile failed, one (saxpy) was built.
    let stats = b.cache_stats();
    assert_eq!((stats.compiles, stats.compile_errors, stats.rebuilt), (2, 1, 1), "{stats}");
    assert_eq!(recipe::working_set(&gpu_dir(&b)).len(), 1, "only saxpy is in the new folder");
    // Damaged recipes go, as damaged entries do.
    assert!(!recipe::recipe_path(&old, sgemm).exists());
    let ledger = recipe::read_ledger(&gpu_dir(&b)).unwrap();
    assert_eq!((ledger.rebuilt, ledger.failed, ledger.refused), (1, 1, 3));

    // The user's own use of a kernel is untouched by its failed rebuild, and a second rebuild
    // finds saxpy there.
    b.program(&sparkle::suite::kernels()[0]).unwrap();
    let again = b.rebuild_working_set(None, &mut |_| {}).unwrap();
    assert_eq!((again.rebuilt, again.present), (0, 1));
}

#[test]
fn rebuild_from_names_a_folder_of_the_backend_or_fails() {
    let tools = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let b = open(tools.path(), cache.path(), "driver-b");
    let err = b.rebuild_working_set(None, &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains("no GPU folder of this device under another driver"), "{err}");
    let err = b.rebuild_working_set(Some("gl-0123456789abcdef"), &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains("--from gl-0123456789abcdef"), "{err}");
    let own = gpu_dir(&b);
    let own_name = own.file_name().unwrap().to_str().unwrap();
    assert!(b.rebuild_working_set(Some(own_name), &mut |_| {}).is_err(), "its own folder is no source");
}

#[test]
fn another_users_recipe_or_a_link_is_never_built_nor_removed() {
    if isolated::ran_in_own_process(
        module_path!(),
        "another_users_recipe_or_a_link_is_never_built_nor_removed",
        &[(REBUILD_ENV, Some("off"))],
    ) {
        return;
    }
    let tools = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let old = first_driver_uses_the_suite(tools.path(), cache.path());
    let [saxpy, sgemm, conv2d]: [CacheKey; 3] = recipe::working_set(&old).try_into().unwrap();
    // sgemm's recipe, whole and valid, reached through a link: links are not followed.
    let elsewhere = tools.path().join("sgemm.recipe");
    fs::rename(recipe::recipe_path(&old, sgemm), &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, recipe::recipe_path(&old, sgemm)).unwrap();
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        // saxpy's recipe, whole and valid, owned by another user.
        std::os::unix::fs::chown(recipe::recipe_path(&old, saxpy), Some(65534), Some(65534)).unwrap();
    } else {
        eprintln!("the foreign-owner part is skipped: changing a file's owner needs root");
    }

    let b = open(tools.path(), cache.path(), "driver-b");
    let mut outcomes = Vec::new();
    b.rebuild_working_set(None, &mut |step| outcomes.push((step.key, step.outcome.clone()))).unwrap();
    let outcome = |key: CacheKey| outcomes.iter().find(|(k, _)| *k == key).map(|(_, o)| o.clone()).unwrap();
    assert_eq!(outcome(sgemm), RebuildOutcome::Refused(RecipeProblem::NotAFile.to_string()));
    assert_eq!(outcome(conv2d), RebuildOutcome::Rebuilt);
    let stats = b.cache_stats();
    if root {
        assert_eq!(outcome(saxpy), RebuildOutcome::Refused(RecipeProblem::Foreign(65534).to_string()));
        assert_eq!((stats.compiles, stats.rebuilt), (1, 1), "{stats}");
        assert!(recipe::recipe_path(&old, saxpy).exists(), "another user's file is not removed");
    } else {
        assert_eq!((stats.compiles, stats.rebuilt), (2, 2), "{stats}");
    }
    assert!(fs::symlink_metadata(recipe::recipe_path(&old, sgemm)).unwrap().file_type().is_symlink());
    assert!(elsewhere.exists(), "a link's target is never touched");
}

#[test]
fn a_rebuild_cut_short_is_taken_up_by_the_next_process() {
    let tools = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let old = first_driver_uses_the_suite(tools.path(), cache.path());
    let from = old.file_name().unwrap().to_str().unwrap().to_owned();

    // Process B closes at once: its rebuild stops wherever it is (perhaps before any program).
    let b = open(tools.path(), cache.path(), "driver-b");
    let new = gpu_dir(&b);
    drop(b);
    // Process B2 takes it up and goes through to the end.
    let b2 = open(tools.path(), cache.path(), "driver-b");
    let deadline = Instant::now() + Duration::from_secs(120);
    while !recipe::rebuild_completed(&new, &from) {
        assert!(Instant::now() < deadline, "no process finished the rebuild: {}", b2.cache_stats());
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(b2);

    let c = open(tools.path(), cache.path(), "driver-b");
    for spec in sparkle::suite::kernels() {
        c.program(&spec).unwrap();
    }
    let stats = c.cache_stats();
    assert_eq!((stats.compiles, stats.disk_hits), (0, 3), "{stats}");
    // Between them, B and B2 built each program once.
    assert_eq!(recipe::read_ledger(&new).unwrap().rebuilt, 3);
}
