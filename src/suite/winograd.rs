//! Winograd F(2×2, 3×3) conv2d as a family of the suite's conv2d variants: the weights and the
//! input are transformed into 16 matrices each, multiplied pairwise on the GEMM core (batched
//! over workgroup z) and transformed back (`shaders/winograd.comp`, compiled appended to
//! `shaders/gemm.comp`). One program runs all three dispatches, told apart by its `stage`
//! scalar; the transformed weights, input and products live in buffers the case allocates.
//! 2.25× fewer multiplications than the direct convolution, for more memory traffic: `sparkle
//! tune` times it against the implicit GEMM and keeps whichever wins per shape.

use std::fmt;

use crate::hal::Limits;
use crate::kernel::{Access, KernelSpec, ScalarType};
use crate::runtime::{Arg, Buffer, Commands, Program};
use crate::{Error, ErrorKind, Result};

use super::conv2d::Shape;
use super::gemm::{GemmShape, GemmVariant};

/// The name its programs are built under.
pub const NAME: &str = "conv2d_winograd";

const SOURCE: &str = include_str!("../../shaders/winograd.comp");

/// Elements of a transformed 4×4 tile: the number of products.
pub const BATCH: u32 = 16;

/// A Winograd conv2d whose products run on the GEMM core variant `gemm` (never split: the
/// core's workgroup z is the batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WinogradVariant {
    /// The GEMM core's variant for the products.
    pub gemm: GemmVariant,
}

/// Input tiles (4×4, stride 2) over all images: each gives a 2×2 block of outputs.
pub fn tiles(shape: Shape) -> usize {
    shape.n * shape.h.div_ceil(2) * shape.w.div_ceil(2)
}

/// The batched product: output channels × tiles, input channels deep.
pub fn gemm_shape(shape: Shape) -> GemmShape {
    let tiles = tiles(shape);
    GemmShape { gm: shape.k, gn: tiles, gk: shape.c, vec_a: shape.c % 4 == 0, vec_b: tiles % 4 == 0 }
}

/// Bytes of the transformed weights, the transformed input and the products.
pub fn intermediate_bytes(shape: Shape) -> [u64; 3] {
    let tiles = tiles(shape) as u64;
    let (c, k) = (shape.c as u64, shape.k as u64);
    [4 * 16 * k * c, 4 * 16 * c * tiles, 4 * 16 * k * tiles]
}

/// Whether a device with `limits` can bind the intermediate buffers of `shape` (the case
/// allocates them, and offers Winograd variants, only then).
pub fn fits(limits: &Limits, shape: Shape) -> bool {
    intermediate_bytes(shape).iter().all(|&bytes| bytes <= limits.max_storage_buffer_bytes)
        && limits.max_storage_buffer_bindings >= 7
}

impl WinogradVariant {
    /// The spec: the core's defines plus `WINOGRAD`; bindings U, V, M (the core's `a`, `b`,
    /// `c`), the input, weights, bias and output; scalars M (output channels), N (tiles), K
    /// (input channels), height, width, stage.
    pub fn spec(&self) -> KernelSpec {
        self.gemm
            .spec(NAME, false)
            .glsl(format!("{}\n{}", super::gemm::SOURCE, SOURCE))
            .define("WINOGRAD", 1)
            .storage("a", Access::ReadWrite)
            .storage("b", Access::ReadWrite)
            .storage("c", Access::ReadWrite)
            .storage("inp", Access::ReadOnly)
            .storage("w", Access::ReadOnly)
            .storage("bias", Access::ReadOnly)
            .storage("outp", Access::ReadWrite)
            .scalar("M", ScalarType::U32)
            .scalar("N", ScalarType::U32)
            .scalar("K", ScalarType::U32)
            .scalar("height", ScalarType::U32)
            .scalar("width", ScalarType::U32)
            .scalar("stage", ScalarType::U32)
    }

    /// The variant a spec made by [`spec`](Self::spec) was built with; `None` for any other
    /// spec (the implicit GEMM's included).
    pub fn from_spec(spec: &KernelSpec) -> Option<Self> {
        let winograd =
            spec.defines.iter().rev().find(|(n, _)| n == "WINOGRAD").is_some_and(|(_, v)| v == "1");
        if !winograd || spec.name != NAME {
            return None;
        }
        let gemm = GemmVariant::from_spec(spec)?;
        (gemm.split == 1).then_some(Self { gemm })
    }

