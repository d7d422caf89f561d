//! A kernel that keeps any GL device busy for about a second, for tests of timeouts and of work
//! still running: every invocation runs a 60,000-step xorshift chain (which no compiler can
//! shortcut; llvmpipe ends any one loop after 65,535 iterations, hence no longer chain), and the
//! number of workgroups is grown until one dispatch lasts a quarter second, then quadrupled
//! (llvmpipe needs a few hundred, a big GPU tens of thousands).

use std::time::{Duration, Instant};

use sparkle::{Access, Arg, Buffer, BufferUsage, KernelSpec, Program, Runtime};

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
