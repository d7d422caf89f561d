//! The GL thread. It creates the context, keeps it current for its whole life and runs every GL
//! call, in submission order. There is one per EGL device per process, shared by every runtime
//! opened on that device, and it lives as long as the process: NVIDIA's driver crashed when
//! several contexts were made, used and destroyed on different threads of one process, and Mesa
//! aborted when a context was still being torn down while the process exited.
//!
//! Why a thread of its own rather than a lock that makes the context current: glutin's current
//! context is neither `Send` nor `Sync`, making a context current costs a driver round trip on
//! every call, and objects dropped on any user thread (buffers, programs evicted by the cache)
//! need somewhere to delete their GL names without blocking the dropper. A thread owning the
//! context gives all three: calls are closures sent to it, deletes are posted without waiting.
//!
//! Fences of submitted work signal a [`Timeline`], polled by the GL thread while it is idle and
//! waited for by a fence thread with a context sharing this one's while a job runs
//! (`fences.rs`): a waiter never needs the GL thread — it may be busy inside a long dispatch
//! (llvmpipe runs kernels inside the GL call) — and the GL thread never blocks on a fence.
//! The one job that polls a fence is a read queued right behind the work that writes its buffer
//! (`GlState::settle_briefly`): a synchronous round trip then needs no trip through the caller's
//! thread between the fence and the read, and the job gives up after the polling window, or as
//! soon as another job is queued, leaving longer work to the timeline.
//!
//! Exit safety: NVIDIA's driver crashed (SIGSEGV in `glDeleteBuffers`) when the GL thread was
//! still deleting objects, queued by drops at the end of `main`, while the main thread ran the
//! process's exit handlers. So no GL call may be queued or running when the process exits: when
//! the last object of a device is dropped the dropping thread waits until the queue is drained,
//! and an `atexit` handler — registered after the driver was loaded, so it runs before the
//! driver's own teardown — drains every GL thread and stops it from making any further GL call.
//!
//! A job that panics (a bug, or a driver string GL cannot take) is caught: its caller gets an
//! error and the thread goes on serving later jobs.

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, Once, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use super::clock_hold::{self, ClockHold};
use super::context::EglContext;
use super::device_info::{self, Probe};
use super::discovery;
use super::fences::{self, FenceThreadControl, Fences, Hooks, Watch};
use super::gpu_trace::{Settled, Stamps};
use super::host_copies::{HostCopies, HostCopy};
use super::GlError;
use crate::hal::Timeline;

type Job = Box<dyn FnOnce(&mut GlState) + Send>;

/// A job in the queue.
struct Queued {
    job: Job,
    /// What the job is (its closure's type name), for the trace.
    label: &'static str,
    /// The job polls the GL thread's fences itself (a read that waits for the write before
    /// it): pending fences stay with the GL thread instead of going to the fence thread.
    keeps_fences: bool,
    /// The job is a submission (`submit::execute`): the one before it may leave its fence to it.
    submission: bool,
    /// The job only issues work the driver queues at once (dispatches, barriers: no copy, which
    /// this driver may run on the CPU, no timer): pending fences stay with the GL thread, which
    /// polls them as a stream of such jobs goes by. Handing them to the fence thread instead
    /// would have its waits in the driver contend with this thread's calls on every job.
    quick: bool,
}

/// How long the thread sleeps between checks of a fence that is still pending after the polling
/// window (where it waits for fences itself); a queued job wakes it at once.
const FENCE_RECHECK: Duration = Duration::from_micros(100);

/// How long the exit handler waits for a running GL call to return.
const EXIT_DRAIN: Duration = Duration::from_secs(2);

/// How long dropping the last object waits for the queue to drain.
const LAST_DROP_DRAIN: Duration = Duration::from_secs(30);

/// The process's GL threads with the index of the EGL device each runs on (`None`: the default
/// display) and the pinned index it was asked for.
static THREADS: Mutex<Vec<Registered>> = Mutex::new(Vec::new());

struct Registered {
    asked: Option<usize>,
    device_index: Option<usize>,
    thread: GlThread,
    probe: Probe,
}

