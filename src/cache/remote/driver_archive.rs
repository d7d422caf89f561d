//! The driver's own shader cache travels too. On NVIDIA and Mesa a GL program binary is not
//! finished machine code: the driver's cache (kept in `<cache dir>/drivers/<name>/`) decides
//! whether a start is really warm. So each driver folder is shared per GPU id (which holds the
//! driver version) as one gzip'd tar archive, `<gpu folder>/driver-<name>.tar.gz`:
//!
//! - the first process on a machine for a GPU id (its working set is empty) starts fetching the
//!   archive in the background when the cache opens, from a remote that answered its first
//!   request quickly; the first load or compile waits for it until [`FETCH_BUDGET`] after the
//!   open, so that the driver finds it; files the driver already made (an index created at
//!   start-up) are kept, and each file appears whole or not at all;
//! - a process whose driver folder gained files noticeably publishes the folder when the cache
//!   closes (replacing the archive: any machine's archive is as good as another's).
//!
//! An archive passes the envelope and signature checks of every remote object; unpacking takes
//! regular files and folders only, at relative paths without `..`, never replaces a file, and is
//! bounded in size. The files are the driver's to check, as in the local folder.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::envelope::Kind;
use super::tier::{Background, Probe, RemoteTier};
use crate::cache::driver_dirs::{self, DriverFound};

/// How long after the cache opened the first load or compile waits for a driver archive (or
/// the fixed lookup budget, when the user set a longer one): about what a warm driver cache
/// saves over a cold one for a few programs on NVIDIA (260 ms against 15 ms for the suite on an
/// H100).
pub(crate) const FETCH_BUDGET: Duration = Duration::from_millis(500);
/// The archive is fetched only from a remote that connected and answered a request within this
/// (each): from a slower one, a cold driver cache costs less than waiting for it.
const PROBE_BUDGET: Duration = Duration::from_millis(75);
/// Archives larger than this (compressed) are refused unread: a driver cache is tens of
/// megabytes.
pub(crate) const MAX_ARCHIVE_BYTES: usize = 128 << 20;
/// How much an archive may unpack to, at most: its files' bytes and its entries. Unpacking
/// streams each file to disk, so memory stays small whatever the archive says; a bomb stops
/// here, or at the fetch's deadline, whichever comes first.
const LIMITS: Limits = Limits { bytes: 1 << 30, files: 100_000 };

/// The bounds of one unpack.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Bytes of regular files, in all.
    pub bytes: u64,
    /// Entries (files and folders).
    pub files: usize,
}
/// A folder is published again only when its file count grew by this fraction (at least one
/// file): a program or two more in a large cache is not worth uploading it all again.
const GROWTH_PERCENT: u64 = 5;

/// The driver folders of one cache folder: the background work on them (fetching the archives
/// on a machine's first open, then counting their files), and the counts it found — what a
/// process adds beyond them is its growth. Counting happens off the caller's thread: a driver
/// folder holds thousands of files, and a warm start must not wait for them to be counted.
pub(crate) struct DriverFolders {
    root: PathBuf,
    work: Mutex<Option<Work>>,
    files_at_open: Mutex<Option<HashMap<String, u64>>>,
    settled: AtomicBool,
    /// On a first open: until when the first miss waits for the fetch.
    fetch_deadline: Option<Instant>,
    /// Set when the fetch ended (fetched, missing, refused or stopped).
    fetch_ended: Arc<AtomicBool>,
}

/// The background thread's outcome, and how to stop its fetch.
struct Work {
    counted: Receiver<HashMap<String, u64>>,
    /// On a first open: until when the first miss waits for the fetch.
    fetch_deadline: Option<Instant>,
    /// Set when nobody waits any more: the fetch stops before writing another file.
    cancelled: Arc<AtomicBool>,
}

/// How long closing the cache waits for the files to be counted before giving up on
/// publishing the driver folders.
const COUNT_WAIT: Duration = Duration::from_secs(2);

fn archive_file(name: &str) -> String {
    format!("driver-{name}.tar.gz")
}

