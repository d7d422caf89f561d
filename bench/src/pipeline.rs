//! `sparkle-bench bench-pipeline`: conv2d over a stream of batches, run synchronously (each batch
//! uploaded, computed and read back before the next) and through the pipelined executor, next
//! to the time of each stage alone — upload, GPU work, read-back — so that the ideal overlap
//! (the slowest stage) is known. Every shape runs with each way of moving data (plain buffer
//! writes and reads, mapped staging buffers with device copies, the same with the kernel writing
//! its output straight into a mapped buffer, the kernel on mapped buffers).
//!
//! Each row (a shape in one transfer mode) runs in a fresh process of its own, this program
//! again with `--one-process`: in one process, on the H100, a row could run 1.6× slower for what
//! the rows before it had done. NVIDIA's GL driver keeps the top clock only for the first seconds
//! of a context under this bench's light load (BENCHMARKS.md §8, "The GPU's clocks under light
//! load"); `SPARKLE_HOLD_CLOCKS=1`, which children inherit, holds it.
//!
//! Each figure is the median of `--repeats` rounds after a warm-up of at least `--warmup-ms`;
//! every round times the stages alone, the synchronous path and the pipelined one, in that
//! order. A GPU sets its clocks by how busy it was lately (an H100 ran this bench anywhere from
//! 345 to 1980 MHz), so stages timed once, apart from the runs they are compared with, were
//! timed at other clocks. The timed runs drop each result as it arrives, and the process keeps
//! the memory it frees ([`crate::host_memory`]). Untimed runs of both paths then check the
//! results: the pipelined ones must equal the synchronous ones bit for bit, and the first image
//! of the first batch is checked against the CPU, on all host cores, once every row is timed (a
//! check leaves the GPU idle, and an idle GPU lowers its clock).

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sparkle::suite::conv2d::{Conv2dStage, Shape, Transfers};
use sparkle::suite::{self, Case};
use sparkle::{Pipeline, Runtime, Stage};

use sparkle_cli::{table, CliResult, UsageError, WRONG_RESULT};

/// Options of `sparkle-bench bench-pipeline`.
#[derive(clap::Args)]
pub struct Options {
    /// A batch shape N,C,H,W,K (N images per batch); repeat for several. Default: shapes sized
    /// for llvmpipe.
    #[arg(long = "shape", value_parser = parse_shape)]
    shapes: Vec<Shape>,
    /// Batches in the stream.
    #[arg(long, default_value_t = 24)]
    batches: usize,
    /// Buffer sets in flight.
    #[arg(long, default_value_t = sparkle::runtime::DEFAULT_DEPTH)]
    depth: usize,
    /// plain, staged, staged-in or mapped; repeat for several. Default: all four.
    #[arg(long = "transfers")]
    transfers: Vec<Transfers>,
    /// Runs of each measurement (the median is reported).
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Least time spent running the stream before measuring.
    #[arg(long, default_value_t = 500)]
    warmup_ms: u64,
    /// Measure every row in this process, one after another. By default each row (a shape in
    /// one transfer mode) runs in a fresh process of its own: in one process a row can inherit
    /// a slowdown from the rows before it (on NVIDIA the GPU's clock falls after a few seconds
    /// of this light load; SPARKLE_HOLD_CLOCKS=1 holds it).
    #[arg(long)]
    one_process: bool,
    /// Writes the timeline of the run to FILE (Chrome trace-event JSON; open it in
    /// ui.perfetto.dev). Implies --one-process; events past the trace's buffer are dropped and
    /// counted, so trace a short run (for example --batches 8 --repeats 1 --warmup-ms 0).
    #[arg(long, value_name = "FILE")]
    trace: Option<std::path::PathBuf>,
    #[arg(long)]
    json: bool,
}

