//! `sparkle-bench bench-placement`: a mixed stream of problem sizes (tiny to large saxpy, sgemm
//! and conv2d) run on each device alone and on a [`Placement`] over all of them, with the
//! placement's choice per shape and the totals. The placement first learns (rounds until every
//! shape's history is trusted on each device it calibrates, at most `--learn` rounds), then
//! the stream is timed the same way on every side, interleaved shape by shape: time to result of upload, dispatch and
//! read-back, the program fetched before the clock starts. Every result is checked.

use std::process::ExitCode;
use std::time::Instant;

use sparkle::cache::CacheConfig;
use sparkle::runtime::Basis;
use sparkle::suite::{self, Case};
use sparkle::{Placement, Runtime};
use sparkle_cli::{CliResult, WRONG_RESULT};

/// What to run.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// The devices (as SPARKLE_DEVICES lists them); default SPARKLE_DEVICES, else every real
    /// device.
    #[arg(long)]
    pub devices: Option<String>,
    /// Timed passes over the stream after learning (the median per shape is reported).
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// At most this many learning passes.
    #[arg(long, default_value_t = 12)]
    pub learn: usize,
    /// Also prints the placement's explanation of each shape.
    #[arg(long)]
    pub explain: bool,
    /// Larger problems (for GPUs; the default sizes suit llvmpipe and the simulator).
    #[arg(long)]
    pub large: bool,
}

fn stream(large: bool) -> Vec<(&'static str, Vec<usize>)> {
    let mut shapes = vec![
        ("saxpy", vec![256]),
        ("saxpy", vec![16_384]),
        ("saxpy", vec![262_144]),
        ("sgemm", vec![16]),
        ("sgemm", vec![64]),
        ("conv2d", vec![1, 4, 8, 8, 4]),
    ];
    if large {
        shapes.extend([
            ("saxpy", vec![16 << 20]),
            ("sgemm", vec![1024]),
            ("conv2d", vec![8, 64, 56, 56, 64]),
        ]);
    }
    shapes
}

