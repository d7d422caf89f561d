//! `DiskStore`, the backend-free view of a cache folder: gpus, list, prune (age, then least
//! recently used), clear, and the leftovers of interrupted writes.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::cache_support::{self, entry_path, gpu, is_root, snapshot, Counts, Source};
use sparkle::cache::{CacheConfig, DiskStore, ProgramCache, HEADER_LEN};

/// Fills `root` with `n` entries of 1000-byte payloads for each of two GPUs; returns the entry
/// paths, oldest use first.
fn fill(root: &std::path::Path, n: usize) -> Vec<PathBuf> {
    let counts = Arc::new(Counts::default());
    let mut paths = Vec::new();
    for name in ["gpu one", "gpu two"] {
        let gpu = gpu(name);
        let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(root));
        for i in 0..n {
            let mut source = Source::new(&gpu, &format!("{name} {i}"), &counts);
            source.size = 1000;
            cache.get(&source.key, &source).unwrap();
            paths.push(cache.gpu_dir().unwrap().join(&source.key.hex()[..2]).join(source.key.hex()));
        }
    }
    // Distinct last uses, one minute apart, in the order of `paths`.
    let base = SystemTime::now() - Duration::from_secs(3600 * 24);
    for (i, path) in paths.iter().enumerate() {
        File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(base + Duration::from_secs(60 * i as u64))
            .unwrap();
    }
    paths
}

const ENTRY: u64 = (HEADER_LEN + 1000) as u64;

#[test]
fn gpus_and_list_describe_the_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = fill(tmp.path(), 3);
    let store = DiskStore::open(tmp.path());
    let gpus = store.gpus().unwrap();
    assert_eq!(gpus.len(), 2);
    assert!(gpus.iter().any(|(_, text)| text.contains("renderer: gpu one")), "{gpus:?}");
    assert!(gpus.iter().all(|(dir, _)| dir.starts_with("gl-")));
    let list = store.list().unwrap();
    assert_eq!(list.len(), 6);
    for info in &list {
        assert!(paths.contains(&info.path));
        assert_eq!(
            (info.backend, info.blob_format, info.payload_len),
            (sparkle::cache::backend_tag("gl"), cache_support::FORMAT, 1000)
        );
        assert_eq!(info.file_size, ENTRY);
        assert_eq!(info.compile_time, Duration::from_millis(10));
        assert!(info.created_unix_ns > 0 && info.problem.is_none(), "{info:?}");
        assert_eq!(info.path.file_name().unwrap().to_str().unwrap(), info.key);
    }
    let json = serde_json::to_value(&list[0]).unwrap();
    for field in ["gpu_dir", "key", "path", "payload_len", "file_size", "compile_time", "last_used_unix_ns"] {
        assert!(json.get(field).is_some(), "{field} missing in {json}");
    }
    // A missing root is an empty cache.
    assert!(DiskStore::open(tmp.path().join("nothing")).list().unwrap().is_empty());
}

#[test]
fn prune_removes_least_recently_used_first() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = fill(tmp.path(), 5);
    let report = DiskStore::open(tmp.path()).prune(ENTRY * 7, None).unwrap();
    assert_eq!((report.removed_entries, report.removed_bytes), (3, 3 * ENTRY));
    assert_eq!((report.remaining_entries, report.remaining_bytes), (7, 7 * ENTRY));
    for (i, path) in paths.iter().enumerate() {
        assert_eq!(path.exists(), i >= 3, "entry {i}");
    }
}

#[test]
fn prune_removes_entries_unused_for_too_long() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = fill(tmp.path(), 5);
    // Entries are 24 h old and one minute apart: a 24 h − 4.5 min bound removes the oldest five.
    let max_age = Duration::from_secs(24 * 3600 - 270);
    let report = DiskStore::open(tmp.path()).prune(u64::MAX, Some(max_age)).unwrap();
    assert_eq!(report.removed_entries, 5, "{report:?}");
    for (i, path) in paths.iter().enumerate() {
        assert_eq!(path.exists(), i >= 5, "entry {i}");
    }
}

