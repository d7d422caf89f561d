//! Kernel variants and tuning: a suite kernel comes as a family of `KernelSpec` variants
//! (workgroup size, work per invocation, tile shapes… as defines); `tuning::tune` times those
//! that compute correctly on this GPU and `Tuning::store` keeps the fastest in the GPU's cache
//! folder, where `suite::chosen_spec` finds it in this and every later process. This is what
//! `sparkle tune` does, here on two of the small problem sizes of `sparkle tune --quick`.
//!
//! ```sh
//! cargo run --example tuned_variants
//! ```
//!
//! The tuned variants are GLSL (the `gl` backend: any GL 4.3 driver, or Mesa's llvmpipe). The
//! choice is per GPU and driver: a new driver starts untuned.

use std::process::ExitCode;
use std::time::Duration;

use sparkle::cache::CacheConfig;
use sparkle::suite::saxpy::Saxpy;
use sparkle::suite::sgemm::Sgemm;
use sparkle::suite::tuning::{self, Tuning};
use sparkle::suite::{self, Case};
use sparkle::Runtime;

type Failure = Box<dyn std::error::Error>;

fn main() -> ExitCode {
    // Errors are printed with their message (a compile error carries the compiler's log).
    run().unwrap_or_else(|err| {
        eprintln!("error: {err}");
        ExitCode::FAILURE
    })
}

fn run() -> Result<ExitCode, Failure> {
    let runtime = Runtime::open_backend("gl", &CacheConfig::from_env()?)?;
    println!("running on {} ({} backend)", runtime.info().name, runtime.backend());
    // Tuning results live next to the GPU's programs; a memory-only cache cannot keep them.
    let Some(file) = Tuning::path(&runtime) else {
        eprintln!("the program cache is memory-only here: set SPARKLE_CACHE_DIR to a writable folder");
        return Ok(ExitCode::FAILURE);
    };

    // saxpy on 2^20 floats (all of its variants), and a 256³ sgemm (its first 3 variants only,
    // to stay quick on a CPU renderer).
    let problems: [(Box<dyn Case>, Option<usize>); 2] =
        [(Box::new(Saxpy::random(1 << 20, 1)), None), (Box::new(Sgemm::random(256, 256, 256, 1)), Some(3))];
    // Short timings: this shows the mechanism; `Options::default()` is what `sparkle tune` uses.
    let options = tuning::Options {
        runs: 3,
        budget: Duration::from_millis(20),
        warm_up: Duration::from_millis(100),
        max_candidates: None,
    };

    for (case, max_candidates) in &problems {
        let untuned = suite::chosen_spec(&runtime, case.as_ref());
        let variants = suite::variants_for(&runtime, case.as_ref());
        println!("{}: {} variants; untuned, it runs {}", case.describe(), variants.len(), describe(&untuned));

        // Each variant is compiled (through the program cache), checked against the CPU, then
        // timed; a variant that fails to compile or computes a wrong result is rejected.
        let outcome = tuning::tune(
            &runtime,
            case.as_ref(),
            tuning::Options { max_candidates: *max_candidates, ..options },
        )?;
        for (label, ms) in &outcome.timings {
            println!("    {label:<28} {ms:8.3} ms");
        }
        for (label, reason) in &outcome.rejected {
            println!("    {label:<28} rejected: {reason}");
        }
        Tuning::store(&runtime, &outcome.key, outcome.choice.clone())?;
        println!("  winner: {} ({:.3} ms)", outcome.choice.variant, outcome.choice.ms);

        // From now on, here and in any later process on this GPU, the stored winner is the
        // spec the suite runs.
        let chosen = suite::chosen_spec(&runtime, case.as_ref());
        let winner =
            variants.iter().find(|(label, _)| *label == outcome.choice.variant).map(|(_, spec)| spec);
        if winner != Some(&chosen) {
            eprintln!("MISMATCH: the chosen spec is not the winner {}", outcome.choice.variant);
            return Ok(ExitCode::FAILURE);
        }
        let program = runtime.program(&chosen)?;
        let verdict = suite::run_and_verify(&runtime, &program, case.as_ref())?;
        if !verdict.passed() {
            eprintln!("MISMATCH: the tuned {} is wrong: {verdict}", case.describe());
            return Ok(ExitCode::FAILURE);
        }
        println!("  the tuned variant runs and matches the CPU reference");
    }
    println!("tuning kept in {}", file.display());
    println!("tuned variants: {} problems tuned, stored and checked", problems.len());
    Ok(ExitCode::SUCCESS)
}

/// A spec's workgroup size and defines, e.g. `[256, 1, 1] VEC=4 PER_THREAD=4`.
fn describe(spec: &sparkle::KernelSpec) -> String {
    let defines: Vec<String> = spec.defines.iter().map(|(name, value)| format!("{name}={value}")).collect();
    format!("{:?} {}", spec.workgroup_size, defines.join(" "))
}
