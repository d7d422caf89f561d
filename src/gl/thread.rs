//! The GL thread. It creates the context, keeps it current for its whole life and runs every GL
//! call, in submission order. There is one per EGL device per process, shared by every backend
//! opened on that device, and it lives as long as the process: NVIDIA's driver crashed when
//! several contexts were made, used and destroyed on different threads of one process, and Mesa
//! aborted when a context was still being torn down while the process exited.
//!
//! Why a thread of its own rather than a lock that makes the context current: glutin's current
//! context is neither `Send` nor `Sync`, making a context current costs a driver round trip on
//! every call, and objects dropped on any user thread (buffers, programs evicted by the cache)
//! need somewhere to delete their GL names without blocking the dropper. A thread owning the
//! context gives all three: calls are closures sent to it, deletes are posted without waiting.

use std::collections::HashMap;
use std::sync::{mpsc, Mutex, PoisonError};

use glow::HasContext;

use super::context::{self, EglContext};
use super::device::{self, Probe};
use super::GlError;

type Job = Box<dyn FnOnce(&mut GlState) + Send>;

/// The process's GL threads, by the device index they were pinned to (`None`: preferred device).
static THREADS: Mutex<Vec<(Option<usize>, GlThread, Probe)>> = Mutex::new(Vec::new());

/// What lives on the GL thread: the context and the objects that must not leave it.
pub(crate) struct GlState {
    context: EglContext,
    fences: HashMap<u64, glow::NativeFence>,
    next_fence: u64,
}

impl GlState {
    pub fn gl(&self) -> &glow::Context {
        &self.context.gl
    }

    /// Keeps a fence on this thread (GL sync objects are raw pointers) and names it by a number.
    pub fn adopt_fence(&mut self, fence: glow::NativeFence) -> u64 {
        self.next_fence += 1;
        self.fences.insert(self.next_fence, fence);
        self.next_fence
    }

    pub fn fence(&self, id: u64) -> Option<glow::NativeFence> {
        self.fences.get(&id).copied()
    }

    pub fn delete_fence(&mut self, id: u64) {
        if let Some(fence) = self.fences.remove(&id) {
            // SAFETY: the context is current on this thread and the fence was created by it.
            unsafe { self.context.gl.delete_sync(fence) };
        }
    }

    /// Drains `glGetError`, returning the first error seen.
    pub fn take_error(&self) -> Option<u32> {
        let mut first = None;
        for _ in 0..16 {
            // SAFETY: the context is current on this thread.
            let code = unsafe { self.context.gl.get_error() };
            if code == glow::NO_ERROR {
                break;
            }
            first.get_or_insert(code);
        }
        first
    }

    /// `Err` naming `operation` if the driver reported an error since the last check.
    pub fn check(&self, operation: &str) -> Result<(), GlError> {
        match self.take_error() {
            None => Ok(()),
            Some(code) => Err(GlError::Driver {
                operation: operation.to_owned(),
                code,
                name: super::error::error_name(code),
            }),
        }
    }
}

/// The sending side of a GL thread. Clones are cheap.
#[derive(Clone)]
pub(crate) struct GlThread {
    jobs: mpsc::Sender<Job>,
}

impl GlThread {
    /// The GL thread of the device `SPARKLE_EGL_DEVICE` names (or the preferred one), started on
    /// first use.
    pub fn shared() -> Result<(GlThread, Probe), GlError> {
        let pinned = context::pinned_device_index()?;
        let mut threads = THREADS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, thread, probe)) = threads.iter().find(|(p, _, _)| *p == pinned) {
            return Ok((thread.clone(), probe.clone()));
        }
        let (thread, probe) = Self::spawn(pinned)?;
        threads.push((pinned, thread.clone(), probe.clone()));
        Ok((thread, probe))
    }

    /// Starts a thread, creates the context on it and probes the device.
    fn spawn(pinned: Option<usize>) -> Result<(GlThread, Probe), GlError> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("sparkle-gl".into())
            .spawn(move || {
                let started = context::create(pinned).and_then(|context| match device::probe(&context) {
                    Ok(probe) => Ok((context, probe)),
                    Err(err) => {
                        context.close();
                        Err(err)
                    }
                });
                let context = match started {
                    Ok((context, probe)) => {
                        // The receiver only disappears if `spawn` already returned.
                        let _ = ready_tx.send(Ok(probe));
                        context
                    }
                    Err(err) => {
                        let _ = ready_tx.send(Err(err));
                        return;
                    }
                };
                let mut state = GlState { context, fences: HashMap::new(), next_fence: 0 };
                // The registry keeps a sender, so this runs until the process exits.
                while let Ok(job) = queue.recv() {
                    job(&mut state);
                }
            })
            .map_err(|err| GlError::NoContext(format!("could not start the GL thread: {err}")))?;
        let probe = ready_rx.recv().map_err(|_| GlError::ThreadGone)??;
        Ok((GlThread { jobs }, probe))
    }

    /// Runs `job` on the GL thread and waits for its result. Never call from the GL thread.
    pub fn call<R: Send + 'static>(
        &self,
        job: impl FnOnce(&mut GlState) -> R + Send + 'static,
    ) -> Result<R, GlError> {
        let (reply, result) = mpsc::sync_channel(1);
        self.jobs
            .send(Box::new(move |state| {
                let _ = reply.send(job(state));
            }))
            .map_err(|_| GlError::ThreadGone)?;
        result.recv().map_err(|_| GlError::ThreadGone)
    }

    /// Queues `job` without waiting; used to delete GL objects from `Drop`. A stopped thread
    /// means the context and everything in it are already gone, so the job is dropped.
    pub fn post(&self, job: impl FnOnce(&mut GlState) + Send + 'static) {
        let _ = self.jobs.send(Box::new(job));
    }
}
