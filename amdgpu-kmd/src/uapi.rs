//! Raw kernel interface of the amdgpu DRM driver: `#[repr(C)]` mirrors of the structs in the
//! kernel's `include/uapi/drm/amdgpu_drm.h` (and the one generic `drm.h` struct the backend uses),
//! their ioctl request numbers, and the constants that go into them.
//!
//! Nothing here issues an ioctl; `render_node` does. Layouts follow the *current* kernel header,
//! which extends some structs at their end (the kernel copies `min(user size, kernel size)` and
//! zero-fills the rest, so a larger struct works on older kernels and vice versa). The test
//! `tests/uapi_layout.rs` checks every size, offset and request number against the system
//! header and, for fields newer than it, against values written down from the kernel header.
#![allow(non_camel_case_types)]

use std::mem::{offset_of, size_of};

// ---------------------------------------------------------------------------------------------
// ioctl request numbers (Linux `_IOC` encoding on x86/arm: dir << 30 | size << 16 | type << 8 | nr)
// ---------------------------------------------------------------------------------------------

const IOC_WRITE: u64 = 1;
const IOC_READ: u64 = 2;
const DRM_IOCTL_BASE: u64 = b'd' as u64;
/// First driver-private DRM ioctl number.
pub const DRM_COMMAND_BASE: u64 = 0x40;

const fn ioc(dir: u64, nr: u64, size: usize) -> u64 {
    (dir << 30) | ((size as u64) << 16) | (DRM_IOCTL_BASE << 8) | nr
}

/// `DRM_IOW(nr, T)`: user space writes the struct.
pub const fn drm_iow(nr: u64, size: usize) -> u64 {
    ioc(IOC_WRITE, nr, size)
}

/// `DRM_IOWR(nr, T)`: written by user space, read back after the call.
pub const fn drm_iowr(nr: u64, size: usize) -> u64 {
    ioc(IOC_READ | IOC_WRITE, nr, size)
}

/// Driver ioctl number of GEM_CREATE: allocate a buffer object.
pub const DRM_AMDGPU_GEM_CREATE: u64 = 0x00;
/// Driver ioctl number of GEM_MMAP: get the offset through which to `mmap` a buffer object.
pub const DRM_AMDGPU_GEM_MMAP: u64 = 0x01;
/// Driver ioctl number of CTX: allocate, free or query a submission context.
pub const DRM_AMDGPU_CTX: u64 = 0x02;
/// Driver ioctl number of BO_LIST: create, update or destroy a buffer-object list.
pub const DRM_AMDGPU_BO_LIST: u64 = 0x03;
/// Driver ioctl number of CS: submit command buffers.
pub const DRM_AMDGPU_CS: u64 = 0x04;
/// Driver ioctl number of INFO: query device, memory and firmware facts.
pub const DRM_AMDGPU_INFO: u64 = 0x05;
/// Driver ioctl number of GEM_VA: map or unmap a buffer object in the GPU virtual address space.
pub const DRM_AMDGPU_GEM_VA: u64 = 0x08;
/// Driver ioctl number of WAIT_CS: wait for a submission to finish.
pub const DRM_AMDGPU_WAIT_CS: u64 = 0x09;

/// Request number of GEM_CREATE; argument `drm_amdgpu_gem_create`, read and written.
pub const DRM_IOCTL_AMDGPU_GEM_CREATE: u64 =
    drm_iowr(DRM_COMMAND_BASE + DRM_AMDGPU_GEM_CREATE, size_of::<drm_amdgpu_gem_create>());
/// Request number of GEM_MMAP; argument `drm_amdgpu_gem_mmap`, read and written.
pub const DRM_IOCTL_AMDGPU_GEM_MMAP: u64 =
    drm_iowr(DRM_COMMAND_BASE + DRM_AMDGPU_GEM_MMAP, size_of::<drm_amdgpu_gem_mmap>());
/// Request number of CTX; argument `drm_amdgpu_ctx`, read and written.
pub const DRM_IOCTL_AMDGPU_CTX: u64 =
    drm_iowr(DRM_COMMAND_BASE + DRM_AMDGPU_CTX, size_of::<drm_amdgpu_ctx>());
/// Request number of BO_LIST; argument `drm_amdgpu_bo_list`, read and written.
pub const DRM_IOCTL_AMDGPU_BO_LIST: u64 =
    drm_iowr(DRM_COMMAND_BASE + DRM_AMDGPU_BO_LIST, size_of::<drm_amdgpu_bo_list>());
/// Request number of CS; argument `drm_amdgpu_cs`, read and written.
pub const DRM_IOCTL_AMDGPU_CS: u64 = drm_iowr(DRM_COMMAND_BASE + DRM_AMDGPU_CS, size_of::<drm_amdgpu_cs>());
/// Request number of INFO; argument `drm_amdgpu_info`, only read by the kernel (the answer
/// goes to the memory at `return_pointer`).
pub const DRM_IOCTL_AMDGPU_INFO: u64 =
    drm_iow(DRM_COMMAND_BASE + DRM_AMDGPU_INFO, size_of::<drm_amdgpu_info>());
/// Request number of GEM_VA; argument `drm_amdgpu_gem_va`, only read by the kernel.
///
/// With the 64-byte struct of current kernels; older kernels read the 40-byte prefix they know.
pub const DRM_IOCTL_AMDGPU_GEM_VA: u64 =
    drm_iow(DRM_COMMAND_BASE + DRM_AMDGPU_GEM_VA, size_of::<drm_amdgpu_gem_va>());
/// Request number of WAIT_CS; argument `drm_amdgpu_wait_cs`, read and written.
pub const DRM_IOCTL_AMDGPU_WAIT_CS: u64 =
    drm_iowr(DRM_COMMAND_BASE + DRM_AMDGPU_WAIT_CS, size_of::<drm_amdgpu_wait_cs>());

/// Generic DRM: `DRM_IOCTL_GEM_CLOSE` (`drm.h`, nr 0x09).
pub const DRM_IOCTL_GEM_CLOSE: u64 = drm_iow(0x09, size_of::<drm_gem_close>());

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

/// Memory domain: system memory the GPU cannot reach (a bit of `drm_amdgpu_gem_create_in::domains`).
pub const AMDGPU_GEM_DOMAIN_CPU: u64 = 0x1;
/// Memory domain: system memory mapped into the GPU's GART, reachable by both CPU and GPU.
pub const AMDGPU_GEM_DOMAIN_GTT: u64 = 0x2;
/// Memory domain: the GPU's local video memory.
pub const AMDGPU_GEM_DOMAIN_VRAM: u64 = 0x4;

/// Creation flag (`domain_flags`): the CPU will map the buffer, so VRAM placement must be CPU-visible.
pub const AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED: u64 = 1 << 0;
/// Creation flag: the CPU never maps the buffer, so it may live in VRAM the CPU cannot see.
pub const AMDGPU_GEM_CREATE_NO_CPU_ACCESS: u64 = 1 << 1;
/// Creation flag: map GTT pages write-combined (uncached, speculative writes) for the CPU.
pub const AMDGPU_GEM_CREATE_CPU_GTT_USWC: u64 = 1 << 2;
/// Creation flag: the kernel zeroes the buffer's VRAM before handing it out.
pub const AMDGPU_GEM_CREATE_VRAM_CLEARED: u64 = 1 << 3;
/// Creation flag: the buffer belongs to this file's VM and is always resident for it (it need not
/// be named in BO lists and cannot be exported).
pub const AMDGPU_GEM_CREATE_VM_ALWAYS_VALID: u64 = 1 << 6;
/// Creation flag: the kernel does no implicit synchronisation on this buffer; user space orders
/// its uses itself.
pub const AMDGPU_GEM_CREATE_EXPLICIT_SYNC: u64 = 1 << 7;

/// BO_LIST operation: create a list from the given entries.
pub const AMDGPU_BO_LIST_OP_CREATE: u32 = 0;
/// BO_LIST operation: destroy the list `list_handle`.
pub const AMDGPU_BO_LIST_OP_DESTROY: u32 = 1;
/// BO_LIST operation: replace the entries of the list `list_handle`.
pub const AMDGPU_BO_LIST_OP_UPDATE: u32 = 2;

/// CTX operation: allocate a context; its id comes back in `drm_amdgpu_ctx_out_alloc::ctx_id`.
pub const AMDGPU_CTX_OP_ALLOC_CTX: u32 = 1;
/// CTX operation: free the context `ctx_id`.
pub const AMDGPU_CTX_OP_FREE_CTX: u32 = 2;
/// CTX operation: report the context's reset status in `drm_amdgpu_ctx_out_state::reset_status`.
pub const AMDGPU_CTX_OP_QUERY_STATE: u32 = 3;
/// CTX operation: report the context's state as `AMDGPU_CTX_QUERY2_FLAGS_*` bits in
/// `drm_amdgpu_ctx_out_state::flags`.
pub const AMDGPU_CTX_OP_QUERY_STATE2: u32 = 4;

/// Reset status: no GPU reset since the context was created.
pub const AMDGPU_CTX_NO_RESET: u32 = 0;
/// Reset status: a GPU reset happened and this context caused it.
pub const AMDGPU_CTX_GUILTY_RESET: u32 = 1;
/// Reset status: a GPU reset happened and another context caused it.
pub const AMDGPU_CTX_INNOCENT_RESET: u32 = 2;
/// Reset status: a GPU reset happened and its cause is not known.
pub const AMDGPU_CTX_UNKNOWN_RESET: u32 = 3;

