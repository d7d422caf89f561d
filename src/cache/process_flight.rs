//! Single flight between processes: processes of one machine that miss the same program in the
//! same GPU folder at once compile it once. The first takes an advisory lock (`flock`) on a
//! per-key lock file beside the entry; the others wait for it (polling, within a budget), then
//! look on disk again, where the holder has published the entry.
//!
//! The lock file is `<gpu folder>/<shard>/.tmp-lock-<key hex>`: empty, private (0600), removed
//! by its holder when it is done (before unlocking). Its name starts with the temporary-file
//! prefix, so one left by a holder that died is removed by pruning once stale and by
//! `sparkle cache clear`; the next process that misses the key reuses it meanwhile.
//!
//! Robustness rather than exclusion is what matters here: two processes compiling the same
//! program is only wasted work, since entries are published atomically. So
//! - the kernel releases a `flock` when its holder dies, however it dies: a killed holder never
//!   blocks anyone;
//! - a waiter gives up after a budget (a few times the program's known compile time, or
//!   [`DEFAULT_WAIT`]) and compiles, so a holder that hangs costs that budget once;
//! - a waiter whose turn comes after the holder finished does not take the lock again: it looks
//!   on disk and, if the holder stored nothing (its compile failed, or the backend has no blobs),
//!   compiles without the lock, so failures are not compiled one process after another;
//! - a lock file that cannot be created or locked means compiling without it, never an error.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::CacheKey;

/// How long a process waits for another one's compile of a program whose compile time is not
/// known here (nor that of any program slower than this bound's quarter).
pub const DEFAULT_WAIT: Duration = Duration::from_secs(5);
/// A known compile time is multiplied by this to get the wait: a machine busy with several
/// processes starting at once compiles several times slower than the time recorded.
const WAIT_FACTOR: u32 = 4;
/// The shortest wait for a program whose compile time is known.
const MIN_WAIT: Duration = Duration::from_secs(2);
/// The longest wait, however slow the compile was.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// Polls come every 1/`POLL_FRACTION` of the time waited so far, within
/// [`FIRST_POLL`]..[`MAX_POLL`]: the holder's finish is seen within a few percent of the wait,
/// at a cost of at most a hundred failed `flock` calls a second per waiting key.
const POLL_FRACTION: u32 = 32;
const FIRST_POLL: Duration = Duration::from_millis(1);
const MAX_POLL: Duration = Duration::from_millis(10);

/// What a lock file's name starts with: the temporary files' prefix, so that pruning removes
/// those left by holders that died once they are stale.
pub const LOCK_PREFIX: &str = ".tmp-lock-";

/// The lock file of `key` in `gpu_dir`: in the entry's shard folder.
pub fn lock_path(gpu_dir: &Path, key: CacheKey) -> PathBuf {
    let hex = key.hex();
    gpu_dir.join(&hex[..2]).join(format!("{LOCK_PREFIX}{hex}"))
}

/// Whether a file name is a lock file's.
pub fn is_lock_name(name: &str) -> bool {
    name.starts_with(LOCK_PREFIX) && name[LOCK_PREFIX.len()..].len() == 32
}

/// How long to wait for another process's compile, from the compile times this process knows
/// (from the working set when it opened, and from its own compiles and loads since).
#[derive(Default)]
pub(crate) struct WaitBudgets {
    known: Mutex<HashMap<CacheKey, u64>>,
}

impl WaitBudgets {
    /// Budgets from the compile times earlier processes recorded.
    pub fn new(known: &[(CacheKey, u64)]) -> WaitBudgets {
        WaitBudgets { known: Mutex::new(known.iter().copied().collect()) }
    }

    /// Records what `key` cost to compile.
    pub fn record(&self, key: CacheKey, compile_ns: u64) {
        self.known.lock().unwrap_or_else(PoisonError::into_inner).insert(key, compile_ns);
    }

