//! The eight kernels of the ISA coverage corpus (`tests/fixtures/isa_corpus`) that
//! `isa_corpus` does not run — math in f32 and f64, common and geometric, relational,
//! conversions, vector loads and stores, atomics and barriers — run on simulated gfx1100 and
//! gfx1030 from their committed code objects, and every output is checked against a reference
//! computed here on the CPU: within the error bounds of the OpenCL C specification ("Relative
//! error as ulps", full profile) where it sets one, exactly where the result is exact, and, where
//! the result depends on an unspecified order (atomics racing on one location), the invariant that
//! holds under every order. A failure names the function, its inputs and both values; the worst
//! error per function is printed either way (`--nocapture`).

use std::collections::{BTreeMap, BTreeSet};

use sparkle::amdgpu::sim::SimGpu;
use sparkle::hal::BufferUsage;
use sparkle::runtime::Arg;

use crate::isa_corpus_support::{corpus_program, dispatch, f16_to_f32, f32_to_f16, sim, Random};

const TARGETS: [SimGpu; 2] = [SimGpu::Gfx1100, SimGpu::Gfx1030];

// ---------------------------------------------------------------------------------------------
// Measuring errors

/// The spacing of f32 values around `x`, as OpenCL's ulp: that of `x`'s binade, 2^-149 below the
/// smallest normal.
fn ulp_f32(x: f64) -> f64 {
    let x = x.abs();
    if x < f32::MIN_POSITIVE as f64 {
        return 2f64.powi(-149);
    }
    let exponent = ((x.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    2f64.powi(exponent - 23)
}

/// Maps floats to integers in the same order, consecutive values to consecutive integers (-0 just
/// below +0), so that a difference counts the representable values between two results.
fn ordered_f32(x: f32) -> i64 {
    let bits = x.to_bits();
    let magnitude = (bits & 0x7fff_ffff) as i64;
    if bits >> 31 == 1 {
        -magnitude - 1
    } else {
        magnitude
    }
}

fn ordered_f64(x: f64) -> i128 {
    let bits = x.to_bits();
    let magnitude = (bits & 0x7fff_ffff_ffff_ffff) as i128;
    if bits >> 63 == 1 {
        -magnitude - 1
    } else {
        magnitude
    }
}

/// Ulps between two f32 results: 0 when both are NaN (payloads are free), infinite when only one is.
fn ulps_between_f32(got: f32, want: f32) -> f64 {
    match (got.is_nan(), want.is_nan()) {
        (true, true) => 0.0,
        (false, false) => (ordered_f32(got) - ordered_f32(want)).unsigned_abs() as f64,
        _ => f64::INFINITY,
    }
}

fn ulps_between_f64(got: f64, want: f64) -> f64 {
    match (got.is_nan(), want.is_nan()) {
        (true, true) => 0.0,
        (false, false) => (ordered_f64(got) - ordered_f64(want)).unsigned_abs() as f64,
        _ => f64::INFINITY,
    }
}

/// How far `got` is from the real number `exact`, in ulps of `exact`. A NaN must meet a NaN, and
/// where `exact` rounds to an infinity (or `got` is one) the two must be the same infinity.
fn ulp_error_f32(got: f32, exact: f64) -> f64 {
    if exact.is_nan() || got.is_nan() {
        return if exact.is_nan() && got.is_nan() { 0.0 } else { f64::INFINITY };
    }
    let rounded = exact as f32;
    if rounded.is_infinite() || got.is_infinite() {
        return if got == rounded { 0.0 } else { f64::INFINITY };
    }
    (got as f64 - exact).abs() / ulp_f32(exact)
}

/// What an f32 result should be.
#[derive(Clone, Copy)]
enum Want {
    /// This value, bit for bit but for NaN payloads.
    Exactly(f32),
    /// Within `ulps` of the real number `exact`.
    Near { exact: f64, ulps: f64 },
    /// Within `tolerance` (absolute) of the real number `exact`.
    Within { exact: f64, tolerance: f64 },
}

impl Want {
    /// `got`'s error and the bound, both in ulps of the wanted value.
    fn error(self, got: f32) -> (f64, f64) {
        match self {
            Want::Exactly(want) => (ulps_between_f32(got, want), 0.0),
            // A zero is exact, its sign included (C99 Annex F's special values, which OpenCL keeps).
            Want::Near { exact, .. } if exact == 0.0 => (ulps_between_f32(got, exact as f32), 0.0),
            Want::Near { exact, ulps } => (ulp_error_f32(got, exact), ulps),
            Want::Within { exact, tolerance } => {
                let error = ulp_error_f32(got, exact);
                // Non-finite results are exact (`ulp_error_f32` says 0 or infinity).
                let bound = if exact.is_finite() { tolerance / ulp_f32(exact) } else { 0.0 };
                (error, bound)
            }
        }
    }

    fn value(self) -> f64 {
        match self {
            Want::Exactly(v) => v as f64,
            Want::Near { exact, .. } | Want::Within { exact, .. } => exact,
        }
    }
}

/// The f32 functions whose libclc code flushes results that would be subnormal: exp returns 0
/// below -87.34 (the listing's `v_cmp_ngt_f32 vcc, 0xc2aeac4f, x`); fmod and remainder scale
/// their result by the divisor's exponent field, read from its bits, which a subnormal divisor
/// has 0.
const LIBCLC_FLUSHES: [&str; 3] = ["exp", "fmod", "remainder"];

/// OpenCL lets single precision flush subnormals (the specification's "edge case behavior in
/// flush to zero mode"): where the exact result is subnormal, ±0 conforms too. Allowed only for
/// `LIBCLC_FLUSHES`, so that every other subnormal result is still checked.
fn subnormal_may_flush(function: &str, want: Want, got: f32) -> Want {
    let exact = want.value();
    let subnormal = exact != 0.0 && exact.abs() < f32::MIN_POSITIVE as f64;
    if LIBCLC_FLUSHES.contains(&function) && subnormal && got == 0.0 {
        Want::Exactly(got)
    } else {
        want
    }
}

/// A sum evaluated left to right in f32, for the kernels' outputs that add several functions up:
/// its exact value, and how far the kernel's result may be from it — each term's own bound, plus
/// half an ulp for the rounding of each addition (taken at the partial sum's magnitude widened by
/// the error so far, so that it bounds the rounding of the sum actually computed).
struct Sum {
    exact: f64,
    tolerance: f64,
}

impl Sum {
    fn of(term: f64, ulps: f64) -> Self {
        Sum { exact: term, tolerance: ulps * ulp_f32(term) }
    }

    fn of_within(term: f64, tolerance: f64) -> Self {
        Sum { exact: term, tolerance }
    }

    fn plus(self, term: f64, ulps: f64) -> Self {
        self.plus_within(term, ulps * ulp_f32(term))
    }

    fn plus_within(self, term: f64, tolerance: f64) -> Self {
        let exact = self.exact + term;
        let tolerance = self.tolerance + tolerance;
        Sum { exact, tolerance: tolerance + 0.5 * ulp_f32(exact.abs() + tolerance) }
    }

    fn want(self) -> Want {
        Want::Within { exact: self.exact, tolerance: self.tolerance }
    }
}

/// The worst error per function of one kernel on one target, and every result out of bounds.
struct Checks {
    context: String,
    /// function -> (error, bound, what it was) of its worst result
    worst: BTreeMap<&'static str, (f64, f64, String)>,
    failures: Vec<String>,
    results: usize,
}

impl Checks {
    fn new(kernel: &str, target: SimGpu) -> Self {
        Checks {
            context: format!("{kernel} on {}", target.name()),
            worst: BTreeMap::new(),
            failures: Vec::new(),
            results: 0,
        }
    }

    /// Records one result, `error` from its reference where `bound` is allowed; `what` names the
    /// function, its inputs and both values.
    fn record(&mut self, function: &'static str, error: f64, bound: f64, what: impl FnOnce() -> String) {
        self.results += 1;
        let failed = error.is_nan() || error > bound;
        let worst = self.worst.get(function).map_or(-1.0, |w| w.0);
        if failed || error > worst {
            let what = what();
            if failed {
                self.failures.push(format!("{what}: error {error} > bound {bound}"));
            }
            if error > worst {
                self.worst.insert(function, (error, bound, what));
            }
        }
    }

    /// An f32 result against what it should be.
    fn f32(&mut self, function: &'static str, inputs: impl FnOnce() -> String, got: f32, want: Want) {
        let (error, bound) = want.error(got);
        self.record(function, error, bound, || {
            format!(
                "{function}({}) = {got:e} [{:#010x}], reference {:e}",
                inputs(),
                got.to_bits(),
                want.value()
            )
        });
    }

    /// An f64 result within `ulps` (counted between representable values) of `want`; a zero is
    /// exact, its sign included (C99 Annex F's special values, which OpenCL keeps).
    fn f64(
        &mut self,
        function: &'static str,
        inputs: impl FnOnce() -> String,
        got: f64,
        want: f64,
        ulps: f64,
    ) {
        let ulps = if want == 0.0 { 0.0 } else { ulps };
        self.record(function, ulps_between_f64(got, want), ulps, || {
            format!("{function}({}) = {got:e} [{:#018x}], reference {want:e}", inputs(), got.to_bits())
        });
    }

    /// An integer result that must be `want`.
    fn exact<T: PartialEq + std::fmt::Debug>(
        &mut self,
        function: &'static str,
        inputs: impl FnOnce() -> String,
        got: T,
        want: T,
    ) {
        let error = if got == want { 0.0 } else { f64::INFINITY };
        self.record(function, error, 0.0, || format!("{function}({}) = {got:?}, want {want:?}", inputs()));
    }

    /// A result that must satisfy an invariant (`holds`); `what` describes the result.
    fn invariant(&mut self, function: &'static str, holds: bool, what: impl FnOnce() -> String) {
        let error = if holds { 0.0 } else { f64::INFINITY };
        self.record(function, error, 0.0, what);
    }

    /// Prints the worst error per function, and fails with every result out of bounds.
    fn finish(self) {
        eprintln!("{}: {} results", self.context, self.results);
        for (function, (error, bound, what)) in &self.worst {
            eprintln!("  {function:16} worst {error:<10.4} bound {bound:<8} {what}");
        }
        assert!(
            self.failures.is_empty(),
            "{}: {} of {} results out of bounds:\n{}",
            self.context,
            self.failures.len(),
            self.results,
            self.failures.iter().take(40).cloned().collect::<Vec<_>>().join("\n")
        );
    }
}

fn hex32(x: f32) -> String {
    format!("{x:e} [{:#010x}]", x.to_bits())
}

fn hex64(x: f64) -> String {
    format!("{x:e} [{:#018x}]", x.to_bits())
}

// ---------------------------------------------------------------------------------------------
// References the standard library does not provide

/// `x * y + z` rounded once to f32: the product is exact in f64, and the sum is rounded to odd
/// there (an inexact result's last bit set), which makes the final rounding to f32 correct.
fn fma_f32(x: f32, y: f32, z: f32) -> f32 {
    let (product, z) = (x as f64 * y as f64, z as f64);
    let sum = product + z;
    if !sum.is_finite() {
        return sum as f32;
    }
    // The rounding error of `sum` (Knuth's two-sum).
    let z_part = sum - product;
    let error = (product - (sum - z_part)) + (z - z_part);
    let odd = if error != 0.0 && sum.to_bits() & 1 == 0 {
        let away_from_zero = (error > 0.0) == (sum > 0.0);
        f64::from_bits(if away_from_zero { sum.to_bits() + 1 } else { sum.to_bits() - 1 })
    } else {
        sum
    };
    odd as f32
}

/// IEEE remainder `x - n*y`, n the quotient rounded to nearest even; exact.
fn remainder(x: f64, y: f64) -> f64 {
    if x.is_nan() || y.is_nan() || x.is_infinite() || y == 0.0 {
        return f64::NAN;
    }
    if y.is_infinite() {
        return x;
    }
    // Exact, with x's sign, |r| < |y|.
    let r = x % y;
    // The truncated quotient is odd exactly when x mod 2y keeps a whole y.
    let quotient_odd = (x % (2.0 * y)).abs() >= y.abs();
    let twice = 2.0 * r.abs();
    if twice > y.abs() || (twice == y.abs() && quotient_odd) {
        r - y.abs().copysign(r)
    } else {
        r
    }
}

/// The exponent of a finite nonzero f32 (`ilogb`), subnormals included.
fn exponent_f32(x: f32) -> i32 {
    let bits = x.to_bits() & 0x7fff_ffff;
    let biased = (bits >> 23) as i32;
    if biased == 0 {
        (31 - bits.leading_zeros() as i32) - 149
    } else {
        biased - 127
    }
}

/// OpenCL `logb` for f32: the exponent as a float, -inf for 0, inf for infinities, NaN for NaN.
fn logb_f32(x: f32) -> f32 {
    match x {
        x if x.is_nan() => f32::NAN,
        x if x.is_infinite() => f32::INFINITY,
        0.0 => f32::NEG_INFINITY,
        x => exponent_f32(x) as f32,
    }
}

/// `x * 2^k` exactly in f64 (as ldexp's result before rounding to the kernel's type): scaled in
/// two steps, since 2^k alone may not be a double; |k| past 1100 over- or underflows any double
/// input anyway.
fn ldexp_exact(x: f64, k: i32) -> f64 {
    let k = k.clamp(-1100, 1100);
    x * 2f64.powi(k / 2) * 2f64.powi(k - k / 2)
}

/// The mantissa `frexp` returns for a double: in [0.5, 1) with x's sign; x itself for 0, an
/// infinity or NaN.
fn frexp_mantissa(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    // Subnormals are scaled up to normal first; the scale does not change the mantissa.
    let x = if x.abs() < f64::MIN_POSITIVE { x * 2f64.powi(64) } else { x };
    f64::from_bits((x.to_bits() & !(0x7ff << 52)) | (1022 << 52))
}

/// An integral value as an int, None past int's range (or for NaN), where a conversion without
/// saturation is undefined.
fn fits_int(v: f64) -> Option<i32> {
    (v >= i32::MIN as f64 && v <= i32::MAX as f64).then_some(v as i32)
}

/// `(int)x` where C defines it (the truncated value fits).
fn to_int(x: f64) -> Option<i32> {
    fits_int(x.trunc())
}

// ---------------------------------------------------------------------------------------------
// math_f32

/// Work-items of the math kernels: four groups of 64.
const MATH_ITEMS: usize = 256;

/// The ranges the math kernels' random inputs are drawn from, per precision.
struct MathDomain {
    /// |a| up to this in the exp/sinh-overflow quarter (past the type's exp overflow).
    exp_overflow: f64,
    /// b = 2^k with |k| up to this in the wide quarter (log, sqrt, rsqrt, hypot, fmod, pow).
    wide_exponent: f64,
    /// |a| up to this in the large-argument quarter (sin, cos, tan reductions).
    large: f64,
}

/// Inputs (a, b) of a math kernel: `edges` first, then four domains in turn — the ordinary one
/// (a in [-10, 10], b in [0.05, 20]), arguments past exp's overflow with b spread over the whole
/// exponent range, small arguments of both signs with negative b (pow of a negative base, fmod's
/// signs), and large trigonometric arguments with b near 1.
fn math_inputs(edges: &[(f64, f64)], domain: MathDomain, seed: u32) -> Vec<(f64, f64)> {
    let mut random = Random(seed);
    let mut inputs = edges.to_vec();
    while inputs.len() < MATH_ITEMS {
        let input = match inputs.len() % 4 {
            0 => (random.range(-10.0, 10.0), random.range(0.05, 20.0)),
            1 => {
                let b = 2f64.powf(random.range(-domain.wide_exponent, domain.wide_exponent));
                (random.range(-domain.exp_overflow, domain.exp_overflow), b)
            }
            2 => {
                let a =
                    2f64.powf(random.range(-20.0, 20.0)) * if random.next() % 2 == 0 { 1.0 } else { -1.0 };
                (a, random.range(-20.0, 20.0))
            }
            _ => (random.range(-domain.large, domain.large), random.range(0.5, 2.0)),
        };
        inputs.push(input);
    }
    inputs
}

/// f32 inputs: the shared domains, after edge cases — zeros, subnormals, exp's overflow and
/// underflow, large arguments for the trigonometric reductions, NaN and infinity, remainder's
/// ties, a negative base with integer and fractional exponents.
fn math_f32_inputs() -> (Vec<f32>, Vec<f32>) {
    let edges = [
        (0.5, 2.0),
        (-0.0, 1.0),
        (0.0, 0.0),
        (1e-40, 3.0),
        (3.0, 1e-40),
        (100.0, 0.5),
        (-100.0, 10.0),
        (-3e5, 7.0),
        (1e4, 1e30),
        (f64::NAN, 2.0),
        (f64::INFINITY, -2.0),
        (-7.25, -3.0),
        (5.0, -2.0),
        (2.5, 1.0),
        (3.5, 1.0),
        (-0.5, 4.0),
        (10.0, 2.0),
        (88.5, 0.75),
    ];
    let domain = MathDomain { exp_overflow: 100.0, wide_exponent: 120.0, large: 1e5 };
    math_inputs(&edges, domain, 0x9e37_79b9).iter().map(|&(a, b)| (a as f32, b as f32)).unzip()
}

#[test]
fn the_f32_math_corpus_kernel_is_within_opencl_ulp_bounds() {
    for target in TARGETS {
        math_f32_matches_the_cpu(target);
    }
}

fn math_f32_matches_the_cpu(target: SimGpu) {
    let rt = sim(target);
    let program = corpus_program(&rt, target, "math_f32", 64, &["x", "y", "o"]);
    let n = MATH_ITEMS;
    let (x, y) = math_f32_inputs();
    let xb = rt.upload(&x, BufferUsage::Input).unwrap();
    let yb = rt.upload(&y, BufferUsage::Input).unwrap();
    let ob = rt.create_buffer((n * 32 * 4) as u64, BufferUsage::Output).unwrap();
    dispatch(&rt, &program, &[Arg::Buffer(&xb), Arg::Buffer(&yb), Arg::Buffer(&ob)], (n / 64) as u32);
    let o: Vec<f32> = rt.download(&ob).unwrap();
    let mut checks = Checks::new("math_f32", target);
    for i in 0..n {
        let (a, b) = (x[i], y[i]);
        let (a64, b64) = (a as f64, b as f64);
        // The references are computed in f64 from the exact inputs: the standard library's
        // functions are within an f64 ulp or so, 2^-29 of an f32 ulp, far below any bound here.
        let near = |exact: f64, ulps: f64| Want::Near { exact, ulps };
        let exactly = |v: f64| Want::Exactly(v as f32);
        let tenth = a * 0.1; // rounded in f32, as in the kernel
        let mut wants: Vec<(usize, &'static str, Want)> = [
            ("sin", near(a64.sin(), 4.0)),
            ("cos", near(a64.cos(), 4.0)),
            ("tan", near(a64.tan(), 5.0)),
            ("exp", near(a64.exp(), 3.0)),
            ("exp2", near(a64.exp2(), 3.0)),
            ("exp10", near(10f64.powf(a64), 3.0)),
            ("log", near(b64.ln(), 3.0)),
            ("log2", near(b64.log2(), 3.0)),
            ("log10", near(b64.log10(), 3.0)),
            ("pow", near(b64.powf(a64), 16.0)),
            // Correctly rounded sqrt is not required (-cl-fp32-correctly-rounded-divide-sqrt).
            ("sqrt", near(b64.sqrt(), 3.0)),
            ("rsqrt", near(1.0 / b64.sqrt(), 2.0)),
            ("fma", Want::Exactly(fma_f32(a, b, 1.0))),
            ("fmin", Want::Exactly(a.min(b))),
            ("fmax", Want::Exactly(a.max(b))),
            ("floor", exactly(a64.floor())),
            ("ceil", exactly(a64.ceil())),
            ("round", exactly(a64.round())),
            ("trunc", exactly(a64.trunc())),
            ("fabs", Want::Exactly(a.abs())),
            ("copysign", Want::Exactly(a.copysign(b))),
            ("hypot", near(a64.hypot(b64), 4.0)),
            ("atan2", near(a64.atan2(b64), 6.0)),
            ("cbrt", near(a64.cbrt(), 2.0)),
            ("asin", near((tenth as f64).asin(), 4.0)),
            ("acos", near((tenth as f64).acos(), 4.0)),
            ("atan", near(a64.atan(), 5.0)),
            ("sinh", near(a64.sinh(), 4.0)),
            ("fmod", exactly(a64 % b64)),
            ("remainder", exactly(remainder(a64, b64))),
        ]
        .into_iter()
        .enumerate()
        .map(|(slot, (function, want))| (slot, function, want))
        .collect();
        // native_sin + native_exp: implementation-defined, and native_sin only over an
        // implementation-defined range; they are held to the conformance tests' relaxed-math
        // bounds, sin within 2^-11 absolute and exp within 3 + floor(2|x|) ulp (which covers
        // x·log2(e) rounded before the hardware's exp2), over |a| <= 10.
        if a.abs() <= 10.0 {
            let exp_ulps = 3.0 + (2.0 * b64.abs()).floor();
            let sum = Sum::of_within(a64.sin(), 2f64.powi(-11)).plus(b64.exp(), exp_ulps);
            wants.push((30, "native_sin+exp", sum.want()));
        }
        // a/b + ldexp(a, (int)b) + logb(b) + ilogb(b): division within 2.5 ulp, the rest exact;
        // (int)b is undefined past int's range. ilogb(0) is an implementation's FP_ILOGB0, but
        // then logb(0) = -inf decides the sum.
        if let Some(k) = to_int(b64) {
            let ilogb = if b == 0.0 || !b.is_finite() { 0.0 } else { exponent_f32(b) as f64 };
            let ldexp = ldexp_exact(a64, k) as f32 as f64;
            let sum = Sum::of(a64 / b64, 2.5).plus(ldexp, 0.0).plus(logb_f32(b) as f64, 0.0).plus(ilogb, 0.0);
            wants.push((31, "div+ldexp+logb", sum.want()));
        }
        for (slot, function, want) in wants {
            let got = o[32 * i + slot];
            let want = subnormal_may_flush(function, want, got);
            checks.f32(function, || format!("a = {}, b = {}", hex32(a), hex32(b)), got, want);
        }
    }
    checks.finish();
}

// ---------------------------------------------------------------------------------------------
// math_f64

/// sin, but for one deviation of libclc's double sin from C99 Annex F (sin(-0) = -0): it gives
/// the result the sign of `x < 0.0` (the listing's `v_cmp_gt_f64 vcc, 0, x`), false for -0, so
/// sin(-0) comes back +0. The simulator runs those instructions as the hardware does; the
/// library's answer is accepted for that one input rather than leaving -0 out of the inputs.
fn sin_libclc(x: f64) -> f64 {
    if x == 0.0 {
        0.0
    } else {
        x.sin()
    }
}

#[test]
fn the_f64_math_corpus_kernel_is_within_opencl_ulp_bounds() {
    for target in TARGETS {
        math_f64_matches_the_cpu(target);
    }
}

fn math_f64_matches_the_cpu(target: SimGpu) {
    let rt = sim(target);
    let program = corpus_program(&rt, target, "math_f64", 64, &["x", "y", "o"]);
    let n = MATH_ITEMS;
    let edges: [(f64, f64); 17] = [
        (0.5, 2.0),
        (-0.0, 1.0),
        (0.0, 0.0),
        (1e-310, 3.0),
        (3.0, 1e-310),
        (800.0, 0.5),
        (-720.0, 10.0),
        (-3e5, 7.0),
        (1e22, 1e300),
        (f64::NAN, 2.0),
        (f64::INFINITY, -2.0),
        (-7.25, -3.0),
        (5.0, -2.0),
        (2.5, 1.0),
        (-0.5, 4.0),
        (10.0, 2.0),
        (709.5, 0.75),
    ];
    let domain = MathDomain { exp_overflow: 750.0, wide_exponent: 1000.0, large: 1e9 };
    let (x, y): (Vec<f64>, Vec<f64>) = math_inputs(&edges, domain, 0x1234_5679).into_iter().unzip();
    let xb = rt.upload(&x, BufferUsage::Input).unwrap();
    let yb = rt.upload(&y, BufferUsage::Input).unwrap();
    let ob = rt.create_buffer((n * 20 * 8) as u64, BufferUsage::Output).unwrap();
    dispatch(&rt, &program, &[Arg::Buffer(&xb), Arg::Buffer(&yb), Arg::Buffer(&ob)], (n / 64) as u32);
    let o: Vec<f64> = rt.download(&ob).unwrap();
    let mut checks = Checks::new("math_f64", target);
    // The transcendental references are the standard library's f64 functions, themselves
    // within about an ulp: those results are allowed the specification's bound plus 1 ulp for
    // the reference's own error. Division, sqrt, fma, fmod and the rounding functions are
    // correctly rounded on the CPU and in the specification's double-precision table (0 ulp).
    let reference_error = 1.0;
    for i in 0..n {
        let (a, b) = (x[i], y[i]);
        let mut wants: Vec<(&'static str, usize, f64, f64)> = vec![
            ("sin", 0, sin_libclc(a), 4.0 + reference_error),
            ("cos", 1, a.cos(), 4.0 + reference_error),
            ("exp", 2, a.exp(), 3.0 + reference_error),
            ("log", 3, b.ln(), 3.0 + reference_error),
            ("pow", 4, b.powf(a), 16.0 + reference_error),
            ("sqrt", 5, b.sqrt(), 0.0),
            // 1/sqrt(b) rounds twice: within an ulp.
            ("rsqrt", 6, 1.0 / b.sqrt(), 2.0 + reference_error),
            ("fma", 7, a.mul_add(b, 1.0), 0.0),
            ("fmin", 8, a.min(b), 0.0),
            ("fmax", 9, a.max(b), 0.0),
            ("floor", 10, a.floor(), 0.0),
            ("ceil", 11, a.ceil(), 0.0),
            ("round", 12, a.round(), 0.0),
            ("trunc", 13, a.trunc(), 0.0),
            ("division", 14, a / b, 0.0),
            ("fmod", 15, a % b, 0.0),
            ("atan2", 16, a.atan2(b), 6.0 + reference_error),
            ("cbrt", 17, a.cbrt(), 2.0 + reference_error),
            ("hypot", 18, a.hypot(b), 4.0 + reference_error),
        ];
        // ldexp and frexp are exact, and their sum is rounded once; (int)b is undefined past
        // int's range.
        if let Some(k) = to_int(b) {
            wants.push(("ldexp+frexp", 19, ldexp_exact(a, k) + frexp_mantissa(a), 0.0));
        }
        for (function, slot, want, ulps) in wants {
            checks.f64(
                function,
                || format!("a = {}, b = {}", hex64(a), hex64(b)),
                o[20 * i + slot],
                want,
                ulps,
            );
        }
    }
    checks.finish();
}

// ---------------------------------------------------------------------------------------------
// common_geometric

#[test]
fn the_common_and_geometric_corpus_kernel_is_within_opencl_bounds() {
    for target in TARGETS {
        common_geometric_matches_the_cpu(target);
    }
}

fn common_geometric_matches_the_cpu(target: SimGpu) {
    let rt = sim(target);
    let program = corpus_program(&rt, target, "common_geometric", 64, &["x", "y", "o"]);
    let n = 64;
    let mut random = Random(0x0bad_5eed);
    let mut x: Vec<[f32; 4]> = Vec::new();
    let mut y: Vec<[f32; 4]> = Vec::new();
    for i in 0..n {
        // Magnitudes from 1/8 to 8, so that the geometric functions neither over- nor underflow,
        // and a few exact edges for clamp, step and sign.
        let scale = 2f64.powi((i % 7) as i32 - 3);
        x.push(std::array::from_fn(|_| (random.range(-1.5, 1.5) * scale) as f32));
        y.push(std::array::from_fn(|_| (random.range(-1.5, 1.5) * scale) as f32));
    }
    x[0] = [1.0, -1.0, 0.0, -0.0];
    y[0] = [1.0, -2.0, 0.0, 0.5];
    x[1] = [2.0, 0.5, -3.0, 1.0];
    y[1] = [2.0, 0.5, -3.0, 1.0];
    let xb = rt.upload(&x.concat(), BufferUsage::Input).unwrap();
    let yb = rt.upload(&y.concat(), BufferUsage::Input).unwrap();
    let ob = rt.create_buffer((n * 8 * 16) as u64, BufferUsage::Output).unwrap();
    dispatch(&rt, &program, &[Arg::Buffer(&xb), Arg::Buffer(&yb), Arg::Buffer(&ob)], 1);
    let o: Vec<f32> = rt.download(&ob).unwrap();
    let mut checks = Checks::new("common_geometric", target);
    let eps = f32::EPSILON as f64;
    for i in 0..n {
        let (a, b) = (x[i], y[i]);
        let a64 = a.map(|v| v as f64);
        let b64 = b.map(|v| v as f64);
        let r = |k: usize, c: usize| o[32 * i + 4 * k + c];
        let inputs = || format!("a = {a:?}, b = {b:?}");
        let max = a64.iter().chain(&b64).fold(0f64, |m, v| m.max(v.abs()));
        let dot: f64 = (0..4).map(|c| a64[c] * b64[c]).sum();
        let length = (0..4).map(|c| a64[c] * a64[c]).sum::<f64>().sqrt();
        let b_length = (0..4).map(|c| b64[c] * b64[c]).sum::<f64>().sqrt();
        let distance = (0..4).map(|c| (a64[c] - b64[c]).powi(2)).sum::<f64>().sqrt();
        let cross = [
            a64[1] * b64[2] - a64[2] * b64[1],
            a64[2] * b64[0] - a64[0] * b64[2],
            a64[0] * b64[1] - a64[1] * b64[0],
            0.0,
        ];
        for c in 0..4 {
            checks.f32("clamp", inputs, r(0, c), Want::Exactly(a[c].clamp(-1.0, 1.0)));
            // mix and smoothstep: absolute tolerances 1e-3 and 1e-5 in the specification's table.
            let mix = a64[c] + (b64[c] - a64[c]) * 0.25;
            checks.f32("mix", inputs, r(1, c), Want::Within { exact: mix, tolerance: 1e-3 });
            checks.f32("step", inputs, r(2, c), Want::Exactly(if b[c] < a[c] { 0.0 } else { 1.0 }));
            let t = ((a64[c] + 1.0) / 2.0).clamp(0.0, 1.0);
            let smooth = t * t * (3.0 - 2.0 * t);
            checks.f32("smoothstep", inputs, r(3, c), Want::Within { exact: smooth, tolerance: 1e-5 });
            // sign exact, degrees and radians within 2 ulp each, then two roundings.
            let sign = if a[c] == 0.0 { a64[c] } else { a64[c].signum() };
            let sum = Sum::of(sign, 0.0).plus(a64[c].to_degrees(), 2.0).plus(b64[c].to_radians(), 2.0);
            checks.f32("sign+deg+rad", inputs, r(4, c), sum.want());
            // normalize within 2 + n ulp, for n = 4.
            checks.f32("normalize", inputs, r(6, c), Want::Near { exact: a64[c] / length, ulps: 6.0 });
            // cross: max·max·3·FLT_EPSILON absolute per component, the fourth component 0.
            let cross_want = if c == 3 {
                Want::Exactly(0.0)
            } else {
                Want::Within { exact: cross[c], tolerance: max * max * 3.0 * eps }
            };
            checks.f32("cross", inputs, r(7, c), cross_want);
        }
        // dot: max·max·(2n - 1)·FLT_EPSILON absolute; length 2.75 + 0.5n ulp; distance 2.5 + 2n
        // ulp; fast_length is implementation-defined: libclc's is half_sqrt(dot(p, p)), held to
        // half_sqrt's 8192 ulp.
        checks.f32("dot", inputs, r(5, 0), Want::Within { exact: dot, tolerance: max * max * 7.0 * eps });
        checks.f32("length", inputs, r(5, 1), Want::Near { exact: length, ulps: 4.75 });
        checks.f32("distance", inputs, r(5, 2), Want::Near { exact: distance, ulps: 10.5 });
        checks.f32("fast_length", inputs, r(5, 3), Want::Near { exact: b_length, ulps: 8192.0 });
    }
    checks.finish();
}

// ---------------------------------------------------------------------------------------------
// relational

#[test]
fn the_relational_corpus_kernel_matches_the_cpu() {
    for target in TARGETS {
        relational_matches_the_cpu(target);
    }
}

fn relational_matches_the_cpu(target: SimGpu) {
    let rt = sim(target);
    let program = corpus_program(&rt, target, "relational", 64, &["x", "y", "o"]);
    let n = 64;
    // Every pair of a set of classes: NaN, infinities, zeros of both signs, a subnormal, normals.
    let values = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 1e-40, -1.5, 2.0];
    let x: Vec<f32> = (0..n).map(|i| values[i % 8]).collect();
    let y: Vec<f32> = (0..n).map(|i| values[i / 8]).collect();
    let xb = rt.upload(&x, BufferUsage::Input).unwrap();
    let yb = rt.upload(&y, BufferUsage::Input).unwrap();
    let ob = rt.create_buffer((n * 10 * 4) as u64, BufferUsage::Output).unwrap();
    dispatch(&rt, &program, &[Arg::Buffer(&xb), Arg::Buffer(&yb), Arg::Buffer(&ob)], 1);
    let o: Vec<i32> = rt.download(&ob).unwrap();
    let mut checks = Checks::new("relational", target);
    for i in 0..n {
        let (a, b) = (x[i], y[i]);
        let inputs = || format!("a = {}, b = {}", hex32(a), hex32(b));
        // Scalar relational functions return 1 for true (vector ones -1).
        let truth = |c: bool| c as i32;
        let unordered = a.is_nan() || b.is_nan();
        // Scalar select(a, b, c) is c ? b : a; bitselect takes each bit from b where 0.5f's is set.
        let select = if a < b { b } else { a };
        let mask = 0.5f32.to_bits();
        let bitselect = (a.to_bits() & !mask) | (b.to_bits() & mask);
        // any() and all() test the sign bit of each component, and the scalar results in those
        // vectors are 0 or 1: both are 0 whatever the inputs.
        let want = [
            ("isnan", truth(a.is_nan())),
            ("isinf", truth(a.is_infinite())),
            ("isequal", truth(a == b)),
            ("isless", truth(a < b)),
            (
                "isfinite+isnormal+signbit",
                truth(a.is_finite()) + truth(b.is_normal()) + truth(a.is_sign_negative()),
            ),
            ("select", select.to_bits() as i32),
            ("bitselect", bitselect as i32),
            ("any", 0),
            ("all", 0),
            ("isunordered+islessgreater", truth(unordered) + truth(!unordered && a != b)),
        ];
        for (k, (function, want)) in want.into_iter().enumerate() {
            checks.exact(function, inputs, o[10 * i + k], want);
        }
    }
    checks.finish();
}

// ---------------------------------------------------------------------------------------------
// conversions

#[test]
fn the_conversions_corpus_kernel_rounds_and_saturates_as_opencl_defines() {
    for target in TARGETS {
        conversions_match_the_cpu(target);
    }
}

fn conversions_match_the_cpu(target: SimGpu) {
    let rt = sim(target);
    let program = corpus_program(&rt, target, "conversions", 64, &["x", "d", "o", "f"]);
    let n = 64;
    // Ties and near-ties for the rounding modes, the bounds of each saturated type, values past
    // int's range, NaN and infinities; then uniform values within ±70000.
    let ties = [0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, -1.0000001];
    let type_bounds =
        [127.5, 128.0, -128.5, -129.0, 255.5, 256.0, 254.5, 32767.5, -32768.5, 65535.9, 65536.0];
    let past_int = [2147483520.0, -2147483648.0, 2147483648.0, 3e9, -3e9, 1e12];
    let specials = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -1.0];
    // Doubles: near int's bounds, past f32's range, a subnormal, the tie between f32's largest value
    // and infinity, NaN, -0.
    let double_edges = [0.5, -1.5, 2147483647.9, -2147483648.9, 3e9, 1e-320, 1e300, -1e300];
    let double_specials = [3.4028235677973366e38, f64::NAN, 1.0 / 3.0, -0.0];
    let mut random = Random(0x5eed_1234);
    let mut x = [ties.as_slice(), &type_bounds, &past_int, &specials].concat();
    let mut d = [double_edges.as_slice(), &double_specials].concat();
    while x.len() < n {
        x.push(random.range(-70000.0, 70000.0) as f32);
    }
    while d.len() < n {
        d.push(random.range(-3e9, 3e9) * if d.len() % 2 == 0 { 1.0 } else { 1e-30 });
    }
    let xb = rt.upload(&x, BufferUsage::Input).unwrap();
    let db = rt.upload(&d, BufferUsage::Input).unwrap();
    let ob = rt.create_buffer((n * 12 * 4) as u64, BufferUsage::Output).unwrap();
    let fb = rt.create_buffer((n * 4 * 4) as u64, BufferUsage::Output).unwrap();
    dispatch(&rt, &program, &[Arg::Buffer(&xb), Arg::Buffer(&db), Arg::Buffer(&ob), Arg::Buffer(&fb)], 1);
    let o: Vec<i32> = rt.download(&ob).unwrap();
    let f: Vec<f32> = rt.download(&fb).unwrap();
    let mut checks = Checks::new("conversions", target);
    for i in 0..n {
        let (a, di) = (x[i], d[i]);
        let inputs = || format!("a = {}, d = {}", hex32(a), hex64(di));
        let a64 = a as f64;
        // Conversions without _sat are defined only where the rounded value fits the type.
        let rounded = [
            ("convert_int_rte", a64.round_ties_even()),
            ("convert_int_rtz", a64.trunc()),
            ("convert_int_rtp", a64.ceil()),
            ("convert_int_rtn", a64.floor()),
        ];
        let defined = rounded.map(|(_, v)| fits_int(v));
        for (k, (function, _)) in rounded.iter().enumerate() {
            if let Some(want) = defined[k] {
                checks.exact(function, inputs, o[12 * i + k], want);
            }
        }
        // Rust's float-to-integer casts truncate and saturate, NaN to 0: OpenCL's _sat.
        checks.exact("convert_int_sat", inputs, o[12 * i + 4], a as i32);
        checks.exact("convert_uint_sat", inputs, o[12 * i + 5], (a as u32) as i32);
        checks.exact("convert_char_sat", inputs, o[12 * i + 6], (a as i8) as i32);
        checks.exact("convert_uchar_sat_rte", inputs, o[12 * i + 7], (a.round_ties_even() as u8) as i32);
        checks.exact("convert_short_sat", inputs, o[12 * i + 8], (a as i16) as i32);
        if (0.0..65536.0).contains(&a64.trunc()) {
            checks.exact("convert_ushort", inputs, o[12 * i + 9], a64.trunc() as i32);
        }
        // (int) of a long keeps its low 32 bits.
        checks.exact("convert_long_sat", inputs, o[12 * i + 10], ((a * 1e10) as i64) as i32);
        if let Some(want) = to_int(di) {
            checks.exact("convert_int(double)", inputs, o[12 * i + 11], want);
        }
        // Conversions to float round to nearest even, as Rust's casts do.
        checks.f32("convert_float(double)", inputs, f[4 * i], Want::Exactly(di as f32));
        if let Some(r0) = defined[0] {
            let long = r0 as i64 * 3_000_000_000;
            checks.f32("convert_float(long)", inputs, f[4 * i + 1], Want::Exactly(long as f32));
        }
        if let Some(r1) = defined[1] {
            checks.f32("convert_float(uint)", inputs, f[4 * i + 2], Want::Exactly(r1 as u32 as f32));
        }
        if let Some(r2) = defined[2] {
            checks.f32("as_float", inputs, f[4 * i + 3], Want::Exactly(f32::from_bits(r2 as u32)));
        }
    }
    checks.finish();
}

