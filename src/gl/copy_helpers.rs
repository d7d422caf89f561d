//! Long-lived helper threads for host copies split into parts. Starting a thread cost 37–68 µs
//! in the H100's guests (one to three scoped threads around nothing), which every copy of 2 MiB
//! and more through a staging buffer's mapping paid, each 8 MiB chunk of a ring transfer too;
//! waking a thread that already waits costs less, but still tens of microseconds where its CPU
//! had gone idle. So parts are not handed out in advance: the caller and the helpers it woke
//! claim them one at a time, a helper that wakes late finds fewer or none left, and the caller
//! waits only for parts already being copied, never for a helper that has not started. A copy
//! returns once every part is done — also when a part panics, a panic it then passes on — so
//! parts may borrow the caller's memory. A caller that knows a copy is coming (a read-back
//! waiting for its device copy) wakes helpers ahead of it ([`wake_ahead`]), and they poll for it
//! instead of sleeping, no more than seven at once.

use std::any::Any;
use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

/// Helper threads: two copies at once (a pipeline's upload and read-back overlap) each get
/// seven, the most helpers one copy asks for (see `memory.rs`).
const HELPERS: usize = 14;

/// The most helpers that poll at once while a [`wake_ahead`] window is open: one copy's worth.
/// The others sleep as usual, so that two copies' helpers polling never crowd out the threads
/// that feed the GPU.
const MOST_POLLING: usize = HELPERS / 2;

/// A part of a copy: copies bytes `from..to` of it.
type Piece<'a> = dyn Fn(usize, usize) + Sync + 'a;

/// One copy in progress, shared by its caller and the helpers it asked for.
struct SplitCopy {
    /// The caller's part function with its lifetime erased; see [`in_pieces`] for why it is
    /// never called after the borrow ends.
    piece: *const Piece<'static>,
    len: usize,
    part: usize,
    /// The next part to claim, counted from 0; past the last one, nothing is left.
    next: AtomicUsize,
    /// Helpers that took this copy from the queue and have not yet reported back, and whether
    /// a part panicked.
    state: Mutex<(usize, bool)>,
    done: Condvar,
}

// SAFETY: `piece` points at a `Sync` function, called through a shared reference only, and only
// for a part claimed while the caller that lent it waits in `in_pieces`.
unsafe impl Send for SplitCopy {}
// SAFETY: as above; every other field is itself `Sync`.
unsafe impl Sync for SplitCopy {}

impl SplitCopy {
    fn lock(&self) -> MutexGuard<'_, (usize, bool)> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Claims and copies parts until none is left; the panic of a part, if one panicked (the
    /// claiming stops there for everyone: the copy fails anyway).
    fn claim_parts(&self) -> Option<Box<dyn Any + Send>> {
        loop {
            let index = self.next.fetch_add(1, Ordering::Relaxed);
            let from = index.saturating_mul(self.part);
            if from >= self.len {
                return None;
            }
            let to = from.saturating_add(self.part).min(self.len);
            // SAFETY: this part was claimed before the caller stopped waiting (see
            // `in_pieces`), so the function it lent is alive; it is `Sync`.
            let outcome = panic::catch_unwind(AssertUnwindSafe(|| unsafe { (*self.piece)(from, to) }));
            if let Err(panic) = outcome {
                self.stop_claiming();
                return Some(panic);
            }
        }
    }

    /// Leaves no part to claim.
    fn stop_claiming(&self) {
        self.next.store(usize::MAX / 2, Ordering::Relaxed);
    }

    /// A helper is done with this copy.
    fn report(&self, panicked: bool) {
        let mut state = self.lock();
        state.0 -= 1;
        state.1 |= panicked;
        if state.0 == 0 {
            self.done.notify_all();
        }
    }
}

