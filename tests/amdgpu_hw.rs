//! The amdgpu backend on a real RDNA2/RDNA3 card, through `sparkle::Runtime`: the suite
//! (prebuilt code objects, no compiler needed) at sizes that are not multiples of the work-group
//! or tile size, against the CPU references; user OpenCL C kernels compiled by clang-22; copies
//! and several dispatches in one submission. Run on a machine with such a card:
//!
//!     cargo test --test amdgpu_hw -- --nocapture --test-threads=1
//!
//! Without an amdgpu render node (or with one this backend does not support) each test prints
//! why and passes without checking anything.
#![cfg(feature = "amdgpu")]

use std::time::Duration;

use sparkle::cache::CacheConfig;
use sparkle::hal::BufferUsage;
use sparkle::kernel::{Access, KernelSpec, ScalarType};
use sparkle::runtime::Arg;
use sparkle::suite::{self, conv2d::Shape, Case};
use sparkle::Runtime;

const TIMEOUT: Duration = Duration::from_secs(30);

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

fn assert_correct(rt: &Runtime, case: &dyn Case) {
    let program = rt.program(&case.spec()).expect("the suite kernel loads");
    let verdict = suite::run_and_verify(rt, &program, case).expect("the dispatch runs");
    assert!(verdict.passed(), "{}: {verdict}", case.describe());
    assert!(verdict.checked > 0);
}

#[test]
fn saxpy_matches_the_cpu() {
    let Some(rt) = amdgpu("saxpy_matches_the_cpu") else { return };
    for n in [1, 255, 256, 257, 10_007, 1 << 20] {
        assert_correct(&rt, &suite::saxpy::Saxpy::random(n, n as u64));
    }
}

#[test]
fn sgemm_matches_the_cpu() {
    let Some(rt) = amdgpu("sgemm_matches_the_cpu") else { return };
    for (m, n, k) in [(1, 1, 1), (16, 16, 16), (17, 33, 5), (129, 65, 257), (512, 512, 512)] {
        assert_correct(&rt, &suite::sgemm::Sgemm::random(m, n, k, (m * n * k) as u64));
    }
}

#[test]
fn conv2d_matches_the_cpu() {
    let Some(rt) = amdgpu("conv2d_matches_the_cpu") else { return };
    for shape in [
        Shape { n: 1, c: 1, h: 1, w: 1, k: 1 },
        Shape { n: 2, c: 5, h: 17, w: 23, k: 3 },
        Shape { n: 1, c: 16, h: 64, w: 64, k: 16 },
    ] {
        assert_correct(&rt, &suite::conv2d::Conv2d::random(shape, shape.h as u64));
    }
}

#[test]
fn user_opencl_kernels_run() {
    let Some(rt) = amdgpu("user_opencl_kernels_run") else { return };
    let spec = KernelSpec::new("affine", [64, 1, 1])
        .opencl(
            "affine",
            "__kernel void affine(__global const int *in, __global int *out, int scale, uint count) {\n\
                 uint i = get_global_id(0);\n\
                 if (i < count) out[i] = in[i] * scale + (int)get_local_id(0) - (int)get_group_id(0);\n\
             }\n",
        )
        .storage("in", Access::ReadOnly)
        .storage("out", Access::ReadWrite)
        .scalar("scale", ScalarType::I32)
        .scalar("count", ScalarType::U32);
    let program = match rt.program(&spec) {
        Ok(program) => program,
        Err(err) if err.kind() == sparkle::ErrorKind::Unavailable => {
            eprintln!("skipping the OpenCL part: {err}");
            return;
        }
        Err(err) => panic!("{err}"),
    };
    let count = 1000u32;
    let input: Vec<i32> = (0..count as i32).map(|i| i - 500).collect();
    let src = rt.upload(&input, BufferUsage::Input).unwrap();
    let dst = rt.create_buffer(u64::from(count) * 4, BufferUsage::Output).unwrap();
    rt.dispatch(&program, &[Arg::Buffer(&src), Arg::Buffer(&dst), Arg::I32(-3), Arg::U32(count)], [16, 1, 1])
        .unwrap()
        .wait(TIMEOUT)
        .unwrap();
    let got: Vec<i32> = rt.download(&dst).unwrap();
    let want: Vec<i32> =
        input.iter().enumerate().map(|(i, &v)| v * -3 + (i % 64) as i32 - (i / 64) as i32).collect();
    assert_eq!(got, want);

    // A kernel with a work-group barrier and local memory: reverse each group's slice.
    let reverse = KernelSpec::new("reverse", [128, 1, 1])
        .opencl(
            "reverse",
            "__kernel __attribute__((reqd_work_group_size(128, 1, 1)))\n\
             void reverse(__global float *data) {\n\
                 __local float tile[128];\n\
                 uint l = get_local_id(0);\n\
                 uint base = get_group_id(0) * 128;\n\
                 tile[l] = data[base + l];\n\
                 barrier(CLK_LOCAL_MEM_FENCE);\n\
                 data[base + l] = tile[127 - l];\n\
             }\n",
        )
        .storage("data", Access::ReadWrite);
    let program = rt.program(&reverse).unwrap();
    let values: Vec<f32> = (0..512).map(|i| i as f32).collect();
    let data = rt.upload(&values, BufferUsage::InOut).unwrap();
    rt.dispatch(&program, &[Arg::Buffer(&data)], [4, 1, 1]).unwrap().wait(TIMEOUT).unwrap();
    let got: Vec<f32> = rt.download(&data).unwrap();
    let want: Vec<f32> = (0..512).map(|i| (i / 128 * 128 + 127 - i % 128) as f32).collect();
    assert_eq!(got, want);
}

#[test]
fn copies_and_chained_dispatches_in_one_submission() {
    let Some(rt) = amdgpu("copies_and_chained_dispatches_in_one_submission") else { return };
    let program = rt.program(&suite::saxpy::spec()).unwrap();
    let n = 100_000usize;
    let x = rt.upload(&vec![1.0f32; n], BufferUsage::Input).unwrap();
    let y = rt.upload(&vec![0.5f32; n], BufferUsage::InOut).unwrap();
    let copy = rt.create_buffer((n * 4) as u64, BufferUsage::Output).unwrap();
    let groups = [n.div_ceil(256) as u32, 1, 1];
    let mut commands = rt.commands();
    for _ in 0..3 {
        commands
            .dispatch(
                &program,
                &[Arg::Buffer(&x), Arg::Buffer(&y), Arg::F32(2.0), Arg::U32(n as u32)],
                groups,
            )
            .unwrap();
    }
    commands.copy(&y, 0, &copy, 0, (n * 4) as u64).unwrap();
    rt.submit(commands).unwrap().wait(TIMEOUT).unwrap();
    let got: Vec<f32> = rt.download(&copy).unwrap();
    assert!(got.iter().all(|&v| v == 6.5), "first wrong value: {:?}", got.iter().find(|&&v| v != 6.5));
}
