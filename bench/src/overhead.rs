//! `sparkle-bench bench-overhead`: what the gl backend costs over a plain glow loop making the same GL
//! calls on its own context on the same device ([`plain_gl::baseline`](crate::plain_gl)), measured side by side
//! in one process:
//! - per-dispatch cost of many small dispatches issued without waiting (Sparkle: one submission
//!   per dispatch, and all of them recorded into one submission; plain: the calls in a loop);
//! - dispatch → result round trip: one small saxpy, wait, read back (median), with `y` a device
//!   buffer and with `y` a `BufferUsage::Staging` buffer;
//! - program switch: the one-submission loop alternating two programs against the same loop with
//!   one program, per switch;
//! - with `--peers`, PyTorch on the same GPU: its tiny-op stream (`x.add_(1.0)`, one synchronize
//!   at the end) and its round trips (`add_` then `.item()`; `add_` then `.cpu()` of the same
//!   1024 floats), timed on the wall clock as Sparkle's side is (`bench/scripts/overhead_peers.py`).
//!
//! Every loop is saxpy with `a = 2` over small integers, so each result is exact: each side's
//! output is compared with the CPU's `y₀ + k·a·x` after every loop and every round trip, and a
//! wrong one fails the command (exit code 3) whatever the timings say.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sparkle::cache::CacheConfig;
use sparkle::suite;
use sparkle::suite::saxpy::SaxpyVariant;
use sparkle::{Arg, Buffer, BufferUsage, Program, Runtime};

use crate::gpu_warm::warm_gpu;
use crate::plain_gl::{Baseline, BaselineKernel, RoundTripSteps, SaxpyInputs};
use sparkle_cli::{table, CliResult, UsageError};

/// The saxpy factor: a power of two, so every result stays an exact small integer.
const A: f32 = 2.0;

const SPARKLE_READ_WAITS: &str = "sparkle: dispatch, read";
const SPARKLE_WAITS: &str = "sparkle: dispatch, wait, read";
const SPARKLE_STAGED: &str = "sparkle: dispatch, read (y in a staging buffer)";

/// Most dispatches one loop may run: `y` must stay below 2²⁴ to be exact in f32.
pub const MAX_DISPATCHES: usize = 500_000;

/// Untimed round trips at the start of every block, on each side.
const WARM_UP_ROUND_TRIPS: usize = 3;
/// Round trips per block; the sides alternate blocks so that drift hits them alike.
const ROUND_TRIP_BLOCK: usize = 10;

/// What to measure; `None` picks by device class (GPU: many, CPU renderer: few).
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    #[arg(long)]
    pub json: bool,
    /// Dispatches per timed loop.
    #[arg(long)]
    pub dispatches: Option<usize>,
    /// Round trips per side.
    #[arg(long)]
    pub round_trips: Option<usize>,
    /// Timed loops per measurement (the median is reported).
    #[arg(long)]
    pub repeats: Option<usize>,
    /// Elements of the small saxpy.
    #[arg(long, default_value_t = 1024)]
    pub elements: usize,
    /// Also write the JSON report to this file.
    #[arg(long)]
    pub json_out: Option<std::path::PathBuf>,
    /// Also run PyTorch's tiny-op stream and round trips (bench/scripts/overhead_peers.py, python3).
    #[arg(long)]
    pub peers: bool,
}

impl Options {
    /// The defaults of `sparkle-bench bench-overhead`.
    pub fn defaults() -> Options {
        Options {
            json: false,
            dispatches: None,
            round_trips: None,
            repeats: None,
            elements: 1024,
            json_out: None,
            peers: false,
        }
    }
}

/// Per-dispatch cost of one way of issuing dispatches.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DispatchCost {
    pub side: String,
    /// Caller's time until the dispatch calls returned, per dispatch (median over repeats).
    pub issue_us: f64,
    /// Until the last dispatch completed, per dispatch.
    pub complete_us: f64,
}

