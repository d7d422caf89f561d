//! `Timeline`: fence values signalled by a backend's worker (the GL thread, the test suite's fake
//! backends) and waited on by any thread with a timeout — so that waiting never needs the
//! worker, which may be busy inside a long kernel. It is the seam's fence contract (values 1,
//! 2, 3… completed in order, a failed submission reported by its wait) as a ready-made type,
//! for any backend whose device work runs on a thread of its own.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::{Error, Result};

#[derive(Default)]
struct State {
    issued: u64,
    completed: u64,
    /// Submissions that failed on the device, by fence value; reported to their waiters.
    failures: BTreeMap<u64, Error>,
    /// Set when the worker can complete nothing any more.
    lost: Option<Error>,
    /// Threads sleeping on `changed`: the signaller makes the system call to wake them only
    /// when there are some (a polling waiter sees `settled` by itself).
    sleepers: usize,
}

/// Fence values 1, 2, 3… in submission order, completed in the same order.
pub struct Timeline {
    state: Mutex<State>,
    changed: Condvar,
    /// `state.completed` (or `u64::MAX` once lost), readable without the lock while a waiter
    /// polls (see `spin`).
    settled: AtomicU64,
    /// How long the worker polls for more work when nobody waits, in nanoseconds (`spin`).
    idle_ns: AtomicU64,
    /// How long a waiter polls `settled` before sleeping, in nanoseconds (`spin`).
    wait_ns: AtomicU64,
    /// Threads inside [`Timeline::wait`], polling or asleep: while there are some, the worker
    /// polls for the wait window too (`spin`).
    waiters: AtomicUsize,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline {
            state: Mutex::default(),
            changed: Condvar::new(),
            settled: AtomicU64::new(0),
            idle_ns: AtomicU64::new(nanos(super::spin::window())),
            wait_ns: AtomicU64::new(nanos(super::spin::window())),
            waiters: AtomicUsize::new(0),
        }
    }
}

/// One thread counted in [`Timeline::waiters`] while it lives.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn enter(waiters: &'a AtomicUsize) -> Self {
        waiters.fetch_add(1, Ordering::AcqRel);
        Waiting(waiters)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn nanos(window: Duration) -> u64 {
    window.as_nanos().min(u128::from(u64::MAX)) as u64
}

/// Failures kept for waiters that have not asked yet; older ones are dropped first.
const MAX_KEPT_FAILURES: usize = 1024;

impl Timeline {
    /// A timeline with nothing issued: every fence value up to 0 counts as completed.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets how long threads poll before sleeping: `idle`, a worker that nobody waits for;
    /// `wait`, a thread waiting for a fence (zero for a device that computes on the host's
    /// cores, where polling would take a core from its kernels). Both start as
    /// [`spin::window`](super::spin::window).
    pub fn set_spin_windows(&self, idle: Duration, wait: Duration) {
        self.idle_ns.store(nanos(idle), Ordering::Relaxed);
        self.wait_ns.store(nanos(wait), Ordering::Relaxed);
    }

    /// How long a thread that nobody waits for polls for more work before sleeping.
    pub fn idle_window(&self) -> Duration {
        Duration::from_nanos(self.idle_ns.load(Ordering::Relaxed))
    }

    /// How long a thread that waits for a result polls before sleeping.
    pub fn wait_window(&self) -> Duration {
        Duration::from_nanos(self.wait_ns.load(Ordering::Relaxed))
    }

    /// Whether a thread is inside [`wait`](Self::wait) now.
    pub fn has_waiters(&self) -> bool {
        self.waiters.load(Ordering::Acquire) > 0
    }

    /// The next fence value; call once per submission, in submission order.
    pub fn issue(&self) -> u64 {
        let mut state = self.lock();
        state.issued += 1;
        state.issued
    }

    /// Marks every submission up to `fence` completed.
    pub fn signal(&self, fence: u64) {
        let mut state = self.lock();
        state.completed = state.completed.max(fence);
        self.settled.fetch_max(state.completed, Ordering::AcqRel);
        if state.sleepers > 0 {
            self.changed.notify_all();
        }
    }

