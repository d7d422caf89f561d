//! A recording fake of the kernel-driver trait for amdgpu tests without a card (not the
//! simulator: it runs nothing). It reports a chosen gfx target, keeps buffer contents in host
//! memory with their GPU mappings, records every CS submission (its IB words copied out at
//! submit time, its BO list) and answers waits as told: done at once, still busy, or reset.
//! The memory steps (create, close, CPU map, VA map and unmap) are logged in order, and a test
//! can make the next call of any one of them fail. `code_objects` reads the committed AOT code
//! objects.
#![allow(dead_code)]

pub mod code_objects;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use sparkle_amdgpu_kmd::kmd::{
    BoHandle, BufferDesc, ContextId, ContextState, CpuMapping, DriverVersion, HwIp, KernelDriver, SeqNo,
    Submission, Timeout, VaFlags, WaitStatus,
};
use sparkle_amdgpu_kmd::{uapi, AmdgpuError, Result};

/// A fake buffer's creation parameters and contents.
type FakeBuffer = (BufferDesc, Arc<Mutex<Vec<u8>>>);

/// One recorded CS ioctl.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub ctx: ContextId,
    pub ib_va: u64,
    pub ib_ip: HwIp,
    pub words: Vec<u32>,
    pub buffers: Vec<BoHandle>,
    pub seq: SeqNo,
}

/// How waits end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitMode {
    /// Every submission is finished when asked.
    Done,
    /// Nothing ever finishes.
    Busy,
    /// Nothing finishes and the context reports a GPU reset it caused.
    Reset,
}

#[derive(Default)]
struct State {
    next_handle: u32,
    buffers: BTreeMap<u32, FakeBuffer>,
    /// VA start → (handle, size, flags).
    va: BTreeMap<u64, (u32, u64, VaFlags)>,
    submissions: Vec<Recorded>,
    contexts: usize,
    /// The memory steps called, in order.
    calls: Vec<&'static str>,
    /// The memory step whose next call fails.
    fail: Option<&'static str>,
}

impl State {
    /// Logs the memory step `op` and fails it if a test asked for that.
    fn step(&mut self, op: &'static str) -> Result<()> {
        self.calls.push(op);
        if self.fail == Some(op) {
            self.fail = None;
            return Err(AmdgpuError::io(op, std::io::Error::other("injected failure")));
        }
        Ok(())
    }
}

pub struct FakeDriver {
    /// GC version as IP discovery reports it: major, minor, revision.
    gc: (u32, u32, u32),
    state: Mutex<State>,
    wait_mode: Mutex<WaitMode>,
    cpu_mappings: Arc<AtomicUsize>,
}

impl FakeDriver {
    /// A driver for a GPU whose GC version is `gc` (11.0.0 is gfx1100, 10.3.0 is gfx1030).
    pub fn new(gc: (u32, u32, u32)) -> Arc<Self> {
        Arc::new(Self {
            gc,
            state: Mutex::default(),
            wait_mode: Mutex::new(WaitMode::Done),
            cpu_mappings: Arc::default(),
        })
    }

    pub fn gfx1100() -> Arc<Self> {
        Self::new((11, 0, 0))
    }

    pub fn set_wait_mode(&self, mode: WaitMode) {
        *self.wait_mode.lock().unwrap() = mode;
    }

    /// Makes the next call of the memory step `op` (the trait method's name, e.g. `"va_map"`)
    /// fail with an error that says "injected".
    pub fn fail_next(&self, op: &'static str) {
        self.state.lock().unwrap().fail = Some(op);
    }

