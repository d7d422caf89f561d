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
        &["bench-fleet", "--repeats", "1", "--latencies", "0", "--json", "--remote", &redis.url()],
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
    let over = report["over_ms"].as_array().unwrap();
    assert!(over.iter().any(|row| row[0] == "cold, hung remote - cold"), "{report}");
    let fresh = &scenarios[2];
    assert_eq!(
        (fresh["compiles"][0].as_u64(), fresh["remote_hits"][0].as_u64()),
        (Some(0), Some(3)),
        "{report}"
    );
    assert!(scenarios.iter().all(|s| s["correct"] == true), "{report}");
    assert!(report["method"].as_str().unwrap().contains("fresh processes"));
}
