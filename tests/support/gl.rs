//! A kernel that keeps any GL device busy for about a second, for tests of timeouts and of work
//! still running: every invocation runs a 60,000-step xorshift chain (which no compiler can
//! shortcut; llvmpipe ends any one loop after 65,535 iterations, hence no longer chain), and the
//! number of workgroups is grown until one dispatch lasts a quarter second, then quadrupled
//! (llvmpipe needs a few hundred, a big GPU tens of thousands). Also: whether the GL driver is
//! Mesa's, and the variables that place the driver's own cache. Included with `#[path]` by the
//! test binaries of the gl backend, of reliability, of the command and of the lab.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use sparkle::cache::CacheConfig;
use sparkle::{Access, Arg, Buffer, BufferUsage, KernelSpec, Program, Runtime};

/// Every variable that places or switches a driver's shader cache, and Sparkle's record of
/// having set them: what a test that looks at where the driver's cache goes keeps from being
/// inherited.
pub const DRIVER_VARS: &[&str] = &[
    "MESA_SHADER_CACHE_DIR",
    "MESA_GLSL_CACHE_DIR",
    "MESA_SHADER_CACHE_DISABLE",
    "MESA_GLSL_CACHE_DISABLE",
    "__GL_SHADER_DISK_CACHE",
    "__GL_SHADER_DISK_CACHE_PATH",
    "SPARKLE_DRIVER_CACHE_SET",
    "SPARKLE_CACHE_READ_ONLY",
    "XDG_CACHE_HOME",
];

/// Whether the machine's GL driver is Mesa. Some tests feed the driver deliberately damaged
/// blobs or use Mesa's own switches; Mesa checks its blobs and refuses them, while NVIDIA's
/// driver has been seen to crash or compute wrong results on them, so those tests need Mesa.
pub fn driver_is_mesa() -> bool {
    let backend = Runtime::open_backend("gl", &CacheConfig::memory_only()).expect("a GL context");
    let vendor = backend.info().details.iter().find(|(name, _)| name == "vendor").map(|(_, v)| v.clone());
    let mesa =
        vendor.as_deref().is_some_and(|v| v.contains("Mesa")) || backend.info().name.contains("llvmpipe");
    if !mesa {
        eprintln!("skipped: needs Mesa's GL driver; this one is {:?}", backend.info().name);
    }
    mesa
}

/// The busy kernel, named `name`; each output is `(h & 0xFFFF) + 0.5`, so it has a fraction
/// of exactly one half.
pub fn slow_spec(name: &str) -> KernelSpec {
    KernelSpec::new(name, [64, 1, 1])
        .glsl(
            "layout(std430, binding = 0) buffer Out { float o[]; };
             void main() {
                 uint h = 2463534242u + gl_GlobalInvocationID.x;
                 for (uint i = 0u; i < 60000u; i++) { h ^= h << 13; h ^= h >> 17; h ^= h << 5; }
                 o[gl_GlobalInvocationID.x] = float(h & 0xFFFFu) + 0.5;
             }",
        )
        .storage("o", Access::ReadWrite)
}

/// Workgroups of `program` (a [`slow_spec`]) that keep this device busy for about a second or
/// more, and an output buffer large enough for them.
pub fn slow_dispatch(runtime: &Runtime, program: &Program) -> (u32, Buffer) {
    let limit = runtime.info().limits.max_workgroup_count[0];
    let output =
        |groups: u32| runtime.create_buffer(u64::from(groups) * 64 * 4, BufferUsage::Output).unwrap();
    let mut groups = 100u32;
    loop {
        let out = output(groups);
        let started = Instant::now();
        runtime
            .dispatch(program, &[Arg::Buffer(&out)], [groups, 1, 1])
            .unwrap()
            .wait(Duration::from_secs(300))
            .unwrap();
        if started.elapsed() >= Duration::from_millis(250) || groups.saturating_mul(4) > limit {
            let groups = groups.saturating_mul(4).min(limit);
            return (groups, output(groups));
        }
        groups *= 4;
    }
}