/// Copies waiting for helpers: one entry per helper asked for.
struct Queue {
    jobs: Mutex<VecDeque<Arc<SplitCopy>>>,
    ready: Condvar,
    /// Entries in `jobs`, readable without the lock by helpers that poll.
    queued: AtomicUsize,
    /// [`WokenAhead`] guards alive: while there is one, idle helpers poll for work instead of
    /// sleeping, until `awake_until` at the latest.
    woken_ahead: AtomicUsize,
    /// The latest end ([`super::polling::now_ns`]) of a [`wake_ahead`] window.
    awake_until: AtomicU64,
    /// Helpers polling now; at most [`MOST_POLLING`].
    polling: AtomicUsize,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, VecDeque<Arc<SplitCopy>>> {
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether idle helpers are to poll rather than sleep now.
    fn awake(&self) -> bool {
        self.woken_ahead.load(Ordering::Relaxed) > 0
            && super::polling::now_ns() < self.awake_until.load(Ordering::Relaxed)
    }
}

/// Keeps idle helpers polling for work while alive (see [`wake_ahead`]).
pub(crate) struct WokenAhead {
    queue: Option<&'static Queue>,
    /// The end of this guard's own window ([`super::polling::now_ns`]).
    until: u64,
}

impl WokenAhead {
    /// Whether this guard woke helpers and its window has closed: the copy it was for came
    /// later than its caller expected.
    pub(crate) fn window_passed(&self) -> bool {
        self.queue.is_some() && super::polling::now_ns() > self.until
    }
}

impl Drop for WokenAhead {
    fn drop(&mut self) {
        if let Some(queue) = self.queue {
            queue.woken_ahead.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Wakes up to `helpers` helper threads now, for a split copy the caller knows is coming (a
/// read-back whose device copy is on its way), and keeps idle helpers polling for work while
/// the guard lives, for `most` at the longest. Waking a helper whose CPU had gone idle takes
/// tens of microseconds in a guest, longer than a helper's share of a few-MiB copy, so helpers
/// woken only when the copy starts join late and the caller copies most of it alone; woken
/// ahead, they are polling when it starts. Does nothing where no helper is asked for or none
/// could be started.
pub(crate) fn wake_ahead(helpers: usize, most: Duration) -> WokenAhead {
    let queue = match queue() {
        Some(queue) if helpers > 0 => queue,
        _ => return WokenAhead { queue: None, until: 0 },
    };
    let until = super::polling::now_ns().saturating_add(most.as_nanos().min(u64::MAX as u128) as u64);
    queue.awake_until.fetch_max(until, Ordering::Relaxed);
    queue.woken_ahead.fetch_add(1, Ordering::Relaxed);
    // Taking the lock orders this against a helper between its check of the window and its
    // sleep, so none misses the notification.
    drop(queue.lock());
    for _ in 0..helpers.min(MOST_POLLING) {
        queue.ready.notify_one();
    }
    WokenAhead { queue: Some(queue), until }
}

/// The helpers' queue, with the helpers started on first use; `None` where no thread could be
/// started (copies then run on the caller's thread).
fn queue() -> Option<&'static Queue> {
    static QUEUE: OnceLock<Option<&'static Queue>> = OnceLock::new();
    *QUEUE.get_or_init(|| {
        let queue: &'static Queue = Box::leak(Box::new(Queue {
            jobs: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
            queued: AtomicUsize::new(0),
            woken_ahead: AtomicUsize::new(0),
            awake_until: AtomicU64::new(0),
            polling: AtomicUsize::new(0),
        }));
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

/// A helper's life: take a copy, claim its parts until none is left, report back, forever.
/// Between copies it sleeps, except while [`wake_ahead`]'s window is open: then it polls.
fn help(queue: &'static Queue) {
    loop {
        let copy = loop {
            let mut jobs = queue.lock();
            if let Some(copy) = jobs.pop_front() {
                queue.queued.fetch_sub(1, Ordering::Relaxed);
                break copy;
            }
            if queue.awake() {
                if queue.polling.fetch_add(1, Ordering::Relaxed) < MOST_POLLING {
                    drop(jobs);
                    // Polled as every wait polls, offering the core to other threads after a
                    // short spin, so that a thread waiting for this CPU (the GL thread, the
                    // fence thread, the caller) gets it.
                    let left =
                        queue.awake_until.load(Ordering::Relaxed).saturating_sub(super::polling::now_ns());
                    crate::hal::spin::poll_within(Duration::from_nanos(left), || {
                        queue.queued.load(Ordering::Relaxed) > 0 || !queue.awake()
                    });
                    queue.polling.fetch_sub(1, Ordering::Relaxed);
                    continue;
                }
                queue.polling.fetch_sub(1, Ordering::Relaxed);
            }
            drop(queue.ready.wait(jobs).unwrap_or_else(PoisonError::into_inner));
        };
        let panicked = copy.claim_parts().is_some();
        // The part function is not touched after this: the caller may return once all report.
        copy.report(panicked);
    }
}

/// Ends a copy when dropped, also while the caller unwinds: takes back the entries no helper
/// took yet, then waits for the helpers that did, so that the caller's memory outlives every
/// part. Whether a helper's part panicked.
struct Finish<'a> {
    queue: &'a Queue,
    copy: &'a Arc<SplitCopy>,
}

impl Finish<'_> {
    fn wait(&self) -> bool {
        // Nothing more is claimed, also where the caller stopped early because it unwound.
        self.copy.stop_claiming();
        let untaken = {
            let mut jobs = self.queue.lock();
            let before = jobs.len();
            jobs.retain(|job| !Arc::ptr_eq(job, self.copy));
            let untaken = before - jobs.len();
            self.queue.queued.fetch_sub(untaken, Ordering::Relaxed);
            untaken
        };
        let mut state = self.copy.lock();
        state.0 -= untaken;
        while state.0 > 0 {
            state = self.copy.done.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        state.1
    }
}

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        self.wait();
    }
}

/// Runs `piece(from, to)` over `0..len` in parts of `part` bytes (rounded up to a multiple of
/// 4 KiB; the last part may be shorter), claimed one at a time by this thread and by up to
/// `helpers` helper threads, and returns once every part is done. A helper that is slow to wake
/// takes fewer parts, or none; this thread copies what they leave. A panic in any part is
/// passed on after every part that began has finished.
pub(crate) fn in_pieces(len: usize, part: usize, helpers: usize, piece: &Piece<'_>) {
    let part = part.max(1).next_multiple_of(4096);
    let helpers = helpers.min(len.div_ceil(part).saturating_sub(1));
    let queue = match queue() {
        Some(queue) if helpers > 0 => queue,
        _ => return piece(0, len),
    };
    // SAFETY: only the lifetime is erased. A part is claimed only while `next` is below the
    // number of parts; `Finish` stops the claiming, takes back every entry no helper took, and
    // waits until each helper that took one has reported (after its last claim), before this
    // function returns or unwinds. So no helper calls `piece` after the borrow ends.
    let erased = unsafe { std::mem::transmute::<*const Piece<'_>, *const Piece<'static>>(piece) };
    let copy = Arc::new(SplitCopy {
        piece: erased,
        len,
        part,
        next: AtomicUsize::new(0),
        state: Mutex::new((helpers, false)),
        done: Condvar::new(),
    });
    let finish = Finish { queue, copy: &copy };
    {
        let mut jobs = queue.lock();
        jobs.extend(std::iter::repeat_n(copy.clone(), helpers));
        queue.queued.fetch_add(helpers, Ordering::Relaxed);
    }
    for _ in 0..helpers {
        queue.ready.notify_one();
    }
    let panicked_here = copy.claim_parts();
    let panicked_on_helper = finish.wait();
    // Waited for above; the guard is for unwinding.
    std::mem::forget(finish);
    if let Some(panic) = panicked_here {
        panic::resume_unwind(panic);
    }
    if panicked_on_helper {
        panic!("a part of a host copy panicked on a helper thread");
    }
}

#[cfg(test)]
mod tests {
    use super::{in_pieces, wake_ahead, HELPERS};
    use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    /// Every byte of the range is copied exactly once, whatever the split.
    fn covers_once(len: usize, part: usize, helpers: usize) {
        let hits: Vec<AtomicU8> = (0..len).map(|_| AtomicU8::new(0)).collect();
        in_pieces(len, part, helpers, &|from, to| {
            assert!(from <= to && to <= len, "{from}..{to} of {len}");
            hits[from..to].iter().for_each(|hit| {
                hit.fetch_add(1, Ordering::Relaxed);
            });
        });
        let wrong = hits.iter().position(|hit| hit.load(Ordering::Relaxed) != 1);
        assert_eq!(
            wrong, None,
            "{len} bytes in parts of {part} with {helpers} helpers: the first byte not copied exactly once"
        );
    }

