//! Timelines: what Sparkle did, and when, in a trace that Perfetto (ui.perfetto.dev) and
//! Chrome's trace viewer open.
//!
//! Set `SPARKLE_TRACE=path` (`{pid}` in it becomes the process id) and run the program: the
//! first runtime opened starts writing the trace, and the process's exit finishes it. In code,
//! [`start`] (or [`Runtime::trace_to`](crate::Runtime::trace_to)) writes one for as long as
//! the returned [`TraceGuard`] lives.
//!
//! The trace is in the Chrome trace-event JSON format (the object form: `traceEvents` and
//! `otherData`). It holds:
//!
//! - **CPU tracks**, one per thread: opening a runtime and its phases, spec checks, program
//!   requests with their cache lookups per tier (memory, disk, remote), compiles and program
//!   loads (with the kernel's name), cache publishes, uploads and read-backs (with their byte
//!   counts), submissions, fence waits, pipeline stages per batch, and the GL thread's jobs.
//! - **GPU tracks**, one per device, from the device's own clock: on gl, `GL_TIMESTAMP` queries
//!   around each traced submission's dispatches and copies; on the simulated amdgpu device,
//!   the simulator's clock, marked `simulated`.
//! - **Flows** from a submission on the CPU to its first GPU slice, and from a cache miss to
//!   the compile it caused.
//!
//! # One clock
//!
//! Every event is on the host's monotonic clock, in microseconds since the process first
//! traced. A GPU clock is tied to it by reading both clocks together when tracing starts and
//! again about once a second while it runs (the GPU's clock may drift from the host's), and
//! each GPU slice is placed by the newest such anchor. The anchors' uncertainty and the
//! change between consecutive anchors go into the trace's metadata (`otherData.gpu_clocks`).
//! A GPU slice never starts before its submission was issued nor ends after its fence was seen
//! signalled; a slice the anchor put outside that window is moved into it, and the metadata
//! counts such slices and the largest correction.
//!
//! # Cost
//!
//! With no trace being written, each place that would record checks one relaxed atomic flag.
//! While one is written, events go to a bounded buffer emptied by a background thread; when
//! the buffer is full an event is dropped, and the trace's metadata says how many were
//! (`otherData.dropped_events`). Failing to write the trace (a folder that does not exist, a
//! full disk) is one warning; the program runs on.
//!
//! Why not `tracing-chrome`: a `tracing` layer needs a subscriber installed for the whole
//! process, which a library must leave to its user, and it stamps every event with the time it
//! is recorded, so GPU slices (on another clock, known only after their fence) and flows could
//! not be written. Events are serialized with `serde_json`, which the cache already uses.

mod clock;
mod phases;
mod record;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once, PoisonError, RwLock};
use std::time::Duration;

// GPU tracks and the submission mark are for backends that stamp GPU work (gl, amdgpu).
#[cfg_attr(not(any(feature = "gl", feature = "amdgpu")), allow(unused_imports))]
pub(crate) use clock::{GpuClock, GpuSlice, GpuTrack};
// Only the GL thread flushes its GPU slices when a trace ends.
#[cfg(feature = "gl")]
pub(crate) use clock::on_flush;
#[cfg_attr(not(any(feature = "gl", feature = "amdgpu")), allow(unused_imports))]
pub(crate) use record::{
    flow_id, instant, next_flow_id, now_ns, span, submitting, Arg, Flow, FlowKind, Span, Submitting,
};
// Only amdgpu keeps the submitter across its submit thread.
#[cfg(feature = "amdgpu")]
pub(crate) use record::Submitter;

pub(crate) use phases::{phase, OpenRecorder};
pub use phases::{OpenPhase, OpenTimings};

#[doc(hidden)]
pub mod check;

use record::Event;
use writer::{Message, Writer};

/// The environment variable naming the file a trace of the whole process is written to.
pub const TRACE_ENV: &str = "SPARKLE_TRACE";

/// Events the buffer between the recording threads and the writer holds by default.
pub const DEFAULT_BUFFER_EVENTS: usize = 1 << 16;

/// How long finishing a trace waits for the writer to write what is buffered.
const FINISH_WAIT: Duration = Duration::from_secs(30);

