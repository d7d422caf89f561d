//! Fence completion: learning which submissions finished without holding up the GL thread.
//!
//! Every submission ends with a `glFenceSync`. Sync objects belong to the share group, so a
//! second context sharing the GL thread's, current on a thread of its own (the fence thread),
//! waits for them in the driver and signals the device's [`Timeline`]. The GL thread then never
//! waits on a fence: a submission queued while earlier ones run starts at once. When the GL
//! thread itself waited for fences in short slices between jobs, a job arriving during a slice
//! waited for the slice to end, and a pipelined stream — always a fence outstanding, a new
//! submission every batch — paid that on every batch.
//!
//! Where the driver gives no second context, the GL thread still polls between jobs
//! ([`Fences::Polled`]).
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
}

/// Where the GL thread hands its fences.
pub(crate) enum Fences {
    /// To the fence thread, in submission order.
    Thread(Sender<Watch>),
    /// Kept for the GL thread to poll between jobs.
    Polled(VecDeque<Watch>),
}

impl Fences {
    pub fn watch(&mut self, watch: Watch) {
        match self {
            Fences::Thread(sender) => {
                if let Err(mpsc::SendError(watch)) = sender.send(watch) {
                    // The fence thread stopped (process exit): nothing will signal again.
                    tracing::debug!(fence = watch.fence, "fence thread gone; fence not watched");
                }
            }
            Fences::Polled(pending) => pending.push_back(watch),
        }
    }

    /// The oldest fence the GL thread polls, if any.
    pub fn oldest_polled(&self) -> Option<u64> {
        match self {
            Fences::Polled(pending) => pending.front().map(|watch| watch.fence),
            Fences::Thread(_) => None,
        }
    }

    /// Whether the GL thread has fences of its own to poll.
    pub fn polls_pending(&self) -> bool {
        matches!(self, Fences::Polled(pending) if !pending.is_empty())
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
    ready_rx.recv().map_err(|_| GlError::ThreadGone)??;
    Ok((Fences::Thread(watches), control))
}

fn serve(
    context: &CurrentSharingContext,
    control: &FenceThreadControl,
    hooks: &Hooks,
    received: &Receiver<Watch>,
) {
    // Ends when the GL thread's sender goes, which it never does before process exit.
    for watch in received {
        let outcome = match watch.sync {
            Some(sync) => wait_and_delete(&context.gl, control, sync),
            None => Ok(()),
        };
        match outcome {
            Ok(()) => {
                if let Some(query) = watch.query {
                    (hooks.read_timer)(watch.fence, query);
                }
            }
            Err(error) => hooks.timeline.fail(watch.fence, error.into()),
        }
        hooks.timeline.signal(watch.fence);
        tracing::trace!(fence = watch.fence, "fence signalled");
        (hooks.settled)();
    }
}

/// Waits, slice by slice, until `sync` signals, then deletes it.
fn wait_and_delete(
    gl: &glow::Context,
    control: &FenceThreadControl,
    sync: glow::NativeFence,
) -> Result<(), GlError> {
    let slice = WAIT_SLICE.as_nanos() as i32;
    // Short work completes within the polling window; waits in the driver wake up late.
    let mut status = glow::TIMEOUT_EXPIRED;
    crate::hal::spin::poll(|| {
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
                    name: super::error::error_name(code),
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
