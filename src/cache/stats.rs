//! `CacheStats`: the snapshot a cache reports (hits per tier, compiles, time spent and saved,
//! evictions, sizes), and the relaxed atomic counters it is gathered from.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use serde::{Serialize, Serializer};

/// What a [`ProgramCache`](super::ProgramCache) did since it was opened. Durations serialize as
/// seconds (f64).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CacheStats {
    /// Requests served from memory.
    pub memory_hits: u64,
    /// Requests that waited for another thread's load or compile of the same key.
    pub coalesced: u64,
    /// Requests served by loading a verified disk entry.
    pub disk_hits: u64,
    /// Requests that found no usable program in memory or on disk and compiled.
    pub misses: u64,
    /// Compiles started (successful or not).
    pub compiles: u64,
    /// Compiles that failed; nothing was cached for them.
    pub compile_errors: u64,
    /// Time spent compiling, as the backend measured it.
    #[serde(serialize_with = "secs")]
    pub compile_time: Duration,
    /// Compile time recorded with the programs served from disk or memory instead of compiling.
    #[serde(serialize_with = "secs")]
    pub compile_time_saved: Duration,
    /// Time spent on disk hits: reading, verifying and the backend's load.
    #[serde(serialize_with = "secs")]
    pub load_time: Duration,
    /// Disk entries that failed verification (removed, then compiled).
    pub disk_rejected: u64,
    /// Verified disk entries the backend refused to load (removed, then compiled).
    pub driver_refused: u64,
    /// Stored programs (disk or remote) whose interface did not match their request's kernel:
    /// refused, then compiled (see [`ProgramSource::check_loaded`](super::ProgramSource::check_loaded)).
    pub interface_refused: u64,
    /// Verified disk entries whose load failed for a reason that says nothing about the entry
    /// (out of memory, device lost): the entry was kept and the error returned to the caller.
    pub load_errors: u64,
    /// Disk entries written.
    pub disk_writes: u64,
    /// Disk misses that waited for another process of this machine loading or compiling the
    /// same program (its lock in the GPU folder): one per request, however long it waited. The
    /// request then counts as the disk hit or miss it became.
    pub process_waits: u64,
    /// Of those, the waits that ran out of budget (the program was compiled here too).
    pub process_waits_gave_up: u64,
    /// The time those waits took, in total (seconds in JSON).
    #[serde(serialize_with = "secs")]
    pub process_wait_time: Duration,
    /// Programs this process built again from another driver's recipes (after a driver update).
    pub rebuilt: u64,
    /// Programs dropped from memory to stay within its bounds.
    pub evictions: u64,
    /// Programs in the memory tier now.
    pub memory_entries: u64,
    /// Their blobs' bytes.
    pub memory_bytes: u64,
    /// This user's entries and bytes in the whole cache folder: counted (reading only) at the
    /// first `stats()` call, or when this process first published or last pruned, plus what it
    /// wrote since.
    pub disk_entries: u64,
    /// The bytes of those entries.
    pub disk_bytes: u64,
    /// The remote tier's URL (without its password), when one is configured and usable.
    pub remote: Option<String>,
    /// Why the configured remote tier is not used, when it is not (reported once on stderr too).
    pub remote_problem: Option<String>,
    /// Requests served by a verified remote entry that the backend loaded.
    pub remote_hits: u64,
    /// Remote lookups that found nothing.
    pub remote_misses: u64,
    /// Remote entries refused: failed verification or signature, or refused by the driver.
    pub remote_rejected: u64,
    /// Remote lookups that ran past their budget, so the program was compiled meanwhile (a
    /// hedge): the compile and the lookup raced, and the first to finish was used.
    pub remote_hedged: u64,
    /// Hedges the remote won: its entry came while the compile ran, and the compile was
    /// dropped (counted in `remote_hits` too).
    pub remote_hedges_won: u64,
    /// Remote lookups that failed (connection, server errors).
    pub remote_errors: u64,
    /// Remote lookups not made: the breaker was open, or the key was refused before.
    pub remote_skipped: u64,
    /// Entries this process published to the remote; already there (another machine was
    /// first); failed.
    pub remote_publishes: u64,
    /// Publishes that found the entry on the remote already.
    pub remote_publish_existing: u64,
    /// Publishes that failed.
    pub remote_publish_errors: u64,
    /// Remote objects that did not verify here (unsigned, signed by a key no longer trusted,
    /// damaged), replaced by this process's publish of the same program.
    pub remote_replaced: u64,
    /// Remote lookups made, and the time they took (the waiting part).
    pub remote_lookups: u64,
    /// The time those lookups waited, in total (seconds in JSON).
    #[serde(serialize_with = "secs")]
    pub remote_lookup_time: Duration,
    /// Misses that waited for another machine compiling the same program (its compile lease).
    pub remote_waits: u64,
}

