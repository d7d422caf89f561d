//! The register-blocked GEMM core (`shaders/gemm.comp`) that sgemm and conv2d share: its
//! variants (tile sizes, outputs per invocation, vector widths), which of them a problem and a
//! device can take, the spec each compiles to, and the grid it dispatches.

use std::fmt;

use crate::hal::{DeviceInfo, Limits};
use crate::kernel::KernelSpec;

use super::groups_for;

pub(crate) const SOURCE: &str = include_str!("../../shaders/gemm.comp");

/// One compiled form of the core: each invocation computes `tm`×`tn` outputs of a `bm`×`bn`
/// tile, stepping through the shared dimension `bk` at a time; `va`/`vb` are the widths of the
/// loads of the left matrix and of the right matrix (and of the stores).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GemmVariant {
    /// Tile rows (outputs of the left matrix's dimension) per workgroup.
    pub bm: u32,
    /// Tile columns per workgroup.
    pub bn: u32,
    /// Shared-dimension step per iteration.
    pub bk: u32,
    /// Output rows per invocation.
    pub tm: u32,
    /// Output columns per invocation.
    pub tn: u32,
    /// Width of the left matrix's loads (1 or 4).
    pub va: u32,
    /// Width of the right matrix's loads and of the stores (1 or 4).
    pub vb: u32,
    /// 1: each 32-invocation subgroup covers an 8×4 patch of positions (fewer distinct
    /// shared-memory reads per instruction); 0: positions row by row.
    pub warp: u32,
    /// 1: ask the compiler to unroll every constant loop.
    pub unroll: u32,
    /// 1: read the next step's fragments from shared memory while this step multiplies.
    pub frag: u32,
    /// Split-K: parts of the shared dimension run by separate workgroups, added atomically
    /// (needs float atomics: `GL_NV_shader_atomic_float`); 1: no split.
    pub split: u32,
    /// 1: store the next slice to shared memory without a branch around the store (also after
    /// the last slice, uselessly), which NVIDIA's compiler schedules better on 8×8 tiles.
    pub store_always: u32,
    /// Sliced-K: groups of invocations in one workgroup, each multiplying its share of every
    /// slice, their sums added through shared memory at the end (1, 2 or 4; 1: none). More
    /// invocations per multiprocessor for a problem with few tiles, in one dispatch.
    pub kslice: u32,
    /// The sgemm problem (M, N, K) the program is built for, whole tiles only: constant strides
    /// and loads without bounds. All zero: any problem. See [`fixed_twin`](Self::fixed_twin).
    /// Its spec pins the scalars M, N and K ([`KernelSpec::pin`]), so any other problem is
    /// refused before it runs.
    pub fixed: [u32; 3],
    /// 1: sgemm reads both operands as texels ([`Access::Texels`](crate::Access::Texels): no
    /// bounds test of the driver's around each load, where NVIDIA's driver puts one around
    /// every storage-buffer load). sgemm only; needs a device with texel buffers. See
    /// [`texel_twin`](Self::texel_twin).
    pub texels: u32,
}

/// The problem a variant runs: `gm`×`gn` outputs, `gk` deep. `vec_a`/`vec_b` say whether the
/// problem allows 4-wide loads of the left and right matrix (and 4-wide stores).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GemmShape {
    /// Output rows.
    pub gm: usize,
    /// Output columns.
    pub gn: usize,
    /// The shared dimension.
    pub gk: usize,
    /// Whether 4-wide loads of the left matrix fit.
    pub vec_a: bool,
    /// Whether 4-wide loads of the right matrix (and 4-wide stores) fit.
    pub vec_b: bool,
}

const DEFINES: [&str; 13] =
    ["BM", "BN", "BK", "TM", "TN", "VA", "VB", "WARP", "UNROLL", "SPLIT", "FRAG", "STORE_ALWAYS", "KSLICE"];
/// A [`fixed`](GemmVariant::fixed) program's problem; absent from other variants' specs.
const FIXED_DEFINES: [&str; 3] = ["FIX_M", "FIX_N", "FIX_K"];
/// Defined (as 1) only for a [`texels`](GemmVariant::texels) variant, so that other variants'
/// specs, and the programs cached for them, stay as they were.
const TEXELS_DEFINE: &str = "TEXELS";

