//! A GL driver update, on the machine's GL driver (llvmpipe in CI): the GL GPU id holds the
//! driver's version, and a test cannot install another driver, so the hidden test hook
//! `SPARKLE_TEST_GL_DRIVER` gives the version a suffix that stands for one (a new GPU id, a new
//! cache folder, as after a real update). Each "process" of the story is a real process (this
//! test binary started again for one phase, the hook set in its environment): process A uses
//! the suite's kernels under driver A; process B opens under driver B and rebuilds A's working
//! set (in the background, or in the foreground as `sparkle cache rebuild` does); process C
//! under driver B then compiles nothing and its programs compute correct results.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::gl_support::DRIVER_VARS;
use crate::isolated;
use sparkle::cache::{recipe, CacheConfig, CacheStats};
use sparkle::runtime::REBUILD_ENV;
use sparkle::suite::{self, Case};
use sparkle::Runtime;

/// The test hook's variable (read where the gl backend forms its GPU id).
const DRIVER_ENV: &str = "SPARKLE_TEST_GL_DRIVER";
/// Tells a phase process which phase it runs and in which cache folder: `<phase> <folder>`.
const PHASE_ENV: &str = "SPARKLE_TEST_GL_DRIVER_PHASE";

fn small_cases() -> Vec<Box<dyn Case>> {
    vec![
        Box::new(suite::saxpy::Saxpy::random(1000, 3)),
        Box::new(suite::sgemm::Sgemm::random(40, 24, 33, 3)),
        Box::new(suite::conv2d::Conv2d::random(suite::conv2d::Shape { n: 1, c: 3, h: 9, w: 11, k: 2 }, 3)),
    ]
}

fn open(dir: &Path) -> Runtime {
    Runtime::open_backend("gl", &CacheConfig::in_dir(dir)).expect("a GL 4.3 context (llvmpipe is enough)")
}

/// Every program of the suite, run and checked against its CPU reference.
fn run_suite(runtime: &Runtime) {
    for case in small_cases() {
        let program = runtime.program(&case.spec()).expect("suite kernel");
        let verdict = suite::run_and_verify(runtime, &program, case.as_ref()).expect("dispatch");
        assert!(verdict.passed(), "{}: {verdict}", case.describe());
    }
}

/// Runs `phase` over the cache folder `dir` in a process of its own, as driver `driver`, with
/// the background rebuild `rebuild` (on or off).
fn in_process(phase: &str, dir: &Path, driver: &str, rebuild: &str) {
    let phase_value = format!("{phase} {}", dir.display());
    let mut env: Vec<(&str, Option<&str>)> = DRIVER_VARS.iter().map(|&var| (var, None)).collect();
    env.extend([
        (PHASE_ENV, Some(phase_value.as_str())),
        (DRIVER_ENV, Some(driver)),
        (REBUILD_ENV, Some(rebuild)),
    ]);
    env.push(("SPARKLE_CACHE_REMOTE", None));
    assert!(isolated::ran_in_own_process(module_path!(), "driver_change_phase", &env));
}

/// One process of the story; run only by [`in_process`].
#[test]
#[ignore = "a phase of the driver-change tests, started by them in a process of its own"]
fn driver_change_phase() {
    if isolated::ran_in_own_process(module_path!(), "driver_change_phase", &[]) {
        return;
    }
    let value = std::env::var(PHASE_ENV).expect("started by a driver-change test");
    let (phase, dir) = value.split_once(' ').expect("<phase> <folder>");
    let dir = PathBuf::from(dir);
    match phase {
        // Driver A: the suite, compiled and kept with its recipes.
        "use" => {
            let a = open(&dir);
            run_suite(&a);
            let stats = a.cache_stats();
            assert_eq!((stats.compiles, stats.disk_writes), (3, 3), "{stats}");
            assert_eq!(recipe::working_set(&a.cache_dir().unwrap()).len(), 3);
        }
        // Driver B, asking for nothing: the background rebuild builds A's working set.
        "background" => {
            let b = open(&dir);
            let deadline = Instant::now() + Duration::from_secs(120);
            let new = b.cache_dir().unwrap();
            // Until its figures are in the ledger too (written after the last program).
            while b.cache_stats().rebuilt < 3 || recipe::read_ledger(&new).is_none() {
                assert!(
                    Instant::now() < deadline,
                    "the background rebuild did not finish: {}",
                    b.cache_stats()
                );
                std::thread::sleep(Duration::from_millis(20));
            }
            let stats = b.cache_stats();
            assert_eq!((stats.rebuilt, stats.compiles, stats.compile_errors), (3, 3, 0), "{stats}");
        }
        // Driver B, `sparkle cache rebuild`'s way.
        "foreground" => {
            let b = open(&dir);
            let mut steps = 0;
            let report = b.rebuild_working_set(None, &mut |_| steps += 1).unwrap();
            assert_eq!((report.planned, report.rebuilt, steps), (3, 3, 3), "{report:?}");
            assert!(report.failed.is_empty() && report.refused.is_empty(), "{report:?}");
            let stats = b.cache_stats();
            assert_eq!((stats.rebuilt, stats.compiles), (3, 3), "{stats}");
        }
        // Driver B again: nothing compiles, and the rebuilt programs compute correct results.
        "next" => {
            let c = open(&dir);
            run_suite(&c);
            let stats: CacheStats = c.cache_stats();
            assert_eq!((stats.compiles, stats.disk_hits, stats.rebuilt), (0, 3, 0), "{stats}");
        }
        other => panic!("no phase {other}"),
    }
}

/// The GPU folders under `dir`, and the one whose ledger says it was rebuilt into.
fn folders(dir: &Path) -> (Vec<PathBuf>, PathBuf) {
    let gl: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.file_name().unwrap().to_str().unwrap().starts_with("gl-"))
        .collect();
    let rebuilt =
        gl.iter().find(|dir| recipe::read_ledger(dir).is_some()).expect("a folder was rebuilt into");
    (gl.clone(), rebuilt.clone())
}

fn check_the_ledger(dir: &Path) {
    let (gl, new) = folders(dir);
    assert_eq!(gl.len(), 2, "one folder per driver: {gl:?}");
    let old = gl.iter().find(|folder| **folder != new).unwrap();
    let ledger = recipe::read_ledger(&new).unwrap();
    assert_eq!((ledger.rebuilt, ledger.failed, ledger.refused), (3, 0, 0));
    assert_eq!(ledger.from.as_deref(), old.file_name().and_then(|n| n.to_str()));
}

#[test]
fn after_a_gl_driver_update_the_background_rebuild_leaves_nothing_to_compile() {
    let cache = tempfile::tempdir().unwrap();
    in_process("use", cache.path(), "A", "on");
    in_process("background", cache.path(), "B", "on");
    in_process("next", cache.path(), "B", "on");
    check_the_ledger(cache.path());
}

#[test]
fn after_a_gl_driver_update_cache_rebuild_leaves_nothing_to_compile() {
    let cache = tempfile::tempdir().unwrap();
    in_process("use", cache.path(), "A", "off");
    in_process("foreground", cache.path(), "B", "off");
    in_process("next", cache.path(), "B", "off");
    check_the_ledger(cache.path());
}
