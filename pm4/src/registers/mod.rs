//! Compute register maps: register names, byte offsets and field layouts per generation.
//!
//! Offsets are byte addresses in the GPU's register aperture, the form packet builders subtract
//! the space base from. The common compute registers sit at the same offsets on gfx10.3 and gfx11;
//! the generation modules hold the tables, including the registers that exist on only one of them.

pub mod gfx10_3;
pub mod gfx11;

pub use crate::field::Field;
use crate::gfx::Gfx;

/// A named register and, where the backend sets it field by field, its layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Register {
    /// Register name.
    pub name: &'static str,
    /// Byte offset in the register aperture.
    pub offset: u32,
    /// Field layout; empty for registers that hold one plain value.
    pub fields: &'static [Field],
}

impl Register {
    pub(crate) const fn plain(name: &'static str, offset: u32) -> Register {
        Register { name, offset, fields: &[] }
    }

    pub(crate) const fn with_fields(name: &'static str, offset: u32, fields: &'static [Field]) -> Register {
        Register { name, offset, fields }
    }
}

/// A register space that a SET_*_REG packet addresses relative to its base.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Space {
    /// Persistent shader state, written with SET_SH_REG: bytes 0xB000..0xC000.
    Sh,
    /// User-config registers, written with SET_UCONFIG_REG: bytes 0x30000..0x40000.
    Uconfig,
}

impl Space {
    /// First byte offset of the space.
    pub const fn base(self) -> u32 {
        match self {
            Space::Sh => 0xB000,
            Space::Uconfig => 0x3_0000,
        }
    }

    /// One past the last byte offset of the space.
    pub const fn end(self) -> u32 {
        match self {
            Space::Sh => 0xC000,
            Space::Uconfig => 0x4_0000,
        }
    }

    /// Space name for messages.
    pub const fn name(self) -> &'static str {
        match self {
            Space::Sh => "SH",
            Space::Uconfig => "UCONFIG",
        }
    }

    /// Whether a run of `len` registers starting at byte offset `offset` lies inside the space.
    pub const fn contains_run(self, offset: u32, len: usize) -> bool {
        if offset % 4 != 0 || offset < self.base() || offset >= self.end() || len == 0 {
            return false;
        }
        let span = (self.end() - offset) as usize / 4;
        len <= span
    }
}

/// Every register this crate knows for a generation, sorted by byte offset.
pub fn table(gfx: Gfx) -> &'static [Register] {
    match gfx {
        Gfx::Gfx10_3 => gfx10_3::REGISTERS,
        Gfx::Gfx11 => gfx11::REGISTERS,
    }
}

/// Looks a register up by byte offset.
pub fn lookup(gfx: Gfx, offset: u32) -> Option<&'static Register> {
    let regs = table(gfx);
    regs.binary_search_by_key(&offset, |r| r.offset).ok().and_then(|i| regs.get(i))
}

/// Looks a register up by name.
pub fn by_name(gfx: Gfx, name: &str) -> Option<&'static Register> {
    table(gfx).iter().find(|r| r.name == name)
}

// Byte offsets of the compute registers shared by gfx10.3 and gfx11.

