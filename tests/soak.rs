//! A long mixed run on the gl backend: thousands of dispatches of the suite's kernels in several
//! variants (different keys) and sizes, with the memory tier bounded to two programs so that
//! programs are evicted and loaded again from disk all the time. Every result is checked against
//! the CPU; resident memory and the GL buffer and program names alive are sampled and must stay
//! flat. A short run (10 s) is part of the suite; the long one is
//! `cargo test --release --test soak -- --ignored --nocapture` (`SPARKLE_SOAK_SECS`, default 180).

#![cfg(feature = "gl")]

use std::time::{Duration, Instant};

use sparkle::cache::CacheConfig;
use sparkle::gl::live_objects;
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

/// Buffers and programs the backend holds right now.
type LiveCount = dyn Fn() -> (u64, u64);

fn gl_live() -> (u64, u64) {
    let live = live_objects();
    (live.buffers(), live.programs())
}

/// The soak on `backend` for `run_for`; `live` counts the device objects alive (GL names on gl,
/// GEM handles on amdgpu).
pub fn soak(backend: &str, run_for: Duration, live: &LiveCount) {
    let dir = tempfile::tempdir().unwrap();
    let config = CacheConfig { max_memory_entries: 2, ..CacheConfig::in_dir(dir.path()) };
    let runtime = Runtime::open_backend(backend, &config).expect("the backend opens");
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
        assert!(verdict.passed(), "dispatch {dispatches}, {}: {verdict}", case.describe());
        dispatches += 1;
        if Instant::now() >= next_sample {
            let (buffers, programs) = live();
            samples.push((start.elapsed(), resident_bytes(), buffers, programs));
            next_sample += run_for / 20;
        }
    }
    let stats = runtime.cache_stats();
    let made = live_objects();
    let (buffers_left, programs_left) = live();
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    let warm = samples[samples.len() / 4].1;
    let last = resident_bytes();
    let peak = samples.iter().map(|s| s.1).max().unwrap_or(0).max(last);
    eprintln!(
        "soak on {backend}: {:.0} s, {dispatches} correct dispatches ({:.0}/s), {} compiles, {} disk hits, {} memory hits, {} \
         evictions, {} rejected, {} refused; RSS {:.1} MiB after the first quarter, {:.1} MiB at the end, peak \
         {:.1} MiB; GL names made: {} buffers, {} programs; alive at the end: {} buffers, {} programs",
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
        made.buffers_made,
        made.programs_made,
        buffers_left,
        programs_left
    );
    assert!(stats.disk_hits > 0 && stats.evictions > 0, "programs were not evicted and reloaded: {stats:?}");
    assert_eq!((stats.disk_rejected, stats.driver_refused), (0, 0));
    assert!(stats.compiles <= 3 * VARIANTS, "every program is compiled once: {stats:?}");
    // The memory tier holds at most two programs (plus one in use); buffers are dropped after
    // every dispatch.
    for (at, _, buffers, programs) in &samples {
        assert!(*programs <= 4, "{programs} programs alive at {at:?}");
        assert!(*buffers <= 8, "{buffers} buffers alive at {at:?}");
    }
    assert!(
        last < warm + 64 * 1024 * 1024,
        "resident memory grew from {:.1} to {:.1} MiB",
        mib(warm),
        mib(last)
    );
    drop(runtime);
    // Dropping the runtime queues the deletion of what is left; the GL thread runs it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while (live_objects().buffers(), live_objects().programs()) != (0, 0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        (live_objects().buffers(), live_objects().programs()),
        (0, 0),
        "GL names leaked: {:?}",
        live_objects()
    );
}

#[test]
fn a_short_soak_stays_flat_and_correct() {
    soak("gl", Duration::from_secs(10), &gl_live);
}

#[test]
#[ignore = "minutes long; run with --ignored"]
fn a_long_soak_stays_flat_and_correct() {
    let secs = std::env::var("SPARKLE_SOAK_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(180);
    soak("gl", Duration::from_secs(secs), &gl_live);
}