/// QUERY_STATE2 bit: a GPU reset happened since the context was created.
pub const AMDGPU_CTX_QUERY2_FLAGS_RESET: u64 = 1 << 0;
/// QUERY_STATE2 bit: VRAM contents were lost since the context was created.
pub const AMDGPU_CTX_QUERY2_FLAGS_VRAMLOST: u64 = 1 << 1;
/// QUERY_STATE2 bit: work from this context hung the GPU.
pub const AMDGPU_CTX_QUERY2_FLAGS_GUILTY: u64 = 1 << 2;
/// QUERY_STATE2 bit: the RAS machinery saw a correctable memory error.
pub const AMDGPU_CTX_QUERY2_FLAGS_RAS_CE: u64 = 1 << 3;
/// QUERY_STATE2 bit: the RAS machinery saw an uncorrectable memory error.
pub const AMDGPU_CTX_QUERY2_FLAGS_RAS_UE: u64 = 1 << 4;
/// QUERY_STATE2 bit: a GPU reset is under way right now.
///
/// Newer than libdrm 2.4.114's header.
pub const AMDGPU_CTX_QUERY2_FLAGS_RESET_IN_PROGRESS: u64 = 1 << 5;

/// Context priority (`drm_amdgpu_ctx_in::priority`) of ordinary work; needs no privilege.
pub const AMDGPU_CTX_PRIORITY_NORMAL: i32 = 0;

/// GEM_VA operation: map `map_size` bytes of the buffer at `va_address`.
pub const AMDGPU_VA_OP_MAP: u32 = 1;
/// GEM_VA operation: remove the buffer's mapping that starts at `va_address`.
pub const AMDGPU_VA_OP_UNMAP: u32 = 2;
/// GEM_VA operation: remove every mapping in the range, whatever buffer it belongs to (no handle).
pub const AMDGPU_VA_OP_CLEAR: u32 = 3;
/// GEM_VA operation: map the buffer over the range, first removing whatever was mapped there.
pub const AMDGPU_VA_OP_REPLACE: u32 = 4;

/// GEM_VA flag: record the change but defer the page-table update to a later submission.
pub const AMDGPU_VM_DELAY_UPDATE: u32 = 1 << 0;
/// GEM_VA flag: the GPU may read through the mapping.
pub const AMDGPU_VM_PAGE_READABLE: u32 = 1 << 1;
/// GEM_VA flag: the GPU may write through the mapping.
pub const AMDGPU_VM_PAGE_WRITEABLE: u32 = 1 << 2;
/// GEM_VA flag: the GPU may fetch shader instructions through the mapping.
pub const AMDGPU_VM_PAGE_EXECUTABLE: u32 = 1 << 3;
/// GEM_VA flag: a partially-resident-texture mapping, backed by no buffer.
pub const AMDGPU_VM_PAGE_PRT: u32 = 1 << 4;
/// GEM_VA flags: bits 5..=8 select the memory type (caching policy) of the mapping.
pub const AMDGPU_VM_MTYPE_MASK: u32 = 0xf << 5;
/// Memory type: let the kernel choose.
pub const AMDGPU_VM_MTYPE_DEFAULT: u32 = 0;
/// Memory type: uncached.
pub const AMDGPU_VM_MTYPE_UC: u32 = 4 << 5;

/// Hardware IP block: the graphics engine (GFX rings).
pub const AMDGPU_HW_IP_GFX: u32 = 0;
/// Hardware IP block: the compute engine (MEC queues).
pub const AMDGPU_HW_IP_COMPUTE: u32 = 1;
/// Hardware IP block: the system DMA engine (SDMA).
pub const AMDGPU_HW_IP_DMA: u32 = 2;

/// CS chunk: one indirect buffer to run, a `drm_amdgpu_cs_chunk_ib`.
pub const AMDGPU_CHUNK_ID_IB: u32 = 0x01;
/// CS chunk: a user fence the kernel writes when the submission completes.
pub const AMDGPU_CHUNK_ID_FENCE: u32 = 0x02;
/// CS chunk: earlier submissions (context, ring, sequence number) this one waits for.
pub const AMDGPU_CHUNK_ID_DEPENDENCIES: u32 = 0x03;
/// CS chunk: sync objects the submission waits on before it runs.
pub const AMDGPU_CHUNK_ID_SYNCOBJ_IN: u32 = 0x04;
/// CS chunk: sync objects the submission signals when it completes.
pub const AMDGPU_CHUNK_ID_SYNCOBJ_OUT: u32 = 0x05;
/// CS chunk: the submission's buffer list given inline, a `drm_amdgpu_bo_list_chunk`.
pub const AMDGPU_CHUNK_ID_BO_HANDLES: u32 = 0x06;

/// IB flag: run the IB on the constant engine rather than the main one.
pub const AMDGPU_IB_FLAG_CE: u32 = 1 << 0;
/// IB flag: a preamble the kernel may skip when no context switch happened in between.
pub const AMDGPU_IB_FLAG_PREAMBLE: u32 = 1 << 1;
/// IB flag: the IB may be preempted mid-way.
pub const AMDGPU_IB_FLAG_PREEMPT: u32 = 1 << 2;
/// IB flag: the end-of-IB fence writes L2 back without invalidating shader caches.
pub const AMDGPU_IB_FLAG_TC_WB_NOT_INVALIDATE: u32 = 1 << 3;
/// IB flag: the kernel emits a cache flush and invalidate before the IB.
pub const AMDGPU_IB_FLAG_EMIT_MEM_SYNC: u32 = 1 << 6;

/// INFO query: whether acceleration works (a `u32`, nonzero if so).
pub const AMDGPU_INFO_ACCEL_WORKING: u32 = 0x00;
/// INFO query: one IP block's version and rings, a `drm_amdgpu_info_hw_ip`.
pub const AMDGPU_INFO_HW_IP_INFO: u32 = 0x02;
/// INFO query: how many instances of an IP block exist (a `u32`).
pub const AMDGPU_INFO_HW_IP_COUNT: u32 = 0x03;
/// INFO query: the GPU's timestamp counter now (a `u64`, ticking at `gpu_counter_freq`).
pub const AMDGPU_INFO_TIMESTAMP: u32 = 0x05;
/// INFO query: one firmware's version, a `drm_amdgpu_info_firmware`.
pub const AMDGPU_INFO_FW_VERSION: u32 = 0x0e;
/// INFO query: VRAM and GTT sizes (`struct drm_amdgpu_info_vram_gtt`, not mirrored here).
pub const AMDGPU_INFO_VRAM_GTT: u32 = 0x14;
/// INFO query: read memory-mapped registers (an array of `u32`).
pub const AMDGPU_INFO_READ_MMR_REG: u32 = 0x15;
/// INFO query: the device description, a `drm_amdgpu_info_device`.
pub const AMDGPU_INFO_DEV_INFO: u32 = 0x16;
/// INFO query: the memory heaps, a `drm_amdgpu_memory_info`.
pub const AMDGPU_INFO_MEMORY: u32 = 0x19;
/// INFO query: how many times VRAM contents were lost (a `u32`).
pub const AMDGPU_INFO_VRAM_LOST_COUNTER: u32 = 0x1F;

/// Firmware (`drm_amdgpu_query_fw::fw_type`): the graphics micro engine.
pub const AMDGPU_INFO_FW_GFX_ME: u32 = 0x04;
/// Firmware: the graphics pre-fetch parser.
pub const AMDGPU_INFO_FW_GFX_PFP: u32 = 0x05;
/// Firmware: the compute micro engine (MEC).
pub const AMDGPU_INFO_FW_GFX_MEC: u32 = 0x08;

/// Device flag (`ids_flags`): an APU, GPU and CPU on one chip sharing system memory.
pub const AMDGPU_IDS_FLAGS_FUSION: u64 = 0x1;
/// Device flag: the graphics engine supports mid-command-buffer preemption.
pub const AMDGPU_IDS_FLAGS_PREEMPTION: u64 = 0x2;
/// Device flag: trusted memory zone (encrypted, secure buffers) is available.
pub const AMDGPU_IDS_FLAGS_TMZ: u64 = 0x4;

/// Family not known to the kernel.
pub const AMDGPU_FAMILY_UNKNOWN: u32 = 0;
/// Southern Islands (GFX6).
pub const AMDGPU_FAMILY_SI: u32 = 110;
/// Sea Islands discrete GPUs (GFX7).
pub const AMDGPU_FAMILY_CI: u32 = 120;
/// Kaveri and Kabini APUs (GFX7).
pub const AMDGPU_FAMILY_KV: u32 = 125;
/// Volcanic Islands discrete GPUs (GFX8).
pub const AMDGPU_FAMILY_VI: u32 = 130;
/// Carrizo and Stoney APUs (GFX8).
pub const AMDGPU_FAMILY_CZ: u32 = 135;
/// Arctic Islands: Vega and the GFX9 data-centre GPUs.
pub const AMDGPU_FAMILY_AI: u32 = 141;
/// Raven and its GFX9 APU successors.
pub const AMDGPU_FAMILY_RV: u32 = 142;
/// GFX10 and GFX10.3 GPUs (Navi) that have no family of their own below.
pub const AMDGPU_FAMILY_NV: u32 = 143;
/// Van Gogh APU (GC 10.3.1).
pub const AMDGPU_FAMILY_VGH: u32 = 144;
/// GFX11 discrete GPUs.
///
/// Newer than libdrm 2.4.114's header, like every family below.
pub const AMDGPU_FAMILY_GC_11_0_0: u32 = 145;
/// Yellow Carp APU (GC 10.3.3).
pub const AMDGPU_FAMILY_YC: u32 = 146;
/// GFX11 APUs (GC 11.0.1 and 11.0.4).
pub const AMDGPU_FAMILY_GC_11_0_1: u32 = 148;
/// APU with GC 10.3.6.
pub const AMDGPU_FAMILY_GC_10_3_6: u32 = 149;
/// GFX11.5 APUs (GC 11.5.x).
pub const AMDGPU_FAMILY_GC_11_5_0: u32 = 150;
/// APU with GC 10.3.7.
pub const AMDGPU_FAMILY_GC_10_3_7: u32 = 151;
/// GFX12 GPUs.
pub const AMDGPU_FAMILY_GC_12_0_0: u32 = 152;

