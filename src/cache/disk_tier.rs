//! The disk tier of one `ProgramCache`: its GPU folder, reading and publishing entries there, the
//! size estimate that triggers pruning when this process writes, read-only use of a folder the
//! process may read but not write, and the switch to memory-only (with one warning) when the
//! folder cannot be used at all. A problem at one entry's path skips that entry only.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

use super::disk::{DiskStore, GPU_DESCRIPTION, GPU_DESCRIPTION_JSON};
use super::entry::{EntryHeader, Expect};
use super::files::{self, FileIdentity, ReadOutcome};
use super::process_flight::{self, Turn};
use super::stats::CacheStats;
use super::{Blob, CacheConfig, CacheKey, GpuId, READ_ONLY_ENV};

/// A disk hit records its use in the entry's mtime at most this often.
pub const TOUCH_INTERVAL: Duration = Duration::from_secs(3600);

/// Pruning after a publish goes down to this fraction of the bound, so that it does not run again
/// at the very next publish.
const PRUNE_TARGET_PERCENT: u64 = 90;

const WRITABLE_HINT: &str = "point SPARKLE_CACHE_DIR at a writable folder to keep them";

pub(crate) struct DiskTier {
    root: PathBuf,
    /// The root with every link resolved: folders must resolve to places below it.
    canonical_root: PathBuf,
    gpu_dir: PathBuf,
    backend: u32,
    gpu_hash: u64,
    max_bytes: u64,
    max_age: Option<Duration>,
    /// Entries are read, nothing is ever written, removed or touched.
    read_only: bool,
    enabled: AtomicBool,
    usage: Usage,
    pruning: AtomicBool,
    /// Keys whose entry path was already warned about: one warning per entry, not per request.
    warned: Mutex<HashSet<CacheKey>>,
    /// One bit per shard folder found to be a real folder (or a link staying inside the cache
    /// folder), so that each is inspected once rather than at every disk access.
    shards_checked: [AtomicU64; 4],
    describe: (String, String),
}

/// The estimate of this user's entries in the whole cache folder.
#[derive(Default)]
struct Usage {
    entries: AtomicU64,
    bytes: AtomicU64,
    /// The estimate comes from a walk (pruning or counting) and is kept up to date since.
    known: AtomicBool,
    /// This process has published and pruned once: the estimate drives pruning from then on.
    pruned: AtomicBool,
}

/// What the disk had for a key.
pub(crate) enum Lookup {
    Missing,
    /// Owned by another user: not loaded (a publish may replace it).
    Foreign,
    /// Failed verification (and was removed unless the tier is read-only).
    Rejected,
    /// Something unreadable or not a regular file sits at the entry's path (a publish may
    /// replace it).
    Unusable,
    Hit(files::Verified),
}

/// Why a folder cannot be used.
enum Unusable {
    Io {
        what: &'static str,
        path: PathBuf,
        err: io::Error,
    },
    /// A link that resolves outside the cache folder.
    Escapes {
        path: PathBuf,
        target: PathBuf,
    },
    /// A folder others could plant entries in: owned by another user, or writable by everyone.
    Unsafe {
        path: PathBuf,
        why: String,
    },
}