/// Dispatch → result round trips. Sparkle's is `dispatch` then `read_buffer`, which waits for
/// the work that writes the buffer; the same with an explicit `Submission::wait` between them
/// is reported too. The plain loop fences, waits and reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RoundTrip {
    pub sparkle_median_us: f64,
    pub plain_median_us: f64,
    /// Sparkle over plain (target ≤ 1.2).
    pub ratio: f64,
    pub sparkle_p90_us: f64,
    pub plain_p90_us: f64,
    /// Sparkle with an explicit wait before the read.
    #[serde(default)]
    pub sparkle_waiting_median_us: f64,
    #[serde(default)]
    pub sparkle_waiting_p90_us: f64,
    /// That over plain.
    #[serde(default)]
    pub waiting_ratio: f64,
    /// Sparkle's `dispatch`, `read_buffer` with `y` in a [`BufferUsage::Staging`] buffer: the
    /// kernel writes host-visible memory and the read is a copy after the wait.
    #[serde(default)]
    pub sparkle_staging_median_us: f64,
    #[serde(default)]
    pub sparkle_staging_p90_us: f64,
    pub runs: usize,
    /// Where each side's time goes (medians of each step).
    #[serde(default)]
    pub steps: Vec<RoundTripStepTimes>,
}

/// The median time of each step of one side's round trips.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RoundTripStepTimes {
    pub side: String,
    /// Until the dispatch call returned (Sparkle: queued on the GL thread; plain: issued,
    /// fenced and flushed).
    pub submit_us: f64,
    /// From there until the wait for the GPU returned (none where the read waits).
    pub wait_us: f64,
    /// From there until the result was in host memory.
    pub read_us: f64,
}

impl RoundTripStepTimes {
    fn of(side: &str, runs: &[RoundTripSteps]) -> Self {
        let step = |pick: fn(&RoundTripSteps) -> Duration| median_us(runs.iter().map(pick).collect());
        RoundTripStepTimes {
            side: side.into(),
            submit_us: step(|r| r.submitted),
            wait_us: step(|r| r.waited.saturating_sub(r.submitted)),
            read_us: step(|r| r.total.saturating_sub(r.waited)),
        }
    }
}

/// The program-switch loops of one side.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Switch {
    pub side: String,
    /// Per dispatch, one program throughout.
    pub one_program_us: f64,
    /// Per dispatch, two programs alternating.
    pub two_programs_us: f64,
    /// The difference: what one switch costs (target < 10 µs).
    pub per_switch_us: f64,
}

/// What `sparkle-bench bench-overhead` reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OverheadReport {
    pub device: String,
    pub baseline_device: String,
    pub elements: usize,
    pub dispatches: usize,
    pub repeats: usize,
    pub dispatch: Vec<DispatchCost>,
    pub round_trip: RoundTrip,
    pub program_switch: Vec<Switch>,
    /// Every result of both sides matched the CPU.
    pub correct: bool,
    /// What did not match, if anything.
    pub mismatches: Vec<String>,
    /// PyTorch on the same GPU, with `--peers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<OverheadPeer>,
}

/// PyTorch's side (wall clock, as Sparkle's).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OverheadPeer {
    pub device: String,
    pub torch: String,
    /// `x.add_(1.0)` on 1024 floats, many in a row, one synchronize: per op.
    pub tiny_op_stream_us: f64,
    /// `add_` then `.item()` of a one-element tensor.
    pub item_round_trip_median_us: f64,
    pub item_round_trip_p90_us: f64,
    /// `add_` then `.cpu()` of 1024 floats (the bytes Sparkle's round trip reads).
    pub cpu_round_trip_median_us: f64,
    pub cpu_round_trip_p90_us: f64,
}

pub fn run(options: Options) -> CliResult<ExitCode> {
    let started = Instant::now();
    let runtime = Runtime::open_backend("gl", &CacheConfig::from_env()?)?;
    let mut report = measure(&runtime, &options, started)?;
    if options.peers {
        step(started, "PyTorch peers");
        let args = ["overhead".to_owned(), report.dispatches.to_string(), report.round_trip.runs.to_string()];
        let output = crate::transfer::peers_script(&args, std::iter::empty())?;
        report.peer = Some(
            serde_json::from_slice(&output)
                .map_err(|err| format!("the peers script printed no report ({err})"))?,
        );
    }
    if let Some(path) = &options.json_out {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .map_err(|err| format!("cannot write the JSON report to {}: {err}", path.display()))?;
    }
    if options.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(if report.correct { ExitCode::SUCCESS } else { ExitCode::from(sparkle_cli::WRONG_RESULT) })
}

