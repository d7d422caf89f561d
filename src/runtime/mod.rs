//! The backend-neutral layer: [`Runtime`] opens the backend `SPARKLE_BACKEND` asks for and owns
//! what every backend would otherwise copy — checking kernels and dispatches, the program cache
//! and its statistics, warm-up, asynchronous submissions and the ordering of host access to
//! buffers behind them. Backends below it ([`crate::hal`]) do device work only.

mod activity;
mod commands;
mod device;
mod executor;
mod executor_stream;
mod objects;
mod placement;
mod placement_decision;
mod placement_history;
mod placement_inputs;
mod placement_model;
mod placement_samples;
mod rebuild;
mod registry;
mod spec_keys;

mod validate;

use std::mem::MaybeUninit;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub use commands::{Commands, Submission};
pub use device::PARALLEL_COMPILES_ENV;
pub use executor::{BatchError, Pipeline, Stage, DEFAULT_BATCH_TIMEOUT, DEFAULT_DEPTH};
pub use executor_stream::{Feeder, Results};
pub use objects::{Buffer, Program};
pub use placement::{Placed, Placement, PlacementStats, DEVICES_ENV};
pub use placement_decision::{Basis, Decision, Prediction, Reason};
pub use placement_history::{clear_histories, HISTORY_DIR, HISTORY_FORMAT_VERSION, MAX_HISTORIES};
pub use placement_inputs::{DeviceCosts, ModelDevice, SizeClass, Workload};
pub use placement_model::{PlacementModel, PlacementRules};
pub use placement_samples::{Moves, Pace, Samples, Spent, FIRST_SAMPLES};
pub use rebuild::{RebuildOutcome, RebuildProgress, RebuildReport, BACKGROUND_BUDGET, REBUILD_ENV};
pub use registry::{BackendChoice, BackendEntry, BACKENDS, BACKEND_ENV};
pub use validate::Arg;

use device::DynDevice;

use crate::cache::{CacheConfig, CacheStats};
use crate::hal::{BufferUsage, DeviceInfo, ReadTarget};
use crate::kernel::KernelSpec;
use crate::trace::OpenTimings;
use crate::{Error, ErrorKind, Result};

/// How long host reads and writes of a buffer wait for the GPU work that uses it, by default.
pub const DEFAULT_HOST_TIMEOUT: Duration = Duration::from_secs(60);

/// An opened device of one backend. Cheap to clone and to share between threads.
#[derive(Clone)]
pub struct Runtime {
    device: Arc<dyn DynDevice>,
    host_timeout: Duration,
    open_timings: Arc<OpenTimings>,
}

impl Runtime {
    /// Opens the backend `SPARKLE_BACKEND` asks for (default `auto`), with the cache configured
    /// from the environment.
    pub fn from_env() -> Result<Runtime> {
        let recorder = crate::trace::OpenRecorder::start();
        crate::trace::init_from_env();
        let configuration = crate::trace::phase("runtime", "read the configuration");
        let (choice, cache) = (BackendChoice::from_env()?, CacheConfig::from_env()?);
        drop(configuration);
        let runtime = Self::open(choice, &cache)?;
        Ok(runtime.with_timings(recorder.finish()))
    }

    /// Opens the backend `choice` names; `auto` takes the first of [`BACKENDS`] that opens and
    /// says why the others were passed over.
    pub fn open(choice: BackendChoice, cache: &CacheConfig) -> Result<Runtime> {
        let recorder = crate::trace::OpenRecorder::start();
        Ok(Self::open_choice(choice, cache)?.with_timings(recorder.finish()))
    }