    /// The memory steps called so far, oldest first, failed ones included.
    pub fn calls(&self) -> Vec<&'static str> {
        self.state.lock().unwrap().calls.clone()
    }

    /// How the open buffer `bo` was created.
    pub fn buffer_desc(&self, bo: BoHandle) -> Option<BufferDesc> {
        self.state.lock().unwrap().buffers.get(&bo.0).map(|(desc, _)| *desc)
    }

    pub fn submissions(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().submissions.clone()
    }

    /// `len` bytes at GPU address `va`, from whichever buffer maps it.
    pub fn read_va(&self, va: u64, len: usize) -> Vec<u8> {
        let s = self.state.lock().unwrap();
        let (&start, &(handle, size, _)) =
            s.va.range(..=va).next_back().unwrap_or_else(|| panic!("{va:#x} is not mapped"));
        assert!(va + len as u64 <= start + size, "{va:#x}+{len} runs past the mapping at {start:#x}");
        let bytes = s.buffers[&handle].1.lock().unwrap();
        let at = (va - start) as usize;
        bytes[at..at + len].to_vec()
    }

    /// The buffer handle and VA flags of the mapping holding `va`.
    pub fn mapping_of(&self, va: u64) -> Option<(BoHandle, u64, VaFlags)> {
        let s = self.state.lock().unwrap();
        let (&start, &(handle, size, flags)) = s.va.range(..=va).next_back()?;
        (va < start + size).then_some((BoHandle(handle), start, flags))
    }

    /// Open GEM handles, VA mappings, CPU mappings and contexts.
    pub fn live(&self) -> (usize, usize, usize, usize) {
        let s = self.state.lock().unwrap();
        (s.buffers.len(), s.va.len(), self.cpu_mappings.load(Ordering::SeqCst), s.contexts)
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

impl KernelDriver for FakeDriver {
    fn driver_version(&self) -> DriverVersion {
        DriverVersion { name: "amdgpu".into(), major: 3, minor: 57, patch: 0 }
    }
    fn describe(&self) -> String {
        "recording fake".into()
    }
    fn device_info(&self) -> Result<uapi::drm_amdgpu_info_device> {
        Ok(uapi::drm_amdgpu_info_device {
            device_id: 0x744c,
            family: if self.gc.0 == 11 { 145 } else { 143 },
            cu_active_number: 48,
            num_shader_engines: 6,
            virtual_address_offset: 0x20_0000,
            virtual_address_max: 0x8000_0000_0000,
            virtual_address_alignment: 4096,
            ..Default::default()
        })
    }
    fn hw_ip_info(&self, _ip: HwIp) -> Result<uapi::drm_amdgpu_info_hw_ip> {
        let (major, minor, rev) = self.gc;
        Ok(uapi::drm_amdgpu_info_hw_ip {
            hw_ip_version_major: major,
            hw_ip_version_minor: minor,
            available_rings: 1,
            ip_discovery_version: (major << 16) | (minor << 8) | rev,
            ..Default::default()
        })
    }
    fn memory_info(&self) -> Result<uapi::drm_amdgpu_memory_info> {
        Ok(Default::default())
    }
    fn gem_create(&self, desc: &BufferDesc) -> Result<BoHandle> {
        let mut s = self.state.lock().unwrap();
        s.step("gem_create")?;
        s.next_handle += 1;
        let handle = s.next_handle;
        s.buffers.insert(handle, (*desc, Arc::new(Mutex::new(vec![0; desc.size as usize]))));
        Ok(BoHandle(handle))
    }
    fn gem_close(&self, bo: BoHandle) -> Result<()> {
        let mut s = self.state.lock().unwrap();
        s.step("gem_close")?;
        // Like the kernel, closing a handle drops whatever mappings it still has.
        s.va.retain(|_, (h, _, _)| *h != bo.0);
        s.buffers
            .remove(&bo.0)
            .map(|_| ())
            .ok_or_else(|| AmdgpuError::io("close", std::io::Error::other("unknown handle")))
    }
    fn map_cpu(&self, bo: BoHandle, size: u64) -> Result<Box<dyn CpuMapping>> {
        let mut s = self.state.lock().unwrap();
        s.step("map_cpu")?;
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
        s.step("va_map")?;
        assert!(s.buffers[&bo.0].0.size >= size, "mapping more than the buffer holds");
        for (&start, &(_, len, _)) in &s.va {
            assert!(va + size <= start || start + len <= va, "overlapping VA {va:#x}");
        }
        s.va.insert(va, (bo.0, size, flags));
        Ok(())
    }
    fn va_unmap(&self, bo: BoHandle, va: u64, size: u64) -> Result<()> {
        let mut s = self.state.lock().unwrap();
        s.step("va_unmap")?;
        let (handle, len, _) = s.va.remove(&va).unwrap();
        assert_eq!((handle, len), (bo.0, size));
        Ok(())
    }
    fn ctx_create(&self) -> Result<ContextId> {
        let mut s = self.state.lock().unwrap();
        s.contexts += 1;
        Ok(ContextId(7))
    }
    fn ctx_destroy(&self, _ctx: ContextId) -> Result<()> {
        self.state.lock().unwrap().contexts -= 1;
        Ok(())
    }
    fn ctx_state(&self, _ctx: ContextId) -> Result<ContextState> {
        Ok(match *self.wait_mode.lock().unwrap() {
            WaitMode::Reset => ContextState { reset: true, guilty: true, ..Default::default() },
            _ => ContextState::default(),
        })
    }
    fn submit(&self, submission: &Submission<'_>) -> Result<SeqNo> {
        assert_eq!(submission.ibs.len(), 1, "one IB per submission");
        let ib = submission.ibs[0];
        let bytes = self.read_va(ib.va, ib.size_bytes as usize);
        let words = bytes.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
        let mut s = self.state.lock().unwrap();
        for handle in submission.buffers {
            assert!(s.buffers.contains_key(&handle.0), "BO list names closed handle {handle:?}");
        }
        let seq = SeqNo(100 + s.submissions.len() as u64);
        s.submissions.push(Recorded {
            ctx: submission.ctx,
            ib_va: ib.va,
            ib_ip: ib.ip,
            words,
            buffers: submission.buffers.to_vec(),
            seq,
        });
        Ok(seq)
    }
    fn wait(
        &self,
        _ctx: ContextId,
        _ip: HwIp,
        _ring: u32,
        _seq: SeqNo,
        timeout: Timeout,
    ) -> Result<WaitStatus> {
        Ok(match *self.wait_mode.lock().unwrap() {
            WaitMode::Done => WaitStatus::Completed,
            WaitMode::Busy | WaitMode::Reset => {
                if let Timeout::Relative(d) = timeout {
                    std::thread::sleep(d.min(std::time::Duration::from_millis(20)));
                }
                WaitStatus::Busy
            }
        })
    }
}