impl Unusable {
    fn at(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> Unusable {
        let path = path.to_path_buf();
        move |err| Unusable::Io { what, path, err }
    }

    fn warn(&self, hint: &str) {
        match self {
            Unusable::Io { what, path, err } => warn_memory_only(what, path, err, hint),
            Unusable::Escapes { path, target } => tracing::warn!(
                path = %path.display(), target = %target.display(),
                "a folder of the program cache is a symbolic link that leaves the cache folder; it is not \
                 used, and the cache works in memory only for this GPU (remove the link, e.g. with \
                 `sparkle cache verify --fix`)"
            ),
            Unusable::Unsafe { path, why } => tracing::warn!(
                path = %path.display(),
                "a folder of the program cache {why}, so anyone could put code there for the driver to \
                 load; it is not used, and the cache works in memory only for this GPU (make it yours \
                 with mode 0700, or point SPARKLE_CACHE_DIR elsewhere)"
            ),
        }
    }
}

impl DiskTier {
    /// Prepares `<dir>/<gpu folder>`; `None` (after one warning) if it cannot be used at all. A
    /// folder configured read-only, or one this process may read but not write, is used
    /// read-only (said once).
    pub fn open(gpu: &GpuId, config: &CacheConfig, dir: &Path) -> Option<DiskTier> {
        let hint = if config.read_only {
            "the cache is read-only by configuration, so nothing can be written there either"
        } else {
            WRITABLE_HINT
        };
        let canonical_root = match Self::canonical_root(dir, config.read_only) {
            Ok(root) => root,
            Err(unusable) => {
                unusable.warn(hint);
                return None;
            }
        };
        let json = serde_json::to_string_pretty(gpu).unwrap_or_default();
        let mut tier = DiskTier {
            root: dir.to_path_buf(),
            canonical_root,
            gpu_dir: dir.join(gpu.dir_name()),
            backend: gpu.backend_tag(),
            gpu_hash: gpu.hash(),
            max_bytes: config.max_disk_bytes,
            max_age: config.max_age,
            read_only: config.read_only,
            enabled: AtomicBool::new(true),
            usage: Usage::default(),
            pruning: AtomicBool::new(false),
            warned: Mutex::new(HashSet::new()),
            shards_checked: Default::default(),
            describe: (gpu.describe(), json),
        };
        if config.read_only {
            if let Err(unusable) = tier.check_readable() {
                unusable.warn(hint);
                return None;
            }
            tracing::info!(
                path = %tier.gpu_dir.display(),
                "the program cache is read-only as configured ({READ_ONLY_ENV}): its entries are used, nothing is \
                 written"
            );
            return Some(tier);
        }
        match tier.prepare() {
            Ok(()) => Some(tier),
            Err(Unusable::Io { err, .. })
                if files::is_write_refused(&err) && tier.check_readable().is_ok() =>
            {
                tier.read_only = true;
                tracing::warn!(
                    path = %tier.gpu_dir.display(), error = %err,
                    "the program cache folder is read-only: its entries are used, but new programs are \
                     kept in memory only and compiled again in the next run (set {READ_ONLY_ENV}=1 to \
                     say this is intended, or point SPARKLE_CACHE_DIR at a writable folder)"
                );
                Some(tier)
            }
            Err(unusable) => {
                unusable.warn(hint);
                None
            }
        }
    }

    /// The root, created (0700) unless read-only, with its links resolved.
    fn canonical_root(dir: &Path, read_only: bool) -> Result<PathBuf, Unusable> {
        if !read_only {
            files::create_private_dir(dir).map_err(Unusable::at("create the cache folder", dir))?;
        }
        fs::canonicalize(dir).map_err(Unusable::at("find the cache folder", dir))
    }

