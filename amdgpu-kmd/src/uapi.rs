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

pub const DRM_AMDGPU_GEM_CREATE: u64 = 0x00;
pub const DRM_AMDGPU_GEM_MMAP: u64 = 0x01;
pub const DRM_AMDGPU_CTX: u64 = 0x02;
pub const DRM_AMDGPU_BO_LIST: u64 = 0x03;
pub const DRM_AMDGPU_CS: u64 = 0x04;
pub const DRM_AMDGPU_INFO: u64 = 0x05;
pub const DRM_AMDGPU_GEM_VA: u64 = 0x08;
pub const DRM_AMDGPU_WAIT_CS: u64 = 0x09;

pub const DRM_IOCTL_AMDGPU_GEM_CREATE: u64 =
    drm_iowr(DRM_COMMAND_BASE + DRM_AMDGPU_GEM_CREATE, size_of::<drm_amdgpu_gem_create>());
pub const DRM_IOCTL_AMDGPU_GEM_MMAP: u64 =
    drm_iowr(DRM_COMMAND_BASE + DRM_AMDGPU_GEM_MMAP, size_of::<drm_amdgpu_gem_mmap>());
pub const DRM_IOCTL_AMDGPU_CTX: u64 =
    drm_iowr(DRM_COMMAND_BASE + DRM_AMDGPU_CTX, size_of::<drm_amdgpu_ctx>());
pub const DRM_IOCTL_AMDGPU_BO_LIST: u64 =
    drm_iowr(DRM_COMMAND_BASE + DRM_AMDGPU_BO_LIST, size_of::<drm_amdgpu_bo_list>());
pub const DRM_IOCTL_AMDGPU_CS: u64 = drm_iowr(DRM_COMMAND_BASE + DRM_AMDGPU_CS, size_of::<drm_amdgpu_cs>());
pub const DRM_IOCTL_AMDGPU_INFO: u64 =
    drm_iow(DRM_COMMAND_BASE + DRM_AMDGPU_INFO, size_of::<drm_amdgpu_info>());
/// With the 64-byte struct of current kernels; older kernels read the 40-byte prefix they know.
pub const DRM_IOCTL_AMDGPU_GEM_VA: u64 =
    drm_iow(DRM_COMMAND_BASE + DRM_AMDGPU_GEM_VA, size_of::<drm_amdgpu_gem_va>());
pub const DRM_IOCTL_AMDGPU_WAIT_CS: u64 =
    drm_iowr(DRM_COMMAND_BASE + DRM_AMDGPU_WAIT_CS, size_of::<drm_amdgpu_wait_cs>());

/// Generic DRM: `DRM_IOCTL_GEM_CLOSE` (`drm.h`, nr 0x09).
pub const DRM_IOCTL_GEM_CLOSE: u64 = drm_iow(0x09, size_of::<drm_gem_close>());

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

pub const AMDGPU_GEM_DOMAIN_CPU: u64 = 0x1;
pub const AMDGPU_GEM_DOMAIN_GTT: u64 = 0x2;
pub const AMDGPU_GEM_DOMAIN_VRAM: u64 = 0x4;

pub const AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED: u64 = 1 << 0;
pub const AMDGPU_GEM_CREATE_NO_CPU_ACCESS: u64 = 1 << 1;
pub const AMDGPU_GEM_CREATE_CPU_GTT_USWC: u64 = 1 << 2;
pub const AMDGPU_GEM_CREATE_VRAM_CLEARED: u64 = 1 << 3;
pub const AMDGPU_GEM_CREATE_VM_ALWAYS_VALID: u64 = 1 << 6;
pub const AMDGPU_GEM_CREATE_EXPLICIT_SYNC: u64 = 1 << 7;

pub const AMDGPU_BO_LIST_OP_CREATE: u32 = 0;
pub const AMDGPU_BO_LIST_OP_DESTROY: u32 = 1;
pub const AMDGPU_BO_LIST_OP_UPDATE: u32 = 2;

