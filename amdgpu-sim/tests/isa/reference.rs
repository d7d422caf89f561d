//! Instructions against independent references on random operands: each runs on one wave32
//! whose lanes hold seeded random values mixed with the edge cases of its types (zeros of both
//! signs, denormals, infinities, NaNs, the integer limits), and every lane's result is compared
//! with a reference written here from the ISA guide's pseudo-code. f16 references compute
//! exactly in f64 and round once to f16 with this file's own conversion.
// Lanes index several rows at once.
#![allow(clippy::needless_range_loop)]

use crate::support::*;

const LANES: usize = 32;

/// A seeded xorshift generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 16) as u32
    }
}

/// The kinds of operand values.
#[derive(Clone, Copy)]
enum Kind {
    /// Any 32 bits, with the integer limits.
    Int,
    /// Two halves, with the f16 edge cases.
    Halves,
    /// An f32 with its edge cases.
    F32,
}

fn operands(kind: Kind, seed: u64) -> Vec<u32> {
    let mut rng = Rng(seed);
    let edges: &[u32] = match kind {
        Kind::Int => &[0, 1, u32::MAX, 0x7fff_ffff, 0x8000_0000, 0xffff, 0x8000, 0x7fff, 0x00ff_00ff],
        Kind::Halves => &[
            0x0000_8000,
            0x3c00_bc00,
            0x7c00_fc00,
            0x7e00_0001,
            0x03ff_8001,
            0x7bff_fbff,
            0x3555_4000,
            0x0400_0200,
        ],
        Kind::F32 => {
            &[0, 0x8000_0000, 0x3f80_0000, 0x7f80_0000, 0xff80_0000, 0x7fc0_0000, 0x0000_0001, 0x807f_ffff]
        }
    };
    (0..LANES).map(|l| if l < edges.len() { edges[l] } else { rng.next() }).collect()
}

/// Runs `body` (which reads v1, v2, v3 and v10, and leaves its result in v10) on one wave32
/// with those registers loaded from `inputs` (v10 also from `inputs[3]`); returns v10 per lane.
fn run(body: &str, inputs: &[Vec<u32>; 4]) -> Vec<u32> {
    let mut data = Vec::new();
    for input in inputs {
        data.extend(u32_bytes(input));
    }
    data.extend(vec![0u8; 4 * LANES]);
    let program = format!(
        "v_lshlrev_b32 v50, 2, v0
         global_load_b32 v1, v50, s[0:1]
         global_load_b32 v2, v50, s[0:1] offset:128
         global_load_b32 v3, v50, s[0:1] offset:256
         global_load_b32 v10, v50, s[0:1] offset:384
         s_waitcnt vmcnt(0)
         {body}
         global_store_b32 v50, v10, s[0:1] offset:512
         s_endpgm"
    );
    let mut mem = run_asm(&program, data, LANES as u32, 1, 0).unwrap();
    mem.u32s(ASM_DATA + 512, LANES)
}

/// Checks `body` against `reference(s0, s1, s2, old v10)` on operands of `kinds`.
fn check(body: &str, kinds: [Kind; 3], seed: u64, reference: impl Fn(u32, u32, u32, u32) -> u32) {
    let inputs = [
        operands(kinds[0], seed),
        operands(kinds[1], seed + 1),
        operands(kinds[2], seed + 2),
        operands(Kind::Int, seed + 3),
    ];
    let got = run(body, &inputs);
    for l in 0..LANES {
        let (a, b, c, d) = (inputs[0][l], inputs[1][l], inputs[2][l], inputs[3][l]);
        let want = reference(a, b, c, d);
        assert_eq!(got[l], want, "`{body}` lane {l}: operands {a:#010x} {b:#010x} {c:#010x} (old {d:#010x}): {:#010x}, want {want:#010x}", got[l]);
    }
}

/// The value of f16 bits.
fn h2f(h: u32) -> f64 {
    let h = h & 0xffff;
    let sign = if h >> 15 != 0 { -1.0 } else { 1.0 };
    let (e, m) = ((h >> 10) & 0x1f, f64::from(h & 0x3ff));
    sign * match e {
        0 => m * 2f64.powi(-24),
        31 if m == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1.0 + m / 1024.0) * 2f64.powi(e as i32 - 15),
    }
}

