//! The gl backend on the runtime seam: [`Gl`] names its types and [`GlDevice`] implements
//! [`hal::Device`] by forwarding work to the GL thread of its EGL device (`thread.rs`): compiles
//! and loads (`program.rs`), buffers and host copies (`memory.rs`, `transfer.rs`), submissions
//! (`submit.rs`) and their fences (`fences.rs`, waited for on the device's
//! [`Timeline`](crate::hal::Timeline)). The device is `Send + Sync`; it holds only a handle to
//! that thread, what the probe found (`device_info.rs`) and the staging rings.

use std::path::Path;
use std::time::Duration;

use super::device_info::Probe;
use super::driver_cache::{self, Driver};
use super::memory::GlBuffer;
use super::program::{self, GlProgram, GlSource};
use super::stream_copy::Stores;
use super::submit::{self, Step};
use super::thread::{GlThread, LiveGuard};
use super::{glsl, transfer};

use crate::cache::{Blob, LoadFailure};
use crate::hal::{
    self, Api, BufferUsage, Command, Compiled, DeviceClass, DeviceInfo, Prepared, ProgramInterface,
    ReadTarget,
};
use crate::kernel::{KernelSource, KernelSpec, SourceLanguage};
use crate::Result;

/// The gl backend's types.
pub struct Gl;

impl Api for Gl {
    const NAME: &'static str = "gl";
    type Device = GlDevice;
    type Buffer = GlBuffer;
    type Program = GlProgram;
    type CompileInput = GlSource;
}

/// The GL context of one EGL device, as the runtime sees it.
pub struct GlDevice {
    live: LiveGuard,
    probe: Probe,
    info: DeviceInfo,
    /// Staging rings for large transfers of plain buffers, one each way (`transfer.rs`).
    rings: transfer::RingCell,
}

impl GlDevice {
    /// The device `SPARKLE_EGL_DEVICE` names (or the preferred one), sharing the process's GL
    /// thread and context for it. `cache_dir` is the Sparkle cache folder the runtime writes
    /// (`None`: cache off or read-only): the first device opened in a process points the
    /// driver's own shader cache into it, unless the user placed or switched off that cache
    /// (`driver_cache.rs`).
    pub fn open(cache_dir: Option<&Path>) -> Result<Self> {
        Self::open_on(cache_dir, None)
    }

    /// [`open`](Self::open) on EGL device `index` (its index in enumeration order, whatever
    /// `SPARKLE_EGL_DEVICE` says), with a GL thread of its own; `None`: as `open`.
    pub fn open_on(cache_dir: Option<&Path>, index: Option<usize>) -> Result<Self> {
        // Before the GL thread, whose display initialization is where drivers read the location.
        let span = crate::trace::phase("gl", "place the driver's shader cache");
        let driver_cache = driver_cache::configure(cache_dir);
        drop(span);
        let span = crate::trace::phase("gl", "start or find the GL thread");
        let (thread, probe) = match index {
            Some(index) => GlThread::shared_on(Some(index))?,
            None => GlThread::shared()?,
        };
        drop(span);
        if !probe.persists_programs() {
            tracing::warn!(
                renderer = %probe.renderer,
                "this GL driver offers no program binary formats (with Mesa, MESA_SHADER_CACHE_DISABLE \
                 turns them off): programs are compiled on every run and cached in memory only"
            );
        }
        let info = DeviceInfo {
            backend: Gl::NAME,
            name: probe.renderer.clone(),
            details: details(
                &probe,
                driver_cache.describe(Driver::of(&probe.vendor, &probe.version), cache_dir),
            ),
            gpu_id: probe.gpu_id(),
            limits: probe.limits.clone(),
            persists_programs: probe.persists_programs(),
            parallel_compile: probe.parallel_compile,
            languages: vec![SourceLanguage::Glsl],
            class: if probe.is_cpu_renderer() { DeviceClass::Cpu } else { DeviceClass::Gpu },
        };
        tracing::info!(device = %info.name, version = %probe.version, "gl backend ready");
        Ok(Self { live: thread.acquire(), probe, info, rings: transfer::RingCell::default() })
    }

    pub(super) fn thread(&self) -> &GlThread {
        self.live.thread()
    }

    /// Whether the device computes on the host's own cores (a CPU renderer).
    fn on_host(&self) -> bool {
        self.info.class == DeviceClass::Cpu
    }

