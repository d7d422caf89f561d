//! `sparkle-bench bench`, `bench-overhead` and `bench-transfer` as users run them: the overhead
//! measurement on this machine's GL device with a tiny loop (its structure and its check against
//! the CPU, never its timings), unknown backend names refused with the valid ones listed, a
//! piped bench's progress lines and chart, the peers' launch counts and ratios, the transfer
//! bench and its driver study, and bench timing the variant it ran.

use crate::command::text;
use crate::sparkle_bench;

#[test]
fn the_overhead_bench_reports_every_measurement_and_checks_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "bench-overhead",
        "--dispatches",
        "24",
        "--round-trips",
        "12",
        "--repeats",
        "1",
        "--elements",
        "300",
    ];
    let output = sparkle_bench(&[&args[..], &["--json"]].concat(), dir.path());
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["correct"], true, "{report:#}");
    assert_eq!(report["mismatches"].as_array().unwrap().len(), 0);
    assert_eq!(report["dispatches"], 24);
    assert_eq!(report["elements"], 300);
    let device = report["device"].as_str().unwrap();
    assert!(
        report["baseline_device"].as_str().unwrap().starts_with(device),
        "both sides on one device: {report:#}"
    );

    let positive = |value: &serde_json::Value| value.as_f64().is_some_and(|v| v.is_finite() && v > 0.0);
    let sides: Vec<&str> =
        report["dispatch"].as_array().unwrap().iter().map(|d| d["side"].as_str().unwrap()).collect();
    assert_eq!(
        sides,
        ["sparkle, one submission per dispatch", "sparkle, all in one submission", "plain glow loop"]
    );
    for cost in report["dispatch"].as_array().unwrap() {
        assert!(positive(&cost["issue_us"]) && positive(&cost["complete_us"]), "{cost}");
        assert!(cost["issue_us"].as_f64() <= cost["complete_us"].as_f64(), "issued before completed: {cost}");
    }
    let trip = &report["round_trip"];
    assert_eq!(trip["runs"], 12);
    assert!(positive(&trip["sparkle_median_us"]) && positive(&trip["plain_median_us"]), "{trip}");
    let ratio = trip["sparkle_median_us"].as_f64().unwrap() / trip["plain_median_us"].as_f64().unwrap();
    assert!((trip["ratio"].as_f64().unwrap() - ratio).abs() < 1e-9, "{trip}");
    assert!(positive(&trip["sparkle_waiting_median_us"]) && positive(&trip["waiting_ratio"]), "{trip}");
    // Each side's steps: the dispatch-read side has no separate wait, the others do.
    let steps = trip["steps"].as_array().unwrap();
    let step_sides: Vec<&str> = steps.iter().map(|s| s["side"].as_str().unwrap()).collect();
    assert_eq!(
        step_sides,
        [
            "sparkle: dispatch, read",
            "sparkle: dispatch, wait, read",
            "sparkle: dispatch, read (y in a staging buffer)",
            "plain glow loop"
        ]
    );
    assert!(
        positive(&trip["sparkle_staging_median_us"]) && positive(&trip["sparkle_staging_p90_us"]),
        "{trip}"
    );
    for step in steps {
        assert!(positive(&step["submit_us"]) && positive(&step["read_us"]), "{step}");
        assert!(step["wait_us"].as_f64().is_some_and(|w| w >= 0.0), "{step}");
    }
    assert!(steps[0]["wait_us"].as_f64().unwrap() < 1.0, "nothing between dispatch and read: {trip}");
    let switches = report["program_switch"].as_array().unwrap();
    assert_eq!(switches.len(), 2);
    for s in switches {
        let difference = s["two_programs_us"].as_f64().unwrap() - s["one_program_us"].as_f64().unwrap();
        assert!((s["per_switch_us"].as_f64().unwrap() - difference).abs() < 1e-9, "{s}");
    }

    // The table form says the same, and says the check passed; --json-out saves the report too.
    let saved = dir.path().join("overheads.json");
    let output = sparkle_bench(&[&args[..], &["--json-out", saved.to_str().unwrap()]].concat(), dir.path());
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("plain glow loop") && table.contains("correct: yes"), "{table}");
    let saved: serde_json::Value = serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
    assert_eq!(saved["correct"], true);
    assert_eq!(saved["round_trip"]["runs"], 12);

    // A loop too long for exact results, or too short to time, is a usage error.
    for bad in ["1", "600000"] {
        let output = sparkle_bench(&["bench-overhead", "--dispatches", bad], dir.path());
        assert_eq!(output.status.code(), Some(2), "{bad}: {}", text(&output));
    }
}

