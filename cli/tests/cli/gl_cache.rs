//! The gl backend's program cache as the `sparkle` command meets it (Mesa's llvmpipe in CI): a
//! driver without program binaries still runs, memory-only, and says so once; processes that
//! share a cache folder exit cleanly right after their GL work. (The cache through the library:
//! the library's `gl::cache` tests.)

use std::process::Command;

use crate::faults::entry_files;
use crate::gl_support::driver_is_mesa;

#[test]
fn without_program_binaries_results_stay_correct_and_the_notice_appears() {
    if !driver_is_mesa() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_sparkle"))
        .args(["run", "sgemm", "33", "17", "9"])
        .env("SPARKLE_CACHE_DIR", dir.path())
        .env("SPARKLE_BACKEND", "gl")
        .env("MESA_SHADER_CACHE_DISABLE", "true")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("result: correct"), "{stdout}");
    assert!(stderr.contains("no program binary formats"), "the uncached notice is shown: {stderr}");
    assert_eq!(stderr.matches("no program binary formats").count(), 1, "said once: {stderr}");
    assert!(entry_files(dir.path()).is_empty(), "nothing is written to disk");
}

#[test]
fn processes_sharing_a_cache_folder_exit_cleanly() {
    // A driver torn down during process exit, with GL work just finished, crashes — this must
    // simply work.
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..5 {
        let output = Command::new(env!("CARGO_BIN_EXE_sparkle"))
            .args(["run", "saxpy", "100"])
            .env("SPARKLE_BACKEND", "gl")
            .env("SPARKLE_CACHE_DIR", dir.path())
            .output()
            .unwrap();
        assert!(output.status.success(), "{:?}: {}", output.status, String::from_utf8_lossy(&output.stderr));
    }
}
