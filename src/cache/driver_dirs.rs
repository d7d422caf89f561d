//! Folders that drivers own inside the cache folder: `<root>/drivers/<name>/`. A backend points
//! its driver's own cache there (the GL backend: the driver's shader cache), so that one cache
//! folder holds everything a warm start needs, and copying, pruning or clearing it covers both.
//!
//! The cache knows nothing of what is inside: the format is the driver's, it keys its entries by
//! GPU and driver build itself, and it checks what it reads. So each folder is one opaque unit:
//! its files are counted and sized (links never followed), never read or verified; it is pruned
//! and cleared as a whole; and its last use is the later of the newest file in it and the moment
//! a process last pointed a driver at it ([`prepare_driver_cache`] records that in the folder's
//! mtime). Names starting with `.tmp-` in `drivers/` are folders taken aside to be removed.
//!
//! Like the rest of the cache folder it is private: created 0700, refused if it is a link, not a
//! folder, another user's or writable by everyone.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::files::{self, current_uid, TEMP_PREFIX};
use super::CacheError;

/// The folder of the cache folder that holds one folder per driver cache.
pub const DRIVER_CACHES_DIR: &str = "drivers";

/// A driver folder records a process's use at most this often (as entries do).
const USE_INTERVAL: Duration = Duration::from_secs(3600);

/// Deeper trees are not walked further when sizing (no driver nests this deep; a planted tree
/// must not make sizing run away).
const MAX_DEPTH: u32 = 16;

/// Whether `name` may name a driver folder: ASCII letters, digits, `-` and `_`, not starting
/// with `.`.
pub fn is_driver_cache_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// One driver folder, as `sparkle cache stats` and `list` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DriverCacheInfo {
    /// The folder's name under `drivers/` (the backend chose it, e.g. `gl`); empty when the
    /// problem is the `drivers` folder itself.
    pub name: String,
    /// The folder.
    pub path: PathBuf,
    /// Regular files inside, at any depth (links are not followed or counted).
    pub files: u64,
    /// Their total size in bytes.
    pub bytes: u64,
    /// The later of the newest file's mtime and the last recorded use.
    pub last_used_unix_ns: u64,
    /// The user who owns the folder.
    pub owner_uid: u32,
    /// Why the folder is not used (a link, not a folder, another user's), if it is not.
    pub problem: Option<String>,
}

/// A usable driver folder of this user, as sized.
pub(crate) struct DriverFolder {
    pub name: String,
    pub path: PathBuf,
    /// The folder's own metadata (identity for removal, owner).
    pub meta: fs::Metadata,
    pub files: u64,
    pub bytes: u64,
    pub last_used: SystemTime,
}

/// What is found under `drivers/`.
pub(crate) enum DriverFound {
    Folder(DriverFolder),
    /// A folder taken aside for removal by a process that did not finish.
    Temp(PathBuf),
    /// Something that is not a usable driver folder of this user, and why.
    Problem {
        path: PathBuf,
        meta: fs::Metadata,
        problem: String,
    },
}

/// Why `meta` (at `path`) cannot be a private folder of the cache, if it cannot.
fn folder_problem(what: &str, path: &Path, meta: &fs::Metadata) -> Option<String> {
    let file_type = meta.file_type();
    if file_type.is_symlink() {
        let target = fs::read_link(path).map_or_else(|err| format!("? ({err})"), |t| t.display().to_string());
        return Some(format!("the {what} is a symbolic link to {target}; the cache does not follow links"));
    }
    if !file_type.is_dir() {
        return Some(format!("{} where the {what} belongs", files::describe_type(file_type)));
    }
    if meta.uid() != current_uid() {
        return Some(format!("the {what} belongs to another user (uid {}); not used", meta.uid()));
    }
    if meta.mode() & 0o002 != 0 {
        return Some(format!(
            "the {what} is writable by every user (mode {:o}); not used",
            meta.mode() & 0o7777
        ));
    }
    None
}

/// Creates `path` (0700) if it is missing and checks that it is a private folder of this user.
fn ensure_private_folder(what: &'static str, path: &Path) -> Result<(), CacheError> {
    match fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(CacheError::io("create the driver cache folder", path, err)),
    }
    let meta = fs::symlink_metadata(path).map_err(|err| CacheError::io("inspect", path, err))?;
    match folder_problem(what, path, &meta) {
        None => Ok(()),
        Some(problem) => Err(CacheError::UnusableFolder { path: path.to_path_buf(), problem }),
    }
}

