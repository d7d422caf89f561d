//! conv2d: NCHW with bias, a square odd window (3×3 by default; 1×1 and others through
//! [`Window`]) at stride 1 or more, zero padding of half the window — an implicit GEMM on the
//! register-blocked core ([`super::gemm`]): the weights are the K×(C·R²) left matrix, the input
//! is gathered as the (C·R²)×(N·OH·OW) right matrix without being copied. For the default 3×3
//! window at stride 1, Winograd F(2×2, 3×3) and F(4×4, 3×3) variants ([`super::winograd`]) are offered beside
//! it, and `sparkle tune` keeps whichever wins. The portable (OpenCL) form and the pipelined
//! stage take the default window only.
//!
//! For another window, read `9` below as `R²`; the Winograd bound does not apply.
//!
//! Tolerance, against an f64 reference, for the variant that ran (`Case::reference` takes its
//! spec). Direct (implicit GEMM): each output is a dot product of up to `9·C` terms plus the
//! bias, so as for sgemm we allow `(9·C + 1)·ε·(|bias| + Σ|in·w|)`. Winograd, the larger of
//! that and its own bound: the output is `Aᵀ(Σ_c U_c ⊙ V_c)A + bias` with `U = G g Gᵀ`,
//! `V = Bᵀ d B`; to first order, the transforms of g and d err by a few ε relative to
//! `Ū = |G||g||G|ᵀ` and `V̄ = |Bᵀ||d||B|`, the product adds ε, the C-term sum `(C − 1)·ε`, the
//! output transform a few ε and the bias ε, all relative to `S = Σ_c (|Aᵀ|(Ū ⊙ V̄)|A|)_ij`, so
//! we allow `(C + s)·ε·S + 2ε·|bias|`, with s counted per form in [`super::winograd`] (16 for
//! F(2×2), 32 for F(4×4)). For F(2×2), `S` is at least `Σ|in·w|` and at most 64/9 of it per
//! unit inputs, so its bound is of the direct one's size; F(4×4)'s coefficients (up to 8 in
//! Aᵀ, 5 in Bᵀ) make `S`, and its bound, larger. Plus 1e-30.

use crate::hal::BufferUsage;
use crate::kernel::{Access, KernelSpec, ScalarType, SourceLanguage};
use crate::runtime::{Arg, Buffer, Program, Runtime};
use crate::Result;

use super::gemm::{GemmShape, GemmVariant};
use super::sgemm::{program_variant, record_gemm, with_phase};
use super::winograd::{self, WinogradVariant};
use super::{random_floats, Case, Work};
use crate::hal::{DeviceInfo, Limits};
use crate::runtime::Commands;

mod stage;
pub use stage::{Conv2dSet, Conv2dStage, StagedConv2d, Transfers};

/// The kernel's name in specs, tuning keys and reports.
pub const NAME: &str = "conv2d";

/// The kernel with the variant that fits any problem and device.
pub fn spec() -> KernelSpec {
    with_opencl_sources!(variant_spec(&GemmVariant::SAFE), "conv2d", "gemm.cl")
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

/// The kernel built with `variant` for `window` (same bindings as [`spec`]; the default window
/// gives exactly [`variant_spec`]'s spec).
pub fn window_variant_spec(variant: &GemmVariant, window: Window) -> KernelSpec {
    let spec = variant_spec(variant);
    if window == Window::SAME_3X3 {
        spec
    } else {
        spec.define("KSIZE", window.size as u32).define("STRIDE", window.stride as u32)
    }
}

/// The implicit GEMM of `shape` with the default window: output channels × pixels, C·9 deep.
pub fn gemm_shape(shape: Shape) -> GemmShape {
    window_gemm_shape(shape, Window::SAME_3X3)
}

/// The implicit GEMM of `shape` with `window`: output channels × output pixels, C·R² deep.
pub fn window_gemm_shape(shape: Shape, window: Window) -> GemmShape {
    let Shape { n, c, h, w, k } = shape;
    let (oh, ow) = window.output(h, w);
    let depth = c * window.taps();
    GemmShape { gm: k, gn: n * oh * ow, gk: depth, vec_a: depth % 4 == 0, vec_b: (oh * ow) % 4 == 0 }
}

/// A conv2d's window: `size`×`size` taps (odd) at `stride`, zero padding `size / 2`, so that
/// the output has `(H − 1) / stride + 1` rows (the input's at stride 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Taps per side (odd).
    pub size: usize,
    /// Input positions between two outputs, in both directions.
    pub stride: usize,
}

impl Window {
    /// 3×3 at stride 1: the suite's conv2d unless asked otherwise.
    pub const SAME_3X3: Self = Self { size: 3, stride: 1 };
    /// Largest window and stride the suite takes.
    pub const MAX_SIZE: usize = 7;
    /// Largest stride the suite takes.
    pub const MAX_STRIDE: usize = 4;

