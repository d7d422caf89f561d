//! VOP3P: packed math on two 16-bit halves per register (op_sel picks the half each source's low
//! result reads, op_sel_hi the half its high result reads; neg and neg_hi negate them), the
//! integer dot products, and the mixed-precision FMAs (each source an f32 or, with op_sel_hi,
//! the f16 half op_sel picks).
//!
//! Inline constants follow the hardware as LLVM describes it: integer constants are their
//! sign-extended 32-bit value; float constants are the f16 value in the low half (high half 0)
//! for operands of f16 operations, and the f32 value for integer and f32 operands.

use super::decode::Valu;
use super::error::{ExecResult, Fault};
use super::float::{f16_to_f32, f32_to_f16, f64_to_f16, minmax32};
use super::modifiers::{self, clamp_float};
use super::operand::Src;
use super::valu16::{f64_to_bf16, flush_denormal};
use super::wave::{Wave, LANES};

type L<T> = [T; LANES];

/// gfx10.3 VOP3P opcodes with no gfx11 twin, decoded into opcodes of their own past the 7-bit
/// field of the encoding, so that no gfx11 word can name them (see `decode_gfx10`).
pub(crate) const DOT2_I32_I16: u16 = 0x100;
pub(crate) const DOT2_U32_U16: u16 = 0x101;
pub(crate) const DOT4_I32_I8: u16 = 0x102;
pub(crate) const DOT8_I32_I4: u16 = 0x103;

/// How an operand's bits are read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Two f16 halves.
    F16,
    /// Two 16-bit integers, or bytes/nibbles of a dword.
    Int,
    /// One f32.
    F32,
}

/// Source `i`'s 32 bits per lane, with the inline constant rules above; op_sel and op_sel_hi
/// are applied by `half`.
fn raw(w: &Wave, v: &Valu, i: usize, kind: Kind) -> ExecResult<L<u32>> {
    match (v.src[i], kind) {
        (Src::Float(_), Kind::F16) => w.src16(&v.src[i]),
        _ => w.src32(&v.src[i]),
    }
}

/// The half of `x` that op_sel (`hi` false) or op_sel_hi (`hi` true) selects for source `i`.
fn half(v: &Valu, i: usize, hi: bool, x: u32) -> u16 {
    let sel = if hi { v.opsel_hi >> i & 1 } else { v.opsel >> i & 1 };
    if sel != 0 {
        (x >> 16) as u16
    } else {
        x as u16
    }
}

/// A packed source as its two selected halves per lane: [low result's, high result's].
fn packed(w: &Wave, v: &Valu, i: usize, kind: Kind) -> ExecResult<L<[u16; 2]>> {
    let x = raw(w, v, i, kind)?;
    w.handle(modifiers::opsel(i));
    Ok(std::array::from_fn(|l| [half(v, i, false, x[l]), half(v, i, true, x[l])]))
}

/// A packed f16 source as f32 values, with neg (low) and neg_hi (high) applied.
fn packed_f16(w: &Wave, v: &Valu, i: usize) -> ExecResult<L<[f32; 2]>> {
    let p = packed(w, v, i, Kind::F16)?;
    w.handle(modifiers::neg(i) | modifiers::neg_hi(i));
    let (neg_lo, neg_hi) = (v.neg >> i & 1 != 0, v.neg_hi >> i & 1 != 0);
    Ok(p.map(|[lo, hi]| {
        let lo = if neg_lo { lo ^ 0x8000 } else { lo };
        let hi = if neg_hi { hi ^ 0x8000 } else { hi };
        [f16_to_f32(lo), f16_to_f32(hi)]
    }))
}

/// A packed bf16 source as f32 values (exact), with neg and neg_hi applied.
fn packed_bf16(w: &Wave, v: &Valu, i: usize) -> ExecResult<L<[f32; 2]>> {
    let p = packed(w, v, i, Kind::Int)?;
    w.handle(modifiers::neg(i) | modifiers::neg_hi(i));
    let (neg_lo, neg_hi) = (v.neg >> i & 1 != 0, v.neg_hi >> i & 1 != 0);
    Ok(p.map(|[lo, hi]| {
        let lo = if neg_lo { lo ^ 0x8000 } else { lo };
        let hi = if neg_hi { hi ^ 0x8000 } else { hi };
        [f32::from_bits(u32::from(lo) << 16), f32::from_bits(u32::from(hi) << 16)]
    }))
}