#[test]
fn unknown_backends_are_a_usage_error_that_lists_the_valid_names() {
    let dir = tempfile::tempdir().unwrap();
    let output = sparkle_bench(&["bench", "--no-startup", "--backends", "gl,vulkan"], dir.path());
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let message = text(&output);
    assert!(message.contains("`vulkan` is not a backend"), "{message}");
    assert!(
        message.contains("valid names are: ") && message.contains("gl") && message.contains("auto"),
        "{message}"
    );
    #[cfg(feature = "amdgpu-sim")]
    assert!(message.contains("amdgpu-sim"), "{message}");
    assert!(!message.contains("timing"), "nothing was measured first: {message}");
}

#[test]
fn a_piped_bench_prints_a_line_per_startup_run_and_draws_its_chart() {
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("bench.svg");
    let report = dir.path().join("bench.json");
    let output = sparkle_bench(
        &[
            "bench",
            "--quick",
            "--repeats",
            "1",
            "--chart",
            chart.to_str().unwrap(),
            "--json-out",
            report.to_str().unwrap(),
        ],
        &dir.path().join("cache"),
    );
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let steps: Vec<&str> =
        stderr.lines().filter(|l| l.contains("] startup ") && l.contains("/6: ")).collect();
    assert_eq!(steps.len(), 6, "one line per fresh-process run: {stderr}");
    let names = ["cold", "cold, driver cache inside", "driver cache", "warm", "warm, driver cold", "copied"];
    for (i, (line, name)) in steps.iter().zip(names).enumerate() {
        assert!(line.starts_with('[') && line.contains(" s] "), "elapsed time first: {line}");
        assert!(line.contains(&format!("startup {}/6: {name} (", i + 1)), "{line}");
    }

    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let svg = std::fs::read_to_string(&chart).unwrap().replace('\n', "");
    for scenario in report["scenarios"].as_array().unwrap() {
        let name = scenario["name"].as_str().unwrap();
        assert!(
            svg.contains(&format!(">{name}<")) || svg.contains(&format!("> {name} <")),
            "{name} in the chart"
        );
    }
    assert!(svg.contains("Sparkle gl"), "the throughput series is named");
}

/// A stand-in for `bench/scripts/peers.py` (no PyTorch here): echoes the arguments it was given in its
/// `method` and answers every problem with a back-to-back time of 2 ms and a wall time of 4 ms.
const FAKE_PEERS: &str = r#"
import json, sys
results = []
for arg in sys.argv[1:]:
    key = arg.rsplit("@", 1)[0]
    results.append({"key": key, "what": "fake", "ms": 2.0, "wall_ms": 4.0, "single_event_ms": 3.0,
                    "launches": int(arg.rsplit("/", 1)[1]), "input_copies": int(arg.rsplit("@", 1)[1].split("/")[0])})
print(json.dumps({"device": "fake", "torch": "0", "method": "|".join(sys.argv[1:]), "results": results}))
"#;

#[test]
fn peers_get_our_launch_count_and_input_copies_and_both_ratios_are_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("peers.py");
    std::fs::write(&script, FAKE_PEERS).unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_sparkle-bench"))
        .args(["bench", "--quick", "--no-startup", "--peers", "--json"])
        .env("SPARKLE_CACHE_DIR", dir.path().join("cache"))
        .env("SPARKLE_BACKEND", "gl")
        .env("SPARKLE_PEERS_SCRIPT", &script)
        .output()
        .expect("the sparkle-bench binary runs");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    for side in ["sparkle", "peer", "ratio", "wall_ratio"] {
        assert!(report["method"][side].as_str().is_some_and(|m| !m.is_empty()), "{side}: {report:#}");
    }
    assert!(report["method"]["peer"].as_str().unwrap().contains("back-to-back"));
    let given = report["peers"]["method"].as_str().unwrap().to_owned();
    let rows = report["throughput"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{report:#}");
    for row in rows {
        let (key, copies, launches) = (
            row["key"].as_str().unwrap(),
            row["input_copies"].as_u64().unwrap(),
            row["launches"].as_u64().unwrap(),
        );
        assert!(launches >= 1, "{row}");
        assert!(given.split('|').any(|arg| arg == format!("{key}@{copies}/{launches}")), "{given} / {row}");
        let timed = match row["timer"].as_str().unwrap() {
            "gpu back-to-back" => row["gpu_back_to_back_ms"].as_f64().unwrap(),
            "gpu" => row["gpu_ms"].as_f64().unwrap(),
            "wall" => row["wall_ms"].as_f64().unwrap(),
            other => panic!("unknown timer {other}"),
        };
        let peer = &row["peer"];
        assert_eq!(peer["what"], "fake", "{row}");
        assert!((peer["ratio"].as_f64().unwrap() - 2.0 / timed).abs() < 1e-9 * (2.0 / timed), "{row}");
        let wall = row["wall_ms"].as_f64().unwrap();
        assert!((peer["wall_ratio"].as_f64().unwrap() - 4.0 / wall).abs() < 1e-9 * (4.0 / wall), "{row}");
    }
    let saxpy = rows.iter().find(|r| r["key"].as_str().unwrap().starts_with("saxpy")).unwrap();
    assert!(saxpy["input_copies"].as_u64().unwrap() > 1, "a problem that fits in cache is rotated: {saxpy}");
}

#[test]
fn the_transfer_bench_moves_every_size_each_way_and_checks_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    // One size below the staging ring's threshold and one through it (5 MB: a ragged last chunk).
    let args = ["bench-transfer", "--size", "4096", "--size", "5000000", "--json"];
    let output = sparkle_bench(&args, dir.path());
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["correct"], true, "{report:#}");
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.iter().map(|r| r["bytes"].as_u64().unwrap()).collect::<Vec<_>>(), [4096, 5_000_000]);
    for row in rows {
        for way in ["plain_up_gbps", "plain_down_gbps", "staged_up_gbps", "staged_down_gbps"] {
            let speed = row[way].as_f64().unwrap();
            assert!(speed.is_finite() && speed > 0.0, "{way}: {row:#}");
        }
    }
    let zero = sparkle_bench(&["bench-transfer", "--size", "0"], dir.path());
    assert_eq!(zero.status.code(), Some(2), "a zero size is a usage error: {}", text(&zero));
}