fn parse_shape(text: &str) -> Result<Shape, String> {
    let sizes: Vec<usize> = text
        .split(',')
        .map(|s| s.trim().parse::<usize>().map_err(|e| format!("`{s}`: {e}")))
        .collect::<Result<_, _>>()?;
    match sizes[..] {
        [n, c, h, w, k] if sizes.iter().all(|&s| s > 0) => Ok(Shape { n, c, h, w, k }),
        _ => Err(format!(
            "`{text}`: a shape is five sizes of at least 1, N,C,H,W,K (for example 8,16,64,64,16)"
        )),
    }
}

/// Shapes that take a noticeable but short time on llvmpipe (where compute dominates anyway).
fn default_shapes() -> Vec<Shape> {
    vec![Shape { n: 8, c: 1, h: 128, w: 128, k: 1 }, Shape { n: 4, c: 4, h: 64, w: 64, k: 4 }]
}

#[derive(Serialize, Deserialize)]
struct Row {
    shape: String,
    transfers: String,
    /// The process that measured the row.
    process_id: u32,
    /// The conv2d kernel's variant (`Conv2dStage::variant`).
    kernel: String,
    megabytes_in: f64,
    megabytes_out: f64,
    /// Each stage alone, per batch: the median over the rounds of its median over the stream,
    /// on a warmed-up set.
    upload_ms: f64,
    gpu_ms: f64,
    download_ms: f64,
    /// The synchronous path can do no better than the sum; a perfect pipeline reaches the
    /// slowest stage.
    sum_of_stages_ms: f64,
    slowest_stage_ms: f64,
    synchronous_ms: f64,
    pipelined_ms: f64,
    /// synchronous ÷ pipelined.
    speedup: f64,
    /// The plain synchronous path (no executor, no staging) of the same shape ÷ pipelined, when
    /// plain transfers were measured too.
    over_plain_synchronous: Option<f64>,
    /// pipelined ÷ slowest stage (1.0 is perfect overlap).
    over_ideal: f64,
    /// Pipelined results equal the synchronous ones bit for bit and the CPU's within tolerance.
    correct: String,
}

#[derive(Serialize, Deserialize)]
struct Report {
    device: String,
    backend: String,
    details: Vec<(String, String)>,
    batches: usize,
    depth: usize,
    rows: Vec<Row>,
}

pub fn run(options: Options) -> CliResult<ExitCode> {
    if options.batches == 0 || options.repeats == 0 {
        return Err(Box::new(UsageError("--batches and --repeats must be at least 1".into())));
    }
    let shapes = if options.shapes.is_empty() { default_shapes() } else { options.shapes.clone() };
    let modes =
        if options.transfers.is_empty() { Transfers::ALL.to_vec() } else { options.transfers.clone() };
    let mut report = if options.trace.is_some() {
        let trace = sparkle_cli::start_trace(options.trace.as_deref());
        let measured = measure_here(&options, &shapes, &modes);
        sparkle_cli::trace_written(trace);
        measured?
    } else if options.one_process || shapes.len() * modes.len() == 1 {
        measure_here(&options, &shapes, &modes)?
    } else {
        measure_in_own_processes(&options, &shapes, &modes)?
    };
    compare_with_plain(&mut report.rows);
    let correct = report.rows.iter().all(|r| r.correct == "yes");
    if options.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(if correct { ExitCode::SUCCESS } else { ExitCode::from(WRONG_RESULT) })
}

