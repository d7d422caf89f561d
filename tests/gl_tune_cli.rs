//! `sparkle tune` and `sparkle bench` as users run them on the gl backend (llvmpipe in CI): a
//! tuned choice is stored in the GPU's cache folder and found by later processes without
//! tuning again unless `--force` asks; bench times the tuned variant and says so.

#![cfg(feature = "gl")]

#[path = "gl_support/cli.rs"]
mod gl_cli;

use std::process::Output;

use gl_cli::{sparkle, text};

fn rows(output: &Output) -> Vec<serde_json::Value> {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("JSON rows ({e}): {}", text(output)))
}

#[test]
fn tune_stores_a_choice_that_later_processes_reuse_until_forced() {
    let dir = tempfile::tempdir().unwrap();
    let first = sparkle(&["tune", "saxpy", "4000", "--json"], dir.path());
    assert!(first.status.success(), "{}", text(&first));
    let tuned = rows(&first);
    assert_eq!(tuned.len(), 1);
    assert_eq!(tuned[0]["problem"], "saxpy 4000");
    assert_eq!(tuned[0]["source"], "tuned");
    let variant = tuned[0]["variant"].as_str().unwrap().to_owned();
    assert!(tuned[0]["candidates"].as_u64().unwrap() > 1);

    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("tuning.json"))
        .filter(|p| p.exists())
        .collect();
    assert_eq!(files.len(), 1, "one tuning file, in the GPU's folder");
    let stored: serde_json::Value = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
    assert_eq!(stored["choices"]["saxpy 4000"]["variant"], variant.as_str());

    let again = sparkle(&["tune", "saxpy", "4000", "--json"], dir.path());
    assert!(again.status.success(), "{}", text(&again));
    let kept = rows(&again);
    assert_eq!(kept[0]["source"], "stored", "a stored choice is not tuned again");
    assert_eq!(kept[0]["variant"], variant.as_str());

    let forced = sparkle(&["tune", "saxpy", "4000", "--force", "--json"], dir.path());
    assert!(forced.status.success(), "{}", text(&forced));
    assert_eq!(rows(&forced)[0]["source"], "tuned");

    let usage = sparkle(&["tune", "nope"], dir.path());
    assert_eq!(usage.status.code(), Some(2), "{}", text(&usage));

    // `--transfers` tunes one batch of bench-pipeline's conv2d stage: five sizes, conv2d, and a
    // mode with device copies or mapped buffers (plain takes the plain problem's choice).
    for (args, why) in [
        (&["tune", "conv2d", "2", "4", "16", "16", "--transfers", "staged-in"][..], "five sizes"),
        (
            &["tune", "sgemm", "64", "64", "64", "64", "4", "--transfers", "staged"][..],
            "the kernel is conv2d",
        ),
        (&["tune", "conv2d", "2", "4", "16", "16", "4", "--transfers", "plain"][..], "leave --transfers out"),
        (&["tune", "conv2d", "2", "4", "16", "16", "4", "--transfers", "fast"][..], "staged-in and mapped"),
    ] {
        let refused = sparkle(args, dir.path());
        assert_eq!(refused.status.code(), Some(2), "{args:?}: {}", text(&refused));
        assert!(text(&refused).contains(why), "{args:?}: {}", text(&refused));
    }
}

#[test]
fn bench_reports_gpu_and_wall_time_and_the_variant_it_ran() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let output = sparkle(
        &["bench", "--quick", "--no-startup", "--json-out", json.to_str().unwrap()],
        &dir.path().join("cache"),
    );
    assert!(output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("timing sgemm"), "a progress line per step: {}", text(&output));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let throughput = report["throughput"].as_array().unwrap();
    assert_eq!(throughput.len(), 3);
    for row in throughput {
        assert_eq!(row["correct"], "yes", "{row}");
        assert!(row["wall_ms"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!(row["choice"], "default", "nothing was tuned in this cache");
        assert!(!row["variant"].as_str().unwrap().is_empty());
    }
    let saxpy = &throughput[0];
    assert!(saxpy["input_copies"].as_u64().unwrap() > 1, "a small memory-bound problem rotates its inputs");
}