thread_local! {
    static ON_GL_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// What lives on the GL thread: the context and the objects that must not leave it.
pub(crate) struct GlState {
    pub context: EglContext,
    /// Where fences of submitted work go to be waited for.
    pub fences: Fences,
    /// Starts the fence thread the first time fences would be handed to it (`None` once
    /// started, or where the GL thread polls them all): opening the device and a program's
    /// first results do not wait for its context, and a driver busy making that context
    /// current does not slow them.
    fence_starter: Option<FenceStarter>,
    /// Submissions handed to `fences` and not settled yet (shared with the fence thread).
    unsettled: Arc<AtomicUsize>,
    /// Jobs waiting behind the one running (shared with the queue).
    queued: Arc<AtomicUsize>,
    /// The oldest polled fence the thread already polled for a window without waiting.
    spun_for: Option<u64>,
    /// Whether the job at the head of the queue is a submission (shared with the queue).
    next_is_submission: Arc<AtomicBool>,
    /// Submissions that ran without a fence of their own, newest last: the next fence covers
    /// them (one context's work completes in order). See `submit::execute`.
    pub(crate) unfenced: Unfenced,
    /// Fences made so far (each covers one or more submissions).
    pub(crate) fences_made: u64,
    pub timeline: Arc<Timeline>,
    /// GPU time of timed submissions that completed, by fence, until the runtime takes it.
    pub gpu_times: Arc<Mutex<HashMap<u64, Duration>>>,
    /// The device's token (the thread's), in the trace's events.
    pub(crate) token: u64,
    /// The GPU's clock on its trace track.
    pub(crate) gpu_clock: crate::trace::GpuClock,
    /// GPU stamps of traced submissions that left their fence to a later one.
    pub(crate) unfenced_stamps: Vec<Stamps>,
    /// GPU stamps of fences the fence thread saw, for this thread to read.
    pub(crate) settled_stamps: Arc<Settled>,
}

/// Starts a GL thread's fence thread on a context sharing the thread's own.
type FenceStarter = Box<dyn FnOnce(&EglContext) -> Fences + Send>;

impl GlState {
    /// Fences are pending and would go to a fence thread: starts it if it is not yet (it takes
    /// them once its context is current; until then this thread polls them).
    fn fence_thread_wanted(&mut self) {
        if self.fences.polls_pending() {
            self.start_fence_thread();
        }
    }

    /// Starts the fence thread, unless it was started or this thread polls every fence.
    fn start_fence_thread(&mut self) {
        if let Some(start) = self.fence_starter.take() {
            let _span = crate::trace::span("gl", "start the fence thread (a second context)");
            let started = start(&self.context);
            self.fences.adopt(started);
        }
    }
}

/// Successful submissions run since the last fence.
#[derive(Default, Clone, Copy)]
pub(crate) struct Unfenced {
    /// The newest of them.
    pub newest: Option<u64>,
    /// How many.
    pub count: usize,
}

impl GlState {
    pub fn gl(&self) -> &glow::Context {
        &self.context.gl
    }

    /// Whether the next job queued is a submission, which will fence (or pass the fence on)
    /// for the one running now. A snapshot: only this thread takes jobs off the queue, so a
    /// `true` stays true until this thread takes that job.
    pub fn next_is_submission(&self) -> bool {
        self.next_is_submission.load(Ordering::Acquire)
    }

    /// Hands a submission's fence on to be waited for, in submission order.
    pub fn watch(&mut self, watch: Watch) {
        self.unsettled.fetch_add(1, Ordering::AcqRel);
        self.fences.watch(watch);
    }

    /// A polled submission settled (its fence signalled or failed).
    pub fn settled(&self) {
        self.unsettled.fetch_sub(1, Ordering::AcqRel);
    }

    /// From inside a job: polls this thread's fences until submission `fence` has settled
    /// (`true`), for at most the wait window (a caller waits for this job) and only while no
    /// other job waits (`false`: still running; the caller waits on the timeline instead).
    pub fn settle_briefly(&mut self, fence: u64) -> bool {
        crate::hal::spin::poll_within(self.timeline.wait_window(), || {
            super::submit::poll(self, Duration::ZERO);
            self.timeline.reached(fence) || self.queued.load(Ordering::Acquire) > 0
        });
        self.timeline.reached(fence)
    }

    /// Drains `glGetError`, returning the first error seen.
    pub fn take_error(&self) -> Option<u32> {
        // SAFETY: a `GlState` lives on the GL thread, where its context is current.
        unsafe { super::error::take_gl_error(&self.context.gl) }
    }

    /// `Err` naming `operation` if the driver reported an error since the last check.
    pub fn check(&self, operation: &str) -> Result<(), GlError> {
        self.check_with(|| operation.to_owned())
    }

    /// [`check`](Self::check) with the operation's name made only when there is an error (for
    /// calls made on every dispatch).
    pub fn check_with(&self, operation: impl FnOnce() -> String) -> Result<(), GlError> {
        match self.take_error() {
            None => Ok(()),
            Some(code) => {
                Err(GlError::Driver { operation: operation(), code, name: super::error::gl_error_name(code) })
            }
        }
    }
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Queued>,
    /// A job or a fence poll is making GL calls right now.
    busy: bool,
    /// The process is exiting: no GL call may start any more.
    stopped: bool,
    /// The GL thread sleeps on `Shared::work`: a new job must wake it. While it runs or polls it
    /// sees new jobs by itself, and a wake-up would only cost the poster a system call.
    sleeping: bool,
    /// Threads sleeping on `Shared::progress`; progress is announced only when there are some.
    watchers: usize,
}

struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when a job is queued or the thread is stopped.
    work: Condvar,
    /// Signalled whenever the thread finishes a job or a poll, or a fence settles.
    progress: Condvar,
    /// Submissions whose fences have not settled yet.
    unsettled: Arc<AtomicUsize>,
    /// Jobs queued (mirrors `Queue::jobs.len()`), for the idle thread's polling window.
    queued: Arc<AtomicUsize>,
    /// Whether `Queue::jobs.front()` is a submission (mirrors it; written under the lock).
    next_is_submission: Arc<AtomicBool>,
    /// The fence thread, once started (absent where the GL thread polls).
    fence_thread: OnceLock<Arc<FenceThreadControl>>,
    /// GL objects and devices alive on this thread's context.
    live: AtomicUsize,
    timeline: Arc<Timeline>,
    gpu_times: Arc<Mutex<HashMap<u64, Duration>>>,
    /// Identifies the context: objects made on another one are refused.
    token: u64,
    /// Host copies through mappings, which keep the idle thread polling (`host_copies.rs`).
    host_copies: HostCopies,
    /// GPU stamps the fence thread handed back (`gpu_trace.rs`).
    settled_stamps: Arc<Settled>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `job` on the locked `queue` and wakes the thread if it sleeps.
    fn push(&self, queue: &mut Queue, job: Queued) {
        if queue.jobs.is_empty() {
            self.next_is_submission.store(job.submission, Ordering::Release);
        }
        queue.jobs.push_back(job);
        self.queued.fetch_add(1, Ordering::Release);
        self.wake_worker(queue);
    }

    /// Takes the next job off the locked `queue`.
    fn pop(&self, queue: &mut Queue) -> Option<Queued> {
        let job = queue.jobs.pop_front()?;
        self.queued.fetch_sub(1, Ordering::Release);
        self.next_is_submission.store(queue.jobs.front().is_some_and(|j| j.submission), Ordering::Release);
        Some(job)
    }

    /// Wakes the GL thread if it sleeps; `queue` is the locked queue.
    fn wake_worker(&self, queue: &Queue) {
        if queue.sleeping {
            self.work.notify_one();
        }
    }

    /// Wakes the threads waiting for progress, if any; `queue` is the locked queue.
    fn announce_progress(&self, queue: &Queue) {
        if queue.watchers > 0 {
            self.progress.notify_all();
        }
    }

    /// Sleeps on `work` until woken or `timeout` passed (`None`: until woken).
    fn sleep<'a>(
        &self,
        mut queue: MutexGuard<'a, Queue>,
        timeout: Option<Duration>,
    ) -> MutexGuard<'a, Queue> {
        queue.sleeping = true;
        let mut queue = match timeout {
            Some(timeout) => self.work.wait_timeout(queue, timeout).unwrap_or_else(PoisonError::into_inner).0,
            None => self.work.wait(queue).unwrap_or_else(PoisonError::into_inner),
        };
        queue.sleeping = false;
        queue
    }

    /// Waits until no job is queued or running, no fence is pending, or `timeout` passed.
    fn drain(&self, timeout: Duration, include_fences: bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut queue = self.lock();
        loop {
            let idle = queue.jobs.is_empty()
                && !queue.busy
                && (!include_fences || self.unsettled.load(Ordering::Acquire) == 0);
            if idle || queue.stopped && !queue.busy {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            queue.watchers += 1;
            queue =
                self.progress.wait_timeout(queue, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
            queue.watchers -= 1;
        }
    }
}

/// Takes the clock hold `SPARKLE_HOLD_CLOCKS` asks for (`clock_hold.rs`), and records in the
/// probe what the device's clocks follow.
fn hold_clocks(context: &EglContext, mut probe: Probe) -> Result<(Probe, Option<ClockHold>), GlError> {
    if !clock_hold::asked()? {
        probe.clocks = clock_hold::describe_unheld(&probe.vendor, probe.is_cpu_renderer());
        return Ok((probe, None));
    }
    let hold = ClockHold::take(&clock_hold::Target {
        vendor: &probe.vendor,
        renderer: &probe.renderer,
        cpu_renderer: probe.is_cpu_renderer(),
        cuda_device: context.cuda_device(),
        device_uuid: context.device_uuid(),
    })?;
    probe.clocks = hold.describe();
    Ok((probe, Some(hold)))
}

/// The environment variable that picks who waits for fences: `thread` (the default) or `poll`.
pub const FENCES_ENV: &str = "SPARKLE_GL_FENCES";

/// Who waits for the fences of a GL thread's submissions (`fences.rs` says how they share the
/// work).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum FenceWaits {
    /// The GL thread while it is idle, the fence thread while a job runs (where the driver
    /// gives a second context).
    OwnThread,
    /// The GL thread alone, between jobs (drivers without a second context,
    /// `SPARKLE_GL_FENCES=poll`).
    Polled,
}