/// This user's usable driver folders under `root`: name, path, files.
fn folders(root: &Path) -> Vec<(String, PathBuf, u64)> {
    match driver_dirs::scan(root) {
        Ok(found) => found
            .into_iter()
            .filter_map(|found| match found {
                DriverFound::Folder(folder) => Some((folder.name, folder.path, folder.files)),
                _ => None,
            })
            .collect(),
        Err(err) => {
            tracing::debug!(error = %err, "cannot look at the driver cache folders");
            Vec::new()
        }
    }
}

fn file_counts(root: &Path) -> HashMap<String, u64> {
    folders(root).into_iter().map(|(name, _, files)| (name, files)).collect()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl DriverFolders {
    /// Starts the background work: on a machine's first open for this GPU (`first`), fetching
    /// the archive of every driver folder under `root`; then counting their files.
    pub fn open(tier: &RemoteTier, root: &Path, first: bool) -> DriverFolders {
        let fetch_ended = Arc::new(AtomicBool::new(false));
        let (work, files_at_open) = match start(tier, root, first, Arc::clone(&fetch_ended)) {
            Some(work) => (Some(work), None),
            // No thread: count here, and fetch nothing.
            None => (None, Some(file_counts(root))),
        };
        DriverFolders {
            root: root.to_path_buf(),
            fetch_deadline: work.as_ref().and_then(|work| work.fetch_deadline),
            work: Mutex::new(work),
            files_at_open: Mutex::new(files_at_open),
            settled: AtomicBool::new(false),
            fetch_ended,
        }
    }

    /// Folders under `root` whose archives are being fetched until `deadline`, by nothing: the
    /// state a first open is in while the fetch goes on, held for as long as a test needs it.
    #[cfg(test)]
    pub(crate) fn fetching_until(root: &Path, deadline: Instant) -> DriverFolders {
        DriverFolders {
            root: root.to_path_buf(),
            work: Mutex::new(None),
            files_at_open: Mutex::new(Some(HashMap::new())),
            settled: AtomicBool::new(false),
            fetch_deadline: Some(deadline),
            fetch_ended: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether the first load or compile would wait for the archives now: they are being
    /// fetched, nobody waited for them yet and their deadline has not passed.
    pub fn fetching(&self) -> bool {
        !self.settled.load(Relaxed)
            && !self.fetch_ended.load(Relaxed)
            && self.fetch_deadline.is_some_and(|deadline| Instant::now() < deadline)
    }

    /// Before the first miss reaches the driver: on a first open, waits for the fetch until its
    /// deadline, then stops it.
    pub fn settle(&self) {
        if self.settled.swap(true, Relaxed) {
            return;
        }
        let work = lock(&self.work);
        let Some(work) = work.as_ref() else { return };
        let Some(deadline) = work.fetch_deadline else { return };
        match work.counted.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(counts) => *lock(&self.files_at_open) = Some(counts),
            Err(_) => {
                work.cancelled.store(true, Relaxed);
                tracing::debug!(
                    "the driver caches did not arrive in time; the driver starts with what is there"
                );
            }
        }
    }

    /// Publishes the folders that gained files since they were counted (background; the tier's
    /// drop waits for it, bounded).
    pub fn publish_grown(&self, tier: &RemoteTier) {
        self.settle();
        if !tier.publishes() {
            return;
        }
        let counted = lock(&self.files_at_open).take().or_else(|| {
            let work = lock(&self.work).take()?;
            work.cancelled.store(true, Relaxed);
            work.counted.recv_timeout(COUNT_WAIT).ok()
        });
        let Some(files_at_open) = counted else {
            tracing::debug!("the driver folders were not counted in time; not publishing them");
            return;
        };
        for (name, path, files) in folders(&self.root) {
            let before = files_at_open.get(&name).copied().unwrap_or(0);
            let threshold = (before * GROWTH_PERCENT / 100).max(1);
            if files < before.saturating_add(threshold) {
                tracing::debug!(driver = %name, files, before, "the driver cache did not grow enough to publish it");
                continue;
            }
            match pack(&path) {
                Ok(archive) => tier.replace_object(&archive_file(&name), Kind::DriverArchive, archive),
                Err(err) => {
                    tracing::debug!(driver = %name, error = %err, "could not archive the driver cache")
                }
            }
        }
    }
}

/// Starts the background thread: the fetch of every driver folder's archive under `root` when
/// `first`, then the count of their files.
fn start(tier: &RemoteTier, root: &Path, first: bool, fetch_ended: Arc<AtomicBool>) -> Option<Work> {
    let (sender, counted) = std::sync::mpsc::sync_channel(1);
    let cancelled = Arc::new(AtomicBool::new(false));
    let fixed = tier.budgets.fixed();
    let fetch_deadline =
        first.then(|| Instant::now() + fixed.map_or(FETCH_BUDGET, |fixed| fixed.max(FETCH_BUDGET)));
    let probe = fixed.map_or(PROBE_BUDGET, |fixed| fixed.max(PROBE_BUDGET));
    // A remote that has not connected by its connect deadline (counted from when connecting
    // started, while the backend opened) is not waited for, nor longer than one lookup budget
    // from now: a hung one costs at most that budget, once.
    let budget = fixed.unwrap_or(super::budget::DEFAULT_BUDGET);
    let connect_by =
        (tier.background().opened_at() + super::tier::connect_deadline(budget)).min(Instant::now() + budget);
    let (background, root, stop) = (tier.background(), root.to_path_buf(), Arc::clone(&cancelled));
    let spawned = std::thread::Builder::new().name("sparkle-driver-sync".into()).spawn(move || {
        if let Some(deadline) = fetch_deadline {
            for (name, path, _) in folders(&root) {
                match fetch_into(&background, &name, &path, (connect_by, probe), deadline, &stop) {
                    Ok(Some(unpacked)) => tracing::info!(
                        driver = %name, bytes = unpacked,
                        "driver cache fetched from the remote cache"
                    ),
                    Ok(None) => {}
                    Err(why) => tracing::warn!(
                        driver = %name, remote = %background.url(),
                        "the driver cache from the remote cache is not used: {why}"
                    ),
                }
            }
        }
        fetch_ended.store(true, Relaxed);
        // Counted after the fetch: what came from the remote is not this process's growth.
        let _ = sender.send(file_counts(&root));
    });
    match spawned {
        Ok(_) => Some(Work { counted, fetch_deadline, cancelled }),
        Err(err) => {
            tracing::debug!(error = %err, "cannot start the driver caches' background work");
            None
        }
    }
}

/// Fetches and unpacks `driver-<name>.tar.gz` into `dest`; `Ok(None)` when the remote has none,
/// did not connect by `connect_by`, or takes longer than `probe` per request.
fn fetch_into(
    background: &Background,
    name: &str,
    dest: &Path,
    (connect_by, probe): (Instant, Duration),
    deadline: Instant,
    cancelled: &AtomicBool,
) -> Result<Option<u64>, String> {
    if !background.wait_connected(connect_by.saturating_duration_since(Instant::now())) {
        // A dead remote is warned about once by the tier; a hung one is not waited for again.
        background.stall();
        tracing::debug!(driver = %name, "the remote did not connect in time; the driver cache starts cold");
        return Ok(None);
    }
    let until = deadline.saturating_duration_since(Instant::now());
    if !matches!(background.probe(until), Probe::Ready(round_trip) if round_trip <= probe) {
        // A slow remote is not waited for: a cold driver cache costs less.
        tracing::debug!(driver = %name, "the remote takes longer than {} ms a request; the driver cache starts cold", probe.as_millis());
        return Ok(None);
    }
    let left = deadline.saturating_duration_since(Instant::now());
    let Some(payload) =
        background.fetch_object(&archive_file(name), Kind::DriverArchive, MAX_ARCHIVE_BYTES, left)?
    else {
        return Ok(None);
    };
    unpack(&payload, dest, cancelled).map(Some)
}

/// A gzip'd tar of `dir`'s regular files and folders (links are not followed or stored).
pub(crate) fn pack(dir: &Path) -> io::Result<Vec<u8>> {
    let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut builder = tar::Builder::new(encoder);
    builder.follow_symlinks(false);
    // Drivers preallocate sparse index files; store them plainly, as any tar reads them.
    builder.sparse(false);
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        for entry in fs::read_dir(dir.join(&relative))? {
            let entry = entry?;
            let file_type = entry.file_type()?;
            let path = relative.join(entry.file_name());
            if file_type.is_dir() {
                pending.push(path);
            } else if file_type.is_file() {
                // The driver may replace a file meanwhile: what vanished is skipped.
                match fs::File::open(entry.path()) {
                    Ok(mut file) => builder.append_file(&path, &mut file)?,
                    Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                    Err(err) => return Err(err),
                }
            }
        }
    }
    builder.into_inner()?.finish()
}

/// Unpacks an archive into `dest` within [`LIMITS`]; see [`unpack_within`].
pub(crate) fn unpack(archive: &[u8], dest: &Path, cancelled: &AtomicBool) -> Result<u64, String> {
    unpack_within(archive, dest, cancelled, LIMITS)
}

/// Unpacks an archive into `dest`: regular files and folders only, at clean relative paths,
/// never replacing what is there, each file streamed to a temporary file and renamed into place
/// whole (a driver reading the folder meanwhile sees it complete or not at all). Stops at
/// `limits` (an error) or as soon as `cancelled` is set, even inside a file. Returns the bytes
/// of the archive's files.
pub(crate) fn unpack_within(
    archive: &[u8],
    dest: &Path,
    cancelled: &AtomicBool,
    limits: Limits,
) -> Result<u64, String> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(archive));
    let mut written = 0u64;
    let entries = archive.entries().map_err(|err| format!("not an archive: {err}"))?;
    for (index, entry) in entries.enumerate() {
        if cancelled.load(Relaxed) {
            return Ok(written);
        }
        if index >= limits.files {
            return Err(format!("more than {} files", limits.files));
        }
        let mut entry = entry.map_err(|err| format!("damaged archive: {err}"))?;
        let path = entry.path().map_err(|err| format!("damaged archive: {err}"))?.into_owned();
        if path.components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(format!("the archive names {}, which is not a plain relative path", path.display()));
        }
        let target = dest.join(&path);
        match entry.header().entry_type() {
            tar::EntryType::Directory => crate::cache::files::create_private_dir(&target)
                .map_err(|err| format!("cannot create {}: {err}", target.display()))?,
            tar::EntryType::Regular | tar::EntryType::GNUSparse => {
                let size = entry.header().size().map_err(|err| format!("damaged archive: {err}"))?;
                written = written.saturating_add(size);
                if written > limits.bytes {
                    return Err(format!("more than {} bytes unpacked", limits.bytes));
                }
                if fs::symlink_metadata(&target).is_ok() {
                    // The driver already made it: its own file wins (the tar reader skips the
                    // bytes, decompressing them: the size limit above counts them).
                    continue;
                }
                let parent = target.parent().unwrap_or(dest);
                crate::cache::files::create_private_dir(parent)
                    .map_err(|err| format!("cannot create {}: {err}", parent.display()))?;
                let mut temp = tempfile::Builder::new()
                    .prefix(".sparkle-fetch-")
                    .tempfile_in(parent)
                    .map_err(|err| format!("cannot write in {}: {err}", parent.display()))?;
                let mut chunk = vec![0u8; 64 << 10];
                loop {
                    if cancelled.load(Relaxed) {
                        // The temporary file goes with `temp`.
                        return Ok(written);
                    }
                    let read = entry.read(&mut chunk).map_err(|err| format!("damaged archive: {err}"))?;
                    if read == 0 {
                        break;
                    }
                    temp.write_all(&chunk[..read])
                        .map_err(|err| format!("cannot write {}: {err}", target.display()))?;
                }
                if let Err(err) = temp.persist_noclobber(&target) {
                    if err.error.kind() != io::ErrorKind::AlreadyExists {
                        return Err(format!("cannot write {}: {}", target.display(), err.error));
                    }
                }
            }
            other => {
                return Err(format!(
                    "the archive holds a {other:?} at {}; only files and folders are taken",
                    path.display()
                ))
            }
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_and_unpacks_files_and_never_replaces() {
        let src = tempfile::tempdir().unwrap();
        fs::create_dir_all(src.path().join("a/b")).unwrap();
        fs::write(src.path().join("a/b/one"), b"first").unwrap();
        fs::write(src.path().join("index"), vec![7u8; 10_000]).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", src.path().join("link")).unwrap();
        let archive = pack(src.path()).unwrap();

        let dest = tempfile::tempdir().unwrap();
        fs::write(dest.path().join("index"), b"the driver's own").unwrap();
        let written = unpack(&archive, dest.path(), &AtomicBool::new(false)).unwrap();
        assert_eq!(written, 10_005);
        assert_eq!(fs::read(dest.path().join("a/b/one")).unwrap(), b"first");
        assert_eq!(fs::read(dest.path().join("index")).unwrap(), b"the driver's own");
        assert!(fs::symlink_metadata(dest.path().join("link")).is_err(), "links are not archived");
    }

    /// A gzip'd tar holding one file of `size` zeros (a bomb: it compresses a thousandfold).
    fn bomb(size: u64) -> Vec<u8> {
        let mut builder =
            tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best()));
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(size);
        header.set_mode(0o600);
        header.set_path("index").unwrap();
        header.set_cksum();
        builder.append(&header, io::repeat(0).take(size)).unwrap();
        builder.into_inner().unwrap().finish().unwrap()
    }

    #[test]
    fn a_bomb_stops_at_the_limits_and_at_cancellation_leaving_nothing() {
        let archive = bomb(8 << 20);
        assert!(archive.len() < 64 << 10, "{} bytes", archive.len());
        let dest = tempfile::tempdir().unwrap();
        let err = unpack_within(
            &archive,
            dest.path(),
            &AtomicBool::new(false),
            Limits { bytes: 1 << 20, files: 10 },
        )
        .unwrap_err();
        assert!(err.contains("bytes unpacked"), "{err}");
        assert_eq!(fs::read_dir(dest.path()).unwrap().count(), 0, "nothing left behind");
        // Cancelled: stops at once, a partial file is not left.
        let unpacked = unpack_within(&archive, dest.path(), &AtomicBool::new(true), LIMITS).unwrap();
        assert_eq!(unpacked, 0);
        assert_eq!(fs::read_dir(dest.path()).unwrap().count(), 0);
        // Within the limits it unpacks whole.
        assert_eq!(unpack(&archive, dest.path(), &AtomicBool::new(false)).unwrap(), 8 << 20);
        assert_eq!(fs::metadata(dest.path().join("index")).unwrap().len(), 8 << 20);
        // Too many entries.
        let mut builder =
            tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
        for i in 0..20 {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(tar::EntryType::Regular);
            header.set_size(0);
            header.set_path(format!("f{i}")).unwrap();
            header.set_cksum();
            builder.append(&header, io::empty()).unwrap();
        }
        let many = builder.into_inner().unwrap().finish().unwrap();
        let err = unpack_within(
            &many,
            tempfile::tempdir().unwrap().path(),
            &AtomicBool::new(false),
            Limits { bytes: 1 << 20, files: 10 },
        )
        .unwrap_err();
        assert!(err.contains("more than 10 files"), "{err}");
    }

    #[test]
    fn refuses_escaping_paths_links_and_garbage() {
        let dest = tempfile::tempdir().unwrap();
        assert!(unpack(b"not gzip at all", dest.path(), &AtomicBool::new(false)).is_err());
        for (path, kind) in [("../escape", tar::EntryType::Regular), ("evil", tar::EntryType::Symlink)] {
            let mut builder =
                tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(kind);
            header.set_size(0);
            // Written raw: the tar crate refuses to build such paths itself.
            header.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
            if kind == tar::EntryType::Symlink {
                header.set_link_name("/etc/passwd").unwrap();
            }
            header.set_cksum();
            builder.append(&header, io::empty()).unwrap();
            let archive = builder.into_inner().unwrap().finish().unwrap();
            assert!(unpack(&archive, dest.path(), &AtomicBool::new(false)).is_err(), "{path}");
        }
        assert!(!dest.path().parent().unwrap().join("escape").exists());
        assert!(fs::symlink_metadata(dest.path().join("evil")).is_err());
    }
}