/// `x` rounded to the nearest f16 (ties to even); NaN as the quiet NaN with `nan`'s payload.
fn f2h(x: f64) -> u32 {
    if x.is_nan() {
        return 0x7e00;
    }
    let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
    let a = x.abs();
    if a >= 65520.0 {
        return sign | 0x7c00;
    }
    let mut e = -14i32;
    while e < 15 && 2f64.powi(e + 1) <= a {
        e += 1;
    }
    let ulp = 2f64.powi(e - 10);
    let q = a / ulp;
    let whole = q.floor();
    let frac = q - whole;
    let n = whole as u32 + u32::from(frac > 0.5 || (frac == 0.5 && whole % 2.0 == 1.0));
    if f64::from(n) * ulp < 2f64.powi(-14) {
        return sign | n;
    }
    let (e, n) = if n == 2048 { (e + 1, 1024) } else { (e, n) };
    sign | ((e + 15) as u32) << 10 | (n - 1024)
}

/// Whether two f16 results agree (any NaN matches any NaN).
fn half_eq(a: u32, b: u32) -> bool {
    a == b || (h2f(a).is_nan() && h2f(b).is_nan())
}

/// The low half of `old` replaced by `h`.
fn low(old: u32, h: u32) -> u32 {
    (old & 0xffff_0000) | (h & 0xffff)
}

fn s16(x: u32) -> i32 {
    x as u16 as i16 as i32
}

#[test]
fn sixteen_bit_integer_operations() {
    let int = [Kind::Int; 3];
    check("v_mad_u16 v10, v1, v2, v3", int, 1, |a, b, c, d| {
        low(d, ((a & 0xffff) * (b & 0xffff)).wrapping_add(c))
    });
    check("v_mad_i16 v10, v1, v2, v3", int, 2, |a, b, c, d| low(d, (s16(a) * s16(b) + s16(c)) as u32));
    check("v_mad_i32_i16 v10, v1, v2, v3", int, 3, |a, b, c, _| {
        (s16(a) * s16(b)).wrapping_add(c as i32) as u32
    });
    check("v_mad_u32_u16 v10, v1, v2, v3", int, 4, |a, b, c, _| {
        ((a & 0xffff) * (b & 0xffff)).wrapping_add(c)
    });
    check("v_min3_i16 v10, v1, v2, v3", int, 5, |a, b, c, d| low(d, s16(a).min(s16(b)).min(s16(c)) as u32));
    check("v_max3_u16 v10, v1, v2, v3", int, 6, |a, b, c, d| {
        low(d, (a & 0xffff).max(b & 0xffff).max(c & 0xffff))
    });
    check("v_med3_i16 v10, v1, v2, v3", int, 7, |a, b, c, d| {
        let mut v = [s16(a), s16(b), s16(c)];
        v.sort();
        low(d, v[1] as u32)
    });
    check("v_med3_u16 v10, v1, v2, v3", int, 8, |a, b, c, d| {
        let mut v = [a & 0xffff, b & 0xffff, c & 0xffff];
        v.sort();
        low(d, v[1])
    });
    check("v_ashrrev_i16 v10, v1, v2", int, 9, |a, b, _, d| low(d, (s16(b) >> (a & 15)) as u32));
    check("v_lshrrev_b16 v10, v1, v2", int, 10, |a, b, _, d| low(d, (b & 0xffff) >> (a & 15)));
    check("v_lshlrev_b16 v10, v1, v2", int, 11, |a, b, _, d| low(d, (b << (a & 15)) & 0xffff));
    check("v_add_nc_i16 v10, v1, v2 clamp", int, 12, |a, b, _, d| {
        low(d, (s16(a) + s16(b)).clamp(-32768, 32767) as u32)
    });
    check("v_sub_nc_u16 v10, v1, v2 clamp", int, 13, |a, b, _, d| {
        low(d, (a & 0xffff).saturating_sub(b & 0xffff))
    });
    check("v_mul_lo_u16 v10, v1, v2", int, 14, |a, b, _, d| low(d, a.wrapping_mul(b) & 0xffff));
    check("v_not_b16 v10.l, v1.l", int, 15, |a, _, _, d| low(d, !a));
    check("v_sat_pk_u8_i16 v10.l, v1", int, 16, |a, _, _, d| {
        let sat = |x: i32| x.clamp(0, 255) as u32;
        low(d, sat(s16(a)) | sat(s16(a >> 16)) << 8)
    });
}

