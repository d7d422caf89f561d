//! VOP3P packed math: two 16-bit lanes per register, with per-half source selection (opsel,
//! opsel_hi) and negation (neg, neg_hi).

use super::decode::Valu;
use super::error::{ExecResult, Fault};
use super::float::{f16_to_f32, f64_to_f16, minmax32};
use super::wave::{Wave, LANES};

pub(crate) fn exec_vop3p(w: &mut Wave, v: &Valu, word: u32) -> ExecResult {
    let op = v.op;
    if op == 32 {
        return fma_mix_f32(w, v);
    }
    let float = matches!(op, 14..=18);
    let int = matches!(op, 1 | 4 | 5 | 10 | 11);
    if !float && !int {
        return Err(Fault::Unknown { encoding: "VOP3P", opcode: op as u32, word });
    }
    if int && (v.neg | v.neg_hi) != 0 {
        return Err(Fault::unsupported(format!("neg modifiers on integer VOP3P opcode {op}")));
    }
    let nsrc = if op == 14 { 3 } else { 2 };
    let mut srcs = [[0u32; LANES]; 3];
    for (i, s) in srcs.iter_mut().enumerate().take(nsrc) {
        *s = w.src16(&v.src[i])?;
        // gfx11 replicates a 16-bit inline float constant into both halves; integer inline
        // constants and literals are used as their 32-bit values.
        if let super::operand::Src::Float(_) = v.src[i] {
            for x in s.iter_mut() {
                *x = (*x & 0xffff) | (*x & 0xffff) << 16;
            }
        } else if let super::operand::Src::Int(_) | super::operand::Src::Literal(_) = v.src[i] {
            *s = w.src32(&v.src[i])?;
        }
    }
    let ie = w.mode >> 9 & 1 != 0;
    let pick = |i: usize, l: usize, hi: bool| -> u16 {
        let sel = if hi { v.opsel_hi >> i & 1 } else { v.opsel >> i & 1 };
        let x = srcs[i][l];
        let h = if sel != 0 { (x >> 16) as u16 } else { x as u16 };
        let neg = if hi { v.neg_hi >> i & 1 } else { v.neg >> i & 1 };
        if float && neg != 0 {
            h ^ 0x8000
        } else {
            h
        }
    };
    let r: [u32; LANES] = std::array::from_fn(|l| {
        let mut out = 0u32;
        for (k, hi) in [false, true].into_iter().enumerate() {
            let (a, b, c) = (pick(0, l, hi), pick(1, l, hi), if nsrc == 3 { pick(2, l, hi) } else { 0 });
            let h: u16 = if float {
                let (fa, fb, fc) = (f16_to_f32(a), f16_to_f32(b), f16_to_f32(c));
                // Exact in f64; f64_to_f16 rounds once.
                let x = match op {
                    14 => fa as f64 * fb as f64 + fc as f64,
                    15 => fa as f64 + fb as f64,
                    16 => fa as f64 * fb as f64,
                    17 => minmax32(fa, fb, false, ie) as f64,
                    _ => minmax32(fa, fb, true, ie) as f64,
                };
                let x = if v.clamp { x.clamp(0.0, 1.0) } else { x };
                f64_to_f16(x)
            } else {
                match op {
                    1 => a.wrapping_mul(b),
                    4 => b << (a & 15),
                    5 => b >> (a & 15),
                    10 => a.wrapping_add(b),
                    _ => a.wrapping_sub(b),
                }
            };
            out |= (h as u32) << (16 * k);
        }
        out
    });
    let exec = w.exec();
    w.write_vgpr(v.vdst as usize, &r, exec);
    Ok(())
}

/// v_fma_mix_f32: fma of three sources each read as f32, or (opsel_hi bit set) as the f16 half
/// opsel picks; neg negates a source, neg_hi takes its absolute value.
fn fma_mix_f32(w: &mut Wave, v: &Valu) -> ExecResult {
    let mut srcs = [[0f64; LANES]; 3];
    for (i, s) in srcs.iter_mut().enumerate() {
        let raw = w.src32(&v.src[i])?;
        let half = v.opsel_hi >> i & 1 != 0;
        let hi = v.opsel >> i & 1 != 0;
        for (l, out) in s.iter_mut().enumerate() {
            let mut x = if half {
                f16_to_f32(if hi { (raw[l] >> 16) as u16 } else { raw[l] as u16 }) as f64
            } else {
                f32::from_bits(raw[l]) as f64
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
    // f16 and f32 operands are exact in f64, their product too: one f32 fma rounds once.
    let r: [u32; LANES] = std::array::from_fn(|l| {
        let x = (srcs[0][l] as f32).mul_add(srcs[1][l] as f32, srcs[2][l] as f32);
        let x = if v.clamp {
            if x.is_nan() {
                0.0
            } else {
                x.clamp(0.0, 1.0)
            }
        } else {
            x
        };
        x.to_bits()
    });
    let exec = w.exec();
    w.write_vgpr(v.vdst as usize, &r, exec);
    Ok(())
}
