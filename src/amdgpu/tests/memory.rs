//! GPU memory against the recording fake of the kernel-driver trait (`amdgpu_support`, not the
//! simulator): the domains and VA permissions each kind of buffer gets, alignment, CPU access
//! bounds, release order, reuse of freed addresses, and no live objects after drops, also when a
//! step fails.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::amdgpu_support::FakeDriver;
use crate::amdgpu::kmd::{Domain, VaFlags};
use crate::amdgpu::memory::{BufferKind, Memory};
use crate::amdgpu::va_allocator::MIN_VA_ALIGNMENT;
use crate::amdgpu::AmdgpuError;

const VA_START: u64 = 0x20_0000;
const VA_END: u64 = 0x1_0000_0000;

fn setup() -> (Arc<FakeDriver>, Memory) {
    let driver = FakeDriver::gfx1100();
    let memory = Memory::new(driver.clone(), VA_START, VA_END, 4096);
    (driver, memory)
}

fn assert_nothing_alive(driver: &FakeDriver, memory: &Memory) {
    assert!(memory.live_objects().is_zero(), "{:?}", memory.live_objects());
    let (handles, vas, cpu_mappings, _contexts) = driver.live();
    assert_eq!((handles, vas, cpu_mappings), (0, 0, 0), "open handles, mapped VAs, CPU mappings");
}

#[test]
fn each_kind_gets_its_domain_and_permissions() {
    let (driver, memory) = setup();
    let kinds = [
        BufferKind::Code,
        BufferKind::CodeAndData,
        BufferKind::KernelArgs,
        BufferKind::Commands,
        BufferKind::Data,
        BufferKind::Signals,
        BufferKind::Scratch,
    ];
    let buffers: Vec<_> = kinds.iter().map(|&kind| memory.allocate(1000, kind).unwrap()).collect();
    for buffer in &buffers {
        let (handle, start, flags) = driver.mapping_of(buffer.gpu_address()).unwrap();
        assert_eq!((handle, start), (buffer.handle(), buffer.gpu_address()), "mapped at its own address");
        let desc = driver.buffer_desc(buffer.handle()).unwrap();
        match buffer.kind() {
            BufferKind::Code => {
                assert_eq!(flags, VaFlags { readable: true, writeable: false, executable: true });
                assert_eq!(desc.domain, Domain::Vram);
            }
            BufferKind::CodeAndData => {
                assert_eq!(flags, VaFlags { readable: true, writeable: true, executable: true });
                assert_eq!(desc.domain, Domain::Vram);
            }
            BufferKind::KernelArgs | BufferKind::Commands => {
                assert_eq!(flags, VaFlags { readable: true, writeable: false, executable: false });
                assert_eq!(desc.domain, Domain::Gtt);
            }
            BufferKind::Data | BufferKind::Scratch => {
                assert_eq!(flags, VaFlags { readable: true, writeable: true, executable: false });
                assert_eq!(desc.domain, Domain::Vram);
            }
            BufferKind::Signals => {
                assert_eq!(flags, VaFlags { readable: true, writeable: true, executable: false });
                assert_eq!(desc.domain, Domain::Gtt);
            }
        }
        assert!(desc.cpu_access);
    }
    let addresses: BTreeSet<u64> = buffers.iter().map(|b| b.gpu_address()).collect();
    assert_eq!(addresses.len(), buffers.len());
    for address in &addresses {
        assert_eq!(address % MIN_VA_ALIGNMENT, 0);
        assert!((VA_START..VA_END).contains(address));
    }
    assert_eq!(memory.live_objects().buffers, kinds.len());
    drop(buffers);
    assert_nothing_alive(&driver, &memory);
}

#[test]
fn cpu_access_round_trips_and_stays_in_bounds() {
    let (driver, memory) = setup();
    let buffer = memory.allocate(16, BufferKind::Data).unwrap();
    buffer.write(4, &[1, 2, 3, 4]).unwrap();
    let mut out = [0u8; 8];
    buffer.read(0, &mut out).unwrap();
    assert_eq!(out, [0, 0, 0, 0, 1, 2, 3, 4]);
    assert!(buffer.write(14, &[0; 4]).is_err(), "past the requested size");
    assert!(buffer.read(u64::MAX, &mut out).is_err());
    drop(buffer);
    assert_nothing_alive(&driver, &memory);
}

#[test]
fn release_unmaps_before_closing_and_reuses_addresses() {
    let (driver, memory) = setup();
    let first = memory.allocate(MIN_VA_ALIGNMENT * 3, BufferKind::Data).unwrap();
    let address = first.gpu_address();
    drop(first);
    let tail: Vec<&str> = driver.calls().into_iter().rev().take(2).collect();
    assert_eq!(tail, ["gem_close", "va_unmap"]);
    let again = memory.allocate(10, BufferKind::Code).unwrap();
    assert_eq!(again.gpu_address(), address, "freed range is reused");
    drop(again);
    assert_nothing_alive(&driver, &memory);
}

#[test]
fn failures_at_every_step_leave_nothing_behind() {
    for step in ["gem_create", "va_map", "map_cpu"] {
        let (driver, memory) = setup();
        let keep = memory.allocate(100, BufferKind::Data).unwrap();
        driver.fail_next(step);
        let err = memory.allocate(100, BufferKind::Data).unwrap_err();
        assert!(err.to_string().contains("injected"), "{step}: {err}");
        assert_eq!(memory.live_objects().buffers, 1, "{step}");
        drop(keep);
        assert_nothing_alive(&driver, &memory);
    }
}

#[test]
fn address_space_exhaustion_is_out_of_memory_and_leaks_nothing() {
    let driver = FakeDriver::gfx1100();
    let memory = Memory::new(driver.clone(), 0, 2 * MIN_VA_ALIGNMENT, 4096);
    let a = memory.allocate(MIN_VA_ALIGNMENT, BufferKind::Data).unwrap();
    let err = memory.allocate(2 * MIN_VA_ALIGNMENT, BufferKind::Data).unwrap_err();
    assert!(matches!(err, AmdgpuError::OutOfMemory(_)), "{err}");
    drop(a);
    assert_nothing_alive(&driver, &memory);
    let b = memory.allocate(2 * MIN_VA_ALIGNMENT, BufferKind::Data).unwrap();
    drop(b);
    assert_nothing_alive(&driver, &memory);
}

#[test]
fn failing_release_steps_still_count_down() {
    let (driver, memory) = setup();
    let buffer = memory.allocate(100, BufferKind::Data).unwrap();
    driver.fail_next("va_unmap");
    drop(buffer);
    // The driver refused the unmap (logged); closing the handle still releases the mapping in the
    // kernel, and our counters must not leak.
    assert_nothing_alive(&driver, &memory);
    assert_eq!(driver.calls().last().copied(), Some("gem_close"));
}
