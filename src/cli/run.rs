//! `sparkle run <kernel> [sizes]`: one suite kernel, timed and checked against the CPU.

use std::process::ExitCode;
use std::time::Instant;

use sparkle::suite;

use super::{ms, CliResult};

pub fn run(kernel: &str, sizes: &[usize], seed: u64) -> CliResult<ExitCode> {
    let case = suite::case(kernel, sizes, seed)?;
    let backend = sparkle::open_from_env()?;
    println!("{} on {} ({})", case.describe(), backend.info().name, backend.info().backend);

    let before = backend.cache_stats();
    let started = Instant::now();
    let program = backend.program(&case.spec())?;
    let program_time = started.elapsed();
    let after = backend.cache_stats();
    let origin = if after.disk_hits > before.disk_hits {
        "loaded from the disk cache"
    } else if after.compiles > before.compiles {
        "compiled"
    } else {
        "found in memory"
    };

    let buffers = case.upload(backend.as_ref())?;
    let dispatched = Instant::now();
    case.dispatch(backend.as_ref(), &program, &buffers)?.wait(suite::DISPATCH_TIMEOUT)?;
    let got = case.download(backend.as_ref(), &buffers)?;
    let first_result = started.elapsed();
    let run_time = dispatched.elapsed();
    let (want, tolerance) = case.reference();
    let verdict = suite::verify(&got, &want, &tolerance);

    println!("  program: {} ms ({origin})", ms(program_time));
    println!("  dispatch + download: {} ms", ms(run_time));
    println!("  time to first result: {} ms", ms(first_result));
    println!("  result: {verdict}");
    Ok(if verdict.passed() { ExitCode::SUCCESS } else { ExitCode::from(2) })
}
