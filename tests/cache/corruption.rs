//! Every single-byte flip and every truncation of an entry file is rejected before the payload
//! reaches the backend's `load`; the entry is removed and the program compiled again.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use crate::cache_support::{self, gpu, Counts, Source};
use sparkle::cache::{CacheConfig, DiskStore, GpuId, ProgramCache, HEADER_LEN};

fn entry_path(gpu_dir: &Path, source: &Source) -> PathBuf {
    let hex = source.key.hex();
    gpu_dir.join(&hex[..2]).join(hex)
}

/// Writes `bytes` as the entry, opens a fresh cache and gets the program: it must compile.
fn must_reject(dir: &Path, gpu: &GpuId, source: &Source, counts: &Counts, bytes: &[u8], what: &str) {
    let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(dir));
    let path = entry_path(&cache.gpu_dir().unwrap(), source);
    std::fs::write(&path, bytes).unwrap();
    let (loads, compiles) = (counts.loads.load(SeqCst), counts.compiles.load(SeqCst));
    let handle = cache.get(&source.key, source).unwrap();
    assert_eq!(counts.loads.load(SeqCst), loads, "{what}: the corrupt entry reached load");
    assert_eq!(counts.compiles.load(SeqCst), compiles + 1, "{what}: not compiled");
    assert_eq!(handle.payload, cache_support::payload(source.key, &source.text, source.size));
    let stats = cache.stats();
    assert_eq!((stats.disk_rejected, stats.disk_writes), (1, 1), "{what}: {stats:?}");
}

#[test]
fn every_flip_and_truncation_is_rejected_before_load() {
    let dir = tempfile::tempdir().unwrap();
    let gpu = gpu("corruption");
    let counts = Arc::new(Counts::default());
    let mut source = Source::new(&gpu, "flip me", &counts);
    source.size = 100;
    let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(dir.path()));
    drop(cache.get(&source.key, &source).unwrap());
    let path = entry_path(&cache.gpu_dir().unwrap(), &source);
    drop(cache);
    let good = std::fs::read(&path).unwrap();
    assert_eq!(good.len(), HEADER_LEN + 100);

    // The pristine entry loads.
    let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(dir.path()));
    cache.get(&source.key, &source).unwrap();
    assert_eq!((counts.loads.load(SeqCst), cache.stats().disk_hits), (1, 1));
    drop(cache);

    let mut cases = 0;
    for index in 0..good.len() {
        for mask in [0xFF, 0x01, 0x80] {
            let mut bad = good.clone();
            bad[index] ^= mask;
            must_reject(dir.path(), &gpu, &source, &counts, &bad, &format!("byte {index} ^ {mask:#x}"));
            cases += 1;
        }
    }
    for len in 0..good.len() {
        must_reject(dir.path(), &gpu, &source, &counts, &good[..len], &format!("truncated to {len}"));
        cases += 1;
    }
    let mut longer = good.clone();
    longer.push(0);
    must_reject(dir.path(), &gpu, &source, &counts, &longer, "one byte appended");
    cases += 1;
    assert_eq!(cases, good.len() * 4 + 1);
    assert_eq!(counts.loads.load(SeqCst), 1, "only the pristine entry was ever loaded");
    assert_eq!(counts.compiles.load(SeqCst), 1 + cases);

    // After all that the entry on disk is whole again.
    assert_eq!(std::fs::read(&path).unwrap().len(), good.len());
}

#[test]
fn an_entry_of_another_gpu_or_key_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let (gpu_a, gpu_b) = (gpu("a"), gpu("b"));
    let counts = Arc::new(Counts::default());
    let a = Source::new(&gpu_a, "same text", &counts);
    let b = Source::new(&gpu_b, "same text", &counts);
    let other = Source::new(&gpu_a, "other text", &counts);
    let cache_a = ProgramCache::open(gpu_a.clone(), &CacheConfig::in_dir(dir.path()));
    cache_a.get(&a.key, &a).unwrap();
    cache_a.get(&other.key, &other).unwrap();
    let bytes_a = std::fs::read(entry_path(&cache_a.gpu_dir().unwrap(), &a)).unwrap();
    let bytes_other = std::fs::read(entry_path(&cache_a.gpu_dir().unwrap(), &other)).unwrap();
    // GPU b's folder gets GPU a's entry for the same text (different key), and a's folder gets
    // the entry of another key under a's name.
    let cache_b: ProgramCache<cache_support::Program> =
        ProgramCache::open(gpu_b.clone(), &CacheConfig::in_dir(dir.path()));
    std::fs::create_dir_all(entry_path(&cache_b.gpu_dir().unwrap(), &b).parent().unwrap()).unwrap();
    std::fs::write(entry_path(&cache_b.gpu_dir().unwrap(), &b), &bytes_a).unwrap();
    must_reject(dir.path(), &gpu_b, &b, &counts, &bytes_a, "another GPU's entry");
    must_reject(dir.path(), &gpu_a, &a, &counts, &bytes_other, "another key's entry");
}

#[test]
fn verify_removes_corrupt_entries_and_keeps_good_ones() {
    let dir = tempfile::tempdir().unwrap();
    let gpu = gpu("verify");
    let counts = Arc::new(Counts::default());
    let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(dir.path()));
    let sources: Vec<Source> = (0..6).map(|i| Source::new(&gpu, &format!("v{i}"), &counts)).collect();
    for s in &sources {
        cache.get(&s.key, s).unwrap();
    }
    let gpu_dir = cache.gpu_dir().unwrap();
    let mut bad = std::fs::read(entry_path(&gpu_dir, &sources[0])).unwrap();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    std::fs::write(entry_path(&gpu_dir, &sources[0]), &bad).unwrap();
    std::fs::write(entry_path(&gpu_dir, &sources[1]), b"short").unwrap();
    let header_of_2 = std::fs::read(entry_path(&gpu_dir, &sources[2])).unwrap();
    std::fs::write(entry_path(&gpu_dir, &sources[3]), &header_of_2).unwrap();

    let report = DiskStore::open(dir.path()).verify(false).unwrap();
    assert_eq!((report.checked, report.valid, report.removed.len()), (6, 3, 3), "{report:?}");
    for s in &sources[..2] {
        assert!(!entry_path(&gpu_dir, s).exists());
    }
    assert!(!entry_path(&gpu_dir, &sources[3]).exists());
    assert!(entry_path(&gpu_dir, &sources[2]).exists());
    assert_eq!(DiskStore::open(dir.path()).verify(false).unwrap().valid, 3);
}