/// How long the process's exit waits for it.
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// The trace being recorded (its generation; 0: none): the one check every recording place
/// makes.
static CURRENT: AtomicU64 = AtomicU64::new(0);

/// The trace being written, if any.
static RECORDING: RwLock<Option<Arc<Recording>>> = RwLock::new(None);

/// Serializes starting and finishing traces.
static CONTROL: Mutex<()> = Mutex::new(());

/// Numbers the traces of this process.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Whether a trace is being written now. One relaxed load: the check made on every path that
/// records.
#[inline(always)]
pub(crate) fn enabled() -> bool {
    CURRENT.load(Ordering::Relaxed) != 0
}

/// The generation of the trace being recorded (0: none), as cheaply as [`enabled`]. An event
/// begun in one trace is never written into the next one: a span keeps the generation it
/// started in, and the writer takes it only from that trace.
#[inline(always)]
pub(crate) fn current() -> u64 {
    CURRENT.load(Ordering::Relaxed)
}

/// A trace being written: where its events go.
struct Recording {
    events: std::sync::mpsc::SyncSender<Message>,
    dropped: AtomicU64,
    path: PathBuf,
    generation: u64,
}

/// Hands one event begun in trace `generation` to the writer, if that trace is still the one
/// being written; counts it as dropped when the buffer is full.
fn send(generation: u64, event: Event) {
    let recording = RECORDING.read().unwrap_or_else(PoisonError::into_inner);
    if let Some(recording) = recording.as_ref().filter(|r| r.generation == generation) {
        if let Err(std::sync::mpsc::TrySendError::Full(_)) = recording.events.try_send(Message::Event(event))
        {
            recording.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The number of the trace being written (0: none).
fn generation() -> u64 {
    RECORDING.read().unwrap_or_else(PoisonError::into_inner).as_ref().map_or(0, |r| r.generation)
}

/// How to write a trace.
#[derive(Debug, Clone)]
pub struct TraceOptions {
    /// Events the buffer holds before events are dropped (at least 1).
    pub buffer_events: usize,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions { buffer_events: DEFAULT_BUFFER_EVENTS }
    }
}

/// What writing a trace came to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceSummary {
    /// The file.
    pub path: PathBuf,
    /// Events written to it.
    pub events: u64,
    /// Events dropped because the buffer was full, or lost after writing failed.
    pub dropped: u64,
    /// Why the trace could not be written (whole), if it could not.
    pub error: Option<String>,
}

/// Writes a trace while it lives; dropping it (or [`finish`](Self::finish)) stops recording
/// and completes the file. A guard for a trace that could not be started records nothing.
#[must_use = "the trace stops when the guard is dropped"]
#[derive(Debug)]
pub struct TraceGuard {
    generation: u64,
    path: PathBuf,
    error: Option<String>,
}

impl TraceGuard {
    /// Whether this guard's trace is being written.
    pub fn is_recording(&self) -> bool {
        self.generation != 0 && generation() == self.generation
    }

    /// The file the trace goes to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops recording and completes the file; what was written.
    pub fn finish(mut self) -> TraceSummary {
        self.finish_now()
    }

    fn finish_now(&mut self) -> TraceSummary {
        let generation = std::mem::take(&mut self.generation);
        let summary = if generation == 0 { None } else { finish(generation, FINISH_WAIT, true) };
        summary.unwrap_or_else(|| TraceSummary {
            path: self.path.clone(),
            error: self.error.clone().or_else(|| Some("the trace was not being written".into())),
            ..TraceSummary::default()
        })
    }
}

impl Drop for TraceGuard {
    fn drop(&mut self) {
        if self.generation != 0 {
            self.finish_now();
        }
    }
}

/// Starts writing a trace to `path` with the default options. Never fails: a file that cannot
/// be created is one warning, and the guard records nothing.
pub fn start(path: impl AsRef<Path>) -> TraceGuard {
    start_with(path, &TraceOptions::default())
}

/// [`start`] with `options`.
pub fn start_with(path: impl AsRef<Path>, options: &TraceOptions) -> TraceGuard {
    let path = path.as_ref().to_path_buf();
    match begin(&path, options) {
        Ok(generation) => TraceGuard { generation, path, error: None },
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "no trace is written");
            TraceGuard { generation: 0, path, error: Some(error) }
        }
    }
}