/// The driver study runs each of its parts, the copy beside kernels among them (on a second
/// context of its own), the round trips watched through a mapping and the copies made by
/// kernels on one context, and fails when the kernels it timed did not all run.
#[test]
fn the_driver_study_times_a_copy_beside_kernels_on_a_second_context() {
    let dir = tempfile::tempdir().unwrap();
    let output = sparkle_bench(&["bench-transfer", "--size", "4096", "--study"], dir.path());
    let printed = text(&output);
    assert_eq!(output.status.code(), Some(0), "{printed}");
    let at =
        printed.find("a device copy beside kernels").unwrap_or_else(|| panic!("no overlap part: {printed}"));
    let ways = ["kernels alone", "copy alone", "kernels, then the copy, on one context", "at once"];
    let lines: Vec<&str> = printed[at..].lines().skip(1).take(ways.len()).collect();
    assert_eq!(lines.len(), ways.len(), "a line per way: {printed}");
    for (way, line) in ways.iter().zip(lines) {
        assert!(line.contains(way), "{way}: {line}");
        let times: Vec<f64> =
            line.split_whitespace().filter_map(|word| word.parse().ok()).filter(|t: &f64| *t > 0.0).collect();
        assert_eq!(times.len(), 2, "a 10th percentile and a median: {line}");
    }
    // Round trips watched through the mapping: every row saw its result, with every word of `y`
    // written by then.
    let at = printed.find("watching for the result").unwrap_or_else(|| panic!("no watched part: {printed}"));
    let rows: Vec<&str> = printed[at..].lines().skip(1).take_while(|line| line.contains(" B, ")).collect();
    assert_eq!(rows.len(), 6, "two sizes, three ways: {printed}");
    for row in rows {
        assert!(row.contains("stale 0") && row.contains("unseen 0"), "{row}");
    }
    // Round trips waited for with glFinish and with a fence flushed by the first poll.
    for way in ["y mapped, glFinish, memcpy", "y mapped, fence, poll with flush bit, memcpy"] {
        assert!(printed.contains(way), "no round trip `{way}`: {printed}");
    }
    // Copies made by kernels beside a kernel on one context: a time per way; the study checks
    // every copied word and the kernel's result itself, and fails otherwise.
    let at = printed
        .find("copy kernels beside a kernel on one context")
        .unwrap_or_else(|| panic!("no one-context copy part: {printed}"));
    let lines: Vec<&str> = printed[at..].lines().skip(1).take_while(|line| line.starts_with("  ")).collect();
    assert_eq!(lines.len(), 9, "a line per way: {printed}");
    for line in lines {
        let times: Vec<f64> =
            line.split_whitespace().filter_map(|word| word.parse().ok()).filter(|t: &f64| *t > 0.0).collect();
        assert_eq!(times.len(), 2, "a 10th percentile and a median: {line}");
    }
}

#[test]
fn bench_reports_gpu_and_wall_time_and_the_variant_it_ran() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let output = sparkle_bench(
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