/// Every row in this process, one after another, each checked against the CPU once all are
/// timed.
fn measure_here(options: &Options, shapes: &[Shape], modes: &[Transfers]) -> CliResult<Report> {
    let host_memory = crate::host_memory::keep_freed_memory();
    let runtime = Runtime::from_env()?;
    let mut rows = Vec::new();
    let mut checks = Vec::new();
    for shape in shapes {
        suite::case(
            suite::conv2d::NAME,
            &[shape.n, shape.c, shape.h, shape.w, shape.k],
            1,
            &runtime.info().limits,
        )
        .map_err(UsageError)?;
        for &mode in modes {
            let (row, check) = measure(&runtime, *shape, mode, options)?;
            if !options.json {
                eprintln!("{} {}: done", row.shape, row.transfers);
            }
            rows.push(row);
            checks.push(check);
        }
    }
    for (row, check) in rows.iter_mut().zip(checks) {
        row.correct = check.verdict();
    }
    let info = runtime.info();
    let mut details = info.details.clone();
    details.push((
        "host memory".to_owned(),
        host_memory
            .unwrap_or_else(|| "freed blocks go back to the kernel (the allocator's defaults)".to_owned()),
    ));
    Ok(Report {
        device: info.name.clone(),
        backend: info.backend.to_owned(),
        details,
        batches: options.batches,
        depth: options.depth,
        rows,
    })
}

/// Each row in a fresh process of its own (this program again, with `--one-process` and the
/// row's shape and mode), so that no row inherits what the rows before it left behind.
fn measure_in_own_processes(options: &Options, shapes: &[Shape], modes: &[Transfers]) -> CliResult<Report> {
    let mut report: Option<Report> = None;
    for shape in shapes {
        for &mode in modes {
            let row_report = measure_in_child(options, *shape, mode)?;
            let mut rows = row_report.rows.into_iter();
            let row = match (rows.next(), rows.next()) {
                (Some(row), None) => row,
                _ => {
                    return Err(format!(
                        "the process measuring {} {} did not report one row",
                        shape_label(*shape),
                        mode.name()
                    )
                    .into())
                }
            };
            if !options.json {
                eprintln!("{} {}: done", row.shape, row.transfers);
            }
            match &mut report {
                Some(report) => report.rows.push(row),
                None => report = Some(Report { rows: vec![row], ..row_report }),
            }
        }
    }
    report.ok_or_else(|| "no rows to measure".into())
}

/// Runs `sparkle-bench bench-pipeline` for one row in a child process and reads its JSON report; a
/// child's usage error is this command's, and a wrong result comes back as its row says.
fn measure_in_child(options: &Options, shape: Shape, mode: Transfers) -> CliResult<Report> {
    let Shape { n, c, h, w, k } = shape;
    let cannot_start = |err: std::io::Error| {
        format!(
            "could not start a process to measure {} {} ({err}); --one-process measures every row in this one",
            shape_label(shape),
            mode.name()
        )
    };
    let output = Command::new(std::env::current_exe().map_err(cannot_start)?)
        .args(["bench-pipeline", "--one-process", "--json", "--transfers", mode.name()])
        .args(["--shape", &format!("{n},{c},{h},{w},{k}")])
        .args(["--batches", &options.batches.to_string(), "--depth", &options.depth.to_string()])
        .args(["--repeats", &options.repeats.to_string(), "--warmup-ms", &options.warmup_ms.to_string()])
        .output()
        .map_err(cannot_start)?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let message = stderr.trim().strip_prefix("error: ").unwrap_or(stderr.trim()).to_owned();
    match output.status.code() {
        Some(0) | Some(3) => {}
        Some(2) => return Err(Box::new(UsageError(message))),
        _ => {
            return Err(format!(
                "the process measuring {} {} failed ({}): {message}",
                shape_label(shape),
                mode.name(),
                output.status
            )
            .into())
        }
    }
    // What the child logged (warnings) reaches the user as if this process had logged it.
    eprint!("{stderr}");
    serde_json::from_slice(&output.stdout).map_err(|err| {
        format!("the process measuring {} {} printed no report ({err})", shape_label(shape), mode.name())
            .into()
    })
}

fn shape_label(shape: Shape) -> String {
    let Shape { n, c, h, w, k } = shape;
    format!("{n}×{c}×{h}×{w}→{k}")
}

