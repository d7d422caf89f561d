//! Fence completion: learning which submissions finished without holding up the GL thread and
//! without slowing a lone round trip.
//!
//! Every submission ends with a `glFenceSync`. While the GL thread is idle it polls the fences
//! of its submissions itself (cheap on the context that made them) and signals the device's
//! [`Timeline`]. When a job is about to run while fences are still pending — the next batch of
//! a pipeline, say, or a driver-side copy that keeps the thread for a millisecond — it hands
//! them to the fence thread: a second context sharing the first one's objects (sync objects are
//! shared) on a thread of its own, which waits for them in the driver, so their completion is
//! seen while the job runs. A wait on that second context costs NVIDIA's driver far more than a
//! poll on the first (about 35 µs per fence against 13 µs, H100, 580.159.04), so the fence
//! thread settles everything queued to it with one wait on the newest fence (one context's
//! fences signal in submission order), and the GL thread signals none of its own fences before
//! those handed off have completed, so fences complete in order. Its waits also slow the GL
//! thread's own calls, so a job that only queues dispatches (a stream of small submissions)
//! keeps the fences with the GL thread, which polls them as the stream goes by; and an idle GL
//! thread hands fences still pending after its polling window to the fence thread rather than
//! checking on them now and then.
//!
//! Where the driver gives no second context (or `SPARKLE_GL_FENCES=poll`), the GL thread keeps
//! every fence and polls between jobs.
//!
//! Timer queries are not shared between contexts: the GL thread reads a timed submission's
//! result, asked by the fence thread before it signals the fence, so whoever sees the fence
//! complete finds its GPU time.
//!
//! Exit: the fence thread makes GL calls, so the exit handler stops it as it stops the GL thread
//! (see `thread.rs`): it lets the call in progress return — waits are sliced and short — and the
//! thread parks for good instead of making another.

use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use glow::HasContext;

use super::context::{CurrentSharingContext, SharingContext};
use super::gpu_trace::{self, Stamps};
use super::GlError;
use crate::hal::Timeline;

/// Longest single wait of the fence thread in the driver; bounds how long the exit handler
/// waits for it.
const WAIT_SLICE: Duration = Duration::from_millis(5);

/// A submission to watch: its fence value, its sync object (`None`: it failed while being
/// recorded, its error is already on the timeline) and its timer query, if timed.
pub(crate) struct Watch {
    pub fence: u64,
    pub sync: Option<glow::NativeFence>,
    pub query: Option<glow::NativeQuery>,
    /// GPU timestamps of the traced submissions this fence covers (`gpu_trace.rs`).
    pub stamps: Vec<Stamps>,
}

// SAFETY: a sync object is an opaque handle of the share group, valid in every context of it;
// the fence thread's context is in the GL thread's group, and each watched sync object is used
// by one thread at a time (the GL thread hands it over and never touches it again).
unsafe impl Send for Watch {}

/// What the fence thread needs from the GL thread that started it.
pub(crate) struct Hooks {
    pub timeline: Arc<Timeline>,
    /// Called once per watched submission after its fence was signalled (or failed).
    pub settled: Box<dyn Fn() + Send>,
    /// Reads (and deletes) a finished timer query on the GL thread; returns once it did.
    pub read_timer: Box<dyn Fn(u64, glow::NativeQuery) + Send>,
    /// Hands the GPU stamps of a fence seen at the given time back to the GL thread.
    pub stamps: Box<dyn Fn(Vec<Stamps>, u64) + Send>,
    /// The device's token, in the trace's events.
    pub device: u64,
}

/// The GL thread's fences: those it polls itself between jobs and, where there is a fence
/// thread, the hand-off to it.
pub(crate) struct Fences {
    /// Submissions the GL thread polls, oldest first.
    polled: VecDeque<Watch>,
    /// The fence thread, in submission order.
    thread: Option<Sender<Watch>>,
    /// The newest fence handed to the fence thread: the GL thread signals none of its own
    /// before the timeline has passed it, so fences complete in order.
    handed_off: u64,
    /// A fence thread still making its context current (which takes a driver tens of
    /// milliseconds that opening the device does not wait for): it gets fences once it said it
    /// is ready, and until then the GL thread keeps them.
    starting: Option<(Sender<Watch>, Ready)>,
}

/// Where a fence thread says whether it made its context current.
type Ready = Receiver<Result<(), GlError>>;

impl Fences {
    /// The GL thread polls every fence itself.
    pub fn polled_only() -> Self {
        Fences { polled: VecDeque::new(), thread: None, handed_off: 0, starting: None }
    }

