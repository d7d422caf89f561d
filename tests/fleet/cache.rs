//! The fleet cache against real servers (Redis, and moto's S3-compatible server), each started
//! by the test on 127.0.0.1: machines are cache folders sharing one remote. A second machine gets
//! remote hits and compiles nothing; poisoned, truncated, foreign and unsigned objects never
//! reach a backend's load (the test compiler asserts on every blob it is handed); a slow, dead or
//! dying remote costs compiles, never a wrong result or an error; read-only machines publish
//! nothing; several processes sharing one remote all get right programs.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::Duration;

use crate::cache_support::{self, capture, gpu, payload, Counts, Source};
use crate::isolated;
use crate::remote_support::{self, Mode, Proxy, RedisServer, Server};
use sparkle::cache::{CacheConfig, CacheStats, GpuId, ProgramCache, RemoteConfig};

impl Server {
    /// The remote configuration reaching this server at `addr` (itself, or a proxy before it).
    /// Unsigned objects are used (`SPARKLE_CACHE_REMOTE_UNSIGNED=1`): these tests are about the
    /// tier's behaviour on every store; what signing changes has tests of its own.
    pub(crate) fn config_at(&self, addr: SocketAddr) -> RemoteConfig {
        let mut config = self.unsigned_config_at(addr);
        config.allow_unsigned = true;
        config
    }

    /// As [`config_at`](Self::config_at), with nothing said about trust (the default).
    pub(crate) fn unsigned_config_at(&self, addr: SocketAddr) -> RemoteConfig {
        match self {
            Server::Redis(_) => RemoteConfig::new(&RedisServer::url_at(addr)).unwrap(),
            Server::S3(server) => {
                let mut config = RemoteConfig::new(&server.url("fleet")).unwrap();
                config.s3_endpoint = Some(format!("http://{addr}"));
                config.s3_options = vec![
                    ("aws_access_key_id".into(), remote_support::s3::ACCESS_KEY_ID.into()),
                    ("aws_secret_access_key".into(), remote_support::s3::SECRET_ACCESS_KEY.into()),
                    ("aws_region".into(), remote_support::s3::REGION.into()),
                ];
                config
            }
        }
    }

    /// The configuration [`config`](Self::config) gives for the server of kind `name` (`redis` or
    /// `s3`) at `addr`, in a process that did not start it (a worker of a multi-process test).
    pub(crate) fn config_for(name: &str, addr: SocketAddr) -> RemoteConfig {
        let mut config = match name {
            "redis" => RemoteConfig::new(&RedisServer::url_at(addr)).unwrap(),
            _ => {
                let mut config =
                    RemoteConfig::new(&format!("s3://{}/fleet", remote_support::s3::BUCKET)).unwrap();
                config.s3_endpoint = Some(format!("http://{addr}"));
                config.s3_options = vec![
                    ("aws_access_key_id".into(), remote_support::s3::ACCESS_KEY_ID.into()),
                    ("aws_secret_access_key".into(), remote_support::s3::SECRET_ACCESS_KEY.into()),
                    ("aws_region".into(), remote_support::s3::REGION.into()),
                ];
                config
            }
        };
        config.allow_unsigned = true;
        config.budget = Some(Duration::from_secs(20));
        config
    }

    /// The configuration the functional tests use: a lookup budget far above what a loaded
    /// machine could take, so that hits do not depend on timing (the hedging tests set theirs).
    pub(crate) fn config(&self) -> RemoteConfig {
        let mut config = self.config_at(self.addr());
        config.budget = Some(Duration::from_secs(20));
        config
    }

    /// The raw object of `source` on `gpu`.
    pub(crate) fn object_name(gpu: &GpuId, source: &Source) -> String {
        format!("{}/{}", gpu.dir_name(), source.key.hex())
    }

    pub(crate) fn get(&self, name: &str) -> Option<Vec<u8>> {
        match self {
            Server::Redis(server) => server.get(format!("sparkle:{name}").as_bytes()).unwrap(),
            Server::S3(server) => server.get_raw(&format!("fleet/{name}")).unwrap(),
        }
    }

    pub(crate) fn put(&self, name: &str, bytes: &[u8]) {
        match self {
            Server::Redis(server) => server.set(format!("sparkle:{name}").as_bytes(), bytes).unwrap(),
            Server::S3(server) => server.put_raw(&format!("fleet/{name}"), bytes).unwrap(),
        }
    }
}