// ---------------------------------------------------------------------------------------------
// Structs
// ---------------------------------------------------------------------------------------------

/// Argument of `DRM_IOCTL_GEM_CLOSE`: drops one GEM handle of this file.
///
/// `struct drm_gem_close` (drm.h).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_gem_close {
    /// The GEM handle to release (in).
    pub handle: u32,
    /// Padding; zero.
    pub pad: u32,
}

/// GEM_CREATE input: size, placement and flags of the buffer object to allocate.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_gem_create_in {
    /// Size of the buffer in bytes.
    pub bo_size: u64,
    /// Required alignment of the buffer's physical placement in bytes (0: page).
    pub alignment: u64,
    /// Where it may live: a mask of `AMDGPU_GEM_DOMAIN_*`.
    pub domains: u64,
    /// `AMDGPU_GEM_CREATE_*` flags.
    pub domain_flags: u64,
}

/// GEM_CREATE output.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_gem_create_out {
    /// GEM handle of the new buffer object.
    pub handle: u32,
    /// Padding.
    pub _pad: u32,
}

/// Argument of `DRM_IOCTL_AMDGPU_GEM_CREATE`: input on the way in, output on the way out.
#[repr(C)]
#[derive(Clone, Copy)]
pub union drm_amdgpu_gem_create {
    /// What user space fills in (the header's `in`).
    pub in_: drm_amdgpu_gem_create_in,
    /// What the kernel writes back.
    pub out: drm_amdgpu_gem_create_out,
}

/// GEM_MMAP input.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_gem_mmap_in {
    /// GEM handle of the buffer to map.
    pub handle: u32,
    /// Padding; zero.
    pub _pad: u32,
}

/// GEM_MMAP output.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_gem_mmap_out {
    /// The offset to pass to `mmap` on the render node's fd.
    pub addr_ptr: u64,
}

/// Argument of `DRM_IOCTL_AMDGPU_GEM_MMAP`: input on the way in, output on the way out.
#[repr(C)]
#[derive(Clone, Copy)]
pub union drm_amdgpu_gem_mmap {
    /// What user space fills in (the header's `in`).
    pub in_: drm_amdgpu_gem_mmap_in,
    /// What the kernel writes back.
    pub out: drm_amdgpu_gem_mmap_out,
}

/// Argument of `DRM_IOCTL_AMDGPU_GEM_VA`: one change to the file's GPU virtual address space.
///
/// `struct drm_amdgpu_gem_va` as current kernels define it (64 bytes); libdrm 2.4.114 stops after
/// `map_size` (40 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_gem_va {
    /// GEM handle of the buffer to map or unmap (unused by `AMDGPU_VA_OP_CLEAR` and PRT mappings).
    pub handle: u32,
    /// Padding; zero.
    pub _pad: u32,
    /// One of `AMDGPU_VA_OP_*`.
    pub operation: u32,
    /// `AMDGPU_VM_*` flags: permissions, memory type, delayed update.
    pub flags: u32,
    /// GPU virtual address where the range starts, page aligned.
    pub va_address: u64,
    /// Offset into the buffer of the first mapped byte, page aligned.
    pub offset_in_bo: u64,
    /// Length of the range in bytes, page aligned.
    pub map_size: u64,
    /// Timeline point at which `vm_timeline_syncobj_out` is signalled (0: a binary sync object).
    pub vm_timeline_point: u64,
    /// Sync object signalled once the page tables are updated (0: none).
    pub vm_timeline_syncobj_out: u32,
    /// Number of sync objects in `input_fence_syncobj_handles`.
    pub num_syncobj_handles: u32,
    /// Address of an array of `u32` sync-object handles the update waits for.
    pub input_fence_syncobj_handles: u64,
}

/// BO_LIST input, also the payload of an `AMDGPU_CHUNK_ID_BO_HANDLES` chunk.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_bo_list_in {
    /// One of `AMDGPU_BO_LIST_OP_*`.
    pub operation: u32,
    /// The list to destroy or update (unused on create).
    pub list_handle: u32,
    /// Number of entries at `bo_info_ptr`.
    pub bo_number: u32,
    /// Size in bytes of one entry, `size_of::<drm_amdgpu_bo_list_entry>()`.
    pub bo_info_size: u32,
    /// Address of the array of `drm_amdgpu_bo_list_entry`.
    pub bo_info_ptr: u64,
}

/// One buffer of a BO list.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_bo_list_entry {
    /// GEM handle of the buffer.
    pub bo_handle: u32,
    /// Relative priority when the kernel validates the list's buffers (it caps the value).
    pub bo_priority: u32,
}

/// BO_LIST output.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_bo_list_out {
    /// Handle of the list just created.
    pub list_handle: u32,
    /// Padding.
    pub _pad: u32,
}

/// Argument of `DRM_IOCTL_AMDGPU_BO_LIST`: input on the way in, output on the way out.
#[repr(C)]
#[derive(Clone, Copy)]
pub union drm_amdgpu_bo_list {
    /// What user space fills in (the header's `in`).
    pub in_: drm_amdgpu_bo_list_in,
    /// What the kernel writes back.
    pub out: drm_amdgpu_bo_list_out,
}

/// CTX input.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_ctx_in {
    /// One of `AMDGPU_CTX_OP_*`.
    pub op: u32,
    /// Operation-specific flags; 0 for the operations mirrored here.
    pub flags: u32,
    /// The context to free or query (unused on allocation).
    pub ctx_id: u32,
    /// Scheduling priority of a new context, e.g. `AMDGPU_CTX_PRIORITY_NORMAL`.
    pub priority: i32,
}

/// CTX output of `AMDGPU_CTX_OP_ALLOC_CTX`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_ctx_out_alloc {
    /// Id of the new context.
    pub ctx_id: u32,
    /// Padding.
    pub _pad: u32,
}

/// CTX output of the two query operations.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_ctx_out_state {
    /// QUERY_STATE2: `AMDGPU_CTX_QUERY2_FLAGS_*`.
    pub flags: u64,
    /// Hang count; current kernels always write 0.
    pub hangs: u32,
    /// QUERY_STATE: `AMDGPU_CTX_*_RESET`.
    pub reset_status: u32,
}

/// CTX output, by operation.
#[repr(C)]
#[derive(Clone, Copy)]
pub union drm_amdgpu_ctx_out {
    /// After `AMDGPU_CTX_OP_ALLOC_CTX`.
    pub alloc: drm_amdgpu_ctx_out_alloc,
    /// After `AMDGPU_CTX_OP_QUERY_STATE` or `AMDGPU_CTX_OP_QUERY_STATE2`.
    pub state: drm_amdgpu_ctx_out_state,
}

/// Argument of `DRM_IOCTL_AMDGPU_CTX`: input on the way in, output on the way out.
#[repr(C)]
#[derive(Clone, Copy)]
pub union drm_amdgpu_ctx {
    /// What user space fills in (the header's `in`).
    pub in_: drm_amdgpu_ctx_in,
    /// What the kernel writes back.
    pub out: drm_amdgpu_ctx_out,
}

/// One chunk of a submission: a typed, length-prefixed pointer to its payload.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_cs_chunk {
    /// What the payload is: one of `AMDGPU_CHUNK_ID_*`.
    pub chunk_id: u32,
    /// Length of the payload in dwords (4-byte units).
    pub length_dw: u32,
    /// Address of the chunk's payload (a `drm_amdgpu_cs_chunk_ib`, an array of BO list entries, …).
    pub chunk_data: u64,
}

/// Payload of a `AMDGPU_CHUNK_ID_BO_HANDLES` chunk: the same struct as the BO_LIST ioctl's input.
pub type drm_amdgpu_bo_list_chunk = drm_amdgpu_bo_list_in;

/// CS input.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_cs_in {
    /// The context the submission runs in.
    pub ctx_id: u32,
    /// BO list the submission uses, or 0 (none, or given by a `AMDGPU_CHUNK_ID_BO_HANDLES` chunk).
    pub bo_list_handle: u32,
    /// Number of chunks at `chunks`.
    pub num_chunks: u32,
    /// Submission flags; the header defines none, so 0.
    pub flags: u32,
    /// Address of an array of `num_chunks` u64 addresses, each pointing at a `drm_amdgpu_cs_chunk`.
    pub chunks: u64,
}

/// CS output.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_cs_out {
    /// The submission's sequence number on its ring.
    pub handle: u64,
}

/// Argument of `DRM_IOCTL_AMDGPU_CS`: input on the way in, output on the way out.
#[repr(C)]
#[derive(Clone, Copy)]
pub union drm_amdgpu_cs {
    /// What user space fills in (the header's `in`).
    pub in_: drm_amdgpu_cs_in,
    /// What the kernel writes back.
    pub out: drm_amdgpu_cs_out,
}

