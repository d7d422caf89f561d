//! Fault injection on the gl backend's persisted programs (Mesa's llvmpipe in CI): every entry of
//! a warm cache of the suite is damaged in turn — single-byte flips at every header offset and a
//! stride through the payload, truncations, extensions, a zeroed file, the entry of another
//! kernel, an entry re-sealed for another GPU or a future format version — and each must be
//! rejected by verification before `glProgramBinary` sees it, compiled again, and compute the
//! right result. The counts are printed (`-- --nocapture`).
//!
//! The per-entry runner takes a `Runtime` opener, so the same cases run on any backend that
//! persists programs (amdgpu-sim once it is registered).

#![cfg(feature = "gl")]

use std::path::{Path, PathBuf};

use sparkle::cache::{CacheConfig, EntryHeader, HEADER_LEN};
use sparkle::suite::{self, Case};
use sparkle::Runtime;

fn open_gl(dir: &Path) -> Runtime {
    Runtime::open_backend("gl", &CacheConfig::in_dir(dir))
        .expect("a GL 4.3 context (Mesa's llvmpipe is enough)")
}

fn cases() -> Vec<Box<dyn Case>> {
    vec![
        Box::new(suite::saxpy::Saxpy::random(777, 5)),
        Box::new(suite::sgemm::Sgemm::random(19, 23, 17, 5)),
        Box::new(suite::conv2d::Conv2d::random(suite::conv2d::Shape { n: 1, c: 2, h: 7, w: 9, k: 2 }, 5)),
    ]
}

fn entry_files(dir: &Path) -> Vec<PathBuf> {
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

/// Re-seals a header after editing it, as a writer of that other GPU or format would have.
fn resealed(bytes: &[u8], edit: impl FnOnce(&mut EntryHeader)) -> Vec<u8> {
    let mut header: EntryHeader = bytemuck::pod_read_unaligned(&bytes[..HEADER_LEN]);
    edit(&mut header);
    let unsealed = bytemuck::bytes_of(&header).to_vec();
    header.header_xxh3 = xxhash_rust::xxh3::xxh3_64(&unsealed[..HEADER_LEN - 8]);
    let mut out = bytemuck::bytes_of(&header).to_vec();
    out.extend_from_slice(&bytes[HEADER_LEN..]);
    out
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
    pub rejected: u64,
    pub driver_refused: u64,
    pub recompiled: u64,
}

/// Warms a cache of `cases` in `dir` with `open`, then damages each entry in turn: every damaged
/// entry must be rejected by verification (never reaching the backend's load), compiled again,
/// and give the right result. Works for any backend whose programs persist.
pub fn damage_every_entry(
    dir: &Path,
    open: &dyn Fn(&Path) -> Runtime,
    cases: &[Box<dyn Case>],
    payload_samples: usize,
) -> Tally {
    let mut entries = Vec::new();
    for case in cases {
        let before = entry_files(dir);
        let runtime = open(dir);
        let program = runtime.program(&case.spec()).expect("suite kernel");
        assert!(suite::run_and_verify(&runtime, &program, case.as_ref()).unwrap().passed());
        let added: Vec<_> = entry_files(dir).into_iter().filter(|p| !before.contains(p)).collect();
        assert_eq!(added.len(), 1, "{}: one entry per kernel", case.describe());
        entries.push(added[0].clone());
    }
    let genuine: Vec<Vec<u8>> = entries.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let mut tally = Tally::default();
    for (index, (case, path)) in cases.iter().zip(&entries).enumerate() {
        let other = &genuine[(index + 1) % genuine.len()];
        for (what, bytes) in mutations(&genuine[index], other, payload_samples) {
            std::fs::write(path, &bytes).unwrap();
            let runtime = open(dir);
            let program = runtime.program(&case.spec()).unwrap_or_else(|e| panic!("{what}: {e}"));
            let verdict = suite::run_and_verify(&runtime, &program, case.as_ref()).unwrap();
            assert!(verdict.passed(), "{} with {what}: {verdict}", case.describe());
            let stats = runtime.cache_stats();
            assert_eq!(stats.disk_rejected, 1, "{} with {what}: not rejected: {stats:?}", case.describe());
            assert_eq!(stats.driver_refused, 0, "{} with {what}: reached the driver", case.describe());
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
        let runtime = open(dir);
        let program = runtime.program(&case.spec()).unwrap();
        assert!(suite::run_and_verify(&runtime, &program, case.as_ref()).unwrap().passed());
        assert_eq!(runtime.cache_stats().disk_hits, 1);
    }
    tally
}

#[test]
fn every_damaged_gl_entry_is_rejected_before_the_driver_and_recompiled_correctly() {
    let dir = tempfile::tempdir().unwrap();
    let start = std::time::Instant::now();
    let tally = damage_every_entry(dir.path(), &open_gl, &cases(), 256);
    eprintln!(
        "gl fault injection: {} damaged entries over {} kernels, {} rejected by verification, {} refused by \
         the driver, {} recompiled, all results correct ({:.1} s)",
        tally.cases,
        cases().len(),
        tally.rejected,
        tally.driver_refused,
        tally.recompiled,
        start.elapsed().as_secs_f64()
    );
    assert!(tally.cases >= 3 * (HEADER_LEN + 256));
    assert_eq!(tally.driver_refused, 0);
}
