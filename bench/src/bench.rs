//! `sparkle-bench bench`: time to first correct result of the whole suite under four cache scenarios,
//! each measured in a fresh process, and per-kernel throughput with warm programs: the GPU warmed
//! with ≥ 0.5 s of continuous work first, each dispatch timed on the GPU (timer queries) and as
//! dispatch + wait, and as batches of back-to-back dispatches on the GPU, medians of many runs,
//! inputs that would sit in cache rotated, the GPU clock read where the driver exposes it, and —
//! with `--peers` — PyTorch (cuBLAS/cuDNN) at the same sizes on the same GPU in the same run,
//! timed the same way: back-to-back launches against back-to-back dispatches, one call's
//! dispatch + wait against one call's, the same input rotation, the same number of launches per
//! batch ([`METHOD`]).
//!
//! Scenarios (median of `--repeats` runs each):
//! - `cold`: empty Sparkle cache, empty driver shader cache;
//! - `driver-cache`: Sparkle cache off, the driver's own shader cache hot — compiling from
//!   source as an application without Sparkle would;
//! - `warm`: Sparkle cache hot and the driver's cache hot — the normal second run;
//! - `warm-driver-cold`: Sparkle cache hot, driver's cache empty — what program binaries alone give;
//! - `cold-inside`: as `cold`, but with no driver cache variable set, so that Sparkle puts the
//!   driver's shader cache inside its own cache dir;
//! - `copied`: the first `cold-inside` run's cache dir copied to a fresh path (afresh for each
//!   run), used with no driver cache variable set — our cache copied to a fresh machine.
//!
//! The first four set the driver's cache variables explicitly; the last two remove every one of
//! them (and Sparkle's record of having set them) from the child's environment.

use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sparkle::cache::{CacheConfig, CacheStats};
use sparkle::suite::{self, timing, Case};
use sparkle::{BackendChoice, Runtime};

use crate::progress::Progress;
use crate::{backends, overhead};
use sparkle_cli::{chart, table, CliResult};

/// Inputs of the time-to-first-result runs: small, so that compiling dominates as it does for a
/// user's first call.
pub(super) fn first_result_cases() -> Vec<Box<dyn Case>> {
    vec![
        Box::new(suite::saxpy::Saxpy::random(1 << 16, 7)),
        Box::new(suite::sgemm::Sgemm::random(128, 128, 128, 7)),
        Box::new(suite::conv2d::Conv2d::random(suite::conv2d::Shape { n: 1, c: 8, h: 32, w: 32, k: 8 }, 7)),
    ]
}

/// What one child process measured.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct ChildReport {
    /// Creating the context and the backend.
    pub(super) open_ms: f64,
    /// From the first program request until every kernel's result is back on the host.
    pub(super) suite_ms: f64,
    pub(super) correct: bool,
    verdicts: Vec<String>,
    /// xxh3 of each kernel's result bytes, so that runs in different processes can be compared.
    digests: Vec<String>,
    memory_hits: u64,
    pub(super) disk_hits: u64,
    pub(super) compiles: u64,
    /// Programs served by the fleet cache (remote tier).
    #[serde(default)]
    pub(super) remote_hits: u64,
    /// Where the child's GL driver kept its shader cache, as the device reported it.
    #[serde(default)]
    driver_cache: String,
}

