//! saxpy: `y = a·x + y`.
//!
//! Tolerance: the result is one (possibly fused) multiply-add, so each element may be off by
//! 2 ulps of the f32 result: `2·ε·(|a·x| + |y|)`, plus 1e-30 so that exact zeros compare.

use crate::hal::BufferUsage;
use crate::kernel::{Access, KernelSpec, ScalarType};
use crate::runtime::{Arg, Buffer, Program, Runtime};
use crate::Result;

use super::{groups_for, random_floats, Case, Work};
use crate::hal::{DeviceInfo, Limits};
use crate::runtime::Commands;
use crate::{Error, ErrorKind};

/// The kernel's name in specs, tuning keys and reports.
pub const NAME: &str = "saxpy";

/// One compiled form of the kernel: `workgroup` invocations, each doing `per_thread` loads of
/// `vec` elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SaxpyVariant {
    /// Invocations per workgroup.
    pub workgroup: u32,
    /// Loads per invocation.
    pub per_thread: u32,
    /// Elements per load: 1, or 4 when `n` is a multiple of 4.
    pub vec: u32,
}

impl SaxpyVariant {
    /// Works for any `n` on any device.
    pub const SAFE: Self = Self { workgroup: 256, per_thread: 1, vec: 1 };

    /// Elements one workgroup covers.
    pub fn elements_per_group(&self) -> u32 {
        self.workgroup * self.per_thread * self.vec
    }

    /// The grid that covers `n` elements.
    pub fn groups(&self, n: usize) -> [u32; 3] {
        [groups_for(n, self.elements_per_group()), 1, 1]
    }

    fn fits(&self, limits: &Limits, n: usize) -> bool {
        (self.vec == 1 || (self.vec == 4 && n % 4 == 0))
            && self.workgroup <= limits.max_workgroup_invocations
            && self.workgroup <= limits.max_workgroup_size[0]
            && self.groups(n)[0] <= limits.max_workgroup_count[0]
    }

    /// The variants `tune` tries for `n` elements on a device with `limits`.
    pub fn candidates(limits: &Limits, n: usize) -> Vec<Self> {
        let mut out = Vec::new();
        for workgroup in [128, 256, 512, 1024] {
            for per_thread in [1, 2, 4] {
                for vec in [4, 1] {
                    let v = Self { workgroup, per_thread, vec };
                    if v.fits(limits, n) {
                        out.push(v);
                    }
                }
            }
        }
        out
    }

    /// vec4 loads where `n` allows, 4 loads in flight per invocation, in workgroups of 1024 on a
    /// GPU (on an H100, 64M floats took 0.2662-0.2689 ms back to back in workgroups of 1024 and
    /// 0.2702-0.2833 in workgroups of 256, over four tunes) and of 256 on a CPU renderer, which
    /// spreads workgroups over its threads.
    pub fn default_for(info: &DeviceInfo, n: usize) -> Self {
        let workgroup = if super::gemm::runs_on_cpu(info) { 256 } else { 1024 };
        let v = Self { workgroup, per_thread: 4, vec: if n % 4 == 0 { 4 } else { 1 } };
        if v.fits(&info.limits, n) {
            v
        } else {
            Self::SAFE
        }
    }

    /// The variant's kernel: its GLSL source, defines and bindings.
    pub fn spec(&self) -> KernelSpec {
        KernelSpec::new(NAME, [self.workgroup, 1, 1])
            .glsl(include_str!("../../shaders/saxpy.comp"))
            .define("VEC", self.vec)
            .define("PER_THREAD", self.per_thread)
            .storage("x", Access::ReadOnly)
            .storage("y", Access::ReadWrite)
            .scalar("a", ScalarType::F32)
            .scalar("n", ScalarType::U32)
    }

    /// The variant a spec made by [`spec`](Self::spec) was built with.
    pub fn from_spec(spec: &KernelSpec) -> Option<Self> {
        let value = |name: &str| {
            spec.defines.iter().rev().find(|(n, _)| n == name).and_then(|(_, v)| v.parse::<u32>().ok())
        };
        let v =
            Self { workgroup: spec.workgroup_size[0], per_thread: value("PER_THREAD")?, vec: value("VEC")? };
        (v.per_thread > 0 && (v.vec == 1 || v.vec == 4) && spec.workgroup_size[1..] == [1, 1]).then_some(v)
    }
}

impl std::fmt::Display for SaxpyVariant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "wg{} x{} v{}", self.workgroup, self.per_thread, self.vec)
    }
}

/// The kernel with the variant that fits any problem and device.
pub fn spec() -> KernelSpec {
    with_opencl_sources!(SaxpyVariant::SAFE.spec(), "saxpy", "saxpy.cl")
}

/// A saxpy problem of `x.len()` elements.
pub struct Saxpy {
    /// The factor.
    pub a: f32,
    /// The input.
    pub x: Vec<f32>,
    /// The input and output: `y = a·x + y`.
    pub y: Vec<f32>,
}

