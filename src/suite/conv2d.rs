//! conv2d: 3×3 kernel, stride 1, zero padding 1, NCHW, with bias — an implicit GEMM on the
//! register-blocked core ([`super::gemm`]): the weights are the K×(C·9) left matrix, the input
//! is gathered as the (C·9)×(N·H·W) right matrix without being copied.
//!
//! Tolerance: each output is a dot product of up to `9·C` terms plus the bias, so as for sgemm
//! we allow `(9·C + 1)·ε·(|bias| + Σ|in·w|)` (plus 1e-30) against an f64 reference.

use crate::hal::BufferUsage;
use crate::kernel::{Access, KernelSpec, ScalarType};
use crate::runtime::{Arg, Buffer, Program, Runtime};
use crate::Result;

use super::gemm::{GemmShape, GemmVariant};
use super::sgemm::{program_variant, record_gemm, with_phase};
use super::{random_floats, Case, Work};
use crate::hal::{DeviceInfo, Limits};
use crate::runtime::Commands;

pub const NAME: &str = "conv2d";

/// The kernel with the variant that fits any problem and device.
pub fn spec() -> KernelSpec {
    variant_spec(&GemmVariant::SAFE)
}

/// The kernel built with `variant` (same bindings as [`spec`]).
pub fn variant_spec(variant: &GemmVariant) -> KernelSpec {
    let spec = variant
        .spec(NAME, true)
        .storage("inp", Access::ReadOnly)
        .storage("w", Access::ReadOnly)
        .storage("bias", Access::ReadOnly)
        .storage("outp", Access::ReadWrite)
        .scalar("N", ScalarType::U32)
        .scalar("C", ScalarType::U32)
        .scalar("H", ScalarType::U32)
        .scalar("W_", ScalarType::U32)
        .scalar("K", ScalarType::U32);
    with_phase(variant, spec)
}

/// The implicit GEMM of `shape`: output channels × output pixels, C·9 deep.
pub fn gemm_shape(shape: Shape) -> GemmShape {
    let Shape { n, c, h, w, k } = shape;
    GemmShape { gm: k, gn: n * h * w, gk: c * 9, vec_a: c % 4 == 0, vec_b: (h * w) % 4 == 0 }
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

impl Conv2d {
    /// One output element of the f64 reference and its tolerance.
    fn reference_at(&self, index: usize) -> (f64, f64) {
        let Shape { c, h, w, k, .. } = self.shape;
        let (x, y) = (index % w, (index / w) % h);
        let (o, b) = ((index / (w * h)) % k, index / (w * h * k));
        let gamma = (9 * c + 1) as f64 * f64::from(f32::EPSILON);
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
        (sum, gamma * magnitude + 1e-30)
    }
}

impl Case for Conv2d {
    fn spec(&self) -> KernelSpec {
        spec()
    }

    fn default_spec(&self, info: &DeviceInfo) -> KernelSpec {
        variant_spec(&GemmVariant::default_for(info, &gemm_shape(self.shape)))
    }

    fn variants(&self, limits: &Limits) -> Vec<(String, KernelSpec)> {
        GemmVariant::candidates(limits, &gemm_shape(self.shape))
            .iter()
            .map(|v| (v.to_string(), variant_spec(v)))
            .collect()
    }

    fn shape_key(&self) -> String {
        let Shape { n, c, h, w, k } = self.shape;
        format!("{n}x{c}x{h}x{w}x{k}")
    }

    fn reference_sample(&self, indices: &[usize]) -> (Vec<f64>, Vec<f64>) {
        indices.iter().map(|&i| self.reference_at(i)).unzip()
    }

    fn outputs(&self) -> usize {
        let Shape { n, h, w, k, .. } = self.shape;
        n * k * h * w
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

    fn record(&self, commands: &mut Commands, program: &Program, buffers: &[Buffer]) -> Result<()> {
        let Shape { n, c, h, w, k } = self.shape;
        let variant = program_variant(program)?;
        record_gemm(
            commands,
            program,
            &variant,
            &gemm_shape(self.shape),
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
        )
    }

    fn download(&self, backend: &Runtime, buffers: &[Buffer]) -> Result<Vec<f32>> {
        backend.download(&buffers[3])
    }

    fn reference(&self) -> (Vec<f64>, Vec<f64>) {
        (0..self.outputs()).map(|i| self.reference_at(i)).unzip()
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
