//! The disk tier of one `ProgramCache`: its GPU folder, reading and publishing entries there,
//! the size estimate that triggers pruning, and the switch to memory-only (with one warning) when
//! the folder cannot be used.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use super::disk::{DiskStore, GPU_DESCRIPTION, GPU_DESCRIPTION_JSON};
use super::entry::{EntryHeader, Expect};
use super::files::{self, FileIdentity, ReadOutcome};
use super::stats::CacheStats;
use super::{Blob, CacheConfig, CacheKey, GpuId};

/// A disk hit records its use in the entry's mtime at most this often.
pub const TOUCH_INTERVAL: Duration = Duration::from_secs(3600);

/// Pruning after a publish goes down to this fraction of the bound, so that it does not run again
/// at the very next publish.
const PRUNE_TARGET_PERCENT: u64 = 90;

pub(crate) struct DiskTier {
    root: PathBuf,
    gpu_dir: PathBuf,
    backend: u32,
    gpu_hash: u64,
    max_bytes: u64,
    max_age: Option<Duration>,
    enabled: AtomicBool,
    entries: AtomicU64,
    bytes: AtomicU64,
    pruning: AtomicBool,
    describe: (String, String),
}

/// What the disk had for a key.
pub(crate) enum Lookup {
    Missing,
    /// Owned by another user: not loaded, and not overwritten either.
    Foreign,
    /// Failed verification and was removed.
    Rejected,
    Hit(files::Verified),
}

impl DiskTier {
    /// Prepares `<dir>/<gpu folder>`; `None` (after one warning) if it cannot be used.
    pub fn open(gpu: &GpuId, config: &CacheConfig, dir: &Path) -> Option<DiskTier> {
        let json = serde_json::to_string_pretty(gpu).unwrap_or_default();
        let tier = DiskTier {
            root: dir.to_path_buf(),
            gpu_dir: dir.join(gpu.dir_name()),
            backend: gpu.backend_tag(),
            gpu_hash: gpu.hash(),
            max_bytes: config.max_disk_bytes,
            max_age: config.max_age,
            enabled: AtomicBool::new(true),
            entries: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            pruning: AtomicBool::new(false),
            describe: (gpu.describe(), json),
        };
        if let Err((what, path, err)) = tier.prepare() {
            warn_memory_only(what, &path, &err);
            return None;
        }
        tier.prune(tier.max_bytes);
        Some(tier)
    }