impl Saxpy {
    /// A problem of `n` elements, its values random from `seed`.
    pub fn random(n: usize, seed: u64) -> Self {
        Self { a: 1.5, x: random_floats(n, seed), y: random_floats(n, seed ^ 0x5A5A) }
    }
}

impl Saxpy {
    fn reference_at(&self, i: usize) -> (f64, f64) {
        let (a, x, y) = (f64::from(self.a), f64::from(self.x[i]), f64::from(self.y[i]));
        (a * x + y, 2.0 * f64::from(f32::EPSILON) * ((a * x).abs() + y.abs()) + 1e-30)
    }
}

impl Case for Saxpy {
    fn spec(&self) -> KernelSpec {
        spec()
    }

    fn default_spec(&self, info: &DeviceInfo) -> KernelSpec {
        SaxpyVariant::default_for(info, self.x.len()).spec()
    }

    fn variants(&self, limits: &Limits) -> Vec<(String, KernelSpec)> {
        SaxpyVariant::candidates(limits, self.x.len()).iter().map(|v| (v.to_string(), v.spec())).collect()
    }

    fn shape_key(&self) -> String {
        self.x.len().to_string()
    }

    fn reference_sample(&self, _spec: &KernelSpec, indices: &[usize]) -> (Vec<f64>, Vec<f64>) {
        indices.iter().map(|&i| self.reference_at(i)).unzip()
    }

    fn outputs(&self) -> usize {
        self.x.len()
    }

    fn describe(&self) -> String {
        format!("{NAME} n={}", self.x.len())
    }

    fn upload(&self, backend: &Runtime) -> Result<Vec<Buffer>> {
        Ok(vec![backend.upload(&self.x, BufferUsage::Input)?, backend.upload(&self.y, BufferUsage::InOut)?])
    }

    fn record(&self, commands: &mut Commands, program: &Program, buffers: &[Buffer]) -> Result<()> {
        let n = self.x.len();
        let variant = SaxpyVariant::from_spec(program.spec()).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "program `{}` is not a saxpy variant (defines VEC and PER_THREAD missing); build it \
                     with SaxpyVariant::spec",
                    program.name()
                ),
            )
        })?;
        if variant.vec == 4 && n % 4 != 0 {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("saxpy variant {variant} needs n to be a multiple of 4, but n = {n}"),
            ));
        }
        commands.dispatch(
            program,
            &[Arg::Buffer(&buffers[0]), Arg::Buffer(&buffers[1]), Arg::F32(self.a), Arg::U32(n as u32)],
            variant.groups(n),
        )?;
        Ok(())
    }

    fn download(&self, backend: &Runtime, buffers: &[Buffer]) -> Result<Vec<f32>> {
        backend.download(&buffers[1])
    }

    fn reference(&self, _spec: &KernelSpec) -> (Vec<f64>, Vec<f64>) {
        (0..self.x.len()).map(|i| self.reference_at(i)).unzip()
    }

    fn work(&self) -> Work {
        let n = self.x.len() as f64;
        Work { flops: 2.0 * n, bytes: 12.0 * n }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::GpuId;
    use crate::hal::DeviceClass;

    fn device(class: DeviceClass, max_workgroup_invocations: u32) -> DeviceInfo {
        DeviceInfo {
            backend: "gl",
            name: "a device".into(),
            details: Vec::new(),
            gpu_id: GpuId::new("gl", vec![("identity".into(), "test".into())]),
            limits: Limits {
                max_workgroup_size: [1024; 3],
                max_workgroup_invocations,
                max_workgroup_count: [65535; 3],
                max_shared_memory_bytes: 49152,
                max_storage_buffer_bytes: 1 << 31,
                max_storage_buffer_bindings: 16,
                storage_buffer_offset_alignment: 16,
                max_texel_buffer_texels: 1 << 27,
                texel_buffer_offset_alignment: 16,
            },
            persists_programs: true,
            parallel_compile: true,
            languages: vec![crate::SourceLanguage::Glsl],
            class,
        }
    }

    #[test]
    fn the_default_takes_workgroups_of_1024_on_a_gpu_and_256_on_a_cpu_renderer() {
        let n = 1 << 26;
        let gpu = SaxpyVariant::default_for(&device(DeviceClass::Gpu, 1024), n);
        assert_eq!(gpu.to_string(), "wg1024 x4 v4");
        let cpu = SaxpyVariant::default_for(&device(DeviceClass::Cpu, 1024), n);
        assert_eq!(cpu.to_string(), "wg256 x4 v4");
        assert_eq!(
            SaxpyVariant::default_for(&device(DeviceClass::Gpu, 1024), 1001).to_string(),
            "wg1024 x4 v1"
        );
        // A GPU that cannot run 1024 invocations per workgroup gets the safe variant.
        let small = SaxpyVariant::default_for(&device(DeviceClass::Gpu, 512), n);
        assert_eq!(small, SaxpyVariant::SAFE);
    }
}
