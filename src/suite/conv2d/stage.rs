//! The suite's conv2d as a stage of the pipelined executor: [`Conv2dStage`] runs the kernel
//! `sparkle tune` kept for its largest batch over batches of any size up to it, moving each batch
//! between the host and the kernel as its [`Transfers`] mode says.

use crate::hal::{BufferUsage, Limits};
use crate::kernel::KernelSpec;
use crate::runtime::{Arg, Buffer, Program, Runtime};
use crate::Result;

use super::{gemm_shape, spec, Conv2d, Shape, Window};
use crate::suite::gemm::GemmVariant;
use crate::suite::sgemm::{program_variant, record_gemm};
use crate::suite::winograd::{self, WinogradVariant};
use crate::suite::{self, random_floats, Case};

/// Conv2d over a stream of batches for the pipelined executor ([`crate::runtime::Pipeline`]):
/// weights and bias live on the device for the whole stream; each batch is `n` images (any `n`
/// from 1 to the stage's largest batch) of `C×H×W` floats in, `n×K×H×W` floats out. The kernel
/// is the one `sparkle tune` kept for the largest batch, else the device's default for it
/// (`stage_spec` in this file).
pub struct Conv2dStage {
    /// `n` is the largest batch a set holds.
    shape: Shape,
    transfers: Transfers,
    program: Program,
    weights: Buffer,
    bias: Buffer,
    host_weights: Vec<f32>,
    host_bias: Vec<f32>,
}

/// How a [`Conv2dStage`] moves batches between the host and the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transfers {
    /// Host writes and reads of the kernel's own buffers (gl: `glBufferSubData` and
    /// `glGetBufferSubData` on the GL thread).
    Plain,
    /// Host copies into and out of staging buffers ([`BufferUsage::Staging`]: persistently
    /// mapped where the backend can), and device copies between them and the kernel's buffers
    /// inside each batch's submission.
    Staged,
    /// The kernel reads and writes the staging buffers themselves: no device copies, but the
    /// kernel may read host memory.
    Mapped,
    /// A host copy into a staging buffer and a device copy into the kernel's input, as
    /// [`Staged`](Self::Staged); the kernel writes its output straight into a staging buffer,
    /// which the host reads: no device copy out. A kernel's writes to host memory run beside
    /// its work, where a device copy would run after it.
    StagedIn,
}

impl std::str::FromStr for Transfers {
    type Err = String;

    /// A way by its [`name`](Transfers::name); the error lists the names there are.
    fn from_str(text: &str) -> Result<Self, String> {
        Transfers::ALL
            .into_iter()
            .find(|way| way.name() == text)
            .ok_or_else(|| format!("`{text}`: the transfer modes are plain, staged, staged-in and mapped"))
    }
}

impl Transfers {
    /// Every way, in the order reports show them.
    pub const ALL: [Transfers; 4] =
        [Transfers::Plain, Transfers::Staged, Transfers::StagedIn, Transfers::Mapped];

    /// The way's name in reports and options.
    pub fn name(self) -> &'static str {
        match self {
            Transfers::Plain => "plain",
            Transfers::Staged => "staged",
            Transfers::Mapped => "mapped",
            Transfers::StagedIn => "staged-in",
        }
    }

    /// The usages of the buffers the kernel reads and writes.
    fn kernel_usages(self) -> (BufferUsage, BufferUsage) {
        match self {
            Transfers::Plain | Transfers::Staged => (BufferUsage::Input, BufferUsage::Output),
            Transfers::StagedIn => (BufferUsage::Input, BufferUsage::Staging),
            Transfers::Mapped => (BufferUsage::Staging, BufferUsage::Staging),
        }
    }

    /// Whether a device copy moves the input from a staging buffer into the kernel's, and the
    /// output from the kernel's into a staging buffer.
    fn device_copies(self) -> (bool, bool) {
        (matches!(self, Transfers::Staged | Transfers::StagedIn), self == Transfers::Staged)
    }
}

/// The buffers of one conv2d batch in flight and how many images they hold.
pub struct Conv2dSet {
    /// What the kernel reads and writes.
    input: Buffer,
    output: Buffer,
    /// What the host writes, where the kernel's input is not (a device copy moves it).
    staging_in: Option<Buffer>,
    /// What the host reads, where the kernel's output is not (a device copy moves it).
    staging_out: Option<Buffer>,
    /// A Winograd kernel's transformed weights, transformed input and products (empty for an
    /// implicit GEMM).
    winograd: Vec<Buffer>,
    images: usize,
}

