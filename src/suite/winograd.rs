//! Winograd F(m×m, 3×3) conv2d, m = 2 or 4, as a family of the suite's conv2d variants: the
//! weights and the input are transformed into (m + 2)² matrices each, multiplied pairwise on the
//! GEMM core (batched over workgroup z) and transformed back (`shaders/winograd.comp`, compiled
//! appended to `shaders/gemm.comp`). One program runs all three dispatches, told apart by its
//! `stage` scalar; the transformed weights, input and products live in buffers the case
//! allocates. F(2×2) does 2.25× fewer multiplications than the direct convolution, F(4×4) 4×,
//! each for more memory traffic and a larger rounding error (the conv2d module's tolerance
//! bounds each): `sparkle tune` times them against the implicit GEMM and keeps whichever wins
//! per shape.

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

/// The output tiles offered: F(2×2, 3×3) and F(4×4, 3×3).
pub const OUTPUT_TILES: [u32; 2] = [2, 4];

/// A Winograd conv2d of `tile`×`tile` output tiles whose products run on the GEMM core variant
/// `gemm` (never split: the core's workgroup z is the batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WinogradVariant {
    /// The GEMM core's variant for the products.
    pub gemm: GemmVariant,
    /// Outputs per tile side, m of F(m×m, 3×3): 2 or 4.
    pub tile: u32,
}

/// Input tiles ((m + 2)², stride m) over all images: each gives an m×m block of outputs.
pub fn tiles(shape: Shape, tile: u32) -> usize {
    let m = tile as usize;
    shape.n * shape.h.div_ceil(m) * shape.w.div_ceil(m)
}

/// Elements of a transformed tile of F(`tile`×`tile`, 3×3): the number of products.
pub fn batch(tile: u32) -> u32 {
    (tile + 2) * (tile + 2)
}

/// The batched product: output channels × tiles, input channels deep.
pub fn gemm_shape(shape: Shape, tile: u32) -> GemmShape {
    let tiles = tiles(shape, tile);
    GemmShape { gm: shape.k, gn: tiles, gk: shape.c, vec_a: shape.c % 4 == 0, vec_b: tiles % 4 == 0 }
}

/// Bytes of the transformed weights, the transformed input and the products.
pub fn intermediate_bytes(shape: Shape, tile: u32) -> [u64; 3] {
    let tiles = tiles(shape, tile) as u64;
    let (c, k, batch) = (shape.c as u64, shape.k as u64, u64::from(batch(tile)));
    [4 * batch * k * c, 4 * batch * c * tiles, 4 * batch * k * tiles]
}

/// Whether a device with `limits` can bind the intermediate buffers of `shape` with `tile`.
pub fn fits(limits: &Limits, shape: Shape, tile: u32) -> bool {
    intermediate_bytes(shape, tile).iter().all(|&bytes| bytes <= limits.max_storage_buffer_bytes)
        && limits.max_storage_buffer_bindings >= 7
}

/// The intermediate buffers that serve every output tile a device with `limits` can bind for
/// `shape` (each the largest of them), for the tuner, which runs every variant over the same
/// buffers; `None` when it can bind none.
pub fn buffers_for_any(limits: &Limits, shape: Shape) -> Option<[u64; 3]> {
    OUTPUT_TILES
        .into_iter()
        .filter(|&tile| fits(limits, shape, tile))
        .map(|tile| intermediate_bytes(shape, tile))
        .reduce(|a, b| std::array::from_fn(|i| a[i].max(b[i])))
}

impl WinogradVariant {
    /// The spec: the core's defines plus `WINOGRAD` and `WINO_M` (the output tile); bindings U,
    /// V, M (the core's `a`, `b`, `c`), the input, weights, bias and output; scalars M (output
    /// channels), N (tiles), K (input channels), height, width, stage.
    pub fn spec(&self) -> KernelSpec {
        self.gemm
            .spec(NAME, false)
            .glsl(format!("{}\n{}", super::gemm::SOURCE, SOURCE))
            .define("WINOGRAD", 1)
            .define("WINO_M", self.tile)
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
        // Specs from before F(4×4) existed were F(2×2).
        let tile = match spec.defines.iter().rev().find(|(n, _)| n == "WINO_M") {
            None => 2,
            Some((_, value)) => value.parse::<u32>().ok()?,
        };
        (gemm.split == 1 && OUTPUT_TILES.contains(&tile)).then_some(Self { gemm, tile })
    }

    /// Elements of a transformed tile: the number of products.
    pub fn batch(&self) -> u32 {
        batch(self.tile)
    }

    /// Shared memory the program declares: the core's slices (the transforms use none).
    pub fn shared_bytes(&self) -> u32 {
        self.gemm.shared_bytes()
    }

    /// Whether the device and `shape` can run it.
    pub fn fits(&self, limits: &Limits, shape: Shape) -> bool {
        let product = gemm_shape(shape, self.tile);
        OUTPUT_TILES.contains(&self.tile)
            && self.gemm.split == 1
            && self.gemm.kslice == 1
            && self.gemm.fits(limits, &product)
            && self.shared_bytes() <= limits.max_shared_memory_bytes
            && limits.max_workgroup_count[2] >= self.batch()
            && fits(limits, shape, self.tile)
            && self
                .dispatches(shape)
                .iter()
                .all(|(_, groups)| groups.iter().zip(&limits.max_workgroup_count).all(|(&g, &max)| g <= max))
    }