impl FenceWaits {
    /// What `SPARKLE_GL_FENCES` asks for, if it is set to something known.
    fn from_env() -> Option<Self> {
        let value = std::env::var(FENCES_ENV).ok()?;
        match value.trim() {
            "" => None,
            "thread" => Some(FenceWaits::OwnThread),
            "poll" => Some(FenceWaits::Polled),
            other => {
                tracing::warn!("{FENCES_ENV}={other:?} is neither `thread` nor `poll`; using the default");
                None
            }
        }
    }
}

/// The sending side of a GL thread. Clones are cheap.
#[derive(Clone)]
pub(crate) struct GlThread {
    shared: Arc<Shared>,
}

impl GlThread {
    /// The GL thread of the device `SPARKLE_EGL_DEVICE` names (or the preferred one), started on
    /// first use. Asking for a device by index and by preference gets the same thread when they
    /// resolve to the same device.
    pub fn shared() -> Result<(GlThread, Probe), GlError> {
        Self::shared_on(discovery::pinned_device_index()?)
    }

    /// The GL thread of EGL device `pinned` (its index in enumeration order; `None`: the
    /// preferred device), started on first use: one thread per device, so that one process
    /// can hold several devices (a placement over `gl:0` and `gl:1`).
    pub fn shared_on(pinned: Option<usize>) -> Result<(GlThread, Probe), GlError> {
        let mut threads = THREADS.lock().unwrap_or_else(PoisonError::into_inner);
        let found = match pinned {
            Some(index) => threads.iter().find(|r| r.device_index == Some(index) || r.asked == Some(index)),
            None => match threads.iter().find(|r| r.asked.is_none()) {
                Some(found) => Some(found),
                None => {
                    // Which device would the preference pick? Ask a running GL thread, so that
                    // EGL is only ever used from GL threads.
                    let preferred = threads
                        .first()
                        .and_then(|r| r.thread.call(|_| discovery::preferred_device_index()).ok().flatten());
                    preferred.and_then(|index| threads.iter().find(|r| r.device_index == Some(index)))
                }
            },
        };
        if let Some(found) = found {
            return Ok((found.thread.clone(), found.probe.clone()));
        }
        let (thread, probe, device_index) = Self::spawn(pinned, FenceWaits::OwnThread)?;
        threads.push(Registered {
            asked: pinned,
            device_index,
            thread: thread.clone(),
            probe: probe.clone(),
        });
        Ok((thread, probe))
    }

