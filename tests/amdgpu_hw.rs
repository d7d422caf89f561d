//! The amdgpu backend on a real RDNA2/RDNA3 card, through `sparkle::Runtime`: the suite
//! (prebuilt code objects, no compiler needed) at sizes that are not multiples of the work-group
//! or tile size, against the CPU references; user OpenCL C kernels compiled by clang-22 (among
//! them double precision); copies and several dispatches in one submission. Run on a machine with such a card:
//!
//!     cargo test --test amdgpu_hw -- --nocapture --test-threads=1
//!
//! Without an amdgpu render node (or with one this backend does not support) each test prints
//! why and passes without checking anything.
#![cfg(feature = "amdgpu")]

mod amdgpu_common;

use amdgpu_common::features::Waves;
use amdgpu_common::Sizes;
use sparkle::amdgpu::{Amdgpu, AmdgpuDevice, DeviceOptions, Hardware};
use sparkle::cache::CacheConfig;
use sparkle::suite::conv2d::Shape;
use sparkle::Runtime;

const SIZES: Sizes = Sizes {
    saxpy: &[1, 255, 256, 257, 10_007, 1 << 20],
    sgemm: &[(1, 1, 1), (16, 16, 16), (17, 33, 5), (129, 65, 257), (512, 512, 512)],
    conv2d: &[
        Shape { n: 1, c: 1, h: 1, w: 1, k: 1 },
        Shape { n: 2, c: 5, h: 17, w: 23, k: 3 },
        Shape { n: 1, c: 16, h: 64, w: 64, k: 16 },
    ],
};

/// The amdgpu runtime, or `None` (with the reason printed) where no supported card is here.
fn amdgpu(test: &str) -> Option<Runtime> {
    match Runtime::open_backend("amdgpu", &CacheConfig::memory_only()) {
        Ok(rt) => {
            eprintln!("{test}: running on {}", rt.info().name);
            Some(rt)
        }
        Err(err) => {
            eprintln!("skipping {test}: {err}");
            None
        }
    }
}

#[test]
fn saxpy_matches_the_cpu() {
    let Some(rt) = amdgpu("saxpy_matches_the_cpu") else { return };
    amdgpu_common::saxpy_matches_the_cpu(&rt, &SIZES);
}

#[test]
fn sgemm_matches_the_cpu() {
    let Some(rt) = amdgpu("sgemm_matches_the_cpu") else { return };
    amdgpu_common::sgemm_matches_the_cpu(&rt, &SIZES);
}

#[test]
fn conv2d_matches_the_cpu() {
    let Some(rt) = amdgpu("conv2d_matches_the_cpu") else { return };
    amdgpu_common::conv2d_matches_the_cpu(&rt, &SIZES);
}

#[test]
fn user_opencl_kernels_run() {
    let Some(rt) = amdgpu("user_opencl_kernels_run") else { return };
    amdgpu_common::user_opencl_kernels_run(&rt);
}

#[test]
fn copies_and_chained_dispatches_in_one_submission() {
    let Some(rt) = amdgpu("copies_and_chained_dispatches_in_one_submission") else { return };
    amdgpu_common::copies_and_chained_dispatches_in_one_submission(&rt, 100_000);
}

#[test]
fn double_precision_matches_the_cpu() {
    let Some(rt) = amdgpu("double_precision_matches_the_cpu") else { return };
    amdgpu_common::features::fp64_matches_the_cpu(&rt, Waves::Wave32);
    amdgpu_common::features::fp64_matches_the_cpu(&rt, Waves::Wave64);
}

#[test]
fn private_memory_matches_the_cpu() {
    let Some(rt) = amdgpu("private_memory_matches_the_cpu") else { return };
    amdgpu_common::features::private_memory_matches_the_cpu(&rt, Waves::Wave32);
    amdgpu_common::features::private_memory_matches_the_cpu(&rt, Waves::Wave64);
}

#[test]
fn printf_reaches_the_sink() {
    let open = |sink| {
        let options = DeviceOptions { printf: sink, ..DeviceOptions::default() };
        match AmdgpuDevice::<Hardware>::open_with(options) {
            Ok(device) => Some(Runtime::from_device::<Amdgpu>(device, &CacheConfig::memory_only())),
            Err(err) => {
                eprintln!("skipping printf_reaches_the_sink: {err}");
                None
            }
        }
    };
    amdgpu_common::features::printf_reaches_the_sink(&open, Waves::Wave32);
    amdgpu_common::features::printf_reaches_the_sink(&open, Waves::Wave64);
}

#[test]
fn sub_groups_match_the_cpu() {
    let Some(rt) = amdgpu("sub_groups_match_the_cpu") else { return };
    amdgpu_common::features::sub_groups_match_the_cpu(&rt, Waves::Wave32);
    amdgpu_common::features::sub_groups_match_the_cpu(&rt, Waves::Wave64);
}

#[test]
fn timed_submissions_report_gpu_time() {
    let Some(rt) = amdgpu("timed_submissions_report_gpu_time") else { return };
    assert!(rt.measures_gpu_time(), "the kernel reports the GPU clock counter's frequency");
    let program = rt.program(&sparkle::suite::saxpy::spec()).unwrap();
    let n = 1 << 20;
    let x = rt.upload(&vec![1.0f32; n], sparkle::hal::BufferUsage::Input).unwrap();
    let y = rt.upload(&vec![0.5f32; n], sparkle::hal::BufferUsage::InOut).unwrap();
    let args = [
        sparkle::runtime::Arg::Buffer(&x),
        sparkle::runtime::Arg::Buffer(&y),
        sparkle::runtime::Arg::F32(2.0),
        sparkle::runtime::Arg::U32(n as u32),
    ];
    let mut commands = rt.commands();
    commands.dispatch(&program, &args, [(n / 256) as u32, 1, 1]).unwrap();
    let submission = rt.submit_timed(commands).unwrap();
    submission.wait(amdgpu_common::TIMEOUT).unwrap();
    let gpu = submission.gpu_time().expect("a timed submission has a GPU time");
    eprintln!("saxpy of {n} floats: {gpu:?} of GPU time");
    assert!(gpu > std::time::Duration::ZERO);
}
