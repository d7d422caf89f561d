//! Encoding cost of one complete kernel launch (52 dwords: cache invalidate, program registers,
//! user data, workgroup size, DISPATCH_DIRECT, partial flush, fence) into a reused buffer.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use pm4::dispatch::{write_preamble, ComputeDispatch};
use pm4::fields::{PgmRsrc1, PgmRsrc2, PgmRsrc3, ResourceLimits, TmpringSize};
use pm4::{Gfx, PacketWriter};

fn saxpy(user_data: &[u32]) -> ComputeDispatch<'_> {
    ComputeDispatch {
        gfx: Gfx::Gfx11,
        code_address: 0x8000_0010_0000,
        rsrc1: PgmRsrc1::from_bits(0xe0af_0000).with_priv(true),
        rsrc2: PgmRsrc2::from_bits(0x9e),
        rsrc3: PgmRsrc3::from_bits(0x20),
        tmpring: TmpringSize::new(Gfx::Gfx11),
        user_data,
        resource_limits: ResourceLimits::default(),
        workgroup: [256, 1, 1],
        grid: [4096, 1, 1],
        wave32: true,
        fence: Some((0x8000_0030_0000, 1)),
    }
}

fn bench(c: &mut Criterion) {
    let user_data = [0x0020_0000, 0x8000];
    let mut group = c.benchmark_group("encode");

    let mut ib: Vec<u32> = Vec::with_capacity(256);
    group.throughput(Throughput::Elements(1));
    group.bench_function("dispatch_vec", |b| {
        b.iter(|| {
            ib.clear();
            let mut w = PacketWriter::new(&mut ib);
            black_box(saxpy(black_box(&user_data))).write(&mut w).unwrap();
            black_box(ib.len())
        })
    });

    let mut buf = [0u32; 64];
    group.bench_function("dispatch_slice", |b| {
        b.iter(|| {
            let mut w = PacketWriter::on_slice(&mut buf);
            black_box(saxpy(black_box(&user_data))).write(&mut w).unwrap();
            black_box(w.len())
        })
    });

    group.bench_function("preamble_and_dispatch_vec", |b| {
        b.iter(|| {
            ib.clear();
            let mut w = PacketWriter::new(&mut ib);
            write_preamble(&mut w, Gfx::Gfx11).unwrap();
            black_box(saxpy(black_box(&user_data))).write(&mut w).unwrap();
            black_box(ib.len())
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
