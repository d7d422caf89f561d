//! A developer probe for the Winograd conv2d: the GPU time of each of its three dispatches
//! (transforms in, batched product, transform out) on their own, for the variants named on the
//! command line, so that a slow variant shows which stage costs it.
//!
//! ```text
//! cargo run --release --example winograd_stages -- N C H W K 'winograd f4x4 128x64x8 t8x8 v1/4' ...
//! ```
//!
//! `WINOGRAD_SOURCE=FILE` swaps in FILE for `shaders/winograd.comp` (the GEMM core stays), so
//! that experiments on the transforms need no rebuild; a changed result is reported as WRONG.
//!
//! Each variant runs once in full and is checked against the CPU first (at `WINOGRAD_CHECKED`
//! outputs, 4096 unless set); after `WINOGRAD_WARM_MS` (300) of warm-up one convolution is timed
//! alone, as the tuner times a candidate (a long check and a short warm-up show what an idle GPU
//! costs); then each stage is launched back to back (a batch of launches in one timed
//! submission, median of 5 batches).

use std::time::{Duration, Instant};

use sparkle::suite::conv2d::{Conv2d, Shape};
use sparkle::suite::winograd::WinogradVariant;
use sparkle::suite::{self, timing, Case, DISPATCH_TIMEOUT};
use sparkle::Runtime;

type Failure = Box<dyn std::error::Error>;

/// A named run: the `(stage, groups)` dispatches launched together.
type Run = (String, Vec<(u32, [u32; 3])>);

fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 6 {
        return Err("usage: winograd_stages N C H W K LABEL...".into());
    }
    let sizes: Vec<usize> = args[..5].iter().map(|s| s.parse()).collect::<Result<_, _>>()?;
    let shape = Shape { n: sizes[0], c: sizes[1], h: sizes[2], w: sizes[3], k: sizes[4] };
    let runtime = Runtime::from_env()?;
    println!("device: {}", runtime.info().name);
    let case = Conv2d::random(shape, 7);
    let candidates = WinogradVariant::candidates(&runtime.info().limits, shape);
    for label in &args[5..] {
        let Some(variant) = candidates.iter().find(|v| v.to_string() == *label) else {
            println!("{label}: not a candidate for {shape:?}");
            continue;
        };
        let program = runtime.program(&with_source_override(variant.spec())?)?;
        let buffers = case.upload_for(&runtime, &program)?;
        case.dispatch(&runtime, &program, &buffers)?.wait(DISPATCH_TIMEOUT)?;
        // WINOGRAD_CHECKED=n: outputs checked against the CPU (4096 unless set).
        let checked = std::env::var("WINOGRAD_CHECKED").ok().and_then(|v| v.parse().ok()).unwrap_or(4096);
        let checking = Instant::now();
        let verdict =
            suite::verify_sampled(&case, program.spec(), &case.download(&runtime, &buffers)?, checked);
        let checking = checking.elapsed();
        let warm_ms = std::env::var("WINOGRAD_WARM_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
        timing::warm(
            &runtime,
            &program,
            &case,
            std::slice::from_ref(&buffers),
            Duration::from_millis(warm_ms),
        )?;
        let first = timing::time(
            &runtime,
            &program,
            &case,
            std::slice::from_ref(&buffers),
            20,
            Duration::from_millis(200),
        )?;
        let [input, weights, bias, output, u, v, m] = &buffers[..] else {
            return Err("a Winograd variant takes 7 buffers".into());
        };
        let mut line = format!("{label:<55} {}", if verdict.passed() { "correct" } else { "WRONG" });
        if let Some(gpu) = first.gpu {
            line += &format!(
                "  one convolution after checking {checked} outputs ({} ms) and {warm_ms} ms warm-up: {:.4} ms",
                checking.as_millis(),
                gpu.as_secs_f64() * 1e3
            );
        }
        let stage_args = |stage| variant.stage_args(shape, [input, weights, bias, output, u, v, m], stage);
        let mut total = 0.0;
        let dispatches = variant.dispatches(shape);
        // Each stage alone, then consecutive stages together (what the transitions cost).
        let runs: Vec<Run> = dispatches
            .iter()
            .map(|&d| (format!("stage {}", d.0), vec![d]))
            .chain([
                ("stages 0+1".to_owned(), dispatches[..2].to_vec()),
                ("stages 1+2".to_owned(), dispatches[1..].to_vec()),
                ("all".to_owned(), dispatches.to_vec()),
            ])
            .collect();
        'runs: for (name, run) in runs {
            let mut times = Vec::new();
            for _ in 0..5 {
                let batch = timing::timed_launches(&runtime, 50, |commands, _| {
                    run.iter().try_for_each(|&(stage, groups)| {
                        commands.dispatch(&program, &stage_args(stage), groups).map(|_| ())
                    })
                })?;
                match batch {
                    Some(gpu) => times.push(gpu),
                    None => {
                        line += "  (no plausible GPU time on this device: stages not timed)";
                        break 'runs;
                    }
                }
            }
            times.sort();
            let ms = times[times.len() / 2].as_secs_f64() * 1e3;
            if run.len() == 1 {
                total += ms;
            }
            line += &format!("  {name}: {ms:.4} ms");
        }
        if total > 0.0 {
            line += &format!("  sum of stages {total:.4} ms");
        }
        println!("{line}");
    }
    Ok(())
}

/// `spec` with its Winograd part replaced by the file `WINOGRAD_SOURCE` names, if set.
fn with_source_override(mut spec: sparkle::KernelSpec) -> Result<sparkle::KernelSpec, Failure> {
    let Ok(path) = std::env::var("WINOGRAD_SOURCE") else { return Ok(spec) };
    let replacement = std::fs::read_to_string(&path)?;
    let Some(sparkle::KernelSource::Glsl(source)) = spec.sources.first_mut() else {
        return Err("a Winograd spec has one GLSL source".into());
    };
    let start = source.find("// Winograd F(").ok_or("the Winograd part of the source was not found")?;
    source.replace_range(start.., &replacement);
    Ok(spec)
}