/// Payload of an `AMDGPU_CHUNK_ID_IB` chunk: one indirect buffer and the ring to run it on.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_cs_chunk_ib {
    /// Padding; zero.
    pub _pad: u32,
    /// `AMDGPU_IB_FLAG_*` flags.
    pub flags: u32,
    /// GPU virtual address of the IB's first command.
    pub va_start: u64,
    /// Size of the IB in bytes.
    pub ib_bytes: u32,
    /// The IP block to run it on: one of `AMDGPU_HW_IP_*`.
    pub ip_type: u32,
    /// Which instance of that IP block; the kernel accepts only 0.
    pub ip_instance: u32,
    /// Which ring of that IP block.
    pub ring: u32,
}

/// WAIT_CS input: which submission to wait for and until when.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_wait_cs_in {
    /// Sequence number from `drm_amdgpu_cs_out::handle`.
    pub handle: u64,
    /// Absolute CLOCK_MONOTONIC deadline in nanoseconds.
    pub timeout: u64,
    /// IP block the submission ran on: one of `AMDGPU_HW_IP_*`.
    pub ip_type: u32,
    /// Instance of that IP block.
    pub ip_instance: u32,
    /// Ring the submission ran on.
    pub ring: u32,
    /// Context the submission ran in.
    pub ctx_id: u32,
}

/// WAIT_CS output.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_wait_cs_out {
    /// 0: completed, 1: still busy at the deadline.
    pub status: u64,
}

/// Argument of `DRM_IOCTL_AMDGPU_WAIT_CS`: input on the way in, output on the way out.
#[repr(C)]
#[derive(Clone, Copy)]
pub union drm_amdgpu_wait_cs {
    /// What user space fills in (the header's `in`).
    pub in_: drm_amdgpu_wait_cs_in,
    /// What the kernel writes back.
    pub out: drm_amdgpu_wait_cs_out,
}

/// Request of an `AMDGPU_INFO_FW_VERSION` query: which firmware.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_query_fw {
    /// Which firmware: one of `AMDGPU_INFO_FW_*`.
    pub fw_type: u32,
    /// Instance of the IP block the firmware runs on.
    pub ip_instance: u32,
    /// Index among several firmwares of one type (e.g. a ring or engine), else 0.
    pub index: u32,
    /// Padding; zero.
    pub _pad: u32,
}

/// Request of an `AMDGPU_INFO_HW_IP_INFO` or `AMDGPU_INFO_HW_IP_COUNT` query: which IP block.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_info_query_hw_ip {
    /// The IP block: one of `AMDGPU_HW_IP_*` (the header's `type`).
    pub type_: u32,
    /// Instance of that IP block.
    pub ip_instance: u32,
}

/// Request of an `AMDGPU_INFO_READ_MMR_REG` query: which registers (only ones the kernel allows).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_info_read_mmr_reg {
    /// Offset of the first register, in dwords.
    pub dword_offset: u32,
    /// Number of consecutive registers to read.
    pub count: u32,
    /// Shader engine in bits 7:0 and shader array in bits 15:8; `0xffff_ffff` for broadcast.
    pub instance: u32,
    /// No flags are defined; 0.
    pub flags: u32,
}

/// The anonymous union inside `struct drm_amdgpu_info`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union drm_amdgpu_info_request {
    /// For `AMDGPU_INFO_HW_IP_INFO` and `AMDGPU_INFO_HW_IP_COUNT`.
    pub query_hw_ip: drm_amdgpu_info_query_hw_ip,
    /// For `AMDGPU_INFO_READ_MMR_REG`.
    pub read_mmr_reg: drm_amdgpu_info_read_mmr_reg,
    /// For `AMDGPU_INFO_FW_VERSION`.
    pub query_fw: drm_amdgpu_query_fw,
}

/// Argument of `DRM_IOCTL_AMDGPU_INFO`: one query; the answer goes to user memory, not into this struct.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct drm_amdgpu_info {
    /// Address the kernel writes the answer to.
    pub return_pointer: u64,
    /// Bytes the kernel may write there (it writes at most its own struct size).
    pub return_size: u32,
    /// What to ask: one of `AMDGPU_INFO_*`.
    pub query: u32,
    /// The query's parameters, where it has any.
    pub request: drm_amdgpu_info_request,
}

/// Answer to an `AMDGPU_INFO_FW_VERSION` query.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_info_firmware {
    /// Firmware version.
    pub ver: u32,
    /// Firmware feature version.
    pub feature: u32,
}

/// Sizes of one memory heap, in bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_heap_info {
    /// Total size of the heap.
    pub total_heap_size: u64,
    /// Part of it user space can allocate (the total less what the kernel reserves or pins).
    pub usable_heap_size: u64,
    /// Bytes currently allocated in it.
    pub heap_usage: u64,
    /// Largest single allocation the kernel would accept in it.
    pub max_allocation: u64,
}

/// Answer to an `AMDGPU_INFO_MEMORY` query: the three heaps.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_memory_info {
    /// All of VRAM.
    pub vram: drm_amdgpu_heap_info,
    /// The part of VRAM the CPU can map.
    pub cpu_accessible_vram: drm_amdgpu_heap_info,
    /// System memory the GPU can reach through the GART.
    pub gtt: drm_amdgpu_heap_info,
}

/// Answer to an `AMDGPU_INFO_DEV_INFO` query: what the chip is and what it has.
///
/// `struct drm_amdgpu_info_device` as current kernels define it (448 bytes); libdrm 2.4.114's
/// header ends at `tcc_disabled_mask` (368 bytes) and calls `pcie_gen` / `pcie_num_lanes` `_pad` /
/// `_pad1`. Older kernels fill the prefix they know and leave the rest zero.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_info_device {
    /// PCI device id.
    pub device_id: u32,
    /// Internal revision of the chip (A0, A1, ...).
    pub chip_rev: u32,
    /// External revision: `chip_rev` plus a base that depends on the chip.
    pub external_rev: u32,
    /// PCI revision id.
    pub pci_rev: u32,
    /// Chip family: one of `AMDGPU_FAMILY_*`.
    pub family: u32,
    /// Number of shader engines.
    pub num_shader_engines: u32,
    /// Number of shader arrays in each shader engine.
    pub num_shader_arrays_per_engine: u32,
    /// Frequency of the GPU timestamp counter in kHz.
    pub gpu_counter_freq: u32,
    /// Highest shader (engine) clock in kHz.
    pub max_engine_clock: u64,
    /// Highest memory clock in kHz.
    pub max_memory_clock: u64,
    /// Number of usable compute units on the whole chip.
    pub cu_active_number: u32,
    /// Legacy always-on CU mask; not reliable, use `cu_ao_bitmap`.
    pub cu_ao_mask: u32,
    /// Usable compute units: bit n of `cu_bitmap[se][sh]` is CU n of shader array `sh` in engine `se`.
    pub cu_bitmap: [[u32; 4]; 4],
    /// Mask of enabled render backends, low 32 bits.
    pub enabled_rb_pipes_mask: u32,
    /// Number of render backends.
    pub num_rb_pipes: u32,
    /// Number of hardware graphics contexts.
    pub num_hw_gfx_contexts: u32,
    /// PCIe generation of the link (`_pad` in older headers).
    pub pcie_gen: u32,
    /// `AMDGPU_IDS_FLAGS_*` bits.
    pub ids_flags: u64,
    /// Lowest GPU virtual address user space may use.
    pub virtual_address_offset: u64,
    /// End of the low GPU virtual address range user space may use.
    pub virtual_address_max: u64,
    /// Alignment in bytes that GPU virtual addresses of mappings need.
    pub virtual_address_alignment: u32,
    /// Fragment size of page-table entries in bytes; mappings aligned to it are faster.
    pub pte_fragment_size: u32,
    /// Page size of the GART in bytes.
    pub gart_page_size: u32,
    /// Size of the constant engine's RAM in bytes.
    pub ce_ram_size: u32,
    /// Kind of video memory: one of the header's `AMDGPU_VRAM_TYPE_*`.
    pub vram_type: u32,
    /// Width of the memory bus in bits.
    pub vram_bit_width: u32,
    /// Which video-encode (VCE) instances are fused off.
    pub vce_harvest_config: u32,
    /// Whether the GFX block doubles its off-chip LDS buffers (graphics pipeline).
    pub gc_double_offchip_lds_buf: u32,
    /// GPU address of the NGG primitive buffer (graphics; 0 on current kernels).
    pub prim_buf_gpu_addr: u64,
    /// GPU address of the NGG position buffer (graphics; 0 on current kernels).
    pub pos_buf_gpu_addr: u64,
    /// GPU address of the NGG control sideband buffer (graphics; 0 on current kernels).
    pub cntl_sb_buf_gpu_addr: u64,
    /// GPU address of the NGG parameter cache (graphics; 0 on current kernels).
    pub param_buf_gpu_addr: u64,
    /// Size of the NGG primitive buffer in bytes.
    pub prim_buf_size: u32,
    /// Size of the NGG position buffer in bytes.
    pub pos_buf_size: u32,
    /// Size of the NGG control sideband buffer in bytes.
    pub cntl_sb_buf_size: u32,
    /// Size of the NGG parameter cache in bytes.
    pub param_buf_size: u32,
    /// Lanes in a wavefront as the kernel reports it.
    pub wave_front_size: u32,
    /// Vector registers (VGPRs) a shader can address.
    pub num_shader_visible_vgprs: u32,
    /// Compute units per shader array.
    pub num_cu_per_sh: u32,
    /// Number of L2 cache (TCC) channels.
    pub num_tcc_blocks: u32,
    /// Geometry-shader VGT table depth (graphics).
    pub gs_vgt_table_depth: u32,
    /// Geometry-shader primitive buffer depth (graphics).
    pub gs_prim_buffer_depth: u32,
    /// Most geometry-shader waves per VGT (graphics).
    pub max_gs_waves_per_vgt: u32,
    /// PCIe link width in lanes, the lesser of the GPU's and the host's (`_pad1` in older headers).
    pub pcie_num_lanes: u32,
    /// Always-on compute units, laid out like `cu_bitmap`.
    pub cu_ao_bitmap: [[u32; 4]; 4],
    /// Lowest address of the high GPU virtual address range user space may use.
    pub high_va_offset: u64,
    /// End of the high GPU virtual address range user space may use.
    pub high_va_max: u64,
    /// Value for the GFX10+ `PA_SC_TILE_STEERING_OVERRIDE` register (graphics).
    pub pa_sc_tile_steering_override: u32,
    /// Mask of L2 cache (TCC) channels that are disabled.
    pub tcc_disabled_mask: u64,
    /// Lowest shader (engine) clock in kHz; newer than libdrm 2.4.114, like every field below.
    pub min_engine_clock: u64,
    /// Lowest memory clock in kHz.
    pub min_memory_clock: u64,
    /// Vector L0 (TCP) cache size in KiB; 0 where the kernel does not report it (it does from GFX11 on).
    pub tcp_cache_size: u32,
    /// Scalar/instruction caches (SQC) per workgroup processor; 0 where the kernel does not report
    /// it (it does from GFX11 on).
    pub num_sqc_per_wgp: u32,
    /// Scalar data cache size in KiB; 0 where the kernel does not report it (it does from GFX11 on).
    pub sqc_data_cache_size: u32,
    /// Instruction cache size in KiB; 0 where the kernel does not report it (it does from GFX11 on).
    pub sqc_inst_cache_size: u32,
    /// GL1 cache size in KiB; 0 where the kernel does not report it (it does from GFX11 on).
    pub gl1c_cache_size: u32,
    /// L2 (GL2) cache size in KiB; 0 where the kernel does not report it (it does from GFX11 on).
    pub gl2c_cache_size: u32,
    /// Infinity Cache (MALL) size in bytes; 0 where the kernel does not report it (it does from GFX11 on).
    pub mall_size: u64,
    /// Mask of enabled render backends, high 32 bits.
    pub enabled_rb_pipes_mask_hi: u32,
    /// Size in bytes of the GFX11 register shadow area used for preemption.
    pub shadow_size: u32,
    /// GPU virtual address alignment of that shadow area.
    pub shadow_alignment: u32,
    /// Size in bytes of the GFX11 context save area.
    pub csa_size: u32,
    /// GPU virtual address alignment of the context save area.
    pub csa_alignment: u32,
    /// Which IP blocks take user-mode queues: bit `1 << AMDGPU_HW_IP_*` per block.
    pub userq_ip_mask: u32,
    /// Padding.
    pub pad: u32,
}