    fn open_choice(choice: BackendChoice, cache: &CacheConfig) -> Result<Runtime> {
        crate::trace::init_from_env();
        // The fleet cache connects while the backend opens: its first requests then cost the
        // first compile nothing, or less.
        #[cfg(feature = "remote")]
        crate::cache::remote::preconnect(cache.remote.as_ref());
        match choice {
            BackendChoice::Only(name) => Self::open_backend(name, cache),
            BackendChoice::Auto => {
                let mut reasons = Vec::new();
                let _span = crate::trace::phase("runtime", "open runtime (auto)");
                for entry in BACKENDS.iter().filter(|entry| entry.in_auto) {
                    let mut span = crate::trace::phase("runtime", "open backend");
                    span.detail("backend", entry.name);
                    match entry.open(cache) {
                        Ok(device) => {
                            tracing::info!(
                                backend = entry.name,
                                "auto: picked the first backend that opened"
                            );
                            return Ok(Self::wrap(device));
                        }
                        Err(err) => {
                            span.arg_with("error", || err.to_string());
                            tracing::info!(backend = entry.name, error = %err, "auto: backend did not open");
                            reasons.push(format!("{}: {err}", entry.name));
                        }
                    }
                }
                Err(Error::new(
                    ErrorKind::Unavailable,
                    format!("no backend could be opened: {}", reasons.join("; ")),
                ))
            }
        }
    }

    /// Opens the backend called `name`.
    pub fn open_backend(name: &str, cache: &CacheConfig) -> Result<Runtime> {
        let recorder = crate::trace::OpenRecorder::start();
        crate::trace::init_from_env();
        #[cfg(feature = "remote")]
        crate::cache::remote::preconnect(cache.remote.as_ref());
        let mut span = crate::trace::phase("runtime", "open backend");
        span.detail("backend", name);
        let entry = registry::entry(name).ok_or_else(|| {
            BackendChoice::parse(Some(name)).err().unwrap_or_else(|| Error::new(ErrorKind::Unavailable, name))
        })?;
        let device = entry
            .open(cache)
            .map_err(|err| Error::new(err.kind(), format!("backend `{name}` cannot run here: {err}")))?;
        drop(span);
        Ok(Self::wrap(device).with_timings(recorder.finish()))
    }

    /// A runtime over a backend device built by the caller — a device opened with options
    /// `SPARKLE_BACKEND` cannot express, or over a fake or simulated driver in tests — with a
    /// program cache configured by `cache`.
    pub fn from_device<A: crate::hal::Api>(device: A::Device, cache: &CacheConfig) -> Runtime {
        crate::trace::init_from_env();
        Self::wrap(Arc::new(device::Core::<A>::new(device, cache)))
    }

    fn wrap(device: Arc<dyn DynDevice>) -> Runtime {
        rebuild::start_in_background(&device);
        Runtime { device, host_timeout: DEFAULT_HOST_TIMEOUT, open_timings: Arc::default() }
    }

    fn with_timings(mut self, timings: OpenTimings) -> Runtime {
        self.open_timings = Arc::new(timings);
        self
    }

    /// How long opening this runtime took and the steps it went through (finding the device,
    /// creating its context, probing it, opening the program cache…), as `sparkle info
    /// --timings` prints them. Empty for a runtime made by [`Runtime::from_device`].
    pub fn open_timings(&self) -> &OpenTimings {
        &self.open_timings
    }

    /// What the device is, what it takes, and its limits.
    pub fn info(&self) -> &DeviceInfo {
        self.device.info()
    }

    /// Writes a trace of everything Sparkle does in this process — every runtime's CPU work,
    /// GPU work and cache lookups — to `path` until the returned guard is dropped (see
    /// [`crate::trace`]). Never fails: a file that cannot be written is one warning.
    pub fn trace_to(path: impl AsRef<std::path::Path>) -> crate::trace::TraceGuard {
        crate::trace::start(path)
    }

