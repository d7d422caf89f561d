//! The simulated driver runs real gfx1100 code objects end to end: buffers, code and kernel
//! arguments uploaded through the `KernelDriver` API, an IB built with the `pm4` encoder,
//! submitted, fenced, waited for and read back, compared with the CPU.

use crate::support::*;
use sparkle::amdgpu::kmd::{VaFlags, WaitStatus};
use sparkle_amdgpu_codeobj::kernarg::{ArgValue, DispatchGrid};

#[test]
fn saxpy_with_a_ragged_size_matches_the_cpu_and_signals_its_fence() {
    let gpu = Gpu::new();
    let kernel = gpu.load(&compile(SAXPY, Builtins::Clang), "saxpy", VaFlags::CODE);
    let n = 1000u32; // 15 full groups of 64 and one of 40
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 7.0).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 13) as f32 * 1.5).collect();
    let a = 2.5f32;
    // One spare element past n that the kernel must not touch.
    let xs = gpu.buffer(4 * (n as u64 + 1), VaFlags::READ_ONLY);
    let ys = gpu.buffer(4 * (n as u64 + 1), VaFlags::READ_WRITE);
    xs.write_f32s(0, &x);
    ys.write_f32s(0, &y);
    ys.write_f32s(4 * n as usize, &[-1.0]);
    let args = gpu.buffer(4096, VaFlags::READ_ONLY);
    let fence = gpu.buffer(4096, VaFlags::READ_WRITE);
    let launch = gpu.launch(
        &kernel,
        &args,
        &[ArgValue::Pointer(xs.va), ArgValue::Pointer(ys.va), ArgValue::F32(a), ArgValue::U32(n)],
        grid_1d(n, 64),
    );
    assert_eq!(launch.groups, [16, 1, 1]);
    let status = gpu.run(&[(&launch, &args)], &[&kernel.code], &[xs.bo, ys.bo], &fence).unwrap();
    assert_eq!(status, WaitStatus::Completed);

    let got = ys.read_f32s(0, n as usize + 1);
    for i in 0..n as usize {
        let want = a * x[i] + y[i];
        assert_eq!(got[i].to_bits(), want.to_bits(), "y[{i}]: {} != {want}", got[i]);
    }
    assert_eq!(got[n as usize], -1.0, "the element past n was written");
    assert_eq!(fence.read_u32s(0, 1), [FENCE_VALUE], "RELEASE_MEM did not write the fence");
    assert!(gpu.kmd.ctx_state(gpu.ctx).unwrap().is_healthy());
}

/// Writes get_global_id(0..2) of every work-item of a 3-D grid.
const GLOBAL_IDS: &str = r#"
kernel void ids(global uint* out) {
    uint i = get_global_id(0) + get_global_size(0) * (get_global_id(1) + get_global_size(1) * get_global_id(2));
    out[3 * i + 0] = get_global_id(0);
    out[3 * i + 1] = get_global_id(1);
    out[3 * i + 2] = get_global_id(2);
}
"#;

/// Runs GLOBAL_IDS built with libclc at `version` over an 8x4x2 grid of 4x2x2 groups; returns
/// the ids it wrote and the true ones.
fn libclc_global_ids(version: Option<u32>) -> (Vec<[u32; 3]>, Vec<[u32; 3]>) {
    let gpu = Gpu::new();
    let kernel = gpu.load(&compile(GLOBAL_IDS, Builtins::Libclc(version)), "ids", VaFlags::CODE);
    let size = [8u32, 4, 2];
    let n = size.iter().product::<u32>() as usize;
    let out = gpu.buffer(12 * n as u64, VaFlags::READ_WRITE);
    let args = gpu.buffer(4096, VaFlags::READ_ONLY);
    let fence = gpu.buffer(4096, VaFlags::READ_WRITE);
    let grid = DispatchGrid { workgroup_size: [4, 2, 2], grid_size: size, global_offset: [0; 3], dims: 3 };
    let launch = gpu.launch(&kernel, &args, &[ArgValue::Pointer(out.va)], grid);
    gpu.run(&[(&launch, &args)], &[&kernel.code], &[out.bo], &fence).unwrap();
    let words = out.read_u32s(0, 3 * n);
    let got: Vec<[u32; 3]> = words.chunks(3).map(|c| [c[0], c[1], c[2]]).collect();
    let want: Vec<[u32; 3]> = (0..n as u32).map(|i| [i % 8, (i / 8) % 4, i / 32]).collect();
    (got, want)
}

/// Stores get_global_id(0) at the index computed without it (group id * local size + local id).
const GLOBAL_ID_1D: &str = r#"
kernel void ids(global uint* out) {
    out[get_group_id(0) * get_local_size(0) + get_local_id(0)] = get_global_id(0);
}
"#;