#[test]
fn prune_removes_stale_temporary_files_only() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = fill(tmp.path(), 1);
    let shard = paths[0].parent().unwrap();
    let (stale, fresh) = (shard.join(".tmp-stale"), shard.join(".tmp-fresh"));
    std::fs::write(&stale, b"partial").unwrap();
    std::fs::write(&fresh, b"being written").unwrap();
    File::options()
        .write(true)
        .open(&stale)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(7200))
        .unwrap();
    let report = DiskStore::open(tmp.path()).prune(u64::MAX, None).unwrap();
    assert_eq!((report.removed_temp_files, report.removed_entries, report.remaining_entries), (1, 0, 2));
    assert!(!stale.exists() && fresh.exists());
}

#[test]
fn clear_removes_everything_of_ours() {
    let tmp = tempfile::tempdir().unwrap();
    fill(tmp.path(), 4);
    std::fs::write(tmp.path().join("notes.txt"), b"the user's own file").unwrap();
    let report = DiskStore::open(tmp.path()).clear().unwrap();
    assert_eq!((report.removed_entries, report.remaining_entries), (8, 0));
    assert!(DiskStore::open(tmp.path()).gpus().unwrap().is_empty());
    assert!(tmp.path().join("notes.txt").exists(), "clear removed a file that is not an entry");
    // A cache opened afterwards works again.
    let counts = Arc::new(Counts::default());
    let gpu = gpu("after clear");
    let source = Source::new(&gpu, "x", &counts);
    let cache = ProgramCache::open(gpu, &CacheConfig::in_dir(tmp.path()));
    cache.get(&source.key, &source).unwrap();
    assert_eq!(DiskStore::open(tmp.path()).list().unwrap().len(), 1);
}

#[test]
fn the_cache_prunes_itself_when_over_its_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let gpu = gpu("bounded");
    let counts = Arc::new(Counts::default());
    let config = CacheConfig { max_disk_bytes: ENTRY * 10, ..CacheConfig::in_dir(tmp.path()) };
    let cache = ProgramCache::open(gpu.clone(), &config);
    for i in 0..25 {
        let mut source = Source::new(&gpu, &format!("b{i}"), &counts);
        source.size = 1000;
        cache.get(&source.key, &source).unwrap();
    }
    let on_disk = DiskStore::open(tmp.path()).prune(u64::MAX, None).unwrap();
    assert!(on_disk.remaining_bytes <= ENTRY * 10, "{on_disk:?}");
    assert!(on_disk.remaining_entries >= 9, "pruned far below the bound: {on_disk:?}");
    let stats = cache.stats();
    assert_eq!((stats.disk_entries, stats.disk_bytes), (on_disk.remaining_entries, on_disk.remaining_bytes));
}

#[test]
fn opening_and_reading_never_prune_only_publishing_does() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = fill(tmp.path(), 40);
    let total = ENTRY * paths.len() as u64;
    let files_now = || snapshot(tmp.path()).into_keys().collect::<Vec<_>>();
    let before = files_now();
    // 64K is below the 80 entries there (86K), and the age bound below their last use (a day).
    let config = CacheConfig {
        max_disk_bytes: 64 << 10,
        max_age: Some(Duration::from_secs(3600)),
        ..CacheConfig::in_dir(tmp.path())
    };
    let counts = Arc::new(Counts::default());
    let gpu = gpu("gpu one");
    let mut seeded = Source::new(&gpu, "gpu one 0", &counts);
    seeded.size = 1000;
    let cache = ProgramCache::open(gpu.clone(), &config);
    cache.get(&seeded.key, &seeded).unwrap();
    cache.get(&seeded.key, &seeded).unwrap();
    let stats = cache.stats();
    assert_eq!((stats.disk_hits, stats.memory_hits), (1, 1), "{stats:?}");
    assert_eq!((stats.disk_entries, stats.disk_bytes), (paths.len() as u64, total), "{stats:?}");
    assert_eq!(files_now(), before, "opening, reading or counting removed a file");

    let mut fresh = Source::new(&gpu, "fresh", &counts);
    fresh.size = 1000;
    cache.get(&fresh.key, &fresh).unwrap();
    let on_disk = DiskStore::open(tmp.path()).prune(u64::MAX, None).unwrap();
    // Every seeded entry is older than the age bound except the one just used.
    assert_eq!(on_disk.remaining_entries, 2, "{on_disk:?}");
    assert!(entry_path(&cache.gpu_dir().unwrap(), &fresh).exists());
    let stats = cache.stats();
    assert_eq!((stats.disk_entries, stats.disk_bytes), (2, 2 * ENTRY), "{stats:?}");
}

