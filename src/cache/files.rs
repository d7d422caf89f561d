//! File operations on entries that must hold up with several processes sharing one cache folder:
//! reading and verifying an entry, publishing one atomically, removing one only if it is still
//! the file that was judged, private folders, and the owner check.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, SystemTime};

use super::entry::{EntryHeader, Expect, Problem, HEADER_LEN};
use super::{Blob, CacheKey};

/// Prefix of files that are not entries yet (being written) or any more (being removed).
pub const TEMP_PREFIX: &str = ".tmp-";

/// Temporary files older than this belong to a process that died; pruning removes them.
pub const STALE_TEMP_AGE: Duration = Duration::from_secs(3600);

/// The effective user id, which must own every entry that is loaded.
pub fn current_uid() -> u32 {
    // SAFETY: geteuid takes no arguments, cannot fail and touches no memory of this process.
    unsafe { libc::geteuid() }
}

/// Which file a path named when it was judged: a rename in between gives a different inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileIdentity {
    dev: u64,
    ino: u64,
}

impl FileIdentity {
    pub fn of(meta: &fs::Metadata) -> Self {
        Self { dev: meta.dev(), ino: meta.ino() }
    }
}

/// `<gpu dir>/<first 2 hex>/<32 hex>`.
pub fn entry_path(gpu_dir: &Path, key: CacheKey) -> PathBuf {
    let hex = key.hex();
    gpu_dir.join(&hex[..2]).join(hex)
}

/// Creates `dir` and its missing parents, private to the user (0700).
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Whether `err`, met while reading or writing one entry, concerns only that entry's path
/// (something else sits there: a folder, a file where a folder belongs, a link) rather than the
/// whole folder. Such a failure skips the entry; any other one stops the disk tier.
/// (tempfile wraps errors with their path: the kind survives, the errno does not.)
pub fn is_per_entry_error(err: &io::Error) -> bool {
    use io::ErrorKind::{AlreadyExists, DirectoryNotEmpty, IsADirectory, NotADirectory};
    matches!(
        err.raw_os_error(),
        Some(libc::EISDIR | libc::ENOTDIR | libc::EEXIST | libc::ELOOP | libc::ENOTEMPTY)
    ) || matches!(err.kind(), IsADirectory | NotADirectory | AlreadyExists | DirectoryNotEmpty)
}

/// Whether `err` says the folder may be read but not written (read-only mount, permissions).
pub fn is_write_refused(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::EROFS | libc::EACCES | libc::EPERM))
        || matches!(err.kind(), io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem)
}

/// Whether `path` resolves (links followed) to a place inside `canonical_root`, which must be
/// canonical itself. Temporary folders are often reached through links (`/tmp` → `/private/tmp`),
/// so only canonical paths are compared.
pub fn resolves_inside(path: &Path, canonical_root: &Path) -> io::Result<bool> {
    Ok(fs::canonicalize(path)?.starts_with(canonical_root))
}

/// What a file type is, in words, for messages about things found where an entry belongs.
pub fn describe_type(file_type: fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_dir() {
        "a folder"
    } else if file_type.is_symlink() {
        "a symbolic link"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_block_device() || file_type.is_char_device() {
        "a device node"
    } else {
        "a regular file"
    }
}

/// Removes whatever sits at `path` without following it: a folder with its contents (links
/// inside it are removed as links), a link as a link (never its target), any other file.
pub fn remove_without_following(path: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(path)?;
    if meta.file_type().is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    }
}

/// A verified entry, ready for the backend.
#[derive(Debug)]
pub struct Verified {
    pub header: EntryHeader,
    pub blob: Blob,
    pub identity: FileIdentity,
    pub mtime: SystemTime,
    file: File,
}

impl Verified {
    /// Records a use in the file's mtime if the last one is older than `interval`. The header's
    /// own stamp is never rewritten: changing it in place could show a reader a torn header, and
    /// republishing the whole entry costs a full write for a hint.
    pub fn touch(&self, interval: Duration) {
        let now = SystemTime::now();
        if now.duration_since(self.mtime).is_ok_and(|age| age >= interval) {
            if let Err(err) = self.file.set_modified(now) {
                tracing::debug!(error = %err, "could not record the use of a cache entry");
            }
        }
    }
}

