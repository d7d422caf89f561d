//! `sparkle-bench bench-startup`: what a process pays to start, in fresh processes timed from
//! their `main`, with N = 1, 100 and 1,000 distinct kernels.
//!
//! Each measured process (`startup-child`) opens the runtime (`Runtime::from_env`, its steps as
//! [`Runtime::open_timings`](sparkle::Runtime::open_timings) reports them), gets the suite's
//! three kernels (saxpy, sgemm, conv2d) and their first results checked against the CPU, then
//! N generated kernels — op chains that differ in code, not in a define — and their first
//! results, all checked. It reports each point since `main`: open, suite results, programs,
//! results. Scenarios, per N:
//!
//! - `cold`: an empty cache folder (the driver's shader cache inside it, empty too);
//! - `warm`: the same folder again;
//! - `fleet`: an empty local folder and a remote that holds everything (Redis started on
//!   127.0.0.1; with the `remote` feature and a `redis-server`), signed.
//!
//! Beside them, a process that only opens a plain EGL context the way the gl backend finds its
//! device (list the devices, initialize the display, create a core context, make it current,
//! load the GL functions): the driver's floor for an open. With `--compile-threads 1,2,4,8`,
//! the cold N-kernel runs are repeated with that many programs compiling at once
//! (`SPARKLE_PARALLEL_COMPILES`), asked for through `Runtime::warm_up`.
//!
//! Every repetition runs every scenario once, in turn, so that drift lands on all alike; the
//! report gives medians and the spread (min–max).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::OnceLock;
use std::time::Instant;

use clap::Args;
use serde::{Deserialize, Serialize};
use sparkle::suite;
use sparkle::{Access, Arg, BufferUsage, KernelSpec, Runtime, ScalarType};
use sparkle_cli::{table, CliResult, WRONG_RESULT};

/// When this process's `main` began.
static MAIN_STARTED: OnceLock<Instant> = OnceLock::new();

/// Marks the start of `main`; the child's times are measured from here.
pub fn mark_main() {
    MAIN_STARTED.get_or_init(Instant::now);
}

fn since_main_ms() -> f64 {
    MAIN_STARTED.get_or_init(Instant::now).elapsed().as_secs_f64() * 1e3
}

#[derive(Args)]
pub struct Options {
    /// Numbers of distinct generated kernels, besides the suite's three.
    #[arg(long, value_delimiter = ',', default_value = "1,100,1000")]
    kernels: Vec<usize>,
    /// Repetitions of each scenario (medians and spread are reported).
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Programs compiling at once in extra cold runs (SPARKLE_PARALLEL_COMPILES), e.g. 1,2,4,8.
    #[arg(long, value_delimiter = ',')]
    compile_threads: Vec<usize>,
    /// Also run the peers, cold and warm, timed the same way: CuPy's RawKernel with its disk
    /// cache through `python3 bench/scripts/startup_peers.py` (or
    /// SPARKLE_STARTUP_PEERS_SCRIPT), and wgpu on Vulkan with its PipelineCache kept in a file
    /// when SPARKLE_WGPU_PEER names the binary of `bench/peers/wgpu-startup`.
    #[arg(long)]
    peers: bool,
    /// Also start this many processes at once, on one shared cache folder and then on a
    /// folder each (cold, N kernels each): compiles between them and each one's first results.
    #[arg(long, default_value_t = 0)]
    together: usize,
    /// Skip the fleet scenario.
    #[arg(long)]
    no_fleet: bool,
    /// Ask for the generated programs one by one (`Runtime::program`) instead of together
    /// (`Runtime::warm_up`).
    #[arg(long)]
    one_by_one: bool,
    #[arg(long)]
    json: bool,
    /// Also write the JSON report here.
    #[arg(long)]
    json_out: Option<PathBuf>,
}

/// What one measured process reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChildReport {
    /// The device it opened.
    #[serde(default)]
    device: String,
    /// `main` to the runtime opened (or to the plain context current).
    open_since_main_ms: f64,
    /// `Runtime::from_env` alone.
    open_ms: f64,
    /// The open's steps: (name, ms).
    phases: Vec<(String, f64)>,
    /// `main` to the suite's three results on the host, checked.
    suite_since_main_ms: f64,
    /// The generated kernels' programs, from asking to having them all.
    programs_ms: f64,
    /// `main` to every generated kernel's result on the host, checked.
    done_since_main_ms: f64,
    compiles: u64,
    disk_hits: u64,
    remote_hits: u64,
    correct: bool,
    problems: Vec<String>,
}