    /// Starts a thread, creates the context on it and probes the device.
    fn spawn(pinned: Option<usize>, waits: FenceWaits) -> Result<(GlThread, Probe, Option<usize>), GlError> {
        static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            work: Condvar::new(),
            progress: Condvar::new(),
            unsettled: Arc::default(),
            queued: Arc::default(),
            next_is_submission: Arc::default(),
            fence_thread: OnceLock::new(),
            live: AtomicUsize::new(0),
            timeline: Arc::new(Timeline::new()),
            gpu_times: Arc::default(),
            token: NEXT_TOKEN.fetch_add(1, Ordering::Relaxed),
            host_copies: HostCopies::default(),
            settled_stamps: Arc::default(),
        });
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name("sparkle-gl".into())
            .spawn(move || {
                ON_GL_THREAD.with(|on| on.set(true));
                let opening = crate::trace::phase("gl", "open the EGL display and context");
                let opened = discovery::open(pinned);
                drop(opening);
                let started = opened.and_then(|context| {
                    let _probing = crate::trace::phase("gl", "probe the device");
                    match device_info::probe(&context).and_then(|probe| hold_clocks(&context, probe)) {
                        Ok((probe, hold)) => Ok((context, probe, hold)),
                        Err(err) => {
                            context.close();
                            Err(err)
                        }
                    }
                });
                // Held for as long as this thread serves the device: for the process's life.
                let (context, probe, _clock_hold) = match started {
                    Ok(started) => started,
                    Err(err) => {
                        // The receiver only disappears if `spawn` already returned.
                        let _ = ready_tx.send(Err(err));
                        return;
                    }
                };
                // Polling for the end of work that runs on this machine's own cores would take
                // a core from it (`polling.rs`).
                let windows =
                    super::polling::windows_for(probe.is_cpu_renderer(), crate::hal::spin::host_cores());
                thread_shared.timeline.set_spin_windows(windows.idle, windows.wait);
                // The fence thread starts when fences would first go to it (`GlState::
                // fence_thread_wanted`); until then this thread polls them.
                let waits = FenceWaits::from_env().unwrap_or(waits);
                let fence_starter: Option<FenceStarter> = match waits {
                    FenceWaits::OwnThread => {
                        let shared = thread_shared.clone();
                        Some(Box::new(move |context: &EglContext| start_fence_thread(&shared, context)))
                    }
                    FenceWaits::Polled => None,
                };
                let track = crate::trace::GpuTrack::new(
                    format!("GPU {}: {} (GL timestamps)", thread_shared.token, probe.renderer),
                    false,
                );
                let _ = ready_tx.send(Ok((probe, context.device_index)));
                let state = GlState {
                    context,
                    fences: Fences::polled_only(),
                    fence_starter,
                    unsettled: thread_shared.unsettled.clone(),
                    queued: thread_shared.queued.clone(),
                    spun_for: None,
                    next_is_submission: thread_shared.next_is_submission.clone(),
                    unfenced: Unfenced::default(),
                    fences_made: 0,
                    timeline: thread_shared.timeline.clone(),
                    gpu_times: thread_shared.gpu_times.clone(),
                    token: thread_shared.token,
                    gpu_clock: crate::trace::GpuClock::new(track),
                    unfenced_stamps: Vec::new(),
                    settled_stamps: thread_shared.settled_stamps.clone(),
                };
                serve(&thread_shared, state);
            })
            .map_err(|err| GlError::NoContext(format!("could not start the GL thread: {err}")))?;
        let (probe, device_index) = ready_rx.recv().map_err(|_| GlError::ThreadGone)??;
        register_exit_handler();
        // A trace being finished first takes the GPU slices of fences already seen.
        let flushed = Arc::downgrade(&shared);
        crate::trace::on_flush(Arc::new(move || {
            if let Some(shared) = flushed.upgrade() {
                if !ON_GL_THREAD.with(|on| on.get()) {
                    // An error means the thread stopped (process exit): nothing to take.
                    let _ = GlThread { shared }.call(Settled::drain);
                }
            }
        }));
        Ok((GlThread { shared }, probe, device_index))
    }

    pub fn token(&self) -> u64 {
        self.shared.token
    }

    pub fn timeline(&self) -> &Arc<Timeline> {
        &self.shared.timeline
    }

    /// Marks a host copy through a mapping in flight until the guard drops: the thread keeps
    /// polling for the submission that usually follows (`host_copies.rs`).
    pub(crate) fn host_copy(&self) -> HostCopy<'_> {
        self.shared.host_copies.start()
    }

    /// Removes and returns the GPU time measured for the timed submission `fence`.
    pub fn take_gpu_time(&self, fence: u64) -> Option<Duration> {
        self.shared.gpu_times.lock().unwrap_or_else(PoisonError::into_inner).remove(&fence)
    }

    /// Queues `job` without waiting. A stopped thread (process exit) drops it unrun.
    pub fn post<F: FnOnce(&mut GlState) + Send + 'static>(&self, job: F) {
        self.post_queued(Queued {
            job: Box::new(job),
            label: std::any::type_name::<F>(),
            keeps_fences: false,
            submission: false,
            quick: false,
        });
    }

    fn post_queued(&self, job: Queued) {
        let mut queue = self.shared.lock();
        if queue.stopped {
            return;
        }
        self.shared.push(&mut queue, job);
    }

    /// Queues the submission `job` (it runs `submit::execute`) and returns the value `before`
    /// computed while the queue was locked, so that values such as fence numbers follow the
    /// queue order. `quick`: it holds only dispatches and barriers and is not timed.
    pub fn post_submission<T, F>(&self, before: impl FnOnce() -> T, job: F, quick: bool) -> Result<T, GlError>
    where
        T: Copy + Send + 'static,
        F: FnOnce(&mut GlState, T) + Send + 'static,
    {
        let mut queue = self.shared.lock();
        if queue.stopped {
            return Err(GlError::ThreadGone);
        }
        let value = before();
        let job = Queued {
            job: Box::new(move |state| job(state, value)),
            label: std::any::type_name::<F>(),
            keeps_fences: false,
            submission: true,
            quick,
        };
        self.shared.push(&mut queue, job);
        Ok(value)
    }

    /// Runs `job` on the GL thread and waits for its result. Never call from the GL thread.
    pub fn call<R: Send + 'static>(
        &self,
        job: impl FnOnce(&mut GlState) -> R + Send + 'static,
    ) -> Result<R, GlError> {
        self.call_queued(job, false)
    }

    /// [`call`](Self::call) for a job that polls fences itself ([`GlState::settle_briefly`]).
    pub fn call_keeping_fences<R: Send + 'static>(
        &self,
        job: impl FnOnce(&mut GlState) -> R + Send + 'static,
    ) -> Result<R, GlError> {
        self.call_queued(job, true)
    }

    fn call_queued<R: Send + 'static, F: FnOnce(&mut GlState) -> R + Send + 'static>(
        &self,
        job: F,
        keeps_fences: bool,
    ) -> Result<R, GlError> {
        let label = std::any::type_name::<F>();
        let (reply, result) = mpsc::sync_channel(1);
        let job = Box::new(move |state: &mut GlState| {
            let outcome =
                catch_unwind(AssertUnwindSafe(|| job(state))).map_err(|panic| panic_message(&*panic));
            let _ = reply.send(outcome);
        });
        self.post_queued(Queued { job, label, keeps_fences, submission: false, quick: false });
        // Most jobs take microseconds, and the caller waits for this one: poll for the reply
        // before sleeping on it.
        let mut early = None;
        crate::hal::spin::poll_within(self.shared.timeline.wait_window(), || match result.try_recv() {
            Err(mpsc::TryRecvError::Empty) => false,
            reply => {
                early = Some(reply.map_err(|_| mpsc::RecvError));
                true
            }
        });
        match early.unwrap_or_else(|| result.recv()) {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(message)) => Err(GlError::JobPanicked(message)),
            Err(_) => Err(GlError::ThreadGone),
        }
    }

    /// Counts one more object living on this thread's context.
    pub fn acquire(&self) -> LiveGuard {
        self.shared.live.fetch_add(1, Ordering::AcqRel);
        LiveGuard { thread: self.clone() }
    }
}

