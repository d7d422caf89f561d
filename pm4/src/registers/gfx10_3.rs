//! The gfx10.3 (RDNA2: gfx1030..gfx1036) compute register map.
//!
//! The common compute registers sit at the same byte offsets as on gfx11. This generation has no
//! scratch-base registers (scratch is described to the kernel through a buffer descriptor in user
//! SGPRs), only four STATIC_THREAD_MGMT registers, a 13-bit TMPRING_SIZE.WAVESIZE (1 KiB units),
//! only SHARED_VGPR_CNT in PGM_RSRC3, and the relaunch/restore registers at 0xB8AC..0xB8B8.

use super::{user_data_rows, Register};
use crate::fields;

/// Byte offset of COMPUTE_RELAUNCH on gfx10.3.
pub const COMPUTE_RELAUNCH: u32 = 0xB8AC;
/// Byte offset of COMPUTE_WAVE_RESTORE_ADDR_LO on gfx10.3.
pub const COMPUTE_WAVE_RESTORE_ADDR_LO: u32 = 0xB8B0;
/// Byte offset of COMPUTE_WAVE_RESTORE_ADDR_HI on gfx10.3.
pub const COMPUTE_WAVE_RESTORE_ADDR_HI: u32 = 0xB8B4;
/// Byte offset of COMPUTE_RELAUNCH2 on gfx10.3.
pub const COMPUTE_RELAUNCH2: u32 = 0xB8B8;

const HEAD: [Register; 42] = [
    Register::with_fields("COMPUTE_DISPATCH_INITIATOR", 0xB800, fields::initiator::GFX10_3),
    Register::plain("COMPUTE_DIM_X", 0xB804),
    Register::plain("COMPUTE_DIM_Y", 0xB808),
    Register::plain("COMPUTE_DIM_Z", 0xB80C),
    Register::plain("COMPUTE_START_X", 0xB810),
    Register::plain("COMPUTE_START_Y", 0xB814),
    Register::plain("COMPUTE_START_Z", 0xB818),
    Register::with_fields("COMPUTE_NUM_THREAD_X", 0xB81C, fields::num_thread::ALL),
    Register::with_fields("COMPUTE_NUM_THREAD_Y", 0xB820, fields::num_thread::ALL),
    Register::with_fields("COMPUTE_NUM_THREAD_Z", 0xB824, fields::num_thread::ALL),
    Register::plain("COMPUTE_PIPELINESTAT_ENABLE", 0xB828),
    Register::plain("COMPUTE_PERFCOUNT_ENABLE", 0xB82C),
    Register::plain("COMPUTE_PGM_LO", 0xB830),
    Register::with_fields("COMPUTE_PGM_HI", 0xB834, fields::pgm_hi::ALL),
    Register::plain("COMPUTE_DISPATCH_PKT_ADDR_LO", 0xB838),
    Register::plain("COMPUTE_DISPATCH_PKT_ADDR_HI", 0xB83C),
    Register::with_fields("COMPUTE_PGM_RSRC1", 0xB848, fields::rsrc1::ALL),
    Register::with_fields("COMPUTE_PGM_RSRC2", 0xB84C, fields::rsrc2::ALL),
    Register::plain("COMPUTE_VMID", 0xB850),
    Register::with_fields("COMPUTE_RESOURCE_LIMITS", 0xB854, fields::resource_limits::ALL),
    Register::plain("COMPUTE_STATIC_THREAD_MGMT_SE0", 0xB858),
    Register::plain("COMPUTE_STATIC_THREAD_MGMT_SE1", 0xB85C),
    Register::with_fields("COMPUTE_TMPRING_SIZE", 0xB860, fields::tmpring::GFX10_3),
    Register::plain("COMPUTE_STATIC_THREAD_MGMT_SE2", 0xB864),
    Register::plain("COMPUTE_STATIC_THREAD_MGMT_SE3", 0xB868),
    Register::plain("COMPUTE_RESTART_X", 0xB86C),
    Register::plain("COMPUTE_RESTART_Y", 0xB870),
    Register::plain("COMPUTE_RESTART_Z", 0xB874),
    Register::plain("COMPUTE_THREAD_TRACE_ENABLE", 0xB878),
    Register::plain("COMPUTE_DISPATCH_ID", 0xB880),
    Register::plain("COMPUTE_THREADGROUP_ID", 0xB884),
    Register::plain("COMPUTE_USER_ACCUM_0", 0xB890),
    Register::plain("COMPUTE_USER_ACCUM_1", 0xB894),
    Register::plain("COMPUTE_USER_ACCUM_2", 0xB898),
    Register::plain("COMPUTE_USER_ACCUM_3", 0xB89C),
    Register::with_fields("COMPUTE_PGM_RSRC3", 0xB8A0, fields::rsrc3::GFX10_3),
    Register::plain("COMPUTE_DDID_INDEX", 0xB8A4),
    Register::plain("COMPUTE_SHADER_CHKSUM", 0xB8A8),
    Register::plain("COMPUTE_RELAUNCH", 0xB8AC),
    Register::plain("COMPUTE_WAVE_RESTORE_ADDR_LO", 0xB8B0),
    Register::plain("COMPUTE_WAVE_RESTORE_ADDR_HI", 0xB8B4),
    Register::plain("COMPUTE_RELAUNCH2", 0xB8B8),
];
const USER_DATA: [Register; 16] = user_data_rows!();
const TAIL: [Register; 4] = [
    Register::plain("COMPUTE_DISPATCH_TUNNEL", 0xB9F4),
    Register::plain("COMPUTE_DISPATCH_END", 0xB9F8),
    Register::plain("COMPUTE_NOWHERE", 0xB9FC),
    Register::with_fields("GRBM_GFX_INDEX", 0x3_0800, fields::grbm_gfx_index::ALL),
];

const fn concat() -> [Register; 42 + 16 + 4] {
    let mut out = [Register::plain("", 0); 42 + 16 + 4];
    let mut i = 0;
    while i < HEAD.len() {
        out[i] = HEAD[i];
        i += 1;
    }
    let mut j = 0;
    while j < USER_DATA.len() {
        out[i + j] = USER_DATA[j];
        j += 1;
    }
    let mut k = 0;
    while k < TAIL.len() {
        out[i + j + k] = TAIL[k];
        k += 1;
    }
    out
}

static ALL: [Register; 42 + 16 + 4] = concat();

/// Every known gfx10.3 register, sorted by byte offset.
pub static REGISTERS: &[Register] = &ALL;
