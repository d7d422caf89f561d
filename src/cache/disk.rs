//! `DiskStore`: the cache folder as a whole, without any backend — listing, verifying, pruning
//! and clearing entries across every GPU folder. The `sparkle cache` commands and the cache's own
//! size bound use it.
//!
//! Layout: `<root>/<backend>-<gpu hash>/<first 2 hex of key>/<32 hex key>`, plus `gpu.txt` (and
//! `gpu.json`) describing the GPU in each GPU folder. Names starting with `.tmp-` are files being
//! written or removed, and the lock files of processes compiling a program
//! (`<shard>/.tmp-lock-<key>`, see `process_flight.rs`): pruning removes them once stale,
//! `clear` at once.
//!
//! `<root>/drivers/` holds the caches drivers keep for themselves (`driver_dirs.rs`): each is
//! counted against the size bound, pruned and cleared as a whole, and never verified.
//!
//! Links are never followed. What does not fit the layout — another user's entry, something
//! other than a regular file at an entry's path, a GPU or shard folder that is a link or not a
//! folder — is a *problem*: listed and reported, removed only on request (`verify` with `fix`,
//! and `clear`).

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::driver_dirs::{self, DriverCacheInfo, DriverFolder, DriverFound, DRIVER_CACHES_DIR};
use super::entry::{EntryHeader, Expect, HEADER_LEN};
use super::files::{self, current_uid, FileIdentity, ReadOutcome, STALE_TEMP_AGE, TEMP_PREFIX};
use super::{CacheError, CacheKey};

/// The description file in each GPU folder.
pub const GPU_DESCRIPTION: &str = "gpu.txt";
/// The same description as JSON.
pub const GPU_DESCRIPTION_JSON: &str = "gpu.json";

/// One entry file, as `sparkle cache list` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EntryInfo {
    /// The GPU folder's name (`<backend>-<gpu id>`).
    pub gpu_dir: String,
    /// 32 hex digits; empty for a problem with a GPU or shard folder rather than an entry.
    pub key: String,
    /// The entry's file.
    pub path: PathBuf,
    /// The header's backend tag.
    pub backend: u32,
    /// The header's blob format tag.
    pub blob_format: u32,
    /// Bytes of the blob.
    pub payload_len: u64,
    /// Bytes of the file (header and blob).
    pub file_size: u64,
    /// How long the compile took (seconds in JSON).
    #[serde(serialize_with = "secs")]
    pub compile_time: Duration,
    /// When the entry was written, in nanoseconds since the Unix epoch.
    pub created_unix_ns: u64,
    /// The later of the header's stamp and the file's mtime (uses are recorded in the mtime).
    pub last_used_unix_ns: u64,
    /// The user who owns the file.
    pub owner_uid: u32,
    /// Why the header cannot be used, if it cannot (the other fields are then zero).
    pub problem: Option<String>,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// What `verify` found and did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct VerifyReport {
    /// Entries of this user checked completely.
    pub checked: u64,
    /// Of those, the ones that passed.
    pub valid: u64,
    /// Driver cache folders found usable (their contents are the driver's to check).
    pub driver_caches: u64,
    /// Entries that failed verification and were removed, with the reason.
    pub removed: Vec<(PathBuf, String)>,
    /// Problems removed because `fix` was asked for: what it was and why it was a problem.
    pub fixed: Vec<(PathBuf, String)>,
    /// Problems left in place: entries of other users, things that are not regular files at an
    /// entry's path, GPU or shard folders that are symbolic links or not folders. Without `fix`
    /// every problem found is here; with it, those that could not be removed (and why).
    pub problems: Vec<(PathBuf, String)>,
}

impl VerifyReport {
    /// Records a problem, removing it first if `fix` (see [`settle_problem`]).
    fn settle(&mut self, path: PathBuf, meta: &fs::Metadata, problem: String, fix: bool) {
        settle_problem(path, meta, problem, fix, &mut self.fixed, &mut self.problems);
    }
}

