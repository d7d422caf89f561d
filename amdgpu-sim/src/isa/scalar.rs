//! Scalar instructions: SOP1, SOP2, SOPK, SOPC, SOPP (control flow, waits, barrier) and SMEM.

use pm4::Gfx;

use super::error::{ExecResult, Fault};
use super::memory::{read_u32, GlobalMemory};
use super::operand::{Src, EXEC_LO, M0, NULL};
use super::wave::{Wave, WaveStatus, SGPRS};

/// Hardware register ids of `s_getreg`/`s_setreg` (the FLAT_SCRATCH halves exist on gfx10.3).
const HWREG_MODE: u16 = 1;
const HWREG_FLAT_SCR_LO: u16 = 20;
const HWREG_FLAT_SCR_HI: u16 = 21;

fn unknown(encoding: &'static str, op: u8, word: u32) -> Fault {
    Fault::Unknown { encoding, opcode: op as u32, word }
}

fn bfe64(v: u64, s1: u32, signed: bool) -> u64 {
    let off = s1 & 63;
    let width = (s1 >> 16) & 127;
    if width == 0 {
        return 0;
    }
    let width = width.min(64);
    let shifted = v >> off;
    if width >= 64 {
        return shifted;
    }
    let field = shifted & ((1u64 << width) - 1);
    if signed && field >> (width - 1) & 1 != 0 {
        field | !((1u64 << width) - 1)
    } else {
        field
    }
}

/// Bitfield extract of `width` bits (clamped to 32) at `off`, sign-extended when `signed`.
pub(crate) fn bfe32(a: u32, off: u32, width: u32, signed: bool) -> u32 {
    let width = width.min(32);
    if width == 0 {
        return 0;
    }
    if signed {
        (((a >> off) << (32 - width)) as i32 >> (32 - width)) as u32
    } else if width == 32 {
        a >> off
    } else {
        (a >> off) & ((1u32 << width) - 1)
    }
}

