//! Fault injection on the persisted programs of any backend: the damaged versions of a genuine
//! entry a test writes in its place (flips, truncations, extensions, zeroed, swapped, re-sealed
//! for another GPU, backend or format version), and the runner that warms a cache of suite
//! kernels through a `Runtime` opener and checks that each damaged entry is rejected by
//! verification before the backend's load, compiled again, and computes the right result.
//! Included with `#[path]` by the per-backend fault tests (`reliability`), by the gl tests of the
//! cache (`gl::cache`), and by the tests of the command and the lab that look at cache entries.

#![allow(dead_code)]

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sparkle::cache::{EntryHeader, HEADER_LEN};
use sparkle::suite::{self, Case};
use sparkle::Runtime;

/// Opens a runtime of the backend under test on the cache folder `dir`.
pub type Opener = dyn Fn(&Path) -> Runtime;

/// The entry files (`<2 hex>/<32 hex>`) under `dir`, sorted.
pub fn entry_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                stack.push(path);
            } else if name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn sealed(mut header: EntryHeader, payload: &[u8]) -> Vec<u8> {
    let unsealed = bytemuck::bytes_of(&header).to_vec();
    header.header_xxh3 = xxhash_rust::xxh3::xxh3_64(&unsealed[..HEADER_LEN - 8]);
    let mut out = bytemuck::bytes_of(&header).to_vec();
    out.extend_from_slice(payload);
    out
}

/// Re-seals a header after editing it, as a writer of that other GPU or format would have.
pub fn resealed(bytes: &[u8], edit: impl FnOnce(&mut EntryHeader)) -> Vec<u8> {
    let mut header: EntryHeader = bytemuck::pod_read_unaligned(&bytes[..HEADER_LEN]);
    edit(&mut header);
    sealed(header, &bytes[HEADER_LEN..])
}

/// The entry `bytes` with its payload replaced by `payload` and every checksum and length made
/// to match: an entry verification accepts, whose contents only the backend can judge.
pub fn with_payload(bytes: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut header: EntryHeader = bytemuck::pod_read_unaligned(&bytes[..HEADER_LEN]);
    header.payload_len = payload.len() as u64;
    header.payload_xxh3 = xxhash_rust::xxh3::xxh3_64(payload);
    sealed(header, payload)
}

/// The payload of an entry.
pub fn payload(bytes: &[u8]) -> &[u8] {
    &bytes[HEADER_LEN..]
}

/// Every damaged version of `good` a test writes at the entry's path; `other` is another
/// kernel's whole entry.
pub fn mutations(good: &[u8], other: &[u8], payload_samples: usize) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for offset in 0..HEADER_LEN {
        let mut bad = good.to_vec();
        bad[offset] ^= 1 << (offset % 8);
        out.push((format!("header byte {offset}"), bad));
    }
    let payload_len = good.len() - HEADER_LEN;
    let stride = (payload_len / payload_samples).max(1);
    for offset in (HEADER_LEN..good.len()).step_by(stride).chain([good.len() - 1]) {
        let mut bad = good.to_vec();
        bad[offset] ^= 0x80 >> (offset % 8);
        out.push((format!("payload byte {offset}"), bad));
    }
    for len in
        [0, 1, HEADER_LEN - 1, HEADER_LEN, HEADER_LEN + 1, HEADER_LEN + payload_len / 2, good.len() - 1]
    {
        out.push((format!("truncated to {len}"), good[..len].to_vec()));
    }
    let mut longer = good.to_vec();
    longer.push(0);
    out.push(("one byte appended".into(), longer));
    let mut doubled = good.to_vec();
    doubled.extend_from_slice(&good[HEADER_LEN..]);
    out.push(("payload appended again".into(), doubled));
    out.push(("zeroed".into(), vec![0; good.len()]));
    out.push(("another kernel's entry".into(), other.to_vec()));
    out.push(("another GPU's entry".into(), resealed(good, |h| h.gpu_hash ^= 1)));
    out.push(("another backend's entry".into(), resealed(good, |h| h.backend ^= 1)));
    out.push(("a future format version".into(), resealed(good, |h| h.version += 1)));
    out.push(("a non-zero reserved field".into(), resealed(good, |h| h.reserved = 1)));
    out
}

