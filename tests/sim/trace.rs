//! Timelines on the simulated amdgpu (`sparkle::trace`): a traced submission's dispatches and
//! copy on the device's GPU track from RELEASE_MEM stamps of the simulation's clock, marked
//! simulated, inside their submission's window, with the submission's flow; the trace checked.

use std::time::Duration;

use sparkle::cache::CacheConfig;
use sparkle::trace::check::check;
use sparkle::{Access, Arg, BufferUsage, KernelSpec, Runtime, ScalarType};

#[test]
fn simulated_gpu_work_is_on_a_track_marked_simulated() {
    let runtime = Runtime::open_backend("amdgpu-sim", &CacheConfig::memory_only()).unwrap();
    let kernel = KernelSpec::new("traced_sim", [64, 1, 1])
        .opencl(
            "traced_sim",
            "__kernel void traced_sim(__global uint *out, uint add) {
                 out[get_global_id(0)] += add;
             }",
        )
        .storage("out", Access::ReadWrite)
        .scalar("add", ScalarType::U32);
    let program = runtime.program(&kernel).unwrap();
    let data = runtime.upload(&[1u32; 128], BufferUsage::InOut).unwrap();
    let copy = runtime.create_buffer(512, BufferUsage::InOut).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sim.json");
    let guard = Runtime::trace_to(&path);
    let mut commands = runtime.commands();
    commands.dispatch(&program, &[Arg::Buffer(&data), Arg::U32(2)], [2, 1, 1]).unwrap();
    commands.dispatch(&program, &[Arg::Buffer(&data), Arg::U32(3)], [2, 1, 1]).unwrap();
    commands.copy(&data, 0, &copy, 0, 512).unwrap();
    runtime.submit(commands).unwrap().wait(Duration::from_secs(120)).unwrap();
    assert_eq!(runtime.download::<u32>(&copy).unwrap(), vec![6; 128]);
    let summary = guard.finish();
    assert_eq!(summary.error, None, "{summary:?}");
    let text = std::fs::read_to_string(&path).unwrap();
    let trace = check(&text).unwrap_or_else(|problem| panic!("the trace does not check: {problem}"));
    // This runtime's device has a track of its own (other tests' devices have theirs).
    let tid =
        trace.in_category("gpu").find(|e| e.ph == "X" && e.name == "traced_sim").expect("a GPU slice").tid;
    let clocks = trace.other["gpu_clocks"].as_array().unwrap();
    let track = clocks
        .iter()
        .find(|clock| clock["tid"].as_u64() == Some(tid))
        .unwrap_or_else(|| panic!("the track's clock: {clocks:?}"));
    assert_eq!(track["simulated"], true, "{track}");
    assert!(track["track"].as_str().unwrap().contains("simulated"));
    let slices: Vec<&str> =
        trace.events.iter().filter(|e| e.tid == tid && e.ph == "X").map(|e| e.name.as_str()).collect();
    assert_eq!(slices, ["traced_sim", "traced_sim", "copy"], "in submission order");
    assert!(trace.gpu_in_windows >= 3);
    assert!(trace.flows >= 1, "the submission flows to its first GPU slice");
}
