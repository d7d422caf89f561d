//! Several processes × several threads on one cache folder, for a bounded time, on gl and on
//! amdgpu-sim: first compiles, memory and disk hits, prunes and clears all mixed, with the
//! memory tier bounded to one program so that most requests go to disk. Every result is checked
//! against the CPU; afterwards every entry left verifies.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::isolated;
use sparkle::cache::{CacheConfig, DiskStore};
use sparkle::suite::{self, Case};
use sparkle::{KernelSpec, Runtime};

const ROLE_ENV: &str = "SPARKLE_TEST_MIX_DIR";
const BACKEND_ENV: &str = "SPARKLE_TEST_MIX_BACKEND";
const PROCESSES: usize = 3;
const THREADS: usize = 3;
const RUN_FOR: Duration = Duration::from_secs(8);

/// Kernel variants: the suite's saxpy with a define that changes its key but not its result. A
/// prebuilt code object ignores defines, so on amdgpu-sim the odd variants drop the code objects
/// and are compiled from OpenCL C (clang), the even ones share the shipped code object's key.
fn variant(backend: &str, case: &dyn Case, index: u64) -> KernelSpec {
    let mut spec = case.spec().define("SPARKLE_MIX_VARIANT", index);
    if backend == "amdgpu-sim" && index % 2 == 1 {
        spec.sources.retain(|source| !matches!(source, sparkle::kernel::KernelSource::CodeObjects { .. }));
    }
    spec
}

/// One process's share: threads asking for programs (and checking results), and every so often
/// pruning or clearing the shared folder. Prints a result line.
fn mix(backend: &str, dir: &Path, id: u64) {
    let config = CacheConfig { max_memory_entries: 1, ..CacheConfig::in_dir(dir) };
    let runtime = Runtime::open_backend(backend, &config).expect("the backend opens");
    let deadline = Instant::now() + RUN_FOR;
    let (dispatches, maintenance) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS as u64)
            .map(|thread| {
                let runtime = &runtime;
                s.spawn(move || {
                    let mut state = (id * 31 + thread + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                    let (mut dispatches, mut maintenance) = (0u64, 0u64);
                    while Instant::now() < deadline {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        match state % 16 {
                            0 => {
                                DiskStore::open(dir).prune(8 * 1024, None).expect("prune");
                                maintenance += 1;
                            }
                            1 => {
                                DiskStore::open(dir).clear().expect("clear");
                                maintenance += 1;
                            }
                            _ => {
                                let case = suite::saxpy::Saxpy::random(64 + (state % 200) as usize, state);
                                let spec = variant(backend, &case, (state >> 8) % 6);
                                let program = runtime.program(&spec).expect("a program");
                                let verdict =
                                    suite::run_and_verify(runtime, &program, &case).expect("dispatch");
                                assert!(verdict.passed(), "process {id} thread {thread}: {verdict}");
                                dispatches += 1;
                            }
                        }
                    }
                    (dispatches, maintenance)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    });
    let stats = runtime.cache_stats();
    println!(
        "MIX_RESULT id={id} dispatches={dispatches} maintenance={maintenance} compiles={} disk_hits={} \
         rejected={} refused={} writes={}",
        stats.compiles, stats.disk_hits, stats.disk_rejected, stats.driver_refused, stats.disk_writes
    );
}

#[test]
fn mix_role() {
    let (Ok(dir), Ok(backend)) = (std::env::var(ROLE_ENV), std::env::var(BACKEND_ENV)) else { return };
    let id = std::process::id() as u64;
    mix(&backend, Path::new(&dir), id);
}

fn field(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|part| part.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        .parse()
        .unwrap()
}

/// Runs the mix in `PROCESSES` processes on `backend` and checks the folder afterwards.
pub fn processes_and_threads_share_one_folder(backend: &str) {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            Command::new(&exe)
                .args([
                    &isolated::test_name(module_path!(), "mix_role"),
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(ROLE_ENV, dir.path())
                .env(BACKEND_ENV, backend)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut totals = [0u64; 5];
    for child in children {
        let output = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "a process failed:\n{stdout}\n{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        let line =
            stdout.lines().find_map(|l| l.find("MIX_RESULT").map(|at| &l[at..])).expect("a result line");
        assert_eq!(field(line, "refused"), 0, "the driver refused a verified entry: {line}");
        for (total, name) in
            totals.iter_mut().zip(["dispatches", "maintenance", "compiles", "disk_hits", "rejected"])
        {
            *total += field(line, name);
        }
    }
    let report = DiskStore::open(dir.path()).verify(false).unwrap();
    assert!(report.removed.is_empty() && report.problems.is_empty(), "{report:?}");
    assert_eq!(report.checked, report.valid);
    eprintln!(
        "{backend}: {PROCESSES} processes × {THREADS} threads for {RUN_FOR:?}: {} correct dispatches, {} prunes/clears, \
         {} compiles, {} disk hits, {} rejected; {} entries left, all valid",
        totals[0], totals[1], totals[2], totals[3], totals[4], report.valid
    );
    assert!(totals[0] > 0 && totals[1] > 0 && totals[3] > 0, "{totals:?}");
}

#[cfg(feature = "gl")]
#[test]
fn gl_processes_and_threads_mix_compiles_hits_prunes_and_clears() {
    if std::env::var(ROLE_ENV).is_ok() {
        return;
    }
    processes_and_threads_share_one_folder("gl");
}

#[cfg(feature = "amdgpu-sim")]
#[test]
fn amdgpu_sim_processes_and_threads_mix_compiles_hits_prunes_and_clears() {
    if std::env::var(ROLE_ENV).is_ok() {
        return;
    }
    processes_and_threads_share_one_folder("amdgpu-sim");
}
