//! Filesystem faults under the program cache: a full filesystem (a small tmpfs where the machine
//! lets the test mount one, and ENOSPC injected through the cache's write path everywhere), the
//! cache folder deleted while programs are being compiled and loaded, and entries deleted or
//! replaced by another process in the middle of reads. Always the right program, at most one
//! warning for a folder that cannot be used, never a panic. (A missing or unusable folder and
//! read-only folders are covered by the cache tests' `permissions` and `read_only`.)
//!
//! The injected error is process-wide: the test that injects it runs in a process of its own,
//! so that no other test of this binary writes an entry while it is on.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cache_support::{self, capture, gpu, Counts, Source};
use crate::isolated;
use sparkle::cache::{inject_write_error, CacheConfig, DiskStore, ProgramCache};

/// Disk reads every time: nothing stays in memory once its handle is dropped.
fn disk_only(dir: &Path) -> CacheConfig {
    CacheConfig { max_memory_entries: 0, ..CacheConfig::in_dir(dir) }
}

/// Gets every source `rounds` times through `cache`, checking each program's payload.
fn get_all(cache: &ProgramCache<cache_support::Program>, sources: &[Source], rounds: usize) {
    for _ in 0..rounds {
        for s in sources {
            let program = cache.get(&s.key, s).unwrap();
            assert_eq!(program.payload, cache_support::payload(s.key, &s.text, s.size), "{}", s.text);
        }
    }
}

/// A full disk in the middle of a run: the entries written before it stay valid, the cache goes
/// memory-only with one warning naming the folder, every program is still right.
fn fills_up(root: &Path, sources: &[Source], counts: &Counts, earlier_entries: u64) {
    let gpu = gpu("full disk");
    let (cache, captured) = capture(|| {
        let cache = ProgramCache::open(gpu.clone(), &disk_only(root));
        get_all(&cache, sources, 2);
        cache
    });
    assert!(!cache.is_persistent(), "the cache kept writing to a full filesystem");
    let warnings = captured.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("memory only"), "{warnings:?}");
    let written = cache.stats().disk_writes;
    assert!(written < sources.len() as u64, "{:?}", cache.stats());
    assert!(counts.compiles.load(SeqCst) >= sources.len());
    let report = DiskStore::open(root).verify(false).unwrap();
    let expected = earlier_entries + written;
    assert_eq!((report.checked, report.valid), (expected, expected), "{report:?}");
    assert!(report.problems.is_empty() && report.removed.is_empty(), "{report:?}");
}

