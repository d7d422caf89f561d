//! `Core<A>`: one backend's device under the runtime — its program cache (keys from what the
//! backend's compiler really sees), the interface check that turns a compiled program into a
//! [`Program`], submissions with the objects they use held until their fence completes, and the
//! fences host reads and writes wait for. `DynDevice` is the object-safe face the [`Runtime`]
//! façade talks to, so `SPARKLE_BACKEND` can choose at run time.
//!
//! [`Runtime`]: super::Runtime

use std::collections::VecDeque;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::activity::DeviceActivity;
use super::commands::{Commands, Recorded};
use super::objects::ProgramShared;
use super::spec_keys::SpecKeys;
use super::validate;
use super::{Buffer, Program};
use crate::cache::{
    Blob, Built, CacheConfig, CacheKey, CacheStats, LoadFailure, ProgramCache, ProgramHandle, ProgramSource,
};
use crate::hal::{Api, BoundBuffer, BufferUsage, Command, Device, DeviceInfo, ReadTarget};
use crate::kernel::KernelSpec;
use crate::{Error, ErrorKind, Result};

/// Most programs a warm-up has compiling at once when the driver compiles in parallel.
const MAX_PARALLEL_COMPILES: usize = 32;

/// The environment variable that sets how many programs a warm-up asks for at once (1: one by
/// one); by default as many as the driver compiles in parallel, else one per core.
pub const PARALLEL_COMPILES_ENV: &str = "SPARKLE_PARALLEL_COMPILES";

/// What `SPARKLE_PARALLEL_COMPILES` asks for, if it is set to a positive number; anything else
/// is one warning (per process) and the default.
fn parallel_compiles_from_env() -> Option<usize> {
    let value = std::env::var(PARALLEL_COMPILES_ENV).ok()?;
    match value.trim().parse::<usize>() {
        Ok(threads) if threads > 0 => Some(threads),
        _ if value.trim().is_empty() => None,
        _ => {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                tracing::warn!(
                    "{PARALLEL_COMPILES_ENV}={value:?} is not a positive number; using the default"
                )
            });
            None
        }
    }
}

/// How long dropping a device waits for its unfinished submissions.
const DRAIN_ON_DROP: Duration = Duration::from_secs(10);

/// The runtime's view of one opened backend device.
pub(crate) trait DynDevice: Send + Sync {
    fn info(&self) -> &DeviceInfo;
    /// This device's id in the process's mark of the device that did work last.
    fn activity_id(&self) -> u64;
    fn check_buffer(&self, buffer: &Buffer) -> Result<()>;
    fn check_program(&self, program: &Program) -> Result<()>;
    fn create_buffer(&self, size: u64, usage: BufferUsage) -> Result<Buffer>;
    fn write_buffer(&self, buffer: &Buffer, offset: u64, data: &[u8], timeout: Duration) -> Result<()>;
    fn read_buffer(
        &self,
        buffer: &Buffer,
        offset: u64,
        out: &mut ReadTarget<'_>,
        timeout: Duration,
    ) -> Result<()>;
    fn program(&self, kernel: &KernelSpec) -> Result<Program>;
    fn warm_up(&self, kernels: &[KernelSpec]) -> Result<Vec<Program>>;
    fn submit(&self, commands: Commands, timed: bool) -> Result<u64>;
    fn measures_gpu_time(&self) -> bool;
    fn take_gpu_time(&self, fence: u64) -> Option<Duration>;
    fn completed(&self) -> u64;
    fn wait(&self, fence: u64, timeout: Duration) -> Result<bool>;
    fn cache_stats(&self) -> CacheStats;
    /// Programs the device's cache compiled so far (one counter: the placement asks it after
    /// runs that may have compiled).
    fn compiles(&self) -> u64;
    fn cache_dir(&self) -> Option<PathBuf>;
    /// Whether the program cache writes entries to disk.
    fn cache_writable(&self) -> bool;
    /// Requests loading or compiling right now (the background rebuild waits for them).
    fn compiles_in_flight(&self) -> usize;
    /// Builds `kernel` for a rebuild (`rebuild.rs`) through the same path as [`program`]:
    /// `Ok(false)` when it was not compiled here (the cache held it, or another thread, process
    /// or the fleet tier provided it).
    ///
    /// [`program`]: DynDevice::program
    fn rebuild_one(&self, kernel: &KernelSpec) -> Result<bool>;
    #[cfg(feature = "remote")]
    fn fleet(&self) -> &dyn crate::cache::FleetCache;
    /// The fleet's recipes, when a remote tier is configured (`rebuild.rs`).
    #[cfg(feature = "remote")]
    fn fleet_recipes(&self) -> Option<crate::cache::remote::FleetRecipes>;
}

