//! sgemm: `C = A·B`, row-major, any M, N, K, on the register-blocked GEMM core
//! ([`super::gemm`]); the variant comes from the program's spec, so any variant of the core
//! dispatches correctly.
//!
//! Tolerance: a K-term f32 dot product in any summation order is within `γ_K·Σ|a·b|` of the
//! exact value, with `γ_K = K·ε/(1 − K·ε)`; we allow `K·ε·Σ|a_ik·b_kj|` (plus 1e-30), against a
//! reference computed in f64.

use crate::hal::BufferUsage;
use crate::kernel::{Access, KernelSpec, ScalarType, TexelFormat};
use crate::runtime::{Arg, Buffer, Commands, Program, Runtime};
use crate::Result;

use super::gemm::{GemmShape, GemmVariant};
use super::{random_floats, Case, Work};
use crate::hal::{DeviceInfo, Limits};
use crate::{Error, ErrorKind};

/// The kernel's name in specs, tuning keys and reports.
pub const NAME: &str = "sgemm";

/// The kernel with the variant that fits any problem and device.
pub fn spec() -> KernelSpec {
    with_opencl_sources!(variant_spec(&GemmVariant::SAFE), "sgemm", "gemm.cl")
}

/// The kernel built with `variant` (same bindings as [`spec`]).
pub fn variant_spec(variant: &GemmVariant) -> KernelSpec {
    // Read as texels, an operand loaded 4 wide is rgba32f texels, one loaded 1 wide r32f.
    let operand = |width: u32| match (variant.texels, width) {
        (0, _) => Access::ReadOnly,
        (_, 4) => Access::Texels(TexelFormat::Rgba32F),
        _ => Access::Texels(TexelFormat::R32F),
    };
    let spec = variant
        .spec(NAME, false)
        .storage("a", operand(variant.va))
        .storage("b", operand(variant.vb))
        .storage("c", Access::ReadWrite)
        .scalar("M", ScalarType::U32)
        .scalar("N", ScalarType::U32)
        .scalar("K", ScalarType::U32);
    // A fixed variant has the sizes as constants: any other sizes are refused at dispatch.
    let spec = match variant.fixed {
        [0, 0, 0] => spec,
        [m, n, k] => spec.pin("M", m).pin("N", n).pin("K", k),
    };
    with_phase(variant, spec)
}

/// A split variant's extra scalar: 0 fills the output, 1 adds the parts into it.
pub(crate) fn with_phase(variant: &GemmVariant, spec: KernelSpec) -> KernelSpec {
    if variant.split > 1 {
        spec.scalar("phase", ScalarType::U32)
    } else {
        spec
    }
}

/// Records the dispatches of one product: `args` plus the phase of each, for split variants.
pub(crate) fn record_gemm(
    commands: &mut Commands,
    program: &Program,
    variant: &GemmVariant,
    shape: &GemmShape,
    args: &[Arg<'_>],
) -> Result<()> {
    if !variant.runs(shape) {
        let [m, n, k] = variant.fixed;
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "program `{}` ({variant}) is built for a {m}×{n}×{k} product only, and this problem is {}×{}×{}; \
                 build a variant without `fixed` for it",
                program.name(),
                shape.gm,
                shape.gn,
                shape.gk
            ),
        ));
    }
    for (phase, groups) in variant.dispatches(shape) {
        let mut all = args.to_vec();
        all.extend(phase.map(Arg::U32));
        commands.dispatch(program, &all, groups)?;
    }
    Ok(())
}

/// An sgemm problem: `a` is M×K, `b` is K×N.
pub struct Sgemm {
    /// Rows of `a` and of the result.
    pub m: usize,
    /// Columns of `b` and of the result.
    pub n: usize,
    /// The shared dimension.
    pub k: usize,
    /// M×K, row-major.
    pub a: Vec<f32>,
    /// K×N, row-major.
    pub b: Vec<f32>,
}

impl Sgemm {
    /// An M×N×K problem, its values random from `seed`.
    pub fn random(m: usize, n: usize, k: usize, seed: u64) -> Self {
        Self { m, n, k, a: random_floats(m * k, seed), b: random_floats(k * n, seed ^ 0xB0B) }
    }