    /// Creates the folders and description files and checks that a file can be created.
    fn prepare(&self) -> Result<(), (&'static str, PathBuf, io::Error)> {
        fn at(
            what: &'static str,
            path: &Path,
        ) -> impl FnOnce(io::Error) -> (&'static str, PathBuf, io::Error) {
            let path = path.to_path_buf();
            move |err| (what, path, err)
        }
        files::create_private_dir(&self.gpu_dir).map_err(at("create the cache folder", &self.gpu_dir))?;
        files::make_private(&self.gpu_dir).map_err(at("make private the cache folder", &self.gpu_dir))?;
        let text = self.gpu_dir.join(GPU_DESCRIPTION);
        files::write_if_changed(&text, self.describe.0.as_bytes()).map_err(at("write", &text))?;
        let json = self.gpu_dir.join(GPU_DESCRIPTION_JSON);
        files::write_if_changed(&json, self.describe.1.as_bytes()).map_err(at("write", &json))?;
        tempfile::Builder::new()
            .prefix(files::TEMP_PREFIX)
            .tempfile_in(&self.gpu_dir)
            .map(drop)
            .map_err(at("create a file in", &self.gpu_dir))
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Relaxed)
    }

    pub fn gpu_dir(&self) -> &Path {
        &self.gpu_dir
    }

    /// Stops using the disk, warning once.
    fn disable(&self, what: &str, path: &Path, err: &io::Error) {
        if self.enabled.swap(false, Relaxed) {
            warn_memory_only(what, path, err);
        }
    }

    fn expect(&self, key: CacheKey) -> Expect {
        Expect { backend: self.backend, gpu_hash: self.gpu_hash, key }
    }

    pub fn lookup(&self, key: CacheKey) -> Lookup {
        let path = files::entry_path(&self.gpu_dir, key);
        match files::read_entry(&path, &self.expect(key)) {
            Ok(ReadOutcome::Missing) => Lookup::Missing,
            Ok(ReadOutcome::Found(verified)) => Lookup::Hit(verified),
            Ok(ReadOutcome::Foreign { uid }) => {
                tracing::warn!(
                    path = %path.display(), uid,
                    "a cache entry belongs to another user; not loading it (a blob is code the driver \
                     parses); remove it or make the cache folder private"
                );
                Lookup::Foreign
            }
            Ok(ReadOutcome::Rejected { problem, identity }) => {
                tracing::warn!(path = %path.display(), %problem, "removing a cache entry that failed verification");
                self.remove(key, identity);
                Lookup::Rejected
            }
            Err(err) => {
                tracing::warn!(path = %path.display(), error = %err, "cannot read a cache entry; compiling instead");
                Lookup::Missing
            }
        }
    }

    /// Removes the entry for `key` if it is still the file `identity` names.
    pub fn remove(&self, key: CacheKey, identity: FileIdentity) {
        let path = files::entry_path(&self.gpu_dir, key);
        match files::remove_if_same(&path, identity) {
            Ok(true) => {
                let _ = self.entries.fetch_update(Relaxed, Relaxed, |n| Some(n.saturating_sub(1)));
            }
            Ok(false) => {}
            Err(err) => {
                tracing::debug!(path = %path.display(), error = %err, "could not remove a cache entry")
            }
        }
    }

    /// Writes the entry for `key`; returns whether it was written. A folder that cannot take it
    /// switches the cache to memory-only.
    pub fn publish(&self, key: CacheKey, blob: &Blob, compile_time: Duration) -> bool {
        if !self.enabled() {
            return false;
        }
        let header = EntryHeader::new(
            self.expect(key),
            blob.format,
            &blob.bytes,
            super::stats::duration_ns(compile_time),
            super::now_unix_ns(),
        );
        let path = files::entry_path(&self.gpu_dir, key);
        let mut result = self.write(&path, &header, &blob.bytes);
        if matches!(&result, Err(err) if err.kind() == io::ErrorKind::NotFound) {
            // Another process cleared the cache folder: recreate it once.
            result = match self.prepare() {
                Ok(()) => self.write(&path, &header, &blob.bytes),
                Err((_, _, err)) => Err(err),
            };
        }
        match result {
            Ok(size) => {
                self.entries.fetch_add(1, Relaxed);
                let total = self.bytes.fetch_add(size, Relaxed) + size;
                if total > self.max_bytes {
                    self.prune(self.max_bytes / 100 * PRUNE_TARGET_PERCENT);
                }
                true
            }
            Err(err) => {
                self.disable("write the cache entry", &path, &err);
                false
            }
        }
    }

    fn write(&self, path: &Path, header: &EntryHeader, payload: &[u8]) -> io::Result<u64> {
        if let Some(shard) = path.parent() {
            files::create_private_dir(shard)?;
        }
        files::publish(path, header, payload)
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
                self.entries.store(report.remaining_entries, Relaxed);
                self.bytes.store(report.remaining_bytes, Relaxed);
            }
            Err(err) => tracing::warn!(error = %err, "could not prune the cache folder"),
        }
        self.pruning.store(false, Relaxed);
    }

    pub fn fill(&self, stats: &mut CacheStats) {
        stats.disk_entries = self.entries.load(Relaxed);
        stats.disk_bytes = self.bytes.load(Relaxed);
    }
}

fn warn_memory_only(what: &str, path: &Path, err: &io::Error) {
    tracing::warn!(
        path = %path.display(), error = %err,
        "cannot {what}; the program cache works in memory only from now on, so programs will be \
         compiled again in the next run (point SPARKLE_CACHE_DIR at a writable folder to keep them)"
    );
}