/// The sizes to use on `runtime`'s device.
struct Plan {
    dispatches: usize,
    round_trips: usize,
    repeats: usize,
    elements: usize,
}

fn plan(runtime: &Runtime, options: &Options) -> Result<Plan, UsageError> {
    let gpu = runtime.info().class == sparkle::DeviceClass::Gpu;
    let plan = Plan {
        dispatches: options.dispatches.unwrap_or(if gpu { 20_000 } else { 1_000 }),
        round_trips: options.round_trips.unwrap_or(if gpu { 1_000 } else { 100 }),
        repeats: options.repeats.unwrap_or(if gpu { 5 } else { 3 }),
        elements: options.elements,
    };
    if plan.dispatches < 2 || plan.dispatches > MAX_DISPATCHES {
        return Err(UsageError(format!(
            "--dispatches {}: give 2 to {MAX_DISPATCHES} (the check needs exact results)",
            plan.dispatches
        )));
    }
    if plan.round_trips == 0 || plan.round_trips > MAX_DISPATCHES || plan.repeats == 0 {
        return Err(UsageError("--round-trips and --repeats must be at least 1".into()));
    }
    if plan.elements == 0 || plan.elements > 1 << 24 {
        return Err(UsageError(format!("--elements {}: give 1 to {}", plan.elements, 1 << 24)));
    }
    Ok(plan)
}

/// Measures both sides on `runtime` (a gl device) and its plain counterpart.
pub fn measure(runtime: &Runtime, options: &Options, started: Instant) -> CliResult<OverheadReport> {
    if runtime.backend() != "gl" {
        return Err(UsageError(format!(
            "the overhead bench compares the gl backend with plain GL calls; this runtime is `{}`",
            runtime.backend()
        ))
        .into());
    }
    let plan = plan(runtime, options)?;
    let baseline = Baseline::open()?;
    if baseline.renderer() != runtime.info().name {
        return Err(format!(
            "the plain GL loop landed on {} but Sparkle runs on {}; pin both to one device with SPARKLE_EGL_DEVICE",
            baseline.renderer(),
            runtime.info().name
        )
        .into());
    }
    let inputs = inputs(plan.elements);
    let kernels = [SaxpyVariant::SAFE, SaxpyVariant { per_thread: 2, ..SaxpyVariant::SAFE }]
        .map(|v| BaselineKernel { spec: v.spec(), groups: v.groups(plan.elements) });
    let programs = [runtime.program(&kernels[0].spec)?, runtime.program(&kernels[1].spec)?];
    let sparkle = Side { runtime, programs: &programs, kernels: &kernels, inputs: &inputs };
    let mut check = Check::default();

    step(started, "warming up");
    sparkle.submit_each(2, &mut check)?;
    sparkle.one_submission(2, 2, &mut check)?;
    check.compare("warm-up", &baseline.dispatch_loop(&kernels, &inputs, 2)?.y, &inputs, 2);
    warm_gpu(runtime)?;

    step(started, &format!("{} dispatches x {} repeats, each way", plan.dispatches, plan.repeats));
    let n = plan.dispatches;
    let mut samples: [Vec<(Duration, Duration)>; 5] = Default::default();
    for _ in 0..plan.repeats {
        samples[0].push(sparkle.submit_each(n, &mut check)?);
        samples[1].push(sparkle.one_submission(1, n, &mut check)?);
        samples[2].push(sparkle.one_submission(2, n, &mut check)?);
        let plain_one = baseline.dispatch_loop(&kernels[..1], &inputs, n)?;
        check.compare("plain loop, one program", &plain_one.y, &inputs, n);
        samples[3].push((plain_one.issue, plain_one.total));
        let plain_two = baseline.dispatch_loop(&kernels, &inputs, n)?;
        check.compare("plain loop, two programs", &plain_two.y, &inputs, n);
        samples[4].push((plain_two.issue, plain_two.total));
    }
    let per_dispatch = |runs: &[(Duration, Duration)], pick: fn(&(Duration, Duration)) -> Duration| {
        median_us(runs.iter().map(pick).collect()) / n as f64
    };
    let issue = |i: usize| per_dispatch(&samples[i], |s| s.0);
    let complete = |i: usize| per_dispatch(&samples[i], |s| s.1);
    let dispatch = vec![
        cost("sparkle, one submission per dispatch", issue(0), complete(0)),
        cost("sparkle, all in one submission", issue(1), complete(1)),
        cost("plain glow loop", issue(3), complete(3)),
    ];
    let program_switch = vec![
        switch("sparkle", complete(1), complete(2)),
        switch("plain glow loop", complete(3), complete(4)),
    ];

    step(started, &format!("{} round trips each way", plan.round_trips));
    let round_trip = round_trips(&sparkle, &baseline, plan.round_trips, &mut check)?;
    step(started, "done");

    Ok(OverheadReport {
        device: runtime.info().name.clone(),
        baseline_device: format!("{} ({})", baseline.renderer(), baseline.source()),
        elements: plan.elements,
        dispatches: n,
        repeats: plan.repeats,
        dispatch,
        round_trip,
        program_switch,
        correct: check.mismatches.is_empty(),
        mismatches: check.mismatches,
        peer: None,
    })
}

