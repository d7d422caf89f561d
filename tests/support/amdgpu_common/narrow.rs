//! User-style kernels on the narrow types, run unchanged on a card (`amdgpu::hardware`) and on
//! the simulated gfx1100 and gfx1030 (`sim`): 8- and 16-bit integer arithmetic (saturating,
//! halving, mul_hi, shifts of char vectors, mad_sat, clamp — what clang turns into
//! v_sub_nc_u16 ... clamp, v_mad_u16, v_ashrrev_i16 and the like) and half precision
//! (vstore_half in every rounding mode, half arithmetic and conversions, half2 packed math —
//! v_fma_mix*, v_pk_*, v_cvt_*16*), each against a CPU reference, as wave32 and wave64.

use sparkle::hal::BufferUsage;
use sparkle::kernel::{Access, KernelSpec};
use sparkle::runtime::Arg;
use sparkle::Runtime;

use super::features::{compile, Waves};
use super::TIMEOUT;

/// Work-items each test runs.
const N: usize = 256;

fn spec(name: &str, source: &str, waves: Waves) -> KernelSpec {
    let spec = KernelSpec::new(name, [64, 1, 1]).opencl(name, source);
    match waves {
        Waves::Wave32 => spec,
        Waves::Wave64 => spec.opencl_option("-mwavefrontsize64"),
    }
}

/// A small deterministic generator (xorshift), so that every run checks the same values.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

const NARROW_INT: &str = "
__kernel void narrow_int(__global const uchar *a, __global const uchar *b, __global uchar *ou,
                         __global short *os, __global char4 *oc) {
    uint i = get_global_id(0);
    uchar x = a[i], y = b[i];
    char sx = (char)x, sy = (char)y;
    ou[8 * i + 0] = sub_sat(x, y);
    ou[8 * i + 1] = add_sat(x, y);
    ou[8 * i + 2] = (uchar)(sx >> (y & 7));
    ou[8 * i + 3] = abs_diff(x, y);
    ou[8 * i + 4] = hadd(x, y);
    ou[8 * i + 5] = rhadd(x, y);
    ou[8 * i + 6] = mul_hi(x, y);
    ou[8 * i + 7] = (uchar)(x * y + sx);
    short s = (short)(x * 257 - y * 129), t = (short)(y * 300 - 20000);
    os[8 * i + 0] = add_sat(s, t);
    os[8 * i + 1] = sub_sat(s, t);
    os[8 * i + 2] = s * t + (short)sx;
    os[8 * i + 3] = s >> (y & 15);
    os[8 * i + 4] = max(s, t) - min(s, t);
    os[8 * i + 5] = mad_sat(s, (short)3, t);
    os[8 * i + 6] = clamp(s, (short)-1000, (short)1000);
    os[8 * i + 7] = (short)((ushort)s >> (x & 15));
    char4 v = (char4)(sx, sy, sx ^ sy, sx + sy);
    char4 w = (char4)(sy, sx, (char)i, (char)(i * 7));
    oc[2 * i] = v >> (w & (char4)7);
    oc[2 * i + 1] = add_sat(v, w) - rotate(v, w);
}
";