/// What the damage runs found.
#[derive(Debug, Default)]
pub struct Tally {
    pub cases: usize,
    pub kernels: usize,
    pub rejected: u64,
    pub driver_refused: u64,
    pub recompiled: u64,
    /// The whole run, warming the cache included.
    pub elapsed: Duration,
}

/// The counts in one line, printed by the tests (`-- --nocapture`).
impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} damaged entries over {} kernels, {} rejected by verification, {} refused by the backend, {} \
             recompiled, all results correct ({:.1} s)",
            self.cases,
            self.kernels,
            self.rejected,
            self.driver_refused,
            self.recompiled,
            self.elapsed.as_secs_f64()
        )
    }
}

/// Runs `case`'s portable spec (one program per kernel on every backend) on a runtime opened on
/// `dir`; the result must be right. Returns the runtime for its statistics.
pub fn run_case(dir: &Path, open: &Opener, case: &dyn Case, what: &str) -> Runtime {
    let runtime = open(dir);
    let spec = case.spec();
    let program = runtime.program(&spec).unwrap_or_else(|e| panic!("{} with {what}: {e}", case.describe()));
    let verdict = suite::run_and_verify(&runtime, &program, case)
        .unwrap_or_else(|e| panic!("{} with {what}: {e}", case.describe()));
    assert!(verdict.passed(), "{} with {what}: {verdict}", case.describe());
    drop(program);
    runtime
}

/// Warms the cache in `dir` with one entry per case; returns each case's entry path.
pub fn warm(dir: &Path, open: &Opener, cases: &[Box<dyn Case>]) -> Vec<PathBuf> {
    let mut entries = Vec::new();
    for case in cases {
        let before = entry_files(dir);
        run_case(dir, open, case.as_ref(), "a cold cache");
        let added: Vec<_> = entry_files(dir).into_iter().filter(|p| !before.contains(p)).collect();
        assert_eq!(added.len(), 1, "{}: one entry per kernel", case.describe());
        entries.push(added[0].clone());
    }
    entries
}

/// Warms a cache of `cases` in `dir` with `open`, then damages each entry in turn: every damaged
/// entry must be rejected by verification (never reaching the backend's load), compiled again,
/// and give the right result. Works for any backend whose programs persist.
pub fn damage_every_entry(
    dir: &Path,
    open: &Opener,
    cases: &[Box<dyn Case>],
    payload_samples: usize,
) -> Tally {
    let start = Instant::now();
    let entries = warm(dir, open, cases);
    let genuine: Vec<Vec<u8>> = entries.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let mut tally = Tally { kernels: cases.len(), ..Tally::default() };
    for (index, (case, path)) in cases.iter().zip(&entries).enumerate() {
        let other = &genuine[(index + 1) % genuine.len()];
        for (what, bytes) in mutations(&genuine[index], other, payload_samples) {
            std::fs::write(path, &bytes).unwrap();
            let runtime = run_case(dir, open, case.as_ref(), &what);
            let stats = runtime.cache_stats();
            assert_eq!(stats.disk_rejected, 1, "{} with {what}: not rejected: {stats:?}", case.describe());
            assert_eq!(stats.driver_refused, 0, "{} with {what}: reached the backend", case.describe());
            assert_eq!((stats.compiles, stats.disk_hits), (1, 0), "{} with {what}", case.describe());
            tally.cases += 1;
            tally.rejected += stats.disk_rejected;
            tally.driver_refused += stats.driver_refused;
            tally.recompiled += stats.compiles;
            std::fs::write(path, &genuine[index]).unwrap();
        }
    }
    // The genuine entries still load, untouched by all that.
    for case in cases {
        let runtime = run_case(dir, open, case.as_ref(), "the genuine entry");
        assert_eq!(runtime.cache_stats().disk_hits, 1);
    }
    tally.elapsed = start.elapsed();
    tally
}