fn machine(dir: &Path, remote: RemoteConfig) -> ProgramCache<cache_support::Program> {
    let config = CacheConfig { remote: Some(remote), ..CacheConfig::in_dir(dir) };
    ProgramCache::open(gpu("fleet gpu"), &config)
}

fn sources(counts: &Arc<Counts>, n: usize, tag: &str) -> Vec<Source> {
    (0..n)
        .map(|i| {
            let mut source = Source::new(&gpu("fleet gpu"), &format!("{tag} kernel {i}"), counts);
            source.size = 300 + 97 * i;
            source
        })
        .collect()
}

/// Gets every source and checks every program's bytes.
fn get_all(cache: &ProgramCache<cache_support::Program>, sources: &[Source]) {
    for source in sources {
        let program = cache.get(&source.key, source).unwrap();
        assert_eq!(program.payload, payload(source.key, &source.text, source.size), "{}", source.text);
    }
}

/// Machine A compiles `sources` and publishes them (dropping its cache waits for that).
fn publish_from_a(server: &Server, sources: &[Source]) -> CacheStats {
    let dir = tempfile::tempdir().unwrap();
    let cache = machine(dir.path(), server.config());
    get_all(&cache, sources);
    drop_and_stats(cache)
}

/// The statistics, taken after the publishes in flight finished.
fn drop_and_stats(cache: ProgramCache<cache_support::Program>) -> CacheStats {
    let before = cache.stats();
    drop(cache);
    before
}

#[test]
fn a_second_machine_gets_remote_hits_and_compiles_nothing() {
    for server in Server::both() {
        let counts = Arc::new(Counts::default());
        let sources = sources(&counts, 6, server.name());
        let a = publish_from_a(&server, &sources);
        assert_eq!(a.compiles, 6, "{}", server.name());
        for source in &sources {
            assert!(server.get(&Server::object_name(&gpu("fleet gpu"), source)).is_some(), "published");
        }

        let b_dir = tempfile::tempdir().unwrap();
        let b = machine(b_dir.path(), server.config());
        get_all(&b, &sources);
        let stats = b.stats();
        assert_eq!(counts.compiles.load(SeqCst), 6, "{}: machine B compiled nothing", server.name());
        assert_eq!(stats.remote_hits, 6, "{stats}");
        assert_eq!((stats.remote_rejected, stats.remote_errors), (0, 0), "{stats}");
        assert!(stats.compile_time_saved > Duration::ZERO);
        drop(b);

        // What B fetched is on its disk now: without the remote it loads from there.
        let again = ProgramCache::open(gpu("fleet gpu"), &CacheConfig::in_dir(b_dir.path()));
        get_all(&again, &sources);
        assert_eq!(again.stats().disk_hits, 6);
        assert_eq!(counts.compiles.load(SeqCst), 6);
    }
}

#[test]
fn damaged_and_foreign_objects_are_refused_once_and_compiled() {
    for server in Server::both() {
        let counts = Arc::new(Counts::default());
        let sources = sources(&counts, 4, &format!("{} damage", server.name()));
        publish_from_a(&server, &sources);
        let gpu = gpu("fleet gpu");
        let names: Vec<String> = sources.iter().map(|s| Server::object_name(&gpu, s)).collect();
        // 0: a flipped payload byte; 1: truncated; 2: another GPU's object under this key;
        // 3: garbage.
        let mut flipped = server.get(&names[0]).unwrap();
        let last = flipped.len() - 1;
        flipped[last] ^= 0x10;
        server.put(&names[0], &flipped);
        let whole = server.get(&names[1]).unwrap();
        server.put(&names[1], &whole[..whole.len() / 2]);
        let other_gpu = cache_support::gpu("another gpu");
        let foreign_dir = tempfile::tempdir().unwrap();
        let foreign_cache = ProgramCache::open(
            other_gpu.clone(),
            &CacheConfig { remote: Some(server.config()), ..CacheConfig::in_dir(foreign_dir.path()) },
        );
        let foreign_source = Source::new(&other_gpu, &sources[2].text, &counts);
        foreign_cache.get(&foreign_source.key, &foreign_source).unwrap();
        drop(foreign_cache);
        let foreign = server.get(&Server::object_name(&other_gpu, &foreign_source)).unwrap();
        server.put(&names[2], &foreign);
        server.put(&names[3], b"definitely not an entry");

        let compiles_before = counts.compiles.load(SeqCst);
        let b_dir = tempfile::tempdir().unwrap();
        let config = CacheConfig {
            remote: Some(server.config()),
            max_memory_entries: 0,
            ..CacheConfig::in_dir(b_dir.path())
        };
        let b = ProgramCache::open(gpu.clone(), &config);
        let ((), captured) = capture(|| {
            get_all(&b, &sources);
            // Asked again with nothing in memory and the disk emptied: refused keys are not fetched again.
            std::fs::remove_dir_all(b_dir.path().join(gpu.dir_name())).unwrap();
            get_all(&b, &sources);
        });
        let stats = b.stats();
        assert_eq!(stats.remote_rejected, 4, "{}: {stats}", server.name());
        assert_eq!(stats.remote_hits, 0, "{stats}");
        assert!(stats.remote_skipped >= 4, "refused keys are skipped the second time: {stats}");
        assert_eq!(counts.compiles.load(SeqCst) - compiles_before, 8, "each compiled, once per round");
        let warnings = captured.warnings();
        for source in &sources {
            let key = source.key.hex();
            assert_eq!(
                warnings.iter().filter(|w| w.contains(&key)).count(),
                1,
                "one warning per key: {warnings:#?}"
            );
        }
    }
}

