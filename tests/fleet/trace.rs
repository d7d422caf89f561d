//! The fleet tier in a timeline (`sparkle::trace`), against a real Redis on 127.0.0.1: the
//! machine that compiles shows its remote miss, the compile and the publishes; the next machine
//! shows its remote hit and the program's load, and no compile.

use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::Duration;

use crate::cache_support::{self, gpu, Counts, Source};
use crate::remote_support;
use sparkle::cache::{CacheConfig, ProgramCache, RemoteConfig};
use sparkle::trace::check::check;

#[test]
fn a_trace_shows_the_remote_lookup_the_compile_and_the_publish() {
    let Some(redis) = remote_support::redis_or_skip() else { return };
    let mut remote = RemoteConfig::new(&redis.url()).unwrap();
    // Unsigned objects: this test is about the timeline, signing has tests of its own. A budget
    // far above what a loaded machine takes, so the hit does not depend on timing.
    remote.allow_unsigned = true;
    remote.budget = Some(Duration::from_secs(20));
    let machine = |dir: &std::path::Path| -> ProgramCache<cache_support::Program> {
        ProgramCache::open(
            gpu("traced fleet gpu"),
            &CacheConfig { remote: Some(remote.clone()), ..CacheConfig::in_dir(dir) },
        )
    };
    let counts = Arc::new(Counts::default());
    let source = Source::new(&gpu("traced fleet gpu"), "traced fleet kernel", &counts);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fleet.json");
    let guard = sparkle::trace::start(&path);

    let a_dir = tempfile::tempdir().unwrap();
    let a = machine(a_dir.path());
    a.get(&source.key, &source).unwrap();
    // Dropping the cache waits for its publishes.
    drop(a);
    let b_dir = tempfile::tempdir().unwrap();
    let b = machine(b_dir.path());
    b.get(&source.key, &source).unwrap();
    assert_eq!(counts.compiles.load(SeqCst), 1, "machine B compiled nothing");
    drop(b);

    let summary = guard.finish();
    assert_eq!(summary.error, None, "{summary:?}");
    let text = std::fs::read_to_string(&path).unwrap();
    let trace = check(&text).unwrap_or_else(|problem| panic!("the trace does not check: {problem}"));
    // This test's thread only: the other tests of this binary use caches meanwhile.
    let ours = trace.thread_named("a_trace_shows_the_remote_lookup").or_else(|| trace.thread_named("main"));
    let ours = ours.expect("the test's thread recorded");
    let named = |name: &'static str| trace.named(name).filter(move |e| e.tid == ours);
    let remote_results: Vec<&str> = named("cache remote").filter_map(|e| e.arg_str("result")).collect();
    assert!(remote_results.contains(&"miss: compile here"), "{remote_results:?}");
    assert!(remote_results.contains(&"hit"), "{remote_results:?}");
    assert!(named("cache remote").all(|e| e.arg_u64("budget_us") == Some(20_000_000)), "the lookup's budget");
    let hit = named("cache remote").find(|e| e.arg_str("result") == Some("hit")).unwrap();
    let compile = named("compile").min_by_key(|e| e.ts_ns).expect("machine A's compile");
    assert!(compile.ts_ns < hit.ts_ns, "A compiles before B's hit");
    assert!(named("compile").all(|e| e.ts_ns < hit.ts_ns), "B compiles nothing");
    let publish = named("cache publish (remote, queued)").next().expect("A's publish to the remote");
    assert!(publish.ts_ns > compile.ts_ns && publish.ts_ns < hit.ts_ns);
    assert!(named("cache publish (disk)").next().is_some());
    assert!(named("load program").any(|e| e.ts_ns > hit.ts_ns), "B loads what it fetched");
}
