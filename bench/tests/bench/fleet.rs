//! `sparkle-bench bench-fleet` against a real Redis started on 127.0.0.1: every scenario is
//! measured (whole processes, their exit included), and a fresh machine with a warm remote
//! compiles nothing.

use crate::command::text;
use crate::sparkle_bench_with;

#[test]
fn bench_fleet_measures_every_scenario_and_a_fresh_machine_hits() {
    let Some(redis) = crate::remote_support::redis_or_skip() else { return };
    let dir = tempfile::tempdir().unwrap();
    let output = sparkle_bench_with(
        &["bench-fleet", "--repeats", "2", "--latencies", "0", "--json", "--remote", &redis.url()],
        dir.path(),
        // The measured processes inherit it: hits must not depend on how loaded the machine is.
        &[("SPARKLE_CACHE_REMOTE_BUDGET_MS", "20000"), ("SPARKLE_LOG", "info"), ("NO_COLOR", "1")],
    );
    assert!(output.status.success(), "{}", text(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let scenarios = report["scenarios"].as_array().unwrap();
    let names: Vec<&str> = scenarios.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "cold",
            "warm",
            "fresh, remote warm (+0 ms)",
            "cold, hung remote",
            "warm, hung remote",
            "cold, dead remote",
            "warm, dead remote"
        ],
        "{report}"
    );
    // Whole processes are timed, their exit included, and a hung remote's cost is reported.
    assert!(
        scenarios.iter().all(|s| s["median_process_ms"]
            .as_f64()
            .is_some_and(|ms| ms >= s["median_ms"].as_f64().unwrap())),
        "{report}"
    );
    // A remote's cost is the median of the repetitions' differences with its twin.
    let over = report["over_ms"].as_array().unwrap();
    let reported = over.iter().find(|row| row[0] == "cold, hung remote - cold").map(|row| row[1].as_f64());
    let runs = |name: &str| -> Vec<f64> {
        let scenario = scenarios.iter().find(|s| s["name"] == name).unwrap();
        scenario["process_ms"].as_array().unwrap().iter().map(|ms| ms.as_f64().unwrap()).collect()
    };
    let mut differences: Vec<f64> =
        runs("cold, hung remote").iter().zip(runs("cold")).map(|(hung, cold)| hung - cold).collect();
    assert_eq!(differences.len(), 2, "{report}");
    differences.sort_by(f64::total_cmp);
    assert_eq!(reported, Some(Some(differences[1])), "{report}");
    let fresh = &scenarios[2];
    assert_eq!(
        (fresh["compiles"][0].as_u64(), fresh["remote_hits"][0].as_u64()),
        (Some(0), Some(3)),
        "{report}"
    );
    assert!(scenarios.iter().all(|s| s["correct"] == true), "{report}");
    assert!(report["method"].as_str().unwrap().contains("fresh processes"));
}

/// `bench-fleet --together`: real processes started at once against a cold remote, each a new
/// machine. Every process must have run and reported (a scenario that ran none, or lost some,
/// has fewer compiles than kernels or fewer children), and the report must carry the summary.
#[test]
fn bench_fleet_together_runs_processes_at_once_and_counts_compiles() {
    let Some(redis) = crate::remote_support::redis_or_skip() else { return };
    let dir = tempfile::tempdir().unwrap();
    let json_out = dir.path().join("together.json");
    let output = sparkle_bench_with(
        &[
            "bench-fleet",
            "--together",
            "4",
            "--rounds",
            "1",
            "--remote",
            &redis.url(),
            "--json-out",
            json_out.to_str().unwrap(),
        ],
        dir.path(),
        &[("SPARKLE_LOG", "info"), ("NO_COLOR", "1")],
    );
    assert!(output.status.success(), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("compiles per round: min/median/max"), "{}", text(&output));
    assert!(stdout.contains("rounds within <= 4"), "{}", text(&output));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json_out).unwrap()).unwrap();
    assert_eq!(report["store"], "redis", "{report}");
    let rounds = report["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 1, "{report}");
    let round = &rounds[0];
    assert_eq!(round["children"].as_u64(), Some(4), "{report}");
    assert_eq!(round["correct"], true, "{report}");
    assert!(round["failures"].as_array().unwrap().is_empty(), "{report}");
    let per_child: Vec<u64> =
        round["compiles_per_child"].as_array().unwrap().iter().map(|c| c.as_u64().unwrap()).collect();
    assert_eq!(per_child.len(), 4, "{report}");
    let compiles = round["compiles"].as_u64().unwrap();
    assert_eq!(compiles, per_child.iter().sum::<u64>(), "{report}");
    // The suite's 3 kernels: someone compiled each at least once, and no more than every process.
    assert!((3..=4 * 3).contains(&compiles), "{report}");
    let hits = round["remote_hits"].as_u64().unwrap();
    // Every process got every program from somewhere: its own compile or the remote.
    assert_eq!(compiles + hits, 4 * 3, "{report}");
    let process_ms = round["process_ms"].as_array().unwrap();
    assert_eq!(process_ms.len(), 4, "{report}");
    assert!(process_ms.iter().all(|ms| ms.as_f64().is_some_and(|ms| ms > 0.0)), "{report}");
    let summary = &report["summary"];
    for field in
        ["compiles_min", "compiles_median", "compiles_max", "rounds_within_target", "target_compiles"]
    {
        assert!(summary[field].is_u64(), "{field}: {report}");
    }
    assert_eq!(summary["kernels"].as_u64(), Some(3), "{report}");
    assert_eq!(summary["compiles_max"].as_u64(), Some(compiles), "{report}");
    assert_eq!(summary["all_correct"], true, "{report}");
}