/// What `prune` or `clear` removed and what is left. Bytes count entries and driver cache
/// folders together, as the size bound does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PruneReport {
    /// Entries removed.
    pub removed_entries: u64,
    /// Driver cache folders removed (each as a whole).
    pub removed_driver_caches: u64,
    /// Bytes removed.
    pub removed_bytes: u64,
    /// Leftovers of interrupted writes and removals.
    pub removed_temp_files: u64,
    /// Entries left.
    pub remaining_entries: u64,
    /// Driver cache folders left.
    pub remaining_driver_caches: u64,
    /// Of `remaining_bytes`, those in driver cache folders.
    pub remaining_driver_bytes: u64,
    /// Bytes left.
    pub remaining_bytes: u64,
    /// `clear` only: problems (see [`VerifyReport::problems`]) removed.
    pub removed_problems: u64,
    /// `clear` only: problems that could not be removed, and why.
    pub problems: Vec<(PathBuf, String)>,
}

/// A cache folder, for maintenance.
#[derive(Debug, Clone)]
pub struct DiskStore {
    root: PathBuf,
}

/// A file found under the root.
struct Found {
    gpu_dir: String,
    path: PathBuf,
    meta: fs::Metadata,
    kind: FoundKind,
}

enum FoundKind {
    /// A regular file named as an entry (of any owner).
    Entry(CacheKey),
    /// A regular file of an interrupted write or removal.
    Temp,
    /// Something that does not belong where it is — not a regular file at an entry's path (then
    /// the key), or a GPU or shard folder that is a link or not a folder — and why.
    Misplaced(Option<CacheKey>, String),
}

impl Found {
    fn last_used(&self) -> SystemTime {
        self.meta.modified().unwrap_or(SystemTime::UNIX_EPOCH)
    }

    fn is_foreign(&self, uid: u32) -> bool {
        self.meta.uid() != uid
    }
}

/// What pruning and clearing may remove: an entry, or a driver cache folder as a whole.
enum Removable {
    Entry(Found),
    Driver(DriverFolder),
}

impl Removable {
    fn last_used(&self) -> SystemTime {
        match self {
            Removable::Entry(found) => found.last_used(),
            Removable::Driver(folder) => folder.last_used,
        }
    }

    fn bytes(&self) -> u64 {
        match self {
            Removable::Entry(found) => found.meta.len(),
            Removable::Driver(folder) => folder.bytes,
        }
    }

    fn path(&self) -> &Path {
        match self {
            Removable::Entry(found) => &found.path,
            Removable::Driver(folder) => &folder.path,
        }
    }

    fn identity(&self) -> FileIdentity {
        match self {
            Removable::Entry(found) => FileIdentity::of(&found.meta),
            Removable::Driver(folder) => FileIdentity::of(&folder.meta),
        }
    }
}

fn foreign_problem(owner: u32) -> String {
    format!("owned by uid {owner}; not loaded")
}

/// Why a link or a non-folder at a folder's path is a problem.
fn folder_problem(what: &str, path: &Path, file_type: fs::FileType) -> String {
    if file_type.is_symlink() {
        let target = fs::read_link(path).map_or_else(|err| format!("? ({err})"), |t| t.display().to_string());
        format!("the {what} is a symbolic link to {target}; the cache does not keep entries through links")
    } else {
        format!("{} where a {what} belongs; entries cannot be stored there", files::describe_type(file_type))
    }
}

/// `gl-0123456789abcdef` → (backend name, gpu hash).
pub fn parse_gpu_dir_name(name: &str) -> Option<(&str, u64)> {
    let (backend, hash) = name.rsplit_once('-')?;
    let name_ok = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    if backend.is_empty() || hash.len() != 16 || !backend.bytes().all(name_ok) {
        return None;
    }
    Some((backend, u64::from_str_radix(hash, 16).ok()?))
}

fn is_shard_name(name: &str) -> bool {
    name.len() == 2 && name.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

fn unix_ns(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH).map_or(0, super::stats::duration_ns)
}