    fn with_thread_starting(sender: Sender<Watch>, ready: Ready) -> Self {
        Fences { starting: Some((sender, ready)), ..Fences::polled_only() }
    }

    /// Takes on the fence thread `started` (just started, holding no fences), keeping the
    /// fences this thread polls.
    pub fn adopt(&mut self, started: Fences) {
        self.thread = started.thread;
        self.starting = started.starting;
    }

    /// Takes the fence thread into use once it is ready; drops it if it could not start.
    fn settle_start(&mut self) {
        let Some((_, ready)) = &self.starting else { return };
        match ready.try_recv() {
            Err(mpsc::TryRecvError::Empty) => {}
            Ok(Ok(())) => {
                self.thread = self.starting.take().map(|(sender, _)| sender);
                tracing::debug!("fences are waited for on a thread with a second context");
            }
            Ok(Err(err)) => {
                tracing::info!(error = %err, "no second GL context for waiting on fences; the GL thread polls them");
                self.starting = None;
            }
            Err(mpsc::TryRecvError::Disconnected) => self.starting = None,
        }
    }

    pub fn watch(&mut self, watch: Watch) {
        self.polled.push_back(watch);
    }

    /// A job is about to run on the GL thread: fences still pending go to the fence thread,
    /// which sees them complete while the job runs (a pipeline's next submission, a long
    /// driver-side copy). Without a fence thread they wait for the GL thread.
    pub fn hand_off(&mut self) {
        self.settle_start();
        let Some(sender) = &self.thread else { return };
        while let Some(watch) = self.polled.pop_front() {
            let fence = watch.fence;
            if let Err(mpsc::SendError(watch)) = sender.send(watch) {
                // The fence thread stopped (process exit): the GL thread keeps polling.
                self.polled.push_front(watch);
                self.thread = None;
                return;
            }
            self.handed_off = fence;
        }
    }

    /// Whether there is a fence thread to hand fences to (one still starting is not yet).
    pub fn has_thread(&mut self) -> bool {
        self.settle_start();
        self.thread.is_some()
    }

    /// The oldest fence the GL thread polls, if any.
    pub fn oldest_polled(&self) -> Option<u64> {
        self.polled.front().map(|watch| watch.fence)
    }

    /// Whether the GL thread has fences of its own to poll.
    pub fn polls_pending(&self) -> bool {
        !self.polled.is_empty()
    }

    /// The oldest polled fence, once every fence handed off before it completed (`completed`
    /// is the timeline's).
    pub fn next_to_poll(&self, completed: u64) -> Option<&Watch> {
        (completed >= self.handed_off).then(|| self.polled.front()).flatten()
    }

    pub fn pop_polled(&mut self) -> Option<Watch> {
        self.polled.pop_front()
    }
}

/// Stops the fence thread at process exit.
#[derive(Default)]
pub(crate) struct FenceThreadControl {
    calls: Mutex<Calls>,
    changed: Condvar,
}

#[derive(Default)]
struct Calls {
    in_call: bool,
    stopped: bool,
}

impl FenceThreadControl {
    fn lock(&self) -> MutexGuard<'_, Calls> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks a GL call starting; `false` once stopped (the caller must not make it).
    fn begin(&self) -> bool {
        let mut calls = self.lock();
        if calls.stopped {
            return false;
        }
        calls.in_call = true;
        true
    }

    fn end(&self) {
        self.lock().in_call = false;
        self.changed.notify_all();
    }