fn step(started: Instant, what: &str) {
    eprintln!("[{:7.1} s] overhead: {what}", started.elapsed().as_secs_f64());
}

fn cost(side: &str, issue_us: f64, complete_us: f64) -> DispatchCost {
    DispatchCost { side: side.into(), issue_us, complete_us }
}

fn switch(side: &str, one_program_us: f64, two_programs_us: f64) -> Switch {
    Switch {
        side: side.into(),
        one_program_us,
        two_programs_us,
        per_switch_us: two_programs_us - one_program_us,
    }
}

/// Small integers, so that `y₀ + k·a·x` is exact in f32 for every k the bench reaches.
fn inputs(elements: usize) -> SaxpyInputs {
    SaxpyInputs {
        a: A,
        x: (0..elements).map(|i| (i % 7) as f32 + 1.0).collect(),
        y: (0..elements).map(|i| (i % 5) as f32).collect(),
    }
}

/// `y` after `dispatches` saxpy dispatches.
fn expected(inputs: &SaxpyInputs, dispatches: usize) -> Vec<f32> {
    let k = dispatches as f64 * f64::from(inputs.a);
    inputs.x.iter().zip(&inputs.y).map(|(&x, &y)| (f64::from(y) + k * f64::from(x)) as f32).collect()
}

/// Mismatches against the CPU, collected over the whole bench.
#[derive(Default)]
struct Check {
    mismatches: Vec<String>,
}

impl Check {
    fn compare(&mut self, what: &str, got: &[f32], inputs: &SaxpyInputs, dispatches: usize) {
        if let Some(problem) = mismatch(got, &expected(inputs, dispatches)) {
            self.mismatches.push(format!("{what} after {dispatches} dispatches: {problem}"));
        }
    }
}

/// The first difference between `got` and `want` (exact comparison: every value is an integer).
fn mismatch(got: &[f32], want: &[f32]) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{} elements instead of {}", got.len(), want.len()));
    }
    let wrong = got.iter().zip(want).filter(|(g, w)| g != w).count();
    let (i, (g, w)) = got.iter().zip(want).enumerate().find(|(_, (g, w))| g != w)?;
    Some(format!("{wrong} elements differ, the first at {i}: {g} instead of {w}"))
}

/// Sparkle's side: the runtime, the two programs and their kernels.
struct Side<'a> {
    runtime: &'a Runtime,
    programs: &'a [Program; 2],
    kernels: &'a [BaselineKernel; 2],
    inputs: &'a SaxpyInputs,
}

