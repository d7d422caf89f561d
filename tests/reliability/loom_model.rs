//! A loom model of the memory tier's reference counting and eviction protocol (`src/cache/
//! memory.rs`): handles taken under a shard's read lock, released without any lock (a release
//! evicts only when the tier flagged pressure), and eviction that picks unused entries under read
//! locks and removes each only after checking again, under the write lock, that no handle took
//! it in between. The model keeps the real protocol's steps and orderings, with one shard (an ordered map, so that every run is deterministic), a
//! bound of one entry and an explicit reference count standing in for `Arc`'s.
//!
//! Checked in every interleaving loom explores: an entry a handle holds is never evicted (a get
//! while holding a handle finds that very entry); the entry and byte counters match the map; and
//! once every thread is done the tier is within its bound or has pressure flagged, so the next
//! insert or release evicts.
//!
//! Runs with the other tests (3 preemptions per run); `LOOM_MAX_PREEMPTIONS=5 cargo test
//! --release --test reliability -- loom_model` explores far more.

use std::collections::BTreeMap;

use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use loom::sync::{Arc, Mutex, RwLock};

const MAX_ENTRIES: u64 = 1;

struct Entry {
    key: u32,
    /// Holders: the map's one plus one per handle (what `Arc::strong_count` reports).
    refs: AtomicUsize,
    stamp: AtomicU64,
    /// Set when the entry leaves the map; a live handle must never see it set.
    evicted: AtomicBool,
}

struct Tier {
    map: RwLock<BTreeMap<u32, Arc<Entry>>>,
    entries: AtomicU64,
    pressure: AtomicBool,
    evicting: Mutex<()>,
    clock: AtomicU64,
}

struct Handle<'t> {
    tier: &'t Tier,
    entry: Arc<Entry>,
}

impl Drop for Handle<'_> {
    fn drop(&mut self) {
        // As `ProgramHandle::drop`: read the pressure flag, release, then evict if it was set.
        let pressure = self.tier.pressure.load(Relaxed);
        assert!(!self.entry.evicted.load(Relaxed), "entry {} evicted while a handle held it", self.entry.key);
        self.entry.refs.fetch_sub(1, loom::sync::atomic::Ordering::Release);
        if pressure {
            self.tier.evict_to_bounds();
        }
    }
}

