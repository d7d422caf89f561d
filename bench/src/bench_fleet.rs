//! `sparkle-bench bench-fleet`: what the fleet cache gives a fresh machine, in fresh processes that
//! each open the backend and get the suite's first results (`bench-child`), timed from before
//! the backend opens — the remote tier's connection and the driver-cache fetch happen there —
//! until the last result is on the host:
//!
//! - `cold`: empty local cache, no remote; `warm`: the local cache hot, no remote;
//! - `fresh, remote warm (+N ms)`: an empty local cache on a "new machine", a remote that holds
//!   every program and the driver's cache, reached through a proxy adding N ms to each answer;
//! - `cold, dead remote` and `warm, dead remote`: a remote URL where nothing listens, against
//!   the same runs without one.
//!
//! Every repetition runs every scenario once, in turn, so that drift lands on all of them alike.
//!
//! The remote is a Redis server: the one `--remote` names, else a `redis-server` this command
//! starts on 127.0.0.1 (found on PATH or in SPARKLE_REDIS_SERVER) and stops at the end. Programs
//! run where their cache says; the driver's cache lives inside Sparkle's (as for a user who set
//! no driver variable), so that it travels.

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
    /// `redis-server` on 127.0.0.1.
    #[arg(long)]
    remote: Option<String>,
    /// Added latencies to measure, in ms.
    #[arg(long, value_delimiter = ',', default_value = "0,20,200")]
    latencies: Vec<u64>,
    #[arg(long)]
    json: bool,
    /// Also write the JSON report here.
    #[arg(long)]
    json_out: Option<PathBuf>,
}

impl Options {
    /// The defaults, with `repeats` runs per scenario (for `bench --fleet`).
    pub fn with_repeats(repeats: usize, json: bool) -> Options {
        Options { repeats, remote: None, latencies: vec![0, 20, 200], json, json_out: None }
    }
}

#[derive(Serialize)]
struct Scenario {
    name: String,
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
    /// Scenario name over `warm` or over its no-remote twin.
    ratios: Vec<(String, f64)>,
}

/// A Redis server this command started; stopped when dropped.
struct OwnRedis {
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

fn start_redis() -> CliResult<(OwnRedis, SocketAddr)> {
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

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn scenario(name: String, runs: Vec<ChildReport>) -> Scenario {
    Scenario {
        name,
        median_ms: median(runs.iter().map(|r| r.open_ms + r.suite_ms).collect()),
        median_open_ms: median(runs.iter().map(|r| r.open_ms).collect()),
        median_suite_ms: median(runs.iter().map(|r| r.suite_ms).collect()),
        compiles: runs.iter().map(|r| r.compiles).collect(),
        remote_hits: runs.iter().map(|r| r.remote_hits).collect(),
        correct: runs.iter().all(|r| r.correct),
    }
}

fn child(dir: &Path, remote: Option<&str>) -> CliResult<ChildReport> {
    let mut env = vec![("SPARKLE_CACHE_READ_ONLY", "0".to_owned())];
    match remote {
        Some(url) => env.push(("SPARKLE_CACHE_REMOTE", url.to_owned())),
        None => env.push(("SPARKLE_CACHE_REMOTE", String::new())),
    }
    spawn_child_with(Some(dir), DriverCache::Inside, &env)
}

pub fn run(options: Options) -> CliResult<ExitCode> {
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
    let started = Instant::now();
    let step = |what: &str| eprintln!("{}", crate::progress::line(started.elapsed(), what));
    let fresh = |label: &str, i: usize| scratch.path().join(format!("{label}-{i}"));

    step("publishing: one cold run with the remote");
    flush(&url)?;
    let publisher = child(&fresh("publisher", 0), Some(&url))?;
    let hot = fresh("hot", 0);
    child(&hot, None)?;
    // Every repetition runs every scenario once, so that a drifting clock or a busy moment
    // lands on all of them alike.
    let mut names = vec!["cold".to_owned(), "warm".to_owned()];
    names.extend(options.latencies.iter().map(|latency| format!("fresh, remote warm (+{latency} ms)")));
    names.extend(["cold, dead remote".to_owned(), "warm, dead remote".to_owned()]);
    let mut runs: Vec<Vec<ChildReport>> = names.iter().map(|_| Vec::new()).collect();
    for i in 0..repeats {
        step(&format!("repetition {} of {repeats}", i + 1));
        runs[0].push(child(&fresh("cold", i), None)?);
        runs[1].push(child(&hot, None)?);
        for (slot, &latency) in options.latencies.iter().enumerate() {
            proxy.set_mode(if latency == 0 {
                Mode::Pass
            } else {
                Mode::latency(Duration::from_millis(latency))
            });
            runs[2 + slot].push(child(&fresh(&format!("fresh-{latency}"), i), Some(&url))?);
        }
        proxy.set_mode(Mode::Pass);
        let dead_slot = 2 + options.latencies.len();
        runs[dead_slot].push(child(&fresh("cold-dead", i), Some(&dead))?);
        runs[dead_slot + 1].push(child(&hot, Some(&dead))?);
    }
    let scenarios: Vec<Scenario> =
        names.into_iter().zip(runs).map(|(name, runs)| scenario(name, runs)).collect();
    drop(own);

    let find = |name: &str| scenarios.iter().find(|s| s.name == name).map_or(f64::NAN, |s| s.median_ms);
    let warm = find("warm");
    let mut ratios: Vec<(String, f64)> = scenarios
        .iter()
        .filter(|s| s.name.starts_with("fresh"))
        .map(|s| (format!("{} / warm", s.name), s.median_ms / warm))
        .collect();
    ratios.push(("cold / warm".into(), find("cold") / warm));
    ratios.push(("cold, dead remote / cold".into(), find("cold, dead remote") / find("cold")));
    ratios.push(("warm, dead remote / warm".into(), find("warm, dead remote") / warm));
    let report = Report {
        method:
            "wall time of fresh processes from before the backend opens (remote connection and driver-cache \
                 fetch included) until the suite's first results are on the host; every repetition runs every \
                 scenario once, in turn; median of the repetitions",
        scenarios,
        ratios,
    };
    let all_correct = publisher.correct && report.scenarios.iter().all(|s| s.correct);
    if let Some(path) = &options.json_out {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
    }
    if options.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("Fleet cache, {} runs per scenario ({}):", repeats, report.method);
        println!(
            "{:<34} {:>10} {:>10} {:>10}  {:<16} remote hits",
            "scenario", "total ms", "open ms", "suite ms", "compiles"
        );
        for s in &report.scenarios {
            println!(
                "{:<34} {:>10.2} {:>10.2} {:>10.2}  {:<16} {:?}{}",
                s.name,
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
    }
    Ok(if all_correct { ExitCode::SUCCESS } else { ExitCode::from(sparkle_cli::WRONG_RESULT) })
}

/// Empties the remote's database, so that "remote warm" holds exactly what the publisher put.
fn flush(url: &str) -> CliResult<()> {
    let client = redis::Client::open(url)?;
    let mut connection = client.get_connection_with_timeout(Duration::from_secs(5))?;
    redis::cmd("FLUSHDB").query::<()>(&mut connection)?;
    Ok(())
}
