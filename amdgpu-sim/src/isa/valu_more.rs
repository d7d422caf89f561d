//! The rest of the VALU: cross-lane moves (v_permlane16/x16, v_permlane64, the M0-relative
//! v_movrelsd_2 and v_swaprel), sums of absolute differences (v_sad_*, v_msad_u8, v_qsad and
//! v_mqsad), byte interpolation (v_lerp_u8), the cube-map coordinate helpers, v_mullit,
//! v_fma_dx9_zero, v_cvt_off_f32_i4 and v_trig_preop_f64 — each as the RDNA3 ISA guide's
//! pseudo-code defines it; the packed conversions to saturated 8- and 16-bit integers. The
//! conversions to normalized integers, whose rounding the guide leaves undefined, are refused,
//! naming why.

use super::decode::Valu;
use super::error::{ExecResult, Fault};
use super::modifiers;
use super::operand::{Src, M0};
use super::valu::{ldexp64, map, map2, map3, out_d, out_f, out_q, out_u, Ops, L};
use super::wave::{Wave, LANES};

/// The opcodes (VOP3 numbering) this module executes or refuses with a reason.
pub(crate) fn handles(op: u16) -> bool {
    matches!(
        op,
        398 | 411
            | 456
            | 483
            | 484
            | 487
            | 488
            | 521
            | 524..=527
            | 533
            | 536
            | 546..=550
            | 569..=571
            | 573
            | 603
            | 604
            | 774
            | 775
            | 786
            | 787
            | 801
            | 802
            | 815
    )
}

/// floor(2/pi * 2^1201): the first 1201 fraction bits of 2/pi, least significant 64-bit word
/// first (computed with Machin's formula; the test below checks it).
const TWO_OVER_PI: [u64; 19] = [
    0xba10ac06608df8f6,
    0x25d4d7f6bf623f1a,
    0xe2f67a0e73ef14a5,
    0xd45aea4f758fd7cb,
    0x136e9e8c7ecd3cbf,
    0xda3eda6cfd9e4f96,
    0x301fde5e2316b414,
    0x50763ff12fffbc0b,
    0x73e93908bf177bf2,
    0xfc827323ac7306a6,
    0x8909d338e04d68be,
    0x4e7dd1046bea5d76,
    0x2439fc3bd6396253,
    0xa5c00c925dd413a3,
    0x8ac36e48dc74849b,
    0x2083fca2c757bd77,
    0xbb81b6c52b327887,
    0x2a53f84eafa3ea69,
    0x000145f306dc9c88,
];

/// Bit `i` (0 = least significant) of [`TWO_OVER_PI`]; 0 outside its 1201 bits.
fn two_over_pi_bit(i: i64) -> u64 {
    if !(0..1201).contains(&i) {
        return 0;
    }
    TWO_OVER_PI[(i / 64) as usize] >> (i % 64) & 1
}

/// v_trig_preop_f64: the 53 bits of 2/pi starting `shift` bits after the binary point, scaled
/// to where they lie, where shift = 53 * segment (plus the input's excess exponent past 1077);
/// inputs with a biased exponent of 1968 or more get the segment scaled up by 2^128.
fn trig_preop(x: f64, segment: u32) -> f64 {
    let exponent = ((x.to_bits() >> 52) & 0x7ff) as i64;
    let mut shift = i64::from(segment & 31) * 53;
    if exponent > 1077 {
        shift += exponent - 1077;
    }
    // Fraction bits 1200 - shift down to 1148 - shift.
    let mut result = 0u64;
    for k in 0..53 {
        result = result << 1 | two_over_pi_bit(1200 - shift - k);
    }
    let mut scale = -53 - shift;
    if exponent >= 1968 {
        scale += 128;
    }
    ldexp64(result as f64, scale as i32)
}

fn abs_diff(a: u32, b: u32) -> u32 {
    a.abs_diff(b)
}

