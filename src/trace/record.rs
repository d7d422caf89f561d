//! Recording: the host clock, thread ids and names, spans, instants and flows, handed to the
//! writer as [`Event`]s.
// Instants, renamed spans and the submission mark serve backends that stamp GPU work (gl,
// amdgpu).
#![cfg_attr(not(any(feature = "gl", feature = "amdgpu")), allow(dead_code))]

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Instant;

use super::{current, enabled, send};

/// The instant every timestamp counts from.
static EPOCH: OnceLock<Instant> = OnceLock::new();

/// Names of the threads that recorded, by thread id (and of the GPU tracks).
static THREAD_NAMES: Mutex<BTreeMap<u64, String>> = Mutex::new(BTreeMap::new());

thread_local! {
    /// This thread's id and the last timestamp it handed out.
    static THREAD: Cell<Option<u64>> = const { Cell::new(None) };
    static LAST_NS: Cell<u64> = const { Cell::new(0) };
}

/// Fixes the trace clock's zero, once per process.
pub(super) fn start_clock() {
    EPOCH.get_or_init(Instant::now);
}

/// Nanoseconds on the trace clock (the host's monotonic clock) for `instant`.
pub(crate) fn ns_of(instant: Instant) -> u64 {
    let epoch = *EPOCH.get_or_init(Instant::now);
    instant.saturating_duration_since(epoch).as_nanos().min(u64::MAX as u128) as u64
}

/// Nanoseconds on the trace clock, strictly increasing on each thread: a span that starts after
/// another on the same thread starts later, and one that ends before it ends earlier, so spans
/// nest strictly even where the clock did not move between two reads.
pub(crate) fn now_ns() -> u64 {
    let now = ns_of(Instant::now());
    LAST_NS.with(|last| {
        let ns = now.max(last.get() + 1);
        last.set(ns);
        ns
    })
}

/// This thread's id in traces (the kernel's thread id on Linux), registering its name the first
/// time.
pub(crate) fn thread_id() -> u64 {
    THREAD.with(|cell| {
        if let Some(id) = cell.get() {
            return id;
        }
        let id = os_thread_id();
        let current = std::thread::current();
        let name = current.name().map_or_else(|| format!("thread {id}"), str::to_owned);
        THREAD_NAMES.lock().unwrap_or_else(PoisonError::into_inner).insert(id, name);
        cell.set(Some(id));
        id
    })
}

#[cfg(target_os = "linux")]
fn os_thread_id() -> u64 {
    // SAFETY: gettid has no preconditions and cannot fail.
    u64::from(unsafe { libc::gettid() }.unsigned_abs())
}

#[cfg(not(target_os = "linux"))]
fn os_thread_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Names a track that is not a thread (a GPU's).
pub(crate) fn name_track(id: u64, name: String) {
    THREAD_NAMES.lock().unwrap_or_else(PoisonError::into_inner).insert(id, name);
}

/// The names of every thread and track, for the writer's metadata events.
pub(super) fn thread_names() -> Vec<(u64, String)> {
    THREAD_NAMES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .map(|(id, n)| (*id, n.clone()))
        .collect()
}

/// Registers the recording thread's name before its first event (the writer names tracks from
/// the registry when it finishes).
pub(super) fn process_name() {
    thread_id();
}

/// An argument value of an event.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Arg {
    U64(u64),
    F64(f64),
    Bool(bool),
    Str(Cow<'static, str>),
}

impl From<u64> for Arg {
    fn from(value: u64) -> Self {
        Arg::U64(value)
    }
}

impl From<usize> for Arg {
    fn from(value: usize) -> Self {
        Arg::U64(value as u64)
    }
}

impl From<u32> for Arg {
    fn from(value: u32) -> Self {
        Arg::U64(u64::from(value))
    }
}

impl From<f64> for Arg {
    fn from(value: f64) -> Self {
        Arg::F64(value)
    }
}

impl From<bool> for Arg {
    fn from(value: bool) -> Self {
        Arg::Bool(value)
    }
}

impl From<&'static str> for Arg {
    fn from(value: &'static str) -> Self {
        Arg::Str(Cow::Borrowed(value))
    }
}

