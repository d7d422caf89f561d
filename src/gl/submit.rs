//! Submissions on the GL thread: the recorded commands, owned so they can travel there, run as
//! GL calls (`glBindBufferRange`, uniforms, `glDispatchCompute`, `glCopyBufferSubData`,
//! `glMemoryBarrier`), ended by a fence handed on to be waited for (`fences.rs`) and a barrier;
//! and the polling of those fences on the GL thread where there is no fence thread. A timed
//! submission is wrapped in a `GL_TIME_ELAPSED` query whose result is read once its fence has
//! signalled.
//!
//! The barrier that makes a submission's writes visible to later GL commands closes it, before
//! its fence — except where the host takes the result through a mapping ([`Closing`]). No GL
//! command waits for the host there, so the barrier goes behind the fence: every later command
//! still follows it, but the fence no longer waits for it, and the GPU runs it while the host
//! reads the result. On an H100 that took about 1.2 µs off a round trip into a Staging buffer;
//! behind the fence everywhere, it cost a read of a device buffer 1.5 µs and a stream of
//! one-dispatch submissions 0.2 µs per dispatch.
//!
//! No submission issues `GL_CLIENT_MAPPED_BUFFER_BARRIER_BIT`: the only mapped buffers are
//! Staging buffers, mapped coherently, and with a coherent mapping GL makes the host's writes
//! visible to later commands and the GPU's writes visible to the host once a fence after them
//! has signalled, with no barrier (`MAP_COHERENT_BIT` in the GL 4.6 specification, §6.2). On an
//! H100 (driver 580.159.04) that barrier in front of a copy cost a 1–2 MiB staged copy 12–20 µs.
//!
//! A fence (`glFenceSync` + `glFlush`) and the wait for it cost the driver several times what a
//! small dispatch does, so a submission of dispatches with another submission queued right
//! behind it leaves its fence to that one: one context's work completes in order, so the later
//! fence covers both. Runs of such submissions are bounded (`MAX_UNFENCED`); the price is that
//! a waiter on a submission inside a run sees it complete when the run's fence signals, after
//! the GPU has also run the submissions queued behind it (at most 32). A submission that copies
//! (a pipeline's batch), or one followed by anything else — a read, an upload, nothing — is
//! fenced at once, which keeps a lone round trip and a pipeline's overlap.

use std::time::Duration;

use glow::HasContext;

use super::fences::Watch;
use super::gpu_trace::{self, Stamps};
use super::texels::TexelRange;
use super::thread::{GlState, Unfenced};
use super::GlError;
use crate::hal::ScalarValue;

/// Barriers that make shader and copy writes visible to later shaders, copies and reads.
pub(crate) const ALL_BARRIERS: u32 =
    glow::SHADER_STORAGE_BARRIER_BIT | glow::BUFFER_UPDATE_BARRIER_BIT | glow::UNIFORM_BARRIER_BIT;

/// GPU times kept for submissions whose owner has not read them yet, at most.
const UNREAD_TIMES: usize = 1024;

/// Most submissions in a row that leave their fence to the next one.
const MAX_UNFENCED: usize = 32;

/// One recorded command with the GL names it needs.
pub(crate) enum Step {
    Dispatch {
        program: glow::NativeProgram,
        /// (binding point, buffer, offset, size).
        buffers: Vec<(u32, glow::NativeBuffer, i32, i32)>,
        /// Ranges read as texels.
        texels: Vec<TexelRange>,
        uniforms: Vec<(Option<glow::NativeUniformLocation>, ScalarValue)>,
        groups: [u32; 3],
        kernel: String,
    },
    Copy {
        src: glow::NativeBuffer,
        src_offset: i32,
        dst: glow::NativeBuffer,
        dst_offset: i32,
        size: i32,
    },
    Barrier,
}

/// Where the barrier that closes a submission goes (the module's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Closing {
    /// In front of the submission's fence.
    BeforeFence,
    /// Behind the fence: the host takes the submission's result through a mapping.
    BehindFence,
}