    /// Whether the device and `shape` can run it.
    pub fn fits(&self, limits: &Limits, shape: Shape) -> bool {
        let product = gemm_shape(shape);
        self.gemm.split == 1
            && self.gemm.fits(limits, &product)
            && limits.max_workgroup_count[2] >= BATCH
            && fits(limits, shape)
            && self
                .dispatches(shape)
                .iter()
                .all(|(_, groups)| groups.iter().zip(&limits.max_workgroup_count).all(|(&g, &max)| g <= max))
    }

    /// Every variant worth timing for `shape`: a few tile shapes of the core that stay within
    /// 128 registers per invocation, each with both kinds of left-matrix loads (and of slice
    /// stores on 8×8 tiles, [`GemmVariant::store_choices`]), the widest right-matrix loads the
    /// tile count allows.
    pub fn candidates(limits: &Limits, shape: Shape) -> Vec<Self> {
        let product = gemm_shape(shape);
        // (bm, bn, bk, tm, tn, warp, frag)
        let shapes = [
            (128, 128, 8, 8, 8, 1, 0),
            (128, 128, 8, 8, 8, 0, 1),
            (128, 64, 8, 8, 8, 0, 0),
            (64, 128, 8, 8, 8, 1, 0),
            (64, 64, 16, 4, 4, 0, 0),
            (64, 32, 16, 4, 4, 0, 0),
            (32, 64, 16, 4, 4, 0, 0),
            (32, 32, 16, 4, 4, 0, 0),
        ];
        let vb = if product.vec_b { 4 } else { 1 };
        let mut out = Vec::new();
        for (bm, bn, bk, tm, tn, warp, frag) in shapes {
            for va in [1, 4] {
                for &store_always in GemmVariant::store_choices(tm, tn) {
                    let gemm = GemmVariant {
                        bm,
                        bn,
                        bk,
                        tm,
                        tn,
                        va,
                        vb,
                        warp,
                        unroll: 1,
                        frag,
                        split: 1,
                        store_always,
                    };
                    let variant = Self { gemm };
                    if variant.fits(limits, shape) {
                        out.push(variant);
                    }
                }
            }
        }
        out
    }

    /// The three dispatches of one convolution: `(stage, groups)`. Stage 0's first workgroups
    /// transform the weights, the others the input.
    pub fn dispatches(&self, shape: Shape) -> [(u32, [u32; 3]); 3] {
        let product = gemm_shape(shape);
        let threads = self.gemm.threads() as usize;
        let (va, vb) = (self.gemm.va as usize, self.gemm.vb as usize);
        let [x, y, _] = self.gemm.groups(&product);
        let weight_groups = (shape.k * shape.c / va).div_ceil(threads);
        let input_groups = (shape.c * product.gn / vb).div_ceil(threads);
        [
            (0, grid(weight_groups + input_groups, 1)),
            (1, [x, y, BATCH]),
            (2, grid(shape.k * product.gn / vb, threads)),
        ]
    }
}

/// Workgroups of `threads` over `items` (`threads` = 1: `items` are workgroups), as rows of
/// at most 32768 (every GL device takes 65535 per axis).
fn grid(items: usize, threads: usize) -> [u32; 3] {
    let groups = items.div_ceil(threads.max(1)).max(1);
    let x = groups.min(32768);
    [x as u32, groups.div_ceil(x) as u32, 1]
}

/// Records the three dispatches of `variant` over the case's buffers: input, weights, bias,
/// output, then the transformed weights, the transformed input and the products. The runtime
/// puts a barrier between them (each writes what the next reads).
pub(crate) fn record(
    commands: &mut Commands,
    program: &Program,
    variant: &WinogradVariant,
    shape: Shape,
    buffers: &[Buffer],
) -> Result<()> {
    let [input, weights, bias, output, u, v, m] = buffers else {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "a Winograd conv2d needs 7 buffers (input, weights, bias, output and three intermediate ones), \
                 got {}: make them with the case's `upload_for` this program (or `upload`); where the device \
                 cannot bind the intermediate buffers of {}x{}x{}x{}x{}, run an implicit GEMM variant",
                buffers.len(),
                shape.n,
                shape.c,
                shape.h,
                shape.w,
                shape.k
            ),
        ));
    };
    let tiles = tiles(shape) as u32;
    for (stage, groups) in variant.dispatches(shape) {
        commands.dispatch(
            program,
            &[
                Arg::Buffer(u),
                Arg::Buffer(v),
                Arg::Buffer(m),
                Arg::Buffer(input),
                Arg::Buffer(weights),
                Arg::Buffer(bias),
                Arg::Buffer(output),
                Arg::U32(shape.k as u32),
                Arg::U32(tiles),
                Arg::U32(shape.c as u32),
                Arg::U32(shape.h as u32),
                Arg::U32(shape.w as u32),
                Arg::U32(stage),
            ],
            groups,
        )?;
    }
    Ok(())
}