/// The measured process: `mode` is `sparkle` or `plain-egl`.
pub fn child(mode: &str, kernels: usize, one_by_one: bool) -> CliResult<ExitCode> {
    let report = match mode {
        "plain-egl" => plain_egl()?,
        _ => sparkle_child(kernels, one_by_one)?,
    };
    println!("{}", serde_json::to_string(&report)?);
    Ok(if report.correct { ExitCode::SUCCESS } else { ExitCode::from(WRONG_RESULT) })
}

fn plain_egl() -> CliResult<ChildReport> {
    let started = Instant::now();
    let context = sparkle::gl::PlainContext::open_from_env()?;
    let open_ms = started.elapsed().as_secs_f64() * 1e3;
    let since_main = since_main_ms();
    let device = context.source().to_owned();
    context.close();
    Ok(ChildReport {
        device,
        open_since_main_ms: since_main,
        open_ms,
        phases: Vec::new(),
        suite_since_main_ms: 0.0,
        programs_ms: 0.0,
        done_since_main_ms: since_main,
        compiles: 0,
        disk_hits: 0,
        remote_hits: 0,
        correct: true,
        problems: Vec::new(),
    })
}

fn sparkle_child(kernels: usize, one_by_one: bool) -> CliResult<ChildReport> {
    let runtime = Runtime::from_env()?;
    let open_since_main_ms = since_main_ms();
    let timings = runtime.open_timings();
    let mut problems = Vec::new();

    // The suite's three kernels, as a program's first work.
    let cases = crate::bench::first_result_cases();
    let specs: Vec<KernelSpec> = cases.iter().map(|case| case.spec()).collect();
    let programs = runtime.warm_up(&specs)?;
    let mut results = Vec::with_capacity(cases.len());
    for (case, program) in cases.iter().zip(&programs) {
        let buffers = case.upload_for(&runtime, program)?;
        case.dispatch(&runtime, program, &buffers)?.wait(suite::DISPATCH_TIMEOUT)?;
        results.push(case.download(&runtime, &buffers)?);
    }
    let suite_since_main_ms = since_main_ms();
    // The references are computed after the clock: a program has its own.
    for ((case, spec), got) in cases.iter().zip(&specs).zip(&results) {
        let (want, tolerance) = case.reference(spec);
        let verdict = suite::verify(got, &want, &tolerance);
        if !verdict.passed() {
            problems.push(format!("{}: {verdict}", case.describe()));
        }
    }

    // N generated kernels, each writing its own 64 results.
    let generated: Vec<Chain> = (0..kernels).map(Chain::new).collect();
    let specs: Vec<KernelSpec> = generated.iter().map(Chain::spec).collect();
    let started = Instant::now();
    let programs = if one_by_one {
        specs.iter().map(|spec| runtime.program(spec)).collect::<sparkle::Result<Vec<_>>>()?
    } else {
        runtime.warm_up(&specs)?
    };
    let programs_ms = started.elapsed().as_secs_f64() * 1e3;
    let input: Vec<f32> = (0..LANES).map(|i| i as f32 / LANES as f32 * 4.0 - 2.0).collect();
    let input_buffer = runtime.upload(&input, BufferUsage::Input)?;
    let output = runtime.upload(&vec![0f32; LANES * kernels.max(1)], BufferUsage::InOut)?;
    let mut last = None;
    for (index, program) in programs.iter().enumerate() {
        let range =
            Arg::Range { buffer: &output, offset: (index * LANES * 4) as u64, len: (LANES * 4) as u64 };
        last = Some(runtime.dispatch(
            program,
            &[Arg::Buffer(&input_buffer), range, Arg::U32(LANES as u32)],
            [1, 1, 1],
        )?);
    }
    if let Some(last) = last {
        last.wait(suite::DISPATCH_TIMEOUT)?;
    }
    let got: Vec<f32> = runtime.download(&output)?;
    let done_since_main_ms = since_main_ms();
    for (index, chain) in generated.iter().enumerate() {
        for (lane, &x) in input.iter().enumerate() {
            let want = chain.eval(x);
            let have = got[index * LANES + lane];
            if (want - have).abs() > 1e-3 * want.abs().max(1.0) {
                problems.push(format!("kernel {index} lane {lane}: {have} where the CPU gives {want}"));
                break;
            }
        }
    }
    let stats = runtime.cache_stats();
    Ok(ChildReport {
        device: runtime.info().name.clone(),
        open_since_main_ms,
        open_ms: timings.total.as_secs_f64() * 1e3,
        phases: timings
            .phases
            .iter()
            .map(|phase| (phase.name.to_string(), phase.duration.as_secs_f64() * 1e3))
            .collect(),
        suite_since_main_ms,
        programs_ms,
        done_since_main_ms,
        compiles: stats.compiles,
        disk_hits: stats.disk_hits,
        remote_hits: stats.remote_hits,
        correct: problems.is_empty(),
        problems,
    })
}

