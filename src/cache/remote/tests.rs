//! The fleet tier as a whole, on a shared folder (`file://`) as its store: what a machine uses
//! from the remote and what it publishes there, whatever an attacker or a careless operator put
//! in the store. The same cases against Redis and S3 servers are in the fleet test binary.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use super::envelope::{self, Kind, Provenance};
use super::{generate_key_file, parse_hex_key, RemoteConfig};
use crate::cache::entry::{EntryHeader, Expect};
use crate::cache::{Blob, Built, CacheConfig, CacheKey, GpuId, LoadFailure, ProgramCache, ProgramSource};

const FORMAT: u32 = 0x5eed;

fn gpu() -> GpuId {
    GpuId::new("gl", vec![("renderer".into(), "fleet unit gpu".into())])
}

/// A program: what it computes (`text`) and its interface (`interface`), as its blob says.
#[derive(Clone)]
struct Source {
    key: CacheKey,
    text: String,
    interface: String,
    compiles: Arc<AtomicUsize>,
}

impl Source {
    fn new(text: &str, interface: &str, compiles: &Arc<AtomicUsize>) -> Source {
        Source {
            key: CacheKey::derive(&gpu(), &[text.as_bytes()]),
            text: text.into(),
            interface: interface.into(),
            compiles: Arc::clone(compiles),
        }
    }

    /// The blob this source compiles to.
    fn payload(&self) -> Vec<u8> {
        format!("{}|{}", self.interface, self.text).into_bytes()
    }
}

impl ProgramSource<Vec<u8>> for Source {
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
        let interface = program.split(|&b| b == b'|').next().unwrap_or_default();
        if interface == self.interface.as_bytes() {
            Ok(())
        } else {
            Err(format!(
                "it declares `{}`, the kernel `{}`",
                String::from_utf8_lossy(interface),
                self.interface
            ))
        }
    }
}

/// A shared folder as the remote, with lookups that never run out of time on a loaded machine.
fn remote(shared: &Path) -> RemoteConfig {
    let mut config = RemoteConfig::new(&format!("file://{}", shared.display())).unwrap();
    config.budget = Some(Duration::from_secs(20));
    config
}

fn unsigned(shared: &Path) -> RemoteConfig {
    RemoteConfig { allow_unsigned: true, ..remote(shared) }
}

fn machine(dir: &Path, remote: RemoteConfig) -> ProgramCache<Vec<u8>> {
    ProgramCache::open(gpu(), &CacheConfig { remote: Some(remote), ..CacheConfig::in_dir(dir) })
}

/// The object path of `key` in the shared folder.
fn object_path(shared: &Path, key: CacheKey) -> std::path::PathBuf {
    shared.join(gpu().dir_name()).join(key.hex())
}

/// An unsigned remote object that passes every check a checksum can make, holding `payload` as
/// the entry of `key`: what anyone who can write the store can make.
fn forge(shared: &Path, key: CacheKey, payload: &[u8]) {
    let gpu = gpu();
    let expect = Expect { backend: gpu.backend_tag(), gpu_hash: gpu.hash(), key };
    let mut entry = EntryHeader::new(expect, FORMAT, payload, 1_000_000, 1).to_bytes().to_vec();
    entry.extend_from_slice(payload);
    let name = format!("{}/{}", gpu.dir_name(), key.hex());
    let sealed = envelope::seal(&name, Kind::Entry, &Provenance::default(), &entry, None);
    let path = object_path(shared, key);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, sealed).unwrap();
}

thread_local! {
    /// What the test subscriber wrote on this thread while [`warnings`] records.
    static RECORDED: std::cell::RefCell<Option<Vec<u8>>> = const { std::cell::RefCell::new(None) };
}

/// Writes a log line into this thread's [`RECORDED`], when recording.
struct ThreadWriter;

impl std::io::Write for ThreadWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        RECORDED.with(|recorded| {
            if let Some(out) = recorded.borrow_mut().as_mut() {
                out.extend_from_slice(buf);
            }
        });
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `f` recording this thread's warnings. Through one global subscriber set once: a
/// subscriber per test (`with_default`) can lose lines when another thread registers a log
/// line's callsite at the same moment.
fn warnings<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let subscriber = tracing_subscriber::fmt()
            .with_writer(|| ThreadWriter)
            .with_ansi(false)
            .with_max_level(tracing::Level::WARN)
            .finish();
        // Another test binary's global subscriber cannot be here; if one is, lines go there.
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
    RECORDED.with(|recorded| *recorded.borrow_mut() = Some(Vec::new()));
    let out = f();
    let text = RECORDED.with(|recorded| recorded.borrow_mut().take()).unwrap_or_default();
    let text = String::from_utf8_lossy(&text).into_owned();
    (out, text.lines().map(str::to_owned).collect())
}

