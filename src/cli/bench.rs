//! `sparkle bench`: time to first correct result of the whole suite under four cache scenarios,
//! each measured in a fresh process, and per-kernel throughput with warm programs.
//!
//! Scenarios (median of `--repeats` runs each):
//! - `cold`: empty Sparkle cache, empty driver shader cache;
//! - `driver-cache`: Sparkle cache off, the driver's own shader cache hot — compiling from
//!   source as an application without Sparkle would;
//! - `warm`: Sparkle cache hot and the driver's cache hot — the normal second run;
//! - `warm-driver-cold`: Sparkle cache hot, driver's cache empty — what program binaries alone give.

use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use sparkle::cache::{CacheConfig, CacheStats};
use sparkle::suite::{self, Case};
use sparkle::{BackendChoice, Runtime};

use super::{table, CliResult};

/// Inputs of the time-to-first-result runs: small, so that compiling dominates as it does for a
/// user's first call.
fn first_result_cases() -> Vec<Box<dyn Case>> {
    vec![
        Box::new(suite::saxpy::Saxpy::random(1 << 16, 7)),
        Box::new(suite::sgemm::Sgemm::random(128, 128, 128, 7)),
        Box::new(suite::conv2d::Conv2d::random(suite::conv2d::Shape { n: 1, c: 8, h: 32, w: 32, k: 8 }, 7)),
    ]
}

/// What one child process measured.
#[derive(Debug, Serialize, Deserialize)]
struct ChildReport {
    /// Creating the context and the backend.
    open_ms: f64,
    /// From the first program request until every kernel's result is back on the host.
    suite_ms: f64,
    correct: bool,
    verdicts: Vec<String>,
    /// xxh3 of each kernel's result bytes, so that runs in different processes can be compared.
    digests: Vec<String>,
    memory_hits: u64,
    disk_hits: u64,
    compiles: u64,
}