pub const AMDGPU_CTX_OP_ALLOC_CTX: u32 = 1;
pub const AMDGPU_CTX_OP_FREE_CTX: u32 = 2;
pub const AMDGPU_CTX_OP_QUERY_STATE: u32 = 3;
pub const AMDGPU_CTX_OP_QUERY_STATE2: u32 = 4;

pub const AMDGPU_CTX_NO_RESET: u32 = 0;
pub const AMDGPU_CTX_GUILTY_RESET: u32 = 1;
pub const AMDGPU_CTX_INNOCENT_RESET: u32 = 2;
pub const AMDGPU_CTX_UNKNOWN_RESET: u32 = 3;

pub const AMDGPU_CTX_QUERY2_FLAGS_RESET: u64 = 1 << 0;
pub const AMDGPU_CTX_QUERY2_FLAGS_VRAMLOST: u64 = 1 << 1;
pub const AMDGPU_CTX_QUERY2_FLAGS_GUILTY: u64 = 1 << 2;
pub const AMDGPU_CTX_QUERY2_FLAGS_RAS_CE: u64 = 1 << 3;
pub const AMDGPU_CTX_QUERY2_FLAGS_RAS_UE: u64 = 1 << 4;
/// Newer than libdrm 2.4.114's header.
pub const AMDGPU_CTX_QUERY2_FLAGS_RESET_IN_PROGRESS: u64 = 1 << 5;

pub const AMDGPU_CTX_PRIORITY_NORMAL: i32 = 0;

pub const AMDGPU_VA_OP_MAP: u32 = 1;
pub const AMDGPU_VA_OP_UNMAP: u32 = 2;
pub const AMDGPU_VA_OP_CLEAR: u32 = 3;
pub const AMDGPU_VA_OP_REPLACE: u32 = 4;

pub const AMDGPU_VM_DELAY_UPDATE: u32 = 1 << 0;
pub const AMDGPU_VM_PAGE_READABLE: u32 = 1 << 1;
pub const AMDGPU_VM_PAGE_WRITEABLE: u32 = 1 << 2;
pub const AMDGPU_VM_PAGE_EXECUTABLE: u32 = 1 << 3;
pub const AMDGPU_VM_PAGE_PRT: u32 = 1 << 4;
pub const AMDGPU_VM_MTYPE_MASK: u32 = 0xf << 5;
pub const AMDGPU_VM_MTYPE_DEFAULT: u32 = 0;
pub const AMDGPU_VM_MTYPE_UC: u32 = 4 << 5;

pub const AMDGPU_HW_IP_GFX: u32 = 0;
pub const AMDGPU_HW_IP_COMPUTE: u32 = 1;
pub const AMDGPU_HW_IP_DMA: u32 = 2;

pub const AMDGPU_CHUNK_ID_IB: u32 = 0x01;
pub const AMDGPU_CHUNK_ID_FENCE: u32 = 0x02;
pub const AMDGPU_CHUNK_ID_DEPENDENCIES: u32 = 0x03;
pub const AMDGPU_CHUNK_ID_SYNCOBJ_IN: u32 = 0x04;
pub const AMDGPU_CHUNK_ID_SYNCOBJ_OUT: u32 = 0x05;
pub const AMDGPU_CHUNK_ID_BO_HANDLES: u32 = 0x06;

pub const AMDGPU_IB_FLAG_CE: u32 = 1 << 0;
pub const AMDGPU_IB_FLAG_PREAMBLE: u32 = 1 << 1;
pub const AMDGPU_IB_FLAG_PREEMPT: u32 = 1 << 2;
pub const AMDGPU_IB_FLAG_TC_WB_NOT_INVALIDATE: u32 = 1 << 3;
pub const AMDGPU_IB_FLAG_EMIT_MEM_SYNC: u32 = 1 << 6;

