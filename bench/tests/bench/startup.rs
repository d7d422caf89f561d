//! `sparkle-bench bench-startup`: fresh processes from `main`, the plain EGL open beside them,
//! generated kernels checked against the CPU, and compiles only where the cache is cold.

#[test]
fn bench_startup_times_fresh_processes_and_compiles_only_when_cold() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("startup.json");
    let output = crate::sparkle_bench(
        &[
            "bench-startup",
            "--kernels",
            "3",
            "--repeats",
            "1",
            "--no-fleet",
            "--compile-threads",
            "2",
            "--together",
            "3",
            "--json-out",
            report.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("plain EGL open") && text.contains("The open's steps"), "{text}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let scenario = |name: &str| {
        report["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no scenario {name}"))
            .clone()
    };
    let run = |name: &str| scenario(name)["runs"][0].clone();
    for name in ["cold", "warm", "cold, 2 at once"] {
        let run = run(name);
        assert_eq!(run["correct"], true, "{name}: {}", run["problems"]);
        assert!(run["open_ms"].as_f64().unwrap() > 0.0);
        let (suite, done) =
            (run["suite_since_main_ms"].as_f64().unwrap(), run["done_since_main_ms"].as_f64().unwrap());
        assert!(run["open_since_main_ms"].as_f64().unwrap() <= suite && suite <= done, "{name}: {run}");
    }
    // The suite's three kernels and the three generated ones.
    assert_eq!(run("cold")["compiles"], 6);
    assert_eq!(run("cold, 2 at once")["compiles"], 6);
    assert_eq!(run("warm")["compiles"], 0);
    assert!(run("plain EGL open")["open_ms"].as_f64().unwrap() > 0.0);
    // Three processes on one folder compile each program once between them; on a folder each,
    // each compiles all six.
    let compiles = |name: &str| -> Vec<u64> {
        scenario(name)["runs"].as_array().unwrap().iter().map(|r| r["compiles"].as_u64().unwrap()).collect()
    };
    // (At most 1.2 times: a process may give up waiting on a machine under heavy load.)
    assert!((6..=7).contains(&compiles("3 together, one folder").iter().sum::<u64>()));
    assert_eq!(compiles("3 together, a folder each"), [6, 6, 6]);
    assert!(scenario("3 together, one folder")["runs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["correct"] == true));
    assert!(text.contains("3 together, one folder, N = 3 (+ the suite's 3): compiles per round"), "{text}");
    assert!(run("warm")["phases"].as_array().unwrap().iter().any(|p| p[0] == "make the context current"));
}

#[test]
fn bench_compile_contexts_builds_on_each_context_and_loads_every_binary_back() {
    let dir = tempfile::tempdir().unwrap();
    // Mesa gives program binaries only with its shader cache on: a folder of the test's own.
    let output = crate::sparkle_bench_with(
        &["bench-compile-contexts", "--kernels", "6", "--contexts", "1,3"],
        dir.path(),
        &[("MESA_SHADER_CACHE_DIR", dir.path().join("mesa").to_str().unwrap())],
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("one by one, one context") && text.contains("driver's parallel compile"), "{text}");
    for contexts in ["1 independent contexts", "3 independent contexts"] {
        let line = text.lines().find(|line| line.starts_with(contexts)).unwrap_or_else(|| panic!("{text}"));
        assert!(line.contains("6 binaries loaded on the first context"), "{line}");
    }
}