impl Side<'_> {
    fn buffers(&self) -> CliResult<[Buffer; 2]> {
        self.buffers_with_y(BufferUsage::InOut)
    }

    fn buffers_with_y(&self, y_usage: BufferUsage) -> CliResult<[Buffer; 2]> {
        Ok([
            self.runtime.upload(&self.inputs.x, BufferUsage::Input)?,
            self.runtime.upload(&self.inputs.y, y_usage)?,
        ])
    }

    fn args<'b>(&self, buffers: &'b [Buffer; 2]) -> [Arg<'b>; 4] {
        [
            Arg::Buffer(&buffers[0]),
            Arg::Buffer(&buffers[1]),
            Arg::F32(self.inputs.a),
            Arg::U32(self.inputs.x.len() as u32),
        ]
    }

    /// One dispatch of the first program on `buffers` and the read-back of `y`, with
    /// `Submission::wait` before the read if `wait`, else the read waiting by itself.
    fn round_trip(&self, buffers: &[Buffer; 2], wait: bool) -> CliResult<(RoundTripSteps, Vec<f32>)> {
        let args = self.args(buffers);
        let mut out = vec![0f32; self.inputs.x.len()];
        let started = Instant::now();
        let submission = self.runtime.dispatch(&self.programs[0], &args, self.kernels[0].groups)?;
        let submitted = started.elapsed();
        if wait {
            submission.wait(suite::DISPATCH_TIMEOUT)?;
        }
        let waited = started.elapsed();
        self.runtime.read_buffer(&buffers[1], 0, bytemuck::cast_slice_mut(&mut out))?;
        Ok((RoundTripSteps { submitted, waited, total: started.elapsed() }, out))
    }

    /// `n` dispatches of the first program, each its own submission; (issue, complete).
    fn submit_each(&self, n: usize, check: &mut Check) -> CliResult<(Duration, Duration)> {
        let buffers = self.buffers()?;
        let args = self.args(&buffers);
        let started = Instant::now();
        let mut last = None;
        for _ in 0..n {
            last = Some(self.runtime.dispatch(&self.programs[0], &args, self.kernels[0].groups)?);
        }
        let issue = started.elapsed();
        if let Some(last) = last {
            last.wait(suite::DISPATCH_TIMEOUT)?;
        }
        let complete = started.elapsed();
        check.compare(
            "sparkle, one submission per dispatch",
            &self.runtime.download(&buffers[1])?,
            self.inputs,
            n,
        );
        Ok((issue, complete))
    }

    /// `n` dispatches cycling through the first `programs` programs, recorded into one
    /// submission (the runtime puts a barrier between them); (issue, complete).
    fn one_submission(
        &self,
        programs: usize,
        n: usize,
        check: &mut Check,
    ) -> CliResult<(Duration, Duration)> {
        let buffers = self.buffers()?;
        let args = self.args(&buffers);
        let started = Instant::now();
        let mut commands = self.runtime.commands();
        for i in 0..n {
            let which = i % programs;
            commands.dispatch(&self.programs[which], &args, self.kernels[which].groups)?;
        }
        let submission = self.runtime.submit(commands)?;
        let issue = started.elapsed();
        submission.wait(suite::DISPATCH_TIMEOUT)?;
        let complete = started.elapsed();
        let what = format!("sparkle, one submission, {programs} program(s)");
        check.compare(&what, &self.runtime.download(&buffers[1])?, self.inputs, n);
        Ok((issue, complete))
    }
}