/// Work-items (and results) per generated kernel.
const LANES: usize = 64;

/// The steps a generated kernel chains; kernel i takes the digits of i in base 8. Each keeps
/// |x| <= 2 (so that sin and cos stay where every driver is accurate) and none jumps (a fused
/// multiply-add on the GPU must not land on the other side of a step).
/// A step's GLSL and the same on the CPU.
type Step = (&'static str, fn(f32) -> f32);

const STEPS: [Step; 8] = [
    ("x = x * 0.75 + 0.25;", |x| x * 0.75 + 0.25),
    ("x = sin(x);", f32::sin),
    ("x = sqrt(abs(x) + 1.0);", |x| (x.abs() + 1.0).sqrt()),
    ("x = x * 0.5 + 0.125 * x * x;", |x| x * 0.5 + 0.125 * x * x),
    ("x = max(x, 0.5) * 0.75;", |x| x.max(0.5) * 0.75),
    ("x = x * x * 0.5 - 0.5;", |x| x * x * 0.5 - 0.5),
    ("x = cos(x) * 1.5;", |x| x.cos() * 1.5),
    ("x = clamp(x, -1.0, 1.0) + 0.125;", |x| x.clamp(-1.0, 1.0) + 0.125),
];

/// The GLSL the gl backend compiles for generated kernel `index` (for the plain-GL compile study).
pub fn generated_glsl(index: usize) -> String {
    sparkle::gl::driver_glsl(&Chain::new(index).spec())
        .unwrap_or_else(|err| panic!("a generated kernel is valid: {err}"))
}

/// One generated kernel: a chain of steps, and a constant of its own added last.
struct Chain {
    index: usize,
    steps: Vec<usize>,
}

impl Chain {
    fn new(index: usize) -> Chain {
        // Five base-8 digits: 32,768 distinct chains.
        let steps = (0..5).map(|digit| (index >> (3 * digit)) & 7).collect();
        Chain { index, steps }
    }

    fn constant(&self) -> f32 {
        (self.index % 997) as f32 / 1024.0
    }

    fn spec(&self) -> KernelSpec {
        let body: String =
            self.steps.iter().map(|&step| STEPS[step].0).collect::<Vec<_>>().join("\n        ");
        let source = format!(
            "layout(std430, binding = 0) readonly buffer In {{ float xs[]; }};
layout(std430, binding = 1) buffer Out {{ float ys[]; }};
uniform uint n;
void main() {{
    uint i = gl_GlobalInvocationID.x;
    if (i < n) {{
        float x = xs[i];
        {body}
        ys[i] = x + {:.10};
    }}
}}
",
            self.constant()
        );
        KernelSpec::new(format!("chain{}", self.index), [LANES as u32, 1, 1])
            .glsl(source)
            .storage("xs", Access::ReadOnly)
            .storage("ys", Access::ReadWrite)
            .scalar("n", ScalarType::U32)
    }

    fn eval(&self, mut x: f32) -> f32 {
        for &step in &self.steps {
            x = STEPS[step].1(x);
        }
        x + self.constant()
    }
}

/// One scenario's runs.
#[derive(Serialize)]
struct Scenario {
    name: String,
    kernels: usize,
    runs: Vec<ChildReport>,
    /// The whole process, spawn to exit, per run (ms).
    process_ms: Vec<f64>,
}

#[derive(Serialize)]
struct Report {
    device: String,
    scenarios: Vec<Scenario>,
}

/// `count` cold processes started at once, with their cache in `dirs(i)`: each one's report and
/// whole time.
fn spawn_together(
    count: usize,
    kernels: usize,
    dirs: impl Fn(usize) -> std::path::PathBuf,
) -> CliResult<Vec<(ChildReport, f64)>> {
    let children: Vec<_> = (0..count)
        .map(|i| {
            let dir = dirs(i);
            std::fs::create_dir_all(&dir)?;
            let env = cache_env(&dir);
            Ok(std::thread::spawn(move || {
                spawn("sparkle", kernels, false, &env).map_err(|err| err.to_string())
            }))
        })
        .collect::<CliResult<_>>()?;
    children
        .into_iter()
        .map(|child| match child.join() {
            Ok(result) => result.map_err(Into::into),
            Err(_) => Err("a thread running a startup process panicked".into()),
        })
        .collect()
}

fn spawn(
    mode: &str,
    kernels: usize,
    one_by_one: bool,
    env: &[(&str, String)],
) -> CliResult<(ChildReport, f64)> {
    let mut command = Command::new(std::env::current_exe()?);
    command.args(["startup-child", "--mode", mode, "--kernels", &kernels.to_string()]);
    if one_by_one {
        command.arg("--one-by-one");
    }
    command.envs(env.iter().map(|(name, value)| (*name, value.as_str())));
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit());
    let started = Instant::now();
    let output = command.output()?;
    let process_ms = started.elapsed().as_secs_f64() * 1e3;
    let report: ChildReport = serde_json::from_slice(&output.stdout).map_err(|err| {
        format!("a startup process printed no report ({err}); it exited with {}", output.status)
    })?;
    Ok((report, process_ms))
}

