//! Program cache benchmarks: memory hits (latency, and throughput on 1 and 2 threads) beside
//! quick_cache and moka doing the same gets on the same keys; disk hits (read + verify + load)
//! by entry size; pruning a folder of 10,000 entries.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sparkle::cache::{
    Blob, Built, CacheConfig, CacheKey, DiskStore, GpuId, LoadFailure, ProgramCache, ProgramSource,
};

const KEYS: usize = 1024;

fn gpu() -> GpuId {
    GpuId::new("gl", vec![("renderer".into(), "bench".into())])
}

fn keys() -> Vec<CacheKey> {
    (0..KEYS as u32).map(|i| CacheKey::derive(&gpu(), &[&i.to_le_bytes()])).collect()
}

/// Compiles to a blob of `size` bytes; loading keeps the blob.
struct Source {
    size: usize,
}

impl ProgramSource<Arc<Vec<u8>>> for Source {
    type Error = String;

    fn compile(&self) -> Result<Built<Arc<Vec<u8>>>, String> {
        let bytes: Vec<u8> = (0..self.size).map(|i| i as u8).collect();
        Ok(Built {
            program: Arc::new(bytes.clone()),
            blob: Some(Blob { format: 1, bytes }),
            compile_time: Duration::from_millis(5),
        })
    }

    fn load(&self, blob: &Blob) -> Result<Arc<Vec<u8>>, LoadFailure<String>> {
        Ok(Arc::new(blob.bytes.clone()))
    }
}

/// The three caches, filled with the same keys and values.
struct Caches {
    keys: Vec<CacheKey>,
    sparkle: ProgramCache<Arc<Vec<u8>>>,
    quick: quick_cache::sync::Cache<CacheKey, Arc<Vec<u8>>>,
    moka: moka::sync::Cache<CacheKey, Arc<Vec<u8>>>,
}

fn caches() -> Caches {
    let keys = keys();
    let sparkle = ProgramCache::open(gpu(), &CacheConfig::memory_only());
    let quick = quick_cache::sync::Cache::new(KEYS * 2);
    let moka = moka::sync::Cache::new(KEYS as u64 * 2);
    let source = Source { size: 64 };
    for key in &keys {
        let program = sparkle.get(key, &source).expect("the bench source compiles");
        quick.insert(*key, Arc::clone(&program));
        moka.insert(*key, Arc::clone(&program));
    }
    Caches { keys, sparkle, quick, moka }
}

#[derive(Clone, Copy)]
enum Which {
    Baseline,
    Sparkle,
    QuickCache,
    Moka,
}

