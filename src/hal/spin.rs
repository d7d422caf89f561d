//! Short busy-waits before blocking, for every thread that waits on the GPU's behalf. A thread
//! woken through a condition variable or a driver's blocking wait runs again tens of
//! microseconds after the event (more in a virtual machine); a dispatch → result round trip
//! passes through several such hand-offs, so each one first polls and only then sleeps.
//!
//! This file holds what the runtime and any backend share: the window `SPARKLE_SPIN_US` asks
//! for ([`window`]: the runtime reads it before a backend's settle-and-read, and a
//! [`Timeline`](super::Timeline) starts with it), the poll loop itself, and the host's core
//! count. How the gl backend sizes its own windows per device (a long wait window on a GPU
//! host with enough cores, none on a CPU renderer, a short idle window for its GL thread) is
//! the gl backend's business: `gl/polling.rs`.
//!
//! `SPARKLE_SPIN_US` sets the window in microseconds (0: never poll, always sleep at once; at
//! most 10 ms); unset, it is [`DEFAULT_WINDOW`].

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The environment variable that sets the polling window.
pub const SPIN_ENV: &str = "SPARKLE_SPIN_US";

/// The window where `SPARKLE_SPIN_US` is unset: 50 µs.
pub const DEFAULT_WINDOW: Duration = Duration::from_micros(50);

/// Polling spins without yielding for this long; past it, each round offers the core to other
/// threads first, which costs a long wait about a microsecond of latency.
const TIGHT_SPIN: Duration = Duration::from_micros(50);

/// Longest window accepted: polling longer than this only burns a core.
const MAX_WINDOW: Duration = Duration::from_millis(10);

/// The window of a device that sets none of its own: `SPARKLE_SPIN_US`, else
/// [`DEFAULT_WINDOW`].
pub fn window() -> Duration {
    asked_window().unwrap_or(DEFAULT_WINDOW)
}

/// The window `SPARKLE_SPIN_US` asks for (at most 10 ms), if it is set to a number.
pub fn asked_window() -> Option<Duration> {
    static ASKED: OnceLock<Option<Duration>> = OnceLock::new();
    *ASKED.get_or_init(|| parse_window(std::env::var(SPIN_ENV).ok().as_deref()))
}

/// The host's logical CPUs, asked once: `available_parallelism` reads the cgroup's CPU quota from
/// files on each call, which costs far more than a small copy or a short wait.
pub fn host_cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
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