    /// `Some(target)` if `path` is a link that resolves outside the cache folder. A link that
    /// does not resolve is left to fail where it is used.
    fn escapes(&self, path: &Path) -> Option<PathBuf> {
        let is_link = fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink());
        if !is_link {
            return None;
        }
        match files::resolves_inside(path, &self.canonical_root) {
            Ok(false) => Some(fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())),
            Ok(true) | Err(_) => None,
        }
    }

    /// Refuses a GPU folder that another user owns or that everyone may write: entries there
    /// could have been put in place (or renamed into place) by someone else.
    fn check_private(&self) -> Result<(), Unusable> {
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = fs::metadata(&self.gpu_dir) else { return Ok(()) };
        let why = if meta.uid() != files::current_uid() {
            format!("belongs to another user (uid {})", meta.uid())
        } else if meta.mode() & 0o002 != 0 {
            format!("is writable by every user (mode {:o})", meta.mode() & 0o7777)
        } else {
            return Ok(());
        };
        Err(Unusable::Unsafe { path: self.gpu_dir.clone(), why })
    }

    /// Checks that the GPU folder stays inside the cache folder, is private and can be read.
    fn check_readable(&self) -> Result<(), Unusable> {
        if let Some(target) = self.escapes(&self.gpu_dir) {
            return Err(Unusable::Escapes { path: self.gpu_dir.clone(), target });
        }
        self.check_private()?;
        fs::read_dir(&self.gpu_dir).map(drop).map_err(Unusable::at("read the cache folder", &self.gpu_dir))
    }

    /// Creates the GPU folder (0700; an existing folder's permissions are left alone) and the
    /// description files, and checks that a file can be created.
    fn prepare(&self) -> Result<(), Unusable> {
        if let Some(target) = self.escapes(&self.gpu_dir) {
            return Err(Unusable::Escapes { path: self.gpu_dir.clone(), target });
        }
        files::create_private_dir(&self.gpu_dir)
            .map_err(Unusable::at("create the cache folder", &self.gpu_dir))?;
        self.check_private()?;
        let text = self.gpu_dir.join(GPU_DESCRIPTION);
        files::write_if_changed(&text, self.describe.0.as_bytes()).map_err(Unusable::at("write", &text))?;
        let json = self.gpu_dir.join(GPU_DESCRIPTION_JSON);
        files::write_if_changed(&json, self.describe.1.as_bytes()).map_err(Unusable::at("write", &json))?;
        tempfile::Builder::new()
            .prefix(files::TEMP_PREFIX)
            .tempfile_in(&self.gpu_dir)
            .map(drop)
            .map_err(Unusable::at("create a file in", &self.gpu_dir))
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Relaxed)
    }

    pub fn read_only(&self) -> bool {
        self.read_only
    }

    pub fn gpu_dir(&self) -> &Path {
        &self.gpu_dir
    }

    /// Stops using the disk, warning once.
    fn disable(&self, unusable: Unusable) {
        if self.enabled.swap(false, Relaxed) {
            unusable.warn(WRITABLE_HINT);
        }
    }

    /// Whether this is the first problem seen at `key`'s path (which is then warned about).
    fn first_problem_at(&self, key: CacheKey) -> bool {
        self.warned.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key)
    }

    /// Whether the shard folder of `key` (whose entry path is `entry`) is a link resolving
    /// outside the cache folder; the tier is then switched off. The GPU folder itself was checked
    /// when it was opened or recreated.
    fn leaves_cache(&self, key: CacheKey, entry: &Path) -> bool {
        let shard_index = (key.as_u128() >> 120) as usize;
        let (word, bit) = (&self.shards_checked[shard_index / 64], 1u64 << (shard_index % 64));
        if word.load(Relaxed) & bit != 0 {
            return false;
        }
        let Some(shard) = entry.parent() else { return false };
        let inside = match fs::symlink_metadata(shard) {
            Ok(meta) if meta.is_dir() => true,
            Ok(meta) if meta.file_type().is_symlink() => {
                match files::resolves_inside(shard, &self.canonical_root) {
                    Ok(true) => true,
                    Ok(false) => {
                        let target = fs::canonicalize(shard).unwrap_or_else(|_| shard.to_path_buf());
                        self.disable(Unusable::Escapes { path: shard.to_path_buf(), target });
                        return true;
                    }
                    // A dangling link: reading and writing there fail for this entry alone.
                    Err(_) => false,
                }
            }
            // Missing (created on the first write) or not a folder (that entry is skipped).
            _ => false,
        };
        if inside {
            word.fetch_or(bit, Relaxed);
        }
        false
    }

    fn expected(&self, key: CacheKey) -> Expect {
        Expect { backend: self.backend, gpu_hash: self.gpu_hash, key }
    }

    pub fn lookup(&self, key: CacheKey) -> Lookup {
        let path = files::entry_path(&self.gpu_dir, key);
        if self.leaves_cache(key, &path) {
            return Lookup::Missing;
        }
        let replace = if self.read_only { "" } else { "; compiling it and replacing it with our own" };
        match files::read_entry(&path, &self.expected(key)) {
            Ok(ReadOutcome::Missing) => Lookup::Missing,
            Ok(ReadOutcome::Found(verified)) => Lookup::Hit(verified),
            Ok(ReadOutcome::Foreign { uid }) => {
                if self.first_problem_at(key) {
                    tracing::warn!(
                        path = %path.display(), uid,
                        "a cache entry belongs to another user; not loading it (a blob is code the driver \
                         parses){replace}"
                    );
                }
                Lookup::Foreign
            }
            Ok(ReadOutcome::NotAFile(what)) => {
                if self.first_problem_at(key) {
                    tracing::warn!(
                        path = %path.display(),
                        "{what} sits at a cache entry's path; not loading it{replace} (`sparkle cache \
                         verify --fix` removes it)"
                    );
                }
                Lookup::Unusable
            }
            Ok(ReadOutcome::Rejected { problem, identity }) => {
                if !self.read_only {
                    tracing::warn!(path = %path.display(), %problem, "removing a cache entry that failed verification");
                    self.remove(key, identity);
                } else if self.first_problem_at(key) {
                    tracing::warn!(
                        path = %path.display(), %problem,
                        "a cache entry failed verification; compiling instead (the cache is read-only, so \
                         the entry stays)"
                    );
                }
                Lookup::Rejected
            }
            Err(err) => {
                if self.first_problem_at(key) {
                    tracing::warn!(path = %path.display(), error = %err, "cannot read a cache entry; compiling instead");
                }
                Lookup::Unusable
            }
        }
    }

    /// The keys of the entries in this GPU's folder (file names only; nothing is verified).
    #[cfg(feature = "remote")]
    pub fn entry_keys(&self) -> Vec<CacheKey> {
        let mut keys = Vec::new();
        let Ok(shards) = fs::read_dir(&self.gpu_dir) else { return keys };
        for shard in shards.flatten() {
            let Ok(files) = fs::read_dir(shard.path()) else { continue };
            keys.extend(
                files.flatten().filter_map(|file| file.file_name().to_str().and_then(CacheKey::from_hex)),
            );
        }
        keys.sort_unstable();
        keys
    }

    /// Records a use of a loaded entry in its mtime (not when read-only).
    pub fn record_use(&self, verified: &files::Verified) {
        if !self.read_only {
            verified.touch(TOUCH_INTERVAL);
        }
    }

    /// Removes the entry for `key` if it is still the file `identity` names (not when read-only).
    pub fn remove(&self, key: CacheKey, identity: FileIdentity) {
        if self.read_only {
            return;
        }
        let path = files::entry_path(&self.gpu_dir, key);
        match files::remove_if_same(&path, identity) {
            Ok(true) => {
                let _ = self.usage.entries.fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(1)));
            }
            Ok(false) => {}
            Err(err) => {
                tracing::debug!(path = %path.display(), error = %err, "could not remove a cache entry")
            }
        }
    }

    /// This process's turn at loading or compiling `key` among the processes sharing this GPU
    /// folder (see `process_flight`), waiting at most `budget` for another one's compile;
    /// `Unavailable` (compile without a lock) when read-only, switched off, or when the lock
    /// file cannot be made.
    pub fn take_turn(&self, key: CacheKey, budget: Duration) -> Turn {
        use std::os::unix::fs::DirBuilderExt;
        if !self.enabled() || self.read_only {
            return Turn::Unavailable;
        }
        let path = process_flight::lock_path(&self.gpu_dir, key);
        if self.leaves_cache(key, &path) {
            return Turn::Unavailable;
        }
        let Some(shard) = path.parent() else { return Turn::Unavailable };
        // Not recursive: a GPU folder another process cleared is recreated whole by the publish,
        // with its description files.
        match fs::DirBuilder::new().mode(0o700).create(shard) {
            Err(err) if err.kind() != io::ErrorKind::AlreadyExists => {
                tracing::debug!(path = %shard.display(), error = %err, "cannot create a shard folder for a lock file; compiling without it");
                return Turn::Unavailable;
            }
            _ => {}
        }
        process_flight::take_turn(&path, budget)
    }

    /// Writes the entry for `key`; returns whether it was written. A problem at the entry's path
    /// skips this entry (one warning per entry); a folder that cannot take entries at all
    /// switches the cache to memory-only (one warning). `over_foreign`: another user's entry is
    /// being replaced, which the folder's permissions may forbid for that entry alone.
    pub fn publish(&self, key: CacheKey, blob: &Blob, compile_time: Duration, over_foreign: bool) -> bool {
        if !self.enabled() || self.read_only {
            return false;
        }
        let path = files::entry_path(&self.gpu_dir, key);
        if self.leaves_cache(key, &path) {
            return false;
        }
        let header = EntryHeader::new(
            self.expected(key),
            blob.format,
            &blob.bytes,
            super::stats::duration_ns(compile_time),
            super::now_unix_ns(),
        );
        let mut result = self.write(&path, &header, &blob.bytes);
        if matches!(&result, Err(err) if err.kind() == io::ErrorKind::NotFound) {
            // Another process cleared the cache folder: recreate it once.
            if let Err(unusable) = self.prepare() {
                self.disable(unusable);
                return false;
            }
            result = self.write(&path, &header, &blob.bytes);
        }
        let err = match result {
            Ok(size) => {
                self.account(size);
                return true;
            }
            Err(err) => err,
        };
        let gpu_dir_intact = fs::metadata(&self.gpu_dir).is_ok_and(|meta| meta.is_dir());
        let entry_only = gpu_dir_intact
            && (files::is_per_entry_error(&err) || (over_foreign && files::is_write_refused(&err)));
        if !entry_only {
            self.disable(Unusable::Io { what: "write the cache entry", path, err });
        } else if self.first_problem_at(key) {
            tracing::warn!(
                path = %path.display(), error = %err,
                "cannot write this cache entry; it is kept in memory only (`sparkle cache verify --fix` \
                 removes what is in the way)"
            );
        }
        false
    }

    fn write(&self, path: &Path, header: &EntryHeader, payload: &[u8]) -> io::Result<u64> {
        if let Some(shard) = path.parent() {
            files::create_private_dir(shard)?;
        }
        files::publish(path, header, payload)
    }

    /// Counts a file just written. The first publish of this process walks (and prunes) the
    /// whole folder to learn its size; later ones add to the estimate and prune when it passes
    /// the bound.
    fn account(&self, size: u64) {
        if !self.usage.pruned.swap(true, Relaxed) {
            self.prune(self.max_bytes);
            return;
        }
        self.usage.entries.fetch_add(1, Relaxed);
        let total = self.usage.bytes.fetch_add(size, Relaxed) + size;
        if total > self.max_bytes {
            self.prune(self.max_bytes / 100 * PRUNE_TARGET_PERCENT);
        }
    }

    /// Prunes the whole cache folder down to `target` bytes (and the age bound) and resets the
    /// estimate from what it saw. One prune at a time per cache; others skip.
    fn prune(&self, target: u64) {
        if self.pruning.swap(true, Relaxed) {
            return;
        }
        match DiskStore::open(&self.root).prune(target, self.max_age) {
            Ok(report) => {
                if report.removed_entries > 0 {
                    tracing::debug!(
                        removed = report.removed_entries,
                        bytes = report.removed_bytes,
                        "pruned the cache folder"
                    );
                }
                self.usage.entries.store(report.remaining_entries, Relaxed);
                self.usage.bytes.store(report.remaining_bytes, Relaxed);
                self.usage.known.store(true, Relaxed);
            }
            Err(err) => tracing::warn!(error = %err, "could not prune the cache folder"),
        }
        self.pruning.store(false, Relaxed);
    }

    /// Fills the disk sizes; the first call before any publish counts the folder (reading only).
    pub fn fill(&self, stats: &mut CacheStats) {
        if !self.usage.known.load(Relaxed) {
            match DiskStore::open(&self.root).usage() {
                Ok((entries, bytes)) => {
                    self.usage.entries.store(entries, Relaxed);
                    self.usage.bytes.store(bytes, Relaxed);
                    self.usage.known.store(true, Relaxed);
                }
                Err(err) => tracing::debug!(error = %err, "could not count the cache folder"),
            }
        }
        stats.disk_entries = self.usage.entries.load(Relaxed);
        stats.disk_bytes = self.usage.bytes.load(Relaxed);
    }
}

fn warn_memory_only(what: &str, path: &Path, err: &io::Error, hint: &str) {
    tracing::warn!(
        path = %path.display(), error = %err,
        "cannot {what}; the program cache works in memory only from now on, so programs will be \
         compiled again in the next run ({hint})"
    );
}
