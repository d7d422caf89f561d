//! The cache entry reader against hostile files. The first input byte picks how the rest is used:
//! even — the rest is the whole entry file; odd — the rest is a patch script applied to a genuine
//! entry (pairs of offset and XOR byte, then an optional truncation or extension), which reaches
//! the deep checks far more often than random bytes do. Each case goes through both the header
//! parser in memory and the cache's own read path over a real file. Nothing may panic, and the
//! only payload that may ever reach a backend's `load` is the genuine one.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use sparkle::cache::{
    Blob, Built, CacheConfig, CacheKey, EntryHeader, Expect, GpuId, LoadFailure, ProgramCache, ProgramSource,
    HEADER_LEN,
};

const FORMAT: u32 = 0x875f;

struct Fixture {
    gpu: GpuId,
    key: CacheKey,
    payload: Vec<u8>,
    genuine: Vec<u8>,
    dir: tempfile::TempDir,
}

struct Source<'a>(&'a Fixture);

impl ProgramSource<Vec<u8>> for Source<'_> {
    type Error = String;

    fn compile(&self) -> Result<Built<Vec<u8>>, String> {
        let blob = Blob { format: FORMAT, bytes: self.0.payload.clone() };
        Ok(Built { program: blob.bytes.clone(), blob: Some(blob), compile_time: Duration::from_millis(3) })
    }

    fn load(&self, blob: &Blob) -> Result<Vec<u8>, LoadFailure<String>> {
        assert_eq!(blob.format, FORMAT, "a blob of another format reached load");
        assert_eq!(blob.bytes, self.0.payload, "a payload other than the genuine one reached load");
        Ok(blob.bytes.clone())
    }
}

fn memory_bounded(dir: &std::path::Path) -> CacheConfig {
    let mut config = CacheConfig::in_dir(dir);
    // Every request reads the disk: nothing stays in memory once its handle is dropped.
    config.max_memory_entries = 0;
    config
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let gpu = GpuId::new("gl", vec![("renderer".into(), "fuzz".into())]);
        let key = CacheKey::derive(&gpu, &[b"fuzz kernel"]);
        let payload: Vec<u8> = (0..200u32).map(|i| (i * 37 % 251) as u8).collect();
        let dir = tempfile::tempdir().expect("a temporary folder");
        let mut fixture = Fixture { gpu, key, payload, genuine: Vec::new(), dir };
        let cache = ProgramCache::open(fixture.gpu.clone(), &memory_bounded(fixture.dir.path()));
        drop(cache.get(&fixture.key, &Source(&fixture)).expect("the first compile"));
        fixture.genuine = std::fs::read(entry_path(&cache, fixture.key)).expect("the published entry");
        fixture
    })
}

fn entry_path(cache: &ProgramCache<Vec<u8>>, key: CacheKey) -> std::path::PathBuf {
    let hex = key.hex();
    cache.gpu_dir().expect("a disk tier").join(&hex[..2]).join(hex)
}

fn patched(genuine: &[u8], script: &[u8]) -> Vec<u8> {
    let mut bytes = genuine.to_vec();
    let mut pairs = script.chunks_exact(3);
    for pair in &mut pairs {
        let offset = usize::from(u16::from_le_bytes([pair[0], pair[1]]));
        if let Some(byte) = bytes.get_mut(offset % genuine.len()) {
            *byte ^= pair[2];
        }
    }
    match pairs.remainder() {
        [len_lo, len_hi] => bytes.resize(usize::from(u16::from_le_bytes([*len_lo, *len_hi])), 0xA5),
        [extra] => bytes.extend(std::iter::repeat_n(*extra, usize::from(*extra))),
        _ => {}
    }
    bytes
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let fixture = fixture();
    let file = if mode % 2 == 0 { rest.to_vec() } else { patched(&fixture.genuine, rest) };

    let expect =
        Expect { backend: fixture.gpu.backend_tag(), gpu_hash: fixture.gpu.hash(), key: fixture.key };
    if let Some(header_bytes) = file.first_chunk::<HEADER_LEN>() {
        let accepted = EntryHeader::parse(header_bytes, file.len() as u64).and_then(|header| {
            header.check_identity(&expect)?;
            header.check_payload(&file[HEADER_LEN..])
        });
        if accepted.is_ok() {
            assert_eq!(&file[HEADER_LEN..], &fixture.payload[..], "a foreign payload passed every check");
        }
    }

    let cache = ProgramCache::open(fixture.gpu.clone(), &memory_bounded(fixture.dir.path()));
    std::fs::write(entry_path(&cache, fixture.key), &file).expect("the entry file is written");
    let program = cache.get(&fixture.key, &Source(fixture)).expect("a hit or a compile");
    assert_eq!(&*program, &fixture.payload);
    let stats = cache.stats();
    assert_eq!(stats.disk_hits + stats.compiles, 1, "{stats:?}");
    if stats.disk_hits == 1 {
        assert_eq!(file, fixture.genuine, "an entry other than the genuine one was loaded");
    }
});