/// What a peer's process reported, as a [`ChildReport`].
#[derive(Deserialize)]
struct PeerReport {
    skipped: Option<String>,
    #[serde(default)]
    open_since_main_ms: f64,
    #[serde(default)]
    programs_ms: f64,
    #[serde(default)]
    done_since_main_ms: f64,
    #[serde(default)]
    correct: bool,
    #[serde(default)]
    problems: Vec<String>,
}

/// One run of a peer in a fresh process with its cache in `dir`; `None` when the peer is not
/// installed (said once).
fn peer(name: &str, kernels: usize, dir: &Path) -> CliResult<Option<(ChildReport, f64)>> {
    let script = std::env::var("SPARKLE_STARTUP_PEERS_SCRIPT")
        .unwrap_or_else(|_| "bench/scripts/startup_peers.py".to_owned());
    let mut command = Command::new("python3");
    command.args([script.as_str(), name, "--kernels", &kernels.to_string()]).env("CUPY_CACHE_DIR", dir);
    run_peer(name, command)
}

/// Runs one peer process and reads its report.
fn run_peer(name: &str, mut command: Command) -> CliResult<Option<(ChildReport, f64)>> {
    let started = Instant::now();
    let output = command
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|err| format!("cannot run the {name} peer: {err}"))?;
    let process_ms = started.elapsed().as_secs_f64() * 1e3;
    let report: PeerReport = serde_json::from_slice(&output.stdout).map_err(|err| {
        format!("the {name} peer printed no report ({err}); it exited with {}", output.status)
    })?;
    if let Some(why) = report.skipped {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| progress(&format!("{name} skipped: {why}")));
        return Ok(None);
    }
    let child = ChildReport {
        device: name.to_owned(),
        open_since_main_ms: report.open_since_main_ms,
        open_ms: report.open_since_main_ms,
        phases: Vec::new(),
        suite_since_main_ms: 0.0,
        programs_ms: report.programs_ms,
        done_since_main_ms: report.done_since_main_ms,
        compiles: 0,
        disk_hits: 0,
        remote_hits: 0,
        correct: report.correct,
        problems: report.problems,
    };
    Ok(Some((child, process_ms)))
}

fn cache_env(dir: &Path) -> Vec<(&'static str, String)> {
    vec![("SPARKLE_CACHE_DIR", dir.display().to_string())]
}