/// v_sad_u8: the sum of the absolute differences of the four bytes, plus `acc`; with `masked`
/// (v_msad_u8) the bytes where `b` is zero count nothing.
fn sad_u8(a: u32, b: u32, acc: u32, masked: bool) -> u32 {
    (0..4).fold(acc, |sum, k| {
        let (x, y) = ((a >> (8 * k)) & 0xff, (b >> (8 * k)) & 0xff);
        if masked && y == 0 {
            sum
        } else {
            sum.wrapping_add(abs_diff(x, y))
        }
    })
}

/// Whether |z| is the largest magnitude of the three (the cube face is a z face), else whether
/// |y| is at least |x|: the face selection of the cube-map helpers.
fn cube_face(x: f32, y: f32, z: f32) -> u8 {
    if z.abs() >= x.abs() && z.abs() >= y.abs() {
        2
    } else if y.abs() >= x.abs() {
        1
    } else {
        0
    }
}

pub(crate) fn exec(w: &mut Wave, v: &Valu, word: u32) -> ExecResult {
    let ops = Ops { w, v };
    let op = v.op;
    match op {
        398 => {
            // v_cvt_off_f32_i4: the signed 4-bit value of S0[3:0], divided by 16.
            let r = map(&ops.u(0)?, |x| ((((x & 15) << 28) as i32) >> 28) as f32 / 16.0);
            out_f(w, v, r)
        }
        // v_pipeflush: a pipeline flush, nothing to do on a machine without a pipeline.
        411 => Ok(()),
        456 | 488 => movrel_pair(w, v),
        487 => {
            // v_permlane64_b32: lanes 0..31 and 32..63 exchange; in wave32 a no-op.
            if w.lanes() != 64 {
                return Ok(());
            }
            let a = ops.u(0)?;
            let r: L<u32> = std::array::from_fn(|l| a[l ^ 32]);
            out_u(w, v, &r)
        }
        603 | 604 => permlane16(w, v, op == 604),
        521 => {
            // v_fma_dx9_zero_f32: 0 * anything (infinity and NaN included) is 0.
            let r = map3(&ops.f(0)?, &ops.f(1)?, &ops.f(2)?, |a, b, c| {
                if a == 0.0 || b == 0.0 {
                    c
                } else {
                    a.mul_add(b, c)
                }
            });
            out_f(w, v, r)
        }
        524..=527 => {
            let r = map3(&ops.f(0)?, &ops.f(1)?, &ops.f(2)?, |x, y, z| {
                let face = cube_face(x, y, z);
                match (op, face) {
                    // v_cubeid_f32: the face id 0..5 (+x, -x, +y, -y, +z, -z).
                    (524, 2) => 4.0 + f32::from(z < 0.0),
                    (524, 1) => 2.0 + f32::from(y < 0.0),
                    (524, _) => f32::from(x < 0.0),
                    // v_cubesc_f32: the face's s coordinate.
                    (525, 2) if z < 0.0 => -x,
                    (525, 2) | (525, 1) => x,
                    (525, _) if x < 0.0 => z,
                    (525, _) => -z,
                    // v_cubetc_f32: the face's t coordinate.
                    (526, 1) if y < 0.0 => -z,
                    (526, 1) => z,
                    (526, _) => -y,
                    // v_cubema_f32: twice the major axis coordinate.
                    (_, 2) => z * 2.0,
                    (_, 1) => y * 2.0,
                    _ => x * 2.0,
                }
            });
            out_f(w, v, r)
        }
        533 => {
            // v_lerp_u8: per byte (S0 + S1 + the byte's lowest bit of S2) / 2.
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| {
                (0..4).fold(0u32, |out, k| {
                    let byte = |x: u32| (x >> (8 * k)) & 0xff;
                    out | ((byte(a) + byte(b) + ((c >> (8 * k)) & 1)) >> 1) << (8 * k)
                })
            });
            out_u(w, v, &r)
        }
        536 => {
            // v_mullit_f32: S0 * S1, or -MAX_FLOAT when S1 is -MAX_FLOAT, -inf or NaN, or S2 is
            // not above 0 (NaN included).
            let r = map3(&ops.f(0)?, &ops.f(1)?, &ops.f(2)?, |a, b, c| {
                if b == -f32::MAX || b == f32::NEG_INFINITY || b.is_nan() || c.is_nan() || c <= 0.0 {
                    -f32::MAX
                } else {
                    a * b
                }
            });
            out_f(w, v, r)
        }
        546 | 569 => {
            let masked = op == 569;
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| sad_u8(a, b, c, masked));
            out_u(w, v, &r)
        }
        547 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| {
                (sad_u8(a, b, 0, false) << 16).wrapping_add(c)
            });
            out_u(w, v, &r)
        }
        548 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| {
                c.wrapping_add(abs_diff(a & 0xffff, b & 0xffff)).wrapping_add(abs_diff(a >> 16, b >> 16))
            });
            out_u(w, v, &r)
        }
        549 => {
            let r = map3(&ops.u(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| abs_diff(a, b).wrapping_add(c));
            out_u(w, v, &r)
        }
        570 | 571 => {
            // v_qsad_pk_u16_u8 / v_mqsad_pk_u16_u8: four SADs of S1 against the dword windows
            // of the 64-bit S0 at byte offsets 0..3, each added to a 16-bit field of S2.
            let masked = op == 571;
            let (a, b, c) = (ops.q(0)?, ops.u(1)?, ops.q(2)?);
            let r: L<u64> = std::array::from_fn(|l| {
                (0..4).fold(0u64, |out, k| {
                    let window = (a[l] >> (8 * k)) as u32;
                    let acc = ((c[l] >> (16 * k)) & 0xffff) as u32;
                    out | u64::from(sad_u8(window, b[l], acc, masked) & 0xffff) << (16 * k)
                })
            });
            out_q(w, v, &r)
        }
        573 => mqsad_u32(w, v),
        815 => {
            let r = map2(&ops.d(0)?, &ops.u(1)?, trig_preop);
            out_d(w, v, r)
        }
        483 | 484 | 786 | 787 | 801 | 802 => Err(Fault::unsupported(format!(
            "VALU opcode {op} converts to a normalized 16-bit integer, whose rounding the ISA guide \
             does not define; it is not modelled"
        ))),
        // v_cvt_pk_i16_f32 / v_cvt_pk_u16_f32: S0 into the low half, S1 into the high one, each
        // truncated toward zero and saturated, NaN to 0 (as AMD's measurements of these
        // conversions have them).
        774 | 775 => {
            let (lo, hi) = if op == 774 { (-32768.0, 32767.0) } else { (0.0, 65535.0) };
            let sat =
                |x: f32| if x.is_nan() { 0 } else { (x.trunc() as f64).clamp(lo, hi) as i32 as u32 & 0xffff };
            let r = map2(&ops.f(0)?, &ops.f(1)?, |a, b| sat(a) | sat(b) << 16);
            out_u(w, v, &r)
        }
        // v_cvt_pk_u8_f32: S0 rounded as the float mode rounds (to nearest even, the one mode
        // modelled), saturated to 0..255 (NaN to 0), into byte S1[1:0] of S2.
        550 => {
            let r = map3(&ops.f(0)?, &ops.u(1)?, &ops.u(2)?, |a, b, c| {
                let byte = if a.is_nan() { 0 } else { (a.round_ties_even() as f64).clamp(0.0, 255.0) as u32 };
                let shift = 8 * (b & 3);
                (c & !(0xff << shift)) | byte << shift
            });
            out_u(w, v, &r)
        }
        _ => Err(Fault::Unknown { encoding: super::valu::enc_name(v), opcode: op as u32, word }),
    }
}

