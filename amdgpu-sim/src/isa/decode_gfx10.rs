//! gfx10.3 (RDNA2) instruction decoder: each word is decoded into the gfx11 instruction that is
//! the same operation (opcodes renumbered through the generated
//! [`gfx10_table`](super::gfx10_table)), so that the interpreter runs both generations. The
//! field layouts were read off LLVM's assembler for gfx1030; where they differ from gfx11 (the
//! scalar NULL and M0 numbers, SMEM, FLAT, MUBUF, SDWA) the fields are translated here. A gfx10
//! opcode without a gfx11 twin is refused, naming LLVM's gfx10 mnemonic.

use super::decode::{
    bits, fix_implicit, has_sdst, plain_valu, sext, Decoded, Ds, Flat, Inst, Mubuf, Sdwa, Valu, ValuEnc,
    VOP1_BASE, VOP2_BASE,
};
use super::error::{ExecResult, Fault};
use super::gfx10_table as table;
use super::operand::{Src, EXEC_LO, LITERAL, NULL, VCC_LO};

type Table = &'static [(u16, &'static str, Option<u16>)];

/// gfx10 numbers M0 124 and NULL 125, gfx11 the other way round.
const M0_GFX10: u32 = 124;
const NULL_GFX10: u32 = 125;
/// A scratch SADDR of EXEC_HI means "no SGPR address" on gfx10 (with no VGPR address either).
const SCRATCH_NO_SADDR: u32 = 127;
const SDWA: u32 = 0xf9;
const DPP16: u32 = 0xfa;
const DPP8: u32 = 0xe9;
/// DPP8 with FI (fetch inactive lanes).
const DPP8_FI: u32 = 0xea;
/// FLAT's LDS bit: the data goes to LDS, not to VGPRs.
const FLAT_LDS_BIT: u32 = 13;
/// The VOP2 forms that carry a constant after the instruction: fmamk and fmaak, f32 and f16.
const VOP2_WITH_K: [&str; 4] = ["v_fmamk_f32", "v_fmaak_f32", "v_fmamk_f16", "v_fmaak_f16"];

/// A gfx10 scalar register number (7 or 8-bit field) in the gfx11 numbering.
fn sreg(f: u32) -> u8 {
    (match f {
        M0_GFX10 => NULL_GFX10,
        NULL_GFX10 => M0_GFX10,
        f => f,
    }) as u8
}

/// A gfx10 source field (8 or 9 bits) as the gfx11 decoder would read it.
fn src(f: u32, literal: u32) -> Src {
    let f = if f < 128 { sreg(f) as u32 } else { f };
    Src::decode(f as u16, literal)
}

/// The encodings of gfx10.3, told apart by the first dword.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Sop1,
    Sopc,
    Sopp,
    Sopk,
    Sop2,
    Vop1,
    Vopc,
    Vop2,
    Vop3,
    Vop3p,
    Ds,
    Flat,
    Smem,
    Mubuf,
    Other(&'static str),
}

/// The format of `w` and its opcode in that format's gfx10 numbering (VALU opcodes in the VOP3
/// numbering, as the tables are).
fn classify(w: u32) -> (Format, u32) {
    let top9 = w >> 23;
    match () {
        _ if top9 == 0x17d => (Format::Sop1, bits(w, 8, 8)),
        _ if top9 == 0x17e => (Format::Sopc, bits(w, 16, 7)),
        _ if top9 == 0x17f => (Format::Sopp, bits(w, 16, 7)),
        _ if w >> 28 == 0xb => (Format::Sopk, bits(w, 23, 5)),
        _ if w >> 30 == 2 => (Format::Sop2, bits(w, 23, 7)),
        _ if w >> 25 == 0x3f => (Format::Vop1, VOP1_BASE as u32 + bits(w, 9, 8)),
        _ if w >> 25 == 0x3e => (Format::Vopc, bits(w, 17, 8)),
        _ if w >> 31 == 0 => (Format::Vop2, VOP2_BASE as u32 + bits(w, 25, 6)),
        _ => match w >> 26 {
            0x35 => (Format::Vop3, bits(w, 16, 10)),
            0x33 if w >> 24 == 0xcc => (Format::Vop3p, bits(w, 16, 7)),
            0x36 => (Format::Ds, bits(w, 18, 8)),
            0x37 => (Format::Flat, bits(w, 18, 7)),
            0x3d => (Format::Smem, bits(w, 18, 8)),
            0x38 => (Format::Mubuf, bits(w, 18, 7)),
            0x3a => (Format::Other("MTBUF"), bits(w, 16, 3)),
            0x3c => (Format::Other("MIMG"), bits(w, 18, 8)),
            0x3e => (Format::Other("EXP"), 0),
            0x32 => (Format::Other("VINTRP"), bits(w, 16, 2)),
            _ => (Format::Other("unrecognised encoding"), w >> 24),
        },
    }
}

