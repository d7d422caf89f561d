//! Tests of the amdgpu backend through `sparkle::Runtime` that run unchanged on a real card
//! (`amdgpu::hardware`) and on the simulated gfx1100 (`sim::backend`), each at its own
//! sizes: the suite against the CPU references at sizes that are not multiples of the work-group
//! or tile size, user OpenCL C kernels compiled by clang-22 with libclc, copies and several
//! dispatches in one submission. Included with `#[path]` by the `amdgpu` and `sim` test binaries.

#![allow(dead_code)]

pub mod cl2;
pub mod features;
pub mod narrow;

use std::time::Duration;

use sparkle::hal::BufferUsage;
use sparkle::kernel::{Access, KernelSpec, ScalarType};
use sparkle::runtime::Arg;
use sparkle::suite::{self, conv2d::Shape, Case};
use sparkle::Runtime;

pub const TIMEOUT: Duration = Duration::from_secs(120);

/// The problem sizes one machine runs.
pub struct Sizes {
    pub saxpy: &'static [usize],
    pub sgemm: &'static [(usize, usize, usize)],
    pub conv2d: &'static [Shape],
}

pub fn assert_correct(rt: &Runtime, case: &dyn Case) {
    let program = rt.program(&case.spec()).expect("the suite kernel loads");
    let verdict = suite::run_and_verify(rt, &program, case).expect("the dispatch runs");
    assert!(verdict.passed(), "{}: {verdict}", case.describe());
    assert!(verdict.checked > 0);
}

pub fn saxpy_matches_the_cpu(rt: &Runtime, sizes: &Sizes) {
    for &n in sizes.saxpy {
        assert_correct(rt, &suite::saxpy::Saxpy::random(n, n as u64));
    }
}

pub fn sgemm_matches_the_cpu(rt: &Runtime, sizes: &Sizes) {
    for &(m, n, k) in sizes.sgemm {
        assert_correct(rt, &suite::sgemm::Sgemm::random(m, n, k, (m * n * k) as u64));
    }
}

pub fn conv2d_matches_the_cpu(rt: &Runtime, sizes: &Sizes) {
    for &shape in sizes.conv2d {
        assert_correct(rt, &suite::conv2d::Conv2d::random(shape, shape.h as u64));
    }
}

pub fn user_opencl_kernels_run(rt: &Runtime) {
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

pub fn copies_and_chained_dispatches_in_one_submission(rt: &Runtime, n: usize) {
    let program = rt.program(&suite::saxpy::spec()).unwrap();
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