#[test]
fn without_trusted_keys_or_the_opt_in_the_remote_is_not_used() {
    let shared = tempfile::tempdir().unwrap();
    let compiles = Arc::new(AtomicUsize::new(0));
    // A 3x3 convolution's key holding a 5x5 one: same interface, another result.
    let wanted = Source::new("conv2d window 3", "conv2d", &compiles);
    let other = Source::new("conv2d window 5", "conv2d", &compiles);
    forge(shared.path(), wanted.key, &other.payload());

    let dir = tempfile::tempdir().unwrap();
    let (cache, warned) = warnings(|| machine(dir.path(), remote(shared.path())));
    assert_eq!(cache.get(&wanted.key, &wanted).unwrap().as_slice(), wanted.payload(), "no wrong program");
    let stats = cache.stats();
    assert_eq!((stats.remote.as_deref(), stats.remote_hits, stats.compiles), (None, 0, 1), "{stats}");
    let problem = stats.remote_problem.unwrap_or_default();
    for needed in ["SPARKLE_CACHE_TRUSTED_KEYS", "SPARKLE_CACHE_REMOTE_UNSIGNED=1", "chooses the GPU code"] {
        assert!(problem.contains(needed), "{problem}");
    }
    assert!(warned.iter().filter(|w| w.contains("chooses the GPU code")).count() <= 1, "{warned:#?}");
    drop(cache);
    // Nothing of the remote reached this machine's disk, and nothing was published.
    assert!(std::fs::read_dir(shared.path().join(gpu().dir_name())).unwrap().count() == 1);

    // With the opt-in the same store is used: a forged entry with the same interface is what an
    // unsigned fleet cannot tell from a real one (the guide says so).
    let dir = tempfile::tempdir().unwrap();
    let cache = machine(dir.path(), unsigned(shared.path()));
    assert_eq!(cache.get(&wanted.key, &wanted).unwrap().as_slice(), other.payload());
    assert_eq!(cache.stats().remote_hits, 1);
}

#[test]
fn a_stored_program_of_another_interface_is_refused_and_compiled_remote_and_disk() {
    let shared = tempfile::tempdir().unwrap();
    let compiles = Arc::new(AtomicUsize::new(0));
    // saxpy re-sealed under sgemm's key.
    let sgemm = Source::new("sgemm 64", "sgemm(a,b,c)", &compiles);
    let saxpy = Source::new("saxpy 7", "saxpy(x,y)", &compiles);
    forge(shared.path(), sgemm.key, &saxpy.payload());

    let dir = tempfile::tempdir().unwrap();
    let cache = machine(dir.path(), unsigned(shared.path()));
    let (program, warned) = warnings(|| cache.get(&sgemm.key, &sgemm).unwrap());
    assert_eq!(program.as_slice(), sgemm.payload(), "the refusal compiled");
    let stats = cache.stats();
    assert_eq!(
        (stats.remote_hits, stats.remote_rejected, stats.interface_refused, stats.compiles),
        (0, 1, 1, 1)
    );
    let about: Vec<_> = warned.iter().filter(|w| w.contains(&sgemm.key.hex())).collect();
    assert_eq!(about.len(), 1, "reported once: {warned:#?}");
    assert!(about[0].contains("saxpy(x,y)") && about[0].contains("does not match"), "{about:?}");
    drop(program);
    drop(cache);

    // The disk tier takes the same path: an entry of another interface on disk (written here by
    // a source that compiles saxpy under sgemm's key) is removed, compiled and replaced.
    let dir = tempfile::tempdir().unwrap();
    let local = CacheConfig::in_dir(dir.path());
    let wrong = Source { key: sgemm.key, ..saxpy.clone() };
    ProgramCache::open(gpu(), &local).get(&wrong.key, &wrong).unwrap();
    let cache = ProgramCache::<Vec<u8>>::open(gpu(), &local);
    assert_eq!(cache.get(&sgemm.key, &sgemm).unwrap().as_slice(), sgemm.payload());
    let stats = cache.stats();
    assert_eq!((stats.disk_hits, stats.interface_refused, stats.compiles, stats.disk_writes), (0, 1, 1, 1));
    let again = ProgramCache::<Vec<u8>>::open(gpu(), &local);
    assert_eq!(again.get(&sgemm.key, &sgemm).unwrap().as_slice(), sgemm.payload());
    assert_eq!((again.stats().disk_hits, again.stats().interface_refused), (1, 0), "the entry was replaced");
}

