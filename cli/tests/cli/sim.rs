//! `sparkle info` on the simulated GPU (`SPARKLE_BACKEND=amdgpu-sim`): it says what it is. (The
//! backend on the simulator: the library's `sim` tests.)

use std::process::Command;

#[test]
fn info_says_it_is_a_simulator() {
    let output = Command::new(env!("CARGO_BIN_EXE_sparkle"))
        .arg("info")
        .env("SPARKLE_BACKEND", "amdgpu-sim")
        .env("SPARKLE_CACHE_DIR", tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("Selected (amdgpu-sim)") && stdout.contains("simulated gfx1100"), "{stdout}");
}
