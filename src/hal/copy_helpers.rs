//! Long-lived helper threads for host copies split into pieces. Starting a thread cost 37–68 µs
//! in the H100's guests (one to three scoped threads around nothing), which every copy of 2 MiB
//! and more through a staging buffer's mapping paid, each 8 MiB chunk of a ring transfer too;
//! waking a thread that already waits costs less. A copy hands every piece but its first to the
//! helpers, copies the first itself, and returns only once every piece is done — also when a
//! piece panics, a panic it then passes on — so pieces may borrow the caller's memory.

use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

/// Helper threads: two copies at once (a pipeline's upload and read-back overlap) each get
/// three, the most pieces but one that a copy is split into.
const HELPERS: usize = 6;

/// A piece of a copy: copies bytes `from..to` of it.
type Piece<'a> = dyn Fn(usize, usize) + Sync + 'a;

/// One piece handed to a helper.
struct Job {
    /// The caller's piece function with its lifetime erased; see [`in_pieces`] for why it
    /// outlives every call.
    piece: *const Piece<'static>,
    from: usize,
    to: usize,
    copy: Arc<Outstanding>,
}

// SAFETY: `piece` points at a `Sync` function, called through a shared reference only, while
// the caller that lent it waits in `in_pieces`.
unsafe impl Send for Job {}

/// The pieces of one copy still running, and whether one panicked.
#[derive(Default)]
struct Outstanding {
    state: Mutex<(usize, bool)>,
    done: Condvar,
}

impl Outstanding {
    fn lock(&self) -> MutexGuard<'_, (usize, bool)> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn finish(&self, panicked: bool) {
        let mut state = self.lock();
        state.0 -= 1;
        state.1 |= panicked;
        if state.0 == 0 {
            self.done.notify_all();
        }
    }

    /// Waits until every handed-out piece finished; whether one panicked.
    fn wait(&self) -> bool {
        let mut state = self.lock();
        while state.0 > 0 {
            state = self.done.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        state.1
    }
}

/// Pieces waiting for a helper.
struct Queue {
    jobs: Mutex<VecDeque<Job>>,
    ready: Condvar,
}

/// The helpers' queue, with the helpers started on first use; `None` where no thread could be
/// started (copies then run on the caller's thread).
fn queue() -> Option<&'static Queue> {
    static QUEUE: OnceLock<Option<&'static Queue>> = OnceLock::new();
    *QUEUE.get_or_init(|| {
        let queue: &'static Queue =
            Box::leak(Box::new(Queue { jobs: Mutex::new(VecDeque::new()), ready: Condvar::new() }));
        let started = (0..HELPERS)
            .filter(|i| {
                let spawned =
                    std::thread::Builder::new().name(format!("sparkle-copy-{i}")).spawn(move || help(queue));
                if let Err(err) = &spawned {
                    tracing::warn!("starting a host copy helper thread: {err}");
                }
                spawned.is_ok()
            })
            .count();
        (started > 0).then_some(queue)
    })
}

/// A helper's life: take a piece, run it, report it, forever.
fn help(queue: &'static Queue) {
    loop {
        let job = {
            let mut jobs = queue.jobs.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                match jobs.pop_front() {
                    Some(job) => break job,
                    None => jobs = queue.ready.wait(jobs).unwrap_or_else(PoisonError::into_inner),
                }
            }
        };
        // SAFETY: the caller that lent `piece` waits in `in_pieces` until this job is reported
        // finished below, so the function is alive; it is `Sync`, so calling it from here is
        // sound.
        let outcome = panic::catch_unwind(AssertUnwindSafe(|| unsafe { (*job.piece)(job.from, job.to) }));
        // The piece is not touched after this: the caller may return as soon as it is reported.
        job.copy.finish(outcome.is_err());
    }
}

/// Waits for a copy's handed-out pieces when dropped, so that the caller's memory outlives them
/// even while the caller unwinds.
struct WaitOnDrop<'a>(&'a Outstanding);

impl Drop for WaitOnDrop<'_> {
    fn drop(&mut self) {
        self.0.wait();
    }
}