    /// Waits up to 20 s for `done`.
    fn eventually(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < deadline, "{what} did not happen within 20 s");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn parts_cover_the_range_exactly_once() {
        for (len, part, helpers) in [
            (0, 4096, 4),
            (1, 4096, 4),
            (4096, 4096, 4),
            (4097, 4096, 2),
            (3 << 20, 1 << 20, 3),
            ((5 << 20) + 13, 64 << 10, 7),
            (100, 4096, 1),
            (1 << 20, 1, 3),
            (1 << 20, 64 << 10, 0),
        ] {
            covers_once(len, part, helpers);
        }
    }

    #[test]
    fn copies_from_several_threads_at_once_each_cover_their_range() {
        std::thread::scope(|scope| {
            for t in 0..4 {
                scope.spawn(move || {
                    for round in 0..20 {
                        covers_once((1 << 20) + 4096 * (t + round), 64 << 10, 7);
                    }
                });
            }
        });
    }

    /// With every helper held by another copy, a copy is not held up: its caller copies every
    /// part itself instead of waiting for a helper to come free.
    #[test]
    fn a_copy_never_waits_for_a_helper_that_has_not_started() {
        let (holding, release) = (AtomicUsize::new(0), AtomicBool::new(false));
        std::thread::scope(|scope| {
            scope.spawn(|| {
                // One part per helper and one for the caller, each held until released.
                in_pieces((HELPERS + 1) * 4096, 4096, HELPERS, &|_, _| {
                    holding.fetch_add(1, Ordering::SeqCst);
                    eventually("the release", || release.load(Ordering::SeqCst));
                });
            });
            eventually("every helper held by the first copy", || {
                holding.load(Ordering::SeqCst) == HELPERS + 1
            });
            covers_once(1 << 20, 4096, 7);
            assert!(!release.load(Ordering::SeqCst));
            release.store(true, Ordering::SeqCst);
        });
    }