/// The gfx10 table of `format`; FLAT's depends on the segment.
fn table_of(format: Format, w: u32) -> Option<(Table, &'static str)> {
    Some(match format {
        Format::Sop1 => (table::SOP1, "SOP1"),
        Format::Sopc => (table::SOPC, "SOPC"),
        Format::Sopp => (table::SOPP, "SOPP"),
        Format::Sopk => (table::SOPK, "SOPK"),
        Format::Sop2 => (table::SOP2, "SOP2"),
        Format::Vop1 => (table::VALU, "VOP1"),
        Format::Vopc => (table::VALU, "VOPC"),
        Format::Vop2 => (table::VALU, "VOP2"),
        Format::Vop3 => (table::VALU, "VOP3"),
        Format::Vop3p => (table::VOP3P, "VOP3P"),
        Format::Ds => (table::DS, "DS"),
        Format::Flat => match bits(w, 14, 2) {
            0 => (table::FLAT, "FLAT"),
            1 => (table::SCRATCH, "SCRATCH"),
            _ => (table::GLOBAL, "GLOBAL"),
        },
        Format::Smem => (table::SMEM, "SMEM"),
        Format::Mubuf => (table::MUBUF, "MUBUF"),
        Format::Other(_) => return None,
    })
}

fn lookup(table: Table, op: u32) -> Option<(&'static str, Option<u16>)> {
    let op = u16::try_from(op).ok()?;
    table.binary_search_by_key(&op, |&(o, _, _)| o).ok().map(|i| (table[i].1, table[i].2))
}

/// LLVM's gfx10 mnemonic of the instruction whose first dword is `w` (encoding suffixes
/// dropped), None where LLVM names none.
pub(crate) fn mnemonic(w: u32) -> Option<&'static str> {
    let (format, op) = classify(w);
    let (table, _) = table_of(format, w)?;
    lookup(table, op).map(|(name, _)| name)
}

/// The gfx11 opcode of the instruction whose first dword is `w`, or why there is none.
fn twin(w: u32) -> ExecResult<u16> {
    let (format, op) = classify(w);
    let unknown = |encoding| Fault::Unknown { encoding, opcode: op, word: w };
    let Some((table, encoding)) = table_of(format, w) else {
        return Err(match format {
            Format::Other(encoding) => unknown(encoding),
            _ => unknown("gfx10.3"),
        });
    };
    match lookup(table, op) {
        Some((_, Some(op11))) => Ok(op11),
        Some((name, None)) if gfx10_only(name).is_some() => gfx10_only(name).ok_or_else(|| unknown(encoding)),
        Some((name, None)) => Err(Fault::unsupported(format!(
            "{name} (gfx10.3 {encoding} opcode {op}) has no gfx11 counterpart, and the simulator runs \
             gfx10.3 code as the gfx11 instructions that do the same"
        ))),
        None => Err(unknown(encoding)),
    }
}

