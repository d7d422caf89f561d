//! Lookups that go early. A machine's first process for a GPU id waits (bounded) for the
//! fleet's driver caches before any work reaches the driver. The programs it asks for during
//! that wait are looked up then, not after it, and a program the fleet does not have gets its
//! compile lease claimed at once, by a process holding this machine's turn at it: when the wait
//! ends, the answers are there, so the process knows at once whether to load, compile or wait
//! for the machine that compiles it. Without this, twelve machines starting together sent
//! their lookups after the wait, into a store busy with everyone's start-up requests, and each
//! compiled every program before it learned that another one was compiling it.
//!
//! The answers are handed to the lookup and the claim that would have asked ([`EarlyAnswers`]);
//! a claim that nobody takes (the program was found on disk meanwhile) is released.

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Mutex;

use super::store::{Got, StoreError};
use super::tier::Claim;
use super::Lease;
use crate::cache::CacheKey;

/// What an early lookup's request answered.
pub(crate) type Answer = Result<Option<Got>, StoreError>;

/// The answers of the lookups and claims started early, until the requests that would have
/// made them take them.
#[derive(Default)]
pub(crate) struct EarlyAnswers {
    lookups: Mutex<HashMap<CacheKey, Receiver<Answer>>>,
    claims: Mutex<HashMap<CacheKey, Receiver<Claim>>>,
    /// Claims nobody will take whose answer had not come: released when it comes, or at the end.
    abandoned: Mutex<Vec<Receiver<Claim>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl EarlyAnswers {
    /// Whether a lookup of `key` already went early.
    pub fn started(&self, key: CacheKey) -> bool {
        lock(&self.lookups).contains_key(&key) || lock(&self.claims).contains_key(&key)
    }

    /// Keeps the answers of the lookup of `key` started early, and of its claim if one was to
    /// be made (its sender is dropped unanswered when the lookup found something).
    pub fn keep(&self, key: CacheKey, lookup: Receiver<Answer>, claim: Option<Receiver<Claim>>) {
        lock(&self.lookups).insert(key, lookup);
        if let Some(claim) = claim {
            lock(&self.claims).insert(key, claim);
        }
    }

    /// The answer of the early lookup of `key`, for the lookup that would have asked.
    pub fn take_lookup(&self, key: CacheKey) -> Option<Receiver<Answer>> {
        lock(&self.lookups).remove(&key)
    }

    /// The answer of the early claim of `key`, for the claim that would have asked.
    pub fn take_claim(&self, key: CacheKey) -> Option<Receiver<Claim>> {
        lock(&self.claims).remove(&key)
    }

    /// Nobody will use the early answers of `key` (the program came from elsewhere): the leases
    /// they hold, now or when their claims are answered, to be released by `release`.
    pub fn forget(&self, key: CacheKey, release: &mut dyn FnMut(Lease)) {
        lock(&self.lookups).remove(&key);
        if let Some(claim) = lock(&self.claims).remove(&key) {
            lock(&self.abandoned).push(claim);
        }
        self.release_abandoned(release);
    }

    /// Releases the leases of abandoned claims that were answered, keeping those still under way.
    pub fn release_abandoned(&self, release: &mut dyn FnMut(Lease)) {
        lock(&self.abandoned).retain(|claim| match claim.try_recv() {
            Ok(Claim::Mine(lease)) => {
                release(lease);
                false
            }
            Ok(_) | Err(TryRecvError::Disconnected) => false,
            Err(TryRecvError::Empty) => true,
        });
    }

    /// At the end: every lease an untaken claim holds, answered by now, goes to `release`; the
    /// claims still under way are dropped (their requests release what they are granted).
    pub fn release_all(&self, release: &mut dyn FnMut(Lease)) {
        let untaken: Vec<Receiver<Claim>> = lock(&self.claims).drain().map(|(_, claim)| claim).collect();
        lock(&self.abandoned).extend(untaken);
        self.release_abandoned(release);
        lock(&self.abandoned).clear();
        lock(&self.lookups).clear();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc::sync_channel;

    use super::*;

    fn key(n: u8) -> CacheKey {
        CacheKey::from_u128(u128::from(n))
    }

    #[test]
    fn answers_go_to_whoever_would_have_asked_once() {
        let early = EarlyAnswers::default();
        let (lookup_tx, lookup_rx) = sync_channel(1);
        let (claim_tx, claim_rx) = sync_channel(1);
        early.keep(key(1), lookup_rx, Some(claim_rx));
        assert!(early.started(key(1)));
        assert!(!early.started(key(2)));
        lookup_tx.send(Ok(None)).unwrap();
        claim_tx.send(Claim::Theirs).unwrap();
        assert!(matches!(early.take_lookup(key(1)).unwrap().recv().unwrap(), Ok(None)));
        assert!(early.take_lookup(key(1)).is_none());
        assert!(matches!(early.take_claim(key(1)).unwrap().recv().unwrap(), Claim::Theirs));
        assert!(early.take_claim(key(1)).is_none());
        assert!(!early.started(key(1)));
    }

    #[test]
    fn a_forgotten_claim_is_released_when_its_answer_comes() {
        let early = EarlyAnswers::default();
        let (_lookup_tx, lookup_rx) = sync_channel(1);
        let (claim_tx, claim_rx) = sync_channel(1);
        early.keep(key(3), lookup_rx, Some(claim_rx));
        let mut released = Vec::new();
        early.forget(key(3), &mut |lease| released.push(lease.name.clone()));
        assert!(released.is_empty(), "nothing was granted yet");
        claim_tx.send(Claim::Mine(Lease::for_test("a.lease"))).unwrap();
        early.release_abandoned(&mut |lease| released.push(lease.name.clone()));
        assert_eq!(released, ["a.lease"]);
        early.release_all(&mut |lease| released.push(lease.name.clone()));
        assert_eq!(released.len(), 1, "released once");
    }

    #[test]
    fn the_end_releases_untaken_claims() {
        let early = EarlyAnswers::default();
        let (_l1, lookup_rx) = sync_channel(1);
        let (claim_tx, claim_rx) = sync_channel(1);
        early.keep(key(4), lookup_rx, Some(claim_rx));
        claim_tx.send(Claim::Mine(Lease::for_test("b.lease"))).unwrap();
        let mut released = Vec::new();
        early.release_all(&mut |lease| released.push(lease.name.clone()));
        assert_eq!(released, ["b.lease"]);
        assert!(!early.started(key(4)));
    }
}
