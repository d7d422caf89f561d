//! A long mixed run on gl and on amdgpu-sim: thousands of dispatches of the suite's kernels in
//! several variants (different keys where the backend compiles source) and sizes, with the
//! memory tier bounded to two programs so that programs are evicted and loaded again from disk
//! all the time. Every result is checked against the CPU; resident memory and the device objects
//! alive (GL buffer and program names; GEM handles and GPU mappings of the simulated driver) are
//! sampled and must stay flat, and none may be left once the runtime is dropped. A short run
//! (10 s per backend) is part of the suite; the long ones are
//! `cargo test --release --test reliability -- --ignored --nocapture soak`
//! (`SPARKLE_SOAK_SECS`, default 180). Resident memory and GL objects are the whole process's,
//! so each soak runs in a process of its own, where no other test allocates beside it.

use std::time::{Duration, Instant};

use crate::isolated;
use sparkle::cache::CacheConfig;
use sparkle::suite::{self, Case};
use sparkle::Runtime;

const VARIANTS: u64 = 4;

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

fn case_for(state: u64) -> Box<dyn Case> {
    let size = (state >> 16) as usize;
    match state % 3 {
        0 => Box::new(suite::saxpy::Saxpy::random(1 + size % 5000, state)),
        1 => Box::new(suite::sgemm::Sgemm::random(
            1 + size % 40,
            1 + (size >> 6) % 40,
            1 + (size >> 12) % 40,
            state,
        )),
        _ => Box::new(suite::conv2d::Conv2d::random(
            suite::conv2d::Shape {
                n: 1,
                c: 1 + size % 3,
                h: 3 + (size >> 4) % 12,
                w: 3 + (size >> 8) % 12,
                k: 1 + (size >> 12) % 3,
            },
            state,
        )),
    }
}

