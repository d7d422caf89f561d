//! The built-in kernel suite — saxpy, sgemm, conv2d — as ordinary user kernels: each is a
//! family of [`KernelSpec`] variants (defines chosen per problem and device, the winner of
//! `sparkle tune` when there is one) plus a problem of some size with random inputs, a CPU
//! reference computed in f64, and a per-element error bound. The `sparkle` command runs, tunes
//! and benchmarks these.

/// Adds a suite kernel's OpenCL C (`shaders/<file>`) and, with the amdgpu backend, the code
/// objects built ahead of time from it (`shaders/aot/<target>/<name>.co`, by `cargo run -p
/// sparkle-tools --bin aot`), so that the suite runs on amdgpu without a compiler. They compute
/// what the GLSL's portable variant computes, over the same grid, with the same bindings.
macro_rules! with_opencl_sources {
    ($spec:expr, $name:literal, $file:literal) => {{
        let spec = $spec.opencl($name, include_str!(concat!("../../shaders/", $file)));
        #[cfg(feature = "amdgpu")]
        let spec = spec
            .code_object(
                $name,
                "gfx1030",
                include_bytes!(concat!("../../shaders/aot/gfx1030/", $name, ".co")),
            )
            .code_object(
                $name,
                "gfx1100",
                include_bytes!(concat!("../../shaders/aot/gfx1100/", $name, ".co")),
            )
            .code_object(
                $name,
                "gfx1101",
                include_bytes!(concat!("../../shaders/aot/gfx1101/", $name, ".co")),
            )
            .code_object(
                $name,
                "gfx1102",
                include_bytes!(concat!("../../shaders/aot/gfx1102/", $name, ".co")),
            );
        spec
    }};
}

mod check;
mod chosen;
pub mod conv2d;
pub mod gemm;
pub mod saxpy;
pub mod sgemm;
pub mod timing;
pub mod tuning;
pub mod winograd;

use std::time::Duration;

pub use check::{verify, Mismatch, Verdict};
pub use chosen::chosen_spec;

use crate::hal::{DeviceInfo, Limits};
use crate::kernel::KernelSpec;
use crate::runtime::{Buffer, Commands, Program, Runtime, Submission};
use crate::Result;

/// How long a suite dispatch may take before it is reported as hung.
pub const DISPATCH_TIMEOUT: Duration = Duration::from_secs(60);

/// One problem instance of a suite kernel.
pub trait Case: Send + Sync {
    /// The kernel's variant that runs any problem on any device (the module's `spec()`); for a
    /// conv2d window other than 3×3 at stride 1, the GEMM core's safe GLSL variant, since the
    /// portable OpenCL form takes that window only.
    fn spec(&self) -> KernelSpec;
    /// The variant to run on `info`'s device without tuning.
    fn default_spec(&self, info: &DeviceInfo) -> KernelSpec;
    /// Every variant worth timing for this problem on a device with `limits`, with its label.
    fn variants(&self, limits: &Limits) -> Vec<(String, KernelSpec)>;
    /// The problem's sizes, as tuning results are keyed (`4096x4096x4096`).
    fn shape_key(&self) -> String;
    /// e.g. `sgemm 257x129x65`.
    fn describe(&self) -> String;
    /// Uploads the inputs and allocates the outputs, with whatever any variant needs besides
    /// (for the tuner, which runs every variant over the same buffers).
    fn upload(&self, backend: &Runtime) -> Result<Vec<Buffer>>;
    /// What running `program` needs: [`upload`](Self::upload) unless a case can do with less for
    /// that variant (conv2d allocates Winograd's intermediate buffers only for a Winograd one).
    fn upload_for(&self, backend: &Runtime, program: &Program) -> Result<Vec<Buffer>> {
        let _ = program;
        self.upload(backend)
    }
    /// Records a dispatch over buffers from [`upload`](Self::upload) with any variant's program.
    fn record(&self, commands: &mut Commands, program: &Program, buffers: &[Buffer]) -> Result<()>;
    /// Dispatches over buffers from [`upload`](Self::upload), as one submission.
    fn dispatch(&self, backend: &Runtime, program: &Program, buffers: &[Buffer]) -> Result<Submission> {
        let mut commands = backend.commands();
        self.record(&mut commands, program, buffers)?;
        backend.submit(commands)
    }
    /// Reads the result back.
    fn download(&self, backend: &Runtime, buffers: &[Buffer]) -> Result<Vec<f32>>;
    /// The CPU result and, per element, the largest error that still counts as correct for the
    /// variant `spec` builds: its arithmetic decides its rounding error (a Winograd conv2d's
    /// transforms round more than a direct dot product), so each is held to its own bound.
    fn reference(&self, spec: &KernelSpec) -> (Vec<f64>, Vec<f64>);
    /// [`reference`](Self::reference) at the output elements `indices` only, for problems too
    /// big to check in full on the CPU.
    fn reference_sample(&self, spec: &KernelSpec, indices: &[usize]) -> (Vec<f64>, Vec<f64>);
    /// Output elements.
    fn outputs(&self) -> usize;
    /// Floating-point operations and bytes moved by one dispatch, for throughput figures.
    fn work(&self) -> Work;
}