/// Opcodes of their own for the gfx10.3 instructions with no gfx11 twin, past what gfx11 words
/// name in their encodings (their executors run them for gfx10.3 waves only): the VOP3P dot
/// products (see `vop3p`), v_dot4c_i32_i8, s_ff0_i32, and the f64 FLAT/GLOBAL/buffer atomics.
fn gfx10_only(name: &str) -> Option<u16> {
    use super::vop3p::{DOT2_I32_I16, DOT2_U32_U16, DOT4_I32_I8, DOT8_I32_I4};
    Some(match name {
        "v_dot2_i32_i16" => DOT2_I32_I16,
        "v_dot2_u32_u16" => DOT2_U32_U16,
        "v_dot4_i32_i8" => DOT4_I32_I8,
        "v_dot8_i32_i4" => DOT8_I32_I4,
        "v_dot4c_i32_i8" => GFX10_DOT4C_I32_I8,
        "s_ff0_i32_b32" => u16::from(GFX10_S_FF0_B32),
        "s_ff0_i32_b64" => u16::from(GFX10_S_FF0_B64),
        n if n.ends_with("_atomic_fcmpswap_x2") => u16::from(GFX10_ATOMIC_CMPSWAP_F64),
        n if n.ends_with("_atomic_fmin_x2") => u16::from(GFX10_ATOMIC_MIN_F64),
        n if n.ends_with("_atomic_fmax_x2") => u16::from(GFX10_ATOMIC_MAX_F64),
        _ => return None,
    })
}

/// v_dot4c_i32_i8 (VOP2, D += dot4 of the signed bytes): past gfx11's VOP3 opcodes.
pub(crate) const GFX10_DOT4C_I32_I8: u16 = 1008;
/// s_ff0_i32_b32 / s_ff0_i32_b64 (the first zero bit): past gfx11's SOP1 opcodes.
pub(crate) const GFX10_S_FF0_B32: u8 = 250;
pub(crate) const GFX10_S_FF0_B64: u8 = 251;
/// The f64 compare-swap, min and max atomics: past gfx11's FLAT opcodes (7-bit field).
pub(crate) const GFX10_ATOMIC_CMPSWAP_F64: u8 = 120;
pub(crate) const GFX10_ATOMIC_MIN_F64: u8 = 121;
pub(crate) const GFX10_ATOMIC_MAX_F64: u8 = 122;

/// The size in bytes of the instruction whose dwords `word(i)` returns, from its format alone:
/// what the survey needs to step over an instruction the decoder refuses.
pub(crate) fn size(word: &mut dyn FnMut(u32) -> ExecResult<u32>) -> ExecResult<u8> {
    let w = word(0)?;
    let (format, op) = classify(w);
    let scalar_literal = |fields: &[u32]| if fields.contains(&(LITERAL as u32)) { 8 } else { 4 };
    let vector_literal = |word: &mut dyn FnMut(u32) -> ExecResult<u32>| -> ExecResult<u8> {
        let w1 = word(1)?;
        let fields = [bits(w1, 0, 9), bits(w1, 9, 9), bits(w1, 18, 9)];
        Ok(if fields.contains(&(LITERAL as u32)) { 12 } else { 8 })
    };
    Ok(match format {
        Format::Sop1 => scalar_literal(&[bits(w, 0, 8)]),
        Format::Sopc | Format::Sop2 => scalar_literal(&[bits(w, 0, 8), bits(w, 8, 8)]),
        Format::Sopp => 4,
        Format::Sopk if mnemonic(w) == Some("s_setreg_imm32_b32") => 8,
        Format::Sopk => 4,
        Format::Vop1 | Format::Vopc | Format::Vop2 => {
            let src0 = bits(w, 0, 9);
            let with_k = format == Format::Vop2 && mnemonic(w).is_some_and(|m| VOP2_WITH_K.contains(&m));
            // SDWA and DPP put their controls in a second dword.
            if src0 == LITERAL as u32 || [SDWA, DPP16, DPP8, DPP8_FI].contains(&src0) || with_k {
                8
            } else {
                4
            }
        }
        Format::Vop3 | Format::Vop3p => vector_literal(word)?,
        Format::Ds | Format::Flat | Format::Smem | Format::Mubuf => 8,
        Format::Other("MTBUF" | "EXP") => 8,
        Format::Other(encoding) => return Err(Fault::Unknown { encoding, opcode: op, word: w }),
    })
}