/// Prepares `<root>/drivers/<name>` for a driver to keep its own cache in: creates the root and
/// both folders (0700) where missing, checks that neither is a link, another user's or writable
/// by everyone, and records this use. Returns the folder's absolute path (links in the root's
/// own path resolved), which is what a driver should be given: it may resolve a relative path
/// against another working directory.
pub fn prepare_driver_cache(root: &Path, name: &str) -> Result<PathBuf, CacheError> {
    if !is_driver_cache_name(name) {
        return Err(CacheError::UnusableFolder {
            path: root.join(DRIVER_CACHES_DIR).join(name),
            problem: "a driver cache name is ASCII letters, digits, '-' and '_' only".into(),
        });
    }
    files::create_private_dir(root).map_err(|err| CacheError::io("create the cache folder", root, err))?;
    let root = fs::canonicalize(root).map_err(|err| CacheError::io("find the cache folder", root, err))?;
    let parent = root.join(DRIVER_CACHES_DIR);
    ensure_private_folder("driver caches folder", &parent)?;
    let dir = parent.join(name);
    ensure_private_folder("driver cache folder", &dir)?;
    record_use(&dir);
    Ok(dir)
}

/// Sets the folder's mtime to now if the last recorded use is older than [`USE_INTERVAL`]: how
/// pruning knows a folder is in use even when the driver only reads from it.
fn record_use(dir: &Path) {
    let now = SystemTime::now();
    let recent = fs::symlink_metadata(dir)
        .and_then(|meta| meta.modified())
        .is_ok_and(|mtime| now.duration_since(mtime).is_ok_and(|age| age < USE_INTERVAL));
    if recent {
        return;
    }
    if let Err(err) = fs::File::open(dir).and_then(|folder| folder.set_modified(now)) {
        tracing::debug!(path = %dir.display(), error = %err, "could not record the use of a driver cache folder");
    }
}

/// Files, bytes and newest mtime under `dir`, links neither followed nor counted; what vanishes
/// meanwhile (the driver replaces its files) is skipped.
fn measure(dir: &Path, depth: u32, files: &mut u64, bytes: &mut u64, newest: &mut SystemTime) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.filter_map(Result::ok) {
        // DirEntry::metadata does not follow a link.
        let Ok(meta) = entry.metadata() else { continue };
        if let Ok(mtime) = meta.modified() {
            *newest = (*newest).max(mtime);
        }
        if meta.is_file() {
            *files += 1;
            *bytes += meta.len();
        } else if meta.is_dir() && depth < MAX_DEPTH {
            measure(&entry.path(), depth + 1, files, bytes, newest);
        }
    }
}

/// Everything under `<root>/drivers/`, sized; an empty list if it does not exist.
pub(crate) fn scan(root: &Path) -> Result<Vec<DriverFound>, CacheError> {
    let parent = root.join(DRIVER_CACHES_DIR);
    let parent_meta = match fs::symlink_metadata(&parent) {
        Ok(meta) => meta,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(CacheError::io("inspect", &parent, err)),
    };
    if let Some(problem) = folder_problem("driver caches folder", &parent, &parent_meta) {
        return Ok(vec![DriverFound::Problem { path: parent, meta: parent_meta, problem }]);
    }
    let entries = match fs::read_dir(&parent) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(CacheError::io("read the folder", &parent, err)),
    };
    let mut found = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let Ok(meta) = entry.metadata() else { continue };
        if name.starts_with(TEMP_PREFIX) {
            found.push(DriverFound::Temp(path));
            continue;
        }
        let problem = if is_driver_cache_name(&name) {
            folder_problem("driver cache folder", &path, &meta)
        } else {
            Some("a name no driver cache folder has; not used".to_owned())
        };
        if let Some(problem) = problem {
            found.push(DriverFound::Problem { path, meta, problem });
            continue;
        }
        let (mut files, mut bytes) = (0, 0);
        let mut last_used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        measure(&path, 1, &mut files, &mut bytes, &mut last_used);
        found.push(DriverFound::Folder(DriverFolder { name, path, meta, files, bytes, last_used }));
    }
    found.sort_by_key(|f| match f {
        DriverFound::Folder(folder) => folder.path.clone(),
        DriverFound::Temp(path) | DriverFound::Problem { path, .. } => path.clone(),
    });
    Ok(found)
}

