//! GPU memory: buffers created in VRAM or GTT, mapped into the GPU's address space with the
//! permissions their use needs (code read + execute; kernel arguments and command buffers
//! read-only to the GPU; data read + write, never executable), optionally mapped for the CPU.
//! Dropping a buffer unmaps it, returns its address range and closes its handle. A per-device
//! count of live objects lets tests prove nothing leaks, also on error paths.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::error::{AmdgpuError, Result};
use super::kmd::{BoHandle, BufferDesc, CpuMapping, Domain, KernelDriver, VaFlags};
use super::va_allocator::VaAllocator;

/// What a buffer is for; decides its domain, GPU permissions and CPU mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BufferKind {
    /// Shader code: VRAM, read + execute for the GPU, written once by the CPU.
    Code,
    /// Shader code loaded with the program-scope variables it writes (a code object with a
    /// writable segment, `.data`/`.bss`, at a fixed distance from its code): VRAM, read +
    /// write + execute.
    CodeAndData,
    /// Kernel arguments and dispatch packets: GTT, written by the CPU, read-only to the GPU.
    KernelArgs,
    /// PM4 command buffers: GTT, read-only to the GPU.
    Commands,
    /// User data: VRAM (CPU-visible), read + write for the GPU.
    Data,
    /// Fences and other values the GPU writes for the CPU: GTT, read + write.
    Signals,
    /// Private memory of running waves (the scratch ring): VRAM, read + write.
    Scratch,
}

impl BufferKind {
    pub fn domain(self) -> Domain {
        match self {
            Self::Code | Self::CodeAndData | Self::Data | Self::Scratch => Domain::Vram,
            Self::KernelArgs | Self::Commands | Self::Signals => Domain::Gtt,
        }
    }

    pub fn va_flags(self) -> VaFlags {
        match self {
            Self::Code => VaFlags::CODE,
            Self::CodeAndData => VaFlags { readable: true, writeable: true, executable: true },
            Self::KernelArgs | Self::Commands => VaFlags::READ_ONLY,
            Self::Data | Self::Signals | Self::Scratch => VaFlags::READ_WRITE,
        }
    }
}

/// Live objects of one device.
#[derive(Debug, Default)]
struct LiveObjects {
    buffers: AtomicUsize,
    va_mappings: AtomicUsize,
    cpu_mappings: AtomicUsize,
}

/// A snapshot of [`Memory::live_objects`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LiveCounts {
    /// GEM handles not yet closed.
    pub buffers: usize,
    /// GPU VA mappings not yet unmapped.
    pub va_mappings: usize,
    /// CPU mappings not yet unmapped.
    pub cpu_mappings: usize,
}

impl LiveCounts {
    #[cfg(test)]
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }
}

struct Shared {
    kmd: Arc<dyn KernelDriver>,
    va: Mutex<VaAllocator>,
    live: LiveObjects,
}

/// The memory manager of one device.
#[derive(Clone)]
pub struct Memory {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory").field("live", &self.live_objects()).finish()
    }
}

impl Memory {
    /// Manages GPU addresses `[va_start, va_end)` with at least `va_alignment`.
    pub fn new(kmd: Arc<dyn KernelDriver>, va_start: u64, va_end: u64, va_alignment: u64) -> Self {
        Self {
            shared: Arc::new(Shared {
                kmd,
                va: Mutex::new(VaAllocator::new(va_start, va_end, va_alignment)),
                live: LiveObjects::default(),
            }),
        }
    }

    /// Manages the VA range the device reports.
    pub fn for_device(kmd: Arc<dyn KernelDriver>, info: &super::device_info::DeviceInfo) -> Self {
        Self::new(kmd, info.va_start, info.va_end, info.va_alignment)
    }

    /// What is alive now.
    pub fn live_objects(&self) -> LiveCounts {
        let live = &self.shared.live;
        LiveCounts {
            buffers: live.buffers.load(Ordering::SeqCst),
            va_mappings: live.va_mappings.load(Ordering::SeqCst),
            cpu_mappings: live.cpu_mappings.load(Ordering::SeqCst),
        }
    }