/// Reads a folder; a folder that vanished meanwhile (another process cleared it) reads as empty.
fn read_dir(dir: &Path) -> Result<Vec<fs::DirEntry>, CacheError> {
    match fs::read_dir(dir) {
        Ok(entries) => Ok(entries.filter_map(Result::ok).collect()),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(err) => Err(CacheError::io("read the folder", dir, err)),
    }
}

/// The type of a folder's entry, without following links; `None` if it vanished.
fn type_of(entry: &fs::DirEntry) -> Option<fs::FileType> {
    entry.file_type().ok()
}

impl DiskStore {
    /// The store rooted at the cache folder (the one holding a folder per GPU). Nothing is
    /// touched until a method is called; a missing root reads as an empty cache.
    pub fn open(root: impl Into<PathBuf>) -> DiskStore {
        DiskStore { root: root.into() }
    }

    /// The cache folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The GPU folders: (folder name, contents of its description file, or why it is missing
    /// or not used). A GPU folder that is a symbolic link is listed, never followed.
    pub fn gpus(&self) -> Result<Vec<(String, String)>, CacheError> {
        let mut out = Vec::new();
        for dir in self.gpu_dir_entries()? {
            let path = dir.path();
            let file_type = type_of(&dir);
            let description = if file_type.is_some_and(|t| t.is_dir()) {
                match fs::read_to_string(path.join(GPU_DESCRIPTION)) {
                    Ok(text) => text,
                    Err(err) => format!("(no readable {GPU_DESCRIPTION}: {err})\n"),
                }
            } else if let Some(file_type) = file_type {
                format!("({})\n", folder_problem("GPU folder", &path, file_type))
            } else {
                continue;
            };
            out.push((dir.file_name().to_string_lossy().into_owned(), description));
        }
        out.sort();
        Ok(out)
    }

    /// The driver cache folders under `drivers/`, sized, and what is there but cannot be one (a
    /// link, a file, another user's folder), with the reason in `problem`.
    pub fn driver_caches(&self) -> Result<Vec<DriverCacheInfo>, CacheError> {
        Ok(driver_dirs::scan(&self.root)?.iter().filter_map(driver_dirs::describe).collect())
    }

    /// Everything in the root named like a GPU folder, whatever its type.
    fn gpu_dir_entries(&self) -> Result<Vec<fs::DirEntry>, CacheError> {
        Ok(read_dir(&self.root)?
            .into_iter()
            .filter(|d| d.file_name().to_str().and_then(parse_gpu_dir_name).is_some())
            .collect())
    }

    /// The real GPU folders (links excluded).
    fn gpu_dirs(&self) -> Result<Vec<fs::DirEntry>, CacheError> {
        Ok(self.gpu_dir_entries()?.into_iter().filter(|d| type_of(d).is_some_and(|t| t.is_dir())).collect())
    }

