//! Host copies through a Staging buffer's mapping, as a hint to the GL thread. Such a copy runs
//! on the caller's thread, not as a GL job, and a submission usually follows it: a staged upload
//! writes the mapping, then records the device copy that reads it. The GL thread between jobs
//! polls for the next one for its idle window (50 µs) and then sleeps, and a host copy of 1 MiB
//! or more takes longer than that, so the submission behind it found the thread asleep and waited
//! for it to wake. On an H100 (driver 580.159.04) that cost a staged upload 7–15 µs: a device
//! copy of 1 MiB took 38 µs alone and 45–59 µs after the host's write or a 150 µs pause.
//!
//! So while a host copy is in flight, and for the idle window after the last one ends, the GL
//! thread keeps polling, within the wait window (`polling.rs`): on hosts with few cores and on
//! CPU renderers that window is the idle one, and nothing changes there.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Host copies in flight, and when the last one ended.
#[derive(Default)]
pub(crate) struct HostCopies {
    in_flight: AtomicUsize,
    /// When the last copy ended ([`super::polling::now_ns`]); 0: none yet.
    last_end: AtomicU64,
}

/// A host copy in flight; dropping it records its end.
pub(crate) struct HostCopy<'a> {
    copies: &'a HostCopies,
}

impl HostCopies {
    /// Marks a host copy in flight until the guard drops.
    pub(crate) fn start(&self) -> HostCopy<'_> {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        HostCopy { copies: self }
    }

    /// Whether a host copy is in flight or one ended less than `window` ago: a submission may
    /// follow soon.
    pub(crate) fn active_within(&self, window: Duration) -> bool {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return true;
        }
        let last_end = self.last_end.load(Ordering::Acquire);
        last_end != 0 && super::polling::now_ns().saturating_sub(last_end) < window.as_nanos() as u64
    }
}

impl Drop for HostCopy<'_> {
    fn drop(&mut self) {
        self.copies.last_end.store(super::polling::now_ns().max(1), Ordering::Release);
        self.copies.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Active while a copy runs and for the window after the last one ends, then not.
    #[test]
    fn a_copy_keeps_the_hint_while_it_runs_and_for_the_window_after() {
        let copies = HostCopies::default();
        let window = Duration::from_millis(50);
        assert!(!copies.active_within(window), "no copy yet");
        let first = copies.start();
        let second = copies.start();
        assert!(copies.active_within(Duration::ZERO), "two in flight");
        drop(first);
        assert!(copies.active_within(Duration::ZERO), "one still in flight");
        drop(second);
        assert!(!copies.active_within(Duration::ZERO), "none in flight, no window");
        assert!(copies.active_within(Duration::from_secs(3600)), "within the window after the end");
        std::thread::sleep(window * 2);
        assert!(!copies.active_within(window), "the window after the end has passed");
    }
}
