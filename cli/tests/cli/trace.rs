//! `sparkle run --trace FILE` and `SPARKLE_TRACE`: the timeline of a cold run (compile) and of a
//! warm one (disk hit, no compile), checked; a trace that cannot be written is one warning and
//! the run still succeeds.

use std::path::Path;

use sparkle::trace::check::{check, CheckedTrace};

use crate::command::text;

fn checked(path: &Path) -> CheckedTrace {
    let text = std::fs::read_to_string(path).expect("the trace file");
    check(&text).unwrap_or_else(|problem| panic!("the trace does not check: {problem}"))
}

#[test]
fn run_writes_the_timeline_of_a_cold_and_a_warm_run() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let (cold_path, warm_path) = (dir.path().join("cold.json"), dir.path().join("warm.json"));
    let cold = crate::sparkle(&["run", "saxpy", "5000", "--trace", cold_path.to_str().unwrap()], &cache);
    assert!(cold.status.success(), "{}", text(&cold));
    assert!(text(&cold).contains(&format!("trace: {}", cold_path.display())), "{}", text(&cold));
    let cold = checked(&cold_path);
    assert!(cold.named("compile").any(|e| e.arg_str("kernel").is_some_and(|k| k.starts_with("saxpy"))));
    assert!(cold.in_category("gpu").any(|e| e.ph == "X"), "the kernel on the GPU track");
    assert!(cold.gpu_in_windows >= 1 && cold.flows >= 2);

    // The same run again, through the variable this time: the program comes from the disk.
    let warm = crate::command::on_gl(
        env!("CARGO_BIN_EXE_sparkle"),
        &["run", "saxpy", "5000"],
        &cache,
        &[("SPARKLE_TRACE", warm_path.to_str().unwrap())],
    );
    assert!(warm.status.success(), "{}", text(&warm));
    let warm = checked(&warm_path);
    assert_eq!(warm.named("compile").count(), 0, "a warm run compiles nothing");
    assert!(warm.named("cache disk").any(|e| e.arg_str("result") == Some("hit")));
    assert!(warm.named("load program").next().is_some());
}

#[test]
fn a_trace_that_cannot_be_written_is_one_warning_and_the_run_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let nowhere = dir.path().join("no-such-folder").join("t.json");
    let mut targets = vec![nowhere.to_str().unwrap().to_owned()];
    // A full disk, where the machine has one to write to.
    if Path::new("/dev/full").exists() {
        targets.push("/dev/full".into());
    }
    for target in targets {
        let output = crate::sparkle(&["run", "saxpy", "5000", "--trace", &target], dir.path());
        assert!(output.status.success(), "{target}: {}", text(&output));
        assert!(text(&output).contains("result: correct"), "{}", text(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        let warnings =
            stderr.lines().filter(|line| line.contains("WARN") || line.contains("warning")).count();
        assert_eq!(warnings, 1, "{target}: one warning: {stderr}");
        assert!(stderr.contains("trace"), "{stderr}");
    }
}