pub const AMDGPU_INFO_ACCEL_WORKING: u32 = 0x00;
pub const AMDGPU_INFO_HW_IP_INFO: u32 = 0x02;
pub const AMDGPU_INFO_HW_IP_COUNT: u32 = 0x03;
pub const AMDGPU_INFO_TIMESTAMP: u32 = 0x05;
pub const AMDGPU_INFO_FW_VERSION: u32 = 0x0e;
pub const AMDGPU_INFO_VRAM_GTT: u32 = 0x14;
pub const AMDGPU_INFO_READ_MMR_REG: u32 = 0x15;
pub const AMDGPU_INFO_DEV_INFO: u32 = 0x16;
pub const AMDGPU_INFO_MEMORY: u32 = 0x19;
pub const AMDGPU_INFO_VRAM_LOST_COUNTER: u32 = 0x1F;

pub const AMDGPU_INFO_FW_GFX_ME: u32 = 0x04;
pub const AMDGPU_INFO_FW_GFX_PFP: u32 = 0x05;
pub const AMDGPU_INFO_FW_GFX_MEC: u32 = 0x08;

pub const AMDGPU_IDS_FLAGS_FUSION: u64 = 0x1;
pub const AMDGPU_IDS_FLAGS_PREEMPTION: u64 = 0x2;
pub const AMDGPU_IDS_FLAGS_TMZ: u64 = 0x4;

pub const AMDGPU_FAMILY_UNKNOWN: u32 = 0;
pub const AMDGPU_FAMILY_SI: u32 = 110;
pub const AMDGPU_FAMILY_CI: u32 = 120;
pub const AMDGPU_FAMILY_KV: u32 = 125;
pub const AMDGPU_FAMILY_VI: u32 = 130;
pub const AMDGPU_FAMILY_CZ: u32 = 135;
pub const AMDGPU_FAMILY_AI: u32 = 141;
pub const AMDGPU_FAMILY_RV: u32 = 142;
pub const AMDGPU_FAMILY_NV: u32 = 143;
pub const AMDGPU_FAMILY_VGH: u32 = 144;
/// Newer than libdrm 2.4.114's header, like every family below.
pub const AMDGPU_FAMILY_GC_11_0_0: u32 = 145;
pub const AMDGPU_FAMILY_YC: u32 = 146;
pub const AMDGPU_FAMILY_GC_11_0_1: u32 = 148;
pub const AMDGPU_FAMILY_GC_10_3_6: u32 = 149;
pub const AMDGPU_FAMILY_GC_11_5_0: u32 = 150;
pub const AMDGPU_FAMILY_GC_10_3_7: u32 = 151;
pub const AMDGPU_FAMILY_GC_12_0_0: u32 = 152;

// ---------------------------------------------------------------------------------------------
// Structs
// ---------------------------------------------------------------------------------------------