/// One child run: opens the backend, then times programs + first results of the whole suite.
pub fn child(no_cache: bool) -> CliResult<ExitCode> {
    let cases = first_result_cases();
    let references: Vec<_> = cases.iter().map(|c| c.reference()).collect();
    let started = Instant::now();
    let config = if no_cache { CacheConfig::memory_only() } else { CacheConfig::from_env()? };
    let backend = Runtime::open(BackendChoice::from_env()?, &config)?;
    let open = started.elapsed();

    let started = Instant::now();
    let specs: Vec<_> = cases.iter().map(|c| c.spec()).collect();
    let programs = backend.warm_up(&specs)?;
    let mut results = Vec::with_capacity(cases.len());
    for (case, program) in cases.iter().zip(&programs) {
        let buffers = case.upload(&backend)?;
        case.dispatch(&backend, program, &buffers)?.wait(suite::DISPATCH_TIMEOUT)?;
        results.push(case.download(&backend, &buffers)?);
    }
    let suite_time = started.elapsed();

    let verdicts: Vec<_> =
        results.iter().zip(&references).map(|(got, (want, tol))| suite::verify(got, want, tol)).collect();
    let stats: CacheStats = backend.cache_stats();
    let report = ChildReport {
        open_ms: open.as_secs_f64() * 1e3,
        suite_ms: suite_time.as_secs_f64() * 1e3,
        correct: verdicts.iter().all(|v| v.passed()),
        verdicts: cases.iter().zip(&verdicts).map(|(c, v)| format!("{}: {v}", c.describe())).collect(),
        digests: results
            .iter()
            .map(|r| format!("{:016x}", xxhash_rust::xxh3::xxh3_64(bytemuck::cast_slice(r))))
            .collect(),
        memory_hits: stats.memory_hits,
        disk_hits: stats.disk_hits,
        compiles: stats.compiles,
    };
    println!("{}", serde_json::to_string(&report)?);
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct Scenario {
    name: &'static str,
    description: &'static str,
    median_suite_ms: f64,
    median_open_ms: f64,
    runs: Vec<ChildReport>,
}

#[derive(Serialize)]
struct Throughput {
    case: String,
    iterations: usize,
    median_ms: f64,
    gflops: f64,
    gbytes_per_s: f64,
    correct: String,
}

#[derive(Serialize)]
struct Report {
    device: String,
    backend: String,
    details: Vec<(String, String)>,
    scenarios: Vec<Scenario>,
    warm_over_cold: f64,
    warm_over_driver_cache: f64,
    throughput: Vec<Throughput>,
}

pub fn run(json: bool, repeats: usize) -> CliResult<ExitCode> {
    let backend = Runtime::from_env()?;
    let scratch = tempfile::tempdir()?;
    let progress = progress_bar(4 * repeats as u64 + suite::bench_cases(1).len() as u64);

    // The first cold run's directories are the hot ones of the later scenarios.
    let hot_sparkle = scratch.path().join("hot-sparkle");
    let hot_driver = scratch.path().join("hot-driver");
    let fresh = |label: &str, i: usize| scratch.path().join(format!("{label}-{i}"));
    let mut cold = Vec::new();
    for i in 0..repeats {
        progress.set_message("cold");
        let (sparkle_dir, driver_dir) =
            if i == 0 { (hot_sparkle.clone(), hot_driver.clone()) } else { (fresh("s", i), fresh("d", i)) };
        cold.push(spawn_child(Some(&sparkle_dir), &driver_dir)?);
        progress.inc(1);
    }
    let mut driver_cache = Vec::new();
    let mut warm = Vec::new();
    let mut warm_driver_cold = Vec::new();
    for i in 0..repeats {
        progress.set_message("driver cache");
        driver_cache.push(spawn_child(None, &hot_driver)?);
        progress.inc(1);
        progress.set_message("warm");
        warm.push(spawn_child(Some(&hot_sparkle), &hot_driver)?);
        progress.inc(1);
        progress.set_message("warm, driver cold");
        warm_driver_cold.push(spawn_child(Some(&hot_sparkle), &fresh("wd", i))?);
        progress.inc(1);
    }
    let scenarios = vec![
        scenario("cold", "empty Sparkle cache, empty driver cache", cold),
        scenario("driver-cache", "no Sparkle cache, driver shader cache hot", driver_cache),
        scenario("warm", "Sparkle cache hot, driver shader cache hot", warm),
        scenario("warm-driver-cold", "Sparkle cache hot, driver shader cache empty", warm_driver_cold),
    ];
    let warm_over_cold = scenarios[2].median_suite_ms / scenarios[0].median_suite_ms;
    let warm_over_driver_cache = scenarios[2].median_suite_ms / scenarios[1].median_suite_ms;

    let mut throughput = Vec::new();
    for case in suite::bench_cases(1) {
        progress.set_message(case.describe());
        throughput.push(measure_throughput(&backend, case.as_ref())?);
        progress.inc(1);
    }
    progress.finish_and_clear();

    let info = backend.info();
    let report = Report {
        device: info.name.clone(),
        backend: info.backend.to_string(),
        details: info.details.clone(),
        scenarios,
        warm_over_cold,
        warm_over_driver_cache,
        throughput,
    };
    let all_correct = report.scenarios.iter().flat_map(|s| &s.runs).all(|r| r.correct)
        && report.throughput.iter().all(|t| t.correct == "yes");
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(if all_correct { ExitCode::SUCCESS } else { ExitCode::from(super::WRONG_RESULT) })
}

fn progress_bar(steps: u64) -> ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(steps);
    if let Ok(style) = ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}") {
        bar.set_style(style);
    }
    bar
}

