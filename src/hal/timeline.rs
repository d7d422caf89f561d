//! `Timeline`: fence values signalled by a backend's worker (the GL thread, a simulated GPU) and
//! waited on by any thread with a timeout — so that waiting never needs the worker, which may be
//! busy inside a long kernel.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// How long a waiter polls `settled` before sleeping, in nanoseconds.
    spin_ns: AtomicU64,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline {
            state: Mutex::default(),
            changed: Condvar::new(),
            settled: AtomicU64::new(0),
            spin_ns: AtomicU64::new(super::spin::window().as_nanos() as u64),
        }
    }
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

    /// Sets how long waiters poll before sleeping (see `spin`: zero for a device that computes
    /// on the host's cores).
    pub fn set_spin_window(&self, window: Duration) {
        self.spin_ns.store(window.as_nanos().min(u128::from(u64::MAX)) as u64, Ordering::Relaxed);
    }

    /// How long waiters poll before sleeping.
    pub fn spin_window(&self) -> Duration {
        Duration::from_nanos(self.spin_ns.load(Ordering::Relaxed))
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
        if !timeout.is_zero() {
            super::spin::poll_within(self.spin_window(), || self.reached(fence));
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
}
