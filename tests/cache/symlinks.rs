//! Links inside the cache folder: a GPU or shard folder that is a link leaving the cache folder is
//! refused (memory only for that GPU, one warning; its target is neither written nor chmod-ed),
//! one that stays inside is followed; maintenance lists such links as problems and removes the
//! link, never its target.

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use crate::cache_support::{capture, entry_path, gpu, snapshot, Counts, Source};
use sparkle::cache::{CacheConfig, DiskStore, ProgramCache};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// A folder outside the cache, world-readable, with one file in it.
fn outside_folder() -> tempfile::TempDir {
    let outside = tempfile::tempdir().unwrap();
    std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(outside.path().join("mine.txt"), b"the user's file").unwrap();
    outside
}

#[test]
fn a_gpu_folder_linking_out_of_the_cache_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = outside_folder();
    let gpu = gpu("linked out");
    symlink(outside.path(), tmp.path().join(gpu.dir_name())).unwrap();
    let before = snapshot(outside.path());
    let counts = Arc::new(Counts::default());
    let source = Source::new(&gpu, "s", &counts);
    let (cache, captured) = capture(|| {
        let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(tmp.path()));
        cache.get(&source.key, &source).unwrap();
        cache
    });
    assert!(!cache.is_persistent() && cache.gpu_dir().is_none());
    assert_eq!(mode(outside.path()), 0o755, "the link's target was chmod-ed");
    assert_eq!(snapshot(outside.path()), before, "the cache wrote through the link");
    let warnings = captured.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("symbolic link"), "{warnings:?}");
}

#[test]
fn a_shard_folder_linking_out_of_the_cache_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = outside_folder();
    let gpu = gpu("shard linked out");
    let counts = Arc::new(Counts::default());
    let sources: Vec<Source> = (0..3).map(|i| Source::new(&gpu, &format!("s{i}"), &counts)).collect();
    let shard = entry_path(&tmp.path().join(gpu.dir_name()), &sources[0]).parent().unwrap().to_path_buf();
    std::fs::create_dir_all(shard.parent().unwrap()).unwrap();
    symlink(outside.path(), &shard).unwrap();
    let before = snapshot(outside.path());
    let (cache, captured) = capture(|| {
        let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(tmp.path()));
        for s in &sources {
            cache.get(&s.key, s).unwrap();
        }
        cache
    });
    assert!(!cache.is_persistent());
    assert_eq!(snapshot(outside.path()), before, "the cache wrote through the link");
    assert_eq!(captured.warnings().len(), 1, "{:?}", captured.warnings());
}

#[test]
fn a_gpu_folder_linking_inside_the_cache_is_used() {
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let gpu = gpu("linked inside");
    symlink(&shared, tmp.path().join(gpu.dir_name())).unwrap();
    let counts = Arc::new(Counts::default());
    let source = Source::new(&gpu, "s", &counts);
    // Through a link to the root as well: canonical paths are compared.
    let root_link = tempfile::tempdir().unwrap();
    symlink(tmp.path(), root_link.path().join("cache")).unwrap();
    let cache = ProgramCache::open(gpu, &CacheConfig::in_dir(root_link.path().join("cache")));
    cache.get(&source.key, &source).unwrap();
    assert!(cache.is_persistent());
    assert!(entry_path(&shared, &source).is_file());
}

#[test]
fn existing_folders_keep_their_permissions() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("cache");
    let gpu = gpu("wide");
    let gpu_dir = root.join(gpu.dir_name());
    std::fs::create_dir_all(&gpu_dir).unwrap();
    for folder in [&root, &gpu_dir] {
        std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let counts = Arc::new(Counts::default());
    let source = Source::new(&gpu, "s", &counts);
    let cache = ProgramCache::open(gpu, &CacheConfig::in_dir(&root));
    cache.get(&source.key, &source).unwrap();
    assert_eq!(
        (mode(&root), mode(&gpu_dir)),
        (0o755, 0o755),
        "the cache narrowed a folder it did not create"
    );
    assert_eq!(mode(entry_path(&gpu_dir, &source).parent().unwrap()), 0o700, "a folder it created");
}

#[test]
fn maintenance_reports_linked_folders_and_removes_the_link_only() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = outside_folder();
    let counts = Arc::new(Counts::default());
    // One real GPU folder with an entry, one GPU folder that is a link, one shard that is a link.
    let real = gpu("real");
    let source = Source::new(&real, "kept", &counts);
    let cache = ProgramCache::open(real.clone(), &CacheConfig::in_dir(tmp.path()));
    cache.get(&source.key, &source).unwrap();
    let linked_gpu = tmp.path().join(gpu("linked").dir_name());
    symlink(outside.path(), &linked_gpu).unwrap();
    let unused_shard = if source.key.hex().starts_with("ff") { "fe" } else { "ff" };
    let linked_shard = cache.gpu_dir().unwrap().join(unused_shard);
    symlink(outside.path(), &linked_shard).unwrap();
    let before = snapshot(outside.path());
    let store = DiskStore::open(tmp.path());

    let gpus = store.gpus().unwrap();
    assert_eq!(gpus.len(), 2, "{gpus:?}");
    assert!(gpus.iter().any(|(_, text)| text.contains("symbolic link")), "{gpus:?}");
    let list = store.list().unwrap();
    let problems: Vec<_> = list.iter().filter(|e| e.problem.is_some()).collect();
    assert_eq!(problems.len(), 2, "{list:#?}");
    assert!(problems
        .iter()
        .all(|e| e.key.is_empty() && e.problem.as_ref().unwrap().contains("symbolic link")));
    assert_eq!(list.iter().filter(|e| e.problem.is_none()).count(), 1);

    let report = store.verify(false).unwrap();
    assert_eq!((report.valid, report.problems.len(), report.fixed.len()), (1, 2, 0), "{report:?}");
    assert!(linked_gpu.exists() && linked_shard.exists());

    let report = store.verify(true).unwrap();
    assert_eq!((report.valid, report.problems.len(), report.fixed.len()), (1, 0, 2), "{report:?}");
    assert!(
        std::fs::symlink_metadata(&linked_gpu).is_err() && std::fs::symlink_metadata(&linked_shard).is_err()
    );
    assert_eq!(snapshot(outside.path()), before, "maintenance touched a link's target");

    // Clear removes links too, and leaves the target alone.
    symlink(outside.path(), &linked_gpu).unwrap();
    let report = store.clear().unwrap();
    assert_eq!((report.removed_entries, report.removed_problems), (1, 1), "{report:?}");
    assert!(report.problems.is_empty(), "{report:?}");
    assert!(std::fs::symlink_metadata(&linked_gpu).is_err());
    assert_eq!(snapshot(outside.path()), before, "clear touched a link's target");
}