/// Fills in each row's gain over the plain synchronous path of its shape, where plain
/// transfers were measured too.
fn compare_with_plain(rows: &mut [Row]) {
    let plain: Vec<(String, f64)> = rows
        .iter()
        .filter(|row| row.transfers == Transfers::Plain.name())
        .map(|row| (row.shape.clone(), row.synchronous_ms))
        .collect();
    for row in rows.iter_mut() {
        let synchronous = plain.iter().find(|(shape, _)| *shape == row.shape).map(|(_, ms)| *ms);
        row.over_plain_synchronous = synchronous.map(|ms| ms / row.pipelined_ms);
    }
}

/// Times one shape in one mode; the row's `correct` is filled in from the returned [`Check`].
fn measure(runtime: &Runtime, shape: Shape, mode: Transfers, options: &Options) -> CliResult<(Row, Check)> {
    let seed = 1;
    let stage = Conv2dStage::new(runtime, shape, seed)?.with_transfers(runtime, mode)?;
    let pipeline = Pipeline::new(runtime, stage).with_depth(options.depth)?;
    let batches = pipeline.stage().random_batches(options.batches, &[shape.n], seed);

    // Warm-up: programs, driver state and GPU clocks.
    let warm_up = Instant::now();
    while warm_up.elapsed() < Duration::from_millis(options.warmup_ms) {
        pipeline.run(batches.clone(), |_, _| Ok(()))?;
    }

    let mut alone = StagesAlone::new(runtime, pipeline.stage(), &batches)?;

    // Timed runs drop each result as it arrives: a consumer that kept them all would measure
    // the page faults of fresh memory for every batch (7 ms of an 8 MB batch's 8 ms read-back
    // on the H100 machine), not the executor. Correctness is checked on untimed runs below.
    let mut stages = Vec::new();
    let mut synchronous = Vec::new();
    let mut pipelined = Vec::new();
    for _ in 0..options.repeats {
        stages.push(alone.time(&batches)?);

        let inputs = batches.clone();
        let started = Instant::now();
        pipeline.run_serial(inputs, |_, output| {
            drop(output);
            Ok(())
        })?;
        synchronous.push(started.elapsed());

        let inputs = batches.clone();
        let started = Instant::now();
        pipeline.run(inputs, |_, output| {
            drop(output);
            Ok(())
        })?;
        pipelined.push(started.elapsed());
    }

    let mut serial_outputs = Vec::with_capacity(batches.len());
    pipeline.run_serial(batches.clone(), |_, output| {
        serial_outputs.push(output);
        Ok(())
    })?;
    let mut pipelined_digests = Vec::with_capacity(batches.len());
    pipeline.run(batches.clone(), |_, output| {
        pipelined_digests.push(digest(&output));
        Ok(())
    })?;
    let stage = pipeline.stage();
    let check = Check {
        same: digests(&serial_outputs) == pipelined_digests,
        first_output: serial_outputs.swap_remove(0),
        case: stage.case(batches[0][..stage.image_len()].to_vec()),
        spec: stage.spec().clone(),
    };

    let per_batch = |times: &[Duration]| median(times) * 1e3 / batches.len() as f64;
    let (synchronous_ms, pipelined_ms) = (per_batch(&synchronous), per_batch(&pipelined));
    let stage_ms = |i: usize| median_of(&stages.iter().map(|round: &[f64; 3]| round[i]).collect::<Vec<_>>());
    let (upload, gpu, download) = (stage_ms(0), stage_ms(1), stage_ms(2));
    let slowest = upload.max(gpu).max(download);
    let Shape { n, c, h, w, k } = shape;
    let row = Row {
        shape: shape_label(shape),
        transfers: mode.name().to_owned(),
        process_id: std::process::id(),
        kernel: pipeline.stage().variant(),
        megabytes_in: (n * c * h * w * 4) as f64 / 1e6,
        megabytes_out: (n * k * h * w * 4) as f64 / 1e6,
        upload_ms: upload,
        gpu_ms: gpu,
        download_ms: download,
        sum_of_stages_ms: upload + gpu + download,
        slowest_stage_ms: slowest,
        synchronous_ms,
        pipelined_ms,
        speedup: synchronous_ms / pipelined_ms,
        over_plain_synchronous: None,
        over_ideal: pipelined_ms / slowest,
        correct: String::new(),
    };
    Ok((row, check))
}

