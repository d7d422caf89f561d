//! `sparkle run <kernel> [sizes]`: one suite kernel, timed and checked against the CPU.

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use sparkle::{suite, Placement, Runtime};

use super::{ms, CliResult, UsageError, WRONG_RESULT};

/// Outputs checked against the CPU reference: every one up to this many, else this many spread
/// over them (a large conv2d's reference with a Winograd error bound would take minutes).
const CHECKED_OUTPUTS: usize = 200_000;

pub fn run(
    kernel: &str,
    sizes: &[usize],
    seed: u64,
    trace: Option<&Path>,
    explain: bool,
) -> CliResult<ExitCode> {
    if !suite::NAMES.contains(&kernel) {
        return Err(Box::new(UsageError(format!(
            "no suite kernel is called `{kernel}`; the suite has {}",
            suite::NAMES.join(", ")
        ))));
    }
    let trace = super::start_trace(trace);
    let outcome = if explain { run_placed(kernel, sizes, seed) } else { run_traced(kernel, sizes, seed) };
    // Also after a failure: the trace shows how far the run got.
    super::trace_written(trace);
    outcome
}

fn run_traced(kernel: &str, sizes: &[usize], seed: u64) -> CliResult<ExitCode> {
    let runtime = Runtime::from_env()?;
    // Sizes are checked against the device before any input is made.
    let case = suite::case(kernel, sizes, seed, &runtime.info().limits).map_err(UsageError)?;
    println!("{} on {} ({})", case.describe(), runtime.info().name, runtime.backend());

    let before = runtime.cache_stats();
    let started = Instant::now();
    let program = runtime.program(&suite::chosen_spec(&runtime, case.as_ref()))?;
    let program_time = started.elapsed();
    let after = runtime.cache_stats();
    let origin = if after.disk_hits > before.disk_hits {
        "loaded from the disk cache"
    } else if after.remote_hits > before.remote_hits {
        "loaded from the remote cache"
    } else if after.compiles > before.compiles {
        "compiled"
    } else {
        "found in memory"
    };

    let buffers = case.upload_for(&runtime, &program)?;
    let dispatched = Instant::now();
    case.dispatch(&runtime, &program, &buffers)?.wait(suite::DISPATCH_TIMEOUT)?;
    let got = case.download(&runtime, &buffers)?;
    let first_result = started.elapsed();
    let run_time = dispatched.elapsed();
    let checked = case.outputs().min(CHECKED_OUTPUTS);
    let verdict = suite::verify_sampled(case.as_ref(), program.spec(), &got, CHECKED_OUTPUTS);

    println!("  program: {} ms ({origin})", ms(program_time));
    println!("  dispatch + download: {} ms", ms(run_time));
    println!("  time to first result: {} ms", ms(first_result));
    if checked < case.outputs() {
        println!(
            "  checked against the CPU: {checked} of {} outputs, spread over all of them (the first and last included)",
            case.outputs()
        );
    }
    println!("  result: {verdict}");
    Ok(if verdict.passed() { ExitCode::SUCCESS } else { ExitCode::from(WRONG_RESULT) })
}

/// `--explain`: the run goes where the placement chooses, after saying why; what it measured
/// is kept in the placement's history.
fn run_placed(kernel: &str, sizes: &[usize], seed: u64) -> CliResult<ExitCode> {
    let mut placement = Placement::from_env()?;
    // Once per device set: the measured costs are kept with the history.
    placement.calibrate()?;
    let limits = placement.runtime(0).map(|runtime| runtime.info().limits.clone());
    let Some(limits) = limits else {
        return Err("the placement holds no device".into());
    };
    let case = suite::case(kernel, sizes, seed, &limits).map_err(UsageError)?;
    let workload = Placement::case_workload(case.as_ref());
    println!("{} placed among {}", case.describe(), placement.labels().join(", "));
    println!("{}", placement.explain(&workload));
    let placed = placement.run_case(case.as_ref())?;
    let device =
        placement.runtime(placed.device).map_or_else(String::new, |runtime| runtime.info().name.clone());
    println!(
        "  ran on {} ({device}): {} ms to result",
        placed.label,
        ms(std::time::Duration::from_secs_f64(placed.seconds))
    );
    let spec = placement
        .runtime(placed.device)
        .map_or_else(|| case.spec(), |runtime| suite::chosen_spec(runtime, case.as_ref()));
    let verdict = suite::verify_sampled(case.as_ref(), &spec, &placed.value, CHECKED_OUTPUTS);
    println!("  result: {verdict}");
    if let Some(path) = placement.history_path() {
        println!("  history: {}", path.display());
    }
    Ok(if verdict.passed() { ExitCode::SUCCESS } else { ExitCode::from(WRONG_RESULT) })
}
