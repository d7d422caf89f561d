//! Several processes share one cache folder with a small size bound: inserts, reads and prunes
//! race, and every read either misses or returns exactly the right payload.
//!
//! The test binary re-runs itself: `worker_role` does nothing unless `WORKER_ENV` is set.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

use crate::isolated;
use sparkle::cache::{
    Blob, Built, CacheConfig, CacheKey, DiskStore, GpuId, LoadFailure, ProgramCache, ProgramSource,
};

const WORKER_ENV: &str = "SPARKLE_CACHE_TEST_WORKER";
const DIR_ENV: &str = "SPARKLE_CACHE_TEST_WORKER_DIR";
const WORKERS: usize = 4;
const KEYS: u64 = 48;
const ITERATIONS: u64 = 400;
const MAX_DISK: u64 = 24 << 10;

fn gpu() -> GpuId {
    GpuId::new("gl", vec![("renderer".into(), "shared by processes".into())])
}

/// Between 200 bytes and 3 KB, and every byte depends on the key.
fn payload(key: CacheKey) -> Vec<u8> {
    let seed = key.as_u128();
    let len = 200 + (seed % 2800) as usize;
    let mut out = key.hex().into_bytes();
    out.extend((0..len).map(|i| (seed >> (i % 120)) as u8 ^ i as u8));
    out
}

struct Source {
    key: CacheKey,
    wrong: AtomicU64,
    loads: AtomicU64,
}

impl ProgramSource<Vec<u8>> for Source {
    type Error = String;

    fn compile(&self) -> Result<Built<Vec<u8>>, String> {
        let bytes = payload(self.key);
        Ok(Built {
            program: bytes.clone(),
            blob: Some(Blob { format: 1, bytes }),
            compile_time: Duration::ZERO,
        })
    }

    fn load(&self, blob: &Blob) -> Result<Vec<u8>, LoadFailure<String>> {
        self.loads.fetch_add(1, SeqCst);
        if blob.bytes != payload(self.key) || blob.format != 1 {
            self.wrong.fetch_add(1, SeqCst);
            return Err(LoadFailure::Refused("wrong payload".into()));
        }
        Ok(blob.bytes.clone())
    }
}

fn unix_ns() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

#[test]
fn worker_role() {
    let (Ok(id), Ok(dir)) = (std::env::var(WORKER_ENV), std::env::var(DIR_ENV)) else { return };
    let id: u64 = id.parse().unwrap();
    let dir = Path::new(&dir);
    // Start together: the parent creates `go` once every worker is running.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !dir.join("go").exists() {
        assert!(Instant::now() < deadline, "never told to go");
        std::thread::sleep(Duration::from_millis(1));
    }
    let start = unix_ns();
    let config = CacheConfig {
        max_memory_entries: 1,
        max_disk_bytes: MAX_DISK,
        ..CacheConfig::in_dir(dir.join("cache"))
    };
    let cache = ProgramCache::<Vec<u8>>::open(gpu(), &config);
    assert!(cache.is_persistent());
    let (mut wrong, mut loads, mut served_wrong) = (0, 0, 0);
    let mut state = id.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for i in 0..ITERATIONS {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let key = CacheKey::derive(&gpu(), &[&(state % KEYS).to_le_bytes()]);
        let source = Source { key, wrong: AtomicU64::new(0), loads: AtomicU64::new(0) };
        let program = cache.get(&key, &source).unwrap();
        if *program != payload(key) {
            served_wrong += 1;
        }
        wrong += source.wrong.load(SeqCst);
        loads += source.loads.load(SeqCst);
        drop(program);
        if i % 50 == 25 {
            DiskStore::open(dir.join("cache")).prune(MAX_DISK / 2, None).unwrap();
        }
    }
    let stats = cache.stats();
    let end = unix_ns();
    println!(
        "WORKER_RESULT id={id} start={start} end={end} loads={loads} wrong={wrong} served_wrong={served_wrong} \
         rejected={} disk_hits={} compiles={}",
        stats.disk_rejected, stats.disk_hits, stats.compiles
    );
}

fn field(line: &str, name: &str) -> u128 {
    line.split_whitespace()
        .find_map(|part| part.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        .parse()
        .unwrap()
}

#[test]
fn processes_share_one_cache_folder() {
    if std::env::var(WORKER_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..WORKERS)
        .map(|id| {
            Command::new(&exe)
                .args([
                    &isolated::test_name(module_path!(), "worker_role"),
                    "--exact",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(WORKER_ENV, id.to_string())
                .env(DIR_ENV, dir.path())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    std::fs::write(dir.path().join("go"), b"").unwrap();
    let mut results = Vec::new();
    for child in children {
        let output = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "a worker failed:\n{stdout}");
        // The harness may print `test worker_role ... ` on the same line first.
        let line = stdout
            .lines()
            .find_map(|l| l.find("WORKER_RESULT").map(|at| &l[at..]))
            .unwrap_or_else(|| panic!("the worker printed no result:\n{stdout}"));
        results.push(line.to_owned());
    }
    let (mut loads, mut disk_hits) = (0, 0);
    for line in &results {
        assert_eq!(field(line, "wrong"), 0, "a verified blob held another payload: {line}");
        assert_eq!(field(line, "served_wrong"), 0, "a wrong program was served: {line}");
        assert_eq!(field(line, "rejected"), 0, "a torn or corrupt entry was seen: {line}");
        loads += field(line, "loads");
        disk_hits += field(line, "disk_hits");
    }
    assert!(disk_hits > 0 && loads == disk_hits, "{results:#?}");
    let latest_start = results.iter().map(|l| field(l, "start")).max().unwrap();
    let earliest_end = results.iter().map(|l| field(l, "end")).min().unwrap();
    assert!(latest_start < earliest_end, "the workers did not overlap: {results:#?}");
    let report = DiskStore::open(dir.path().join("cache")).verify(false).unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
    assert!(report.removed.is_empty(), "{report:?}");
    let left = DiskStore::open(dir.path().join("cache")).prune(u64::MAX, None).unwrap();
    assert_eq!(left.removed_temp_files, 0);
    eprintln!("{} entries, {} bytes left; {results:#?}", left.remaining_entries, left.remaining_bytes);
}