    /// The wait for `key`: [`WAIT_FACTOR`] times its compile time within
    /// [`MIN_WAIT`]..[`MAX_WAIT`]; for an unknown key, [`DEFAULT_WAIT`], or more when a known
    /// program is slow enough to need more.
    pub fn for_key(&self, key: CacheKey) -> Duration {
        let known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        let scaled = |ns: u64| Duration::from_nanos(ns).saturating_mul(WAIT_FACTOR);
        match known.get(&key) {
            Some(&ns) => scaled(ns).clamp(MIN_WAIT, MAX_WAIT),
            None => {
                let slowest = known.values().copied().max().map_or(Duration::ZERO, scaled);
                slowest.clamp(DEFAULT_WAIT, MAX_WAIT)
            }
        }
    }
}

/// How a process's turn at a key came.
pub(crate) enum Turn {
    /// This process holds the key's lock: it looks on disk once more, then compiles and
    /// publishes, and drops the lock. `Some(wait)` when it had to wait (for a holder that died).
    Held(ProcessLock, Option<Duration>),
    /// Another process held the lock and is done: its entry should be on disk. If it is not
    /// (its compile failed, or it stored nothing), compile without the lock.
    Finished(Duration),
    /// The holder did not finish within the budget: compile without the lock.
    GaveUp(Duration),
    /// No lock could be taken (see the debug log): compile without one.
    Unavailable,
}

/// An exclusive lock on a key's lock file. Dropping it removes the file, then unlocks.
pub(crate) struct ProcessLock {
    file: File,
    path: PathBuf,
}

