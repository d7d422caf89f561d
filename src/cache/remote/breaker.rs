//! The fleet tier's circuit breaker: after a few failures in a row (errors, or lookups that ran
//! past their budget) the remote is skipped for a backoff; then one probe is let through
//! (half-open), and its outcome closes the breaker or opens it again with a longer backoff.
//! Unlike a switch that turns the remote off for the rest of the process after one error, a
//! remote that comes back is used again.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures in a row that open the breaker.
const FAILURES_TO_OPEN: u32 = 3;
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed {
        failures: u32,
    },
    /// Skipping until `until`; the next backoff doubles.
    Open {
        until: Instant,
        backoff: Duration,
    },
    /// One probe is out; everyone else skips until it reports.
    HalfOpen {
        backoff: Duration,
    },
}

/// What the breaker says about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Permit {
    Go,
    /// The request is the half-open probe.
    Probe,
    Skip,
}

/// What a failure did to the breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tripped {
    No,
    /// The breaker opened for this long.
    Opened(Duration),
}

pub(crate) struct Breaker {
    state: Mutex<State>,
}

impl Breaker {
    pub fn new() -> Breaker {
        Breaker { state: Mutex::new(State::Closed { failures: 0 }) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn permit(&self) -> Permit {
        self.permit_at(Instant::now())
    }

    fn permit_at(&self, now: Instant) -> Permit {
        let mut state = self.state();
        match *state {
            State::Closed { .. } => Permit::Go,
            State::Open { until, backoff } if now >= until => {
                *state = State::HalfOpen { backoff };
                Permit::Probe
            }
            State::Open { .. } | State::HalfOpen { .. } => Permit::Skip,
        }
    }

    /// Opens the breaker now (a remote that never answered: its first failure says enough).
    pub fn trip(&self) -> Tripped {
        let mut state = self.state();
        match *state {
            State::Closed { .. } => {
                *state = State::Open { until: Instant::now() + FIRST_BACKOFF, backoff: FIRST_BACKOFF };
                Tripped::Opened(FIRST_BACKOFF)
            }
            State::Open { .. } | State::HalfOpen { .. } => Tripped::No,
        }
    }

    pub fn success(&self) {
        *self.state() = State::Closed { failures: 0 };
    }

    pub fn failure(&self) -> Tripped {
        self.failure_at(Instant::now())
    }

    fn failure_at(&self, now: Instant) -> Tripped {
        let mut state = self.state();
        let backoff = match *state {
            State::Closed { failures } if failures + 1 < FAILURES_TO_OPEN => {
                *state = State::Closed { failures: failures + 1 };
                return Tripped::No;
            }
            State::Closed { .. } => FIRST_BACKOFF,
            State::HalfOpen { backoff } => (backoff * 2).min(MAX_BACKOFF),
            // A request that started before the breaker opened: the breaker stays as it is.
            State::Open { .. } => return Tripped::No,
        };
        *state = State::Open { until: now + backoff, backoff };
        Tripped::Opened(backoff)
    }

    /// Whether requests are being skipped right now (open, or half-open with its probe out).
    pub fn is_open(&self) -> bool {
        !matches!(*self.state(), State::Closed { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_probes_and_backs_off() {
        let breaker = Breaker::new();
        let t0 = Instant::now();
        assert_eq!(breaker.permit_at(t0), Permit::Go);
        assert_eq!(breaker.failure_at(t0), Tripped::No);
        assert_eq!(breaker.failure_at(t0), Tripped::No);
        assert_eq!(breaker.failure_at(t0), Tripped::Opened(FIRST_BACKOFF));
        assert_eq!(breaker.permit_at(t0), Permit::Skip);
        let t1 = t0 + FIRST_BACKOFF;
        assert_eq!(breaker.permit_at(t1), Permit::Probe);
        assert_eq!(breaker.permit_at(t1), Permit::Skip, "one probe at a time");
        assert_eq!(breaker.failure_at(t1), Tripped::Opened(FIRST_BACKOFF * 2));
        let t2 = t1 + FIRST_BACKOFF * 2;
        assert_eq!(breaker.permit_at(t2), Permit::Probe);
        breaker.success();
        assert_eq!(breaker.permit_at(t2), Permit::Go);
        assert!(!breaker.is_open());
    }

    #[test]
    fn a_trip_opens_at_once_and_probes_later() {
        let breaker = Breaker::new();
        assert_eq!(breaker.trip(), Tripped::Opened(FIRST_BACKOFF));
        assert_eq!(breaker.trip(), Tripped::No);
        assert_eq!(breaker.permit(), Permit::Skip);
        assert_eq!(breaker.permit_at(Instant::now() + FIRST_BACKOFF), Permit::Probe);
    }

    #[test]
    fn a_success_resets_the_count() {
        let breaker = Breaker::new();
        let now = Instant::now();
        breaker.failure_at(now);
        breaker.failure_at(now);
        breaker.success();
        assert_eq!(breaker.failure_at(now), Tripped::No);
        assert_eq!(breaker.failure_at(now), Tripped::No);
        assert!(matches!(breaker.failure_at(now), Tripped::Opened(_)));
    }

    #[test]
    fn backoff_is_capped() {
        let breaker = Breaker::new();
        let mut now = Instant::now();
        for _ in 0..3 {
            breaker.failure_at(now);
        }
        for _ in 0..20 {
            now += MAX_BACKOFF;
            assert_eq!(breaker.permit_at(now), Permit::Probe);
            match breaker.failure_at(now) {
                Tripped::Opened(backoff) => assert!(backoff <= MAX_BACKOFF),
                Tripped::No => panic!("a failed probe opens the breaker again"),
            }
        }
    }
}