/// Starts a dispatch when written directly; DISPATCH_* packets carry its value.
pub const COMPUTE_DISPATCH_INITIATOR: u32 = 0xB800;
/// Grid size in threads (written by the CP on dispatch).
pub const COMPUTE_DIM_X: u32 = 0xB804;
/// Grid size in threads, Y.
pub const COMPUTE_DIM_Y: u32 = 0xB808;
/// Grid size in threads, Z.
pub const COMPUTE_DIM_Z: u32 = 0xB80C;
/// First workgroup id, X.
pub const COMPUTE_START_X: u32 = 0xB810;
/// First workgroup id, Y.
pub const COMPUTE_START_Y: u32 = 0xB814;
/// First workgroup id, Z.
pub const COMPUTE_START_Z: u32 = 0xB818;
/// Workgroup size, X.
pub const COMPUTE_NUM_THREAD_X: u32 = 0xB81C;
/// Workgroup size, Y.
pub const COMPUTE_NUM_THREAD_Y: u32 = 0xB820;
/// Workgroup size, Z.
pub const COMPUTE_NUM_THREAD_Z: u32 = 0xB824;
/// Pipeline statistics enable.
pub const COMPUTE_PIPELINESTAT_ENABLE: u32 = 0xB828;
/// Performance counter enable.
pub const COMPUTE_PERFCOUNT_ENABLE: u32 = 0xB82C;
/// Kernel code address bits 39:8.
pub const COMPUTE_PGM_LO: u32 = 0xB830;
/// Kernel code address bits 47:40.
pub const COMPUTE_PGM_HI: u32 = 0xB834;
/// Address of the dispatch packet, low half.
pub const COMPUTE_DISPATCH_PKT_ADDR_LO: u32 = 0xB838;
/// Address of the dispatch packet, high half.
pub const COMPUTE_DISPATCH_PKT_ADDR_HI: u32 = 0xB83C;
/// Program resources 1: register counts, float mode, clamps.
pub const COMPUTE_PGM_RSRC1: u32 = 0xB848;
/// Program resources 2: user SGPRs, id enables, LDS size.
pub const COMPUTE_PGM_RSRC2: u32 = 0xB84C;
/// VMID of the dispatch.
pub const COMPUTE_VMID: u32 = 0xB850;
/// Wave and workgroup limits.
pub const COMPUTE_RESOURCE_LIMITS: u32 = 0xB854;
/// CU enable mask, shader engine 0.
pub const COMPUTE_STATIC_THREAD_MGMT_SE0: u32 = 0xB858;
/// CU enable mask, shader engine 1.
pub const COMPUTE_STATIC_THREAD_MGMT_SE1: u32 = 0xB85C;
/// Scratch ring: wave count and per-wave size.
pub const COMPUTE_TMPRING_SIZE: u32 = 0xB860;
/// CU enable mask, shader engine 2.
pub const COMPUTE_STATIC_THREAD_MGMT_SE2: u32 = 0xB864;
/// CU enable mask, shader engine 3.
pub const COMPUTE_STATIC_THREAD_MGMT_SE3: u32 = 0xB868;
/// Restart position after preemption, X.
pub const COMPUTE_RESTART_X: u32 = 0xB86C;
/// Restart position, Y.
pub const COMPUTE_RESTART_Y: u32 = 0xB870;
/// Restart position, Z.
pub const COMPUTE_RESTART_Z: u32 = 0xB874;
/// Thread trace enable.
pub const COMPUTE_THREAD_TRACE_ENABLE: u32 = 0xB878;
/// Dispatch id.
pub const COMPUTE_DISPATCH_ID: u32 = 0xB880;
/// Thread group id.
pub const COMPUTE_THREADGROUP_ID: u32 = 0xB884;
/// User accumulator 0.
pub const COMPUTE_USER_ACCUM_0: u32 = 0xB890;
/// User accumulator 1.
pub const COMPUTE_USER_ACCUM_1: u32 = 0xB894;
/// User accumulator 2.
pub const COMPUTE_USER_ACCUM_2: u32 = 0xB898;
/// User accumulator 3.
pub const COMPUTE_USER_ACCUM_3: u32 = 0xB89C;
/// Program resources 3: shared VGPRs, instruction prefetch.
pub const COMPUTE_PGM_RSRC3: u32 = 0xB8A0;
/// Dispatch draw index.
pub const COMPUTE_DDID_INDEX: u32 = 0xB8A4;
/// Shader checksum.
pub const COMPUTE_SHADER_CHKSUM: u32 = 0xB8A8;
/// First user-data register; the kernel sees USER_DATA_n in SGPR n.
pub const COMPUTE_USER_DATA_0: u32 = 0xB900;
/// Number of user-data registers.
pub const COMPUTE_USER_DATA_COUNT: usize = 16;
/// Dispatch tunnel control.
pub const COMPUTE_DISPATCH_TUNNEL: u32 = 0xB9F4;
/// Dispatch end marker.
pub const COMPUTE_DISPATCH_END: u32 = 0xB9F8;
/// A write-only sink register.
pub const COMPUTE_NOWHERE: u32 = 0xB9FC;
/// Selects which SE/SA/instance later register writes reach (user-config space).
pub const GRBM_GFX_INDEX: u32 = 0x3_0800;

/// Byte offset of user-data register `n` (0..16).
pub const fn compute_user_data(n: usize) -> u32 {
    COMPUTE_USER_DATA_0 + 4 * n as u32
}

