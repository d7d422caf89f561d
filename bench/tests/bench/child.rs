//! `sparkle-bench bench-child`, the one measured run of the suite in a fresh process that
//! `bench` starts: on gl (Mesa's llvmpipe in CI) a second process loads every program from the
//! disk cache and gets the same results, and with the cache off the process touches no cache
//! folder and leaves the driver's cache in its default place; on the simulated GPU a second
//! process loads the programs from disk too.

use std::path::Path;
use std::process::Command;

use crate::command::{files_under, text, with_own_driver_cache};
use crate::faults::entry_files;
use sparkle::suite;

#[derive(serde::Deserialize)]
struct ChildReport {
    correct: bool,
    digests: Vec<String>,
    disk_hits: u64,
    compiles: u64,
}

fn child(cache_dir: &Path, extra_env: &[(&str, &str)]) -> (ChildReport, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sparkle-bench"));
    command.arg("bench-child").env("SPARKLE_CACHE_DIR", cache_dir).env("SPARKLE_BACKEND", "gl");
    for (name, value) in extra_env {
        command.env(name, value);
    }
    let output = command.output().expect("the sparkle-bench binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "bench-child failed: {stderr}");
    (serde_json::from_slice(&output.stdout).expect("a JSON report"), stderr)
}

#[test]
fn a_second_process_loads_every_program_from_disk_and_gets_the_same_results() {
    let dir = tempfile::tempdir().unwrap();
    let driver_cache = tempfile::tempdir().unwrap();
    let driver_env = [("MESA_SHADER_CACHE_DIR", driver_cache.path().to_str().unwrap())];
    let suite_size = suite::kernels().len() as u64;

    let (first, _) = child(dir.path(), &driver_env);
    assert!(first.correct);
    assert_eq!((first.compiles, first.disk_hits), (suite_size, 0));
    assert_eq!(entry_files(dir.path()).len() as u64, suite_size);

    let (second, _) = child(dir.path(), &driver_env);
    assert!(second.correct);
    assert_eq!((second.compiles, second.disk_hits), (0, suite_size));
    assert_eq!(second.digests, first.digests, "results differ between the compiled and the loaded programs");
}

#[test]
fn a_cache_that_is_off_touches_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (cache, home) = (tmp.path().join("cache"), tmp.path().join("home"));
    std::fs::create_dir(&home).unwrap();

    // `bench-child --no-cache`: the Sparkle cache off in a process that runs the whole suite.
    let output = with_own_driver_cache(
        env!("CARGO_BIN_EXE_sparkle-bench"),
        &["bench-child", "--no-cache"],
        &cache,
        &home,
        &[],
    );
    assert!(output.status.success(), "{}", text(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let placement = report["driver_cache"].as_str().unwrap();
    assert!(placement.contains("default location") && placement.contains("cache is off"), "{placement}");
    assert!(!cache.exists(), "{:?}", files_under(&cache));
}

#[cfg(feature = "amdgpu-sim")]
#[test]
fn a_second_process_loads_the_programs_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let child = || {
        let output = Command::new(env!("CARGO_BIN_EXE_sparkle-bench"))
            .arg("bench-child")
            .env("SPARKLE_BACKEND", "amdgpu-sim")
            .env("SPARKLE_CACHE_DIR", dir.path())
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    let first = child();
    assert_eq!((first["correct"].as_bool(), first["compiles"].as_u64()), (Some(true), Some(3)), "{first}");
    let second = child();
    assert_eq!((second["disk_hits"].as_u64(), second["compiles"].as_u64()), (Some(3), Some(0)), "{second}");
    assert_eq!(second["digests"], first["digests"]);
    assert!(dir.path().read_dir().unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with("amdgpu-sim-")));
}
