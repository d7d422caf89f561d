//! `sparkle-bench bench-pipeline` as users run it on the gl backend: every transfer mode checked
//! and each stage reported, each row in a process of its own unless asked for one process, and a
//! row's usage error passed on as the command's.

use crate::command::text;
use crate::sparkle_bench_with;

#[test]
fn bench_pipeline_checks_every_transfer_mode_and_reports_each_stage() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "bench-pipeline",
        "--shape",
        "3,2,8,8,2",
        "--batches",
        "4",
        "--repeats",
        "1",
        "--warmup-ms",
        "0",
        "--json",
    ];
    let output = sparkle_bench_with(&args, dir.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let rows = report["rows"].as_array().unwrap();
    let modes: Vec<&str> = rows.iter().map(|row| row["transfers"].as_str().unwrap()).collect();
    assert_eq!(modes, ["plain", "staged", "staged-in", "mapped"]);
    // Whether freed host memory stays in the process is part of what was measured.
    let details = report["details"].as_array().unwrap();
    let host_memory = details.iter().find(|pair| pair[0] == "host memory").expect("a host memory detail");
    if cfg!(all(target_os = "linux", target_env = "gnu")) {
        assert!(host_memory[1].as_str().unwrap().starts_with("freed blocks kept"), "{host_memory}");
    }
    // Each row in a process of its own, so that no row inherits what an earlier one left behind.
    let mut processes: Vec<u64> = rows.iter().map(|row| row["process_id"].as_u64().unwrap()).collect();
    processes.sort_unstable();
    processes.dedup();
    assert_eq!(processes.len(), rows.len(), "{processes:?}");
    for row in rows {
        assert_eq!(row["correct"], "yes", "{row}");
        // Untuned: the device's default for the largest batch, named as `sparkle tune` names it.
        let kernel = row["kernel"].as_str().unwrap();
        assert!(kernel.contains(" t") && kernel.contains(" v"), "{row}");
        for stage in ["upload_ms", "gpu_ms", "download_ms", "synchronous_ms", "pipelined_ms"] {
            let ms = row[stage].as_f64().unwrap();
            assert!(ms.is_finite() && ms > 0.0, "{stage} in {row}");
        }
        let slowest = row["slowest_stage_ms"].as_f64().unwrap();
        let sum = row["sum_of_stages_ms"].as_f64().unwrap();
        assert!(slowest <= sum, "{row}");
    }

    let output = sparkle_bench_with(&["bench-pipeline", "--batches", "0"], dir.path(), &[]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
}

#[test]
fn bench_pipeline_runs_every_row_in_one_process_when_asked_and_passes_on_a_rows_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["bench-pipeline", "--shape", "2,2,8,8,2", "--batches", "3", "--repeats", "1"];
    args.extend(["--warmup-ms", "0", "--transfers", "plain", "--transfers", "staged", "--json"]);
    let output = sparkle_bench_with(&[&args[..], &["--one-process"]].concat(), dir.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{report}");
    assert_eq!(rows[0]["process_id"], rows[1]["process_id"], "{report}");
    for row in rows {
        assert_eq!(row["correct"], "yes", "{row}");
        // The plain row's synchronous path over each row's pipelined time.
        let gain = row["over_plain_synchronous"].as_f64().unwrap();
        let expected = rows[0]["synchronous_ms"].as_f64().unwrap() / row["pipelined_ms"].as_f64().unwrap();
        assert!((gain - expected).abs() <= 1e-9 * expected, "{row}");
    }

    // A shape the device cannot bind is refused by the row's process, and so by the command.
    let args = [
        "bench-pipeline",
        "--shape",
        "100000,64,512,512,64",
        "--transfers",
        "plain",
        "--transfers",
        "staged",
    ];
    let output = sparkle_bench_with(&args, dir.path(), &[]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("more than a kernel may bind"), "{}", text(&output));
}

#[test]
fn bench_pipeline_writes_a_trace_that_timeline_draws() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("pipe.json");
    let svg = dir.path().join("pipe.svg");
    let mut args = vec!["bench-pipeline", "--shape", "2,2,8,8,2", "--batches", "3", "--repeats", "1"];
    args.extend(["--warmup-ms", "0", "--transfers", "plain", "--transfers", "staged"]);
    args.extend(["--trace", trace.to_str().unwrap()]);
    let output = sparkle_bench_with(&args, dir.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(text(&output).contains("trace: "), "{}", text(&output));
    let checked = sparkle::trace::check::check(&std::fs::read_to_string(&trace).unwrap())
        .unwrap_or_else(|problem| panic!("the trace does not check: {problem}"));
    // Both rows in this one process: the pipelined and the synchronous path of each.
    assert!(checked.named("batch in").count() >= 6 && checked.named("serial batch").count() >= 6);
    assert!(checked.in_category("gpu").any(|e| e.ph == "X"));

    let output =
        sparkle_bench_with(&["timeline", trace.to_str().unwrap(), svg.to_str().unwrap()], dir.path(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let drawn = std::fs::read_to_string(&svg).unwrap();
    assert!(
        drawn.starts_with("<svg")
            && drawn.contains("Timeline of pipe.json")
            && drawn.contains("sparkle-gl")
            && drawn.contains("GPU "),
        "{drawn:.300}"
    );

    // Not a trace: a usage error, nothing drawn.
    let output =
        sparkle_bench_with(&["timeline", svg.to_str().unwrap(), svg.to_str().unwrap()], dir.path(), &[]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
}