/// A 32-bit source read whole (an f32 or the dword of a dot product's accumulator): op_sel
/// and neg are not applied to it, so they are left unmarked and refuse the instruction.
fn whole(w: &Wave, v: &Valu, i: usize, kind: Kind) -> ExecResult<L<u32>> {
    raw(w, v, i, kind)
}

fn write(w: &mut Wave, v: &Valu, r: &L<u32>) {
    let exec = w.exec();
    w.write_vgpr(v.vdst as usize, r, exec);
}

pub(crate) fn exec_vop3p(w: &mut Wave, v: &Valu, word: u32) -> ExecResult {
    match v.op {
        0..=13 => packed_int(w, v),
        14..=18 => packed_float(w, v),
        19 | 26 => dot2_f32(w, v),
        22..=25 | DOT4_I32_I8 | DOT8_I32_I4 => dot_bytes(w, v),
        DOT2_I32_I16 | DOT2_U32_U16 => dot2_int16(w, v),
        32..=34 => fma_mix(w, v),
        64..=69 => wmma(w, v),
        op => Err(Fault::Unknown { encoding: "VOP3P", opcode: op as u32, word }),
    }
}

/// v_pk_{mad_i16, mul_lo_u16, add_i16, sub_i16, lshlrev_b16, lshrrev_b16, ashrrev_i16, max_i16,
/// min_i16, mad_u16, add_u16, sub_u16, max_u16, min_u16}. Clamp saturates the adds and
/// subtracts; on the others it is refused.
fn packed_int(w: &mut Wave, v: &Valu) -> ExecResult {
    let op = v.op;
    let three = matches!(op, 0 | 9);
    let a = packed(w, v, 0, Kind::Int)?;
    let b = packed(w, v, 1, Kind::Int)?;
    let c = if three { packed(w, v, 2, Kind::Int)? } else { [[0; 2]; LANES] };
    let sat = matches!(op, 2 | 3 | 10 | 11) && {
        w.handle(modifiers::CLAMP);
        v.clamp
    };
    let one = |a: u16, b: u16, c: u16| -> u16 {
        let (sa, sb, sc) = (a as i16, b as i16, c as i16);
        match op {
            0 => sa.wrapping_mul(sb).wrapping_add(sc) as u16,
            1 => a.wrapping_mul(b),
            2 if sat => sa.saturating_add(sb) as u16,
            2 => sa.wrapping_add(sb) as u16,
            3 if sat => sa.saturating_sub(sb) as u16,
            3 => sa.wrapping_sub(sb) as u16,
            4 => b << (a & 15),
            5 => b >> (a & 15),
            6 => (sb >> (a & 15)) as u16,
            7 => sa.max(sb) as u16,
            8 => sa.min(sb) as u16,
            9 => a.wrapping_mul(b).wrapping_add(c),
            10 if sat => a.saturating_add(b),
            10 => a.wrapping_add(b),
            11 if sat => a.saturating_sub(b),
            11 => a.wrapping_sub(b),
            12 => a.max(b),
            _ => a.min(b),
        }
    };
    let r: L<u32> = std::array::from_fn(|l| {
        let lo = one(a[l][0], b[l][0], c[l][0]);
        let hi = one(a[l][1], b[l][1], c[l][1]);
        u32::from(lo) | u32::from(hi) << 16
    });
    write(w, v, &r);
    Ok(())
}

/// v_pk_{fma, add, mul, min, max}_f16: each half computed exactly and rounded once to f16.
fn packed_float(w: &mut Wave, v: &Valu) -> ExecResult {
    let op = v.op;
    let ie = w.mode >> 9 & 1 != 0;
    let a = packed_f16(w, v, 0)?;
    let b = packed_f16(w, v, 1)?;
    let c = if op == 14 { packed_f16(w, v, 2)? } else { [[0.0; 2]; LANES] };
    w.handle(modifiers::CLAMP);
    let dx10 = w.dx10_clamp();
    let r: L<u32> = std::array::from_fn(|l| {
        let mut out = 0u32;
        for k in 0..2 {
            let (fa, fb, fc) = (a[l][k], b[l][k], c[l][k]);
            // Exact in f64; f64_to_f16 rounds once.
            let x = match op {
                14 => fa as f64 * fb as f64 + fc as f64,
                15 => fa as f64 + fb as f64,
                16 => fa as f64 * fb as f64,
                17 => minmax32(fa, fb, false, ie) as f64,
                _ => minmax32(fa, fb, true, ie) as f64,
            };
            let x = if v.clamp { clamp_float(x, dx10) } else { x };
            out |= u32::from(f64_to_f16(x)) << (16 * k);
        }
        out
    });
    write(w, v, &r);
    Ok(())
}

