//! Recipes through the fleet tier, against real servers (Redis, moto's S3) started on 127.0.0.1,
//! on the simulated GPU (`amdgpu-sim`): a "driver update" is a new compiler identity, as in the
//! runtime's rebuild tests. Machine 1 (a cache folder) uses the suite's kernels under driver A
//! with the remote; machine 2 (a fresh folder: nothing local to rebuild from) opens under driver
//! B and rebuilds in the background from the recipes machine 1 published, and its next process
//! compiles nothing. With trusted keys, unsigned recipes and recipes signed by a foreign key are
//! refused and never built from.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::remote_support::Server;
use sparkle::amdgpu::sim::{AmdgpuSim, SimDriver, SimOptions, Simulated};
use sparkle::amdgpu::{AmdgpuDevice, DeviceOptions};
use sparkle::cache::recipe::{self, RebuildLedger};
use sparkle::cache::remote::{generate_key_file, parse_hex_key};
use sparkle::cache::{CacheConfig, CacheKey, RemoteConfig};
use sparkle::Runtime;

#[path = "../support/fake_compiler.rs"]
mod fake_compiler;
use fake_compiler::compiler;

/// A process of a machine caching in `cache`, on the simulated gfx1100 with the compiler
/// `build`, with the fleet tier `remote`.
fn open(tools: &Path, cache: &Path, build: &str, remote: &RemoteConfig) -> Runtime {
    let options = DeviceOptions { compiler: Some(compiler(tools, build)), ..DeviceOptions::default() };
    let device = AmdgpuDevice::<Simulated>::new(SimDriver::new(SimOptions::default()), options).unwrap();
    let config = CacheConfig { remote: Some(remote.clone()), ..CacheConfig::in_dir(cache) };
    Runtime::from_device::<AmdgpuSim>(device, &config)
}

/// The remote of `server`, unsigned objects allowed; a process waits for its publishes.
fn unsigned(server: &Server) -> RemoteConfig {
    RemoteConfig { exit_budget: Some(Duration::from_secs(20)), ..server.config() }
}

/// The remote of `server` trusting only `public`, signing with `key` when given.
fn signed(server: &Server, key: Option<&Path>, public: [u8; 32]) -> RemoteConfig {
    RemoteConfig {
        signing_key: key.map(Path::to_path_buf),
        trusted_keys: Some(vec![public]),
        allow_unsigned: false,
        ..unsigned(server)
    }
}

/// Machine 1's process under driver A: the suite, compiled and published; its GPU folder.
fn machine_one(tools: &Path, remote: &RemoteConfig) -> (tempfile::TempDir, String) {
    let cache = tempfile::tempdir().unwrap();
    let a = open(tools, cache.path(), "driver-a", remote);
    for spec in sparkle::suite::kernels() {
        a.program(&spec).unwrap();
    }
    // Compiled here, or fetched from what an earlier machine published.
    let stats = a.cache_stats();
    assert_eq!((stats.compiles + stats.remote_hits, stats.rebuilt), (3, 0), "{stats}");
    let folder = a.cache_dir().unwrap().file_name().unwrap().to_str().unwrap().to_owned();
    drop(a);
    (cache, folder)
}

/// Machine 2's first process under driver B: waits until its background rebuild recorded what
/// it did; returns that and the process's compiles and rebuilt programs.
fn machine_two_rebuilds(tools: &Path, cache: &Path, remote: &RemoteConfig) -> (RebuildLedger, u64, u64) {
    let b = open(tools, cache, "driver-b", remote);
    let new = b.cache_dir().unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let ledger = loop {
        if let Some(ledger) = recipe::read_ledger(&new) {
            break ledger;
        }
        assert!(Instant::now() < deadline, "no rebuild was recorded: {}", b.cache_stats());
        std::thread::sleep(Duration::from_millis(20));
    };
    let stats = b.cache_stats();
    (ledger, stats.compiles, stats.rebuilt)
}

/// A later process of machine 2 under driver B: its compiles and disk hits for the suite.
fn machine_two_next(tools: &Path, cache: &Path, remote: &RemoteConfig) -> (u64, u64) {
    let c = open(tools, cache, "driver-b", remote);
    for spec in sparkle::suite::kernels() {
        c.program(&spec).unwrap();
    }
    let stats = c.cache_stats();
    (stats.compiles, stats.disk_hits)
}

