//! Processes of one machine that start together and share a cache folder compile each program
//! once (the disk tier's lock per key, `process_flight`): several processes of several threads
//! asking for the same programs; a holder killed with SIGKILL while compiling; a holder that
//! never finishes (the wait's budget); lock files that cannot be made (a folder or a link at
//! their path, a shard folder that cannot be written); and the read-only cache, which takes no
//! lock at all.
//!
//! The test binary re-runs itself: `cross_process_worker` does nothing unless `WORKER_ENV` is
//! set.

use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use crate::cache_support::{self, is_root, snapshot};
use crate::isolated;
use sparkle::cache::{Blob, Built, CacheConfig, CacheKey, GpuId, LoadFailure, ProgramCache, ProgramSource};

const WORKER_ENV: &str = "SPARKLE_CACHE_TEST_XPROC_WORKER";
const DIR_ENV: &str = "SPARKLE_CACHE_TEST_XPROC_DIR";
/// `threads,kernels,compile ms,burn` of a worker: the compile sleeps (`burn` 0), as a driver
/// waiting on its own threads does, or uses that much CPU time (`burn` 1), as a compiler does.
const SHAPE_ENV: &str = "SPARKLE_CACHE_TEST_XPROC_SHAPE";
/// A worker started to be killed: its compile never ends.
const HANG_ENV: &str = "SPARKLE_CACHE_TEST_XPROC_HANG";
/// How long any worker may take before the test fails instead of hanging.
const WORKER_BOUND: Duration = Duration::from_secs(120);

fn gpu() -> GpuId {
    GpuId::new("gl", vec![("renderer".into(), "processes starting together".into())])
}

fn kernel_key(index: usize) -> CacheKey {
    CacheKey::derive(&gpu(), &[format!("kernel {index}").as_bytes()])
}

/// Every byte depends on the key.
fn payload(key: CacheKey) -> Vec<u8> {
    let seed = key.as_u128();
    let mut out = key.hex().into_bytes();
    out.extend((0..512).map(|i| (seed >> (i % 120)) as u8 ^ i as u8));
    out
}

/// The lock file of `key`, where `process_flight` documents it.
fn lock_path(gpu_dir: &Path, key: CacheKey) -> PathBuf {
    let hex = key.hex();
    gpu_dir.join(&hex[..2]).join(format!(".tmp-lock-{hex}"))
}

/// A compile that takes `cost` (sleeping or burning a core), counted; a load that checks the
/// blob is this key's.
struct Source {
    key: CacheKey,
    cost: Duration,
    burn: bool,
    /// Tells the parent that this compile started (a file created at this path).
    started: Option<PathBuf>,
    compiles: AtomicUsize,
    wrong: AtomicUsize,
}

impl Source {
    fn new(key: CacheKey, cost: Duration, burn: bool) -> Source {
        Source { key, cost, burn, started: None, compiles: AtomicUsize::new(0), wrong: AtomicUsize::new(0) }
    }
}

impl ProgramSource<Vec<u8>> for Source {
    type Error = String;