    /// Queues the commands on the GL thread; `timed` measures them with a timer query.
    fn post(&self, commands: &[Command<'_, Gl>], timed: bool) -> Result<u64> {
        let steps: Vec<Step> = commands.iter().map(step).collect();
        let closing = closing_of(commands);
        let quick = !timed && !submit::copies(&steps);
        let timeline = self.thread().timeline().clone();
        // Inside the runtime's traced submit span: its GPU work goes on the trace's GPU track.
        let traced = crate::trace::submitting().map_or(0, |submitter| submitter.generation);
        let fence = self.thread().post_submission(
            || timeline.issue(),
            move |state, fence| submit::execute(state, fence, steps, closing, timed, traced),
            quick,
        )?;
        Ok(fence)
    }
}

fn details(probe: &Probe, driver_cache: String) -> Vec<(String, String)> {
    let formats = if probe.binary_formats.is_empty() {
        "none (programs are cached in memory only)".to_owned()
    } else {
        probe.binary_formats.iter().map(|f| format!("0x{f:04x}")).collect::<Vec<_>>().join(", ")
    };
    vec![
        ("vendor".into(), probe.vendor.clone()),
        ("renderer".into(), probe.renderer.clone()),
        ("GL version".into(), probe.version.clone()),
        ("GLSL version".into(), probe.glsl_version.clone()),
        (
            "context".into(),
            format!("{}.{} core on {}", probe.context_version.0, probe.context_version.1, probe.source),
        ),
        ("program binary formats".into(), formats),
        ("parallel shader compile".into(), if probe.parallel_compile { "yes" } else { "no" }.into()),
        (
            "persistent mapped staging buffers".into(),
            if probe.buffer_storage { "yes" } else { "no (GL 4.4 or ARB_buffer_storage needed)" }.into(),
        ),
        ("driver shader cache".into(), driver_cache),
        ("GPU clocks".into(), probe.clocks.clone()),
    ]
}

impl hal::Device<Gl> for GlDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn token(&self) -> u64 {
        self.thread().token()
    }

    fn prepare(&self, kernel: &KernelSpec) -> Result<Prepared<GlSource>> {
        let KernelSource::Glsl(source) = kernel.source(SourceLanguage::Glsl, Gl::NAME)? else {
            unreachable!("KernelSpec::source returns a source of the language asked for")
        };
        let glsl = glsl::assemble(kernel, source)?;
        // The driver compiles exactly this text; its identity is in the GpuId.
        let key_material = vec![b"glsl".to_vec(), glsl.text.as_bytes().to_vec()];
        Ok(Prepared {
            key_material,
            input: GlSource { kernel: kernel.name.clone(), glsl },
            from_spec_alone: true,
        })
    }

    fn compile(&self, input: &GlSource) -> Result<Compiled<GlProgram>> {
        match self.compile_racing(input, &mut || false)? {
            Some(compiled) => Ok(compiled),
            None => unreachable!("a compile that never gives up finishes"),
        }
    }

    fn compile_racing(
        &self,
        input: &GlSource,
        give_up: &mut dyn FnMut() -> bool,
    ) -> Result<Option<Compiled<GlProgram>>> {
        Ok(program::compile(
            self.thread(),
            input,
            self.probe.persists_programs(),
            self.probe.parallel_compile,
            give_up,
        )?)
    }

    fn load(&self, input: &GlSource, blob: &Blob) -> Result<GlProgram, LoadFailure<crate::Error>> {
        program::load(self.thread(), input, blob).map_err(|failure| match failure {
            LoadFailure::Refused(reason) => LoadFailure::Refused(reason),
            LoadFailure::Failed(err) => LoadFailure::Failed(err.into()),
        })
    }

