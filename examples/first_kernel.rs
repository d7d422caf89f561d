//! Your first kernel: upload data, get a program, dispatch it, read the result back.
//!
//! ```sh
//! cargo run --example first_kernel
//! ```
//!
//! The kernel is GLSL, so it runs on the `gl` backend (any GL 4.3 driver, or Mesa's llvmpipe on
//! the CPU). `Runtime::from_env` picks the backend `SPARKLE_BACKEND` names (`auto` by default,
//! which is gl everywhere but on a supported AMD card: there, run with `SPARKLE_BACKEND=gl`).
//! Run it twice: the second run loads the program from the cache instead of compiling it.

use std::process::ExitCode;
use std::time::Duration;

use sparkle::{Access, Arg, BufferUsage, KernelSpec, Runtime, ScalarType};

fn main() -> ExitCode {
    // Errors are printed with their message (a compile error carries the compiler's log).
    run().unwrap_or_else(|err| {
        eprintln!("error: {err}");
        ExitCode::FAILURE
    })
}

fn run() -> Result<ExitCode, sparkle::Error> {
    // The device, with the program cache configured from the environment (`SPARKLE_CACHE_DIR`,
    // else ~/.cache/sparkle).
    let runtime = Runtime::from_env()?;
    println!("running on {} ({} backend)", runtime.info().name, runtime.backend());

    // A kernel is its source plus what it binds, in order: storage buffers at binding 0, 1, …
    // and then scalars (uniforms), each matched by name against the compiled program. The
    // backend adds `#version` and the workgroup size (64 here), so the source starts at the
    // declarations.
    let kernel = KernelSpec::new("scale_and_add", [64, 1, 1])
        .glsl(
            "layout(std430, binding = 0) readonly buffer In { float x[]; };
             layout(std430, binding = 1) buffer Out { float y[]; };
             uniform float a;
             uniform uint n;
             void main() {
                 uint i = gl_GlobalInvocationID.x;
                 if (i < n) y[i] = a * x[i] + y[i];
             }",
        )
        .storage("x", Access::ReadOnly)
        .storage("y", Access::ReadWrite)
        .scalar("a", ScalarType::F32)
        .scalar("n", ScalarType::U32);

    // 1000 elements: not a multiple of the workgroup size, hence the `i < n` test above.
    let n = 1000u32;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let y: Vec<f32> = (0..n).map(|i| 0.5 * i as f32).collect();
    let x_buffer = runtime.upload(&x, BufferUsage::Input)?;
    let y_buffer = runtime.upload(&y, BufferUsage::InOut)?;

    // From memory, the disk cache, or compiled (once, however many threads ask).
    let program = runtime.program(&kernel)?;

    // Arguments follow the spec's order; enough workgroups of 64 to cover n.
    let args = [Arg::Buffer(&x_buffer), Arg::Buffer(&y_buffer), Arg::F32(2.0), Arg::U32(n)];
    let submission = runtime.dispatch(&program, &args, [n.div_ceil(64), 1, 1])?;

    // Dispatches are asynchronous. A read waits by itself for the work that writes the buffer;
    // waiting explicitly (with a timeout) is how you learn that the work itself failed.
    submission.wait(Duration::from_secs(60))?;
    let got: Vec<f32> = runtime.download(&y_buffer)?;

    // Small integers times 2 plus halves are exact in f32, so the comparison is exact too.
    let want: Vec<f32> = x.iter().zip(&y).map(|(x, y)| 2.0 * x + y).collect();
    if let Some(i) = (0..want.len()).find(|&i| got.get(i) != Some(&want[i])) {
        eprintln!("MISMATCH at {i}: got {:?}, want {}", got.get(i), want[i]);
        return Ok(ExitCode::FAILURE);
    }
    println!("y = 2·x + y: all {n} elements correct");

    let stats = runtime.cache_stats();
    println!(
        "program cache: {} compiled, {} from disk, {} from memory",
        stats.compiles, stats.disk_hits, stats.memory_hits
    );
    Ok(ExitCode::SUCCESS)
}
