//! The fleet cache tried as an attacker and as a careless operator would, against the real Redis
//! and S3-compatible servers: anyone who can write the store re-seals entries (unkeyed checksums
//! are no defence), puts a program of another interface under a key, or leaves objects that no
//! trusted key signed; an operator rotates keys and points the tier at a bucket that does not
//! exist. No case may give a wrong program or a failed run, and no key may stay stuck.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use crate::cache_support::gpu;
use crate::remote_support::Server;
use sparkle::cache::remote::{generate_key_file, parse_hex_key};
use sparkle::cache::{
    Blob, Built, CacheConfig, CacheKey, EntryHeader, Expect, GpuId, LoadFailure, ProgramCache, ProgramSource,
    RemoteConfig,
};

const FORMAT: u32 = 0x5eed;

fn fleet_gpu() -> GpuId {
    gpu("fleet gpu")
}

/// A kernel: what it computes (`text`) and its interface, as its blob says; loads anything (a
/// driver takes any well-formed blob) and checks the interface as the runtime does.
#[derive(Clone)]
struct Kernel {
    key: CacheKey,
    text: String,
    interface: String,
    compiles: Arc<AtomicUsize>,
}

impl Kernel {
    fn new(text: &str, interface: &str, compiles: &Arc<AtomicUsize>) -> Kernel {
        Kernel {
            key: CacheKey::derive(&fleet_gpu(), &[text.as_bytes()]),
            text: text.into(),
            interface: interface.into(),
            compiles: Arc::clone(compiles),
        }
    }

    fn payload(&self) -> Vec<u8> {
        format!("{}|{}", self.interface, self.text).into_bytes()
    }

    fn object(&self) -> String {
        format!("{}/{}", fleet_gpu().dir_name(), self.key.hex())
    }
}

impl ProgramSource<Vec<u8>> for Kernel {
    type Error = String;

    fn compile(&self) -> Result<Built<Vec<u8>>, String> {
        self.compiles.fetch_add(1, SeqCst);
        let bytes = self.payload();
        Ok(Built {
            program: bytes.clone(),
            blob: Some(Blob { format: FORMAT, bytes }),
            compile_time: Duration::from_millis(5),
        })
    }

    fn load(&self, blob: &Blob) -> Result<Vec<u8>, LoadFailure<String>> {
        Ok(blob.bytes.clone())
    }

    fn check_loaded(&self, program: &Vec<u8>) -> Result<(), String> {
        let declared = program.split(|&b| b == b'|').next().unwrap_or_default();
        if declared == self.interface.as_bytes() {
            Ok(())
        } else {
            Err(format!(
                "the program has `{}`, the kernel `{}`",
                String::from_utf8_lossy(declared),
                self.interface
            ))
        }
    }
}

/// An unsigned remote object as the store's format documents it (magic, version 1, kind,
/// flags 0, provenance length, payload length, then both): what anyone can write.
fn seal_unsigned(kind: u32, payload: &[u8]) -> Vec<u8> {
    let provenance = br#"{"sparkle":"0.1.0","backend":"gl","gpu":[],"created_unix_ns":1}"#;
    let mut out = b"SPRKREM\0".to_vec();
    for word in [1u32, kind, 0, provenance.len() as u32] {
        out.extend_from_slice(&word.to_le_bytes());
    }
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(provenance);
    out.extend_from_slice(payload);
    out
}

/// Re-seals `program` as the entry of `under`, with every checksum right.
fn forge(server: &Server, under: &Kernel, program: &[u8]) {
    let gpu = fleet_gpu();
    let expect = Expect { backend: gpu.backend_tag(), gpu_hash: gpu.hash(), key: under.key };
    let mut entry = EntryHeader::new(expect, FORMAT, program, 5_000_000, 1).to_bytes().to_vec();
    entry.extend_from_slice(program);
    server.put(&under.object(), &seal_unsigned(1, &entry));
}

