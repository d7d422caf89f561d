//! `sparkle-bench bench-fleet`: what the fleet cache gives and costs a machine, in fresh processes
//! that each open the backend and get the suite's first results (`bench-child`). Each process is
//! timed whole, from its spawn to its exit — the remote tier's connection, the driver-cache fetch
//! and the publishes waited for at the end all happen inside — and also from before the backend
//! opens until the last result is on the host:
//!
//! - `cold`: empty local cache, no remote; `warm`: the local cache hot, no remote;
//! - `fresh, remote warm (+N ms)`: an empty local cache on a "new machine", a remote that holds
//!   every program and the driver's cache, reached through a proxy adding N ms to each answer
//!   (by default 0, 40 — inside the default lookup budget — and 200 ms);
//! - `cold, hung remote` and `warm, hung remote`: a remote that accepts connections and never
//!   answers (as a server stopped with SIGSTOP), against the same runs without one;
//! - `cold, dead remote` and `warm, dead remote`: a remote URL where nothing listens.
//!
//! The fleet is signed as the guide recommends: one key made for the run signs what every
//! process publishes, and every process trusts only it. The hung and dead scenarios run with the
//! default lookup budget whatever the environment says (SPARKLE_CACHE_REMOTE_BUDGET_MS is
//! cleared for them): they measure what a failing remote costs as shipped. The report gives each
//! remote scenario's cost over its no-remote twin, in ms of whole processes: the target is at
//! most one lookup budget for a hung or distant remote.
//!
//! Every repetition runs every scenario once, in turn, so that drift lands on all of them alike.
//!
//! The remote is a Redis server: the one `--remote` names, else a `redis-server` this command
//! starts on 127.0.0.1 (found on PATH or in SPARKLE_REDIS_SERVER) and stops at the end. Programs
//! run where their cache says; the driver's cache lives inside Sparkle's (as for a user who set
//! no driver variable), so that it travels.
//!
//! `--together N --rounds R` runs another scenario instead (`bench_fleet_together`): per round,
//! N processes started at the same moment on new machines against a cold remote (Redis, or S3
//! with `--remote s3://bucket/prefix`), counting the round's compiles — the compile leases
//! measured under load.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;

use crate::bench::{spawn_child_with, ChildReport, DriverCache};
use crate::fault_proxy::{Mode, Proxy};
use sparkle_cli::CliResult;

#[derive(Args)]
pub struct Options {
    /// Runs per scenario (the median is reported).
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// A Redis server to use (`redis://host:port/db`); its database is flushed. Default: start
    /// `redis-server` on 127.0.0.1. With --together, also `s3://bucket/prefix` with the usual
    /// AWS variables (AWS_ENDPOINT_URL, credentials, region): each round gets a fresh prefix
    /// under it.
    #[arg(long)]
    remote: Option<String>,
    /// Added latencies to measure, in ms.
    #[arg(long, value_delimiter = ',', default_value = "0,40,200")]
    latencies: Vec<u64>,
    #[arg(long)]
    json: bool,
    /// Also write the JSON report here.
    #[arg(long)]
    json_out: Option<PathBuf>,
    /// Write a timeline (SPARKLE_TRACE) of every measured process into this folder, named by
    /// scenario and repetition, to see where a scenario's time goes.
    #[arg(long)]
    trace_dir: Option<PathBuf>,
    /// Instead of the scenarios above: per round, start N processes at the same moment, each a
    /// new machine (empty local cache) on the signed fleet with a cold remote, and count the
    /// round's compiles (the suite's 3 kernels: ideal 3, target at most 4) — compile leases
    /// under load. --trace-dir keeps each process's timeline.
    #[arg(long, value_name = "N")]
    together: Option<usize>,
    /// Rounds of --together.
    #[arg(long, default_value_t = 10)]
    rounds: usize,
}

impl Options {
    /// The defaults, with `repeats` runs per scenario (for `bench --fleet`).
    pub fn with_repeats(repeats: usize, json: bool) -> Options {
        Options {
            repeats,
            remote: None,
            latencies: vec![0, 40, 200],
            json,
            json_out: None,
            trace_dir: None,
            together: None,
            rounds: 10,
        }
    }
}

#[derive(Serialize)]
struct Scenario {
    name: String,
    /// Median wall time of the whole process, from its spawn to its exit.
    median_process_ms: f64,
    /// The fastest and slowest whole process.
    min_process_ms: f64,
    max_process_ms: f64,
    /// Every run's whole-process time, in the order they ran.
    process_ms: Vec<f64>,
    /// Median of open + suite, per process.
    median_ms: f64,
    median_open_ms: f64,
    median_suite_ms: f64,
    compiles: Vec<u64>,
    remote_hits: Vec<u64>,
    correct: bool,
}

