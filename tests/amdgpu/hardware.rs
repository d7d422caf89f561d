//! The amdgpu backend on a real RDNA2/RDNA3 card, through `sparkle::Runtime`: the suite
//! (prebuilt code objects, no compiler needed) at sizes that are not multiples of the work-group
//! or tile size, against the CPU references; user OpenCL C kernels compiled by clang-22 (among
//! them double precision); copies and several dispatches in one submission.
//!
//! Every test here is ignored in a plain `cargo test`. On a machine with such a card, run them
//! with
//!
//!     scripts/setup.sh cargo test -p sparkle-gpu --test amdgpu -- --ignored hardware
//!
//! (add `--nocapture --test-threads=1` to watch them one by one). Asked for, they need the card:
//! without an amdgpu render node, or with one this backend does not support, each test fails
//! saying why.

use crate::amdgpu_common::features::Waves;
use crate::amdgpu_common::{self, Sizes};
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

/// The amdgpu runtime on this machine's card; fails the test where no supported card is here.
fn amdgpu(test: &str) -> Runtime {
    match Runtime::open_backend("amdgpu", &CacheConfig::memory_only()) {
        Ok(rt) => {
            eprintln!("{test}: running on {}", rt.info().name);
            rt
        }
        Err(err) => panic!("{test} needs a supported AMD card (RDNA2/RDNA3) and found none: {err}"),
    }
}

#[test]
#[ignore = "needs an RDNA2/RDNA3 card: scripts/setup.sh cargo test -p sparkle-gpu --test amdgpu -- --ignored hardware"]
fn saxpy_matches_the_cpu() {
    let rt = amdgpu("saxpy_matches_the_cpu");
    amdgpu_common::saxpy_matches_the_cpu(&rt, &SIZES);
}

#[test]
#[ignore = "needs an RDNA2/RDNA3 card: scripts/setup.sh cargo test -p sparkle-gpu --test amdgpu -- --ignored hardware"]
fn sgemm_matches_the_cpu() {
    let rt = amdgpu("sgemm_matches_the_cpu");
    amdgpu_common::sgemm_matches_the_cpu(&rt, &SIZES);
}

#[test]
#[ignore = "needs an RDNA2/RDNA3 card: scripts/setup.sh cargo test -p sparkle-gpu --test amdgpu -- --ignored hardware"]
fn conv2d_matches_the_cpu() {
    let rt = amdgpu("conv2d_matches_the_cpu");
    amdgpu_common::conv2d_matches_the_cpu(&rt, &SIZES);
}

#[test]
#[ignore = "needs an RDNA2/RDNA3 card: scripts/setup.sh cargo test -p sparkle-gpu --test amdgpu -- --ignored hardware"]
fn user_opencl_kernels_run() {
    let rt = amdgpu("user_opencl_kernels_run");
    amdgpu_common::user_opencl_kernels_run(&rt);
}

#[test]
#[ignore = "needs an RDNA2/RDNA3 card: scripts/setup.sh cargo test -p sparkle-gpu --test amdgpu -- --ignored hardware"]
fn copies_and_chained_dispatches_in_one_submission() {
    let rt = amdgpu("copies_and_chained_dispatches_in_one_submission");
    amdgpu_common::copies_and_chained_dispatches_in_one_submission(&rt, 100_000);
}

#[test]
#[ignore = "needs an RDNA2/RDNA3 card: scripts/setup.sh cargo test -p sparkle-gpu --test amdgpu -- --ignored hardware"]
fn double_precision_matches_the_cpu() {
    let rt = amdgpu("double_precision_matches_the_cpu");
    amdgpu_common::features::fp64_matches_the_cpu(&rt, Waves::Wave32);
    amdgpu_common::features::fp64_matches_the_cpu(&rt, Waves::Wave64);
}

#[test]
#[ignore = "needs an RDNA2/RDNA3 card: scripts/setup.sh cargo test -p sparkle-gpu --test amdgpu -- --ignored hardware"]
fn private_memory_matches_the_cpu() {
    let rt = amdgpu("private_memory_matches_the_cpu");
    amdgpu_common::features::private_memory_matches_the_cpu(&rt, Waves::Wave32);
    amdgpu_common::features::private_memory_matches_the_cpu(&rt, Waves::Wave64);
}