#[test]
fn trusted_keys_refuse_unsigned_and_foreign_signatures() {
    for server in Server::both() {
        let keys = tempfile::tempdir().unwrap();
        let (ours, theirs) = (keys.path().join("ours"), keys.path().join("theirs"));
        let our_public = sparkle::cache::remote::generate_key_file(&ours).unwrap();
        sparkle::cache::remote::generate_key_file(&theirs).unwrap();
        let counts = Arc::new(Counts::default());
        let tag = server.name();
        let unsigned = sources(&counts, 2, &format!("{tag} unsigned"));
        let signed = sources(&counts, 2, &format!("{tag} signed"));
        let stranger = sources(&counts, 2, &format!("{tag} stranger"));
        publish_from_a(&server, &unsigned);
        let publish_signed = |key: &Path, sources: &[Source]| {
            let dir = tempfile::tempdir().unwrap();
            let mut remote = server.config();
            remote.signing_key = Some(key.to_path_buf());
            let cache = machine(dir.path(), remote);
            get_all(&cache, sources);
        };
        publish_signed(&ours, &signed);
        publish_signed(&theirs, &stranger);

        let compiles_before = counts.compiles.load(SeqCst);
        let dir = tempfile::tempdir().unwrap();
        let mut remote = server.config();
        remote.trusted_keys = Some(vec![sparkle::cache::remote::parse_hex_key(&our_public).unwrap()]);
        let b = machine(dir.path(), remote);
        get_all(&b, &unsigned);
        get_all(&b, &signed);
        get_all(&b, &stranger);
        let stats = b.stats();
        assert_eq!(stats.remote_hits, 2, "only our signed entries: {stats}");
        assert_eq!(stats.remote_rejected, 4, "{stats}");
        assert_eq!(counts.compiles.load(SeqCst) - compiles_before, 4);
    }
}

#[test]
fn a_read_only_machine_publishes_nothing() {
    for server in Server::both() {
        let counts = Arc::new(Counts::default());
        let sources = sources(&counts, 3, &format!("{} read-only", server.name()));
        let dir = tempfile::tempdir().unwrap();
        let mut remote = server.config();
        remote.read_only = true;
        let cache = machine(dir.path(), remote);
        get_all(&cache, &sources);
        let stats = drop_and_stats(cache);
        assert_eq!((stats.remote_misses, stats.remote_publishes), (3, 0), "{stats}");
        for source in &sources {
            assert!(server.get(&Server::object_name(&gpu("fleet gpu"), source)).is_none());
        }
    }
}

#[test]
fn first_writer_wins_and_nobody_overwrites() {
    for server in Server::both() {
        let counts = Arc::new(Counts::default());
        let sources = sources(&counts, 1, &format!("{} first", server.name()));
        publish_from_a(&server, &sources);
        let name = Server::object_name(&gpu("fleet gpu"), &sources[0]);
        let first = server.get(&name).unwrap();
        // A second machine compiles the same program (its lookups are skipped: read-only would
        // not publish, so it simply never asks — a remote that answers nothing in time).
        let dir = tempfile::tempdir().unwrap();
        let mut remote = server.config();
        remote.budget = Some(Duration::ZERO);
        let cache = machine(dir.path(), remote);
        get_all(&cache, &sources);
        let stats = drop_and_stats(cache);
        assert_eq!(server.get(&name).unwrap(), first, "the first object stays: {stats}");
    }
}

