//! Timelines of gl runs (`sparkle::trace`): the file `SPARKLE_TRACE` names, written at a
//! process's exit, and a pipeline traced in code; each trace parsed and checked (well-formed
//! events, nesting per thread, flows between existing slices, GPU slices inside their
//! submission's window) and looked at for what the run did.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use sparkle::cache::CacheConfig;
use sparkle::trace::check::{check, CheckedTrace};
use sparkle::{Access, Arg, Buffer, BufferUsage, Commands, KernelSpec, Pipeline, Runtime, ScalarType, Stage};

use crate::isolated;

/// One trace at a time in this process (tracing is process-wide).
static ONE_TRACE: Mutex<()> = Mutex::new(());

fn one_trace() -> MutexGuard<'static, ()> {
    ONE_TRACE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A kernel no other test uses, so its events are told apart from theirs.
fn kernel(name: &str) -> KernelSpec {
    KernelSpec::new(name, [64, 1, 1])
        .glsl(
            "layout(std430, binding = 0) buffer Data { float v[]; };
             uniform uint n;
             void main() { uint i = gl_GlobalInvocationID.x; if (i < n) v[i] = v[i] * 2.0 + 1.0; }",
        )
        .storage("v", Access::ReadWrite)
        .scalar("n", ScalarType::U32)
}

fn checked(path: &std::path::Path) -> CheckedTrace {
    let text = std::fs::read_to_string(path).expect("the trace file");
    check(&text).unwrap_or_else(|problem| panic!("the trace does not check: {problem}"))
}

fn of_kernel<'a>(
    trace: &'a CheckedTrace,
    name: &'a str,
    kernel: &'a str,
) -> Vec<&'a sparkle::trace::check::Checked> {
    trace.named(name).filter(|event| event.arg_str("kernel") == Some(kernel)).collect()
}

/// `SPARKLE_TRACE` alone: a cold runtime compiles, a warm one loads from disk, and the process's
/// exit completes the file.
#[test]
fn sparkle_trace_writes_the_whole_process_and_exit_completes_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("process.json");
    let cache = dir.path().join("cache");
    let env = [
        ("SPARKLE_TRACE", path.to_str()),
        ("SPARKLE_CACHE_DIR", cache.to_str()),
        ("SPARKLE_BACKEND", Some("gl")),
    ];
    if isolated::ran_in_own_process(
        module_path!(),
        "sparkle_trace_writes_the_whole_process_and_exit_completes_it",
        &env,
    ) {
        let trace = checked(&path);
        let compiles = of_kernel(&trace, "compile", "traced_process");
        assert_eq!(compiles.len(), 1, "the cold runtime compiles, the warm one does not");
        let loads = of_kernel(&trace, "load program", "traced_process");
        assert_eq!(loads.len(), 1, "the warm runtime loads the program");
        assert!(loads[0].ts_ns > compiles[0].ts_ns);
        assert!(trace.named("cache disk").any(|e| e.arg_str("result") == Some("hit")));
        assert!(trace.in_category("gpu").any(|e| e.ph == "X" && e.name == "traced_process"));
        assert!(trace.gpu_in_windows >= 1);
        assert!(trace.flows >= 2, "the miss to its compile, the submission to its GPU work");
        assert_eq!(trace.other["dropped_events"], 0);
        return;
    }
    let kernel = kernel("traced_process");
    let cold = Runtime::from_env().expect("a GL context (Mesa's llvmpipe is enough)");
    let program = cold.program(&kernel).unwrap();
    let data = cold.upload(&[1.0f32; 256], BufferUsage::InOut).unwrap();
    cold.dispatch(&program, &[Arg::Buffer(&data), Arg::U32(256)], [4, 1, 1])
        .unwrap()
        .wait(Duration::from_secs(60))
        .unwrap();
    assert_eq!(cold.read_vec::<f32>(&data, 0, 1).unwrap(), vec![3.0]);
    let warm = Runtime::from_env().unwrap();
    warm.program(&kernel).unwrap();
    // No guard: the process's exit completes the trace.
}

/// Doubles-and-adds one to a batch of floats.
struct Twice {
    program: sparkle::Program,
}

struct Set {
    data: Buffer,
    len: usize,
}

impl Stage for Twice {
    type Input = Vec<f32>;
    type Output = Vec<f32>;
    type Set = Set;

