//! Part of the driver study: when the host sees a kernel's writes to a persistently mapped,
//! coherent buffer, against when it sees the fence behind them. A round trip that reads its
//! result through a mapping waits for the fence; if the writes show well before it, the fence's
//! own release, not the GPU, sets the round trip's floor. Each run also checks every word of the
//! result at the moment the writes showed, and a second way watches a word a one-invocation
//! kernel writes behind a barrier, which a runtime could add after any user's kernel.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use glow::HasContext;

use super::baseline::{self, Buffers, SaxpyInputs};
use super::error::driver_error;
use super::study::{mapped, poll_and_delete, quantile, us, STAGING};
use super::{PlainGlError, ALL_BARRIERS};

/// How the host learns that a round trip into a mapped `y` is over, in [`run`].
#[derive(Clone, Copy)]
enum Watched {
    /// `y`'s own first and last words change.
    OwnWords,
    /// A one-invocation kernel after a barrier writes the round trip's number into a word of
    /// another mapped buffer; with the client-mapped barrier bit or without.
    Signal { client_mapped: bool },
}

impl Watched {
    fn name(self) -> &'static str {
        match self {
            Watched::OwnWords => "y's first and last words",
            Watched::Signal { client_mapped: false } => "signal kernel after barrier",
            Watched::Signal { client_mapped: true } => "signal kernel after barrier + client-mapped",
        }
    }
}

/// The signal kernel: saxpy's interface (so the baseline links it), writing `a` into `y[0]`.
const SIGNAL_GLSL: &str = "#version 430\n\
    layout(local_size_x = 1) in;\n\
    layout(std430, binding = 0) readonly buffer X { float x[]; };\n\
    layout(std430, binding = 1) buffer Y { float y[]; };\n\
    uniform float a;\n\
    uniform uint n;\n\
    void main() { y[0] = n == 0u ? x[0] : a; }\n";

/// Round trips into a persistently mapped `y`, timing when the host first sees the kernel's
/// writes (or a signal written behind them) against when the fence behind them is seen, and
/// checking every word of `y` at the moment the writes were seen: whether the fence's own
/// release, rather than the GPU, sets the round trip's floor, and whether a word the GPU
/// writes last can stand in for it.
pub(super) fn run(
    state: &mut baseline::State,
    program: &baseline::Linked,
    per_group: usize,
    out: &mut String,
) -> Result<(), PlainGlError> {
    const RUNS: usize = 400;
    const LOOK_LIMIT: Duration = Duration::from_millis(10);
    let signal = state.program(SIGNAL_GLSL)?;
    let gl = state.gl();
    let _ = writeln!(
        out,
        "\nround trip into a mapped y (x = 1, a = 1: y counts the round trips), watching for the \
         result, then polling the fence; µs after the flush, median / p90 of the {} runs that time \
         the fence; stale: of the other {}, those where some word of y was not yet written when \
         the result was seen:",
        RUNS / 2,
        RUNS.div_ceil(2)
    );
    for elements in [1024usize, 1 << 20] {
        let inputs = SaxpyInputs { a: 1.0, x: vec![1.0; elements], y: vec![0.0; elements] };
        let buffers = Buffers::create(gl, &inputs)?;
        let groups = [elements.div_ceil(per_group) as u32, 1, 1];
        let bytes = elements * 4;
        let outcome = (|| {
            for watched in [
                Watched::OwnWords,
                Watched::Signal { client_mapped: false },
                Watched::Signal { client_mapped: true },
            ] {
                let (mapped_y, y_ptr) = mapped(gl, bytes, STAGING[0].bits)?;
                let (signal_buffer, signal_ptr) = mapped(gl, bytes.min(4096), STAGING[0].bits)?;
                // SAFETY: both mappings are coherent, persistent and `bytes` / 4096 bytes long,
                // and nothing on the GPU uses them yet.
                unsafe {
                    std::ptr::write_bytes(y_ptr, 0, bytes);
                    std::ptr::write_bytes(signal_ptr, 0, bytes.min(4096));
                }
                let outcome = watch_rows(
                    gl,
                    program,
                    &signal,
                    &buffers,
                    (mapped_y, y_ptr),
                    (signal_buffer, signal_ptr),
                    groups,
                    watched,
                    RUNS,
                    LOOK_LIMIT,
                );
                // SAFETY: the context is current; both buffers are deleted once, after the last fence.
                unsafe {
                    gl.delete_buffer(mapped_y);
                    gl.delete_buffer(signal_buffer);
                }
                let rows = outcome?;
                let _ = writeln!(out, "  {bytes:>8} B, {:44} {rows}", watched.name());
            }
            Ok::<(), PlainGlError>(())
        })();
        buffers.delete(gl);
        outcome?;
    }
    driver_error(gl, "the study's watched round trips")
}

