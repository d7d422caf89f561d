//! The amdgpu backend end to end on a simulated gfx1030 (RDNA2, `SPARKLE_SIM_GPU=gfx1030`): the
//! RDNA2 ISA clang emits for that target (its own encodings, SDWA, the private segment buffer),
//! gfx10.3's scratch set-up (a private segment buffer and FLAT_SCRATCH initialisation handed to
//! the kernel, COMPUTE_TMPRING_SIZE in 1 KiB units), and the same feature tests the hardware
//! runs (`amdgpu_common`), in wave32 and wave64.

use std::time::Duration;

use crate::amdgpu_common::features::Waves;
use crate::amdgpu_common::{self, Sizes};
use sparkle::amdgpu::sim::{AmdgpuSim, SimDriver, SimGpu, SimOptions, Simulated};
use sparkle::amdgpu::{AmdgpuDevice, DeviceOptions, PrintfSink};
use sparkle::cache::CacheConfig;
use sparkle::hal::BufferUsage;
use sparkle::kernel::{Access, KernelSpec};
use sparkle::runtime::Arg;
use sparkle::suite::conv2d::Shape;
use sparkle::Runtime;

const SIZES: Sizes = Sizes {
    saxpy: &[1, 257, 4099],
    sgemm: &[(1, 1, 1), (17, 33, 5), (20, 36, 257)],
    conv2d: &[Shape { n: 1, c: 1, h: 1, w: 1, k: 1 }, Shape { n: 2, c: 5, h: 17, w: 23, k: 3 }],
};

fn open(printf: PrintfSink) -> Runtime {
    let driver = SimDriver::new(SimOptions { gpu: SimGpu::Gfx1030, ..SimOptions::default() });
    let device = AmdgpuDevice::<Simulated>::new(driver, DeviceOptions { printf, ..DeviceOptions::default() })
        .expect("the simulator opens anywhere");
    Runtime::from_device::<AmdgpuSim>(device, &CacheConfig::memory_only())
}

fn sim() -> Runtime {
    open(PrintfSink::default())
}

#[test]
fn it_says_it_is_a_gfx1030() {
    let rt = sim();
    let info = rt.info();
    assert!(format!("{info:?}").contains("gfx1030"), "{info:?}");
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
fn double_precision_matches_the_cpu() {
    amdgpu_common::features::fp64_matches_the_cpu(&sim(), Waves::Wave32);
    amdgpu_common::features::fp64_matches_the_cpu(&sim(), Waves::Wave64);
}

#[test]
fn private_memory_matches_the_cpu() {
    amdgpu_common::features::private_memory_matches_the_cpu(&sim(), Waves::Wave32);
    amdgpu_common::features::private_memory_matches_the_cpu(&sim(), Waves::Wave64);
}

#[test]
fn printf_reaches_the_sink() {
    amdgpu_common::features::printf_reaches_the_sink(&|sink| Some(open(sink)), Waves::Wave32);
    amdgpu_common::features::printf_reaches_the_sink(&|sink| Some(open(sink)), Waves::Wave64);
}

#[test]
fn work_group_collectives_match_the_cpu() {
    amdgpu_common::cl2::collectives_match_the_cpu(&sim(), Waves::Wave32);
    amdgpu_common::cl2::collectives_match_the_cpu(&sim(), Waves::Wave64);
}

#[test]
fn opencl2_features_and_1024_work_items_match_the_cpu() {
    amdgpu_common::cl2::opencl2_features_match_the_cpu(&sim(), Waves::Wave32);
    amdgpu_common::cl2::opencl2_features_match_the_cpu(&sim(), Waves::Wave64);
}

#[test]
fn async_copies_match_the_cpu() {
    amdgpu_common::cl2::async_copies_match_the_cpu(&sim(), Waves::Wave32);
    amdgpu_common::cl2::async_copies_match_the_cpu(&sim(), Waves::Wave64);
}

#[test]
fn generic_addresses_reach_the_lds_and_private_apertures_as_on_a_card() {
    amdgpu_common::cl2::apertures_are_amdgpus(&sim(), Waves::Wave32);
    amdgpu_common::cl2::apertures_are_amdgpus(&sim(), Waves::Wave64);
    amdgpu_common::cl2::queue_descriptor_at_o0_holds_the_apertures(&sim());
}

#[test]
fn narrow_integers_match_the_cpu() {
    amdgpu_common::narrow::narrow_integers_match_the_cpu(&sim(), Waves::Wave32);
    amdgpu_common::narrow::narrow_integers_match_the_cpu(&sim(), Waves::Wave64);
}

#[test]
fn half_precision_matches_the_cpu() {
    amdgpu_common::narrow::half_precision_matches_the_cpu(&sim(), Waves::Wave32);
    amdgpu_common::narrow::half_precision_matches_the_cpu(&sim(), Waves::Wave64);
}

#[test]
fn sub_groups_match_the_cpu() {
    amdgpu_common::features::sub_groups_match_the_cpu(&sim(), Waves::Wave32);
    amdgpu_common::features::sub_groups_match_the_cpu(&sim(), Waves::Wave64);
}

#[test]
fn a_work_item_leaving_its_private_segment_faults_naming_the_kernel() {
    let rt = sim();
    let spec = KernelSpec::new("wild", [32, 1, 1])
        .opencl(
            "wild",
            "__kernel void wild(__global const uint *idx, __global uint *out) {\n\
                 uint a[96];\n\
                 for (int i = 0; i < 96; i++) a[i] = (uint)i * idx[2];\n\
                 a[idx[0]] = 7u;\n\
                 out[get_global_id(0)] = a[idx[1]];\n\
             }\n",
        )
        .storage("idx", Access::ReadOnly)
        .storage("out", Access::ReadWrite);
    let Some(program) = amdgpu_common::features::compile(&rt, &spec) else { return };
    let idx = rt.upload(&[100_000u32, 3, 1], BufferUsage::Input).unwrap();
    let out = rt.create_buffer(32 * 4, BufferUsage::Output).unwrap();
    let err = rt
        .dispatch(&program, &[Arg::Buffer(&idx), Arg::Buffer(&out)], [1, 1, 1])
        .unwrap()
        .wait(Duration::from_secs(60))
        .expect_err("a store past the private segment faults");
    let message = err.to_string();
    assert!(message.contains("page fault") && message.contains("wild"), "{message}");
    assert!(message.contains("private segment"), "{message}");
}