    fn create_set(&self, runtime: &Runtime) -> sparkle::Result<Set> {
        Ok(Set { data: runtime.create_buffer(1 << 16, BufferUsage::InOut)?, len: 0 })
    }

    fn upload(&self, runtime: &Runtime, set: &mut Set, input: Vec<f32>) -> sparkle::Result<()> {
        set.len = input.len();
        runtime.write_buffer(&set.data, 0, bytemuck::cast_slice(&input))
    }

    fn record(&self, _: &Runtime, set: &Set, commands: &mut Commands) -> sparkle::Result<()> {
        let args = [Arg::Buffer(&set.data), Arg::U32(set.len as u32)];
        commands.dispatch(&self.program, &args, [(set.len as u32).div_ceil(64), 1, 1])?;
        Ok(())
    }

    fn download(&self, runtime: &Runtime, set: &mut Set) -> sparkle::Result<Vec<f32>> {
        runtime.read_vec(&set.data, 0, set.len)
    }
}

/// A pipeline traced in code: each batch's stages on the CPU, its kernel on the GPU track inside
/// its submission's window, linked by a flow.
#[test]
fn a_traced_pipeline_shows_every_batch_on_the_cpu_and_the_gpu() {
    let _one = one_trace();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pipeline.json");
    let runtime = Runtime::open_backend("gl", &CacheConfig::memory_only()).expect("a GL context");
    let program = runtime.program(&kernel("traced_pipeline")).unwrap();
    let pipeline = Pipeline::new(&runtime, Twice { program }).with_depth(3).unwrap();
    const BATCHES: u64 = 12;
    let guard = Runtime::trace_to(&path);
    assert!(guard.is_recording());
    let done = pipeline
        .run((0..BATCHES).map(|i| vec![i as f32; 2048]), |index, output| {
            assert_eq!(output[0], 2.0 * index as f32 + 1.0);
            Ok(())
        })
        .unwrap();
    assert_eq!(done, BATCHES);
    let summary = guard.finish();
    assert_eq!(summary.error, None, "{summary:?}");
    let trace = checked(&path);
    for name in ["batch in", "batch out"] {
        // Other tests of this binary may run pipelines meanwhile: theirs only add batches.
        let batches: Vec<u64> = trace.named(name).filter_map(|e| e.arg_u64("batch")).collect();
        assert!((0..BATCHES).all(|batch| batches.contains(&batch)), "a `{name}` span per batch: {batches:?}");
    }
    for name in ["stage upload", "stage record and submit", "stage read-back", "wait for fence"] {
        assert!(trace.named(name).count() as u64 >= BATCHES, "a `{name}` span per batch");
    }
    let gpu = trace.in_category("gpu").filter(|e| e.ph == "X" && e.name == "traced_pipeline").count() as u64;
    assert_eq!(gpu, BATCHES, "one GPU slice per batch");
    assert!(trace.gpu_in_windows as u64 >= BATCHES);
    assert!(trace.flows as u64 >= BATCHES, "every batch's submission flows to its GPU slice");
    let clocks = trace.other["gpu_clocks"].as_array().expect("the GPU clocks");
    assert!(clocks.iter().any(|clock| clock["anchors"].as_u64() >= Some(1)), "{clocks:?}");
}

/// Tracing off: the same work records nothing and a trace started later holds none of it.
#[test]
fn work_before_a_trace_starts_is_not_in_it() {
    let _one = one_trace();
    let runtime = Runtime::open_backend("gl", &CacheConfig::memory_only()).expect("a GL context");
    let program = runtime.program(&kernel("untraced_before")).unwrap();
    let data = runtime.upload(&[1.0f32; 64], BufferUsage::InOut).unwrap();
    let before = runtime.dispatch(&program, &[Arg::Buffer(&data), Arg::U32(64)], [1, 1, 1]).unwrap();
    before.wait(Duration::from_secs(60)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("later.json");
    let guard = sparkle::trace::start(&path);
    let after = runtime.dispatch(&program, &[Arg::Buffer(&data), Arg::U32(64)], [1, 1, 1]).unwrap();
    after.wait(Duration::from_secs(60)).unwrap();
    assert_eq!(guard.finish().error, None);
    let trace = checked(&path);
    let fences: Vec<u64> = trace
        .in_category("gpu")
        .filter(|e| e.ph == "X" && e.name == "untraced_before")
        .filter_map(|e| e.arg_u64("fence"))
        .collect();
    assert_eq!(fences, vec![after.fence()], "only the submission made while tracing");
}