    /// The problem as the GEMM core sees it.
    pub fn shape(&self) -> GemmShape {
        GemmShape { gm: self.m, gn: self.n, gk: self.k, vec_a: self.k % 4 == 0, vec_b: self.n % 4 == 0 }
    }

    /// One output element of the f64 reference and its tolerance.
    fn reference_at(&self, index: usize) -> (f64, f64) {
        let (i, j) = (index / self.n, index % self.n);
        let gamma = self.k as f64 * f64::from(f32::EPSILON);
        let row = &self.a[i * self.k..(i + 1) * self.k];
        let (mut sum, mut magnitude) = (0.0f64, 0.0f64);
        for (kk, &a) in row.iter().enumerate() {
            let term = f64::from(a) * f64::from(self.b[kk * self.n + j]);
            sum += term;
            magnitude += term.abs();
        }
        (sum, gamma * magnitude + 1e-30)
    }
}

/// The core variant a program of this kernel was built with.
pub(crate) fn program_variant(program: &Program) -> Result<GemmVariant> {
    GemmVariant::from_spec(program.spec()).ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "program `{}` is not a variant of the GEMM core (its defines BM, BN, BK, TM, TN, VA, VB \
                 are missing or inconsistent); build it with sgemm::variant_spec or conv2d::variant_spec",
                program.name()
            ),
        )
    })
}

impl Case for Sgemm {
    fn spec(&self) -> KernelSpec {
        spec()
    }

    fn default_spec(&self, info: &DeviceInfo) -> KernelSpec {
        variant_spec(&GemmVariant::default_for(info, &self.shape()))
    }

    /// The core's candidates, those worth it built for this problem alone
    /// ([`GemmVariant::fixed_twin`]) where it is whole tiles, and forms of them reading the
    /// operands as texels ([`GemmVariant::texel_twin`]) where the device has texel buffers.
    fn variants(&self, limits: &Limits) -> Vec<(String, KernelSpec)> {
        let shape = self.shape();
        let generic = GemmVariant::candidates(limits, &shape);
        // Where a candidate has a fixed twin, its texel form is the twin's (fixed ones win on
        // whole tiles); elsewhere the candidate's own.
        let twins: Vec<GemmVariant> = generic
            .iter()
            .flat_map(|v| match v.fixed_twin(&shape) {
                Some(fixed) => [Some(fixed), fixed.texel_twin(limits, &shape)],
                None => [v.texel_twin(limits, &shape), None],
            })
            .flatten()
            .collect();
        generic.iter().chain(&twins).map(|v| (v.to_string(), variant_spec(v))).collect()
    }

    fn shape_key(&self) -> String {
        format!("{}x{}x{}", self.m, self.n, self.k)
    }

    fn reference_sample(&self, _spec: &KernelSpec, indices: &[usize]) -> (Vec<f64>, Vec<f64>) {
        indices.iter().map(|&i| self.reference_at(i)).unzip()
    }

    fn outputs(&self) -> usize {
        self.m * self.n
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

    fn record(&self, commands: &mut Commands, program: &Program, buffers: &[Buffer]) -> Result<()> {
        let variant = program_variant(program)?;
        record_gemm(
            commands,
            program,
            &variant,
            &self.shape(),
            &[
                Arg::Buffer(&buffers[0]),
                Arg::Buffer(&buffers[1]),
                Arg::Buffer(&buffers[2]),
                Arg::U32(self.m as u32),
                Arg::U32(self.n as u32),
                Arg::U32(self.k as u32),
            ],
        )
    }

    fn download(&self, backend: &Runtime, buffers: &[Buffer]) -> Result<Vec<f32>> {
        backend.download(&buffers[2])
    }

    fn reference(&self, _spec: &KernelSpec) -> (Vec<f64>, Vec<f64>) {
        (0..self.m * self.n).map(|i| self.reference_at(i)).unzip()
    }

    fn work(&self) -> Work {
        let (m, n, k) = (self.m as f64, self.n as f64, self.k as f64);
        Work { flops: 2.0 * m * n * k, bytes: 4.0 * (m * k + k * n + m * n) }
    }
}