#[test]
fn half_precision_conversions_and_math() {
    type Unary = fn(u32, u32) -> u32;
    let checks: [(&str, Unary); 10] = [
        ("v_cvt_f16_u16 v10.l, v1.l", |a, d| low(d, f2h(f64::from(a & 0xffff)))),
        ("v_cvt_f16_i16 v10.l, v1.l", |a, d| low(d, f2h(f64::from(s16(a))))),
        ("v_cvt_u16_f16 v10.l, v2.l", |b, d| {
            let x = h2f(b);
            low(d, if x.is_nan() { 0 } else { x.trunc().clamp(0.0, 65535.0) as u32 })
        }),
        ("v_cvt_i16_f16 v10.l, v2.l", |b, d| {
            let x = h2f(b);
            low(d, if x.is_nan() { 0 } else { x.trunc().clamp(-32768.0, 32767.0) as i32 as u32 })
        }),
        ("v_floor_f16 v10.l, v2.l", |b, d| low(d, f2h(h2f(b).floor()))),
        ("v_trunc_f16 v10.l, v2.l", |b, d| low(d, f2h(h2f(b).trunc()))),
        ("v_sqrt_f16 v10.l, v2.l", |b, d| low(d, f2h(h2f(b).sqrt()))),
        ("v_frexp_mant_f16 v10.l, v2.l", |b, d| {
            let x = h2f(b);
            if x == 0.0 || !x.is_finite() {
                low(d, b)
            } else {
                let e = x.abs().log2().floor() + 1.0;
                low(d, f2h(x / 2f64.powf(e)))
            }
        }),
        ("v_fract_f16 v10.l, v2.l", |b, d| {
            let x = h2f(b);
            if x.is_infinite() {
                low(d, 0x7e00)
            } else {
                low(d, f2h((x - x.floor()).min(h2f(0x3bff))))
            }
        }),
        ("v_rcp_f16 v10.l, v2.l", |b, d| low(d, f2h(1.0 / h2f(b)))),
    ];
    for (i, (body, reference)) in checks.into_iter().enumerate() {
        let inputs = [
            operands(Kind::Int, 20 + i as u64),
            operands(Kind::Halves, 40 + i as u64),
            vec![0; LANES],
            operands(Kind::Int, 60),
        ];
        let got = run(body, &inputs);
        for l in 0..LANES {
            let arg = if body.contains(", v1.") { inputs[0][l] } else { inputs[1][l] };
            let want = reference(arg, inputs[3][l]);
            assert!(
                half_eq(got[l] & 0xffff, want & 0xffff) && got[l] >> 16 == want >> 16,
                "`{body}` lane {l}: {arg:#06x}: {:#010x}, want {want:#010x}",
                got[l]
            );
        }
    }
    // Three-operand f16 math and ldexp.
    let halves = [Kind::Halves; 3];
    let inputs = [
        operands(Kind::Halves, 70),
        operands(Kind::Halves, 71),
        operands(Kind::Halves, 72),
        operands(Kind::Int, 73),
    ];
    for (body, reference) in [
        (
            "v_fma_f16 v10.l, v1.l, v2.l, v3.l",
            (|a, b, c| h2f(a).mul_add(h2f(b), h2f(c))) as fn(u32, u32, u32) -> f64,
        ),
        ("v_ldexp_f16 v10.l, v1.l, v2.l", |a, b, _| h2f(a) * 2f64.powi(s16(b).clamp(-100, 100))),
    ] {
        let got = run(body, &inputs);
        for l in 0..LANES {
            let (a, b, c) = (inputs[0][l], inputs[1][l], inputs[2][l]);
            let want = f2h(reference(a, b, c));
            assert!(
                half_eq(got[l] & 0xffff, want),
                "`{body}` lane {l}: {a:#x} {b:#x} {c:#x}: {:#06x}, want {want:#06x}",
                got[l] & 0xffff
            );
        }
    }
    let _ = halves;
}