    /// Every variant worth timing for `shape`: a few tile shapes of the core that stay within
    /// 128 registers per invocation, each with both kinds of left-matrix loads (and of slice
    /// stores on 8×8 tiles, [`GemmVariant::store_choices`]), the widest right-matrix loads the
    /// tile count allows; for both output tiles.
    pub fn candidates(limits: &Limits, shape: Shape) -> Vec<Self> {
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
        let mut out = Vec::new();
        for (tile, (bm, bn, bk, tm, tn, warp, frag)) in
            OUTPUT_TILES.into_iter().flat_map(|tile| shapes.map(|s| (tile, s)))
        {
            let vb = if gemm_shape(shape, tile).vec_b { 4 } else { 1 };
            for va in [1, 4] {
                for &store_always in GemmVariant::store_choices(tm, tn) {
                    // Unrolled, unsplit, one group (SAFE's), as the batched product requires.
                    let gemm = GemmVariant {
                        bm,
                        bn,
                        bk,
                        tm,
                        tn,
                        va,
                        vb,
                        warp,
                        frag,
                        store_always,
                        ..GemmVariant::SAFE
                    };
                    let variant = Self { gemm, tile };
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
        let product = gemm_shape(shape, self.tile);
        let threads = self.gemm.threads() as usize;
        let (va, vb) = (self.gemm.va as usize, self.gemm.vb as usize);
        let [x, y, _] = self.gemm.groups(&product);
        let weight_groups = (shape.k * shape.c / va).div_ceil(threads);
        // F(4×4) transforms a block of tiles of one channel per workgroup; F(2×2) VB tiles per
        // invocation.
        let input_groups = if self.tile == 4 {
            shape.c * product.gn.div_ceil(threads)
        } else {
            (shape.c * product.gn / vb).div_ceil(threads)
        };
        [
            (0, grid(weight_groups + input_groups, 1)),
            (1, [x, y, self.batch()]),
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
    let needed = intermediate_bytes(shape, variant.tile);
    let roles = [("transformed weights", "a"), ("transformed input", "b"), ("products", "c")];
    for ((buffer, bytes), (what, binding)) in [u, v, m].into_iter().zip(needed).zip(roles) {
        if buffer.size() < bytes {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "program `{}` ({variant}) needs {bytes} bytes for its {what} of {}x{}x{}x{}x{}, but that buffer \
                     (binding `{binding}`) has {}: make the buffers with the case's `upload_for` this program (or `upload`)",
                    program.name(),
                    shape.n,
                    shape.c,
                    shape.h,
                    shape.w,
                    shape.k,
                    buffer.size()
                ),
            ));
        }
    }
    for (stage, groups) in variant.dispatches(shape) {
        commands.dispatch(
            program,
            &variant.stage_args(shape, [input, weights, bias, output, u, v, m], stage),
            groups,
        )?;
    }
    Ok(())
}

impl WinogradVariant {
    /// The arguments of dispatch `stage` (0, 1 or 2, [`dispatches`](Self::dispatches)) over
    /// `buffers`: input, weights, bias, output, transformed weights, transformed input, products.
    pub fn stage_args<'a>(&self, shape: Shape, buffers: [&'a Buffer; 7], stage: u32) -> [Arg<'a>; 13] {
        let [input, weights, bias, output, u, v, m] = buffers;
        [
            Arg::Buffer(u),
            Arg::Buffer(v),
            Arg::Buffer(m),
            Arg::Buffer(input),
            Arg::Buffer(weights),
            Arg::Buffer(bias),
            Arg::Buffer(output),
            Arg::U32(shape.k as u32),
            Arg::U32(tiles(shape, self.tile) as u32),
            Arg::U32(shape.c as u32),
            Arg::U32(shape.h as u32),
            Arg::U32(shape.w as u32),
            Arg::U32(stage),
        ]
    }
}

impl fmt::Display for WinogradVariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "winograd f{0}x{0} {1}", self.tile, self.gemm)
    }
}

/// What bounds the rounding error of F(m×m, 3×3): its matrices in magnitudes, |G| (a×3), |Bᵀ|
/// (a×a) and |Aᵀ| (m×a) with a = m + 2, row-major, and the operations its transforms add to the
/// C-term sum (see the conv2d module's tolerance).
pub(crate) struct ErrorBound {
    /// m.
    tile: usize,
    g: &'static [f64],
    bt: &'static [f64],
    at: &'static [f64],
    /// Rounding steps besides the sum over the input channels, each counted as ε.
    steps: usize,
}

/// F(2×2): the weights' transform errs by at most 4ε relative to `|G||g||G|ᵀ`, the input's by
/// 2ε, the product by ε, the output transform by 4ε and the bias by ε; 16 leaves a margin.
const F2_BOUND: ErrorBound = ErrorBound {
    tile: 2,
    g: &[1.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.0, 0.0, 1.0],
    bt: &[1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0],
    at: &[1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0],
    steps: 16,
};