    fn interface<'p>(&self, program: &'p GlProgram) -> &'p ProgramInterface {
        &program.interface
    }

    fn create_buffer(&self, size: u64, usage: BufferUsage) -> Result<GlBuffer> {
        Ok(GlBuffer::create(self.thread(), size, usage, self.probe.buffer_storage)?)
    }

    fn write_buffer(&self, buffer: &GlBuffer, offset: u64, data: &[u8]) -> Result<()> {
        if let Some(mapping) = buffer.mapping() {
            let _span = crate::trace::span("transfer", "host copy into a mapping");
            // A staging buffer's bytes are for a device copy (or kernel) to read next.
            let _copying = self.thread().host_copy();
            return Ok(mapping.write(offset, data, Stores::Streaming)?);
        }
        if transfer::through_ring(data.len(), self.on_host()) && self.probe.buffer_storage {
            let _span = crate::trace::span("transfer", "upload through the staging ring");
            let _copying = self.thread().host_copy();
            let post = |src: &GlBuffer, src_offset, dst: &GlBuffer, dst_offset, size| {
                self.post(&[Command::Copy { src, src_offset, dst, dst_offset, size }], false)
            };
            let thread = self.thread();
            let upload = |ring: &mut transfer::Ring| ring.upload(thread, &post, buffer, offset, data);
            if self.rings.with(thread, transfer::Direction::Upload, upload)?.is_some() {
                return Ok(());
            }
        }
        Ok(buffer.write(offset, data)?)
    }

    fn read_buffer(&self, buffer: &GlBuffer, offset: u64, out: &mut ReadTarget<'_>) -> Result<()> {
        if let Some(mapping) = buffer.mapping() {
            let _span = crate::trace::span("transfer", "host copy out of a mapping");
            let _copying = self.thread().host_copy();
            return Ok(mapping.read(offset, out)?);
        }
        if transfer::through_ring(out.len(), self.on_host()) && self.probe.buffer_storage {
            let _span = crate::trace::span("transfer", "read-back through the staging ring");
            let _copying = self.thread().host_copy();
            let post = |src: &GlBuffer, src_offset, dst: &GlBuffer, dst_offset, size| {
                self.post(&[Command::Copy { src, src_offset, dst, dst_offset, size }], false)
            };
            let thread = self.thread();
            let download = |ring: &mut transfer::Ring| ring.download(thread, &post, buffer, offset, out);
            if self.rings.with(thread, transfer::Direction::Download, download)?.is_some() {
                return Ok(());
            }
        }
        Ok(buffer.read(offset, out)?)
    }

    fn read_buffer_once_settled(
        &self,
        buffer: &GlBuffer,
        fence: u64,
        offset: u64,
        out: &mut ReadTarget<'_>,
    ) -> Result<bool> {
        if buffer.mapping().is_some() || transfer::through_ring(out.len(), self.on_host()) {
            // A copy from the mapping needs no GL call, and a large read goes through the
            // staging ring: the caller waits, then reads.
            return Ok(false);
        }
        Ok(buffer.read_once_settled(fence, offset, out)?)
    }

    fn submit(&self, commands: &[Command<'_, Gl>]) -> Result<u64> {
        self.post(commands, false)
    }

    fn measures_gpu_time(&self) -> bool {
        true
    }

    fn submit_timed(&self, commands: &[Command<'_, Gl>]) -> Result<u64> {
        self.post(commands, true)
    }

    fn take_gpu_time(&self, fence: u64) -> Option<Duration> {
        self.thread().take_gpu_time(fence)
    }

    fn completed(&self) -> u64 {
        self.thread().timeline().completed()
    }

    fn wait(&self, fence: u64, timeout: Duration) -> Result<bool> {
        self.thread().timeline().wait(fence, timeout)
    }
}

/// Where the barrier closing `commands` goes: behind the fence where they touch a mapped
/// buffer, whose result the host takes through the mapping. Mapped buffers need no client-mapped
/// barrier, being coherent (`submit.rs`).
fn closing_of(commands: &[Command<'_, Gl>]) -> submit::Closing {
    if commands.iter().any(touches_mapped_buffer) {
        submit::Closing::BehindFence
    } else {
        submit::Closing::BeforeFence
    }
}

fn touches_mapped_buffer(command: &Command<'_, Gl>) -> bool {
    match command {
        Command::Dispatch { buffers, .. } => buffers.iter().any(|b| b.buffer.mapping().is_some()),
        Command::Copy { src, dst, .. } => src.mapping().is_some() || dst.mapping().is_some(),
        Command::Barrier => false,
    }
}

/// A recorded command with the GL names it needs; sizes and offsets fit in i32 because buffers
/// are at most `i32::MAX` bytes on this backend.
fn step(command: &Command<'_, Gl>) -> Step {
    match command {
        Command::Dispatch { program, buffers, scalars, groups, kernel } => Step::Dispatch {
            program: program.id,
            buffers: buffers
                .iter()
                .filter(|b| b.texels.is_none())
                .map(|b| {
                    (program.interface.storage[b.slot].binding, b.buffer.id, b.offset as i32, b.size as i32)
                })
                .collect(),
            texels: buffers
                .iter()
                .filter_map(|b| {
                    let unit = program.interface.storage[b.slot].binding;
                    b.texels.map(|format| (unit, b.buffer.id, b.offset as i32, b.size as i32, format))
                })
                .collect(),
            uniforms: scalars.iter().map(|&(slot, value)| (program.locations[slot], value)).collect(),
            groups: *groups,
            kernel: (*kernel).to_owned(),
        },
        Command::Copy { src, src_offset, dst, dst_offset, size } => Step::Copy {
            src: src.id,
            src_offset: *src_offset as i32,
            dst: dst.id,
            dst_offset: *dst_offset as i32,
            size: *size as i32,
        },
        Command::Barrier => Step::Barrier,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hal::BufferUsage;
    use submit::Closing;

    /// Only a submission that touches a Staging buffer's mapping has its closing barrier behind
    /// its fence; one of device buffers only keeps it in front.
    #[test]
    fn only_submissions_touching_a_mapping_close_behind_their_fence() {
        let (thread, probe) = GlThread::shared().expect("a GL context (Mesa's llvmpipe is enough)");
        assert!(probe.buffer_storage, "the test's context maps Staging buffers (GL 4.4)");
        let device = GlBuffer::create(&thread, 16, BufferUsage::InOut, true).unwrap();
        let other = GlBuffer::create(&thread, 16, BufferUsage::Output, true).unwrap();
        let staging = GlBuffer::create(&thread, 16, BufferUsage::Staging, true).unwrap();
        assert!(staging.mapping().is_some() && device.mapping().is_none());
        let copy = |src, dst| Command::Copy { src, src_offset: 0, dst, dst_offset: 0, size: 16 };
        assert_eq!(closing_of(&[]), Closing::BeforeFence);
        assert_eq!(closing_of(&[copy(&device, &other), Command::Barrier]), Closing::BeforeFence);
        assert_eq!(closing_of(&[copy(&staging, &device)]), Closing::BehindFence);
        assert_eq!(
            closing_of(&[copy(&device, &other), Command::Barrier, copy(&other, &staging)]),
            Closing::BehindFence
        );
    }
}
