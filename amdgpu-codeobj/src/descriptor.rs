//! The 64-byte AMDHSA kernel descriptor (`<kernel>.kd`): segment sizes, the entry offset, the
//! COMPUTE_PGM_RSRC1/2/3 values to program as they are, and which user SGPRs the kernel expects,
//! in the hardware's order.

use sparkle_amdgpu_kmd::error::{AmdgpuError, Result};

/// Size of a kernel descriptor.
pub const KERNEL_DESCRIPTOR_SIZE: usize = 64;

// kernel_code_properties bits (AMDGPUUsage, "Kernel Descriptor").
const PROP_PRIVATE_SEGMENT_BUFFER: u16 = 1 << 0;
const PROP_DISPATCH_PTR: u16 = 1 << 1;
const PROP_QUEUE_PTR: u16 = 1 << 2;
const PROP_KERNARG_SEGMENT_PTR: u16 = 1 << 3;
const PROP_DISPATCH_ID: u16 = 1 << 4;
const PROP_FLAT_SCRATCH_INIT: u16 = 1 << 5;
const PROP_PRIVATE_SEGMENT_SIZE: u16 = 1 << 6;
const PROP_WAVEFRONT_SIZE32: u16 = 1 << 10;
const PROP_USES_DYNAMIC_STACK: u16 = 1 << 11;

/// A parsed kernel descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelDescriptor {
    /// LDS bytes the kernel allocates statically.
    pub group_segment_fixed_size: u32,
    /// Scratch bytes per work-item the kernel needs statically.
    pub private_segment_fixed_size: u32,
    /// Size of the kernarg segment in bytes.
    pub kernarg_size: u32,
    /// Entry point relative to the descriptor's own address.
    pub kernel_code_entry_byte_offset: i64,
    /// `COMPUTE_PGM_RSRC3` (gfx10+: shared VGPR count, instruction prefetch).
    pub compute_pgm_rsrc3: u32,
    /// `COMPUTE_PGM_RSRC1`: register counts, float modes, WGP/CU mode.
    pub compute_pgm_rsrc1: u32,
    /// `COMPUTE_PGM_RSRC2`: user SGPR count, work-item and workgroup id enables, LDS size.
    pub compute_pgm_rsrc2: u32,
    /// `kernel_code_properties`: which user SGPRs to set up, wave size, dynamic stack.
    pub kernel_code_properties: u16,
    /// Code object v5+: kernarg preloading into SGPRs (length in bits 6:0, offset 15:7).
    pub kernarg_preload: u16,
}

/// One block of user SGPRs the kernel expects at dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserSgpr {
    /// 4 SGPRs: the scratch buffer resource descriptor.
    PrivateSegmentBuffer,
    /// 2 SGPRs: address of the `hsa_kernel_dispatch_packet_t`.
    DispatchPtr,
    /// 2 SGPRs: address of the AQL queue (never provided: refused before this point).
    QueuePtr,
    /// 2 SGPRs: address of the kernarg segment.
    KernargSegmentPtr,
    /// 2 SGPRs: a 64-bit dispatch id.
    DispatchId,
    /// 2 SGPRs: flat scratch base and size.
    FlatScratchInit,
    /// 1 SGPR: private segment size per work-item.
    PrivateSegmentSize,
}

impl UserSgpr {
    /// Number of SGPRs the block takes.
    pub fn count(self) -> u32 {
        match self {
            Self::PrivateSegmentBuffer => 4,
            Self::PrivateSegmentSize => 1,
            _ => 2,
        }
    }
}

fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes([bytes[offset], bytes[offset + 1], bytes[offset + 2], bytes[offset + 3]])
}

impl KernelDescriptor {
    /// Parses the 64 bytes of a descriptor.
    pub fn parse(kernel: &str, bytes: &[u8]) -> Result<Self> {
        if bytes.len() < KERNEL_DESCRIPTOR_SIZE {
            return Err(AmdgpuError::invalid_kernel(
                kernel,
                format!("kernel descriptor is {} bytes, expected {KERNEL_DESCRIPTOR_SIZE}", bytes.len()),
            ));
        }
        let mut entry = [0u8; 8];
        entry.copy_from_slice(&bytes[16..24]);
        Ok(Self {
            group_segment_fixed_size: u32_at(bytes, 0),
            private_segment_fixed_size: u32_at(bytes, 4),
            kernarg_size: u32_at(bytes, 8),
            kernel_code_entry_byte_offset: i64::from_le_bytes(entry),
            compute_pgm_rsrc3: u32_at(bytes, 44),
            compute_pgm_rsrc1: u32_at(bytes, 48),
            compute_pgm_rsrc2: u32_at(bytes, 52),
            kernel_code_properties: u16::from_le_bytes([bytes[56], bytes[57]]),
            kernarg_preload: u16::from_le_bytes([bytes[58], bytes[59]]),
        })
    }

    fn has(&self, bit: u16) -> bool {
        self.kernel_code_properties & bit != 0
    }

    /// 32 or 64.
    pub fn wave_size(&self) -> u32 {
        if self.has(PROP_WAVEFRONT_SIZE32) {
            32
        } else {
            64
        }
    }

