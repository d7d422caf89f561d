//! What goes wrong on a GPU goes wrong the same way on the simulated one, as an error and never a
//! crash: page faults (unmapped, read-only, non-executable, a buffer missing from the BO list)
//! name the address, the access, the kernel and the PC; unknown packets name the opcode and the
//! dword; a kernel that never ends times out after its instruction budget. Each leaves its
//! context reset and guilty, refusing further work, while a new context runs normally.

use std::time::Duration;

use crate::support::*;
use sparkle::amdgpu::kmd::{ContextId, HwIp, Timeout, VaFlags, WaitStatus};
use sparkle::amdgpu::AmdgpuError;
use sparkle_amdgpu_codeobj::kernarg::ArgValue;
use sparkle_amdgpu_sim::SimOptions;

const OOB: &str = r#"
kernel void oob(global uint* out, uint far) {
    out[__builtin_amdgcn_workitem_id_x() + far] = 7;
}
"#;

const SPIN: &str = r#"
kernel void spin(global volatile uint* flag) {
    while (*flag == 0) {
    }
}
"#;

/// The PC a fault message names.
fn pc_of(message: &str) -> u64 {
    let at = message.find("at PC 0x").unwrap_or_else(|| panic!("no PC in: {message}")) + "at PC 0x".len();
    let hex: String = message[at..].chars().take_while(|c| c.is_ascii_hexdigit()).collect();
    u64::from_str_radix(&hex, 16).unwrap()
}

fn assert_guilty(gpu: &Gpu, ctx: ContextId) {
    let state = gpu.kmd.ctx_state(ctx).unwrap();
    assert!(state.reset && state.guilty, "context state after a failure: {state:?}");
}

/// saxpy over 256 elements with x, y mapped with the given flags; returns the run's outcome.
fn run_saxpy(
    gpu: &Gpu,
    code_flags: VaFlags,
    y_flags: VaFlags,
    list_y: bool,
) -> (Result<WaitStatus, AmdgpuError>, LoadedKernel, GpuBuffer) {
    let kernel = gpu.load(&compile(SAXPY, Builtins::Clang), "saxpy", code_flags);
    let xs = gpu.buffer(1024, VaFlags::READ_ONLY);
    let ys = gpu.buffer(1024, y_flags);
    let args = gpu.buffer(4096, VaFlags::READ_ONLY);
    let fence = gpu.buffer(4096, VaFlags::READ_WRITE);
    let values = [ArgValue::Pointer(xs.va), ArgValue::Pointer(ys.va), ArgValue::F32(2.0), ArgValue::U32(256)];
    let launch = gpu.launch(&kernel, &args, &values, grid_1d(256, 64));
    let list = if list_y { vec![xs.bo, ys.bo] } else { vec![xs.bo] };
    (gpu.run(&[(&launch, &args)], &[&kernel.code], &list, &fence), kernel, ys)
}

#[test]
fn a_kernel_writing_outside_its_buffers_is_a_page_fault_and_a_new_context_still_works() {
    let gpu = Gpu::new();
    let kernel = gpu.load(&compile(OOB, Builtins::Clang), "oob", VaFlags::CODE);
    let out = gpu.buffer(4096, VaFlags::READ_WRITE);
    let args = gpu.buffer(4096, VaFlags::READ_ONLY);
    let fence = gpu.buffer(4096, VaFlags::READ_WRITE);
    let far = 0x1000_0000u32; // 1 GiB past the buffer
    let launch =
        gpu.launch(&kernel, &args, &[ArgValue::Pointer(out.va), ArgValue::U32(far)], grid_1d(64, 64));
    let err = gpu.run(&[(&launch, &args)], &[&kernel.code], &[out.bo], &fence).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, AmdgpuError::DeviceLost(_)), "{err:?}");
    let addr = out.va + 4 * far as u64;
    assert!(
        message.contains(&format!("GPU page fault at {addr:#x} (write) in kernel oob at PC 0x")),
        "{message}"
    );
    assert!(message.contains("no buffer is mapped there"), "{message}");
    let pc = pc_of(&message);
    assert!(
        (kernel.entry..kernel.code.va + kernel.code.size).contains(&pc),
        "PC {pc:#x} is not in the kernel"
    );
    assert_eq!(fence.read_u32s(0, 1), [0], "the fence of a faulted submission was written");
    assert_guilty(&gpu, gpu.ctx);

    // The guilty context refuses new work, like the kernel's ECANCELED.
    let ib = gpu.ib_buffer(&ib_words([], None));
    let refused = gpu.submit(&ib, ib_words([], None).len(), &[]).unwrap_err().to_string();
    assert!(refused.contains("guilty") && refused.contains("ECANCELED"), "{refused}");

    // A new context on the same device runs the same kernel with an in-range index.
    let ctx = gpu.kmd.ctx_create().unwrap();
    assert!(gpu.kmd.ctx_state(ctx).unwrap().is_healthy());
    let launch = gpu.launch(&kernel, &args, &[ArgValue::Pointer(out.va), ArgValue::U32(10)], grid_1d(64, 64));
    let words = ib_words([&launch], Some(fence.va));
    let ib = gpu.ib_buffer(&words);
    let seq = gpu.submit_on(ctx, &ib, words.len(), &[kernel.code.bo, args.bo, out.bo, fence.bo]).unwrap();
    assert_eq!(gpu.wait_on(ctx, seq).unwrap(), WaitStatus::Completed);
    let got = out.read_u32s(0, 80);
    assert!(
        got[..10].iter().all(|&v| v == 0)
            && got[10..74].iter().all(|&v| v == 7)
            && got[74..].iter().all(|&v| v == 0)
    );
    assert_eq!(fence.read_u32s(0, 1), [FENCE_VALUE]);
    assert!(gpu.kmd.ctx_state(ctx).unwrap().is_healthy());
}

