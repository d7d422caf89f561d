//! `sparkle-bench bench-placement`: a mixed stream of problem sizes (tiny to large saxpy, sgemm
//! and conv2d) run on each device alone and on a [`Placement`] over all of them, with the
//! placement's choice per shape and the totals. The placement first learns (passes until every
//! shape's history is trusted on each device it calibrates, at most `--learn` passes; their
//! cost is reported apart), then the stream is timed the same way on every side, shape by
//! shape, the sides taking turns in every order so that each follows each other equally often
//! (a simulator run leaves the caches and the cores' clocks to whatever runs next). Every side
//! is timed from the outside, the placement's own work included: a device alone from fetching
//! its program (a memory hit) to having the result; the placement from the call to
//! `run_case` to its return (choosing, the program, the run, learning from it). Every result
//! is checked, after its pass: a pass times the calls alone, the same way on every side.
//! `--breakdown` adds where the placement's time goes: its own cost per call, the cost of a
//! device running right after another one, what learning cost per device and what exploring
//! took in the timed passes.

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use sparkle::cache::CacheConfig;
use sparkle::runtime::{Basis, Reason};
use sparkle::suite::{self, Case};
use sparkle::{Placed, Placement, Program, Runtime};
use sparkle_cli::{CliResult, WRONG_RESULT};

/// What to run.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// The devices (as SPARKLE_DEVICES lists them); default SPARKLE_DEVICES, else every real
    /// device.
    #[arg(long)]
    pub devices: Option<String>,
    /// Timed passes over the stream after learning (the median per shape is reported). 480: a
    /// pass's time moves by ±5-10% from one to the next, and the ratio of two sides' median
    /// passes by as much between runs of one build when there are few. On the 2-core machine,
    /// llvmpipe beside the simulator, runs of 120 passes spanned 0.997-1.074x (six runs of one
    /// build) and runs of 480 1.008-1.033x (twelve); on an H200 runs of 24 moved by ±4%.
    #[arg(long, default_value_t = 480)]
    pub repeats: usize,
    /// At most this many learning passes (learning stops at the first pass that finds every
    /// shape on a trusted device and none calibrating). Calibrating two devices takes each
    /// shape twelve runs (five trusted and one warm-up each): on an H200 beside llvmpipe the
    /// stream settled after 12-14 passes.
    #[arg(long, default_value_t = 24)]
    pub learn: usize,
    /// Also prints the placement's explanation of each shape.
    #[arg(long)]
    pub explain: bool,
    /// Also prints where the placement's time goes (its own cost per call, a device run after
    /// another, the learning passes).
    #[arg(long)]
    pub breakdown: bool,
    /// Also print every learning run and every timed placed run: its pass, shape, device, the
    /// reason it went there and its time.
    #[arg(long)]
    pub learning_log: bool,
    /// Larger problems (for GPUs; the default sizes suit llvmpipe and the simulator).
    #[arg(long)]
    pub large: bool,
    /// The order the sides take turns in: balanced (over every `sides - 1` passes of each, every
    /// side comes right after every other equally often, never after itself), or rotated (the
    /// placement then always follows the last device).
    #[arg(long, value_enum, default_value_t = Order::Balanced)]
    pub order: Order,
    /// Each device's first runs of a workload not learned from (`PlacementRules::warm_up_runs`;
    /// default: the rules' own).
    #[arg(long)]
    pub warm_up_runs: Option<u32>,
    /// The share of the settled stream's time explorations may take
    /// (`PlacementRules::explore_share`; default: the rules' own).
    #[arg(long)]
    pub explore_share: Option<f64>,
}

/// The order the sides of a pass run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Order {
    /// Rounds in which every side comes right after every other equally often.
    Balanced,
    /// The sides rotated by one each pass.
    Rotate,
}

/// What the learning passes ran on one device.
#[derive(Debug, Clone, Copy, Default)]
struct Learning {
    runs: usize,
    seconds: f64,
    compiling_runs: usize,
    compiling_s: f64,
}

/// Wrong results seen (each is printed): the command then exits with `WRONG_RESULT`.
static WRONG: AtomicUsize = AtomicUsize::new(0);

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