/// `sparkle-bench bench-startup`.
pub fn run(options: Options) -> CliResult<ExitCode> {
    // This process opens no device: a GL context lives as long as its process, and one held
    // here would spare the measured processes the GPU's start-up (on a GPU without persistence
    // mode, the first process to use it pays for initializing it, as a user's would).
    let scratch = tempfile::tempdir()?;
    let mut scenarios: Vec<Scenario> = Vec::new();
    let mut record = |name: String, kernels: usize, (report, process_ms): (ChildReport, f64)| match scenarios
        .iter_mut()
        .find(|s| s.name == name && s.kernels == kernels)
    {
        Some(scenario) => {
            scenario.runs.push(report);
            scenario.process_ms.push(process_ms);
        }
        None => scenarios.push(Scenario { name, kernels, runs: vec![report], process_ms: vec![process_ms] }),
    };
    #[cfg(feature = "remote")]
    let fleet = if options.no_fleet { None } else { crate::bench_fleet::WarmFleet::start().ok() };
    for repeat in 0..options.repeats.max(1) {
        progress(&format!("repetition {} of {}", repeat + 1, options.repeats.max(1)));
        record("plain EGL open".into(), 0, spawn("plain-egl", 0, false, &[])?);
        for &kernels in &options.kernels {
            let dir = scratch.path().join(format!("r{repeat}-n{kernels}"));
            std::fs::create_dir_all(&dir)?;
            record("cold".into(), kernels, spawn("sparkle", kernels, options.one_by_one, &cache_env(&dir))?);
            record("warm".into(), kernels, spawn("sparkle", kernels, options.one_by_one, &cache_env(&dir))?);
            for &threads in &options.compile_threads {
                let dir = scratch.path().join(format!("r{repeat}-n{kernels}-t{threads}"));
                std::fs::create_dir_all(&dir)?;
                let mut env = cache_env(&dir);
                env.push(("SPARKLE_PARALLEL_COMPILES", threads.to_string()));
                record(format!("cold, {threads} at once"), kernels, spawn("sparkle", kernels, false, &env)?);
            }
            if options.peers {
                let dir = scratch.path().join(format!("r{repeat}-n{kernels}-cupy"));
                std::fs::create_dir_all(&dir)?;
                for name in ["CuPy cold", "CuPy warm"] {
                    match peer("cupy", kernels, &dir) {
                        Ok(Some(run)) => record(name.into(), kernels, run),
                        Ok(None) => {}
                        Err(err) => progress(&format!("{name} skipped: {err}")),
                    }
                }
                if let Some(binary) = std::env::var_os("SPARKLE_WGPU_PEER") {
                    let cache = dir.join("wgpu-pipeline.cache");
                    for name in ["wgpu cold", "wgpu warm"] {
                        let mut command = Command::new(&binary);
                        command.args(["--kernels", &kernels.to_string(), "--cache"]).arg(&cache);
                        // The driver's own cache in the same folder, empty at first as for the others.
                        command.env("__GL_SHADER_DISK_CACHE_PATH", &dir);
                        match run_peer("wgpu", command) {
                            Ok(Some(run)) => record(name.into(), kernels, run),
                            Ok(None) => {}
                            // A peer that cannot run here is said, not a failed benchmark.
                            Err(err) => progress(&format!("{name} skipped: {err}")),
                        }
                    }
                }
            }
            if options.together > 1 {
                let shared = scratch.path().join(format!("r{repeat}-n{kernels}-together"));
                let runs = spawn_together(options.together, kernels, |_| shared.clone())?;
                let name = format!("{} together, one folder", options.together);
                runs.into_iter().for_each(|run| record(name.clone(), kernels, run));
                let own = |i: usize| scratch.path().join(format!("r{repeat}-n{kernels}-own-{i}"));
                let runs = spawn_together(options.together, kernels, own)?;
                let name = format!("{} together, a folder each", options.together);
                runs.into_iter().for_each(|run| record(name.clone(), kernels, run));
            }
            #[cfg(feature = "remote")]
            if let Some(fleet) = &fleet {
                // The remote is filled by a first process (its publishes end before it exits),
                // then a "new machine" starts from it.
                let filler = scratch.path().join(format!("r{repeat}-n{kernels}-filler"));
                let fresh = scratch.path().join(format!("r{repeat}-n{kernels}-fresh"));
                std::fs::create_dir_all(&filler)?;
                std::fs::create_dir_all(&fresh)?;
                fleet.flush()?;
                let mut env = cache_env(&filler);
                env.extend(fleet.env());
                spawn("sparkle", kernels, options.one_by_one, &env)?;
                let mut env = cache_env(&fresh);
                env.extend(fleet.env());
                record("fleet".into(), kernels, spawn("sparkle", kernels, options.one_by_one, &env)?);
            }
        }
    }
    let device = scenarios
        .iter()
        .flat_map(|s| &s.runs)
        .find(|r| !r.device.is_empty() && !r.phases.is_empty())
        .map_or_else(String::new, |r| r.device.clone());
    let report = Report { device, scenarios };
    if let Some(path) = &options.json_out {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
    }
    let correct = report.scenarios.iter().all(|s| s.runs.iter().all(|r| r.correct));
    if options.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    for scenario in &report.scenarios {
        for run in scenario.runs.iter().filter(|r| !r.correct) {
            eprintln!("WRONG: {} N={}: {}", scenario.name, scenario.kernels, run.problems.join("; "));
        }
    }
    Ok(if correct { ExitCode::SUCCESS } else { ExitCode::from(WRONG_RESULT) })
}