    fn compile(&self) -> Result<Built<Vec<u8>>, String> {
        self.compiles.fetch_add(1, SeqCst);
        if let Some(started) = &self.started {
            std::fs::write(started, b"").unwrap();
        }
        let start = Instant::now();
        if self.burn {
            // A fixed amount of work, as a compiler's: this thread's CPU time, however busy the
            // machine is.
            let (mut x, used) = (1u64, thread_cpu_time());
            while thread_cpu_time() - used < self.cost {
                for _ in 0..10_000 {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            }
        } else {
            std::thread::sleep(self.cost);
        }
        let bytes = payload(self.key);
        Ok(Built {
            program: bytes.clone(),
            blob: Some(Blob { format: 1, bytes }),
            compile_time: start.elapsed(),
        })
    }

    fn load(&self, blob: &Blob) -> Result<Vec<u8>, LoadFailure<String>> {
        if blob.bytes != payload(self.key) || blob.format != 1 {
            self.wrong.fetch_add(1, SeqCst);
            return Err(LoadFailure::Refused("wrong payload".into()));
        }
        Ok(blob.bytes.clone())
    }
}

/// The CPU time this thread has used, by its own clock.
fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec for the call to fill; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(rc, 0);
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

fn unix_ns() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

/// A worker: waits for `go`, then asks for every kernel from its threads (each thread takes the
/// next kernel in order, as `warm_up` does) and prints what it saw.
#[test]
fn cross_process_worker() {
    let (Ok(id), Ok(dir)) = (std::env::var(WORKER_ENV), std::env::var(DIR_ENV)) else { return };
    let dir = PathBuf::from(dir);
    let shape: Vec<u64> = std::env::var(SHAPE_ENV).unwrap().split(',').map(|n| n.parse().unwrap()).collect();
    let [threads, kernels, cost_ms, burn] = shape[..] else { panic!("bad shape {shape:?}") };
    let cache = ProgramCache::<Vec<u8>>::open(gpu(), &CacheConfig::in_dir(dir.join("cache")));
    assert!(cache.is_persistent());
    let sources: Vec<Source> = (0..kernels as usize)
        .map(|i| {
            let mut source = Source::new(kernel_key(i), Duration::from_millis(cost_ms), burn == 1);
            if std::env::var(HANG_ENV).is_ok() {
                source.cost = Duration::from_secs(3600);
                source.started = Some(dir.join(format!("compiling-{id}")));
            }
            source
        })
        .collect();
    std::fs::write(dir.join(format!("ready-{id}")), b"").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.join("go").exists() {
        assert!(Instant::now() < deadline, "never told to go");
        std::thread::sleep(Duration::from_millis(1));
    }
    let start = Instant::now();
    let next = AtomicUsize::new(0);
    let (first_ns, last_ns, served_wrong) =
        (AtomicU64::new(u64::MAX), AtomicU64::new(0), AtomicUsize::new(0));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, SeqCst);
                let Some(source) = sources.get(index) else { return };
                let program = cache.get(&source.key, source).unwrap();
                let at = start.elapsed().as_nanos() as u64;
                first_ns.fetch_min(at, SeqCst);
                last_ns.fetch_max(at, SeqCst);
                if *program != payload(source.key) {
                    served_wrong.fetch_add(1, SeqCst);
                }
            });
        }
    });
    let stats = cache.stats();
    let compiles: usize = sources.iter().map(|s| s.compiles.load(SeqCst)).sum();
    let wrong: usize = sources.iter().map(|s| s.wrong.load(SeqCst)).sum();
    assert_eq!(stats.compiles as usize, compiles);
    println!(
        "WORKER_RESULT id={id} first_ns={} last_ns={} compiles={compiles} disk_hits={} waits={} gave_up={} \
         wait_ns={} wrong={wrong} served_wrong={} end={}",
        first_ns.load(SeqCst),
        last_ns.load(SeqCst),
        stats.disk_hits,
        stats.process_waits,
        stats.process_waits_gave_up,
        stats.process_wait_time.as_nanos(),
        served_wrong.load(SeqCst),
        unix_ns(),
    );
}