/// One child run: opens the backend, then times programs + first results of the whole suite.
pub fn child(no_cache: bool) -> CliResult<ExitCode> {
    let cases = first_result_cases();
    let references: Vec<_> = cases.iter().map(|c| c.reference(&c.spec())).collect();
    let started = Instant::now();
    let config = if no_cache { CacheConfig::memory_only() } else { CacheConfig::from_env()? };
    let backend = Runtime::open(BackendChoice::from_env()?, &config)?;
    let open = started.elapsed();

    let started = Instant::now();
    let specs: Vec<_> = cases.iter().map(|c| c.spec()).collect();
    let programs = backend.warm_up(&specs)?;
    let mut results = Vec::with_capacity(cases.len());
    for (case, program) in cases.iter().zip(&programs) {
        let buffers = case.upload_for(&backend, program)?;
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
        remote_hits: stats.remote_hits,
        driver_cache: backend
            .info()
            .details
            .iter()
            .find(|(name, _)| name == "driver shader cache")
            .map(|(_, value)| value.clone())
            .unwrap_or_default(),
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
    /// The backend that ran it (`--backends` puts several side by side) and its device.
    backend: String,
    device: String,
    case: String,
    /// `kernel shape`, as peers and tuning key problems.
    key: String,
    variant: String,
    /// `tuned` (a stored `sparkle tune` choice) or `default`.
    choice: &'static str,
    iterations: usize,
    /// Median GPU time of one dispatch (timer queries); `None` where the device cannot measure.
    gpu_ms: Option<f64>,
    /// Median GPU time per dispatch of `launches` dispatches in a row, one timer query around
    /// them all; `None` where the device cannot measure.
    #[serde(default)]
    gpu_back_to_back_ms: Option<f64>,
    /// Dispatches per back-to-back batch (the peer gets the same count).
    #[serde(default)]
    launches: usize,
    /// Median dispatch + wait on the host of one call.
    wall_ms: f64,
    /// The figure throughput and the peer's ratio come from: `gpu back-to-back`, `gpu` (one
    /// dispatch) or `wall`.
    timer: &'static str,
    /// Throughput from that figure.
    gflops: f64,
    gbytes_per_s: f64,
    /// Copies of the inputs rotated through.
    input_copies: usize,
    /// The SM clock right after timing, MHz, where the driver exposes it.
    clock_mhz: Option<f64>,
    correct: String,
    /// Where a tuned variant ran: the default variant (what runs untuned) and its figure of the
    /// same kind, checked against the CPU too, so that a tuned choice is seen never to be slower.
    #[serde(skip_serializing_if = "Option::is_none")]
    default: Option<DefaultFigure>,
    peer: Option<Peer>,
}

/// The untuned variant's figure beside a tuned one.
#[derive(Debug, Serialize)]
struct DefaultFigure {
    variant: String,
    ms: f64,
    correct: String,
}

/// PyTorch's figures for the same problem, timed as Sparkle's ([`METHOD`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Peer {
    key: String,
    what: String,
    /// GPU time per launch of back-to-back launches (CUDA events around them all).
    ms: f64,
    /// Dispatch + wait on the host of one call.
    #[serde(default)]
    wall_ms: Option<f64>,
    /// CUDA events around a single launch: the former method, which counts the launch gap.
    #[serde(default)]
    single_event_ms: Option<f64>,
    #[serde(default)]
    launches: usize,
    #[serde(default)]
    input_copies: usize,
    /// Our throughput over the peer's: peer `ms` over our figure of the same kind (back to back
    /// where we have it).
    #[serde(default)]
    ratio: f64,
    /// Peer `wall_ms` over ours: one call's dispatch + wait on each side.
    #[serde(default)]
    wall_ratio: Option<f64>,
}

/// How both sides are timed, as the JSON report records it.
#[derive(Debug, Clone, Serialize)]
struct Method {
    sparkle: &'static str,
    peer: &'static str,
    ratio: &'static str,
    wall_ratio: &'static str,
}

/// The timing method of every throughput figure and ratio.
const METHOD: Method = Method {
    sparkle: "GPU warmed with >= 0.6 s of continuous work; gpu_back_to_back_ms: one GL_TIME_ELAPSED \
              query around `launches` dispatches in one submission (inputs rotated over `input_copies` \
              copies), divided by `launches`, median of 3-7 batches; gpu_ms: one query around one \
              dispatch, median; wall_ms: submit + wait of one dispatch on the host, median",
    peer: "bench/scripts/peers.py, after >= 0.6 s of warm-up: ms: CUDA events around the same number of \
           back-to-back launches over the same input copies, queued behind torch.cuda._sleep so that \
           the host's launch gap is not in the window, divided by the launch count, median of 3-7 \
           batches; wall_ms: launch + torch.cuda.synchronize() on the host, median; single_event_ms: \
           CUDA events around one launch, median (not used in any ratio)",
    ratio: "peer ms / Sparkle gpu_back_to_back_ms (gpu_ms, then wall_ms, where the device cannot time \
            back-to-back dispatches)",
    wall_ratio: "peer wall_ms / Sparkle wall_ms",
};

#[derive(Debug, Default, Serialize, Deserialize)]
struct PeerReport {
    #[serde(default)]
    device: String,
    #[serde(default)]
    torch: String,
    #[serde(default)]
    method: String,
    #[serde(default)]
    results: Vec<Peer>,
}

