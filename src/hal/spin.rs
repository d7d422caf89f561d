//! Short busy-waits before blocking. A thread woken through a condition variable or a driver's
//! blocking wait runs again tens of microseconds after the event (more in a virtual machine); a
//! dispatch → result round trip passes through several such hand-offs (submission to the GL
//! thread, fence to the waiter, read-back to the GL thread and back), so each one first polls
//! and only then sleeps.
//!
//! Two windows. A thread that only might get work soon (the GL thread between jobs) polls for
//! the short *idle* window, 50 µs (the GL thread polls on, within the wait window, while the
//! host copies through a mapping and a submission is likely to follow: `gl/host_copies.rs`). A
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

/// The environment variable that sets the polling window.
pub const SPIN_ENV: &str = "SPARKLE_SPIN_US";

/// The idle window, and the wait window where waits do not poll long.
const DEFAULT_WINDOW: Duration = Duration::from_micros(50);

/// The wait window for a GPU on a host with enough cores, when `SPARKLE_SPIN_US` is unset.
const DEFAULT_WAIT_WINDOW: Duration = Duration::from_millis(10);

/// Logical CPUs a host needs before waits poll for the long window (10 ms): a waiter and the GL
/// thread may both poll, which should leave most of the cores to the application.
pub const CORES_FOR_LONG_WAITS: usize = 4;

/// Polling spins without yielding for this long; past it, each round offers the core to other
/// threads first, which costs a long wait about a microsecond of latency.
const TIGHT_SPIN: Duration = Duration::from_micros(50);

/// Longest window accepted: polling longer than this only burns a core.
const MAX_WINDOW: Duration = Duration::from_millis(10);

/// Both windows of a device that sets none of its own: `SPARKLE_SPIN_US`, else 50 µs.
pub fn window() -> Duration {
    asked().unwrap_or(DEFAULT_WINDOW)
}

/// The (idle, wait) windows for a device; `on_host`: it computes on the host's cores (a CPU
/// renderer); `cores`: the host's logical CPUs.
pub fn windows_for(on_host: bool, cores: usize) -> Windows {
    let wait = match asked() {
        Some(window) => window,
        None if on_host => Duration::ZERO,
        None if cores < CORES_FOR_LONG_WAITS => DEFAULT_WINDOW,
        None => DEFAULT_WAIT_WINDOW,
    };
    Windows { idle: wait.min(DEFAULT_WINDOW), wait }
}

/// How long threads poll before they sleep (see the module's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Windows {
    /// A thread that may get work soon but that nobody waits for.
    pub idle: Duration,
    /// A thread that waits for a result someone asked for.
    pub wait: Duration,
}

/// Nanoseconds since a process-wide instant (the first call): a monotonic clock that fits in an
/// atomic, for deadlines and timestamps that threads share without a lock.
pub fn now_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos().min(u64::MAX as u128) as u64
}

/// The host's logical CPUs, asked once: `available_parallelism` reads the cgroup's CPU quota from
/// files on each call, which costs far more than a small copy or a short wait.
pub fn host_cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The window `SPARKLE_SPIN_US` asks for, if set.
fn asked() -> Option<Duration> {
    static ASKED: OnceLock<Option<Duration>> = OnceLock::new();
    *ASKED.get_or_init(|| parse_window(std::env::var(SPIN_ENV).ok().as_deref()))
}

fn parse_window(value: Option<&str>) -> Option<Duration> {
    let text = value.map(str::trim).filter(|v| !v.is_empty())?;
    match text.parse::<u64>() {
        Ok(micros) => Some(Duration::from_micros(micros).min(MAX_WINDOW)),
        Err(_) => {
            tracing::warn!("{SPIN_ENV}={text:?} is not a number of microseconds; using the default window");
            None
        }
    }
}

/// Polls `ready` until it returns `true` (then `true`) or [`window`] passes (then `false`).
pub fn poll(ready: impl FnMut() -> bool) -> bool {
    poll_within(window(), ready)
}

/// Polls `ready` until it returns `true` (then `true`) or `window` passes (then `false`); a zero
/// window asks once.
pub fn poll_within(window: Duration, mut ready: impl FnMut() -> bool) -> bool {
    if window.is_zero() {
        return ready();
    }
    let started = Instant::now();
    loop {
        if ready() {
            return true;
        }
        let elapsed = started.elapsed();
        if elapsed >= window {
            return false;
        }
        if elapsed < TIGHT_SPIN {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_comes_from_the_environment_within_bounds() {
        assert_eq!(parse_window(None), None);
        assert_eq!(parse_window(Some(" ")), None);
        assert_eq!(parse_window(Some("0")), Some(Duration::ZERO));
        assert_eq!(parse_window(Some("120")), Some(Duration::from_micros(120)));
        assert_eq!(parse_window(Some("99999999")), Some(MAX_WINDOW));
        assert_eq!(parse_window(Some("fast")), None);
        if std::env::var_os(SPIN_ENV).is_none() {
            let zero = Windows { idle: Duration::ZERO, wait: Duration::ZERO };
            assert_eq!(windows_for(true, 64), zero, "a CPU renderer does not poll");
            let short = Windows { idle: DEFAULT_WINDOW, wait: DEFAULT_WINDOW };
            assert_eq!(windows_for(false, CORES_FOR_LONG_WAITS - 1), short, "few cores: short waits");
            let long = Windows { idle: DEFAULT_WINDOW, wait: DEFAULT_WAIT_WINDOW };
            assert_eq!(windows_for(false, CORES_FOR_LONG_WAITS), long);
        }
    }

    #[test]
    fn polling_stops_at_readiness_or_after_the_window() {
        let mut calls = 0;
        assert!(poll(|| {
            calls += 1;
            calls == 3
        }));
        assert_eq!(calls, 3);
        let started = Instant::now();
        let ready = poll(|| false);
        assert!(!ready);
        assert!(started.elapsed() >= window());
        let mut asked = 0;
        assert!(!poll_within(Duration::ZERO, || {
            asked += 1;
            false
        }));
        assert_eq!(asked, 1, "a zero window asks once");
    }
}