/// The amount of work in one dispatch.
#[derive(Debug, Clone, Copy, Default)]
pub struct Work {
    /// Floating-point operations (a fused multiply-add counts 2).
    pub flops: f64,
    /// Bytes the kernel must read and write at least.
    pub bytes: f64,
}

/// The suite's kernels, in a fixed order.
pub fn kernels() -> Vec<KernelSpec> {
    vec![saxpy::spec(), sgemm::spec(), conv2d::spec()]
}

/// The names `case` accepts.
pub const NAMES: [&str; 3] = [saxpy::NAME, sgemm::NAME, conv2d::NAME];

/// A case of kernel `name` with `sizes` (missing sizes take defaults); inputs come from `seed`.
/// The problem is checked against `limits` before any input is made, so a size the device
/// cannot take is an error, not a huge allocation.
pub fn case(
    name: &str,
    sizes: &[usize],
    seed: u64,
    limits: &Limits,
) -> std::result::Result<Box<dyn Case>, String> {
    let size = |i: usize, default: usize| sizes.get(i).copied().unwrap_or(default);
    if sizes.contains(&0) {
        return Err("sizes must be at least 1".into());
    }
    let fits = Fits { limits };
    match name {
        saxpy::NAME if sizes.len() <= 1 => {
            let n = size(0, 1 << 20);
            fits.index("N", n)?;
            fits.buffer("x and y", &[n])?;
            fits.groups([n.div_ceil(saxpy::SaxpyVariant::SAFE.elements_per_group() as usize), 1, 1])?;
            Ok(Box::new(saxpy::Saxpy::random(n, seed)))
        }
        sgemm::NAME if sizes.len() <= 3 => {
            let m = size(0, 512);
            let (n, k) = (size(1, m), size(2, m));
            for (label, value) in [("M", m), ("N", n), ("K", k)] {
                fits.index(label, value)?;
            }
            fits.buffer("A", &[m, k])?;
            fits.buffer("B", &[k, n])?;
            fits.buffer("C", &[m, n])?;
            let tile = gemm::GemmVariant::SAFE.bm as usize;
            fits.groups([n.div_ceil(tile), m.div_ceil(tile), 1])?;
            Ok(Box::new(sgemm::Sgemm::random(m, n, k, seed)))
        }
        conv2d::NAME => conv2d_case(sizes, seed, limits).map(|case| Box::new(case) as Box<dyn Case>),
        saxpy::NAME => Err("saxpy takes one size: N".into()),
        sgemm::NAME => Err("sgemm takes up to three sizes: M N K".into()),
        other => Err(format!("no suite kernel is called `{other}`; the suite has {}", NAMES.join(", "))),
    }
}