/// What checking one row's results needs, kept until every row is timed.
struct Check {
    /// The pipelined results equal the synchronous ones bit for bit.
    same: bool,
    /// The synchronous path's first batch.
    first_output: Vec<f32>,
    /// The first image of the first batch as a suite case (the stage's weights and bias).
    case: suite::conv2d::Conv2d,
    /// What the stage ran (its rounding bound).
    spec: sparkle::KernelSpec,
}

impl Check {
    /// `yes`, or what is wrong: the first image against the CPU, then the two paths compared.
    fn verdict(self) -> String {
        let outputs = self.case.outputs();
        // Every output, on all host cores: with a Winograd kernel's error bound the reference
        // costs about 0.1 ms an output on one core, tens of seconds for one image of 8×64×64×64.
        let verdict = match self.first_output.get(..outputs) {
            Some(got) => suite::verify_sampled(&self.case, &self.spec, got, outputs),
            None => {
                return format!(
                    "NO: {} floats came back, the first image has {outputs}",
                    self.first_output.len()
                )
            }
        };
        match (self.same, verdict.passed()) {
            (true, true) => "yes".to_owned(),
            (false, _) => "NO: pipelined results differ from the synchronous ones".to_owned(),
            (true, false) => format!("NO: {verdict}"),
        }
    }
}

/// Each stage run on its own, on one set kept for the whole measurement: upload, the batch's
/// GPU work (submit + wait), read-back. A set's first batches cost the driver more (its
/// buffers' first use), so a few untimed ones go through it first.
struct StagesAlone<'a> {
    runtime: &'a Runtime,
    stage: &'a Conv2dStage,
    set: <Conv2dStage as Stage>::Set,
}

impl<'a> StagesAlone<'a> {
    fn new(runtime: &'a Runtime, stage: &'a Conv2dStage, batches: &[Vec<f32>]) -> CliResult<Self> {
        let mut alone = Self { runtime, stage, set: stage.create_set(runtime)? };
        for batch in batches.iter().take(STAGE_WARM_UP_BATCHES) {
            alone.one(batch)?;
        }
        Ok(alone)
    }

    /// Milliseconds per batch of each stage over `batches`: the median over the batches.
    fn time(&mut self, batches: &[Vec<f32>]) -> CliResult<[f64; 3]> {
        let times = batches.iter().map(|batch| self.one(batch)).collect::<CliResult<Vec<_>>>()?;
        let stage_ms = |i: usize| median(&times.iter().map(|t| t[i]).collect::<Vec<_>>()) * 1e3;
        Ok([stage_ms(0), stage_ms(1), stage_ms(2)])
    }

    fn one(&mut self, batch: &[f32]) -> CliResult<[Duration; 3]> {
        let (runtime, stage) = (self.runtime, self.stage);
        let input = batch.to_vec();
        let started = Instant::now();
        stage.upload(runtime, &mut self.set, input)?;
        let upload = started.elapsed();

        let started = Instant::now();
        let mut commands = runtime.commands();
        stage.record(runtime, &self.set, &mut commands)?;
        runtime.submit(commands)?.wait(suite::DISPATCH_TIMEOUT)?;
        let gpu = started.elapsed();

        let started = Instant::now();
        std::hint::black_box(stage.download(runtime, &mut self.set)?);
        Ok([upload, gpu, started.elapsed()])
    }
}

/// Untimed batches through a fresh set before its stages are timed alone.
const STAGE_WARM_UP_BATCHES: usize = 4;

