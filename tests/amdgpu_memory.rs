//! GPU memory against a recording fake of the kernel-driver trait (not the simulator): the
//! domains and VA permissions each kind of buffer gets, alignment, CPU access bounds, release
//! order, reuse of freed addresses, and no live objects after drops, also when a step fails.
#![cfg(feature = "amdgpu")]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use sparkle::amdgpu::kmd::{
    BoHandle, BufferDesc, ContextId, ContextState, CpuMapping, Domain, DriverVersion, HwIp, KernelDriver,
    SeqNo, Submission, Timeout, VaFlags, WaitStatus,
};
use sparkle::amdgpu::memory::{BufferKind, Memory};
use sparkle::amdgpu::va_allocator::MIN_VA_ALIGNMENT;
use sparkle::amdgpu::{uapi, AmdgpuError, Result};

/// A fake buffer's creation parameters and contents.
type FakeBuffer = (BufferDesc, Arc<Mutex<Vec<u8>>>);

#[derive(Default)]
struct State {
    next_handle: u32,
    buffers: BTreeMap<u32, FakeBuffer>,
    va: BTreeMap<u64, (u32, u64, VaFlags)>,
    calls: Vec<String>,
    fail: Option<&'static str>,
}

#[derive(Default)]
struct RecordingDriver {
    state: Mutex<State>,
    cpu_mappings: Arc<AtomicUsize>,
}

impl RecordingDriver {
    fn fail_next(&self, op: &'static str) {
        self.state.lock().unwrap().fail = Some(op);
    }

    fn check_fail(&self, state: &mut State, op: &'static str) -> Result<()> {
        state.calls.push(op.to_string());
        if state.fail == Some(op) {
            state.fail = None;
            return Err(AmdgpuError::io(op, std::io::Error::other("injected failure")));
        }
        Ok(())
    }
}

struct FakeMapping {
    bytes: Arc<Mutex<Vec<u8>>>,
    len: usize,
    live: Arc<AtomicUsize>,
}

impl Drop for FakeMapping {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

impl CpuMapping for FakeMapping {
    fn len(&self) -> usize {
        self.len
    }
    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.bytes.lock().unwrap()[offset..offset + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        out.copy_from_slice(&self.bytes.lock().unwrap()[offset..offset + out.len()]);
        Ok(())
    }
}

impl KernelDriver for RecordingDriver {
    fn driver_version(&self) -> DriverVersion {
        DriverVersion { name: "fake".into(), major: 0, minor: 0, patch: 0 }
    }
    fn describe(&self) -> String {
        "recording fake".into()
    }
    fn device_info(&self) -> Result<uapi::drm_amdgpu_info_device> {
        Ok(Default::default())
    }
    fn hw_ip_info(&self, _ip: HwIp) -> Result<uapi::drm_amdgpu_info_hw_ip> {
        Ok(Default::default())
    }
    fn memory_info(&self) -> Result<uapi::drm_amdgpu_memory_info> {
        Ok(Default::default())
    }
    fn gem_create(&self, desc: &BufferDesc) -> Result<BoHandle> {
        let mut s = self.state.lock().unwrap();
        self.check_fail(&mut s, "gem_create")?;
        s.next_handle += 1;
        let handle = s.next_handle;
        s.buffers.insert(handle, (*desc, Arc::new(Mutex::new(vec![0; desc.size as usize]))));
        Ok(BoHandle(handle))
    }
    fn gem_close(&self, bo: BoHandle) -> Result<()> {
        let mut s = self.state.lock().unwrap();
        self.check_fail(&mut s, "gem_close")?;
        // Like the kernel, closing a handle drops whatever mappings it still has.
        s.va.retain(|_, (h, _, _)| *h != bo.0);
        s.buffers
            .remove(&bo.0)
            .map(|_| ())
            .ok_or_else(|| AmdgpuError::io("close", std::io::Error::other("unknown handle")))
    }
    fn map_cpu(&self, bo: BoHandle, size: u64) -> Result<Box<dyn CpuMapping>> {
        let mut s = self.state.lock().unwrap();
        self.check_fail(&mut s, "map_cpu")?;
        let (desc, bytes) = s.buffers.get(&bo.0).unwrap();
        assert!(size <= desc.size);
        self.cpu_mappings.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(FakeMapping {
            bytes: bytes.clone(),
            len: size as usize,
            live: self.cpu_mappings.clone(),
        }))
    }
    fn va_map(&self, bo: BoHandle, va: u64, size: u64, flags: VaFlags) -> Result<()> {
        let mut s = self.state.lock().unwrap();
        self.check_fail(&mut s, "va_map")?;
        assert!(s.buffers[&bo.0].0.size >= size, "mapping more than the buffer holds");
        for (&start, &(_, len, _)) in &s.va {
            assert!(va + size <= start || start + len <= va, "overlapping VA {va:#x}");
        }
        s.va.insert(va, (bo.0, size, flags));
        Ok(())
    }
    fn va_unmap(&self, bo: BoHandle, va: u64, size: u64) -> Result<()> {
        let mut s = self.state.lock().unwrap();
        self.check_fail(&mut s, "va_unmap")?;
        let (handle, len, _) = s.va.remove(&va).unwrap();
        assert_eq!((handle, len), (bo.0, size));
        Ok(())
    }
    fn ctx_create(&self) -> Result<ContextId> {
        Ok(ContextId(1))
    }
    fn ctx_destroy(&self, _ctx: ContextId) -> Result<()> {
        Ok(())
    }
    fn ctx_state(&self, _ctx: ContextId) -> Result<ContextState> {
        Ok(ContextState::default())
    }
    fn submit(&self, _submission: &Submission<'_>) -> Result<SeqNo> {
        Ok(SeqNo(1))
    }
    fn wait(
        &self,
        _ctx: ContextId,
        _ip: HwIp,
        _ring: u32,
        _seq: SeqNo,
        _timeout: Timeout,
    ) -> Result<WaitStatus> {
        Ok(WaitStatus::Completed)
    }
}

