//! [`SimDriver`]: the simulated amdgpu kernel driver. It implements [`KernelDriver`] with host
//! memory ([`buffers`](crate::buffers)), a GPU VA space that enforces mapping permissions
//! ([`vm`](crate::vm)), a PM4 command processor ([`cp`](crate::cp)) and the RDNA3 interpreter
//! ([`isa`](crate::isa)), run on a worker thread that plays the GPU ([`queue`](crate::queue)).
//! The backend drives it exactly as it drives a render node.
//!
//! ```no_run
//! use std::sync::Arc;
//! use sparkle_amdgpu_kmd::kmd::KernelDriver;
//! use sparkle_amdgpu_sim::{SimDriver, SimOptions};
//!
//! let kmd: Arc<dyn KernelDriver> = SimDriver::new(SimOptions::default());
//! assert!(kmd.describe().contains("simulated"));
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use crate::buffers::{BufferTable, Heaps, Storage};
use crate::errno::einval;
use crate::identity::{self, SimGpu};
use crate::isa::DEFAULT_BUDGET;
use crate::queue::{run_worker, Job, Scheduler, WorkerConfig};
use crate::vm::VaSpace;
use sparkle_amdgpu_kmd::error::Result;
use sparkle_amdgpu_kmd::kmd::{
    BoHandle, BufferDesc, ContextId, ContextState, CpuMapping, DriverVersion, HwIp, KernelCode, KernelDriver,
    SeqNo, Submission, Timeout, VaFlags, WaitStatus,
};
use sparkle_amdgpu_kmd::uapi;

/// How the simulated device behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimOptions {
    /// Wave instructions one dispatch may execute before it counts as hung (the submission then
    /// fails with a timeout and its context is reset).
    pub instruction_budget: u64,
    /// Size of the simulated VRAM heap (host memory, allocated per buffer).
    pub vram_bytes: u64,
    /// Size of the simulated GTT heap.
    pub gtt_bytes: u64,
    /// The GPU it says it is, and whose ISA it runs.
    pub gpu: SimGpu,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            instruction_budget: DEFAULT_BUDGET,
            vram_bytes: 2 << 30,
            gtt_bytes: 2 << 30,
            gpu: SimGpu::default(),
        }
    }
}

/// One GEM_VA mapping of the simulated device file, as [`SimDriver::mappings`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappedRange {
    /// The mapped buffer.
    pub bo: BoHandle,
    /// First GPU address.
    pub start: u64,
    /// Bytes mapped.
    pub size: u64,
    /// Its page permissions.
    pub flags: VaFlags,
}

/// Buffers and mappings of the simulated device file.
struct Memory {
    buffers: BufferTable,
    va: VaSpace,
    /// GEM handles created and not yet closed (leak checks).
    live_buffers: usize,
}

/// The simulated amdgpu kernel driver; see the module documentation.
pub struct SimDriver {
    memory: Mutex<Memory>,
    scheduler: Arc<Scheduler>,
    /// Dropping it stops the worker once its queue is empty.
    worker: Sender<Job>,
    options: SimOptions,
    started: Instant,
    executed: Arc<AtomicU64>,
}

impl std::fmt::Debug for SimDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimDriver").field("options", &self.options).finish_non_exhaustive()
    }
}

impl SimDriver {
    /// Opens a simulated device; its worker thread (the GPU) starts at once.
    pub fn new(options: SimOptions) -> Arc<Self> {
        let scheduler = Arc::new(Scheduler::new());
        let (sender, receiver) = channel();
        let started = Instant::now();
        let executed = Arc::new(AtomicU64::new(0));
        let config = WorkerConfig {
            gfx: options.gpu.gfx(),
            instruction_budget: options.instruction_budget,
            started,
            executed: executed.clone(),
        };
        let for_worker = scheduler.clone();
        // Not joined on drop: a hung kernel would block the drop for its whole budget. The
        // thread ends by itself once the sender is gone and the queue is drained.
        let spawned = std::thread::Builder::new()
            .name("sparkle-sim-gpu".into())
            .spawn(move || run_worker(for_worker, receiver, config));
        if let Err(err) = &spawned {
            // The channel's receiver went with the closure: every CS reports the lost worker.
            tracing::error!(error = %err, "the simulated GPU's worker thread could not be started");
        }
        Arc::new(Self {
            memory: Mutex::new(Memory {
                buffers: BufferTable::new(Heaps {
                    vram_bytes: options.vram_bytes,
                    gtt_bytes: options.gtt_bytes,
                }),
                va: VaSpace::new(identity::VA_START, identity::VA_END),
                live_buffers: 0,
            }),
            scheduler,
            worker: sender,
            options,
            started,
            executed,
        })
    }