#[test]
fn a_slow_remote_is_hedged_by_compiling() {
    for server in Server::both() {
        let proxy = Proxy::start(server.addr()).unwrap();
        let counts = Arc::new(Counts::default());
        let sources = sources(&counts, 4, &format!("{} slow", server.name()));
        publish_from_a(&server, &sources);
        proxy.set_mode(Mode::latency(Duration::from_millis(400)));
        let mut remote = server.config_at(proxy.addr());
        remote.budget = Some(Duration::from_millis(20));
        let dir = tempfile::tempdir().unwrap();
        let compiles_before = counts.compiles.load(SeqCst);
        let b = machine(dir.path(), remote);
        get_all(&b, &sources);
        let stats = b.stats();
        assert_eq!(counts.compiles.load(SeqCst) - compiles_before, 4, "every program compiled: {stats}");
        assert!(stats.remote_hedged >= 1, "{stats}");
        assert_eq!(stats.remote_hedged + stats.remote_skipped, 4, "hedged until the breaker opened: {stats}");
        assert_eq!(stats.remote_hits, 0);
    }
}

#[test]
fn a_late_remote_answer_wins_against_a_slower_compile() {
    for server in Server::both() {
        let proxy = Proxy::start(server.addr()).unwrap();
        let counts = Arc::new(Counts::default());
        let mut sources = sources(&counts, 2, &format!("{} race", server.name()));
        publish_from_a(&server, &sources);
        let compiles_before = counts.compiles.load(SeqCst);
        let mut remote = server.config_at(proxy.addr());
        remote.budget = Some(Duration::from_millis(20));
        let dir = tempfile::tempdir().unwrap();
        let b = machine(dir.path(), remote);
        // Let the tier connect and time its requests on a fast path, then slow every answer
        // down well past the budget, though far less than the compile.
        std::thread::sleep(Duration::from_secs(2));
        proxy.set_mode(Mode::latency(Duration::from_millis(300)));
        for source in &mut sources {
            source.racing = true;
            source.sleep = Duration::from_secs(20);
        }
        let started = std::time::Instant::now();
        get_all(&b, &sources[..1]);
        let took = started.elapsed();
        let stats = b.stats();
        assert_eq!(counts.abandoned.load(SeqCst), 1, "the compile was dropped: {stats}");
        assert_eq!(counts.compiles.load(SeqCst), compiles_before, "nothing compiled to the end: {stats}");
        assert_eq!((stats.remote_hedged, stats.remote_hedges_won, stats.remote_hits), (1, 1, 1), "{stats}");
        assert_eq!(stats.compiles, 0, "{stats}");
        assert!(took < Duration::from_secs(15), "the remote's answer ended the wait: {took:?}");
        // The entry the remote won with is on this machine's disk now.
        assert_eq!(stats.disk_writes, 1, "{stats}");

        // The other way round: a compile quicker than the remote's answer is used, and the
        // answer that comes after it is not.
        sources[1].sleep = Duration::from_millis(30);
        proxy.set_mode(Mode::latency(Duration::from_secs(2)));
        // (Past a second, a lookup goes even to a remote measured slower than its budget.)
        std::thread::sleep(Duration::from_millis(1100));
        let started = std::time::Instant::now();
        get_all(&b, &sources[1..]);
        let took = started.elapsed();
        let stats = b.stats();
        assert_eq!(
            (stats.remote_lookups, stats.remote_hedged),
            (2, 2),
            "the lookup went and was raced: {stats}"
        );
        assert!(took < Duration::from_millis(1900), "the compile did not wait for the answer: {took:?}");
        assert_eq!(stats.compiles, 1, "{stats}");
        assert_eq!(counts.abandoned.load(SeqCst), 1, "{stats}");
        assert_eq!(stats.remote_hedges_won, 1, "{stats}");
    }
}

