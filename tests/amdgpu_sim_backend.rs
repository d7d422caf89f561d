//! The amdgpu backend end to end on the simulated gfx1100 (`SPARKLE_BACKEND=amdgpu-sim`): the
//! same tests the hardware runs (`amdgpu_common`), at sizes the CPU interprets quickly — sgemm
//! with K well above one tile and ragged sizes, conv2d on a small ResNet-like shape — plus what
//! only a simulator can show in CI: the cache across processes, a kernel that faults, a kernel
//! that hangs.

#![cfg(feature = "amdgpu")]

mod amdgpu_common;

use std::process::Command;
use std::time::Duration;

use amdgpu_common::Sizes;
use sparkle::amdgpu::sim::{AmdgpuSim, SimDriver, SimOptions, Simulated};
use sparkle::amdgpu::{AmdgpuDevice, DeviceOptions};
use sparkle::cache::CacheConfig;
use sparkle::hal::BufferUsage;
use sparkle::kernel::{Access, KernelSpec, ScalarType};
use sparkle::runtime::Arg;
use sparkle::suite::conv2d::Shape;
use sparkle::{ErrorKind, Runtime};

const SIZES: Sizes = Sizes {
    saxpy: &[1, 255, 257, 4099],
    sgemm: &[(1, 1, 1), (17, 33, 5), (65, 47, 100), (20, 36, 257)],
    conv2d: &[
        Shape { n: 1, c: 1, h: 1, w: 1, k: 1 },
        Shape { n: 2, c: 5, h: 17, w: 23, k: 3 },
        // The shape of a ResNet stage, scaled down for the interpreter.
        Shape { n: 1, c: 16, h: 14, w: 14, k: 16 },
    ],
};

fn sim() -> Runtime {
    Runtime::open_backend("amdgpu-sim", &CacheConfig::memory_only()).expect("the simulator opens anywhere")
}

#[test]
fn the_suite_matches_the_cpu() {
    let rt = sim();
    amdgpu_common::saxpy_matches_the_cpu(&rt, &SIZES);
    amdgpu_common::sgemm_matches_the_cpu(&rt, &SIZES);
    amdgpu_common::conv2d_matches_the_cpu(&rt, &SIZES);
}

#[test]
fn user_opencl_kernels_compile_and_run() {
    amdgpu_common::user_opencl_kernels_run(&sim());
}

#[test]
fn copies_and_chained_dispatches_in_one_submission() {
    amdgpu_common::copies_and_chained_dispatches_in_one_submission(&sim(), 3000);
}

#[test]
fn a_second_process_loads_the_programs_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let child = || {
        let output = Command::new(env!("CARGO_BIN_EXE_sparkle"))
            .arg("bench-child")
            .env("SPARKLE_BACKEND", "amdgpu-sim")
            .env("SPARKLE_CACHE_DIR", dir.path())
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice::<serde_json::Value>(&output.stdout).unwrap()
    };
    let first = child();
    assert_eq!((first["correct"].as_bool(), first["compiles"].as_u64()), (Some(true), Some(3)), "{first}");
    let second = child();
    assert_eq!((second["disk_hits"].as_u64(), second["compiles"].as_u64()), (Some(3), Some(0)), "{second}");
    assert_eq!(second["digests"], first["digests"]);
    assert!(dir.path().read_dir().unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with("amdgpu-sim-")));
}

#[test]
fn info_says_it_is_a_simulator() {
    let output = Command::new(env!("CARGO_BIN_EXE_sparkle"))
        .arg("info")
        .env("SPARKLE_BACKEND", "amdgpu-sim")
        .env("SPARKLE_CACHE_DIR", tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("Selected (amdgpu-sim)") && stdout.contains("simulated gfx1100"), "{stdout}");
}

fn store_at(rt: &Runtime, index_offset: u32) -> sparkle::Result<()> {
    let spec = KernelSpec::new("store_at", [64, 1, 1])
        .opencl(
            "store_at",
            "__kernel void store_at(__global uint *out, uint offset) { out[get_global_id(0) + offset] = 7u; }",
        )
        .storage("out", Access::ReadWrite)
        .scalar("offset", ScalarType::U32);
    let program = rt.program(&spec)?;
    let out = rt.create_buffer(64 * 4, BufferUsage::Output)?;
    rt.dispatch(&program, &[Arg::Buffer(&out), Arg::U32(index_offset)], [1, 1, 1])?
        .wait(Duration::from_secs(60))
}

#[test]
fn a_kernel_writing_outside_its_buffers_is_a_reported_page_fault() {
    let rt = sim();
    store_at(&rt, 0).expect("in bounds");
    let err = store_at(&rt, 1 << 28).expect_err("a gigabyte past the buffer is unmapped");
    assert_eq!(err.kind(), ErrorKind::DeviceLost, "{err}");
    let message = err.to_string();
    assert!(message.contains("GPU page fault at 0x") && message.contains("(write)"), "{message}");
    assert!(message.contains("store_at"), "the fault names the kernel: {message}");
    // The process lives on, and a new device works.
    store_at(&sim(), 0).expect("a fresh simulated device runs");
}

#[test]
fn a_kernel_that_never_ends_times_out_like_a_hung_gpu() {
    // A small instruction budget, so that the hang is found quickly.
    let driver = SimDriver::new(SimOptions { instruction_budget: 2_000_000, ..SimOptions::default() });
    let device = AmdgpuDevice::<Simulated>::new(driver, DeviceOptions::default()).unwrap();
    let rt = Runtime::from_device::<AmdgpuSim>(device, &CacheConfig::memory_only());
    let spec = KernelSpec::new("spin", [32, 1, 1])
        .opencl("spin", "__kernel void spin(__global uint *out, uint n) { uint i = 0; while (n != 0) { i++; } out[0] = i; }")
        .storage("out", Access::ReadWrite)
        .scalar("n", ScalarType::U32);
    let program = rt.program(&spec).unwrap();
    let out = rt.create_buffer(4, BufferUsage::Output).unwrap();
    let err = rt
        .dispatch(&program, &[Arg::Buffer(&out), Arg::U32(1)], [1, 1, 1])
        .unwrap()
        .wait(Duration::from_secs(120))
        .unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Timeout | ErrorKind::DeviceLost), "{err}");
    assert!(err.to_string().contains("spin") || err.to_string().contains("budget"), "{err}");
}