/// v_movrelsd_2_b32 (copy) and v_swaprel_b32 (exchange): the source VGPR is offset by
/// M0[9:0], the destination by M0[25:16].
fn movrel_pair(w: &mut Wave, v: &Valu) -> ExecResult {
    let Src::Vgpr(src) = v.src[0] else {
        return Err(Fault::unsupported("v_movrelsd_2 and v_swaprel need a VGPR source"));
    };
    if v.clamp || v.omod != 0 || (v.abs | v.neg | v.opsel) != 0 {
        return Err(Fault::unsupported("modifiers on v_movrelsd_2 or v_swaprel"));
    }
    let m0 = w.read_sgpr(M0) as usize;
    let s = usize::from(src) + (m0 & 0x3ff);
    let d = usize::from(v.vdst) + ((m0 >> 16) & 0x3ff);
    if s > 255 || d > 255 {
        return Err(Fault::unsupported(format!("M0-relative VGPR v{s} or v{d} is past v255")));
    }
    let exec = w.exec();
    let (from, to) = (w.vgpr[s], w.vgpr[d]);
    w.write_vgpr(d, &from, exec);
    if v.op == 488 {
        w.write_vgpr(s, &to, exec);
    }
    Ok(())
}

/// v_permlane16_b32 and v_permlanex16_b32: each lane of a row of 16 reads the lane its 4-bit
/// selector (from the 64 bits S2:S1) names, in its own row or (x16) the other row of its pair.
/// op_sel[0] is FI (read inactive lanes too) and op_sel[1] BOUND_CTRL (an inactive source gives
/// 0 rather than leaving the destination as it was).
fn permlane16(w: &mut Wave, v: &Valu, cross: bool) -> ExecResult {
    let Src::Vgpr(src) = v.src[0] else {
        return Err(Fault::unsupported("v_permlane16 needs a VGPR source"));
    };
    w.handle(modifiers::opsel(0) | modifiers::opsel(1));
    let fetch_inactive = v.opsel & 1 != 0;
    let bound_ctrl = v.opsel & 2 != 0;
    if v.clamp || v.omod != 0 || v.opsel & 8 != 0 {
        return Err(Fault::unsupported("clamp, omod or a destination op_sel on v_permlane16"));
    }
    let select = u64::from(w.scalar32(&v.src[1])?) | u64::from(w.scalar32(&v.src[2])?) << 32;
    let tmp = w.vgpr[usize::from(src)];
    let old = w.vgpr[usize::from(v.vdst)];
    let exec = w.exec();
    let lanes = w.lanes();
    let r: L<u32> = std::array::from_fn(|lane| {
        if lane >= lanes {
            return old[lane];
        }
        let row = lane / 16;
        let from_row = if cross { row ^ 1 } else { row };
        let from = from_row * 16 + ((select >> (4 * (lane % 16))) & 15) as usize;
        if exec >> from & 1 != 0 || fetch_inactive {
            tmp[from]
        } else if bound_ctrl {
            0
        } else {
            old[lane]
        }
    });
    w.write_vgpr(usize::from(v.vdst), &r, exec);
    Ok(())
}

