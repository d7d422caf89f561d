//! End-to-end request flow: compile, memory hit, disk hit in a fresh cache, compile errors,
//! driver refusal (entry replaced), a load failure that is not the blob's fault (entry kept),
//! memory-only mode.

use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use crate::cache_support::{self, gpu, Counts, Source};
use sparkle::cache::{CacheConfig, ProgramCache, ProgramHandle};

#[test]
fn compile_then_memory_hit_then_disk_hit() {
    let dir = tempfile::tempdir().unwrap();
    let gpu = gpu("flow");
    let counts = Arc::new(Counts::default());
    let source = Source::new(&gpu, "void main() {}", &counts);
    {
        let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(dir.path()));
        assert!(cache.is_persistent());
        let a = cache.get(&source.key, &source).unwrap();
        let b = cache.get(&source.key, &source).unwrap();
        assert!(ProgramHandle::ptr_eq(&a, &b));
        assert_eq!(a.key(), source.key);
        assert_eq!(counts.compiles.load(SeqCst), 1);
        let stats = cache.stats();
        assert_eq!((stats.misses, stats.memory_hits, stats.compiles, stats.disk_writes), (1, 1, 1, 1));
        assert_eq!(stats.disk_entries, 1);
    }
    let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(dir.path()));
    let c = cache.get(&source.key, &source).unwrap();
    assert_eq!(c.payload, cache_support::payload(source.key, &source.text, 0));
    assert_eq!(counts.compiles.load(SeqCst), 1);
    assert_eq!(counts.loads.load(SeqCst), 1);
    let stats = cache.stats();
    assert_eq!((stats.disk_hits, stats.misses), (1, 0));
    assert!(stats.compile_time_saved.as_millis() >= 10);
    let gpu_dir = cache.gpu_dir().unwrap();
    assert!(gpu_dir.join("gpu.txt").exists());
    assert!(gpu_dir.join(&source.key.hex()[..2]).join(source.key.hex()).exists());
}

#[test]
fn compile_errors_reach_the_caller_and_nothing_is_cached() {
    let dir = tempfile::tempdir().unwrap();
    let gpu = gpu("errors");
    let counts = Arc::new(Counts::default());
    let mut source = Source::new(&gpu, "bad", &counts);
    source.fail = true;
    let cache = ProgramCache::open(gpu, &CacheConfig::in_dir(dir.path()));
    let err = cache.get(&source.key, &source).unwrap_err();
    assert!(err.contains("syntax error"), "{err}");
    assert!(cache.get(&source.key, &source).is_err());
    assert_eq!(counts.compiles.load(SeqCst), 2, "a failure is not cached");
    let stats = cache.stats();
    assert_eq!((stats.compile_errors, stats.memory_entries, stats.disk_writes), (2, 0, 0));
}

#[test]
fn a_refused_blob_is_compiled_and_written_again() {
    let dir = tempfile::tempdir().unwrap();
    let gpu = gpu("refused");
    let counts = Arc::new(Counts::default());
    let source = Source::new(&gpu, "refuse me", &counts);
    drop(
        ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(dir.path())).get(&source.key, &source).unwrap(),
    );
    counts.refuse_loads.store(true, SeqCst);
    let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(dir.path()));
    cache.get(&source.key, &source).unwrap();
    let stats = cache.stats();
    assert_eq!((stats.driver_refused, stats.compiles, stats.disk_writes), (1, 1, 1));
    counts.refuse_loads.store(false, SeqCst);
    let cache = ProgramCache::open(gpu, &CacheConfig::in_dir(dir.path()));
    cache.get(&source.key, &source).unwrap();
    assert_eq!(cache.stats().disk_hits, 1, "the entry was written again");
}

#[test]
fn a_failed_load_keeps_the_entry_and_reaches_the_caller() {
    let dir = tempfile::tempdir().unwrap();
    let gpu = gpu("load fails");
    let counts = Arc::new(Counts::default());
    let source = Source::new(&gpu, "out of memory", &counts);
    let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(dir.path()));
    drop(cache.get(&source.key, &source).unwrap());
    let entry = cache_support::entry_path(&cache.gpu_dir().unwrap(), &source);
    let bytes = std::fs::read(&entry).unwrap();
    drop(cache);

    counts.fail_loads.store(true, SeqCst);
    let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(dir.path()));
    let err = cache.get(&source.key, &source).unwrap_err();
    assert!(err.contains("GL_OUT_OF_MEMORY"), "{err}");
    let stats = cache.stats();
    assert_eq!(
        (stats.load_errors, stats.driver_refused, stats.compiles, stats.disk_hits, stats.memory_entries),
        (1, 0, 0, 0, 0),
        "{stats:?}"
    );
    assert_eq!(std::fs::read(&entry).unwrap(), bytes, "the entry was not kept as it was");

    // Once the device recovers, the same cache loads the kept entry.
    counts.fail_loads.store(false, SeqCst);
    let program = cache.get(&source.key, &source).unwrap();
    assert_eq!(program.payload, cache_support::payload(source.key, &source.text, 0));
    assert_eq!((cache.stats().disk_hits, counts.compiles.load(SeqCst), counts.loads.load(SeqCst)), (1, 1, 2));
}

#[test]
fn memory_only_never_touches_disk() {
    let gpu = gpu("memory");
    let counts = Arc::new(Counts::default());
    let source = Source::new(&gpu, "m", &counts);
    let cache = ProgramCache::open(gpu, &CacheConfig::memory_only());
    assert!(!cache.is_persistent());
    assert_eq!(cache.gpu_dir(), None);
    cache.get(&source.key, &source).unwrap();
    cache.get(&source.key, &source).unwrap();
    assert_eq!(counts.compiles.load(SeqCst), 1);
}

#[test]
fn stats_serialize_to_json_and_display_as_a_table() {
    let gpu = gpu("stats");
    let counts = Arc::new(Counts::default());
    let source = Source::new(&gpu, "s", &counts);
    let cache = ProgramCache::open(gpu, &CacheConfig::memory_only());
    cache.get(&source.key, &source).unwrap();
    cache.get(&source.key, &source).unwrap();
    let stats = cache.stats();
    let json = serde_json::to_value(&stats).unwrap();
    let object = json.as_object().unwrap();
    for field in [
        "memory_hits",
        "coalesced",
        "disk_hits",
        "misses",
        "compiles",
        "compile_errors",
        "compile_time",
        "compile_time_saved",
        "load_time",
        "disk_rejected",
        "driver_refused",
        "load_errors",
        "disk_writes",
        "evictions",
        "memory_entries",
        "memory_bytes",
        "disk_entries",
        "disk_bytes",
    ] {
        assert!(object.contains_key(field), "{field} missing in {json}");
    }
    assert_eq!(json["memory_hits"], 1);
    assert_eq!(json["compile_time"], 0.01, "durations are seconds");
    assert_eq!(json["compile_time_saved"], 0.01, "a memory hit saves the recorded compile time");
    let table = stats.to_string();
    assert!(table.lines().count() >= 10 && table.contains("memory hits"), "{table}");
}
