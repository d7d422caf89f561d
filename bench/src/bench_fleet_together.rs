//! `sparkle-bench bench-fleet --together N --rounds R`: compile leases measured with real
//! processes. Each round starts from a cold remote, then starts N `bench-child` processes at the
//! same moment — N threads meet at a barrier and each spawns its process as soon as all are
//! there — and each process is a new machine: its own empty local cache folder (the driver's
//! cache inside it, as for a user who set no driver variable), the run's signed fleet (one key
//! signs and is trusted, as in the other scenarios), the real backend, the suite's kernels. The
//! leases should let one process per kernel compile while the others wait and then fetch it, so
//! the ideal round compiles once per kernel (3 for the suite); the target is at most one more.
//!
//! A round reports the sum of its processes' compiles and remote hits, whether every process's
//! results were correct, and the whole processes' wall times (spawn to exit; median and slowest).
//! The summary gives the compiles per round (min/median/max) and how many rounds stayed within
//! the target.
//!
//! The remote is Redis (the server `--remote redis://…` names, else a `redis-server` started on
//! 127.0.0.1), whose database is flushed before each round; or S3 with `--remote
//! s3://bucket/prefix` and the usual AWS variables (`AWS_ENDPOINT_URL`, credentials, region),
//! which the processes inherit. The lab has no S3 client of its own and the library does not
//! expose one, so an S3 round is made cold by giving it a fresh prefix under the one named
//! (`<prefix>/together-<run>-<round>`) instead of deleting objects: nothing an earlier round or
//! run published is under it. The processes inherit the rest of the environment too, the lookup
//! budget (`SPARKLE_CACHE_REMOTE_BUDGET_MS`) included: as shipped unless the caller sets it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Barrier;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use sparkle_cli::CliResult;

use crate::bench::{first_result_cases, spawn_child_with, ChildReport, DriverCache};
use crate::bench_fleet::{flush, start_redis, Keys};

/// What `--together` was asked to do.
pub(crate) struct Options<'a> {
    /// Processes started at once per round.
    pub(crate) together: usize,
    pub(crate) rounds: usize,
    /// `redis://…` or `s3://bucket/prefix`; None starts a `redis-server`.
    pub(crate) remote: Option<&'a str>,
    pub(crate) json: bool,
    pub(crate) json_out: Option<&'a Path>,
    /// A timeline (SPARKLE_TRACE) of every process goes here, named by round and process.
    pub(crate) trace_dir: Option<&'a Path>,
}

/// One round: N processes at once against a cold remote.
#[derive(Serialize)]
struct Round {
    /// 1-based.
    round: usize,
    /// Processes that ran to the end and reported.
    children: usize,
    /// The sum of the processes' compiles (ideal: one per kernel).
    compiles: u64,
    /// Each process's compiles, in the order they were started.
    compiles_per_child: Vec<u64>,
    /// The sum of the programs served by the remote.
    remote_hits: u64,
    remote_hits_per_child: Vec<u64>,
    /// Every process reported, and every result matched its CPU reference.
    correct: bool,
    /// Whole processes, spawn to exit.
    median_process_ms: f64,
    max_process_ms: f64,
    process_ms: Vec<f64>,
    /// Processes that failed, with why.
    failures: Vec<String>,
}

/// The rounds together.
#[derive(Serialize)]
struct Summary {
    rounds: usize,
    children_per_round: usize,
    /// Distinct programs the suite needs: the ideal compiles of a round.
    kernels: usize,
    /// Most compiles a round may take and still meet the target (one more than the ideal).
    target_compiles: u64,
    compiles_min: u64,
    compiles_median: u64,
    compiles_max: u64,
    /// Rounds whose compiles were at most `target_compiles`.
    rounds_within_target: usize,
    /// Median and slowest whole process over every round.
    median_process_ms: f64,
    max_process_ms: f64,
    all_correct: bool,
}

#[derive(Serialize)]
struct Report {
    method: &'static str,
    /// `redis` or `s3`.
    store: &'static str,
    rounds: Vec<Round>,
    summary: Summary,
}