// ---------------------------------------------------------------------------------------------
// vectors

#[test]
fn the_vectors_corpus_kernel_loads_and_stores_every_width() {
    for target in TARGETS {
        vectors_match_the_cpu(target);
    }
}

fn vectors_match_the_cpu(target: SimGpu) {
    let rt = sim(target);
    // The stores' regions (o, o+64, o+128, o+256, o+512, ...) overlap past 21 work-items, where
    // the result would depend on the order of the writes: 16 work-items keep them apart.
    let n = 16;
    let program = corpus_program(&rt, target, "vectors", n as u32, &["x", "o", "h"]);
    let mut random = Random(0xfeed_f00d);
    let x: Vec<f32> = (0..16 * n).map(|_| random.range(-100.0, 100.0) as f32).collect();
    // Halves: normals, a subnormal, the largest finite (whose double overflows to infinity), -0.
    let mut h: Vec<u16> = (0..4 * n).map(|_| f32_to_f16(random.range(-1000.0, 1000.0) as f32)).collect();
    h[..4].copy_from_slice(&[0x0001, 0x7bff, 0x8000, 0x3c01]);
    // Words nothing writes must keep their contents.
    let sentinel = f32::from_bits(0x7fa5_a5a5);
    let words = 2048 + n;
    let xb = rt.upload(&x, BufferUsage::Input).unwrap();
    let ob = rt.upload(&vec![sentinel; words], BufferUsage::Output).unwrap();
    let hb = rt.upload(&h, BufferUsage::Input).unwrap();
    dispatch(&rt, &program, &[Arg::Buffer(&xb), Arg::Buffer(&ob), Arg::Buffer(&hb)], 1);
    let o: Vec<f32> = rt.download(&ob).unwrap();
    // What each word should hold; None where nothing writes, so that it keeps the sentinel.
    let mut want: Vec<Option<f32>> = vec![None; words];
    for i in 0..n {
        for c in 0..2 {
            want[2 * i + c] = Some(x[2 * i + c] * 2.0);
        }
        for c in 0..3 {
            want[64 + 3 * i + c] = Some(x[3 * i + c] + 1.0);
        }
        for c in 0..4 {
            want[128 + 4 * i + c] = Some(x[4 * i + 3 - c]);
        }
        for c in 0..8 {
            want[256 + 8 * i + c] = Some(x[8 * i + c] * x[8 * i + c]);
        }
        for c in 0..16 {
            want[512 + 16 * i + c] = Some(x[16 * i + c] - 1.0);
        }
        let h4: Vec<f32> = h[4 * i..4 * i + 4].iter().map(|&v| f16_to_f32(v)).collect();
        want[2048 + i] = Some(h4[0] + h4[1] + h4[2] + h4[3]);
    }
    let half_words = 1024..1024 + n.div_ceil(2);
    let mut checks = Checks::new("vectors", target);
    for (word, &got) in o.iter().enumerate() {
        // The halves are checked on their own below.
        if half_words.contains(&word) {
            continue;
        }
        let function = match (word, want[word]) {
            (_, None) => "untouched",
            (0..64, _) => "vstore2",
            (64..128, _) => "vstore3",
            (128..256, _) => "vstore4",
            (256..512, _) => "vstore8",
            (512..1024, _) => "vstore16",
            _ => "vload_half4",
        };
        checks.f32(function, || format!("word {word}"), got, Want::Exactly(want[word].unwrap_or(sentinel)));
    }
    // vstore_half rounds to nearest even by default.
    let halves: Vec<u16> = o[half_words]
        .iter()
        .flat_map(|w| {
            let bits = w.to_bits();
            [bits as u16, (bits >> 16) as u16]
        })
        .collect();
    for i in 0..n {
        let want = f32_to_f16(f16_to_f32(h[i]) * 2.0);
        checks.exact("vstore_half", || format!("h = {:#06x}", h[i]), halves[i], want);
    }
    checks.finish();
}