/// Answer to an `AMDGPU_INFO_HW_IP_INFO` query: one IP block's version and rings.
///
/// `struct drm_amdgpu_info_hw_ip` as current kernels define it (40 bytes); libdrm 2.4.114 has
/// `_pad` where `ip_discovery_version` is and ends there (32 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_info_hw_ip {
    /// Major version of the IP block.
    pub hw_ip_version_major: u32,
    /// Minor version of the IP block.
    pub hw_ip_version_minor: u32,
    /// Capability bits; the kernel defines none and writes 0.
    pub capabilities_flags: u64,
    /// Alignment in bytes the start address of an IB on this block needs.
    pub ib_start_alignment: u32,
    /// Alignment in bytes the size of an IB on this block needs.
    pub ib_size_alignment: u32,
    /// Usable rings of this block: bit n set if ring n is.
    pub available_rings: u32,
    /// GC version of the GFX/COMPUTE IP: major in bits 23:16, minor 15:8, revision 7:0; 0 where
    /// the kernel does not report it.
    pub ip_discovery_version: u32,
    /// Number of user-mode queue slots the block has (newer than libdrm 2.4.114).
    pub userq_num_slots: u32,
}

// ---------------------------------------------------------------------------------------------
// Layout table: what the layout test compares with the C compiler's view of the header
// ---------------------------------------------------------------------------------------------

/// One size or offset the Rust side claims about a C type of the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayoutEntry {
    /// The C type, e.g. `struct drm_amdgpu_gem_va` or `union drm_amdgpu_ctx`.
    pub c_type: &'static str,
    /// `None` for the type itself; else the C member path (`out.state.reset_status`).
    pub field: Option<&'static str>,
    /// Offset of the member (0 for the type itself).
    pub offset: usize,
    /// Size of the member or of the type.
    pub size: usize,
}

/// One ioctl request number the Rust side claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoctlEntry {
    /// The macro's name in the C headers, e.g. `DRM_IOCTL_AMDGPU_CS`.
    pub c_name: &'static str,
    /// The request number the Rust side computes for it.
    pub value: u64,
}

macro_rules! ty {
    ($rust:ty, $c:literal) => {
        LayoutEntry { c_type: $c, field: None, offset: 0, size: size_of::<$rust>() }
    };
}

// `$cpath` is the C member path; `$($rpath).+` the Rust one (they differ where C uses `in`, a
// Rust keyword, or an anonymous union); `$fty` the member's type.
macro_rules! fld {
    ($rust:ty, $c:literal, $cpath:literal, $($rpath:ident).+ : $fty:ty) => {
        LayoutEntry {
            c_type: $c,
            field: Some($cpath),
            offset: offset_of!($rust, $($rpath).+),
            size: size_of::<$fty>(),
        }
    };
}