/// Whether `steps` copy between buffers: such a submission is a transfer or a pipeline's batch,
/// waited for on its own, so it never leaves its fence to the next one, and it may hold the GL
/// thread while the driver copies.
pub(crate) fn copies(steps: &[Step]) -> bool {
    steps.iter().any(|step| matches!(step, Step::Copy { .. }))
}

/// Runs a submission's steps and fences it (or leaves the fence to the submission queued
/// behind it), closing it with a barrier where `closing` says; `timed` wraps them in a timer
/// query; `traced` (a trace's generation, 0: none) stamps them for that trace's GPU track
/// (`gpu_trace.rs`) while it is written.
pub(crate) fn execute(
    state: &mut GlState,
    fence: u64,
    steps: Vec<Step>,
    closing: Closing,
    timed: bool,
    traced: u64,
) {
    let started = std::time::Instant::now();
    let mut span = crate::trace::span("gl", "gl submit");
    span.arg("device", state.token);
    span.arg("fence", fence);
    span.arg("steps", steps.len());
    state.take_error();
    let mut stamps = if traced != 0 && traced == crate::trace::current() {
        gpu_trace::begin(state, fence, traced)
    } else {
        None
    };
    let query = if timed { begin_timer(state) } else { None };
    let outcome = run(state, &steps, &mut stamps);
    if query.is_some() {
        // SAFETY: the context is current on the GL thread and a TIME_ELAPSED query is active.
        unsafe { state.gl().end_query(glow::TIME_ELAPSED) };
    }
    match outcome {
        Ok(()) => {
            let unfenced = state.unfenced;
            let streaming = state.next_is_submission();
            // Only dispatches share a fence. A submission that copies is a pipeline's batch,
            // whose consumer waits for it alone: sharing its fence with the batches queued
            // behind it (they queue while the driver runs the copy on this thread) made the
            // consumer wait for all of them, and a pipeline of depth 3 completed in threes.
            let leaves_fence =
                query.is_none() && !copies(&steps) && unfenced.count < MAX_UNFENCED && streaming;
            // The closing barrier: now, or behind this submission's own fence (the module's
            // documentation).
            let behind_fence = !leaves_fence && closing == Closing::BehindFence;
            if !behind_fence {
                // SAFETY: the context is current on the GL thread.
                unsafe { state.gl().memory_barrier(ALL_BARRIERS) };
            }
            if leaves_fence {
                state.unfenced = Unfenced { newest: Some(fence), count: unfenced.count + 1 };
                state.unfenced_stamps.extend(stamps);
            } else {
                fence_through(state, fence, query, if behind_fence { ALL_BARRIERS } else { 0 }, stamps);
                if streaming {
                    // A stream of submissions keeps this thread busy: signal what already
                    // completed now rather than when it goes idle (a poll does not wait).
                    poll(state, Duration::ZERO);
                }
            }
        }
        Err(error) => {
            // The work before it must not be reported complete with this failure.
            if let Some(newest) = state.unfenced.newest {
                fence_through(state, newest, None, 0, None);
            }
            if let Some(stamps) = stamps {
                gpu_trace::discard(state, stamps.into_queries());
            }
            state.timeline.fail(fence, error.into());
            if let Some(query) = query {
                // SAFETY: the context is current on the GL thread; the query ended above and
                // is deleted once. A failed submission reports no GPU time.
                unsafe { state.gl().delete_query(query) };
            }
            state.watch(Watch { fence, sync: None, query: None, stamps: Vec::new() });
        }
    }
    tracing::trace!(
        fence,
        steps = steps.len(),
        micros = started.elapsed().as_micros() as u64,
        "submission issued"
    );
}