    /// Wave instructions the simulated GPU has executed so far (for throughput figures).
    pub fn wave_instructions(&self) -> u64 {
        self.executed.load(Ordering::Relaxed)
    }

    /// GEM handles open on the simulated device file right now: a backend that releases what
    /// it allocates keeps this flat (leak checks in long runs).
    pub fn live_buffers(&self) -> usize {
        self.memory().live_buffers
    }

    /// The GPU virtual address mappings in place right now, by address: what a submission made
    /// now would see (tests check permissions and find buffers with it).
    pub fn mappings(&self) -> Vec<MappedRange> {
        self.memory()
            .va
            .snapshot()
            .into_iter()
            .map(|m| MappedRange { bo: m.bo, start: m.start, size: m.size, flags: m.flags })
            .collect()
    }

    /// How many GPU virtual address mappings are in place right now.
    pub fn live_mappings(&self) -> usize {
        self.memory().va.snapshot().len()
    }

    /// The options the device was created with.
    pub fn options(&self) -> SimOptions {
        self.options
    }

    fn memory(&self) -> MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Checks a CS against the device file and captures what its job needs.
    fn prepare(&self, submission: &Submission<'_>) -> Result<Job> {
        let what = format!("CS on simulated context {}", submission.ctx.0);
        let (first, rest) = submission
            .ibs
            .split_first()
            .ok_or_else(|| einval(&what, "a submission needs at least one IB"))?;
        if let Some(other) = rest.iter().find(|ib| (ib.ip, ib.ring) != (first.ip, first.ring)) {
            return Err(einval(
                &what,
                format!(
                    "IBs for {:?} ring {} and {:?} ring {} in one submission",
                    first.ip, first.ring, other.ip, other.ring
                ),
            ));
        }
        let memory = self.memory();
        let mut handles = submission.buffers.to_vec();
        handles.sort_unstable();
        handles.dedup();
        let mut buffers: Vec<(BoHandle, Storage)> = Vec::with_capacity(handles.len());
        for bo in handles {
            let buffer = memory.buffers.get(bo, &what).map_err(|_| {
                crate::errno::enoent(&what, format!("buffer {} of the BO list does not exist", bo.0))
            })?;
            buffers.push((bo, buffer.storage.clone()));
        }
        for (i, ib) in submission.ibs.iter().enumerate() {
            let ib_what = format!("{what}: IB {i} at {:#x} ({} bytes)", ib.va, ib.size_bytes);
            if ib.ring != 0 {
                return Err(einval(
                    ib_what,
                    format!("ring {} does not exist (the simulated device has ring 0)", ib.ring),
                ));
            }
            if ib.flags != 0 {
                return Err(einval(ib_what, format!("IB flags {:#x} are not modelled", ib.flags)));
            }
            if ib.size_bytes == 0 || ib.size_bytes % 4 != 0 || ib.va % 4 != 0 {
                return Err(einval(ib_what, "an IB is a non-empty run of dwords at a dword-aligned address"));
            }
            let mapping =
                memory.va.find(ib.va).ok_or_else(|| einval(&ib_what, "no buffer is mapped there"))?;
            if ib.va + u64::from(ib.size_bytes) > mapping.start + mapping.size {
                return Err(einval(
                    &ib_what,
                    format!("the IB runs past the end of buffer {}'s mapping", mapping.bo.0),
                ));
            }
            if buffers.binary_search_by_key(&mapping.bo, |(bo, _)| *bo).is_err() {
                return Err(einval(
                    &ib_what,
                    format!("the IB's buffer {} is not in the BO list", mapping.bo.0),
                ));
            }
        }
        Ok(Job {
            ctx: submission.ctx,
            ip: first.ip,
            ring: first.ring,
            seq: 0,
            ibs: submission.ibs.iter().map(|ib| (ib.va, ib.size_bytes)).collect(),
            mappings: memory.va.snapshot(),
            buffers,
        })
    }
}

/// CLOCK_MONOTONIC now, in nanoseconds (what WAIT_CS deadlines are measured against).
fn monotonic_now_ns() -> u64 {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC) {
        Ok(ts) => (ts.tv_sec() as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec() as u64),
        // CLOCK_MONOTONIC cannot fail on Linux; a deadline then counts from zero.
        Err(_) => 0,
    }
}

