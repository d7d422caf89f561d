//! `sparkle tune [kernel] [sizes] [--force]`: times the variants of suite kernels on this GPU
//! and keeps each problem's winner in the GPU's cache folder, where `bench` and every later
//! process find it. A stored choice is kept unless `--force` asks to tune again.

use std::process::ExitCode;

use serde::Serialize;
use sparkle::suite::conv2d::{StagedConv2d, Transfers};
use sparkle::suite::{self, tuning, Case};
use sparkle::Runtime;

use super::{table, CliResult, UsageError};

#[derive(Serialize)]
struct Row {
    problem: String,
    variant: String,
    ms: f64,
    timer: String,
    candidates: usize,
    /// `tuned` now, or `stored` (kept from an earlier tune).
    source: &'static str,
    rejected: Vec<(String, String)>,
    /// (variant, median ms) of every variant timed now, one dispatch at a time, fastest first;
    /// empty when stored.
    timings: Vec<(String, f64)>,
    /// (variant, GPU ms per dispatch back to back) of the leaders of `timings`, timed again
    /// before the choice, fastest first; empty when stored or not timed back to back.
    leaders: Vec<(String, f64)>,
}

pub fn run(
    kernel: Option<&str>,
    sizes: &[usize],
    force: bool,
    quick: bool,
    json: bool,
    set: suite::ProblemSet,
    transfers: Option<Transfers>,
) -> CliResult<ExitCode> {
    let runtime = Runtime::from_env()?;
    let cases: Vec<Box<dyn Case>> = match (kernel, transfers) {
        (_, Some(transfers)) => vec![stage_case(kernel, sizes, transfers, &runtime)?],
        (Some(name), None) => {
            if !suite::NAMES.contains(&name) {
                return Err(Box::new(UsageError(format!(
                    "no suite kernel is called `{name}`; the suite has {}",
                    suite::NAMES.join(", ")
                ))));
            }
            vec![suite::case(name, sizes, 1, &runtime.info().limits).map_err(UsageError)?]
        }
        (None, None) if sizes.is_empty() => set.cases(1, quick),
        (None, None) => {
            return Err(Box::new(UsageError("sizes need a kernel: sparkle tune sgemm 4096".into())))
        }
    };
    let Some(path) = tuning::Tuning::path(&runtime) else {
        return Err("the program cache is memory-only here, so tuning results cannot be kept; \
                    set SPARKLE_CACHE_DIR to a writable folder"
            .into());
    };
    let stored = tuning::Tuning::load(&runtime).unwrap_or_default();
    let mut rows = Vec::new();
    for case in &cases {
        let key = tuning::key(case.as_ref());
        if let (false, Some(choice)) = (force, stored.choice(case.as_ref())) {
            eprintln!("{key}: stored choice {} ({:.3} ms); --force tunes again", choice.variant, choice.ms);
            rows.push(Row {
                problem: key,
                variant: choice.variant.clone(),
                ms: choice.ms,
                timer: choice.timer.clone(),
                candidates: choice.candidates,
                source: "stored",
                rejected: Vec::new(),
                timings: Vec::new(),
                leaders: Vec::new(),
            });
            continue;
        }
        let variants = suite::variants_for(&runtime, case.as_ref()).len();
        eprintln!("{key}: timing {variants} variants…");
        let started = std::time::Instant::now();
        let outcome = tuning::tune(&runtime, case.as_ref(), tuning::Options::default())?;
        tuning::Tuning::store(&runtime, &outcome.key, outcome.choice.clone())?;
        eprintln!(
            "{key}: {} wins at {:.3} ms ({} timed, {} rejected, {:.1} s)",
            outcome.choice.variant,
            outcome.choice.ms,
            outcome.timings.len(),
            outcome.rejected.len(),
            started.elapsed().as_secs_f64()
        );
        for (label, ms) in outcome.timings.iter().take(5) {
            eprintln!("    {label:<24} {ms:.3} ms");
        }
        if !outcome.leaders.is_empty() {
            eprintln!("  the leaders and the default timed again, back to back (the choice first):");
            for (label, ms) in &outcome.leaders {
                eprintln!("    {label:<24} {ms:.4} ms");
            }
        }
        rows.push(Row {
            problem: key,
            variant: outcome.choice.variant.clone(),
            ms: outcome.choice.ms,
            timer: outcome.choice.timer.clone(),
            candidates: outcome.choice.candidates,
            source: "tuned",
            rejected: outcome.rejected,
            timings: outcome.timings,
            leaders: outcome.leaders,
        });
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        println!("Tuning of {} kept in {}", runtime.info().name, path.display());
        let table_rows: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                vec![
                    r.problem.clone(),
                    r.variant.clone(),
                    format!("{:.3}", r.ms),
                    r.timer.clone(),
                    r.candidates.to_string(),
                    r.source.to_owned(),
                ]
            })
            .collect();
        print!("{}", table::render(&["problem", "variant", "ms", "timer", "timed", "source"], &table_rows));
    }
    Ok(ExitCode::SUCCESS)
}

/// One batch of `bench-pipeline`'s conv2d stage, N C H W K, moved as `transfers` says.
fn stage_case(
    kernel: Option<&str>,
    sizes: &[usize],
    transfers: Transfers,
    runtime: &Runtime,
) -> CliResult<Box<dyn Case>> {
    let usage = |why: &str| -> CliResult<Box<dyn Case>> {
        Err(Box::new(UsageError(format!(
            "--transfers tunes one batch of bench-pipeline's conv2d stage ({why}): \
             sparkle tune conv2d N C H W K --transfers staged-in"
        ))))
    };
    if sizes.len() != 5 {
        return usage("give its five sizes");
    }
    if kernel != Some(suite::conv2d::NAME) {
        return usage("the kernel is conv2d");
    }
    if transfers == Transfers::Plain {
        return usage(
            "with plain transfers the stage takes the plain problem's choice: leave --transfers out",
        );
    }
    let conv = suite::conv2d_case(sizes, 1, &runtime.info().limits).map_err(UsageError)?;
    Ok(Box::new(StagedConv2d::new(conv, transfers)?))
}