/// v_dot2_f32_f16 and v_dot2_f32_bf16: D = S0.lo * S1.lo + S0.hi * S1.hi + S2 (an f32). The
/// products are exact; the sum is formed in f64 and rounded once to f32. v_dot2_f32_f16 flushes
/// f32 denormals (the accumulator and the result) to zero whatever the float mode, as LLVM
/// documents for it.
fn dot2_f32(w: &mut Wave, v: &Valu) -> ExecResult {
    let (a, b) = if v.op == 19 {
        (packed_f16(w, v, 0)?, packed_f16(w, v, 1)?)
    } else {
        (packed_bf16(w, v, 0)?, packed_bf16(w, v, 1)?)
    };
    let c = whole(w, v, 2, Kind::F32)?;
    w.handle(modifiers::CLAMP);
    let dx10 = w.dx10_clamp();
    let ftz = |x: f32| if v.op == 19 { flush_denormal(x) } else { x };
    let r: L<u32> = std::array::from_fn(|l| {
        let p0 = a[l][0] as f64 * b[l][0] as f64;
        let p1 = a[l][1] as f64 * b[l][1] as f64;
        let x = ftz((ftz(f32::from_bits(c[l])) as f64 + p0 + p1) as f32);
        let x = if v.clamp { clamp_float(x as f64, dx10) as f32 } else { x };
        x.to_bits()
    });
    write(w, v, &r);
    Ok(())
}

/// v_dot4_i32_iu8, v_dot4_u32_u8, v_dot8_i32_iu4, v_dot8_u32_u4 (gfx11) and gfx10.3's
/// v_dot4_i32_i8, v_dot8_i32_i4: the sum of the products of the bytes (or nibbles) of S0 and S1,
/// plus S2. In the iu forms, neg of source 0 or 1 says that source is signed; clamp saturates
/// the sum to the destination's range.
fn dot_bytes(w: &mut Wave, v: &Valu) -> ExecResult {
    let op = v.op;
    let nibbles = matches!(op, 24 | 25 | DOT8_I32_I4);
    let (signed_a, signed_b, signed_result) = match op {
        22 | 24 => {
            w.handle(modifiers::neg(0) | modifiers::neg(1));
            (v.neg & 1 != 0, v.neg & 2 != 0, true)
        }
        DOT4_I32_I8 | DOT8_I32_I4 => (true, true, true),
        _ => (false, false, false),
    };
    let a = whole(w, v, 0, Kind::Int)?;
    let b = whole(w, v, 1, Kind::Int)?;
    let c = whole(w, v, 2, Kind::Int)?;
    w.handle(modifiers::CLAMP);
    let (bits, count) = if nibbles { (4, 8) } else { (8, 4) };
    let element = |x: u32, k: u32, signed: bool| -> i64 {
        let e = (x >> (bits * k)) & ((1 << bits) - 1);
        if signed && e >> (bits - 1) != 0 {
            e as i64 - (1 << bits)
        } else {
            e as i64
        }
    };
    let r: L<u32> = std::array::from_fn(|l| {
        let acc = if signed_result { c[l] as i32 as i64 } else { c[l] as i64 };
        let sum = (0..count).fold(acc, |s, k| s + element(a[l], k, signed_a) * element(b[l], k, signed_b));
        match (v.clamp, signed_result) {
            (true, true) => sum.clamp(i32::MIN as i64, i32::MAX as i64) as i32 as u32,
            (true, false) => sum.clamp(0, u32::MAX as i64) as u32,
            _ => sum as u32,
        }
    });
    write(w, v, &r);
    Ok(())
}