#[test]
fn a_fresh_machine_after_a_driver_update_rebuilds_from_the_fleets_recipes() {
    for server in Server::both() {
        let tools = tempfile::tempdir().unwrap();
        let remote = unsigned(&server);
        let (_one, old) = machine_one(tools.path(), &remote);
        // The recipes are on the remote, beside their entries.
        let keys = recipe::working_set(&_one.path().join(&old));
        assert_eq!(keys.len(), 3);
        for key in &keys {
            assert!(
                server.get(&format!("{old}/{}.recipe", key.hex())).is_some(),
                "{}: no recipe",
                server.name()
            );
        }

        let two = tempfile::tempdir().unwrap();
        let (ledger, compiles, rebuilt) = machine_two_rebuilds(tools.path(), two.path(), &remote);
        assert_eq!(
            (ledger.rebuilt, ledger.failed, ledger.refused),
            (3, 0, 0),
            "{}: {ledger:?}",
            server.name()
        );
        assert_eq!(ledger.from, Some(format!("fleet:{old}")));
        assert_eq!((compiles, rebuilt), (3, 3));
        assert_eq!(machine_two_next(tools.path(), two.path(), &remote), (0, 3), "{}", server.name());
    }
}

/// The names of the objects under `prefix` on `server`, and their bytes.
fn objects(server: &Server, prefix: &str) -> Vec<(String, Vec<u8>)> {
    let names: Vec<String> = match server {
        Server::Redis(redis) => redis
            .keys(&format!("sparkle:{prefix}*"))
            .unwrap()
            .into_iter()
            .map(|key| String::from_utf8(key).unwrap().trim_start_matches("sparkle:").to_owned())
            .collect(),
        Server::S3(s3) => s3
            .list(&format!("fleet/{prefix}"))
            .unwrap()
            .into_iter()
            .map(|key| key.trim_start_matches("fleet/").to_owned())
            .collect(),
    };
    names.into_iter().map(|name| (name.clone(), server.get(&name).unwrap())).collect()
}

/// Puts `objects` back as they were.
fn restore(server: &Server, objects: &[(String, Vec<u8>)]) {
    for (name, bytes) in objects {
        server.put(name, bytes);
    }
}

#[test]
fn signed_recipes_are_used_and_unsigned_or_foreign_ones_refused() {
    for server in Server::both() {
        let tag = server.name();
        let tools = tempfile::tempdir().unwrap();
        let keys = tempfile::tempdir().unwrap();
        let (ours, theirs) = (keys.path().join("ours"), keys.path().join("theirs"));
        let public = parse_hex_key(&generate_key_file(&ours).unwrap()).unwrap();
        let their_public = parse_hex_key(&generate_key_file(&theirs).unwrap()).unwrap();
        let trusting = signed(&server, None, public);

        // A machine allowing unsigned objects publishes first: unsigned recipes (kept aside).
        let (_u, old) = machine_one(tools.path(), &unsigned(&server));
        let unsigned_recipes = objects(&server, &format!("{old}/"));
        let unsigned_recipes: Vec<_> =
            unsigned_recipes.into_iter().filter(|(name, _)| name.ends_with(".recipe")).collect();
        assert_eq!(unsigned_recipes.len(), 3, "{tag}");
        // A machine signing with our key replaces what it refuses: the recipes and the device
        // filing are now signed by us.
        let (_s, _) = machine_one(tools.path(), &signed(&server, Some(&ours), public));
        let signed_filing = objects(&server, "devices/");
        assert_eq!(signed_filing.len(), 1, "{tag}: {signed_filing:?}");

        // A machine trusting our key rebuilds from them.
        let two = tempfile::tempdir().unwrap();
        let (ledger, compiles, _) = machine_two_rebuilds(tools.path(), two.path(), &trusting);
        assert_eq!((ledger.rebuilt, ledger.refused, compiles), (3, 0, 3), "{tag}: {ledger:?}");

        // Unsigned recipes under a signed filing: refused, nothing built from them.
        restore(&server, &unsigned_recipes);
        let three = tempfile::tempdir().unwrap();
        let (ledger, compiles, rebuilt) = machine_two_rebuilds(tools.path(), three.path(), &trusting);
        assert_eq!((ledger.rebuilt, ledger.refused), (0, 3), "{tag}: unsigned: {ledger:?}");
        assert_eq!((compiles, rebuilt), (0, 0), "{tag}");

        // Forged: recipes signed by a key nobody here trusts (a machine trusting only that key
        // replaced ours), under our signed filing.
        let (_f, _) = machine_one(tools.path(), &signed(&server, Some(&theirs), their_public));
        restore(&server, &signed_filing);
        let four = tempfile::tempdir().unwrap();
        let (ledger, compiles, rebuilt) = machine_two_rebuilds(tools.path(), four.path(), &trusting);
        assert_eq!((ledger.rebuilt, ledger.refused), (0, 3), "{tag}: foreign: {ledger:?}");
        assert_eq!((compiles, rebuilt), (0, 0), "{tag}");
    }
}