    /// Every entry, temporary file and misplaced thing, without following links or reading
    /// contents.
    fn walk(&self) -> Result<Vec<Found>, CacheError> {
        let mut found = Vec::new();
        let inspect = |path: &Path| match fs::symlink_metadata(path) {
            Ok(meta) => Ok(Some(meta)),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(CacheError::io("inspect", path, err)),
        };
        for gpu in self.gpu_dir_entries()? {
            let gpu_dir = gpu.file_name().to_string_lossy().into_owned();
            let gpu_path = gpu.path();
            let Some(gpu_type) = type_of(&gpu) else { continue };
            if !gpu_type.is_dir() {
                let Some(meta) = inspect(&gpu_path)? else { continue };
                let problem = folder_problem("GPU folder", &gpu_path, gpu_type);
                found.push(Found {
                    gpu_dir,
                    path: gpu_path,
                    meta,
                    kind: FoundKind::Misplaced(None, problem),
                });
                continue;
            }
            for shard in read_dir(&gpu_path)? {
                let name = shard.file_name();
                let Some(name) = name.to_str() else { continue };
                let Some(shard_type) = type_of(&shard) else { continue };
                if !is_shard_name(name) {
                    continue;
                }
                let shard_path = shard.path();
                if !shard_type.is_dir() {
                    let Some(meta) = inspect(&shard_path)? else { continue };
                    let problem = folder_problem("shard folder", &shard_path, shard_type);
                    let kind = FoundKind::Misplaced(None, problem);
                    found.push(Found { gpu_dir: gpu_dir.clone(), path: shard_path, meta, kind });
                    continue;
                }
                for file in read_dir(&shard_path)? {
                    let file_name = file.file_name();
                    let Some(file_name) = file_name.to_str() else { continue };
                    let key = CacheKey::from_hex(file_name).filter(|_| file_name.starts_with(name));
                    let is_temp = file_name.starts_with(TEMP_PREFIX);
                    if key.is_none() && !is_temp {
                        continue;
                    }
                    let path = file.path();
                    let Some(meta) = inspect(&path)? else { continue };
                    let kind = match key {
                        _ if meta.is_file() => key.map_or(FoundKind::Temp, FoundKind::Entry),
                        // Leftovers of removals that are not files are removed with their folder.
                        None => continue,
                        Some(key) => {
                            let what = files::describe_type(meta.file_type());
                            FoundKind::Misplaced(Some(key), format!("{what} at an entry's path; not loaded"))
                        }
                    };
                    found.push(Found { gpu_dir: gpu_dir.clone(), path, meta, kind });
                }
            }
        }
        Ok(found)
    }

    /// Every entry with what its header says; headers are checked, payloads are not read.
    /// Problems are listed too, each with its reason in `problem`: entries of other users (never
    /// loaded), things that are not regular files at an entry's path, and GPU or shard folders
    /// that are links or not folders (`key` is then empty).
    pub fn list(&self) -> Result<Vec<EntryInfo>, CacheError> {
        let uid = current_uid();
        let mut out = Vec::new();
        for found in self.walk()? {
            let (key, misplaced) = match &found.kind {
                FoundKind::Temp => continue,
                FoundKind::Entry(key) => (Some(*key), None),
                FoundKind::Misplaced(key, problem) => (*key, Some(problem.clone())),
            };
            let mut info = EntryInfo {
                gpu_dir: found.gpu_dir.clone(),
                key: key.map(|k| k.hex()).unwrap_or_default(),
                path: found.path.clone(),
                backend: 0,
                blob_format: 0,
                payload_len: 0,
                file_size: if found.meta.is_file() { found.meta.len() } else { 0 },
                compile_time: Duration::ZERO,
                created_unix_ns: 0,
                last_used_unix_ns: unix_ns(found.last_used()),
                owner_uid: found.meta.uid(),
                problem: misplaced,
            };
            if let (Some(key), None) = (key, &info.problem) {
                match read_header(&found.path, found.meta.len()) {
                    Ok(header) => {
                        info.backend = header.backend;
                        info.blob_format = header.blob_format;
                        info.payload_len = header.payload_len;
                        info.compile_time = Duration::from_nanos(header.compile_time_ns);
                        info.created_unix_ns = header.created_ns;
                        info.last_used_unix_ns = info.last_used_unix_ns.max(header.last_used_ns);
                        if header.key() != key {
                            info.problem =
                                Some(format!("file name says {key}, header says {}", header.key()));
                        }
                    }
                    Err(problem) => info.problem = Some(problem),
                }
                if found.is_foreign(uid) {
                    info.problem = Some(foreign_problem(found.meta.uid()));
                }
            }
            out.push(info);
        }
        out.sort_by(|a, b| (&a.gpu_dir, &a.key, &a.path).cmp(&(&b.gpu_dir, &b.key, &b.path)));
        Ok(out)
    }

