//! How long the gl backend's threads poll before they sleep, per device, and the clock their
//! polling deadlines use. The poll loop and `SPARKLE_SPIN_US` are shared with the runtime
//! (`hal/spin.rs`); the sizing of the windows below is the gl backend's own, since only its GL
//! thread, fence watching and host copy helpers poll this way.
//!
//! Two windows. A thread that only might get work soon (the GL thread between jobs) polls for
//! the short *idle* window, 50 µs (the GL thread polls on, within the wait window, while the
//! host copies through a mapping and a submission is likely to follow: `host_copies.rs`). A
//! thread that waits for a result someone asked for — a caller in `wait` or a read, and the GL
//! thread watching fences while such a caller exists — polls for the *wait* window, 10 ms, as
//! CUDA's default synchronisation spins while a host has more cores than busy GPU contexts.
//! Sleeping there cost a single call of 0.1–4 ms of GPU work 20–60 µs more than polling did
//! (H100, `sparkle bench`); a wait that outlasts the window polls for it once and then sleeps,
//! and a host with fewer than [`CORES_FOR_LONG_WAITS`] cores keeps the idle window for waits
//! too, so that two polling threads never hold most of its cores.
//!
//! Polling pays only where the work runs elsewhere. A CPU renderer (Mesa's llvmpipe) runs kernels
//! on the host's own cores, and a thread polling for their end takes a core from them: on two
//! cores it made a round trip 1.7× slower than sleeping at once. So a device that computes on the
//! host polls for no time unless the user asked for a window.
//!
//! `SPARKLE_SPIN_US` sets the wait window in microseconds (0: never poll, always sleep at once);
//! the idle window is the smaller of it and 50 µs.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::hal::spin::{asked_window, DEFAULT_WINDOW};

/// The wait window for a GPU on a host with enough cores, when `SPARKLE_SPIN_US` is unset.
const DEFAULT_WAIT_WINDOW: Duration = Duration::from_millis(10);

/// Logical CPUs a host needs before waits poll for the long window (10 ms): a waiter and the GL
/// thread may both poll, which should leave most of the cores to the application.
pub(crate) const CORES_FOR_LONG_WAITS: usize = 4;

/// How long threads poll before they sleep (see the module's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Windows {
    /// A thread that may get work soon but that nobody waits for.
    pub idle: Duration,
    /// A thread that waits for a result someone asked for.
    pub wait: Duration,
}

/// The (idle, wait) windows for a device; `on_host`: it computes on the host's cores (a CPU
/// renderer); `cores`: the host's logical CPUs.
pub(crate) fn windows_for(on_host: bool, cores: usize) -> Windows {
    let wait = match asked_window() {
        Some(window) => window,
        None if on_host => Duration::ZERO,
        None if cores < CORES_FOR_LONG_WAITS => DEFAULT_WINDOW,
        None => DEFAULT_WAIT_WINDOW,
    };
    Windows { idle: wait.min(DEFAULT_WINDOW), wait }
}

/// Nanoseconds since a process-wide instant (the first call): a monotonic clock that fits in an
/// atomic, for deadlines and timestamps that threads share without a lock.
pub(crate) fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos().min(u64::MAX as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_follow_the_device_and_the_host() {
        if std::env::var_os(crate::hal::spin::SPIN_ENV).is_some() {
            return;
        }
        let zero = Windows { idle: Duration::ZERO, wait: Duration::ZERO };
        assert_eq!(windows_for(true, 64), zero, "a CPU renderer does not poll");
        let short = Windows { idle: DEFAULT_WINDOW, wait: DEFAULT_WINDOW };
        assert_eq!(windows_for(false, CORES_FOR_LONG_WAITS - 1), short, "few cores: short waits");
        let long = Windows { idle: DEFAULT_WINDOW, wait: DEFAULT_WAIT_WINDOW };
        assert_eq!(windows_for(false, CORES_FOR_LONG_WAITS), long);
    }

    #[test]
    fn the_clock_never_runs_backwards() {
        let (a, b) = (now_ns(), now_ns());
        assert!(b >= a);
    }
}