fn median(times: &[Duration]) -> f64 {
    median_of(&times.iter().map(Duration::as_secs_f64).collect::<Vec<_>>())
}

/// The median of `values` (the upper one of an even count); NaN if there are none.
fn median_of(values: &[f64]) -> f64 {
    let mut values = values.to_vec();
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn digest(output: &[f32]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytemuck::cast_slice(output))
}

fn digests(outputs: &[Vec<f32>]) -> Vec<u64> {
    outputs.iter().map(|output| digest(output)).collect()
}

fn print_report(report: &Report) {
    println!("Device: {} ({} backend)", report.device, report.backend);
    for (name, value) in &report.details {
        println!("  {name}: {value}");
    }
    println!(
        "\nconv2d 3×3 over {} batches, {} buffer sets in flight; milliseconds per batch (median of the rounds):",
        report.batches, report.depth
    );
    let rows: Vec<Vec<String>> = report
        .rows
        .iter()
        .map(|r| {
            vec![
                r.shape.clone(),
                r.transfers.clone(),
                format!("{:.1}/{:.1}", r.megabytes_in, r.megabytes_out),
                format!("{:.3}", r.upload_ms),
                format!("{:.3}", r.gpu_ms),
                format!("{:.3}", r.download_ms),
                format!("{:.3}", r.sum_of_stages_ms),
                format!("{:.3}", r.synchronous_ms),
                format!("{:.3}", r.pipelined_ms),
                format!("{:.2}×", r.speedup),
                r.over_plain_synchronous.map(|x| format!("{x:.2}×")).unwrap_or_default(),
                format!("{:.2}", r.over_ideal),
                r.correct.clone(),
            ]
        })
        .collect();
    print!(
        "{}",
        table::render(
            &[
                "batch N×C×H×W→K",
                "transfers",
                "MB in/out",
                "upload",
                "gpu",
                "read-back",
                "sum",
                "sync",
                "pipelined",
                "sync/pipe",
                "plain sync/pipe",
                "pipe/slowest",
                "correct",
            ],
            &rows
        )
    );
    println!(
        "sync/pipe: throughput gain of the pipeline over the synchronous path with the same transfers \
         (target ≥ 2 where transfers and compute are comparable); plain sync/pipe: over the synchronous path \
         with plain transfers; \
         pipe/slowest: pipelined time over the slowest stage alone (target ≤ 1.15)."
    );
    println!(
        "kernel: what `sparkle tune conv2d N C H W K --transfers MODE` kept for the largest batch, else what \
         `sparkle tune conv2d N C H W K` kept, else the device's default:"
    );
    for row in &report.rows {
        println!("  {:20} {:10} {}", row.shape, row.transfers, row.kernel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sparkle::suite::conv2d::Conv2d;

    fn check(first_output: Vec<f32>, same: bool) -> String {
        let shape = Shape { n: 1, c: 3, h: 6, w: 5, k: 2 };
        Check { same, first_output, case: Conv2d::random(shape, 11), spec: suite::conv2d::spec() }.verdict()
    }

    #[test]
    fn a_row_is_correct_only_if_its_first_image_matches_the_cpu_and_both_paths_agree() {
        let case = Conv2d::random(Shape { n: 1, c: 3, h: 6, w: 5, k: 2 }, 11);
        let (want, _) = case.reference(&suite::conv2d::spec());
        let right: Vec<f32> = want.iter().map(|&v| v as f32).collect();
        assert_eq!(check(right.clone(), true), "yes");

        let mut wrong = right.clone();
        wrong[right.len() - 1] += 0.5;
        assert!(check(wrong, true).starts_with("NO: "), "the last output is off");
        assert_eq!(check(right.clone(), false), "NO: pipelined results differ from the synchronous ones");
        let short = check(right[..right.len() - 1].to_vec(), true);
        assert!(short.starts_with("NO: ") && short.contains("floats came back"), "{short}");
    }
}