/// One timed run of a device alone: (seconds from fetching the program to the result, seconds
/// of the upload, dispatch and read-back alone), with the result and the program to check it by
/// after the pass.
fn time_alone(runtime: &Runtime, case: &dyn Case) -> CliResult<(f64, f64, Vec<f32>, Program)> {
    let start = Instant::now();
    let program = runtime.program(&suite::chosen_spec(runtime, case))?;
    let work = Instant::now();
    let buffers = case.upload_for(runtime, &program)?;
    case.dispatch(runtime, &program, &buffers)?.wait(suite::DISPATCH_TIMEOUT)?;
    let got = case.download(runtime, &buffers)?;
    // Releasing the buffers is part of what a run costs a stream (the placed side pays it
    // inside its call).
    drop(buffers);
    let end = Instant::now();
    Ok(((end - start).as_secs_f64(), (end - work).as_secs_f64(), got, program))
}

/// Checks a device's result against the CPU; a wrong one is printed and counted.
fn check_alone(runtime: &Runtime, case: &dyn Case, program: &Program, got: &[f32]) {
    let verdict = suite::verify_sampled(case, program.spec(), got, 2_000);
    if !verdict.passed() {
        eprintln!("{} on {}: {verdict}", case.describe(), runtime.backend());
        WRONG.fetch_add(1, Ordering::Relaxed);
    }
}

/// [`time_alone`], checked at once (outside the timed passes).
fn run_alone(runtime: &Runtime, case: &dyn Case) -> CliResult<f64> {
    let (whole, _, got, program) = time_alone(runtime, case)?;
    check_alone(runtime, case, &program, &got);
    Ok(whole)
}

/// One timed placed run: (seconds of the whole call, the run as the placement measured it).
fn time_placed(placement: &Placement, case: &dyn Case) -> CliResult<(f64, Placed<Vec<f32>>)> {
    let start = Instant::now();
    let placed = placement.run_case(case)?;
    Ok((start.elapsed().as_secs_f64(), placed))
}