impl GemmVariant {
    /// Invocations per workgroup.
    pub fn threads(&self) -> u32 {
        self.group_threads() * self.kslice
    }

    /// Invocations that hold one tile between them (a workgroup's, or one of its sliced-K
    /// groups').
    pub fn group_threads(&self) -> u32 {
        (self.bn / self.tn) * (self.bm / self.tm)
    }

    /// Shared memory the variant declares: two slices of each operand (`kslice`·`bk` deep), the
    /// left one padded.
    pub fn shared_bytes(&self) -> u32 {
        let depth = self.bk * self.kslice;
        2 * depth * (self.bm / 4 + 1) * 16 + 2 * depth * (self.bn / 4) * 16
    }

    /// Whether the shader's index arithmetic holds for these numbers (every invocation loads
    /// whole chunks, tiles split evenly).
    pub fn well_formed(&self) -> bool {
        let Self {
            bm,
            bn,
            bk,
            tm,
            tn,
            va,
            vb,
            warp,
            unroll,
            frag,
            split,
            store_always,
            kslice,
            fixed,
            texels,
        } = *self;
        let threads = self.group_threads();
        let warp_ok = match warp {
            0 => true,
            1 => tn > 0 && tm > 0 && (bn / tn) % 8 == 0 && (bm / tm) % 4 == 0,
            _ => false,
        };
        [va, vb].iter().all(|&v| v == 1 || v == 4)
            && tm % 4 == 0
            && tn % 4 == 0
            && tm > 0
            && tn > 0
            && bm % tm == 0
            && bn % tn == 0
            && bk % va == 0
            && threads > 0
            && (bm * bk) % (threads * 4) == 0
            && (bk * bn) % (threads * 4) == 0
            && warp_ok
            && unroll <= 1
            && frag <= 1
            && store_always <= 1
            && (1..=16).contains(&split)
            && [1, 2, 4].contains(&kslice)
            // The reduction's scratch (4 vectors per group invocation) lies over the right
            // operand's two slices.
            && (kslice == 1 || 2 * bk * kslice * (bn / 4) >= 4 * threads)
            && (fixed == [0; 3] || self.whole_tiles(fixed))
            && texels <= 1
    }

    /// Whether a problem of `[m, n, k]` is whole tiles of this variant, unsplit, with the vector
    /// widths it loads: what a [`fixed`](Self::fixed) program needs.
    fn whole_tiles(&self, [m, n, k]: [u32; 3]) -> bool {
        let slice = self.bk * self.kslice;
        self.split == 1
            && m > 0
            && n > 0
            && k > 0
            && m % self.bm == 0
            && n % self.bn == 0
            && slice > 0
            && k % slice == 0
            && (self.va == 1 || k % 4 == 0)
            && (self.vb == 1 || n % 4 == 0)
    }

    /// This variant built for `shape` alone, if `shape` is whole tiles of it and it is one worth
    /// that: 8×8 outputs per invocation in the subgroup layout, storing slices without a branch
    /// (the form of every large-GEMM winner on an H100). Constant strides and loads without
    /// bounds took sgemm 4096³ from 3.16 to 2.98 ms there; the program serves that one problem.
    pub fn fixed_twin(&self, shape: &GemmShape) -> Option<Self> {
        let twin = Self { fixed: fixed_dims(shape), ..*self };
        (self.fixed == [0; 3]
            && self.tm * self.tn == 64
            && self.warp == 1
            && self.store_always == 1
            && twin.well_formed())
        .then_some(twin)
    }

    /// This variant reading its operands as texels, if it is one worth that and the device
    /// holds both operands in texel buffers: the same selection as
    /// [`fixed_twin`](Self::fixed_twin) (on an H100, sgemm 4096³ went from 3.00 to 2.93 ms
    /// with 4-wide loads of the left matrix, 3.03 to 2.99 with 1-wide ones; 1024³ on 128×128
    /// tiles went from 0.106 to 0.115 ms, so the tuner decides). sgemm only.
    pub fn texel_twin(&self, limits: &Limits, shape: &GemmShape) -> Option<Self> {
        let twin = Self { texels: 1, ..*self };
        (self.texels == 0
            && self.tm * self.tn == 64
            && self.warp == 1
            && self.store_always == 1
            && twin.fits(limits, shape))
        .then_some(twin)
    }