/// The conv2d problem of `sizes` (N C H W K, then the window's size and stride; missing ones take
/// defaults), inputs from `seed`, checked against `limits` before any input is made: what
/// [`case`] makes for conv2d, as the concrete problem.
pub fn conv2d_case(
    sizes: &[usize],
    seed: u64,
    limits: &Limits,
) -> std::result::Result<conv2d::Conv2d, String> {
    if sizes.contains(&0) {
        return Err("sizes must be at least 1".into());
    }
    if sizes.len() > 7 {
        return Err(
            "conv2d takes up to seven sizes: N C H W K, then the window's size and stride (3 1)".into()
        );
    }
    let size = |i: usize, default: usize| sizes.get(i).copied().unwrap_or(default);
    let fits = Fits { limits };
    let window = conv2d::Window { size: size(5, 3), stride: size(6, 1) };
    window.check()?;
    let shape =
        conv2d::Shape { n: size(0, 1), c: size(1, 16), h: size(2, 64), w: size(3, 64), k: size(4, 16) };
    for (label, value) in [("N", shape.n), ("C", shape.c), ("H", shape.h), ("W", shape.w), ("K", shape.k)] {
        fits.index(label, value)?;
    }
    let (oh, ow) = window.output(shape.h, shape.w);
    fits.buffer("the input", &[shape.n, shape.c, shape.h, shape.w])?;
    fits.buffer("the weights", &[shape.k, shape.c, window.taps()])?;
    fits.buffer("the output", &[shape.n, shape.k, oh, ow])?;
    let gemm = conv2d::window_gemm_shape(shape, window);
    fits.groups(gemm::GemmVariant::SAFE.groups(&gemm).map(|g| g as usize))?;
    Ok(conv2d::Conv2d::random_window(shape, window, seed))
}

/// Checks of a problem's sizes against a device.
struct Fits<'a> {
    limits: &'a Limits,
}

impl Fits<'_> {
    /// Sizes are passed to kernels as u32 scalars.
    fn index(&self, label: &str, value: usize) -> std::result::Result<(), String> {
        if value > u32::MAX as usize {
            return Err(format!(
                "{label} = {value} does not fit the kernel's 32-bit size arguments (at most {})",
                u32::MAX
            ));
        }
        Ok(())
    }

    /// A buffer of f32s with `dims` elements per dimension.
    fn buffer(&self, label: &str, dims: &[usize]) -> std::result::Result<(), String> {
        let bytes = dims.iter().fold(4u128, |bytes, &d| bytes.saturating_mul(d as u128));
        if bytes > u128::from(self.limits.max_storage_buffer_bytes) {
            return Err(format!(
                "{label} would need {bytes} bytes, more than a kernel may bind on this device ({} bytes)",
                self.limits.max_storage_buffer_bytes
            ));
        }
        Ok(())
    }

    fn groups(&self, groups: [usize; 3]) -> std::result::Result<(), String> {
        for (axis, (&count, &max)) in groups.iter().zip(&self.limits.max_workgroup_count).enumerate() {
            if count > max as usize {
                return Err(format!(
                    "the problem needs {count} workgroups on axis {axis}, more than the device allows ({max})"
                ));
            }
        }
        Ok(())
    }
}

/// The cases `sparkle bench` runs and compares with its peers: the sizes of the published
/// targets (sgemm 1024 and 4096, the two conv2d shapes, saxpy at 64M floats), plus saxpy at 4M
/// floats, whose inputs fit a 50 MB L2 cache and are therefore rotated. `quick` takes small
/// sizes, for CPU renderers.
pub fn bench_cases(seed: u64, quick: bool) -> Vec<Box<dyn Case>> {
    use conv2d::{Conv2d, Shape};
    if quick {
        return vec![
            Box::new(saxpy::Saxpy::random(1 << 20, seed)),
            Box::new(sgemm::Sgemm::random(256, 256, 256, seed)),
            Box::new(Conv2d::random(Shape { n: 1, c: 16, h: 28, w: 28, k: 16 }, seed)),
        ];
    }
    vec![
        Box::new(saxpy::Saxpy::random(1 << 22, seed)),
        Box::new(saxpy::Saxpy::random(1 << 26, seed)),
        Box::new(sgemm::Sgemm::random(1024, 1024, 1024, seed)),
        Box::new(sgemm::Sgemm::random(4096, 4096, 4096, seed)),
        Box::new(Conv2d::random(Shape { n: 32, c: 128, h: 28, w: 28, k: 128 }, seed)),
        Box::new(Conv2d::random(Shape { n: 1, c: 64, h: 56, w: 56, k: 64 }, seed)),
    ]
}