pub(crate) fn exec_sop2(w: &mut Wave, op: u8, sdst: u8, s0: &Src, s1: &Src, word: u32) -> ExecResult {
    let is64 = matches!(op, 9 | 11 | 13 | 23 | 25 | 27 | 29 | 31 | 33 | 35 | 37 | 40 | 41 | 43 | 49);
    if is64 {
        let a = w.scalar64(s0, false)?;
        // Shift amounts and bitfield controls are 32-bit; bfm_b64 takes two 32-bit sources.
        let b64 = || w.scalar64(s1, false);
        let b32 = w.scalar32(s1)?;
        let (d, _): (u64, Option<bool>) = match op {
            9 => (a << (b32 & 63), None),
            11 => (a >> (b32 & 63), None),
            13 => (((a as i64) >> (b32 & 63)) as u64, None),
            23 => (a & b64()?, None),
            25 => (a | b64()?, None),
            27 => (a ^ b64()?, None),
            29 => (!(a & b64()?), None),
            31 => (!(a | b64()?), None),
            33 => (!(a ^ b64()?), None),
            35 => (a & !b64()?, None),
            37 => (a | !b64()?, None),
            40 => (bfe64(a, b32, false), None),
            41 => (bfe64(a, b32, true), None),
            43 => {
                let width = w.scalar32(s0)? & 63;
                (((1u64 << width) - 1) << (b32 & 63), None)
            }
            49 => (if w.scc { a } else { b64()? }, Some(w.scc)),
            _ => return Err(unknown("SOP2", op, word)),
        };
        w.write_sgpr64(sdst, d)?;
        // 49 (cselect) and 43 (bfm) leave SCC alone; the rest set it to result != 0.
        if !matches!(op, 43 | 49) {
            w.scc = d != 0;
        }
        return Ok(());
    }
    let a = w.scalar32(s0)?;
    let b = w.scalar32(s1)?;
    let scc_in = w.scc;
    let nz = |d: u32| Some(d != 0);
    let (d, scc): (u32, Option<bool>) = match op {
        0 => {
            let (d, c) = a.overflowing_add(b);
            (d, Some(c))
        }
        1 => (a.wrapping_sub(b), Some(b > a)),
        2 => {
            let (d, o) = (a as i32).overflowing_add(b as i32);
            (d as u32, Some(o))
        }
        3 => {
            let (d, o) = (a as i32).overflowing_sub(b as i32);
            (d as u32, Some(o))
        }
        4 => {
            let s = a as u64 + b as u64 + scc_in as u64;
            (s as u32, Some(s >> 32 != 0))
        }
        5 => {
            let s = (a as u64).wrapping_sub(b as u64).wrapping_sub(scc_in as u64);
            (s as u32, Some((b as u64 + scc_in as u64) > a as u64))
        }
        6 => {
            let d = ((a as i32 as i64) - (b as i32 as i64)).unsigned_abs() as u32;
            (d, nz(d))
        }
        8 => {
            let d = a << (b & 31);
            (d, nz(d))
        }
        10 => {
            let d = a >> (b & 31);
            (d, nz(d))
        }
        12 => {
            let d = ((a as i32) >> (b & 31)) as u32;
            (d, nz(d))
        }
        14..=17 => {
            let s = ((a as u64) << (op - 13)) + b as u64;
            (s as u32, Some(s >> 32 != 0))
        }
        18 => ((a as i32).min(b as i32) as u32, Some((a as i32) < (b as i32))),
        19 => (a.min(b), Some(a < b)),
        20 => ((a as i32).max(b as i32) as u32, Some((a as i32) > (b as i32))),
        21 => (a.max(b), Some(a > b)),
        22 | 24 | 26 | 28 | 30 | 32 | 34 | 36 => {
            let d = match op {
                22 => a & b,
                24 => a | b,
                26 => a ^ b,
                28 => !(a & b),
                30 => !(a | b),
                32 => !(a ^ b),
                34 => a & !b,
                _ => a | !b,
            };
            (d, nz(d))
        }
        38 | 39 => {
            let d = bfe32(a, b & 31, (b >> 16) & 127, op == 39);
            (d, nz(d))
        }
        42 => (((1u32 << (a & 31)) - 1) << (b & 31), None),
        44 => (a.wrapping_mul(b), None),
        45 => (((a as u64 * b as u64) >> 32) as u32, None),
        46 => (((a as i32 as i64 * b as i32 as i64) >> 32) as u32, None),
        48 => (if scc_in { a } else { b }, None),
        50 => ((a & 0xffff) | (b << 16), None),
        51 => ((a & 0xffff) | (b & 0xffff_0000), None),
        52 => ((a >> 16) | (b & 0xffff_0000), None),
        53 => ((a >> 16) | (b << 16), None),
        _ => return Err(unknown("SOP2", op, word)),
    };
    w.write_sgpr(sdst, d)?;
    if let Some(s) = scc {
        w.scc = s;
    }
    Ok(())
}