    /// Checks every entry of this user completely (header, identity against its folder and file
    /// name, payload checksum) and removes those that fail. Problems (entries of other users,
    /// things that are not regular files at an entry's path, GPU or shard folders that are links
    /// or not folders) are reported, and removed only when `fix` is set: a folder with its
    /// contents, a link as a link (never its target), another user's file where the folder's
    /// permissions allow it.
    pub fn verify(&self, fix: bool) -> Result<VerifyReport, CacheError> {
        let mut report = VerifyReport::default();
        let uid = current_uid();
        for found in self.walk()? {
            let checked = match &found.kind {
                FoundKind::Temp => continue,
                FoundKind::Entry(key) if !found.is_foreign(uid) => Ok(*key),
                FoundKind::Entry(_) => Err(foreign_problem(found.meta.uid())),
                FoundKind::Misplaced(_, problem) => Err(problem.clone()),
            };
            let key = match checked {
                Ok(key) => key,
                Err(problem) => {
                    report.settle(found.path, &found.meta, problem, fix);
                    continue;
                }
            };
            report.checked += 1;
            let dir_identity = parse_gpu_dir_name(&found.gpu_dir);
            let expect = |_: &EntryHeader| {
                let (backend_name, gpu_hash) = dir_identity?;
                Some(Expect { backend: super::key::backend_tag(backend_name), gpu_hash, key })
            };
            let outcome = match files::read_entry_with(&found.path, expect) {
                Ok(outcome) => outcome,
                Err(err) => return Err(CacheError::io("read the entry", found.path, err)),
            };
            match outcome {
                ReadOutcome::Missing => report.checked -= 1,
                ReadOutcome::Found(_) => report.valid += 1,
                // Replaced between the walk and the read.
                ReadOutcome::Foreign { uid: owner } => {
                    report.checked -= 1;
                    report.settle(found.path, &found.meta, foreign_problem(owner), fix);
                }
                ReadOutcome::NotAFile(what) => {
                    report.checked -= 1;
                    let problem = format!("{what} at an entry's path; not loaded");
                    report.settle(found.path, &found.meta, problem, fix);
                }
                ReadOutcome::Rejected { problem, identity } => {
                    match files::remove_if_same(&found.path, identity) {
                        Ok(true) => report.removed.push((found.path, problem.to_string())),
                        Ok(false) => {}
                        Err(err) => return Err(CacheError::io("remove the corrupt entry", found.path, err)),
                    }
                }
            }
        }
        // A driver's files are its own to check; only what would make the folder unsafe to
        // hand to a driver is a problem.
        for found in driver_dirs::scan(&self.root)? {
            match found {
                DriverFound::Folder(_) => report.driver_caches += 1,
                DriverFound::Temp(_) => {}
                DriverFound::Problem { path, meta, problem } => report.settle(path, &meta, problem, fix),
            }
        }
        Ok(report)
    }

    /// This user's entries, and their bytes together with those of the driver cache folders (as
    /// the size bound counts them), read without changing anything.
    pub fn usage(&self) -> Result<(u64, u64), CacheError> {
        let uid = current_uid();
        let (mut entries, mut bytes) = (0, 0);
        for found in self.walk()? {
            if matches!(found.kind, FoundKind::Entry(_)) && !found.is_foreign(uid) {
                entries += 1;
                bytes += found.meta.len();
            }
        }
        for found in driver_dirs::scan(&self.root)? {
            if let DriverFound::Folder(folder) = found {
                bytes += folder.bytes;
            }
        }
        Ok((entries, bytes))
    }