/// Things that are problems for maintenance, planted next to good entries.
struct Planted {
    _outside: tempfile::TempDir,
    target: PathBuf,
    folder: PathBuf,
    link: PathBuf,
    fifo: PathBuf,
    foreign: Option<PathBuf>,
    good: Vec<PathBuf>,
}

fn plant(root: &std::path::Path) -> Planted {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("target");
    std::fs::write(&target, b"the user's file").unwrap();
    let gpu = gpu("planted");
    let counts = Arc::new(Counts::default());
    let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(root));
    let gpu_dir = cache.gpu_dir().unwrap();
    let mut good = Vec::new();
    for i in 0..3 {
        let source = Source::new(&gpu, &format!("good {i}"), &counts);
        cache.get(&source.key, &source).unwrap();
        good.push(entry_path(&gpu_dir, &source));
    }
    let at = |text: &str| {
        let path = entry_path(&gpu_dir, &Source::new(&gpu, text, &counts));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        path
    };
    let folder = at("folder");
    std::fs::create_dir_all(folder.join("deeper")).unwrap();
    std::fs::write(folder.join("deeper").join("file"), b"x").unwrap();
    std::os::unix::fs::symlink(&target, folder.join("deeper").join("link")).unwrap();
    let link = at("link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let fifo = at("fifo");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: c_path is a valid NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let foreign = is_root().then(|| {
        let source = Source::new(&gpu, "foreign", &counts);
        cache.get(&source.key, &source).unwrap();
        let path = entry_path(&gpu_dir, &source);
        std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
        path
    });
    Planted { _outside: outside, target, folder, link, fifo, foreign, good }
}

#[test]
fn list_and_verify_report_problems_and_fix_removes_them() {
    let tmp = tempfile::tempdir().unwrap();
    let planted = plant(tmp.path());
    let problems = 3 + usize::from(planted.foreign.is_some());
    let store = DiskStore::open(tmp.path());

    let list = store.list().unwrap();
    let problem_of = |path: &PathBuf| {
        list.iter().find(|e| &e.path == path).and_then(|e| e.problem.clone()).unwrap_or_default()
    };
    assert!(problem_of(&planted.folder).contains("a folder at an entry's path"), "{list:#?}");
    assert!(problem_of(&planted.link).contains("a symbolic link"), "{list:#?}");
    assert!(problem_of(&planted.fifo).contains("a FIFO"), "{list:#?}");
    if let Some(foreign) = &planted.foreign {
        assert_eq!(problem_of(foreign), "owned by uid 65534; not loaded", "{list:#?}");
    }
    assert_eq!(list.iter().filter(|e| e.problem.is_some()).count(), problems, "{list:#?}");

    let report = store.verify(false).unwrap();
    assert_eq!((report.checked, report.valid), (3, 3), "{report:?}");
    assert_eq!((report.problems.len(), report.fixed.len()), (problems, 0), "{report:?}");
    assert!(report.removed.is_empty());
    assert!(planted.folder.exists() && planted.fifo.exists() && planted.link.symlink_metadata().is_ok());

    let report = store.verify(true).unwrap();
    assert_eq!((report.problems.len(), report.fixed.len(), report.valid), (0, problems, 3), "{report:?}");
    for path in [&planted.folder, &planted.link, &planted.fifo].into_iter().chain(&planted.foreign) {
        assert!(std::fs::symlink_metadata(path).is_err(), "{} is still there", path.display());
    }
    assert_eq!(std::fs::read(&planted.target).unwrap(), b"the user's file", "a link's target was touched");
    assert!(planted.good.iter().all(|p| p.is_file()));
    assert!(store.verify(false).unwrap().problems.is_empty());
}

#[test]
fn clear_removes_problems_too() {
    let tmp = tempfile::tempdir().unwrap();
    let planted = plant(tmp.path());
    let problems = 3 + u64::from(planted.foreign.is_some());
    let report = DiskStore::open(tmp.path()).clear().unwrap();
    assert_eq!((report.removed_entries, report.removed_problems), (3, problems), "{report:?}");
    assert!(report.problems.is_empty(), "{report:?}");
    assert_eq!(std::fs::read(&planted.target).unwrap(), b"the user's file");
    assert!(DiskStore::open(tmp.path()).gpus().unwrap().is_empty(), "folders left behind");
    assert!(DiskStore::open(tmp.path()).list().unwrap().is_empty());
}
