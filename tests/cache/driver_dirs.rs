//! Driver cache folders (`<cache dir>/drivers/<name>`) in the backend-free view of a cache
//! folder: sized and counted against the bound, pruned as a whole (by age like an entry; over
//! the bound before any entry), cleared, never verified, and refused when they are links.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::cache_support::{self, gpu, Counts, Source};
use sparkle::cache::{
    prepare_driver_cache, CacheConfig, DiskStore, ProgramCache, DRIVER_CACHES_DIR, HEADER_LEN,
};

const ENTRY: u64 = (HEADER_LEN + 1000) as u64;

/// `n` entries of 1000-byte payloads, last used `age` ago.
fn entries(root: &Path, n: usize, age: Duration) -> Vec<PathBuf> {
    let gpu = gpu("driver dirs");
    let counts = Arc::new(Counts::default());
    let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(root));
    let when = SystemTime::now() - age;
    (0..n)
        .map(|i| {
            let mut source = Source::new(&gpu, &format!("entry {i}"), &counts);
            source.size = 1000;
            cache.get(&source.key, &source).unwrap();
            let path = cache_support::entry_path(&cache.gpu_dir().unwrap(), &source);
            File::options().write(true).open(&path).unwrap().set_modified(when).unwrap();
            path
        })
        .collect()
}

/// A driver folder `name` holding files of these sizes (in a subfolder, as drivers nest them).
fn driver_folder(root: &Path, name: &str, sizes: &[usize]) -> PathBuf {
    let dir = prepare_driver_cache(root, name).unwrap();
    fs::create_dir_all(dir.join("sub")).unwrap();
    for (i, size) in sizes.iter().enumerate() {
        fs::write(dir.join("sub").join(format!("f{i}")), vec![7u8; *size]).unwrap();
    }
    dir
}

/// Sets the mtime of everything in `dir`, and of `dir` itself, to `age` ago.
fn age_tree(dir: &Path, age: Duration) {
    let when = SystemTime::now() - age;
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            age_tree(&path, age);
        } else {
            File::options().write(true).open(&path).unwrap().set_modified(when).unwrap();
        }
    }
    File::open(dir).unwrap().set_modified(when).unwrap();
}

#[test]
fn driver_folders_are_sized_and_counted_against_the_bound() {
    let tmp = tempfile::tempdir().unwrap();
    entries(tmp.path(), 2, Duration::from_secs(60));
    let dir = driver_folder(tmp.path(), "gl", &[3000, 500]);
    let store = DiskStore::open(tmp.path());
    let drivers = store.driver_caches().unwrap();
    assert_eq!(drivers.len(), 1, "{drivers:?}");
    assert_eq!((drivers[0].name.as_str(), drivers[0].files, drivers[0].bytes), ("gl", 2, 3500));
    assert_eq!(drivers[0].path, dir);
    assert_eq!(store.usage().unwrap(), (2, 2 * ENTRY + 3500));
    // Entries are listed as before: the driver's files are none of them.
    assert_eq!(store.list().unwrap().len(), 2);
}

#[test]
fn over_the_bound_driver_folders_go_before_any_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = entries(tmp.path(), 4, Duration::from_secs(3600));
    let small = driver_folder(tmp.path(), "small", &[2000]);
    let big = driver_folder(tmp.path(), "big", &[70_000]);
    let store = DiskStore::open(tmp.path());

    // Everything fits: nothing goes.
    let report = store.prune(4 * ENTRY + 72_000, None).unwrap();
    assert_eq!((report.removed_entries, report.removed_driver_caches), (0, 0), "{report:?}");
    assert_eq!((report.remaining_driver_caches, report.remaining_driver_bytes), (2, 72_000));
    assert_eq!(report.remaining_bytes, 4 * ENTRY + 72_000);

    // Over by a little: the largest driver folder goes, the entries (and the small one) stay,
    // although the driver folders were used more recently than any entry.
    let report = store.prune(4 * ENTRY + 10_000, None).unwrap();
    assert_eq!((report.removed_entries, report.removed_driver_caches), (0, 1), "{report:?}");
    assert_eq!(report.removed_bytes, 70_000);
    assert!(!big.exists() && small.exists());
    assert!(paths.iter().all(|p| p.exists()));

    // Still over with every driver folder gone: then the least recently used entries.
    File::options().write(true).open(&paths[0]).unwrap().set_modified(SystemTime::now()).unwrap();
    let report = store.prune(2 * ENTRY, None).unwrap();
    assert_eq!((report.removed_entries, report.removed_driver_caches), (2, 1), "{report:?}");
    assert_eq!((report.remaining_entries, report.remaining_bytes), (2, 2 * ENTRY));
    assert!(!small.exists());
    assert!(paths[0].exists(), "the most recently used entry stays");
    // Nothing of the removals is left aside.
    assert_eq!(fs::read_dir(tmp.path().join(DRIVER_CACHES_DIR)).unwrap().count(), 0);
}