#[test]
fn trusted_keys_refuse_forged_entries_and_a_reader_without_a_signing_key_publishes_nothing() {
    let shared = tempfile::tempdir().unwrap();
    let keys = tempfile::tempdir().unwrap();
    let public = parse_hex_key(&generate_key_file(&keys.path().join("key")).unwrap()).unwrap();
    let compiles = Arc::new(AtomicUsize::new(0));
    let wanted = Source::new("saxpy n=100000", "saxpy", &compiles);
    let fresh = Source::new("saxpy n=5", "saxpy", &compiles);
    forge(shared.path(), wanted.key, &Source::new("saxpy n=7", "saxpy", &compiles).payload());

    let dir = tempfile::tempdir().unwrap();
    let config = RemoteConfig { trusted_keys: Some(vec![public]), ..remote(shared.path()) };
    let (cache, warned) = warnings(|| machine(dir.path(), config));
    let publishes_nothing: Vec<_> = warned.iter().filter(|w| w.contains("publishes nothing")).collect();
    assert_eq!(publishes_nothing.len(), 1, "{warned:#?}");
    assert_eq!(cache.get(&wanted.key, &wanted).unwrap().as_slice(), wanted.payload());
    assert_eq!(cache.get(&fresh.key, &fresh).unwrap().as_slice(), fresh.payload());
    let stats = cache.stats();
    assert_eq!((stats.remote_rejected, stats.remote_hits, stats.compiles), (1, 0, 2), "{stats}");
    drop(cache);
    assert!(!object_path(shared.path(), fresh.key).exists(), "an unsigned entry was published");
    assert!(!object_path(shared.path(), fresh.key).with_extension("lease").exists());

    // The signing machine publishes signed entries, which the reader then uses.
    let builder_dir = tempfile::tempdir().unwrap();
    let signing = RemoteConfig {
        trusted_keys: Some(vec![public]),
        signing_key: Some(keys.path().join("key")),
        ..remote(shared.path())
    };
    let builder = machine(builder_dir.path(), signing);
    builder.get(&fresh.key, &fresh).unwrap();
    drop(builder);
    let dir = tempfile::tempdir().unwrap();
    let reader =
        machine(dir.path(), RemoteConfig { trusted_keys: Some(vec![public]), ..remote(shared.path()) });
    assert_eq!(reader.get(&fresh.key, &fresh).unwrap().as_slice(), fresh.payload());
    assert_eq!(reader.stats().remote_hits, 1);
}