/// Tells a placement-history process its part: `<phase> <cache folder>`.
const HISTORY_PHASE_ENV: &str = "SPARKLE_TEST_HISTORY_PHASE";

/// Runs the placement-history `phase` over `cache` in a process of its own, with the remote
/// `url` configured in its environment: unsigned objects allowed, or only those signed by the
/// keys `trusted` (64 hex digits each, comma-separated) when given.
fn history_process(phase: &str, cache: &Path, url: &str, trusted: Option<&str>) {
    let value = format!("{phase} {}", cache.display());
    let env = [
        (HISTORY_PHASE_ENV, Some(value.as_str())),
        (sparkle::cache::remote::REMOTE_ENV, Some(url)),
        (sparkle::cache::remote::REMOTE_UNSIGNED_ENV, if trusted.is_some() { None } else { Some("1") }),
        (sparkle::cache::remote::REMOTE_BUDGET_ENV, Some("20000")),
        (sparkle::cache::remote::TRUSTED_KEYS_ENV, trusted),
        (sparkle::cache::remote::SIGNING_KEY_ENV, None),
    ];
    assert!(crate::isolated::ran_in_own_process(module_path!(), "placement_history_phase", &env));
}

/// One process of the placement-history test; run only by it.
#[test]
#[ignore = "a phase of the placement-history test, started by it in a process of its own"]
fn placement_history_phase() {
    if crate::isolated::ran_in_own_process(module_path!(), "placement_history_phase", &[]) {
        return;
    }
    let value = std::env::var(HISTORY_PHASE_ENV).expect("started by the placement-history test");
    let (phase, cache) = value.split_once(' ').unwrap();
    let tools = tempfile::tempdir().unwrap();
    let options =
        DeviceOptions { compiler: Some(compiler(tools.path(), "driver-a")), ..DeviceOptions::default() };
    let device = AmdgpuDevice::<Simulated>::new(SimDriver::new(SimOptions::default()), options).unwrap();
    let config = CacheConfig::in_dir(cache);
    let runtime = Runtime::from_device::<AmdgpuSim>(device, &config);
    let placement = sparkle::Placement::from_runtimes(vec![("sim".into(), runtime)], &config).unwrap();
    let stats = placement.stats();
    match phase {
        // Learns something on a machine of its own and saves it (locally, and to the fleet).
        "learn" => {
            assert!(!stats.history_loaded, "{stats:?}");
            for _ in 0..3 {
                placement.record(&sparkle::Workload::new("saxpy", 2e3, 12e3), 0, 0.001);
            }
            placement.save().unwrap();
            assert!(placement.stats().histories > 0);
        }
        // A new machine (an empty cache folder) starts with what the fleet learned.
        "fetch" => {
            assert!(stats.history_loaded && stats.histories > 0, "{stats:?}");
            assert!(placement.history_path().unwrap().is_file(), "kept locally");
        }
        // The fleet's history was tampered with: refused, counted, learning starts afresh.
        "refused" => {
            assert!(!stats.history_loaded, "{stats:?}");
            assert_eq!((stats.damaged_histories, stats.histories), (1, 0), "{stats:?}");
        }
        other => panic!("no phase {other}"),
    }
}