/// What reading an entry found.
#[derive(Debug)]
pub enum ReadOutcome {
    Missing,
    /// Owned by another user: not read, not removed.
    Foreign {
        uid: u32,
    },
    /// Something other than a regular file sits at the entry's path (a folder, a link, a FIFO…);
    /// the words say what.
    NotAFile(&'static str),
    /// Failed verification; `identity` names the file judged, for [`remove_if_same`].
    Rejected {
        problem: Problem,
        identity: FileIdentity,
    },
    Found(Verified),
}

/// Opens and fully verifies the entry at `path` against `expect`; the payload is only returned
/// when every check passed.
pub fn read_entry(path: &Path, expect: &Expect) -> io::Result<ReadOutcome> {
    read_entry_with(path, |_| Some(*expect))
}

/// Like [`read_entry`], with the expectation derived from the header (for maintenance commands
/// that only know what the folder names say).
pub fn read_entry_with(
    path: &Path,
    expect: impl FnOnce(&EntryHeader) -> Option<Expect>,
) -> io::Result<ReadOutcome> {
    // O_NOFOLLOW: an entry is a regular file, never a link to one elsewhere. O_NONBLOCK: a FIFO
    // planted at an entry's path must not hang the open.
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        // ENOTDIR: a folder on the way was replaced by a file; the write path reports that.
        Err(err) if err.kind() == io::ErrorKind::NotFound || err.raw_os_error() == Some(libc::ENOTDIR) => {
            return Ok(ReadOutcome::Missing)
        }
        Err(err) if err.raw_os_error() == Some(libc::ELOOP) => {
            return Ok(ReadOutcome::NotAFile("a symbolic link"))
        }
        Err(err) if err.raw_os_error() == Some(libc::ENXIO) => return Ok(ReadOutcome::NotAFile("a socket")),
        Err(err) => return Err(err),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Ok(ReadOutcome::NotAFile(describe_type(meta.file_type())));
    }
    if meta.uid() != current_uid() {
        return Ok(ReadOutcome::Foreign { uid: meta.uid() });
    }
    let identity = FileIdentity::of(&meta);
    let rejected = |problem| Ok(ReadOutcome::Rejected { problem, identity });
    let len = meta.len();
    if len < HEADER_LEN as u64 {
        return rejected(Problem::Truncated { len });
    }
    let mut reader = &file;
    let mut header_bytes = [0u8; HEADER_LEN];
    if let Err(err) = reader.read_exact(&mut header_bytes) {
        return match err.kind() {
            io::ErrorKind::UnexpectedEof => rejected(Problem::Truncated { len }),
            _ => Err(err),
        };
    }
    let header = match EntryHeader::parse(&header_bytes, len) {
        Ok(header) => header,
        Err(problem) => return rejected(problem),
    };
    let Some(expect) = expect(&header) else {
        return rejected(Problem::BadMagic);
    };
    if let Err(problem) = header.check_identity(&expect) {
        return rejected(problem);
    }
    // The length was checked against the file's size, so this allocation is bounded by it.
    let payload_len = usize::try_from(header.payload_len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "entry too large for this host"))?;
    let mut payload = vec![0u8; payload_len];
    if let Err(err) = reader.read_exact(&mut payload) {
        return match err.kind() {
            io::ErrorKind::UnexpectedEof => rejected(Problem::Truncated { len }),
            _ => Err(err),
        };
    }
    if let Err(problem) = header.check_payload(&payload) {
        return rejected(problem);
    }
    let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    let blob = Blob { format: header.blob_format, bytes: payload };
    Ok(ReadOutcome::Found(Verified { header, blob, identity, mtime, file }))
}

/// An errno every entry write fails with while non-zero: how tests reproduce a full disk or an
/// I/O error where no small filesystem can be mounted. Process-wide.
static INJECTED_WRITE_ERRNO: AtomicI32 = AtomicI32::new(0);

/// Makes every later entry write fail with `errno` (after its temporary file was created, as a
/// full disk does), or stops doing so with `None`. For tests only.
#[doc(hidden)]
pub fn inject_write_error(errno: Option<i32>) {
    INJECTED_WRITE_ERRNO.store(errno.unwrap_or(0), Relaxed);
}

/// Writes `header` + `payload` to a uniquely named temporary file next to `path`, then renames
/// it over `path`: readers see the old entry, the new one, or nothing — never a part. Returns the
/// size of the file written.
///
/// No fsync: after a crash a torn file fails verification and is removed, which costs one
/// compile, while an fsync per entry would cost every run.
pub fn publish(path: &Path, header: &EntryHeader, payload: &[u8]) -> io::Result<u64> {
    let dir = path.parent().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "entry path"))?;
    // tempfile creates the file 0600 with O_EXCL under a random name.
    let mut temp = tempfile::Builder::new().prefix(TEMP_PREFIX).tempfile_in(dir)?;
    let mut bytes = Vec::with_capacity(HEADER_LEN + payload.len());
    bytes.extend_from_slice(&header.to_bytes());
    bytes.extend_from_slice(payload);
    let injected = INJECTED_WRITE_ERRNO.load(Relaxed);
    if injected != 0 {
        return Err(io::Error::from_raw_os_error(injected));
    }
    temp.as_file_mut().write_all(&bytes)?;
    temp.persist(path).map_err(|err| err.error)?;
    Ok(bytes.len() as u64)
}

/// Writes a small file atomically (temp file + rename), unless it already holds `contents`.
pub fn write_if_changed(path: &Path, contents: &[u8]) -> io::Result<()> {
    if fs::read(path).is_ok_and(|current| current == contents) {
        return Ok(());
    }
    let dir = path.parent().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "file path"))?;
    let mut temp = tempfile::Builder::new().prefix(TEMP_PREFIX).tempfile_in(dir)?;
    temp.as_file_mut().write_all(contents)?;
    temp.persist(path).map_err(|err| err.error)?;
    Ok(())
}

/// Removes the entry at `path` if it is still the file `identity` names, and reports whether it
/// did; a folder (at an entry's path) goes with its contents, without following links. The entry is first renamed aside, so that an entry another process publishes at the same
/// path in the meantime is never the one unlinked: if the file taken aside turns out to be a
/// different one, it is put back.
pub fn remove_if_same(path: &Path, identity: FileIdentity) -> io::Result<bool> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "entry path"))?;
    let aside = dir.join(format!("{TEMP_PREFIX}rm-{}-{}", std::process::id(), COUNTER.fetch_add(1, Relaxed)));
    match fs::rename(path, &aside) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(err) => return Err(err),
    }
    let taken = fs::symlink_metadata(&aside)?;
    if FileIdentity::of(&taken) == identity {
        remove_without_following(&aside)?;
        Ok(true)
    } else {
        // Another process published a fresh entry in between; whichever entry ends up at `path`
        // is whole and valid.
        fs::rename(&aside, path)?;
        Ok(false)
    }
}