    /// Removes this user's entries and driver cache folders unused for longer than `max_age`,
    /// then, while entries and driver folders together exceed `max_bytes`, the driver folders
    /// (largest first) and then the least recently used entries; and leftovers of interrupted
    /// writes. Entries of other users and other problems are neither counted nor removed.
    ///
    /// Driver folders go before entries because the driver rebuilds its cache from Sparkle's
    /// programs in the next run (costing that run one slower start), while a lost entry costs a
    /// compile from source; and a driver folder holds what the driver made for programs long
    /// since pruned, which only removing it as a whole can drop. Pruning runs when a process
    /// publishes a new entry (or on `sparkle cache prune`), so a warm start that compiles
    /// nothing never removes the driver's cache it is using.
    pub fn prune(&self, max_bytes: u64, max_age: Option<Duration>) -> Result<PruneReport, CacheError> {
        self.remove_where(|items, now| {
            let mut remove = vec![false; items.len()];
            let mut total: u64 = items.iter().map(Removable::bytes).sum();
            for (i, item) in items.iter().enumerate() {
                let too_old = max_age
                    .is_some_and(|max| now.duration_since(item.last_used()).is_ok_and(|age| age > max));
                if too_old {
                    remove[i] = true;
                    total -= item.bytes();
                }
            }
            let mut order: Vec<usize> = (0..items.len()).filter(|&i| !remove[i]).collect();
            order.sort_by_key(|&i| match &items[i] {
                Removable::Driver(folder) => (0, std::cmp::Reverse(folder.bytes), SystemTime::UNIX_EPOCH, i),
                Removable::Entry(found) => (1, std::cmp::Reverse(0), found.last_used(), i),
            });
            for i in order {
                if total <= max_bytes {
                    break;
                }
                remove[i] = true;
                total -= items[i].bytes();
            }
            remove
        })
    }

    /// Removes every entry of this user and every problem that can be removed (as
    /// [`verify`](Self::verify) with `fix` does), then the folders and description files left
    /// empty.
    pub fn clear(&self) -> Result<PruneReport, CacheError> {
        let mut report = self.remove_where(|entries, _| vec![true; entries.len()])?;
        let uid = current_uid();
        let mut fixed = Vec::new();
        for found in self.walk()? {
            let problem = match &found.kind {
                FoundKind::Misplaced(_, problem) => problem.clone(),
                FoundKind::Entry(_) if found.is_foreign(uid) => foreign_problem(found.meta.uid()),
                _ => continue,
            };
            settle_problem(found.path, &found.meta, problem, true, &mut fixed, &mut report.problems);
        }
        for found in driver_dirs::scan(&self.root)? {
            if let DriverFound::Problem { path, meta, problem } = found {
                settle_problem(path, &meta, problem, true, &mut fixed, &mut report.problems);
            }
        }
        report.removed_problems = fixed.len() as u64;
        // The placement's learned histories are kept like tuning and go with the entries.
        let _ = crate::runtime::clear_histories(&self.root);
        let _ = fs::remove_dir(self.root.join(DRIVER_CACHES_DIR));
        for gpu in self.gpu_dirs()? {
            let gpu_path = gpu.path();
            for shard in read_dir(&gpu_path)? {
                let is_shard = shard.file_name().to_str().is_some_and(is_shard_name)
                    && type_of(&shard).is_some_and(|t| t.is_dir());
                if is_shard {
                    remove_lock_files(&shard.path())?;
                }
                let _ = fs::remove_dir(shard.path());
            }
            super::recipe::remove_all(&gpu_path);
            for file in [
                GPU_DESCRIPTION,
                GPU_DESCRIPTION_JSON,
                super::WORKING_SET_FILE,
                super::remote::REMOTE_STATS_FILE,
            ] {
                let _ = fs::remove_file(gpu_path.join(file));
            }
            let _ = fs::remove_dir(&gpu_path);
        }
        Ok(report)
    }