/// Seconds to result of `case` on `runtime`, program fetched first; fails on a wrong result.
fn time_alone(runtime: &Runtime, case: &dyn Case) -> CliResult<f64> {
    let program = runtime.program(&suite::chosen_spec(runtime, case))?;
    let start = Instant::now();
    let buffers = case.upload_for(runtime, &program)?;
    case.dispatch(runtime, &program, &buffers)?.wait(suite::DISPATCH_TIMEOUT)?;
    let got = case.download(runtime, &buffers)?;
    let seconds = start.elapsed().as_secs_f64();
    let verdict = suite::verify_sampled(case, program.spec(), &got, 2_000);
    if !verdict.passed() {
        return Err(format!("{} on {}: {verdict}", case.describe(), runtime.backend()).into());
    }
    Ok(seconds)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn ms(seconds: f64) -> String {
    format!("{:.3}", seconds * 1e3)
}

/// Runs the benchmark and prints its table.
pub fn run(options: Options) -> CliResult<ExitCode> {
    let list = options.devices.clone().or_else(|| std::env::var(sparkle::DEVICES_ENV).ok());
    // The benchmark learns in a cache of its own: what it learns is not the user's history.
    let cache_dir = tempfile::tempdir()?;
    let mut placement = Placement::open(list.as_deref(), &CacheConfig::in_dir(cache_dir.path()))?;
    placement.calibrate()?;
    let labels: Vec<String> = placement.labels().iter().map(|l| (*l).to_owned()).collect();
    let limits =
        placement.runtime(0).map(|r| r.info().limits.clone()).ok_or("the placement holds no device")?;
    let mut cases = Vec::new();
    for (seed, (kernel, sizes)) in stream(options.large).into_iter().enumerate() {
        cases.push(suite::case(kernel, &sizes, seed as u64, &limits)?);
    }
    println!("placement over {} — {} shapes", labels.join(", "), cases.len());

    // Learning passes, then timed ones.
    let mut wrong = 0;
    let mut check = |case: &dyn Case, label: &str, got: &[f32], spec: &sparkle::KernelSpec| {
        let verdict = suite::verify_sampled(case, spec, got, 2_000);
        if !verdict.passed() {
            eprintln!("{} on {label}: {verdict}", case.describe());
            wrong += 1;
        }
    };
    for _ in 0..options.learn {
        let settled = cases.iter().all(|case| {
            let decision = placement.explain(&Placement::case_workload(case.as_ref()));
            decision.predictions[decision.device].basis == Basis::Learned
                && !matches!(decision.reason, sparkle::runtime::Reason::Calibrating)
        });
        if settled {
            break;
        }
        for case in &cases {
            let placed = placement.run_case(case.as_ref())?;
            let spec =
                suite::chosen_spec(placement.runtime(placed.device).ok_or("no such device")?, case.as_ref());
            check(case.as_ref(), &placed.label, &placed.value, &spec);
        }
    }
    // Each device alone, warmed (compile, the driver's first use), then timed passes that
    // interleave every device alone and the placement, shape by shape, so that neither side
    // gets the warmer machine.
    let repeats = options.repeats.max(1);
    for (d, _) in labels.iter().enumerate() {
        let runtime = placement.runtime(d).ok_or("no such device")?;
        for case in &cases {
            time_alone(runtime, case.as_ref())?;
        }
    }
    let mut alone_times = vec![vec![Vec::new(); labels.len()]; cases.len()];
    let mut placed_times = vec![Vec::new(); cases.len()];
    let mut chosen = vec![String::new(); cases.len()];
    // The sides (each device alone, then the placement) take turns at going first, so that
    // none always follows the simulator's long runs.
    let sides = labels.len() + 1;
    for repeat in 0..repeats {
        for (c, case) in cases.iter().enumerate() {
            for side in (0..sides).map(|k| (k + repeat) % sides) {
                if let Some(runtime) = placement.runtime(side).filter(|_| side < labels.len()) {
                    alone_times[c][side].push(time_alone(runtime, case.as_ref())?);
                    continue;
                }
                let placed = placement.run_case(case.as_ref())?;
                let spec = suite::chosen_spec(
                    placement.runtime(placed.device).ok_or("no such device")?,
                    case.as_ref(),
                );
                check(case.as_ref(), &placed.label, &placed.value, &spec);
                placed_times[c].push(placed.seconds);
                chosen[c] = placed.label;
            }
        }
    }
    let alone: Vec<Vec<f64>> =
        alone_times.iter_mut().map(|per_device| per_device.iter_mut().map(|t| median(t)).collect()).collect();

    // The table.
    print!("{:<28}", "shape (ms to result)");
    for label in &labels {
        print!(" {label:>12}");
    }
    println!(" {:>12} {:>12} {:>8}", "placement", "chose", "vs best");
    let mut totals = vec![0.0; labels.len()];
    let mut placed_total = 0.0;
    let mut within = 0;
    for (c, case) in cases.iter().enumerate() {
        print!("{:<28}", case.describe());
        for (d, total) in totals.iter_mut().enumerate() {
            print!(" {:>12}", ms(alone[c][d]));
            *total += alone[c][d];
        }
        let time = median(&mut placed_times[c]);
        placed_total += time;
        let best = alone[c].iter().copied().fold(f64::INFINITY, f64::min);
        let best_device = alone[c].iter().position(|&t| t <= best).unwrap_or(0);
        // The chosen device's own time against the best device's (both measured alone).
        let chosen_index = labels.iter().position(|l| *l == chosen[c]).unwrap_or(0);
        let ratio = alone[c][chosen_index] / best;
        if ratio <= 1.05 {
            within += 1;
        }
        println!(
            " {:>12} {:>12} {:>7.2}x{}",
            ms(time),
            chosen[c],
            ratio,
            if chosen_index == best_device { "" } else { " *" }
        );
    }
    print!("{:<28}", "total");
    for total in &totals {
        print!(" {:>12}", ms(*total));
    }
    println!(" {:>12}", ms(placed_total));
    let best_single = totals.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "shapes on a device within 5% of the best: {within} of {}; stream {:.3}x the best single device",
        cases.len(),
        placed_total / best_single
    );
    if options.explain {
        for case in &cases {
            println!("{}:\n{}", case.describe(), placement.explain(&Placement::case_workload(case.as_ref())));
        }
    }
    Ok(if wrong == 0 { ExitCode::SUCCESS } else { ExitCode::from(WRONG_RESULT) })
}
