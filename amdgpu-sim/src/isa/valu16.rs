//! The 16-bit VALU operations beyond the basic arithmetic in `valu.rs`: conversions between
//! halves and 16-bit integers, f16 transcendentals and frexp/ldexp/fract, the 16-bit
//! multiply-adds, min3/max3/med3 and maxmin/minmax of halves and 16-bit integers, the
//! f16 dot products and packed FMAC. Semantics from the RDNA3 ISA guide's pseudo-code; f16
//! results are computed exactly (or, for transcendentals, in f64) and rounded once to f16.

use super::decode::Valu;
use super::error::{ExecResult, Fault};
use super::float::{f16_to_f32, f64_to_f16, med3_32, minmax32};
use super::modifiers;
use super::valu::{frexp64, ieee, ldexp64, map, map2, map3, out_f, out_h, out_half, out_u, Ops, L};
use super::wave::Wave;

/// The opcodes (VOP3 numbering) this module executes.
pub(crate) fn handles(op: u16) -> bool {
    matches!(
        op,
        258 | 315
            | 316
            | 464..=468
            | 470..=474
            | 479..=482
            | 486
            | 489
            | 577
            | 585..=593
            | 595
            | 602
            | 608
            | 609
            | 614
            | 615
            | 826
    )
}

fn sext16(x: u32) -> i32 {
    x as u16 as i16 as i32
}

