//! Names for decoded instructions, as LLVM's disassembler spells them (the generated
//! [`mnemonic_table`](super::mnemonic_table) for gfx11; gfx10.3 code, which is decoded into gfx11
//! instructions, keeps its gfx10 names, looked up from its first dword in
//! [`gfx10_table`](super::gfx10_table)), and the user-level feature an instruction belongs
//! to, so that a refusal says "double precision" rather than "VOP3 opcode 765".

use pm4::Gfx;

use super::decode::{Decoded, Inst, ValuEnc};
use super::mnemonic_table as table;

fn lookup(table: &[(u16, &'static str)], op: u16) -> Option<&'static str> {
    table.binary_search_by_key(&op, |&(o, _)| o).ok().map(|i| table[i].1)
}

/// LLVM's name for the decoded instruction `d` of generation `gfx` (for gfx10.3 the gfx10 name,
/// not that of the gfx11 instruction it was decoded into).
pub(crate) fn name(gfx: Gfx, d: &Decoded) -> Option<&'static str> {
    match gfx {
        Gfx::Gfx11 => mnemonic(&d.inst),
        Gfx::Gfx10_3 => super::decode_gfx10::mnemonic(d.word),
    }
}

/// LLVM's name for the instruction whose first dword is `w`, where the decoder refused it.
pub(crate) fn name_of_word(gfx: Gfx, w: u32) -> Option<&'static str> {
    match gfx {
        Gfx::Gfx11 => None,
        Gfx::Gfx10_3 => super::decode_gfx10::mnemonic(w),
    }
}

/// The mnemonic of `inst` (`v_div_scale_f64`), None for opcodes LLVM does not name on gfx11.
pub(crate) fn mnemonic(inst: &Inst) -> Option<&'static str> {
    match inst {
        Inst::Sop2 { op, .. } => lookup(table::SOP2, *op as u16),
        Inst::Sop1 { op, .. } => lookup(table::SOP1, *op as u16),
        Inst::Sopk { op, .. } => lookup(table::SOPK, *op as u16),
        Inst::Sopc { op, .. } => lookup(table::SOPC, *op as u16),
        Inst::Sopp { op, .. } => lookup(table::SOPP, *op as u16),
        Inst::Smem { op, .. } => lookup(table::SMEM, *op as u16),
        Inst::Valu(v) if v.enc == ValuEnc::Vop3p => lookup(table::VOP3P, v.op),
        Inst::Valu(v) => lookup(table::VALU, v.op),
        Inst::Vopd(_) => Some("v_dual"),
        Inst::Ds(d) => lookup(table::DS, d.op as u16),
        Inst::Flat(f) => match f.seg {
            0 => lookup(table::FLAT, f.op as u16),
            1 => lookup(table::SCRATCH, f.op as u16),
            _ => lookup(table::GLOBAL, f.op as u16),
        },
        Inst::Mubuf(m) => lookup(table::MUBUF, m.op as u16),
    }
}

/// The OpenCL-level feature an instruction serves, for messages ("double precision, cl_khr_fp64"); `None` when the mnemonic says nothing more than itself.
pub(crate) fn feature(mnemonic: &str) -> Option<&'static str> {
    let m = mnemonic;
    let has = |s: &str| m.contains(s);
    Some(if m.starts_with("scratch_") {
        "private memory, scratch"
    } else if m.starts_with("buffer_") || m.starts_with("s_buffer_") || m.starts_with("tbuffer_") {
        "buffer resource descriptors"
    } else if m.starts_with("image_") {
        "images"
    } else if has("gws") || has("gds") {
        "the global data share"
    } else if has("permlane") || has("readlane") || has("writelane") || has("bpermute") || has("swizzle") {
        "cross-lane operations, sub-groups"
    } else if has("wmma") {
        "matrix instructions, WMMA"
    } else if has("f64") {
        "double precision, cl_khr_fp64"
    } else if has("f16") || has("bf16") {
        "half precision, cl_khr_fp16"
    } else if has("atomic") {
        "atomics"
    } else if m.starts_with("s_trap") || m.starts_with("s_sendmsg") || m.starts_with("s_sethalt") {
        "traps and messages"
    } else if m.starts_with("s_setreg") || m.starts_with("s_round_mode") || m.starts_with("s_denorm_mode") {
        "changing the float mode"
    } else {
        return None;
    })
}