impl fmt::Display for WinogradVariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "winograd f2x2 {}", self.gemm)
    }
}

/// The bound on the error of one Winograd output, relative to the sum `S` of the magnitudes
/// of every product it adds up ([`magnitude`]): see the conv2d module's tolerance.
pub(crate) fn gamma(channels: usize) -> f64 {
    (channels + 16) as f64 * f64::from(f32::EPSILON)
}

/// The magnitudes of the transforms' matrices: G (4×3), Bᵀ (4×4), Aᵀ (2×4).
const G_ABS: [[f64; 3]; 4] = [[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, 0.5, 0.5], [0.0, 0.0, 1.0]];
const BT_ABS: [[f64; 4]; 4] =
    [[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 1.0, 0.0], [0.0, 1.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0]];
const AT_ABS: [[f64; 4]; 2] = [[1.0, 1.0, 1.0, 0.0], [0.0, 1.0, 1.0, 1.0]];

/// `Σ_pq |Aᵀ|_ip (|G||g||G|ᵀ)_pq (|Bᵀ||d||B|)_pq |A|_qj` for one input channel: what the
/// Winograd form of output `(i, j)` of a tile adds up, in magnitudes, with `g` the channel's
/// 3×3 weights and `d` its 4×4 input patch (zero in the padding).
pub(crate) fn magnitude(g: &[f64; 9], d: &[f64; 16], i: usize, j: usize) -> f64 {
    // |G||g| (4×3) and |Bᵀ||d| (4×4), then each with the transposed matrix on the right.
    let mut gl = [[0.0; 3]; 4];
    let mut dl = [[0.0; 4]; 4];
    for p in 0..4 {
        for s in 0..3 {
            gl[p][s] = (0..3).map(|r| G_ABS[p][r] * g[r * 3 + s].abs()).sum();
        }
        for s in 0..4 {
            dl[p][s] = (0..4).map(|r| BT_ABS[p][r] * d[r * 4 + s].abs()).sum();
        }
    }
    let mut total = 0.0;
    for p in 0..4 {
        for q in 0..4 {
            let weight = AT_ABS[i][p] * AT_ABS[j][q];
            if weight == 0.0 {
                continue;
            }
            let u: f64 = (0..3).map(|s| gl[p][s] * G_ABS[q][s]).sum();
            let v: f64 = (0..4).map(|s| dl[p][s] * BT_ABS[q][s]).sum();
            total += weight * u * v;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_workgroup_size: [1024, 1024, 64],
            max_workgroup_invocations: 1024,
            max_workgroup_count: [65535; 3],
            max_shared_memory_bytes: 48 * 1024,
            max_storage_buffer_bytes: 1 << 31,
            max_storage_buffer_bindings: 16,
            storage_buffer_offset_alignment: 16,
        }
    }

    #[test]
    fn candidates_round_trip_through_their_specs_and_never_pass_as_implicit_gemm() {
        for shape in [
            Shape { n: 32, c: 128, h: 28, w: 28, k: 128 },
            Shape { n: 1, c: 64, h: 56, w: 56, k: 64 },
            Shape { n: 2, c: 3, h: 7, w: 9, k: 5 },
        ] {
            let candidates = WinogradVariant::candidates(&limits(), shape);
            assert!(!candidates.is_empty(), "{shape:?}");
            for v in &candidates {
                let spec = v.spec();
                assert_eq!(WinogradVariant::from_spec(&spec), Some(*v));
                assert!(v.to_string().starts_with("winograd f2x2 "));
                assert_eq!(v.gemm.vb == 4, tiles(shape) % 4 == 0);
            }
            let labels: std::collections::HashSet<String> =
                candidates.iter().map(|v| v.to_string()).collect();
            assert_eq!(labels.len(), candidates.len());
        }
        let implicit = GemmVariant::SAFE.spec("conv2d", true);
        assert_eq!(WinogradVariant::from_spec(&implicit), None);
    }

    #[test]
    fn the_magnitude_of_a_winograd_output_bounds_the_direct_one() {
        // Each direct product g_rs·d_(i+r)(j+s) appears in the Winograd form with coefficients
        // summing to 1, so the magnitudes add up to at least the direct sum, and at most 64/9
        // times it per unit weights and inputs.
        let g = [1.0; 9];
        let d = [1.0; 16];
        for (i, j) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            let total = magnitude(&g, &d, i, j);
            assert!((9.0..=64.0).contains(&total), "{total}");
        }
    }
}
