//! `sparkle-bench bench-placement` on llvmpipe and the simulator: every device alone and the
//! placement over both run the whole stream with right results, and the table says each
//! shape's choice, the stream's passes, what learning cost and, with `--breakdown`, where the
//! placement's time goes. (Its figures are not asserted: they are timings.)

use std::process::Command;

#[test]
fn bench_placement_runs_the_stream_on_each_device_and_on_the_placement() {
    let output = Command::new(env!("CARGO_BIN_EXE_sparkle-bench"))
        .args([
            "bench-placement",
            "--devices",
            "gl,amdgpu-sim",
            "--repeats",
            "1",
            "--breakdown",
            "--learning-log",
        ])
        .output()
        .unwrap();
    let out =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{out}");
    for part in [
        "placement over gl, amdgpu-sim",
        "saxpy n=256",
        "sgemm 64x64x64",
        "conv2d",
        "stream (median pass)",
        "within 5% of the best",
        "pass by pass",
        "learning:",
        "the placement's own decision + learning",
        "right after a run of",
        "learning pass  1  saxpy n=256",
    ] {
        assert!(out.contains(part), "`{part}` missing:\n{out}");
    }
}