/// Every side's round trips, in alternating blocks.
fn round_trips(
    sparkle: &Side<'_>,
    baseline: &Baseline,
    runs: usize,
    check: &mut Check,
) -> CliResult<RoundTrip> {
    let buffers = [sparkle.buffers()?, sparkle.buffers()?, sparkle.buffers_with_y(BufferUsage::Staging)?];
    // Sparkle's ways: (buffers, wait before the read, what the check calls it).
    let ways = [
        (0, false, "sparkle round trip"),
        (1, true, "sparkle round trip with a wait"),
        (2, false, "sparkle round trip into a staging buffer"),
    ];
    let mut timed_runs: [Vec<RoundTripSteps>; 3] = Default::default();
    let mut plain = Vec::with_capacity(runs);
    // Round trips done on each of Sparkle's buffers, timed or not: what their results hold.
    let mut done = [0usize; 3];
    while timed_runs[0].len() < runs {
        let block = ROUND_TRIP_BLOCK.min(runs - timed_runs[0].len());
        // Each side's block starts after the other side's has run on another context: a few
        // untimed round trips first, so that neither side's first ones pay for the switch.
        for (index, wait, what) in ways {
            for timed in
                std::iter::repeat_n(false, WARM_UP_ROUND_TRIPS).chain(std::iter::repeat_n(true, block))
            {
                let (steps, y) = sparkle.round_trip(&buffers[index], wait)?;
                done[index] += 1;
                check.compare(what, &y, sparkle.inputs, done[index]);
                if timed {
                    timed_runs[index].push(steps);
                }
            }
        }
        let warm = baseline.round_trips(&sparkle.kernels[0], sparkle.inputs, WARM_UP_ROUND_TRIPS)?;
        for (k, y) in warm.results.iter().enumerate() {
            check.compare("plain round trip", y, sparkle.inputs, k + 1);
        }
        let timed = baseline.round_trips(&sparkle.kernels[0], sparkle.inputs, block)?;
        for (k, y) in timed.results.iter().enumerate() {
            check.compare("plain round trip", y, sparkle.inputs, k + 1);
        }
        plain.extend(timed.times);
    }
    let [ours, waiting, staged] = timed_runs;
    let totals = |runs: &[RoundTripSteps]| runs.iter().map(|r| r.total).collect::<Vec<_>>();
    let sparkle_median_us = median_us(totals(&ours));
    let sparkle_waiting_median_us = median_us(totals(&waiting));
    let plain_median_us = median_us(totals(&plain));
    Ok(RoundTrip {
        sparkle_median_us,
        plain_median_us,
        ratio: sparkle_median_us / plain_median_us,
        sparkle_p90_us: quantile_us(totals(&ours), 0.9),
        plain_p90_us: quantile_us(totals(&plain), 0.9),
        sparkle_waiting_median_us,
        sparkle_waiting_p90_us: quantile_us(totals(&waiting), 0.9),
        waiting_ratio: sparkle_waiting_median_us / plain_median_us,
        sparkle_staging_median_us: median_us(totals(&staged)),
        sparkle_staging_p90_us: quantile_us(totals(&staged), 0.9),
        runs,
        steps: vec![
            RoundTripStepTimes::of(SPARKLE_READ_WAITS, &ours),
            RoundTripStepTimes::of(SPARKLE_WAITS, &waiting),
            RoundTripStepTimes::of(SPARKLE_STAGED, &staged),
            RoundTripStepTimes::of("plain glow loop", &plain),
        ],
    })
}

fn median_us(values: Vec<Duration>) -> f64 {
    quantile_us(values, 0.5)
}

fn quantile_us(mut values: Vec<Duration>, q: f64) -> f64 {
    values.sort();
    let index = ((values.len() as f64 - 1.0) * q).round() as usize;
    values.get(index).map_or(f64::NAN, |d| d.as_secs_f64() * 1e6)
}