/// F(4×4): each of the weights' two stages rounds its coefficients (1/6, 1/12, 1/24 are not
/// floats), its products and two sums (8ε in all); each of the input's two stages a product by
/// 5 and three sums (8ε); the product ε; each of the output transform's two stages five sums
/// (products by powers of 2 are exact: 10ε); the bias ε — 28ε, and 32 leaves a margin.
const F4_BOUND: ErrorBound = ErrorBound {
    tile: 4,
    g: &[
        1.0 / 4.0,
        0.0,
        0.0,
        1.0 / 6.0,
        1.0 / 6.0,
        1.0 / 6.0,
        1.0 / 6.0,
        1.0 / 6.0,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 12.0,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 12.0,
        1.0 / 6.0,
        0.0,
        0.0,
        1.0,
    ],
    bt: &[
        4.0, 0.0, 5.0, 0.0, 1.0, 0.0, //
        0.0, 4.0, 4.0, 1.0, 1.0, 0.0, //
        0.0, 4.0, 4.0, 1.0, 1.0, 0.0, //
        0.0, 2.0, 1.0, 2.0, 1.0, 0.0, //
        0.0, 2.0, 1.0, 2.0, 1.0, 0.0, //
        0.0, 4.0, 0.0, 5.0, 0.0, 1.0,
    ],
    at: &[
        1.0, 1.0, 1.0, 1.0, 1.0, 0.0, //
        0.0, 1.0, 1.0, 2.0, 2.0, 0.0, //
        0.0, 1.0, 1.0, 4.0, 4.0, 0.0, //
        0.0, 1.0, 1.0, 8.0, 8.0, 1.0,
    ],
    steps: 32,
};

/// The error bound of F(`tile`×`tile`, 3×3); `None` for a tile the suite does not offer.
pub(crate) fn error_bound(tile: u32) -> Option<&'static ErrorBound> {
    match tile {
        2 => Some(&F2_BOUND),
        4 => Some(&F4_BOUND),
        _ => None,
    }
}

impl ErrorBound {
    /// Outputs per tile side.
    pub(crate) fn tile(&self) -> usize {
        self.tile
    }

    /// Input patch side (m + 2).
    pub(crate) fn patch(&self) -> usize {
        self.tile + 2
    }

    /// The bound on the error of one output relative to the sum `S` of the magnitudes of every
    /// product it adds up over `channels` input channels ([`magnitude`](Self::magnitude)).
    pub(crate) fn gamma(&self, channels: usize) -> f64 {
        (channels + self.steps) as f64 * f64::from(f32::EPSILON)
    }

    /// `Σ_pq |Aᵀ|_ip (|G||g||G|ᵀ)_pq (|Bᵀ||d||B|)_pq |A|_qj` for one input channel: what the
    /// Winograd form of output `(i, j)` of a tile adds up, in magnitudes, with `g` the channel's
    /// 3×3 weights and `d` its a×a input patch, row-major (zero in the padding).
    pub(crate) fn magnitude(&self, g: &[f64; 9], d: &[f64], i: usize, j: usize) -> f64 {
        let a = self.patch();
        debug_assert_eq!(d.len(), a * a);
        // |G||g| (a×3) and |Bᵀ||d| (a×a), then each with the transposed matrix on the right.
        let mut gl = [[0.0; 3]; 6];
        let mut dl = [[0.0; 6]; 6];
        for p in 0..a {
            for s in 0..3 {
                gl[p][s] = (0..3).map(|r| self.g[p * 3 + r] * g[r * 3 + s].abs()).sum();
            }
            for s in 0..a {
                dl[p][s] = (0..a).map(|r| self.bt[p * a + r] * d[r * a + s].abs()).sum();
            }
        }
        let mut total = 0.0;
        for p in 0..a {
            for q in 0..a {
                let weight = self.at[i * a + p] * self.at[j * a + q];
                if weight == 0.0 {
                    continue;
                }
                let u: f64 = (0..3).map(|s| gl[p][s] * self.g[q * 3 + s]).sum();
                let v: f64 = (0..a).map(|s| dl[p][s] * self.bt[q * a + s]).sum();
                total += weight * u * v;
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        super::super::large_gpu_limits()
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
                assert!(v.to_string().starts_with(&format!("winograd f{0}x{0} ", v.tile)));
                assert_eq!(v.gemm.vb == 4, tiles(shape, v.tile) % 4 == 0);
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
        // summing to 1, so the magnitudes add up to at least the direct sum (9 for unit weights
        // and inputs); F(2×2)'s at most 64/9 times it.
        let g = [1.0; 9];
        for (tile, most) in [(2, 64.0), (4, 1e5)] {
            let bound = error_bound(tile).unwrap();
            let d = vec![1.0; bound.patch() * bound.patch()];
            for i in 0..bound.tile() {
                for j in 0..bound.tile() {
                    let total = bound.magnitude(&g, &d, i, j);
                    assert!((9.0..=most).contains(&total), "F({tile}): {total}");
                }
            }
        }
        assert!(error_bound(3).is_none());
    }
}
