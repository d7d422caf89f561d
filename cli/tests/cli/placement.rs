//! `sparkle run … --explain` on llvmpipe and the simulator (`SPARKLE_DEVICES=gl,amdgpu-sim`):
//! it says each device's prediction and the choice, runs the problem where it chose with a
//! right result, keeps what it measured for the next process, and `sparkle cache clear`
//! forgets it. An unknown device is named with the devices found; EGL devices are named by
//! index (`gl:0`, `gl:1`).

use std::process::{Command, Output};

fn sparkle(args: &[&str], cache: &std::path::Path, devices: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sparkle"))
        .args(args)
        .env("SPARKLE_CACHE_DIR", cache)
        .env("SPARKLE_DEVICES", devices)
        .output()
        .unwrap()
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

#[test]
fn run_explain_places_learns_across_processes_and_cache_clear_forgets() {
    let cache = tempfile::tempdir().unwrap();
    let devices = "gl,amdgpu-sim";
    let args = ["run", "saxpy", "1000", "--explain"];
    let first = sparkle(&args, cache.path(), devices);
    let out = text(&first);
    assert!(first.status.success(), "{out}");
    for part in
        ["placed among gl, amdgpu-sim", "* gl", "amdgpu-sim   predicted", "choice: gl", "result: correct"]
    {
        assert!(out.contains(part), "`{part}` missing:\n{out}");
    }
    assert!(out.contains("no samples"), "{out}");
    let mut last = String::new();
    for _ in 0..3 {
        let output = sparkle(&args, cache.path(), devices);
        last = text(&output);
        assert!(output.status.success() && last.contains("result: correct"), "{last}");
    }
    // Later processes read what earlier ones measured.
    assert!(last.contains("sample(s)"), "{last}");
    let history = cache.path().join("placement");
    assert_eq!(std::fs::read_dir(&history).unwrap().count(), 1);

    let cleared = Command::new(env!("CARGO_BIN_EXE_sparkle"))
        .args(["cache", "clear"])
        .env("SPARKLE_CACHE_DIR", cache.path())
        .output()
        .unwrap();
    assert!(cleared.status.success(), "{}", text(&cleared));
    assert!(!history.exists());
    let after = text(&sparkle(&args, cache.path(), devices));
    assert!(after.contains("no samples") && !after.contains("sample(s)"), "{after}");
}

#[test]
fn run_explain_names_an_unknown_device_and_those_found() {
    let cache = tempfile::tempdir().unwrap();
    let output = sparkle(&["run", "saxpy", "100", "--explain"], cache.path(), "gl,vulkan");
    let out = text(&output);
    assert!(!output.status.success(), "{out}");
    assert!(out.contains("`vulkan`") && out.contains("devices found here") && out.contains("gl"), "{out}");
}

#[test]
fn run_explain_places_over_egl_devices_named_by_index() {
    let cache = tempfile::tempdir().unwrap();
    let output = sparkle(&["run", "saxpy", "1000", "--explain"], cache.path(), "gl:0,amdgpu-sim");
    let out = text(&output);
    assert!(output.status.success(), "{out}");
    assert!(out.contains("placed among gl:0, amdgpu-sim") && out.contains("result: correct"), "{out}");
    // A second EGL device: placed over where EGL lists one, named with the devices found where
    // it does not.
    let output = sparkle(&["run", "saxpy", "1000", "--explain"], cache.path(), "gl:0,gl:1");
    let out = text(&output);
    if output.status.success() {
        assert!(out.contains("placed among gl:0, gl:1") && out.contains("result: correct"), "{out}");
    } else {
        assert!(out.contains("`gl:1`") && out.contains("names no EGL device"), "{out}");
    }
}