/// 8- and 16-bit integer arithmetic against the CPU (the operands include the saturating
/// edges: 0, 255, 107 - 202, the i16 limits).
pub fn narrow_integers_match_the_cpu(rt: &Runtime, waves: Waves) {
    let Some(program) = compile(
        rt,
        &spec("narrow_int", NARROW_INT, waves)
            .storage("a", Access::ReadOnly)
            .storage("b", Access::ReadOnly)
            .storage("ou", Access::ReadWrite)
            .storage("os", Access::ReadWrite)
            .storage("oc", Access::ReadWrite),
    ) else {
        return;
    };
    let mut rng = Rng(0x5eed_0001);
    let mut a: Vec<u8> = (0..N).map(|_| rng.next() as u8).collect();
    let mut b: Vec<u8> = (0..N).map(|_| rng.next() as u8).collect();
    for (k, (x, y)) in
        [(107u8, 202u8), (0, 255), (255, 255), (255, 1), (128, 127), (0, 0), (77, 77)].iter().enumerate()
    {
        a[k] = *x;
        b[k] = *y;
    }
    let ab = rt.upload(&a, BufferUsage::Input).unwrap();
    let bb = rt.upload(&b, BufferUsage::Input).unwrap();
    let ou = rt.create_buffer((8 * N) as u64, BufferUsage::Output).unwrap();
    let os = rt.create_buffer((16 * N) as u64, BufferUsage::Output).unwrap();
    let oc = rt.create_buffer((8 * N) as u64, BufferUsage::Output).unwrap();
    let args = [Arg::Buffer(&ab), Arg::Buffer(&bb), Arg::Buffer(&ou), Arg::Buffer(&os), Arg::Buffer(&oc)];
    rt.dispatch(&program, &args, [(N / 64) as u32, 1, 1]).unwrap().wait(TIMEOUT).unwrap();
    let got_u: Vec<u8> = rt.download(&ou).unwrap();
    let got_s: Vec<i16> = rt.download(&os).unwrap();
    let got_c: Vec<i8> = rt.download(&oc).unwrap();
    for i in 0..N {
        let (x, y) = (a[i], b[i]);
        let (sx, sy) = (x as i8, y as i8);
        let want_u = [
            x.saturating_sub(y),
            x.saturating_add(y),
            (i32::from(sx) >> (y & 7)) as u8,
            x.abs_diff(y),
            ((u32::from(x) + u32::from(y)) >> 1) as u8,
            ((u32::from(x) + u32::from(y) + 1) >> 1) as u8,
            ((u32::from(x) * u32::from(y)) >> 8) as u8,
            (i32::from(x) * i32::from(y) + i32::from(sx)) as u8,
        ];
        assert_eq!(&got_u[8 * i..8 * i + 8], &want_u, "uchar results of {x}, {y} (item {i})");
        let s = (i32::from(x) * 257 - i32::from(y) * 129) as i16;
        let t = (i32::from(y) * 300 - 20000) as i16;
        let want_s = [
            s.saturating_add(t),
            s.saturating_sub(t),
            (i32::from(s) * i32::from(t) + i32::from(sx)) as i16,
            (i32::from(s) >> (y & 15)) as i16,
            (i32::from(s.max(t)) - i32::from(s.min(t))) as i16,
            (i32::from(s) * 3 + i32::from(t)).clamp(-32768, 32767) as i16,
            s.clamp(-1000, 1000),
            (i32::from(s as u16) >> (x & 15)) as i16,
        ];
        assert_eq!(&got_s[8 * i..8 * i + 8], &want_s, "short results of {s}, {t} (item {i})");
        let v = [sx, sy, sx ^ sy, sx.wrapping_add(sy)];
        let w = [sy, sx, i as i8, (i * 7) as i8];
        let shifted: Vec<i8> = (0..4).map(|k| v[k] >> (w[k] & 7)).collect();
        let combined: Vec<i8> = (0..4)
            .map(|k| {
                v[k].saturating_add(w[k]).wrapping_sub((v[k] as u8).rotate_left((w[k] & 7) as u32) as i8)
            })
            .collect();
        assert_eq!(&got_c[8 * i..8 * i + 4], &shifted[..], "char4 shifts (item {i})");
        assert_eq!(&got_c[8 * i + 4..8 * i + 8], &combined[..], "char4 add_sat - rotate (item {i})");
    }
}

const HALF_MATH: &str = "
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#pragma OPENCL FP_CONTRACT OFF
__kernel void half_math(__global const float *f, __global const float *g, __global half *oh,
                        __global float *of, __global short *os) {
    uint i = get_global_id(0);
    float x = f[i], y = g[i];
    vstore_half(x, 8 * i + 0, oh);
    vstore_half_rtz(x, 8 * i + 1, oh);
    vstore_half_rtp(x * y, 8 * i + 2, oh);
    half hx = (half)x, hy = (half)y;
    oh[8 * i + 3] = hx * hy;
    oh[8 * i + 4] = hx + hy;
    oh[8 * i + 5] = fma(hx, hy, (half)1.5);
    oh[8 * i + 6] = fmax(hx, hy) - fmin(hx, hy);
    oh[8 * i + 7] = (half)(short)(i * 3) - hx;
    half2 p = (half2)(hx, hy), q = (half2)(hy, (half)0.5);
    half2 r = p * q + p;
    of[4 * i + 0] = vload_half(8 * i + 3, oh) + (float)r.x;
    of[4 * i + 1] = (float)r.y;
    of[4 * i + 2] = (float)(hx / hy);
    of[4 * i + 3] = convert_float(convert_int_sat(hx)) + (float)convert_ushort_sat(hy);
    os[2 * i] = convert_short_sat(hx * (half)100.0);
    os[2 * i + 1] = convert_short_sat_rte(x * 1000.0f);
}
";