#[derive(Serialize)]
struct Report {
    device: String,
    backend: String,
    details: Vec<(String, String)>,
    /// From `nvidia-smi` where present: driver version, maximum SM clock.
    gpu: Vec<(String, String)>,
    scenarios: Vec<Scenario>,
    warm_over_cold: f64,
    warm_over_driver_cache: f64,
    /// `copied` over `warm`: our cache (driver's cache inside) on a fresh machine; target ≤ 1.2.
    copied_over_warm: f64,
    throughput: Vec<Throughput>,
    /// How throughput, peers and ratios were timed.
    method: Method,
    peers: Option<PeerReport>,
    /// `--overheads`: the gl backend against a plain glow loop.
    overheads: Option<overhead::OverheadReport>,
}

/// What `sparkle-bench bench` was asked for.
pub struct Options {
    pub json: bool,
    pub repeats: usize,
    pub peers: bool,
    pub quick: bool,
    pub startup: bool,
    /// Also write the JSON report here.
    pub json_out: Option<std::path::PathBuf>,
    /// Backends side by side (none: the one `SPARKLE_BACKEND` picks).
    pub backends: Vec<BackendChoice>,
    /// Also measure the gl backend's overheads against a plain glow loop.
    pub overheads: bool,
    /// Also draw the chart (SVG) here.
    pub chart: Option<std::path::PathBuf>,
    /// The problems whose throughput is timed.
    pub set: suite::ProblemSet,
}

/// Prints one progress line (stderr), with the time since the bench started.
fn step(started: Instant, what: &str) {
    eprintln!("{}", crate::progress::line(started.elapsed(), what));
}