/// How a backend under soak is opened and watched.
pub struct Backend {
    pub name: &'static str,
    pub open: Box<dyn Fn(&CacheConfig) -> Runtime>,
    /// The two kinds of device object counted, e.g. ("GL buffers", "GL programs").
    pub kinds: [&'static str; 2],
    /// How many of each are alive right now.
    pub live: Box<dyn Fn() -> [u64; 2]>,
    /// The most of each a run may hold at once (two programs in the memory tier, one in use,
    /// one dispatch's buffers, whatever the backend keeps for itself).
    pub bound: [u64; 2],
    /// What the backend made in total, for the report.
    pub made: Box<dyn Fn() -> String>,
}

#[cfg(feature = "gl")]
fn gl() -> Backend {
    use sparkle::gl::live_objects;
    Backend {
        name: "gl",
        open: Box::new(|config| Runtime::open_backend("gl", config).expect("a GL context")),
        kinds: ["GL buffers", "GL programs"],
        live: Box::new(|| [live_objects().buffers(), live_objects().programs()]),
        bound: [8, 4],
        made: Box::new(|| {
            let made = live_objects();
            format!("GL names made: {} buffers, {} programs", made.buffers_made, made.programs_made)
        }),
    }
}

#[cfg(feature = "amdgpu-sim")]
fn amdgpu_sim() -> Backend {
    use sparkle::amdgpu::sim::{AmdgpuSim, SimDriver, SimOptions, Simulated};
    use sparkle::amdgpu::{AmdgpuDevice, DeviceOptions};
    // The runtime is opened as `open_backend("amdgpu-sim", ..)` does, keeping the driver to
    // count its GEM handles and mappings. One driver per soak: the test opens one runtime.
    let driver = SimDriver::new(SimOptions::default());
    let for_open = driver.clone();
    let for_live = driver.clone();
    Backend {
        name: "amdgpu-sim",
        open: Box::new(move |config| {
            let device = AmdgpuDevice::<Simulated>::new(for_open.clone(), DeviceOptions::default())
                .expect("the simulator opens anywhere");
            Runtime::from_device::<AmdgpuSim>(device, config)
        }),
        kinds: ["GEM handles", "GPU mappings"],
        live: Box::new(move || [for_live.live_buffers() as u64, for_live.live_mappings() as u64]),
        bound: [8, 8],
        made: Box::new(move || format!("{} wave instructions simulated", driver.wave_instructions())),
    }
}

/// The soak on `backend` for `run_for`.
pub fn soak(backend: &Backend, run_for: Duration) {
    let name = backend.name;
    let dir = tempfile::tempdir().unwrap();
    let config = CacheConfig { max_memory_entries: 2, ..CacheConfig::in_dir(dir.path()) };
    let runtime = (backend.open)(&config);
    let start = Instant::now();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let (mut dispatches, mut samples) = (0u64, Vec::new());
    let mut next_sample = start;
    while start.elapsed() < run_for {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let case = case_for(state);
        let spec = case.spec().define("SPARKLE_SOAK_VARIANT", (state >> 40) % VARIANTS);
        let program = runtime.program(&spec).expect("a program");
        let verdict = suite::run_and_verify(&runtime, &program, case.as_ref()).expect("dispatch");
        assert!(verdict.passed(), "{name}: dispatch {dispatches}, {}: {verdict}", case.describe());
        dispatches += 1;
        if Instant::now() >= next_sample {
            samples.push((start.elapsed(), resident_bytes(), (backend.live)()));
            next_sample += run_for / 20;
        }
    }
    let stats = runtime.cache_stats();
    let [first_left, second_left] = (backend.live)();
    let [first_kind, second_kind] = backend.kinds;
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    let warm = samples[samples.len() / 4].1;
    let last = resident_bytes();
    let peak = samples.iter().map(|s| s.1).max().unwrap_or(0).max(last);
    let most = |i: usize| samples.iter().map(|s| s.2[i]).max().unwrap_or(0);
    eprintln!(
        "soak on {name}: {:.0} s, {dispatches} correct dispatches ({:.0}/s), {} compiles, {} disk hits, {} memory hits, {} \
         evictions, {} rejected, {} refused; RSS {:.1} MiB after the first quarter, {:.1} MiB at the end, peak \
         {:.1} MiB; {}; at most {} {first_kind} and {} {second_kind} alive, {first_left} and {second_left} at the end",
        start.elapsed().as_secs_f64(),
        dispatches as f64 / start.elapsed().as_secs_f64(),
        stats.compiles,
        stats.disk_hits,
        stats.memory_hits,
        stats.evictions,
        stats.disk_rejected,
        stats.driver_refused,
        mib(warm),
        mib(last),
        mib(peak),
        (backend.made)(),
        most(0),
        most(1),
    );
    assert!(
        stats.disk_hits > 0 && stats.evictions > 0,
        "{name}: programs were not evicted and reloaded: {stats:?}"
    );
    assert_eq!((stats.disk_rejected, stats.driver_refused), (0, 0), "{name}");
    assert!(stats.compiles <= 3 * VARIANTS, "{name}: every program is compiled once: {stats:?}");
    // The memory tier holds at most two programs (plus one in use); buffers are dropped after
    // every dispatch.
    for (at, _, live) in &samples {
        for ((alive, bound), kind) in live.iter().zip(backend.bound).zip(backend.kinds) {
            assert!(*alive <= bound, "{name}: {alive} {kind} alive at {at:?}");
        }
    }
    assert!(
        last < warm + 64 * 1024 * 1024,
        "{name}: resident memory grew from {:.1} to {:.1} MiB",
        mib(warm),
        mib(last)
    );
    drop(runtime);
    // Dropping the runtime releases what is left (on gl, the GL thread runs the deletions).
    let deadline = Instant::now() + Duration::from_secs(10);
    while (backend.live)() != [0, 0] && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!((backend.live)(), [0, 0], "{name}: {first_kind} or {second_kind} leaked");
}

#[cfg(feature = "gl")]
#[test]
fn a_short_soak_stays_flat_and_correct() {
    if isolated::ran_in_own_process(module_path!(), "a_short_soak_stays_flat_and_correct", &[]) {
        return;
    }
    soak(&gl(), Duration::from_secs(10));
}

#[cfg(feature = "gl")]
#[test]
#[ignore = "minutes long; run with --ignored"]
fn a_long_soak_stays_flat_and_correct() {
    if isolated::ran_in_own_process(module_path!(), "a_long_soak_stays_flat_and_correct", &[]) {
        return;
    }
    soak(&gl(), long_run());
}

#[cfg(feature = "amdgpu-sim")]
#[test]
fn a_short_amdgpu_sim_soak_stays_flat_and_correct() {
    if isolated::ran_in_own_process(module_path!(), "a_short_amdgpu_sim_soak_stays_flat_and_correct", &[]) {
        return;
    }
    soak(&amdgpu_sim(), Duration::from_secs(10));
}

#[cfg(feature = "amdgpu-sim")]
#[test]
#[ignore = "minutes long; run with --ignored"]
fn a_long_amdgpu_sim_soak_stays_flat_and_correct() {
    if isolated::ran_in_own_process(module_path!(), "a_long_amdgpu_sim_soak_stays_flat_and_correct", &[]) {
        return;
    }
    soak(&amdgpu_sim(), long_run());
}

fn long_run() -> Duration {
    let secs = std::env::var("SPARKLE_SOAK_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(180);
    Duration::from_secs(secs)
}