/// Removes a folder taken aside for removal; gone already counts as done.
pub(crate) fn remove_temp(path: &Path) -> bool {
    match files::remove_without_following(path) {
        Ok(()) => true,
        Err(err) if err.kind() == io::ErrorKind::NotFound => false,
        Err(err) => {
            tracing::debug!(path = %path.display(), error = %err, "could not remove a leftover driver cache folder");
            false
        }
    }
}

/// The public view of what [`scan`] found (temporary folders left out).
pub(crate) fn describe(found: &DriverFound) -> Option<DriverCacheInfo> {
    let unix_ns =
        |time: SystemTime| time.duration_since(SystemTime::UNIX_EPOCH).map_or(0, super::stats::duration_ns);
    match found {
        DriverFound::Temp(_) => None,
        DriverFound::Folder(folder) => Some(DriverCacheInfo {
            name: folder.name.clone(),
            path: folder.path.clone(),
            files: folder.files,
            bytes: folder.bytes,
            last_used_unix_ns: unix_ns(folder.last_used),
            owner_uid: folder.meta.uid(),
            problem: None,
        }),
        DriverFound::Problem { path, meta, problem } => Some(DriverCacheInfo {
            name: if path.file_name().is_some_and(|n| n == DRIVER_CACHES_DIR) {
                String::new()
            } else {
                path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
            },
            path: path.clone(),
            files: 0,
            bytes: 0,
            last_used_unix_ns: meta.modified().map_or(0, unix_ns),
            owner_uid: meta.uid(),
            problem: Some(problem.clone()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_words() {
        assert!(is_driver_cache_name("gl"));
        assert!(is_driver_cache_name("gl-nvidia_2"));
        for bad in ["", ".", "..", ".tmp-x", "a/b", "a b", "ä"] {
            assert!(!is_driver_cache_name(bad), "{bad:?}");
        }
        assert!(!is_driver_cache_name(&"x".repeat(65)));
    }

    #[test]
    fn prepare_creates_private_folders_and_refuses_links() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("cache");
        let dir = prepare_driver_cache(&root, "gl").unwrap();
        assert!(dir.is_absolute());
        assert_eq!(dir, fs::canonicalize(&root).unwrap().join(DRIVER_CACHES_DIR).join("gl"));
        for folder in [&root, &root.join(DRIVER_CACHES_DIR), &dir] {
            assert_eq!(fs::metadata(folder).unwrap().permissions().mode() & 0o777, 0o700, "{folder:?}");
        }
        assert!(prepare_driver_cache(&root, "../x").is_err());

        let elsewhere = tmp.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        fs::remove_dir(&dir).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &dir).unwrap();
        let err = prepare_driver_cache(&root, "gl").unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");

        fs::remove_file(&dir).unwrap();
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let err = prepare_driver_cache(&root, "gl").unwrap_err().to_string();
        assert!(err.contains("writable by every user"), "{err}");
    }

    #[test]
    fn scan_sizes_folders_without_following_links() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = prepare_driver_cache(tmp.path(), "gl").unwrap();
        fs::create_dir_all(dir.join("a/b")).unwrap();
        fs::write(dir.join("index"), [0u8; 100]).unwrap();
        fs::write(dir.join("a/b/blob"), [0u8; 50]).unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("big"), [0u8; 5000]).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.join("link")).unwrap();
        fs::write(tmp.path().join(DRIVER_CACHES_DIR).join("stray"), b"x").unwrap();

        let found = scan(tmp.path()).unwrap();
        let infos: Vec<_> = found.iter().filter_map(describe).collect();
        assert_eq!(infos.len(), 2, "{infos:?}");
        let gl = infos.iter().find(|i| i.name == "gl").unwrap();
        assert_eq!((gl.files, gl.bytes, gl.problem.as_deref()), (2, 150, None));
        let stray = infos.iter().find(|i| i.name == "stray").unwrap();
        assert!(stray.problem.as_deref().unwrap().contains("a regular file"), "{stray:?}");
    }
}