    /// Taps of the window (`size²`).
    pub fn taps(self) -> usize {
        self.size * self.size
    }

    /// Zero padding on each side (`size / 2`).
    pub fn pad(self) -> usize {
        self.size / 2
    }

    /// Output rows and columns of an `h`×`w` input.
    pub fn output(self, h: usize, w: usize) -> (usize, usize) {
        let out = |d: usize| if d == 0 { 0 } else { (d - 1) / self.stride.max(1) + 1 };
        (out(h), out(w))
    }

    /// Why the kernel cannot take this window, if it cannot.
    pub fn check(self) -> std::result::Result<(), String> {
        if self.size % 2 == 0 || !(1..=Self::MAX_SIZE).contains(&self.size) {
            return Err(format!(
                "a conv2d window of {0}×{0} is not supported: it must be odd, 1 to {1}",
                self.size,
                Self::MAX_SIZE
            ));
        }
        if !(1..=Self::MAX_STRIDE).contains(&self.stride) {
            return Err(format!(
                "a conv2d stride of {} is not supported: it must be 1 to {}",
                self.stride,
                Self::MAX_STRIDE
            ));
        }
        Ok(())
    }
}

/// Batch, input channels, height, width, output channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Batch.
    pub n: usize,
    /// Input channels.
    pub c: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output channels.
    pub k: usize,
}

/// A conv2d problem.
pub struct Conv2d {
    /// The sizes.
    pub shape: Shape,
    /// The window.
    pub window: Window,
    /// N×C×H×W, row-major.
    pub input: Vec<f32>,
    /// K×C×size×size, row-major.
    pub weights: Vec<f32>,
    /// One per output channel.
    pub bias: Vec<f32>,
}

impl Conv2d {
    /// A 3×3, stride-1 problem.
    pub fn random(shape: Shape, seed: u64) -> Self {
        Self::random_window(shape, Window::SAME_3X3, seed)
    }

    /// A problem with `window`, its values random from `seed`.
    pub fn random_window(shape: Shape, window: Window, seed: u64) -> Self {
        let Shape { n, c, h, w, k } = shape;
        Self {
            shape,
            window,
            input: random_floats(n * c * h * w, seed),
            weights: random_floats(k * c * window.taps(), seed ^ 0xC0DE),
            bias: random_floats(k, seed ^ 0xB1A5),
        }
    }

    /// Output rows and columns.
    fn output_size(&self) -> (usize, usize) {
        self.window.output(self.shape.h, self.shape.w)
    }

    /// Whether Winograd's variants (3×3, stride 1 only) apply.
    fn takes_winograd(&self) -> bool {
        self.window == Window::SAME_3X3
    }

    /// The input, weights, bias and output, then Winograd's intermediate buffers of `winograd`
    /// bytes, if any.
    fn upload_with(&self, backend: &Runtime, winograd: Option<[u64; 3]>) -> Result<Vec<Buffer>> {
        let mut buffers = vec![
            backend.upload(&self.input, BufferUsage::Input)?,
            backend.upload(&self.weights, BufferUsage::Input)?,
            backend.upload(&self.bias, BufferUsage::Input)?,
            backend.create_buffer((self.outputs() * 4) as u64, BufferUsage::Output)?,
        ];
        if let Some(intermediate) = winograd {
            for bytes in intermediate {
                buffers.push(backend.create_buffer(bytes, BufferUsage::InOut)?);
            }
        }
        Ok(buffers)
    }
}