/// Builds the rows shared by both generations' tables; the generation modules splice them with
/// their own rows and keep the result sorted.
macro_rules! user_data_rows {
    () => {
        [
            Register::plain("COMPUTE_USER_DATA_0", 0xB900),
            Register::plain("COMPUTE_USER_DATA_1", 0xB904),
            Register::plain("COMPUTE_USER_DATA_2", 0xB908),
            Register::plain("COMPUTE_USER_DATA_3", 0xB90C),
            Register::plain("COMPUTE_USER_DATA_4", 0xB910),
            Register::plain("COMPUTE_USER_DATA_5", 0xB914),
            Register::plain("COMPUTE_USER_DATA_6", 0xB918),
            Register::plain("COMPUTE_USER_DATA_7", 0xB91C),
            Register::plain("COMPUTE_USER_DATA_8", 0xB920),
            Register::plain("COMPUTE_USER_DATA_9", 0xB924),
            Register::plain("COMPUTE_USER_DATA_10", 0xB928),
            Register::plain("COMPUTE_USER_DATA_11", 0xB92C),
            Register::plain("COMPUTE_USER_DATA_12", 0xB930),
            Register::plain("COMPUTE_USER_DATA_13", 0xB934),
            Register::plain("COMPUTE_USER_DATA_14", 0xB938),
            Register::plain("COMPUTE_USER_DATA_15", 0xB93C),
        ]
    };
}
pub(crate) use user_data_rows;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_sorted_unique_and_in_a_space() {
        for gfx in Gfx::ALL {
            let regs = table(gfx);
            for pair in regs.windows(2) {
                assert!(pair[0].offset < pair[1].offset, "{gfx}: {} / {}", pair[0].name, pair[1].name);
            }
            for r in regs {
                assert!(
                    Space::Sh.contains_run(r.offset, 1) || Space::Uconfig.contains_run(r.offset, 1),
                    "{}",
                    r.name
                );
                for f in r.fields {
                    assert!(f.lo <= f.hi && f.hi < 32, "{}.{}", r.name, f.name);
                }
                for (i, a) in r.fields.iter().enumerate() {
                    for b in &r.fields[i + 1..] {
                        assert_eq!(a.mask() & b.mask(), 0, "{}: {} overlaps {}", r.name, a.name, b.name);
                    }
                }
            }
        }
    }

    #[test]
    fn common_offsets_match_both_tables() {
        let common = [
            ("COMPUTE_DISPATCH_INITIATOR", COMPUTE_DISPATCH_INITIATOR),
            ("COMPUTE_START_X", COMPUTE_START_X),
            ("COMPUTE_NUM_THREAD_X", COMPUTE_NUM_THREAD_X),
            ("COMPUTE_NUM_THREAD_Z", COMPUTE_NUM_THREAD_Z),
            ("COMPUTE_PGM_LO", COMPUTE_PGM_LO),
            ("COMPUTE_PGM_HI", COMPUTE_PGM_HI),
            ("COMPUTE_PGM_RSRC1", COMPUTE_PGM_RSRC1),
            ("COMPUTE_PGM_RSRC2", COMPUTE_PGM_RSRC2),
            ("COMPUTE_RESOURCE_LIMITS", COMPUTE_RESOURCE_LIMITS),
            ("COMPUTE_STATIC_THREAD_MGMT_SE0", COMPUTE_STATIC_THREAD_MGMT_SE0),
            ("COMPUTE_TMPRING_SIZE", COMPUTE_TMPRING_SIZE),
            ("COMPUTE_PGM_RSRC3", COMPUTE_PGM_RSRC3),
            ("COMPUTE_USER_DATA_0", COMPUTE_USER_DATA_0),
            ("COMPUTE_USER_DATA_15", compute_user_data(15)),
            ("GRBM_GFX_INDEX", GRBM_GFX_INDEX),
        ];
        for gfx in Gfx::ALL {
            for (name, off) in common {
                assert_eq!(lookup(gfx, off).map(|r| r.name), Some(name), "{gfx}");
            }
        }
    }

    #[test]
    fn scratch_base_exists_only_on_gfx11() {
        assert!(lookup(Gfx::Gfx11, gfx11::COMPUTE_DISPATCH_SCRATCH_BASE_LO).is_some());
        assert!(lookup(Gfx::Gfx10_3, gfx11::COMPUTE_DISPATCH_SCRATCH_BASE_LO).is_none());
        assert!(
            lookup(Gfx::Gfx10_3, gfx11::COMPUTE_STATIC_THREAD_MGMT_SE4).map(|r| r.name)
                != Some("COMPUTE_STATIC_THREAD_MGMT_SE4")
        );
    }

    #[test]
    fn field_set_and_get() {
        let f = Field::new("X", 12, 19);
        assert_eq!(f.mask(), 0x000F_F000);
        assert_eq!(f.set(0xFFFF_FFFF, 0).unwrap(), 0xFFF0_0FFF);
        assert_eq!(f.get(0x000A_B000), 0xAB);
        assert!(f.set(0, 0x100).is_err());
        let full = Field::new("ALL", 0, 31);
        assert_eq!(full.max(), u32::MAX);
        assert_eq!(full.set(0, u32::MAX).unwrap(), u32::MAX);
    }
}
