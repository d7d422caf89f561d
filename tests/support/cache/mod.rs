//! A small in-process "compiler" for the cache tests: a source string compiles to a blob that
//! encodes its key and text, and every compile, load and drop is counted. Also: capturing the
//! cache's log lines, and snapshots of a folder tree to prove that nothing changed. Included with
//! `#[path]` by the test binaries of the cache, the fleet, reliability and the command.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use sparkle::cache::{Blob, Built, CacheKey, GpuId, LoadFailure, ProgramSource};

pub const FORMAT: u32 = 0x5eed;

pub fn gpu(name: &str) -> GpuId {
    GpuId::new("gl", vec![("renderer".into(), name.into()), ("version".into(), "1".into())])
}

pub fn key(gpu: &GpuId, text: &str) -> CacheKey {
    CacheKey::derive(gpu, &[text.as_bytes()])
}

/// What the tests count.
#[derive(Default, Debug)]
pub struct Counts {
    pub compiles: AtomicUsize,
    /// Compiles given up because the cache no longer wanted them (see `Source::racing`).
    pub abandoned: AtomicUsize,
    pub loads: AtomicUsize,
    pub drops: AtomicUsize,
    pub running: AtomicUsize,
    pub max_running: AtomicUsize,
    pub refuse_loads: std::sync::atomic::AtomicBool,
    /// Loads fail as a driver out of memory would: nothing wrong with the blob.
    pub fail_loads: std::sync::atomic::AtomicBool,
    pub next_id: AtomicU64,
}

/// A compiled program: its payload and a unique id per compile or load.
#[derive(Debug)]
pub struct Program {
    pub payload: Vec<u8>,
    pub id: u64,
    counts: Arc<Counts>,
}

impl Drop for Program {
    fn drop(&mut self) {
        self.counts.drops.fetch_add(1, SeqCst);
    }
}

/// The payload a source compiles to: the key, then the text.
pub fn payload(key: CacheKey, text: &str, size: usize) -> Vec<u8> {
    let mut out = key.hex().into_bytes();
    out.extend_from_slice(text.as_bytes());
    while out.len() < size {
        out.push((out.len() % 251) as u8);
    }
    out
}

#[derive(Clone)]
pub struct Source {
    pub key: CacheKey,
    pub text: String,
    pub counts: Arc<Counts>,
    pub sleep: Duration,
    pub fail: bool,
    pub size: usize,
    pub blob: bool,
    /// Whether a compile raced against something else stops when told to (as a backend with
    /// a compile it can stop does), checking every millisecond of its `sleep`.
    pub racing: bool,
}

impl Source {
    pub fn new(gpu: &GpuId, text: &str, counts: &Arc<Counts>) -> Self {
        Self {
            key: key(gpu, text),
            text: text.to_owned(),
            counts: Arc::clone(counts),
            sleep: Duration::ZERO,
            fail: false,
            size: 0,
            blob: true,
            racing: false,
        }
    }

    fn program(&self, payload: Vec<u8>) -> Program {
        Program { payload, id: self.counts.next_id.fetch_add(1, SeqCst), counts: Arc::clone(&self.counts) }
    }
}

impl ProgramSource<Program> for Source {
    type Error = String;

    fn compile(&self) -> Result<Built<Program>, String> {
        let now = self.counts.running.fetch_add(1, SeqCst) + 1;
        self.counts.max_running.fetch_max(now, SeqCst);
        self.counts.compiles.fetch_add(1, SeqCst);
        std::thread::sleep(self.sleep);
        self.counts.running.fetch_sub(1, SeqCst);
        if self.fail {
            return Err(format!("0:1(1): error: syntax error in `{}`", self.text));
        }
        let bytes = payload(self.key, &self.text, self.size);
        let blob = self.blob.then(|| Blob { format: FORMAT, bytes: bytes.clone() });
        Ok(Built { program: self.program(bytes), blob, compile_time: Duration::from_millis(10) })
    }

    fn compile_racing(&self, give_up: &mut dyn FnMut() -> bool) -> Result<Option<Built<Program>>, String> {
        if !self.racing {
            return self.compile().map(Some);
        }
        let started = std::time::Instant::now();
        while started.elapsed() < self.sleep {
            if give_up() {
                self.counts.abandoned.fetch_add(1, SeqCst);
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let quick = Source { sleep: Duration::ZERO, ..self.clone() };
        quick.compile().map(Some)
    }

    fn load(&self, blob: &Blob) -> Result<Program, LoadFailure<String>> {
        self.counts.loads.fetch_add(1, SeqCst);
        if self.counts.refuse_loads.load(SeqCst) {
            return Err(LoadFailure::Refused("binary format mismatch".into()));
        }
        if self.counts.fail_loads.load(SeqCst) {
            return Err(LoadFailure::Failed("GL_OUT_OF_MEMORY while loading".into()));
        }
        assert_eq!(blob.format, FORMAT, "a blob of another format reached load");
        assert_eq!(blob.bytes, payload(self.key, &self.text, self.size), "a wrong blob reached load");
        Ok(self.program(blob.bytes.clone()))
    }
}

/// Collects what the tracing subscriber writes.
#[derive(Clone, Default)]
pub struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    pub fn lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap()).lines().map(str::to_owned).collect()
    }

    pub fn warnings(&self) -> Vec<String> {
        self.lines().into_iter().filter(|l| l.contains("WARN")).collect()
    }
}

/// Runs `f` with a subscriber that records this thread's events at `level` and above.
pub fn capture_at<T>(level: tracing::Level, f: impl FnOnce() -> T) -> (T, Captured) {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(level)
        .finish();
    let out = tracing::subscriber::with_default(subscriber, f);
    (out, captured)
}

/// Runs `f` recording warnings and errors.
pub fn capture<T>(f: impl FnOnce() -> T) -> (T, Captured) {
    capture_at(tracing::Level::WARN, f)
}

/// Everything under `root` (links not followed): path → (type and mode, size, mtime, inode).
pub type Snapshot = std::collections::BTreeMap<std::path::PathBuf, (u32, u64, i64, i64, u64)>;

pub fn snapshot(root: &std::path::Path) -> Snapshot {
    use std::os::unix::fs::MetadataExt;
    let mut out = Snapshot::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                pending.push(entry.unwrap().path());
            }
        }
        out.insert(path, (meta.mode(), meta.len(), meta.mtime(), meta.mtime_nsec(), meta.ino()));
    }
    out
}

/// Whether this process runs as root, for which permissions do not stop writes.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The entry path of `source` in `gpu_dir`.
pub fn entry_path(gpu_dir: &std::path::Path, source: &Source) -> std::path::PathBuf {
    let hex = source.key.hex();
    gpu_dir.join(&hex[..2]).join(hex)
}
