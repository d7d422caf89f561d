//! A read-only, pre-seeded cache folder (a fleet ships one): its entries are used, nothing in it
//! changes — no publish, no removal, no recorded use, no description file — and the cache says
//! once that it is read-only. Both the explicit setting and the detection of a folder this
//! process cannot write.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::cache_support::{self, capture, capture_at, entry_path, gpu, is_root, snapshot, Counts, Source};
use sparkle::cache::{CacheConfig, DiskStore, GpuId, ProgramCache, HEADER_LEN};

const SEEDED: usize = 3;

/// Fills `root` with `SEEDED` entries for `gpu` (payloads of 1000 bytes), last used two days
/// ago so that a recorded use would show; returns their sources.
fn seed(root: &Path, gpu: &GpuId, counts: &Arc<Counts>) -> Vec<Source> {
    let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(root));
    let sources: Vec<Source> = (0..SEEDED)
        .map(|i| {
            let mut source = Source::new(gpu, &format!("seeded {i}"), counts);
            source.size = 1000;
            source
        })
        .collect();
    let old = SystemTime::now() - Duration::from_secs(2 * 24 * 3600);
    for source in &sources {
        cache.get(&source.key, source).unwrap();
        let path = entry_path(&cache.gpu_dir().unwrap(), source);
        std::fs::File::options().write(true).open(path).unwrap().set_modified(old).unwrap();
    }
    sources
}

/// Uses every seeded entry, a new program, a corrupt entry and a refused blob against a
/// read-only cache, and checks that nothing on disk changed and that the entries were hits.
fn use_read_only(root: &Path, gpu: &GpuId, config: &CacheConfig, counts: &Arc<Counts>, sources: &[Source]) {
    let before = snapshot(root);
    let cache = ProgramCache::open(gpu.clone(), config);
    assert!(cache.is_read_only() && !cache.is_persistent());
    assert!(cache.gpu_dir().is_some());
    let compiles = counts.compiles.load(SeqCst);
    for source in sources {
        let program = cache.get(&source.key, source).unwrap();
        assert_eq!(program.payload, cache_support::payload(source.key, &source.text, source.size));
    }
    assert_eq!(counts.compiles.load(SeqCst), compiles, "a seeded entry was compiled again");
    let fresh = Source::new(gpu, "not seeded", counts);
    cache.get(&fresh.key, &fresh).unwrap();
    let stats = cache.stats();
    assert_eq!((stats.disk_hits, stats.misses, stats.disk_writes), (SEEDED as u64, 1, 0), "{stats:?}");
    assert_eq!(stats.disk_entries, SEEDED as u64, "{stats:?}");
    assert_eq!(stats.disk_bytes, (SEEDED * (HEADER_LEN + 1000)) as u64, "{stats:?}");
    drop(cache);
    assert_eq!(snapshot(root), before, "the read-only cache changed its folder");
}

#[test]
fn an_explicitly_read_only_cache_uses_its_entries_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let gpu = gpu("read-only fleet");
    let counts = Arc::new(Counts::default());
    let sources = seed(tmp.path(), &gpu, &counts);
    // A size bound far below what is there: a read-only cache never prunes either.
    let config = CacheConfig {
        read_only: true,
        max_disk_bytes: 64 << 10,
        max_age: Some(Duration::from_secs(3600)),
        ..CacheConfig::in_dir(tmp.path())
    };
    let (_, captured) =
        capture_at(tracing::Level::INFO, || use_read_only(tmp.path(), &gpu, &config, &counts, &sources));
    let said = captured.lines().into_iter().filter(|l| l.contains("read-only")).count();
    assert_eq!(said, 1, "{:?}", captured.lines());
    assert!(captured.warnings().is_empty(), "{:?}", captured.warnings());

    // A corrupt entry and a refused blob stay where they are.
    let path = entry_path(&tmp.path().join(gpu.dir_name()), &sources[0]);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[HEADER_LEN] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let before = snapshot(tmp.path());
    let cache = ProgramCache::open(gpu.clone(), &config);
    cache.get(&sources[0].key, &sources[0]).unwrap();
    counts.refuse_loads.store(true, SeqCst);
    cache.get(&sources[1].key, &sources[1]).unwrap();
    counts.refuse_loads.store(false, SeqCst);
    let stats = cache.stats();
    assert_eq!((stats.disk_rejected, stats.driver_refused, stats.disk_writes), (1, 1, 0), "{stats:?}");
    drop(cache);
    assert_eq!(snapshot(tmp.path()), before, "a read-only cache removed an entry");
}

#[test]
fn an_explicitly_read_only_cache_without_a_gpu_folder_is_memory_only() {
    let tmp = tempfile::tempdir().unwrap();
    let gpu = gpu("nothing shipped");
    let counts = Arc::new(Counts::default());
    let source = Source::new(&gpu, "x", &counts);
    let config = CacheConfig { read_only: true, ..CacheConfig::in_dir(tmp.path().join("absent")) };
    let (cache, captured) = capture(|| {
        let cache = ProgramCache::open(gpu.clone(), &config);
        cache.get(&source.key, &source).unwrap();
        cache
    });
    assert!(!cache.is_persistent() && !cache.is_read_only());
    assert_eq!(captured.warnings().len(), 1, "{:?}", captured.lines());
    assert!(!tmp.path().join("absent").exists(), "a read-only cache created its folder");
}

#[test]
fn a_folder_that_cannot_be_written_is_used_read_only() {
    if is_root() {
        eprintln!(
            "skipped: permissions do not stop root from writing; the explicit setting is tested instead"
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let gpu = gpu("read-only by permissions");
    let counts = Arc::new(Counts::default());
    let sources = seed(tmp.path(), &gpu, &counts);
    let gpu_dir = tmp.path().join(gpu.dir_name());
    let mut folders = vec![tmp.path().to_path_buf(), gpu_dir.clone()];
    for source in &sources {
        folders.push(entry_path(&gpu_dir, source).parent().unwrap().to_path_buf());
    }
    for folder in &folders {
        std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o500)).unwrap();
    }
    let config = CacheConfig::in_dir(tmp.path());
    let (_, captured) = capture(|| use_read_only(tmp.path(), &gpu, &config, &counts, &sources));
    for folder in &folders {
        std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let warnings = captured.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("read-only"), "{warnings:?}");
    assert_eq!(DiskStore::open(tmp.path()).list().unwrap().len(), SEEDED);
}