/// The report as tables.
pub fn render(report: &OverheadReport) -> String {
    let mut out = format!(
        "Overheads of the gl backend against a plain glow loop ({} elements, {} dispatches per loop, median of {})\n\
         Sparkle on {}; plain loop on {}\n\nPer dispatch (µs):\n",
        report.elements, report.dispatches, report.repeats, report.device, report.baseline_device
    );
    let rows: Vec<Vec<String>> = report
        .dispatch
        .iter()
        .map(|d| vec![d.side.clone(), format!("{:.2}", d.issue_us), format!("{:.2}", d.complete_us)])
        .collect();
    out.push_str(&table::render(&["issued as", "issue µs", "complete µs"], &rows));
    let r = &report.round_trip;
    out.push_str(&format!("\nDispatch → result round trip ({} runs each):\n", r.runs));
    out.push_str(&table::render(
        &["side", "median µs", "p90 µs"],
        &[
            vec![
                SPARKLE_READ_WAITS.into(),
                format!("{:.1}", r.sparkle_median_us),
                format!("{:.1}", r.sparkle_p90_us),
            ],
            vec![
                SPARKLE_WAITS.into(),
                format!("{:.1}", r.sparkle_waiting_median_us),
                format!("{:.1}", r.sparkle_waiting_p90_us),
            ],
            vec![
                SPARKLE_STAGED.into(),
                format!("{:.1}", r.sparkle_staging_median_us),
                format!("{:.1}", r.sparkle_staging_p90_us),
            ],
            vec![
                "plain glow loop".into(),
                format!("{:.1}", r.plain_median_us),
                format!("{:.1}", r.plain_p90_us),
            ],
        ],
    ));
    out.push_str(&format!(
        "sparkle / plain = {:.3} (target ≤ 1.2); with the explicit wait {:.3}\n",
        r.ratio, r.waiting_ratio
    ));
    out.push_str("Steps of a round trip (median µs):\n");
    let rows: Vec<Vec<String>> = r
        .steps
        .iter()
        .map(|s| {
            vec![
                s.side.clone(),
                format!("{:.1}", s.submit_us),
                format!("{:.1}", s.wait_us),
                format!("{:.1}", s.read_us),
            ]
        })
        .collect();
    out.push_str(&table::render(&["side", "submit", "wait", "read"], &rows));
    out.push_str("\nProgram switch (one submission; µs per dispatch):\n");
    let rows: Vec<Vec<String>> = report
        .program_switch
        .iter()
        .map(|s| {
            vec![
                s.side.clone(),
                format!("{:.2}", s.one_program_us),
                format!("{:.2}", s.two_programs_us),
                format!("{:.2}", s.per_switch_us),
            ]
        })
        .collect();
    out.push_str(&table::render(
        &["side", "one program", "two alternating", "per switch (target < 10)"],
        &rows,
    ));
    if let Some(peer) = &report.peer {
        out.push_str(&format!(
            "\nPyTorch {} on {} (wall clock, as above):\n  tiny-op stream (x.add_(1.0), one synchronize): {:.2} µs per op\n  \
             add_ + .item(): median {:.1} µs, p90 {:.1} µs\n  add_ + .cpu() of {} floats: median {:.1} µs, p90 {:.1} µs\n",
            peer.torch,
            peer.device,
            peer.tiny_op_stream_us,
            peer.item_round_trip_median_us,
            peer.item_round_trip_p90_us,
            report.elements,
            peer.cpu_round_trip_median_us,
            peer.cpu_round_trip_p90_us
        ));
    }
    out.push_str(&format!("correct: {}\n", if report.correct { "yes" } else { "NO" }));
    for mismatch in &report.mismatches {
        out.push_str(&format!("  {mismatch}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_expected_result_is_exact_and_a_single_wrong_element_is_found() {
        let inputs = inputs(12);
        let want = expected(&inputs, 3);
        assert_eq!(want[0], 0.0 + 3.0 * 2.0 * 1.0);
        assert_eq!(want[8], 3.0 + 3.0 * 2.0 * 2.0);
        assert_eq!(mismatch(&want, &want), None);
        let mut got = want.clone();
        got[5] += 1.0;
        let problem = mismatch(&got, &want).expect("one element is off");
        assert!(problem.contains("1 elements differ, the first at 5"), "{problem}");
        assert!(mismatch(&want[..11], &want).is_some());
        let mut check = Check::default();
        check.compare("a side", &got, &inputs, 3);
        assert_eq!(check.mismatches.len(), 1);
    }

    #[test]
    fn results_stay_exact_up_to_the_largest_loop() {
        let inputs = inputs(35);
        let want = expected(&inputs, MAX_DISPATCHES);
        let largest = want.iter().copied().fold(0f32, f32::max);
        assert!(largest < (1u32 << 24) as f32, "{largest}");
    }
}