    /// Records that submission `fence` failed with `error`; its waiters get the error once it
    /// is signalled, in order with the submissions before it.
    pub fn fail(&self, fence: u64, error: Error) {
        let mut state = self.lock();
        state.failures.insert(fence, error);
        while state.failures.len() > MAX_KEPT_FAILURES {
            state.failures.pop_first();
        }
    }

    /// Marks the device lost: every unfinished and later submission fails with `error`.
    pub fn lose(&self, error: Error) {
        let mut state = self.lock();
        state.lost.get_or_insert(error);
        self.settled.store(u64::MAX, Ordering::Release);
        self.changed.notify_all();
    }

    /// Whether `fence` has settled (completed or failed) or the device was lost, without
    /// taking the lock.
    pub fn reached(&self, fence: u64) -> bool {
        self.settled.load(Ordering::Acquire) >= fence
    }

    /// The highest fence value whose submission, and every earlier one, completed.
    pub fn completed(&self) -> u64 {
        self.lock().completed
    }

    /// The highest value issued so far.
    pub fn issued(&self) -> u64 {
        self.lock().issued
    }

    /// Waits for `fence`: `Ok(true)` once it completed, `Ok(false)` after `timeout`.
    pub fn wait(&self, fence: u64, timeout: Duration) -> Result<bool> {
        if timeout.is_zero() {
            return self.wait_counted(fence, timeout);
        }
        let _counted = Waiting::enter(&self.waiters);
        self.wait_counted(fence, timeout)
    }

    fn wait_counted(&self, fence: u64, timeout: Duration) -> Result<bool> {
        if !timeout.is_zero() {
            super::spin::poll_within(self.wait_window().min(timeout), || self.reached(fence));
        }
        let deadline = Instant::now().checked_add(timeout);
        let mut state = self.lock();
        loop {
            if state.completed >= fence {
                return match state.failures.get(&fence) {
                    Some(error) => Err(error.clone()),
                    None => Ok(true),
                };
            }
            if let Some(error) = &state.lost {
                return Err(error.clone());
            }
            let now = Instant::now();
            let remaining = match deadline {
                Some(deadline) if deadline <= now => return Ok(false),
                Some(deadline) => deadline - now,
                None => Duration::from_secs(3600),
            };
            state.sleepers += 1;
            state = self.changed.wait_timeout(state, remaining).unwrap_or_else(PoisonError::into_inner).0;
            state.sleepers -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn waits_time_out_complete_and_report_failures() {
        let timeline = std::sync::Arc::new(Timeline::new());
        let (a, b) = (timeline.issue(), timeline.issue());
        assert_eq!((a, b), (1, 2));
        assert!(!timeline.wait(a, Duration::from_millis(10)).unwrap());
        let signaller = {
            let timeline = timeline.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                timeline.fail(b, Error::new(ErrorKind::DeviceLost, "boom"));
                timeline.signal(b);
            })
        };
        assert!(timeline.wait(a, Duration::from_secs(10)).unwrap());
        signaller.join().unwrap();
        assert_eq!(timeline.wait(b, Duration::ZERO).unwrap_err().kind(), ErrorKind::DeviceLost);
        let c = timeline.issue();
        timeline.lose(Error::new(ErrorKind::DeviceLost, "gone"));
        assert!(timeline.wait(c, Duration::from_secs(1)).is_err());
    }

    #[test]
    fn a_waiter_is_counted_while_it_waits_and_only_then() {
        let timeline = std::sync::Arc::new(Timeline::new());
        let fence = timeline.issue();
        assert!(!timeline.has_waiters());
        assert!(!timeline.wait(fence, Duration::ZERO).unwrap(), "a zero timeout only asks");
        assert!(!timeline.has_waiters(), "asking is not waiting");
        let waiter = {
            let timeline = timeline.clone();
            std::thread::spawn(move || timeline.wait(fence, Duration::from_secs(30)))
        };
        let seen = Instant::now();
        while !timeline.has_waiters() {
            assert!(seen.elapsed() < Duration::from_secs(30), "the waiter was never counted");
            std::thread::yield_now();
        }
        timeline.signal(fence);
        assert!(waiter.join().unwrap().unwrap());
        assert!(!timeline.has_waiters(), "a waiter that returned is not counted");
        assert!(!timeline.wait(timeline.issue(), Duration::from_millis(1)).unwrap());
        assert!(!timeline.has_waiters(), "nor one that timed out");
    }
}