/// Starts worker `id` of this test binary on the folder `dir`.
fn spawn_worker(dir: &Path, id: usize, shape: &str, hang: bool) -> Child {
    let exe = std::env::current_exe().unwrap();
    let mut command = Command::new(exe);
    command
        .args([
            &isolated::test_name(module_path!(), "cross_process_worker"),
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(WORKER_ENV, id.to_string())
        .env(DIR_ENV, dir)
        .env(SHAPE_ENV, shape)
        .env_remove(HANG_ENV)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if hang {
        command.env(HANG_ENV, "1");
    }
    command.spawn().unwrap()
}

/// Waits (bounded) until `path` exists.
fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + WORKER_BOUND;
    while !path.exists() {
        assert!(Instant::now() < deadline, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits for a worker (killing it past the bound) and returns its result line.
fn result_of(child: Child) -> String {
    let id = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output().unwrap());
    let deadline = Instant::now() + WORKER_BOUND;
    while !waiter.is_finished() {
        if Instant::now() > deadline {
            // SAFETY: kill takes no pointers; the child is ours and not reaped yet.
            unsafe { libc::kill(id as libc::pid_t, libc::SIGKILL) };
            panic!("worker {id} ran past {WORKER_BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let output = waiter.join().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "a worker failed:\n{stdout}\n{stderr}");
    stdout
        .lines()
        .find_map(|l| l.find("WORKER_RESULT").map(|at| l[at..].to_owned()))
        .unwrap_or_else(|| panic!("the worker printed no result:\n{stdout}\n{stderr}"))
}

fn field(line: &str, name: &str) -> u128 {
    line.split_whitespace()
        .find_map(|part| part.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        .parse()
        .unwrap()
}

/// Starts `processes` workers of `shape` on one new folder, lets them go together once all are
/// ready, and returns their result lines after checking every result was right.
fn run_together(processes: usize, shape: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let children: Vec<Child> = (0..processes).map(|id| spawn_worker(dir.path(), id, shape, false)).collect();
    for id in 0..processes {
        wait_for_file(&dir.path().join(format!("ready-{id}")));
    }
    std::fs::write(dir.path().join("go"), b"").unwrap();
    let results: Vec<String> = children.into_iter().map(result_of).collect();
    for line in &results {
        assert_eq!(field(line, "wrong"), 0, "a stored blob held another payload: {line}");
        assert_eq!(field(line, "served_wrong"), 0, "a wrong program was served: {line}");
        assert_eq!(field(line, "gave_up"), 0, "a wait ran out of budget: {line}");
    }
    let gpu_dir = ProgramCache::<Vec<u8>>::open(gpu(), &CacheConfig::in_dir(dir.path().join("cache")))
        .gpu_dir()
        .unwrap();
    let left: Vec<_> =
        walk_files(&gpu_dir).into_iter().filter(|p| p.to_string_lossy().contains(".tmp-lock-")).collect();
    assert!(left.is_empty(), "lock files were left behind: {left:?}");
    results
}

fn walk_files(dir: &Path) -> Vec<PathBuf> {
    snapshot(dir).into_keys().collect()
}

/// Compiles in all, and the slowest first result of any worker (ms).
fn summary(results: &[String]) -> (u128, f64, f64) {
    let compiles = results.iter().map(|l| field(l, "compiles")).sum();
    let first = results.iter().map(|l| field(l, "first_ns")).max().unwrap() as f64 / 1e6;
    let last = results.iter().map(|l| field(l, "last_ns")).max().unwrap() as f64 / 1e6;
    (compiles, first, last)
}

#[test]
fn processes_starting_together_compile_each_program_about_once() {
    if std::env::var(WORKER_ENV).is_ok() {
        return;
    }
    const PROCESSES: usize = 6;
    const KERNELS: u128 = 6;
    let results = run_together(PROCESSES, &format!("4,{KERNELS},200,0"));
    let (compiles, first_ms, last_ms) = summary(&results);
    eprintln!(
        "{PROCESSES} processes, {KERNELS} kernels: {compiles} compiles, slowest first result {first_ms:.0} ms, \
         slowest last {last_ms:.0} ms\n{results:#?}"
    );
    // Without a lock between processes every process compiles every kernel (36 here).
    assert!(compiles * 10 <= KERNELS * 12, "{compiles} compiles for {KERNELS} kernels: {results:#?}");
    let waits: u128 = results.iter().map(|l| field(l, "waits")).sum();
    let hits: u128 = results.iter().map(|l| field(l, "disk_hits")).sum();
    assert!(waits > 0, "nobody waited for another process: {results:#?}");
    assert_eq!(hits + compiles, PROCESSES as u128 * KERNELS, "every request is a disk hit or a compile");
}

/// The figures of the guide: compiles per distinct kernel and first-result times, eight
/// processes of sixteen threads and eighteen kernels, compiles sleeping and using CPU time.
/// `cargo test --release --test cache cross_process::measure -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: prints figures, asserts only that results are right"]
fn measure_processes_starting_together() {
    if std::env::var(WORKER_ENV).is_ok() {
        return;
    }
    for (label, shape) in [("sleeping 300 ms", "16,18,300,0"), ("100 ms of CPU each", "16,18,100,1")] {
        for _run in 0..3 {
            let results = run_together(8, shape);
            let (compiles, first_ms, last_ms) = summary(&results);
            let firsts: Vec<String> =
                results.iter().map(|l| format!("{:.0}", field(l, "first_ns") as f64 / 1e6)).collect();
            println!(
                "MEASURE {label}: 8 processes x 16 threads, 18 kernels: {compiles} compiles ({:.2} per kernel), \
                 first results (ms) [{}], slowest first {first_ms:.0} ms, slowest last {last_ms:.0} ms",
                compiles as f64 / 18.0,
                firsts.join(" ")
            );
        }
    }
}

#[test]
fn a_holder_killed_while_compiling_blocks_nobody() {
    if std::env::var(WORKER_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The holder's compile of kernel 0 never ends; it holds the lock until it is killed.
    let mut holder = spawn_worker(dir.path(), 0, "1,1,0,0", true);
    wait_for_file(&dir.path().join("ready-0"));
    std::fs::write(dir.path().join("go"), b"").unwrap();
    wait_for_file(&dir.path().join("compiling-0"));
    let waiters: Vec<Child> = (1..3).map(|id| spawn_worker(dir.path(), id, "1,1,100,0", false)).collect();
    for id in 1..3 {
        wait_for_file(&dir.path().join(format!("ready-{id}")));
    }
    // Let the waiters reach the lock, then kill its holder.
    std::thread::sleep(Duration::from_millis(500));
    holder.kill().unwrap();
    let status = holder.wait().unwrap();
    assert!(!status.success(), "the holder was not killed: {status}");
    let results: Vec<String> = waiters.into_iter().map(result_of).collect();
    eprintln!("{results:#?}");
    for line in &results {
        assert_eq!((field(line, "wrong"), field(line, "served_wrong")), (0, 0), "{line}");
        assert_eq!(field(line, "gave_up"), 0, "a waiter waited out its budget instead of going on: {line}");
    }
    let compiles: u128 = results.iter().map(|l| field(l, "compiles")).sum();
    let waits: u128 = results.iter().map(|l| field(l, "waits")).sum();
    assert_eq!(compiles, 1, "one waiter compiles, the other waits for it: {results:#?}");
    assert!(waits >= 1, "nobody waited for the killed holder: {results:#?}");
}

/// Holds `key`'s lock as another process would (an exclusive flock on its lock file).
fn hold_lock(gpu_dir: &Path, key: CacheKey) -> std::fs::File {
    let path = lock_path(gpu_dir, key);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let file = std::fs::File::options().write(true).create(true).truncate(false).open(&path).unwrap();
    // SAFETY: the descriptor is `file`'s own, open for the call; flock reads no memory.
    assert_eq!(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }, 0);
    file
}

#[test]
fn a_holder_that_never_finishes_costs_one_budget() {
    let dir = tempfile::tempdir().unwrap();
    let config = CacheConfig::in_dir(dir.path());
    let gpu_dir = ProgramCache::<Vec<u8>>::open(gpu(), &config).gpu_dir().unwrap();
    let key = kernel_key(0);
    // A compile time known from an earlier run (10 ms) gives the shortest budget, 2 s.
    std::fs::write(gpu_dir.join(sparkle::cache::WORKING_SET_FILE), format!("{} 10000000\n", key.hex()))
        .unwrap();
    let held = hold_lock(&gpu_dir, key);
    let cache = ProgramCache::<Vec<u8>>::open(gpu(), &config);
    let source = Source::new(key, Duration::ZERO, false);
    let program = cache.get(&key, &source).unwrap();
    assert_eq!(*program, payload(key));
    let stats = cache.stats();
    assert_eq!((stats.process_waits, stats.process_waits_gave_up, stats.compiles), (1, 1, 1), "{stats:?}");
    assert!(stats.process_wait_time >= Duration::from_secs(2), "{stats:?}");
    // The lock it gave up on is the holder's: left in place.
    assert!(lock_path(&gpu_dir, key).exists());
    drop(held);
    // Held by nobody now: the next miss takes it at once and removes it after.
    let other = kernel_key(1);
    cache.get(&other, &Source::new(other, Duration::ZERO, false)).unwrap();
    assert!(!lock_path(&gpu_dir, other).exists());
    assert_eq!(cache.stats().process_waits, 1);
}

#[test]
fn lock_files_that_cannot_be_made_mean_compiling_without_them() {
    let dir = tempfile::tempdir().unwrap();
    let config = CacheConfig::in_dir(dir.path().join("cache"));
    let cache = ProgramCache::<Vec<u8>>::open(gpu(), &config);
    let gpu_dir = cache.gpu_dir().unwrap();
    // A folder at one key's lock path, a link at another's (to a file that must stay as it is).
    let (in_folder, linked, unwritable) = (kernel_key(0), kernel_key(1), kernel_key(2));
    std::fs::create_dir_all(lock_path(&gpu_dir, in_folder)).unwrap();
    let target = dir.path().join("not the cache's");
    std::fs::write(&target, b"keep").unwrap();
    std::fs::create_dir_all(lock_path(&gpu_dir, linked).parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&target, lock_path(&gpu_dir, linked)).unwrap();
    let ((), logged) = cache_support::capture(|| {
        for key in [in_folder, linked] {
            let program = cache.get(&key, &Source::new(key, Duration::ZERO, false)).unwrap();
            assert_eq!(*program, payload(key));
        }
    });
    assert!(logged.warnings().is_empty(), "{:?}", logged.warnings());
    let stats = cache.stats();
    assert_eq!((stats.compiles, stats.disk_writes, stats.process_waits), (2, 2, 0), "{stats:?}");
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    assert!(lock_path(&gpu_dir, in_folder).is_dir());
    // A shard folder this process cannot write: no lock file, no entry, still a program.
    if !is_root() {
        use std::os::unix::fs::PermissionsExt;
        let shard = lock_path(&gpu_dir, unwritable).parent().unwrap().to_path_buf();
        std::fs::create_dir_all(&shard).unwrap();
        std::fs::set_permissions(&shard, std::fs::Permissions::from_mode(0o500)).unwrap();
        let program = cache.get(&unwritable, &Source::new(unwritable, Duration::ZERO, false));
        std::fs::set_permissions(&shard, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(*program.unwrap(), payload(unwritable));
        assert!(!lock_path(&gpu_dir, unwritable).exists());
    }
}

#[test]
fn a_read_only_cache_takes_no_lock() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cache");
    let gpu_dir = ProgramCache::<Vec<u8>>::open(gpu(), &CacheConfig::in_dir(&root)).gpu_dir().unwrap();
    let key = kernel_key(0);
    // Another process holding the key's lock does not make a read-only cache wait.
    let _held = hold_lock(&gpu_dir, key);
    let before = snapshot(&root);
    let cache =
        ProgramCache::<Vec<u8>>::open(gpu(), &CacheConfig { read_only: true, ..CacheConfig::in_dir(&root) });
    assert!(cache.is_read_only());
    let program = cache.get(&key, &Source::new(key, Duration::ZERO, false)).unwrap();
    assert_eq!(*program, payload(key));
    assert_eq!(cache.stats().process_waits, 0);
    drop(cache);
    assert_eq!(snapshot(&root), before, "the read-only cache changed its folder");
}

#[test]
fn lock_files_left_by_dead_holders_do_not_pile_up() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cache");
    let cache = ProgramCache::<Vec<u8>>::open(gpu(), &CacheConfig::in_dir(&root));
    let gpu_dir = cache.gpu_dir().unwrap();
    let (reused, stale, fresh) = (kernel_key(0), kernel_key(1), kernel_key(2));
    // What holders killed before they finished leave: files no one holds.
    for key in [reused, stale, fresh] {
        drop(hold_lock(&gpu_dir, key));
    }
    // The next miss of a key takes its leftover lock at once and removes it when done.
    cache.get(&reused, &Source::new(reused, Duration::ZERO, false)).unwrap();
    assert!(!lock_path(&gpu_dir, reused).exists());
    assert_eq!(cache.stats().process_waits, 0);
    let two_hours_ago = std::time::SystemTime::now() - Duration::from_secs(2 * 3600);
    std::fs::File::options()
        .write(true)
        .open(lock_path(&gpu_dir, stale))
        .unwrap()
        .set_modified(two_hours_ago)
        .unwrap();
    // Pruning removes a stale one as it does any stale temporary file; a fresh one stays.
    let pruned = sparkle::cache::DiskStore::open(&root).prune(u64::MAX, None).unwrap();
    assert_eq!(pruned.removed_temp_files, 1, "{pruned:?}");
    assert!(!lock_path(&gpu_dir, stale).exists() && lock_path(&gpu_dir, fresh).exists());
    // Clearing removes every lock file, so the folders go too.
    let cleared = sparkle::cache::DiskStore::open(&root).clear().unwrap();
    assert!(cleared.problems.is_empty(), "{cleared:?}");
    assert!(!gpu_dir.exists(), "clear left {:?}", walk_files(&gpu_dir));
}
