//! GEM buffer objects of the simulated driver: host memory behind a lock per buffer, their
//! handles, the heap accounting that stands in for VRAM and GTT, and CPU mappings that copy in
//! and out of that memory.
//!
//! Each buffer's bytes sit in their own `Arc<Mutex<..>>`: a running submission locks only the
//! buffers of its BO list, so the host keeps allocating and touching other buffers meanwhile, and
//! a closed buffer stays alive while a submission still holds it (as the kernel keeps a BO until
//! its fences signal).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::errno::{einval, enoent, os_error};
use sparkle_amdgpu_kmd::error::{AmdgpuError, Result};
use sparkle_amdgpu_kmd::kmd::{BoHandle, BufferDesc, CpuMapping, Domain};

/// The kernel rounds buffer sizes up to its page size.
pub const PAGE_SIZE: u64 = 4096;

/// The bytes of one buffer.
pub type Storage = Arc<Mutex<Vec<u8>>>;

/// Locks a buffer's bytes; a panic elsewhere cannot leave bytes half-updated in a way that
/// matters more than on a GPU, so poisoning is ignored.
pub fn lock(storage: &Storage) -> MutexGuard<'_, Vec<u8>> {
    storage.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One GEM object.
#[derive(Debug, Clone)]
pub struct SimBuffer {
    pub storage: Storage,
    pub size: u64,
    pub domain: Domain,
    /// Created without CPU access (VRAM only): GEM_MMAP is refused, as the kernel does.
    pub no_cpu_access: bool,
}

/// Heap sizes the simulated device reports and enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heaps {
    pub vram_bytes: u64,
    pub gtt_bytes: u64,
}

/// All GEM objects of the simulated device file.
#[derive(Debug)]
pub struct BufferTable {
    heaps: Heaps,
    buffers: HashMap<u32, SimBuffer>,
    next_handle: u32,
    vram_used: u64,
    gtt_used: u64,
}

impl BufferTable {
    pub fn new(heaps: Heaps) -> Self {
        Self { heaps, buffers: HashMap::new(), next_handle: 1, vram_used: 0, gtt_used: 0 }
    }

    pub fn heaps(&self) -> Heaps {
        self.heaps
    }

    /// Bytes in use per heap: (VRAM, GTT).
    pub fn used(&self) -> (u64, u64) {
        (self.vram_used, self.gtt_used)
    }

    /// GEM_CREATE: a zero-filled buffer (host memory is always cleared), size rounded up to the
    /// page size.
    pub fn create(&mut self, desc: &BufferDesc) -> Result<BoHandle> {
        let what = format!("GEM_CREATE of {} bytes in {:?}", desc.size, desc.domain);
        if desc.size == 0 {
            return Err(einval(what, "a buffer needs at least one byte"));
        }
        if desc.alignment != 0 && !desc.alignment.is_power_of_two() {
            return Err(einval(what, format!("alignment {} is not a power of two", desc.alignment)));
        }
        let size =
            desc.size.checked_next_multiple_of(PAGE_SIZE).ok_or_else(|| einval(&what, "size overflows"))?;
        let (used, limit) = match desc.domain {
            Domain::Vram => (self.vram_used, self.heaps.vram_bytes),
            Domain::Gtt => (self.gtt_used, self.heaps.gtt_bytes),
        };
        if used.saturating_add(size) > limit {
            return Err(AmdgpuError::OutOfMemory(format!(
                "{what} failed on the simulated device: {used} of {limit} bytes of {:?} are in use \
                 (raise the heap size in SimOptions)",
                desc.domain
            )));
        }
        let len =
            usize::try_from(size).map_err(|_| einval(&what, "size does not fit the host's address space"))?;
        let mut bytes = Vec::new();
        bytes.try_reserve_exact(len).map_err(|_| {
            AmdgpuError::OutOfMemory(format!("{what}: the host could not allocate {len} bytes"))
        })?;
        bytes.resize(len, 0);
        let handle = self.next_handle;
        self.next_handle = self
            .next_handle
            .checked_add(1)
            .ok_or_else(|| os_error(&what, libc::ENOMEM, "handles exhausted"))?;
        match desc.domain {
            Domain::Vram => self.vram_used += size,
            Domain::Gtt => self.gtt_used += size,
        }
        let no_cpu_access = desc.domain == Domain::Vram && !desc.cpu_access;
        self.buffers.insert(
            handle,
            SimBuffer { storage: Arc::new(Mutex::new(bytes)), size, domain: desc.domain, no_cpu_access },
        );
        Ok(BoHandle(handle))
    }

    pub fn get(&self, bo: BoHandle, what: &str) -> Result<&SimBuffer> {
        self.buffers.get(&bo.0).ok_or_else(|| enoent(what, format!("no buffer has handle {}", bo.0)))
    }

    /// GEM_CLOSE: forgets the handle and returns the buffer (the caller drops its VA mappings).
    pub fn close(&mut self, bo: BoHandle) -> Result<SimBuffer> {
        let buffer = self
            .buffers
            .remove(&bo.0)
            .ok_or_else(|| einval(format!("GEM_CLOSE of buffer {}", bo.0), "no such handle"))?;
        match buffer.domain {
            Domain::Vram => self.vram_used -= buffer.size,
            Domain::Gtt => self.gtt_used -= buffer.size,
        }
        Ok(buffer)
    }

    /// GEM_MMAP + mmap of the first `size` bytes.
    pub fn map_cpu(&self, bo: BoHandle, size: u64) -> Result<Box<dyn CpuMapping>> {
        let what = format!("GEM_MMAP of buffer {}", bo.0);
        let buffer = self.get(bo, &what)?;
        if buffer.no_cpu_access {
            return Err(os_error(what, libc::EPERM, "the buffer was created without CPU access"));
        }
        if size == 0 || size > buffer.size {
            return Err(einval(
                format!("mmap of buffer {} ({size} bytes)", bo.0),
                format!("the buffer has {} bytes", buffer.size),
            ));
        }
        let len =
            usize::try_from(size).map_err(|_| einval(&what, "size does not fit the host's address space"))?;
        Ok(Box::new(HostMapping { storage: buffer.storage.clone(), len }))
    }
}

/// A CPU mapping of a simulated buffer: copies under the buffer's lock.
struct HostMapping {
    storage: Storage,
    len: usize,
}

fn out_of_range(offset: usize, len: usize, mapped: usize) -> AmdgpuError {
    AmdgpuError::io(
        "CPU access to a mapped buffer",
        std::io::Error::other(format!(
            "bytes {offset}..{} are outside the {mapped}-byte mapping",
            offset.saturating_add(len)
        )),
    )
}

impl HostMapping {
    fn range(&self, offset: usize, len: usize) -> Result<std::ops::Range<usize>> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(offset..end),
            _ => Err(out_of_range(offset, len, self.len)),
        }
    }
}

impl CpuMapping for HostMapping {
    fn len(&self) -> usize {
        self.len
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        let range = self.range(offset, data.len())?;
        lock(&self.storage)[range].copy_from_slice(data);
        Ok(())
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        let range = self.range(offset, out.len())?;
        out.copy_from_slice(&lock(&self.storage)[range]);
        Ok(())
    }
}