/// Rounding modes of the conversions to half.
#[derive(Clone, Copy)]
enum Round {
    Even,
    Zero,
    Up,
}

/// `x` rounded to a binary16 in `mode` (an exact reference, independent of the simulator).
fn half(x: f64, mode: Round) -> u16 {
    if x.is_nan() {
        return 0x7e00;
    }
    let sign: u16 = if x.is_sign_negative() { 0x8000 } else { 0 };
    let a = x.abs();
    if a.is_infinite() {
        return sign | 0x7c00;
    }
    // The binade's exponent (denormals share the smallest), and the spacing of halves in it.
    let mut e = -14i32;
    while e < 15 && 2f64.powi(e + 1) <= a {
        e += 1;
    }
    let ulp = 2f64.powi(e - 10);
    let q = a / ulp;
    let whole = q.floor();
    let frac = q - whole;
    let up = match mode {
        Round::Even => frac > 0.5 || (frac == 0.5 && whole % 2.0 == 1.0),
        Round::Zero => false,
        Round::Up => frac > 0.0 && sign == 0,
    };
    let n = whole as u32 + u32::from(up);
    let value = f64::from(n) * ulp;
    if value > 65504.0 {
        // Past the largest half: infinity, unless rounding toward zero keeps the largest.
        return match mode {
            Round::Zero => sign | 0x7bff,
            Round::Up if sign != 0 => sign | 0x7bff,
            _ => sign | 0x7c00,
        };
    }
    if value < 2f64.powi(-14) {
        return sign | n as u16;
    }
    // n is 1024..=2048 units of this binade; 2048 is the next binade's 1024.
    let (e, n) = if n == 2048 { (e + 1, 1024) } else { (e, n) };
    sign | (((e + 15) as u16) << 10) | (n - 1024) as u16
}

/// The value of the binary16 `h`.
fn half_value(h: u16) -> f64 {
    let sign = if h >> 15 != 0 { -1.0 } else { 1.0 };
    let (e, m) = (i32::from((h >> 10) & 0x1f), f64::from(h & 0x3ff));
    sign * match e {
        0 => m * 2f64.powi(-24),
        31 if m == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1.0 + m / 1024.0) * 2f64.powi(e - 15),
    }
}

fn same_half(got: u16, want: u16) -> bool {
    got == want || (half_value(got).is_nan() && half_value(want).is_nan())
}

fn same_f32(got: f32, want: f32) -> bool {
    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan())
}

/// OpenCL's saturating conversion toward zero (NaN to 0).
fn sat_trunc(x: f64, lo: f64, hi: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        x.trunc().clamp(lo, hi)
    }
}

