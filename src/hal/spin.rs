//! Short busy-waits before blocking. A thread woken through a condition variable or a driver's
//! blocking wait runs again tens of microseconds after the event (more in a virtual machine); a
//! dispatch → result round trip passes through several such hand-offs (submission to the GL
//! thread, fence to the waiter, read-back to the GL thread and back), so each one first polls
//! for a short window and only then sleeps. Longer waits — a kernel that runs for
//! milliseconds — cost the window's CPU time once and then sleep as before.
//!
//! Polling pays only where the work runs elsewhere. A CPU renderer (Mesa's llvmpipe) runs kernels
//! on the host's own cores, and a thread polling for their end takes a core from them: on two
//! cores it made a round trip 1.7× slower than sleeping at once. So a device that computes on the
//! host polls for no time unless the user asked for a window.
//!
//! `SPARKLE_SPIN_US` sets the window in microseconds (0: never poll, always sleep at once).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The environment variable that sets the polling window.
pub const SPIN_ENV: &str = "SPARKLE_SPIN_US";

/// The window when `SPARKLE_SPIN_US` is unset or not a number.
const DEFAULT_WINDOW: Duration = Duration::from_micros(50);

/// Longest window accepted: polling longer than this only burns a core.
const MAX_WINDOW: Duration = Duration::from_millis(10);

/// How long waits for a device that computes elsewhere (a GPU) poll before they block.
pub fn window() -> Duration {
    asked().unwrap_or(DEFAULT_WINDOW)
}

/// The window for a device; `on_host`: it computes on the host's cores (a CPU renderer).
pub fn window_for(on_host: bool) -> Duration {
    match asked() {
        Some(window) => window,
        None if on_host => Duration::ZERO,
        None => DEFAULT_WINDOW,
    }
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
    let deadline = Instant::now() + window;
    loop {
        if ready() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::hint::spin_loop();
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
            assert_eq!(window_for(true), Duration::ZERO, "a CPU renderer does not poll");
            assert_eq!(window_for(false), DEFAULT_WINDOW);
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
