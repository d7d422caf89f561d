//! Something in the way at one entry's path — a folder, a file where the shard folder belongs, a
//! link, a FIFO — costs that entry only: the right program comes back, one warning per entry, and
//! the disk tier keeps working for every other entry.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use crate::cache_support::{self, capture, entry_path, gpu, is_root, Counts, Source};
use sparkle::cache::{CacheConfig, ProgramCache};

/// No program stays in memory once its handle is dropped: every request goes to the disk tier.
fn no_memory(dir: &Path) -> CacheConfig {
    CacheConfig { max_memory_entries: 0, ..CacheConfig::in_dir(dir) }
}

/// Asks three times for `blocked` (whose path `block` obstructs) and once for another program,
/// then checks: right programs, one warning naming the path, the tier still on, the other entry
/// written.
fn only_that_entry_is_skipped(name: &str, block: impl FnOnce(&Path)) {
    let tmp = tempfile::tempdir().unwrap();
    let gpu = gpu(name);
    let counts = Arc::new(Counts::default());
    let blocked = Source::new(&gpu, "blocked", &counts);
    let other = Source::new(&gpu, "other", &counts);
    let blocked_path = entry_path(&tmp.path().join(gpu.dir_name()), &blocked);
    block(&blocked_path);
    let (cache, captured) = capture(|| {
        let cache = ProgramCache::open(gpu.clone(), &no_memory(tmp.path()));
        for _ in 0..3 {
            let program = cache.get(&blocked.key, &blocked).unwrap();
            assert_eq!(program.payload, cache_support::payload(blocked.key, &blocked.text, 0), "{name}");
        }
        cache.get(&other.key, &other).unwrap();
        cache
    });
    assert!(cache.is_persistent(), "{name}: one entry switched the disk tier off");
    assert_eq!(counts.loads.load(SeqCst), 0, "{name}");
    assert_eq!(counts.compiles.load(SeqCst), 4, "{name}");
    assert_eq!(cache.stats().disk_writes, 1, "{name}: {:?}", cache.stats());
    assert!(entry_path(&cache.gpu_dir().unwrap(), &other).is_file(), "{name}");
    let warnings = captured.warnings();
    assert_eq!(warnings.len(), 1, "{name}: {warnings:?}");
    let shown = blocked_path.parent().unwrap().display().to_string();
    assert!(warnings[0].contains(&shown), "{name}: {warnings:?}");

    // A later run still compiles the blocked entry and loads the other one.
    let cache = ProgramCache::open(gpu, &no_memory(tmp.path()));
    cache.get(&other.key, &other).unwrap();
    cache.get(&blocked.key, &blocked).unwrap();
    assert!(cache.is_persistent(), "{name}");
    assert_eq!((cache.stats().disk_hits, counts.compiles.load(SeqCst)), (1, 5), "{name}");
}

#[test]
fn a_folder_at_an_entry_path() {
    only_that_entry_is_skipped("folder at entry", |path| {
        std::fs::create_dir_all(path.join("inside")).unwrap();
        std::fs::write(path.join("inside").join("data"), b"someone's data").unwrap();
    });
}

#[test]
fn a_file_where_the_shard_folder_belongs() {
    only_that_entry_is_skipped("file at shard", |path| {
        std::fs::create_dir_all(path.parent().unwrap().parent().unwrap()).unwrap();
        std::fs::write(path.parent().unwrap(), b"not a folder").unwrap();
    });
}

/// A link or a FIFO at the entry's path is never read through; our own entry replaces it (the
/// link's target is left alone) and loads in the next run.
#[test]
fn a_link_or_a_fifo_at_an_entry_path_is_replaced_by_our_entry() {
    for kind in ["link", "fifo"] {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("precious");
        std::fs::write(&target, b"precious").unwrap();
        let gpu = gpu(kind);
        let counts = Arc::new(Counts::default());
        let source = Source::new(&gpu, kind, &counts);
        let path = entry_path(&tmp.path().join(gpu.dir_name()), &source);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        if kind == "link" {
            std::os::unix::fs::symlink(&target, &path).unwrap();
        } else {
            let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
            // SAFETY: c_path is a valid NUL-terminated path that outlives the call.
            assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        }
        let (cache, captured) = capture(|| {
            let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(tmp.path()));
            cache.get(&source.key, &source).unwrap();
            cache
        });
        assert_eq!((counts.loads.load(SeqCst), cache.stats().disk_writes), (0, 1), "{kind}");
        assert!(std::fs::symlink_metadata(&path).unwrap().is_file(), "{kind}");
        assert_eq!(std::fs::read(&target).unwrap(), b"precious", "{kind}: the link's target was written");
        assert_eq!(captured.warnings().len(), 1, "{kind}: {:?}", captured.warnings());
        let cache = ProgramCache::open(gpu, &CacheConfig::in_dir(tmp.path()));
        cache.get(&source.key, &source).unwrap();
        assert_eq!(cache.stats().disk_hits, 1, "{kind}");
    }
}

#[test]
fn a_folder_that_refuses_writes_later_switches_to_memory_only_once() {
    if is_root() {
        eprintln!("skipped: permissions do not stop root from writing");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let gpu = gpu("refuses later");
    let counts = Arc::new(Counts::default());
    let sources: Vec<Source> = (0..4).map(|i| Source::new(&gpu, &format!("r{i}"), &counts)).collect();
    let (cache, captured) = capture(|| {
        let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(tmp.path()));
        cache.get(&sources[0].key, &sources[0]).unwrap();
        let gpu_dir = cache.gpu_dir().unwrap();
        std::fs::set_permissions(&gpu_dir, std::fs::Permissions::from_mode(0o500)).unwrap();
        for s in &sources[1..] {
            cache.get(&s.key, s).unwrap();
        }
        std::fs::set_permissions(&gpu_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        cache
    });
    assert!(!cache.is_persistent());
    assert_eq!(cache.stats().disk_writes, 1);
    assert_eq!(captured.warnings().len(), 1, "{:?}", captured.warnings());
}