#[test]
#[ignore = "needs an RDNA2/RDNA3 card: scripts/setup.sh cargo test -p sparkle-gpu --test amdgpu -- --ignored hardware"]
fn printf_reaches_the_sink() {
    let open = |sink| {
        let options = DeviceOptions { printf: sink, ..DeviceOptions::default() };
        match AmdgpuDevice::<Hardware>::open_with(options) {
            Ok(device) => Some(Runtime::from_device::<Amdgpu>(device, &CacheConfig::memory_only())),
            Err(err) => panic!("printf_reaches_the_sink needs a supported AMD card (RDNA2/RDNA3): {err}"),
        }
    };
    amdgpu_common::features::printf_reaches_the_sink(&open, Waves::Wave32);
    amdgpu_common::features::printf_reaches_the_sink(&open, Waves::Wave64);
}

#[test]
#[ignore = "needs an RDNA2/RDNA3 card: scripts/setup.sh cargo test -p sparkle-gpu --test amdgpu -- --ignored hardware"]
fn sub_groups_match_the_cpu() {
    let rt = amdgpu("sub_groups_match_the_cpu");
    amdgpu_common::features::sub_groups_match_the_cpu(&rt, Waves::Wave32);
    amdgpu_common::features::sub_groups_match_the_cpu(&rt, Waves::Wave64);
}

#[test]
#[ignore = "needs an RDNA2/RDNA3 card: scripts/setup.sh cargo test -p sparkle-gpu --test amdgpu -- --ignored hardware"]
fn work_group_collectives_match_the_cpu() {
    let rt = amdgpu("work_group_collectives_match_the_cpu");
    amdgpu_common::cl2::collectives_match_the_cpu(&rt, Waves::Wave32);
    amdgpu_common::cl2::collectives_match_the_cpu(&rt, Waves::Wave64);
}

#[test]
#[ignore = "needs an RDNA2/RDNA3 card: scripts/setup.sh cargo test -p sparkle-gpu --test amdgpu -- --ignored hardware"]
fn opencl2_features_and_1024_work_items_match_the_cpu() {
    let rt = amdgpu("opencl2_features_and_1024_work_items_match_the_cpu");
    amdgpu_common::cl2::opencl2_features_match_the_cpu(&rt, Waves::Wave32);
    amdgpu_common::cl2::opencl2_features_match_the_cpu(&rt, Waves::Wave64);
}

#[test]
#[ignore = "needs an RDNA2/RDNA3 card: scripts/setup.sh cargo test -p sparkle-gpu --test amdgpu -- --ignored hardware"]
fn async_copies_match_the_cpu() {
    let rt = amdgpu("async_copies_match_the_cpu");
    amdgpu_common::cl2::async_copies_match_the_cpu(&rt, Waves::Wave32);
    amdgpu_common::cl2::async_copies_match_the_cpu(&rt, Waves::Wave64);
}

/// The apertures the backend assumes (and writes into queue descriptors) are the ones the
/// card's kernel driver programmed: read back from SRC_SHARED_BASE / SRC_PRIVATE_BASE.
#[test]
#[ignore = "needs an RDNA2/RDNA3 card: scripts/setup.sh cargo test -p sparkle-gpu --test amdgpu -- --ignored hardware"]
fn generic_addresses_reach_the_lds_and_private_apertures() {
    let rt = amdgpu("generic_addresses_reach_the_lds_and_private_apertures");
    amdgpu_common::cl2::apertures_are_amdgpus(&rt, Waves::Wave32);
    amdgpu_common::cl2::apertures_are_amdgpus(&rt, Waves::Wave64);
    amdgpu_common::cl2::queue_descriptor_at_o0_holds_the_apertures(&rt);
}

#[test]
#[ignore = "needs an RDNA2/RDNA3 card: scripts/setup.sh cargo test -p sparkle-gpu --test amdgpu -- --ignored hardware"]
fn narrow_integers_match_the_cpu() {
    let rt = amdgpu("narrow_integers_match_the_cpu");
    amdgpu_common::narrow::narrow_integers_match_the_cpu(&rt, Waves::Wave32);
    amdgpu_common::narrow::narrow_integers_match_the_cpu(&rt, Waves::Wave64);
}

#[test]
#[ignore = "needs an RDNA2/RDNA3 card: scripts/setup.sh cargo test -p sparkle-gpu --test amdgpu -- --ignored hardware"]
fn half_precision_matches_the_cpu() {
    let rt = amdgpu("half_precision_matches_the_cpu");
    amdgpu_common::narrow::half_precision_matches_the_cpu(&rt, Waves::Wave32);
    amdgpu_common::narrow::half_precision_matches_the_cpu(&rt, Waves::Wave64);
}

#[test]
#[ignore = "needs an RDNA2/RDNA3 card: scripts/setup.sh cargo test -p sparkle-gpu --test amdgpu -- --ignored hardware"]
fn timed_submissions_report_gpu_time() {
    let rt = amdgpu("timed_submissions_report_gpu_time");
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
