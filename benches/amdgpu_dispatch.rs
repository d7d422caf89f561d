//! CPU cost of building one amdgpu dispatch: the kernel-argument segment (with hidden arguments
//! and, for libclc kernels, the dispatch packet) and the IB (preamble, cache invalidate,
//! registers, user SGPRs, DISPATCH_DIRECT, partial flush, end-of-pipe release), without the
//! ioctl. Programs are the suite's prebuilt gfx1100 code objects, loaded through a recording
//! fake driver. Target: at most 1 µs per dispatch.

#[path = "../tests/amdgpu_support/mod.rs"]
mod amdgpu_support;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use sparkle::amdgpu::ib::SubmissionEncoder;
use sparkle::amdgpu::{AmdgpuDevice, AmdgpuProgram, DeviceOptions, Hardware};
use sparkle::hal::Device;
use sparkle::kernel::KernelSpec;
use sparkle::suite;
use sparkle_amdgpu_codeobj::kernarg::{ArgValue, HiddenBuffers};

fn program(device: &AmdgpuDevice<Hardware>, spec: &KernelSpec) -> AmdgpuProgram {
    let input = device.prepare(spec).expect("a prebuilt gfx1100 object").input;
    device.compile(&input).expect("the object loads").program
}

fn dispatch(c: &mut Criterion) {
    let kmd = amdgpu_support::FakeDriver::gfx1100();
    let device = AmdgpuDevice::<Hardware>::new(kmd, DeviceOptions::default()).expect("fake gfx1100");
    let saxpy = program(&device, &suite::saxpy::spec());
    let sgemm = program(&device, &suite::sgemm::spec());
    let (kernargs, signal) = (0x10_0000_0000u64, 0x20_0000_0000u64);
    let mut encoder = SubmissionEncoder::new(device.generation());

    let saxpy_args = [
        ArgValue::Pointer(0x30_0000_0000),
        ArgValue::Pointer(0x31_0000_0000),
        ArgValue::F32(1.5),
        ArgValue::U32(1 << 20),
    ];
    c.bench_function("saxpy: one dispatch, whole submission (kernargs + IB)", |b| {
        b.iter(|| {
            encoder.begin(kernargs).unwrap();
            encoder
                .dispatch(
                    &saxpy,
                    black_box(&saxpy_args),
                    black_box([4096, 1, 1]),
                    1,
                    None,
                    &HiddenBuffers::default(),
                )
                .unwrap();
            encoder.finish(signal, 1).unwrap();
            black_box((encoder.words().len(), encoder.kernargs().len()))
        })
    });

    let sgemm_args = [
        ArgValue::Pointer(0x30_0000_0000),
        ArgValue::Pointer(0x31_0000_0000),
        ArgValue::Pointer(0x32_0000_0000),
        ArgValue::U32(1024),
        ArgValue::U32(1024),
        ArgValue::U32(1024),
    ];
    c.bench_function("sgemm: one dispatch, whole submission (kernargs + IB)", |b| {
        b.iter(|| {
            encoder.begin(kernargs).unwrap();
            encoder
                .dispatch(
                    &sgemm,
                    black_box(&sgemm_args),
                    black_box([64, 64, 1]),
                    1,
                    None,
                    &HiddenBuffers::default(),
                )
                .unwrap();
            encoder.finish(signal, 1).unwrap();
            black_box((encoder.words().len(), encoder.kernargs().len()))
        })
    });

    c.bench_function("saxpy: 64 dispatches in one submission, per submission", |b| {
        b.iter(|| {
            encoder.begin(kernargs).unwrap();
            for id in 0..64 {
                encoder
                    .dispatch(
                        &saxpy,
                        black_box(&saxpy_args),
                        black_box([4096, 1, 1]),
                        id,
                        None,
                        &HiddenBuffers::default(),
                    )
                    .unwrap();
            }
            encoder.finish(signal, 1).unwrap();
            black_box((encoder.words().len(), encoder.kernargs().len()))
        })
    });
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
