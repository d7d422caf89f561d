//! Several devices in one process, and each workload run where it is fastest.
//!
//! A [`Placement`] holds a set of opened [`Runtime`]s — by default every real device of this
//! build that opens here (never the simulator), or those `SPARKLE_DEVICES` names
//! (`gl,amdgpu-sim`) — and, per run, asks its [`PlacementModel`] which one to use. Each device
//! compiles through the one program cache under its own GPU id; a run's buffers are created on
//! the device that runs it (the job receives that device's runtime), and its result is read
//! back the same way whatever device ran it. The measured time to result of every run feeds
//! the model, whose state is kept per device set in the cache dir (`placement_history.rs`),
//! like tuning results. The decision rule itself is in `placement_model.rs`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use super::placement_decision::Decision;
use super::placement_history::{self, Miss};
use super::placement_inputs::{DeviceCosts, ModelDevice, Workload};
use super::placement_model::{PlacementModel, PlacementRules};
use super::placement_samples::{Moves, Spent};
use super::{registry, Runtime};
use crate::cache::CacheConfig;
use crate::suite::{self, Case};
use crate::{Error, ErrorKind, Result};

/// The environment variable that lists a placement's devices (`gl,amdgpu-sim`, `gl:0,gl:1`).
pub const DEVICES_ENV: &str = "SPARKLE_DEVICES";

struct PlacedDevice {
    label: String,
    runtime: Runtime,
    costs: DeviceCosts,
    /// Taken out of the placement after it failed (device lost, out of memory).
    lost: AtomicBool,
    /// The device's compile count when it was last asked (asking walks its program cache's
    /// memory shards, a few µs right after a run: it is asked only when a run may have
    /// compiled).
    compiles_seen: AtomicU64,
}

/// A run that took more than this times its device's mean for the workload may have compiled
/// its program: the device's compile count is asked. (A compile costs milliseconds on every
/// backend; runs within this factor are learned from without asking.)
const COMPILE_SUSPECT: f64 = 1.5;

/// The outcome of a placed run.
#[derive(Debug)]
pub struct Placed<T> {
    /// What the job returned.
    pub value: T,
    /// The index of the device that ran it.
    pub device: usize,
    /// That device's label.
    pub label: String,
    /// Measured seconds to result.
    pub seconds: f64,
    /// The decision that sent it there.
    pub decision: Decision,
}

/// What the placement's history did in this process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlacementStats {
    /// Whether a history was read at open.
    pub history_loaded: bool,
    /// History files found damaged (and ignored).
    pub damaged_histories: u64,
    /// (kernel, size class, device) histories held.
    pub histories: usize,
    /// Devices taken out of the placement after they failed.
    pub lost_devices: usize,
}

/// Several opened devices, each workload run on the one the learned model picks.
pub struct Placement {
    devices: Vec<PlacedDevice>,
    /// The devices as the model sees them (labels and costs), kept beside `devices` so that a
    /// decision does not build them again.
    model_devices: Vec<ModelDevice>,
    rules: PlacementRules,
    model: Mutex<PlacementModel>,
    dirty: AtomicBool,
    history: Option<PathBuf>,
    identities: Vec<String>,
    loaded: bool,
    damaged: AtomicU64,
}

impl Placement {
    /// Opens the devices `SPARKLE_DEVICES` lists (default: every real device), with the cache
    /// configured from the environment.
    pub fn from_env() -> Result<Placement> {
        let devices = std::env::var(DEVICES_ENV).ok();
        Self::open(devices.as_deref(), &CacheConfig::from_env()?)
    }

