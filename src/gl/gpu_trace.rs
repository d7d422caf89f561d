//! The GL GPU track of a trace (`crate::trace`): `GL_TIMESTAMP` queries around each traced
//! submission's dispatches and copies, read once its fence has signalled and placed on the
//! host's clock.
//!
//! A traced submission (one the runtime's submit span marked, while a trace is written) gets a
//! `glQueryCounter(GL_TIMESTAMP)` before its first command and after each dispatch and copy;
//! the GPU writes each when the commands before it completed, so command `i` ran from stamp `i`
//! to stamp `i + 1`. The clock is read against the host's (`glGetInteger64v(GL_TIMESTAMP)`
//! between two host clock reads) before the first traced submission of a trace and about once
//! a second after that. Nothing here runs unless a trace is written: the submission path checks
//! one flag.
//!
//! Queries belong to the GL thread's context, not to the fence thread's: a fence the fence
//! thread saw hands its submissions' stamps back to the GL thread ([`Settled`]), which reads
//! them between jobs, in fence order.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use glow::HasContext;

use super::thread::GlState;
use crate::trace::{self, Arg, Flow, FlowKind, GpuSlice};

/// One traced submission's stamps, from issue to the read after its fence.
pub(crate) struct Stamps {
    fence: u64,
    /// The trace the submission was stamped for: its slices go to no other.
    generation: u64,
    /// When the GL thread started issuing it (host clock, trace nanoseconds).
    issued_ns: u64,
    /// A timestamp query before the first command and after each dispatch and copy.
    queries: Vec<glow::NativeQuery>,
    /// The name of each stamped command.
    names: Vec<Cow<'static, str>>,
}

/// Starts stamping submission `fence` of `state`'s device for trace `generation`: anchors the
/// clock if due and issues the first stamp. `None` where the driver gives no query.
pub(crate) fn begin(state: &mut GlState, fence: u64, generation: u64) -> Option<Stamps> {
    let issued_ns = trace::now_ns();
    if state.gpu_clock.needs_anchor() {
        let gl = &state.context.gl;
        state.gpu_clock.anchor(|| {
            // SAFETY: the context is current on the GL thread; the query takes no pointer.
            let gpu_ns = unsafe { gl.get_parameter_i64(glow::TIMESTAMP) };
            u64::try_from(gpu_ns).ok().filter(|&ns| ns > 0)
        });
        if state.gpu_clock.needs_anchor() {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                tracing::warn!(
                    "this GL driver's GPU clock (GL_TIMESTAMP) reads 0: the trace has no GPU track"
                )
            });
            return None;
        }
    }
    let mut stamps = Stamps { fence, generation, issued_ns, queries: Vec::new(), names: Vec::new() };
    stamp(state, &mut stamps, None)?;
    Some(stamps)
}

/// Issues a stamp after the command called `name` (`None`: the first stamp). `None` (and the
/// stamps deleted) where the driver gives no query.
pub(crate) fn stamp(state: &GlState, stamps: &mut Stamps, name: Option<Cow<'static, str>>) -> Option<()> {
    let gl = state.gl();
    // SAFETY: the context is current on the GL thread.
    let query = unsafe { gl.create_query() };
    let Ok(query) = query else {
        discard(state, std::mem::take(&mut stamps.queries));
        return None;
    };
    // SAFETY: as above; `query` is a fresh query name.
    unsafe { gl.query_counter(query, glow::TIMESTAMP) };
    stamps.queries.push(query);
    if let Some(name) = name {
        stamps.names.push(name);
    }
    Some(())
}

/// Deletes queries nobody will read (a failed submission).
pub(crate) fn discard(state: &GlState, queries: Vec<glow::NativeQuery>) {
    for query in queries {
        // SAFETY: the context is current on the GL thread; each query is deleted once.
        unsafe { state.gl().delete_query(query) };
    }
}

impl Stamps {
    /// The queries, for a submission that failed.
    pub(crate) fn into_queries(self) -> Vec<glow::NativeQuery> {
        self.queries
    }
}

/// The fence covering `stamps` was seen signalled at `seen_ns`: an instant on the seeing
/// thread, the moment its GPU slices must end by.
pub(crate) fn seen(device: u64, fence: u64) -> u64 {
    trace::instant("gpu", "fence signalled", vec![("device", Arg::U64(device)), ("fence", Arg::U64(fence))])
        .unwrap_or_else(trace::now_ns)
}

/// Reads the stamps of a signalled fence (seen at `seen_ns`) and writes their GPU slices.
pub(crate) fn write(state: &mut GlState, all: Vec<Stamps>, seen_ns: u64) {
    let device = state.token;
    for stamps in all {
        let gl = &state.context.gl;
        let mut times = Vec::with_capacity(stamps.queries.len());
        for &query in &stamps.queries {
            // SAFETY: the context is current on the GL thread; the fence after these queries
            // signalled, so results are available (checked first: a missing one is skipped).
            let time = unsafe {
                let available = gl.get_query_parameter_u32(query, glow::QUERY_RESULT_AVAILABLE) != 0;
                let time = available.then(|| gl.get_query_parameter_u64(query, glow::QUERY_RESULT));
                gl.delete_query(query);
                time
            };
            times.push(time);
        }
        if stamps.generation != trace::current() {
            continue;
        }
        let flow = trace::flow_id(FlowKind::Submission, device, stamps.fence);
        for (at, name) in stamps.names.into_iter().enumerate() {
            let (Some(Some(start)), Some(Some(end))) = (times.get(at), times.get(at + 1)) else { continue };
            state.gpu_clock.write(GpuSlice {
                name,
                gpu_start_ns: *start,
                gpu_end_ns: *end,
                issued_ns: stamps.issued_ns,
                seen_ns,
                args: vec![("device", Arg::U64(device)), ("fence", Arg::U64(stamps.fence))],
                flow: (at == 0).then_some(Flow::In(flow)),
            });
        }
    }
}

/// Stamps of fences the fence thread saw, waiting for the GL thread to read them.
#[derive(Default)]
pub(crate) struct Settled {
    pending: AtomicBool,
    queue: Mutex<Vec<(Vec<Stamps>, u64)>>,
}

impl Settled {
    /// Hands over the stamps of a fence seen at `seen_ns`.
    pub(crate) fn push(&self, stamps: Vec<Stamps>, seen_ns: u64) {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner).push((stamps, seen_ns));
        self.pending.store(true, Ordering::Release);
    }

    /// Whether stamps wait to be read.
    pub(crate) fn pending(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// On the GL thread: reads every waiting stamp, oldest fence first.
    pub(crate) fn drain(state: &mut GlState) {
        if !state.settled_stamps.pending() {
            return;
        }
        let waiting = {
            let mut queue = state.settled_stamps.queue.lock().unwrap_or_else(PoisonError::into_inner);
            state.settled_stamps.pending.store(false, Ordering::Release);
            std::mem::take(&mut *queue)
        };
        for (stamps, seen_ns) in waiting {
            write(state, stamps, seen_ns);
        }
    }
}