#[test]
fn a_dead_remote_costs_nothing_but_one_warning() {
    // A port nobody listens on.
    let port = remote_support::free_local_port().unwrap();
    let counts = Arc::new(Counts::default());
    let sources = sources(&counts, 8, "dead");
    for url in [format!("redis://127.0.0.1:{port}/0"), "s3://sparkle-fleet/fleet".to_owned()] {
        let mut remote = RemoteConfig::new(&url).unwrap();
        remote.allow_unsigned = true;
        remote.s3_endpoint = Some(format!("http://127.0.0.1:{port}"));
        remote.s3_options = vec![
            ("aws_access_key_id".into(), "x".into()),
            ("aws_secret_access_key".into(), "y".into()),
            ("aws_region".into(), "us-east-1".into()),
        ];
        let dir = tempfile::tempdir().unwrap();
        let compiles_before = counts.compiles.load(SeqCst);
        let (stats, captured) = capture(|| {
            let cache = machine(dir.path(), remote);
            get_all(&cache, &sources);
            drop_and_stats(cache)
        });
        assert_eq!(counts.compiles.load(SeqCst) - compiles_before, 8, "{url}");
        assert_eq!(stats.remote_hits, 0, "{stats}");
        // At most one lookup waits its budget (tens of ms) for a remote that answers nothing; the
        // others do not wait at all, or are skipped once the breaker opens. (A bound far above
        // that, for a loaded machine.)
        assert!(
            stats.remote_lookup_time < Duration::from_secs(2),
            "a dead remote is not waited for: {stats}"
        );
        let remote_warnings: Vec<_> =
            captured.warnings().into_iter().filter(|w| w.contains("remote")).collect();
        assert!(remote_warnings.len() <= 1, "{url}: at most one warning: {remote_warnings:#?}");
    }
}

#[test]
fn a_remote_dying_mid_read_costs_a_compile() {
    for server in Server::both() {
        let proxy = Proxy::start(server.addr()).unwrap();
        let counts = Arc::new(Counts::default());
        let mut sources = sources(&counts, 3, &format!("{} cut", server.name()));
        for source in &mut sources {
            source.size = 64 << 10;
        }
        publish_from_a(&server, &sources);
        let dir = tempfile::tempdir().unwrap();
        let mut remote = server.config_at(proxy.addr());
        remote.budget = Some(Duration::from_secs(20));
        let b = machine(dir.path(), remote);
        // Each answer is cut well inside its body.
        proxy.set_mode(Mode::CutAfter(4096));
        let compiles_before = counts.compiles.load(SeqCst);
        get_all(&b, &sources);
        let stats = b.stats();
        assert_eq!(stats.remote_hits, 0, "{stats}");
        assert_eq!(counts.compiles.load(SeqCst) - compiles_before, 3, "{stats}");
    }
}

const WORKER_ENV: &str = "SPARKLE_REMOTE_TEST_WORKER";
const WORKER_DIR_ENV: &str = "SPARKLE_REMOTE_TEST_DIR";
const WORKER_URL_ENV: &str = "SPARKLE_REMOTE_TEST_URL";
const FLEET_KEYS: usize = 12;

/// The role of one fleet process: three threads get every program; prints its compile count.
#[test]
fn fleet_worker_role() {
    let (Some(_), Some(dir), Some(url)) =
        (std::env::var_os(WORKER_ENV), std::env::var_os(WORKER_DIR_ENV), std::env::var(WORKER_URL_ENV).ok())
    else {
        return;
    };
    let counts = Arc::new(Counts::default());
    let sources = sources(&counts, FLEET_KEYS, "fleet");
    let mut remote = RemoteConfig::new(&url).unwrap();
    remote.allow_unsigned = true;
    // However loaded the machine, waiting for another process's compile beats compiling.
    remote.budget = Some(Duration::from_secs(20));
    let cache = machine(Path::new(&dir), remote);
    std::thread::scope(|scope| {
        for offset in 0..3 {
            let (cache, sources) = (&cache, &sources);
            scope.spawn(move || {
                for i in 0..FLEET_KEYS {
                    let source = &sources[(i + offset * 4) % FLEET_KEYS];
                    let program = cache.get(&source.key, source).unwrap();
                    assert_eq!(program.payload, payload(source.key, &source.text, source.size));
                }
            });
        }
    });
    let stats = drop_and_stats(cache);
    println!("FLEET compiles={} remote_hits={}", counts.compiles.load(SeqCst), stats.remote_hits);
}

