//! Single flight: one compile per key however many threads ask at once; different keys compile
//! in parallel; a leader's error or panic reaches the waiters; warm_up runs requests in parallel.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use crate::cache_support::{self, gpu, Counts, Source};
use sparkle::cache::{Blob, Built, CacheConfig, LoadFailure, ProgramCache, ProgramHandle, ProgramSource};

const THREADS: usize = 16;

#[test]
fn sixteen_threads_on_one_key_compile_once_and_share_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let gpu = gpu("one key");
    let counts = Arc::new(Counts::default());
    let mut source = Source::new(&gpu, "shared", &counts);
    source.sleep = Duration::from_millis(300);
    let cache = ProgramCache::open(gpu, &CacheConfig::in_dir(dir.path()));
    let barrier = Barrier::new(THREADS);
    let handles: Vec<ProgramHandle<_>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    cache.get(&source.key, &source).unwrap()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert_eq!(counts.compiles.load(SeqCst), 1);
    assert_eq!(counts.loads.load(SeqCst), 0);
    assert!(handles.iter().all(|h| ProgramHandle::ptr_eq(h, &handles[0])));
    assert!(handles.iter().all(|h| h.id == handles[0].id));
    let stats = cache.stats();
    assert_eq!(stats.misses, 1);
    assert_eq!(stats.coalesced + stats.memory_hits, THREADS as u64 - 1);
    assert_eq!(cache.in_flight(), 0);
}

#[test]
fn different_keys_compile_in_parallel() {
    let dir = tempfile::tempdir().unwrap();
    let gpu = gpu("many keys");
    let counts = Arc::new(Counts::default());
    let sources: Vec<Source> = (0..THREADS)
        .map(|i| {
            let mut s = Source::new(&gpu, &format!("kernel {i}"), &counts);
            s.sleep = Duration::from_millis(50);
            s
        })
        .collect();
    let cache = ProgramCache::open(gpu, &CacheConfig::in_dir(dir.path()));
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for source in &sources {
            let (cache, barrier) = (&cache, &barrier);
            s.spawn(move || {
                barrier.wait();
                cache.get(&source.key, source).unwrap();
            });
        }
    });
    assert_eq!(counts.compiles.load(SeqCst), THREADS);
    let overlap = counts.max_running.load(SeqCst);
    assert!(overlap >= 2, "compiles of different keys never overlapped (max {overlap} at once)");
}

#[test]
fn a_compile_error_goes_to_every_waiter_and_is_not_cached() {
    let gpu = gpu("errors");
    let counts = Arc::new(Counts::default());
    let mut source = Source::new(&gpu, "broken", &counts);
    source.sleep = Duration::from_millis(300);
    source.fail = true;
    let cache = ProgramCache::open(gpu, &CacheConfig::memory_only());
    let barrier = Barrier::new(THREADS);
    let errors: Vec<String> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    cache.get(&source.key, &source).unwrap_err()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert_eq!(counts.compiles.load(SeqCst), 1);
    assert!(errors.iter().all(|e| e.contains("syntax error in `broken`")), "{errors:?}");
    assert_eq!(cache.stats().memory_entries, 0);
    source.fail = false;
    source.sleep = Duration::ZERO;
    cache.get(&source.key, &source).unwrap();
    assert_eq!(counts.compiles.load(SeqCst), 2, "the failure was not cached");
}

/// Panics in its first compile, then compiles normally.
struct PanicsOnce {
    inner: Source,
    panicked: AtomicBool,
}

impl ProgramSource<cache_support::Program> for PanicsOnce {
    type Error = String;

    fn compile(&self) -> Result<Built<cache_support::Program>, String> {
        std::thread::sleep(Duration::from_millis(200));
        if !self.panicked.swap(true, SeqCst) {
            panic!("compiler crashed");
        }
        self.inner.compile()
    }

    fn load(&self, blob: &Blob) -> Result<cache_support::Program, LoadFailure<String>> {
        self.inner.load(blob)
    }
}

#[test]
fn a_panicking_leader_hands_over_to_a_waiter() {
    let gpu = gpu("panics");
    let counts = Arc::new(Counts::default());
    let source = PanicsOnce { inner: Source::new(&gpu, "p", &counts), panicked: AtomicBool::new(false) };
    let cache = ProgramCache::open(gpu, &CacheConfig::memory_only());
    let barrier = Barrier::new(4);
    let results: Vec<bool> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    cache.get(&source.inner.key, &source).is_ok()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap_or(false)).collect()
    });
    assert_eq!(results.iter().filter(|ok| **ok).count(), 3, "{results:?}");
    assert_eq!(counts.compiles.load(SeqCst), 1);
    assert_eq!(cache.in_flight(), 0);
}

#[test]
fn warm_up_returns_results_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let gpu = gpu("warm up");
    let counts = Arc::new(Counts::default());
    let requests: Vec<_> = (0..12)
        .map(|i| {
            let mut s = Source::new(&gpu, &format!("warm {i}"), &counts);
            s.sleep = Duration::from_millis(20);
            s.fail = i == 5;
            (s.key, s)
        })
        .collect();
    let cache = ProgramCache::open(gpu, &CacheConfig::in_dir(dir.path()));
    let results = cache.warm_up(&requests);
    assert_eq!(results.len(), 12);
    for (i, ((key, source), result)) in requests.iter().zip(&results).enumerate() {
        match result {
            Ok(handle) => {
                assert_eq!(handle.key(), *key);
                assert_eq!(handle.payload, cache_support::payload(*key, &source.text, 0));
            }
            Err(err) => assert!(i == 5 && err.contains("warm 5"), "{i}: {err}"),
        }
    }
    assert_eq!(counts.compiles.load(SeqCst), 12);
    if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
        assert!(counts.max_running.load(SeqCst) >= 2, "warm_up did not run in parallel");
    }
}