/// Every size and member offset of the structs above, named as the C header names them.
pub fn layout_table() -> Vec<LayoutEntry> {
    vec![
        ty!(drm_gem_close, "struct drm_gem_close"),
        fld!(drm_gem_close, "struct drm_gem_close", "handle", handle: u32),
        fld!(drm_gem_close, "struct drm_gem_close", "pad", pad: u32),
        // GEM_CREATE
        ty!(drm_amdgpu_gem_create_in, "struct drm_amdgpu_gem_create_in"),
        fld!(drm_amdgpu_gem_create_in, "struct drm_amdgpu_gem_create_in", "bo_size", bo_size: u64),
        fld!(drm_amdgpu_gem_create_in, "struct drm_amdgpu_gem_create_in", "alignment", alignment: u64),
        fld!(drm_amdgpu_gem_create_in, "struct drm_amdgpu_gem_create_in", "domains", domains: u64),
        fld!(drm_amdgpu_gem_create_in, "struct drm_amdgpu_gem_create_in", "domain_flags", domain_flags: u64),
        ty!(drm_amdgpu_gem_create_out, "struct drm_amdgpu_gem_create_out"),
        fld!(drm_amdgpu_gem_create_out, "struct drm_amdgpu_gem_create_out", "handle", handle: u32),
        fld!(drm_amdgpu_gem_create_out, "struct drm_amdgpu_gem_create_out", "_pad", _pad: u32),
        ty!(drm_amdgpu_gem_create, "union drm_amdgpu_gem_create"),
        fld!(drm_amdgpu_gem_create, "union drm_amdgpu_gem_create", "in.bo_size", in_.bo_size: u64),
        fld!(drm_amdgpu_gem_create, "union drm_amdgpu_gem_create", "out.handle", out.handle: u32),
        // GEM_MMAP
        ty!(drm_amdgpu_gem_mmap_in, "struct drm_amdgpu_gem_mmap_in"),
        fld!(drm_amdgpu_gem_mmap_in, "struct drm_amdgpu_gem_mmap_in", "handle", handle: u32),
        fld!(drm_amdgpu_gem_mmap_in, "struct drm_amdgpu_gem_mmap_in", "_pad", _pad: u32),
        ty!(drm_amdgpu_gem_mmap_out, "struct drm_amdgpu_gem_mmap_out"),
        fld!(drm_amdgpu_gem_mmap_out, "struct drm_amdgpu_gem_mmap_out", "addr_ptr", addr_ptr: u64),
        ty!(drm_amdgpu_gem_mmap, "union drm_amdgpu_gem_mmap"),
        fld!(drm_amdgpu_gem_mmap, "union drm_amdgpu_gem_mmap", "in.handle", in_.handle: u32),
        fld!(drm_amdgpu_gem_mmap, "union drm_amdgpu_gem_mmap", "out.addr_ptr", out.addr_ptr: u64),
        // GEM_VA
        ty!(drm_amdgpu_gem_va, "struct drm_amdgpu_gem_va"),
        fld!(drm_amdgpu_gem_va, "struct drm_amdgpu_gem_va", "handle", handle: u32),
        fld!(drm_amdgpu_gem_va, "struct drm_amdgpu_gem_va", "_pad", _pad: u32),
        fld!(drm_amdgpu_gem_va, "struct drm_amdgpu_gem_va", "operation", operation: u32),
        fld!(drm_amdgpu_gem_va, "struct drm_amdgpu_gem_va", "flags", flags: u32),
        fld!(drm_amdgpu_gem_va, "struct drm_amdgpu_gem_va", "va_address", va_address: u64),
        fld!(drm_amdgpu_gem_va, "struct drm_amdgpu_gem_va", "offset_in_bo", offset_in_bo: u64),
        fld!(drm_amdgpu_gem_va, "struct drm_amdgpu_gem_va", "map_size", map_size: u64),
        fld!(drm_amdgpu_gem_va, "struct drm_amdgpu_gem_va", "vm_timeline_point", vm_timeline_point: u64),
        fld!(drm_amdgpu_gem_va, "struct drm_amdgpu_gem_va", "vm_timeline_syncobj_out", vm_timeline_syncobj_out: u32),
        fld!(drm_amdgpu_gem_va, "struct drm_amdgpu_gem_va", "num_syncobj_handles", num_syncobj_handles: u32),
        fld!(drm_amdgpu_gem_va, "struct drm_amdgpu_gem_va", "input_fence_syncobj_handles", input_fence_syncobj_handles: u64),
        // BO_LIST
        ty!(drm_amdgpu_bo_list_in, "struct drm_amdgpu_bo_list_in"),
        fld!(drm_amdgpu_bo_list_in, "struct drm_amdgpu_bo_list_in", "operation", operation: u32),
        fld!(drm_amdgpu_bo_list_in, "struct drm_amdgpu_bo_list_in", "list_handle", list_handle: u32),
        fld!(drm_amdgpu_bo_list_in, "struct drm_amdgpu_bo_list_in", "bo_number", bo_number: u32),
        fld!(drm_amdgpu_bo_list_in, "struct drm_amdgpu_bo_list_in", "bo_info_size", bo_info_size: u32),
        fld!(drm_amdgpu_bo_list_in, "struct drm_amdgpu_bo_list_in", "bo_info_ptr", bo_info_ptr: u64),
        ty!(drm_amdgpu_bo_list_entry, "struct drm_amdgpu_bo_list_entry"),
        fld!(drm_amdgpu_bo_list_entry, "struct drm_amdgpu_bo_list_entry", "bo_handle", bo_handle: u32),
        fld!(drm_amdgpu_bo_list_entry, "struct drm_amdgpu_bo_list_entry", "bo_priority", bo_priority: u32),
        ty!(drm_amdgpu_bo_list_out, "struct drm_amdgpu_bo_list_out"),
        fld!(drm_amdgpu_bo_list_out, "struct drm_amdgpu_bo_list_out", "list_handle", list_handle: u32),
        ty!(drm_amdgpu_bo_list, "union drm_amdgpu_bo_list"),
        // CTX
        ty!(drm_amdgpu_ctx_in, "struct drm_amdgpu_ctx_in"),
        fld!(drm_amdgpu_ctx_in, "struct drm_amdgpu_ctx_in", "op", op: u32),
        fld!(drm_amdgpu_ctx_in, "struct drm_amdgpu_ctx_in", "flags", flags: u32),
        fld!(drm_amdgpu_ctx_in, "struct drm_amdgpu_ctx_in", "ctx_id", ctx_id: u32),
        fld!(drm_amdgpu_ctx_in, "struct drm_amdgpu_ctx_in", "priority", priority: i32),
        ty!(drm_amdgpu_ctx_out, "union drm_amdgpu_ctx_out"),
        fld!(drm_amdgpu_ctx_out, "union drm_amdgpu_ctx_out", "alloc.ctx_id", alloc.ctx_id: u32),
        fld!(drm_amdgpu_ctx_out, "union drm_amdgpu_ctx_out", "state.flags", state.flags: u64),
        fld!(drm_amdgpu_ctx_out, "union drm_amdgpu_ctx_out", "state.hangs", state.hangs: u32),
        fld!(drm_amdgpu_ctx_out, "union drm_amdgpu_ctx_out", "state.reset_status", state.reset_status: u32),
        ty!(drm_amdgpu_ctx, "union drm_amdgpu_ctx"),
        fld!(drm_amdgpu_ctx, "union drm_amdgpu_ctx", "in.ctx_id", in_.ctx_id: u32),
        fld!(drm_amdgpu_ctx, "union drm_amdgpu_ctx", "out.state.reset_status", out.state.reset_status: u32),
        // CS
        ty!(drm_amdgpu_cs_chunk, "struct drm_amdgpu_cs_chunk"),
        fld!(drm_amdgpu_cs_chunk, "struct drm_amdgpu_cs_chunk", "chunk_id", chunk_id: u32),
        fld!(drm_amdgpu_cs_chunk, "struct drm_amdgpu_cs_chunk", "length_dw", length_dw: u32),
        fld!(drm_amdgpu_cs_chunk, "struct drm_amdgpu_cs_chunk", "chunk_data", chunk_data: u64),
        ty!(drm_amdgpu_cs_in, "struct drm_amdgpu_cs_in"),
        fld!(drm_amdgpu_cs_in, "struct drm_amdgpu_cs_in", "ctx_id", ctx_id: u32),
        fld!(drm_amdgpu_cs_in, "struct drm_amdgpu_cs_in", "bo_list_handle", bo_list_handle: u32),
        fld!(drm_amdgpu_cs_in, "struct drm_amdgpu_cs_in", "num_chunks", num_chunks: u32),
        fld!(drm_amdgpu_cs_in, "struct drm_amdgpu_cs_in", "flags", flags: u32),
        fld!(drm_amdgpu_cs_in, "struct drm_amdgpu_cs_in", "chunks", chunks: u64),
        ty!(drm_amdgpu_cs_out, "struct drm_amdgpu_cs_out"),
        fld!(drm_amdgpu_cs_out, "struct drm_amdgpu_cs_out", "handle", handle: u64),
        ty!(drm_amdgpu_cs, "union drm_amdgpu_cs"),
        ty!(drm_amdgpu_cs_chunk_ib, "struct drm_amdgpu_cs_chunk_ib"),
        fld!(drm_amdgpu_cs_chunk_ib, "struct drm_amdgpu_cs_chunk_ib", "_pad", _pad: u32),
        fld!(drm_amdgpu_cs_chunk_ib, "struct drm_amdgpu_cs_chunk_ib", "flags", flags: u32),
        fld!(drm_amdgpu_cs_chunk_ib, "struct drm_amdgpu_cs_chunk_ib", "va_start", va_start: u64),
        fld!(drm_amdgpu_cs_chunk_ib, "struct drm_amdgpu_cs_chunk_ib", "ib_bytes", ib_bytes: u32),
        fld!(drm_amdgpu_cs_chunk_ib, "struct drm_amdgpu_cs_chunk_ib", "ip_type", ip_type: u32),
        fld!(drm_amdgpu_cs_chunk_ib, "struct drm_amdgpu_cs_chunk_ib", "ip_instance", ip_instance: u32),
        fld!(drm_amdgpu_cs_chunk_ib, "struct drm_amdgpu_cs_chunk_ib", "ring", ring: u32),
        // WAIT_CS
        ty!(drm_amdgpu_wait_cs_in, "struct drm_amdgpu_wait_cs_in"),
        fld!(drm_amdgpu_wait_cs_in, "struct drm_amdgpu_wait_cs_in", "handle", handle: u64),
        fld!(drm_amdgpu_wait_cs_in, "struct drm_amdgpu_wait_cs_in", "timeout", timeout: u64),
        fld!(drm_amdgpu_wait_cs_in, "struct drm_amdgpu_wait_cs_in", "ip_type", ip_type: u32),
        fld!(drm_amdgpu_wait_cs_in, "struct drm_amdgpu_wait_cs_in", "ip_instance", ip_instance: u32),
        fld!(drm_amdgpu_wait_cs_in, "struct drm_amdgpu_wait_cs_in", "ring", ring: u32),
        fld!(drm_amdgpu_wait_cs_in, "struct drm_amdgpu_wait_cs_in", "ctx_id", ctx_id: u32),
        ty!(drm_amdgpu_wait_cs_out, "struct drm_amdgpu_wait_cs_out"),
        fld!(drm_amdgpu_wait_cs_out, "struct drm_amdgpu_wait_cs_out", "status", status: u64),
        ty!(drm_amdgpu_wait_cs, "union drm_amdgpu_wait_cs"),
        // INFO
        ty!(drm_amdgpu_query_fw, "struct drm_amdgpu_query_fw"),
        fld!(drm_amdgpu_query_fw, "struct drm_amdgpu_query_fw", "fw_type", fw_type: u32),
        fld!(drm_amdgpu_query_fw, "struct drm_amdgpu_query_fw", "ip_instance", ip_instance: u32),
        fld!(drm_amdgpu_query_fw, "struct drm_amdgpu_query_fw", "index", index: u32),
        ty!(drm_amdgpu_info, "struct drm_amdgpu_info"),
        fld!(drm_amdgpu_info, "struct drm_amdgpu_info", "return_pointer", return_pointer: u64),
        fld!(drm_amdgpu_info, "struct drm_amdgpu_info", "return_size", return_size: u32),
        fld!(drm_amdgpu_info, "struct drm_amdgpu_info", "query", query: u32),
        fld!(drm_amdgpu_info, "struct drm_amdgpu_info", "query_hw_ip.type", request.query_hw_ip.type_: u32),
        fld!(drm_amdgpu_info, "struct drm_amdgpu_info", "query_hw_ip.ip_instance", request.query_hw_ip.ip_instance: u32),
        fld!(drm_amdgpu_info, "struct drm_amdgpu_info", "read_mmr_reg.dword_offset", request.read_mmr_reg.dword_offset: u32),
        fld!(drm_amdgpu_info, "struct drm_amdgpu_info", "read_mmr_reg.count", request.read_mmr_reg.count: u32),
        fld!(drm_amdgpu_info, "struct drm_amdgpu_info", "read_mmr_reg.instance", request.read_mmr_reg.instance: u32),
        fld!(drm_amdgpu_info, "struct drm_amdgpu_info", "read_mmr_reg.flags", request.read_mmr_reg.flags: u32),
        fld!(drm_amdgpu_info, "struct drm_amdgpu_info", "query_fw.fw_type", request.query_fw.fw_type: u32),
        fld!(drm_amdgpu_info, "struct drm_amdgpu_info", "query_fw.index", request.query_fw.index: u32),
        ty!(drm_amdgpu_info_firmware, "struct drm_amdgpu_info_firmware"),
        fld!(drm_amdgpu_info_firmware, "struct drm_amdgpu_info_firmware", "ver", ver: u32),
        fld!(drm_amdgpu_info_firmware, "struct drm_amdgpu_info_firmware", "feature", feature: u32),
        ty!(drm_amdgpu_heap_info, "struct drm_amdgpu_heap_info"),
        fld!(drm_amdgpu_heap_info, "struct drm_amdgpu_heap_info", "total_heap_size", total_heap_size: u64),
        fld!(drm_amdgpu_heap_info, "struct drm_amdgpu_heap_info", "usable_heap_size", usable_heap_size: u64),
        fld!(drm_amdgpu_heap_info, "struct drm_amdgpu_heap_info", "heap_usage", heap_usage: u64),
        fld!(drm_amdgpu_heap_info, "struct drm_amdgpu_heap_info", "max_allocation", max_allocation: u64),
        ty!(drm_amdgpu_memory_info, "struct drm_amdgpu_memory_info"),
        fld!(drm_amdgpu_memory_info, "struct drm_amdgpu_memory_info", "vram", vram: drm_amdgpu_heap_info),
        fld!(drm_amdgpu_memory_info, "struct drm_amdgpu_memory_info", "cpu_accessible_vram", cpu_accessible_vram: drm_amdgpu_heap_info),
        fld!(drm_amdgpu_memory_info, "struct drm_amdgpu_memory_info", "gtt", gtt: drm_amdgpu_heap_info),
        ty!(drm_amdgpu_info_hw_ip, "struct drm_amdgpu_info_hw_ip"),
        fld!(drm_amdgpu_info_hw_ip, "struct drm_amdgpu_info_hw_ip", "hw_ip_version_major", hw_ip_version_major: u32),
        fld!(drm_amdgpu_info_hw_ip, "struct drm_amdgpu_info_hw_ip", "hw_ip_version_minor", hw_ip_version_minor: u32),
        fld!(drm_amdgpu_info_hw_ip, "struct drm_amdgpu_info_hw_ip", "capabilities_flags", capabilities_flags: u64),
        fld!(drm_amdgpu_info_hw_ip, "struct drm_amdgpu_info_hw_ip", "ib_start_alignment", ib_start_alignment: u32),
        fld!(drm_amdgpu_info_hw_ip, "struct drm_amdgpu_info_hw_ip", "ib_size_alignment", ib_size_alignment: u32),
        fld!(drm_amdgpu_info_hw_ip, "struct drm_amdgpu_info_hw_ip", "available_rings", available_rings: u32),
        fld!(drm_amdgpu_info_hw_ip, "struct drm_amdgpu_info_hw_ip", "ip_discovery_version", ip_discovery_version: u32),
        fld!(drm_amdgpu_info_hw_ip, "struct drm_amdgpu_info_hw_ip", "userq_num_slots", userq_num_slots: u32),
        ty!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device"),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "device_id", device_id: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "chip_rev", chip_rev: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "external_rev", external_rev: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "pci_rev", pci_rev: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "family", family: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "num_shader_engines", num_shader_engines: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "num_shader_arrays_per_engine", num_shader_arrays_per_engine: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "gpu_counter_freq", gpu_counter_freq: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "max_engine_clock", max_engine_clock: u64),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "max_memory_clock", max_memory_clock: u64),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "cu_active_number", cu_active_number: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "cu_ao_mask", cu_ao_mask: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "cu_bitmap", cu_bitmap: [[u32; 4]; 4]),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "enabled_rb_pipes_mask", enabled_rb_pipes_mask: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "num_rb_pipes", num_rb_pipes: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "num_hw_gfx_contexts", num_hw_gfx_contexts: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "pcie_gen", pcie_gen: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "ids_flags", ids_flags: u64),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "virtual_address_offset", virtual_address_offset: u64),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "virtual_address_max", virtual_address_max: u64),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "virtual_address_alignment", virtual_address_alignment: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "pte_fragment_size", pte_fragment_size: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "gart_page_size", gart_page_size: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "ce_ram_size", ce_ram_size: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "vram_type", vram_type: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "vram_bit_width", vram_bit_width: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "vce_harvest_config", vce_harvest_config: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "gc_double_offchip_lds_buf", gc_double_offchip_lds_buf: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "prim_buf_gpu_addr", prim_buf_gpu_addr: u64),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "pos_buf_gpu_addr", pos_buf_gpu_addr: u64),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "cntl_sb_buf_gpu_addr", cntl_sb_buf_gpu_addr: u64),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "param_buf_gpu_addr", param_buf_gpu_addr: u64),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "prim_buf_size", prim_buf_size: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "pos_buf_size", pos_buf_size: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "cntl_sb_buf_size", cntl_sb_buf_size: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "param_buf_size", param_buf_size: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "wave_front_size", wave_front_size: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "num_shader_visible_vgprs", num_shader_visible_vgprs: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "num_cu_per_sh", num_cu_per_sh: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "num_tcc_blocks", num_tcc_blocks: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "gs_vgt_table_depth", gs_vgt_table_depth: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "gs_prim_buffer_depth", gs_prim_buffer_depth: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "max_gs_waves_per_vgt", max_gs_waves_per_vgt: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "pcie_num_lanes", pcie_num_lanes: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "cu_ao_bitmap", cu_ao_bitmap: [[u32; 4]; 4]),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "high_va_offset", high_va_offset: u64),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "high_va_max", high_va_max: u64),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "pa_sc_tile_steering_override", pa_sc_tile_steering_override: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "tcc_disabled_mask", tcc_disabled_mask: u64),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "min_engine_clock", min_engine_clock: u64),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "min_memory_clock", min_memory_clock: u64),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "tcp_cache_size", tcp_cache_size: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "num_sqc_per_wgp", num_sqc_per_wgp: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "sqc_data_cache_size", sqc_data_cache_size: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "sqc_inst_cache_size", sqc_inst_cache_size: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "gl1c_cache_size", gl1c_cache_size: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "gl2c_cache_size", gl2c_cache_size: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "mall_size", mall_size: u64),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "enabled_rb_pipes_mask_hi", enabled_rb_pipes_mask_hi: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "shadow_size", shadow_size: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "shadow_alignment", shadow_alignment: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "csa_size", csa_size: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "csa_alignment", csa_alignment: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "userq_ip_mask", userq_ip_mask: u32),
        fld!(drm_amdgpu_info_device, "struct drm_amdgpu_info_device", "pad", pad: u32),
    ]
}