/// Runs one measured child. `sparkle_dir: None` turns the Sparkle cache off. The driver's
/// shader cache is pointed at `driver_dir` (Mesa and NVIDIA variables both; each driver reads
/// its own).
fn spawn_child(sparkle_dir: Option<&Path>, driver_dir: &Path) -> CliResult<ChildReport> {
    std::fs::create_dir_all(driver_dir)?;
    let mut command = Command::new(std::env::current_exe()?);
    command
        .arg("bench-child")
        .env("MESA_SHADER_CACHE_DIR", driver_dir)
        .env("__GL_SHADER_DISK_CACHE", "1")
        .env("__GL_SHADER_DISK_CACHE_PATH", driver_dir)
        .env("__GL_SHADER_DISK_CACHE_SKIP_CLEANUP", "1");
    match sparkle_dir {
        Some(dir) => command.env("SPARKLE_CACHE_DIR", dir),
        None => command.arg("--no-cache"),
    };
    let output = command.output()?;
    if !output.status.success() {
        return Err(format!(
            "a benchmark process failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )
        .into());
    }
    let report: ChildReport = serde_json::from_slice(&output.stdout)
        .map_err(|err| format!("a benchmark process printed no report ({err})"))?;
    Ok(report)
}

fn scenario(name: &'static str, description: &'static str, runs: Vec<ChildReport>) -> Scenario {
    let median = |values: Vec<f64>| {
        let mut values = values;
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
    };
    Scenario {
        name,
        description,
        median_suite_ms: median(runs.iter().map(|r| r.suite_ms).collect()),
        median_open_ms: median(runs.iter().map(|r| r.open_ms).collect()),
        runs,
    }
}

/// Dispatch + wait, repeated on warm buffers: at least 3 times, up to 50 or one second.
fn measure_throughput(backend: &Runtime, case: &dyn Case) -> CliResult<Throughput> {
    let program = backend.program(&case.spec())?;
    let verdict = suite::run_and_verify(backend, &program, case)?;
    let buffers = case.upload(backend)?;
    let mut times = Vec::new();
    let started = Instant::now();
    while times.len() < 3 || (times.len() < 50 && started.elapsed() < Duration::from_secs(1)) {
        let t = Instant::now();
        case.dispatch(backend, &program, &buffers)?.wait(suite::DISPATCH_TIMEOUT)?;
        times.push(t.elapsed());
    }
    times.sort();
    let median = times[times.len() / 2].as_secs_f64();
    let work = case.work();
    Ok(Throughput {
        case: case.describe(),
        iterations: times.len(),
        median_ms: median * 1e3,
        gflops: work.flops / median / 1e9,
        gbytes_per_s: work.bytes / median / 1e9,
        correct: if verdict.passed() { "yes".into() } else { verdict.to_string() },
    })
}

fn print_report(report: &Report) {
    println!("Device: {} ({} backend)", report.device, report.backend);
    for (name, value) in &report.details {
        println!("  {name}: {value}");
    }
    println!("\nTime to first correct result of the whole suite (fresh process each run, median):");
    let rows: Vec<Vec<String>> = report
        .scenarios
        .iter()
        .map(|s| {
            let last = s.runs.last();
            vec![
                s.name.to_owned(),
                format!("{:.1}", s.median_suite_ms),
                format!("{:.1}", s.median_open_ms),
                last.map(|r| format!("{}/{}/{}", r.compiles, r.disk_hits, r.memory_hits)).unwrap_or_default(),
                if s.runs.iter().all(|r| r.correct) { "yes".into() } else { "NO".into() },
                s.description.to_owned(),
            ]
        })
        .collect();
    print!(
        "{}",
        table::render(&["scenario", "suite ms", "open ms", "compiles/disk/mem", "correct", "caches"], &rows)
    );
    println!(
        "warm / cold = {:.3} (target ≤ 0.25); warm / driver-cache = {:.3} (target ≤ 1.0)",
        report.warm_over_cold, report.warm_over_driver_cache
    );
    for run in report.scenarios.iter().flat_map(|s| &s.runs).filter(|r| !r.correct) {
        for verdict in &run.verdicts {
            println!("  {verdict}");
        }
    }

    println!("\nThroughput with warm programs (median dispatch + wait):");
    let rows: Vec<Vec<String>> = report
        .throughput
        .iter()
        .map(|t| {
            vec![
                t.case.clone(),
                format!("{:.3}", t.median_ms),
                format!("{:.1}", t.gflops),
                format!("{:.1}", t.gbytes_per_s),
                t.iterations.to_string(),
                t.correct.clone(),
            ]
        })
        .collect();
    print!("{}", table::render(&["kernel", "ms", "GFLOP/s", "GB/s", "runs", "correct"], &rows));
}