/// Starts the trace `SPARKLE_TRACE` asks for, once per process; it is completed when the
/// process exits. Opening a runtime calls this; a program that wants the trace to start
/// earlier may too.
pub fn init_from_env() {
    static FROM_ENV: Once = Once::new();
    FROM_ENV.call_once(|| {
        let Some(value) = std::env::var_os(TRACE_ENV).filter(|value| !value.is_empty()) else { return };
        let path = value.to_string_lossy().replace("{pid}", &std::process::id().to_string());
        match begin(Path::new(&path), &TraceOptions::default()) {
            Ok(_) => tracing::info!(path = %path, "writing a trace ({TRACE_ENV}); it is completed at exit"),
            Err(error) => tracing::warn!(path = %path, %error, "{TRACE_ENV}: no trace is written"),
        }
    });
}

/// Opens the file, starts the writer and turns recording on; the trace's generation.
fn begin(path: &Path, options: &TraceOptions) -> Result<u64, String> {
    let _control = CONTROL.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(current) = RECORDING.read().unwrap_or_else(PoisonError::into_inner).as_ref() {
        return Err(format!("a trace is already being written, to {}", current.path.display()));
    }
    let file = std::fs::File::create(path).map_err(|err| format!("cannot create the trace file: {err}"))?;
    let (events, received) = std::sync::mpsc::sync_channel(options.buffer_events.max(1));
    let generation = GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
    record::start_clock();
    Writer::spawn(file, path.to_path_buf(), received)?;
    *RECORDING.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(Recording {
        events,
        dropped: AtomicU64::new(0),
        path: path.to_path_buf(),
        generation,
    }));
    register_exit_handler();
    record::process_name();
    CURRENT.store(generation, Ordering::Relaxed);
    Ok(generation)
}

/// Stops trace `generation` and waits up to `wait` for its file to be completed; `None` if it
/// is not the one being written. `flush`: first ask the backends for GPU events they still
/// hold (never at exit, where their threads may be gone).
fn finish(generation: u64, wait: Duration, flush: bool) -> Option<TraceSummary> {
    let _control = CONTROL.lock().unwrap_or_else(PoisonError::into_inner);
    {
        let recording = RECORDING.read().unwrap_or_else(PoisonError::into_inner);
        if recording.as_ref().map(|r| r.generation) != Some(generation) {
            return None;
        }
    }
    if flush {
        clock::flush_all();
    }
    CURRENT.store(0, Ordering::Relaxed);
    let gpu_clocks = clock::report();
    let recording = RECORDING.write().unwrap_or_else(PoisonError::into_inner).take()?;
    let (reply, summary) = std::sync::mpsc::sync_channel(1);
    let metadata = writer::Metadata {
        dropped: recording.dropped.load(Ordering::Relaxed),
        gpu_clocks,
        threads: record::thread_names(),
    };
    // Blocking send: the finish message must get in behind the buffered events.
    let sent = recording.events.send(Message::Finish { metadata, reply });
    let path = recording.path.clone();
    drop(recording);
    let outcome = match sent {
        Ok(()) => summary.recv_timeout(wait).ok(),
        Err(_) => None,
    };
    Some(outcome.unwrap_or_else(|| {
        let error = format!("the trace writer did not finish within {} s", wait.as_secs());
        tracing::warn!(path = %path.display(), "{error}");
        TraceSummary { path, error: Some(error), ..TraceSummary::default() }
    }))
}

fn register_exit_handler() {
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // SAFETY: `finish_at_exit` is an `extern "C" fn()` with no arguments, as atexit wants.
        let status = unsafe { libc::atexit(finish_at_exit) };
        if status != 0 {
            tracing::warn!(
                "could not register the trace's exit handler: a trace still open at exit is cut short"
            );
        }
    });
}

/// Runs during `exit()`: completes the trace still being written.
extern "C" fn finish_at_exit() {
    let generation = generation();
    if generation != 0 {
        finish(generation, EXIT_WAIT, false);
    }
}

#[cfg(test)]
mod tests;