// ---------------------------------------------------------------------------------------------
// atomics

#[test]
fn the_atomics_corpus_kernel_gives_every_order_independent_result() {
    for target in TARGETS {
        atomics_match_the_cpu(target);
    }
}

fn atomics_match_the_cpu(target: SimGpu) {
    let rt = sim(target);
    // The kernel's local array has 64 entries, one per work-item of a group.
    let (group, groups) = (64usize, 2usize);
    let n = group * groups;
    let program = corpus_program(&rt, target, "atomics", group as u32, &["g", "u", "f"]);
    let g_init: [i32; 16] =
        [1000, 1000, -1, i32::MAX, i32::MIN, 0x7f3c, 0x100, 0x5555, 0, 11, 12, 13, 14, 15, 16, 17];
    let u_init: [u32; 4] = [10, 1000, u32::MAX, 7];
    let mut g = g_init.to_vec();
    g.resize(16 + n, -7);
    let gb = rt.upload(&g, BufferUsage::Output).unwrap();
    let ub = rt.upload(&u_init, BufferUsage::Output).unwrap();
    let fb = rt.upload(&[-1.0f32], BufferUsage::Output).unwrap();
    dispatch(&rt, &program, &[Arg::Buffer(&gb), Arg::Buffer(&ub), Arg::Buffer(&fb)], groups as u32);
    let g: Vec<i32> = rt.download(&gb).unwrap();
    let u: Vec<u32> = rt.download(&ub).unwrap();
    let f: Vec<f32> = rt.download(&fb).unwrap();
    let mut checks = Checks::new("atomics", target);
    let ids = 0..n as i32;
    let none = String::new;
    let sum: i32 = ids.clone().sum();
    checks.exact("atomic_add", none, g[0], g_init[0] + sum);
    checks.exact("atomic_sub", none, g[1], g_init[1] - sum);
    checks.invariant("atomic_xchg", ids.contains(&g[2]), || {
        format!("atomic_xchg left {}, not a work-item's id", g[2])
    });
    checks.exact("atomic_min", none, g[3], ids.clone().fold(g_init[3], i32::min));
    checks.exact("atomic_max", none, g[4], ids.clone().fold(g_init[4], i32::max));
    checks.exact("atomic_and", none, g[5], ids.clone().fold(g_init[5], |v, i| v & i));
    checks.exact("atomic_or", none, g[6], ids.clone().fold(g_init[6], |v, i| v | i));
    checks.exact("atomic_xor", none, g[7], ids.clone().fold(g_init[7], |v, i| v ^ i));
    // cmpxchg(g + 8, i, i + 1) from 0: only work-item k can move k to k + 1, so the value climbs
    // one step at a time; work-item 0 always succeeds (nothing else can move 0), and at most every
    // work-item does.
    checks.invariant("atomic_cmpxchg", (1..=n as i32).contains(&g[8]), || {
        format!("atomic_cmpxchg chain from 0 ended at {}, not in 1..={n}", g[8])
    });
    checks.exact("untouched", none, &g[9..16], &g_init[9..16]);
    checks.exact("atomic_inc", none, u[0], u_init[0] + n as u32);
    checks.exact("atomic_dec", none, u[1], u_init[1] - n as u32);
    checks.exact("atomic_min(uint)", none, u[2], 0);
    checks.exact("atomic_max(uint)", none, u[3], n as u32 - 1);
    checks.invariant("atomic_xchg(float)", (0..n).any(|i| f[0] == i as f32), || {
        format!("atomic_xchg(float) left {}, not a work-item's id", f[0])
    });
    // Local memory: l[j] starts as the global id base + j; work-item j - 1 adds its id to l[j];
    // then everyone does min on l[0], cmpxchg(l[1], id, 0), or on l[2] and xchg on l[3], in any
    // order across work-items but each work-item's own operations in program order.
    for group_id in 0..groups {
        let base = (group * group_id) as i32;
        let l = &g[16 + group * group_id..16 + group * (group_id + 1)];
        let lanes = || (0..group as i32).map(|k| base + k);
        let what = |j: usize| move || format!("group {group_id}: l[{j}] = {}", l[j]);
        for (j, &got) in l.iter().enumerate().skip(4) {
            let j = j as i32;
            checks.exact("local atomic_add", what(j as usize), got, (base + j) + (base + j - 1));
        }
        // Work-item 63 adds base + 63 to l[0] before its own min with base + 63, and no value
        // goes below the smallest id: l[0] ends in [base, base + 63].
        checks.invariant("local atomic_min", (base..=base + 63).contains(&l[0]), what(0));
        // l[1] = base + 1: cmpxchg by work-item 1 zeroes it if it comes before work-item 0's add
        // of base (after which work-item 0's own cmpxchg, seeing base, zeroes it again); else it
        // becomes 2·base + 1, which no later cmpxchg matches unless base is 0.
        checks.invariant("local atomic_cmpxchg", l[1] == 0 || l[1] == 2 * base + 1, what(1));
        // l[2] = ((base + 2 | ors before) + base + 1) | ors after, work-item 1's own or after its
        // add: every split of the ors into before and after, enumerated as sets of OR-ed pairs.
        let mut splits = BTreeSet::from([(base + 2, base + 1)]);
        for v in lanes().filter(|&v| v != base + 1) {
            splits = splits
                .iter()
                .flat_map(|&(before, after)| [(before | v, after), (before, after | v)])
                .collect();
        }
        let possible: BTreeSet<i32> =
            splits.iter().map(|&(before, after)| (before + base + 1) | after).collect();
        checks.invariant("local atomic_or", possible.contains(&l[2]), what(2));
        // l[3]: work-item 2's xchg follows its add, so the last write is an xchg of some id.
        checks.invariant("local atomic_xchg", lanes().any(|v| v == l[3]), what(3));
    }
    checks.finish();
}