    /// Helpers woken ahead poll while the guard lives (within its longest window), copies made
    /// meanwhile (from several threads, each waking ahead again) still cover their ranges exactly
    /// once, and the helpers go back to sleep once the guards are gone, or once the window has
    /// passed with a guard still alive; the count they poll always matches the queue. Nothing
    /// here depends on how fast this test runs: windows are either long or waited out.
    #[test]
    fn helpers_woken_ahead_poll_while_asked_then_sleep() {
        let queue = super::queue().expect("the helper threads start");
        // The longest window any guard asked for bounds every guard: a short one first.
        let stale = wake_ahead(1, Duration::from_millis(20));
        eventually("the window of a guard still alive to pass", || !queue.awake());
        drop(stale);
        let woken = wake_ahead(HELPERS, Duration::from_secs(60));
        assert!(queue.awake(), "helpers poll while a guard lives within its window");
        std::thread::scope(|scope| {
            for t in 0..3 {
                scope.spawn(move || {
                    for round in 0..20 {
                        let _woken = wake_ahead(7, Duration::from_millis(5));
                        covers_once((2 << 20) + 4096 * (t + round), 64 << 10, 7);
                    }
                });
            }
        });
        assert!(queue.awake(), "the first guard still lives");
        drop(woken);
        eventually("the helpers to stop polling once no guard lives", || !queue.awake());
        {
            // Other tests' copies may be queued now; the count must match the queue whatever.
            let jobs = queue.lock();
            assert_eq!(queue.queued.load(Ordering::SeqCst), jobs.len(), "the count of queued entries");
        }
        // Asking for no helper opens no window.
        let none = wake_ahead(0, Duration::from_secs(3600));
        let fifty_minutes_on = crate::gl::polling::now_ns() + 3_000_000_000_000;
        assert!(queue.awake_until.load(Ordering::SeqCst) < fifty_minutes_on, "no helper was asked for");
        drop(none);
        covers_once(1 << 20, 4096, 3);
    }

    /// A guard tells whether its own window closed while it lived; one that woke no helper never
    /// does. Windows stay short: the test beside this one waits for every window to close.
    #[test]
    fn a_guard_knows_whether_its_window_passed() {
        let open = wake_ahead(1, Duration::from_secs(2));
        assert!(!open.window_passed(), "checked at once, well within 2 s");
        let short = wake_ahead(1, Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(5));
        assert!(short.window_passed());
        assert!(!wake_ahead(0, Duration::ZERO).window_passed(), "no helper was woken");
    }

    /// A part that panics on the caller's thread is passed on, but only after the parts that
    /// helpers had begun finished.
    #[test]
    fn a_panic_in_the_callers_part_waits_for_the_helpers_parts() {
        let caller = std::thread::current().id();
        let (helper_began, helper_done) = (AtomicBool::new(false), AtomicBool::new(false));
        let outcome = std::panic::catch_unwind(|| {
            in_pieces(64 * 4096, 4096, 3, &|_, _| {
                if std::thread::current().id() == caller {
                    // Only helpers can claim parts while the caller waits here.
                    eventually("a helper's part", || helper_began.load(Ordering::SeqCst));
                    panic!("the caller's own part");
                }
                helper_began.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(50));
                helper_done.store(true, Ordering::SeqCst);
            })
        });
        let message = outcome.unwrap_err();
        assert_eq!(message.downcast_ref::<&str>().copied(), Some("the caller's own part"));
        assert!(helper_done.load(Ordering::SeqCst), "the caller unwound before a helper's part ended");
    }

    /// A part that panics on a helper is passed on by the caller; the helpers survive it.
    #[test]
    fn a_panic_on_a_helper_is_passed_on_and_the_helpers_survive() {
        let caller = std::thread::current().id();
        let helper_panicked = AtomicBool::new(false);
        let outcome = std::panic::catch_unwind(|| {
            in_pieces(64 * 4096, 4096, 2, &|_, _| {
                if std::thread::current().id() == caller {
                    // Holds the caller in its first part until a helper's part panicked.
                    eventually("a helper's part", || helper_panicked.load(Ordering::SeqCst));
                } else {
                    helper_panicked.store(true, Ordering::SeqCst);
                    panic!("a helper's part");
                }
            })
        });
        let message = outcome.unwrap_err();
        let message = message.downcast_ref::<&str>().copied().unwrap_or_default();
        assert!(message.contains("panicked on a helper thread"), "{message}");
        covers_once(4 << 20, 64 << 10, 7);
    }
}