    /// Whether the device's texel buffers hold both operands of `shape`, if this variant reads
    /// them as texels.
    fn texels_fit(&self, limits: &Limits, shape: &GemmShape) -> bool {
        let a = (shape.gm as u64).saturating_mul(shape.gk as u64) / u64::from(self.va);
        let b = (shape.gk as u64).saturating_mul(shape.gn as u64) / u64::from(self.vb);
        self.texels == 0 || a.max(b) <= limits.max_texel_buffer_texels
    }

    /// Whether this variant can run `shape`: any, unless it is built for one problem.
    pub fn runs(&self, shape: &GemmShape) -> bool {
        self.fixed == [0; 3] || fixed_dims(shape) == self.fixed
    }

    /// Whether the device can run it and the problem allows its vector widths.
    pub fn fits(&self, limits: &Limits, shape: &GemmShape) -> bool {
        self.well_formed()
            && self.threads() <= limits.max_workgroup_invocations
            && self.threads() <= limits.max_workgroup_size[0]
            && self.shared_bytes() <= limits.max_shared_memory_bytes
            && (self.va == 1 || shape.vec_a)
            && (self.vb == 1 || shape.vec_b)
            && self.groups(shape).iter().zip(&limits.max_workgroup_count).all(|(&g, &max)| g <= max)
            && self.runs(shape)
            && self.texels_fit(limits, shape)
    }

    /// The spec of kernel `name` built from the core with these numbers (its bindings still to
    /// be added; a split variant takes the scalar `phase` after them).
    pub fn spec(&self, name: &str, conv: bool) -> KernelSpec {
        let values: [u32; DEFINES.len()] = [
            self.bm,
            self.bn,
            self.bk,
            self.tm,
            self.tn,
            self.va,
            self.vb,
            self.warp,
            self.unroll,
            self.split,
            self.frag,
            self.store_always,
            self.kslice,
        ];
        let mut spec = KernelSpec::new(name, [self.threads(), 1, 1]).glsl(SOURCE);
        for (define, value) in DEFINES.iter().zip(values) {
            spec = spec.define(*define, value);
        }
        if self.fixed != [0; 3] {
            for (define, value) in FIXED_DEFINES.iter().zip(self.fixed) {
                spec = spec.define(*define, value);
            }
        }
        if self.texels == 1 {
            spec = spec.define(TEXELS_DEFINE, 1);
        }
        spec.define("CONV", u32::from(conv))
    }

    /// The variant a spec made by [`spec`](Self::spec) was built with.
    pub fn from_spec(spec: &KernelSpec) -> Option<Self> {
        let value = |name: &str| {
            spec.defines.iter().rev().find(|(n, _)| n == name).and_then(|(_, v)| v.parse::<u32>().ok())
        };
        let variant = Self {
            bm: value("BM")?,
            bn: value("BN")?,
            bk: value("BK")?,
            tm: value("TM")?,
            tn: value("TN")?,
            va: value("VA")?,
            vb: value("VB")?,
            warp: value("WARP")?,
            unroll: value("UNROLL")?,
            frag: value("FRAG")?,
            split: value("SPLIT")?,
            // Specs from before the define existed stored behind a branch.
            store_always: value("STORE_ALWAYS").unwrap_or(0),
            kslice: value("KSLICE").unwrap_or(1),
            fixed: FIXED_DEFINES.map(|name| value(name).unwrap_or(0)),
            texels: value(TEXELS_DEFINE).unwrap_or(0),
        };
        (variant.well_formed() && spec.workgroup_size == [variant.threads(), 1, 1]).then_some(variant)
    }

    /// Workgroups over the output: x along its columns, y along its rows, z along the parts of
    /// a split (the first, filling dispatch of a split variant takes z = 1).
    pub fn groups(&self, shape: &GemmShape) -> [u32; 3] {
        [groups_for(shape.gn, self.bn), groups_for(shape.gm, self.bm), self.split]
    }