// ---------------------------------------------------------------------------------------------
// barriers

#[test]
fn the_barriers_corpus_kernel_reduces_and_exchanges_through_local_memory() {
    for target in TARGETS {
        barriers_match_the_cpu(target);
    }
}

fn barriers_match_the_cpu(target: SimGpu) {
    let rt = sim(target);
    // A group of 256 fills the kernel's whole local tile, so every exchange reads a written entry.
    let (group, groups) = (256usize, 2usize);
    let n = group * groups;
    let program = corpus_program(&rt, target, "barriers", group as u32, &["data", "o"]);
    let mut random = Random(0xabcd_ef01);
    let data: Vec<f32> = (0..n).map(|_| random.range(-10.0, 10.0) as f32).collect();
    let db = rt.upload(&data, BufferUsage::Output).unwrap();
    let ob = rt.create_buffer((groups * 4) as u64, BufferUsage::Output).unwrap();
    dispatch(&rt, &program, &[Arg::Buffer(&db), Arg::Buffer(&ob)], groups as u32);
    let exchanged: Vec<f32> = rt.download(&db).unwrap();
    let sums: Vec<f32> = rt.download(&ob).unwrap();
    let mut checks = Checks::new("barriers", target);
    for group_id in 0..groups {
        // The same tree reduction in the same f32 order: exact.
        let mut tile = data[group * group_id..group * (group_id + 1)].to_vec();
        let mut s = group / 2;
        while s > 0 {
            for l in 0..s {
                tile[l] += tile[l + s];
            }
            s /= 2;
        }
        checks.f32("reduction", || format!("group {group_id}"), sums[group_id], Want::Exactly(tile[0]));
        for l in 0..group {
            let got = exchanged[group * group_id + l];
            checks.f32(
                "exchange",
                || format!("group {group_id}, item {l}"),
                got,
                Want::Exactly(tile[(l * 7) % 256]),
            );
        }
    }
    checks.finish();
}
