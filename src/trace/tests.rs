use std::sync::{Mutex, MutexGuard, PoisonError};

use super::check::check;
use super::*;

/// One trace at a time in this test binary (tracing is process-wide).
static ONE_TRACE: Mutex<()> = Mutex::new(());

/// Holds the writer before it takes its first event, while locked.
pub(super) static WRITER_GATE: Mutex<()> = Mutex::new(());

fn one_trace() -> MutexGuard<'static, ()> {
    ONE_TRACE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).expect("the trace file")
}

#[test]
fn off_spans_record_nothing_and_cost_a_flag() {
    let _one = one_trace();
    assert!(!enabled());
    let mut span = span("test", "off");
    span.arg("bytes", 1u64);
    span.arg_with("never", || -> String { unreachable!("made only when tracing") });
    assert!(!span.is_on());
}

#[test]
fn spans_instants_and_flows_make_a_trace_that_checks() {
    let _one = one_trace();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    let guard = start(&path);
    assert!(guard.is_recording());
    let flow = next_flow_id(FlowKind::Miss);
    {
        let mut outer = span("test", "outer");
        outer.arg("bytes", 4096u64);
        outer.arg("kernel", "saxpy");
        {
            let mut miss = span("test", "miss");
            miss.flow(Flow::Out(flow));
        }
        instant("test", "moment", vec![("n", Arg::U64(7))]);
        std::thread::Builder::new()
            .name("helper".into())
            .spawn(move || {
                let mut compile = span("test", "compile");
                compile.flow(Flow::In(flow));
                let _inner = span("test", "inner");
            })
            .unwrap()
            .join()
            .unwrap();
    }
    let summary = guard.finish();
    assert_eq!(summary.error, None);
    assert_eq!(summary.dropped, 0);
    assert!(summary.events >= 5, "{summary:?}");
    let trace = check(&read(&path)).unwrap();
    assert!(trace.flows >= 1);
    let outer = trace.named("outer").next().unwrap();
    assert_eq!(outer.arg_u64("bytes"), Some(4096));
    assert_eq!(outer.arg_str("kernel"), Some("saxpy"));
    let miss = trace.named("miss").next().unwrap();
    assert!(miss.ts_ns > outer.ts_ns && miss.ts_ns + miss.dur_ns < outer.ts_ns + outer.dur_ns);
    let compile = trace.named("compile").next().unwrap();
    assert_ne!(compile.tid, outer.tid, "the helper thread has its own track");
    let names: Vec<_> = trace.events.iter().filter(|e| e.name == "thread_name").collect();
    assert!(names.iter().any(|e| e.tid == compile.tid && e.arg_str("name") == Some("helper")));
    assert_eq!(trace.other["format"], writer::FORMAT);
    assert_eq!(trace.other["dropped_events"], 0);
    assert!(!guard_is_active(), "recording stops with the guard");
}

fn guard_is_active() -> bool {
    enabled()
}

#[test]
fn a_full_buffer_drops_events_and_the_trace_says_how_many() {
    let _one = one_trace();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    const BUFFER: usize = 8;
    const SPANS: usize = 20;
    let gate = WRITER_GATE.lock().unwrap_or_else(PoisonError::into_inner);
    let guard = start_with(&path, &TraceOptions { buffer_events: BUFFER });
    for _ in 0..SPANS {
        let _span = span("test", "burst");
    }
    drop(gate);
    let summary = guard.finish();
    let trace = check(&read(&path)).unwrap();
    let written = trace.named("burst").count();
    // Other tests of this binary may record meanwhile: they only add to the drops.
    assert!(written <= BUFFER, "{written} written");
    assert!(summary.dropped as usize >= SPANS - written, "{summary:?}");
    assert_eq!(trace.other["dropped_events"], summary.dropped);
}

#[test]
fn a_trace_that_cannot_be_created_is_a_warning_not_a_failure() {
    let _one = one_trace();
    let guard = start("/nonexistent-folder/sparkle/t.json");
    assert!(!guard.is_recording());
    assert!(!enabled());
    let _span = span("test", "nowhere");
    let summary = guard.finish();
    assert!(summary.error.is_some_and(|error| error.contains("cannot create")));
}

