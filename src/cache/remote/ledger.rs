//! The remote ledger of a GPU folder: what the fleet tier did in past processes on this machine
//! (hits, misses, rejected, hedged, errors, lookup time, publishes), so that `sparkle cache
//! stats`, which opens no GPU and no remote, can report it.
//!
//! A text file, `<gpu folder>/remote-stats`, one JSON object per process appended with one
//! `write` (`O_APPEND`), folded into a single line once it grows past [`FOLD_AT`]. Damaged lines
//! are skipped: it is a report, never an input to anything.

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The ledger's file name in a GPU folder.
pub const REMOTE_STATS_FILE: &str = "remote-stats";
/// Past this size the file is folded into one line.
#[cfg(feature = "remote")]
const FOLD_AT: u64 = 64 << 10;

/// The fleet tier's counters, summed over processes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteLedger {
    /// Processes whose counters are in the sum.
    pub processes: u64,
    /// As [`CacheStats::remote_hits`](crate::cache::CacheStats::remote_hits).
    pub hits: u64,
    /// As [`CacheStats::remote_misses`](crate::cache::CacheStats::remote_misses).
    pub misses: u64,
    /// As [`CacheStats::remote_rejected`](crate::cache::CacheStats::remote_rejected).
    pub rejected: u64,
    /// As [`CacheStats::remote_hedged`](crate::cache::CacheStats::remote_hedged).
    pub hedged: u64,
    /// As [`CacheStats::remote_hedges_won`](crate::cache::CacheStats::remote_hedges_won) (older
    /// ledgers lack it).
    #[serde(default)]
    pub hedges_won: u64,
    /// As [`CacheStats::remote_errors`](crate::cache::CacheStats::remote_errors).
    pub errors: u64,
    /// As [`CacheStats::remote_skipped`](crate::cache::CacheStats::remote_skipped).
    pub skipped: u64,
    /// As [`CacheStats::remote_waits`](crate::cache::CacheStats::remote_waits).
    pub waits: u64,
    /// As [`CacheStats::remote_publishes`](crate::cache::CacheStats::remote_publishes).
    pub publishes: u64,
    /// As [`CacheStats::remote_publish_existing`](crate::cache::CacheStats::remote_publish_existing).
    pub publish_existing: u64,
    /// As [`CacheStats::remote_publish_errors`](crate::cache::CacheStats::remote_publish_errors).
    pub publish_errors: u64,
    /// As [`CacheStats::remote_replaced`](crate::cache::CacheStats::remote_replaced) (older
    /// ledgers lack it).
    #[serde(default)]
    pub replaced: u64,
    /// As [`CacheStats::remote_lookups`](crate::cache::CacheStats::remote_lookups).
    pub lookups: u64,
    /// Time the lookups waited, in nanoseconds.
    pub lookup_ns: u64,
}

impl RemoteLedger {
    fn add(&mut self, other: &RemoteLedger) {
        let fields = [
            (&mut self.processes, other.processes),
            (&mut self.hits, other.hits),
            (&mut self.misses, other.misses),
            (&mut self.rejected, other.rejected),
            (&mut self.hedged, other.hedged),
            (&mut self.hedges_won, other.hedges_won),
            (&mut self.errors, other.errors),
            (&mut self.skipped, other.skipped),
            (&mut self.waits, other.waits),
            (&mut self.publishes, other.publishes),
            (&mut self.publish_existing, other.publish_existing),
            (&mut self.publish_errors, other.publish_errors),
            (&mut self.replaced, other.replaced),
            (&mut self.lookups, other.lookups),
            (&mut self.lookup_ns, other.lookup_ns),
        ];
        for (sum, value) in fields {
            *sum = sum.saturating_add(value);
        }
    }

    /// Whether anything happened.
    pub fn is_empty(&self) -> bool {
        self.lookups == 0
            && self.hedged == 0
            && self.skipped == 0
            && self.publishes == 0
            && self.publish_errors == 0
    }

    /// The mean time a lookup waited, in milliseconds.
    pub fn mean_lookup_ms(&self) -> f64 {
        if self.lookups == 0 {
            0.0
        } else {
            self.lookup_ns as f64 / 1e6 / self.lookups as f64
        }
    }
}

/// The sum of the ledger in `gpu_dir`; `None` when there is none.
pub fn read(gpu_dir: &Path) -> Option<RemoteLedger> {
    let text = fs::read_to_string(gpu_dir.join(REMOTE_STATS_FILE)).ok()?;
    let mut sum = RemoteLedger::default();
    for line in text.lines() {
        if let Ok(entry) = serde_json::from_str::<RemoteLedger>(line) {
            sum.add(&entry);
        }
    }
    Some(sum)
}

/// Writing the ledger: only processes with a remote tier do.
#[cfg(feature = "remote")]
mod writer {
    use std::fs::{self, OpenOptions};
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::Path;

    use super::{read, RemoteLedger, FOLD_AT, REMOTE_STATS_FILE};

    /// Appends one process's counters to the ledger in `gpu_dir`; folds the file when it is large.
    pub(crate) fn append(gpu_dir: &Path, entry: &RemoteLedger) {
        let path = gpu_dir.join(REMOTE_STATS_FILE);
        let Ok(mut line) = serde_json::to_string(entry) else { return };
        line.push('\n');
        let written = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .and_then(|mut file| file.write_all(line.as_bytes()));
        if let Err(err) = written {
            tracing::debug!(path = %path.display(), error = %err, "could not record the remote statistics");
            return;
        }
        if fs::metadata(&path).is_ok_and(|meta| meta.len() > FOLD_AT) {
            if let Some(sum) = read(gpu_dir) {
                let folded = serde_json::to_string(&sum).map(|text| text + "\n").unwrap_or_default();
                // Another process may append between the read and the rename: its line is lost from
                // a report, which is acceptable; the file is never torn.
                if let Err(err) = crate::cache::files::write_if_changed(&path, folded.as_bytes()) {
                    tracing::debug!(path = %path.display(), error = %err, "could not fold the remote statistics");
                }
            }
        }
    }
}
#[cfg(feature = "remote")]
pub(crate) use writer::append;

#[cfg(all(test, feature = "remote"))]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn sums_processes_skips_damage_and_folds() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), None);
        let one =
            RemoteLedger { processes: 1, hits: 2, lookups: 3, lookup_ns: 3_000_000, ..Default::default() };
        append(dir.path(), &one);
        fs::OpenOptions::new()
            .append(true)
            .open(dir.path().join(REMOTE_STATS_FILE))
            .unwrap()
            .write_all(b"junk\n")
            .unwrap();
        append(dir.path(), &one);
        let sum = read(dir.path()).unwrap();
        assert_eq!((sum.processes, sum.hits, sum.lookups), (2, 4, 6));
        assert!((sum.mean_lookup_ms() - 1.0).abs() < 1e-9);
        for _ in 0..2000 {
            append(dir.path(), &one);
        }
        assert!(fs::metadata(dir.path().join(REMOTE_STATS_FILE)).unwrap().len() <= FOLD_AT + 4096);
        assert_eq!(read(dir.path()).unwrap().processes, 2002);
    }
}