#[test]
fn a_fleet_of_processes_shares_one_remote() {
    let Some(redis) = remote_support::redis_or_skip() else { return };
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = dirs
        .iter()
        .map(|dir| {
            Command::new(&exe)
                .args([
                    "--exact",
                    &isolated::test_name(module_path!(), "fleet_worker_role"),
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(WORKER_ENV, "1")
                .env(WORKER_DIR_ENV, dir.path())
                .env(WORKER_URL_ENV, redis.url())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let children: Vec<_> = children.into_iter().map(|child| child.wait_with_output().unwrap()).collect();
    let mut compiles = 0;
    for output in &children {
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
        let line = stdout.lines().find_map(|l| l.split_once("FLEET ")).expect("the worker reports").1;
        compiles += line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("compiles="))
            .unwrap()
            .parse::<usize>()
            .unwrap();
    }
    // All three start at once: a program is compiled by whichever process claims it first,
    // and the others wait for its entry.
    assert_eq!(compiles, FLEET_KEYS, "one compile per program across the fleet");
}

#[test]
fn a_remote_that_comes_back_is_used_again() {
    let Some(redis) = remote_support::redis_or_skip() else { return };
    let server = Server::Redis(redis);
    let counts = Arc::new(Counts::default());
    let sources = sources(&counts, 3, "comes back");
    publish_from_a(&server, &sources[1..]);
    let proxy = Proxy::start(server.addr()).unwrap();
    proxy.set_mode(Mode::Refuse);
    let mut remote = server.config_at(proxy.addr());
    remote.budget = Some(Duration::from_secs(20));
    let dir = tempfile::tempdir().unwrap();
    let b = machine(dir.path(), remote);
    // Down when the cache opened: skipped, compiled.
    get_all(&b, &sources[..1]);
    assert_eq!(b.stats().remote_hits, 0);
    // Back: after the breaker's backoff a lookup probes it, and it serves again.
    proxy.set_mode(Mode::Pass);
    std::thread::sleep(Duration::from_millis(1100));
    get_all(&b, &sources[1..]);
    let stats = b.stats();
    assert_eq!(stats.remote_hits, 2, "{stats}");
}

#[test]
fn a_shared_folder_works_as_a_remote_too() {
    let shared = tempfile::tempdir().unwrap();
    let remote = || {
        let mut config = RemoteConfig::new(&format!("file://{}", shared.path().display())).unwrap();
        config.allow_unsigned = true;
        config.budget = Some(Duration::from_secs(20));
        config
    };
    let counts = Arc::new(Counts::default());
    let sources = sources(&counts, 3, "folder");
    let a_dir = tempfile::tempdir().unwrap();
    let a = machine(a_dir.path(), remote());
    get_all(&a, &sources);
    drop(a);
    let b_dir = tempfile::tempdir().unwrap();
    let b = machine(b_dir.path(), remote());
    get_all(&b, &sources);
    let stats = b.stats();
    assert_eq!((stats.remote_hits, counts.compiles.load(SeqCst)), (3, 3), "{stats}");
    // Create-if-absent there too: a second publish of the same program leaves the first.
    let object = shared.path().join(gpu("fleet gpu").dir_name()).join(sources[0].key.hex());
    let first = std::fs::read(&object).unwrap();
    let c_dir = tempfile::tempdir().unwrap();
    let mut no_lookups = remote();
    no_lookups.budget = Some(Duration::ZERO);
    let c = machine(c_dir.path(), no_lookups);
    get_all(&c, &sources[..1]);
    drop(c);
    assert_eq!(std::fs::read(&object).unwrap(), first);
}

#[test]
fn a_slow_remote_that_became_fast_is_used_again() {
    let Some(redis) = remote_support::redis_or_skip() else { return };
    let server = Server::Redis(redis);
    let counts = Arc::new(Counts::default());
    let sources = sources(&counts, 2, "speeds up");
    publish_from_a(&server, &sources[1..]);
    let proxy = Proxy::start(server.addr()).unwrap();
    proxy.set_mode(Mode::latency(Duration::from_millis(400)));
    let mut remote = server.config_at(proxy.addr());
    remote.budget = Some(Duration::from_millis(150));
    let dir = tempfile::tempdir().unwrap();
    let b = machine(dir.path(), remote);
    // Slower than a compile: not waited for.
    get_all(&b, &sources[..1]);
    assert_eq!((b.stats().remote_hits, b.stats().remote_hedged), (0, 1));
    // The tier has measured it slow by now; then it becomes fast, and a later lookup (one goes
    // every second even to a slow remote) finds that out and hits.
    // (Its connecting requests take about 0.8 s through the proxy; ample time for a loaded machine.)
    std::thread::sleep(Duration::from_millis(2500));
    proxy.set_mode(Mode::Pass);
    get_all(&b, &sources[1..]);
    let stats = b.stats();
    assert_eq!(stats.remote_hits, 1, "{stats}");
}