/// v_mqsad_u32_u8: four masked SADs of S1 against the dword windows of the 64-bit S0, each
/// added to a dword of the 128-bit S2 (four VGPRs), into four VGPRs.
fn mqsad_u32(w: &mut Wave, v: &Valu) -> ExecResult {
    let ops = Ops { w, v };
    let (a, b) = (ops.q(0)?, ops.u(1)?);
    let Src::Vgpr(c) = v.src[2] else {
        return Err(Fault::unsupported("v_mqsad_u32_u8 needs its 128-bit accumulator in VGPRs"));
    };
    if v.clamp || v.omod != 0 || (v.abs | v.neg | v.opsel) != 0 {
        return Err(Fault::unsupported("modifiers on v_mqsad_u32_u8"));
    }
    let acc: [[u32; LANES]; 4] = std::array::from_fn(|k| w.vgpr[usize::from(c) + k]);
    let exec = w.exec();
    for (k, acc) in acc.iter().enumerate() {
        let r: L<u32> = std::array::from_fn(|l| sad_u8((a[l] >> (8 * k)) as u32, b[l], acc[l], true));
        w.write_vgpr(usize::from(v.vdst) + k, &r, exec);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// floor(2/pi * 2^bits) by Machin's formula (pi = 16 atan(1/5) - 4 atan(1/239)) on
    /// little-endian u32 limbs, independent of the table.
    fn two_over_pi_bits(bits: usize) -> Vec<u32> {
        let guard = 64;
        let limbs = (bits + 2 * guard) / 32 + 2;
        // Fixed point numbers with `limbs` 32-bit limbs, the binary point after limb 0's top.
        let div_small = |x: &mut Vec<u32>, d: u64| {
            let mut rem = 0u64;
            for limb in x.iter_mut().rev() {
                let cur = rem << 32 | u64::from(*limb);
                *limb = (cur / d) as u32;
                rem = cur % d;
            }
        };
        let add = |x: &mut Vec<u32>, y: &[u32], sub: bool| {
            let mut carry = 0i64;
            for (a, b) in x.iter_mut().zip(y) {
                let s = i64::from(*a) + if sub { -i64::from(*b) } else { i64::from(*b) } + carry;
                *a = s as u32;
                carry = s >> 32;
            }
        };
        let frac = bits + 2 * guard;
        let one = |limbs: usize| {
            let mut v = vec![0u32; limbs];
            v[frac / 32] = 1 << (frac % 32);
            v
        };
        let atan_inv = |x: u64| {
            let mut total = vec![0u32; limbs];
            let mut power = one(limbs);
            div_small(&mut power, x);
            let mut n = 1u64;
            while power.iter().any(|&l| l != 0) {
                let mut term = power.clone();
                div_small(&mut term, n);
                add(&mut total, &term, n % 4 == 3);
                div_small(&mut power, x * x);
                n += 2;
            }
            total
        };
        // pi * 2^frac.
        let mut pi = vec![0u32; limbs];
        let a = atan_inv(5);
        let b = atan_inv(239);
        for _ in 0..16 {
            add(&mut pi, &a, false);
        }
        for _ in 0..4 {
            add(&mut pi, &b, true);
        }
        // 2/pi by long division of 2 * 2^(frac + bits) by pi: bit by bit.
        let mut rem = vec![0u32; limbs + 2];
        let mut quotient = vec![0u32; bits / 32 + 1];
        let ge = |x: &[u32], y: &[u32]| {
            for i in (0..x.len().max(y.len())).rev() {
                let (a, b) = (x.get(i).copied().unwrap_or(0), y.get(i).copied().unwrap_or(0));
                if a != b {
                    return a > b;
                }
            }
            true
        };
        // rem = 2 * 2^frac (the numerator's integer part), then shift in zero bits.
        rem[(frac + 1) / 32] |= 1 << ((frac + 1) % 32);
        let mut pi_ext = pi.clone();
        pi_ext.resize(limbs + 2, 0);
        let mut q = 0u32;
        if ge(&rem, &pi_ext) {
            add(&mut rem, &pi_ext, true);
            q = 1;
        }
        assert_eq!(q, 0, "2/pi < 1");
        for i in (0..bits).rev() {
            // rem *= 2
            let mut carry = 0u32;
            for limb in rem.iter_mut() {
                let next = *limb >> 31;
                *limb = *limb << 1 | carry;
                carry = next;
            }
            if ge(&rem, &pi_ext) {
                add(&mut rem, &pi_ext, true);
                quotient[i / 32] |= 1 << (i % 32);
            }
        }
        quotient
    }

    #[test]
    fn the_two_over_pi_table_is_two_over_pi() {
        let want = two_over_pi_bits(1201);
        for i in 0..1201i64 {
            let bit = u64::from(want[(i / 32) as usize] >> (i % 32) & 1);
            assert_eq!(two_over_pi_bit(i), bit, "bit {i}");
        }
    }

    #[test]
    fn trig_preop_segments_add_up_to_two_over_pi() {
        let first = trig_preop(1.0, 0);
        assert!((first - std::f64::consts::FRAC_2_PI).abs() < 2e-16, "{first}");
        // Each segment is 53 bits further down and below the previous one's last bit.
        let second = trig_preop(1.0, 1);
        assert!(second > 0.0 && second < 2f64.powi(-52), "{second}");
        // A large input shifts the window by its excess exponent.
        let big = f64::from_bits(1100u64 << 52);
        assert!(trig_preop(big, 0) < first);
    }

    #[test]
    fn sums_of_absolute_differences() {
        assert_eq!(sad_u8(0x0102_0304, 0x0403_0201, 10, false), 10 + 3 + 1 + 1 + 3);
        // msad skips the bytes where the reference (S1) is zero.
        assert_eq!(sad_u8(0x0102_0304, 0x0003_0001, 0, true), 1 + 3);
    }
}
