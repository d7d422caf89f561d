//! The gfx11 (RDNA3: gfx1100..gfx1103) compute register map.
//!
//! Differences from gfx10.3: DISPATCH_SCRATCH_BASE_LO/HI hold the scratch base ("architected
//! flat scratch"); STATIC_THREAD_MGMT_SE4..7 and DISPATCH_INTERLEAVE occupy 0xB8AC..0xB8BC, pushing the
//! relaunch/restore registers up to 0xB8C0..0xB8CC; TMPRING_SIZE.WAVESIZE is 15 bits (256-byte
//! units); PGM_RSRC3 gains INST_PREF_SIZE, TRAP_ON_START/END and IMAGE_OP; DISPATCH_INITIATOR gains
//! AMP_SHADER_EN and DISABLE_DISP_PREMPT_EN.

use super::{user_data_rows, Register};
use crate::fields;

/// Byte offset of COMPUTE_DISPATCH_SCRATCH_BASE_LO on gfx11.
pub const COMPUTE_DISPATCH_SCRATCH_BASE_LO: u32 = 0xB840;
/// Byte offset of COMPUTE_DISPATCH_SCRATCH_BASE_HI on gfx11.
pub const COMPUTE_DISPATCH_SCRATCH_BASE_HI: u32 = 0xB844;
/// Byte offset of COMPUTE_STATIC_THREAD_MGMT_SE4 on gfx11.
pub const COMPUTE_STATIC_THREAD_MGMT_SE4: u32 = 0xB8AC;
/// Byte offset of COMPUTE_STATIC_THREAD_MGMT_SE5 on gfx11.
pub const COMPUTE_STATIC_THREAD_MGMT_SE5: u32 = 0xB8B0;
/// Byte offset of COMPUTE_STATIC_THREAD_MGMT_SE6 on gfx11.
pub const COMPUTE_STATIC_THREAD_MGMT_SE6: u32 = 0xB8B4;
/// Byte offset of COMPUTE_STATIC_THREAD_MGMT_SE7 on gfx11.
pub const COMPUTE_STATIC_THREAD_MGMT_SE7: u32 = 0xB8B8;
/// Byte offset of COMPUTE_DISPATCH_INTERLEAVE on gfx11.
pub const COMPUTE_DISPATCH_INTERLEAVE: u32 = 0xB8BC;
/// Byte offset of COMPUTE_RELAUNCH on gfx11.
pub const COMPUTE_RELAUNCH: u32 = 0xB8C0;
/// Byte offset of COMPUTE_WAVE_RESTORE_ADDR_LO on gfx11.
pub const COMPUTE_WAVE_RESTORE_ADDR_LO: u32 = 0xB8C4;
/// Byte offset of COMPUTE_WAVE_RESTORE_ADDR_HI on gfx11.
pub const COMPUTE_WAVE_RESTORE_ADDR_HI: u32 = 0xB8C8;
/// Byte offset of COMPUTE_RELAUNCH2 on gfx11.
pub const COMPUTE_RELAUNCH2: u32 = 0xB8CC;

const HEAD: [Register; 49] = [
    Register::with_fields("COMPUTE_DISPATCH_INITIATOR", 0xB800, fields::initiator::GFX11),
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
    Register::plain("COMPUTE_DISPATCH_SCRATCH_BASE_LO", 0xB840),
    Register::plain("COMPUTE_DISPATCH_SCRATCH_BASE_HI", 0xB844),
    Register::with_fields("COMPUTE_PGM_RSRC1", 0xB848, fields::rsrc1::ALL),
    Register::with_fields("COMPUTE_PGM_RSRC2", 0xB84C, fields::rsrc2::ALL),
    Register::plain("COMPUTE_VMID", 0xB850),
    Register::with_fields("COMPUTE_RESOURCE_LIMITS", 0xB854, fields::resource_limits::ALL),
    Register::plain("COMPUTE_STATIC_THREAD_MGMT_SE0", 0xB858),
    Register::plain("COMPUTE_STATIC_THREAD_MGMT_SE1", 0xB85C),
    Register::with_fields("COMPUTE_TMPRING_SIZE", 0xB860, fields::tmpring::GFX11),
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
    Register::with_fields("COMPUTE_PGM_RSRC3", 0xB8A0, fields::rsrc3::GFX11),
    Register::plain("COMPUTE_DDID_INDEX", 0xB8A4),
    Register::plain("COMPUTE_SHADER_CHKSUM", 0xB8A8),
    Register::plain("COMPUTE_STATIC_THREAD_MGMT_SE4", 0xB8AC),
    Register::plain("COMPUTE_STATIC_THREAD_MGMT_SE5", 0xB8B0),
    Register::plain("COMPUTE_STATIC_THREAD_MGMT_SE6", 0xB8B4),
    Register::plain("COMPUTE_STATIC_THREAD_MGMT_SE7", 0xB8B8),
    Register::plain("COMPUTE_DISPATCH_INTERLEAVE", 0xB8BC),
    Register::plain("COMPUTE_RELAUNCH", 0xB8C0),
    Register::plain("COMPUTE_WAVE_RESTORE_ADDR_LO", 0xB8C4),
    Register::plain("COMPUTE_WAVE_RESTORE_ADDR_HI", 0xB8C8),
    Register::plain("COMPUTE_RELAUNCH2", 0xB8CC),
];
const USER_DATA: [Register; 16] = user_data_rows!();
const TAIL: [Register; 4] = [
    Register::plain("COMPUTE_DISPATCH_TUNNEL", 0xB9F4),
    Register::plain("COMPUTE_DISPATCH_END", 0xB9F8),
    Register::plain("COMPUTE_NOWHERE", 0xB9FC),
    Register::with_fields("GRBM_GFX_INDEX", 0x3_0800, fields::grbm_gfx_index::ALL),
];

const fn concat() -> [Register; 49 + 16 + 4] {
    let mut out = [Register::plain("", 0); 49 + 16 + 4];
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

static ALL: [Register; 49 + 16 + 4] = concat();

/// Every known gfx11 register, sorted by byte offset.
pub static REGISTERS: &[Register] = &ALL;