/// Runs the scenario and prints its report.
pub(crate) fn run(options: Options<'_>) -> CliResult<ExitCode> {
    let together = options.together.max(1);
    let rounds = options.rounds.max(1);
    let scratch = tempfile::tempdir()?;
    let mut own = None;
    let (store, base) = match options.remote {
        Some(url) if url.starts_with("s3://") => ("s3", url.trim_end_matches('/').to_owned()),
        Some(url) if url.starts_with("redis://") => ("redis", url.to_owned()),
        Some(_) => return Err("--remote takes a redis:// or s3://bucket/prefix URL".into()),
        None => {
            let (server, addr) = start_redis()?;
            own = Some(server);
            ("redis", format!("redis://{addr}/0"))
        }
    };
    let secret = scratch.path().join("fleet.key");
    let public = sparkle::cache::remote::generate_key_file(&secret)
        .map_err(|err| format!("cannot make the run's signing key in {}: {err}", secret.display()))?;
    let keys = Keys { secret, public };
    if let Some(dir) = options.trace_dir {
        std::fs::create_dir_all(dir)?;
    }
    // Names this run's S3 prefixes apart from an earlier run's.
    let run_id = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs());
    let kernels = first_result_cases().len();
    let started = Instant::now();
    let step = |what: &str| eprintln!("{}", crate::progress::line(started.elapsed(), what));

    let mut report_rounds = Vec::with_capacity(rounds);
    for round in 1..=rounds {
        step(&format!("round {round} of {rounds}: {together} processes at once"));
        let url = if store == "s3" {
            format!("{base}/together-{run_id}-{}-{round}", std::process::id())
        } else {
            flush(&base)?;
            base.clone()
        };
        let machines: Vec<PathBuf> =
            (0..together).map(|i| scratch.path().join(format!("round-{round}/machine-{i}"))).collect();
        let traces: Vec<Option<PathBuf>> = (0..together)
            .map(|i| options.trace_dir.map(|dir| dir.join(format!("together-round{round}-process{i}.json"))))
            .collect();
        let barrier = Barrier::new(together);
        let runs: Vec<Result<(ChildReport, f64), String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = machines
                .iter()
                .zip(&traces)
                .map(|(dir, trace)| {
                    let (barrier, url, keys) = (&barrier, &url, &keys);
                    scope.spawn(move || {
                        barrier.wait();
                        machine(dir, url, keys, trace.as_deref())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().unwrap_or_else(|_| Err("a process's thread panicked".to_owned())))
                .collect()
        });
        report_rounds.push(summarize_round(round, runs));
    }
    drop(own);

    let report = Report {
        method: "per round: a cold remote (Redis flushed; a fresh S3 prefix), then N bench-child processes \
                 spawned at the same moment (threads released by one barrier), each a new machine with \
                 its own empty local cache and the driver's cache inside it, a signed fleet (one key signs \
                 and is trusted), the real backend; compiles and remote hits summed over the round; whole \
                 processes timed from spawn to exit",
        store,
        summary: summary(&report_rounds, together, kernels),
        rounds: report_rounds,
    };
    if let Some(path) = options.json_out {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
    }
    if options.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_text(&report);
    }
    let failures: Vec<&String> = report.rounds.iter().flat_map(|r| &r.failures).collect();
    if let Some(first) = failures.first() {
        return Err(format!("{} of the measured processes failed; the first: {first}", failures.len()).into());
    }
    Ok(if report.summary.all_correct { ExitCode::SUCCESS } else { ExitCode::from(sparkle_cli::WRONG_RESULT) })
}

/// One process on a new machine whose cache is `dir`, timed whole.
fn machine(dir: &Path, url: &str, keys: &Keys, trace: Option<&Path>) -> Result<(ChildReport, f64), String> {
    let mut env = vec![
        ("SPARKLE_CACHE_READ_ONLY", "0".to_owned()),
        ("SPARKLE_CACHE_REMOTE", url.to_owned()),
        ("SPARKLE_CACHE_SIGNING_KEY", keys.secret.display().to_string()),
        ("SPARKLE_CACHE_TRUSTED_KEYS", keys.public.clone()),
    ];
    if let Some(trace) = trace {
        env.push(("SPARKLE_TRACE", trace.display().to_string()));
    }
    let started = Instant::now();
    let report = spawn_child_with(Some(dir), DriverCache::Inside, &env).map_err(|err| err.to_string())?;
    Ok((report, started.elapsed().as_secs_f64() * 1e3))
}