/// Decodes the gfx10.3 instruction whose dwords `word(i)` returns.
pub(crate) fn decode(word: &mut dyn FnMut(u32) -> ExecResult<u32>) -> ExecResult<Decoded> {
    let w = word(0)?;
    let (format, _) = classify(w);
    let op = twin(w)?;
    let size = size(word)?;
    let done = |inst| Ok(Decoded { inst, size, word: w });
    let literal = |word: &mut dyn FnMut(u32) -> ExecResult<u32>, at: u32| -> ExecResult<u32> {
        if 4 * (at + 1) == size as u32 {
            word(at)
        } else {
            Ok(0)
        }
    };
    match format {
        Format::Sop1 => {
            let k = literal(word, 1)?;
            done(Inst::Sop1 { op: op as u8, sdst: sreg(bits(w, 16, 7)), s0: src(bits(w, 0, 8), k) })
        }
        Format::Sopc => {
            let k = literal(word, 1)?;
            done(Inst::Sopc { op: op as u8, s0: src(bits(w, 0, 8), k), s1: src(bits(w, 8, 8), k) })
        }
        Format::Sop2 => {
            let k = literal(word, 1)?;
            let (s0, s1) = (src(bits(w, 0, 8), k), src(bits(w, 8, 8), k));
            done(Inst::Sop2 { op: op as u8, sdst: sreg(bits(w, 16, 7)), s0, s1 })
        }
        Format::Sopp => done(Inst::Sopp { op: op as u8, simm: bits(w, 0, 16) as u16 }),
        Format::Sopk => {
            let literal = literal(word, 1)?;
            done(Inst::Sopk {
                op: op as u8,
                sdst: sreg(bits(w, 16, 7)),
                simm: bits(w, 0, 16) as u16,
                literal,
            })
        }
        Format::Smem => {
            let w1 = word(1)?;
            done(Inst::Smem {
                sbase: (bits(w, 0, 6) * 2) as u8,
                sdata: sreg(bits(w, 6, 7)),
                dlc: bits(w, 14, 1) != 0,
                glc: bits(w, 16, 1) != 0,
                op: op as u8,
                offset: sext(bits(w1, 0, 21), 21),
                soffset: sreg(bits(w1, 25, 7)),
            })
        }
        Format::Ds => {
            let w1 = word(1)?;
            let (mut data0, mut data1) = (bits(w1, 8, 8) as u8, bits(w1, 16, 8) as u8);
            // gfx10's ds_cmpst_* take the compare value in DATA0 and the new value in DATA1;
            // their gfx11 twins (ds_cmpstore_*) the other way round.
            if mnemonic(w).is_some_and(|m| m.starts_with("ds_cmpst_")) {
                (data0, data1) = (data1, data0);
            }
            done(Inst::Ds(Ds {
                offset0: bits(w, 0, 8) as u8,
                offset1: bits(w, 8, 8) as u8,
                gds: bits(w, 17, 1) != 0,
                op: op as u8,
                addr: bits(w1, 0, 8) as u8,
                data0,
                data1,
                vdst: bits(w1, 24, 8) as u8,
            }))
        }
        Format::Flat => {
            let w1 = word(1)?;
            if bits(w, FLAT_LDS_BIT, 1) != 0 {
                return Err(Fault::unsupported("FLAT loads into LDS (the LDS bit) are not modelled"));
            }
            let seg = bits(w, 14, 2) as u8;
            let saddr = bits(w1, 16, 7);
            // gfx11 says whether scratch has a VGPR address with a bit (SVE); gfx10 with SADDR:
            // NULL means the VGPR address, EXEC_HI neither, an SGPR that SGPR alone.
            let sve = seg == 1 && saddr == NULL_GFX10;
            let saddr = if seg == 1 && saddr == SCRATCH_NO_SADDR { NULL } else { sreg(saddr) };
            done(Inst::Flat(Flat {
                // Signed for scratch and global; the FLAT segment's offset is unsigned.
                offset: if seg == 0 { bits(w, 0, 12) as i32 } else { sext(bits(w, 0, 12), 12) },
                dlc: bits(w, 12, 1) != 0,
                glc: bits(w, 16, 1) != 0,
                slc: bits(w, 17, 1) != 0,
                seg,
                op: op as u8,
                addr: bits(w1, 0, 8) as u8,
                data: bits(w1, 8, 8) as u8,
                saddr,
                sve,
                vdst: bits(w1, 24, 8) as u8,
            }))
        }
        Format::Mubuf => {
            let w1 = word(1)?;
            if bits(w, 16, 1) != 0 {
                return Err(Fault::unsupported("MUBUF loads into LDS (the LDS bit) are not modelled"));
            }
            if bits(w1, 23, 1) != 0 {
                return Err(Fault::unsupported("MUBUF texture-fail reporting (TFE) is not modelled"));
            }
            done(Inst::Mubuf(Mubuf {
                offset: bits(w, 0, 12) as u16,
                offen: bits(w, 12, 1) != 0,
                idxen: bits(w, 13, 1) != 0,
                glc: bits(w, 14, 1) != 0,
                dlc: bits(w, 15, 1) != 0,
                slc: bits(w1, 22, 1) != 0,
                op: op as u8,
                vaddr: bits(w1, 0, 8) as u8,
                vdata: bits(w1, 8, 8) as u8,
                srsrc: (bits(w1, 16, 5) * 4) as u8,
                soffset: src(bits(w1, 24, 8), 0),
            }))
        }
        Format::Vop1 | Format::Vopc | Format::Vop2 => decode_vop_short(w, format, op, size, word),
        Format::Vop3 => {
            let w1 = word(1)?;
            let k = literal(word, 2)?;
            let mut v = plain_valu(ValuEnc::Vop3, op);
            v.vdst = bits(w, 0, 8) as u8;
            v.clamp = bits(w, 15, 1) != 0;
            v.omod = bits(w1, 27, 2) as u8;
            v.neg = bits(w1, 29, 3) as u8;
            for i in 0..3 {
                v.src[i] = src(bits(w1, 9 * i as u32, 9), k);
            }
            if has_sdst(op) {
                v.sdst = sreg(bits(w, 8, 7));
            } else {
                v.abs = bits(w, 8, 3) as u8;
                v.opsel = bits(w, 11, 4) as u8;
            }
            if writes_sgpr_through_vdst(w) {
                v.vdst = sreg(v.vdst as u32);
            }
            if op < 256 {
                v.sdst = if op >= 128 { EXEC_LO } else { sreg(bits(w, 0, 8)) };
            }
            fix_implicit(&mut v, false);
            done(Inst::Valu(Box::new(v)))
        }
        Format::Vop3p => {
            let w1 = word(1)?;
            let k = literal(word, 2)?;
            let mut v = plain_valu(ValuEnc::Vop3p, op);
            v.vdst = bits(w, 0, 8) as u8;
            v.neg_hi = bits(w, 8, 3) as u8;
            v.opsel = bits(w, 11, 3) as u8;
            v.opsel_hi = (bits(w1, 27, 2) | (bits(w, 14, 1) << 2)) as u8;
            v.clamp = bits(w, 15, 1) != 0;
            v.neg = bits(w1, 29, 3) as u8;
            for i in 0..3 {
                v.src[i] = src(bits(w1, 9 * i as u32, 9), k);
            }
            done(Inst::Valu(Box::new(v)))
        }
        // `twin` refuses every other format.
        Format::Other(encoding) => Err(Fault::Unknown { encoding, opcode: 0, word: w }),
    }
}