/// Every ioctl request number above, named as the C headers name them.
pub fn ioctl_table() -> Vec<IoctlEntry> {
    vec![
        IoctlEntry { c_name: "DRM_IOCTL_AMDGPU_GEM_CREATE", value: DRM_IOCTL_AMDGPU_GEM_CREATE },
        IoctlEntry { c_name: "DRM_IOCTL_AMDGPU_GEM_MMAP", value: DRM_IOCTL_AMDGPU_GEM_MMAP },
        IoctlEntry { c_name: "DRM_IOCTL_AMDGPU_CTX", value: DRM_IOCTL_AMDGPU_CTX },
        IoctlEntry { c_name: "DRM_IOCTL_AMDGPU_BO_LIST", value: DRM_IOCTL_AMDGPU_BO_LIST },
        IoctlEntry { c_name: "DRM_IOCTL_AMDGPU_CS", value: DRM_IOCTL_AMDGPU_CS },
        IoctlEntry { c_name: "DRM_IOCTL_AMDGPU_INFO", value: DRM_IOCTL_AMDGPU_INFO },
        IoctlEntry { c_name: "DRM_IOCTL_AMDGPU_GEM_VA", value: DRM_IOCTL_AMDGPU_GEM_VA },
        IoctlEntry { c_name: "DRM_IOCTL_AMDGPU_WAIT_CS", value: DRM_IOCTL_AMDGPU_WAIT_CS },
        IoctlEntry { c_name: "DRM_IOCTL_GEM_CLOSE", value: DRM_IOCTL_GEM_CLOSE },
    ]
}