/// Held by every GL object and device; when the last one goes, the dropping thread waits until
/// the GL thread has run everything queued, so nothing is left running when the process exits.
pub(crate) struct LiveGuard {
    thread: GlThread,
}

impl LiveGuard {
    pub fn thread(&self) -> &GlThread {
        &self.thread
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        let shared = &self.thread.shared;
        let last = shared.live.fetch_sub(1, Ordering::AcqRel) == 1;
        if last && !ON_GL_THREAD.with(|on| on.get()) && !shared.drain(LAST_DROP_DRAIN, true) {
            tracing::warn!(
                "the GL thread did not finish its queued work within {} s",
                LAST_DROP_DRAIN.as_secs()
            );
        }
    }
}

/// The GL thread's loop: run jobs in order; between them, poll fences of submitted work.
fn serve(shared: &Shared, mut state: GlState) {
    loop {
        // GPU slices of fences the fence thread saw (a flag check unless tracing).
        Settled::drain(&mut state);
        let job = {
            let mut queue = shared.lock();
            let mut polled = false;
            loop {
                if queue.stopped {
                    queue.busy = false;
                    let dropped = std::mem::take(&mut queue.jobs);
                    shared.announce_progress(&queue);
                    drop(queue);
                    drop(dropped);
                    // Park for good: returning would tear the context down during exit.
                    park_forever(shared, state);
                }
                if let Some(job) = shared.pop(&mut queue) {
                    queue.busy = true;
                    break Some(job);
                }
                if state.fences.polls_pending() || shared.settled_stamps.pending() {
                    queue.busy = true;
                    break None;
                }
                queue.busy = false;
                shared.announce_progress(&queue);
                if !polled {
                    // The next job often follows within microseconds (a read-back after a
                    // submission): look for it briefly before sleeping — longer, within the
                    // wait window, while the host copies through a mapping (`host_copies.rs`).
                    polled = true;
                    drop(queue);
                    let (idle, wait) = (shared.timeline.idle_window(), shared.timeline.wait_window());
                    let queued = || shared.queued.load(Ordering::Acquire) > 0;
                    let found = crate::hal::spin::poll_within(idle, queued);
                    if !found && wait > idle && shared.host_copies.active_within(idle) {
                        crate::hal::spin::poll_within(wait - idle, || {
                            queued() || !shared.host_copies.active_within(idle)
                        });
                    }
                    queue = shared.lock();
                    continue;
                }
                queue = shared.sleep(queue, None);
            }
        };
        match job {
            Some(Queued { job, label, keeps_fences, quick, .. }) => {
                if !keeps_fences && !quick {
                    state.fence_thread_wanted();
                    state.fences.hand_off();
                }
                let mut span = crate::trace::span("gl", "gl job");
                span.rename(|| job_name(label));
                if let Err(panic) = catch_unwind(AssertUnwindSafe(|| job(&mut state))) {
                    tracing::error!("a GL job panicked: {}; the GL thread goes on", panic_message(&*panic));
                }
            }
            None => {
                // Short work completes within the idle window, and a wait in the driver wakes
                // up late: poll (no waiting) first, once per oldest fence — for as long as the
                // wait window while a caller waits for a result, who then sees it at once.
                let oldest = state.fences.oldest_polled();
                if oldest != state.spun_for {
                    state.spun_for = oldest;
                    let (idle, wait) = (shared.timeline.idle_window(), shared.timeline.wait_window());
                    let started = Instant::now();
                    crate::hal::spin::poll_within(idle.max(wait), || {
                        super::submit::poll(&mut state, Duration::ZERO);
                        !state.fences.polls_pending()
                            || shared.queued.load(Ordering::Acquire) > 0
                            || (started.elapsed() >= idle && !shared.timeline.has_waiters())
                    });
                } else {
                    // Pending past the polling window: work for the fence thread.
                    state.fence_thread_wanted();
                    if state.fences.has_thread() {
                        // Longer work: the fence thread waits for it in the driver, while this
                        // thread sleeps until the next job.
                        state.fences.hand_off();
                    } else {
                        // Longer work: check again after a while, or as soon as a job arrives;
                        // the thread never blocks in the driver, so a job never waits for a
                        // fence.
                        super::submit::poll(&mut state, Duration::ZERO);
                        if state.fences.polls_pending() {
                            let queue = shared.lock();
                            if queue.jobs.is_empty() && !queue.stopped {
                                drop(shared.sleep(queue, Some(FENCE_RECHECK)));
                            }
                        }
                    }
                }
            }
        }
        let mut queue = shared.lock();
        queue.busy = false;
        shared.announce_progress(&queue);
    }
}