pub(crate) fn exec_sop1(w: &mut Wave, op: u8, sdst: u8, s0: &Src, word: u32) -> ExecResult {
    // 64-bit moves and the 64-bit forms of the exec-mask instructions.
    match op {
        1 => {
            let v = w.scalar64(s0, false)?;
            return w.write_sgpr64(sdst, v);
        }
        3 => {
            if w.scc {
                let v = w.scalar64(s0, false)?;
                w.write_sgpr64(sdst, v)?;
            }
            return Ok(());
        }
        31 => {
            let v = !w.scalar64(s0, false)?;
            w.scc = v != 0;
            return w.write_sgpr64(sdst, v);
        }
        25 => {
            let d = w.scalar64(s0, false)?.count_ones();
            w.scc = d != 0;
            return w.write_sgpr(sdst, d);
        }
        71 => return w.write_sgpr64(sdst, w.pc),
        72 => {
            w.pc = w.scalar64(s0, false)? & !3;
            return Ok(());
        }
        73 => {
            let target = w.scalar64(s0, false)? & !3;
            w.write_sgpr64(sdst, w.pc)?;
            w.pc = target;
            return Ok(());
        }
        64..=67 => return movrel(w, op, sdst, s0),
        68 => return movrelsd_2(w, sdst, s0),
        // gfx10.3's s_ff0_i32_b32/b64: the first zero bit, -1 when none.
        super::decode_gfx10::GFX10_S_FF0_B32 | super::decode_gfx10::GFX10_S_FF0_B64
            if w.gfx == Gfx::Gfx10_3 =>
        {
            let a = if op == super::decode_gfx10::GFX10_S_FF0_B64 {
                w.scalar64(s0, false)?
            } else {
                u64::from(w.scalar32(s0)?) | 0xffff_ffff_0000_0000
            };
            let n = (!a).trailing_zeros();
            return w.write_sgpr(sdst, if n == 64 { u32::MAX } else { n });
        }
        // 64-bit bit operations.
        5 => return w.write_sgpr64(sdst, w.scalar64(s0, false)?.reverse_bits()),
        9 | 11 | 13 => {
            let a = w.scalar64(s0, false)?;
            let n = match op {
                9 => a.trailing_zeros(),
                11 => a.leading_zeros(),
                // s_cls_i32_i64: the leading bits equal to the sign bit, it included; -1 when
                // all are.
                _ => (if (a as i64) < 0 { !a } else { a }).leading_zeros(),
            };
            return w.write_sgpr(sdst, if n == 64 { u32::MAX } else { n });
        }
        17 | 19 => {
            let bit = 1u64 << (w.scalar32(s0)? & 63);
            let d = w.read_sgpr64(sdst);
            return w.write_sgpr64(sdst, if op == 17 { d & !bit } else { d | bit });
        }
        20 => {
            let a = w.scalar32(s0)?;
            let d = (0..32).fold(0u64, |d, i| d | (u64::from(a >> i & 1) * (3 << (2 * i))));
            return w.write_sgpr64(sdst, d);
        }
        23 => {
            let d = w.scalar64(s0, false)?.count_zeros();
            w.scc = d != 0;
            return w.write_sgpr(sdst, d);
        }
        26 | 27 => {
            // One bit per nibble: whether any of its 4 bits is set.
            let a = if op == 27 { w.scalar64(s0, false)? } else { u64::from(w.scalar32(s0)?) };
            let d = (0..16).fold(0u64, |d, i| d | u64::from(a >> (4 * i) & 15 != 0) << i);
            w.scc = d != 0;
            return if op == 27 { w.write_sgpr64(sdst, d) } else { w.write_sgpr(sdst, d as u32) };
        }
        28 | 29 => {
            // Whole-quad mode: a nibble becomes all ones if any of its bits is set.
            let a = if op == 29 { w.scalar64(s0, false)? } else { u64::from(w.scalar32(s0)?) };
            let d = (0..16).fold(0u64, |d, i| d | if a >> (4 * i) & 15 != 0 { 15 << (4 * i) } else { 0 });
            w.scc = d != 0;
            return if op == 29 { w.write_sgpr64(sdst, d) } else { w.write_sgpr(sdst, d as u32) };
        }
        33 | 35 | 37 | 39 | 41 | 43 | 45 | 47 | 49 | 51 | 53 | 55 if w.width == 64 => {
            let a = w.scalar64(s0, false)?;
            return exec_mask_op(w, op - 1, sdst, a);
        }
        33 | 35 | 37 | 39 | 41 | 43 | 45 | 47 | 49 | 51 | 53 | 55 => {
            return Err(Fault::unsupported(format!(
                "64-bit exec-mask instruction (SOP1 opcode {op}) in a wave32 kernel"
            )))
        }
        _ => {}
    }
    let a = w.scalar32(s0)?;
    let (d, scc): (u32, Option<bool>) = match op {
        0 => (a, None),
        2 => {
            if w.scc {
                w.write_sgpr(sdst, a)?;
            }
            return Ok(());
        }
        4 => (a.reverse_bits(), None),
        8 => (if a == 0 { u32::MAX } else { a.trailing_zeros() }, None),
        10 => (if a == 0 { u32::MAX } else { a.leading_zeros() }, None),
        12 => {
            let s = a as i32;
            let n = if s < 0 { (!a).leading_zeros() } else { a.leading_zeros() };
            (if n == 32 { u32::MAX } else { n }, None)
        }
        14 => (a as u8 as i8 as i32 as u32, None),
        15 => (a as u16 as i16 as i32 as u32, None),
        16 => (w.read_sgpr(sdst) & !(1u32 << (a & 31)), None),
        18 => (w.read_sgpr(sdst) | (1u32 << (a & 31)), None),
        21 => {
            let d = (a as i32).unsigned_abs();
            (d, Some(d != 0))
        }
        22 => {
            let d = a.count_zeros();
            (d, Some(d != 0))
        }
        24 => {
            let d = a.count_ones();
            (d, Some(d != 0))
        }
        30 => (!a, Some(a != u32::MAX)),
        32 | 34 | 36 | 38 | 40 | 42 | 44 | 46 | 48 | 50 | 52 | 54 if w.width == 32 => {
            return exec_mask_op(w, op, sdst, a as u64);
        }
        _ => return Err(unknown("SOP1", op, word)),
    };
    w.write_sgpr(sdst, d)?;
    if let Some(s) = scc {
        w.scc = s;
    }
    Ok(())
}