    /// Whether the kernel asks for the queue pointer (the backend provides a queue descriptor
    /// only to code it built at -O0, see `RunLimits::unoptimized_inputs`).
    pub fn uses_queue_ptr(&self) -> bool {
        self.has(PROP_QUEUE_PTR)
    }

    /// Whether the kernel reads the dispatch packet pointer.
    pub fn uses_dispatch_ptr(&self) -> bool {
        self.has(PROP_DISPATCH_PTR)
    }

    /// Whether the kernel's stack size is only known at run time (recursion, indirect calls).
    pub fn uses_dynamic_stack(&self) -> bool {
        self.has(PROP_USES_DYNAMIC_STACK)
    }

    /// Whether waves need scratch memory: a fixed private segment or scratch enabled in RSRC2.
    pub fn uses_scratch(&self) -> bool {
        self.private_segment_fixed_size > 0
            || self.compute_pgm_rsrc2 & 1 != 0
            || self.has(PROP_FLAT_SCRATCH_INIT)
    }

    /// RSRC2.USER_SGPR_COUNT: SGPRs the hardware loads from USER_DATA_* (may exceed the sum of
    /// [`user_sgprs`](Self::user_sgprs): gfx11 code objects pad it).
    pub fn user_sgpr_count(&self) -> u32 {
        (self.compute_pgm_rsrc2 >> 1) & 0x1f
    }

    /// RSRC2.TGID_{X,Y,Z}_EN.
    pub fn workgroup_id_enabled(&self) -> [bool; 3] {
        [7, 8, 9].map(|bit| self.compute_pgm_rsrc2 & (1 << bit) != 0)
    }

    /// RSRC2.TIDIG_COMP_CNT: 0 = x only, 1 = x and y, 2 = x, y and z work-item ids in VGPRs.
    pub fn workitem_id_vgprs(&self) -> u32 {
        (self.compute_pgm_rsrc2 >> 11) & 0x3
    }

    /// The user SGPR blocks the kernel expects, in the order they occupy s0, s1, ….
    pub fn user_sgprs(&self) -> Vec<UserSgpr> {
        [
            (PROP_PRIVATE_SEGMENT_BUFFER, UserSgpr::PrivateSegmentBuffer),
            (PROP_DISPATCH_PTR, UserSgpr::DispatchPtr),
            (PROP_QUEUE_PTR, UserSgpr::QueuePtr),
            (PROP_KERNARG_SEGMENT_PTR, UserSgpr::KernargSegmentPtr),
            (PROP_DISPATCH_ID, UserSgpr::DispatchId),
            (PROP_FLAT_SCRATCH_INIT, UserSgpr::FlatScratchInit),
            (PROP_PRIVATE_SEGMENT_SIZE, UserSgpr::PrivateSegmentSize),
        ]
        .into_iter()
        .filter(|(bit, _)| self.has(*bit))
        .map(|(_, sgpr)| sgpr)
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn descriptor(properties: u16, rsrc2: u32) -> [u8; 64] {
        let mut bytes = [0u8; 64];
        bytes[0..4].copy_from_slice(&2048u32.to_le_bytes());
        bytes[8..12].copy_from_slice(&280u32.to_le_bytes());
        bytes[16..24].copy_from_slice(&4096i64.to_le_bytes());
        bytes[44..48].copy_from_slice(&0x20u32.to_le_bytes());
        bytes[48..52].copy_from_slice(&0xe0af_0000u32.to_le_bytes());
        bytes[52..56].copy_from_slice(&rsrc2.to_le_bytes());
        bytes[56..58].copy_from_slice(&properties.to_le_bytes());
        bytes
    }

    #[test]
    fn fields_come_from_their_offsets() {
        let kd = KernelDescriptor::parse("k", &descriptor(0x0408, 0x9e)).unwrap();
        assert_eq!(kd.group_segment_fixed_size, 2048);
        assert_eq!(kd.kernarg_size, 280);
        assert_eq!(kd.kernel_code_entry_byte_offset, 4096);
        assert_eq!(kd.compute_pgm_rsrc1, 0xe0af_0000);
        assert_eq!(kd.compute_pgm_rsrc2, 0x9e);
        assert_eq!(kd.compute_pgm_rsrc3, 0x20);
        assert_eq!(kd.wave_size(), 32);
        assert_eq!(kd.user_sgprs(), vec![UserSgpr::KernargSegmentPtr]);
        assert_eq!(kd.user_sgpr_count(), 15);
        assert_eq!(kd.workgroup_id_enabled(), [true, false, false]);
        assert!(!kd.uses_scratch());
    }

    #[test]
    fn user_sgprs_follow_the_hardware_order() {
        let kd = KernelDescriptor::parse("k", &descriptor(0x0001 | 0x0002 | 0x0008, 0)).unwrap();
        assert_eq!(
            kd.user_sgprs(),
            vec![UserSgpr::PrivateSegmentBuffer, UserSgpr::DispatchPtr, UserSgpr::KernargSegmentPtr]
        );
        assert_eq!(kd.user_sgprs().iter().map(|s| s.count()).sum::<u32>(), 8);
        assert_eq!(kd.wave_size(), 64);
    }

    #[test]
    fn short_descriptor_is_refused() {
        let err = KernelDescriptor::parse("saxpy", &[0u8; 40]).unwrap_err();
        assert!(err.to_string().contains("saxpy"));
    }
}