#[test]
fn packed_and_dot_product_operations() {
    let int = [Kind::Int; 3];
    let per_half = |f: fn(u32, u32, u32) -> u32| {
        move |a: u32, b: u32, c: u32, _| {
            f(a & 0xffff, b & 0xffff, c & 0xffff) & 0xffff | (f(a >> 16, b >> 16, c >> 16) & 0xffff) << 16
        }
    };
    check("v_pk_mad_i16 v10, v1, v2, v3", int, 100, per_half(|a, b, c| (s16(a) * s16(b) + s16(c)) as u32));
    check("v_pk_mad_u16 v10, v1, v2, v3", int, 101, per_half(|a, b, c| (a * b).wrapping_add(c)));
    check(
        "v_pk_add_i16 v10, v1, v2 clamp",
        int,
        102,
        per_half(|a, b, _| (s16(a) + s16(b)).clamp(-32768, 32767) as u32),
    );
    check("v_pk_sub_u16 v10, v1, v2 clamp", int, 103, per_half(|a, b, _| a.saturating_sub(b)));
    check("v_pk_ashrrev_i16 v10, v1, v2", int, 104, per_half(|a, b, _| (s16(b) >> (a & 15)) as u32));
    check("v_pk_max_i16 v10, v1, v2", int, 105, per_half(|a, b, _| s16(a).max(s16(b)) as u32));
    check("v_pk_min_u16 v10, v1, v2", int, 106, per_half(|a, b, _| a.min(b)));
    let bytes = |x: u32, signed: bool| -> [i64; 4] {
        std::array::from_fn(|k| {
            if signed {
                i64::from((x >> (8 * k)) as u8 as i8)
            } else {
                i64::from((x >> (8 * k)) as u8)
            }
        })
    };
    check("v_dot4_i32_iu8 v10, v1, v2, v3 neg_lo:[1,1,0]", int, 107, |a, b, c, _| {
        let (x, y) = (bytes(a, true), bytes(b, true));
        (0..4).fold(i64::from(c as i32), |s, k| s + x[k] * y[k]) as u32
    });
    check("v_dot4_u32_u8 v10, v1, v2, v3 clamp", int, 108, |a, b, c, _| {
        let (x, y) = (bytes(a, false), bytes(b, false));
        (0..4).fold(i64::from(c), |s, k| s + x[k] * y[k]).min(i64::from(u32::MAX)) as u32
    });
    check("v_dot8_u32_u4 v10, v1, v2, v3", int, 109, |a, b, c, _| {
        (0..8).fold(c, |s, k| s.wrapping_add(((a >> (4 * k)) & 15) * ((b >> (4 * k)) & 15)))
    });
    // A NaN result matches any NaN (which one the hardware makes is not specified).
    let inputs = [
        operands(Kind::Halves, 110),
        operands(Kind::Halves, 111),
        operands(Kind::Halves, 112),
        operands(Kind::Int, 113),
    ];
    let got = run("v_fma_mixlo_f16 v10, v1, v2, v3 op_sel_hi:[1,1,1]", &inputs);
    for l in 0..LANES {
        let (a, b, c, d) = (inputs[0][l], inputs[1][l], inputs[2][l], inputs[3][l]);
        let want = f2h(f64::from((h2f(a) as f32).mul_add(h2f(b) as f32, h2f(c) as f32)));
        assert!(
            half_eq(got[l] & 0xffff, want) && got[l] >> 16 == d >> 16,
            "fma_mixlo lane {l}: {:#x}, want {want:#x}",
            got[l]
        );
    }
}