/// The problem sets `sparkle bench` and `sparkle tune` run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemSet {
    /// The sizes of the published targets ([`bench_cases`]).
    Targets,
    /// Shapes users run beyond those ([`shape_cases`]).
    Shapes,
}

impl ProblemSet {
    /// The cases of this set.
    pub fn cases(self, seed: u64, quick: bool) -> Vec<Box<dyn Case>> {
        match self {
            ProblemSet::Targets => bench_cases(seed, quick),
            ProblemSet::Shapes => shape_cases(seed, quick),
        }
    }
}

/// Shapes beyond the published targets, as users run them: GEMMs that are tall and skinny,
/// wide and short, deep in K, and ragged (no size a multiple of any tile or of 4); conv2d with
/// a 1×1 window, at stride 2, and with C or K not a multiple of 4. `quick` takes small sizes of
/// the same kinds, for CPU renderers.
pub fn shape_cases(seed: u64, quick: bool) -> Vec<Box<dyn Case>> {
    use conv2d::{Conv2d, Shape, Window};
    let gemm = |m, n, k| -> Box<dyn Case> { Box::new(sgemm::Sgemm::random(m, n, k, seed)) };
    let conv = |n, c, h, w, k, size, stride| -> Box<dyn Case> {
        Box::new(Conv2d::random_window(Shape { n, c, h, w, k }, Window { size, stride }, seed))
    };
    if quick {
        return vec![
            gemm(257, 33, 129),
            gemm(31, 45, 517),
            conv(2, 8, 13, 11, 12, 1, 1),
            conv(1, 8, 15, 17, 8, 3, 2),
            conv(1, 3, 9, 10, 5, 3, 1),
        ];
    }
    vec![
        // Tall and skinny, wide and short, deep in K.
        gemm(16384, 64, 1024),
        gemm(64, 16384, 1024),
        gemm(256, 256, 16384),
        // Ragged: no size a multiple of 4.
        gemm(1023, 1025, 1027),
        gemm(3001, 2999, 1003),
        // 1×1 (a ResNet bottleneck's expansion), stride 2 (a downsampling stage).
        conv(32, 64, 56, 56, 256, 1, 1),
        conv(32, 128, 56, 56, 128, 3, 2),
        // C and K not multiples of 4: an RGB stem, and odd channel counts.
        conv(32, 3, 224, 224, 64, 3, 2),
        conv(8, 66, 28, 28, 130, 3, 1),
    ]
}

/// The variants of `case` worth timing on `backend`: those in a language it takes, else just
/// the portable spec.
pub fn variants_for(backend: &Runtime, case: &dyn Case) -> Vec<(String, KernelSpec)> {
    let variants: Vec<_> =
        case.variants(&backend.info().limits).into_iter().filter(|(_, spec)| takes(backend, spec)).collect();
    if variants.is_empty() {
        vec![("portable".to_owned(), case.spec())]
    } else {
        variants
    }
}

fn takes(backend: &Runtime, spec: &KernelSpec) -> bool {
    spec.sources.iter().any(|source| backend.info().languages.contains(&source.language()))
}

/// Runs `case` once with `program` and checks it against the CPU.
pub fn run_and_verify(backend: &Runtime, program: &Program, case: &dyn Case) -> Result<Verdict> {
    let buffers = case.upload_for(backend, program)?;
    case.dispatch(backend, program, &buffers)?.wait(DISPATCH_TIMEOUT)?;
    let got = case.download(backend, &buffers)?;
    let (want, tolerance) = case.reference(program.spec());
    Ok(verify(&got, &want, &tolerance))
}

