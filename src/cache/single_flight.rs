//! Single flight: however many threads miss the same key at once, one of them (the leader) loads
//! or compiles it and the others wait for its result. The table's lock is held only to join or
//! leave a flight, never during the work itself, so different keys proceed in parallel.

use std::any::Any;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use super::memory::KeyHasher;
use super::CacheKey;

/// A leader's failure, type-erased: the waiters recover it with a downcast to their error type.
pub(crate) type SharedError = Arc<dyn Any + Send + Sync>;

enum State<T> {
    Running,
    Done(Result<T, SharedError>),
    /// The leader went away without a result (it panicked): waiters try again.
    Abandoned,
}

struct Flight<T> {
    state: Mutex<State<T>>,
    done: Condvar,
}

impl<T> Flight<T> {
    fn state(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The table of keys being worked on.
pub(crate) struct SingleFlight<T> {
    flights: Mutex<HashMap<CacheKey, Arc<Flight<T>>, BuildHasherDefault<KeyHasher>>>,
}

/// A thread's part in a flight.
pub(crate) enum Join<'a, T: Clone, H> {
    /// The re-check under the table's lock found the result (a flight just finished).
    Found(H),
    Lead(Leader<'a, T>),
    Follow(Follower<T>),
}

/// What a follower got.
pub(crate) enum Outcome<T> {
    Done(Result<T, SharedError>),
    Abandoned,
}

impl<T: Clone> SingleFlight<T> {
    pub fn new() -> Self {
        Self { flights: Mutex::new(HashMap::default()) }
    }

    fn table(&self) -> MutexGuard<'_, HashMap<CacheKey, Arc<Flight<T>>, BuildHasherDefault<KeyHasher>>> {
        self.flights.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Joins the flight for `key`, or starts one. `recheck` runs under the table's lock when
    /// no flight is running: a leader publishes its result (e.g. into memory) before leaving the
    /// table, so a thread that missed just before the leader finished finds it there.
    pub fn join<H>(&self, key: CacheKey, recheck: impl FnOnce() -> Option<H>) -> Join<'_, T, H> {
        let mut table = self.table();
        if let Some(flight) = table.get(&key) {
            return Join::Follow(Follower { flight: Arc::clone(flight) });
        }
        if let Some(found) = recheck() {
            return Join::Found(found);
        }
        let flight = Arc::new(Flight { state: Mutex::new(State::Running), done: Condvar::new() });
        table.insert(key, Arc::clone(&flight));
        Join::Lead(Leader { table: self, key, flight: Some(flight) })
    }

    /// Keys with a flight running (for tests and diagnostics).
    pub fn running(&self) -> usize {
        self.table().len()
    }
}

/// The thread doing the work for a key. Dropping it without [`finish`](Self::finish) (a panic)
/// wakes the followers so that one of them takes over.
pub(crate) struct Leader<'a, T: Clone> {
    table: &'a SingleFlight<T>,
    key: CacheKey,
    flight: Option<Arc<Flight<T>>>,
}

impl<T: Clone> Leader<'_, T> {
    /// Leaves the table, then hands `result` to every follower.
    pub fn finish(mut self, result: Result<T, SharedError>) {
        self.complete(State::Done(result));
    }

    fn complete(&mut self, state: State<T>) {
        let Some(flight) = self.flight.take() else { return };
        {
            let mut table = self.table.table();
            if table.get(&self.key).is_some_and(|f| Arc::ptr_eq(f, &flight)) {
                table.remove(&self.key);
            }
        }
        *flight.state() = state;
        flight.done.notify_all();
    }
}

impl<T: Clone> Drop for Leader<'_, T> {
    fn drop(&mut self) {
        self.complete(State::Abandoned);
    }
}

/// A thread waiting for a leader.
pub(crate) struct Follower<T> {
    flight: Arc<Flight<T>>,
}

impl<T: Clone> Follower<T> {
    pub fn wait(self) -> Outcome<T> {
        let mut state = self.flight.state();
        loop {
            match &*state {
                State::Running => {
                    state = self.flight.done.wait(state).unwrap_or_else(PoisonError::into_inner);
                }
                State::Done(result) => return Outcome::Done(result.clone()),
                State::Abandoned => return Outcome::Abandoned,
            }
        }
    }
}