/// Half-precision conversions and arithmetic against the CPU. Operands include zeros of both
/// signs, half denormals, values past the largest half, and exact halves.
pub fn half_precision_matches_the_cpu(rt: &Runtime, waves: Waves) {
    let Some(program) = compile(
        rt,
        &spec("half_math", HALF_MATH, waves)
            .storage("f", Access::ReadOnly)
            .storage("g", Access::ReadOnly)
            .storage("oh", Access::ReadWrite)
            .storage("of", Access::ReadWrite)
            .storage("os", Access::ReadWrite),
    ) else {
        return;
    };
    let mut rng = Rng(0x5eed_0002);
    let mut unit = || (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
    let mut f: Vec<f32> = (0..N).map(|_| ((unit() - 0.5) * 400.0) as f32).collect();
    let mut g: Vec<f32> = (0..N).map(|_| ((unit() - 0.3) * 50.0) as f32).collect();
    let special = [
        (0.0, 1.0),
        (-0.0, -2.5),
        (1.0e-6, 3.0),
        (-3.0e-7, 0.125),
        (70000.0, 1.0),
        (-65519.0, 1.0),
        (65520.0, -1.0),
        (1.0 + 1.0 / 2048.0, 2.0),
        (2049.0, 0.1),
        (327.0, 0.01),
    ];
    for (k, (x, y)) in special.iter().enumerate() {
        f[k] = *x;
        g[k] = *y;
    }
    let fb = rt.upload(&f, BufferUsage::Input).unwrap();
    let gb = rt.upload(&g, BufferUsage::Input).unwrap();
    let oh = rt.create_buffer((16 * N) as u64, BufferUsage::Output).unwrap();
    let of = rt.create_buffer((16 * N) as u64, BufferUsage::Output).unwrap();
    let os = rt.create_buffer((4 * N) as u64, BufferUsage::Output).unwrap();
    let args = [Arg::Buffer(&fb), Arg::Buffer(&gb), Arg::Buffer(&oh), Arg::Buffer(&of), Arg::Buffer(&os)];
    rt.dispatch(&program, &args, [(N / 64) as u32, 1, 1]).unwrap().wait(TIMEOUT).unwrap();
    let got_h: Vec<u16> = rt.download(&oh).unwrap();
    let got_f: Vec<f32> = rt.download(&of).unwrap();
    let got_s: Vec<i16> = rt.download(&os).unwrap();
    let rte = |x: f64| half(x, Round::Even);
    for i in 0..N {
        let (x, y) = (f[i], g[i]);
        let (hx, hy) = (half_value(rte(f64::from(x))), half_value(rte(f64::from(y))));
        let want_h = [
            rte(f64::from(x)),
            half(f64::from(x), Round::Zero),
            half(f64::from(x * y), Round::Up),
            rte(hx * hy),
            rte(hx + hy),
            rte(hx.mul_add(hy, 1.5)),
            rte(hx.max(hy) - hx.min(hy)),
            rte((3 * i) as f64 - hx),
        ];
        for (k, want) in want_h.iter().enumerate() {
            assert!(
                same_half(got_h[8 * i + k], *want),
                "half result {k} of {x}, {y}: {:#06x}, want {want:#06x}",
                got_h[8 * i + k]
            );
        }
        let rx = half_value(rte(half_value(rte(hx * hy)) + hx));
        let ry = half_value(rte(half_value(rte(hy * 0.5)) + hy));
        let want_f = [
            (half_value(rte(hx * hy)) as f32) + rx as f32,
            ry as f32,
            f32::NAN, // the quotient: checked within one half ulp below
            sat_trunc(hx, f64::from(i32::MIN), f64::from(i32::MAX)) as f32
                + sat_trunc(hy, 0.0, 65535.0) as f32,
        ];
        for k in [0, 1, 3] {
            assert!(
                same_f32(got_f[4 * i + k], want_f[k]),
                "float result {k} of {x}, {y}: {}, want {}",
                got_f[4 * i + k],
                want_f[k]
            );
        }
        // The half quotient within one ulp of the correctly rounded one (the hardware's
        // reciprocal is approximate).
        let quotient = rte(hx / hy);
        let got_q = got_f[4 * i + 2];
        let exact = half_value(quotient);
        if exact.is_nan() {
            assert!(got_q.is_nan(), "{x} / {y}");
        } else if exact.is_infinite() || exact == 0.0 {
            assert_eq!(f64::from(got_q), exact, "{x} / {y}");
        } else {
            let ulp = half_value(quotient.wrapping_add(1)) - exact;
            assert!((f64::from(got_q) - exact).abs() <= ulp.abs(), "{x} / {y}: {got_q}, want {exact}");
        }
        let product = half_value(rte(hx * 100.0));
        let want_s = [sat_trunc(product, -32768.0, 32767.0) as i16, {
            let p = f64::from(x * 1000.0);
            if p.is_nan() {
                0
            } else {
                p.round_ties_even().clamp(-32768.0, 32767.0) as i16
            }
        }];
        assert_eq!(&got_s[2 * i..2 * i + 2], &want_s, "short conversions of {x}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_half_reference_rounds_as_ieee_says() {
        assert_eq!(half(1.0, Round::Even), 0x3c00);
        assert_eq!(half(65504.0, Round::Even), 0x7bff);
        assert_eq!(half(65519.0, Round::Even), 0x7bff);
        assert_eq!(half(65520.0, Round::Even), 0x7c00);
        assert_eq!(half(70000.0, Round::Zero), 0x7bff);
        assert_eq!(half(2f64.powi(-24), Round::Even), 0x0001);
        assert_eq!(half(2f64.powi(-25), Round::Even), 0x0000);
        assert_eq!(half(2f64.powi(-25), Round::Up), 0x0001);
        assert_eq!(half(1.0 + 1.0 / 2048.0, Round::Even), 0x3c00);
        assert_eq!(half(1.0 + 3.0 / 2048.0, Round::Even), 0x3c02);
        assert_eq!(half(-2.0, Round::Up), 0xc000);
        assert_eq!(half(-(1.0 + 1.0 / 4096.0), Round::Up), 0xbc00);
        assert_eq!(half(2047.5, Round::Even), 0x6800);
        assert_eq!(half_value(0x3555), 0.333_251_953_125);
    }
}