impl Which {
    const ALL: [(Which, &'static str); 4] = [
        (Which::Baseline, "baseline"),
        (Which::Sparkle, "sparkle"),
        (Which::QuickCache, "quick_cache"),
        (Which::Moka, "moka"),
    ];
}

/// `count` gets over `span` keys starting at `first`, with a stride that visits all of them.
fn gets(caches: &Caches, which: Which, first: usize, span: usize, count: u64) {
    let source = Source { size: 64 };
    let mut index = 0;
    for _ in 0..count {
        index = (index + 617) % span;
        let key = &caches.keys[(first + index) % KEYS];
        match which {
            Which::Baseline => {
                black_box(key);
            }
            Which::Sparkle => {
                black_box(caches.sparkle.get(key, &source).ok());
            }
            Which::QuickCache => {
                black_box(caches.quick.get(key));
            }
            Which::Moka => {
                black_box(caches.moka.get(key));
            }
        }
    }
}

fn memory_hits(c: &mut Criterion) {
    let caches = caches();
    let mut group = c.benchmark_group("memory_hit");
    group.throughput(Throughput::Elements(1));
    for (which, name) in Which::ALL {
        group.bench_function(name, |b| {
            let mut start = 0;
            b.iter(|| {
                start += 1;
                gets(&caches, which, start, KEYS, 1)
            })
        });
    }
    group.finish();

    // `shared_keys`: every thread walks all keys (many threads running the same kernels);
    // `own_keys`: each thread has its own half (threads running different kernels).
    for (label, own_keys) in [("shared_keys", false), ("own_keys", true)] {
        let mut group = c.benchmark_group(format!("memory_hit_throughput_{label}"));
        for threads in [1usize, 2] {
            group.throughput(Throughput::Elements(threads as u64));
            for (which, name) in Which::ALL {
                group.bench_with_input(
                    BenchmarkId::new(name, format!("{threads}_threads")),
                    &threads,
                    |b, &threads| {
                        b.iter_custom(|iters| {
                            let barrier = Barrier::new(threads + 1);
                            std::thread::scope(|s| {
                                for t in 0..threads {
                                    let (caches, barrier) = (&caches, &barrier);
                                    let (first, span) =
                                        if own_keys { (t * KEYS / 2, KEYS / 2) } else { (t * 311, KEYS) };
                                    s.spawn(move || {
                                        barrier.wait();
                                        gets(caches, which, first, span, iters);
                                        barrier.wait();
                                    });
                                }
                                barrier.wait();
                                let start = Instant::now();
                                barrier.wait();
                                start.elapsed()
                            })
                        })
                    },
                );
            }
        }
        group.finish();
    }
}

fn disk_hits(c: &mut Criterion) {
    let mut group = c.benchmark_group("disk_hit");
    for size in [4 << 10, 10 << 10, 64 << 10, 1 << 20] {
        let dir = tempfile::tempdir().expect("a temporary folder");
        // No memory tier to speak of: every get after the first reads the disk.
        let config = CacheConfig { max_memory_entries: 0, ..CacheConfig::in_dir(dir.path()) };
        let cache = ProgramCache::open(gpu(), &config);
        let source = Source { size };
        let key = CacheKey::derive(&gpu(), &[b"disk", &size.to_le_bytes()]);
        drop(cache.get(&key, &source).expect("the bench source compiles"));
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_function(BenchmarkId::from_parameter(format!("{}KiB", size >> 10)), |b| {
            b.iter(|| black_box(cache.get(&key, &source).ok()))
        });
        assert_eq!(cache.stats().misses, 1, "the bench measured compiles, not disk hits");
    }
    group.finish();
}

/// Creates `count` entries of 200 bytes; returns their paths and contents.
fn populate(root: &Path, count: usize) -> Vec<(PathBuf, Vec<u8>)> {
    let cache = ProgramCache::open(gpu(), &CacheConfig::in_dir(root));
    let source = Source { size: 200 };
    let dir = cache.gpu_dir().expect("the bench folder is writable");
    (0..count as u32)
        .map(|i| {
            let key = CacheKey::derive(&gpu(), &[b"prune", &i.to_le_bytes()]);
            drop(cache.get(&key, &source).expect("the bench source compiles"));
            let path = dir.join(&key.hex()[..2]).join(key.hex());
            let bytes = std::fs::read(&path).expect("the entry was written");
            (path, bytes)
        })
        .collect()
}

fn prune(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let entries = populate(dir.path(), 10_000);
    let total: u64 = entries.iter().map(|(_, b)| b.len() as u64).sum();
    let store = DiskStore::open(dir.path());
    let mut group = c.benchmark_group("prune_10000");
    group.sample_size(10);
    group.bench_function("scan_nothing_to_remove", |b| {
        b.iter(|| black_box(store.prune(u64::MAX, None).expect("prune works")))
    });
    group.bench_function("remove_half", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                for (path, bytes) in &entries {
                    if !path.exists() {
                        std::fs::write(path, bytes).expect("refill");
                    }
                }
                let start = Instant::now();
                let report = store.prune(total / 2, None).expect("prune works");
                spent += start.elapsed();
                assert!(report.removed_entries >= 4999, "{report:?}");
            }
            spent
        })
    });
    group.finish();
}

criterion_group!(benches, memory_hits, disk_hits, prune);
criterion_main!(benches);