    /// Opens the devices `list` names (comma-separated backend names, each optionally with a
    /// device index: `gl:0,gl:1,amdgpu-sim`; `gl:N` is EGL device N in enumeration order, each
    /// labelled as written, and a plain `gl` the device `SPARKLE_EGL_DEVICE` names or the
    /// preferred one); `None` or empty opens every device of the backends `auto` would consider
    /// that opens here — every EGL device (`gl:0`, `gl:1`, … or `gl` where EGL lists one) —
    /// never the simulator. An unknown or unavailable device is an error naming it and listing
    /// the devices found.
    pub fn open(list: Option<&str>, cache: &CacheConfig) -> Result<Placement> {
        let list = list.map(str::trim).filter(|l| !l.is_empty());
        let mut devices = Vec::new();
        match list {
            None => {
                let mut reasons = Vec::new();
                for entry in registry::BACKENDS.iter().filter(|e| e.in_auto) {
                    if is_gl(entry.name) {
                        let egl = every_egl_device(cache);
                        if !egl.is_empty() {
                            devices.extend(egl);
                            continue;
                        }
                    }
                    match Runtime::open_backend(entry.name, cache) {
                        Ok(runtime) => devices.push((entry.name.to_owned(), runtime)),
                        Err(err) => {
                            tracing::info!(backend = entry.name, error = %err, "placement: device not available");
                            reasons.push(format!("{}: {err}", entry.name));
                        }
                    }
                }
                if devices.is_empty() {
                    return Err(Error::new(
                        ErrorKind::Unavailable,
                        format!("no device could be opened for the placement: {}", reasons.join("; ")),
                    ));
                }
            }
            Some(list) => {
                for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
                    let (name, index) = match item.split_once(':') {
                        Some((name, index)) => (name, Some(index)),
                        None => (item, None),
                    };
                    let known = registry::BACKENDS.iter().find(|e| e.name.eq_ignore_ascii_case(name.trim()));
                    let index = match index.map(|i| i.trim().parse::<usize>()) {
                        None => None,
                        Some(Ok(index)) => Some(index),
                        Some(Err(_)) => {
                            return Err(not_found(item, "the device index is not a number", cache))
                        }
                    };
                    let Some(entry) = known else {
                        return Err(not_found(item, "no such device in this build", cache));
                    };
                    // `gl:N` is EGL device N (each with a GL thread of its own); the other
                    // backends open one device each, `name:0`.
                    let label = match index {
                        Some(index) if is_gl(entry.name) => format!("{}:{index}", entry.name),
                        Some(0) | None => entry.name.to_owned(),
                        Some(_) => {
                            return Err(not_found(item, "this backend opens one device, index 0", cache))
                        }
                    };
                    if devices.iter().any(|(known, _)| *known == label) {
                        continue;
                    }
                    let runtime = match index {
                        Some(index) if is_gl(entry.name) => open_gl_device(index, cache),
                        _ => Runtime::open_backend(entry.name, cache),
                    }
                    .map_err(|err| not_found(item, &err.to_string(), cache))?;
                    devices.push((label, runtime));
                }
                if devices.is_empty() {
                    return Err(Error::new(
                        ErrorKind::InvalidArgument,
                        format!("{DEVICES_ENV}={list:?} names no device"),
                    ));
                }
            }
        }
        Self::from_runtimes(devices, cache)
    }

    /// A placement over runtimes the caller opened, each with its label (labels must differ).
    /// Its history is kept under `cache`'s folder unless the cache is off or read-only.
    pub fn from_runtimes(runtimes: Vec<(String, Runtime)>, cache: &CacheConfig) -> Result<Placement> {
        if runtimes.is_empty() {
            return Err(Error::new(ErrorKind::InvalidArgument, "a placement needs at least one device"));
        }
        let mut devices: Vec<PlacedDevice> = Vec::new();
        for (label, runtime) in runtimes {
            if devices.iter().any(|d| d.label == label) {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("two devices of the placement are labelled `{label}`"),
                ));
            }
            let costs = DeviceCosts::for_class(runtime.info().class);
            let compiles_seen = AtomicU64::new(runtime.compiles());
            devices.push(PlacedDevice { label, runtime, costs, lost: AtomicBool::new(false), compiles_seen });
        }
        let identities: Vec<String> =
            devices.iter().map(|d| format!("{} {:016x}", d.label, d.runtime.info().gpu_id.hash())).collect();
        let dir = cache.dir.as_deref();
        let path = dir.map(|dir| placement_history::path_for(dir, &identities));
        let mut placement = Placement {
            devices,
            model_devices: Vec::new(),
            rules: PlacementRules::default(),
            model: Mutex::new(PlacementModel::new()),
            dirty: AtomicBool::new(false),
            history: path.clone().filter(|_| !cache.read_only),
            identities,
            loaded: false,
            damaged: AtomicU64::new(0),
        };
        if let Some(path) = path {
            match placement_history::load(&path, &placement.identities) {
                Ok(model) => {
                    tracing::debug!(path = %path.display(), histories = model.len(), "placement history read");
                    for device in &mut placement.devices {
                        if let Some(costs) = model.measured_costs(&device.label) {
                            device.costs = costs;
                        }
                    }
                    placement.model = Mutex::new(model);
                    placement.loaded = true;
                }
                Err(Miss::Absent) => {}
                Err(Miss::Damaged(why)) => {
                    placement.damaged.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(path = %path.display(), "placement history ignored ({why}); learning afresh");
                }
            }
        }
        placement.refresh_model_devices();
        Ok(placement)
    }

    /// The same placement with other decision rules.
    pub fn with_rules(mut self, rules: PlacementRules) -> Placement {
        self.rules = rules;
        self
    }

    /// The decision rules in use.
    pub fn rules(&self) -> &PlacementRules {
        &self.rules
    }

    /// How many devices the placement holds.
    pub fn len(&self) -> usize {
        self.devices.len()
    }

    /// Whether it holds none (never true: opening needs one).
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }

    /// The label of device `index` (`gl`, `amdgpu-sim`).
    pub fn label(&self, index: usize) -> Option<&str> {
        self.devices.get(index).map(|d| d.label.as_str())
    }

    /// The runtime of device `index`.
    pub fn runtime(&self, index: usize) -> Option<&Runtime> {
        self.devices.get(index).map(|d| &d.runtime)
    }

    /// The heuristic costs device `index` is predicted with (measured by
    /// [`calibrate`](Self::calibrate), else the defaults of its class).
    pub fn costs(&self, index: usize) -> Option<DeviceCosts> {
        self.devices.get(index).map(|d| d.costs)
    }

    /// The labels of all devices, in order.
    pub fn labels(&self) -> Vec<&str> {
        self.devices.iter().map(|d| d.label.as_str()).collect()
    }

    /// Replaces the heuristic costs of the device labelled `device` (measured by the caller).
    pub fn set_costs(&mut self, device: &str, costs: DeviceCosts) -> Result<()> {
        let index = self.index_of(device)?;
        self.devices[index].costs = costs;
        self.refresh_model_devices();
        Ok(())
    }

    /// Measures each device's heuristic costs — the time to result of a tiny saxpy (launch and
    /// round trip), the byte rate of a large one and the operation rate of a small sgemm —
    /// once per device: costs measured before (kept in the history) are reused. Returns the
    /// labels of the devices measured now.
    pub fn calibrate(&mut self) -> Result<Vec<String>> {
        let mut measured = Vec::new();
        for index in 0..self.devices.len() {
            let label = self.devices[index].label.clone();
            if self.lock().measured_costs(&label).is_some() {
                continue;
            }
            let costs = measure_costs(&self.devices[index].runtime)?;
            tracing::info!(device = %label, ?costs, "placement: device costs measured");
            self.devices[index].costs = costs;
            self.lock().set_measured_costs(&label, costs);
            self.dirty.store(true, Ordering::Relaxed);
            measured.push(label);
        }
        self.refresh_model_devices();
        Ok(measured)
    }

    /// Runs every workload of `kernel` on the device labelled `device`, whatever was measured.
    pub fn pin(&self, kernel: &str, device: &str) -> Result<()> {
        self.index_of(device)?;
        self.lock().pin(kernel, device);
        Ok(())
    }

    /// Lets the model choose for `kernel` again.
    pub fn unpin(&self, kernel: &str) {
        self.lock().unpin(kernel);
    }

    /// Where the next run of `workload` would go and why — each device's prediction, samples
    /// and the choice — without counting it as a decision.
    pub fn explain(&self, workload: &Workload) -> Decision {
        let mut model = self.lock().clone();
        self.decide(&mut model, workload)
    }

    /// Chooses the device for a run of `workload` (counted as a decision).
    pub fn choose(&self, workload: &Workload) -> Decision {
        self.decide(&mut self.lock(), workload)
    }

    /// The decision among the devices still in the placement (all of them if every one was
    /// lost: the run then fails on its own), its device index mapped back to the placement's.
    fn decide(&self, model: &mut PlacementModel, workload: &Workload) -> Decision {
        if !self.devices.iter().any(|d| d.lost.load(Ordering::Relaxed)) {
            return model.choose(workload, &self.model_devices, &self.rules);
        }
        let mut active: Vec<usize> =
            (0..self.devices.len()).filter(|&i| !self.devices[i].lost.load(Ordering::Relaxed)).collect();
        if active.is_empty() {
            active = (0..self.devices.len()).collect();
        }
        let devices: Vec<ModelDevice> = active
            .iter()
            .map(|&i| ModelDevice { label: self.devices[i].label.clone(), costs: self.devices[i].costs })
            .collect();
        let mut decision = model.choose(workload, &devices, &self.rules);
        decision.device = active[decision.device];
        decision
    }

    /// Takes device `index` out after it failed with `err`; whether another device is left.
    fn take_out(&self, index: usize, err: &Error) -> bool {
        let device = &self.devices[index];
        if !device.lost.swap(true, Ordering::Relaxed) {
            tracing::warn!(device = %device.label, error = %err, "placement: device failed; taken out of the placement");
        }
        self.devices.iter().any(|d| !d.lost.load(Ordering::Relaxed))
    }

    /// Records that a run of `workload` on device `index` took `seconds` to result.
    pub fn record(&self, workload: &Workload, index: usize, seconds: f64) {
        let Some(device) = self.devices.get(index) else { return };
        self.lock().record(workload, &device.label, &device.costs, seconds, &self.rules);
        self.dirty.store(true, Ordering::Relaxed);
    }

    /// Runs `job` on the device chosen for `workload`, timing it to result, and learns from the
    /// time. The job gets that device's runtime: it creates its buffers there, dispatches and
    /// reads its result back. A failed job teaches nothing and its error is returned; nor does
    /// a job that compiled a program (it paid for the compile, not for the work). A device
    /// that fails with [`ErrorKind::DeviceLost`] or [`ErrorKind::OutOfMemory`] is taken out of
    /// the placement with one warning and the job is run once more on the device chosen among
    /// those left: a job must therefore keep its effects to the runtime it is given (buffers
    /// of one device cannot be used on another, so a job that creates its own is safe).
    pub fn run<T>(
        &self,
        workload: &Workload,
        mut job: impl FnMut(&Runtime) -> Result<T>,
    ) -> Result<Placed<T>> {
        self.run_timed(workload, |runtime| {
            let start = Instant::now();
            let value = job(runtime)?;
            Ok((value, start.elapsed().as_secs_f64()))
        })
    }

    /// [`run`](Self::run) for a job that measures itself: it returns its value and its
    /// seconds to result (for a job whose setup should not count, as
    /// [`run_case`](Self::run_case) leaves out fetching the program). The same failover, and the
    /// same rule: a run that compiled a program is not learned from.
    pub fn run_timed<T>(
        &self,
        workload: &Workload,
        mut job: impl FnMut(&Runtime) -> Result<(T, f64)>,
    ) -> Result<Placed<T>> {
        let mut retried = false;
        loop {
            let decision = self.choose(workload);
            let device = decision.device;
            let runtime = &self.devices[device].runtime;
            // Asked before the job marks its device: whether the run follows another device's
            // work, the placement's own or any other (the runtimes used directly, another
            // placement), which its time pays for.
            let moved = runtime.another_device_worked_last();
            match job(runtime) {
                Ok((value, seconds)) => {
                    self.record_measured(workload, device, seconds, moved);
                    let label = self.devices[device].label.clone();
                    return Ok(Placed { value, device, label, seconds, decision });
                }
                Err(err) if matches!(err.kind(), ErrorKind::DeviceLost | ErrorKind::OutOfMemory) => {
                    let others_left = self.take_out(device, &err);
                    if retried || !others_left {
                        return Err(err);
                    }
                    retried = true;
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// Records a run measured by the placement itself, unless it compiled a program on its
    /// device: such a run paid for the compile and the driver's work on first use, so it says
    /// nothing about the device. Whether it compiled is asked of the device only when it may
    /// have: while the workload's history on the device is not yet trusted, or when the run
    /// took more than [`COMPILE_SUSPECT`] times its mean. `moved`:
    /// whether another device's work came right before it.
    fn record_measured(&self, workload: &Workload, device: usize, seconds: f64, moved: Option<bool>) {
        let placed = &self.devices[device];
        let mut model = self.lock();
        let usual = model
            .samples(workload, &placed.label)
            .filter(|s| s.count >= u64::from(self.rules.trust_after.max(1)))
            .is_some_and(|s| seconds <= s.mean_s * COMPILE_SUSPECT);
        if !usual {
            let now = placed.runtime.compiles();
            let before = placed.compiles_seen.swap(now, Ordering::Relaxed);
            if now > before {
                tracing::debug!(
                    kernel = %workload.kernel,
                    device = %placed.label,
                    seconds,
                    "placement: a run that compiled its program is not learned from"
                );
                return;
            }
        }
        model.record_after(workload, &placed.label, &placed.costs, seconds, &self.rules, moved);
        self.dirty.store(true, Ordering::Relaxed);
    }

    /// Rebuilds the devices as the model sees them, after their costs changed.
    fn refresh_model_devices(&mut self) {
        self.model_devices =
            self.devices.iter().map(|d| ModelDevice { label: d.label.clone(), costs: d.costs }).collect();
    }

    /// The workload a suite problem is placed as: its kernel's name, its operations and bytes.
    /// The name is the first word of the problem's description (`sgemm 64x64x64`), which is its
    /// kernel's name: building the kernel's spec to ask it would generate its sources on every
    /// placed run (up to 20 µs in a stream).
    pub fn case_workload(case: &dyn Case) -> Workload {
        let work = case.work();
        let description = case.describe();
        match description.split_whitespace().next() {
            Some(kernel) => Workload::new(kernel, work.flops, work.bytes),
            None => Workload::for_kernel(&case.spec(), work.flops, work.bytes),
        }
    }

    /// Runs a suite problem on the device chosen for it (with that device's tuned or default
    /// variant) and returns its output. The time learned is from the upload to the buffers'
    /// release; fetching the program is not timed, and a run that had to compile it is not
    /// learned from: the driver's own work on first use would tell nothing about where the
    /// problem runs fastest.
    pub fn run_case(&self, case: &dyn Case) -> Result<Placed<Vec<f32>>> {
        let workload = Self::case_workload(case);
        self.run_timed(&workload, |runtime| {
            let program = runtime.program(&suite::chosen_spec(runtime, case))?;
            let start = Instant::now();
            let buffers = case.upload_for(runtime, &program)?;
            case.dispatch(runtime, &program, &buffers)?.wait(suite::DISPATCH_TIMEOUT)?;
            let value = case.download(runtime, &buffers)?;
            // Releasing the buffers is part of what the run costs the caller's stream.
            drop(buffers);
            Ok((value, start.elapsed().as_secs_f64()))
        })
    }

    /// Where the history is kept, if it is kept.
    pub fn history_path(&self) -> Option<&std::path::Path> {
        self.history.as_deref()
    }

    /// Writes the history now (it is also written when the placement is dropped). A cache that
    /// is off or read-only keeps nothing.
    pub fn save(&self) -> Result<()> {
        let Some(path) = &self.history else { return Ok(()) };
        let model = self.lock().clone();
        placement_history::save(path, &self.identities, &model).map_err(|err| {
            Error::new(ErrorKind::Io, format!("cannot write the placement history {}: {err}", path.display()))
        })?;
        self.dirty.store(false, Ordering::Relaxed);
        Ok(())
    }

    /// The time of the runs learned from, and of the explorations among them (the budget
    /// [`PlacementRules::explore_share`] keeps).
    pub fn spent(&self) -> Spent {
        self.lock().spent()
    }

    /// What moving the stream to each device costs its next run, as learned so far (see
    /// [`Moves`]), in the placement's order; `None` for a device nothing was learned of yet.
    pub fn moves(&self) -> Vec<(String, Option<Moves>)> {
        let model = self.lock();
        self.devices.iter().map(|d| (d.label.clone(), model.moves_of(&d.label))).collect()
    }

    /// What the history did in this process.
    pub fn stats(&self) -> PlacementStats {
        PlacementStats {
            history_loaded: self.loaded,
            damaged_histories: self.damaged.load(Ordering::Relaxed),
            histories: self.lock().len(),
            lost_devices: self.devices.iter().filter(|d| d.lost.load(Ordering::Relaxed)).count(),
        }
    }

    fn index_of(&self, device: &str) -> Result<usize> {
        self.devices.iter().position(|d| d.label == device).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "`{device}` is not a device of this placement; its devices are: {}",
                    self.labels().join(", ")
                ),
            )
        })
    }

    fn lock(&self) -> MutexGuard<'_, PlacementModel> {
        // The model is plain data: a panic while it was held leaves it usable.
        self.model.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for Placement {
    fn drop(&mut self) {
        if self.dirty.load(Ordering::Relaxed) {
            if let Err(err) = self.save() {
                tracing::warn!(error = %err, "placement history not kept");
            }
        }
    }
}