/// The exec-mask instructions (s_and_saveexec and friends; `op` is the 32-bit opcode, the
/// 64-bit form of a wave64 is the next one) with the source mask `a`.
fn exec_mask_op(w: &mut Wave, op: u8, sdst: u8, a: u64) -> ExecResult {
    let exec = w.exec();
    let new = match op {
        32 => a & exec,
        34 => a | exec,
        36 => a ^ exec,
        38 => !(a & exec),
        40 => !(a | exec),
        42 => !(a ^ exec),
        44 | 52 => !a & exec,
        46 => !a | exec,
        48 | 54 => a & !exec,
        _ => a | !exec,
    };
    let lanes = if w.width == 64 { u64::MAX } else { u32::MAX as u64 };
    let new = new & lanes;
    w.set_exec(new);
    w.scc = new != 0;
    // The *_wrexec forms return the new mask, the *_saveexec forms the old one.
    let d = if matches!(op, 52 | 54) { new } else { exec };
    if sdst != EXEC_LO {
        w.write_mask(sdst, d)?;
    }
    Ok(())
}

/// s_movrels (read s[index + M0]) and s_movreld (write s[D + M0]), 32 and 64 bit.
fn movrel(w: &mut Wave, op: u8, sdst: u8, s0: &Src) -> ExecResult {
    let m0 = w.read_sgpr(M0);
    let n = if op % 2 == 1 { 2 } else { 1 };
    let at = |base: u8| -> ExecResult<u8> {
        let i = base as u64 + m0 as u64;
        if i + n > SGPRS as u64 {
            return Err(Fault::unsupported(format!("s_movrel: s{base} + M0 ({m0}) is past s105")));
        }
        Ok(i as u8)
    };
    if op <= 65 {
        let Src::Sgpr(base) = *s0 else {
            return Err(Fault::unsupported("s_movrels needs an SGPR source"));
        };
        let src = at(base)?;
        if n == 2 {
            w.write_sgpr64(sdst, w.read_sgpr64(src))
        } else {
            w.write_sgpr(sdst, w.read_sgpr(src))
        }
    } else {
        let dst = at(sdst)?;
        if n == 2 {
            let v = w.scalar64(s0, false)?;
            w.write_sgpr64(dst, v)
        } else {
            let v = w.scalar32(s0)?;
            w.write_sgpr(dst, v)
        }
    }
}

/// s_movrelsd_2_b32: s[D + M0[25:16]] = s[S0 + M0[9:0]].
fn movrelsd_2(w: &mut Wave, sdst: u8, s0: &Src) -> ExecResult {
    let Src::Sgpr(base) = *s0 else {
        return Err(Fault::unsupported("s_movrelsd_2 needs an SGPR source"));
    };
    let m0 = w.read_sgpr(M0) as usize;
    let (src, dst) = (base as usize + (m0 & 0x3ff), sdst as usize + ((m0 >> 16) & 0x3ff));
    if src >= SGPRS || dst >= SGPRS {
        return Err(Fault::unsupported(format!("s_movrelsd_2: s{src} or s{dst} is past s105")));
    }
    let v = w.read_sgpr(src as u8);
    w.write_sgpr(dst as u8, v)
}