const VA_START: u64 = 0x20_0000;
const VA_END: u64 = 0x1_0000_0000;

fn setup() -> (Arc<RecordingDriver>, Memory) {
    let driver = Arc::new(RecordingDriver::default());
    let memory = Memory::new(driver.clone(), VA_START, VA_END, 4096);
    (driver, memory)
}

fn assert_nothing_alive(driver: &RecordingDriver, memory: &Memory) {
    assert!(memory.live_objects().is_zero(), "{:?}", memory.live_objects());
    let s = driver.state.lock().unwrap();
    assert!(s.buffers.is_empty(), "open handles: {:?}", s.buffers.keys().collect::<Vec<_>>());
    assert!(s.va.is_empty(), "mapped VAs: {:?}", s.va.keys().collect::<Vec<_>>());
    assert_eq!(driver.cpu_mappings.load(Ordering::SeqCst), 0);
}

#[test]
fn each_kind_gets_its_domain_and_permissions() {
    let (driver, memory) = setup();
    let kinds = [
        BufferKind::Code,
        BufferKind::KernelArgs,
        BufferKind::Commands,
        BufferKind::Data,
        BufferKind::Signals,
    ];
    let buffers: Vec<_> = kinds.iter().map(|&kind| memory.allocate(1000, kind).unwrap()).collect();
    {
        let s = driver.state.lock().unwrap();
        for buffer in &buffers {
            let (_, _, flags) = s.va[&buffer.gpu_address()];
            let (desc, _) = &s.buffers[&buffer.handle().0];
            match buffer.kind() {
                BufferKind::Code => {
                    assert_eq!(flags, VaFlags { readable: true, writeable: false, executable: true });
                    assert_eq!(desc.domain, Domain::Vram);
                }
                BufferKind::KernelArgs | BufferKind::Commands => {
                    assert_eq!(flags, VaFlags { readable: true, writeable: false, executable: false });
                    assert_eq!(desc.domain, Domain::Gtt);
                }
                BufferKind::Data => {
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
    }
    let addresses: BTreeSet<u64> = buffers.iter().map(|b| b.gpu_address()).collect();
    assert_eq!(addresses.len(), buffers.len());
    for address in &addresses {
        assert_eq!(address % MIN_VA_ALIGNMENT, 0);
        assert!((VA_START..VA_END).contains(address));
    }
    assert_eq!(memory.live_objects().buffers, 5);
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
    {
        let s = driver.state.lock().unwrap();
        let tail: Vec<&str> = s.calls.iter().rev().take(2).map(|c| c.as_str()).collect();
        assert_eq!(tail, ["gem_close", "va_unmap"]);
    }
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
    let driver = Arc::new(RecordingDriver::default());
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
    let calls = driver.state.lock().unwrap().calls.clone();
    assert_eq!(calls.last().map(String::as_str), Some("gem_close"));
}
