//! An OpenCL C kernel on `amdgpu-sim`: the amdgpu backend's own code over a simulated gfx1100,
//! whose RDNA3 code runs in an interpreter on the CPU. No AMD card needed, only clang-22, lld-22
//! and libclc to compile the kernel (`scripts/setup.sh` installs them).
//!
//! ```sh
//! cargo run --example opencl_on_amdgpu_sim
//! ```
//!
//! With `open_backend("amdgpu", …)` the same code targets an AMD RDNA2/RDNA3 card (that backend
//! is experimental: the simulator is where its kernels are checked today).
//! When the simulator cannot run here (a build without the `amdgpu` feature, or no clang-22) it
//! says why and exits with status 3, which is not a failure of the kernel.

use std::process::ExitCode;
use std::time::Duration;

use sparkle::cache::CacheConfig;
use sparkle::{Access, Arg, BufferUsage, ErrorKind, KernelSpec, Runtime, ScalarType};

/// The exit status when the simulator or its compiler is not available here.
const UNAVAILABLE: u8 = 3;

/// A work-group of 64 reverses its slice of `data` through local memory (so the barrier
/// matters), then adds `offset`; the tail past `count` is left alone.
const SOURCE: &str = r#"
__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void reverse_add(__global const float *data, __global float *out, float offset, uint count) {
    __local float tile[64];
    uint lid = get_local_id(0);
    uint base = get_group_id(0) * 64;
    tile[lid] = base + lid < count ? data[base + lid] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    uint from = 63 - lid;
    if (base + lid < count && base + from < count) {
        out[base + lid] = tile[from] + offset;
    }
}
"#;

fn main() -> ExitCode {
    // Errors are printed with their message (a compile error carries the compiler's log).
    run().unwrap_or_else(|err| {
        eprintln!("error: {err}");
        ExitCode::FAILURE
    })
}

fn run() -> Result<ExitCode, sparkle::Error> {
    // Opened by name: `auto` never picks the simulator. Its cache folder is its own
    // (`amdgpu-sim-…`), so simulated programs never mix with a real GPU's.
    let runtime = match Runtime::open_backend("amdgpu-sim", &CacheConfig::from_env()?) {
        Ok(runtime) => runtime,
        Err(err) => return Ok(unavailable(&err)),
    };
    println!("running on {} ({} backend)", runtime.info().name, runtime.backend());

    // Bindings are the kernel's parameters in order: buffers first, then scalars.
    let kernel = KernelSpec::new("reverse_add", [64, 1, 1])
        .opencl("reverse_add", SOURCE)
        .storage("data", Access::ReadOnly)
        .storage("out", Access::ReadWrite)
        .scalar("offset", ScalarType::F32)
        .scalar("count", ScalarType::U32);

    // On a cache miss clang-22 compiles the kernel for the device's gfx target; the code
    // object is what the cache keeps. A missing compiler is `Unavailable`, a kernel that does
    // not compile is `Compile` with clang's log in the message.
    let program = match runtime.program(&kernel) {
        Ok(program) => program,
        Err(err) if err.kind() == ErrorKind::Unavailable => return Ok(unavailable(&err)),
        Err(err) => return Err(err),
    };

    // 4 full work-groups: every slice is reversed whole.
    let count = 256u32;
    let data: Vec<f32> = (0..count).map(|i| i as f32).collect();
    let input = runtime.upload(&data, BufferUsage::Input)?;
    let output = runtime.upload(&vec![-1.0f32; count as usize], BufferUsage::InOut)?;
    let args = [Arg::Buffer(&input), Arg::Buffer(&output), Arg::F32(0.5), Arg::U32(count)];
    runtime.dispatch(&program, &args, [count / 64, 1, 1])?.wait(Duration::from_secs(120))?;
    let got: Vec<f32> = runtime.download(&output)?;

    let want: Vec<f32> = (0..count).map(|i| (i / 64 * 64 + 63 - i % 64) as f32 + 0.5).collect();
    if let Some(i) = (0..want.len()).find(|&i| got.get(i) != Some(&want[i])) {
        eprintln!("MISMATCH at {i}: got {:?}, want {}", got.get(i), want[i]);
        return Ok(ExitCode::FAILURE);
    }
    println!("reverse_add: all {count} elements correct on the simulated GPU");
    Ok(ExitCode::SUCCESS)
}

fn unavailable(err: &sparkle::Error) -> ExitCode {
    eprintln!("amdgpu-sim is not available here: {err}");
    ExitCode::from(UNAVAILABLE)
}