#[test]
fn a_full_disk_ends_the_trace_with_an_error_and_the_program_goes_on() {
    let _one = one_trace();
    let full = Path::new("/dev/full");
    if !full.exists() {
        return;
    }
    let guard = start(full);
    assert!(guard.is_recording());
    for _ in 0..5000 {
        let mut span = span("test", "to a full disk");
        span.arg("padding", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    }
    let summary = guard.finish();
    assert!(summary.error.is_some(), "{summary:?}");
    assert!(!enabled());
    // A new trace can start after the failed one.
    let dir = tempfile::tempdir().unwrap();
    let again = start(dir.path().join("t.json"));
    assert!(again.is_recording());
    assert_eq!(again.finish().error, None);
}

#[test]
fn a_second_trace_while_one_runs_is_refused() {
    let _one = one_trace();
    let dir = tempfile::tempdir().unwrap();
    let first = start(dir.path().join("a.json"));
    let second = start(dir.path().join("b.json"));
    assert!(first.is_recording() && !second.is_recording());
    drop(second);
    assert!(first.is_recording(), "dropping the refused guard leaves the trace running");
    assert_eq!(first.finish().error, None);
}

#[test]
fn gpu_slices_are_placed_by_the_anchor_and_kept_inside_their_window() {
    let _one = one_trace();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    let guard = start(&path);
    let track = GpuTrack::new("GPU under test".into(), true);
    let mut clock = GpuClock::new(track.clone());
    assert!(clock.needs_anchor());
    // The GPU's clock runs 1 s ahead of the host's.
    const AHEAD: u64 = 1_000_000_000;
    let host = now_ns();
    clock.anchor(|| Some(now_ns() + AHEAD));
    assert!(!clock.needs_anchor());
    let issued = host + 1_000;
    let seen = host + 100_000;
    let slice = |name: &'static str, start: u64, end: u64| GpuSlice {
        name: name.into(),
        gpu_start_ns: start + AHEAD,
        gpu_end_ns: end + AHEAD,
        issued_ns: issued,
        seen_ns: seen,
        args: vec![("kernel", Arg::Str("k".into()))],
        flow: None,
    };
    clock.write(slice("inside", issued + 10_000, issued + 20_000));
    // Ends after its fence was seen (an anchor off by more than the slack): moved inside.
    clock.write(slice("late", seen - 10_000, seen + 5_000));
    // Overlaps the previous one: starts where it ended.
    clock.write(slice("overlapping", seen - 20_000, seen - 1_000));
    let summary = guard.finish();
    assert_eq!(summary.error, None);
    let trace = check(&read(&path)).unwrap();
    let on_track: Vec<_> = trace.events.iter().filter(|e| e.tid == track.tid() && e.ph == "X").collect();
    assert_eq!(on_track.len(), 3);
    let inside = on_track.iter().find(|e| e.name == "inside").unwrap();
    // The anchor's error is the time between two host clock reads.
    assert!(inside.ts_ns.abs_diff((issued + 10_000) as i64) < 50_000, "{inside:?}");
    let late = on_track.iter().find(|e| e.name == "late").unwrap();
    assert!(late.ts_ns + late.dur_ns <= seen as i64);
    let report = &trace.other["gpu_clocks"][0];
    assert_eq!(report["track"], "GPU under test");
    assert_eq!(report["simulated"], true);
    assert_eq!(report["anchors"], 1);
    assert_eq!(report["slices"], 3);
    assert!(report["clamped"].as_u64().unwrap() >= 2, "{report}");
    assert!(report["offset_ns"].as_i64().unwrap().abs_diff(AHEAD as i64) < 50_000);
}