impl std::fmt::Debug for Placement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placement").field("devices", &self.labels()).finish()
    }
}

/// Whether `backend` is the gl backend, whose devices are told apart by EGL device index.
fn is_gl(backend: &str) -> bool {
    #[cfg(feature = "gl")]
    if backend == <crate::gl::Gl as crate::hal::Api>::NAME {
        return true;
    }
    let _ = backend;
    false
}

/// At most this many EGL devices are tried when a placement opens every device.
const MOST_EGL_DEVICES: usize = 16;

/// Every EGL device that opens, in enumeration order, labelled `gl:N` — or, where there is one,
/// labelled `gl`. Empty where EGL lists no device (the plain `gl` open then takes the default
/// display). A listed device that does not open is passed over with a message.
fn every_egl_device(cache: &CacheConfig) -> Vec<(String, Runtime)> {
    let mut opened = Vec::new();
    for index in 0..MOST_EGL_DEVICES {
        match open_gl_device(index, cache) {
            Ok(runtime) => opened.push((format!("gl:{index}"), runtime)),
            // Past the last listed device.
            Err(err) if err.to_string().contains("names no EGL device") => break,
            Err(err) => {
                tracing::info!(device = index, error = %err, "placement: EGL device not available");
            }
        }
    }
    if let [(label, _)] = opened.as_mut_slice() {
        "gl".clone_into(label);
    }
    opened
}