#[test]
fn byte_and_cube_map_operations() {
    let int = [Kind::Int; 3];
    let byte = |x: u32, k: u32| (x >> (8 * k)) & 0xff;
    check("v_sad_u8 v10, v1, v2, v3", int, 200, move |a, b, c, _| {
        (0..4).fold(c, |s, k| s.wrapping_add(byte(a, k).abs_diff(byte(b, k))))
    });
    check("v_msad_u8 v10, v1, v2, v3", int, 201, move |a, b, c, _| {
        (0..4)
            .fold(c, |s, k| if byte(b, k) == 0 { s } else { s.wrapping_add(byte(a, k).abs_diff(byte(b, k))) })
    });
    check("v_sad_u16 v10, v1, v2, v3", int, 202, |a, b, c, _| {
        c.wrapping_add((a & 0xffff).abs_diff(b & 0xffff)).wrapping_add((a >> 16).abs_diff(b >> 16))
    });
    check("v_sad_u32 v10, v1, v2, v3", int, 203, |a, b, c, _| a.abs_diff(b).wrapping_add(c));
    check("v_lerp_u8 v10, v1, v2, v3", int, 204, move |a, b, c, _| {
        (0..4).fold(0, |o, k| o | ((byte(a, k) + byte(b, k) + ((c >> (8 * k)) & 1)) >> 1) << (8 * k))
    });
    let f = f32::from_bits;
    let face = |x: f32, y: f32, z: f32| {
        if z.abs() >= x.abs() && z.abs() >= y.abs() {
            2
        } else if y.abs() >= x.abs() {
            1
        } else {
            0
        }
    };
    check("v_cubeid_f32 v10, v1, v2, v3", [Kind::F32; 3], 205, move |a, b, c, _| {
        let (x, y, z) = (f(a), f(b), f(c));
        match face(x, y, z) {
            2 => {
                if z < 0.0 {
                    5.0f32
                } else {
                    4.0
                }
            }
            1 => {
                if y < 0.0 {
                    3.0
                } else {
                    2.0
                }
            }
            _ => {
                if x < 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
        }
        .to_bits()
    });
    check("v_cubema_f32 v10, v1, v2, v3", [Kind::F32; 3], 206, move |a, b, c, _| {
        let (x, y, z) = (f(a), f(b), f(c));
        let m = [x, y, z][face(x, y, z)] * 2.0;
        if m.is_nan() {
            0x7fc0_0000
        } else {
            m.to_bits()
        }
    });
    check("v_cvt_off_f32_i4 v10, v1", int, 207, |a, _, _, _| {
        ((((a & 15) << 28) as i32 >> 28) as f32 / 16.0).to_bits()
    });
}

#[test]
fn scalar_64_bit_bit_operations() {
    let body = "
        s_mov_b32 s10, 0x00f000f0
        s_mov_b32 s11, 0x80000001
        s_brev_b64 s[12:13], s[10:11]
        s_ctz_i32_b64 s14, s[10:11]
        s_clz_i32_u64 s15, s[10:11]
        s_cls_i32_i64 s16, s[10:11]
        s_mov_b64 s[18:19], 0
        s_bitset1_b64 s[18:19], 40
        s_bitreplicate_b64_b32 s[20:21], 0x80000003
        s_bcnt0_i32_b64 s22, s[10:11]
        s_quadmask_b32 s23, 0x00f000f1
        s_wqm_b32 s24, 0x00100201
        s_mov_b32 s25, 0
    ";
    let mut s = String::from(body);
    s.push_str("\nv_mov_b32 v0, 0\n");
    for (k, i) in (12..=25).enumerate() {
        s.push_str(&format!("v_mov_b32 v1, s{i}\nglobal_store_b32 v0, v1, s[0:1] offset:{}\n", 4 * k));
    }
    s.push_str("s_endpgm\n");
    let mut mem = run_asm(&s, vec![0; 4 * 14], 1, 1, 0).unwrap();
    let got = mem.u32s(ASM_DATA, 14);
    let x = 0x8000_0001_00f0_00f0u64;
    let rev = x.reverse_bits();
    let replicated = (0..32).fold(0u64, |d, i| d | (u64::from(0x8000_0003u32 >> i & 1) * (3 << (2 * i))));
    let want = [
        rev as u32,
        (rev >> 32) as u32,
        x.trailing_zeros(),
        x.leading_zeros(),
        // s_cls: the sign bit set, the next one clear: one leading bit equals the sign.
        1,
        // s17, not written.
        0,
        // bit 40 of s[18:19]: bit 8 of s19.
        0,
        1 << 8,
        replicated as u32,
        (replicated >> 32) as u32,
        x.count_zeros(),
        // Nibbles 0, 1 and 5 of 0x00f000f1 have a bit set.
        0b10_0011,
        // Nibbles 0, 2 and 5 of 0x00100201 have a bit set: they become all ones.
        0x00f0_0f0f,
        0,
    ];
    assert_eq!(got, want);
}

#[test]
fn lds_swizzle_append_wrap_exchange_and_d16() {
    let body = "
        v_lshlrev_b32 v20, 2, v0
        v_add_nc_u32 v1, 100, v0
        ds_swizzle_b32 v10, v1 offset:swizzle(QUAD_PERM, 3, 2, 1, 0)
        ds_swizzle_b32 v11, v1 offset:swizzle(BITMASK_PERM, \"00i11\")
        v_mov_b32 v2, 0
        ds_store_b32 v2, v2
        s_mov_b32 m0, 0
        ds_append v12
        v_mov_b32 v3, 10
        v_mov_b32 v4, 5
        v_mov_b32 v5, 7
        ds_store_b32 v20, v5 offset:256
        ds_wrap_rtn_b32 v13, v20, v4, v3 offset:256
        ds_load_b32 v14, v20 offset:256
        v_mov_b32 v6, 0x11112222
        ds_storexchg_2addr_rtn_b32 v[15:16], v20, v6, v1 offset0:128 offset1:160
        ds_load_u16_d16_hi v6, v20 offset:512
        s_waitcnt lgkmcnt(0)
        v_mov_b32 v17, v6
        v_lshlrev_b32 v21, 4, v0
        global_store_b128 v21, v[10:13], s[0:1]
        global_store_b128 v21, v[14:17], s[0:1] offset:512
        s_endpgm
    ";
    let mut mem = run_asm(body, vec![0; 1024], 32, 1, 1024).unwrap();
    let a = mem.u32s(ASM_DATA, 128);
    let b = mem.u32s(ASM_DATA + 512, 128);
    for l in 0..32u32 {
        let row = &a[4 * l as usize..4 * l as usize + 4];
        assert_eq!(row[0], 100 + (l & !3) + (3 - (l & 3)), "quad permute, lane {l}");
        // and_mask 0b11 (the bits marked 1), or_mask 0, xor_mask 0b100 (i): (l & 3) ^ 4.
        assert_eq!(row[1], 100 + (((l & 4) | 3) ^ 4), "bitmask permute, lane {l}");
        assert_eq!(row[2], 0, "ds_append returns the counter before the wave's 32");
        assert_eq!(row[3], 7, "ds_wrap returns the old value");
        let rest = &b[4 * l as usize..4 * l as usize + 4];
        assert_eq!(rest[0], 2, "7 >= 5: 7 - 5");
        assert_eq!((rest[1], rest[2]), (0, 0), "the exchange returns the old LDS values");
        assert_eq!(rest[3], 0x2222_2222, "a d16_hi load fills the high half, keeping the low one");
    }
}

#[test]
fn untyped_buffers_scalar_buffer_loads_and_addtid() {
    // V# in s[4:7]: the data buffer, stride 0, 256 bytes (a raw buffer).
    let body = format!(
        "s_mov_b32 s4, {lo:#x}
         s_mov_b32 s5, {hi:#x}
         s_mov_b32 s6, 256
         s_mov_b32 s7, 0
         v_lshlrev_b32 v20, 2, v0
         buffer_load_b32 v10, v20, s[4:7], 0 offen
         v_add_nc_u32 v11, 1000, v0
         buffer_store_b32 v11, v20, s[4:7], 0 offen offset:128
         v_mov_b32 v12, 1
         buffer_atomic_add_u32 v12, v20, s[4:7], 0 offen offset:128 glc
         s_buffer_load_b32 s8, s[4:7], 0x8
         global_load_addtid_b32 v13, s[0:1] offset:0
         s_waitcnt vmcnt(0) lgkmcnt(0)
         v_mov_b32 v14, s8
         v_lshlrev_b32 v21, 4, v0
         global_store_b128 v21, v[10:13], s[0:1] offset:256
         global_store_b32 v20, v14, s[0:1] offset:768
         s_endpgm",
        lo = ASM_DATA as u32,
        hi = (ASM_DATA >> 32) as u32
    );
    let mut data = u32_bytes(&(0..64u32).map(|i| i * 3).collect::<Vec<_>>());
    data.resize(1024, 0);
    let mut mem = run_asm(&body, data, 32, 1, 0).unwrap();
    let rows = mem.u32s(ASM_DATA + 256, 128);
    let scalars = mem.u32s(ASM_DATA + 768, 32);
    let stored = mem.u32s(ASM_DATA + 128, 32);
    for l in 0..32u32 {
        let row = &rows[4 * l as usize..4 * l as usize + 4];
        assert_eq!(row[0], 3 * l, "buffer_load, lane {l}");
        assert_eq!(row[1], 1000 + l, "the stored value");
        assert_eq!(row[2], 1000 + l, "buffer_atomic_add returns the old value");
        assert_eq!(row[3], 3 * l, "global_load_addtid: SADDR + 4 * lane");
        assert_eq!(scalars[l as usize], 6, "s_buffer_load at byte 8");
        assert_eq!(stored[l as usize], 1001 + l, "store then atomic add");
    }
    // Past the buffer's 256 bytes: what the hardware returns depends on OOB_SELECT; refused.
    let oob = format!(
        "s_mov_b32 s4, {lo:#x}\ns_mov_b32 s5, {hi:#x}\ns_mov_b32 s6, 256\ns_mov_b32 s7, 0\n\
         v_mov_b32 v1, 256\nbuffer_load_b32 v10, v1, s[4:7], 0 offen\ns_endpgm",
        lo = ASM_DATA as u32,
        hi = (ASM_DATA >> 32) as u32
    );
    let err = run_asm(&oob, vec![0; 1024], 1, 1, 0).unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");
}

#[test]
fn wmma_multiplies_16x16_matrices_as_rdna3_lays_them_out() {
    // A and B: small integers as f16 (exact products and sums); C: f32.
    let a: Vec<Vec<f64>> =
        (0..16).map(|i| (0..16).map(|k| ((i * 7 + k * 3) % 9) as f64 - 4.0).collect()).collect();
    let b: Vec<Vec<f64>> =
        (0..16).map(|k| (0..16).map(|j| ((k * 5 + j) % 7) as f64 - 3.0).collect()).collect();
    let c: Vec<Vec<f32>> = (0..16).map(|i| (0..16).map(|j| (i * 16 + j) as f32 * 0.5).collect()).collect();
    // Per lane: 8 dwords of A (row lane % 16), 8 of B (column lane % 16), 8 of C.
    let mut data = Vec::new();
    for lane in 0..32usize {
        let row = lane % 16;
        let half = |x: f64| f2h(x);
        for v in 0..8 {
            data.push(half(a[row][2 * v]) | half(a[row][2 * v + 1]) << 16);
        }
        for v in 0..8 {
            data.push(half(b[2 * v][row]) | half(b[2 * v + 1][row]) << 16);
        }
        for v in 0..8 {
            // C element (m, n) sits in lane n + 16 * (m % 2), VGPR m / 2.
            let (n, m) = (lane % 16, 2 * v + lane / 16);
            data.push(c[m][n].to_bits());
        }
    }
    let body = "
        v_mul_u32_u24 v50, 96, v0
        global_load_b128 v[20:23], v50, s[0:1]
        global_load_b128 v[24:27], v50, s[0:1] offset:16
        global_load_b128 v[28:31], v50, s[0:1] offset:32
        global_load_b128 v[32:35], v50, s[0:1] offset:48
        global_load_b128 v[36:39], v50, s[0:1] offset:64
        global_load_b128 v[40:43], v50, s[0:1] offset:80
        s_waitcnt vmcnt(0)
        v_wmma_f32_16x16x16_f16 v[36:43], v[20:27], v[28:35], v[36:43]
        v_lshlrev_b32 v51, 5, v0
        global_store_b128 v51, v[36:39], s[0:1] offset:3072
        global_store_b128 v51, v[40:43], s[0:1] offset:3088
        s_endpgm
    ";
    let mut bytes = u32_bytes(&data);
    bytes.resize(3072 + 32 * 32, 0);
    let mut mem = run_asm(body, bytes, 32, 1, 0).unwrap();
    let out = mem.u32s(ASM_DATA + 3072, 256);
    for lane in 0..32usize {
        for v in 0..8 {
            let (n, m) = (lane % 16, 2 * v + lane / 16);
            let want = c[m][n] as f64 + (0..16).map(|k| a[m][k] * b[k][n]).sum::<f64>();
            assert_eq!(f32::from_bits(out[8 * lane + v]) as f64, want, "D[{m}][{n}] (lane {lane}, VGPR {v})");
        }
    }
}

#[test]
fn vopd_dot2acc_and_gfx10_only_instructions() {
    // v_dual_dot2acc_f32_f16: D += a.lo * b.lo + a.hi * b.hi.
    let body = "
        v_mov_b32 v1, 0x40003c00
        v_mov_b32 v2, 0x42004400
        v_mov_b32 v10, 1.0
        v_mov_b32 v6, 7
        v_dual_dot2acc_f32_f16 v10, v1, v2 :: v_dual_mov_b32 v11, v6
    ";
    let mut s = String::from(body);
    s.push_str("\nv_lshlrev_b32 v50, 2, v0\nglobal_store_b32 v50, v10, s[0:1]\ns_endpgm\n");
    let mut mem = run_asm(&s, vec![0; 128], 32, 1, 0).unwrap();
    // 1 + 1 * 4 + 2 * 3 = 11.
    assert!(mem.f32s(ASM_DATA, 32).iter().all(|&x| x == 11.0));
    // gfx10.3's own: s_ff0_i32_b32 (the first zero bit) and v_dot4c_i32_i8 (D += signed bytes).
    let body = "
        s_ff0_i32_b32 s10, 0x0000ffff
        v_mov_b32 v1, 0xff02ff03
        v_mov_b32 v2, 0x01020304
        v_mov_b32 v3, 100
        v_dot4c_i32_i8 v3, v1, v2
        v_mov_b32 v4, s10
        v_lshlrev_b32 v50, 3, v0
        v_mov_b32 v51, 0
        v_add_co_u32 v52, vcc_lo, s0, v50
        v_add_co_ci_u32_e32 v53, vcc_lo, s1, v51, vcc_lo
        global_store_dwordx2 v[52:53], v[3:4], off
        s_endpgm
    ";
    let mut mem = run_asm_gfx10(body, vec![0; 256], 32, 0).unwrap();
    let out = mem.u32s(ASM_DATA, 64);
    for l in 0..32 {
        // 3 * 4 + (-1) * 3 + 2 * 2 + (-1) * 1 = 12 - 3 + 4 - 1 = 12, plus 100.
        assert_eq!(out[2 * l], 112, "v_dot4c_i32_i8");
        assert_eq!(out[2 * l + 1], 16, "s_ff0_i32_b32 of 0xffff");
    }
}

#[test]
fn packed_saturating_conversions() {
    let f = f32::from_bits;
    let sat = |x: f32, lo: f32, hi: f32| {
        if x.is_nan() {
            0
        } else {
            x.trunc().clamp(lo, hi) as i32 as u32 & 0xffff
        }
    };
    check("v_cvt_pk_i16_f32 v10, v1, v2", [Kind::F32; 3], 208, move |a, b, _, _| {
        sat(f(a), -32768.0, 32767.0) | sat(f(b), -32768.0, 32767.0) << 16
    });
    check("v_cvt_pk_u16_f32 v10, v1, v2", [Kind::F32; 3], 209, move |a, b, _, _| {
        sat(f(a), 0.0, 65535.0) | sat(f(b), 0.0, 65535.0) << 16
    });
    check("v_cvt_pk_u8_f32 v10, v1, v2, v3", [Kind::F32, Kind::Int, Kind::Int], 210, move |a, b, c, _| {
        let x = f(a);
        let byte = if x.is_nan() { 0 } else { x.round_ties_even().clamp(0.0, 255.0) as u32 };
        (c & !(0xff << (8 * (b & 3)))) | byte << (8 * (b & 3))
    });
}
