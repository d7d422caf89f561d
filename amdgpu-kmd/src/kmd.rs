//! The kernel-driver interface: every operation the amdgpu backend needs from the kernel, as one
//! trait. The `sparkle` library's render node (crate-private `RenderNode`) implements it with real
//! ioctls on `/dev/dri/renderD*`; the `sparkle-amdgpu-sim` crate's `SimDriver` implements it with
//! host memory and a PM4/ISA interpreter. Nothing above this
//! trait knows which one runs, so the types here carry no file descriptors or pointers: buffers are
//! handles, CPU access goes through [`CpuMapping`]'s copy methods.

use std::time::Duration;

use super::uapi;
use crate::error::Result;

/// A GEM buffer object handle (per open file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BoHandle(
    /// The kernel's handle number.
    pub u32,
);

/// A submission context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContextId(
    /// The kernel's context number.
    pub u32,
);

/// A submission's sequence number on its ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeqNo(
    /// The ring's fence value.
    pub u64,
);

/// Where a buffer lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Domain {
    /// Video memory.
    Vram,
    /// System memory the GPU reaches through the GART.
    Gtt,
}

impl Domain {
    /// The `AMDGPU_GEM_DOMAIN_*` bit of this domain.
    pub fn uapi(self) -> u64 {
        match self {
            Self::Vram => uapi::AMDGPU_GEM_DOMAIN_VRAM,
            Self::Gtt => uapi::AMDGPU_GEM_DOMAIN_GTT,
        }
    }
}

/// A buffer to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferDesc {
    /// Bytes.
    pub size: u64,
    /// Physical alignment in bytes (the kernel rounds up to its page size).
    pub alignment: u64,
    /// Where it lives.
    pub domain: Domain,
    /// The CPU will map it (for VRAM: must be in the CPU-visible part).
    pub cpu_access: bool,
    /// Zero-fill on allocation.
    pub cleared: bool,
}

/// GPU page permissions of a VA mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VaFlags {
    /// Shaders and the command processor may read it.
    pub readable: bool,
    /// Shaders and the command processor may write it.
    pub writeable: bool,
    /// Shaders may run code from it.
    pub executable: bool,
}

impl VaFlags {
    /// Shader code: read + execute, never writable.
    pub const CODE: Self = Self { readable: true, writeable: false, executable: true };
    /// Kernel arguments, dispatch packets, command buffers: read-only to the GPU.
    pub const READ_ONLY: Self = Self { readable: true, writeable: false, executable: false };
    /// Data: read + write, not executable.
    pub const READ_WRITE: Self = Self { readable: true, writeable: true, executable: false };

    /// The `AMDGPU_VM_PAGE_*` bits of these permissions.
    pub fn uapi(self) -> u32 {
        let mut flags = 0;
        if self.readable {
            flags |= uapi::AMDGPU_VM_PAGE_READABLE;
        }
        if self.writeable {
            flags |= uapi::AMDGPU_VM_PAGE_WRITEABLE;
        }
        if self.executable {
            flags |= uapi::AMDGPU_VM_PAGE_EXECUTABLE;
        }
        flags
    }
}

/// The hardware block a command buffer runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HwIp {
    /// The graphics ring (which also runs compute dispatches).
    Gfx,
    /// A compute ring.
    Compute,
}

impl HwIp {
    /// The `AMDGPU_HW_IP_*` number of this block.
    pub fn uapi(self) -> u32 {
        match self {
            Self::Gfx => uapi::AMDGPU_HW_IP_GFX,
            Self::Compute => uapi::AMDGPU_HW_IP_COMPUTE,
        }
    }
}

/// One indirect buffer of a submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IbDesc {
    /// GPU address of the first dword.
    pub va: u64,
    /// Length in bytes.
    pub size_bytes: u32,
    /// The block that runs it.
    pub ip: HwIp,
    /// The ring of that block.
    pub ring: u32,
    /// `AMDGPU_IB_FLAG_*`.
    pub flags: u32,
}

