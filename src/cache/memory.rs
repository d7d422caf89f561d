//! The memory tier: programs in use or recently used, bounded by entry count and blob bytes,
//! evicting the least recently used entry that no handle holds; and `ProgramHandle`, the RAII
//! reference that keeps an entry from being evicted.
//!
//! The map is split into shards behind their own `RwLock`s, so a hit takes one uncontended read
//! lock and touches no cache line shared by all threads: recency comes from a per-thread clock
//! (below) and hits are counted in the entry, whose line a hit writes anyway. Eviction, which only inserts and releases
//! trigger, scans the shards for the oldest unused entries.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::Duration;

use super::stats::CacheStats;
use super::CacheKey;

const SHARDS: usize = 64;

/// One cached program.
pub(crate) struct Entry<P> {
    /// Last use, in [`clock`] ticks; eviction takes the smallest.
    stamp: AtomicU64,
    /// Memory hits; counted here rather than in a shared counter because a hit already owns
    /// this cache line (the reference count is next to it).
    hits: AtomicU64,
    key: CacheKey,
    cost: u64,
    compile_ns: u64,
    /// Set while the tier is over its bounds with every entry in use, so that a release can
    /// evict without having to take any lock when the tier is within bounds.
    pressure: Arc<AtomicBool>,
    tier: Weak<MemoryTier<P>>,
    program: P,
}

/// A reference to a cached program; the entry stays in memory while any handle to it lives.
/// Clones share the same program.
pub struct ProgramHandle<P: Send + Sync + 'static> {
    /// `None` only inside `drop`, so that the release is complete before eviction looks at it.
    entry: Option<Arc<Entry<P>>>,
}

impl<P: Send + Sync + 'static> ProgramHandle<P> {
    pub(crate) fn new(entry: Arc<Entry<P>>) -> Self {
        Self { entry: Some(entry) }
    }

    fn entry(&self) -> &Arc<Entry<P>> {
        match &self.entry {
            Some(entry) => entry,
            None => unreachable!("a handle holds its entry until it is dropped"),
        }
    }

    pub(crate) fn entry_arc(&self) -> Arc<Entry<P>> {
        Arc::clone(self.entry())
    }

    /// The key the program is cached under.
    pub fn key(&self) -> CacheKey {
        self.entry().key
    }

    /// The compile time recorded when the program was first compiled.
    pub fn compile_time(&self) -> Duration {
        Duration::from_nanos(self.entry().compile_ns)
    }

    /// Whether both handles refer to the very same program object.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(a.entry(), b.entry())
    }
}

impl<P: Send + Sync + 'static> Clone for ProgramHandle<P> {
    fn clone(&self) -> Self {
        Self::new(Arc::clone(self.entry()))
    }
}

impl<P: Send + Sync + 'static> Deref for ProgramHandle<P> {
    type Target = P;

    fn deref(&self) -> &P {
        &self.entry().program
    }
}

impl<P: Send + Sync + 'static> std::fmt::Debug for ProgramHandle<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgramHandle").field("key", &self.key()).finish()
    }
}

impl<P: Send + Sync + 'static> Drop for ProgramHandle<P> {
    fn drop(&mut self) {
        let Some(entry) = self.entry.take() else { return };
        if entry.pressure.load(Relaxed) {
            let tier = entry.tier.clone();
            drop(entry);
            if let Some(tier) = tier.upgrade() {
                tier.evict_to_bounds();
            }
        }
    }
}