fn libclc_global_id_1d(version: Option<u32>) -> Vec<u32> {
    let gpu = Gpu::new();
    let kernel = gpu.load(&compile(GLOBAL_ID_1D, Builtins::Libclc(version)), "ids", VaFlags::CODE);
    let out = gpu.buffer(4 * 256, VaFlags::READ_WRITE);
    let args = gpu.buffer(4096, VaFlags::READ_ONLY);
    let fence = gpu.buffer(4096, VaFlags::READ_WRITE);
    let launch = gpu.launch(&kernel, &args, &[ArgValue::Pointer(out.va)], grid_1d(256, 64));
    gpu.run(&[(&launch, &args)], &[&kernel.code], &[out.bo], &fence).unwrap();
    out.read_u32s(0, 256)
}

/// libclc-22's get_global_id adds a global offset read from implicit-argument dwords 1, 2 and 3
/// (for x, y, z). In the code-object-v4 layout those are the high half of
/// hidden_global_offset_x and both halves of hidden_global_offset_y: zero for a zero offset, so
/// the ids come out right (for any non-zero offset they would be wrong). Under clang-22's
/// default (v6) the same dwords hold hidden_block_count_y, hidden_block_count_z and the packed
/// group sizes x | y << 16, so every id is shifted by them: by 1 in a 1-D grid, and far out of
/// the buffer in z for a 3-D one.
#[test]
fn libclc_global_ids_are_right_with_code_object_v4_and_shifted_with_the_default_v6() {
    let (got, want) = libclc_global_ids(Some(4));
    assert_eq!(got, want, "code object v4, 3-D grid: get_global_id");
    let want_1d: Vec<u32> = (0..256).collect();
    assert_eq!(libclc_global_id_1d(Some(4)), want_1d, "code object v4, 1-D grid: get_global_id");

    // Default (v6): get_global_id(0) = the true id + hidden_block_count_y (1 in a 1-D grid).
    let shifted: Vec<u32> = (1..257).collect();
    assert_eq!(libclc_global_id_1d(None), shifted, "code object v6, 1-D grid: get_global_id");
    let explicit_v6 = libclc_global_id_1d(Some(6));
    assert_eq!(explicit_v6, shifted, "code object v6 (explicit), 1-D grid: get_global_id");
}

/// Two launches in one IB see each other's results (the second after the first has finished),
/// a launch of zero groups does nothing, and DISPATCH_INDIRECT reads its group counts from memory.
#[test]
fn launches_in_one_ib_run_in_order_and_dispatch_indirect_reads_its_groups_from_memory() {
    let gpu = Gpu::new();
    let kernel = gpu.load(&compile(SAXPY, Builtins::Clang), "saxpy", VaFlags::CODE);
    let n = 200u32;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let xs = gpu.buffer(4 * n as u64, VaFlags::READ_ONLY);
    let ys = gpu.buffer(4 * n as u64, VaFlags::READ_WRITE);
    xs.write_f32s(0, &x);
    ys.write_f32s(0, &vec![1.0; n as usize]);
    let counts = gpu.buffer(4096, VaFlags::READ_ONLY);
    counts.write_u32s(0, &[n.div_ceil(64), 1, 1]);
    let args = gpu.buffer(4096, VaFlags::READ_ONLY);
    let fence = gpu.buffer(4096, VaFlags::READ_WRITE);
    let values = [ArgValue::Pointer(xs.va), ArgValue::Pointer(ys.va), ArgValue::F32(3.0), ArgValue::U32(n)];
    let launch = gpu.launch(&kernel, &args, &values, grid_1d(n, 64));
    let empty = Launch { groups: [0, 0, 0], ..launch.clone() };

    let mut words = Vec::new();
    let mut w = pm4::PacketWriter::new(&mut words);
    pm4::dispatch::write_preamble(&mut w, pm4::Gfx::Gfx11).unwrap();
    write_launch(&mut w, &launch);
    write_launch(&mut w, &empty);
    w.dispatch_indirect(&pm4::packets::DispatchIndirect::Address {
        address: counts.va,
        initiator: pm4::fields::DispatchInitiator::launch(true),
    })
    .unwrap();
    w.event_write(&pm4::packets::EventWrite::CS_PARTIAL_FLUSH).unwrap();
    w.release_mem(&pm4::packets::ReleaseMem::fence32(fence.va, FENCE_VALUE)).unwrap();
    let ib = gpu.ib_buffer(&words);
    let list = [kernel.code.bo, xs.bo, ys.bo, counts.bo, args.bo, fence.bo];
    let seq = gpu.submit(&ib, words.len(), &list).unwrap();
    assert_eq!(gpu.wait(seq).unwrap(), WaitStatus::Completed);
    let want: Vec<f32> = x.iter().map(|&v| 3.0 * v + (3.0 * v + 1.0)).collect();
    assert_eq!(ys.read_f32s(0, n as usize), want);
    assert_eq!(fence.read_u32s(0, 1), [FENCE_VALUE]);
}