#[test]
fn a_write_to_a_read_only_mapping_is_a_write_fault() {
    let gpu = Gpu::new();
    let (result, _, ys) = run_saxpy(&gpu, VaFlags::CODE, VaFlags::READ_ONLY, true);
    let message = result.unwrap_err().to_string();
    assert!(
        message.contains(&format!("GPU page fault at {:#x} (write) in kernel saxpy at PC", ys.va)),
        "{message}"
    );
    assert!(message.contains("without write permission (read only)"), "{message}");
    assert_guilty(&gpu, gpu.ctx);
}

#[test]
fn code_in_a_non_executable_mapping_is_a_fetch_fault_at_the_entry_point() {
    let gpu = Gpu::new();
    let (result, kernel, _) = run_saxpy(&gpu, VaFlags::READ_ONLY, VaFlags::READ_WRITE, true);
    let message = result.unwrap_err().to_string();
    let entry = kernel.entry;
    assert!(
        message.contains(&format!("GPU page fault at {entry:#x} (fetch) in kernel saxpy at PC {entry:#x}")),
        "{message}"
    );
    assert!(message.contains("without execute permission"), "{message}");
    assert_guilty(&gpu, gpu.ctx);
}

#[test]
fn a_buffer_missing_from_the_bo_list_faults_and_a_missing_ib_buffer_is_refused_at_submit() {
    let gpu = Gpu::new();
    let (result, _, ys) = run_saxpy(&gpu, VaFlags::CODE, VaFlags::READ_WRITE, false);
    let message = result.unwrap_err().to_string();
    assert!(message.contains(&format!("GPU page fault at {:#x} (read) in kernel saxpy", ys.va)), "{message}");
    assert!(message.contains(&format!("buffer {} is mapped", ys.bo.0)), "{message}");
    assert!(message.contains("not in the submission's BO list"), "{message}");

    // The CS ioctl itself refuses an IB whose buffer is not listed, and unknown handles.
    let gpu = Gpu::new();
    let words = ib_words([], None);
    let ib = gpu.ib_buffer(&words);
    let ibs = [sparkle::amdgpu::kmd::IbDesc {
        va: ib.va,
        size_bytes: (words.len() * 4) as u32,
        ip: HwIp::Compute,
        ring: 0,
        flags: 0,
    }];
    let sub = |buffers: &[sparkle::amdgpu::kmd::BoHandle]| {
        gpu.kmd.submit(&sparkle::amdgpu::kmd::Submission { ctx: gpu.ctx, ibs: &ibs, buffers })
    };
    let err = sub(&[]).unwrap_err();
    assert!(err.to_string().contains("not in the BO list"), "{err}");
    assert_eq!(errno(&err), Some(libc::EINVAL));
    let err = sub(&[ib.bo, sparkle::amdgpu::kmd::BoHandle(999)]).unwrap_err();
    assert!(err.to_string().contains("buffer 999"), "{err}");
    assert_eq!(errno(&err), Some(libc::ENOENT));
    // Refused submissions leave the context usable.
    let seq = sub(&[ib.bo]).unwrap();
    assert_eq!(gpu.wait(seq).unwrap(), WaitStatus::Completed);
}

fn errno(err: &AmdgpuError) -> Option<i32> {
    match err {
        AmdgpuError::Io { source, .. } => source.raw_os_error(),
        _ => None,
    }
}

