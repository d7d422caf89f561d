//! Instruction decoder: one instruction (with its literal) from the dwords at a PC. gfx11 words
//! are decoded here; gfx10.3 words by [`decode_gfx10`](super::decode_gfx10), into the gfx11
//! instruction that is the same operation, so that one interpreter runs both.

use pm4::Gfx;

use super::error::{ExecResult, Fault};
use super::operand::{Src, EXEC_LO, LITERAL, VCC_LO};

/// VALU opcodes in the VOP3 numbering: VOPC 0..=255, VOP2 256 + op, VOP1 384 + op.
pub const VOP2_BASE: u16 = 256;
pub const VOP1_BASE: u16 = 384;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValuEnc {
    Vop1,
    Vop2,
    Vopc,
    Vop3,
    Vop3p,
}

/// A VALU instruction in any of its encodings, normalised to the VOP3 form: implicit operands
/// of the short forms (VCC, the accumulator of FMAC, the literal of FMAMK/FMAAK) are explicit.
#[derive(Debug, Clone, PartialEq)]
pub struct Valu {
    pub enc: ValuEnc,
    pub op: u16,
    pub vdst: u8,
    /// Scalar destination: carry-out or compare mask (VCC_LO or EXEC_LO for short forms).
    pub sdst: u8,
    pub src: [Src; 3],
    pub abs: u8,
    pub neg: u8,
    pub opsel: u8,
    pub clamp: bool,
    pub omod: u8,
    pub neg_hi: u8,
    pub opsel_hi: u8,
    /// The sub-dword operand selection of gfx10's SDWA forms (None for every other form).
    pub sdwa: Option<Sdwa>,
}

/// SDWA (gfx10.3): which byte or word of each source a VOP1/VOP2/VOPC instruction reads, and
/// where its result goes. Selections: 0..=3 byte 0..3, 4 word 0, 5 word 1, 6 the whole dword.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sdwa {
    /// Selection of src0 and src1.
    pub src_sel: [u8; 2],
    /// Whether the selected src0/src1 bits are sign-extended (else zero-extended).
    pub src_sext: [bool; 2],
    /// The destination bits written.
    pub dst_sel: u8,
    /// The destination bits not written: 0 zero them, 1 sign-extend the result, 2 keep them.
    pub dst_unused: u8,
}