fn machine(dir: &Path, remote: RemoteConfig) -> ProgramCache<Vec<u8>> {
    ProgramCache::open(fleet_gpu(), &CacheConfig { remote: Some(remote), ..CacheConfig::in_dir(dir) })
}

/// A lookup budget no loaded machine runs out of.
fn patient(mut config: RemoteConfig) -> RemoteConfig {
    config.budget = Some(Duration::from_secs(20));
    config
}

#[test]
fn an_unsigned_store_is_not_used_without_the_opt_in() {
    for server in Server::both() {
        let compiles = Arc::new(AtomicUsize::new(0));
        let tag = server.name();
        // A 3x3 convolution's key holding the 5x5 one: the same interface, another result.
        let wanted = Kernel::new(&format!("{tag} conv2d 3x3"), "conv2d", &compiles);
        forge(&server, &wanted, &Kernel::new("conv2d 5x5", "conv2d", &compiles).payload());
        let dir = tempfile::tempdir().unwrap();
        let cache = machine(dir.path(), patient(server.unsigned_config_at(server.addr())));
        assert_eq!(*cache.get(&wanted.key, &wanted).unwrap(), wanted.payload(), "{tag}");
        let stats = cache.stats();
        assert_eq!((stats.remote_hits, stats.compiles), (0, 1), "{tag}: {stats}");
        let problem = stats.remote_problem.unwrap_or_default();
        assert!(problem.contains("SPARKLE_CACHE_REMOTE_UNSIGNED=1"), "{tag}: {problem}");
        drop(cache);
        // Nothing was published over it either.
        assert_eq!(server.get(&wanted.object()).map(|o| o.ends_with(b"conv2d 5x5")), Some(true), "{tag}");
    }
}

#[test]
fn a_program_of_another_interface_under_a_key_is_refused_and_compiled() {
    for server in Server::both() {
        let compiles = Arc::new(AtomicUsize::new(0));
        let tag = server.name();
        // saxpy re-sealed under sgemm's key, in a store whose readers accept unsigned objects.
        let sgemm = Kernel::new(&format!("{tag} sgemm 64"), "sgemm(a,b,c)", &compiles);
        forge(&server, &sgemm, &Kernel::new("saxpy 7", "saxpy(x,y)", &compiles).payload());
        let dir = tempfile::tempdir().unwrap();
        let cache = machine(dir.path(), server.config());
        assert_eq!(*cache.get(&sgemm.key, &sgemm).unwrap(), sgemm.payload(), "{tag}: the run did not fail");
        let stats = cache.stats();
        assert_eq!(
            (stats.remote_hits, stats.remote_rejected, stats.interface_refused, stats.compiles),
            (0, 1, 1, 1),
            "{tag}: {stats}"
        );
        drop(cache);
        // Later runs without a remote load the right program from the disk.
        let local = ProgramCache::<Vec<u8>>::open(fleet_gpu(), &CacheConfig::in_dir(dir.path()));
        assert_eq!(*local.get(&sgemm.key, &sgemm).unwrap(), sgemm.payload());
        assert_eq!(local.stats().disk_hits, 1);
    }
}

