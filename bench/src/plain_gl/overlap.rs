//! Part of the driver study: whether a device copy out of a persistently mapped buffer runs
//! beside compute. A staged batch's GPU work is a copy in, a kernel and a copy out, and on one
//! context the driver runs them in turn (an H100 with driver 580.159.04 took the sum of a copy and
//! a stream of kernels, with or without a barrier between). A second context has a channel of its
//! own; this times the same copy there while the study's context runs the kernels, against each
//! alone and against both on one context. The contexts share nothing (the copy has buffers of its
//! own): the question is only whether the GPU runs the two at once.

use std::fmt::Write as _;
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use glow::HasContext;

use super::baseline::{self, Buffers, Linked, SaxpyInputs};
use super::error::driver_error;
use super::study::{copy, device_buffer, mapped, poll_and_delete, quantile, us, STAGING};
use super::{PlainGlError, ALL_BARRIERS};

/// The work the overlap study times.
#[derive(Debug, Clone, Copy)]
pub struct OverlapPlan {
    /// Elements of the saxpy the kernels run over.
    pub floats: usize,
    /// The kernel's grid over `floats` elements.
    pub groups: [u32; 3],
    /// Launches in a row (a storage barrier after each).
    pub launches: usize,
    /// Bytes of the copy.
    pub copy_bytes: usize,
    /// Timed runs of each way (the median and the 10th percentile are reported).
    pub reps: usize,
    /// Elements of the one saxpy launch that copy kernels run beside (`beside.rs`).
    pub step_floats: usize,
    /// That launch's grid.
    pub step_groups: [u32; 3],
}

/// What the second context's thread is asked to do after the common start.
#[derive(Clone, Copy)]
enum Turn {
    Copy,
    Idle,
}

/// Times the ways and writes them to `out`; `gl` is the study's context, current on this thread.
pub(super) fn run(
    gl: &glow::Context,
    program: &Linked,
    plan: &OverlapPlan,
    out: &mut String,
) -> Result<(), PlainGlError> {
    let inputs = SaxpyInputs { a: 1.0, x: vec![1.0; plan.floats], y: vec![0.0; plan.floats] };
    let kernels = Buffers::create(gl, &inputs)?;
    let (staging, _) = mapped(gl, plan.copy_bytes, STAGING[0].bits)?;
    let target = device_buffer(gl, plan.copy_bytes)?;
    let outcome = std::thread::scope(|scope| {
        let start = Arc::new(Barrier::new(2));
        let (turns, turns_rx) = mpsc::channel::<Turn>();
        let (ends_tx, ends) = mpsc::channel::<Result<Instant, PlainGlError>>();
        let second_start = start.clone();
        let copy_bytes = plan.copy_bytes;
        scope.spawn(move || second_context(copy_bytes, &second_start, &turns_rx, &ends_tx));
        // The second context's thread reports once it is ready (or why it is not).
        ends.recv().map_err(|_| gone())??;
        let launches = || {
            // SAFETY: the context is current on this thread; program and buffers are its own.
            unsafe {
                for _ in 0..plan.launches {
                    baseline::dispatch(gl, program, &kernels, inputs.a, plan.groups);
                    gl.memory_barrier(ALL_BARRIERS);
                }
            }
        };
        let mut launched = 0;
        // The 10th percentile and the median of each way's wall times.
        let mut time =
            |kernels_here: bool, copy_here: bool, turn: Turn| -> Result<[Duration; 2], PlainGlError> {
                let mut times = Vec::new();
                for _ in 0..plan.reps {
                    turns.send(turn).map_err(|_| gone())?;
                    start.wait();
                    let started = Instant::now();
                    if kernels_here {
                        launches();
                        launched += plan.launches;
                    }
                    if copy_here {
                        // SAFETY: the context is current; both buffers are its own, `copy_bytes` long.
                        unsafe { copy(gl, staging, target, plan.copy_bytes) };
                    }
                    poll_and_delete(gl, baseline::fence_and_flush(gl)?);
                    let here = Instant::now();
                    let there = ends.recv().map_err(|_| gone())??;
                    times.push(here.max(there) - started);
                }
                Ok([quantile(times.clone(), 0.1), quantile(times, 0.5)])
            };
        let ways = [
            ("kernels alone", time(true, false, Turn::Idle)?),
            ("copy alone, on the second context", time(false, false, Turn::Copy)?),
            ("kernels, then the copy, on one context", time(true, true, Turn::Idle)?),
            ("kernels here and the copy on the second context at once", time(true, false, Turn::Copy)?),
        ];
        drop(turns);
        let y = kernels.read_y(gl);
        let want = launched as f32;
        let ran = y.first() == Some(&want) && y.last() == Some(&want);
        Ok::<_, PlainGlError>((ways, ran, y.first().copied().unwrap_or(f32::NAN), want))
    });
    // SAFETY: the context is current; each buffer is its own and deleted once, after the fence
    // waits above.
    unsafe {
        gl.delete_buffer(staging);
        gl.delete_buffer(target);
    }
    kernels.delete(gl);
    let (ways, ran, got, want) = outcome?;
    driver_error(gl, "the overlap study")?;
    let _ = writeln!(
        out,
        "\na device copy beside kernels ({} saxpy launches over {} floats; a {} B copy out of a mapped buffer \
         into a device buffer; wall µs until both are done, p10 / median of {}):",
        plan.launches, plan.floats, plan.copy_bytes, plan.reps
    );
    for (name, [p10, median]) in ways {
        let _ = writeln!(out, "  {name:58} {:9.1} / {:9.1}", us(p10), us(median));
    }
    if !ran {
        return Err(PlainGlError::Driver {
            operation: format!("the overlap study's kernels: y[0] is {got}, {want} launches ran"),
            code: 0,
            name: "wrong result",
        });
    }
    Ok(())
}

fn gone() -> PlainGlError {
    PlainGlError::NoContext("the overlap study's second context stopped".into())
}

/// The second context's thread: makes its context and buffers, reports ready (or the error),
/// then for each turn waits at the common start, copies or not, and reports when it is done.
fn second_context(
    copy_bytes: usize,
    start: &Barrier,
    turns: &mpsc::Receiver<Turn>,
    ends: &mpsc::Sender<Result<Instant, PlainGlError>>,
) {
    let made = (|| {
        let second = sparkle::gl::PlainContext::open_from_env()?;
        let (staging, _) = mapped(second.gl(), copy_bytes, STAGING[0].bits)?;
        let target = device_buffer(second.gl(), copy_bytes)?;
        Ok::<_, PlainGlError>((second, staging, target))
    })();
    let (second, staging, target) = match made {
        Ok(made) => made,
        Err(err) => {
            let _ = ends.send(Err(err));
            return;
        }
    };
    let gl = second.gl();
    let _ = ends.send(Ok(Instant::now()));
    while let Ok(turn) = turns.recv() {
        start.wait();
        if let Turn::Copy = turn {
            // SAFETY: this context is current on this thread; both buffers are its own.
            unsafe { copy(gl, staging, target, copy_bytes) };
            match baseline::fence_and_flush(gl) {
                Ok(fence) => poll_and_delete(gl, fence),
                Err(err) => {
                    let _ = ends.send(Err(err));
                    return;
                }
            }
        }
        if ends.send(Ok(Instant::now())).is_err() {
            break;
        }
    }
    // SAFETY: the context is current on this thread; every copy was waited for.
    unsafe {
        gl.delete_buffer(staging);
        gl.delete_buffer(target);
    }
}
