//! Privacy and degradation: private folders, entries of other users are not loaded, and an
//! unusable cache folder leaves the cache in memory only with exactly one warning.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use crate::cache_support::{capture, gpu, Counts, Source};
use sparkle::cache::{CacheConfig, ProgramCache};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn folders_are_created_private() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("a").join("cache");
    let gpu = gpu("private");
    let counts = Arc::new(Counts::default());
    let source = Source::new(&gpu, "p", &counts);
    let cache = ProgramCache::open(gpu, &CacheConfig::in_dir(&root));
    cache.get(&source.key, &source).unwrap();
    let gpu_dir = cache.gpu_dir().unwrap();
    let entry = gpu_dir.join(&source.key.hex()[..2]).join(source.key.hex());
    assert_eq!(mode(&root), 0o700);
    assert_eq!(mode(&gpu_dir), 0o700);
    assert_eq!(mode(entry.parent().unwrap()), 0o700);
    assert_eq!(mode(&entry), 0o600);
}

#[test]
fn an_entry_owned_by_another_user_is_never_loaded_and_replaced_by_ours() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: changing a file's owner needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let gpu = gpu("foreign");
    let counts = Arc::new(Counts::default());
    let source = Source::new(&gpu, "not mine", &counts);
    let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(tmp.path()));
    cache.get(&source.key, &source).unwrap();
    let entry = cache.gpu_dir().unwrap().join(&source.key.hex()[..2]).join(source.key.hex());
    drop(cache);
    std::os::unix::fs::chown(&entry, Some(65534), Some(65534)).unwrap();

    let (cache, captured) = capture(|| {
        let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(tmp.path()));
        cache.get(&source.key, &source).unwrap();
        cache
    });
    assert_eq!(counts.loads.load(SeqCst), 0, "another user's blob reached load");
    assert_eq!(counts.compiles.load(SeqCst), 2);
    assert_eq!(cache.stats().disk_writes, 1, "our own entry replaces the foreign one");
    assert_eq!(std::fs::metadata(&entry).unwrap().uid(), 0, "the foreign entry is still there");
    let warnings = captured.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("another user"), "{warnings:?}");

    // The next run loads our entry instead of compiling forever.
    let cache = ProgramCache::open(gpu, &CacheConfig::in_dir(tmp.path()));
    cache.get(&source.key, &source).unwrap();
    assert_eq!((cache.stats().disk_hits, counts.compiles.load(SeqCst), counts.loads.load(SeqCst)), (1, 2, 1));
}

#[test]
fn an_unusable_folder_means_memory_only_with_one_warning() {
    let tmp = tempfile::tempdir().unwrap();
    // A path below a regular file fails with ENOTDIR, even for root.
    std::fs::write(tmp.path().join("file"), b"").unwrap();
    let root = tmp.path().join("file").join("cache");
    let gpu = gpu("unusable");
    let counts = Arc::new(Counts::default());
    let sources: Vec<Source> = (0..3).map(|i| Source::new(&gpu, &format!("u{i}"), &counts)).collect();
    let (cache, captured) = capture(|| {
        let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(&root));
        for s in &sources {
            cache.get(&s.key, s).unwrap();
            cache.get(&s.key, s).unwrap();
        }
        cache
    });
    assert!(!cache.is_persistent());
    assert_eq!(cache.gpu_dir(), None);
    assert_eq!(counts.compiles.load(SeqCst), 3);
    assert_eq!(cache.stats().memory_hits, 3);
    let warnings = captured.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("memory only") && warnings[0].contains("SPARKLE_CACHE_DIR"), "{warnings:?}");
}

#[test]
fn a_folder_that_breaks_later_switches_to_memory_only_with_one_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let gpu = gpu("breaks later");
    let counts = Arc::new(Counts::default());
    let sources: Vec<Source> = (0..4).map(|i| Source::new(&gpu, &format!("b{i}"), &counts)).collect();
    let (cache, captured) = capture(|| {
        let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(tmp.path()));
        assert!(cache.is_persistent());
        cache.get(&sources[0].key, &sources[0]).unwrap();
        // The GPU folder turns into a file: every later write fails (ENOTDIR), even for root.
        let gpu_dir = cache.gpu_dir().unwrap();
        std::fs::remove_dir_all(&gpu_dir).unwrap();
        std::fs::write(&gpu_dir, b"not a folder").unwrap();
        for s in &sources[1..] {
            cache.get(&s.key, s).unwrap();
        }
        cache
    });
    assert!(!cache.is_persistent());
    assert_eq!(counts.compiles.load(SeqCst), 4);
    assert_eq!(cache.stats().disk_writes, 1);
    let warnings = captured.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
}