    /// Creates a buffer of at least `size` bytes for `kind`, mapped for the GPU (and for the CPU:
    /// every kind is, so the backend can fill and read it). On error nothing stays allocated.
    pub fn allocate(&self, size: u64, kind: BufferKind) -> Result<Buffer> {
        let granule = self
            .va_lock()?
            .round(size)
            .ok_or_else(|| AmdgpuError::OutOfMemory(format!("{size} bytes is too large")))?;
        let handle = self.shared.kmd.gem_create(&BufferDesc {
            size: granule,
            alignment: 4096,
            domain: kind.domain(),
            cpu_access: true,
            cleared: true,
        })?;
        self.shared.live.buffers.fetch_add(1, Ordering::SeqCst);
        // From here on, dropping `buffer` releases whatever was acquired.
        let mut buffer =
            Buffer { memory: self.clone(), handle, kind, size, va: None, va_mapped: false, cpu: None };
        let (va, va_size) = self.va_lock()?.allocate(granule).ok_or_else(|| {
            AmdgpuError::OutOfMemory(format!("GPU address space exhausted allocating {granule} bytes"))
        })?;
        buffer.va = Some((va, va_size));
        self.shared.kmd.va_map(handle, va, va_size, kind.va_flags())?;
        buffer.va_mapped = true;
        self.shared.live.va_mappings.fetch_add(1, Ordering::SeqCst);
        let mapping = self.shared.kmd.map_cpu(handle, va_size)?;
        buffer.cpu = Some(mapping);
        self.shared.live.cpu_mappings.fetch_add(1, Ordering::SeqCst);
        tracing::trace!(?kind, size, va = format_args!("{va:#x}"), "allocated GPU buffer");
        Ok(buffer)
    }

    fn va_lock(&self) -> Result<std::sync::MutexGuard<'_, VaAllocator>> {
        self.shared
            .va
            .lock()
            .map_err(|_| AmdgpuError::DeviceLost("the VA allocator was poisoned by a panic".into()))
    }
}

/// A GPU buffer; see [`Memory::allocate`].
pub struct Buffer {
    memory: Memory,
    handle: BoHandle,
    kind: BufferKind,
    size: u64,
    va: Option<(u64, u64)>,
    va_mapped: bool,
    cpu: Option<Box<dyn CpuMapping>>,
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer")
            .field("handle", &self.handle)
            .field("kind", &self.kind)
            .field("size", &self.size)
            .field("va", &self.va)
            .finish()
    }
}

impl Buffer {
    pub fn handle(&self) -> BoHandle {
        self.handle
    }

    pub fn kind(&self) -> BufferKind {
        self.kind
    }

    /// Bytes requested.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// GPU virtual address of byte 0.
    pub fn gpu_address(&self) -> u64 {
        self.va.map(|(va, _)| va).unwrap_or(0)
    }

    fn mapping(&self) -> Result<&dyn CpuMapping> {
        self.cpu
            .as_deref()
            .ok_or_else(|| AmdgpuError::io("CPU access", std::io::Error::other("buffer is not mapped")))
    }

    fn check_range(&self, offset: u64, len: usize) -> Result<()> {
        if offset.checked_add(len as u64).is_none_or(|end| end > self.size) {
            return Err(AmdgpuError::io(
                "CPU access to a GPU buffer",
                std::io::Error::other(format!(
                    "bytes {offset}..{} are outside the {}-byte buffer",
                    offset.saturating_add(len as u64),
                    self.size
                )),
            ));
        }
        Ok(())
    }

    /// Copies `data` into the buffer at `offset`.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        self.check_range(offset, data.len())?;
        self.mapping()?.write(offset as usize, data)
    }

    /// Copies `out.len()` bytes from `offset`.
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        self.check_range(offset, out.len())?;
        self.mapping()?.read(offset as usize, out)
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        let shared = &self.memory.shared;
        if self.cpu.take().is_some() {
            shared.live.cpu_mappings.fetch_sub(1, Ordering::SeqCst);
        }
        if let Some((va, size)) = self.va.take() {
            if self.va_mapped {
                if let Err(e) = shared.kmd.va_unmap(self.handle, va, size) {
                    tracing::warn!("unmapping buffer {} at {va:#x}: {e}", self.handle.0);
                }
                shared.live.va_mappings.fetch_sub(1, Ordering::SeqCst);
            }
            match shared.va.lock() {
                Ok(mut allocator) => allocator.free(va, size),
                Err(_) => tracing::warn!("VA allocator poisoned; {size} bytes at {va:#x} are not reused"),
            }
        }
        if let Err(e) = shared.kmd.gem_close(self.handle) {
            tracing::warn!("closing buffer {}: {e}", self.handle.0);
        }
        shared.live.buffers.fetch_sub(1, Ordering::SeqCst);
    }
}
