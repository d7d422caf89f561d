//! The `sparkle` command as users run it: exit codes that tell usage errors (2) from failures (1)
//! and wrong results (3), sizes checked against the device before anything is allocated, `info`
//! failing when the selected backend cannot open and saying each warning once, and many fresh
//! processes exiting cleanly with GL work just finished.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use crate::command::{on_gl, text};

fn sparkle(args: &[&str], cache: &Path, env: &[(&str, &str)]) -> Output {
    on_gl(env!("CARGO_BIN_EXE_sparkle"), args, cache, env)
}

#[test]
fn impossible_sizes_are_usage_errors_found_before_any_allocation() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let output = sparkle(&["run", "saxpy", "4294967297"], dir.path(), &[]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("does not fit"), "{}", text(&output));
    assert!(started.elapsed() < Duration::from_secs(30), "no 17 GB of inputs were built first");

    let output = sparkle(&["run", "sgemm", "100000", "100000"], dir.path(), &[]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("more than a kernel may bind"), "{}", text(&output));

    for args in [&["run", "saxpy", "0"][..], &["run", "nope"], &["run"], &["bogus"]] {
        let output = sparkle(args, dir.path(), &[]);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {}", text(&output));
    }
}

#[test]
fn info_fails_when_the_selected_backend_cannot_open() {
    let dir = tempfile::tempdir().unwrap();
    let output = sparkle(&["info"], dir.path(), &[("SPARKLE_EGL_DEVICE", "99")]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(text(&output).contains("Selected: none"), "{}", text(&output));

    let output = sparkle(&["info"], dir.path(), &[("SPARKLE_BACKEND", "vulkan")]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(text(&output).contains("valid values are:") && text(&output).contains("gl"), "{}", text(&output));

    let output = sparkle(&["info", "--json"], dir.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["selected"]["backend"], "gl");
}

#[test]
fn info_says_each_warning_once() {
    let dir = tempfile::tempdir().unwrap();
    let output = sparkle(&["info"], dir.path(), &[("MESA_SHADER_CACHE_DISABLE", "true")]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !text(&output).contains("vendor: Mesa") {
        eprintln!("skipped: needs Mesa's GL driver");
        return;
    }
    assert_eq!(stderr.matches("no program binary formats").count(), 1, "{stderr}");
}

#[test]
fn fresh_processes_exit_cleanly_right_after_gl_work() {
    let dir = tempfile::tempdir().unwrap();
    for run in 0..20 {
        let output = sparkle(&["run", "saxpy", "1000"], dir.path(), &[]);
        // A crash during exit shows as a signal: no exit code at all.
        assert_eq!(output.status.code(), Some(0), "run {run}: {:?}\n{}", output.status, text(&output));
        assert!(text(&output).contains("result: correct"), "{}", text(&output));
    }
}

#[test]
fn run_checks_every_output_of_a_small_problem_and_says_how_many_of_a_large_one() {
    let dir = tempfile::tempdir().unwrap();
    let output = sparkle(&["run", "saxpy", "1000"], dir.path(), &[]);
    assert!(text(&output).contains("result: correct (1000 values"), "{}", text(&output));
    assert!(!text(&output).contains("checked against the CPU:"), "{}", text(&output));

    let output = sparkle(&["run", "saxpy", "300001"], dir.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(text(&output).contains("checked against the CPU: 200000 of 300001 outputs"), "{}", text(&output));
    assert!(text(&output).contains("result: correct (200000 values"), "{}", text(&output));
}

#[test]
fn version_names_the_backends_and_features_of_the_build() {
    let dir = tempfile::tempdir().unwrap();
    let output = sparkle(&["--version"], dir.path(), &[]);
    assert!(output.status.success(), "{}", text(&output));
    let version = String::from_utf8_lossy(&output.stdout);
    assert!(version.contains(env!("CARGO_PKG_VERSION")) && version.contains("backends: "), "{version}");
    assert!(version.contains("gl"), "{version}");
    assert_eq!(version.contains("remote"), cfg!(feature = "remote"), "{version}");
}

#[test]
fn logs_carry_no_colour_codes_when_piped_and_backend_reasons_repeat_no_word() {
    let dir = tempfile::tempdir().unwrap();
    // stderr is a pipe here: warnings and info lines come without escape codes.
    let output = sparkle(&["info"], dir.path(), &[("SPARKLE_LOG", "info")]);
    let all = text(&output);
    assert!(all.contains("INFO"), "{all}");
    assert!(!all.contains('\u{1b}'), "escape codes in a piped log: {all:?}");
    for line in all.lines().filter(|line| line.contains("unavailable:")) {
        assert_eq!(line.matches("unavailable").count(), 1, "a word repeated: {line}");
    }
}

#[test]
fn holding_the_gpu_clocks_is_done_or_refused_in_words_never_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let unheld = sparkle(&["info"], dir.path(), &[("SPARKLE_HOLD_CLOCKS", "0")]);
    let unheld_text = text(&unheld);
    assert_eq!(unheld.status.code(), Some(0), "{unheld_text}");
    assert!(unheld_text.contains("GPU clocks: the driver's"), "{unheld_text}");
    let renderer =
        unheld_text.lines().find(|line| line.trim_start().starts_with("renderer:")).unwrap_or_default();
    let cpu_renderer = renderer.contains("llvmpipe");

    let asked = sparkle(&["info"], dir.path(), &[("SPARKLE_HOLD_CLOCKS", "1")]);
    let asked_text = text(&asked);
    if asked.status.code() == Some(0) {
        assert!(!cpu_renderer, "a CPU renderer has no clocks to hold: {}", asked_text);
        assert!(asked_text.contains("GPU clocks: held at the top through a CUDA context"), "{}", asked_text);
    } else {
        assert_eq!(asked.status.code(), Some(1), "{}", asked_text);
        assert!(asked_text.contains("Selected: none"), "{}", asked_text);
        assert!(asked_text.contains("SPARKLE_HOLD_CLOCKS"), "{}", asked_text);
        if cpu_renderer {
            assert!(asked_text.contains("llvmpipe") && asked_text.contains("unset it"), "{}", asked_text);
        }
    }

    let misspelt = sparkle(&["info"], dir.path(), &[("SPARKLE_HOLD_CLOCKS", "max")]);
    assert_eq!(misspelt.status.code(), Some(1), "{}", text(&misspelt));
    assert!(text(&misspelt).contains(r#"SPARKLE_HOLD_CLOCKS="max" is neither"#), "{}", text(&misspelt));
}

#[test]
fn info_timings_reports_the_open_and_its_steps_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let output = sparkle(&["info", "--timings", "--json"], dir.path(), &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("a JSON report");
    assert_eq!(report["backend"], "gl");
    let open_ms = report["open_ms"].as_f64().unwrap();
    assert!(open_ms > 0.0 && report["since_start_ms"].as_f64().unwrap() >= open_ms);
    let phases = report["phases"].as_array().unwrap();
    let named = |name: &str| {
        phases
            .iter()
            .find(|p| p["name"].as_str().is_some_and(|n| n.starts_with(name)))
            .unwrap_or_else(|| panic!("no step {name:?} in {phases:?}"))
    };
    // The context's steps, on the GL thread, inside the open and in the order they happen.
    let steps = [
        "list the EGL devices",
        "initialize the EGL display",
        "create the GL context",
        "make the context current",
        "probe the device",
    ];
    let mut last_start = 0.0;
    for step in steps {
        let phase = named(step);
        assert_eq!(phase["thread"], "sparkle-gl", "{step}");
        let (start, ms) = (phase["start_ms"].as_f64().unwrap(), phase["ms"].as_f64().unwrap());
        assert!(start >= last_start && start + ms <= open_ms + 0.01, "{step}: {phase}");
        last_start = start;
    }
    assert_eq!(named("open the program cache")["thread"], "main");
    assert!(named("open backend (gl)")["ms"].as_f64().unwrap() <= open_ms);
    // Not part of opening: the fence thread starts when first needed.
    assert!(phases.iter().all(|p| !p["name"].as_str().unwrap().contains("fence thread")));
    let text = sparkle(&["info", "--timings"], dir.path(), &[]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("make the context current"));
}