/// Refuses a read the backend reported done without marking its target filled: the caller
/// would otherwise get memory nobody wrote. A backend defect, reported as the device failing.
fn filled(out: &ReadTarget<'_>, backend: &str) -> Result<()> {
    if out.is_filled() {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::DeviceLost,
        format!(
            "the {backend} backend returned from a read of {} bytes without filling them (a backend defect)",
            out.len()
        ),
    ))
}

/// Objects an unfinished submission uses, released when its fence completes.
struct InFlight {
    fence: u64,
    _buffers: Vec<Buffer>,
    _programs: Vec<Program>,
}

pub(crate) struct Core<A: Api> {
    device: A::Device,
    cache: ProgramCache<A::Program>,
    /// The keys of the specs asked for lately, so that a program in memory is found without
    /// preparing its source again.
    spec_keys: SpecKeys,
    in_flight: Mutex<VecDeque<InFlight>>,
    /// Marks this device as the one that did work last (submissions and transfers).
    activity: DeviceActivity,
}

impl<A: Api> Core<A> {
    /// Puts `device` under the runtime with a program cache configured by `config`.
    pub fn new(device: A::Device, config: &CacheConfig) -> Self {
        let info = device.info();
        let memory_only;
        let config = if info.persists_programs {
            config
        } else {
            memory_only = CacheConfig { dir: None, remote: None, ..config.clone() };
            &memory_only
        };
        let span = crate::trace::phase("cache", "open the program cache");
        let cache = ProgramCache::open(info.gpu_id.clone(), config);
        drop(span);
        Self {
            device,
            cache,
            spec_keys: SpecKeys::default(),
            in_flight: Mutex::new(VecDeque::new()),
            activity: DeviceActivity::new(),
        }
    }

    fn token(&self) -> u64 {
        self.device.token()
    }

    /// The spec's key and compiler input; whether the key comes from the spec alone.
    fn key_and_input(&self, kernel: &KernelSpec) -> Result<(CacheKey, A::CompileInput, bool)> {
        let span = crate::trace::span("runtime", "check spec");
        validate::check_spec(kernel, &self.device.info().limits)?;
        drop(span);
        let _span = crate::trace::span("runtime", "prepare source");
        let prepared = self.device.prepare(kernel)?;
        let parts: Vec<&[u8]> = prepared.key_material.iter().map(Vec::as_slice).collect();
        Ok((CacheKey::derive(&self.device.info().gpu_id, &parts), prepared.input, prepared.from_spec_alone))
    }

    fn wrap(&self, kernel: &KernelSpec, handle: ProgramHandle<A::Program>) -> Result<Program> {
        let plan = validate::plan(kernel, self.device.interface(&handle))?;
        Ok(Program {
            shared: Arc::new(ProgramShared {
                token: self.token(),
                backend: A::NAME,
                spec: kernel.clone(),
                name: kernel.name.as_str().into(),
                plan,
                handle: Box::new(handle),
            }),
        })
    }

    /// Drops the objects of every completed submission.
    fn retire(&self) {
        let completed = self.device.completed();
        let mut in_flight = self.in_flight.lock().unwrap_or_else(PoisonError::into_inner);
        while in_flight.front().is_some_and(|f| f.fence <= completed) {
            in_flight.pop_front();
        }
    }