#[test]
fn a_signed_fleet_refuses_re_sealed_entries_and_keeps_them_off_the_disk() {
    for server in Server::both() {
        let keys = tempfile::tempdir().unwrap();
        let key_path = keys.path().join("builder.key");
        let public = parse_hex_key(&generate_key_file(&key_path).unwrap()).unwrap();
        let compiles = Arc::new(AtomicUsize::new(0));
        let tag = server.name();
        let wanted = Kernel::new(&format!("{tag} saxpy n=100000"), "saxpy", &compiles);
        forge(&server, &wanted, &Kernel::new("saxpy n=7", "saxpy", &compiles).payload());
        let reader =
            RemoteConfig { trusted_keys: Some(vec![public]), ..server.unsigned_config_at(server.addr()) };
        let dir = tempfile::tempdir().unwrap();
        let cache = machine(dir.path(), patient(reader.clone()));
        assert_eq!(*cache.get(&wanted.key, &wanted).unwrap(), wanted.payload(), "{tag}");
        assert_eq!((cache.stats().remote_rejected, cache.stats().remote_hits), (1, 0), "{tag}");
        drop(cache);
        let local = ProgramCache::<Vec<u8>>::open(fleet_gpu(), &CacheConfig::in_dir(dir.path()));
        assert_eq!(*local.get(&wanted.key, &wanted).unwrap(), wanted.payload(), "{tag}: the disk holds ours");
        // The builder compiles it, finds the forgery in its way and replaces it: the key is
        // not stuck, and the reader is served.
        let builder_dir = tempfile::tempdir().unwrap();
        let builder = RemoteConfig { signing_key: Some(key_path.clone()), ..reader.clone() };
        let cache = machine(builder_dir.path(), patient(builder));
        cache.get(&wanted.key, &wanted).unwrap();
        drop(cache);
        let dir = tempfile::tempdir().unwrap();
        let cache = machine(dir.path(), patient(reader));
        assert_eq!(*cache.get(&wanted.key, &wanted).unwrap(), wanted.payload(), "{tag}");
        assert_eq!(cache.stats().remote_hits, 1, "{tag}: {}", cache.stats());
    }
}

#[test]
fn key_rotation_works_end_to_end() {
    for server in Server::both() {
        let keys = tempfile::tempdir().unwrap();
        let (old_path, new_path) = (keys.path().join("old.key"), keys.path().join("new.key"));
        let old = parse_hex_key(&generate_key_file(&old_path).unwrap()).unwrap();
        let new = parse_hex_key(&generate_key_file(&new_path).unwrap()).unwrap();
        let base = server.unsigned_config_at(server.addr());
        let config = |signing: Option<&Path>, trusted: Vec<[u8; 32]>| {
            patient(RemoteConfig {
                signing_key: signing.map(Path::to_path_buf),
                trusted_keys: Some(trusted),
                ..base.clone()
            })
        };
        let compiles = Arc::new(AtomicUsize::new(0));
        let tag = server.name();
        let kernels: Vec<_> =
            (0..3).map(|i| Kernel::new(&format!("{tag} rotation {i}"), "k", &compiles)).collect();
        let builder_dir = tempfile::tempdir().unwrap();
        let builder = machine(builder_dir.path(), config(Some(&old_path), vec![old]));
        for kernel in &kernels {
            builder.get(&kernel.key, kernel).unwrap();
        }
        drop(builder);
        // Readers trust both keys meanwhile; the builder moves to the new key and pushes.
        let builder = machine(builder_dir.path(), config(Some(&new_path), vec![new]));
        let pushed = builder.push(Duration::from_secs(60), &|_, _| {}).unwrap();
        let stats = builder.stats();
        assert_eq!(
            (pushed.offered, stats.remote_replaced, stats.remote_publish_errors),
            (3, 3, 0),
            "{tag}: {stats}"
        );
        drop(builder);
        // The readers drop the old key: every program is a hit.
        let before = compiles.load(SeqCst);
        let dir = tempfile::tempdir().unwrap();
        let reader = machine(dir.path(), config(None, vec![new]));
        for kernel in &kernels {
            assert_eq!(*reader.get(&kernel.key, kernel).unwrap(), kernel.payload());
        }
        assert_eq!((reader.stats().remote_hits, compiles.load(SeqCst) - before), (3, 0), "{tag}");
    }
}