/// A command submission: IBs that run in order, and every buffer they touch.
#[derive(Debug, Clone, Copy)]
pub struct Submission<'a> {
    /// The context it is submitted on.
    pub ctx: ContextId,
    /// Its IBs, run in order.
    pub ibs: &'a [IbDesc],
    /// Every buffer the IBs and their dispatches touch (the BO list).
    pub buffers: &'a [BoHandle],
}

/// How long to wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeout {
    /// From now.
    Relative(Duration),
    /// Until this CLOCK_MONOTONIC time in nanoseconds.
    AbsoluteMonotonicNs(u64),
}

/// Outcome of a wait that did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitStatus {
    /// The submission finished.
    Completed,
    /// The deadline passed first.
    Busy,
}

/// What happened to a context since it was created (QUERY_STATE2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ContextState {
    /// A GPU reset happened.
    pub reset: bool,
    /// This context caused a hang.
    pub guilty: bool,
    /// VRAM contents were lost.
    pub vram_lost: bool,
    /// A reset is still under way.
    pub reset_in_progress: bool,
}

impl ContextState {
    /// The state QUERY_STATE2's `AMDGPU_CTX_QUERY2_FLAGS_*` bits describe.
    pub fn from_query2_flags(flags: u64) -> Self {
        Self {
            reset: flags & uapi::AMDGPU_CTX_QUERY2_FLAGS_RESET != 0,
            guilty: flags & uapi::AMDGPU_CTX_QUERY2_FLAGS_GUILTY != 0,
            vram_lost: flags & uapi::AMDGPU_CTX_QUERY2_FLAGS_VRAMLOST != 0,
            reset_in_progress: flags & uapi::AMDGPU_CTX_QUERY2_FLAGS_RESET_IN_PROGRESS != 0,
        }
    }

    /// Whether the context can still be used.
    pub fn is_healthy(&self) -> bool {
        !(self.reset || self.guilty || self.vram_lost || self.reset_in_progress)
    }

    /// A sentence for error messages.
    pub fn describe(&self) -> String {
        if self.is_healthy() {
            return "no GPU reset was reported".into();
        }
        let mut parts = Vec::new();
        if self.reset {
            parts.push("the GPU was reset");
        }
        if self.guilty {
            parts.push("this context caused a hang");
        }
        if self.vram_lost {
            parts.push("VRAM contents were lost");
        }
        if self.reset_in_progress {
            parts.push("a reset is in progress");
        }
        parts.join(", ")
    }
}

/// Name and version of the kernel driver behind a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverVersion {
    /// `amdgpu` for the real driver.
    pub name: String,
    /// Major version.
    pub major: i32,
    /// Minor version (the amdgpu uapi's feature level).
    pub minor: i32,
    /// Patch level.
    pub patch: i32,
}

impl std::fmt::Display for DriverVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}.{}.{}", self.name, self.major, self.minor, self.patch)
    }
}

/// CPU access to a buffer. Copies in and out, so that a simulated driver can back it with host
/// memory and the render node with an mmap, without either handing out references to memory the
/// GPU may be writing.
pub trait CpuMapping: Send + Sync {
    /// Mapped bytes.
    fn len(&self) -> usize;

    /// Whether nothing is mapped.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies `data` to `offset`; fails if it does not fit.
    fn write(&self, offset: usize, data: &[u8]) -> Result<()>;

    /// Copies `out.len()` bytes from `offset`; fails if they are not all mapped.
    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()>;
}

/// A kernel's code as it will be uploaded, for [`KernelDriver::check_kernel_code`].
#[derive(Debug, Clone, Copy)]
pub struct KernelCode<'a> {
    /// The kernel's name, for messages.
    pub kernel: &'a str,
    /// The code object's load image (relocations patch data, never instructions).
    pub image: &'a [u8],
    /// Image offset of the first instruction.
    pub entry: u64,
    /// Image ranges holding the code the kernel may run; empty when the code object does not say
    /// (no function symbols), then only the entry point is known.
    pub ranges: &'a [std::ops::Range<u64>],
    /// Whether the kernel runs as wave64 (else wave32).
    pub wave64: bool,
}