#[test]
fn enospc_from_the_write_path_means_memory_only_with_one_warning() {
    if isolated::ran_in_own_process(
        module_path!(),
        "enospc_from_the_write_path_means_memory_only_with_one_warning",
        &[],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let counts = Arc::new(Counts::default());
    let gpu = gpu("full disk");
    let sources: Vec<Source> = (0..6).map(|i| Source::new(&gpu, &format!("enospc {i}"), &counts)).collect();
    // Two entries fit, then the disk is full.
    let cache = ProgramCache::open(gpu.clone(), &disk_only(dir.path()));
    get_all(&cache, &sources[..2], 1);
    drop(cache);
    inject_write_error(Some(libc::ENOSPC));
    let outcome = std::panic::catch_unwind(|| fills_up(dir.path(), &sources, &counts, 2));
    inject_write_error(None);
    outcome.unwrap();
    // No temporary file of the failed writes is left behind.
    let report = DiskStore::open(dir.path()).prune(u64::MAX, None).unwrap();
    assert_eq!((report.remaining_entries, report.removed_temp_files), (2, 0), "{report:?}");
}

/// Mounts a tmpfs of `bytes` at `at`; false where the machine does not allow it.
fn mount_tmpfs(at: &Path, bytes: u64) -> bool {
    Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={bytes},mode=0700"), "tmpfs"])
        .arg(at)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

#[test]
fn a_really_full_tmpfs_means_memory_only_with_one_warning() {
    let dir = tempfile::tempdir().unwrap();
    if !mount_tmpfs(dir.path(), 64 * 1024) {
        eprintln!(
            "skipped: cannot mount a tmpfs here (needs CAP_SYS_ADMIN); the ENOSPC injection test covers it"
        );
        return;
    }
    let counts = Arc::new(Counts::default());
    let gpu = gpu("full disk");
    let sources: Vec<Source> = (0..12)
        .map(|i| {
            let mut s = Source::new(&gpu, &format!("tmpfs {i}"), &counts);
            s.size = 12 * 1024;
            s
        })
        .collect();
    let outcome = std::panic::catch_unwind(|| fills_up(dir.path(), &sources, &counts, 0));
    let unmounted = Command::new("umount").arg(dir.path()).status().is_ok_and(|s| s.success());
    outcome.unwrap();
    assert!(unmounted, "the test tmpfs could not be unmounted");
}

#[test]
fn the_cache_folder_deleted_while_running_costs_compiles_never_results() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cache");
    let counts = Arc::new(Counts::default());
    let gpu = gpu("deleted");
    let sources: Vec<Source> = (0..8).map(|i| Source::new(&gpu, &format!("deleted {i}"), &counts)).collect();
    let stop = std::sync::atomic::AtomicBool::new(false);
    // How often the folder was taken away so far: the workers go on for 1.5 s and until it was
    // taken away more than 3 times (a loaded machine gives the deleter fewer turns), bounded, or
    // until the cache gave up on the folder: taken away again between its recreating the
    // folder and writing into it (a loaded machine's timing), it works in memory only, with
    // one warning, and nothing recreates the folder for the deleter any more.
    let deleted = std::sync::atomic::AtomicUsize::new(0);
    let (outcome, captured) = capture(|| {
        let cache = ProgramCache::open(gpu.clone(), &disk_only(&root));
        std::thread::scope(|s| {
            let deleter = s.spawn(|| {
                let mut deletions = 0;
                while !stop.load(SeqCst) {
                    // Taken away at once (a plain recursive delete keeps failing while the
                    // workers write into the folder), then deleted.
                    let gone = dir.path().join(format!("gone-{deletions}"));
                    if std::fs::rename(&root, &gone).is_ok() {
                        deletions += 1;
                        deleted.store(deletions, SeqCst);
                        let _ = std::fs::remove_dir_all(&gone);
                    }
                    std::thread::sleep(Duration::from_millis(3));
                }
                deletions
            });
            let started = Instant::now();
            let (cache, sources, deleted) = (&cache, &sources, &deleted);
            // The workers log to the capture too (it is this thread's subscriber).
            let dispatch = tracing::dispatcher::get_default(|dispatch| dispatch.clone());
            let workers: Vec<_> = (0..3)
                .map(|_| {
                    let dispatch = dispatch.clone();
                    s.spawn(move || {
                        tracing::dispatcher::with_default(&dispatch, || {
                            while (started.elapsed() < Duration::from_millis(1500)
                                || deleted.load(SeqCst) <= 3)
                                && cache.is_persistent()
                                && started.elapsed() < Duration::from_secs(120)
                            {
                                get_all(cache, sources, 1);
                            }
                        })
                    })
                })
                .collect();
            for worker in workers {
                worker.join().unwrap();
            }
            stop.store(true, SeqCst);
            (deleter.join().unwrap(), cache.is_persistent())
        })
    });
    let (deletions, kept_writing) = outcome;
    let warnings = captured.warnings();
    // What a user reads: at most one warning per entry that could not be written (a shard
    // folder taken away while it was being made), and the cache's one warning if it gave up
    // on the folder; nothing else, and nothing repeated.
    let gave_up = warnings.iter().filter(|w| w.contains("works in memory only from now on")).count();
    let per_entry = warnings.iter().filter(|w| w.contains("cannot write this cache entry")).count();
    assert_eq!(gave_up + per_entry, warnings.len(), "{warnings:?}");
    assert!(per_entry <= sources.len(), "{warnings:?}");
    if kept_writing {
        assert!(deletions > 3, "the folder was deleted only {deletions} times");
        assert_eq!(gave_up, 0, "{warnings:?}");
    } else {
        assert!(deletions >= 1, "the cache gave up on a folder nobody deleted");
        assert_eq!(gave_up, 1, "{warnings:?}");
    }
    // Afterwards a new cache recreates the folder and works normally.
    let cache = ProgramCache::open(gpu.clone(), &disk_only(&root));
    assert!(cache.is_persistent());
    get_all(&cache, &sources, 2);
    assert!(DiskStore::open(&root).verify(false).unwrap().removed.is_empty());
    eprintln!("folder deleted {deletions} times; warnings: {warnings:?}");
}

const VANDAL_ENV: &str = "SPARKLE_TEST_VANDAL_DIR";
/// The file whose existence tells the vandal to stop.
const VANDAL_STOP_ENV: &str = "SPARKLE_TEST_VANDAL_STOP";
/// The longest the vandal and the cache go on without having met both ways.
const VANDAL_LIMIT: Duration = Duration::from_secs(60);

/// Child role: until told to stop, deletes, truncates, zeroes, swaps and rewrites the entries it
/// finds, one every millisecond or so: paced, so that the cache also finds intact entries
/// whatever the relative speed of the two processes on a loaded machine.
#[test]
fn vandal_role() {
    let Ok(dir) = std::env::var(VANDAL_ENV) else { return };
    let stop = std::env::var_os(VANDAL_STOP_ENV).map(std::path::PathBuf::from);
    let deadline = Instant::now() + VANDAL_LIMIT;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut acts = 0u64;
    while Instant::now() < deadline && !stop.as_ref().is_some_and(|s| s.exists()) {
        let entries: Vec<_> =
            DiskStore::open(&dir).list().map(|l| l.into_iter().map(|e| e.path).collect()).unwrap_or_default();
        if entries.is_empty() {
            std::thread::yield_now();
            continue;
        }
        std::thread::sleep(Duration::from_millis(1));
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let path = &entries[(state % entries.len() as u64) as usize];
        let other = &entries[((state >> 20) % entries.len() as u64) as usize];
        let _ = match state % 5 {
            0 => std::fs::remove_file(path),
            1 => std::fs::read(path).and_then(|b| std::fs::write(path, &b[..b.len() / 2])),
            2 => std::fs::read(path).and_then(|b| std::fs::write(path, vec![0u8; b.len()])),
            3 => std::fs::copy(other, path).map(drop),
            _ => std::fs::read(path).and_then(|mut b| {
                let at = (state >> 8) as usize % b.len().max(1);
                if let Some(byte) = b.get_mut(at) {
                    *byte ^= 0x10;
                }
                std::fs::write(path, b)
            }),
        };
        acts += 1;
    }
    println!("VANDAL acts={acts}");
}

#[test]
fn entries_deleted_or_replaced_by_another_process_mid_read_never_give_a_wrong_program() {
    if std::env::var(VANDAL_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let counts = Arc::new(Counts::default());
    let gpu = gpu("vandalized");
    let sources: Vec<Source> = (0..6)
        .map(|i| {
            let mut s = Source::new(&gpu, &format!("vandal {i}"), &counts);
            s.size = 4096 * (i + 1);
            s
        })
        .collect();
    let flags = tempfile::tempdir().unwrap();
    let stop = flags.path().join("stop");
    let vandal = Command::new(std::env::current_exe().unwrap())
        .args([
            &isolated::test_name(module_path!(), "vandal_role"),
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(VANDAL_ENV, dir.path())
        .env(VANDAL_STOP_ENV, &stop)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let cache = ProgramCache::open(gpu.clone(), &disk_only(dir.path()));
    let started = Instant::now();
    let mut rounds = 0;
    // At least 4 s of vandalism, and on until the cache has both read an intact entry and
    // rejected a damaged one (bounded: a cache that never meets the vandal fails below).
    let met = |stats: &sparkle::cache::CacheStats| stats.disk_rejected > 0 && stats.disk_hits > 0;
    while started.elapsed() < Duration::from_secs(4)
        || (!met(&cache.stats()) && started.elapsed() < VANDAL_LIMIT)
    {
        // Sources' `load` asserts that the blob it is given is exactly the program's own.
        get_all(&cache, &sources, 1);
        rounds += 1;
    }
    std::fs::write(&stop, b"").unwrap();
    let output = vandal.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    let stats = cache.stats();
    eprintln!(
        "{rounds} rounds against {}; {stats:?}",
        stdout.lines().find(|l| l.contains("VANDAL")).unwrap_or("?")
    );
    assert!(
        stats.disk_rejected > 0 && stats.disk_hits > 0,
        "the vandal and the cache did not meet: {stats:?}"
    );
    assert_eq!(stats.driver_refused, 0);
    assert!(cache.is_persistent());
    assert!(counts.loads.load(SeqCst) as u64 == stats.disk_hits);
}