/// Every constant above whose C name the layout test can check against the header.
pub fn constant_table() -> Vec<(&'static str, u64)> {
    vec![
        ("AMDGPU_GEM_DOMAIN_CPU", AMDGPU_GEM_DOMAIN_CPU),
        ("AMDGPU_GEM_DOMAIN_GTT", AMDGPU_GEM_DOMAIN_GTT),
        ("AMDGPU_GEM_DOMAIN_VRAM", AMDGPU_GEM_DOMAIN_VRAM),
        ("AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED", AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED),
        ("AMDGPU_GEM_CREATE_NO_CPU_ACCESS", AMDGPU_GEM_CREATE_NO_CPU_ACCESS),
        ("AMDGPU_GEM_CREATE_CPU_GTT_USWC", AMDGPU_GEM_CREATE_CPU_GTT_USWC),
        ("AMDGPU_GEM_CREATE_VRAM_CLEARED", AMDGPU_GEM_CREATE_VRAM_CLEARED),
        ("AMDGPU_GEM_CREATE_VM_ALWAYS_VALID", AMDGPU_GEM_CREATE_VM_ALWAYS_VALID),
        ("AMDGPU_GEM_CREATE_EXPLICIT_SYNC", AMDGPU_GEM_CREATE_EXPLICIT_SYNC),
        ("AMDGPU_BO_LIST_OP_CREATE", AMDGPU_BO_LIST_OP_CREATE as u64),
        ("AMDGPU_BO_LIST_OP_DESTROY", AMDGPU_BO_LIST_OP_DESTROY as u64),
        ("AMDGPU_BO_LIST_OP_UPDATE", AMDGPU_BO_LIST_OP_UPDATE as u64),
        ("AMDGPU_CTX_OP_ALLOC_CTX", AMDGPU_CTX_OP_ALLOC_CTX as u64),
        ("AMDGPU_CTX_OP_FREE_CTX", AMDGPU_CTX_OP_FREE_CTX as u64),
        ("AMDGPU_CTX_OP_QUERY_STATE", AMDGPU_CTX_OP_QUERY_STATE as u64),
        ("AMDGPU_CTX_OP_QUERY_STATE2", AMDGPU_CTX_OP_QUERY_STATE2 as u64),
        ("AMDGPU_CTX_NO_RESET", AMDGPU_CTX_NO_RESET as u64),
        ("AMDGPU_CTX_GUILTY_RESET", AMDGPU_CTX_GUILTY_RESET as u64),
        ("AMDGPU_CTX_INNOCENT_RESET", AMDGPU_CTX_INNOCENT_RESET as u64),
        ("AMDGPU_CTX_UNKNOWN_RESET", AMDGPU_CTX_UNKNOWN_RESET as u64),
        ("AMDGPU_CTX_QUERY2_FLAGS_RESET", AMDGPU_CTX_QUERY2_FLAGS_RESET),
        ("AMDGPU_CTX_QUERY2_FLAGS_VRAMLOST", AMDGPU_CTX_QUERY2_FLAGS_VRAMLOST),
        ("AMDGPU_CTX_QUERY2_FLAGS_GUILTY", AMDGPU_CTX_QUERY2_FLAGS_GUILTY),
        ("AMDGPU_CTX_QUERY2_FLAGS_RAS_CE", AMDGPU_CTX_QUERY2_FLAGS_RAS_CE),
        ("AMDGPU_CTX_QUERY2_FLAGS_RAS_UE", AMDGPU_CTX_QUERY2_FLAGS_RAS_UE),
        ("AMDGPU_CTX_PRIORITY_NORMAL", AMDGPU_CTX_PRIORITY_NORMAL as u64),
        ("AMDGPU_VA_OP_MAP", AMDGPU_VA_OP_MAP as u64),
        ("AMDGPU_VA_OP_UNMAP", AMDGPU_VA_OP_UNMAP as u64),
        ("AMDGPU_VA_OP_CLEAR", AMDGPU_VA_OP_CLEAR as u64),
        ("AMDGPU_VA_OP_REPLACE", AMDGPU_VA_OP_REPLACE as u64),
        ("AMDGPU_VM_DELAY_UPDATE", AMDGPU_VM_DELAY_UPDATE as u64),
        ("AMDGPU_VM_PAGE_READABLE", AMDGPU_VM_PAGE_READABLE as u64),
        ("AMDGPU_VM_PAGE_WRITEABLE", AMDGPU_VM_PAGE_WRITEABLE as u64),
        ("AMDGPU_VM_PAGE_EXECUTABLE", AMDGPU_VM_PAGE_EXECUTABLE as u64),
        ("AMDGPU_VM_PAGE_PRT", AMDGPU_VM_PAGE_PRT as u64),
        ("AMDGPU_VM_MTYPE_MASK", AMDGPU_VM_MTYPE_MASK as u64),
        ("AMDGPU_VM_MTYPE_DEFAULT", AMDGPU_VM_MTYPE_DEFAULT as u64),
        ("AMDGPU_VM_MTYPE_UC", AMDGPU_VM_MTYPE_UC as u64),
        ("AMDGPU_HW_IP_GFX", AMDGPU_HW_IP_GFX as u64),
        ("AMDGPU_HW_IP_COMPUTE", AMDGPU_HW_IP_COMPUTE as u64),
        ("AMDGPU_HW_IP_DMA", AMDGPU_HW_IP_DMA as u64),
        ("AMDGPU_CHUNK_ID_IB", AMDGPU_CHUNK_ID_IB as u64),
        ("AMDGPU_CHUNK_ID_FENCE", AMDGPU_CHUNK_ID_FENCE as u64),
        ("AMDGPU_CHUNK_ID_DEPENDENCIES", AMDGPU_CHUNK_ID_DEPENDENCIES as u64),
        ("AMDGPU_CHUNK_ID_SYNCOBJ_IN", AMDGPU_CHUNK_ID_SYNCOBJ_IN as u64),
        ("AMDGPU_CHUNK_ID_SYNCOBJ_OUT", AMDGPU_CHUNK_ID_SYNCOBJ_OUT as u64),
        ("AMDGPU_CHUNK_ID_BO_HANDLES", AMDGPU_CHUNK_ID_BO_HANDLES as u64),
        ("AMDGPU_IB_FLAG_CE", AMDGPU_IB_FLAG_CE as u64),
        ("AMDGPU_IB_FLAG_PREAMBLE", AMDGPU_IB_FLAG_PREAMBLE as u64),
        ("AMDGPU_IB_FLAG_PREEMPT", AMDGPU_IB_FLAG_PREEMPT as u64),
        ("AMDGPU_IB_FLAG_TC_WB_NOT_INVALIDATE", AMDGPU_IB_FLAG_TC_WB_NOT_INVALIDATE as u64),
        ("AMDGPU_IB_FLAG_EMIT_MEM_SYNC", AMDGPU_IB_FLAG_EMIT_MEM_SYNC as u64),
        ("AMDGPU_INFO_ACCEL_WORKING", AMDGPU_INFO_ACCEL_WORKING as u64),
        ("AMDGPU_INFO_HW_IP_INFO", AMDGPU_INFO_HW_IP_INFO as u64),
        ("AMDGPU_INFO_HW_IP_COUNT", AMDGPU_INFO_HW_IP_COUNT as u64),
        ("AMDGPU_INFO_TIMESTAMP", AMDGPU_INFO_TIMESTAMP as u64),
        ("AMDGPU_INFO_FW_VERSION", AMDGPU_INFO_FW_VERSION as u64),
        ("AMDGPU_INFO_VRAM_GTT", AMDGPU_INFO_VRAM_GTT as u64),
        ("AMDGPU_INFO_READ_MMR_REG", AMDGPU_INFO_READ_MMR_REG as u64),
        ("AMDGPU_INFO_DEV_INFO", AMDGPU_INFO_DEV_INFO as u64),
        ("AMDGPU_INFO_MEMORY", AMDGPU_INFO_MEMORY as u64),
        ("AMDGPU_INFO_VRAM_LOST_COUNTER", AMDGPU_INFO_VRAM_LOST_COUNTER as u64),
        ("AMDGPU_INFO_FW_GFX_ME", AMDGPU_INFO_FW_GFX_ME as u64),
        ("AMDGPU_INFO_FW_GFX_PFP", AMDGPU_INFO_FW_GFX_PFP as u64),
        ("AMDGPU_INFO_FW_GFX_MEC", AMDGPU_INFO_FW_GFX_MEC as u64),
        ("AMDGPU_IDS_FLAGS_FUSION", AMDGPU_IDS_FLAGS_FUSION),
        ("AMDGPU_IDS_FLAGS_PREEMPTION", AMDGPU_IDS_FLAGS_PREEMPTION),
        ("AMDGPU_IDS_FLAGS_TMZ", AMDGPU_IDS_FLAGS_TMZ),
        ("AMDGPU_FAMILY_UNKNOWN", AMDGPU_FAMILY_UNKNOWN as u64),
        ("AMDGPU_FAMILY_SI", AMDGPU_FAMILY_SI as u64),
        ("AMDGPU_FAMILY_CI", AMDGPU_FAMILY_CI as u64),
        ("AMDGPU_FAMILY_KV", AMDGPU_FAMILY_KV as u64),
        ("AMDGPU_FAMILY_VI", AMDGPU_FAMILY_VI as u64),
        ("AMDGPU_FAMILY_CZ", AMDGPU_FAMILY_CZ as u64),
        ("AMDGPU_FAMILY_AI", AMDGPU_FAMILY_AI as u64),
        ("AMDGPU_FAMILY_RV", AMDGPU_FAMILY_RV as u64),
        ("AMDGPU_FAMILY_NV", AMDGPU_FAMILY_NV as u64),
        ("AMDGPU_FAMILY_VGH", AMDGPU_FAMILY_VGH as u64),
        ("AMDGPU_FAMILY_GC_11_0_0", AMDGPU_FAMILY_GC_11_0_0 as u64),
        ("AMDGPU_FAMILY_YC", AMDGPU_FAMILY_YC as u64),
        ("AMDGPU_FAMILY_GC_11_0_1", AMDGPU_FAMILY_GC_11_0_1 as u64),
        ("AMDGPU_FAMILY_GC_10_3_6", AMDGPU_FAMILY_GC_10_3_6 as u64),
        ("AMDGPU_FAMILY_GC_11_5_0", AMDGPU_FAMILY_GC_11_5_0 as u64),
        ("AMDGPU_FAMILY_GC_10_3_7", AMDGPU_FAMILY_GC_10_3_7 as u64),
        ("AMDGPU_FAMILY_GC_12_0_0", AMDGPU_FAMILY_GC_12_0_0 as u64),
        ("AMDGPU_CTX_QUERY2_FLAGS_RESET_IN_PROGRESS", AMDGPU_CTX_QUERY2_FLAGS_RESET_IN_PROGRESS),
    ]
}
