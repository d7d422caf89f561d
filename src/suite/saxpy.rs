//! saxpy: `y = a·x + y`.
//!
//! Tolerance: the result is one (possibly fused) multiply-add, so each element may be off by
//! 2 ulps of the f32 result: `2·ε·(|a·x| + |y|)`, plus 1e-30 so that exact zeros compare.

use crate::hal::BufferUsage;
use crate::kernel::{Access, KernelSpec, ScalarType};
use crate::runtime::{Arg, Buffer, Program, Runtime, Submission};
use crate::Result;

use super::{groups_for, random_floats, Case, Work};

pub const NAME: &str = "saxpy";
pub(crate) const WORKGROUP: u32 = 256;

pub fn spec() -> KernelSpec {
    let spec = KernelSpec::new(NAME, [WORKGROUP, 1, 1])
        .glsl(include_str!("../../shaders/saxpy.comp"))
        .opencl(NAME, include_str!("../../shaders/saxpy.cl"))
        .storage("x", Access::ReadOnly)
        .storage("y", Access::ReadWrite)
        .scalar("a", ScalarType::F32)
        .scalar("n", ScalarType::U32);
    // The code objects `cargo run -p sparkle-tools --bin aot` builds, so that the suite runs on
    // amdgpu without a compiler.
    #[cfg(feature = "amdgpu")]
    let spec = spec
        .code_object(NAME, "gfx1030", include_bytes!("../../shaders/aot/gfx1030/saxpy.co"))
        .code_object(NAME, "gfx1100", include_bytes!("../../shaders/aot/gfx1100/saxpy.co"))
        .code_object(NAME, "gfx1101", include_bytes!("../../shaders/aot/gfx1101/saxpy.co"))
        .code_object(NAME, "gfx1102", include_bytes!("../../shaders/aot/gfx1102/saxpy.co"));
    spec
}

/// A saxpy problem of `x.len()` elements.
pub struct Saxpy {
    pub a: f32,
    pub x: Vec<f32>,
    pub y: Vec<f32>,
}

impl Saxpy {
    pub fn random(n: usize, seed: u64) -> Self {
        Self { a: 1.5, x: random_floats(n, seed), y: random_floats(n, seed ^ 0x5A5A) }
    }
}

impl Case for Saxpy {
    fn spec(&self) -> KernelSpec {
        spec()
    }

    fn describe(&self) -> String {
        format!("{NAME} n={}", self.x.len())
    }

    fn upload(&self, backend: &Runtime) -> Result<Vec<Buffer>> {
        Ok(vec![backend.upload(&self.x, BufferUsage::Input)?, backend.upload(&self.y, BufferUsage::InOut)?])
    }

    fn dispatch(&self, backend: &Runtime, program: &Program, buffers: &[Buffer]) -> Result<Submission> {
        let n = self.x.len();
        backend.dispatch(
            program,
            &[Arg::Buffer(&buffers[0]), Arg::Buffer(&buffers[1]), Arg::F32(self.a), Arg::U32(n as u32)],
            [groups_for(n, WORKGROUP), 1, 1],
        )
    }

    fn download(&self, backend: &Runtime, buffers: &[Buffer]) -> Result<Vec<f32>> {
        backend.download(&buffers[1])
    }

    fn reference(&self) -> (Vec<f64>, Vec<f64>) {
        let a = f64::from(self.a);
        self.x
            .iter()
            .zip(&self.y)
            .map(|(&x, &y)| {
                let (x, y) = (f64::from(x), f64::from(y));
                (a * x + y, 2.0 * f64::from(f32::EPSILON) * ((a * x).abs() + y.abs()) + 1e-30)
            })
            .unzip()
    }

    fn work(&self) -> Work {
        let n = self.x.len() as f64;
        Work { flops: 2.0 * n, bytes: 12.0 * n }
    }
}
