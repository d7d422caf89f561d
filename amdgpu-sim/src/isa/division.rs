//! The division helpers LLVM's f32 and f64 `fdiv` expansion runs: `v_div_scale` (pre-scales the
//! operands when the quotient or the reciprocal of the denominator would leave the normal range),
//! `v_div_fmas` (the last refinement step, undoing a numerator scaling) and `v_div_fixup` (special
//! operands: zeros, infinities, NaNs).
//!
//! The scaling thresholds are the simulator's own, not the hardware's exact ones (AMD documents
//! the intent, not every bound): what both guarantee is that the sequence
//! `div_scale → rcp → fma refinements → div_fmas → div_fixup` yields the correctly rounded
//! quotient, which is what the tests compare against the CPU.

/// One floating-point format's scaling parameters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Format {
    /// Operands with an exponent beyond ± this (or quotients beyond it) are scaled.
    limit: i32,
    /// The scaling: 2^±scale.
    scale: i32,
    /// Exponent (frexp convention, mantissa in [0.5, 1)) from which `div_fmas` scales up.
    fmas_up_from: i32,
    /// Quotient exponents (of `num` minus `den`) from which the quotient surely overflows, and
    /// up to which it surely rounds to zero: no scaling helps, `div_fixup` gives ±inf or ±0.
    overflows_from: i32,
    underflows_to: i32,
}

pub(crate) const F32: Format =
    Format { limit: 100, scale: 64, fmas_up_from: 1, overflows_from: 130, underflows_to: -151 };
pub(crate) const F64: Format =
    Format { limit: 1000, scale: 128, fmas_up_from: 1, overflows_from: 1026, underflows_to: -1076 };

/// The exponent of a finite non-zero `x` with its mantissa in [0.5, 1) (exact for denormals).
fn exponent(x: f64) -> i32 {
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    if biased == 0 {
        exponent(x * 2f64.powi(64)) - 64
    } else {
        biased - 1022
    }
}

/// x * 2^k, exact when the result is a normal f64 (all uses here).
fn scaled(x: f64, k: i32) -> f64 {
    x * 2f64.powi(k)
}

/// `v_div_scale`: `s0` (the numerator or the denominator of `num / den`), scaled as the pair
/// needs, and whether the quotient itself was scaled (VCC, which `v_div_fmas` reads). Special
/// operands give NaN: `v_div_fixup` then produces the result from `den` and `num`.
pub(crate) fn div_scale(f: Format, s0: f64, den: f64, num: f64) -> (f64, bool) {
    if den == 0.0 || !den.is_finite() || !num.is_finite() {
        return (f64::NAN, false);
    }
    if num == 0.0 {
        return (s0, false);
    }
    let (ed, en) = (exponent(den), exponent(num));
    if en - ed >= f.overflows_from || en - ed <= f.underflows_to {
        return (f64::NAN, false);
    }
    if ed < -f.limit {
        // The reciprocal of the denominator would overflow: scale both up, the quotient keeps.
        (scaled(s0, f.scale), false)
    } else if ed > f.limit {
        // The reciprocal would be denormal: scale both down.
        (scaled(s0, -f.scale), false)
    } else if en - ed < -f.limit {
        // A tiny quotient: refine it scaled up, `div_fmas` scales it back with one rounding.
        (if s0 == num { scaled(s0, f.scale) } else { s0 }, true)
    } else if en - ed > f.limit {
        // A huge quotient: refine it scaled down so that no step overflows.
        (if s0 == num { scaled(s0, -f.scale) } else { s0 }, true)
    } else {
        (s0, false)
    }
}

/// `v_div_fmas`: fma(a, b, c), scaled back by 2^±scale when `vcc` says the quotient was scaled
/// (up for a quotient refined scaled down, which `c`, the quotient estimate, shows by its size).
pub(crate) fn div_fmas(
    f: Format,
    a: f64,
    b: f64,
    c: f64,
    vcc: bool,
    fma: impl Fn(f64, f64, f64) -> f64,
) -> f64 {
    let r = fma(a, b, c);
    if !vcc || c == 0.0 || !c.is_finite() {
        return r;
    }
    if exponent(c) >= f.fmas_up_from {
        scaled(r, f.scale)
    } else {
        scaled(r, -f.scale)
    }
}

/// `v_div_fixup` for f64: the quotient `q` of `num / den` with the special cases applied. A NaN
/// quotient of finite non-zero operands is one `div_scale` found out of range: ±inf or ±0.
pub(crate) fn div_fixup64(q: f64, den: f64, num: f64) -> f64 {
    let negative = den.is_sign_negative() != num.is_sign_negative();
    let signed = |m: f64| if negative { -m } else { m };
    let quiet = |x: f64| f64::from_bits(x.to_bits() | 1 << 51);
    if den.is_nan() {
        quiet(den)
    } else if num.is_nan() {
        quiet(num)
    } else if (den == 0.0 && num == 0.0) || (den.is_infinite() && num.is_infinite()) {
        f64::NAN
    } else if den == 0.0 || num.is_infinite() {
        signed(f64::INFINITY)
    } else if den.is_infinite() || num == 0.0 {
        signed(0.0)
    } else if q.is_nan() {
        signed(if exponent(num) > exponent(den) { f64::INFINITY } else { 0.0 })
    } else {
        signed(q.abs())
    }
}

/// `v_div_fixup` for f32, as [`div_fixup64`].
pub(crate) fn div_fixup32(q: f32, den: f32, num: f32) -> f32 {
    div_fixup64(q as f64, den as f64, num as f64) as f32
}