impl Conv2d {
    /// One output element of the f64 reference and its tolerance (see the module's doc): the
    /// direct bound, and for a Winograd variant (`winograd`: its error bound) the larger of that
    /// and its own.
    fn reference_at(&self, index: usize, winograd: Option<&winograd::ErrorBound>) -> (f64, f64) {
        let Shape { c, h, w, k, .. } = self.shape;
        let Window { size, stride } = self.window;
        let (oh, ow) = self.output_size();
        let (x, y) = (index % ow, (index / ow) % oh);
        let (o, b) = ((index / (ow * oh)) % k, index / (ow * oh * k));
        let eps = f64::from(f32::EPSILON);
        let gamma = (self.window.taps() * c + 1) as f64 * eps;
        let bias = f64::from(self.bias[o]);
        let (mut sum, mut magnitude) = (bias, bias.abs());
        let mut winograd_magnitude = 0.0;
        // The Winograd tile holding (y, x): its a×a input patch starts one above and left of
        // its m×m outputs.
        let (m, a) = winograd.map_or((1, 0), |bound| (bound.tile(), bound.patch()));
        let (y0, x0) = ((y / m * m) as isize - 1, (x / m * m) as isize - 1);
        let at = |ci: usize, iy: isize, ix: isize| {
            if iy < 0 || ix < 0 || iy as usize >= h || ix as usize >= w {
                0.0
            } else {
                f64::from(self.input[((b * c + ci) * h + iy as usize) * w + ix as usize])
            }
        };
        let taps = self.window.taps();
        let (cy, cx) = (
            (y * stride) as isize - self.window.pad() as isize,
            (x * stride) as isize - self.window.pad() as isize,
        );
        for ci in 0..c {
            let g = &self.weights[(o * c + ci) * taps..(o * c + ci + 1) * taps];
            for dy in 0..size {
                for dx in 0..size {
                    let input = at(ci, cy + dy as isize, cx + dx as isize);
                    let weight = f64::from(g[dy * size + dx]);
                    sum += input * weight;
                    magnitude += (input * weight).abs();
                }
            }
            if let Some(bound) = winograd {
                let g: [f64; 9] = std::array::from_fn(|t| f64::from(g[t]));
                // The largest patch (6×6), filled up to a×a: no allocation per channel and output.
                let mut patch = [0.0; 36];
                for (t, value) in patch[..a * a].iter_mut().enumerate() {
                    *value = at(ci, y0 + (t / a) as isize, x0 + (t % a) as isize);
                }
                winograd_magnitude += bound.magnitude(&g, &patch[..a * a], y % m, x % m);
            }
        }
        let direct = gamma * magnitude;
        let winograd =
            winograd.map_or(0.0, |bound| bound.gamma(c) * winograd_magnitude + 2.0 * eps * bias.abs());
        (sum, direct.max(winograd) + 1e-30)
    }

    /// The error bound of the Winograd variant `spec` builds, if it is one (and this problem
    /// takes it; otherwise its record refuses to run).
    fn winograd_bound(&self, spec: &KernelSpec) -> Option<&'static winograd::ErrorBound> {
        let variant = WinogradVariant::from_spec(spec)?;
        if self.takes_winograd() {
            winograd::error_bound(variant.tile)
        } else {
            None
        }
    }

    /// The GEMM-core variant of `program`, refused unless it was built for this problem's
    /// window (a program for another window would compute another convolution).
    fn implicit_variant(&self, program: &Program) -> Result<GemmVariant> {
        let variant = program_variant(program)?;
        let define = |name: &str, default: usize| {
            program
                .spec()
                .defines
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .map_or(Some(default), |(_, v)| v.parse::<usize>().ok())
        };
        let built = (define("KSIZE", 3), define("STRIDE", 1));
        let Window { size, stride } = self.window;
        if built != (Some(size), Some(stride)) {
            return Err(crate::Error::new(
                crate::ErrorKind::InvalidArgument,
                format!(
                    "program `{}` was built for a {} window at stride {}, but this conv2d has a {size}×{size} \
                     window at stride {stride}; build it with conv2d::window_variant_spec",
                    program.name(),
                    built.0.map_or_else(|| "malformed".to_owned(), |s| format!("{s}×{s}")),
                    built.1.map_or_else(|| "malformed".to_owned(), |s| s.to_string()),
                ),
            ));
        }
        Ok(variant)
    }
}

impl Case for Conv2d {
    /// The portable spec for the default window; for another, the GLSL core's safe variant
    /// (the portable OpenCL form takes 3×3 at stride 1 only).
    fn spec(&self) -> KernelSpec {
        if self.window == Window::SAME_3X3 {
            spec()
        } else {
            window_variant_spec(&GemmVariant::SAFE, self.window)
        }
    }

    fn default_spec(&self, info: &DeviceInfo) -> KernelSpec {
        let shape = window_gemm_shape(self.shape, self.window);
        window_variant_spec(&GemmVariant::default_for(info, &shape), self.window)
    }

    fn variants(&self, limits: &Limits) -> Vec<(String, KernelSpec)> {
        let implicit = GemmVariant::candidates(limits, &window_gemm_shape(self.shape, self.window))
            .into_iter()
            .map(|v| (v.to_string(), window_variant_spec(&v, self.window)));
        let winograd =
            if self.takes_winograd() { WinogradVariant::candidates(limits, self.shape) } else { Vec::new() };
        implicit.chain(winograd.into_iter().map(|v| (v.to_string(), v.spec()))).collect()
    }

    /// `NxCxHxWxK`, with `kRsS` appended for a window other than 3×3 at stride 1.
    fn shape_key(&self) -> String {
        let Shape { n, c, h, w, k } = self.shape;
        let Window { size, stride } = self.window;
        if self.window == Window::SAME_3X3 {
            format!("{n}x{c}x{h}x{w}x{k}")
        } else {
            format!("{n}x{c}x{h}x{w}x{k}k{size}s{stride}")
        }
    }