    /// Waits until `fence` completed so the host may touch a buffer. `check` also reports a
    /// failure of that submission: a read must not return what failed work left behind, while
    /// a write only needs the work to be over.
    fn wait_for_host(&self, fence: u64, timeout: Duration, access: &str, check: bool) -> Result<()> {
        if fence == 0 || (!check && self.device.completed() >= fence) {
            return Ok(());
        }
        let mut span = crate::trace::span("runtime", "wait for fence");
        span.arg("fence", fence);
        span.arg_with("for", || access.to_owned());
        match self.device.wait(fence, timeout) {
            Ok(true) => Ok(()),
            Ok(false) => Err(Error::new(
                ErrorKind::Timeout,
                format!(
                    "{access} waited {} ms for the GPU work that uses the buffer and gave up",
                    timeout.as_millis()
                ),
            )),
            Err(_) if !check && self.device.completed() >= fence => Ok(()),
            Err(err) => Err(err.context(format!("{access}: the work that writes the buffer failed"))),
        }
    }
}

/// The cache's view of one compile on one device.
struct Source<'a, A: Api> {
    device: &'a A::Device,
    input: &'a A::CompileInput,
    /// The kernel asked for: a program loaded from a stored entry must match its interface.
    spec: &'a KernelSpec,
}

impl<A: Api> ProgramSource<A::Program> for Source<'_, A> {
    type Error = Error;

    fn compile(&self) -> Result<Built<A::Program>> {
        let started = Instant::now();
        let compiled = self.device.compile(self.input)?;
        Ok(Built { program: compiled.program, blob: compiled.blob, compile_time: started.elapsed() })
    }

    fn compile_racing(&self, give_up: &mut dyn FnMut() -> bool) -> Result<Option<Built<A::Program>>> {
        let started = Instant::now();
        let compiled = self.device.compile_racing(self.input, give_up)?;
        Ok(compiled.map(|compiled| Built {
            program: compiled.program,
            blob: compiled.blob,
            compile_time: started.elapsed(),
        }))
    }

    fn load(&self, blob: &Blob) -> Result<A::Program, LoadFailure<Error>> {
        self.device.load(self.input, blob)
    }

    fn kernel_name(&self) -> &str {
        &self.spec.name
    }

    fn recipe(&self) -> Option<Vec<u8>> {
        Some(super::rebuild::spec_to_json(self.spec))
    }

    fn check_loaded(&self, program: &A::Program) -> std::result::Result<(), String> {
        validate::plan(self.spec, self.device.interface(program)).map(drop).map_err(|err| err.to_string())
    }
}

impl<A: Api> DynDevice for Core<A> {
    fn info(&self) -> &DeviceInfo {
        self.device.info()
    }

    fn activity_id(&self) -> u64 {
        self.activity.id()
    }

    fn check_buffer(&self, buffer: &Buffer) -> Result<()> {
        buffer.object::<A::Buffer>(self.token()).map(drop)
    }

    fn check_program(&self, program: &Program) -> Result<()> {
        program.handle::<ProgramHandle<A::Program>>(self.token()).map(drop)
    }