impl Conv2dStage {
    /// A stage for batches of up to `largest.n` images of `largest`'s other sizes, with random
    /// weights and bias from `seed` (the ones [`Conv2d::random`] would make).
    pub fn new(runtime: &Runtime, largest: Shape, seed: u64) -> Result<Self> {
        let Shape { c, k, .. } = largest;
        let host_weights = random_floats(k * c * 9, seed ^ 0xC0DE);
        let host_bias = random_floats(k, seed ^ 0xB1A5);
        Ok(Self {
            shape: largest,
            transfers: Transfers::Plain,
            program: runtime.program(&stage_spec(runtime, largest, Transfers::Plain))?,
            weights: runtime.upload(&host_weights, BufferUsage::Input)?,
            bias: runtime.upload(&host_bias, BufferUsage::Input)?,
            host_weights,
            host_bias,
        })
    }

    /// The same stage moving batches as `transfers` says, with the kernel `sparkle tune` kept for
    /// the largest batch in that mode (`sparkle tune --transfers`), if it kept one.
    pub fn with_transfers(mut self, runtime: &Runtime, transfers: Transfers) -> Result<Self> {
        if transfers != self.transfers {
            self.transfers = transfers;
            let spec = stage_spec(runtime, self.shape, transfers);
            // Without a choice of the mode's own, the stage keeps the program it has.
            if spec != *self.program.spec() {
                self.program = runtime.program(&spec)?;
            }
        }
        Ok(self)
    }

    /// How the stage moves its batches' bytes.
    pub fn transfers(&self) -> Transfers {
        self.transfers
    }

    /// The largest batch's shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// The spec of the program the stage runs (what its results are checked as).
    pub fn spec(&self) -> &KernelSpec {
        self.program.spec()
    }

    /// The kernel's variant as `sparkle tune` labels it (`portable` for the portable kernel).
    pub fn variant(&self) -> String {
        let spec = self.program.spec();
        if let Some(variant) = WinogradVariant::from_spec(spec) {
            return variant.to_string();
        }
        GemmVariant::from_spec(spec)
            .filter(|_| *spec != self::spec())
            .map_or_else(|| "portable".to_owned(), |variant| variant.to_string())
    }

    /// Floats in one image of the input.
    pub fn image_len(&self) -> usize {
        self.shape.c * self.shape.h * self.shape.w
    }

    /// `count` batches of random images; batch sizes cycle through `sizes` (each at most the
    /// stage's largest batch).
    pub fn random_batches(&self, count: usize, sizes: &[usize], seed: u64) -> Vec<Vec<f32>> {
        (0..count)
            .map(|i| {
                let images = sizes.get(i % sizes.len().max(1)).copied().unwrap_or(self.shape.n);
                random_floats(images * self.image_len(), seed.wrapping_add(i as u64))
            })
            .collect()
    }

    /// The suite case of one batch (same weights and bias), for the synchronous path and the
    /// CPU reference.
    pub fn case(&self, input: Vec<f32>) -> Conv2d {
        let shape = Shape { n: input.len() / self.image_len().max(1), ..self.shape };
        Conv2d {
            shape,
            window: Window::SAME_3X3,
            input,
            weights: self.host_weights.clone(),
            bias: self.host_bias.clone(),
        }
    }

    fn images_in(&self, input: &[f32]) -> Result<usize> {
        let image = self.image_len();
        let images = input.len() / image;
        if input.len() % image != 0 || images == 0 || images > self.shape.n {
            return Err(crate::Error::new(
                crate::ErrorKind::InvalidArgument,
                format!(
                    "a conv2d batch of {} floats: it must be 1 to {} images of {} floats (C·H·W = {}·{}·{})",
                    input.len(),
                    self.shape.n,
                    image,
                    self.shape.c,
                    self.shape.h,
                    self.shape.w
                ),
            ));
        }
        Ok(images)
    }
}