/// Checks a placed result against the CPU; a wrong one is printed and counted. (Finding the
/// spec its device ran costs up to 0.2 ms for sgemm and conv2d on llvmpipe: it is done after
/// the pass, as for the devices alone, never inside the time of a pass.)
fn check_placed(placement: &Placement, case: &dyn Case, placed: &Placed<Vec<f32>>) -> CliResult<()> {
    let runtime = placement.runtime(placed.device).ok_or("no such device")?;
    let spec = suite::chosen_spec(runtime, case);
    let verdict = suite::verify_sampled(case, &spec, &placed.value, 2_000);
    if !verdict.passed() {
        eprintln!("{} on {} (placed): {verdict}", case.describe(), placed.label);
        WRONG.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

fn median(values: &[f64]) -> f64 {
    let mut values = values.to_vec();
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn ms(seconds: f64) -> String {
    format!("{:.3}", seconds * 1e3)
}

/// Rounds of `n` sides, each side once per round, in which every side comes right after every
/// other side equally often and never right after itself — counting from each round into the
/// next, and from the last back into the first, since the passes run back to back: `n - 1`
/// rounds hold each ordered pair once. A side's pass runs slower right after some sides than
/// others (on an H200, the GPU's pass took 1.46 ms right after llvmpipe's and 1.38 right after
/// its own), so the sides must follow the same mix. Every order in turn does not: cycled, the
/// six orders of three sides put the placement after llvmpipe in half its passes and the GPU in
/// a third, and the GPU after itself in a sixth. Up to five sides; more are rotated (then each
/// side always follows the same one).
fn balanced_rounds(n: usize) -> Vec<Vec<usize>> {
    let rotations = || (0..n).map(|r| (0..n).map(|k| (k + r) % n).collect()).collect();
    if !(2..=5).contains(&n) {
        return rotations();
    }
    let first: Vec<usize> = (0..n).collect();
    let mut used = vec![false; n * n];
    for pair in first.windows(2) {
        used[pair[0] * n + pair[1]] = true;
    }
    let mut rounds = vec![first];
    if extend_rounds(n, &mut rounds, &mut used) {
        rounds
    } else {
        rotations()
    }
}

/// Adds rounds to `rounds` (depth first) until there are `n - 1` using each ordered pair of
/// sides once (`used`: the pairs taken so far, `a * n + b` for b right after a).
fn extend_rounds(n: usize, rounds: &mut Vec<Vec<usize>>, used: &mut [bool]) -> bool {
    let last = rounds.last().and_then(|round| round.last()).copied().unwrap_or(0);
    if rounds.len() == n - 1 {
        // Back into the first round, which starts with side 0.
        return last != 0 && !used[last * n];
    }
    let mut round = Vec::with_capacity(n);
    let mut taken = vec![false; n];
    try_round(n, last, &mut round, &mut taken, rounds, used)
}

/// Completes `round` (after the side `before` it) with the sides not `taken`, each step on an
/// unused pair, then the rounds after it.
fn try_round(
    n: usize,
    before: usize,
    round: &mut Vec<usize>,
    taken: &mut [bool],
    rounds: &mut Vec<Vec<usize>>,
    used: &mut [bool],
) -> bool {
    if round.len() == n {
        rounds.push(round.clone());
        if extend_rounds(n, rounds, used) {
            return true;
        }
        rounds.pop();
        return false;
    }
    let previous = round.last().copied().unwrap_or(before);
    for side in 0..n {
        if taken[side] || side == previous || used[previous * n + side] {
            continue;
        }
        used[previous * n + side] = true;
        taken[side] = true;
        round.push(side);
        if try_round(n, before, round, taken, rounds, used) {
            return true;
        }
        round.pop();
        taken[side] = false;
        used[previous * n + side] = false;
    }
    false
}

/// Runs the benchmark and prints its table.
pub fn run(options: Options) -> CliResult<ExitCode> {
    let list = options.devices.clone().or_else(|| std::env::var(sparkle::DEVICES_ENV).ok());
    // The benchmark learns in a cache of its own: what it learns is not the user's history.
    let cache_dir = tempfile::tempdir()?;
    let mut placement = Placement::open(list.as_deref(), &CacheConfig::in_dir(cache_dir.path()))?;
    if let Some(warm_up_runs) = options.warm_up_runs {
        let rules = sparkle::runtime::PlacementRules { warm_up_runs, ..*placement.rules() };
        placement = placement.with_rules(rules);
    }
    if let Some(explore_share) = options.explore_share {
        if !(0.0..=1.0).contains(&explore_share) {
            return Err(format!("--explore-share {explore_share}: a share from 0 to 1").into());
        }
        let rules = sparkle::runtime::PlacementRules { explore_share, ..*placement.rules() };
        placement = placement.with_rules(rules);
    }
    let calibrate_start = Instant::now();
    placement.calibrate()?;
    let calibrate_s = calibrate_start.elapsed().as_secs_f64();
    let labels: Vec<String> = placement.labels().iter().map(|l| (*l).to_owned()).collect();
    let limits =
        placement.runtime(0).map(|r| r.info().limits.clone()).ok_or("the placement holds no device")?;
    let mut cases = Vec::new();
    for (seed, (kernel, sizes)) in stream(options.large).into_iter().enumerate() {
        cases.push(suite::case(kernel, &sizes, seed as u64, &limits)?);
    }
    println!("placement over {} — {} shapes", labels.join(", "), cases.len());

    // Learning passes (timed as a whole: what learning costs a stream), then timed ones. Per
    // device: the runs, their seconds, and those of the runs that compiled a program.
    let learn_start = Instant::now();
    let mut learn_passes = 0;
    let mut learning = vec![Learning::default(); labels.len()];
    for _ in 0..options.learn {
        let settled = cases.iter().all(|case| {
            let decision = placement.explain(&Placement::case_workload(case.as_ref()));
            decision.predictions[decision.device].basis == Basis::Learned
                && !matches!(decision.reason, Reason::Calibrating)
        });
        if settled {
            break;
        }
        learn_passes += 1;
        for case in &cases {
            let compiles: Vec<u64> = (0..labels.len())
                .map(|d| placement.runtime(d).map_or(0, |r| r.cache_stats().compiles))
                .collect();
            let (seconds, placed) = time_placed(&placement, case.as_ref())?;
            check_placed(&placement, case.as_ref(), &placed)?;
            let d = placed.device;
            let compiled = placement.runtime(d).map_or(0, |r| r.cache_stats().compiles) > compiles[d];
            if options.learning_log {
                println!(
                    "learning pass {learn_passes:>2}  {:<32} {:<10} {:>10.3} ms  {:?}{}",
                    case.describe(),
                    placed.label,
                    seconds * 1e3,
                    placed.decision.reason,
                    if compiled { " (compiled)" } else { "" }
                );
            }
            if let Some(learning) = learning.get_mut(d) {
                learning.runs += 1;
                learning.seconds += seconds;
                if compiled {
                    learning.compiling_runs += 1;
                    learning.compiling_s += seconds;
                }
            }
        }
    }
    let learn_s = learn_start.elapsed().as_secs_f64();
    let spent_learning = placement.spent();
    // Each device alone, warmed (compile, the driver's first use).
    for (d, _) in labels.iter().enumerate() {
        let runtime = placement.runtime(d).ok_or("no such device")?;
        for case in &cases {
            run_alone(runtime, case.as_ref())?;
        }
    }
    let sides = labels.len() + 1;
    let orders = match options.order {
        Order::Balanced => balanced_rounds(sides),
        Order::Rotate => (0..sides).map(|r| (0..sides).map(|k| (k + r) % sides).collect()).collect(),
    };
    let repeats = options.repeats.max(1);
    // [shape][side] → (whole, work) samples, and per side the seconds of each whole pass; the
    // placement is the last side. The results are checked after each pass: a pass times the
    // calls alone, the same way on every side.
    let mut times = vec![vec![Vec::new(); sides]; cases.len()];
    let mut passes = vec![Vec::new(); sides];
    // Per placement pass: the shapes run elsewhere than their device of most runs, by reason.
    let mut pass_notes: Vec<Vec<String>> = Vec::new();
    let mut chosen = vec![Vec::new(); cases.len()];
    let mut explored = vec![Vec::new(); cases.len()];
    for repeat in 0..repeats {
        for &side in &orders[repeat % orders.len()] {
            let mut alone_results = Vec::with_capacity(cases.len());
            let mut placed_results = Vec::with_capacity(cases.len());
            let pass = Instant::now();
            for (c, case) in cases.iter().enumerate() {
                if let Some(runtime) = placement.runtime(side).filter(|_| side < labels.len()) {
                    let (whole, work, got, program) = time_alone(runtime, case.as_ref())?;
                    times[c][side].push((whole, work));
                    alone_results.push((c, got, program));
                    continue;
                }
                let (whole, placed) = time_placed(&placement, case.as_ref())?;
                times[c][side].push((whole, placed.seconds));
                placed_results.push((c, placed));
            }
            passes[side].push(pass.elapsed().as_secs_f64());
            for (c, got, program) in alone_results {
                let runtime = placement.runtime(side).ok_or("no such device")?;
                check_alone(runtime, cases[c].as_ref(), &program, &got);
            }
            if side == labels.len() {
                pass_notes.push(
                    placed_results
                        .iter()
                        .filter(|(_, placed)| !matches!(placed.decision.reason, Reason::Kept | Reason::Only))
                        .map(|(c, placed)| {
                            format!(
                                "{} on {} ({:?})",
                                cases[*c].describe(),
                                placed.label,
                                placed.decision.reason
                            )
                        })
                        .collect(),
                );
            }
            for (c, placed) in placed_results {
                check_placed(&placement, cases[c].as_ref(), &placed)?;
                if options.learning_log {
                    let (whole, work) = times[c][side].last().copied().unwrap_or((f64::NAN, f64::NAN));
                    println!(
                        "timed pass {repeat:>2}  {:<32} {:<10} {:>10.3} ms (run {:.3})  {:?}",
                        cases[c].describe(),
                        placed.label,
                        whole * 1e3,
                        work * 1e3,
                        placed.decision.reason
                    );
                }
                if matches!(placed.decision.reason, Reason::Exploring | Reason::Calibrating) {
                    explored[c].push((placed.label.clone(), times[c][side].last().map_or(0.0, |t| t.0)));
                }
                chosen[c].push(placed.label);
            }
        }
    }
    let whole = |c: usize, side: usize| median(&times[c][side].iter().map(|t| t.0).collect::<Vec<_>>());
    let placed = labels.len();

    // The table.
    print!("{:<28}", "shape (ms to result)");
    for label in &labels {
        print!(" {label:>12}");
    }
    println!(" {:>12} {:>12} {:>8}", "placement", "chose", "vs best");
    let mut within = 0;
    let mut differ = false;
    for (c, case) in cases.iter().enumerate() {
        print!("{:<28}", case.describe());
        for d in 0..labels.len() {
            print!(" {:>12}", ms(whole(c, d)));
        }
        let alone: Vec<f64> = (0..labels.len()).map(|d| whole(c, d)).collect();
        let best = alone.iter().copied().fold(f64::INFINITY, f64::min);
        let best_device = alone.iter().position(|&t| t <= best).unwrap_or(0);
        // The device that ran most of the timed runs, its own time alone against the best's.
        let mut counts = vec![0usize; labels.len()];
        for label in &chosen[c] {
            if let Some(d) = labels.iter().position(|l| l == label) {
                counts[d] += 1;
            }
        }
        let chosen_index = (0..labels.len()).max_by_key(|&d| counts[d]).unwrap_or(0);
        let ratio = alone[chosen_index] / best;
        if ratio <= 1.05 {
            within += 1;
        }
        let mixed = if counts.iter().filter(|&&n| n > 0).count() > 1 { "+" } else { "" };
        println!(
            " {:>12} {:>12} {:>7.2}x{}{mixed}",
            ms(whole(c, placed)),
            labels[chosen_index],
            ratio,
            if chosen_index == best_device { "" } else { " *" }
        );
        // Devices differ by shape when another device is clearly (5%) faster for some shape.
        let first = alone.iter().position(|&t| t <= best * 1.05).unwrap_or(0);
        if alone.iter().any(|&t| t * 1.05 < alone[first]) || best_device != first {
            differ = true;
        }
    }
    let totals: Vec<f64> = passes.iter().map(|p| median(p)).collect();
    print!("{:<28}", "stream (median pass)");
    for total in &totals {
        print!(" {:>12}", ms(*total));
    }
    println!();
    let best_single = totals[..labels.len()].iter().copied().fold(f64::INFINITY, f64::min);
    let placed_total = totals[placed];
    // The ratio pass by pass: each placement pass against the best device's pass of the same
    // repeat (they ran next to each other).
    let best_index = totals[..labels.len()].iter().position(|&t| t <= best_single).unwrap_or(0);
    let ratios: Vec<f64> = passes[placed].iter().zip(&passes[best_index]).map(|(p, b)| p / b).collect();
    let quartile = |q: f64| {
        let mut sorted = ratios.clone();
        sorted.sort_by(f64::total_cmp);
        sorted.get(((sorted.len() - 1) as f64 * q).round() as usize).copied().unwrap_or(f64::NAN)
    };
    println!(
        "shapes on a device within 5% of the best: {within} of {}; stream {:.3}x the best single device \
         (medians of the passes), pass by pass {:.3}x (median; quartiles {:.3}-{:.3}x), all passes \
         together {:.3}x (explorations included){}",
        cases.len(),
        placed_total / best_single,
        quartile(0.5),
        quartile(0.25),
        quartile(0.75),
        passes[placed].iter().sum::<f64>() / passes[best_index].iter().sum::<f64>(),
        if differ { "; the best device differs by shape" } else { "" }
    );
    println!(
        "(medians of {repeats} passes, each side running the whole stream back to back, sides in turn \
         ({}); `*`: not the device measured fastest alone, `+`: some timed runs went elsewhere)",
        match options.order {
            Order::Balanced => "balanced: each right after each other equally often",
            Order::Rotate => "rotated",
        }
    );
    println!(
        "learning: {learn_passes} pass(es), {} ms = {:.2}x as many passes of the best device \
         (runs per device: {}); calibration {} ms",
        ms(learn_s),
        learn_s / (learn_passes.max(1) as f64 * best_single),
        labels.iter().zip(&learning).map(|(l, n)| format!("{l} {}", n.runs)).collect::<Vec<_>>().join(", "),
        ms(calibrate_s)
    );

    if options.breakdown {
        println!(
            "learning by device (ms): {}",
            labels
                .iter()
                .zip(&learning)
                .map(|(l, n)| format!(
                    "{l} {} runs {} (of which {} compiling {})",
                    n.runs,
                    ms(n.seconds),
                    n.compiling_runs,
                    ms(n.compiling_s)
                ))
                .collect::<Vec<_>>()
                .join("; ")
        );
        for (device, moves) in placement.moves() {
            match moves {
                Some(m) => println!(
                    "moving to {device}: {} µs or {:.1}% of the run ({} samples)",
                    format_args!("{:.1}", m.cost_s * 1e6),
                    m.share * 100.0,
                    m.samples
                ),
                None => println!("moving to {device}: nothing learned"),
            }
        }
        let spent = placement.spent();
        let timed_runs = spent.runs_s - spent_learning.runs_s;
        let timed_exploring = spent.exploring_s - spent_learning.exploring_s;
        let share = |part: f64, whole: f64| 100.0 * part / whole.max(f64::MIN_POSITIVE);
        println!(
            "exploring: {} of the {} ms of settled runs learned from ({:.2}%; the budget is {:.0}% of \
             them; {} ms in all, calibrations included); in the timed passes {} of {} ms ({:.2}%)",
            ms(spent.exploring_s),
            ms(spent.settled_s),
            share(spent.exploring_s, spent.settled_s),
            100.0 * placement.rules().explore_share,
            ms(spent.runs_s),
            ms(timed_exploring),
            ms(timed_runs),
            share(timed_exploring, timed_runs)
        );
        // Pass by pass, in the order they ran: the placement's time against the best device's
        // pass of the same repeat, and what the placement did other than keep.
        let best =
            (0..labels.len()).min_by(|&a, &b| median(&passes[a]).total_cmp(&median(&passes[b]))).unwrap_or(0);
        println!("passes (ms), placement against {}:", labels[best]);
        for (r, (p, b)) in passes[labels.len()].iter().zip(&passes[best]).enumerate() {
            let notes = pass_notes.get(r).map(|n| n.join("; ")).unwrap_or_default();
            println!("  {r:>3} {} {} {:.3}x {notes}", ms(*p), ms(*b), p / b);
        }
        breakdown(&placement, &cases, &labels, &times, &chosen, &explored)?;
    }
    if options.explain {
        for case in &cases {
            println!("{}:\n{}", case.describe(), placement.explain(&Placement::case_workload(case.as_ref())));
        }
    }
    Ok(if WRONG.load(Ordering::Relaxed) == 0 { ExitCode::SUCCESS } else { ExitCode::from(WRONG_RESULT) })
}

/// Where the placement's time goes: per shape, the placed call against the device that ran
/// most of its runs alone — the excess split into the call beyond its own measured run (the
/// placement's choosing and learning) and the run itself (a device right after another, and
/// the runs explored elsewhere); the placement's own decision and learning per call (no
/// device); and each device run right after itself and right after each other device.
fn breakdown(
    placement: &Placement,
    cases: &[Box<dyn Case>],
    labels: &[String],
    times: &[Vec<Vec<(f64, f64)>>],
    chosen: &[Vec<String>],
    explored: &[Vec<(String, f64)>],
) -> CliResult<()> {
    let placed = labels.len();
    // Each side's runs of each shape beyond their median: a device whose runs have a tail is
    // slower in a stream than its median says, and the placement learns means.
    println!("runs per shape and side (ms): median / mean / 90th percentile / max");
    for (c, case) in cases.iter().enumerate() {
        let sides: Vec<String> = (0..=labels.len())
            .map(|side| {
                let mut runs: Vec<f64> = times[c][side].iter().map(|t| t.0).collect();
                runs.sort_by(f64::total_cmp);
                let mean = runs.iter().sum::<f64>() / runs.len().max(1) as f64;
                let p90 = runs.get((runs.len().saturating_sub(1) as f64 * 0.9).round() as usize).copied();
                format!(
                    "{} {}/{}/{}/{}",
                    labels.get(side).map_or("placement", String::as_str),
                    ms(median(&runs)),
                    ms(mean),
                    ms(p90.unwrap_or(f64::NAN)),
                    ms(runs.last().copied().unwrap_or(f64::NAN))
                )
            })
            .collect();
        println!("  {:<28} {}", case.describe(), sides.join("  "));
    }
    println!("breakdown (µs, medians; excess = placed call - its device alone):");
    println!(
        "{:<28} {:>10} {:>10} {:>10} {:>12} {:>12} {:>12}",
        "shape", "excess", "of it: own", "its run", "placed work", "explored", "explored ms"
    );
    let mut excess_total = 0.0;
    let mut own_total = 0.0;
    for (c, case) in cases.iter().enumerate() {
        let med = |side: usize, f: &dyn Fn(&(f64, f64)) -> f64| {
            median(&times[c][side].iter().map(f).collect::<Vec<_>>())
        };
        // The device that ran most of the placed runs, against its own runs alone.
        let device = (0..labels.len())
            .max_by_key(|&d| chosen[c].iter().filter(|l| **l == labels[d]).count())
            .unwrap_or(0);
        let excess = med(placed, &|t| t.0) - med(device, &|t| t.0);
        let own = med(placed, &|t| t.0 - t.1) - med(device, &|t| t.0 - t.1);
        let run = med(placed, &|t| t.1) - med(device, &|t| t.1);
        excess_total += excess;
        own_total += own;
        let elsewhere: Vec<String> = labels
            .iter()
            .filter_map(|l| {
                let n = explored[c].iter().filter(|(e, _)| e == l).count();
                (n > 0).then(|| format!("{l} {n}"))
            })
            .collect();
        println!(
            "{:<28} {:>10.1} {:>10.1} {:>10.1} {:>12.1} {:>12} {:>12}",
            case.describe(),
            excess * 1e6,
            own * 1e6,
            run * 1e6,
            med(placed, &|t| t.1) * 1e6,
            if elsewhere.is_empty() { "-".to_owned() } else { elsewhere.join(" ") },
            ms(explored[c].iter().map(|(_, t)| t).sum::<f64>())
        );
    }
    println!(
        "per pass: the shapes' median excess {:.1} µs, of which the placement's own calls {:.1} µs",
        excess_total * 1e6,
        own_total * 1e6
    );
    // The decision and the learning alone, on a workload of their own (the stream's history is
    // left as it was).
    let workload = sparkle::Workload::new("placement-probe", 1.0, 1.0);
    let calls = 20_000;
    let start = Instant::now();
    for _ in 0..calls {
        let decision = placement.choose(&workload);
        let seconds = decision.predictions[decision.device].seconds;
        placement.record(&workload, decision.device, seconds);
    }
    println!(
        "the placement's own decision + learning: {:.2} µs per call ({calls} calls, no device)",
        start.elapsed().as_secs_f64() * 1e6 / calls as f64
    );
    // The same right after a device ran a shape (caches and branch predictors as a stream
    // leaves them), on a workload of its own so that the stream's history is left alone.
    let probe = workload;
    let after_run = after_each_device_run(placement, cases, |_| {
        let decision = placement.choose(&probe);
        placement.record(&probe, decision.device, 1e-3);
    })?;
    println!(
        "the same right after a device run: {:.2} µs per call (median of {})",
        median(&after_run) * 1e6,
        after_run.len()
    );
    // What reading the clock twice costs right after a device run: what any step there pays
    // (the device's threads winding down, a cold core), against which the line above is read.
    let clock_after_run = after_each_device_run(placement, cases, |_| {})?;
    println!(
        "the clock alone right after a device run: {:.2} µs (median of {})",
        median(&clock_after_run) * 1e6,
        clock_after_run.len()
    );
    // What a device's cache statistics cost right after a device run (the placement, which
    // asks whether a run compiled, reads the one counter instead).
    let stats_after_run = after_each_device_run(placement, cases, |runtime| {
        std::hint::black_box(runtime.cache_stats());
    })?;
    println!(
        "a device's cache statistics right after a device run: {:.2} µs per call (median of {})",
        median(&stats_after_run) * 1e6,
        stats_after_run.len()
    );
    let mut workload_cost = Vec::new();
    for case in cases {
        let start = Instant::now();
        for _ in 0..200 {
            std::hint::black_box(Placement::case_workload(case.as_ref()));
        }
        workload_cost.push(format!("{:.1}", start.elapsed().as_secs_f64() * 1e6 / 200.0));
    }
    println!("a suite problem's workload (kernel, size class), µs per shape: {}", workload_cost.join(", "));
    // What fetching a program costs per call (a memory hit; the same on every side).
    for (d, label) in labels.iter().enumerate() {
        let runtime = placement.runtime(d).ok_or("no such device")?;
        let mut fetch = Vec::new();
        for case in cases {
            let calls = 200;
            let start = Instant::now();
            for _ in 0..calls {
                std::hint::black_box(runtime.program(&suite::chosen_spec(runtime, case.as_ref()))?);
            }
            fetch.push(format!("{:.1}", start.elapsed().as_secs_f64() * 1e6 / f64::from(calls)));
        }
        println!("program fetch (memory hit) on {label}, µs per shape: {}", fetch.join(", "));
    }
    // A device after itself, and after each other device, on the same shape.
    println!("a device's time (µs) right after a run of:");
    let rounds = 9;
    for case in cases {
        for (d, label) in labels.iter().enumerate() {
            let runtime = placement.runtime(d).ok_or("no such device")?;
            let mut after = Vec::new();
            for (p, _) in labels.iter().enumerate() {
                let previous = placement.runtime(p).ok_or("no such device")?;
                let mut samples = Vec::new();
                for _ in 0..rounds {
                    run_alone(previous, case.as_ref())?;
                    samples.push(run_alone(runtime, case.as_ref())?);
                }
                after.push(format!("{} {:.1}", labels[p], median(&samples) * 1e6));
            }
            println!("  {:<28} {label:<12} {}", case.describe(), after.join(", "));
        }
    }
    Ok(())
}

/// The seconds `step` takes right after each device runs each shape alone (five rounds), given
/// the device that ran.
fn after_each_device_run(
    placement: &Placement,
    cases: &[Box<dyn Case>],
    mut step: impl FnMut(&Runtime),
) -> CliResult<Vec<f64>> {
    let mut seconds = Vec::new();
    for _ in 0..5 {
        for case in cases {
            for d in 0..placement.len() {
                let runtime = placement.runtime(d).ok_or("no such device")?;
                run_alone(runtime, case.as_ref())?;
                let start = Instant::now();
                step(runtime);
                seconds.push(start.elapsed().as_secs_f64());
            }
        }
    }
    Ok(seconds)
}

#[cfg(test)]
mod tests {
    use super::balanced_rounds;

    #[test]
    fn every_side_follows_every_other_once_over_the_rounds_and_never_itself() {
        for n in 2..=5 {
            let rounds = balanced_rounds(n);
            assert_eq!(rounds.len(), n - 1, "{n} sides: {rounds:?}");
            for round in &rounds {
                let mut sorted = round.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "{n} sides: {rounds:?}");
            }
            // The passes run back to back, the last round into the first again.
            let passes: Vec<usize> = rounds.concat();
            let mut pairs = vec![0; n * n];
            for (i, &side) in passes.iter().enumerate() {
                let before = passes[(i + passes.len() - 1) % passes.len()];
                pairs[before * n + side] += 1;
            }
            for a in 0..n {
                for b in 0..n {
                    assert_eq!(pairs[a * n + b], usize::from(a != b), "{n} sides, {a} then {b}: {rounds:?}");
                }
            }
        }
    }
}
