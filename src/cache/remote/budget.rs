//! How long one remote lookup may take: what a miss would cost instead. That is the program's
//! own compile time where this machine has measured it (its working set records it), else the
//! median of this backend's compiles seen here, else a default. Past the budget the caller
//! compiles while the lookup goes on (the hedge) and uses whichever finishes first, so a slow
//! remote costs at most about one extra compile per program until the breaker skips it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::cache::CacheKey;

/// The budget when nothing has been measured yet: about one GL compile on a GPU driver.
pub(crate) const DEFAULT_BUDGET: Duration = Duration::from_millis(50);
/// Never less: a round trip to a store in the same data centre takes about a millisecond, and
/// a budget shorter than that would turn every lookup into a hedge.
pub(crate) const MIN_BUDGET: Duration = Duration::from_millis(3);
/// Never more, however slow a compile was.
pub(crate) const MAX_BUDGET: Duration = Duration::from_secs(10);
/// Compile times kept for the median.
const RECENT: usize = 64;

pub(crate) struct Budgets {
    fixed: Option<Duration>,
    known: Mutex<HashMap<CacheKey, u64>>,
    recent: Mutex<Vec<u64>>,
}

impl Budgets {
    pub fn new(fixed: Option<Duration>) -> Budgets {
        Budgets { fixed, known: Mutex::new(HashMap::new()), recent: Mutex::new(Vec::new()) }
    }

    /// The budget the user fixed, if any.
    pub fn fixed(&self) -> Option<Duration> {
        self.fixed
    }

    /// Records a measured compile time (from this process, or from the working set).
    pub fn record(&self, key: CacheKey, compile_ns: u64) {
        if compile_ns == 0 {
            return;
        }
        lock(&self.known).insert(key, compile_ns);
        let mut recent = lock(&self.recent);
        if recent.len() == RECENT {
            recent.remove(0);
        }
        recent.push(compile_ns);
    }

    /// The budget of a lookup of `key`.
    pub fn for_key(&self, key: CacheKey) -> Duration {
        if let Some(fixed) = self.fixed {
            return fixed;
        }
        let estimate = lock(&self.known).get(&key).copied().or_else(|| {
            let mut recent = lock(&self.recent).clone();
            recent.sort_unstable();
            recent.get(recent.len() / 2).copied()
        });
        estimate.map_or(DEFAULT_BUDGET, Duration::from_nanos).clamp(MIN_BUDGET, MAX_BUDGET)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_then_median_then_default() {
        let budgets = Budgets::new(None);
        let (a, b) = (CacheKey::from_u128(1), CacheKey::from_u128(2));
        assert_eq!(budgets.for_key(a), DEFAULT_BUDGET);
        budgets.record(a, 20_000_000);
        budgets.record(CacheKey::from_u128(3), 40_000_000);
        budgets.record(CacheKey::from_u128(4), 30_000_000);
        assert_eq!(budgets.for_key(a), Duration::from_millis(20));
        assert_eq!(budgets.for_key(b), Duration::from_millis(30), "the median of what was measured");
        budgets.record(b, 1_000);
        assert_eq!(budgets.for_key(b), MIN_BUDGET);
        budgets.record(b, u64::MAX);
        assert_eq!(budgets.for_key(b), MAX_BUDGET);
        assert_eq!(Budgets::new(Some(Duration::from_millis(7))).for_key(a), Duration::from_millis(7));
    }
}