/// `struct drm_gem_close` (drm.h).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_gem_close {
    pub handle: u32,
    pub pad: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_gem_create_in {
    pub bo_size: u64,
    pub alignment: u64,
    pub domains: u64,
    pub domain_flags: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_gem_create_out {
    pub handle: u32,
    pub _pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union drm_amdgpu_gem_create {
    pub in_: drm_amdgpu_gem_create_in,
    pub out: drm_amdgpu_gem_create_out,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_gem_mmap_in {
    pub handle: u32,
    pub _pad: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_gem_mmap_out {
    /// The offset to pass to `mmap` on the render node's fd.
    pub addr_ptr: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union drm_amdgpu_gem_mmap {
    pub in_: drm_amdgpu_gem_mmap_in,
    pub out: drm_amdgpu_gem_mmap_out,
}

/// `struct drm_amdgpu_gem_va` as current kernels define it (64 bytes); libdrm 2.4.114 stops after
/// `map_size` (40 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_gem_va {
    pub handle: u32,
    pub _pad: u32,
    pub operation: u32,
    pub flags: u32,
    pub va_address: u64,
    pub offset_in_bo: u64,
    pub map_size: u64,
    pub vm_timeline_point: u64,
    pub vm_timeline_syncobj_out: u32,
    pub num_syncobj_handles: u32,
    pub input_fence_syncobj_handles: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_bo_list_in {
    pub operation: u32,
    pub list_handle: u32,
    pub bo_number: u32,
    pub bo_info_size: u32,
    pub bo_info_ptr: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_bo_list_entry {
    pub bo_handle: u32,
    pub bo_priority: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_bo_list_out {
    pub list_handle: u32,
    pub _pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union drm_amdgpu_bo_list {
    pub in_: drm_amdgpu_bo_list_in,
    pub out: drm_amdgpu_bo_list_out,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_ctx_in {
    pub op: u32,
    pub flags: u32,
    pub ctx_id: u32,
    pub priority: i32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_ctx_out_alloc {
    pub ctx_id: u32,
    pub _pad: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_ctx_out_state {
    /// QUERY_STATE2: `AMDGPU_CTX_QUERY2_FLAGS_*`.
    pub flags: u64,
    pub hangs: u32,
    /// QUERY_STATE: `AMDGPU_CTX_*_RESET`.
    pub reset_status: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union drm_amdgpu_ctx_out {
    pub alloc: drm_amdgpu_ctx_out_alloc,
    pub state: drm_amdgpu_ctx_out_state,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union drm_amdgpu_ctx {
    pub in_: drm_amdgpu_ctx_in,
    pub out: drm_amdgpu_ctx_out,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_cs_chunk {
    pub chunk_id: u32,
    pub length_dw: u32,
    /// Address of the chunk's payload (a `drm_amdgpu_cs_chunk_ib`, an array of BO list entries, …).
    pub chunk_data: u64,
}

/// Payload of a `AMDGPU_CHUNK_ID_BO_HANDLES` chunk: the same struct as the BO_LIST ioctl's input.
pub type drm_amdgpu_bo_list_chunk = drm_amdgpu_bo_list_in;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_cs_in {
    pub ctx_id: u32,
    pub bo_list_handle: u32,
    pub num_chunks: u32,
    pub flags: u32,
    /// Address of an array of `num_chunks` u64 addresses, each pointing at a `drm_amdgpu_cs_chunk`.
    pub chunks: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_cs_out {
    /// The submission's sequence number on its ring.
    pub handle: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union drm_amdgpu_cs {
    pub in_: drm_amdgpu_cs_in,
    pub out: drm_amdgpu_cs_out,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_cs_chunk_ib {
    pub _pad: u32,
    pub flags: u32,
    pub va_start: u64,
    pub ib_bytes: u32,
    pub ip_type: u32,
    pub ip_instance: u32,
    pub ring: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_wait_cs_in {
    /// Sequence number from `drm_amdgpu_cs_out::handle`.
    pub handle: u64,
    /// Absolute CLOCK_MONOTONIC deadline in nanoseconds.
    pub timeout: u64,
    pub ip_type: u32,
    pub ip_instance: u32,
    pub ring: u32,
    pub ctx_id: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_wait_cs_out {
    /// 0: completed, 1: still busy at the deadline.
    pub status: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union drm_amdgpu_wait_cs {
    pub in_: drm_amdgpu_wait_cs_in,
    pub out: drm_amdgpu_wait_cs_out,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_query_fw {
    pub fw_type: u32,
    pub ip_instance: u32,
    pub index: u32,
    pub _pad: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_info_query_hw_ip {
    pub type_: u32,
    pub ip_instance: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_info_read_mmr_reg {
    pub dword_offset: u32,
    pub count: u32,
    pub instance: u32,
    pub flags: u32,
}

/// The anonymous union inside `struct drm_amdgpu_info`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union drm_amdgpu_info_request {
    pub query_hw_ip: drm_amdgpu_info_query_hw_ip,
    pub read_mmr_reg: drm_amdgpu_info_read_mmr_reg,
    pub query_fw: drm_amdgpu_query_fw,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct drm_amdgpu_info {
    /// Address the kernel writes the answer to.
    pub return_pointer: u64,
    /// Bytes the kernel may write there (it writes at most its own struct size).
    pub return_size: u32,
    pub query: u32,
    pub request: drm_amdgpu_info_request,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_info_firmware {
    pub ver: u32,
    pub feature: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_heap_info {
    pub total_heap_size: u64,
    pub usable_heap_size: u64,
    pub heap_usage: u64,
    pub max_allocation: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_memory_info {
    pub vram: drm_amdgpu_heap_info,
    pub cpu_accessible_vram: drm_amdgpu_heap_info,
    pub gtt: drm_amdgpu_heap_info,
}

/// `struct drm_amdgpu_info_device` as current kernels define it (448 bytes); libdrm 2.4.114's
/// header ends at `tcc_disabled_mask` (368 bytes) and calls `pcie_gen` / `pcie_num_lanes` `_pad` /
/// `_pad1`. Older kernels fill the prefix they know and leave the rest zero.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_info_device {
    pub device_id: u32,
    pub chip_rev: u32,
    pub external_rev: u32,
    pub pci_rev: u32,
    pub family: u32,
    pub num_shader_engines: u32,
    pub num_shader_arrays_per_engine: u32,
    pub gpu_counter_freq: u32,
    pub max_engine_clock: u64,
    pub max_memory_clock: u64,
    pub cu_active_number: u32,
    pub cu_ao_mask: u32,
    pub cu_bitmap: [[u32; 4]; 4],
    pub enabled_rb_pipes_mask: u32,
    pub num_rb_pipes: u32,
    pub num_hw_gfx_contexts: u32,
    pub pcie_gen: u32,
    pub ids_flags: u64,
    pub virtual_address_offset: u64,
    pub virtual_address_max: u64,
    pub virtual_address_alignment: u32,
    pub pte_fragment_size: u32,
    pub gart_page_size: u32,
    pub ce_ram_size: u32,
    pub vram_type: u32,
    pub vram_bit_width: u32,
    pub vce_harvest_config: u32,
    pub gc_double_offchip_lds_buf: u32,
    pub prim_buf_gpu_addr: u64,
    pub pos_buf_gpu_addr: u64,
    pub cntl_sb_buf_gpu_addr: u64,
    pub param_buf_gpu_addr: u64,
    pub prim_buf_size: u32,
    pub pos_buf_size: u32,
    pub cntl_sb_buf_size: u32,
    pub param_buf_size: u32,
    pub wave_front_size: u32,
    pub num_shader_visible_vgprs: u32,
    pub num_cu_per_sh: u32,
    pub num_tcc_blocks: u32,
    pub gs_vgt_table_depth: u32,
    pub gs_prim_buffer_depth: u32,
    pub max_gs_waves_per_vgt: u32,
    pub pcie_num_lanes: u32,
    pub cu_ao_bitmap: [[u32; 4]; 4],
    pub high_va_offset: u64,
    pub high_va_max: u64,
    pub pa_sc_tile_steering_override: u32,
    pub tcc_disabled_mask: u64,
    pub min_engine_clock: u64,
    pub min_memory_clock: u64,
    pub tcp_cache_size: u32,
    pub num_sqc_per_wgp: u32,
    pub sqc_data_cache_size: u32,
    pub sqc_inst_cache_size: u32,
    pub gl1c_cache_size: u32,
    pub gl2c_cache_size: u32,
    pub mall_size: u64,
    pub enabled_rb_pipes_mask_hi: u32,
    pub shadow_size: u32,
    pub shadow_alignment: u32,
    pub csa_size: u32,
    pub csa_alignment: u32,
    pub userq_ip_mask: u32,
    pub pad: u32,
}

/// `struct drm_amdgpu_info_hw_ip` as current kernels define it (40 bytes); libdrm 2.4.114 has
/// `_pad` where `ip_discovery_version` is and ends there (32 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct drm_amdgpu_info_hw_ip {
    pub hw_ip_version_major: u32,
    pub hw_ip_version_minor: u32,
    pub capabilities_flags: u64,
    pub ib_start_alignment: u32,
    pub ib_size_alignment: u32,
    pub available_rings: u32,
    /// GC version of the GFX/COMPUTE IP: major in bits 23:16, minor 15:8, revision 7:0; 0 where
    /// the kernel does not report it.
    pub ip_discovery_version: u32,
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
    pub c_name: &'static str,
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