/// A runtime on EGL device `index` (enumeration order), whatever `SPARKLE_EGL_DEVICE` says.
#[cfg(feature = "gl")]
fn open_gl_device(index: usize, cache: &CacheConfig) -> Result<Runtime> {
    use crate::hal::Api;
    // As the registry opens gl: a read-only cache is not offered to the driver.
    let writable_dir = cache.dir.as_deref().filter(|_| !cache.read_only);
    let device = crate::gl::GlDevice::open_on(writable_dir, Some(index)).map_err(|err| {
        Error::new(err.kind(), format!("backend `{}` cannot run here: {err}", crate::gl::Gl::NAME))
    })?;
    Ok(Runtime::from_device::<crate::gl::Gl>(device, cache))
}

#[cfg(not(feature = "gl"))]
fn open_gl_device(_index: usize, _cache: &CacheConfig) -> Result<Runtime> {
    Err(Error::new(ErrorKind::Unavailable, "this build has no gl backend"))
}

/// The error for a device of `SPARKLE_DEVICES` that is unknown or does not open, listing the
/// devices that do open here.
fn not_found(item: &str, why: &str, cache: &CacheConfig) -> Error {
    let found: Vec<&str> = registry::BACKENDS
        .iter()
        .filter(|entry| Runtime::open_backend(entry.name, cache).is_ok())
        .map(|entry| entry.name)
        .collect();
    let found = if found.is_empty() { "none".to_owned() } else { found.join(", ") };
    Error::new(
        ErrorKind::Unavailable,
        format!("{DEVICES_ENV}: device `{item}` cannot be used ({why}); devices found here: {found}"),
    )
}