/// A MUBUF instruction: a load, store or atomic through a buffer resource (V#) in four SGPRs,
/// or a cache invalidate. `op` is in the gfx11 numbering.
#[derive(Debug, Clone, PartialEq)]
pub struct Mubuf {
    pub op: u8,
    /// Unsigned byte offset added to the address.
    pub offset: u16,
    /// VADDR holds a byte offset (and, with `idxen`, an index first).
    pub offen: bool,
    /// VADDR holds an index.
    pub idxen: bool,
    /// Cache policy (globally coherent, system level coherent, device level coherent): the
    /// interpreter's memory is coherent, so they only matter to the disassembly.
    pub glc: bool,
    pub slc: bool,
    pub dlc: bool,
    pub vaddr: u8,
    pub vdata: u8,
    /// First of the four SGPRs holding the V#.
    pub srsrc: u8,
    /// SGPR (or inline constant) byte offset added to the address.
    pub soffset: Src,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VopdHalf {
    pub op: u8,
    pub vdst: u8,
    pub src0: Src,
    pub vsrc1: u8,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Vopd {
    pub x: VopdHalf,
    pub y: VopdHalf,
    pub literal: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Ds {
    pub op: u8,
    pub addr: u8,
    pub data0: u8,
    pub data1: u8,
    pub vdst: u8,
    pub offset0: u8,
    pub offset1: u8,
    pub gds: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Flat {
    /// 0 flat, 1 scratch, 2 global.
    pub seg: u8,
    pub op: u8,
    pub addr: u8,
    pub data: u8,
    pub saddr: u8,
    pub vdst: u8,
    pub offset: i32,
    /// Cache policy; GLC also makes an atomic return the old value.
    pub glc: bool,
    pub slc: bool,
    pub dlc: bool,
    pub sve: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Inst {
    Sop2 {
        op: u8,
        sdst: u8,
        s0: Src,
        s1: Src,
    },
    Sop1 {
        op: u8,
        sdst: u8,
        s0: Src,
    },
    Sopk {
        op: u8,
        sdst: u8,
        simm: u16,
        literal: u32,
    },
    Sopc {
        op: u8,
        s0: Src,
        s1: Src,
    },
    Sopp {
        op: u8,
        simm: u16,
    },
    /// Scalar memory; `glc` and `dlc` are cache policy, which coherent memory ignores.
    Smem {
        op: u8,
        sdata: u8,
        sbase: u8,
        offset: i32,
        soffset: u8,
        glc: bool,
        dlc: bool,
    },
    Valu(Box<Valu>),
    Vopd(Box<Vopd>),
    Ds(Ds),
    Flat(Flat),
    Mubuf(Mubuf),
}

/// A decoded instruction and its size in bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    pub inst: Inst,
    pub size: u8,
    /// First dword, for error messages.
    pub word: u32,
}

pub(super) fn bits(w: u32, lo: u32, n: u32) -> u32 {
    (w >> lo) & ((1u32 << n) - 1)
}

pub(super) fn sext(v: u32, n: u32) -> i32 {
    ((v << (32 - n)) as i32) >> (32 - n)
}

/// Decodes the instruction of generation `gfx` whose dwords `word(i)` returns (i = 0, 1, 2: only
/// as many as needed).
pub(crate) fn decode(gfx: Gfx, word: &mut dyn FnMut(u32) -> ExecResult<u32>) -> ExecResult<Decoded> {
    match gfx {
        Gfx::Gfx11 => decode_gfx11(word),
        Gfx::Gfx10_3 => super::decode_gfx10::decode(word),
    }
}

fn decode_gfx11(word: &mut dyn FnMut(u32) -> ExecResult<u32>) -> ExecResult<Decoded> {
    let w = word(0)?;
    let unknown = |encoding: &'static str, opcode: u32| Fault::Unknown { encoding, opcode, word: w };
    let top9 = w >> 23;
    if top9 == 0x17d || top9 == 0x17e || top9 == 0x17f || w >> 28 == 0xb || w >> 30 == 2 {
        return decode_salu(w, word);
    }
    if w >> 25 == 0x3f || w >> 25 == 0x3e || w >> 31 == 0 {
        return decode_vop_short(w, word);
    }
    match w >> 26 {
        0x35 => decode_vop3(w, word),
        0x33 if w >> 24 == 0xcc => decode_vop3p(w, word),
        0x32 => decode_vopd(w, word),
        0x36 => {
            let w1 = word(1)?;
            let ds = Ds {
                offset0: bits(w, 0, 8) as u8,
                offset1: bits(w, 8, 8) as u8,
                gds: bits(w, 17, 1) != 0,
                op: bits(w, 18, 8) as u8,
                addr: bits(w1, 0, 8) as u8,
                data0: bits(w1, 8, 8) as u8,
                data1: bits(w1, 16, 8) as u8,
                vdst: bits(w1, 24, 8) as u8,
            };
            Ok(Decoded { inst: Inst::Ds(ds), size: 8, word: w })
        }
        0x37 => {
            let w1 = word(1)?;
            let seg = bits(w, 16, 2) as u8;
            let flat = Flat {
                // Signed for scratch and global; the FLAT segment's offset is unsigned.
                offset: if seg == 0 { bits(w, 0, 13) as i32 } else { sext(bits(w, 0, 13), 13) },
                dlc: bits(w, 13, 1) != 0,
                glc: bits(w, 14, 1) != 0,
                slc: bits(w, 15, 1) != 0,
                seg,
                op: bits(w, 18, 7) as u8,
                addr: bits(w1, 0, 8) as u8,
                data: bits(w1, 8, 8) as u8,
                saddr: bits(w1, 16, 7) as u8,
                sve: bits(w1, 23, 1) != 0,
                vdst: bits(w1, 24, 8) as u8,
            };
            Ok(Decoded { inst: Inst::Flat(flat), size: 8, word: w })
        }
        0x3d => {
            let w1 = word(1)?;
            let inst = Inst::Smem {
                sbase: (bits(w, 0, 6) * 2) as u8,
                sdata: bits(w, 6, 7) as u8,
                dlc: bits(w, 13, 1) != 0,
                glc: bits(w, 14, 1) != 0,
                op: bits(w, 18, 8) as u8,
                offset: sext(bits(w1, 0, 21), 21),
                soffset: bits(w1, 25, 7) as u8,
            };
            Ok(Decoded { inst, size: 8, word: w })
        }
        0x38 => {
            let w1 = word(1)?;
            let mubuf = Mubuf {
                offset: bits(w, 0, 12) as u16,
                soffset: Src::decode(bits(w1, 24, 8) as u16, 0),
                op: bits(w, 18, 8) as u8,
                slc: bits(w, 12, 1) != 0,
                dlc: bits(w, 13, 1) != 0,
                glc: bits(w, 14, 1) != 0,
                vaddr: bits(w1, 0, 8) as u8,
                vdata: bits(w1, 8, 8) as u8,
                srsrc: (bits(w1, 16, 5) * 4) as u8,
                offen: bits(w1, 22, 1) != 0,
                idxen: bits(w1, 23, 1) != 0,
            };
            Ok(Decoded { inst: Inst::Mubuf(mubuf), size: 8, word: w })
        }
        0x3a => Err(unknown("MTBUF", bits(w, 15, 4))),
        0x3c => Err(unknown("MIMG", bits(w, 18, 8))),
        0x3e => Err(unknown("EXP", 0)),
        0x33 => Err(unknown("VINTERP/LDSDIR", bits(w, 16, 7))),
        _ => Err(unknown("unrecognised encoding", w >> 24)),
    }
}

fn decode_salu(w: u32, word: &mut dyn FnMut(u32) -> ExecResult<u32>) -> ExecResult<Decoded> {
    let top9 = w >> 23;
    let mut size = 4;
    let mut lit = |field: u32, size: &mut u8| -> ExecResult<Src> {
        if field == LITERAL as u32 {
            *size = 8;
            Ok(Src::decode(LITERAL, word(1)?))
        } else {
            Ok(Src::decode(field as u16, 0))
        }
    };
    let inst = if top9 == 0x17d {
        Inst::Sop1 { op: bits(w, 8, 8) as u8, sdst: bits(w, 16, 7) as u8, s0: lit(bits(w, 0, 8), &mut size)? }
    } else if top9 == 0x17e {
        let s0 = lit(bits(w, 0, 8), &mut size)?;
        let s1 = lit(bits(w, 8, 8), &mut size)?;
        Inst::Sopc { op: bits(w, 16, 7) as u8, s0, s1 }
    } else if top9 == 0x17f {
        Inst::Sopp { op: bits(w, 16, 7) as u8, simm: bits(w, 0, 16) as u16 }
    } else if w >> 28 == 0xb {
        let op = bits(w, 23, 5) as u8;
        // s_setreg_imm32_b32 carries a 32-bit immediate after the instruction.
        let literal = if op == 19 {
            size = 8;
            word(1)?
        } else {
            0
        };
        Inst::Sopk { op, sdst: bits(w, 16, 7) as u8, simm: bits(w, 0, 16) as u16, literal }
    } else {
        let s0 = lit(bits(w, 0, 8), &mut size)?;
        let s1 = lit(bits(w, 8, 8), &mut size)?;
        Inst::Sop2 { op: bits(w, 23, 7) as u8, sdst: bits(w, 16, 7) as u8, s0, s1 }
    };
    Ok(Decoded { inst, size, word: w })
}

pub(super) fn plain_valu(enc: ValuEnc, op: u16) -> Valu {
    Valu {
        enc,
        op,
        vdst: 0,
        sdst: VCC_LO,
        src: [Src::Int(0); 3],
        abs: 0,
        neg: 0,
        opsel: 0,
        clamp: false,
        omod: 0,
        neg_hi: 0,
        opsel_hi: 0,
        sdwa: None,
    }
}

/// VOP3 opcodes whose bits 14:8 are a scalar destination instead of abs/opsel.
pub(super) fn has_sdst(op: u16) -> bool {
    matches!(op, 288..=290 | 764..=770)
}

/// Which operands of a short-form (VOP1/VOP2/VOPC) opcode are 16-bit: (src0, src1, vdst).
fn true16_operands(op: u16) -> (bool, bool, bool) {
    match op {
        // 16-bit compares: f16 0..=15, i16/u16 49..=63, class_f16 125, and their cmpx forms.
        0..=255 if matches!(op & 127, 0..=15 | 49..=54 | 57..=62 | 125) => (true, true, false),
        // VOP2 f16 arithmetic (add, sub, subrev, mul, fmac, fmamk, fmaak, max, min, ldexp).
        306..=315 => (true, true, true),
        // VOP1: cvt_f16_f32 writes a half; cvt_f32_f16, cvt_i32_i16, cvt_u32_u16 read one.
        394 => (false, false, true),
        395 | 490 | 491 => (true, false, false),
        // VOP1 16-bit ops: mov_b16, the f16/i16 conversions and math (80..=100), not_b16.
        412 | 464..=484 | 489 => (true, false, true),
        _ => (false, false, false),
    }
}

/// In the short encodings of 16-bit operations (true16 on gfx11), bit 7 of a VGPR field picks the
/// high half (`v1.h`) of VGPR `field & 127`. Normalise that to the VOP3 form: opsel bits 0/1
/// for the sources, bit 3 for the destination (and bit 2 for FMAC's accumulator, which is vdst).
fn true16_halves(v: &mut Valu) {
    let (s0, s1, d) = true16_operands(v.op);
    for (i, is16) in [(0usize, s0), (1, s1)] {
        if let (true, Src::Vgpr(r)) = (is16, v.src[i]) {
            if r >= 128 {
                v.src[i] = Src::Vgpr(r - 128);
                v.opsel |= 1 << i;
            }
        }
    }
    if d && v.vdst >= 128 {
        v.vdst -= 128;
        v.opsel |= 8;
        if v.op == 310 {
            v.opsel |= 4;
        }
    }
}

/// Fills in the implicit operands the VOP2 forms (and their VOP3 twins) read.
pub(super) fn fix_implicit(v: &mut Valu, short: bool) {
    match v.op {
        // v_fmac_f32, v_fmac_f16, v_fmac_dx9_zero_f32, v_dot2acc_f32_f16, v_pk_fmac_f16 and
        // gfx10.3's v_dot4c_i32_i8: D accumulates.
        299 | 310 | 262 | 258 | 316 | super::decode_gfx10::GFX10_DOT4C_I32_I8 => {
            v.src[2] = Src::Vgpr(v.vdst);
            // A half-register accumulator is the destination's half.
            if v.op == 310 && v.opsel & 8 != 0 {
                v.opsel |= 4;
            }
        }
        // v_cndmask_b32, v_add/sub/subrev_co_ci_u32: VCC is the implicit mask / carry.
        257 | 288..=290 if short => {
            v.src[2] = Src::Sgpr(VCC_LO);
            v.sdst = VCC_LO;
        }
        _ => {}
    }
}

fn decode_vop_short(w: u32, word: &mut dyn FnMut(u32) -> ExecResult<u32>) -> ExecResult<Decoded> {
    let src0_field = bits(w, 0, 9) as u16;
    let (enc, op) = if w >> 25 == 0x3f {
        (ValuEnc::Vop1, VOP1_BASE + bits(w, 9, 8) as u16)
    } else if w >> 25 == 0x3e {
        (ValuEnc::Vopc, bits(w, 17, 8) as u16)
    } else {
        (ValuEnc::Vop2, VOP2_BASE + bits(w, 25, 6) as u16)
    };
    // DPP16 (0xfa) and DPP8 (0xe9, or 0xea with fetch-inactive) put their controls in a second
    // dword.
    if matches!(src0_field, 0xfa | 0xe9 | 0xea) {
        return Err(Fault::unsupported(format!(
            "DPP operand (src0 {src0_field:#x}) on VALU opcode {op} is not modelled"
        )));
    }
    // v_fmamk/v_fmaak (f32 and f16) always carry a literal; any src0 of 255 does too.
    let needs_literal = src0_field == LITERAL || matches!(op, 300 | 301 | 311 | 312);
    let literal = if needs_literal { word(1)? } else { 0 };
    let mut v = plain_valu(enc, op);
    v.src[0] = Src::decode(src0_field, literal);
    match enc {
        ValuEnc::Vop1 => v.vdst = bits(w, 17, 8) as u8,
        ValuEnc::Vopc => {
            v.src[1] = Src::Vgpr(bits(w, 9, 8) as u8);
            v.sdst = if op >= 128 { EXEC_LO } else { VCC_LO };
        }
        _ => {
            v.vdst = bits(w, 17, 8) as u8;
            v.src[1] = Src::Vgpr(bits(w, 9, 8) as u8);
            // fmamk (D = S0 * K + S1) and fmaak (D = S0 * S1 + K) keep K in src2.
            if matches!(op, 300 | 301 | 311 | 312) {
                v.src[2] = Src::Literal(literal);
            }
        }
    }
    true16_halves(&mut v);
    fix_implicit(&mut v, true);
    Ok(Decoded { inst: Inst::Valu(Box::new(v)), size: if needs_literal { 8 } else { 4 }, word: w })
}

fn decode_vop3(w: u32, word: &mut dyn FnMut(u32) -> ExecResult<u32>) -> ExecResult<Decoded> {
    let w1 = word(1)?;
    let op = bits(w, 16, 10) as u16;
    let fields = [bits(w1, 0, 9) as u16, bits(w1, 9, 9) as u16, bits(w1, 18, 9) as u16];
    let needs_literal = fields.contains(&LITERAL);
    let literal = if needs_literal { word(2)? } else { 0 };
    let mut v = plain_valu(ValuEnc::Vop3, op);
    v.vdst = bits(w, 0, 8) as u8;
    v.clamp = bits(w, 15, 1) != 0;
    v.omod = bits(w1, 27, 2) as u8;
    v.neg = bits(w1, 29, 3) as u8;
    for (i, f) in fields.iter().enumerate() {
        v.src[i] = Src::decode(*f, literal);
    }
    if has_sdst(op) {
        v.sdst = bits(w, 8, 7) as u8;
    } else {
        v.abs = bits(w, 8, 3) as u8;
        v.opsel = bits(w, 11, 4) as u8;
    }
    if op < 256 {
        v.sdst = if op >= 128 { EXEC_LO } else { v.vdst };
    }
    fix_implicit(&mut v, false);
    Ok(Decoded { inst: Inst::Valu(Box::new(v)), size: if needs_literal { 12 } else { 8 }, word: w })
}

fn decode_vop3p(w: u32, word: &mut dyn FnMut(u32) -> ExecResult<u32>) -> ExecResult<Decoded> {
    let w1 = word(1)?;
    let fields = [bits(w1, 0, 9) as u16, bits(w1, 9, 9) as u16, bits(w1, 18, 9) as u16];
    let needs_literal = fields.contains(&LITERAL);
    let literal = if needs_literal { word(2)? } else { 0 };
    let mut v = plain_valu(ValuEnc::Vop3p, bits(w, 16, 7) as u16);
    v.vdst = bits(w, 0, 8) as u8;
    v.neg_hi = bits(w, 8, 3) as u8;
    v.opsel = bits(w, 11, 3) as u8;
    v.opsel_hi = (bits(w1, 27, 2) | (bits(w, 14, 1) << 2)) as u8;
    v.clamp = bits(w, 15, 1) != 0;
    v.neg = bits(w1, 29, 3) as u8;
    for (i, f) in fields.iter().enumerate() {
        v.src[i] = Src::decode(*f, literal);
    }
    Ok(Decoded { inst: Inst::Valu(Box::new(v)), size: if needs_literal { 12 } else { 8 }, word: w })
}

fn decode_vopd(w: u32, word: &mut dyn FnMut(u32) -> ExecResult<u32>) -> ExecResult<Decoded> {
    let w1 = word(1)?;
    let opx = bits(w, 22, 4) as u8;
    let opy = bits(w, 17, 5) as u8;
    let srcx = bits(w, 0, 9) as u16;
    let srcy = bits(w1, 0, 9) as u16;
    let needs_literal = srcx == LITERAL || srcy == LITERAL || matches!(opx, 1 | 2) || matches!(opy, 1 | 2);
    let literal = if needs_literal { word(2)? } else { 0 };
    let vdstx = bits(w1, 24, 8) as u8;
    // vdstY's low bit is implied: the opposite of vdstX's (the two halves use different banks).
    let vdsty = ((bits(w1, 17, 7) << 1) as u8) | ((vdstx & 1) ^ 1);
    let x = VopdHalf { op: opx, vdst: vdstx, src0: Src::decode(srcx, literal), vsrc1: bits(w, 9, 8) as u8 };
    let y = VopdHalf { op: opy, vdst: vdsty, src0: Src::decode(srcy, literal), vsrc1: bits(w1, 9, 8) as u8 };
    Ok(Decoded {
        inst: Inst::Vopd(Box::new(Vopd { x, y, literal })),
        size: if needs_literal { 12 } else { 8 },
        word: w,
    })
}

/// The size in bytes of the instruction at the start of `code` (including its literal), or None
/// when `code` is too short for it. Unknown encodings still have a size when their format is
/// known; an unrecognised format gives None.
pub fn instruction_size(gfx: Gfx, code: &[u32]) -> Option<usize> {
    let mut word = |i: u32| code.get(i as usize).copied().ok_or_else(|| Fault::unsupported("truncated"));
    match decode(gfx, &mut word) {
        Ok(d) => Some(d.size as usize),
        Err(_) => undecoded_size(gfx, &mut word).map(usize::from),
    }
}

/// The size of an instruction the decoder refuses, where its format alone says it: gfx10.3
/// opcodes without a gfx11 twin are refused by the decoder, yet the code after them is still
/// code. None for gfx11, whose decoder refuses only what it cannot take apart.
pub(crate) fn undecoded_size(gfx: Gfx, word: &mut dyn FnMut(u32) -> ExecResult<u32>) -> Option<u8> {
    match gfx {
        Gfx::Gfx11 => None,
        Gfx::Gfx10_3 => super::decode_gfx10::size(word).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dpp8_with_fetch_inactive_is_refused() {
        // v_add_f32_dpp v1, v136, v2 dpp8:[6,0,3,5,7,7,7,7] fi:1: src0 0xea is no register.
        let words = [0x060204ea_u32, 0xfffac688];
        let result = decode(Gfx::Gfx11, &mut |i| Ok(words[i as usize]));
        assert!(matches!(result, Err(Fault::Unsupported(m)) if m.contains("DPP")));
    }
}