pub fn run(options: Options) -> CliResult<ExitCode> {
    let Options {
        json,
        repeats,
        peers,
        quick: quick_asked,
        startup,
        json_out,
        backends,
        overheads,
        chart,
        set,
    } = options;
    let bench_started = Instant::now();
    let opened = backends::open(&backends, quick_asked)?;
    let (backend, quick) = (opened[0].runtime.clone(), opened[0].quick);
    let scratch = tempfile::tempdir()?;
    let repeats = if startup { repeats } else { 0 };
    let progress = progress_bar(6 * repeats as u64);

    // The first cold run's directories are the hot ones of the later scenarios.
    let hot_sparkle = scratch.path().join("hot-sparkle");
    let hot_driver = scratch.path().join("hot-driver");
    let fresh = |label: &str, i: usize| scratch.path().join(format!("{label}-{i}"));
    let mut cold = Vec::new();
    for i in 0..repeats {
        progress.set_message("cold");
        let (sparkle_dir, driver_dir) =
            if i == 0 { (hot_sparkle.clone(), hot_driver.clone()) } else { (fresh("s", i), fresh("d", i)) };
        cold.push(spawn_child(Some(&sparkle_dir), DriverCache::At(&driver_dir))?);
        progress.inc(1);
    }
    // The first cold run with the driver's cache inside Sparkle's is the one copied.
    let inside_source = scratch.path().join("inside-0");
    let mut cold_inside = Vec::new();
    for i in 0..repeats {
        progress.set_message("cold, driver cache inside");
        let sparkle_dir = if i == 0 { inside_source.clone() } else { fresh("inside", i) };
        cold_inside.push(spawn_child(Some(&sparkle_dir), DriverCache::Inside)?);
        progress.inc(1);
    }
    let mut driver_cache = Vec::new();
    let mut warm = Vec::new();
    let mut warm_driver_cold = Vec::new();
    let mut copied = Vec::new();
    for i in 0..repeats {
        progress.set_message("driver cache");
        driver_cache.push(spawn_child(None, DriverCache::At(&hot_driver))?);
        progress.inc(1);
        progress.set_message("warm");
        warm.push(spawn_child(Some(&hot_sparkle), DriverCache::At(&hot_driver))?);
        progress.inc(1);
        progress.set_message("warm, driver cold");
        warm_driver_cold.push(spawn_child(Some(&hot_sparkle), DriverCache::At(&fresh("wd", i)))?);
        progress.inc(1);
        progress.set_message("copied");
        let copy = fresh("copied", i);
        copy_tree(&inside_source, &copy)
            .map_err(|err| format!("cannot copy the cache dir {}: {err}", inside_source.display()))?;
        copied.push(spawn_child(Some(&copy), DriverCache::Inside)?);
        progress.inc(1);
    }
    if startup {
        step(bench_started, "startup scenarios done");
    }
    let scenarios = if !startup {
        Vec::new()
    } else {
        vec![
            scenario("cold", "empty Sparkle cache, empty driver cache", cold),
            scenario("driver-cache", "no Sparkle cache, driver shader cache hot", driver_cache),
            scenario("warm", "Sparkle cache hot, driver shader cache hot", warm),
            scenario("warm-driver-cold", "Sparkle cache hot, driver shader cache empty", warm_driver_cold),
            scenario(
                "cold-inside",
                "empty Sparkle cache, driver shader cache inside it (no driver variables)",
                cold_inside,
            ),
            scenario(
                "copied",
                "cold-inside's cache dir copied to a fresh path (no driver variables)",
                copied,
            ),
        ]
    };
    let ratio = |a: usize, b: usize| match (scenarios.get(a), scenarios.get(b)) {
        (Some(a), Some(b)) => a.median_suite_ms / b.median_suite_ms,
        _ => f64::NAN,
    };
    let warm_over_cold = ratio(2, 0);
    let warm_over_driver_cache = ratio(2, 1);
    let copied_over_warm = ratio(5, 2);
    progress.finish_and_clear();

    let cases = set.cases(1, quick);
    let mut throughput = Vec::new();
    for other in &opened {
        let other_cases = set.cases(1, other.quick);
        for case in if other.quick == quick { &cases } else { &other_cases } {
            step(bench_started, &format!("timing {} on {}", case.describe(), other.runtime.backend()));
            throughput.push(measure_throughput(&other.runtime, case.as_ref())?);
        }
    }
    let peers = if peers {
        step(bench_started, "running the peers (PyTorch)");
        let ours: Vec<&Throughput> = throughput.iter().filter(|t| t.backend == backend.backend()).collect();
        let report = run_peers(&ours)?;
        for t in throughput.iter_mut().filter(|t| t.backend == backend.backend()) {
            if let Some(peer) = report.results.iter().find(|p| p.key == t.key) {
                t.peer = Some(Peer {
                    ratio: peer.ms / t.timed_ms(),
                    wall_ratio: peer.wall_ms.map(|wall| wall / t.wall_ms),
                    ..peer.clone()
                });
            }
        }
        Some(report)
    } else {
        None
    };
    let overheads = if overheads {
        step(bench_started, "overheads against a plain glow loop");
        let gl = Runtime::open_backend("gl", &sparkle::cache::CacheConfig::from_env()?)?;
        Some(overhead::measure(&gl, &overhead::Options::defaults(), bench_started)?)
    } else {
        None
    };
    step(bench_started, "done");

    let info = backend.info();
    let report = Report {
        device: info.name.clone(),
        backend: info.backend.to_string(),
        details: info.details.clone(),
        gpu: gpu_facts(),
        scenarios,
        warm_over_cold,
        warm_over_driver_cache,
        copied_over_warm,
        throughput,
        method: METHOD,
        peers,
        overheads,
    };
    let all_correct = report.scenarios.iter().flat_map(|s| &s.runs).all(|r| r.correct)
        && report.throughput.iter().all(|t| t.correct == "yes")
        && report.throughput.iter().filter_map(|t| t.default.as_ref()).all(|d| d.correct == "yes")
        && report.overheads.as_ref().is_none_or(|o| o.correct);
    if let Some(path) = &json_out {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .map_err(|err| format!("cannot write the JSON report to {}: {err}", path.display()))?;
    }
    if let Some(path) = &chart {
        chart::write(&serde_json::to_value(&report)?, path)?;
        step(bench_started, &format!("chart written to {}", path.display()));
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(if all_correct { ExitCode::SUCCESS } else { ExitCode::from(sparkle_cli::WRONG_RESULT) })
}

fn progress_bar(steps: u64) -> Progress {
    Progress::new(steps)
}

/// Where a measured child's GL driver keeps its shader cache.
pub(super) enum DriverCache<'a> {
    /// In this folder, set explicitly (Mesa and NVIDIA variables both; each driver reads its own).
    At(&'a Path),
    /// Wherever Sparkle puts it: every driver cache variable removed, as for a user who set none.
    Inside,
}

/// Every variable that places or switches a GL driver's shader cache, and Sparkle's record of
/// having set them (this process opened a GL device, so it may hold them itself).
const DRIVER_CACHE_VARS: &[&str] = &[
    "MESA_SHADER_CACHE_DIR",
    "MESA_GLSL_CACHE_DIR",
    "MESA_SHADER_CACHE_DISABLE",
    "MESA_GLSL_CACHE_DISABLE",
    "__GL_SHADER_DISK_CACHE",
    "__GL_SHADER_DISK_CACHE_PATH",
    "__GL_SHADER_DISK_CACHE_SKIP_CLEANUP",
    "SPARKLE_DRIVER_CACHE_SET",
];

/// Runs one measured child. `sparkle_dir: None` turns the Sparkle cache off.
fn spawn_child(sparkle_dir: Option<&Path>, driver: DriverCache<'_>) -> CliResult<ChildReport> {
    spawn_child_with(sparkle_dir, driver, &[])
}

/// [`spawn_child`] with further variables set for the child.
pub(super) fn spawn_child_with(
    sparkle_dir: Option<&Path>,
    driver: DriverCache<'_>,
    env: &[(&str, String)],
) -> CliResult<ChildReport> {
    let mut command = Command::new(std::env::current_exe()?);
    command.arg("bench-child");
    command.envs(env.iter().map(|(name, value)| (*name, value.as_str())));
    match driver {
        DriverCache::At(driver_dir) => {
            std::fs::create_dir_all(driver_dir)?;
            command
                .env("MESA_SHADER_CACHE_DIR", driver_dir)
                .env("__GL_SHADER_DISK_CACHE", "1")
                .env("__GL_SHADER_DISK_CACHE_PATH", driver_dir)
                .env("__GL_SHADER_DISK_CACHE_SKIP_CLEANUP", "1");
        }
        DriverCache::Inside => {
            for var in DRIVER_CACHE_VARS {
                command.env_remove(var);
            }
        }
    }
    if let Some(name) = backends::child_backend() {
        command.env(backends::CHILD_ENV, name);
    }
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

/// Copies a cache dir as a user would copy it to another machine: folders and regular files,
/// private as the cache makes them; links are not followed (a cache dir holds none).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let file_type = entry.file_type()?;
        let target = to.join(entry.file_name());
        if file_type.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if file_type.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
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

/// Warm-up, then GPU-timed and wall-timed medians of single dispatches of the variant the
/// suite picks for this GPU (tuned, else the default), checked against the CPU first.
fn measure_throughput(backend: &Runtime, case: &dyn Case) -> CliResult<Throughput> {
    let tuned = suite::tuning::Tuning::load(backend).and_then(|t| t.spec_for(backend, case));
    let choice = if tuned.is_some() { "tuned" } else { "default" };
    let spec = suite::chosen_spec(backend, case);
    let variant = suite::variants_for(backend, case)
        .into_iter()
        .find(|(_, s)| *s == spec)
        .map_or_else(|| "default".to_owned(), |(label, _)| label);
    let program = backend.program(&spec)?;
    let fresh = case.upload_for(backend, &program)?;
    case.dispatch(backend, &program, &fresh)?.wait(suite::DISPATCH_TIMEOUT)?;
    let verdict = suite::verify_sampled(case, program.spec(), &case.download(backend, &fresh)?, 20_000);
    drop(fresh);
    let copies = timing::copies_for(case);
    let sets = timing::upload_copies(backend, case, Some(&program), copies)?;
    timing::warm(backend, &program, case, &sets, Duration::from_millis(600))?;
    let timed = timing::time(backend, &program, case, &sets, 30, Duration::from_secs(2))?;
    let launches = timing::launches_for(timed.best());
    let back_to_back =
        timing::back_to_back(backend, &program, case, &sets, launches, Duration::from_secs(2))?;
    let clock_mhz = smi(&["clocks.sm"]).and_then(|v| v.first().and_then(|c| c.parse().ok()));
    let (timer, best) = match (back_to_back, timed.gpu) {
        (Some(time), _) => ("gpu back-to-back", time),
        (None, Some(time)) => ("gpu", time),
        (None, None) => ("wall", timed.wall),
    };
    let seconds = best.as_secs_f64();
    let work = case.work();
    Ok(Throughput {
        backend: backend.backend().to_owned(),
        device: backend.info().name.clone(),
        case: case.describe(),
        key: suite::tuning::key(case),
        variant,
        choice,
        iterations: timed.runs,
        gpu_ms: timed.gpu.map(|d| d.as_secs_f64() * 1e3),
        gpu_back_to_back_ms: back_to_back.map(|d| d.as_secs_f64() * 1e3),
        launches,
        wall_ms: timed.wall.as_secs_f64() * 1e3,
        timer,
        gflops: work.flops / seconds / 1e9,
        gbytes_per_s: work.bytes / seconds / 1e9,
        input_copies: copies,
        clock_mhz,
        correct: if verdict.passed() { "yes".into() } else { verdict.to_string() },
        default: if tuned.is_some() {
            default_figure(backend, case, &spec, timer, launches, copies)?
        } else {
            None
        },
        peer: None,
    })
}

/// The default variant of `case` timed as the tuned `chosen` was (`timer`, `launches`,
/// `copies`), or `None` where they are the same variant.
fn default_figure(
    backend: &Runtime,
    case: &dyn Case,
    chosen: &sparkle::KernelSpec,
    timer: &str,
    launches: usize,
    copies: usize,
) -> CliResult<Option<DefaultFigure>> {
    let spec = case.default_spec(backend.info());
    // A default in a language this backend does not take is not what runs untuned here.
    let Some((variant, _)) = suite::variants_for(backend, case).into_iter().find(|(_, s)| *s == spec) else {
        return Ok(None);
    };
    if spec == *chosen {
        return Ok(None);
    }
    let program = backend.program(&spec)?;
    let fresh = case.upload_for(backend, &program)?;
    case.dispatch(backend, &program, &fresh)?.wait(suite::DISPATCH_TIMEOUT)?;
    let verdict = suite::verify_sampled(case, program.spec(), &case.download(backend, &fresh)?, 20_000);
    drop(fresh);
    let sets = timing::upload_copies(backend, case, Some(&program), copies)?;
    timing::warm(backend, &program, case, &sets, Duration::from_millis(200))?;
    let time = if timer == "gpu back-to-back" {
        timing::back_to_back(backend, &program, case, &sets, launches, Duration::from_secs(1))?
    } else {
        None
    };
    let time = match time {
        Some(time) => time,
        None => {
            let timed = timing::time(backend, &program, case, &sets, 30, Duration::from_secs(1))?;
            if timer == "gpu" {
                timed.best()
            } else {
                timed.wall
            }
        }
    };
    Ok(Some(DefaultFigure {
        variant,
        ms: time.as_secs_f64() * 1e3,
        correct: if verdict.passed() { "yes".into() } else { verdict.to_string() },
    }))
}

/// `nvidia-smi --query-gpu=<fields>` of the first GPU; `None` where there is no NVIDIA tool.
fn smi(fields: &[&str]) -> Option<Vec<String>> {
    let output = Command::new("nvidia-smi")
        .arg(format!("--query-gpu={}", fields.join(",")))
        .arg("--format=csv,noheader,nounits")
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().next()?;
    Some(line.split(',').map(|v| v.trim().to_owned()).collect())
}

fn gpu_facts() -> Vec<(String, String)> {
    let names = ["name", "driver_version", "clocks.max.sm", "memory.total"];
    match smi(&names) {
        Some(values) => names.iter().map(|n| n.to_string()).zip(values).collect(),
        None => {
            vec![("clock".into(), "unavailable (no nvidia-smi; the driver exposes no clock here)".into())]
        }
    }
}

impl Throughput {
    /// The figure throughput and the peer's ratio come from, in ms.
    fn timed_ms(&self) -> f64 {
        match self.timer {
            "gpu back-to-back" => self.gpu_back_to_back_ms,
            "gpu" => self.gpu_ms,
            _ => None,
        }
        .unwrap_or(self.wall_ms)
    }
}

/// Runs the peers script on the problems we timed — each with our input copies and our
/// back-to-back launch count — and reads its JSON.
fn run_peers(ours: &[&Throughput]) -> CliResult<PeerReport> {
    let script = std::env::var_os("SPARKLE_PEERS_SCRIPT")
        .map_or_else(|| std::path::PathBuf::from("bench/scripts/peers.py"), std::path::PathBuf::from);
    if !script.exists() {
        return Err(format!(
            "the peers script {} is not there; run from the repository root or set SPARKLE_PEERS_SCRIPT",
            script.display()
        )
        .into());
    }
    let mut command = Command::new("python3");
    command.arg(&script);
    for t in ours {
        command.arg(format!("{}@{}/{}", t.key, t.input_copies, t.launches));
    }
    let output = command.output().map_err(|err| format!("cannot run python3 for the peers: {err}"))?;
    if !output.status.success() {
        return Err(format!(
            "the peers script failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )
        .into());
    }
    Ok(serde_json::from_slice(&output.stdout)
        .map_err(|err| format!("the peers script printed no report ({err})"))?)
}

fn print_report(report: &Report) {
    println!("Device: {} ({} backend)", report.device, report.backend);
    for (name, value) in &report.details {
        println!("  {name}: {value}");
    }
    if !report.scenarios.is_empty() {
        print_scenarios(report);
    }
    for (name, value) in &report.gpu {
        println!("  {name}: {value}");
    }
    println!(
        "\nThroughput with warm programs after ≥ 0.5 s of warm-up (medians; GPU ms: one timer query around \
         one dispatch; b2b: one query around a batch of back-to-back dispatches / their count; wall: one \
         call's dispatch + wait; GFLOP/s and GB/s from b2b where measured):"
    );
    let several = report.throughput.iter().any(|t| t.backend != report.backend);
    let ms = |value: Option<f64>| value.map_or_else(|| "n/a".into(), |ms| format!("{ms:.4}"));
    let percent = |value: Option<f64>| value.map_or_else(String::new, |r| format!("{:.0}%", r * 100.0));
    let rows: Vec<Vec<String>> = report
        .throughput
        .iter()
        .map(|t| {
            let peer = t.peer.as_ref();
            vec![
                if several { format!("{}: {}", t.backend, t.case) } else { t.case.clone() },
                format!("{} ({})", t.variant, t.choice),
                ms(t.gpu_ms),
                ms(t.gpu_back_to_back_ms),
                format!("{:.4}", t.wall_ms),
                format!("{:.1}", t.gflops),
                format!("{:.1}", t.gbytes_per_s),
                t.clock_mhz.map_or_else(|| "n/a".into(), |c| format!("{c:.0}")),
                peer.map_or_else(String::new, |p| format!("{} {:.4}", p.what, p.ms)),
                peer.map_or_else(String::new, |p| ms(p.wall_ms)),
                percent(peer.map(|p| p.ratio)),
                percent(peer.and_then(|p| p.wall_ratio)),
                format!("{}x{} b2b {}", t.iterations, t.input_copies, t.launches),
                t.correct.clone(),
            ]
        })
        .collect();
    print!(
        "{}",
        table::render(
            &[
                "kernel",
                "variant",
                "GPU ms",
                "b2b ms",
                "wall ms",
                "GFLOP/s",
                "GB/s",
                "SM MHz",
                "peer b2b ms",
                "peer wall ms",
                "ours/peer",
                "wall ours/peer",
                "runs x copies",
                "correct"
            ],
            &rows
        )
    );
    for t in &report.throughput {
        if let Some(default) = &t.default {
            println!(
                "  {}: tuned {} {:.4} ms; untuned default {} {:.4} ms ({}; correct: {})",
                t.case,
                t.variant,
                t.timed_ms(),
                default.variant,
                default.ms,
                t.timer,
                default.correct
            );
        }
    }
    if let Some(peers) = &report.peers {
        println!(
            "Peers: PyTorch {} on {} (FP32, TF32 off). ours/peer: peer b2b / our b2b (GPU time of back-to-back \
             launches on both sides, same launch count, same input copies); wall ours/peer: one call's dispatch + \
             wait on both sides.",
            peers.torch, peers.device
        );
    }
    if let Some(overheads) = &report.overheads {
        print!("\n{}", overhead::render(overheads));
    }
}

fn print_scenarios(report: &Report) {
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
        "warm / cold = {:.3} (target ≤ 0.25); warm / driver-cache = {:.3} (target ≤ 1.0); copied / warm = {:.3} \
         (target ≤ 1.2)",
        report.warm_over_cold, report.warm_over_driver_cache, report.copied_over_warm
    );
    for run in report.scenarios.iter().flat_map(|s| &s.runs).filter(|r| !r.correct) {
        for verdict in &run.verdicts {
            println!("  {verdict}");
        }
    }
}
