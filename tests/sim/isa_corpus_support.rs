//! Shared by the ISA coverage corpus's tests (`isa_corpus`, `isa_corpus_cpu`):
//! where the corpus lives, a runtime on a simulated GPU, a committed code object loaded as a
//! program, deterministic pseudo-random inputs, and exact conversions between `f32` and the
//! binary16 bits that half kernels use.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use sparkle::amdgpu::sim::{AmdgpuSim, SimDriver, SimGpu, SimOptions, Simulated};
use sparkle::amdgpu::{AmdgpuDevice, DeviceOptions};
use sparkle::cache::CacheConfig;
use sparkle::kernel::{Access, KernelSpec};
use sparkle::runtime::{Arg, Program};
use sparkle::Runtime;

/// `tests/fixtures/isa_corpus`: the kernels' OpenCL C, and per target their code objects and
/// `llvm-objdump` listings.
pub fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/isa_corpus")
}

/// A runtime on a simulated GPU of `target`.
pub fn sim(target: SimGpu) -> Runtime {
    let driver = SimDriver::new(SimOptions { gpu: target, ..SimOptions::default() });
    let device = AmdgpuDevice::<Simulated>::new(driver, DeviceOptions::default()).unwrap();
    Runtime::from_device::<AmdgpuSim>(device, &CacheConfig::memory_only())
}

/// The corpus kernel `name` as built for `target`, run in workgroups of `workgroup_size`
/// work-items, its buffer parameters named `storage` (in order).
pub fn corpus_program(
    rt: &Runtime,
    target: SimGpu,
    name: &str,
    workgroup_size: u32,
    storage: &[&str],
) -> Program {
    let dir = corpus().join(target.name());
    let bytes = std::fs::read(dir.join(format!("{name}.co"))).unwrap();
    let mut spec = KernelSpec::new(name, [workgroup_size, 1, 1]).code_object(name, target.name(), &bytes);
    for s in storage {
        spec = spec.storage(*s, Access::ReadWrite);
    }
    rt.program(&spec).unwrap()
}

/// Runs `program` over `groups` workgroups and waits for it.
pub fn dispatch(rt: &Runtime, program: &Program, args: &[Arg<'_>], groups: u32) {
    rt.dispatch(program, args, [groups, 1, 1]).unwrap().wait(Duration::from_secs(300)).unwrap();
}

/// A deterministic stream of pseudo-random numbers (xorshift32).
pub struct Random(pub u32);

impl Random {
    pub fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (self.next() as f64 / 4_294_967_296.0)
    }
}

/// The value of the binary16 `h`.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = if h >> 15 != 0 { -1.0 } else { 1.0 };
    let (e, m) = ((h >> 10) & 0x1f, (h & 0x3ff) as f32);
    sign * match e {
        0 => m * 2f32.powi(-24),
        31 if m == 0.0 => f32::INFINITY,
        31 => f32::NAN,
        e => (1.0 + m / 1024.0) * 2f32.powi(e as i32 - 15),
    }
}

/// Rounds to the nearest f16 (ties to even) by search: exact, if slow, and independent of the
/// simulator's own conversion.
pub fn f32_to_f16(x: f32) -> u16 {
    if x.is_nan() {
        return 0x7e00;
    }
    let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
    let a = x.abs() as f64;
    // Past the largest half (65504) plus half an ulp (16), rounding goes to infinity.
    if a >= 65520.0 {
        return sign | 0x7c00;
    }
    let mut best = 0u16;
    for h in 0..=0x7c00u16 {
        let (d, db) = ((f16_to_f32(h) as f64 - a).abs(), (f16_to_f32(best) as f64 - a).abs());
        if d < db || (d == db && h % 2 == 0 && best % 2 == 1) {
            best = h;
        }
    }
    sign | best
}
