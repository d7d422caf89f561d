//! Several dispatches, copies and barriers in one submission: `runtime.commands()` records
//! them, `runtime.submit` sends them to the device at once and returns one fence for all.
//!
//! ```sh
//! cargo run --example commands
//! ```
//!
//! Within one list, a command that touches a buffer an earlier command writes is ordered after
//! it by a barrier the runtime adds itself; `barrier()` adds one explicitly. The kernels are
//! GLSL (the `gl` backend: any GL 4.3 driver, or Mesa's llvmpipe).

use std::process::ExitCode;
use std::time::Duration;

use sparkle::cache::CacheConfig;
use sparkle::{Access, Arg, BufferUsage, KernelSpec, Runtime, ScalarType};

fn main() -> ExitCode {
    // Errors are printed with their message (a compile error carries the compiler's log).
    run().unwrap_or_else(|err| {
        eprintln!("error: {err}");
        ExitCode::FAILURE
    })
}

fn run() -> Result<ExitCode, sparkle::Error> {
    let runtime = Runtime::open_backend("gl", &CacheConfig::from_env()?)?;
    println!("running on {} ({} backend)", runtime.info().name, runtime.backend());

    // v *= factor, in place.
    let scale = runtime.program(
        &KernelSpec::new("scale", [64, 1, 1])
            .glsl(
                "layout(std430, binding = 0) buffer V { float v[]; };
                 uniform float factor;
                 uniform uint n;
                 void main() { uint i = gl_GlobalInvocationID.x; if (i < n) v[i] *= factor; }",
            )
            .storage("v", Access::ReadWrite)
            .scalar("factor", ScalarType::F32)
            .scalar("n", ScalarType::U32),
    )?;
    // sum = a + b. Buffers a kernel only reads are `ReadOnly` in the spec and `readonly` in
    // the source (the runtime checks that they agree).
    let add = runtime.program(
        &KernelSpec::new("add", [64, 1, 1])
            .glsl(
                "layout(std430, binding = 0) readonly buffer A { float a[]; };
                 layout(std430, binding = 1) readonly buffer B { float b[]; };
                 layout(std430, binding = 2) buffer Sum { float sum[]; };
                 uniform uint n;
                 void main() { uint i = gl_GlobalInvocationID.x; if (i < n) sum[i] = a[i] + b[i]; }",
            )
            .storage("a", Access::ReadOnly)
            .storage("b", Access::ReadOnly)
            .storage("sum", Access::ReadWrite)
            .scalar("n", ScalarType::U32),
    )?;

    let n = 3000u32;
    let bytes = u64::from(n) * 4;
    let groups = [n.div_ceil(64), 1, 1];
    let input: Vec<f32> = (0..n).map(|i| (i % 100) as f32).collect();
    let source = runtime.upload(&input, BufferUsage::Input)?;
    let doubled = runtime.create_buffer(bytes, BufferUsage::InOut)?;
    let sixfold = runtime.create_buffer(bytes, BufferUsage::InOut)?;
    let total = runtime.create_buffer(bytes, BufferUsage::InOut)?;
    // Two copies of the total's first half, side by side.
    let halves = runtime.create_buffer(bytes, BufferUsage::Output)?;

    let mut commands = runtime.commands();
    // doubled = source; doubled *= 2 (ordered after the copy: it touches what the copy wrote).
    commands.copy(&source, 0, &doubled, 0, bytes)?;
    commands.dispatch(&scale, &[Arg::Buffer(&doubled), Arg::F32(2.0), Arg::U32(n)], groups)?;
    // sixfold = doubled; sixfold *= 3.
    commands.copy(&doubled, 0, &sixfold, 0, bytes)?;
    commands.dispatch(&scale, &[Arg::Buffer(&sixfold), Arg::F32(3.0), Arg::U32(n)], groups)?;
    // An explicit barrier: everything above is visible to everything below.
    commands.barrier();
    // total = doubled + sixfold = 8 · source.
    commands.dispatch(
        &add,
        &[Arg::Buffer(&doubled), Arg::Buffer(&sixfold), Arg::Buffer(&total), Arg::U32(n)],
        groups,
    )?;
    // Copies with offsets: the first half of total, twice.
    let half = bytes / 2;
    commands.copy(&total, 0, &halves, 0, half)?;
    commands.copy(&total, 0, &halves, half, half)?;
    println!("recorded {} commands for one submission", commands.len());

    let submission = runtime.submit(commands)?;
    submission.wait(Duration::from_secs(60))?;

    let scaled = |factor: f32| -> Vec<f32> { input.iter().map(|x| x * factor).collect() };
    let first_half = &scaled(8.0)[..n as usize / 2];
    let checks: [(&str, Vec<f32>, Vec<f32>); 4] = [
        ("doubled", runtime.download(&doubled)?, scaled(2.0)),
        ("sixfold", runtime.download(&sixfold)?, scaled(6.0)),
        ("total", runtime.download(&total)?, scaled(8.0)),
        ("halves", runtime.download(&halves)?, [first_half, first_half].concat()),
    ];
    let mut correct = true;
    for (name, got, want) in &checks {
        // Integers below 2^24 are exact in f32: the results must be equal, not just close.
        if let Some(i) = (0..want.len()).find(|&i| got.get(i) != Some(&want[i])) {
            eprintln!("MISMATCH in {name} at {i}: got {:?}, want {}", got.get(i), want[i]);
            correct = false;
        }
    }
    if !correct {
        return Ok(ExitCode::FAILURE);
    }
    println!("one submission: all {} buffers correct", checks.len());
    Ok(ExitCode::SUCCESS)
}