/// Runs `piece(from, to)` over `0..len` in `pieces` disjoint parts (each a multiple of 4 KiB but
/// the last), the first on this thread and the others on the helpers, and returns once all are
/// done. A panic in any part is passed on after every part finished. `piece` must not itself split
/// work here: helpers waiting for helpers could wait forever.
pub(crate) fn in_pieces(len: usize, pieces: usize, piece: &Piece<'_>) {
    let size = len.div_ceil(pieces.max(1)).next_multiple_of(4096);
    let queue = match queue() {
        Some(queue) if pieces > 1 && size < len => queue,
        _ => return piece(0, len),
    };
    let starts: Vec<usize> = (size..len).step_by(size).collect();
    let copy = Arc::new(Outstanding { state: Mutex::new((starts.len(), false)), done: Condvar::new() });
    // SAFETY: only the lifetime is erased. Every job holding the pointer is reported finished
    // before `wait` below returns, and `wait` runs before this function returns or unwinds (the
    // guard), so no helper calls `piece` after the borrow ends.
    let erased = unsafe { std::mem::transmute::<*const Piece<'_>, *const Piece<'static>>(piece) };
    let guard = WaitOnDrop(&copy);
    {
        let mut jobs = queue.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        for &from in &starts {
            jobs.push_back(Job { piece: erased, from, to: (from + size).min(len), copy: copy.clone() });
        }
    }
    for _ in &starts {
        queue.ready.notify_one();
    }
    piece(0, size);
    drop(guard);
    if copy.wait() {
        panic!("a piece of a host copy panicked on a helper thread");
    }
}

#[cfg(test)]
mod tests {
    use super::in_pieces;
    use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
    use std::time::Duration;

    /// Every byte of the range is copied exactly once, whatever the split.
    fn covers_once(len: usize, pieces: usize) {
        let hits: Vec<AtomicU8> = (0..len).map(|_| AtomicU8::new(0)).collect();
        in_pieces(len, pieces, &|from, to| {
            assert!(from <= to && to <= len, "{from}..{to} of {len}");
            hits[from..to].iter().for_each(|hit| {
                hit.fetch_add(1, Ordering::Relaxed);
            });
        });
        let wrong = hits.iter().position(|hit| hit.load(Ordering::Relaxed) != 1);
        assert_eq!(wrong, None, "{len} bytes in {pieces} pieces: the first byte not copied exactly once");
    }

    #[test]
    fn pieces_cover_the_range_exactly_once() {
        for (len, pieces) in
            [(0, 4), (1, 4), (4096, 4), (4097, 2), (3 << 20, 3), ((5 << 20) + 13, 4), (100, 1)]
        {
            covers_once(len, pieces);
        }
    }

    #[test]
    fn copies_from_several_threads_at_once_each_cover_their_range() {
        std::thread::scope(|scope| {
            for t in 0..4 {
                scope.spawn(move || {
                    for round in 0..20 {
                        covers_once((1 << 20) + 4096 * (t + round), 4);
                    }
                });
            }
        });
    }

    #[test]
    fn a_panicking_piece_is_passed_on_after_every_piece_finished() {
        let slow_piece_done = AtomicBool::new(false);
        let outcome = std::panic::catch_unwind(|| {
            in_pieces(3 * 4096, 3, &|from, _| {
                if from == 0 {
                    panic!("the caller's own piece");
                }
                std::thread::sleep(Duration::from_millis(50));
                slow_piece_done.store(true, Ordering::SeqCst);
            })
        });
        assert!(outcome.is_err());
        assert!(
            slow_piece_done.load(Ordering::SeqCst),
            "the caller unwound before the helpers' pieces ended"
        );

        let outcome = std::panic::catch_unwind(|| {
            in_pieces(2 * 4096, 2, &|from, _| assert_eq!(from, 0, "a helper's piece"));
        });
        let message = outcome.unwrap_err();
        let message = message.downcast_ref::<&str>().copied().unwrap_or_default();
        assert!(message.contains("panicked on a helper thread"), "{message}");
        // The helpers survive their pieces' panics.
        covers_once(4 << 20, 4);
    }
}