#[test]
fn age_counts_the_last_recorded_use_or_the_newest_file() {
    let tmp = tempfile::tempdir().unwrap();
    let days = |d: u64| Duration::from_secs(d * 86_400);
    let stale = driver_folder(tmp.path(), "stale", &[100]);
    age_tree(&stale, days(10));
    let written = driver_folder(tmp.path(), "written", &[100, 100]);
    age_tree(&written, days(10));
    fs::write(written.join("sub").join("new"), b"fresh").unwrap();
    let used = driver_folder(tmp.path(), "used", &[100]);
    age_tree(&used, days(10));
    // A process pointing its driver there records the use, even if the driver writes nothing.
    assert_eq!(prepare_driver_cache(tmp.path(), "used").unwrap(), used);

    let report = DiskStore::open(tmp.path()).prune(1 << 30, Some(days(5))).unwrap();
    assert_eq!((report.removed_driver_caches, report.remaining_driver_caches), (1, 2), "{report:?}");
    assert!(!stale.exists() && written.exists() && used.exists());
}

#[test]
fn clear_removes_driver_folders_and_verify_leaves_their_files_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = entries(tmp.path(), 2, Duration::from_secs(60));
    let dir = driver_folder(tmp.path(), "gl", &[100]);
    // Not an entry's format at all: the driver's own.
    fs::write(dir.join("index"), b"not a sparkle entry").unwrap();
    let store = DiskStore::open(tmp.path());

    let report = store.verify(false).unwrap();
    assert_eq!((report.checked, report.valid, report.driver_caches), (2, 2, 1), "{report:?}");
    assert!(report.removed.is_empty() && report.problems.is_empty(), "{report:?}");
    assert!(dir.join("index").exists());

    let report = store.clear().unwrap();
    assert_eq!((report.removed_entries, report.removed_driver_caches), (2, 1), "{report:?}");
    assert!(report.problems.is_empty(), "{report:?}");
    assert!(!tmp.path().join(DRIVER_CACHES_DIR).exists());
    assert!(paths.iter().all(|p| !p.exists()));
}

#[test]
fn linked_driver_folders_are_problems_never_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("precious"), b"keep").unwrap();
    let parent = tmp.path().join(DRIVER_CACHES_DIR);
    fs::create_dir(&parent).unwrap();
    let link = parent.join("gl");
    std::os::unix::fs::symlink(outside.path(), &link).unwrap();

    let err = prepare_driver_cache(tmp.path(), "gl").unwrap_err().to_string();
    assert!(err.contains("symbolic link") && err.contains("verify --fix"), "{err}");
    let store = DiskStore::open(tmp.path());
    let drivers = store.driver_caches().unwrap();
    assert_eq!(drivers.len(), 1);
    assert!(drivers[0].problem.as_deref().unwrap().contains("symbolic link"), "{drivers:?}");
    assert_eq!(store.usage().unwrap(), (0, 0), "a link's target is not counted");
    let report = store.prune(64 << 10, Some(Duration::from_secs(1))).unwrap();
    assert_eq!(report.removed_driver_caches, 0, "pruning leaves problems alone");

    let report = store.verify(false).unwrap();
    assert_eq!(report.problems.len(), 1, "{report:?}");
    let report = store.verify(true).unwrap();
    assert_eq!(report.fixed.len(), 1, "{report:?}");
    assert!(fs::symlink_metadata(&link).is_err(), "the link is removed");
    assert!(outside.path().join("precious").exists(), "its target is untouched");
    assert!(prepare_driver_cache(tmp.path(), "gl").is_ok());

    // The whole `drivers` folder as a link is a problem too.
    fs::remove_dir_all(&parent).unwrap();
    std::os::unix::fs::symlink(outside.path(), &parent).unwrap();
    assert!(prepare_driver_cache(tmp.path(), "gl").is_err());
    let report = store.clear().unwrap();
    assert_eq!(report.removed_problems, 1, "{report:?}");
    assert!(outside.path().join("precious").exists());
}

#[test]
fn a_publish_over_the_bound_prunes_the_driver_folder_first() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = driver_folder(tmp.path(), "gl", &[60_000]);
    let config = CacheConfig { max_disk_bytes: 64 << 10, ..CacheConfig::in_dir(tmp.path()) };
    let gpu = gpu("publish");
    let counts = Arc::new(Counts::default());
    let cache = ProgramCache::open(gpu.clone(), &config);
    for i in 0..8 {
        let mut source = Source::new(&gpu, &format!("publish {i}"), &counts);
        source.size = 1000;
        cache.get(&source.key, &source).unwrap();
    }
    assert!(!dir.exists(), "the driver folder went before any entry");
    let (entries, bytes) = DiskStore::open(tmp.path()).usage().unwrap();
    assert_eq!((entries, bytes), (8, 8 * ENTRY));
}
