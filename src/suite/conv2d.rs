//! conv2d: 3×3 kernel, stride 1, zero padding 1, NCHW, with bias.
//!
//! Tolerance: each output is a dot product of up to `9·C` terms plus the bias, so as for sgemm
//! we allow `(9·C + 1)·ε·(|bias| + Σ|in·w|)` (plus 1e-30) against an f64 reference.

use crate::hal::BufferUsage;
use crate::kernel::{Access, KernelSpec, ScalarType};
use crate::runtime::{Arg, Buffer, Program, Runtime, Submission};
use crate::Result;

use super::{groups_for, random_floats, Case, Work};

pub const NAME: &str = "conv2d";
const WORKGROUP: [u32; 3] = [16, 16, 1];

pub fn spec() -> KernelSpec {
    let spec = KernelSpec::new(NAME, WORKGROUP)
        .glsl(include_str!("../../shaders/conv2d.comp"))
        .opencl(NAME, include_str!("../../shaders/conv2d.cl"))
        .storage("inp", Access::ReadOnly)
        .storage("w", Access::ReadOnly)
        .storage("bias", Access::ReadOnly)
        .storage("outp", Access::ReadWrite)
        .scalar("N", ScalarType::U32)
        .scalar("C", ScalarType::U32)
        .scalar("H", ScalarType::U32)
        .scalar("W_", ScalarType::U32)
        .scalar("K", ScalarType::U32);
    // The code objects `cargo run -p sparkle-tools --bin aot` builds, so that the suite runs on
    // amdgpu without a compiler.
    #[cfg(feature = "amdgpu")]
    let spec = spec
        .code_object(NAME, "gfx1030", include_bytes!("../../shaders/aot/gfx1030/conv2d.co"))
        .code_object(NAME, "gfx1100", include_bytes!("../../shaders/aot/gfx1100/conv2d.co"))
        .code_object(NAME, "gfx1101", include_bytes!("../../shaders/aot/gfx1101/conv2d.co"))
        .code_object(NAME, "gfx1102", include_bytes!("../../shaders/aot/gfx1102/conv2d.co"));
    spec
}

/// The workgroups a dispatch of `shape` needs: x over the width, y over the height, z over
/// batch × output channels.
pub(crate) fn groups(shape: Shape) -> [u32; 3] {
    let Shape { n, h, w, k, .. } = shape;
    let z = (n as u64 * k as u64).min(u64::from(u32::MAX)) as u32;
    [groups_for(w, WORKGROUP[0]), groups_for(h, WORKGROUP[1]), z]
}

/// Batch, input channels, height, width, output channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub k: usize,
}

/// A conv2d problem.
pub struct Conv2d {
    pub shape: Shape,
    pub input: Vec<f32>,
    pub weights: Vec<f32>,
    pub bias: Vec<f32>,
}

impl Conv2d {
    pub fn random(shape: Shape, seed: u64) -> Self {
        let Shape { n, c, h, w, k } = shape;
        Self {
            shape,
            input: random_floats(n * c * h * w, seed),
            weights: random_floats(k * c * 9, seed ^ 0xC0DE),
            bias: random_floats(k, seed ^ 0xB1A5),
        }
    }
}

impl Case for Conv2d {
    fn spec(&self) -> KernelSpec {
        spec()
    }

    fn describe(&self) -> String {
        let Shape { n, c, h, w, k } = self.shape;
        format!("{NAME} n={n} c={c} h={h} w={w} k={k}")
    }

    fn upload(&self, backend: &Runtime) -> Result<Vec<Buffer>> {
        let Shape { n, h, w, k, .. } = self.shape;
        Ok(vec![
            backend.upload(&self.input, BufferUsage::Input)?,
            backend.upload(&self.weights, BufferUsage::Input)?,
            backend.upload(&self.bias, BufferUsage::Input)?,
            backend.create_buffer((n * k * h * w * 4) as u64, BufferUsage::Output)?,
        ])
    }

    fn dispatch(&self, backend: &Runtime, program: &Program, buffers: &[Buffer]) -> Result<Submission> {
        let Shape { n, c, h, w, k } = self.shape;
        backend.dispatch(
            program,
            &[
                Arg::Buffer(&buffers[0]),
                Arg::Buffer(&buffers[1]),
                Arg::Buffer(&buffers[2]),
                Arg::Buffer(&buffers[3]),
                Arg::U32(n as u32),
                Arg::U32(c as u32),
                Arg::U32(h as u32),
                Arg::U32(w as u32),
                Arg::U32(k as u32),
            ],
            groups(self.shape),
        )
    }

    fn download(&self, backend: &Runtime, buffers: &[Buffer]) -> Result<Vec<f32>> {
        backend.download(&buffers[3])
    }

    fn reference(&self) -> (Vec<f64>, Vec<f64>) {
        let Shape { n, c, h, w, k } = self.shape;
        let gamma = (9 * c + 1) as f64 * f64::from(f32::EPSILON);
        let mut want = Vec::with_capacity(n * k * h * w);
        let mut tolerance = Vec::with_capacity(n * k * h * w);
        for b in 0..n {
            for o in 0..k {
                for y in 0..h {
                    for x in 0..w {
                        let bias = f64::from(self.bias[o]);
                        let (mut sum, mut magnitude) = (bias, bias.abs());
                        for ci in 0..c {
                            for dy in 0..3 {
                                for dx in 0..3 {
                                    let (iy, ix) = ((y + dy).wrapping_sub(1), (x + dx).wrapping_sub(1));
                                    if iy >= h || ix >= w {
                                        continue;
                                    }
                                    let input = f64::from(self.input[((b * c + ci) * h + iy) * w + ix]);
                                    let weight = f64::from(self.weights[(o * c + ci) * 9 + dy * 3 + dx]);
                                    sum += input * weight;
                                    magnitude += (input * weight).abs();
                                }
                            }
                        }
                        want.push(sum);
                        tolerance.push(gamma * magnitude + 1e-30);
                    }
                }
            }
        }
        (want, tolerance)
    }

    fn work(&self) -> Work {
        let Shape { n, c, h, w, k } = self.shape;
        let outputs = (n * k * h * w) as f64;
        Work {
            flops: outputs * (2.0 * 9.0 * c as f64 + 1.0),
            bytes: 4.0 * ((n * c * h * w) as f64 + outputs),
        }
    }
}