/// Checks `got` (the whole output of the variant `spec` builds) at `samples` spread over it —
/// every element when that is fewer — for problems too big for a full CPU reference. Always
/// includes the first and last elements, where ragged edges are.
pub fn verify_sampled(case: &dyn Case, spec: &KernelSpec, got: &[f32], samples: usize) -> Verdict {
    let outputs = case.outputs();
    if got.len() != outputs {
        return verify(got, &vec![0.0; outputs], &vec![0.0; outputs]);
    }
    let indices: Vec<usize> = if outputs <= samples {
        (0..outputs).collect()
    } else {
        let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ outputs as u64;
        let mut picks: Vec<usize> = (0..samples.saturating_sub(2))
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % outputs as u64) as usize
            })
            .collect();
        picks.extend([0, outputs - 1]);
        picks
    };
    let (want, tolerance) = reference_in_parallel(case, spec, &indices);
    let picked: Vec<f32> = indices.iter().map(|&i| got[i]).collect();
    let mut verdict = verify(&picked, &want, &tolerance);
    if let Some(m) = verdict.mismatch.as_mut() {
        m.index = indices[m.index];
    }
    verdict
}

/// Fewest outputs per thread worth a thread of their own in [`reference_in_parallel`].
const OUTPUTS_PER_THREAD: usize = 256;

/// `case.reference_sample(spec, indices)` computed on all host cores, in order: a conv2d's
/// reference with a Winograd error bound costs about 0.1 ms per output on one core.
fn reference_in_parallel(case: &dyn Case, spec: &KernelSpec, indices: &[usize]) -> (Vec<f64>, Vec<f64>) {
    let threads = crate::hal::spin::host_cores().min(indices.len() / OUTPUTS_PER_THREAD).max(1);
    if threads == 1 {
        return case.reference_sample(spec, indices);
    }
    let chunk = indices.len().div_ceil(threads);
    let parts: Vec<(Vec<f64>, Vec<f64>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = indices
            .chunks(chunk)
            .map(|part| scope.spawn(move || case.reference_sample(spec, part)))
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    let (mut want, mut tolerance) = (Vec::with_capacity(indices.len()), Vec::with_capacity(indices.len()));
    for (w, t) in parts {
        want.extend(w);
        tolerance.extend(t);
    }
    (want, tolerance)
}

/// Deterministic inputs in [-1, 1) (SplitMix64), so every run and every process sees the same.
pub(crate) fn random_floats(count: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    (0..count)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            ((z >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The limits of a large GPU (an H100's, rounded) for the unit tests of variant choices.
#[cfg(test)]
pub(crate) fn large_gpu_limits() -> Limits {
    Limits {
        max_workgroup_size: [1024, 1024, 64],
        max_workgroup_invocations: 1024,
        max_workgroup_count: [65535; 3],
        max_shared_memory_bytes: 48 * 1024,
        max_storage_buffer_bytes: 1 << 31,
        max_storage_buffer_bindings: 16,
        storage_buffer_offset_alignment: 16,
        max_texel_buffer_texels: 1 << 27,
        texel_buffer_offset_alignment: 16,
    }
}

/// Workgroups needed to cover `items` with groups of `per_group`.
pub(crate) fn groups_for(items: usize, per_group: u32) -> u32 {
    items.div_ceil(per_group as usize) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parallel_reference_is_the_sequential_one_in_order() {
        let case = sgemm::Sgemm::random(37, 61, 29, 5);
        let spec = case.spec();
        // Spread and repeated indices, more than one thread's share.
        let indices: Vec<usize> = (0..5000).map(|i| (i * 7919) % case.outputs()).collect();
        assert_eq!(reference_in_parallel(&case, &spec, &indices), case.reference_sample(&spec, &indices));
        let few = [case.outputs() - 1, 0, 3];
        assert_eq!(reference_in_parallel(&case, &spec, &few), case.reference_sample(&spec, &few));
    }
}