/// v_readlane and v_readfirstlane write an SGPR through the VGPR destination field.
fn writes_sgpr_through_vdst(w: u32) -> bool {
    mnemonic(w).is_some_and(|m| m.starts_with("v_readlane") || m.starts_with("v_readfirstlane"))
}

fn decode_vop_short(
    w: u32,
    format: Format,
    op: u16,
    size: u8,
    word: &mut dyn FnMut(u32) -> ExecResult<u32>,
) -> ExecResult<Decoded> {
    let src0_field = bits(w, 0, 9);
    if [DPP16, DPP8, DPP8_FI].contains(&src0_field) {
        return Err(Fault::unsupported(format!(
            "DPP operand (src0 {src0_field:#x}) on VALU opcode {op} is not modelled"
        )));
    }
    let enc = match format {
        Format::Vop1 => ValuEnc::Vop1,
        Format::Vopc => ValuEnc::Vopc,
        _ => ValuEnc::Vop2,
    };
    let mut v = plain_valu(enc, op);
    let vsrc1 = bits(w, 9, 8);
    let vdst = bits(w, 17, 8);
    if src0_field == SDWA {
        decode_sdwa(&mut v, word(1)?, vsrc1)?;
    } else {
        let literal = if size == 8 { word(1)? } else { 0 };
        v.src[0] = src(src0_field, literal);
        v.src[1] = Src::Vgpr(vsrc1 as u8);
        // fmamk (D = S0 * K + S1) and fmaak (D = S0 * S1 + K) keep K in src2.
        if matches!(op, 300 | 301 | 311 | 312) {
            v.src[2] = Src::Literal(literal);
        }
        if enc == ValuEnc::Vopc {
            v.sdst = VCC_LO;
        }
    }
    match enc {
        ValuEnc::Vop1 => {
            v.vdst = if writes_sgpr_through_vdst(w) { sreg(vdst) } else { vdst as u8 };
            v.src[1] = Src::Int(0);
        }
        // gfx10's cmpx forms write EXEC only.
        ValuEnc::Vopc if op >= 128 => v.sdst = EXEC_LO,
        ValuEnc::Vopc => {}
        _ => v.vdst = vdst as u8,
    }
    // gfx10 has no true16: 16-bit operands are the low halves, as opsel 0 says in gfx11 terms.
    fix_implicit(&mut v, true);
    Ok(Decoded { inst: Inst::Valu(Box::new(v)), size, word: w })
}