    fn reference_sample(&self, spec: &KernelSpec, indices: &[usize]) -> (Vec<f64>, Vec<f64>) {
        let bound = self.winograd_bound(spec);
        indices.iter().map(|&i| self.reference_at(i, bound)).unzip()
    }

    fn outputs(&self) -> usize {
        let Shape { n, k, .. } = self.shape;
        let (oh, ow) = self.output_size();
        n * k * oh * ow
    }

    fn describe(&self) -> String {
        let Shape { n, c, h, w, k } = self.shape;
        let Window { size, stride } = self.window;
        if self.window == Window::SAME_3X3 {
            format!("{NAME} n={n} c={c} h={h} w={w} k={k}")
        } else {
            format!("{NAME} n={n} c={c} h={h} w={w} k={k} {size}x{size}/{stride}")
        }
    }

    /// The input, weights, bias and output; then, where the backend takes the Winograd
    /// variants (GLSL) and the device can bind them, their intermediate buffers (transformed
    /// weights, transformed input, products), so that any variant runs over the same buffers.
    fn upload(&self, backend: &Runtime) -> Result<Vec<Buffer>> {
        let glsl = backend.info().languages.contains(&SourceLanguage::Glsl);
        let winograd = (glsl && self.takes_winograd())
            .then(|| winograd::buffers_for_any(&backend.info().limits, self.shape))
            .flatten();
        self.upload_with(backend, winograd)
    }

    /// Winograd's intermediate buffers (3–4× the input and output) only for a Winograd variant.
    fn upload_for(&self, backend: &Runtime, program: &Program) -> Result<Vec<Buffer>> {
        let winograd = WinogradVariant::from_spec(program.spec())
            .filter(|_| self.takes_winograd())
            .map(|variant| winograd::intermediate_bytes(self.shape, variant.tile));
        self.upload_with(backend, winograd)
    }

    fn record(&self, commands: &mut Commands, program: &Program, buffers: &[Buffer]) -> Result<()> {
        let Shape { n, c, h, w, k } = self.shape;
        if let Some(variant) = WinogradVariant::from_spec(program.spec()) {
            if !self.takes_winograd() {
                return Err(crate::Error::new(
                    crate::ErrorKind::InvalidArgument,
                    format!(
                        "program `{}` is a Winograd variant ({variant}), which computes 3×3 windows at stride 1 \
                         only; this conv2d's window is {}×{} at stride {}",
                        program.name(),
                        self.window.size,
                        self.window.size,
                        self.window.stride
                    ),
                ));
            }
            return winograd::record(commands, program, &variant, self.shape, buffers);
        }
        let variant = self.implicit_variant(program)?;
        record_gemm(
            commands,
            program,
            &variant,
            &window_gemm_shape(self.shape, self.window),
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

    fn reference(&self, spec: &KernelSpec) -> (Vec<f64>, Vec<f64>) {
        let bound = self.winograd_bound(spec);
        (0..self.outputs()).map(|i| self.reference_at(i, bound)).unzip()
    }

    fn work(&self) -> Work {
        let Shape { n, c, h, w, .. } = self.shape;
        let outputs = self.outputs() as f64;
        Work {
            flops: outputs * (2.0 * self.window.taps() as f64 * c as f64 + 1.0),
            bytes: 4.0 * ((n * c * h * w) as f64 + outputs),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_size_the_output_and_key_the_problem() {
        let shape = Shape { n: 2, c: 3, h: 9, w: 10, k: 5 };
        assert_eq!(Window::SAME_3X3.output(9, 10), (9, 10));
        assert_eq!(Window { size: 1, stride: 2 }.output(9, 10), (5, 5));
        assert_eq!(Window { size: 3, stride: 3 }.output(9, 10), (3, 4));
        let default = Conv2d::random(shape, 1);
        assert_eq!(default.shape_key(), "2x3x9x10x5", "the targets' tuning keys do not change");
        assert_eq!(default.spec(), spec());
        let strided = Conv2d::random_window(shape, Window { size: 1, stride: 2 }, 1);
        assert_eq!(strided.shape_key(), "2x3x9x10x5k1s2");
        assert_eq!(strided.outputs(), 2 * 5 * 5 * 5);
        assert_eq!(strided.weights.len(), 5 * 3);
        assert!(strided.spec().sources.iter().all(|s| s.language() == SourceLanguage::Glsl));
        let gemm = window_gemm_shape(shape, Window { size: 1, stride: 2 });
        assert_eq!((gemm.gm, gemm.gn, gemm.gk, gemm.vec_a), (5, 50, 3, false));
        for bad in
            [Window { size: 2, stride: 1 }, Window { size: 9, stride: 1 }, Window { size: 3, stride: 0 }]
        {
            assert!(bad.check().is_err(), "{bad:?}");
        }
        assert!(Window { size: 7, stride: 4 }.check().is_ok());
    }
}
