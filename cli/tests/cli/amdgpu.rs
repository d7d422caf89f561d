//! `sparkle info` and the amdgpu backend on a machine without a usable AMD card: asking for
//! amdgpu fails (exit 1) saying what discovery found and why amdgpu cannot run, a forced node
//! that is not an amdgpu render node is named, and `auto` passes amdgpu over for gl.

use std::process::{Command, Output};

use sparkle::amdgpu::{AmdgpuDevice, AmdgpuError};

fn sparkle(args: &[&str], env: &[(&str, &str)]) -> Output {
    let cache = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_sparkle"));
    command.args(args).env("SPARKLE_CACHE_DIR", cache.path()).env_remove("SPARKLE_AMDGPU_NODE");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("the sparkle binary runs")
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// Why no amdgpu device opens here, or `None` where one does (then these tests check nothing).
/// The reason is the amdgpu layer's own message (discovery's, when no usable node is found), as
/// `sparkle info` shows it.
fn no_amdgpu() -> Option<String> {
    match AmdgpuDevice::open() {
        Ok(_) => {
            eprintln!("skipping: an amdgpu device opens here");
            None
        }
        Err(err) => Some(err.detail::<AmdgpuError>().map_or_else(|| err.to_string(), ToString::to_string)),
    }
}

#[test]
fn info_says_why_amdgpu_cannot_run() {
    let Some(reason) = no_amdgpu() else { return };
    let output = sparkle(&["info"], &[("SPARKLE_BACKEND", "amdgpu")]);
    let text = text(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("backend `amdgpu` cannot run here"), "{text}");
    assert!(text.contains(&reason), "the discovery error ({reason}) is shown: {text}");
    assert!(text.contains("Selected: none"), "{text}");
}

#[test]
fn a_forced_node_that_is_not_amdgpu_is_named() {
    if no_amdgpu().is_none() {
        return;
    }
    let output = sparkle(&["info"], &[("SPARKLE_BACKEND", "amdgpu"), ("SPARKLE_AMDGPU_NODE", "/dev/null")]);
    let text = text(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("SPARKLE_AMDGPU_NODE") && text.contains("/dev/null"), "{text}");
}

#[cfg(feature = "gl")]
#[test]
fn auto_passes_amdgpu_over_for_gl() {
    if no_amdgpu().is_none() {
        return;
    }
    let output = sparkle(&["info"], &[("SPARKLE_BACKEND", "auto")]);
    let text = text(&output);
    if text.contains("Selected: none") {
        eprintln!("skipping: no GL context either\n{text}");
        return;
    }
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(text.contains("Selected (gl)"), "{text}");
    let amdgpu_line = text.lines().find(|l| l.trim_start().starts_with("amdgpu")).unwrap_or_default();
    assert!(amdgpu_line.contains("unavailable"), "{text}");
}
