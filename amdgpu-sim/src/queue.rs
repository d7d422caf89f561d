//! Submission contexts, sequence numbers and the worker thread that plays the GPU.
//!
//! `submit` returns as soon as a job is queued, like the CS ioctl: the caller must wait for its
//! sequence number before reading results, exactly as on hardware, so a backend that forgets a
//! wait fails here too instead of passing by luck. One worker runs jobs in submission order
//! (one GPU, one queue); `wait` blocks on a condition variable until the job's outcome is
//! recorded or the deadline passes.
//!
//! A job that faults, hangs or hits something the simulator refuses makes its context guilty,
//! as the kernel's job-timeout handler does: QUERY_STATE2 then reports reset + guilty, waiting
//! on that job reports the failure, jobs of the context still queued behind it are canceled,
//! and later submissions on it are refused. Other contexts are untouched (a per-queue reset).

use std::collections::{BTreeMap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::buffers::Storage;
use crate::cp::{CommandProcessor, CpFailure};
use crate::errno::einval;
use crate::vm::{SubmissionMemory, VaMapping};
use sparkle_amdgpu_kmd::error::{AmdgpuError, Result};
use sparkle_amdgpu_kmd::kmd::{BoHandle, ContextId, ContextState, HwIp, SeqNo, WaitStatus};

/// One queued submission, with everything it needs captured at CS time.
pub struct Job {
    pub ctx: ContextId,
    pub ip: HwIp,
    pub ring: u32,
    /// Set by [`Scheduler::enqueue`].
    pub seq: u64,
    /// (GPU address, bytes) of each IB, in order.
    pub ibs: Vec<(u64, u32)>,
    /// The VA space as it was at CS time.
    pub mappings: Vec<VaMapping>,
    /// The BO list: each handle once, sorted, with its bytes.
    pub buffers: Vec<(BoHandle, Storage)>,
}

/// Why a submission did not complete.
#[derive(Debug, Clone)]
enum Failure {
    Failed {
        failure: CpFailure,
        elapsed: Duration,
    },
    /// Skipped because an earlier submission of the context failed.
    Canceled {
        cause: String,
    },
}

#[derive(Debug, Default)]
struct Ring {
    issued: u64,
    /// Every submission up to this one has an outcome.
    done_through: u64,
    failures: BTreeMap<u64, Failure>,
}

#[derive(Debug, Default)]
struct Context {
    /// The first failure of the context, once there is one.
    guilty: Option<String>,
    rings: HashMap<(HwIp, u32), Ring>,
}

#[derive(Debug)]
struct State {
    contexts: HashMap<u32, Context>,
    next_ctx: u32,
}

/// Contexts and fences, shared by the driver and its worker.
#[derive(Debug)]
pub struct Scheduler {
    state: Mutex<State>,
    progress: Condvar,
}

fn unknown_ctx(op: &str, ctx: ContextId) -> AmdgpuError {
    einval(format!("{op} on context {}", ctx.0), "no such context")
}

impl Default for Scheduler {
    fn default() -> Self {
        Self::new()
    }
}

impl Scheduler {
    pub fn new() -> Self {
        Self { state: Mutex::new(State { contexts: HashMap::new(), next_ctx: 1 }), progress: Condvar::new() }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn ctx_create(&self) -> ContextId {
        let mut state = self.lock();
        let id = state.next_ctx;
        state.next_ctx = state.next_ctx.wrapping_add(1).max(1);
        state.contexts.insert(id, Context::default());
        ContextId(id)
    }

    /// Frees a context; its queued jobs still run (as the kernel lets them finish).
    pub fn ctx_destroy(&self, ctx: ContextId) -> Result<()> {
        self.lock().contexts.remove(&ctx.0).map(|_| ()).ok_or_else(|| unknown_ctx("CTX free", ctx))
    }

    pub fn ctx_state(&self, ctx: ContextId) -> Result<ContextState> {
        let state = self.lock();
        let c = state.contexts.get(&ctx.0).ok_or_else(|| unknown_ctx("CTX query state 2", ctx))?;
        let guilty = c.guilty.is_some();
        Ok(ContextState { reset: guilty, guilty, vram_lost: false, reset_in_progress: false })
    }

    /// Assigns the job its sequence number and queues it (under the lock, so that queue order
    /// and sequence order agree).
    pub fn enqueue(&self, mut job: Job, worker: &Sender<Job>) -> Result<SeqNo> {
        let mut state = self.lock();
        let ctx = job.ctx;
        let c = state.contexts.get_mut(&ctx.0).ok_or_else(|| unknown_ctx("CS", ctx))?;
        if let Some(cause) = &c.guilty {
            return Err(AmdgpuError::DeviceLost(format!(
                "CS on simulated context {} refused (ECANCELED): the context is guilty of an earlier GPU \
                 failure ({cause}); create a new context",
                ctx.0
            )));
        }
        let ring = c.rings.entry((job.ip, job.ring)).or_default();
        let seq = ring.issued + 1;
        job.seq = seq;
        worker
            .send(job)
            .map_err(|_| AmdgpuError::DeviceLost("the simulated GPU's worker thread has stopped".into()))?;
        ring.issued = seq;
        Ok(SeqNo(seq))
    }

    /// WAIT_CS: the job's outcome, or `Busy` once `deadline` has passed.
    pub fn wait(
        &self,
        ctx: ContextId,
        ip: HwIp,
        ring: u32,
        seq: SeqNo,
        deadline: Instant,
    ) -> Result<WaitStatus> {
        let mut state = self.lock();
        loop {
            let c = state.contexts.get(&ctx.0).ok_or_else(|| unknown_ctx("WAIT_CS", ctx))?;
            let r = c.rings.get(&(ip, ring));
            let issued = r.map_or(0, |r| r.issued);
            if seq.0 > issued {
                return Err(einval(
                    format!("WAIT_CS for sequence {} on context {}", seq.0, ctx.0),
                    format!("only {issued} submissions were made on {ip:?} ring {ring}"),
                ));
            }
            if let Some(r) = r.filter(|r| seq.0 <= r.done_through) {
                return match r.failures.get(&seq.0) {
                    None => Ok(WaitStatus::Completed),
                    Some(failure) => Err(failure_error(ctx, seq, failure)),
                };
            }
            if seq.0 == 0 {
                return Ok(WaitStatus::Completed);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(WaitStatus::Busy);
            }
            state =
                self.progress.wait_timeout(state, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    /// Records a job's outcome and wakes waiters.
    fn finish(&self, ctx: ContextId, ip: HwIp, ring: u32, seq: u64, outcome: Option<Failure>) {
        let mut state = self.lock();
        if let Some(c) = state.contexts.get_mut(&ctx.0) {
            if let Some(Failure::Failed { failure, .. }) = &outcome {
                c.guilty.get_or_insert_with(|| failure.message().to_string());
            }
            if let Some(r) = c.rings.get_mut(&(ip, ring)) {
                r.done_through = r.done_through.max(seq);
                if let Some(f) = outcome {
                    r.failures.insert(seq, f);
                }
            }
        }
        self.progress.notify_all();
    }

    fn guilt(&self, ctx: ContextId) -> Option<String> {
        self.lock().contexts.get(&ctx.0).and_then(|c| c.guilty.clone())
    }
}

fn failure_error(ctx: ContextId, seq: SeqNo, failure: &Failure) -> AmdgpuError {
    let (c, s) = (ctx.0, seq.0);
    match failure {
        Failure::Failed { failure: CpFailure::Hang(message), elapsed } => AmdgpuError::Timeout {
            ms: elapsed.as_millis() as u64,
            detail: format!(
                " (submission {s} on simulated context {c}): {message}; the simulated GPU reset the \
                 context, which is now guilty"
            ),
        },
        Failure::Failed { failure, .. } => AmdgpuError::DeviceLost(format!(
            "submission {s} on simulated context {c} failed: {failure}; the simulated GPU reset the \
             context, which is now guilty"
        )),
        Failure::Canceled { cause } => AmdgpuError::DeviceLost(format!(
            "submission {s} on simulated context {c} was canceled (ECANCELED): an earlier submission \
             of the context failed ({cause})"
        )),
    }
}

/// What the worker needs besides its queue.
pub struct WorkerConfig {
    /// The generation whose packets and ISA the simulated GPU runs.
    pub gfx: pm4::Gfx,
    pub instruction_budget: u64,
    /// The device clock's origin.
    pub started: Instant,
    /// Wave instructions executed so far, by every submission.
    pub executed: Arc<AtomicU64>,
}

/// The GPU: runs jobs until the driver drops its sender.
pub fn run_worker(scheduler: Arc<Scheduler>, jobs: Receiver<Job>, config: WorkerConfig) {
    for job in jobs {
        let seq = job.seq;
        let outcome = match scheduler.guilt(job.ctx) {
            Some(cause) => Some(Failure::Canceled { cause }),
            None => {
                let started = Instant::now();
                execute(&job, &config)
                    .err()
                    .map(|failure| Failure::Failed { failure, elapsed: started.elapsed() })
            }
        };
        if let Some(Failure::Failed { failure, .. }) = &outcome {
            tracing::warn!(ctx = job.ctx.0, seq, "simulated GPU: {failure}");
        }
        scheduler.finish(job.ctx, job.ip, job.ring, seq, outcome);
    }
    tracing::debug!("simulated GPU worker stopped");
}

fn execute(job: &Job, config: &WorkerConfig) -> std::result::Result<(), CpFailure> {
    let run = || {
        let mut memory = SubmissionMemory::new(&job.mappings, &job.buffers);
        let mut cp =
            CommandProcessor::new(&mut memory, config.gfx, config.instruction_budget, config.started);
        let outcome = job.ibs.iter().try_for_each(|&(va, bytes)| cp.run_ib(va, bytes));
        config.executed.fetch_add(cp.stats().wave_instructions, Ordering::Relaxed);
        tracing::trace!(stats = ?cp.stats(), "simulated submission finished");
        outcome
    };
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(result) => result,
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown panic");
            Err(CpFailure::Invalid(format!(
                "the simulator panicked ({what}); this is a bug in the simulator"
            )))
        }
    }
}
