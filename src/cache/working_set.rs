//! The working set of one GPU folder: which programs processes on this machine used, in order
//! of first use, with what each cost to compile. `sparkle cache pull --working-set` prefetches
//! them in that order, and the remote tier budgets a lookup by a program's compile time.
//!
//! A text file, `<gpu folder>/working-set`, one `<key hex> <compile ns>` line per program,
//! appended with one `write` per line (atomic for such short lines with `O_APPEND`, so several
//! processes can share it). Unknown or damaged lines are skipped: it is a hint, never trusted
//! for anything but order and budgets.

use std::collections::HashSet;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::CacheKey;

/// The working set's file name in a GPU folder.
pub const WORKING_SET_FILE: &str = "working-set";
/// Past this many lines nothing more is recorded: a working set is a few thousand programs.
const MAX_LINES: usize = 100_000;

/// Parses a working set's text: keys in first-use order (each once) with their compile times.
pub fn parse(text: &str) -> Vec<(CacheKey, u64)> {
    let mut seen = HashSet::new();
    text.lines()
        .filter_map(|line| {
            let (key, ns) = line.split_once(' ')?;
            Some((CacheKey::from_hex(key)?, ns.trim().parse().ok()?))
        })
        .filter(|(key, _)| seen.insert(*key))
        .collect()
}

/// Reads the working set file in `gpu_dir` (empty when missing or unreadable).
pub fn read(gpu_dir: &Path) -> Vec<(CacheKey, u64)> {
    fs::read_to_string(gpu_dir.join(WORKING_SET_FILE)).map(|text| parse(&text)).unwrap_or_default()
}

/// The working set of one GPU folder, as this process records it.
pub(crate) struct WorkingSet {
    path: PathBuf,
    recorded: Mutex<HashSet<CacheKey>>,
}

impl WorkingSet {
    /// Opens the working set in `gpu_dir`; returns it with what earlier processes recorded.
    pub fn open(gpu_dir: &Path) -> (WorkingSet, Vec<(CacheKey, u64)>) {
        let known = read(gpu_dir);
        let recorded = known.iter().map(|(key, _)| *key).collect();
        (WorkingSet { path: gpu_dir.join(WORKING_SET_FILE), recorded: Mutex::new(recorded) }, known)
    }

    /// Records the first use of `key` on this machine; later uses cost a set lookup.
    pub fn record(&self, key: CacheKey, compile_ns: u64) {
        let mut recorded = self.recorded.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if recorded.len() >= MAX_LINES || !recorded.insert(key) {
            return;
        }
        drop(recorded);
        let line = format!("{} {compile_ns}\n", key.hex());
        let written = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&self.path)
            .and_then(|mut file| file.write_all(line.as_bytes()));
        if let Err(err) = written {
            tracing::debug!(path = %self.path.display(), error = %err, "could not record a program in the working set");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_once_in_first_use_order_and_survives_damage() {
        let dir = tempfile::tempdir().unwrap();
        let (set, known) = WorkingSet::open(dir.path());
        assert!(known.is_empty());
        let (a, b) = (CacheKey::from_u128(0xa), CacheKey::from_u128(0xb));
        set.record(b, 5);
        set.record(a, 7);
        set.record(b, 9);
        fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join(WORKING_SET_FILE))
            .unwrap()
            .write_all(b"junk\nzz 1\n")
            .unwrap();
        let (_, known) = WorkingSet::open(dir.path());
        assert_eq!(known, vec![(b, 5), (a, 7)]);
    }
}
