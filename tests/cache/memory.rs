//! The memory tier against a model: LRU eviction order, entry and byte bounds, and reference
//! counting (an entry with a live handle is never evicted; an evicted program is dropped).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use sparkle::cache::{
    Blob, Built, CacheConfig, CacheKey, LoadFailure, ProgramCache, ProgramHandle, ProgramSource,
};

const KEYS: u64 = 8;

/// A program whose blob is `cost` bytes long.
struct Sized {
    key: u64,
    compiles: Arc<AtomicUsize>,
    drops: Arc<AtomicUsize>,
}

struct Program {
    key: u64,
    drops: Arc<AtomicUsize>,
}

impl Drop for Program {
    fn drop(&mut self) {
        self.drops.fetch_add(1, SeqCst);
    }
}

fn cost(key: u64) -> u64 {
    1 + key * 3 % 7
}

fn cache_key(key: u64) -> CacheKey {
    // Spread over shards like real digests do.
    CacheKey::from_u128(u128::from(key).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835) | 1)
}

impl ProgramSource<Program> for Sized {
    type Error = String;

    fn compile(&self) -> Result<Built<Program>, String> {
        self.compiles.fetch_add(1, SeqCst);
        Ok(Built {
            program: Program { key: self.key, drops: Arc::clone(&self.drops) },
            blob: Some(Blob { format: 0, bytes: vec![0; cost(self.key) as usize] }),
            compile_time: Duration::from_micros(1),
        })
    }

    fn load(&self, _: &Blob) -> Result<Program, LoadFailure<String>> {
        Err(LoadFailure::Refused("memory-only".into()))
    }
}

#[derive(Debug, Clone)]
enum Op {
    Get(u64),
    Drop(usize),
    Clone(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..KEYS).prop_map(Op::Get),
        2 => any::<usize>().prop_map(Op::Drop),
        1 => any::<usize>().prop_map(Op::Clone),
    ]
}

/// The reference: exact LRU over unreferenced entries.
#[derive(Default)]
struct Model {
    /// key → (last use, references)
    entries: BTreeMap<u64, (u64, usize)>,
    tick: u64,
    compiles: usize,
    evictions: usize,
}

impl Model {
    fn over(&self, max_entries: usize, max_bytes: u64) -> bool {
        self.entries.len() > max_entries || self.entries.keys().map(|&k| cost(k)).sum::<u64>() > max_bytes
    }

    fn evict(&mut self, max_entries: usize, max_bytes: u64) {
        while self.over(max_entries, max_bytes) {
            let victim = self.entries.iter().filter(|(_, (_, refs))| *refs == 0).min_by_key(|(_, (t, _))| *t);
            let Some((&key, _)) = victim else { break };
            self.entries.remove(&key);
            self.evictions += 1;
        }
    }

    fn get(&mut self, key: u64, max_entries: usize, max_bytes: u64) {
        self.tick += 1;
        match self.entries.get_mut(&key) {
            Some((t, refs)) => {
                *t = self.tick;
                *refs += 1;
            }
            None => {
                self.compiles += 1;
                self.entries.insert(key, (self.tick, 1));
                self.evict(max_entries, max_bytes);
            }
        }
    }

    fn release(&mut self, key: u64, max_entries: usize, max_bytes: u64) {
        if let Some((_, refs)) = self.entries.get_mut(&key) {
            *refs -= 1;
        }
        self.evict(max_entries, max_bytes);
    }