#[test]
fn remote_verify_lists_refused_objects_and_fixes_them() {
    for server in Server::both() {
        let keys = tempfile::tempdir().unwrap();
        let key_path = keys.path().join("builder.key");
        let public = parse_hex_key(&generate_key_file(&key_path).unwrap()).unwrap();
        let config = patient(RemoteConfig {
            signing_key: Some(key_path),
            trusted_keys: Some(vec![public]),
            ..server.unsigned_config_at(server.addr())
        });
        let compiles = Arc::new(AtomicUsize::new(0));
        let tag = server.name();
        let good = Kernel::new(&format!("{tag} verify good"), "k", &compiles);
        let ours = Kernel::new(&format!("{tag} verify ours"), "k", &compiles);
        let stray = Kernel::new(&format!("{tag} verify stray"), "k", &compiles);
        let dir = tempfile::tempdir().unwrap();
        let cache = machine(dir.path(), config.clone());
        cache.get(&good.key, &good).unwrap();
        drop(cache);
        ProgramCache::open(fleet_gpu(), &CacheConfig::in_dir(dir.path())).get(&ours.key, &ours).unwrap();
        forge(&server, &ours, b"k|forged");
        forge(&server, &stray, b"k|forged");
        let cache = machine(dir.path(), config);
        let report = cache.remote_verify(false, false, &|_, _| {}).unwrap();
        let mine: Vec<_> =
            report.objects.iter().filter(|o| o.name.contains(&fleet_gpu().dir_name())).collect();
        let state = |kernel: &Kernel| mine.iter().find(|o| o.name == kernel.object()).map(|o| o.state);
        assert_eq!(
            (state(&good), state(&ours), state(&stray)),
            (Some("ok"), Some("refused"), Some("refused")),
            "{tag}: {report:#?}"
        );
        let fixed = cache.remote_verify(false, true, &|_, _| {}).unwrap();
        assert_eq!((fixed.replaced, fixed.refused, fixed.unreadable), (1, 0, 0), "{tag}: {fixed:#?}");
        assert!(server.get(&stray.object()).is_none(), "{tag}: the stray forgery was removed");
        let again = cache.remote_verify(false, false, &|_, _| {}).unwrap();
        assert_eq!(again.refused, 0, "{tag}: {again:#?}");
    }
}

#[test]
fn a_bucket_that_does_not_exist_is_reported_at_open() {
    let Some(s3) = crate::remote_support::s3_or_skip() else { return };
    let server = Server::S3(s3);
    let mut config = server.config();
    config.url = "s3://no-such-bucket/fleet".into();
    config.location = sparkle::cache::remote::parse_location(&config.url).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = machine(dir.path(), config);
    let status = cache.remote_status().unwrap();
    let error = status.error.unwrap_or_default();
    assert!(error.contains("no-such-bucket") && error.contains("does not exist"), "{error}");
    assert!(status.latency_ms.is_none());
}

#[test]
fn a_huge_object_and_a_forged_working_set_cost_next_to_nothing() {
    for server in Server::both() {
        let compiles = Arc::new(AtomicUsize::new(0));
        let tag = server.name();
        // 33 MiB under an entry's key: refused unread (an entry is at most 32 MiB).
        let wanted = Kernel::new(&format!("{tag} huge"), "k", &compiles);
        server.put(&wanted.object(), &vec![0x5a; 33 << 20]);
        // A working set naming 100000 programs nobody published.
        let fake: String =
            (0..100_000u128).map(|i| format!("{} 1000\n", CacheKey::from_u128(i).hex())).collect();
        let set_name = format!("{}/working-set", fleet_gpu().dir_name());
        server.put(&set_name, &seal_unsigned(3, fake.as_bytes()));
        let dir = tempfile::tempdir().unwrap();
        let cache = machine(dir.path(), server.config());
        assert_eq!(*cache.get(&wanted.key, &wanted).unwrap(), wanted.payload(), "{tag}");
        let stats = cache.stats();
        assert_eq!((stats.remote_rejected, stats.remote_hits), (1, 0), "{tag}: {stats}");
        // Only what the remote holds is fetched: the fake programs cost no request each.
        let report = cache.pull(true, &|_, _| {}).unwrap();
        assert_eq!((report.fetched, report.failed), (0, 0), "{tag}: {report:?}");
        assert!(report.missing <= 20_000, "{tag}: the working set is capped: {report:?}");
        // And a push does not merge them back.
        cache.push(Duration::from_secs(60), &|_, _| {}).unwrap();
        let pushed = server.get(&set_name).unwrap();
        assert!(pushed.len() < 4096, "{tag}: {} bytes of working set", pushed.len());
    }
}