/// gfx10.3's v_dot2_i32_i16 and v_dot2_u32_u16: S0.lo * S1.lo + S0.hi * S1.hi + S2, each
/// 16-bit half as op_sel and op_sel_hi pick it; clamp saturates.
fn dot2_int16(w: &mut Wave, v: &Valu) -> ExecResult {
    let signed = v.op == DOT2_I32_I16;
    let a = packed(w, v, 0, Kind::Int)?;
    let b = packed(w, v, 1, Kind::Int)?;
    let c = whole(w, v, 2, Kind::Int)?;
    w.handle(modifiers::CLAMP);
    let ext = |x: u16| if signed { x as i16 as i64 } else { x as i64 };
    let r: L<u32> = std::array::from_fn(|l| {
        let acc = if signed { c[l] as i32 as i64 } else { c[l] as i64 };
        let sum = acc + ext(a[l][0]) * ext(b[l][0]) + ext(a[l][1]) * ext(b[l][1]);
        match (v.clamp, signed) {
            (true, true) => sum.clamp(i32::MIN as i64, i32::MAX as i64) as i32 as u32,
            (true, false) => sum.clamp(0, u32::MAX as i64) as u32,
            _ => sum as u32,
        }
    });
    write(w, v, &r);
    Ok(())
}

/// v_fma_mix_f32, v_fma_mixlo_f16, v_fma_mixhi_f16: fma of three sources, each read as an f32
/// or (op_sel_hi bit set) as the f16 half op_sel picks; neg negates a source, neg_hi takes its
/// absolute value first. The fma is an f32 fma (its operands are exact in f32); mixlo and mixhi
/// then round that f32 to f16 and write it to the low or high half, keeping the other.
fn fma_mix(w: &mut Wave, v: &Valu) -> ExecResult {
    let mut srcs = [[0f32; LANES]; 3];
    for (i, s) in srcs.iter_mut().enumerate() {
        if let Src::Float(_) = v.src[i] {
            // Whether the hardware reads an inline float constant as an f16 or an f32 here is
            // not documented: refused rather than guessed.
            return Err(Fault::unsupported(format!(
                "an inline float constant as source {i} of a v_fma_mix instruction is not modelled"
            )));
        }
        let raw = w.src32(&v.src[i])?;
        let is_half = v.opsel_hi >> i & 1 != 0;
        // op_sel picks a half of an f16 source; on an f32 source it means nothing and stays
        // unmarked, so that it refuses the instruction.
        if is_half {
            w.handle(modifiers::opsel(i));
        }
        w.handle(modifiers::neg(i) | modifiers::neg_hi(i));
        let hi = v.opsel >> i & 1 != 0;
        for (l, out) in s.iter_mut().enumerate() {
            let mut x = if is_half {
                f16_to_f32(if hi { (raw[l] >> 16) as u16 } else { raw[l] as u16 })
            } else {
                f32::from_bits(raw[l])
            };
            if v.neg_hi >> i & 1 != 0 {
                x = x.abs();
            }
            if v.neg >> i & 1 != 0 {
                x = -x;
            }
            *out = x;
        }
    }
    w.handle(modifiers::CLAMP);
    let dx10 = w.dx10_clamp();
    let fma: L<f32> = std::array::from_fn(|l| {
        let x = srcs[0][l].mul_add(srcs[1][l], srcs[2][l]);
        if v.clamp {
            clamp_float(x as f64, dx10) as f32
        } else {
            x
        }
    });
    let old = w.vgpr[v.vdst as usize];
    let r: L<u32> = std::array::from_fn(|l| match v.op {
        32 => fma[l].to_bits(),
        33 => (old[l] & 0xffff_0000) | u32::from(f32_to_f16(fma[l])),
        _ => (old[l] & 0xffff) | u32::from(f32_to_f16(fma[l])) << 16,
    });
    write(w, v, &r);
    Ok(())
}