pub(crate) fn exec(w: &mut Wave, v: &Valu, word: u32) -> ExecResult {
    let ops = Ops { w, v };
    let ie = ieee(w);
    let op = v.op;
    match op {
        // ---- conversions ----
        464 => {
            let r = map(&ops.u16(0)?, |x| x as f64);
            out_h(w, v, r)
        }
        465 => {
            let r = map(&ops.u16(0)?, |x| sext16(x) as f64);
            out_h(w, v, r)
        }
        // f16 -> 16-bit integer: toward zero, saturating, NaN to 0 (as the 32-bit conversions).
        466 => {
            let r = map(&ops.h(0)?, |x| x as u16 as u32);
            out_half_int(w, v, &r)
        }
        467 => {
            let r = map(&ops.h(0)?, |x| x as i16 as u16 as u32);
            out_half_int(w, v, &r)
        }
        // ---- f16 math: correctly rounded here (the hardware approximates to about 1 ulp) ----
        468 => {
            let r = map(&ops.h(0)?, |x| 1.0 / x as f64);
            out_h(w, v, r)
        }
        470 => {
            let r = map(&ops.h(0)?, |x| 1.0 / (x as f64).sqrt());
            out_h(w, v, r)
        }
        471 => {
            let r = map(&ops.h(0)?, |x| (x as f64).log2());
            out_h(w, v, r)
        }
        472 => {
            let r = map(&ops.h(0)?, |x| (x as f64).exp2());
            out_h(w, v, r)
        }
        473 => {
            let r = map(&ops.h(0)?, |x| {
                let x = x as f64;
                if x == 0.0 || !x.is_finite() {
                    x
                } else {
                    frexp64(x).0
                }
            });
            out_h(w, v, r)
        }
        474 => {
            let r = map(&ops.h(0)?, |x| {
                let x = x as f64;
                if x == 0.0 || !x.is_finite() {
                    0
                } else {
                    frexp64(x).1 as u16 as u32
                }
            });
            out_half_int(w, v, &r)
        }
        479 => {
            // x - floor(x), below 1 (the largest half under 1.0); infinities give NaN.
            let r = map(&ops.h(0)?, |x| {
                let x = x as f64;
                if x.is_infinite() {
                    f64::NAN
                } else {
                    (x - x.floor()).min(f16_to_f32(0x3bff) as f64)
                }
            });
            out_h(w, v, r)
        }
        480 | 481 => {
            // The angle in revolutions (x * 2 pi radians).
            let r = map(&ops.h(0)?, |x| {
                let a = x as f64 * std::f64::consts::TAU;
                if op == 480 {
                    a.sin()
                } else {
                    a.cos()
                }
            });
            out_h(w, v, r)
        }
        482 => {
            // v_sat_pk_u8_i16: each signed half saturated to an unsigned byte.
            let sat = |x: u32| (x as u16 as i16).clamp(0, 255) as u32;
            let r = map(&ops.u(0)?, |x| sat(x) | sat(x >> 16) << 8);
            out_half_int(w, v, &r)
        }
        486 => {
            // v_swap_b16: exchange the destination's half and the source's (both VGPR halves).
            let super::operand::Src::Vgpr(s) = v.src[0] else {
                return Err(Fault::unsupported("v_swap_b16 needs a VGPR source"));
            };
            let a = ops.u16(0)?;
            let d = w.vgpr[v.vdst as usize];
            w.handle(modifiers::opsel(3));
            let d_hi = v.opsel & 8 != 0;
            let s_hi = v.opsel & 1 != 0;
            let old_d: L<u32> = std::array::from_fn(|l| if d_hi { d[l] >> 16 } else { d[l] & 0xffff });
            let exec = w.exec();
            let put = |row: &mut [u32; super::wave::LANES], vals: &L<u32>, hi: bool| {
                for (l, out) in row.iter_mut().enumerate() {
                    if exec >> l & 1 != 0 {
                        *out =
                            if hi { (*out & 0xffff) | vals[l] << 16 } else { (*out & 0xffff_0000) | vals[l] };
                    }
                }
            };
            put(&mut w.vgpr[s as usize], &old_d, s_hi);
            put(&mut w.vgpr[v.vdst as usize], &a, d_hi);
            Ok(())
        }
        489 => {
            let r = map(&ops.u16(0)?, |x| !x & 0xffff);
            out_half_int(w, v, &r)
        }
        826 => {
            let r = map2(&ops.u16(0)?, &ops.u16(1)?, |a, b| ((b as u16 as i16) >> (a & 15)) as u16 as u32);
            out_half_int(w, v, &r)
        }
        315 => {
            // v_ldexp_f16: S0 * 2^S1, S1 a signed 16-bit integer; exact scaling, one rounding.
            let r = map2(&ops.h(0)?, &ops.u16(1)?, |a, e| ldexp64(a as f64, sext16(e)));
            out_h(w, v, r)
        }
        // ---- multiply-adds ----
        577 => {
            let r = map3(&ops.u16(0)?, &ops.u16(1)?, &ops.u16(2)?, |a, b, c| {
                (a as u16).wrapping_mul(b as u16).wrapping_add(c as u16) as u32
            });
            out_half_int(w, v, &r)
        }
        595 => {
            let r = map3(&ops.u16(0)?, &ops.u16(1)?, &ops.u16(2)?, |a, b, c| {
                (a as u16 as i16).wrapping_mul(b as u16 as i16).wrapping_add(c as u16 as i16) as u16 as u32
            });
            out_half_int(w, v, &r)
        }
        602 => {
            let r = map3(&ops.u16(0)?, &ops.u16(1)?, &ops.u(2)?, |a, b, c| {
                (sext16(a) * sext16(b)).wrapping_add(c as i32) as u32
            });
            out_u(w, v, &r)
        }
        // ---- min3 / max3 / med3 of halves and 16-bit integers ----
        585 | 588 | 591 | 608 | 609 => {
            let r = map3(&ops.h(0)?, &ops.h(1)?, &ops.h(2)?, |a, b, c| {
                let min = |x, y| minmax32(x, y, false, ie);
                let max = |x, y| minmax32(x, y, true, ie);
                (match op {
                    585 => min(min(a, b), c),
                    588 => max(max(a, b), c),
                    591 => med3_32(a, b, c, ie),
                    608 => min(max(a, b), c),
                    _ => max(min(a, b), c),
                }) as f64
            });
            out_h(w, v, r)
        }
        586 | 589 | 592 => {
            let r = map3(&ops.u16(0)?, &ops.u16(1)?, &ops.u16(2)?, |a, b, c| {
                let (a, b, c) = (sext16(a), sext16(b), sext16(c));
                (match op {
                    586 => a.min(b).min(c),
                    589 => a.max(b).max(c),
                    _ => a.min(b).max(a.max(b).min(c)),
                }) as u16 as u32
            });
            out_half_int(w, v, &r)
        }
        587 | 590 | 593 => {
            let r = map3(&ops.u16(0)?, &ops.u16(1)?, &ops.u16(2)?, |a, b, c| match op {
                587 => a.min(b).min(c),
                590 => a.max(b).max(c),
                _ => a.min(b).max(a.max(b).min(c)),
            });
            out_half_int(w, v, &r)
        }
        // ---- dot products ----
        258 => {
            // v_dot2acc_f32_f16: D = S0.lo * S1.lo + S0.hi * S1.hi + D (f32); the products are
            // exact, the sum is rounded once; f32 denormals (the accumulator, the result) are
            // flushed to zero whatever the float mode, as LLVM documents for this operation.
            let (a, b) = (packed_halves(&ops, 0)?, packed_halves(&ops, 1)?);
            let c = ops.f(2)?;
            let r: L<f32> = std::array::from_fn(|l| {
                let acc = flush_denormal(c[l]) as f64;
                flush_denormal(
                    (acc + a[l][0] as f64 * b[l][0] as f64 + a[l][1] as f64 * b[l][1] as f64) as f32,
                )
            });
            out_f(w, v, r)
        }
        614 | 615 => {
            // v_dot2_f16_f16 / v_dot2_bf16_bf16: S0.lo * S1.lo + S0.hi * S1.hi + S2.lo, rounded
            // once to the 16-bit format. op_sel picks the half of S2 (and of the destination).
            let bf16 = op == 615;
            if v.src.iter().any(|s| matches!(s, super::operand::Src::Float(_))) {
                return Err(Fault::unsupported(
                    "an inline float constant in a v_dot2 of halves is not modelled",
                ));
            }
            let widen = |x: u16| if bf16 { f32::from_bits(u32::from(x) << 16) } else { f16_to_f32(x) };
            let pair = |i: usize| -> ExecResult<L<[f32; 2]>> {
                Ok(map(&w.src32(&v.src[i])?, |x| [widen(x as u16), widen((x >> 16) as u16)]))
            };
            let (a, b) = (pair(0)?, pair(1)?);
            let c = ops.u16(2)?;
            let exact: L<f64> = std::array::from_fn(|l| {
                widen(c[l] as u16) as f64 + a[l][0] as f64 * b[l][0] as f64 + a[l][1] as f64 * b[l][1] as f64
            });
            if bf16 {
                let r = map(&exact, |x| f64_to_bf16(x) as u32);
                out_half_int(w, v, &r)
            } else {
                out_h(w, v, exact)
            }
        }
        316 => {
            // v_pk_fmac_f16: each half of D = fma(S0.half, S1.half, D.half), rounded once.
            let (a, b) = (packed_halves(&ops, 0)?, packed_halves(&ops, 1)?);
            let d = w.vgpr[v.vdst as usize];
            let r: L<u32> = std::array::from_fn(|l| {
                let half = |k: usize| {
                    let c = f16_to_f32((d[l] >> (16 * k)) as u16) as f64;
                    f64_to_f16(a[l][k] as f64 * b[l][k] as f64 + c) as u32
                };
                half(0) | half(1) << 16
            });
            out_u(w, v, &r)
        }
        _ => Err(Fault::Unknown { encoding: super::valu::enc_name(v), opcode: op as u32, word }),
    }
}