fn deadline_of(timeout: Timeout) -> Instant {
    let now = Instant::now();
    let wait = match timeout {
        Timeout::Relative(d) => d,
        Timeout::AbsoluteMonotonicNs(ns) => {
            std::time::Duration::from_nanos(ns.saturating_sub(monotonic_now_ns()))
        }
    };
    // An "infinite" timeout (u64::MAX ns) overflows Instant: a year is forever enough.
    now.checked_add(wait).unwrap_or_else(|| now + std::time::Duration::from_secs(365 * 24 * 3600))
}

impl KernelDriver for SimDriver {
    fn check_kernel_code(&self, code: &KernelCode<'_>) -> std::result::Result<(), String> {
        crate::isa::check_code(self.options.gpu.gfx(), code.image, code.entry, code.ranges, code.wave64)
            .map_err(|refusal| refusal.to_string())
    }

    fn driver_version(&self) -> DriverVersion {
        identity::driver_version()
    }

    fn describe(&self) -> String {
        identity::describe(self.options.gpu)
    }

    fn device_info(&self) -> Result<uapi::drm_amdgpu_info_device> {
        Ok(identity::device_info(self.options.gpu))
    }

    fn hw_ip_info(&self, ip: HwIp) -> Result<uapi::drm_amdgpu_info_hw_ip> {
        Ok(identity::hw_ip_info(self.options.gpu, ip))
    }

    fn memory_info(&self) -> Result<uapi::drm_amdgpu_memory_info> {
        let memory = self.memory();
        let heaps = memory.buffers.heaps();
        let (vram_used, gtt_used) = memory.buffers.used();
        Ok(identity::memory_info((heaps.vram_bytes, vram_used), (heaps.gtt_bytes, gtt_used)))
    }

    fn gem_create(&self, desc: &BufferDesc) -> Result<BoHandle> {
        let mut memory = self.memory();
        let bo = memory.buffers.create(desc)?;
        memory.live_buffers += 1;
        Ok(bo)
    }

    fn gem_close(&self, bo: BoHandle) -> Result<()> {
        let mut memory = self.memory();
        memory.buffers.close(bo)?;
        memory.live_buffers = memory.live_buffers.saturating_sub(1);
        let dropped = memory.va.unmap_all(bo);
        if dropped > 0 {
            tracing::debug!(bo = bo.0, dropped, "GEM_CLOSE removed the buffer's remaining VA mappings");
        }
        Ok(())
    }

    fn map_cpu(&self, bo: BoHandle, size: u64) -> Result<Box<dyn CpuMapping>> {
        self.memory().buffers.map_cpu(bo, size)
    }

    fn va_map(&self, bo: BoHandle, va: u64, size: u64, flags: VaFlags) -> Result<()> {
        let mut memory = self.memory();
        let what = format!("GEM_VA map of buffer {} at {va:#x}", bo.0);
        let buffer = memory.buffers.get(bo, &what)?;
        let (storage, bo_size) = (buffer.storage.clone(), buffer.size);
        memory.va.map(bo, storage, bo_size, va, size, flags)
    }

    fn va_unmap(&self, bo: BoHandle, va: u64, size: u64) -> Result<()> {
        let mut memory = self.memory();
        memory.buffers.get(bo, &format!("GEM_VA unmap of buffer {} at {va:#x}", bo.0))?;
        memory.va.unmap(bo, va, size)
    }

    fn ctx_create(&self) -> Result<ContextId> {
        Ok(self.scheduler.ctx_create())
    }

    fn ctx_destroy(&self, ctx: ContextId) -> Result<()> {
        self.scheduler.ctx_destroy(ctx)
    }

    fn ctx_state(&self, ctx: ContextId) -> Result<ContextState> {
        self.scheduler.ctx_state(ctx)
    }

    fn submit(&self, submission: &Submission<'_>) -> Result<SeqNo> {
        let job = self.prepare(submission)?;
        self.scheduler.enqueue(job, &self.worker)
    }

    fn wait(&self, ctx: ContextId, ip: HwIp, ring: u32, seq: SeqNo, timeout: Timeout) -> Result<WaitStatus> {
        self.scheduler.wait(ctx, ip, ring, seq, deadline_of(timeout))
    }
}

impl Drop for SimDriver {
    fn drop(&mut self) {
        tracing::debug!(uptime = ?self.started.elapsed(), "closing the simulated amdgpu device");
    }
}