/// The fastest of three timed runs of `case` (after one untimed), in seconds to result.
fn best_of_three(runtime: &Runtime, case: &dyn Case) -> Result<f64> {
    let program = runtime.program(&suite::chosen_spec(runtime, case))?;
    let mut best = f64::INFINITY;
    for round in 0..4 {
        let start = Instant::now();
        let buffers = case.upload_for(runtime, &program)?;
        case.dispatch(runtime, &program, &buffers)?.wait(suite::DISPATCH_TIMEOUT)?;
        case.download(runtime, &buffers)?;
        if round > 0 {
            best = best.min(start.elapsed().as_secs_f64());
        }
    }
    Ok(best)
}

/// A device's heuristic costs from three suite problems (see [`Placement::calibrate`]).
fn measure_costs(runtime: &Runtime) -> Result<DeviceCosts> {
    let limits = &runtime.info().limits;
    let problem = |kernel: &str, sizes: &[usize]| {
        suite::case(kernel, sizes, 1, limits).map_err(|why| Error::new(ErrorKind::InvalidArgument, why))
    };
    let tiny = problem("saxpy", &[256])?;
    let large = problem("saxpy", &[1 << 18])?;
    let gemm = problem("sgemm", &[64])?;
    let launch = best_of_three(runtime, tiny.as_ref())?;
    let large_time = best_of_three(runtime, large.as_ref())?;
    let gemm_time = best_of_three(runtime, gemm.as_ref())?;
    // Rates from the time beyond the round trip; a problem no slower than the round trip
    // says the rate is at least what one microsecond more would give.
    let beyond = |time: f64| (time - launch).max(1e-6);
    let bytes = large.work().bytes - tiny.work().bytes;
    let gemm_work = gemm.work();
    let bytes_per_s = bytes / beyond(large_time);
    let flops_time = (beyond(gemm_time) - gemm_work.bytes / bytes_per_s).max(1e-6);
    Ok(DeviceCosts { launch_s: launch, flops_per_s: gemm_work.flops / flops_time, bytes_per_s })
}