pub(crate) fn exec_sopk(w: &mut Wave, op: u8, sdst: u8, simm: u16, word: u32) -> ExecResult {
    let sx = simm as i16 as i32;
    let zx = simm as u32;
    let d = w.read_sgpr(sdst);
    match op {
        0 => w.write_sgpr(sdst, sx as u32)?,
        // s_version: a marker for tools.
        1 => {}
        2 => {
            if w.scc {
                w.write_sgpr(sdst, sx as u32)?
            }
        }
        3 => w.scc = d as i32 == sx,
        4 => w.scc = d as i32 != sx,
        5 => w.scc = d as i32 > sx,
        6 => w.scc = d as i32 >= sx,
        7 => w.scc = (d as i32) < sx,
        8 => w.scc = d as i32 <= sx,
        9 => w.scc = d == zx,
        10 => w.scc = d != zx,
        11 => w.scc = d > zx,
        12 => w.scc = d >= zx,
        13 => w.scc = d < zx,
        14 => w.scc = d <= zx,
        15 => {
            let (r, o) = (d as i32).overflowing_add(sx);
            w.write_sgpr(sdst, r as u32)?;
            w.scc = o;
        }
        16 => w.write_sgpr(sdst, (d as i32).wrapping_mul(sx) as u32)?,
        17 => {
            let id = simm & 63;
            let offset = (simm >> 6) & 31;
            let size = ((simm >> 11) & 31) + 1;
            let value = match id {
                HWREG_MODE => w.mode,
                HWREG_FLAT_SCR_LO if w.gfx == Gfx::Gfx10_3 => w.flat_scratch as u32,
                HWREG_FLAT_SCR_HI if w.gfx == Gfx::Gfx10_3 => (w.flat_scratch >> 32) as u32,
                _ => {
                    return Err(Fault::unsupported(format!(
                        "s_getreg_b32 of hardware register {id} (only MODE and, on gfx10.3, FLAT_SCRATCH are modelled)"
                    )))
                }
            };
            let v = (value >> offset) & if size >= 32 { u32::MAX } else { (1u32 << size) - 1 };
            w.write_sgpr(sdst, v)?;
        }
        // gfx10.3 kernels set FLAT_SCRATCH themselves, from their flat-scratch-init SGPRs.
        18 if w.gfx == Gfx::Gfx10_3
            && matches!(simm & 63, HWREG_FLAT_SCR_LO | HWREG_FLAT_SCR_HI)
            && simm >> 6 == 31 << 5 =>
        {
            let v = u64::from(w.read_sgpr(sdst));
            w.flat_scratch = if simm & 63 == HWREG_FLAT_SCR_LO {
                (w.flat_scratch & !0xffff_ffff) | v
            } else {
                (w.flat_scratch & 0xffff_ffff) | v << 32
            };
        }
        18 | 19 => {
            return Err(Fault::unsupported(
                "s_setreg: changing hardware registers (MODE rounding/denormals) is not modelled",
            ))
        }
        20 => {
            w.write_sgpr64(sdst, w.pc)?;
            w.pc = w.pc.wrapping_add((sx as i64 * 4) as u64);
        }
        // s_waitcnt_vscnt/vmcnt/expcnt/lgkmcnt: memory is synchronous, nothing to wait for.
        24..=27 => {}
        _ => return Err(unknown("SOPK", op, word)),
    }
    Ok(())
}

pub(crate) fn exec_sopc(w: &mut Wave, op: u8, s0: &Src, s1: &Src, word: u32) -> ExecResult {
    if matches!(op, 16 | 17) {
        let (a, b) = (w.scalar64(s0, false)?, w.scalar64(s1, false)?);
        w.scc = if op == 16 { a == b } else { a != b };
        return Ok(());
    }
    if matches!(op, 14 | 15) {
        let (a, b) = (w.scalar64(s0, false)?, w.scalar32(s1)?);
        let bit = a >> (b & 63) & 1;
        w.scc = if op == 14 { bit == 0 } else { bit == 1 };
        return Ok(());
    }
    let (a, b) = (w.scalar32(s0)?, w.scalar32(s1)?);
    let (ai, bi) = (a as i32, b as i32);
    w.scc = match op {
        0 => ai == bi,
        1 => ai != bi,
        2 => ai > bi,
        3 => ai >= bi,
        4 => ai < bi,
        5 => ai <= bi,
        6 => a == b,
        7 => a != b,
        8 => a > b,
        9 => a >= b,
        10 => a < b,
        11 => a <= b,
        12 => a >> (b & 31) & 1 == 0,
        13 => a >> (b & 31) & 1 == 1,
        _ => return Err(unknown("SOPC", op, word)),
    };
    Ok(())
}