#[derive(Serialize)]
struct Report {
    method: &'static str,
    scenarios: Vec<Scenario>,
    /// Scenario name over `warm` or over its no-remote twin (whole processes).
    ratios: Vec<(String, f64)>,
    /// What a remote scenario costs over its no-remote twin, in ms of whole processes: the median
    /// of the repetitions' differences (target: at most one lookup budget, 50 ms by default, for
    /// a hung or distant remote).
    over_ms: Vec<(String, f64)>,
}

/// One process's report and its whole wall time.
struct Run {
    report: ChildReport,
    process_ms: f64,
}

/// A Redis server this command started; stopped when dropped.
pub(crate) struct OwnRedis {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port())
}

pub(crate) fn start_redis() -> CliResult<(OwnRedis, SocketAddr)> {
    let binary =
        std::env::var_os("SPARKLE_REDIS_SERVER").map_or_else(|| PathBuf::from("redis-server"), PathBuf::from);
    let dir = tempfile::tempdir()?;
    let port = free_port()?;
    let child = Command::new(&binary)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|err| {
            format!("cannot start {} ({err}); install redis-server or pass --remote", binary.display())
        })?;
    let server = OwnRedis { child, _dir: dir };
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(addr).is_err() {
        if Instant::now() > deadline {
            return Err("redis-server did not start within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((server, addr))
}

/// `host:port` of a `redis://host:port/db` URL.
fn redis_addr(url: &str) -> CliResult<SocketAddr> {
    let rest = url.strip_prefix("redis://").ok_or("--remote takes a redis:// URL")?;
    let host_port = rest.split('/').next().unwrap_or(rest);
    let host_port = host_port.rsplit('@').next().unwrap_or(host_port);
    std::net::ToSocketAddrs::to_socket_addrs(host_port)?
        .next()
        .ok_or_else(|| format!("cannot resolve {host_port}").into())
}

pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn scenario(name: String, runs: Vec<Run>) -> Scenario {
    Scenario {
        name,
        median_process_ms: median(runs.iter().map(|r| r.process_ms).collect()),
        min_process_ms: runs.iter().map(|r| r.process_ms).fold(f64::INFINITY, f64::min),
        max_process_ms: runs.iter().map(|r| r.process_ms).fold(f64::NEG_INFINITY, f64::max),
        process_ms: runs.iter().map(|r| r.process_ms).collect(),
        median_ms: median(runs.iter().map(|r| r.report.open_ms + r.report.suite_ms).collect()),
        median_open_ms: median(runs.iter().map(|r| r.report.open_ms).collect()),
        median_suite_ms: median(runs.iter().map(|r| r.report.suite_ms).collect()),
        compiles: runs.iter().map(|r| r.report.compiles).collect(),
        remote_hits: runs.iter().map(|r| r.report.remote_hits).collect(),
        correct: runs.iter().all(|r| r.report.correct),
    }
}

/// How a measured process reaches the remote.
enum Remote<'a> {
    None,
    /// Through `url`, with the lookup budget the environment gives.
    At(&'a str),
    /// Through `url`, with the default lookup budget (a failing remote, measured as shipped).
    Failing(&'a str),
}

/// Runs one measured process with its cache in `dir`; `keys` signs and is trusted; `trace`
/// names the timeline it writes, if any.
fn child(dir: &Path, remote: Remote<'_>, keys: &Keys, trace: Option<PathBuf>) -> CliResult<Run> {
    let mut env = vec![("SPARKLE_CACHE_READ_ONLY", "0".to_owned())];
    if let Some(trace) = trace {
        env.push(("SPARKLE_TRACE", trace.display().to_string()));
    }
    let url = match remote {
        Remote::None => String::new(),
        Remote::At(url) => url.to_owned(),
        Remote::Failing(url) => {
            env.push(("SPARKLE_CACHE_REMOTE_BUDGET_MS", String::new()));
            url.to_owned()
        }
    };
    if !url.is_empty() {
        env.push(("SPARKLE_CACHE_SIGNING_KEY", keys.secret.display().to_string()));
        env.push(("SPARKLE_CACHE_TRUSTED_KEYS", keys.public.clone()));
    }
    env.push(("SPARKLE_CACHE_REMOTE", url));
    let started = Instant::now();
    let report = spawn_child_with(Some(dir), DriverCache::Inside, &env)?;
    Ok(Run { report, process_ms: started.elapsed().as_secs_f64() * 1e3 })
}

/// The run's signing key: its file and its public half.
pub(crate) struct Keys {
    pub(crate) secret: PathBuf,
    pub(crate) public: String,
}

pub fn run(options: Options) -> CliResult<ExitCode> {
    if let Some(together) = options.together {
        return crate::bench_fleet_together::run(crate::bench_fleet_together::Options {
            together,
            rounds: options.rounds,
            remote: options.remote.as_deref(),
            json: options.json,
            json_out: options.json_out.as_deref(),
            trace_dir: options.trace_dir.as_deref(),
        });
    }
    let repeats = options.repeats.max(1);
    let scratch = tempfile::tempdir()?;
    let mut own = None;
    let target = match &options.remote {
        Some(url) => redis_addr(url)?,
        None => {
            let (server, addr) = start_redis()?;
            own = Some(server);
            addr
        }
    };
    let db = options.remote.as_deref().and_then(|url| url.rsplit('/').next()).unwrap_or("0").to_owned();
    let proxy = Proxy::start(target)?;
    let url = format!("redis://{}/{db}", proxy.addr());
    let dead = format!("redis://127.0.0.1:{}/0", free_port()?);
    // A remote that accepts connections and never answers.
    let hung_proxy = Proxy::start(target)?;
    hung_proxy.set_mode(Mode::Stall);
    let hung = format!("redis://{}/{db}", hung_proxy.addr());
    let secret = scratch.path().join("fleet.key");
    let public = sparkle::cache::remote::generate_key_file(&secret)
        .map_err(|err| format!("cannot make the run's signing key in {}: {err}", secret.display()))?;
    let keys = Keys { secret, public };
    let started = Instant::now();
    let step = |what: &str| eprintln!("{}", crate::progress::line(started.elapsed(), what));
    let fresh = |label: &str, i: usize| scratch.path().join(format!("{label}-{i}"));

    step("publishing: one cold run with the remote");
    flush(&url)?;
    if let Some(dir) = &options.trace_dir {
        std::fs::create_dir_all(dir)?;
    }
    let trace = |label: &str, i: usize| {
        options
            .trace_dir
            .as_ref()
            .map(|dir| dir.join(format!("{}-{i}.json", label.replace([' ', ',', '(', ')', '+'], ""))))
    };
    let publisher = child(&fresh("publisher", 0), Remote::At(&url), &keys, None)?;
    let hot = fresh("hot", 0);
    child(&hot, Remote::None, &keys, None)?;
    // Every repetition runs every scenario once, so that a drifting clock or a busy moment
    // lands on all of them alike.
    let mut names = vec!["cold".to_owned(), "warm".to_owned()];
    names.extend(options.latencies.iter().map(|latency| format!("fresh, remote warm (+{latency} ms)")));
    names.extend(
        ["cold, hung remote", "warm, hung remote", "cold, dead remote", "warm, dead remote"]
            .map(str::to_owned),
    );
    let mut runs: Vec<Vec<Run>> = names.iter().map(|_| Vec::new()).collect();
    for i in 0..repeats {
        step(&format!("repetition {} of {repeats}", i + 1));
        runs[0].push(child(&fresh("cold", i), Remote::None, &keys, trace(&names[0], i))?);
        runs[1].push(child(&hot, Remote::None, &keys, trace(&names[1], i))?);
        for (slot, &latency) in options.latencies.iter().enumerate() {
            proxy.set_mode(if latency == 0 {
                Mode::Pass
            } else {
                Mode::latency(Duration::from_millis(latency))
            });
            let (dir, traced) = (fresh(&format!("fresh-{latency}"), i), trace(&names[2 + slot], i));
            runs[2 + slot].push(child(&dir, Remote::At(&url), &keys, traced)?);
        }
        proxy.set_mode(Mode::Pass);
        let failing = 2 + options.latencies.len();
        let traced = |slot: usize| trace(&names[slot], i);
        runs[failing].push(child(&fresh("cold-hung", i), Remote::Failing(&hung), &keys, traced(failing))?);
        runs[failing + 1].push(child(&hot, Remote::Failing(&hung), &keys, traced(failing + 1))?);
        runs[failing + 2].push(child(
            &fresh("cold-dead", i),
            Remote::Failing(&dead),
            &keys,
            traced(failing + 2),
        )?);
        runs[failing + 3].push(child(&hot, Remote::Failing(&dead), &keys, traced(failing + 3))?);
    }
    let scenarios: Vec<Scenario> =
        names.into_iter().zip(runs).map(|(name, runs)| scenario(name, runs)).collect();
    drop(own);

    let find =
        |name: &str| scenarios.iter().find(|s| s.name == name).map_or(f64::NAN, |s| s.median_process_ms);
    let (cold, warm) = (find("cold"), find("warm"));
    let mut ratios: Vec<(String, f64)> = scenarios
        .iter()
        .filter(|s| s.name.starts_with("fresh"))
        .map(|s| (format!("{} / warm", s.name), s.median_process_ms / warm))
        .collect();
    ratios.push(("cold / warm".into(), cold / warm));
    // What a scenario costs over its twin without a remote: the median of the repetitions'
    // differences (each repetition runs both), not the difference of the medians. A cold
    // process's own time spreads over hundreds of ms on llvmpipe (its first dispatches compile
    // the kernels), so two medians of different runs differ by more than the remote costs.
    let runs_of = |name: &str| scenarios.iter().find(|s| s.name == name).map(|s| s.process_ms.as_slice());
    let paired = |name: &str, twin: &str| match (runs_of(name), runs_of(twin)) {
        (Some(runs), Some(twins)) => median(runs.iter().zip(twins).map(|(run, twin)| run - twin).collect()),
        _ => f64::NAN,
    };
    let mut over_ms: Vec<(String, f64)> = scenarios
        .iter()
        .filter(|s| s.name.starts_with("fresh"))
        .map(|s| (format!("{} - cold", s.name), paired(&s.name, "cold")))
        .collect();
    for (name, twin, twin_ms) in [
        ("cold, hung remote", "cold", cold),
        ("warm, hung remote", "warm", warm),
        ("cold, dead remote", "cold", cold),
        ("warm, dead remote", "warm", warm),
    ] {
        ratios.push((format!("{name} / {twin}"), find(name) / twin_ms));
        over_ms.push((format!("{name} - {twin}"), paired(name, twin)));
    }
    let report = Report {
        method: "wall time of whole fresh processes, from their spawn to their exit (remote connection, \
                 driver-cache fetch and the publishes waited for at the end included), and from before the \
                 backend opens until the suite's first results are on the host; a signed fleet (one key signs \
                 and is trusted); every repetition runs every scenario once, in turn; median of the repetitions",
        scenarios,
        ratios,
        over_ms,
    };
    let all_correct = publisher.report.correct && report.scenarios.iter().all(|s| s.correct);
    if let Some(path) = &options.json_out {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
    }
    if options.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("Fleet cache, {} runs per scenario ({}):", repeats, report.method);
        println!(
            "{:<34} {:>11} {:>17} {:>10} {:>10} {:>10}  {:<16} remote hits",
            "scenario", "process ms", "(min-max)", "total ms", "open ms", "suite ms", "compiles"
        );
        for s in &report.scenarios {
            println!(
                "{:<34} {:>11.2} {:>17} {:>10.2} {:>10.2} {:>10.2}  {:<16} {:?}{}",
                s.name,
                s.median_process_ms,
                format!("({:.1}-{:.1})", s.min_process_ms, s.max_process_ms),
                s.median_ms,
                s.median_open_ms,
                s.median_suite_ms,
                format!("{:?}", s.compiles),
                s.remote_hits,
                if s.correct { "" } else { "  WRONG RESULTS" }
            );
        }
        for (name, ratio) in &report.ratios {
            println!("{name:<44} {ratio:.3}");
        }
        println!(
            "\nCost over the same process without a remote, median of the repetitions' differences (target: at \
             most one lookup budget, 50 ms):"
        );
        for (name, ms) in &report.over_ms {
            println!("{name:<44} {ms:+.1} ms");
        }
    }
    Ok(if all_correct { ExitCode::SUCCESS } else { ExitCode::from(sparkle_cli::WRONG_RESULT) })
}

/// Empties the remote's database, so that "remote warm" holds exactly what the publisher put.
pub(crate) fn flush(url: &str) -> CliResult<()> {
    let client = redis::Client::open(url)?;
    let mut connection = client.get_connection_with_timeout(Duration::from_secs(5))?;
    redis::cmd("FLUSHDB").query::<()>(&mut connection)?;
    Ok(())
}

/// A signed fleet on a Redis server this command started, for other benchmarks
/// (`bench-startup`'s warm-from-fleet scenario).
pub struct WarmFleet {
    _server: OwnRedis,
    _dir: tempfile::TempDir,
    url: String,
    keys: Keys,
}

impl WarmFleet {
    /// Starts `redis-server` on 127.0.0.1 and makes a signing key that processes both sign
    /// with and trust.
    pub fn start() -> CliResult<WarmFleet> {
        let (server, addr) = start_redis()?;
        let dir = tempfile::tempdir()?;
        let secret = dir.path().join("fleet.key");
        let public = sparkle::cache::remote::generate_key_file(&secret)
            .map_err(|err| format!("cannot make a signing key in {}: {err}", secret.display()))?;
        Ok(WarmFleet {
            _server: server,
            _dir: dir,
            url: format!("redis://{addr}/0"),
            keys: Keys { secret, public },
        })
    }

    /// Empties the store.
    pub fn flush(&self) -> CliResult<()> {
        flush(&self.url)
    }

    /// The environment of a process that uses this fleet.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("SPARKLE_CACHE_REMOTE", self.url.clone()),
            ("SPARKLE_CACHE_SIGNING_KEY", self.keys.secret.display().to_string()),
            ("SPARKLE_CACHE_TRUSTED_KEYS", self.keys.public.clone()),
        ]
    }
}