impl From<String> for Arg {
    fn from(value: String) -> Self {
        Arg::Str(Cow::Owned(value))
    }
}

/// Which end of a flow an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// The flow starts at this slice.
    Out(u64),
    /// The flow ends at this slice.
    In(u64),
}

/// What a flow links; part of its id, so flows of different kinds never share one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub(crate) enum FlowKind {
    /// A submission on the CPU to its work on the GPU.
    Submission = 1,
    /// A cache miss to its compile.
    Miss = 2,
}

/// The id of flow number `n` of `kind` on the device `device` (a backend's token).
pub(crate) fn flow_id(kind: FlowKind, device: u64, n: u64) -> u64 {
    // Below 2^53, so that viewers reading numbers as doubles keep every id apart.
    ((kind as u64) << 48) | ((device & 0xff) << 40) | (n & 0xff_ffff_ffff)
}

/// A fresh id for a flow of `kind` that has no number of its own, marked with the trace it was
/// made in: a span of a later trace does not end it.
pub(crate) fn next_flow_id(kind: FlowKind) -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    flow_id(kind, current(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Whether a flow id made by [`next_flow_id`] belongs to trace `generation`.
fn made_in(id: u64, generation: u64) -> bool {
    (id >> 40) & 0xff == generation & 0xff
}

/// What an event is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    /// A slice of `dur_ns` ("X").
    Complete { dur_ns: u64 },
    /// A moment ("i").
    Instant,
}

/// One event for the writer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    pub kind: Kind,
    pub cat: &'static str,
    pub name: Cow<'static, str>,
    /// Thread or track id.
    pub tid: u64,
    pub ts_ns: u64,
    pub args: Vec<(&'static str, Arg)>,
    pub flow: Option<Flow>,
}

impl Event {
    /// A slice on track `tid` (a GPU's) with explicit times.
    pub(crate) fn slice(
        cat: &'static str,
        name: Cow<'static, str>,
        tid: u64,
        ts_ns: u64,
        dur_ns: u64,
    ) -> Self {
        Event { kind: Kind::Complete { dur_ns }, cat, name, tid, ts_ns, args: Vec::new(), flow: None }
    }

    /// Hands the event to the writer of the current trace.
    pub(crate) fn send(self) {
        send(current(), self);
    }
}

/// A span on the current thread, recorded when dropped. Inert (and free) when no trace is
/// being written.
#[must_use = "a span records the time until it is dropped"]
pub(crate) struct Span {
    /// The event, and the trace it was begun in.
    open: Option<Box<(Event, u64)>>,
}

/// A span named `name` in category `cat`, from now until the returned guard drops.
#[inline]
pub(crate) fn span(cat: &'static str, name: &'static str) -> Span {
    if !enabled() {
        return Span { open: None };
    }
    Span::open(cat, Cow::Borrowed(name))
}

impl Span {
    #[cold]
    fn open(cat: &'static str, name: Cow<'static, str>) -> Span {
        let generation = current();
        let tid = thread_id();
        let ts_ns = now_ns();
        let event =
            Event { kind: Kind::Complete { dur_ns: 0 }, cat, name, tid, ts_ns, args: Vec::new(), flow: None };
        Span { open: Some(Box::new((event, generation))) }
    }

    /// Whether this span records (a trace was being written when it started).
    #[inline]
    pub(crate) fn is_on(&self) -> bool {
        self.open.is_some()
    }

    /// Adds an argument.
    #[inline]
    pub(crate) fn arg(&mut self, key: &'static str, value: impl Into<Arg>) {
        if let Some(open) = &mut self.open {
            open.0.args.push((key, value.into()));
        }
    }

    /// Adds an argument made only when the span records.
    #[inline]
    pub(crate) fn arg_with<V: Into<Arg>>(&mut self, key: &'static str, value: impl FnOnce() -> V) {
        if let Some(open) = &mut self.open {
            open.0.args.push((key, value().into()));
        }
    }

    /// Renames the span (a name known only once it is open).
    #[cfg_attr(not(any(test, feature = "gl")), allow(dead_code))]
    pub(crate) fn rename(&mut self, name: impl FnOnce() -> String) {
        if let Some(open) = &mut self.open {
            open.0.name = Cow::Owned(name());
        }
    }

    /// Drops the span without recording it (what it timed is shown by another span).
    #[inline]
    pub(crate) fn discard(mut self) {
        self.open = None;
    }

    /// Starts or ends a flow at this span. A miss's flow made in another trace is not ended.
    #[inline]
    pub(crate) fn flow(&mut self, flow: Flow) {
        if let Some(open) = &mut self.open {
            let foreign =
                matches!(flow, Flow::In(id) if id >> 48 == FlowKind::Miss as u64 && !made_in(id, open.1));
            if !foreign {
                open.0.flow = Some(flow);
            }
        }
    }
}

impl Drop for Span {
    #[inline]
    fn drop(&mut self) {
        if let Some(open) = self.open.take() {
            let (event, generation) = *open;
            finish_span(event, generation);
        }
    }
}

#[cold]
fn finish_span(mut open: Event, generation: u64) {
    let end = now_ns();
    open.kind = Kind::Complete { dur_ns: end.saturating_sub(open.ts_ns) };
    send(generation, open);
}

/// A moment on the current thread; when it was recorded (`None`: no trace is written).
pub(crate) fn instant(cat: &'static str, name: &'static str, args: Vec<(&'static str, Arg)>) -> Option<u64> {
    let generation = current();
    if generation == 0 {
        return None;
    }
    let ts_ns = now_ns();
    send(
        generation,
        Event {
            kind: Kind::Instant,
            cat,
            name: Cow::Borrowed(name),
            tid: thread_id(),
            ts_ns,
            args,
            flow: None,
        },
    );
    Some(ts_ns)
}

thread_local! {
    /// Whether this thread is inside a traced submission (the runtime's submit span).
    static SUBMITTING: Cell<Submitter> = const { Cell::new(Submitter { generation: 0, device: 0 }) };
}

/// Marks the current thread as submitting traced work until dropped: the backend below the
/// runtime's submit span stamps the submission's GPU work only then, so that every GPU slice
/// has the submission span its flow starts at.
pub(crate) struct Submitting {
    /// What the mark was before (`None`: this guard did not mark).
    restore: Option<Submitter>,
}

/// Who submits traced work on this thread (see [`Submitting`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Submitter {
    /// The trace the submission is stamped for.
    pub generation: u64,
    /// The submitting device's token (the runtime's), which the submission's flow id carries.
    pub device: u64,
}

impl Submitting {
    /// Marks the thread as submitting for the device whose token `device` gives while `span`
    /// records; a no-op otherwise.
    #[inline]
    pub(crate) fn mark(span: &Span, device: impl FnOnce() -> u64) -> Submitting {
        let Some(open) = &span.open else { return Submitting { restore: None } };
        let submitter = Submitter { generation: open.1, device: device() };
        Submitting { restore: Some(SUBMITTING.with(|cell| cell.replace(submitter))) }
    }
}

impl Drop for Submitting {
    #[inline]
    fn drop(&mut self) {
        if let Some(was) = self.restore {
            SUBMITTING.with(|cell| cell.set(was));
        }
    }
}

/// Who submits traced work on the current thread now, for the trace being written (see
/// [`Submitting`]); `None` when nothing is.
#[inline]
pub(crate) fn submitting() -> Option<Submitter> {
    let generation = current();
    if generation == 0 {
        return None;
    }
    Some(SUBMITTING.with(Cell::get)).filter(|submitter| submitter.generation == generation)
}
