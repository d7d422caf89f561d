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
            program: runtime.program(&stage_spec(runtime, largest))?,
            weights: runtime.upload(&host_weights, BufferUsage::Input)?,
            bias: runtime.upload(&host_bias, BufferUsage::Input)?,
            host_weights,
            host_bias,
        })
    }

    /// The same stage moving batches as `transfers` says.
    pub fn with_transfers(mut self, transfers: Transfers) -> Self {
        self.transfers = transfers;
        self
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
fn stage_spec(runtime: &Runtime, largest: Shape) -> KernelSpec {
    let case = Conv2d {
        shape: largest,
        window: Window::SAME_3X3,
        input: Vec::new(),
        weights: Vec::new(),
        bias: Vec::new(),
    };
    let limits = &runtime.info().limits;
    let any_batch = |spec: &KernelSpec| takes_any_batch(spec, limits, largest) && suite::takes(runtime, spec);
    suite::tuning::Tuning::load(runtime)
        .and_then(|tuning| tuning.spec_for(runtime, &case))
        .filter(any_batch)
        .or_else(|| Some(case.default_spec(runtime.info())).filter(any_batch))
        .unwrap_or_else(spec)
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
        let (in_usage, out_usage) = match self.transfers {
            Transfers::Plain | Transfers::Staged => (BufferUsage::Input, BufferUsage::Output),
            Transfers::StagedIn => (BufferUsage::Input, BufferUsage::Staging),
            Transfers::Mapped => (BufferUsage::Staging, BufferUsage::Staging),
        };
        let staging = |bytes: u64, wanted: bool| {
            wanted.then(|| runtime.create_buffer(bytes, BufferUsage::Staging)).transpose()
        };
        let staging_in =
            staging(in_bytes, matches!(self.transfers, Transfers::Staged | Transfers::StagedIn))?;
        let staging_out = staging(out_bytes, self.transfers == Transfers::Staged)?;
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