/// The WMMA matrix multiplies of a wave32 (v_wmma_{f32,f16,bf16,i32}_16x16x16_*): D = A * B + C
/// for 16x16 matrices spread over the lanes as RDNA3 lays them out. A's row i (and B's column
/// i) is in lane i (lanes 16..31 hold a copy the instruction does not read), element k in VGPR
/// k / n, part k % n (n = 2 halves, 4 bytes or 8 nibbles per VGPR); D and C element (m, c) is in
/// lane c + 16 * (m % 2), VGPR m / 2 — a whole f32/i32, or the low half of an f16/bf16
/// (op_sel[2]: the high half). Float sums are formed in f64 and rounded once (the hardware's
/// internal rounding is not documented); the integer forms read A or B as signed where neg of
/// source 0 or 1 says so, and clamp saturates their sums. Needs every lane of the wave active.
fn wmma(w: &mut Wave, v: &Valu) -> ExecResult {
    if w.lanes() != 32 {
        return Err(Fault::unsupported("WMMA in a wave64 kernel is not modelled"));
    }
    if w.exec() != u64::from(u32::MAX) {
        return Err(Fault::UnmodelledOperands("WMMA with inactive lanes (EXEC must be all ones)".into()));
    }
    let regs = |src: &Src| -> ExecResult<usize> {
        match *src {
            Src::Vgpr(r) => Ok(usize::from(r)),
            _ => Err(Fault::unsupported("WMMA takes its matrices in VGPRs")),
        }
    };
    let (a, b, c) = (regs(&v.src[0])?, regs(&v.src[1])?, regs(&v.src[2])?);
    let op = v.op;
    let integer = op >= 68;
    let half_out = matches!(op, 66 | 67);
    // Bits per element of A and B.
    let bits = match op {
        68 => 8,
        69 => 4,
        _ => 16,
    };
    let (signed_a, signed_b) = if integer {
        w.handle(modifiers::neg(0) | modifiers::neg(1));
        (v.neg & 1 != 0, v.neg & 2 != 0)
    } else {
        (false, false)
    };
    if integer {
        w.handle(modifiers::CLAMP);
    }
    let high = if half_out {
        w.handle(modifiers::opsel(2));
        v.opsel & 4 != 0
    } else {
        false
    };
    let per_vgpr = 32 / bits;
    let element = |base: usize, lane: usize, k: usize, signed: bool| -> f64 {
        let word = w.vgpr[base + k / per_vgpr][lane];
        let raw = (word >> (bits * (k % per_vgpr))) & ((1u64 << bits) - 1) as u32;
        match op {
            64 | 66 => f16_to_f32(raw as u16) as f64,
            65 | 67 => f32::from_bits(raw << 16) as f64,
            _ if signed && raw >> (bits - 1) != 0 => raw as f64 - (1u64 << bits) as f64,
            _ => raw as f64,
        }
    };
    let at = |m: usize, col: usize| (col + 16 * (m % 2), m / 2);
    let mut out = [[0u32; LANES]; 8];
    for (r, row) in out.iter_mut().enumerate() {
        row.copy_from_slice(&w.vgpr[v.vdst as usize + r]);
    }
    for m in 0..16 {
        for col in 0..16 {
            let (lane, reg) = at(m, col);
            let acc_word = w.vgpr[c + reg][lane];
            let acc = match op {
                64 | 65 => f32::from_bits(acc_word) as f64,
                66 => f16_to_f32(if high { (acc_word >> 16) as u16 } else { acc_word as u16 }) as f64,
                67 => f32::from_bits(if high { acc_word & 0xffff_0000 } else { acc_word << 16 }) as f64,
                _ => acc_word as i32 as f64,
            };
            let sum = (0..16).fold(acc, |s, k| s + element(a, m, k, signed_a) * element(b, col, k, signed_b));
            let word = &mut out[reg][lane];
            *word = match op {
                64 | 65 => (sum as f32).to_bits(),
                66 | 67 => {
                    let h = if op == 66 { u32::from(f64_to_f16(sum)) } else { u32::from(f64_to_bf16(sum)) };
                    if high {
                        (*word & 0xffff) | h << 16
                    } else {
                        (*word & 0xffff_0000) | h
                    }
                }
                _ if v.clamp => sum.clamp(i32::MIN as f64, i32::MAX as f64) as i32 as u32,
                _ => (sum as i64) as u32,
            };
        }
    }
    for (r, row) in out.iter().enumerate() {
        w.vgpr[v.vdst as usize + r] = *row;
    }
    Ok(())
}