#[test]
fn the_placement_history_travels_through_the_fleet_and_is_verified() {
    let Some(redis) = crate::remote_support::redis_or_skip() else { return };
    let url = redis.url();
    let one = tempfile::tempdir().unwrap();
    history_process("learn", one.path(), &url, None);
    let two = tempfile::tempdir().unwrap();
    history_process("fetch", two.path(), &url, None);
    // A machine that trusts only a key's signatures refuses the unsigned history.
    let keys = tempfile::tempdir().unwrap();
    let public = generate_key_file(&keys.path().join("fleet")).unwrap();
    let trusting = tempfile::tempdir().unwrap();
    history_process("refused", trusting.path(), &url, Some(&public));

    // One flipped byte in the fleet's object (its envelope's checks, or the file's, refuse it).
    let keys = redis.keys("sparkle:placement/*").unwrap();
    assert_eq!(keys.len(), 1, "one history for one device set");
    let mut object = redis.get(&keys[0]).unwrap().unwrap();
    let last = object.len() - 2;
    object[last] ^= 0x20;
    redis.set(&keys[0], &object).unwrap();
    let three = tempfile::tempdir().unwrap();
    history_process("refused", three.path(), &url, None);
}

/// Recipes kept before a remote was configured reach it with `sparkle cache push`; a fresh
/// machine's `sparkle cache rebuild` (the foreground rebuild) then builds from them.
#[test]
fn pushed_recipes_serve_the_foreground_rebuild_of_a_fresh_machine() {
    // The foreground rebuild alone, without a background one beside it.
    if crate::isolated::ran_in_own_process(
        module_path!(),
        "pushed_recipes_serve_the_foreground_rebuild_of_a_fresh_machine",
        &[(sparkle::runtime::REBUILD_ENV, Some("off"))],
    ) {
        return;
    }
    for server in Server::both() {
        let tag = server.name();
        let tools = tempfile::tempdir().unwrap();
        let remote = unsigned(&server);
        // Machine 1 works without the remote, then pushes.
        let one = tempfile::tempdir().unwrap();
        let a = Runtime::from_device::<AmdgpuSim>(
            AmdgpuDevice::<Simulated>::new(
                SimDriver::new(SimOptions::default()),
                DeviceOptions {
                    compiler: Some(compiler(tools.path(), "driver-a")),
                    ..DeviceOptions::default()
                },
            )
            .unwrap(),
            &CacheConfig::in_dir(one.path()),
        );
        for spec in sparkle::suite::kernels() {
            a.program(&spec).unwrap();
        }
        drop(a);
        let pusher = open(tools.path(), one.path(), "driver-a", &remote);
        let old = pusher.cache_dir().unwrap().file_name().unwrap().to_str().unwrap().to_owned();
        let keys = recipe::working_set(&pusher.cache_dir().unwrap());
        assert!(keys.iter().all(|key| server.get(&format!("{old}/{}.recipe", key.hex())).is_none()), "{tag}");
        let pushed = pusher.fleet().push(Duration::from_secs(20), &|_, _| {}).unwrap();
        assert_eq!(pushed.local_entries, 3, "{tag}");
        drop(pusher);
        for key in &keys {
            assert!(server.get(&format!("{old}/{}.recipe", key.hex())).is_some(), "{tag}: {key} not pushed");
        }

        let two = tempfile::tempdir().unwrap();
        let b = open(tools.path(), two.path(), "driver-b", &remote);
        let report = b.rebuild_working_set(None, &mut |_| {}).unwrap();
        assert_eq!(report.from, format!("fleet:{old}"), "{tag}");
        assert_eq!((report.planned, report.rebuilt), (3, 3), "{tag}: {report:?}");
        drop(b);
        assert_eq!(machine_two_next(tools.path(), two.path(), &remote), (0, 3), "{tag}");
    }
}