/// Fences every submission up to `fence` (the ones that ran without a fence of their own and
/// `fence` itself), issues the `barriers` bits behind the fence (see the module's
/// documentation), and hands the fence on to be waited for, with the GPU stamps of the
/// submissions it covers.
fn fence_through(
    state: &mut GlState,
    fence: u64,
    query: Option<glow::NativeQuery>,
    barriers: u32,
    stamps: Option<Stamps>,
) {
    state.unfenced = Unfenced::default();
    let mut covered = std::mem::take(&mut state.unfenced_stamps);
    covered.extend(stamps);
    state.fences_made += 1;
    // SAFETY: the context is current on the GL thread.
    let sync = unsafe {
        let sync = state.gl().fence_sync(glow::SYNC_GPU_COMMANDS_COMPLETE, 0);
        if barriers != 0 {
            state.gl().memory_barrier(barriers);
        }
        state.gl().flush();
        sync
    };
    match sync {
        Ok(sync) => state.watch(Watch { fence, sync: Some(sync), query, stamps: covered }),
        Err(reason) => {
            // Without a fence, nothing tells when the work is over: let it end here, so that
            // the submissions this fence covers are not reported complete while they run.
            // SAFETY: as above; the query ended and is deleted once.
            unsafe {
                state.gl().finish();
                if let Some(query) = query {
                    state.gl().delete_query(query);
                }
            }
            for stamps in covered {
                gpu_trace::discard(state, stamps.into_queries());
            }
            let error =
                GlError::Driver { operation: format!("glFenceSync ({reason})"), code: 0, name: "no fence" };
            state.timeline.fail(fence, error.into());
            state.watch(Watch { fence, sync: None, query: None, stamps: Vec::new() });
        }
    }
}

/// Starts a `GL_TIME_ELAPSED` query; `None` (and a warning) if the driver has no timer queries,
/// so the submission runs untimed and reports no GPU time rather than a wrong one.
fn begin_timer(state: &GlState) -> Option<glow::NativeQuery> {
    // SAFETY: the context is current on the GL thread.
    let query = unsafe { state.gl().create_query() };
    let query = match query {
        Ok(query) => query,
        Err(reason) => {
            tracing::warn!(%reason, "glGenQueries failed: this submission reports no GPU time");
            return None;
        }
    };
    // SAFETY: as above; no other TIME_ELAPSED query is active (submissions run one at a time).
    unsafe { state.gl().begin_query(glow::TIME_ELAPSED, query) };
    if let Err(error) = state.check("glBeginQuery(GL_TIME_ELAPSED)") {
        tracing::warn!(%error, "timer queries do not work here: this submission reports no GPU time");
        // SAFETY: as above; the query is deleted once.
        unsafe { state.gl().delete_query(query) };
        return None;
    }
    Some(query)
}

/// Reads a finished timer query (its submission's fence has signalled, so the result is
/// available) and deletes it.
pub(crate) fn read_timer(state: &GlState, fence: u64, query: glow::NativeQuery) {
    // SAFETY: the context is current on the GL thread and `query` is a live, ended query.
    let nanos = unsafe {
        let available = state.gl().get_query_parameter_u32(query, glow::QUERY_RESULT_AVAILABLE);
        let nanos = (available != 0).then(|| state.gl().get_query_parameter_u64(query, glow::QUERY_RESULT));
        state.gl().delete_query(query);
        nanos
    };
    match nanos {
        Some(nanos) => {
            let mut times = state.gpu_times.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // Times nobody took (their submissions were dropped unread) must not pile up.
            if times.len() >= UNREAD_TIMES {
                times.retain(|&older, _| older + UNREAD_TIMES as u64 > fence);
            }
            times.insert(fence, Duration::from_nanos(nanos));
        }
        None => tracing::warn!(fence, "a timer query had no result after its fence: no GPU time reported"),
    }
}