    /// No GL call starts any more; waits up to `timeout` for the one in progress.
    pub fn stop(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut calls = self.lock();
        calls.stopped = true;
        while calls.in_call {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            calls =
                self.changed.wait_timeout(calls, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    fn park_forever(&self) -> ! {
        let mut calls = self.lock();
        loop {
            calls = self.changed.wait(calls).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// Starts the fence thread on `context`; `Err` if the context cannot be made current there (the
/// caller polls instead).
pub(crate) fn start_thread(
    context: SharingContext,
    hooks: Hooks,
) -> Result<(Fences, Arc<FenceThreadControl>), GlError> {
    let control = Arc::new(FenceThreadControl::default());
    let (watches, received) = mpsc::channel();
    let (ready_tx, ready_rx) = mpsc::sync_channel(1);
    let thread_control = control.clone();
    std::thread::Builder::new()
        .name("sparkle-gl-fences".into())
        .spawn(move || {
            let context = match context.make_current() {
                Ok(context) => {
                    // The receiver only disappears if `start_thread` already returned.
                    let _ = ready_tx.send(Ok(()));
                    context
                }
                Err(err) => {
                    let _ = ready_tx.send(Err(err));
                    return;
                }
            };
            serve(&context, &thread_control, &hooks, &received);
        })
        .map_err(|err| GlError::NoContext(format!("could not start the GL fence thread: {err}")))?;
    // Not waited for: the GL thread keeps its fences until the new thread says it is ready.
    Ok((Fences::with_thread_starting(watches, ready_rx), control))
}

fn serve(
    context: &CurrentSharingContext,
    control: &FenceThreadControl,
    hooks: &Hooks,
    received: &Receiver<Watch>,
) {
    // Ends when the GL thread's sender goes, which it never does before process exit.
    while let Ok(first) = received.recv() {
        // Everything queued meanwhile is settled together: fences of one context signal in
        // submission order, so once the newest has, the older ones have too, and one wait on
        // this context (the costly part) covers them all.
        let mut batch = vec![first];
        batch.extend(received.try_iter());
        let newest = batch.iter().rposition(|watch| watch.sync.is_some());
        let newest_done = match newest {
            Some(at) => batch[at]
                .sync
                .take()
                .map(|sync| wait_and_delete(&context.gl, control, sync, hooks.timeline.idle_window())),
            None => None,
        };
        for (at, watch) in batch.into_iter().enumerate() {
            let outcome = if Some(at) == newest {
                newest_done.clone().unwrap_or(Ok(()))
            } else {
                match (watch.sync, &newest_done) {
                    // Older than a fence that signalled: complete; only its object is left.
                    (Some(sync), Some(Ok(()))) => delete(&context.gl, control, sync),
                    (Some(sync), _) => {
                        wait_and_delete(&context.gl, control, sync, hooks.timeline.idle_window())
                    }
                    // Failed while being recorded: its error is on the timeline already.
                    (None, _) => Ok(()),
                }
            };
            settle(hooks, watch.fence, watch.query, watch.stamps, outcome);
        }
    }
}

fn settle(
    hooks: &Hooks,
    fence: u64,
    query: Option<glow::NativeQuery>,
    stamps: Vec<Stamps>,
    outcome: Result<(), GlError>,
) {
    if !stamps.is_empty() {
        // Before the fence signals: whoever sees it complete finds its GPU slices on their way.
        (hooks.stamps)(stamps, gpu_trace::seen(hooks.device, fence));
    }
    match outcome {
        Ok(()) => {
            if let Some(query) = query {
                (hooks.read_timer)(fence, query);
            }
        }
        Err(error) => hooks.timeline.fail(fence, error.into()),
    }
    hooks.timeline.signal(fence);
    (hooks.settled)();
}

fn delete(gl: &glow::Context, control: &FenceThreadControl, sync: glow::NativeFence) -> Result<(), GlError> {
    if !control.begin() {
        control.park_forever();
    }
    // SAFETY: this thread's context is current and shares the sync object, which the GL thread
    // handed over and never touches again; it is deleted once and forgotten.
    unsafe { gl.delete_sync(sync) };
    control.end();
    Ok(())
}

/// Waits, slice by slice, until `sync` signals, then deletes it.
fn wait_and_delete(
    gl: &glow::Context,
    control: &FenceThreadControl,
    sync: glow::NativeFence,
    spin: Duration,
) -> Result<(), GlError> {
    let slice = WAIT_SLICE.as_nanos() as i32;
    // Short work completes within the polling window; waits in the driver wake up late.
    let mut status = glow::TIMEOUT_EXPIRED;
    crate::hal::spin::poll_within(spin, || {
        if !control.begin() {
            return true;
        }
        // SAFETY: this thread's context is current and shares the sync object, which stays
        // alive until the delete below (nobody else deletes watched fences); 0: no waiting.
        status = unsafe { gl.client_wait_sync(sync, 0, 0) };
        control.end();
        status != glow::TIMEOUT_EXPIRED
    });
    let outcome = loop {
        if !control.begin() {
            control.park_forever();
        }
        if status == glow::TIMEOUT_EXPIRED {
            // SAFETY: as above.
            status = unsafe { gl.client_wait_sync(sync, 0, slice) };
        }
        control.end();
        match status {
            glow::ALREADY_SIGNALED | glow::CONDITION_SATISFIED => break Ok(()),
            glow::TIMEOUT_EXPIRED => continue,
            code => {
                break Err(GlError::Driver {
                    operation: "glClientWaitSync".into(),
                    code,
                    name: super::error::gl_error_name(code),
                })
            }
        }
    };
    if !control.begin() {
        control.park_forever();
    }
    // SAFETY: as above; the sync object is deleted once and forgotten.
    unsafe { gl.delete_sync(sync) };
    control.end();
    outcome
}
