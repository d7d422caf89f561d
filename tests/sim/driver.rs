//! The simulated driver answers like the kernel: a gfx1100 identity that says it is a simulator (as
//! the library reads it: `src/amdgpu/tests/sim_driver.rs`), GEM and VA rules with the kernel's
//! errno values (alignment, range, overlap, unmap by exact address, close dropping mappings, CPU
//! access), heap limits, and context and fence bookkeeping.

use std::sync::Arc;
use std::time::Duration;

use sparkle_amdgpu_kmd::error::AmdgpuError;
use sparkle_amdgpu_kmd::kmd::{
    BoHandle, BufferDesc, ContextId, Domain, HwIp, KernelDriver, SeqNo, Timeout, VaFlags,
};
use sparkle_amdgpu_sim::{identity, SimDriver, SimOptions};

fn driver() -> Arc<dyn KernelDriver> {
    SimDriver::new(SimOptions::default())
}

fn gtt(size: u64) -> BufferDesc {
    BufferDesc { size, alignment: 4096, domain: Domain::Gtt, cpu_access: true, cleared: true }
}

fn errno(err: &AmdgpuError) -> Option<i32> {
    match err {
        AmdgpuError::Io { source, .. } => source.raw_os_error(),
        _ => None,
    }
}

#[track_caller]
fn assert_errno<T>(result: Result<T, AmdgpuError>, expected: i32, words: &str) {
    let Err(err) = result else { panic!("expected errno {expected} ({words}), got success") };
    assert_eq!(errno(&err), Some(expected), "{err}");
    assert!(err.to_string().contains(words), "{err}");
}

#[test]
fn va_mappings_follow_the_kernels_rules() {
    let kmd = driver();
    let a = kmd.gem_create(&gtt(8192)).unwrap();
    let b = kmd.gem_create(&gtt(4096)).unwrap();
    let base = identity::VA_START + 0x10_0000;
    kmd.va_map(a, base, 8192, VaFlags::READ_WRITE).unwrap();
    assert_errno(
        kmd.va_map(b, base + 4096, 4096, VaFlags::READ_WRITE),
        libc::EINVAL,
        "conflicts with buffer",
    );
    assert_errno(kmd.va_map(b, base - 4096, 8192, VaFlags::READ_WRITE), libc::EINVAL, "only 4096 bytes");
    assert_errno(
        kmd.va_map(b, base + 0x10_0100, 4096, VaFlags::READ_WRITE),
        libc::EINVAL,
        "multiples of 4096",
    );
    assert_errno(kmd.va_map(b, 0, 4096, VaFlags::READ_WRITE), libc::EINVAL, "outside the usable VA range");
    assert_errno(kmd.va_map(b, identity::VA_END, 4096, VaFlags::READ_WRITE), libc::EINVAL, "outside");
    assert_errno(kmd.va_map(BoHandle(77), base + 0x10_0000, 4096, VaFlags::READ_WRITE), libc::ENOENT, "77");
    // Adjacent mappings are fine; unmapping wants the exact start and the right buffer.
    kmd.va_map(b, base + 8192, 4096, VaFlags::READ_ONLY).unwrap();
    assert_errno(kmd.va_unmap(a, base + 4096, 4096), libc::ENOENT, "no mapping starting at");
    assert_errno(kmd.va_unmap(a, base + 8192, 4096), libc::ENOENT, "belongs to buffer");
    kmd.va_unmap(b, base + 8192, 4096).unwrap();
    assert_errno(kmd.va_unmap(b, base + 8192, 4096), libc::ENOENT, "no mapping");
    // Closing a buffer drops its mappings, as the kernel does: the range is free again.
    kmd.gem_close(a).unwrap();
    kmd.va_map(b, base, 4096, VaFlags::READ_WRITE).unwrap();
    assert_errno(kmd.gem_close(a), libc::EINVAL, "no such handle");
}

#[test]
fn buffers_are_zeroed_host_memory_with_checked_cpu_access_and_heap_limits() {
    let kmd: Arc<dyn KernelDriver> =
        SimDriver::new(SimOptions { vram_bytes: 1 << 20, gtt_bytes: 1 << 20, ..SimOptions::default() });
    let bo = kmd.gem_create(&gtt(100)).unwrap();
    let map = kmd.map_cpu(bo, 4096).unwrap();
    assert_eq!(map.len(), 4096, "sizes are rounded up to the page size");
    let mut bytes = [1u8; 16];
    map.read(4080, &mut bytes).unwrap();
    assert_eq!(bytes, [0; 16]);
    map.write(10, b"hello").unwrap();
    let mut back = [0u8; 5];
    kmd.map_cpu(bo, 4096).unwrap().read(10, &mut back).unwrap();
    assert_eq!(&back, b"hello", "two mappings share the buffer");
    assert!(map.write(4094, b"xyz").unwrap_err().to_string().contains("outside the 4096-byte mapping"));
    assert_errno(kmd.map_cpu(bo, 8192), libc::EINVAL, "the buffer has 4096 bytes");
    let hidden =
        kmd.gem_create(&BufferDesc { cpu_access: false, domain: Domain::Vram, ..gtt(4096) }).unwrap();
    assert_errno(kmd.map_cpu(hidden, 4096), libc::EPERM, "without CPU access");
    assert_errno(kmd.gem_create(&gtt(0)), libc::EINVAL, "at least one byte");

    let err = kmd.gem_create(&gtt(2 << 20)).unwrap_err();
    assert!(matches!(err, AmdgpuError::OutOfMemory(_)), "{err:?}");
    let used = kmd.memory_info().unwrap().gtt.heap_usage;
    assert_eq!(used, 4096);
    kmd.gem_close(bo).unwrap();
    assert_eq!(kmd.memory_info().unwrap().gtt.heap_usage, 0);
    // The old mapping still reads the bytes it had (the pages are freed with the last user).
    map.read(10, &mut back).unwrap();
}

#[test]
fn contexts_and_fences_are_checked() {
    let kmd = driver();
    let ctx = kmd.ctx_create().unwrap();
    let other = kmd.ctx_create().unwrap();
    assert_ne!(ctx, other);
    let wait = |ctx: ContextId, seq: u64| {
        kmd.wait(ctx, HwIp::Compute, 0, SeqNo(seq), Timeout::Relative(Duration::from_millis(10)))
    };
    assert_errno(wait(ctx, 1), libc::EINVAL, "only 0 submissions");
    assert_errno(wait(ContextId(999), 1), libc::EINVAL, "no such context");
    kmd.ctx_destroy(other).unwrap();
    assert_errno(kmd.ctx_destroy(other), libc::EINVAL, "no such context");
    assert_errno(kmd.ctx_state(other), libc::EINVAL, "no such context");
    assert!(kmd.ctx_state(ctx).unwrap().is_healthy());
}
