//! Float helpers with the ISA's semantics: IEEE-mode min/max, f16 conversions, class tests,
//! and the special cases of the division fix-up instructions.

/// Quiets a NaN (sets the quiet bit), leaving other values alone.
pub fn quiet32(x: f32) -> f32 {
    if x.is_nan() {
        f32::from_bits(x.to_bits() | 0x0040_0000)
    } else {
        x
    }
}

fn is_snan32(x: f32) -> bool {
    x.is_nan() && x.to_bits() & 0x0040_0000 == 0
}

/// V_MIN_F32 / V_MAX_F32: with IEEE mode, a signalling NaN input gives a quiet NaN; otherwise a
/// NaN input gives the other operand. -0 is treated as less than +0.
pub fn minmax32(a: f32, b: f32, max: bool, ieee: bool) -> f32 {
    if ieee && (is_snan32(a) || is_snan32(b)) {
        return quiet32(if is_snan32(a) { a } else { b });
    }
    if a.is_nan() {
        return b;
    }
    if b.is_nan() {
        return a;
    }
    if a == 0.0 && b == 0.0 {
        let neg = if max {
            a.is_sign_negative() && b.is_sign_negative()
        } else {
            a.is_sign_negative() || b.is_sign_negative()
        };
        return if neg { -0.0 } else { 0.0 };
    }
    if max {
        if a > b {
            a
        } else {
            b
        }
    } else if a < b {
        a
    } else {
        b
    }
}

pub fn minmax64(a: f64, b: f64, max: bool, ieee: bool) -> f64 {
    let snan = |x: f64| x.is_nan() && x.to_bits() & (1 << 51) == 0;
    if ieee && (snan(a) || snan(b)) {
        let n = if snan(a) { a } else { b };
        return f64::from_bits(n.to_bits() | 1 << 51);
    }
    if a.is_nan() {
        return b;
    }
    if b.is_nan() {
        return a;
    }
    if a == 0.0 && b == 0.0 {
        let neg = if max {
            a.is_sign_negative() && b.is_sign_negative()
        } else {
            a.is_sign_negative() || b.is_sign_negative()
        };
        return if neg { -0.0 } else { 0.0 };
    }
    if (a > b) == max {
        a
    } else {
        b
    }
}

/// V_MED3_F32 (and V_MED3_F16 on exactly converted halves), as the ISA guide's pseudo-code
/// defines it: with a NaN among the operands, the minimum of the three (min of min); otherwise
/// the maximum of the two operands that are not the maximum of all three.
pub fn med3_32(a: f32, b: f32, c: f32, ieee: bool) -> f32 {
    let min = |x, y| minmax32(x, y, false, ieee);
    let max = |x, y| minmax32(x, y, true, ieee);
    if a.is_nan() || b.is_nan() || c.is_nan() {
        return min(min(a, b), c);
    }
    let max3 = max(max(a, b), c);
    if max3 == a {
        max(b, c)
    } else if max3 == b {
        max(a, c)
    } else {
        max(a, b)
    }
}

/// f32 -> f16 bits, round to nearest even, denormals kept, NaN stays NaN (quiet).
pub fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x007f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x0200 | (man >> 13) as u16 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x0080_0000;
        let shift = (14 - e) as u32;
        let half = m >> shift;
        let rem = m & ((1u32 << shift) - 1);
        let halfway = 1u32 << (shift - 1);
        let rounded = if rem > halfway || (rem == halfway && half & 1 == 1) { half + 1 } else { half };
        return sign | rounded as u16;
    }
    let half = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    let rounded = if rem > 0x1000 || (rem == 0x1000 && half & 1 == 1) { half + 1 } else { half };
    sign | rounded as u16
}

/// f64 -> f16 bits with a single rounding (to nearest even): the f32 step rounds to odd, which
/// keeps enough information for the second rounding to be exact.
pub fn f64_to_f16(x: f64) -> u16 {
    let f = x as f32;
    if !f.is_finite() || f as f64 == x {
        return f32_to_f16(f);
    }
    let mut b = f.to_bits();
    if b & 1 == 0 {
        // Step one ulp back toward x (sign-magnitude: -1 shrinks, +1 grows the magnitude).
        if (f as f64).abs() > x.abs() {
            b -= 1;
        } else {
            b += 1;
        }
    }
    f32_to_f16(f32::from_bits(b))
}

/// f16 bits -> f32 (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = if exp == 0x1f {
        sign | 0x7f80_0000 | (man << 13)
    } else if exp == 0 {
        if man == 0 {
            sign
        } else {
            // Denormal half: value = man * 2^-24, exact in f32.
            let v = man as f32 * (2.0f32).powi(-24);
            return if sign != 0 { -v } else { v };
        }
    } else {
        sign | ((exp + 127 - 15) << 23) | (man << 13)
    };
    f32::from_bits(bits)
}

/// V_CMP_CLASS mask bits: 0 sNaN, 1 qNaN, 2 -inf, 3 -normal, 4 -denormal, 5 -0, 6 +0,
/// 7 +denormal, 8 +normal, 9 +inf. The class of the float whose raw `bits` hold a sign, then
/// `exponent_bits` of exponent, then `mantissa_bits` of fraction (f16 5/10, f32 8/23, f64 11/52):
/// classified in its own format, since a denormal of a narrow type widens to a normal.
pub fn class_bit(bits: u64, exponent_bits: u32, mantissa_bits: u32) -> u32 {
    let mantissa = bits & ((1 << mantissa_bits) - 1);
    let exponent = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1);
    let negative = (bits >> (mantissa_bits + exponent_bits)) & 1 != 0;
    let bit = if exponent == (1 << exponent_bits) - 1 {
        if mantissa != 0 {
            // NaN: the fraction's top bit tells quiet from signalling.
            return ((mantissa >> (mantissa_bits - 1)) & 1) as u32;
        }
        2
    } else if exponent != 0 {
        3
    } else if mantissa != 0 {
        4
    } else {
        5
    };
    if negative {
        bit
    } else {
        11 - bit
    }
}