/// Starts the fence thread on a context sharing `context`'s objects; where that fails, the GL
/// thread polls its fences itself.
fn start_fence_thread(shared: &Arc<Shared>, context: &EglContext) -> Fences {
    let settled_shared = Arc::downgrade(shared);
    let timer_shared = Arc::downgrade(shared);
    let stamps_shared = Arc::downgrade(shared);
    let hooks = Hooks {
        timeline: shared.timeline.clone(),
        settled: Box::new(move || {
            if let Some(shared) = settled_shared.upgrade() {
                let queue = shared.lock();
                shared.unsettled.fetch_sub(1, Ordering::AcqRel);
                shared.announce_progress(&queue);
                // The GL thread's own fences may wait for this one.
                shared.wake_worker(&queue);
            }
        }),
        read_timer: Box::new(move |fence, query| {
            if let Some(shared) = timer_shared.upgrade() {
                let thread = GlThread { shared };
                // An error means the GL thread stopped (process exit): no time to report.
                let _ = thread.call(move |state| super::submit::read_timer(state, fence, query));
            }
        }),
        stamps: Box::new(move |stamps, seen_ns| {
            if let Some(shared) = stamps_shared.upgrade() {
                shared.settled_stamps.push(stamps, seen_ns);
                // The GL thread reads them; the `settled` hook that follows wakes it.
            }
        }),
        device: shared.token,
    };
    match context.sharing().and_then(|sharing| fences::start_thread(sharing, hooks)) {
        Ok((fences, control)) => {
            // Set once: this runs once per GL thread.
            let _ = shared.fence_thread.set(control);
            fences
        }
        Err(err) => {
            tracing::info!(error = %err, "no second GL context for waiting on fences; the GL thread polls them");
            Fences::polled_only()
        }
    }
}

/// A job's name in the trace: its closure's type name without the crate, the closure and the
/// generic parameters.
fn job_name(label: &str) -> String {
    // `<Type as Trait>::method::{{closure}}`: the type's method.
    let label = match label.strip_prefix('<').and_then(|rest| rest.split_once(" as ")) {
        Some((ty, rest)) => {
            rest.split_once(">::").map_or(label.to_owned(), |(_, method)| format!("{ty}::{method}"))
        }
        None => label.to_owned(),
    };
    let mut name = String::with_capacity(label.len());
    let mut depth = 0usize;
    for c in label.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            _ if depth == 0 => name.push(c),
            _ => {}
        }
    }
    let name = name.replace("::{{closure}}", "");
    let name = name.strip_prefix("sparkle::").unwrap_or(&name);
    format!("gl job {name}")
}

fn park_forever(shared: &Shared, state: GlState) -> ! {
    // The context stays alive and untouched; the driver tears it down with the process.
    std::mem::forget(state);
    let mut queue = shared.lock();
    loop {
        queue = shared.work.wait(queue).unwrap_or_else(PoisonError::into_inner);
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned())
}