/// Nine programs: the suite's kernels, each in three variants (its code objects padded with
/// zeros past their end, which a program's key covers on the simulator and its loader ignores).
fn nine_programs() -> Vec<sparkle::KernelSpec> {
    (0..3)
        .flat_map(|variant| {
            sparkle::suite::kernels().into_iter().map(move |mut spec| {
                for source in &mut spec.sources {
                    if let sparkle::KernelSource::CodeObjects { objects, .. } = source {
                        for object in objects {
                            let padded = [&object.bytes[..], &vec![0; variant * 16][..]].concat();
                            object.bytes = padded.into();
                        }
                    }
                }
                spec
            })
        })
        .collect()
}

/// A machine caching in `cache` on the simulated gfx1100 with the compiler `build`, without a
/// remote.
fn open_alone(tools: &Path, cache: &Path, build: &str) -> Runtime {
    let options = DeviceOptions { compiler: Some(compiler(tools, build)), ..DeviceOptions::default() };
    let device = AmdgpuDevice::<Simulated>::new(SimDriver::new(SimOptions::default()), options).unwrap();
    Runtime::from_device::<AmdgpuSim>(device, &CacheConfig::in_dir(cache))
}

/// The keys of `specs` under the compiler `build`, in their order: from a machine without the
/// remote, which records them in its working set.
fn keys_of(tools: &Path, build: &str, specs: &[sparkle::KernelSpec]) -> Vec<CacheKey> {
    let cache = tempfile::tempdir().unwrap();
    let machine = open_alone(tools, cache.path(), build);
    for spec in specs {
        machine.program(spec).unwrap();
    }
    let keys = recipe::working_set(&machine.cache_dir().unwrap());
    assert_eq!(keys.len(), specs.len());
    keys
}

/// What the fleet did under driver A: [`nine_programs`] first used (compiled and their recipes
/// published) in the reverse of their keys' order, and no working set pushed.
struct UsedUnderA {
    /// The cache folder of the machine that used them.
    _cache: tempfile::TempDir,
    /// Its GPU folder.
    folder: String,
    /// The programs with their keys under driver A, by key.
    by_key: Vec<(CacheKey, sparkle::KernelSpec)>,
}

impl UsedUnderA {
    fn new(tools: &Path, server: &Server, remote: &RemoteConfig) -> UsedUnderA {
        let tag = server.name();
        let specs = nine_programs();
        let mut by_key: Vec<_> = keys_of(tools, "driver-a", &specs).into_iter().zip(specs).collect();
        by_key.sort_by_key(|(key, _)| *key);
        let cache = tempfile::tempdir().unwrap();
        let a = open(tools, cache.path(), "driver-a", remote);
        for (_, spec) in by_key.iter().rev() {
            a.program(spec).unwrap();
        }
        assert_eq!(a.cache_stats().compiles, by_key.len() as u64, "{tag}");
        let folder = a.cache_dir().unwrap().file_name().unwrap().to_str().unwrap().to_owned();
        drop(a);
        assert!(
            server.get(&format!("{folder}/{}", sparkle::cache::WORKING_SET_FILE)).is_none(),
            "{tag}: a working set was pushed"
        );
        UsedUnderA { _cache: cache, folder, by_key }
    }

    /// The programs in the order the fleet first used them.
    fn first_use(&self) -> Vec<(CacheKey, sparkle::KernelSpec)> {
        let first_use: Vec<_> = self.by_key.iter().rev().cloned().collect();
        assert_ne!(first_use, self.by_key, "the order of first use must not be the keys'");
        first_use
    }
}

/// Removes the object `name` from `server`.
fn remove(server: &Server, name: &str) {
    match server {
        Server::Redis(redis) => drop(redis.del(format!("sparkle:{name}").as_bytes()).unwrap()),
        Server::S3(s3) => s3.delete(&format!("fleet/{name}")).unwrap(),
    }
}