/// Issues `steps`; with `stamps`, a GPU timestamp after each dispatch and copy (stamping stops
/// where the driver gives no more queries).
fn run(state: &GlState, steps: &[Step], stamps: &mut Option<Stamps>) -> Result<(), GlError> {
    let gl = state.gl();
    for step in steps {
        match step {
            Step::Dispatch { program, buffers, texels, uniforms, groups, kernel } => {
                // SAFETY: the context is current on the GL thread; the program and buffers are
                // live GL names (the runtime holds their objects until this submission's fence
                // completes), ranges and grid were validated against the device limits.
                unsafe {
                    gl.use_program(Some(*program));
                    for &(binding, buffer, offset, size) in buffers {
                        gl.bind_buffer_range(
                            glow::SHADER_STORAGE_BUFFER,
                            binding,
                            Some(buffer),
                            offset,
                            size,
                        );
                    }
                    for (location, value) in uniforms {
                        match *value {
                            ScalarValue::U32(v) => gl.uniform_1_u32(location.as_ref(), v),
                            ScalarValue::I32(v) => gl.uniform_1_i32(location.as_ref(), v),
                            ScalarValue::F32(v) => gl.uniform_1_f32(location.as_ref(), v),
                        }
                    }
                    state.context.texel_units.attach(gl, texels)?;
                    gl.dispatch_compute(groups[0], groups[1], groups[2]);
                    state.context.texel_units.detach(gl, texels);
                }
                state.check_with(|| format!("the dispatch of kernel `{kernel}`"))?;
                if let Some(stamping) = stamps {
                    if gpu_trace::stamp(state, stamping, Some(kernel.clone().into())).is_none() {
                        *stamps = None;
                    }
                }
            }
            Step::Copy { src, src_offset, dst, dst_offset, size } => {
                // SAFETY: as above; ranges were checked against both buffers' sizes.
                unsafe {
                    gl.bind_buffer(glow::COPY_READ_BUFFER, Some(*src));
                    gl.bind_buffer(glow::COPY_WRITE_BUFFER, Some(*dst));
                    gl.copy_buffer_sub_data(
                        glow::COPY_READ_BUFFER,
                        glow::COPY_WRITE_BUFFER,
                        *src_offset,
                        *dst_offset,
                        *size,
                    );
                    gl.bind_buffer(glow::COPY_READ_BUFFER, None);
                    gl.bind_buffer(glow::COPY_WRITE_BUFFER, None);
                }
                state.check("a buffer copy")?;
                if let Some(stamping) = stamps {
                    if gpu_trace::stamp(state, stamping, Some("copy".into())).is_none() {
                        *stamps = None;
                    }
                }
            }
            // SAFETY: the context is current on the GL thread.
            Step::Barrier => unsafe { gl.memory_barrier(ALL_BARRIERS) },
        }
    }
    Ok(())
}

/// Where the GL thread polls its own fences: signals every submission that completed, oldest
/// first; waits up to `slice` for the oldest.
pub(crate) fn poll(state: &mut GlState, slice: Duration) {
    let mut wait_ns = slice.as_nanos().min(i32::MAX as u128) as i32;
    loop {
        // The fences handed to the fence thread complete first.
        let Some(front) = state.fences.next_to_poll(state.timeline.completed()) else { return };
        let (fence, sync, query, stamped) = (front.fence, front.sync, front.query, !front.stamps.is_empty());
        if let Some(sync) = sync {
            // SAFETY: the context is current on the GL thread and `sync` is a live fence made on it.
            let status = unsafe { state.gl().client_wait_sync(sync, 0, wait_ns) };
            wait_ns = 0;
            match status {
                glow::ALREADY_SIGNALED | glow::CONDITION_SATISFIED => {}
                glow::TIMEOUT_EXPIRED => return,
                code => {
                    let error = GlError::Driver {
                        operation: "glClientWaitSync".into(),
                        code,
                        name: super::error::gl_error_name(code),
                    };
                    state.timeline.fail(fence, error.into());
                }
            }
            // SAFETY: as above; the fence is deleted once and forgotten.
            unsafe { state.gl().delete_sync(sync) };
        }
        let seen_ns = stamped.then(|| gpu_trace::seen(state.token, fence));
        if let Some(query) = query {
            read_timer(state, fence, query);
        }
        let polled = state.fences.pop_polled();
        if let (Some(seen_ns), Some(watch)) = (seen_ns, polled) {
            // Fences the fence thread saw before this one are read first.
            gpu_trace::Settled::drain(state);
            gpu_trace::write(state, watch.stamps, seen_ns);
        }
        state.timeline.signal(fence);
        state.settled();
    }
}