fn register_exit_handler() {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // SAFETY: `stop_gl_threads` is an `extern "C" fn()` with no arguments, as atexit wants.
        let status = unsafe { libc::atexit(stop_gl_threads) };
        if status != 0 {
            tracing::warn!("could not register the GL exit handler; process exit may race the GL thread");
        }
    });
}

/// Runs during `exit()`: lets each GL thread finish the call it is in, then stops it for good.
extern "C" fn stop_gl_threads() {
    let Ok(threads) = THREADS.try_lock() else { return };
    for registered in threads.iter() {
        let shared = &registered.thread.shared;
        // Work already queued (deletes from drops at the end of `main`) is finished first.
        shared.drain(EXIT_DRAIN, false);
        if let Some(fence_thread) = shared.fence_thread.get() {
            fence_thread.stop(EXIT_DRAIN);
        }
        let mut queue = shared.lock();
        queue.stopped = true;
        shared.work.notify_all();
        drop(queue);
        shared.drain(EXIT_DRAIN, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hal::ReadTarget;

    #[test]
    fn jobs_are_named_by_their_closures_without_crate_closure_or_generics() {
        assert_eq!(
            job_name("sparkle::gl::memory::GlBuffer::create::{{closure}}"),
            "gl job gl::memory::GlBuffer::create"
        );
        assert_eq!(
            job_name("<sparkle::gl::memory::GlBuffer as core::ops::drop::Drop>::drop::{{closure}}"),
            "gl job gl::memory::GlBuffer::drop"
        );
        assert_eq!(
            job_name("sparkle::gl::device::GlDevice::post::{{closure}}<alloc::vec::Vec<u8>>"),
            "gl job gl::device::GlDevice::post"
        );
    }

    #[test]
    fn a_panicking_job_is_an_error_for_its_caller_and_the_thread_goes_on() {
        let (thread, _) = GlThread::shared().expect("a GL context (Mesa's llvmpipe is enough)");
        let err = thread.call(|_| -> u32 { panic!("a bug in a GL job") }).unwrap_err();
        assert!(
            matches!(&err, GlError::JobPanicked(message) if message.contains("a bug in a GL job")),
            "{err}"
        );
        thread.post(|_| panic!("a posted job panics too"));
        // SAFETY: the context is current on the GL thread, where the closure runs.
        let version =
            thread.call(|state| unsafe { glow::HasContext::get_parameter_string(state.gl(), glow::VERSION) });
        assert!(version.unwrap().contains('.'), "the thread still serves GL calls");
    }

    /// Submissions through `thread`: an empty one, a timed one, one the driver refuses (a copy
    /// past the end of a buffer) and another after it — completed in order, with GPU time for
    /// the timed one only, the refused one failing alone, and nothing left unsettled.
    fn fences_settle_in_order(thread: &GlThread) {
        use super::super::memory::GlBuffer;
        use super::super::submit::{self, Step};
        use crate::hal::BufferUsage;

        let buffer = GlBuffer::create(thread, 16, BufferUsage::Input, false).unwrap();
        let id = buffer.id;
        let timeline = thread.timeline().clone();
        let submit = |steps: fn(glow::NativeBuffer) -> Vec<Step>, timed: bool| {
            let timeline = timeline.clone();
            thread
                .post_submission(
                    move || timeline.issue(),
                    move |state, fence| {
                        submit::execute(state, fence, steps(id), submit::Closing::BeforeFence, timed, 0)
                    },
                    false,
                )
                .unwrap()
        };
        let empty = submit(|_| Vec::new(), false);
        let timed = submit(|_| vec![Step::Barrier], true);
        let refused =
            submit(|id| vec![Step::Copy { src: id, src_offset: 0, dst: id, dst_offset: 0, size: 64 }], false);
        let after = submit(|_| vec![Step::Barrier], false);
        // A read that settles its writer first never reads after a failed one.
        let mut out = [0u8; 16];
        assert!(!buffer.read_once_settled(refused, 0, &mut ReadTarget::new(&mut out)).unwrap());
        let wait = |fence| timeline.wait(fence, Duration::from_secs(30));
        assert!(wait(after).unwrap(), "the last submission completes");
        assert!(
            buffer.read_once_settled(after, 0, &mut ReadTarget::new(&mut out)).unwrap(),
            "read once its writer settled"
        );
        assert!(wait(empty).unwrap() && wait(timed).unwrap());
        let err = wait(refused).unwrap_err();
        assert!(err.to_string().contains("copy"), "{err}");
        assert!(thread.take_gpu_time(timed).is_some(), "the timed submission has a GPU time");
        assert!(thread.take_gpu_time(empty).is_none() && thread.take_gpu_time(after).is_none());
        assert!(thread.shared.drain(Duration::from_secs(30), true), "every fence settles");
        assert_eq!(thread.shared.unsettled.load(Ordering::Acquire), 0);
    }

    /// Queues one submission per element of `steps` while the GL thread is held, so that all
    /// are queued before the first runs; their fences. `quick`: whether the submission of those
    /// steps only queues dispatches (the others hand pending fences to the fence thread).
    fn queue_behind_a_held_thread(
        thread: &GlThread,
        steps: Vec<Vec<super::super::submit::Step>>,
        quick: impl Fn(&[super::super::submit::Step]) -> bool,
    ) -> Vec<u64> {
        use super::super::submit;

        let (release, hold) = mpsc::channel::<()>();
        thread.post(move |_| {
            let _ = hold.recv();
        });
        let fences = steps
            .into_iter()
            .map(|steps| {
                let timeline = thread.timeline().clone();
                let quick = quick(&steps);
                thread
                    .post_submission(
                        move || timeline.issue(),
                        move |state, fence| {
                            submit::execute(state, fence, steps, submit::Closing::BeforeFence, false, 0)
                        },
                        quick,
                    )
                    .unwrap()
            })
            .collect();
        release.send(()).unwrap();
        fences
    }

    /// Submissions queued back to back share fences, in bounded runs; a refused one in the
    /// middle of a run fails alone and the ones before it still complete.
    fn queued_submissions_share_fences(thread: &GlThread) {
        use super::super::memory::GlBuffer;
        use super::super::submit::Step;
        use crate::hal::BufferUsage;

        let buffer = GlBuffer::create(thread, 16, BufferUsage::Input, false).unwrap();
        let id = buffer.id;
        let timeline = thread.timeline().clone();
        let made_before = thread.call(|state| state.fences_made).unwrap();
        const COUNT: u64 = 100;
        const REFUSED: u64 = 60;
        let steps = (0..COUNT)
            .map(|i| {
                if i == REFUSED {
                    vec![Step::Copy { src: id, src_offset: 0, dst: id, dst_offset: 0, size: 64 }]
                } else {
                    vec![Step::Barrier]
                }
            })
            .collect();
        // Only the copy is not quick.
        let fences = queue_behind_a_held_thread(thread, steps, |steps| !super::super::submit::copies(steps));
        for (i, &fence) in fences.iter().enumerate() {
            let outcome = timeline.wait(fence, Duration::from_secs(30));
            if i as u64 == REFUSED {
                assert!(outcome.unwrap_err().to_string().contains("copy"), "submission {i}");
            } else {
                assert!(outcome.unwrap(), "submission {i} completes");
            }
        }
        assert!(thread.shared.drain(Duration::from_secs(30), true), "every fence settles");
        let made = thread.call(|state| state.fences_made).unwrap() - made_before;
        // Runs of at most 33 (32 that defer + the one that fences): 0–32 and 33–59 (fenced by
        // the refused one, which makes no fence of its own), then 61–93 and 94–99 (the last
        // one finds nothing queued behind it).
        assert_eq!(made, 4, "fences for {COUNT} queued submissions");
        assert_eq!(thread.call(|state| state.unfenced.count).unwrap(), 0, "nothing is left unfenced");
    }

    /// Submissions that copy get a fence each, even queued back to back: a pipeline's batch
    /// is waited for alone, so a fence shared with the batches behind it would hold its
    /// consumer until they all completed.
    #[test]
    fn queued_copies_are_fenced_one_by_one() {
        use super::super::memory::GlBuffer;
        use super::super::submit::Step;
        use crate::hal::BufferUsage;

        // A thread of its own: the fences other tests make on the shared one are not counted.
        let (thread, _, _) = GlThread::spawn(None, FenceWaits::OwnThread).expect("a GL context");
        let buffer = GlBuffer::create(&thread, 64, BufferUsage::InOut, false).unwrap();
        let id = buffer.id;
        let made_before = thread.call(|state| state.fences_made).unwrap();
        const COUNT: u64 = 5;
        let copy = || vec![Step::Copy { src: id, src_offset: 0, dst: id, dst_offset: 32, size: 16 }];
        let fences = queue_behind_a_held_thread(&thread, (0..COUNT).map(|_| copy()).collect(), |_| false);
        for (i, &fence) in fences.iter().enumerate() {
            assert!(thread.timeline().wait(fence, Duration::from_secs(30)).unwrap(), "copy {i} completes");
        }
        let made = thread.call(|state| state.fences_made).unwrap() - made_before;
        assert_eq!(made, COUNT, "one fence per queued submission that copies");
    }

    #[test]
    fn queued_submissions_share_fences_on_both_kinds_of_waits() {
        // Threads of their own: the shared one also runs other tests' submissions, whose fences
        // the count would take for these (5 instead of 4, once, in a release run under load).
        let (thread, _, _) =
            GlThread::spawn(None, FenceWaits::OwnThread).expect("a GL context (Mesa's llvmpipe is enough)");
        queued_submissions_share_fences(&thread);
        let (polled, _, _) = GlThread::spawn(None, FenceWaits::Polled).expect("a GL context");
        queued_submissions_share_fences(&polled);
    }

    #[test]
    fn a_fence_thread_signals_submissions_in_order() {
        // A thread of its own: on the shared one, another test's submission could be unsettled
        // when this one checks that nothing is.
        let (thread, _, _) =
            GlThread::spawn(None, FenceWaits::OwnThread).expect("a GL context (Mesa's llvmpipe is enough)");
        // The fence thread starts when first wanted (a long job with fences pending); here at
        // once, and once its context is current, fences go to it.
        thread.call(GlState::start_fence_thread).unwrap();
        assert!(thread.shared.fence_thread.get().is_some(), "this driver gives a second context");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !thread.call(|state| state.fences.has_thread()).unwrap() {
            assert!(Instant::now() < deadline, "the fence thread never became ready");
            std::thread::sleep(Duration::from_millis(1));
        }
        fences_settle_in_order(&thread);
    }

    #[test]
    fn without_a_fence_thread_the_gl_thread_polls_its_fences() {
        let (thread, _, _) = GlThread::spawn(None, FenceWaits::Polled).expect("a GL context");
        assert!(thread.shared.fence_thread.get().is_none());
        fences_settle_in_order(&thread);
    }
}