/// The second dword of an SDWA form: the sources (src0 any register, src1 the VSRC1 field, each
/// an SGPR when its S bit is set), their selections and modifiers, and for VOPC the mask
/// destination, else the destination selection, clamp and output modifier.
fn decode_sdwa(v: &mut Valu, w1: u32, vsrc1: u32) -> ExecResult<()> {
    let vgpr_unless = |is_sgpr: u32| if is_sgpr != 0 { 0 } else { 256 };
    v.src[0] = src(bits(w1, 0, 8) + vgpr_unless(bits(w1, 23, 1)), 0);
    if v.enc != ValuEnc::Vop1 {
        v.src[1] = src(vsrc1 + vgpr_unless(bits(w1, 31, 1)), 0);
    }
    if matches!(v.src[0], Src::Literal(_)) || matches!(v.src[1], Src::Literal(_)) {
        return Err(Fault::unsupported("a literal constant in an SDWA operand"));
    }
    v.neg = (bits(w1, 20, 1) | bits(w1, 28, 1) << 1) as u8;
    v.abs = (bits(w1, 21, 1) | bits(w1, 29, 1) << 1) as u8;
    let mut sdwa = Sdwa {
        src_sel: [bits(w1, 16, 3) as u8, bits(w1, 24, 3) as u8],
        src_sext: [bits(w1, 19, 1) != 0, bits(w1, 27, 1) != 0],
        dst_sel: 6,
        dst_unused: 0,
    };
    if v.enc == ValuEnc::Vopc {
        v.sdst = if bits(w1, 15, 1) != 0 { sreg(bits(w1, 8, 7)) } else { VCC_LO };
    } else {
        sdwa.dst_sel = bits(w1, 8, 3) as u8;
        sdwa.dst_unused = bits(w1, 11, 2) as u8;
        v.clamp = bits(w1, 13, 1) != 0;
        v.omod = bits(w1, 14, 2) as u8;
    }
    if v.enc == ValuEnc::Vop1 {
        sdwa.src_sel[1] = 6;
    }
    v.sdwa = Some(sdwa);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_words(words: &[u32]) -> ExecResult<Decoded> {
        decode(&mut |i| words.get(i as usize).copied().ok_or_else(|| Fault::unsupported("past the words")))
    }

    #[test]
    fn dpp8_with_fetch_inactive_is_refused_and_sized_with_its_second_dword() {
        // v_add_f32_dpp v1, v136, v2 dpp8:[6,0,3,5,7,7,7,7] fi:1
        let words = [0x060204ea, 0xfffac688];
        assert!(decode_words(&words).is_err());
        assert_eq!(size(&mut |i| Ok(words[i as usize])).unwrap(), 8);
    }

    #[test]
    fn flat_loads_into_lds_are_refused() {
        // global_load_dword v[0:1], off lds: the data goes to LDS, not to a VGPR.
        assert!(decode_words(&[0xdc30a000, 0x0b7d0000]).is_err());
        // Without the LDS bit it is an ordinary load into v11.
        assert!(decode_words(&[0xdc308000, 0x0b7d0000]).is_ok());
    }
}