/// A cold run (compile), a warm one (disk hit, no compile) and GPU work on gl: CPU and GPU
/// events on one timeline, with their flows, in a trace that checks.
#[cfg(feature = "gl")]
#[test]
fn a_gl_run_puts_cache_tiers_submissions_and_gpu_slices_on_one_timeline() {
    use crate::cache::CacheConfig;
    use crate::{Access, Arg as KernelArg, BufferUsage, KernelSpec, Runtime, ScalarType};

    let _one = one_trace();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gl.json");
    let config = CacheConfig::in_dir(dir.path().join("cache"));
    // A name no other test uses: the checks below pick this run's events by it.
    let kernel = KernelSpec::new("trace_probe", [64, 1, 1])
        .glsl(
            "layout(std430, binding = 0) buffer Data { float v[]; };
             uniform uint n;
             void main() { uint i = gl_GlobalInvocationID.x; if (i < n) v[i] = v[i] * 2.0 + 1.0; }",
        )
        .storage("v", Access::ReadWrite)
        .scalar("n", ScalarType::U32);
    let guard = start(&path);
    let cold = Runtime::open_backend("gl", &config).expect("a GL context (Mesa's llvmpipe is enough)");
    let program = cold.program(&kernel).unwrap();
    let data = cold.upload(&vec![1.0f32; 4096], BufferUsage::InOut).unwrap();
    let copy = cold.create_buffer(4096 * 4, BufferUsage::InOut).unwrap();
    let mut commands = cold.commands();
    for _ in 0..3 {
        commands.dispatch(&program, &[KernelArg::Buffer(&data), KernelArg::U32(4096)], [64, 1, 1]).unwrap();
    }
    commands.copy(&data, 0, &copy, 0, 4096 * 4).unwrap();
    cold.submit(commands).unwrap().wait(std::time::Duration::from_secs(60)).unwrap();
    let single =
        cold.dispatch(&program, &[KernelArg::Buffer(&data), KernelArg::U32(4096)], [64, 1, 1]).unwrap();
    single.wait(std::time::Duration::from_secs(60)).unwrap();
    let out: Vec<f32> = cold.download(&copy).unwrap();
    assert_eq!(out[0], 15.0);
    // A second runtime on the same cache folder: its memory tier is empty, the disk has it.
    let warm = Runtime::open_backend("gl", &config).unwrap();
    let started_warm = now_ns();
    warm.program(&kernel).unwrap();
    let summary = guard.finish();
    assert_eq!(summary.error, None, "{summary:?}");
    let trace = check(&read(&path)).unwrap_or_else(|problem| panic!("{problem}"));

    let ours = |name: &'static str| {
        trace.named(name).filter(|e| e.arg_str("kernel") == Some("trace_probe")).collect::<Vec<_>>()
    };
    let compiles = ours("compile");
    assert_eq!(compiles.len(), 1, "one compile, in the cold run");
    assert!((compiles[0].ts_ns as u64) < started_warm);
    let loads = ours("load program");
    assert!(loads.iter().any(|load| load.ts_ns as u64 >= started_warm), "the warm run loads from disk");
    assert!(
        trace
            .named("cache disk")
            .any(|e| e.ts_ns as u64 >= started_warm && e.arg_str("result") == Some("hit")),
        "the warm run's disk lookup hits"
    );
    assert!(
        trace.named("cache disk").any(|e| e.arg_str("result") == Some("missing")),
        "the cold run's misses"
    );
    // The miss's flow ends at the compile.
    assert!(trace.events.iter().any(|e| e.name == "compile" && e.arg_str("kernel") == Some("trace_probe")));
    let gpu: Vec<_> = trace.in_category("gpu").filter(|e| e.ph == "X" && e.name == "trace_probe").collect();
    assert_eq!(gpu.len(), 4, "three dispatches in one submission and one alone");
    assert!(trace.in_category("gpu").any(|e| e.ph == "X" && e.name == "copy"));
    assert!(trace.gpu_in_windows >= 5, "{}", trace.gpu_in_windows);
    assert!(trace.flows >= 3, "a miss to its compile and two submissions to their GPU work: {}", trace.flows);
    for name in ["open backend", "program", "submit", "upload", "read-back", "wait for fence", "cache memory"]
    {
        assert!(trace.named(name).next().is_some(), "a `{name}` span");
    }
    assert!(trace.events.iter().any(|e| e.name.starts_with("gl job ")), "the GL thread's jobs");
    let bytes = trace.named("read-back").filter_map(|e| e.arg_u64("bytes")).max();
    assert_eq!(bytes, Some(4096 * 4));
    let clocks = trace.other["gpu_clocks"].as_array().unwrap();
    assert!(clocks.iter().any(|c| c["anchors"].as_u64() >= Some(1) && c["simulated"] == false), "{clocks:?}");
}

#[test]
fn bounds_from_stamped_windows_narrow_the_offset_and_place_slices_inside() {
    let _one = one_trace();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    let guard = start(&path);
    let track = GpuTrack::new("GPU bounded".into(), false);
    let mut clock = GpuClock::new(track.clone());
    // The GPU's clock reads the host's plus 5 ms; each submission's work sits inside its window.
    const OFFSET: u64 = 5_000_000;
    let base = now_ns() + 1_000_000;
    for (at, (issued, start, end, seen)) in
        [(0, 100, 900, 1_000), (2_000, 2_050, 2_500, 2_600), (3_000, 3_400, 3_900, 3_950)]
            .into_iter()
            .enumerate()
    {
        let (issued, seen) = (base + issued, base + seen);
        let (gpu_start, gpu_end) = (base + start + OFFSET, base + end + OFFSET);
        clock.bound(gpu_start, gpu_end, issued, seen);
        clock.write(GpuSlice {
            name: format!("slice {at}").into(),
            gpu_start_ns: gpu_start,
            gpu_end_ns: gpu_end,
            issued_ns: issued,
            seen_ns: seen,
            args: Vec::new(),
            flow: None,
        });
    }
    guard.finish();
    let trace = check(&read(&path)).unwrap();
    let report =
        trace.other["gpu_clocks"].as_array().unwrap().iter().find(|c| c["track"] == "GPU bounded").unwrap();
    // Bounds: [end - seen, start - issued] = [-100, 100] ∩ [-100, 50] ∩ [-50, 400] (+ offset).
    assert_eq!(report["anchors"], 1, "{report}");
    assert_eq!(report["offset_ns"].as_i64(), Some(OFFSET as i64));
    assert!(report["uncertainty_ns"].as_u64().unwrap() <= 50, "{report}");
    assert_eq!(report["clamped"], 0, "bounds keep every slice inside its window");
    let first = trace.named("slice 0").next().unwrap();
    assert!(first.ts_ns as u64 >= base && (first.ts_ns + first.dur_ns) as u64 <= base + 1_000);
}