    /// Removes the entries and driver folders `choose` marks (it sees this user's, sorted by
    /// nothing in particular, and the current time), stale temporary files, and driver folders
    /// left aside by removals that did not finish.
    fn remove_where(
        &self,
        choose: impl FnOnce(&[Removable], SystemTime) -> Vec<bool>,
    ) -> Result<PruneReport, CacheError> {
        let now = SystemTime::now();
        let uid = current_uid();
        let mut report = PruneReport::default();
        let mut entries = Vec::new();
        for found in self.walk()? {
            if found.is_foreign(uid) {
                continue;
            }
            match found.kind {
                FoundKind::Entry(_) => entries.push(Removable::Entry(found)),
                FoundKind::Temp => {
                    let stale = now.duration_since(found.last_used()).is_ok_and(|age| age > STALE_TEMP_AGE);
                    if stale && fs::remove_file(&found.path).is_ok() {
                        report.removed_temp_files += 1;
                    }
                }
                FoundKind::Misplaced(..) => {}
            }
        }
        for found in driver_dirs::scan(&self.root)? {
            match found {
                DriverFound::Folder(folder) => entries.push(Removable::Driver(folder)),
                // Only ever a folder being removed: nothing in it is wanted.
                DriverFound::Temp(path) => {
                    if driver_dirs::remove_temp(&path) {
                        report.removed_temp_files += 1;
                    }
                }
                DriverFound::Problem { .. } => {}
            }
        }
        let remove = choose(&entries, now);
        for (item, remove) in entries.iter().zip(remove) {
            let size = item.bytes();
            let is_entry = matches!(item, Removable::Entry(_));
            if !remove {
                if is_entry {
                    report.remaining_entries += 1;
                } else {
                    report.remaining_driver_caches += 1;
                    report.remaining_driver_bytes += size;
                }
                report.remaining_bytes += size;
                continue;
            }
            // A driver folder is taken aside whole before it is removed, so a driver writing
            // into it meanwhile never sees it half gone; the next process recreates it.
            match files::remove_if_same(item.path(), item.identity()) {
                Ok(true) => {
                    if is_entry {
                        report.removed_entries += 1;
                    } else {
                        report.removed_driver_caches += 1;
                    }
                    report.removed_bytes += size;
                }
                // Replaced by a fresh entry meanwhile (which stays), or already gone.
                Ok(false) => {}
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(CacheError::io("remove", item.path(), err)),
            }
        }
        Ok(report)
    }
}

/// Removes the lock files in a shard folder (see `process_flight`): those of holders that died,
/// and fresh ones too, which costs a process compiling right now at most a second compile of its
/// program elsewhere, as clearing the cache under it does anyway.
fn remove_lock_files(shard: &Path) -> Result<(), CacheError> {
    for file in read_dir(shard)? {
        let is_lock = file.file_name().to_str().is_some_and(super::process_flight::is_lock_name);
        if is_lock && type_of(&file).is_some_and(|t| t.is_file()) {
            let _ = fs::remove_file(file.path());
        }
    }
    Ok(())
}

/// Records a problem: removed (into `fixed`) when `fix` is set and removal works, else left
/// (into `left`, with why it could not be removed). Only the very thing that was judged is
/// removed; something that replaced it meanwhile stays.
fn settle_problem(
    path: PathBuf,
    meta: &fs::Metadata,
    problem: String,
    fix: bool,
    fixed: &mut Vec<(PathBuf, String)>,
    left: &mut Vec<(PathBuf, String)>,
) {
    if !fix {
        left.push((path, problem));
        return;
    }
    let identity = FileIdentity::of(meta);
    let removed = if meta.file_type().is_symlink() {
        // Removing a link never touches its target, and a link that replaced it meanwhile is
        // as much a problem.
        fs::remove_file(&path).map(|()| true)
    } else {
        files::remove_if_same(&path, identity)
    };
    match removed {
        Ok(true) => fixed.push((path, problem)),
        Ok(false) => {}
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => left.push((path, format!("{problem}; cannot remove it: {err}"))),
    }
}

/// Reads and checks an entry's header (not its payload).
fn read_header(path: &Path, file_len: u64) -> Result<EntryHeader, String> {
    use std::io::Read;
    let mut file = fs::File::open(path).map_err(|err| format!("cannot read: {err}"))?;
    let mut bytes = [0u8; HEADER_LEN];
    file.read_exact(&mut bytes).map_err(|_| format!("file of {file_len} bytes is shorter than a header"))?;
    EntryHeader::parse(&bytes, file_len).map_err(|problem| problem.to_string())
}
