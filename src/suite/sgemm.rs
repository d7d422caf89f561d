//! Tiled sgemm: `C = A·B`, row-major, any M, N, K.
//!
//! Tolerance: a K-term f32 dot product in any summation order is within `γ_K·Σ|a·b|` of the
//! exact value, with `γ_K = K·ε/(1 − K·ε)`; we allow `K·ε·Σ|a_ik·b_kj|` (plus 1e-30), against a
//! reference computed in f64.

use crate::hal::BufferUsage;
use crate::kernel::{Access, KernelSpec, ScalarType};
use crate::runtime::{Arg, Buffer, Program, Runtime, Submission};
use crate::Result;

use super::{groups_for, random_floats, Case, Work};

pub const NAME: &str = "sgemm";
/// The tile edge; also the workgroup's x and y size.
pub const TILE: u32 = 16;

pub fn spec() -> KernelSpec {
    let spec = KernelSpec::new(NAME, [TILE, TILE, 1])
        .glsl(include_str!("../../shaders/sgemm.comp"))
        .opencl(NAME, include_str!("../../shaders/sgemm.cl"))
        .define("TILE", TILE)
        .storage("a", Access::ReadOnly)
        .storage("b", Access::ReadOnly)
        .storage("c", Access::ReadWrite)
        .scalar("M", ScalarType::U32)
        .scalar("N", ScalarType::U32)
        .scalar("K", ScalarType::U32);
    // The code objects `cargo run -p sparkle-tools --bin aot` builds, so that the suite runs on
    // amdgpu without a compiler.
    #[cfg(feature = "amdgpu")]
    let spec = spec
        .code_object(NAME, "gfx1030", include_bytes!("../../shaders/aot/gfx1030/sgemm.co"))
        .code_object(NAME, "gfx1100", include_bytes!("../../shaders/aot/gfx1100/sgemm.co"))
        .code_object(NAME, "gfx1101", include_bytes!("../../shaders/aot/gfx1101/sgemm.co"))
        .code_object(NAME, "gfx1102", include_bytes!("../../shaders/aot/gfx1102/sgemm.co"));
    spec
}

/// An sgemm problem: `a` is M×K, `b` is K×N.
pub struct Sgemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: Vec<f32>,
    pub b: Vec<f32>,
}

impl Sgemm {
    pub fn random(m: usize, n: usize, k: usize, seed: u64) -> Self {
        Self { m, n, k, a: random_floats(m * k, seed), b: random_floats(k * n, seed ^ 0xB0B) }
    }
}

impl Case for Sgemm {
    fn spec(&self) -> KernelSpec {
        spec()
    }

    fn describe(&self) -> String {
        format!("{NAME} {}x{}x{}", self.m, self.n, self.k)
    }

    fn upload(&self, backend: &Runtime) -> Result<Vec<Buffer>> {
        Ok(vec![
            backend.upload(&self.a, BufferUsage::Input)?,
            backend.upload(&self.b, BufferUsage::Input)?,
            backend.create_buffer((self.m * self.n * 4) as u64, BufferUsage::Output)?,
        ])
    }

    fn dispatch(&self, backend: &Runtime, program: &Program, buffers: &[Buffer]) -> Result<Submission> {
        backend.dispatch(
            program,
            &[
                Arg::Buffer(&buffers[0]),
                Arg::Buffer(&buffers[1]),
                Arg::Buffer(&buffers[2]),
                Arg::U32(self.m as u32),
                Arg::U32(self.n as u32),
                Arg::U32(self.k as u32),
            ],
            [groups_for(self.n, TILE), groups_for(self.m, TILE), 1],
        )
    }

    fn download(&self, backend: &Runtime, buffers: &[Buffer]) -> Result<Vec<f32>> {
        backend.download(&buffers[2])
    }

    fn reference(&self) -> (Vec<f64>, Vec<f64>) {
        let gamma = self.k as f64 * f64::from(f32::EPSILON);
        let mut want = Vec::with_capacity(self.m * self.n);
        let mut tolerance = Vec::with_capacity(self.m * self.n);
        for i in 0..self.m {
            let row = &self.a[i * self.k..(i + 1) * self.k];
            for j in 0..self.n {
                let (mut sum, mut magnitude) = (0.0f64, 0.0f64);
                for (kk, &a) in row.iter().enumerate() {
                    let term = f64::from(a) * f64::from(self.b[kk * self.n + j]);
                    sum += term;
                    magnitude += term.abs();
                }
                want.push(sum);
                tolerance.push(gamma * magnitude + 1e-30);
            }
        }
        (want, tolerance)
    }

    fn work(&self) -> Work {
        let (m, n, k) = (self.m as f64, self.n as f64, self.k as f64);
        Work { flops: 2.0 * m * n * k, bytes: 4.0 * (m * k + k * n + m * n) }
    }
}