/// Without a pushed working set, a fresh machine's rebuild from the fleet goes in the order the
/// fleet first used the programs (when their recipes were published), not by key, and builds
/// from the recipes it fetched to learn that order (removed from the remote once the first
/// program is built, the others are still built); a pushed working set still decides first. The
/// foreground rebuild's progress says the order.
#[test]
fn a_fleet_rebuild_goes_in_the_fleets_first_use_order() {
    // The foreground rebuild alone, without a background one beside it.
    if crate::isolated::ran_in_own_process(
        module_path!(),
        "a_fleet_rebuild_goes_in_the_fleets_first_use_order",
        &[(sparkle::runtime::REBUILD_ENV, Some("off"))],
    ) {
        return;
    }
    for server in Server::both() {
        let tag = server.name();
        let tools = tempfile::tempdir().unwrap();
        let remote = unsigned(&server);
        let used = UsedUnderA::new(tools.path(), &server, &remote);
        let (old, n) = (used.folder.as_str(), used.by_key.len());
        let recipes: Vec<_> = objects(&server, &format!("{old}/"))
            .into_iter()
            .filter(|(name, _)| name.ends_with(".recipe"))
            .collect();
        assert_eq!(recipes.len(), n, "{tag}");

        // A fresh machine under driver B rebuilds them; `remove_recipes`: the recipes go from
        // the remote once the first program is built.
        let rebuild = |cache: &Path, remove_recipes: bool| {
            let b = open(tools.path(), cache, "driver-b", &remote);
            let mut order = Vec::new();
            let report = b
                .rebuild_working_set(None, &mut |step| {
                    if order.is_empty() && remove_recipes {
                        recipes.iter().for_each(|(name, _)| remove(&server, name));
                    }
                    order.push(step.key);
                })
                .unwrap();
            assert_eq!(report.from, format!("fleet:{old}"), "{tag}");
            // Built here, or (after the first fresh machine) found on the remote under driver B.
            let built = report.rebuilt + report.present;
            assert_eq!((report.planned, built, report.no_recipe), (n, n, 0), "{tag}: {report:?}");
            (order, report.rebuilt)
        };
        let two = tempfile::tempdir().unwrap();
        let (order, rebuilt) = rebuild(two.path(), true);
        let first_use: Vec<_> = used.first_use().into_iter().map(|(key, _)| key).collect();
        assert_eq!(order, first_use, "{tag}: not in the order of first use");
        assert_eq!(rebuilt, n, "{tag}: every program compiled for driver B");
        restore(&server, &recipes);

        // A machine that used them in another order pushes its working set: that order wins.
        let pushed: Vec<_> = [1, 0, 3, 2, 5, 4, 7, 6, 8].iter().map(|&i| &used.by_key[i]).collect();
        let three = tempfile::tempdir().unwrap();
        let pusher = open(tools.path(), three.path(), "driver-a", &remote);
        for (_, spec) in &pushed {
            pusher.program(spec).unwrap();
        }
        pusher.fleet().push(Duration::from_secs(20), &|_, _| {}).unwrap();
        drop(pusher);
        let four = tempfile::tempdir().unwrap();
        let working_set: Vec<_> = pushed.iter().map(|(key, _)| *key).collect();
        assert_eq!(
            rebuild(four.path(), false).0,
            working_set,
            "{tag}: not in the pushed working set's order"
        );
    }
}

/// The background rebuild of a fresh machine goes in the fleet's first-use order too: the new
/// GPU folder's working set (which records each program as the rebuild builds it) lists the
/// programs in that order.
#[test]
fn the_background_rebuild_from_the_fleet_goes_in_the_fleets_first_use_order() {
    for server in Server::both() {
        let tag = server.name();
        let tools = tempfile::tempdir().unwrap();
        let remote = unsigned(&server);
        let used = UsedUnderA::new(tools.path(), &server, &remote);
        let first_use: Vec<_> = used.first_use().into_iter().map(|(_, spec)| spec).collect();
        let expected = keys_of(tools.path(), "driver-b", &first_use);

        let two = tempfile::tempdir().unwrap();
        let (ledger, compiles, rebuilt) = machine_two_rebuilds(tools.path(), two.path(), &remote);
        assert_eq!((ledger.rebuilt, ledger.failed, ledger.refused), (9, 0, 0), "{tag}: {ledger:?}");
        assert_eq!((compiles, rebuilt), (9, 9), "{tag}");
        let b = open_alone(tools.path(), two.path(), "driver-b");
        let order = recipe::working_set(&b.cache_dir().unwrap());
        assert_eq!(order, expected, "{tag}: not in the order of first use");
    }
}