    /// The backend's name (`gl`, …).
    pub fn backend(&self) -> &'static str {
        self.device.info().backend
    }

    /// Whether work on another device of this process came after this device's last work
    /// (`None` before any device of the process did work); a placement learns what moving
    /// between devices costs from it.
    pub(crate) fn another_device_worked_last(&self) -> Option<bool> {
        activity::last().map(|last| last != self.device.activity_id())
    }

    /// How long [`read_buffer`](Self::read_buffer) and [`write_buffer`](Self::write_buffer) wait
    /// for the GPU work that uses the buffer before they fail with a timeout.
    pub fn with_host_timeout(mut self, timeout: Duration) -> Self {
        self.host_timeout = timeout;
        self
    }

    /// A buffer of `size` bytes (at least 1, at most the device's
    /// [`max_storage_buffer_bytes`](crate::Limits::max_storage_buffer_bytes)), its contents undefined
    /// until written.
    pub fn create_buffer(&self, size: u64, usage: BufferUsage) -> Result<Buffer> {
        self.device.create_buffer(size, usage)
    }

    /// A buffer holding `data`.
    pub fn upload<T: bytemuck::Pod>(&self, data: &[T], usage: BufferUsage) -> Result<Buffer> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let mut span = crate::trace::span("transfer", "upload (new buffer)");
        span.arg("bytes", bytes.len());
        let buffer = self.create_buffer(bytes.len() as u64, usage)?;
        self.write_buffer(&buffer, 0, bytes)?;
        Ok(buffer)
    }

    /// Writes `data` at `offset`, after every unfinished submission that uses the buffer.
    pub fn write_buffer(&self, buffer: &Buffer, offset: u64, data: &[u8]) -> Result<()> {
        let mut span = crate::trace::span("transfer", "upload");
        span.arg("bytes", data.len());
        self.device.write_buffer(buffer, offset, data, self.host_timeout)
    }

    /// Reads `out.len()` bytes at `offset`, after the submissions that write the buffer (and
    /// only those) completed.
    pub fn read_buffer(&self, buffer: &Buffer, offset: u64, out: &mut [u8]) -> Result<()> {
        let mut span = crate::trace::span("transfer", "read-back");
        span.arg("bytes", out.len());
        self.device.read_buffer(buffer, offset, &mut ReadTarget::new(out), self.host_timeout)
    }

    /// Reads `count` `T`s at byte `offset` into a new `Vec`, as [`read_buffer`](Self::read_buffer)
    /// waits. The `Vec` is not zeroed first: where the backend copies straight into it (out of
    /// a [`BufferUsage::Staging`] buffer's mapping, or through the gl backend's staging ring
    /// from 2 MiB on a GPU), that saves a pass over host memory as long as the copy.
    pub fn read_vec<T: bytemuck::Pod>(&self, buffer: &Buffer, offset: u64, count: usize) -> Result<Vec<T>> {
        let bytes = count
            .checked_mul(std::mem::size_of::<T>())
            .filter(|&bytes| offset.checked_add(bytes as u64).is_some_and(|end| end <= buffer.size()));
        let Some(bytes) = bytes else {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "reading {count} elements of {} bytes at offset {offset} of a {}-byte buffer: past its end",
                    std::mem::size_of::<T>(),
                    buffer.size()
                ),
            ));
        };
        let mut span = crate::trace::span("transfer", "read-back");
        span.arg("bytes", bytes);
        let mut out: Vec<T> = Vec::with_capacity(count);
        let spare = out.spare_capacity_mut();
        // SAFETY: the spare capacity holds at least `count` `T`s, `bytes` bytes in all, which
        // `MaybeUninit<u8>` (alignment 1, any content) may view; the view borrows `out`.
        let spare =
            unsafe { std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast::<MaybeUninit<u8>>(), bytes) };
        let mut target = ReadTarget::uninit(spare);
        self.device.read_buffer(buffer, offset, &mut target, self.host_timeout)?;
        // The device checked that the target was filled before returning `Ok`.
        debug_assert!(target.is_filled());
        // SAFETY: all `bytes` bytes of the first `count` elements were written, and every byte
        // pattern is a valid `T` (`Pod`).
        unsafe { out.set_len(count) };
        Ok(out)
    }

    /// The whole buffer as `T`s (its size rounded down to whole `T`s), read as
    /// [`read_vec`](Self::read_vec) reads.
    pub fn download<T: bytemuck::Pod>(&self, buffer: &Buffer) -> Result<Vec<T>> {
        let count = buffer.size() as usize / std::mem::size_of::<T>().max(1);
        self.read_vec(buffer, 0, count)
    }

    /// Builds, in the foreground, the working set another driver of this device used (the GPU
    /// folder `from` names — its name or GPU id — else the most recently used one of the same
    /// device), from the recipes kept with its entries, in first-use order; `progress` is told
    /// after each program. A recipe that is refused or a program that fails is reported and
    /// the rebuild goes on. Fails when the cache is not on disk or there is nothing to rebuild.
    pub fn rebuild_working_set(
        &self,
        from: Option<&str>,
        progress: &mut dyn FnMut(&RebuildProgress<'_>),
    ) -> Result<RebuildReport> {
        rebuild::run_foreground(self.device.as_ref(), from, progress)
    }

    /// The program for `kernel`: from memory, the disk cache, or compiled — once, however many
    /// threads ask — and checked against what the compiled program declares.
    pub fn program(&self, kernel: &KernelSpec) -> Result<Program> {
        let mut span = crate::trace::span("runtime", "program");
        span.arg_with("kernel", || kernel.name.clone());
        self.device.program(kernel)
    }

    /// Brings all `kernels` into the cache at once, compiling in parallel where the device can.
    pub fn warm_up(&self, kernels: &[KernelSpec]) -> Result<Vec<Program>> {
        let mut span = crate::trace::span("runtime", "warm up");
        span.arg("kernels", kernels.len());
        self.device.warm_up(kernels)
    }

    /// An empty list of commands for one submission.
    pub fn commands(&self) -> Commands {
        Commands::new(self.device.clone())
    }

    /// Submits `commands`; returns at once. The work's writes are visible to buffer reads once
    /// it completed (reads wait for it by themselves).
    pub fn submit(&self, commands: Commands) -> Result<Submission> {
        self.submit_with(commands, false)
    }

    /// Whether this device can measure GPU time ([`submit_timed`](Self::submit_timed)).
    pub fn measures_gpu_time(&self) -> bool {
        self.device.measures_gpu_time()
    }

    /// [`submit`](Self::submit), also measuring the time the GPU spends on the commands, which
    /// [`Submission::gpu_time`] reports once the work completed. On a device that cannot
    /// measure (see [`measures_gpu_time`](Self::measures_gpu_time)) it submits untimed and
    /// `gpu_time` gives `None`.
    pub fn submit_timed(&self, commands: Commands) -> Result<Submission> {
        self.submit_with(commands, true)
    }

    fn submit_with(&self, commands: Commands, timed: bool) -> Result<Submission> {
        if !Arc::ptr_eq(&commands.device, &self.device) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "these commands were recorded for another runtime; record them with this runtime's commands()",
            ));
        }
        if commands.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "an empty submission: record a dispatch or a copy first",
            ));
        }
        let contents = commands.contents();
        let timed = timed && self.device.measures_gpu_time();
        let fence = self.device.submit(commands, timed)?;
        Ok(Submission { device: self.device.clone(), fence, contents, timed, gpu_time: OnceLock::new() })
    }

    /// Records and submits one dispatch; returns at once.
    pub fn dispatch(&self, program: &Program, args: &[Arg<'_>], groups: [u32; 3]) -> Result<Submission> {
        let mut commands = self.commands();
        commands.dispatch(program, args, groups)?;
        self.submit(commands)
    }

    /// The fence of the latest submission completed (with every earlier one); never blocks.
    /// Releases what finished submissions held (buffers and programs nobody else holds).
    pub fn poll(&self) -> u64 {
        self.device.completed()
    }

    /// The program cache's statistics for this device: hits per tier, compiles, the time they
    /// cost and saved, and what each tier holds.
    pub fn cache_stats(&self) -> CacheStats {
        self.device.cache_stats()
    }

    /// Programs this device's cache compiled so far: [`cache_stats`](Self::cache_stats)'s
    /// `compiles` alone, one counter read where the statistics visit every tier (1.8 µs on an
    /// H200 host right after a device run, 4.1 on the 2-core machine).
    pub(crate) fn compiles(&self) -> u64 {
        self.device.compiles()
    }

    /// The folder this device keeps its cache entries in, if it persists any.
    pub fn cache_dir(&self) -> Option<PathBuf> {
        self.device.cache_dir()
    }

    /// The fleet cache of this device (`SPARKLE_CACHE_REMOTE`): its status, prefetching its
    /// entries onto the local disk, publishing local ones.
    #[cfg(feature = "remote")]
    pub fn fleet(&self) -> &dyn crate::cache::FleetCache {
        self.device.fleet()
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("backend", &self.backend())
            .field("device", &self.info().name)
            .finish()
    }
}