fn summarize_round(round: usize, runs: Vec<Result<(ChildReport, f64), String>>) -> Round {
    let mut failures = Vec::new();
    let mut reports = Vec::new();
    for run in runs {
        match run {
            Ok(run) => reports.push(run),
            Err(err) => failures.push(err),
        }
    }
    let process_ms: Vec<f64> = reports.iter().map(|(_, ms)| *ms).collect();
    let compiles_per_child: Vec<u64> = reports.iter().map(|(r, _)| r.compiles).collect();
    let remote_hits_per_child: Vec<u64> = reports.iter().map(|(r, _)| r.remote_hits).collect();
    Round {
        round,
        children: reports.len(),
        compiles: compiles_per_child.iter().sum(),
        remote_hits: remote_hits_per_child.iter().sum(),
        correct: failures.is_empty() && reports.iter().all(|(r, _)| r.correct),
        median_process_ms: crate::bench_fleet::median(process_ms.clone()),
        max_process_ms: process_ms.iter().copied().fold(f64::NAN, f64::max),
        process_ms,
        compiles_per_child,
        remote_hits_per_child,
        failures,
    }
}

fn summary(rounds: &[Round], together: usize, kernels: usize) -> Summary {
    let mut compiles: Vec<u64> = rounds.iter().map(|r| r.compiles).collect();
    compiles.sort_unstable();
    let target_compiles = kernels as u64 + 1;
    let all_ms: Vec<f64> = rounds.iter().flat_map(|r| r.process_ms.iter().copied()).collect();
    Summary {
        rounds: rounds.len(),
        children_per_round: together,
        kernels,
        target_compiles,
        compiles_min: compiles.first().copied().unwrap_or(0),
        compiles_median: compiles.get(compiles.len() / 2).copied().unwrap_or(0),
        compiles_max: compiles.last().copied().unwrap_or(0),
        rounds_within_target: rounds.iter().filter(|r| r.compiles <= target_compiles).count(),
        median_process_ms: crate::bench_fleet::median(all_ms.clone()),
        max_process_ms: all_ms.iter().copied().fold(f64::NAN, f64::max),
        all_correct: rounds.iter().all(|r| r.correct),
    }
}

fn print_text(report: &Report) {
    let s = &report.summary;
    println!(
        "Fleet leases, {} processes at once over {} kernels, {} rounds on {} ({}):",
        s.children_per_round, s.kernels, s.rounds, report.store, report.method
    );
    println!(
        "{:<6} {:>9} {:>8} {:>12} {:>11} {:>11}  per process (compiles / remote hits)",
        "round", "compiles", "hits", "processes", "median ms", "slowest ms"
    );
    for r in &report.rounds {
        println!(
            "{:<6} {:>9} {:>8} {:>12} {:>11.1} {:>11.1}  {:?} / {:?}{}{}",
            r.round,
            r.compiles,
            r.remote_hits,
            format!("{}/{}", r.children, s.children_per_round),
            r.median_process_ms,
            r.max_process_ms,
            r.compiles_per_child,
            r.remote_hits_per_child,
            if r.correct { "" } else { "  WRONG RESULTS OR FAILED PROCESSES" },
            if r.compiles > s.target_compiles { "  over target" } else { "" },
        );
        for failure in &r.failures {
            println!("       failed: {failure}");
        }
    }
    println!(
        "compiles per round: min/median/max {}/{}/{} (ideal {}), rounds within <= {}: {} of {}",
        s.compiles_min,
        s.compiles_median,
        s.compiles_max,
        s.kernels,
        s.target_compiles,
        s.rounds_within_target,
        s.rounds
    );
    println!(
        "whole processes over every round: median {:.1} ms, slowest {:.1} ms{}",
        s.median_process_ms,
        s.max_process_ms,
        if s.all_correct { "" } else { "; NOT every process was correct" }
    );
}