fn secs<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl fmt::Display for CacheStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let requests = self.memory_hits + self.coalesced + self.disk_hits + self.remote_hits + self.misses;
        let pct = |n: u64| if requests == 0 { 0.0 } else { 100.0 * n as f64 / requests as f64 };
        let rows: [(&str, String); 16] = [
            ("requests", requests.to_string()),
            ("memory hits", format!("{} ({:.1}%)", self.memory_hits, pct(self.memory_hits))),
            ("waited on another thread", format!("{} ({:.1}%)", self.coalesced, pct(self.coalesced))),
            ("disk hits", format!("{} ({:.1}%)", self.disk_hits, pct(self.disk_hits))),
            ("misses", format!("{} ({:.1}%)", self.misses, pct(self.misses))),
            ("compiles", format!("{} ({} failed)", self.compiles, self.compile_errors)),
            ("compile time", format!("{:.3} s", self.compile_time.as_secs_f64())),
            ("compile time saved", format!("{:.3} s", self.compile_time_saved.as_secs_f64())),
            ("disk load time", format!("{:.3} s", self.load_time.as_secs_f64())),
            (
                "disk entries rejected",
                format!(
                    "{} corrupt, {} refused by the driver, {} not matching their kernel",
                    self.disk_rejected, self.driver_refused, self.interface_refused
                ),
            ),
            ("disk load errors (kept)", self.load_errors.to_string()),
            ("disk writes", self.disk_writes.to_string()),
            (
                "waited on another process",
                format!(
                    "{} ({:.3} s, {} gave up)",
                    self.process_waits,
                    self.process_wait_time.as_secs_f64(),
                    self.process_waits_gave_up
                ),
            ),
            ("evictions", self.evictions.to_string()),
            ("in memory", format!("{} programs, {}", self.memory_entries, human_bytes(self.memory_bytes))),
            ("on disk", format!("{} entries, {}", self.disk_entries, human_bytes(self.disk_bytes))),
        ];
        for (name, value) in rows {
            writeln!(f, "{name:<26} {value}")?;
        }
        if self.rebuilt > 0 {
            writeln!(f, "{:<26} {}", "rebuilt (driver update)", self.rebuilt)?;
        }
        if let Some(problem) = &self.remote_problem {
            writeln!(f, "{:<26} not used: {problem}", "remote")?;
        }
        if let Some(url) = &self.remote {
            let mean_ms = if self.remote_lookups == 0 {
                0.0
            } else {
                self.remote_lookup_time.as_secs_f64() * 1e3 / self.remote_lookups as f64
            };
            let remote_rows: [(&str, String); 5] = [
                ("remote", url.clone()),
                (
                    "remote hits",
                    format!(
                        "{} ({} misses, {} rejected)",
                        self.remote_hits, self.remote_misses, self.remote_rejected
                    ),
                ),
                (
                    "remote lookups",
                    format!(
                        "{} ({mean_ms:.2} ms mean; {} hedged, {} of them won by the remote; {} errors, {} skipped, {} waited for another machine)",
                        self.remote_lookups,
                        self.remote_hedged,
                        self.remote_hedges_won,
                        self.remote_errors,
                        self.remote_skipped,
                        self.remote_waits
                    ),
                ),
                (
                    "remote publishes",
                    format!(
                        "{} ({} already there, {} replacing objects that do not verify, {} failed)",
                        self.remote_publishes,
                        self.remote_publish_existing,
                        self.remote_replaced,
                        self.remote_publish_errors
                    ),
                ),
                ("requests served remotely", format!("{} ({:.1}%)", self.remote_hits, pct(self.remote_hits))),
            ];
            for (name, value) in remote_rows {
                writeln!(f, "{name:<26} {value}")?;
            }
        }
        Ok(())
    }
}

/// `1536` → `1.5 KiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The counters behind [`CacheStats`] that are not kept per memory shard.
#[derive(Default)]
pub(crate) struct Counters {
    pub coalesced: AtomicU64,
    pub disk_hits: AtomicU64,
    pub misses: AtomicU64,
    pub compiles: AtomicU64,
    pub compile_errors: AtomicU64,
    pub compile_ns: AtomicU64,
    pub saved_ns: AtomicU64,
    pub load_ns: AtomicU64,
    pub disk_rejected: AtomicU64,
    pub driver_refused: AtomicU64,
    pub interface_refused: AtomicU64,
    pub load_errors: AtomicU64,
    pub disk_writes: AtomicU64,
    pub process_waits: AtomicU64,
    pub process_waits_gave_up: AtomicU64,
    pub process_wait_ns: AtomicU64,
    pub rebuilt: AtomicU64,
}

pub(crate) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Relaxed);
}

pub(crate) fn add_duration(counter: &AtomicU64, d: Duration) {
    counter.fetch_add(duration_ns(d), Relaxed);
}

pub(crate) fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Counters {
    /// Fills the fields these counters own.
    pub fn fill(&self, stats: &mut CacheStats) {
        let get = |c: &AtomicU64| c.load(Relaxed);
        stats.coalesced = get(&self.coalesced);
        stats.disk_hits = get(&self.disk_hits);
        stats.misses = get(&self.misses);
        stats.compiles = get(&self.compiles);
        stats.compile_errors = get(&self.compile_errors);
        stats.compile_time = Duration::from_nanos(get(&self.compile_ns));
        stats.compile_time_saved += Duration::from_nanos(get(&self.saved_ns));
        stats.load_time = Duration::from_nanos(get(&self.load_ns));
        stats.disk_rejected = get(&self.disk_rejected);
        stats.driver_refused = get(&self.driver_refused);
        stats.interface_refused = get(&self.interface_refused);
        stats.load_errors = get(&self.load_errors);
        stats.disk_writes = get(&self.disk_writes);
        stats.process_waits = get(&self.process_waits);
        stats.process_waits_gave_up = get(&self.process_waits_gave_up);
        stats.process_wait_time = Duration::from_nanos(get(&self.process_wait_ns));
        stats.rebuilt = get(&self.rebuilt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_durations_as_seconds() {
        let stats =
            CacheStats { memory_hits: 3, compile_time: Duration::from_millis(1500), ..CacheStats::default() };
        let json: serde_json::Value = serde_json::to_value(&stats).unwrap();
        assert_eq!(json["memory_hits"], 3);
        assert_eq!(json["compile_time"], 1.5);
        assert_eq!(json["compile_time_saved"], 0.0);
        let text = stats.to_string();
        assert!(text.contains("memory hits") && text.contains("1.500 s"), "{text}");
    }

    #[test]
    fn human_bytes_picks_a_unit() {
        assert_eq!(human_bytes(12), "12 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    }
}