    fn create_buffer(&self, size: u64, usage: BufferUsage) -> Result<Buffer> {
        let limit = self.device.info().limits.max_storage_buffer_bytes;
        if size == 0 || size > limit {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "a buffer of {size} bytes: the size must be between 1 and {limit} bytes on this device"
                ),
            ));
        }
        let object = self.device.create_buffer(size, usage)?;
        Ok(Buffer::new(self.token(), A::NAME, size, object))
    }

    fn write_buffer(&self, buffer: &Buffer, offset: u64, data: &[u8], timeout: Duration) -> Result<()> {
        let object = buffer.object::<A::Buffer>(self.token())?;
        buffer.check_range(offset, data.len() as u64)?;
        self.activity.mark();
        let last_use = buffer.last_use();
        self.wait_for_host(last_use, timeout, "writing a buffer", false)?;
        self.device.write_buffer(object, offset, data)?;
        // The host's bytes replace whatever earlier (possibly failed) work wrote.
        buffer.forget_writes_up_to(last_use);
        Ok(())
    }

    fn read_buffer(
        &self,
        buffer: &Buffer,
        offset: u64,
        out: &mut ReadTarget<'_>,
        timeout: Duration,
    ) -> Result<()> {
        let object = buffer.object::<A::Buffer>(self.token())?;
        buffer.check_range(offset, out.len() as u64)?;
        self.activity.mark();
        let last_write = buffer.last_write();
        // A read right after the work that writes the buffer: the backend may wait and read in
        // one step; the write's outcome is checked below either way.
        let pending = last_write != 0 && self.device.completed() < last_write;
        if pending
            && timeout >= crate::hal::spin::window()
            && self.device.read_buffer_once_settled(object, last_write, offset, out)?
        {
            self.wait_for_host(last_write, Duration::ZERO, "reading a buffer", true)?;
            return filled(out, A::NAME);
        }
        self.wait_for_host(last_write, timeout, "reading a buffer", true)?;
        self.device.read_buffer(object, offset, out)?;
        filled(out, A::NAME)
    }

    fn program(&self, kernel: &KernelSpec) -> Result<Program> {
        // A spec asked for before whose program is in memory: nothing to prepare.
        if let Some(handle) = self.spec_keys.key(kernel).and_then(|key| self.cache.memory_hit(&key)) {
            return self.wrap(kernel, handle);
        }
        let (key, input, from_spec_alone) = self.key_and_input(kernel)?;
        let handle =
            self.cache.get(&key, &Source::<A> { device: &self.device, input: &input, spec: kernel })?;
        if from_spec_alone {
            self.spec_keys.remember(kernel, key);
        }
        self.wrap(kernel, handle)
    }

    fn warm_up(&self, kernels: &[KernelSpec]) -> Result<Vec<Program>> {
        let prepared = kernels.iter().map(|k| self.key_and_input(k)).collect::<Result<Vec<_>>>()?;
        let requests: Vec<_> = prepared
            .iter()
            .zip(kernels)
            .map(|((key, input, _), spec)| (*key, Source::<A> { device: &self.device, input, spec }))
            .collect();
        let threads = match parallel_compiles_from_env() {
            Some(threads) => threads.min(requests.len().max(1)),
            // Every compile is started at once; the driver's threads do the work.
            None if self.device.info().parallel_compile => requests.len().min(MAX_PARALLEL_COMPILES),
            None => std::thread::available_parallelism().map_or(1, NonZeroUsize::get),
        };
        let handles = self.cache.warm_up_with_threads(&requests, threads);
        kernels.iter().zip(handles).map(|(kernel, handle)| self.wrap(kernel, handle?)).collect()
    }

    fn submit(&self, commands: Commands, timed: bool) -> Result<u64> {
        let mut span = crate::trace::span("runtime", "submit");
        // The backend stamps this submission's GPU work for the trace only inside the span.
        let _submitting = crate::trace::Submitting::mark(&span, || self.token());
        self.activity.mark();
        self.retire();
        let token = self.token();
        let mut hal_commands: Vec<Command<'_, A>> = Vec::with_capacity(commands.list.len());
        for recorded in &commands.list {
            hal_commands.push(match recorded {
                Recorded::Dispatch { program, buffers, scalars, groups } => {
                    let handle = program.handle::<ProgramHandle<A::Program>>(token)?;
                    let buffers = buffers
                        .iter()
                        .map(|b| {
                            Ok(BoundBuffer {
                                slot: b.slot,
                                buffer: b.buffer.object(token)?,
                                offset: b.offset,
                                size: b.size,
                                texels: b.texels,
                            })
                        })
                        .collect::<Result<Vec<_>>>()?;
                    Command::Dispatch {
                        program: handle,
                        buffers,
                        scalars: scalars.clone(),
                        groups: *groups,
                        kernel: program.name(),
                    }
                }
                Recorded::Copy { src, src_offset, dst, dst_offset, size } => Command::Copy {
                    src: src.object(token)?,
                    src_offset: *src_offset,
                    dst: dst.object(token)?,
                    dst_offset: *dst_offset,
                    size: *size,
                },
                Recorded::Barrier => Command::Barrier,
            });
        }
        // Holding the list while submitting keeps fences and buffer marks in submission order.
        let mut in_flight = self.in_flight.lock().unwrap_or_else(PoisonError::into_inner);
        let fence = if timed && self.device.measures_gpu_time() {
            self.device.submit_timed(&hal_commands)?
        } else {
            self.device.submit(&hal_commands)?
        };
        let hal_count = hal_commands.len();
        drop(hal_commands);
        let mut buffers = Vec::new();
        let mut programs = Vec::new();
        for recorded in commands.list {
            match recorded {
                Recorded::Dispatch { program, buffers: bound, .. } => {
                    for b in bound {
                        b.buffer.mark_used(fence, b.writes);
                        buffers.push(b.buffer);
                    }
                    programs.push(program);
                }
                Recorded::Copy { src, dst, .. } => {
                    src.mark_used(fence, false);
                    dst.mark_used(fence, true);
                    buffers.extend([src, dst]);
                }
                Recorded::Barrier => {}
            }
        }
        in_flight.push_back(InFlight { fence, _buffers: buffers, _programs: programs });
        if span.is_on() {
            span.arg("device", token);
            span.arg("fence", fence);
            span.arg("commands", hal_count);
            let flow = crate::trace::flow_id(crate::trace::FlowKind::Submission, token, fence);
            span.flow(crate::trace::Flow::Out(flow));
        }
        Ok(fence)
    }

    fn measures_gpu_time(&self) -> bool {
        self.device.measures_gpu_time()
    }

    fn take_gpu_time(&self, fence: u64) -> Option<Duration> {
        self.device.take_gpu_time(fence)
    }

    fn completed(&self) -> u64 {
        let completed = self.device.completed();
        self.retire();
        completed
    }

    fn wait(&self, fence: u64, timeout: Duration) -> Result<bool> {
        let mut span = crate::trace::span("runtime", "wait for fence");
        span.arg("fence", fence);
        let done = self.device.wait(fence, timeout);
        self.retire();
        done
    }

    fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    fn compiles(&self) -> u64 {
        self.cache.compiles()
    }

    #[cfg(feature = "remote")]
    fn fleet(&self) -> &dyn crate::cache::FleetCache {
        &self.cache
    }

    #[cfg(feature = "remote")]
    fn fleet_recipes(&self) -> Option<crate::cache::remote::FleetRecipes> {
        self.cache.fleet_recipes()
    }

    fn cache_dir(&self) -> Option<PathBuf> {
        self.cache.gpu_dir()
    }

    fn cache_writable(&self) -> bool {
        self.cache.is_persistent()
    }

    fn compiles_in_flight(&self) -> usize {
        self.cache.in_flight()
    }

    fn rebuild_one(&self, kernel: &KernelSpec) -> Result<bool> {
        let (key, input, _) = self.key_and_input(kernel)?;
        if self.cache.contains_in_memory(&key) || self.cache.has_entry_on_disk(&key) {
            return Ok(false);
        }
        let source =
            super::rebuild::Noting::new(Source::<A> { device: &self.device, input: &input, spec: kernel });
        let handle = self.cache.get(&key, &source)?;
        self.wrap(kernel, handle)?;
        if source.compiled() {
            self.cache.note_rebuilt();
        }
        Ok(source.compiled())
    }
}

impl<A: Api> Drop for Core<A> {
    fn drop(&mut self) {
        // Objects must outlive the work that uses them: wait for it before releasing them.
        let last = self.in_flight.get_mut().unwrap_or_else(PoisonError::into_inner).back().map(|f| f.fence);
        if let Some(fence) = last {
            match self.device.wait(fence, DRAIN_ON_DROP) {
                Ok(true) => {}
                Ok(false) => tracing::warn!(
                    backend = A::NAME,
                    "work submitted to the device did not finish within {} s of closing it",
                    DRAIN_ON_DROP.as_secs()
                ),
                Err(err) => tracing::debug!(error = %err, "a submission failed before the device was closed"),
            }
        }
    }
}