/// Whether each of the `words` f32 words mapped at `y_ptr` is `value` now. Read in volatile
/// chunks (the GPU writes this memory) and compared as bits, a chunk at a time: read a word at a
/// time, the 4 MiB row's checks took most of the study's time in unoptimized builds.
fn all_words_are(y_ptr: *const u8, words: usize, value: f32) -> bool {
    const CHUNK: usize = 256;
    let expected = [value.to_bits(); CHUNK];
    let chunks = words / CHUNK;
    let whole = (0..chunks).all(|c| {
        // SAFETY: the mapping is coherent and persistent until the caller deletes the buffer and
        // holds `words` words, 4-byte aligned (a mapping's start is); chunk `c` ends within them.
        let chunk = unsafe { std::ptr::read_volatile((y_ptr as *const [u32; CHUNK]).add(c)) };
        chunk == expected
    });
    whole
        && (chunks * CHUNK..words).all(|i| {
            // SAFETY: as above; `i` is below `words`.
            let word = unsafe { std::ptr::read_volatile((y_ptr as *const u32).add(i)) };
            word == value.to_bits()
        })
}

/// The timed runs of one [`run`] row, as its report line.
#[allow(clippy::too_many_arguments)]
fn watch_rows(
    gl: &glow::Context,
    program: &baseline::Linked,
    signal: &baseline::Linked,
    buffers: &Buffers,
    (mapped_y, y_ptr): (glow::NativeBuffer, *mut u8),
    (signal_buffer, signal_ptr): (glow::NativeBuffer, *mut u8),
    groups: [u32; 3],
    watched: Watched,
    runs: usize,
    look_limit: Duration,
) -> Result<String, PlainGlError> {
    let words = buffers.y_bytes as usize / 4;
    let dispatched = buffers.with_y(mapped_y);
    let signalled = buffers.with_y(signal_buffer);
    let y_word = |index: usize| {
        // SAFETY: the mapping is coherent and persistent until the caller deletes the buffer;
        // `index` is below `words`; the read is volatile because the GPU writes the memory.
        unsafe { std::ptr::read_volatile((y_ptr as *const f32).add(index)) }
    };
    let signal_word = || {
        // SAFETY: as above, for the signal buffer's first word.
        unsafe { std::ptr::read_volatile(signal_ptr as *const f32) }
    };
    let (mut seen, mut fenced, mut unseen, mut stale) = (Vec::new(), Vec::new(), 0, 0);
    for run in 1..=runs {
        let count = run as f32;
        // SAFETY: the context is current on the baseline thread; programs and buffers are its own.
        unsafe {
            baseline::dispatch(gl, program, &dispatched, 1.0, groups);
            if let Watched::Signal { client_mapped } = watched {
                let extra = if client_mapped { glow::CLIENT_MAPPED_BUFFER_BARRIER_BIT } else { 0 };
                gl.memory_barrier(ALL_BARRIERS | extra);
                baseline::dispatch(gl, signal, &signalled, count, [1, 1, 1]);
            }
            gl.memory_barrier(ALL_BARRIERS);
        }
        let sync = baseline::fence_and_flush(gl)?;
        let flushed = Instant::now();
        let done = || match watched {
            Watched::OwnWords => y_word(0) == count && y_word(words - 1) == count,
            Watched::Signal { .. } => signal_word() == count,
        };
        let changed = loop {
            if done() {
                break true;
            }
            if flushed.elapsed() > look_limit {
                break false;
            }
            std::hint::spin_loop();
        };
        let at_result = flushed.elapsed();
        // Odd runs check every word of `y` when the result is seen, even runs time the fence:
        // reading a large mapping takes long enough to delay the fence's poll.
        let checked = run % 2 == 1;
        if changed && checked && !all_words_are(y_ptr, words, count) {
            stale += 1;
        }
        poll_and_delete(gl, sync);
        let at_fence = flushed.elapsed();
        if !changed {
            unseen += 1;
        } else if !checked {
            seen.push(at_result);
            fenced.push(at_fence);
        }
    }
    if seen.is_empty() {
        return Ok("the result was never seen before the fence".into());
    }
    Ok(format!(
        "result {:6.1} / {:6.1}   fence {:6.1} / {:6.1}   stale {stale}   unseen {unseen}",
        us(quantile(seen.clone(), 0.5)),
        us(quantile(seen, 0.9)),
        us(quantile(fenced.clone(), 0.5)),
        us(quantile(fenced, 0.9)),
    ))
}

#[cfg(test)]
mod tests {
    use super::all_words_are;

    #[test]
    fn a_word_that_differs_anywhere_is_found() {
        // 256-word chunks and a tail: a differing word in a chunk, in the tail, at either end.
        let words = 3 * 256 + 5;
        let mut y = vec![7.0f32; words];
        assert!(all_words_are(y.as_ptr().cast(), words, 7.0));
        for at in [0, 255, 256, 600, 3 * 256, words - 1] {
            y[at] = 6.0;
            assert!(!all_words_are(y.as_ptr().cast(), words, 7.0), "word {at}");
            y[at] = 7.0;
        }
        assert!(!all_words_are(y.as_ptr().cast(), words, 8.0));
    }
}