impl Tier {
    fn new() -> Self {
        Tier {
            map: RwLock::new(BTreeMap::new()),
            entries: AtomicU64::new(0),
            pressure: AtomicBool::new(false),
            evicting: Mutex::new(()),
            clock: AtomicU64::new(1),
        }
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Relaxed)
    }

    fn get(&self, key: u32) -> Option<Handle<'_>> {
        let map = self.map.read().unwrap();
        let entry = map.get(&key)?;
        entry.stamp.store(self.tick(), Relaxed);
        entry.refs.fetch_add(1, Relaxed);
        Some(Handle { tier: self, entry: Arc::clone(entry) })
    }

    fn insert(&self, key: u32) -> Handle<'_> {
        let handle = {
            let mut map = self.map.write().unwrap();
            if let Some(existing) = map.get(&key) {
                existing.stamp.store(self.tick(), Relaxed);
                existing.refs.fetch_add(1, Relaxed);
                Handle { tier: self, entry: Arc::clone(existing) }
            } else {
                let entry = Arc::new(Entry {
                    key,
                    refs: AtomicUsize::new(2),
                    stamp: AtomicU64::new(self.tick()),
                    evicted: AtomicBool::new(false),
                });
                map.insert(key, Arc::clone(&entry));
                self.entries.fetch_add(1, Relaxed);
                Handle { tier: self, entry }
            }
        };
        self.evict_to_bounds();
        handle
    }

    fn within_bounds(&self) -> bool {
        self.entries.load(Relaxed) <= MAX_ENTRIES
    }

    fn evict_to_bounds(&self) {
        if self.within_bounds() {
            if self.pressure.load(Relaxed) {
                let _one_at_a_time = self.evicting.lock().unwrap();
                if self.within_bounds() {
                    self.pressure.store(false, Relaxed);
                }
            }
            if self.within_bounds() {
                return;
            }
        }
        let _one_at_a_time = self.evicting.lock().unwrap();
        let mut candidates: Vec<(u64, u32)> = self
            .map
            .read()
            .unwrap()
            .iter()
            .filter(|(_, e)| e.refs.load(loom::sync::atomic::Ordering::Acquire) == 1)
            .map(|(k, e)| (e.stamp.load(Relaxed), *k))
            .collect();
        candidates.sort_unstable();
        for (stamp, key) in candidates {
            if self.within_bounds() {
                break;
            }
            let mut map = self.map.write().unwrap();
            let unused_since_scan = map.get(&key).is_some_and(|e| {
                e.refs.load(loom::sync::atomic::Ordering::Acquire) == 1 && e.stamp.load(Relaxed) == stamp
            });
            if unused_since_scan {
                if let Some(entry) = map.remove(&key) {
                    entry.evicted.store(true, Relaxed);
                    self.entries.fetch_sub(1, Relaxed);
                }
            }
        }
        self.pressure.store(!self.within_bounds(), Relaxed);
    }

    fn check_quiescent(&self) {
        let map = self.map.read().unwrap();
        assert_eq!(map.len() as u64, self.entries.load(Relaxed), "the entry counter drifted");
        assert!(map.values().all(|e| e.refs.load(Relaxed) == 1), "a reference leaked");
        assert!(
            self.within_bounds() || self.pressure.load(Relaxed),
            "over the bound ({} entries) with no pressure flagged: nothing would ever evict",
            map.len()
        );
    }
}

/// Inserts `key`, then, while holding it, gets it again: it must be the same entry.
fn use_key(tier: &Tier, key: u32) {
    let held = tier.insert(key);
    let again = tier.get(key).expect("an entry in use stays in memory");
    assert!(Arc::ptr_eq(&held.entry, &again.entry), "a second entry appeared for a key in use");
    drop(again);
    drop(held);
}

/// Loom's explorer, bounded to 3 preemptions per run unless `LOOM_MAX_PREEMPTIONS` says otherwise.
fn explore(name: &str, model: impl Fn() + Sync + Send + 'static) {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let mut builder = loom::model::Builder::new();
    if std::env::var_os("LOOM_MAX_PREEMPTIONS").is_none() {
        builder.preemption_bound = Some(3);
    }
    let started = std::time::Instant::now();
    let before = RUNS.load(std::sync::atomic::Ordering::Relaxed);
    builder.check(move || {
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        model();
    });
    let runs = RUNS.load(std::sync::atomic::Ordering::Relaxed) - before;
    eprintln!("{name}: {runs} interleavings explored in {:.1} s", started.elapsed().as_secs_f64());
}

#[test]
fn in_use_entries_are_never_evicted_and_the_bound_is_restored() {
    explore("insert and use two keys on two threads", || {
        let tier = Arc::new(Tier::new());
        let other = Arc::clone(&tier);
        let inserter = loom::thread::spawn(move || use_key(&other, 1));
        use_key(&tier, 2);
        inserter.join().unwrap();
        tier.check_quiescent();
    });
}

#[test]
fn a_hit_racing_an_eviction_keeps_its_entry() {
    explore("a hit racing an eviction", || {
        let tier = Arc::new(Tier::new());
        drop(tier.insert(1));
        let other = Arc::clone(&tier);
        let reader = loom::thread::spawn(move || {
            if let Some(handle) = other.get(1) {
                let again = other.get(1).expect("held, so still there");
                assert!(Arc::ptr_eq(&handle.entry, &again.entry));
            }
        });
        drop(tier.insert(2));
        reader.join().unwrap();
        tier.check_quiescent();
    });
}