#[test]
fn unknown_and_unmodelled_packets_stop_the_submission_naming_opcode_and_dword() {
    // An opcode nobody knows, after the preamble.
    let gpu = Gpu::new();
    let fence = gpu.buffer(4096, VaFlags::READ_WRITE);
    let mut words = ib_words([], None);
    let bad_at = words.len();
    words.extend([0xC000_9900, 0x1234_5678]); // type 3, opcode 0x99, one payload dword
    words.extend(ib_words([], Some(fence.va)));
    let ib = gpu.ib_buffer(&words);
    let seq = gpu.submit(&ib, words.len(), &[fence.bo]).unwrap();
    let message = gpu.wait(seq).unwrap_err().to_string();
    assert!(message.contains(&format!("dword {bad_at} of the IB at {:#x}", ib.va)), "{message}");
    assert!(message.contains("unknown opcode 0x99"), "{message}");
    assert_eq!(fence.read_u32s(0, 1), [0], "packets after the bad one ran");
    assert_guilty(&gpu, gpu.ctx);

    // A packet the decoder knows but the simulated CP does not run.
    let gpu = Gpu::new();
    let mut words = ib_words([], None);
    let at = words.len();
    let mut w = pm4::PacketWriter::new(&mut words);
    w.set_uconfig_reg(pm4::registers::GRBM_GFX_INDEX, &[0xe000_0000]).unwrap();
    let ib = gpu.ib_buffer(&words);
    let seq = gpu.submit(&ib, words.len(), &[]).unwrap();
    let message = gpu.wait(seq).unwrap_err().to_string();
    assert!(message.contains(&format!("SET_UCONFIG_REG (opcode 0x79) at dword {at}")), "{message}");
    assert!(message.contains("does not run it"), "{message}");
}

#[test]
fn a_kernel_that_never_ends_times_out_after_its_budget_like_a_hung_gpu() {
    let budget = 500_000;
    let gpu = Gpu::with_options(SimOptions { instruction_budget: budget, ..SimOptions::default() });
    let kernel = gpu.load(&compile(SPIN, Builtins::Clang), "spin", VaFlags::CODE);
    let flag = gpu.buffer(4096, VaFlags::READ_WRITE);
    let args = gpu.buffer(4096, VaFlags::READ_ONLY);
    let fence = gpu.buffer(4096, VaFlags::READ_WRITE);
    let launch = gpu.launch(&kernel, &args, &[ArgValue::Pointer(flag.va)], grid_1d(64, 64));
    let words = ib_words([&launch], Some(fence.va));
    let ib = gpu.ib_buffer(&words);
    let seq = gpu.submit(&ib, words.len(), &[kernel.code.bo, args.bo, flag.bo, fence.bo]).unwrap();
    // The CS returned at once; the kernel is still spinning on the worker.
    let poll = gpu.kmd.wait(gpu.ctx, HwIp::Compute, 0, seq, Timeout::Relative(Duration::ZERO)).unwrap();
    assert_eq!(poll, WaitStatus::Busy);
    let past = gpu.kmd.wait(gpu.ctx, HwIp::Compute, 0, seq, Timeout::AbsoluteMonotonicNs(0)).unwrap();
    assert_eq!(past, WaitStatus::Busy, "a deadline in the past polls");
    let err = gpu.wait(seq).unwrap_err();
    assert!(matches!(err, AmdgpuError::Timeout { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message
            .contains(&format!("kernel spin did not finish within its budget of {budget} wave instructions")),
        "{message}"
    );
    assert!(message.contains("a hung GPU"), "{message}");
    assert_eq!(fence.read_u32s(0, 1), [0]);
    assert_guilty(&gpu, gpu.ctx);
}

#[test]
fn work_queued_behind_a_failure_is_canceled_or_refused() {
    let gpu = Gpu::new();
    let fence = gpu.buffer(4096, VaFlags::READ_WRITE);
    let mut bad = ib_words([], None);
    bad.extend([0xC000_9900, 0]);
    let bad_ib = gpu.ib_buffer(&bad);
    let good = ib_words([], Some(fence.va));
    let good_ib = gpu.ib_buffer(&good);
    let first = gpu.submit(&bad_ib, bad.len(), &[]).unwrap();
    match gpu.submit(&good_ib, good.len(), &[fence.bo]) {
        Ok(second) => {
            let message = gpu.wait(second).unwrap_err().to_string();
            assert!(message.contains("canceled") && message.contains("unknown opcode 0x99"), "{message}");
        }
        Err(refused) => assert!(refused.to_string().contains("guilty"), "{refused}"),
    }
    assert!(gpu.wait(first).is_err());
    assert_eq!(fence.read_u32s(0, 1), [0], "work behind the failure ran");
}

#[test]
fn code_without_an_elf_image_is_named_by_its_address() {
    let gpu = Gpu::new();
    let kernel = gpu.load(&compile(OOB, Builtins::Clang), "oob", VaFlags::CODE);
    kernel.code.write_bytes(0, &[0; 4]); // no ELF magic: the symbols cannot be found
    let out = gpu.buffer(4096, VaFlags::READ_WRITE);
    let args = gpu.buffer(4096, VaFlags::READ_ONLY);
    let fence = gpu.buffer(4096, VaFlags::READ_WRITE);
    let launch =
        gpu.launch(&kernel, &args, &[ArgValue::Pointer(out.va), ArgValue::U32(1 << 28)], grid_1d(32, 32));
    let message = gpu.run(&[(&launch, &args)], &[&kernel.code], &[out.bo], &fence).unwrap_err().to_string();
    assert!(message.contains(&format!("(write) in kernel <code at {:#x}> at PC", kernel.entry)), "{message}");
}