pub(crate) fn exec_sopp(w: &mut Wave, op: u8, simm: u16, word: u32) -> ExecResult {
    let target = w.pc.wrapping_add((simm as i16 as i64 * 4) as u64);
    match op {
        // s_nop, s_setkill, s_sleep, s_set_inst_prefetch_distance, s_clause, s_delay_alu,
        // s_waitcnt_depctr, s_waitcnt, s_wait_idle, s_wait_event, s_setprio, s_ttracedata,
        // s_icache_inv: timing, prefetch or caches only.
        // s_wakeup (no wave here sleeps waiting for it), s_incperflevel, s_decperflevel,
        // s_ttracedata_imm: scheduling and tracing hints.
        0 | 1 | 3 | 4 | 5 | 7 | 8 | 9 | 10 | 11 | 52 | 53 | 56 | 57 | 58 | 59 | 60 => {}
        17 => {
            if simm != 0 {
                return Err(Fault::unsupported(format!(
                    "s_round_mode {simm} (only round-to-nearest-even is modelled)"
                )));
            }
        }
        18 => {
            if simm & 0xf != 0xf {
                return Err(Fault::unsupported(format!(
                    "s_denorm_mode {simm:#x} (only denormals preserved is modelled)"
                )));
            }
        }
        32 => w.pc = target,
        33 if !w.scc => w.pc = target,
        34 if w.scc => w.pc = target,
        35 if w.vcc() == 0 => w.pc = target,
        36 if w.vcc() != 0 => w.pc = target,
        37 if w.exec() == 0 => w.pc = target,
        38 if w.exec() != 0 => w.pc = target,
        33..=38 => {}
        48 => w.status = WaveStatus::Ended,
        61 => w.status = WaveStatus::AtBarrier,
        54 => {
            // Only MSG_DEALLOC_VGPRS (3), which LLVM may send before s_endpgm, has no effect here.
            if simm & 0xff != 3 {
                return Err(Fault::unsupported(format!("s_sendmsg {simm:#x}")));
            }
        }
        2 | 16 | 55 => {
            return Err(Fault::unsupported(format!("SOPP opcode {op} (halt/trap) stops the wave")))
        }
        31 => {
            return Err(Fault::unsupported("executed s_code_end padding (a jump past the end of the kernel)"))
        }
        _ => return Err(unknown("SOPP", op, word)),
    }
    Ok(())
}

// The SMEM fields are passed unpacked, as the other scalar executors take theirs.
#[allow(clippy::too_many_arguments)]
pub(crate) fn exec_smem(
    w: &mut Wave,
    mem: &mut dyn GlobalMemory,
    op: u8,
    sdata: u8,
    sbase: u8,
    offset: i32,
    soffset: u8,
    word: u32,
) -> ExecResult {
    let dwords: usize = match op {
        0 => 1,
        1 => 2,
        2 => 4,
        3 => 8,
        4 => 16,
        // s_dcache_inv, s_gl1_inv: no caches.
        32 | 33 => return Ok(()),
        8..=12 => {
            let dwords = 1u32 << (op - 8);
            let soff = if soffset == NULL { 0 } else { w.read_sgpr(soffset) };
            let offset = (offset as u32).wrapping_add(soff);
            let sdata = (sdata != NULL).then_some(sdata);
            if let Some(s) = sdata {
                if s as usize + dwords as usize > SGPRS {
                    return Err(Fault::unsupported(format!(
                        "s_buffer_load into s{s}..+{dwords} runs past s105"
                    )));
                }
            }
            return super::buffer::s_buffer_load(w, mem, sbase, sdata, offset, dwords);
        }
        _ => return Err(unknown("SMEM", op, word)),
    };
    if sdata as usize + dwords > SGPRS && sdata != NULL {
        return Err(Fault::unsupported(format!("s_load into s{sdata}..+{dwords} runs past s105")));
    }
    let soff = if soffset == NULL { 0 } else { w.read_sgpr(soffset) };
    let base = w.read_sgpr64(sbase) & 0xffff_ffff_ffff;
    let addr = base.wrapping_add(offset as i64 as u64).wrapping_add(soff as u64) & !3;
    for i in 0..dwords {
        let v = read_u32(mem, addr + 4 * i as u64)?;
        // A load into NULL still reads (and can fault) but keeps nothing.
        if sdata != NULL {
            w.write_sgpr(sdata + i as u8, v)?;
        }
    }
    Ok(())
}