/// The program a [`Conv2dStage`] runs, where the backend takes GLSL: the variant `sparkle tune`
/// kept for `largest` (an implicit GEMM or Winograd), else the device's default for `largest`;
/// either only if it takes every batch of up to `largest` images. Else the portable kernel. A
/// variant built for one problem's exact sizes would refuse the smaller batches.
fn stage_spec(runtime: &Runtime, largest: Shape, transfers: Transfers) -> KernelSpec {
    let case = Conv2d {
        shape: largest,
        window: Window::SAME_3X3,
        input: Vec::new(),
        weights: Vec::new(),
        bias: Vec::new(),
    };
    let limits = &runtime.info().limits;
    let any_batch = |spec: &KernelSpec| takes_any_batch(spec, limits, largest) && suite::takes(runtime, spec);
    let tuning = suite::tuning::Tuning::load(runtime);
    let in_mode = StagedConv2d { conv: case, transfers };
    tuning
        .as_ref()
        .and_then(|tuning| tuning.spec_for(runtime, &in_mode))
        .filter(any_batch)
        .or_else(|| tuning.as_ref().and_then(|tuning| tuning.spec_for(runtime, &in_mode.conv)))
        .filter(any_batch)
        .or_else(|| Some(in_mode.conv.default_spec(runtime.info())).filter(any_batch))
        .unwrap_or_else(spec)
}

/// One batch of a [`Conv2dStage`] as a suite problem, for `sparkle tune --transfers`: the GPU work
/// of the stage's batch in its transfer mode — its device copies, and the kernel reading and
/// writing where the mode puts the batch — so that kernels are timed as the stage runs them (a
/// kernel whose output goes to host memory ranks otherwise than on device buffers). Only variants
/// that take every batch size are offered. Its choices are kept under `conv2d NxCxHxWxK mode`;
/// with plain transfers it is the plain problem, under the plain key.
pub struct StagedConv2d {
    conv: Conv2d,
    transfers: Transfers,
}

impl StagedConv2d {
    /// `conv` (3×3 at stride 1, as a stage computes) moved as `transfers` says.
    pub fn new(conv: Conv2d, transfers: Transfers) -> Result<Self> {
        if conv.window != Window::SAME_3X3 {
            return Err(crate::Error::new(
                crate::ErrorKind::InvalidArgument,
                format!(
                    "a conv2d stage computes 3×3 windows at stride 1; this problem's window is {}×{} at stride {}",
                    conv.window.size, conv.window.size, conv.window.stride
                ),
            ));
        }
        Ok(Self { conv, transfers })
    }

    /// The staging buffers after the kernel's: the input's, then the output's.
    fn staging_buffers(&self) -> usize {
        let (copied_in, copied_out) = self.transfers.device_copies();
        usize::from(copied_in) + usize::from(copied_out)
    }

    /// The kernel's buffers (input, weights, bias, output, then Winograd's `winograd` bytes, if
    /// any) in the mode's memory, then the staging buffers the mode copies through.
    fn buffers(&self, backend: &Runtime, winograd: Option<[u64; 3]>) -> Result<Vec<Buffer>> {
        let conv = &self.conv;
        let (in_usage, out_usage) = self.transfers.kernel_usages();
        let (copied_in, copied_out) = self.transfers.device_copies();
        let out_bytes = (conv.outputs() * 4) as u64;
        let mut buffers = vec![
            if copied_in {
                backend.create_buffer((conv.input.len() * 4) as u64, in_usage)?
            } else {
                backend.upload(&conv.input, in_usage)?
            },
            backend.upload(&conv.weights, BufferUsage::Input)?,
            backend.upload(&conv.bias, BufferUsage::Input)?,
            backend.create_buffer(out_bytes, out_usage)?,
        ];
        for bytes in winograd.into_iter().flatten() {
            buffers.push(backend.create_buffer(bytes, BufferUsage::InOut)?);
        }
        if copied_in {
            buffers.push(backend.upload(&conv.input, BufferUsage::Staging)?);
        }
        if copied_out {
            buffers.push(backend.create_buffer(out_bytes, BufferUsage::Staging)?);
        }
        Ok(buffers)
    }

    /// `buffers` split into the kernel's and the staging ones (input's, output's).
    fn split<'b>(
        &self,
        buffers: &'b [Buffer],
    ) -> Result<(&'b [Buffer], Option<&'b Buffer>, Option<&'b Buffer>)> {
        let staging = self.staging_buffers();
        if buffers.len() < 4 + staging {
            return Err(crate::Error::new(
                crate::ErrorKind::InvalidArgument,
                format!(
                    "{} needs the kernel's buffers and {staging} staging buffers, got {} buffers: make them with \
                     its `upload`",
                    self.describe(),
                    buffers.len()
                ),
            ));
        }
        let (kernel, staging_buffers) = buffers.split_at(buffers.len() - staging);
        let (copied_in, copied_out) = self.transfers.device_copies();
        let staging_in = copied_in.then(|| &staging_buffers[0]);
        let staging_out = copied_out.then(|| &staging_buffers[staging - 1]);
        Ok((kernel, staging_in, staging_out))
    }
}