    fn by_recency(&self) -> Vec<u64> {
        let mut keys: Vec<_> = self.entries.iter().map(|(&k, &(t, _))| (t, k)).collect();
        keys.sort();
        keys.into_iter().map(|(_, k)| k).collect()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn memory_tier_matches_an_lru_model(
        max_entries in 1usize..6,
        max_bytes in 1u64..24,
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        let compiles = Arc::new(AtomicUsize::new(0));
        let drops = Arc::new(AtomicUsize::new(0));
        let config = CacheConfig { max_memory_entries: max_entries, max_memory_bytes: max_bytes, ..CacheConfig::memory_only() };
        let cache = ProgramCache::<Program>::open(sparkle::cache::GpuId::new("gl", vec![]), &config);
        let mut handles: Vec<ProgramHandle<Program>> = Vec::new();
        let mut model = Model::default();
        for op in ops {
            match op {
                Op::Get(key) => {
                    let source = Sized { key, compiles: Arc::clone(&compiles), drops: Arc::clone(&drops) };
                    let handle = cache.get(&cache_key(key), &source).unwrap();
                    prop_assert_eq!(handle.key, key);
                    handles.push(handle);
                    model.get(key, max_entries, max_bytes);
                }
                Op::Drop(i) if !handles.is_empty() => {
                    let handle = handles.swap_remove(i % handles.len());
                    let key = handle.key;
                    drop(handle);
                    model.release(key, max_entries, max_bytes);
                }
                Op::Clone(i) if !handles.is_empty() => {
                    // A clone is a reference but not a use: recency stays.
                    let handle = handles[i % handles.len()].clone();
                    if let Some((_, refs)) = model.entries.get_mut(&handle.key) { *refs += 1; }
                    handles.push(handle);
                }
                _ => {}
            }
            let expected: Vec<CacheKey> = model.by_recency().into_iter().map(cache_key).collect();
            prop_assert_eq!(cache.memory_keys_by_recency(), expected);
            let stats = cache.stats();
            prop_assert_eq!(stats.memory_entries, model.entries.len() as u64);
            prop_assert_eq!(stats.memory_bytes, model.entries.keys().map(|&k| cost(k)).sum::<u64>());
            prop_assert_eq!(stats.evictions, model.evictions as u64);
            prop_assert_eq!(compiles.load(SeqCst), model.compiles);
            // A program is dropped exactly when it is neither in memory nor held.
            let alive = model.entries.len() + handles.iter().filter(|h| !model.entries.contains_key(&h.key))
                .map(|h| h.key).collect::<std::collections::BTreeSet<_>>().len();
            prop_assert_eq!(model.compiles - drops.load(SeqCst), alive);
            // Every held program is still the one the cache serves if it is in memory.
            for handle in &handles {
                if model.entries.contains_key(&handle.key) {
                    prop_assert!(cache.contains_in_memory(&cache_key(handle.key)));
                }
            }
        }
        let entries_before = model.entries.len();
        drop(handles);
        drop(cache);
        prop_assert_eq!(drops.load(SeqCst), model.compiles, "{} entries left at the end", entries_before);
    }
}

#[test]
fn an_entry_larger_than_the_byte_bound_stays_while_held_and_goes_when_released() {
    let compiles = Arc::new(AtomicUsize::new(0));
    let drops = Arc::new(AtomicUsize::new(0));
    let config = CacheConfig { max_memory_entries: 10, max_memory_bytes: 2, ..CacheConfig::memory_only() };
    let cache = ProgramCache::<Program>::open(sparkle::cache::GpuId::new("gl", vec![]), &config);
    let source = Sized { key: 2, compiles: Arc::clone(&compiles), drops: Arc::clone(&drops) };
    assert!(cost(2) > 2);
    let handle = cache.get(&cache_key(2), &source).unwrap();
    assert_eq!(cache.stats().memory_entries, 1, "in use: kept over the bound");
    let again = cache.get(&cache_key(2), &source).unwrap();
    assert_eq!(compiles.load(SeqCst), 1);
    drop(again);
    assert_eq!(cache.stats().memory_entries, 1);
    drop(handle);
    let stats = cache.stats();
    assert_eq!((stats.memory_entries, stats.memory_bytes, stats.evictions), (0, 0, 1));
    assert_eq!(drops.load(SeqCst), 1, "releasing the last handle dropped the evicted program");
}