#[test]
fn a_public_key_as_signing_key_is_refused_with_a_message_saying_so() {
    let shared = tempfile::tempdir().unwrap();
    let keys = tempfile::tempdir().unwrap();
    let public = generate_key_file(&keys.path().join("key")).unwrap();
    let pub_file = keys.path().join("key.pub");
    std::fs::write(&pub_file, format!("{public}\n")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = RemoteConfig { signing_key: Some(pub_file), ..remote(shared.path()) };
    let cache = machine(dir.path(), config);
    let problem = cache.stats().remote_problem.unwrap_or_default();
    assert!(problem.contains("SPARKLE_CACHE_SIGNING_KEY") && problem.contains("secret key"), "{problem}");
}

#[test]
fn the_working_set_and_the_driver_archive_need_a_trusted_signature() {
    let shared = tempfile::tempdir().unwrap();
    let keys = tempfile::tempdir().unwrap();
    let public = parse_hex_key(&generate_key_file(&keys.path().join("key")).unwrap()).unwrap();
    let gpu = gpu();
    let folder = shared.path().join(gpu.dir_name());
    std::fs::create_dir_all(&folder).unwrap();
    // An unsigned working set naming many programs, and an unsigned driver archive.
    let fake: String = (0..1000u128).map(|i| format!("{} 1000\n", CacheKey::from_u128(i).hex())).collect();
    let name = format!("{}/{}", gpu.dir_name(), crate::cache::WORKING_SET_FILE);
    std::fs::write(
        folder.join(crate::cache::WORKING_SET_FILE),
        envelope::seal(&name, Kind::WorkingSet, &Provenance::default(), fake.as_bytes(), None),
    )
    .unwrap();
    let name = format!("{}/driver-gl.tar.gz", gpu.dir_name());
    std::fs::write(
        folder.join("driver-gl.tar.gz"),
        envelope::seal(&name, Kind::DriverArchive, &Provenance::default(), b"tar", None),
    )
    .unwrap();

    let trusted = RemoteConfig { trusted_keys: Some(vec![public]), ..remote(shared.path()) };
    let tier = super::RemoteTier::open(&gpu, &trusted).unwrap();
    let err = tier.fetch_working_set(Duration::from_secs(20)).unwrap_err();
    assert!(err.contains("not signed"), "{err}");
    let err = tier
        .background()
        .fetch_object("driver-gl.tar.gz", Kind::DriverArchive, 1 << 20, Duration::from_secs(20))
        .unwrap_err();
    assert!(err.contains("not signed"), "{err}");
    drop(tier);

    // A pull with trusted keys fetches none of the working set's programs and says so.
    let dir = tempfile::tempdir().unwrap();
    let cache =
        machine(dir.path(), RemoteConfig { trusted_keys: Some(vec![public]), ..remote(shared.path()) });
    let report = cache.pull(true, &|_, _| {}).unwrap();
    assert_eq!((report.wanted, report.rejected), (0, 1), "{report:?}");
    drop(cache);

    // A signing machine's push replaces the forged set with its own, which then passes.
    let builder_dir = tempfile::tempdir().unwrap();
    let signing = RemoteConfig {
        trusted_keys: Some(vec![public]),
        signing_key: Some(keys.path().join("key")),
        ..remote(shared.path())
    };
    let compiles = Arc::new(AtomicUsize::new(0));
    let source = Source::new("working set program", "k", &compiles);
    let builder = machine(builder_dir.path(), signing.clone());
    builder.get(&source.key, &source).unwrap();
    let pushed = builder.push(Duration::from_secs(20), &|_, _| {}).unwrap();
    assert!(!pushed.working_set_failed);
    assert!(machine(dir.path(), RemoteConfig { trusted_keys: Some(vec![public]), ..remote(shared.path()) })
        .push(Duration::from_secs(1), &|_, _| {})
        .unwrap_err()
        .contains("no signing key"));
    drop(builder);
    let tier = super::RemoteTier::open(&gpu, &signing).unwrap();
    let set = tier.fetch_working_set(Duration::from_secs(20)).unwrap().unwrap();
    assert_eq!(
        set.iter().map(|(key, _)| *key).collect::<Vec<_>>(),
        vec![source.key],
        "forged keys not merged"
    );
}

#[test]
fn a_password_in_the_url_is_never_shown() {
    const SECRET: &str = "hunter2-fleet-secret";
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("redis://:{SECRET}@127.0.0.1:{port}/0");
    let compiles = Arc::new(AtomicUsize::new(0));
    let source = Source::new("secret test", "k", &compiles);
    let mut shown = Vec::new();

    let dir = tempfile::tempdir().unwrap();
    let config = RemoteConfig { allow_unsigned: true, ..RemoteConfig::new(&url).unwrap() };
    shown.push(format!("{config:?}"));
    let cache = machine(dir.path(), config.clone());
    let ((), warned) = warnings(|| {
        cache.get(&source.key, &source).unwrap();
    });
    shown.extend(warned);
    let stats = cache.stats();
    shown.push(stats.to_string());
    shown.push(serde_json::to_string(&stats).unwrap());
    shown.push(serde_json::to_string(&cache.remote_status()).unwrap());
    shown.push(format!("{:?}", cache.pull(false, &|_, _| {})));
    shown.push(format!("{:?}", cache.push(Duration::from_secs(1), &|_, _| {})));
    assert!(
        shown.iter().any(|text| text.contains(&format!("127.0.0.1:{port}"))),
        "the remote is named: {shown:#?}"
    );
    drop(cache);

    // A configuration that cannot be used names the remote without its password, too.
    let unusable = RemoteConfig { signing_key: Some(dir.path().join("missing")), ..config };
    shown.push(machine(dir.path(), unusable).stats().remote_problem.unwrap_or_default());
    let from_env = CacheConfig::from_lookup(|name| match name {
        "SPARKLE_CACHE_REMOTE" => Some(format!("redis://:{SECRET}@")),
        _ => None,
    })
    .unwrap();
    shown.push(from_env.remote_problem.unwrap_or_default());
    for text in &shown {
        assert!(!text.contains(SECRET), "the password shows: {text}");
    }
}

/// A port on 127.0.0.1 where nothing listens (bound, then released).
fn dead_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn s3_at(endpoint_option: (&str, String)) -> RemoteConfig {
    let mut config = RemoteConfig::new("s3://sparkle-fleet/prefix").unwrap();
    config.allow_unsigned = true;
    config.s3_options = vec![
        ("aws_access_key_id".into(), "test".into()),
        ("aws_secret_access_key".into(), "test".into()),
        ("aws_region".into(), "us-east-1".into()),
        (endpoint_option.0.into(), endpoint_option.1),
    ];
    config
}

#[test]
fn the_standard_endpoint_variable_takes_http_and_a_bad_one_is_named() {
    // `aws_endpoint_url` is the key the AWS_ENDPOINT_URL variable sets: an http:// endpoint
    // reaches the network (connection refused here), not a client that refuses plain HTTP.
    let port = dead_port();
    let tier =
        super::RemoteTier::open(&gpu(), &s3_at(("aws_endpoint_url", format!("http://127.0.0.1:{port}"))))
            .unwrap();
    let err = tier.ping(Duration::from_secs(20)).unwrap_err().to_string();
    assert!(!err.contains("builder error"), "{err}");
    assert!(err.contains(&port.to_string()) || err.to_lowercase().contains("connect"), "{err}");
    drop(tier);
    for bad in ["garbage", "http://", "http://host name:9000"] {
        let err = super::RemoteTier::open(&gpu(), &s3_at(("aws_endpoint_url", bad.into()))).err().unwrap();
        assert!(
            err.contains("S3 endpoint")
                && err.contains("AWS_ENDPOINT_URL")
                && err.contains("http://127.0.0.1:9000"),
            "{err}"
        );
    }
}

#[test]
fn a_folder_that_cannot_be_written_is_reported_at_open() {
    use std::os::unix::fs::PermissionsExt;
    let shared = tempfile::tempdir().unwrap();
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        // Permissions do not stop root: a folder where the check's object must go does.
        std::fs::create_dir(shared.path().join(".sparkle-write-check")).unwrap();
    }
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = machine(dir.path(), unsigned(shared.path()));
    let status = cache.remote_status().unwrap();
    assert_eq!(status.writable, Some(false), "{status:?}");
    assert!(!status.write_error.unwrap_or_default().is_empty());
    let compiles = Arc::new(AtomicUsize::new(0));
    let source = Source::new("unwritable", "k", &compiles);
    cache.get(&source.key, &source).unwrap();
    let stats = cache.stats();
    drop(cache);
    assert_eq!((stats.remote_publishes, stats.remote_publish_errors), (0, 0), "nothing was tried: {stats}");
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A machine that signs with `key` and trusts `trusted`.
fn signing(shared: &Path, key: &Path, trusted: &[[u8; 32]]) -> RemoteConfig {
    RemoteConfig {
        signing_key: Some(key.to_path_buf()),
        trusted_keys: Some(trusted.to_vec()),
        ..remote(shared)
    }
}

fn reader(shared: &Path, trusted: &[[u8; 32]]) -> RemoteConfig {
    RemoteConfig { trusted_keys: Some(trusted.to_vec()), ..remote(shared) }
}

#[test]
fn key_rotation_replaces_what_the_dropped_key_signed() {
    let shared = tempfile::tempdir().unwrap();
    let keys = tempfile::tempdir().unwrap();
    let (old_path, new_path) = (keys.path().join("old"), keys.path().join("new"));
    let old = parse_hex_key(&generate_key_file(&old_path).unwrap()).unwrap();
    let new = parse_hex_key(&generate_key_file(&new_path).unwrap()).unwrap();
    let compiles = Arc::new(AtomicUsize::new(0));
    let sources: Vec<_> = (0..3).map(|i| Source::new(&format!("rotated {i}"), "k", &compiles)).collect();
    // 1. The builder signs with the old key.
    let builder_dir = tempfile::tempdir().unwrap();
    let builder = machine(builder_dir.path(), signing(shared.path(), &old_path, &[old]));
    for source in &sources {
        builder.get(&source.key, source).unwrap();
    }
    drop(builder);
    // 2. The readers trust both keys; the builder signs with the new one and pushes: every
    //    object signed with the old key fails the builder's own check and is replaced.
    let builder = machine(builder_dir.path(), signing(shared.path(), &new_path, &[new]));
    let pushed = builder.push(Duration::from_secs(20), &|_, _| {}).unwrap();
    assert_eq!((pushed.offered, pushed.unfinished), (3, 0));
    let stats = builder.stats();
    assert_eq!(
        (stats.remote_replaced, stats.remote_publishes, stats.remote_publish_existing),
        (3, 0, 0),
        "{stats}"
    );
    drop(builder);
    // 3. The readers drop the old key: everything is a hit, nothing compiles.
    let compiled_before = compiles.load(SeqCst);
    let dir = tempfile::tempdir().unwrap();
    let cache = machine(dir.path(), reader(shared.path(), &[new]));
    for source in &sources {
        assert_eq!(cache.get(&source.key, source).unwrap().as_slice(), source.payload());
    }
    let stats = cache.stats();
    assert_eq!((stats.remote_hits, stats.remote_rejected), (3, 0), "{stats}");
    assert_eq!(compiles.load(SeqCst), compiled_before);
    // A second push finds nothing to replace.
    let builder = machine(builder_dir.path(), signing(shared.path(), &new_path, &[new]));
    builder.push(Duration::from_secs(20), &|_, _| {}).unwrap();
    assert_eq!((builder.stats().remote_replaced, builder.stats().remote_publish_existing), (0, 3));
}

#[test]
fn a_refused_object_is_replaced_by_the_machine_that_compiled_it() {
    let shared = tempfile::tempdir().unwrap();
    let keys = tempfile::tempdir().unwrap();
    let key_path = keys.path().join("key");
    let public = parse_hex_key(&generate_key_file(&key_path).unwrap()).unwrap();
    let compiles = Arc::new(AtomicUsize::new(0));
    let wanted = Source::new("stuck key", "k", &compiles);
    forge(shared.path(), wanted.key, &Source::new("another program", "k", &compiles).payload());
    let dir = tempfile::tempdir().unwrap();
    let builder = machine(dir.path(), signing(shared.path(), &key_path, &[public]));
    assert_eq!(builder.get(&wanted.key, &wanted).unwrap().as_slice(), wanted.payload());
    let stats = builder.stats();
    drop(builder);
    assert_eq!(stats.remote_rejected, 1, "{stats}");
    let dir = tempfile::tempdir().unwrap();
    let cache = machine(dir.path(), reader(shared.path(), &[public]));
    assert_eq!(cache.get(&wanted.key, &wanted).unwrap().as_slice(), wanted.payload());
    assert_eq!(cache.stats().remote_hits, 1, "the key is not stuck: {}", cache.stats());
}

#[test]
fn remote_verify_lists_every_refusal_and_fixes_them() {
    let shared = tempfile::tempdir().unwrap();
    let keys = tempfile::tempdir().unwrap();
    let key_path = keys.path().join("key");
    let public = parse_hex_key(&generate_key_file(&key_path).unwrap()).unwrap();
    let compiles = Arc::new(AtomicUsize::new(0));
    let good = Source::new("good", "k", &compiles);
    let forged_with_local = Source::new("forged, compiled here", "k", &compiles);
    let forged_only = Source::new("forged, nowhere else", "k", &compiles);
    let dir = tempfile::tempdir().unwrap();
    let config = signing(shared.path(), &key_path, &[public]);
    let builder = machine(dir.path(), config.clone());
    builder.get(&good.key, &good).unwrap();
    drop(builder);
    // The local disk has this one; the remote gets a forgery of both.
    ProgramCache::open(gpu(), &CacheConfig::in_dir(dir.path()))
        .get(&forged_with_local.key, &forged_with_local)
        .unwrap();
    forge(shared.path(), forged_with_local.key, b"k|something else");
    forge(shared.path(), forged_only.key, b"k|something else");
    let folder = shared.path().join(gpu().dir_name());
    std::fs::write(folder.join(format!("{}.lease", good.key.hex())), "123").unwrap();
    std::fs::write(folder.join("notes.txt"), "an operator's file").unwrap();

    let cache = machine(dir.path(), config);
    let report = cache.remote_verify(false, false, &|_, _| {}).unwrap();
    let state = |report: &crate::cache::RemoteVerifyReport, key: CacheKey| {
        report.objects.iter().find(|o| o.name.ends_with(&key.hex())).map(|o| o.state).unwrap_or("missing")
    };
    assert_eq!((report.accepted, report.refused, report.unreadable), (1, 2, 0), "{report:#?}");
    assert_eq!((state(&report, good.key), state(&report, forged_only.key)), ("ok", "refused"));
    let refused = report.objects.iter().find(|o| o.state == "refused").unwrap();
    assert!(refused.detail.contains("not signed"), "{refused:?}");
    assert!(
        report.objects.iter().any(|o| o.state == "lease")
            && report.objects.iter().any(|o| o.state == "other")
    );

    let fixed = cache.remote_verify(false, true, &|_, _| {}).unwrap();
    assert_eq!((fixed.replaced, fixed.removed, fixed.refused), (1, 1, 0), "{fixed:#?}");
    assert!(folder.join("notes.txt").exists(), "what Sparkle does not write is left alone");
    let again = cache.remote_verify(false, false, &|_, _| {}).unwrap();
    assert_eq!((again.accepted, again.refused), (2, 0), "{again:#?}");
    // A reader now gets the replaced entry.
    let reader_dir = tempfile::tempdir().unwrap();
    let reader_cache = machine(reader_dir.path(), reader(shared.path(), &[public]));
    assert_eq!(
        reader_cache.get(&forged_with_local.key, &forged_with_local).unwrap().as_slice(),
        forged_with_local.payload()
    );
    assert_eq!(reader_cache.stats().remote_hits, 1);
    // A reader may not fix.
    assert!(reader_cache.remote_verify(false, true, &|_, _| {}).unwrap_err().contains("--fix"));
}

/// The connection starts while the backend opens, and the tier is built when the open ended:
/// on a busy machine hundreds of milliseconds later. The first round-trip estimate was that whole
/// wait (halved), and the timed request after it only brought it down by three quarters: every
/// lookup of a near remote then counted as slower than its budget and compiled at once (12
/// processes starting together on an H200 compiled 8-16 times per round for 3 kernels, against
/// 3 since). The estimate is now the time connecting took.
#[test]
fn a_connection_made_while_the_backend_opened_is_timed_by_itself() {
    let (dir, store) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut remote = RemoteConfig::new(&format!("file://{}", store.path().display())).unwrap();
    remote.allow_unsigned = true;
    super::preconnect(Some(&remote));
    // The backend's open, which connecting overlaps.
    std::thread::sleep(Duration::from_secs(2));
    let cache = machine(dir.path(), remote);
    let tier = cache.remote().expect("a remote tier").background();
    assert!(
        matches!(tier.probe(Duration::from_secs(20)), super::tier::Probe::Ready(_)),
        "the folder answers"
    );
    let estimate = tier.round_trip_estimate();
    assert!(estimate < Duration::from_millis(100), "a local folder's round trip estimated at {estimate:?}");
}

#[test]
fn a_process_that_only_reads_sends_no_write_check() {
    let shared = tempfile::tempdir().unwrap();
    let check = shared.path().join(".sparkle-write-check");
    let compiles = Arc::new(AtomicUsize::new(0));
    let source = Source::new("read only", "k", &compiles);
    let builder = machine(tempfile::tempdir().unwrap().path(), unsigned(shared.path()));
    builder.get(&source.key, &source).unwrap();
    drop(builder);
    assert!(object_path(shared.path(), source.key).exists(), "the builder published");
    let _ = std::fs::remove_file(&check);

    // A warm machine: a remote hit, nothing to write. Its write check would have gone right
    // after its first requests; the folder is watched for a while.
    let dir = tempfile::tempdir().unwrap();
    let reader = machine(dir.path(), unsigned(shared.path()));
    reader.get(&source.key, &source).unwrap();
    assert_eq!((reader.stats().remote_hits, compiles.load(SeqCst)), (1, 1));
    let watched = std::time::Instant::now();
    while watched.elapsed() < Duration::from_secs(1) {
        assert!(!check.exists(), "a machine that only read sent a write check");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Asked for (as `sparkle info` and `cache remote` do), it goes.
    assert_eq!(reader.remote_status().unwrap().writable, Some(true));
    assert!(check.exists());
}

/// Waits (bounded) until `done` holds; whether it did.
fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    done()
}

#[test]
fn while_the_driver_caches_come_a_miss_is_looked_up_and_its_lease_claimed_before_anyone_asks() {
    let shared = tempfile::tempdir().unwrap();
    let config = unsigned(shared.path());
    let first = super::RemoteTier::open(&gpu(), &config).unwrap();
    let key = CacheKey::derive(&gpu(), &[b"early"]);
    let lease = shared.path().join(gpu().dir_name()).join(format!("{}.lease", key.hex()));

    // Nothing is fetched: nothing goes early.
    first.look_up_early(key, true);
    std::thread::sleep(Duration::from_millis(100));
    assert!(!lease.exists(), "no driver caches are fetched, so no lease is claimed early");

    // A machine's first process, while its driver caches are fetched.
    let later = std::time::Instant::now() + Duration::from_secs(3600);
    first.set_driver_folders(super::driver_archive::DriverFolders::fetching_until(shared.path(), later));
    assert!(first.driver_caches_pending());
    first.look_up_early(key, true);
    assert!(eventually(|| lease.exists()), "the lease is claimed before the lookup is asked for");

    // Another machine now finds the program missing and its compile taken.
    let other = super::RemoteTier::open(&gpu(), &config).unwrap();
    assert!(matches!(other.lookup(key), super::RemoteLookup::Miss));
    assert!(matches!(other.claim_within(key), Ok(super::Claim::Theirs)));

    // The first process's own lookup and claim take the early answers: the lease is its own.
    assert!(matches!(first.lookup(key), super::RemoteLookup::Miss));
    let claim = match first.claim_within(key) {
        Ok(claim) => claim,
        Err(_) => panic!("the early claim's answer was there"),
    };
    let super::Claim::Mine(held) = claim else { panic!("the early claim holds the lease") };
    first.release(held);
    assert!(eventually(|| !lease.exists()), "released");
}

#[test]
fn an_early_claim_nobody_takes_is_released() {
    let shared = tempfile::tempdir().unwrap();
    let config = unsigned(shared.path());
    let tier = super::RemoteTier::open(&gpu(), &config).unwrap();
    let later = std::time::Instant::now() + Duration::from_secs(3600);
    tier.set_driver_folders(super::driver_archive::DriverFolders::fetching_until(shared.path(), later));
    let lease_of = |key: CacheKey| shared.path().join(gpu().dir_name()).join(format!("{}.lease", key.hex()));

    // The program came from this machine's disk meanwhile.
    let found_on_disk = CacheKey::derive(&gpu(), &[b"found on disk"]);
    tier.look_up_early(found_on_disk, true);
    assert!(eventually(|| lease_of(found_on_disk).exists()));
    tier.forget_early(found_on_disk);
    assert!(eventually(|| !lease_of(found_on_disk).exists()), "a forgotten claim's lease is released");

    // Another process of this machine holds the turn: the lookup goes early, the claim does not.
    let turn_elsewhere = CacheKey::derive(&gpu(), &[b"turn elsewhere"]);
    tier.look_up_early(turn_elsewhere, false);
    assert!(matches!(tier.lookup(turn_elsewhere), super::RemoteLookup::Miss));
    assert!(!lease_of(turn_elsewhere).exists());

    // The key was refused meanwhile, so the lookup is skipped and the program compiled without
    // the fleet: the lease claimed for it is released.
    let refused = CacheKey::derive(&gpu(), &[b"refused meanwhile"]);
    tier.look_up_early(refused, true);
    assert!(eventually(|| lease_of(refused).exists()));
    tier.reject(refused, "refused for the test");
    assert!(matches!(tier.lookup(refused), super::RemoteLookup::Skipped));
    assert!(eventually(|| !lease_of(refused).exists()), "a skipped lookup's early lease is released");

    // The process ends before asking: its lease goes with it.
    let never_asked = CacheKey::derive(&gpu(), &[b"never asked"]);
    tier.look_up_early(never_asked, true);
    assert!(eventually(|| lease_of(never_asked).exists()));
    drop(tier);
    assert!(!lease_of(never_asked).exists(), "released before the tier closed");
}