/// The operations the backend needs from the kernel driver.
pub trait KernelDriver: Send + Sync {
    /// Whether the device can run every instruction of a kernel, asked before its code is
    /// uploaded; the error says which instruction it cannot, in a user's terms. A GPU runs what
    /// the compiler emits for its target, so the default accepts everything; a simulator refuses
    /// what it does not implement, so that no such kernel reaches a submission.
    fn check_kernel_code(&self, code: &KernelCode<'_>) -> std::result::Result<(), String> {
        let _ = code;
        Ok(())
    }

    /// The driver's name and version (`DRM_IOCTL_VERSION`).
    fn driver_version(&self) -> DriverVersion;

    /// A human-readable name of what is driven (the node path, or "simulated gfx1100").
    fn describe(&self) -> String;

    /// `AMDGPU_INFO_DEV_INFO`.
    fn device_info(&self) -> Result<uapi::drm_amdgpu_info_device>;

    /// `AMDGPU_INFO_HW_IP_INFO` for instance 0 of `ip`.
    fn hw_ip_info(&self, ip: HwIp) -> Result<uapi::drm_amdgpu_info_hw_ip>;

    /// `AMDGPU_INFO_MEMORY`: heap sizes.
    fn memory_info(&self) -> Result<uapi::drm_amdgpu_memory_info>;

    /// `GEM_CREATE`.
    fn gem_create(&self, desc: &BufferDesc) -> Result<BoHandle>;

    /// `GEM_CLOSE`.
    fn gem_close(&self, bo: BoHandle) -> Result<()>;

    /// `GEM_MMAP` + mmap of `size` bytes from the start of the buffer.
    fn map_cpu(&self, bo: BoHandle, size: u64) -> Result<Box<dyn CpuMapping>>;

    /// `GEM_VA` map of `size` bytes of `bo` (from offset 0) at GPU address `va`.
    fn va_map(&self, bo: BoHandle, va: u64, size: u64, flags: VaFlags) -> Result<()>;

    /// `GEM_VA` unmap.
    fn va_unmap(&self, bo: BoHandle, va: u64, size: u64) -> Result<()>;

    /// `CTX` alloc.
    fn ctx_create(&self) -> Result<ContextId>;

    /// `CTX` free.
    fn ctx_destroy(&self, ctx: ContextId) -> Result<()>;

    /// `CTX` query state 2.
    fn ctx_state(&self, ctx: ContextId) -> Result<ContextState>;

    /// `CS`: submits the IBs with the buffers as their BO list; returns the sequence number of the
    /// last IB's ring.
    fn submit(&self, submission: &Submission<'_>) -> Result<SeqNo>;

    /// `WAIT_CS` for `seq` on `ip`'s ring `ring` of `ctx`.
    fn wait(&self, ctx: ContextId, ip: HwIp, ring: u32, seq: SeqNo, timeout: Timeout) -> Result<WaitStatus>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn va_flags_match_their_purpose() {
        assert_eq!(VaFlags::CODE.uapi(), uapi::AMDGPU_VM_PAGE_READABLE | uapi::AMDGPU_VM_PAGE_EXECUTABLE);
        assert_eq!(VaFlags::READ_ONLY.uapi(), uapi::AMDGPU_VM_PAGE_READABLE);
        assert_eq!(
            VaFlags::READ_WRITE.uapi(),
            uapi::AMDGPU_VM_PAGE_READABLE | uapi::AMDGPU_VM_PAGE_WRITEABLE
        );
    }

    #[test]
    fn context_state_names_what_happened() {
        let state = ContextState::from_query2_flags(
            uapi::AMDGPU_CTX_QUERY2_FLAGS_RESET | uapi::AMDGPU_CTX_QUERY2_FLAGS_GUILTY,
        );
        assert!(!state.is_healthy());
        assert_eq!(state.describe(), "the GPU was reset, this context caused a hang");
        assert!(ContextState::from_query2_flags(0).is_healthy());
    }
}