impl Case for StagedConv2d {
    fn spec(&self) -> KernelSpec {
        self.conv.spec()
    }

    fn default_spec(&self, info: &crate::hal::DeviceInfo) -> KernelSpec {
        self.conv.default_spec(info)
    }

    fn variants(&self, limits: &Limits) -> Vec<(String, KernelSpec)> {
        let shape = self.conv.shape;
        self.conv
            .variants(limits)
            .into_iter()
            .filter(|(_, spec)| takes_any_batch(spec, limits, shape))
            .collect()
    }

    fn shape_key(&self) -> String {
        match self.transfers {
            Transfers::Plain => self.conv.shape_key(),
            mode => format!("{} {}", self.conv.shape_key(), mode.name()),
        }
    }

    fn describe(&self) -> String {
        format!("{} ({} transfers)", self.conv.describe(), self.transfers.name())
    }

    fn upload(&self, backend: &Runtime) -> Result<Vec<Buffer>> {
        let glsl = backend.info().languages.contains(&crate::kernel::SourceLanguage::Glsl);
        let winograd =
            glsl.then(|| winograd::buffers_for_any(&backend.info().limits, self.conv.shape)).flatten();
        self.buffers(backend, winograd)
    }

    fn upload_for(&self, backend: &Runtime, program: &Program) -> Result<Vec<Buffer>> {
        let winograd = WinogradVariant::from_spec(program.spec())
            .map(|variant| winograd::intermediate_bytes(self.conv.shape, variant.tile));
        self.buffers(backend, winograd)
    }

    fn record(
        &self,
        commands: &mut crate::runtime::Commands,
        program: &Program,
        buffers: &[Buffer],
    ) -> Result<()> {
        let (kernel, staging_in, staging_out) = self.split(buffers)?;
        let (input, output) = (&kernel[0], &kernel[3]);
        if let Some(staging_in) = staging_in {
            commands.copy(staging_in, 0, input, 0, input.size())?;
        }
        self.conv.record(commands, program, kernel)?;
        if let Some(staging_out) = staging_out {
            commands.copy(output, 0, staging_out, 0, output.size())?;
        }
        Ok(())
    }

    fn download(&self, backend: &Runtime, buffers: &[Buffer]) -> Result<Vec<f32>> {
        let (kernel, _, staging_out) = self.split(buffers)?;
        backend.download(staging_out.unwrap_or(&kernel[3]))
    }

    fn reference(&self, spec: &KernelSpec) -> (Vec<f64>, Vec<f64>) {
        self.conv.reference(spec)
    }

    fn reference_sample(&self, spec: &KernelSpec, indices: &[usize]) -> (Vec<f64>, Vec<f64>) {
        self.conv.reference_sample(spec, indices)
    }

    fn outputs(&self) -> usize {
        self.conv.outputs()
    }

    fn work(&self) -> suite::Work {
        self.conv.work()
    }
}

/// Whether `spec` is an implicit GEMM or Winograd variant that computes every batch of up to
/// `largest`'s images on a device with `limits`: not built for one problem's exact sizes, and
/// for Winograd, with intermediate buffers the device can bind.
fn takes_any_batch(spec: &KernelSpec, limits: &Limits, largest: Shape) -> bool {
    match WinogradVariant::from_spec(spec) {
        Some(variant) => variant.gemm.fixed == [0; 3] && variant.fits(limits, largest),
        None => GemmVariant::from_spec(spec).is_some_and(|variant| variant.fixed == [0; 3]),
    }
}

impl crate::runtime::Stage for Conv2dStage {
    type Input = Vec<f32>;
    type Output = Vec<f32>;
    type Set = Conv2dSet;