fn progress(text: &str) {
    eprintln!("bench-startup: {text}");
}

/// "median (min–max)".
fn spread(values: impl Iterator<Item = f64>) -> String {
    let mut values: Vec<f64> = values.collect();
    if values.is_empty() {
        return "-".into();
    }
    values.sort_by(f64::total_cmp);
    let median = values[values.len() / 2];
    format!("{median:.1} ({:.1}–{:.1})", values[0], values[values.len() - 1])
}

fn print_report(report: &Report) {
    println!("Startup on {}, fresh processes, ms since main: median (min–max)\n", report.device);
    let rows: Vec<Vec<String>> = report
        .scenarios
        .iter()
        .map(|s| {
            let per_program = |r: &ChildReport| r.programs_ms / s.kernels.max(1) as f64;
            vec![
                s.name.clone(),
                s.kernels.to_string(),
                spread(s.runs.iter().map(|r| r.open_ms)),
                spread(s.runs.iter().map(|r| r.open_since_main_ms)),
                spread(s.runs.iter().map(|r| r.suite_since_main_ms)),
                spread(s.runs.iter().map(|r| r.programs_ms)),
                spread(s.runs.iter().map(per_program)),
                spread(s.runs.iter().map(|r| r.done_since_main_ms)),
                spread(s.process_ms.iter().copied()),
                spread(s.runs.iter().map(|r| r.compiles as f64)),
            ]
        })
        .collect();
    println!(
        "{}",
        table::render(
            &[
                "scenario",
                "N",
                "open",
                "open since main",
                "suite results",
                "N programs",
                "per program",
                "all results",
                "process",
                "compiles",
            ],
            &rows
        )
    );
    // Processes started together: what they compiled between them, per round.
    for scenario in report.scenarios.iter().filter(|s| s.name.contains("together")) {
        let per_round: usize = scenario.name.split(' ').next().and_then(|n| n.parse().ok()).unwrap_or(1);
        let rounds = scenario.runs.chunks(per_round);
        let compiles: Vec<String> =
            rounds.clone().map(|r| r.iter().map(|x| x.compiles).sum::<u64>().to_string()).collect();
        let slowest: Vec<String> = rounds
            .map(|r| format!("{:.0}", r.iter().map(|x| x.done_since_main_ms).fold(0.0, f64::max)))
            .collect();
        println!(
            "{}, N = {} (+ the suite's 3): compiles per round {}; slowest process's results, ms since main: {}",
            scenario.name,
            scenario.kernels,
            compiles.join(", "),
            slowest.join(", ")
        );
    }
    // The open's steps, warm N = first, median per step.
    if let Some(warm) = report.scenarios.iter().find(|s| s.name == "warm") {
        let mut names: Vec<&str> = Vec::new();
        for run in &warm.runs {
            for (name, _) in &run.phases {
                if !names.contains(&name.as_str()) {
                    names.push(name);
                }
            }
        }
        let rows: Vec<Vec<String>> = names
            .iter()
            .map(|name| {
                let values = warm
                    .runs
                    .iter()
                    .filter_map(|r| r.phases.iter().find(|(n, _)| n == name).map(|(_, ms)| *ms));
                vec![(*name).to_owned(), spread(values)]
            })
            .collect();
        println!(
            "\nThe open's steps (warm, N = {}):\n{}",
            warm.kernels,
            table::render(&["step", "ms"], &rows)
        );
    }
}