impl Drop for ProcessLock {
    fn drop(&mut self) {
        // Removed while still locked, so that whoever opens the path next creates a new file
        // and waits on nothing; those that opened this one see, once they get the lock, that
        // it is no longer at the path, and know the holder finished.
        if same_file(&self.file, &self.path) {
            if let Err(err) = fs::remove_file(&self.path) {
                tracing::debug!(path = %self.path.display(), error = %err, "could not remove a lock file");
            }
        }
        // Closing the file unlocks it too, unless a child forked meanwhile still has it open
        // (until its exec closes it): unlock explicitly.
        // SAFETY: the descriptor is this `File`'s own and open until the `File` drops, after
        // this call; flock reads no memory of this process.
        unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Whether `path` is still the file `file` has open.
fn same_file(file: &File, path: &Path) -> bool {
    match (file.metadata(), fs::symlink_metadata(path)) {
        (Ok(open), Ok(at_path)) => open.dev() == at_path.dev() && open.ino() == at_path.ino(),
        _ => false,
    }
}

/// Tries to lock `file` exclusively without blocking: `Ok(false)` when another holds it.
fn try_lock(file: &File) -> io::Result<bool> {
    // SAFETY: the descriptor belongs to `file`, which outlives the call; flock only acts on
    // the open file description and reads no memory of this process.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EWOULDBLOCK) | Some(libc::EINTR) => Ok(false),
        _ => Err(err),
    }
}

/// Opens (creating it, 0600) the lock file at `path`; never through a link, never a FIFO's
/// blocking open.
fn open(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
}

/// Takes this process's turn at the lock file `path`: at once when nobody holds it, else after
/// its holder finishes or dies, or after `budget`. The shard folder must exist.
pub(crate) fn take_turn(path: &Path, budget: Duration) -> Turn {
    let file = match open(path) {
        Ok(file) if file.metadata().is_ok_and(|meta| meta.is_file()) => file,
        Ok(_) => {
            tracing::debug!(path = %path.display(), "the lock file is not a regular file; compiling without it");
            return Turn::Unavailable;
        }
        Err(err) => {
            tracing::debug!(path = %path.display(), error = %err, "cannot open a lock file; compiling without it");
            return Turn::Unavailable;
        }
    };
    let start = Instant::now();
    let mut span = None;
    loop {
        match try_lock(&file) {
            Ok(true) => break,
            Ok(false) => {}
            Err(err) => {
                tracing::debug!(path = %path.display(), error = %err, "cannot lock a lock file; compiling without it");
                return Turn::Unavailable;
            }
        }
        if span.is_none() {
            let mut wait = crate::trace::span("cache", "cache wait for another process");
            wait.arg_with("budget_ms", || budget.as_millis() as u64);
            span = Some(wait);
        }
        let waited = start.elapsed();
        if waited >= budget {
            tracing::debug!(
                path = %path.display(), waited_ms = waited.as_millis() as u64,
                "another process has been compiling this program for longer than the wait's budget; compiling \
                 it here too"
            );
            if let Some(span) = &mut span {
                span.arg("result", "gave up");
            }
            return Turn::GaveUp(waited);
        }
        let poll = (waited / POLL_FRACTION).clamp(FIRST_POLL, MAX_POLL);
        std::thread::sleep(poll.min(budget - waited));
    }
    let waited = span.is_some().then(|| start.elapsed());
    if same_file(&file, path) {
        if let Some(span) = &mut span {
            span.arg("result", "the holder died: compile here");
        }
        return Turn::Held(ProcessLock { file, path: path.to_path_buf() }, waited);
    }
    // The holder removed the file before unlocking it: it is done.
    if let Some(span) = &mut span {
        span.arg("result", "the holder finished");
    }
    Turn::Finished(waited.unwrap_or_else(|| start.elapsed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_files_are_temporary_files_to_the_store() {
        assert!(LOCK_PREFIX.starts_with(crate::cache::files::TEMP_PREFIX));
        assert!(is_lock_name(&format!("{LOCK_PREFIX}{}", CacheKey::from_u128(1).hex())));
        assert!(!is_lock_name(&format!("{LOCK_PREFIX}12")));
        assert!(!is_lock_name(&CacheKey::from_u128(1).hex()));
    }

    #[test]
    fn budgets_scale_the_known_compile_time_within_bounds() {
        let (fast, slow, huge, unknown) =
            (CacheKey::from_u128(1), CacheKey::from_u128(2), CacheKey::from_u128(3), CacheKey::from_u128(4));
        let budgets = WaitBudgets::new(&[(fast, 1_000_000), (slow, 3_000_000_000)]);
        assert_eq!(budgets.for_key(fast), MIN_WAIT);
        assert_eq!(budgets.for_key(slow), Duration::from_secs(12));
        assert_eq!(budgets.for_key(unknown), Duration::from_secs(12), "as slow as the slowest known");
        budgets.record(huge, 100_000_000_000);
        assert_eq!(budgets.for_key(huge), MAX_WAIT);
        assert_eq!(WaitBudgets::default().for_key(unknown), DEFAULT_WAIT);
    }

    #[test]
    fn a_free_lock_is_held_at_once_and_its_file_removed_after() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("{LOCK_PREFIX}{}", CacheKey::from_u128(7).hex()));
        assert!(is_lock_name(path.file_name().unwrap().to_str().unwrap()));
        let Turn::Held(lock, None) = take_turn(&path, Duration::from_secs(1)) else {
            panic!("not held at once")
        };
        assert!(path.exists());
        // Another open file description of the same file is refused while it is held.
        let other = open(&path).unwrap();
        assert!(!try_lock(&other).unwrap());
        drop(lock);
        assert!(!path.exists());
        // The waiter's turn comes: the file it has open is no longer at the path.
        assert!(try_lock(&other).unwrap());
        assert!(!same_file(&other, &path));
    }

    #[test]
    fn a_waiter_learns_that_the_holder_finished_and_gives_up_after_its_budget() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("{LOCK_PREFIX}{}", CacheKey::from_u128(8).hex()));
        let Turn::Held(lock, None) = take_turn(&path, Duration::from_secs(1)) else { panic!("not held") };
        match take_turn(&path, Duration::from_millis(30)) {
            Turn::GaveUp(waited) => assert!(waited >= Duration::from_millis(30)),
            _ => panic!("a held lock was not waited for"),
        }
        let waiter = std::thread::spawn({
            let path = path.clone();
            move || take_turn(&path, Duration::from_secs(60))
        });
        std::thread::sleep(Duration::from_millis(50));
        drop(lock);
        assert!(matches!(waiter.join().unwrap(), Turn::Finished(_)));
    }

    #[test]
    fn a_link_or_folder_at_the_path_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        fs::write(&target, b"").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(matches!(take_turn(&link, Duration::from_secs(1)), Turn::Unavailable));
        let folder = dir.path().join("folder");
        fs::create_dir(&folder).unwrap();
        assert!(matches!(take_turn(&folder, Duration::from_secs(1)), Turn::Unavailable));
    }
}