/// Keys are already uniform 128-bit digests: folding them is a perfect hash for the map.
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only reached if `CacheKey`'s `Hash` changes; stay correct, if slower.
        self.0 = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.0);
    }

    fn write_u128(&mut self, value: u128) {
        self.0 ^= (value as u64) ^ ((value >> 64) as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type Map<P> = HashMap<CacheKey, Arc<Entry<P>>, BuildHasherDefault<KeyHasher>>;

/// A shard on its own cache lines, so that threads working on different shards do not share one.
#[repr(align(128))]
struct Shard<P> {
    map: RwLock<Map<P>>,
}

/// The memory tier.
pub(crate) struct MemoryTier<P> {
    shards: Box<[Shard<P>]>,
    max_entries: u64,
    max_bytes: u64,
    entries: AtomicU64,
    bytes: AtomicU64,
    evictions: AtomicU64,
    /// Hits and saved compile time of entries no longer in the map.
    gone_hits: AtomicU64,
    gone_saved_ns: AtomicU64,
    pressure: Arc<AtomicBool>,
    /// One evicting thread at a time: two would pick the same victims.
    evicting: Mutex<()>,
    me: Weak<MemoryTier<P>>,
}

impl<P: Send + Sync + 'static> MemoryTier<P> {
    pub fn new(max_entries: usize, max_bytes: u64) -> Arc<Self> {
        Arc::new_cyclic(|me| MemoryTier {
            shards: (0..SHARDS).map(|_| Shard { map: RwLock::default() }).collect(),
            max_entries: max_entries as u64,
            max_bytes,
            entries: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            gone_hits: AtomicU64::new(0),
            gone_saved_ns: AtomicU64::new(0),
            pressure: Arc::new(AtomicBool::new(false)),
            evicting: Mutex::new(()),
            me: me.clone(),
        })
    }

    fn shard(&self, key: &CacheKey) -> &Shard<P> {
        // The high bits pick the shard, the map hashes all of them.
        &self.shards[((key.as_u128() >> 64) as usize) % SHARDS]
    }

    fn read(shard: &Shard<P>) -> RwLockReadGuard<'_, Map<P>> {
        shard.map.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(shard: &Shard<P>) -> RwLockWriteGuard<'_, Map<P>> {
        shard.map.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// A handle to the program under `key`, counting a hit, if it is in memory.
    #[inline]
    pub fn get(&self, key: &CacheKey) -> Option<ProgramHandle<P>> {
        let shard = self.shard(key);
        let entry = {
            let map = Self::read(shard);
            let entry = map.get(key)?;
            entry.stamp.store(clock::tick(), Relaxed);
            entry.hits.fetch_add(1, Relaxed);
            Arc::clone(entry)
        };
        Some(ProgramHandle::new(entry))
    }

    /// Inserts a program (or returns the one already there) and evicts to stay within bounds.
    /// `cost` is the blob's length, at least 1.
    pub fn insert(&self, key: CacheKey, program: P, cost: u64, compile_ns: u64) -> ProgramHandle<P> {
        let cost = cost.max(1);
        let entry = Arc::new(Entry {
            stamp: AtomicU64::new(clock::tick()),
            hits: AtomicU64::new(0),
            key,
            cost,
            compile_ns,
            pressure: Arc::clone(&self.pressure),
            tier: self.me.clone(),
            program,
        });
        let handle = {
            let mut map = Self::write(self.shard(&key));
            match map.get(&key) {
                Some(existing) => {
                    existing.stamp.store(clock::tick(), Relaxed);
                    ProgramHandle::new(Arc::clone(existing))
                }
                None => {
                    map.insert(key, Arc::clone(&entry));
                    self.entries.fetch_add(1, Relaxed);
                    self.bytes.fetch_add(cost, Relaxed);
                    ProgramHandle::new(entry)
                }
            }
        };
        // The handle is alive, so the new entry itself is safe from this eviction.
        self.evict_to_bounds();
        handle
    }

    fn within_bounds(&self) -> bool {
        self.entries.load(Relaxed) <= self.max_entries && self.bytes.load(Relaxed) <= self.max_bytes
    }

    /// Evicts least recently used entries that no handle holds until the tier is within its
    /// bounds, or nothing more can go. Programs are dropped after every lock is released.
    pub fn evict_to_bounds(&self) {
        if self.within_bounds() {
            // The flag is only cleared under the eviction lock, after looking again: cleared
            // without it, a stale look could undo the flag an eviction that found every entry in
            // use had just set, and nothing would evict until the next insert (found by the loom
            // model in tests/reliability/loom_model.rs).
            if self.pressure.load(Relaxed) {
                let _one_at_a_time = self.evicting.lock().unwrap_or_else(PoisonError::into_inner);
                if self.within_bounds() {
                    self.pressure.store(false, Relaxed);
                }
            }
            if self.within_bounds() {
                return;
            }
        }
        let _one_at_a_time = self.evicting.lock().unwrap_or_else(PoisonError::into_inner);
        let mut candidates = Vec::new();
        for (index, shard) in self.shards.iter().enumerate() {
            for (key, entry) in Self::read(shard).iter() {
                // Racy under a read lock (a hit may clone it right after); checked again below
                // under the write lock, where no new reference can appear.
                if Arc::strong_count(entry) == 1 {
                    candidates.push((entry.stamp.load(Relaxed), index, *key));
                }
            }
        }
        candidates.sort_unstable();
        let mut victims = Vec::new();
        for (stamp, index, key) in candidates {
            if self.within_bounds() {
                break;
            }
            let mut map = Self::write(&self.shards[index]);
            let unused_since_scan =
                map.get(&key).is_some_and(|e| Arc::strong_count(e) == 1 && e.stamp.load(Relaxed) == stamp);
            if unused_since_scan {
                if let Some(entry) = map.remove(&key) {
                    self.entries.fetch_sub(1, Relaxed);
                    self.bytes.fetch_sub(entry.cost, Relaxed);
                    self.evictions.fetch_add(1, Relaxed);
                    let hits = entry.hits.load(Relaxed);
                    self.gone_hits.fetch_add(hits, Relaxed);
                    self.gone_saved_ns.fetch_add(hits.saturating_mul(entry.compile_ns), Relaxed);
                    victims.push(entry);
                }
            }
        }
        self.pressure.store(!self.within_bounds(), Relaxed);
        drop(_one_at_a_time);
        drop(victims);
    }

    /// Whether `key` is in memory; does not count as a use.
    pub fn contains(&self, key: &CacheKey) -> bool {
        Self::read(self.shard(key)).contains_key(key)
    }

    /// Keys in memory, least recently used first (a snapshot).
    pub fn keys_by_recency(&self) -> Vec<CacheKey> {
        let mut all: Vec<(u64, CacheKey)> = Vec::new();
        for shard in self.shards.iter() {
            all.extend(Self::read(shard).values().map(|e| (e.stamp.load(Relaxed), e.key)));
        }
        all.sort_unstable();
        all.into_iter().map(|(_, key)| key).collect()
    }

    /// Fills the memory fields of `stats`.
    pub fn fill(&self, stats: &mut CacheStats) {
        let (mut hits, mut saved_ns) = (self.gone_hits.load(Relaxed), self.gone_saved_ns.load(Relaxed));
        for shard in self.shards.iter() {
            for entry in Self::read(shard).values() {
                let entry_hits = entry.hits.load(Relaxed);
                hits += entry_hits;
                saved_ns = saved_ns.saturating_add(entry_hits.saturating_mul(entry.compile_ns));
            }
        }
        stats.memory_hits = hits;
        stats.compile_time_saved += Duration::from_nanos(saved_ns);
        stats.evictions = self.evictions.load(Relaxed);
        stats.memory_entries = self.entries.load(Relaxed);
        stats.memory_bytes = self.bytes.load(Relaxed);
    }
}

/// A recency clock without a counter that every hit writes: each thread keeps its own, moving
/// at least as fast as the shared one, and publishes it to the shared one every few ticks. One
/// thread's uses are ordered exactly; uses on different threads may be misordered by a few ticks,
/// which only matters for which of two nearly simultaneously used entries is evicted first.
mod clock {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    static SHARED: AtomicU64 = AtomicU64::new(1);
    const PUBLISH_EVERY: u64 = 64;

    thread_local! {
        /// (last tick handed out, shared value this thread has caught up with or published)
        static LOCAL: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    }

    #[inline]
    pub fn tick() -> u64 {
        let shared = SHARED.load(Relaxed);
        LOCAL.with(|local| {
            let (last, mut synced) = local.get();
            let now = last.max(shared) + 1;
            synced = synced.max(shared);
            if now >= synced + PUBLISH_EVERY {
                SHARED.fetch_max(now, Relaxed);
                synced = now;
            }
            local.set((now, synced));
            now
        })
    }
}