/// Source `i` as two f16 values (low, high half) with neither op_sel nor modifiers: the VOP2
/// packed forms have none, and any in a VOP3 form stay unmarked and refuse the instruction.
fn packed_halves(ops: &Ops<'_>, i: usize) -> ExecResult<L<[f32; 2]>> {
    if let super::operand::Src::Float(_) = ops.v.src[i] {
        return Err(Fault::unsupported("an inline float constant as a packed f16 operand is not modelled"));
    }
    Ok(map(&ops.w.src32(&ops.v.src[i])?, |x| [f16_to_f32(x as u16), f16_to_f32((x >> 16) as u16)]))
}

/// An f32 denormal becomes a zero of its sign; other values stay.
pub(crate) fn flush_denormal(x: f32) -> f32 {
    if x != 0.0 && x.abs() < f32::MIN_POSITIVE {
        0.0f32.copysign(x)
    } else {
        x
    }
}

/// A 16-bit integer (or bit pattern) result; clamp does not apply and stays unmarked.
fn out_half_int(w: &mut Wave, v: &Valu, r: &L<u32>) -> ExecResult {
    out_half(w, v, r)
}

/// f64 -> bf16 bits, rounded to nearest even once (through f32 rounded to odd).
pub(crate) fn f64_to_bf16(x: f64) -> u16 {
    if x.is_nan() {
        return 0x7fc0 | ((x.to_bits() >> 48) as u16 & 0x8000);
    }
    let f = x as f32;
    let mut bits = f.to_bits();
    if f.is_finite() && f as f64 != x && bits & 1 == 0 {
        // Round to odd: step one ulp toward x.
        if (f as f64).abs() > x.abs() {
            bits -= 1;
        } else {
            bits += 1;
        }
    }
    let lower = bits & 0xffff;
    let upper = bits >> 16;
    let round_up = lower > 0x8000 || (lower == 0x8000 && upper & 1 == 1);
    (upper + u32::from(round_up)) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounding() {
        assert_eq!(f64_to_bf16(1.0), 0x3f80);
        // 1 + 2^-8 is halfway between 1.0 and the next bf16: ties to even (1.0).
        assert_eq!(f64_to_bf16(1.0 + 2f64.powi(-8)), 0x3f80);
        // Slightly above halfway rounds up.
        assert_eq!(f64_to_bf16(1.0 + 2f64.powi(-8) + 2f64.powi(-40)), 0x3f81);
        assert_eq!(f64_to_bf16(-2.0), 0xc000);
        assert_eq!(f64_to_bf16(f64::INFINITY), 0x7f80);
    }
}