    fn create_set(&self, runtime: &Runtime) -> Result<Conv2dSet> {
        let Shape { n, c, h, w, k } = self.shape;
        let (in_bytes, out_bytes) = ((n * c * h * w * 4) as u64, (n * k * h * w * 4) as u64);
        let (in_usage, out_usage) = self.transfers.kernel_usages();
        let (copied_in, copied_out) = self.transfers.device_copies();
        let staging = |bytes: u64, wanted: bool| {
            wanted.then(|| runtime.create_buffer(bytes, BufferUsage::Staging)).transpose()
        };
        let staging_in = staging(in_bytes, copied_in)?;
        let staging_out = staging(out_bytes, copied_out)?;
        let winograd = match WinogradVariant::from_spec(self.program.spec()) {
            Some(variant) => winograd::intermediate_bytes(self.shape, variant.tile)
                .into_iter()
                .map(|bytes| runtime.create_buffer(bytes, BufferUsage::InOut))
                .collect::<Result<_>>()?,
            None => Vec::new(),
        };
        Ok(Conv2dSet {
            input: runtime.create_buffer(in_bytes, in_usage)?,
            output: runtime.create_buffer(out_bytes, out_usage)?,
            staging_in,
            staging_out,
            winograd,
            images: 0,
        })
    }

    fn upload(&self, runtime: &Runtime, set: &mut Conv2dSet, input: Vec<f32>) -> Result<()> {
        set.images = self.images_in(&input)?;
        let target = set.staging_in.as_ref().unwrap_or(&set.input);
        runtime.write_buffer(target, 0, bytemuck::cast_slice(&input))
    }

    fn record(&self, _: &Runtime, set: &Conv2dSet, commands: &mut crate::runtime::Commands) -> Result<()> {
        let Shape { c, h, w, k, .. } = self.shape;
        let shape = Shape { n: set.images, ..self.shape };
        if let Some(staging_in) = &set.staging_in {
            commands.copy(staging_in, 0, &set.input, 0, (set.images * c * h * w * 4) as u64)?;
        }
        if let Some(variant) = WinogradVariant::from_spec(self.program.spec()) {
            let buffers =
                [&set.input, &self.weights, &self.bias, &set.output].into_iter().chain(&set.winograd);
            winograd::record(
                commands,
                &self.program,
                &variant,
                shape,
                &buffers.cloned().collect::<Vec<_>>(),
            )?;
        } else {
            let variant = program_variant(&self.program)?;
            record_gemm(
                commands,
                &self.program,
                &variant,
                &gemm_shape(shape),
                &[
                    Arg::Buffer(&set.input),
                    Arg::Buffer(&self.weights),
                    Arg::Buffer(&self.bias),
                    Arg::Buffer(&set.output),
                    Arg::U32(set.images as u32),
                    Arg::U32(c as u32),
                    Arg::U32(h as u32),
                    Arg::U32(w as u32),
                    Arg::U32(k as u32),
                ],
            )?;
        }
        if let Some(staging_out) = &set.staging_out {
            commands.copy(&set.output, 0, staging_out, 0, (set.images * k * h * w * 4) as u64)?;
        }
        Ok(())
    }

    fn download(&self, runtime: &Runtime, set: &mut Conv2dSet) -> Result<Vec<f32>> {
        let Shape { h, w, k, .. } = self.shape;
        let source = set.staging_out.as_ref().unwrap_or(&set.output);
        runtime.read_vec(source, 0, set.images * k * h * w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::conv2d::variant_spec;

    #[test]
    fn a_stage_takes_only_variants_that_compute_any_batch_size() {
        let largest = Shape { n: 8, c: 64, h: 64, w: 64, k: 64 };
        let limits = crate::suite::large_gpu_limits();
        let implicit = GemmVariant::candidates(&limits, &gemm_shape(largest));
        let winograd = WinogradVariant::candidates(&limits, largest);
        assert!(!implicit.is_empty() && !winograd.is_empty());
        for variant in &implicit {
            assert_eq!(
                takes_any_batch(&variant_spec(variant), &limits, largest),
                variant.fixed == [0; 3],
                "{variant}"
            );
        }
        let fixed = implicit.iter().filter_map(|v| v.fixed_twin(&gemm_shape(largest))).next();
        let fixed = fixed.expect("whole tiles: the problem has a fixed twin");
        assert!(!takes_any_batch(&variant_spec(&fixed), &limits, largest), "{fixed}");
        for variant in &winograd {
            assert!(takes_any_batch(&variant.spec(), &limits, largest), "{variant}");
        }
        // Intermediate buffers past the device's largest binding.
        let small = Limits { max_storage_buffer_bytes: 1 << 20, ..limits.clone() };
        assert!(!takes_any_batch(&winograd[0].spec(), &small, largest), "{}", winograd[0]);
        assert!(takes_any_batch(&spec(), &limits, largest), "the portable kernel");
    }
}
