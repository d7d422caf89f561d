//! Short busy-waits before blocking. A thread woken through a condition variable or a driver's
//! blocking wait runs again tens of microseconds after the event (more in a virtual machine); a
//! dispatch → result round trip passes through several such hand-offs (submission to the GL
//! thread, fence to the waiter, read-back to the GL thread and back), so each one first polls
//! for a short window and only then sleeps. Longer waits — a kernel that runs for
//! milliseconds — cost the window's CPU time once and then sleep as before.
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

/// How long waits poll before they block.
pub fn window() -> Duration {
    static WINDOW: OnceLock<Duration> = OnceLock::new();
    *WINDOW.get_or_init(|| parse_window(std::env::var(SPIN_ENV).ok().as_deref()))
}

fn parse_window(value: Option<&str>) -> Duration {
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => DEFAULT_WINDOW,
        Some(text) => match text.parse::<u64>() {
            Ok(micros) => Duration::from_micros(micros).min(MAX_WINDOW),
            Err(_) => {
                tracing::warn!(
                    "{SPIN_ENV}={text:?} is not a number of microseconds; polling for {} µs",
                    DEFAULT_WINDOW.as_micros()
                );
                DEFAULT_WINDOW
            }
        },
    }
}

/// Polls `ready` until it returns `true` (then `true`) or the window passes (then `false`).
pub fn poll(mut ready: impl FnMut() -> bool) -> bool {
    let window = window();
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
        assert_eq!(parse_window(None), DEFAULT_WINDOW);
        assert_eq!(parse_window(Some(" ")), DEFAULT_WINDOW);
        assert_eq!(parse_window(Some("0")), Duration::ZERO);
        assert_eq!(parse_window(Some("120")), Duration::from_micros(120));
        assert_eq!(parse_window(Some("99999999")), MAX_WINDOW);
        assert_eq!(parse_window(Some("fast")), DEFAULT_WINDOW);
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
    }
}