    /// The dispatches of one product: `(phase, groups)`; `phase` is `None` for an unsplit
    /// variant, which takes no phase argument.
    pub fn dispatches(&self, shape: &GemmShape) -> Vec<(Option<u32>, [u32; 3])> {
        let [x, y, z] = self.groups(shape);
        if self.split == 1 {
            vec![(None, [x, y, 1])]
        } else {
            vec![(Some(0), [x, y, 1]), (Some(1), [x, y, z])]
        }
    }

    /// The widest loads the problem allows.
    fn widest(self, shape: &GemmShape) -> Self {
        Self { va: if shape.vec_a { 4 } else { 1 }, vb: if shape.vec_b { 4 } else { 1 }, ..self }
    }

    /// Every variant worth timing for `shape` on a device with `limits`. Measured on an H100
    /// (driver 580): what decides is that a variant stays within 128 registers per invocation
    /// (two 256-invocation workgroups per multiprocessor) and the loads and stores around the
    /// product, not the tile shape, so the list is a few shapes that do, each with both kinds of
    /// left-matrix loads, subgroup layouts, fragment double buffering and both kinds of slice
    /// stores ([`store_choices`](Self::store_choices)) on the 8×8 ones, and split-K where the
    /// problem has too few tiles for the GPU.
    pub fn candidates(limits: &Limits, shape: &GemmShape) -> Vec<Self> {
        // (bm, bn, bk, tm, tn)
        let shapes = [
            (128, 128, 8, 8, 8),
            (128, 64, 8, 8, 8),
            (64, 128, 8, 8, 8),
            (128, 64, 16, 8, 8),
            (64, 128, 16, 8, 8),
            (128, 128, 16, 8, 4),
            (64, 64, 16, 4, 4),
            (64, 32, 16, 4, 4),
            (32, 64, 16, 4, 4),
            (32, 32, 16, 4, 4),
        ];
        let mut out = Vec::new();
        for (bm, bn, bk, tm, tn) in shapes {
            // Few output tiles for a deep product: split it, so every multiprocessor has work —
            // deeper products into more parts (a part keeps at least 256 of the shared
            // dimension, and the parts stay within 2048 workgroups).
            let count = shape.gm.div_ceil(bm as usize) * shape.gn.div_ceil(bn as usize);
            let splits: Vec<u32> = if count < 160 && shape.gk >= 256 {
                [1, 2, 4, 8, 16]
                    .into_iter()
                    .filter(|&s| s == 1 || (shape.gk / s as usize >= 256 && count * s as usize <= 2048))
                    .collect()
            } else {
                vec![1]
            };
            // Few warps over the whole product (under 16 per multiprocessor of a big GPU): also
            // sliced-K, 2 groups per workgroup, 4 for small 4×4 tiles (larger ones need more
            // than 48 KiB of slices); not with a split.
            let warps = count * ((bn / tn) * (bm / tm)) as usize / 32;
            let kslices: &[u32] = match (warps < 2048, tm * tn == 16 && bm * bn <= 1024) {
                (false, _) => &[1],
                (true, false) => &[1, 2],
                (true, true) => &[1, 2, 4],
            };
            // (warp, frag): every layout on 8×8 tiles; on 4×4 tiles of a problem with few warps,
            // also fragments read ahead (with either layout), since few warps per
            // multiprocessor cannot hide the shared-memory reads' latency otherwise (H100,
            // conv2d N=1 C=K=64 56×56 on 64×32×16 ks2: 0.0229 → 0.0207 ms).
            let eight_by_eight = tm * tn == 64 && bk == 8;
            let layouts: &[(u32, u32)] = if eight_by_eight {
                &[(0, 0), (1, 0), (0, 1), (1, 1)]
            } else if tm * tn == 16 && warps < 2048 {
                &[(0, 0), (0, 1), (1, 1)]
            } else {
                &[(0, 0)]
            };
            for va in [1, 4] {
                for &(warp, frag) in layouts {
                    for &split in &splits {
                        for &store_always in Self::store_choices(tm, tn) {
                            for &kslice in kslices.iter().filter(|&&k| k == 1 || split == 1) {
                                let variant = Self {
                                    bm,
                                    bn,
                                    bk,
                                    tm,
                                    tn,
                                    warp,
                                    frag,
                                    split,
                                    store_always,
                                    kslice,
                                    ..Self::SAFE
                                };
                                let variant = Self { va, ..variant.widest(shape) };
                                if variant.fits(limits, shape) {
                                    out.push(variant);
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// The `store_always` values worth timing for `tm`×`tn` outputs per invocation: storing
    /// without a branch helped 8×8 tiles and cost the 4×4 ones (H100, driver 580).
    pub fn store_choices(tm: u32, tn: u32) -> &'static [u32] {
        if tm * tn == 64 {
            &[0, 1]
        } else {
            &[0]
        }
    }

    /// The variant to run without tuning: large tiles when they still give every multiprocessor
    /// of a big GPU work, smaller ones when the problem has too few of them; CPU renderers
    /// (llvmpipe) take the small-tile variant, whose workgroups they schedule more evenly.
    pub fn default_for(info: &DeviceInfo, shape: &GemmShape) -> Self {
        let cpu = runs_on_cpu(info);
        let preferred = [
            Self::BIG,
            Self::MEDIUM,
            Self { bm: 64, bn: 64, bk: 16, tm: 4, tn: 4, ..Self::MEDIUM },
            Self { bm: 64, bn: 32, bk: 16, tm: 4, tn: 4, ..Self::MEDIUM },
            Self { bm: 32, bn: 32, bk: 16, tm: 4, tn: 4, ..Self::MEDIUM },
        ];
        let enough = |v: &Self| {
            let [x, y, _] = v.groups(shape);
            cpu || u64::from(x) * u64::from(y) >= 128
        };
        let start = if cpu { 2 } else { 0 };
        preferred[start..]
            .iter()
            .map(|v| v.widest(shape))
            .find(|v| v.fits(&info.limits, shape) && enough(v))
            .or_else(|| preferred.iter().map(|v| v.widest(shape)).rev().find(|v| v.fits(&info.limits, shape)))
            .unwrap_or(Self::SAFE)
    }

    /// Fits every GL 4.3 device (64 invocations, 8.5 KiB of shared memory) and any problem.
    pub const SAFE: Self = Self {
        bm: 32,
        bn: 32,
        bk: 16,
        tm: 4,
        tn: 4,
        va: 1,
        vb: 1,
        warp: 0,
        unroll: 1,
        frag: 0,
        split: 1,
        store_always: 0,
        kslice: 1,
        fixed: [0; 3],
        texels: 0,
    };
    /// 128×128 tiles, 8×8 outputs per invocation, subgroup-shaped layout: big problems on big
    /// GPUs.
    pub const BIG: Self = Self {
        bm: 128,
        bn: 128,
        bk: 8,
        tm: 8,
        tn: 8,
        va: 4,
        vb: 4,
        warp: 1,
        unroll: 1,
        frag: 0,
        split: 1,
        store_always: 0,
        kslice: 1,
        fixed: [0; 3],
        texels: 0,
    };
    /// 128×64 tiles with 128 invocations, 8×8 outputs each.
    pub const MEDIUM: Self = Self { bn: 64, warp: 0, ..Self::BIG };
}

/// `shape`'s sizes as a [`fixed`](GemmVariant::fixed) program holds them (0 where one does not
/// fit in a `u32`, which no fixed program has).
fn fixed_dims(shape: &GemmShape) -> [u32; 3] {
    [shape.gm, shape.gn, shape.gk].map(|d| u32::try_from(d).unwrap_or(0))
}

/// Kernels run on the CPU (a software renderer or a simulator).
pub(crate) fn runs_on_cpu(info: &DeviceInfo) -> bool {
    info.class != crate::hal::DeviceClass::Gpu
}

impl fmt::Display for GemmVariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}x{} t{}x{} v{}/{}", self.bm, self.bn, self.bk, self.tm, self.tn, self.va, self.vb)?;
        if self.warp == 1 {
            write!(f, " warp")?;
        }
        if self.unroll == 0 {
            write!(f, " no-unroll")?;
        }
        if self.frag == 1 {
            write!(f, " frag")?;
        }
        if self.split > 1 {
            write!(f, " split{}", self.split)?;
        }
        if self.store_always == 1 {
            write!(f, " store-always")?;
        }
        if self.kslice > 1 {
            write!(f, " ks{}", self.kslice)?;
        }
        if self.fixed != [0; 3] {
            write!(f, " fixed")?;
        }
        if self.texels == 1 {
            write!(f, " texels")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn big_but(gm: usize, gn: usize, gk: usize) -> GemmShape {
        GemmShape { gm, gn, gk, vec_a: true, vec_b: true }
    }

    #[test]
    fn every_candidate_round_trips_through_its_spec() {
        let limits = super::super::large_gpu_limits();
        let shape = GemmShape { gm: 1000, gn: 1000, gk: 1000, vec_a: true, vec_b: true };
        let candidates = GemmVariant::candidates(&limits, &shape);
        assert!(candidates.len() > 15, "{}", candidates.len());
        for v in &candidates {
            assert!(v.shared_bytes() <= 48 * 1024);
            assert_eq!(GemmVariant::from_spec(&v.spec("sgemm", false)), Some(*v));
        }
        let scalar = GemmShape { vec_a: false, ..shape };
        assert!(GemmVariant::candidates(&limits, &scalar).iter().all(|v| v.va == 1));
        assert!(!GemmVariant::BIG.fits(&limits, &scalar));
        let labels: std::collections::HashSet<String> = candidates.iter().map(|v| v.to_string()).collect();
        assert_eq!(labels.len(), candidates.len(), "labels name variants uniquely");
        let few_tiles = GemmShape { gm: 64, gn: 3136, gk: 576, vec_a: true, vec_b: true };
        assert!(GemmVariant::candidates(&limits, &few_tiles).iter().any(|v| v.split > 1));
        let deep = GemmShape { gm: 256, gn: 256, gk: 16384, vec_a: true, vec_b: true };
        assert!(
            GemmVariant::candidates(&limits, &deep).iter().any(|v| v.split == 16),
            "a deep product splits 16 ways"
        );
        let shallow = GemmShape { gm: 64, gn: 512, gk: 512, vec_a: true, vec_b: true };
        assert!(
            GemmVariant::candidates(&limits, &shallow).iter().all(|v| v.split <= 2),
            "every part keeps at least 256 of K"
        );
        let big = GemmShape { gm: 4096, gn: 4096, gk: 4096, vec_a: true, vec_b: true };
        assert!(
            GemmVariant::candidates(&limits, &big).iter().all(|v| v.split == 1 && v.kslice == 1),
            "4096² has enough tiles"
        );
        let sliced: Vec<GemmVariant> =
            GemmVariant::candidates(&limits, &few_tiles).into_iter().filter(|v| v.kslice > 1).collect();
        assert!(sliced.iter().any(|v| v.tm * v.tn == 16) && sliced.iter().any(|v| v.tm * v.tn == 64));
        assert!(sliced.iter().any(|v| v.kslice == 4 && v.bm * v.bn == 1024), "32×32 tiles in 4 groups");
        assert!(
            sliced.iter().any(|v| v.tm * v.tn == 16 && v.frag == 1 && v.warp == 1),
            "few warps: 4×4 tiles read their fragments ahead too"
        );
        assert!(
            GemmVariant::candidates(&limits, &big).iter().all(|v| v.tm * v.tn == 64 || v.frag == 0),
            "many warps: 4×4 tiles keep the plain layout"
        );
        for v in &sliced {
            assert_eq!(v.split, 1, "{v}: sliced-K is not combined with a split");
            assert_eq!(v.threads(), v.group_threads() * v.kslice);
            assert!(v.threads() <= 1024 && v.shared_bytes() <= 48 * 1024, "{v}");
            assert!(v.to_string().ends_with(&format!(" ks{}", v.kslice)), "{v}");
        }
        // The reduction's scratch must fit over the right operand's slices.
        assert!(!GemmVariant { kslice: 2, ..GemmVariant { bk: 4, va: 1, ..GemmVariant::BIG } }.well_formed());
        assert!(!GemmVariant { kslice: 3, ..GemmVariant::BIG }.well_formed());
        for stores in [0, 1] {
            assert!(
                candidates.iter().any(|v| v.tm * v.tn == 64 && v.store_always == stores),
                "8×8 tiles are offered with store_always = {stores}"
            );
        }
        assert!(
            candidates.iter().all(|v| v.tm * v.tn == 64 || v.store_always == 0),
            "4×4 tiles store in a branch"
        );
        // A choice stored before the define existed still names its variant.
        let without = GemmVariant::BIG.spec("sgemm", false);
        let mut old = without.clone();
        old.defines.retain(|(name, _)| name != "STORE_ALWAYS");
        assert_eq!(GemmVariant::from_spec(&old), Some(GemmVariant::BIG));
        // Fixed twins: only of whole tiles, named apart, refusing other problems, no splits.
        let v4096 = GemmShape { gm: 4096, gn: 4096, gk: 4096, vec_a: true, vec_b: true };
        let winner = GemmVariant { va: 1, frag: 1, store_always: 1, ..GemmVariant::BIG };
        let twin = winner.fixed_twin(&v4096).expect("4096³ is whole 128×128×8 tiles");
        assert_eq!(twin.fixed, [4096; 3]);
        assert_eq!(twin.to_string(), format!("{winner} fixed"));
        assert_eq!(GemmVariant::from_spec(&twin.spec("sgemm", false)), Some(twin));
        assert!(twin.fits(&limits, &v4096) && !twin.fits(&limits, &big_but(4096, 4096, 4104)));
        assert!(!twin.runs(&big_but(4096, 4096, 2048)) && twin.runs(&v4096));
        assert!(winner.fixed_twin(&big_but(4096, 4000, 4096)).is_none(), "N is not whole tiles");
        assert!(winner.fixed_twin(&big_but(4096, 4096, 4100)).is_none(), "K is not whole slices");
        assert!(twin.fixed_twin(&v4096).is_none(), "a twin has no twin");
        assert!(GemmVariant { store_always: 0, ..winner }.fixed_twin(&v4096).is_none());
        assert!(GemmVariant { tm: 4, tn: 4, ..winner }.fixed_twin(&v4096).is_none(), "8×8 tiles only");
        assert!(!GemmVariant { split: 2, ..twin }.well_formed(), "a fixed program is unsplit");
        assert!(!GemmVariant { fixed: [4096, 4096, 4100], ..winner }.well_formed());
        assert!(candidates.iter().all(|v| v.fixed == [0; 3]), "the core's own candidates run any problem");
        // Texel twins: the same selection, named apart, a define only where they read texels,
        // and only where the device's texel buffers hold both operands.
        let texels = twin.texel_twin(&limits, &v4096).expect("the fixed winner reads texels too");
        assert_eq!(texels.to_string(), format!("{winner} fixed texels"));
        assert_eq!(GemmVariant::from_spec(&texels.spec("sgemm", false)), Some(texels));
        assert!(!twin.spec("sgemm", false).defines.iter().any(|(name, _)| name == "TEXELS"));
        assert!(winner.texel_twin(&limits, &big_but(4000, 4000, 4000)).is_some(), "ragged problems too");
        assert!(texels.texel_twin(&limits, &v4096).is_none(), "a twin has no twin");
        assert!(GemmVariant { warp: 0, ..winner }.texel_twin(&limits, &v4096).is_none());
        assert!(candidates.iter().all(|v| v.texels == 0), "storage-buffer loads unless offered");
        let small = Limits { max_texel_buffer_texels: 4096 * 4096 - 1, ..limits.clone() };
        assert!(winner.texel_twin(&small, &v4096).is_none(), "16 Mi r32f texels of A are too many");
        let vector = GemmVariant { va: 4, ..winner };
        assert!(vector.texel_twin(&small, &v4096).is_some(), "4 Mi rgba32f texels fit");
        let none = Limits { max_texel_buffer_texels: 0, ..limits.clone() };
        assert!(winner.texel_twin(&none, &v4096).is_none(), "no texel buffers on the device");
        assert!(!GemmVariant { texels: 2, ..winner }.well_formed());
        for shape in [(1024, 1024, 1024), (4096, 4096, 4096), (128, 25088, 1152), (64, 3136, 576)] {
            let shape = GemmShape { gm: shape.0, gn: shape.1, gk: shape.2, vec_a: true, vec_b: true };
            eprintln!("{shape:?}: {} candidates", GemmVariant::candidates(&limits, &shape).len());
        }
    }
}
