//! End to end: OpenCL C kernels compiled by clang for gfx1100 (with clang builtins only and with
//! libclc) run on the ISA interpreter and match CPU references.

use crate::support::*;
use sparkle_amdgpu_sim::isa::run_dispatch;

const X_BASE: u64 = 0x3_0000_0000;
const Y_BASE: u64 = 0x3_1000_0000;
const Z_BASE: u64 = 0x3_2000_0000;
const W_BASE: u64 = 0x3_3000_0000;

/// Deterministic test data in [-1, 1).
fn data(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2654435761).wrapping_add(12345);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

fn saxpy(build: Build) {
    let (co, notes) = compile_cl("saxpy.cl", build);
    let n = 1000usize; // ragged: not a multiple of the group size
    let x = data(n, 1);
    let y = data(n, 2);
    let a = 1.75f32;
    let mut mem = TestMemory::default();
    let k = load_kernel(&mut mem, &co, &notes, "saxpy");
    mem.map(X_BASE, f32_bytes(&x), false, false);
    // One element of slack past the end catches a store to y[n].
    let mut y_padded = y.clone();
    y_padded.push(-7.0);
    mem.map(Y_BASE, f32_bytes(&y_padded), true, false);
    let args = [ArgValue::Ptr(X_BASE), ArgValue::Ptr(Y_BASE), ArgValue::F32(a), ArgValue::U32(n as u32)];
    let d = prepare_dispatch(&mut mem, &k, &args, [64, 1, 1], [n as u32, 1, 1]);
    let stats = run_dispatch(&d, &mut mem).unwrap();
    assert_eq!(stats.workgroups, 16);
    let got = mem.f32s(Y_BASE, n + 1);
    for i in 0..n {
        let want = a.mul_add(x[i], y[i]);
        assert_eq!(got[i].to_bits(), want.to_bits(), "y[{i}]: got {} want {want}", got[i]);
    }
    assert_eq!(got[n], -7.0, "the kernel wrote past n");
}

#[test]
fn saxpy_builtins() {
    saxpy(Build::Builtins);
}

#[test]
fn saxpy_libclc() {
    saxpy(Build::Libclc);
}

fn sgemm(build: Build, m: usize, n: usize, kk: usize) {
    let (co, notes) = compile_cl("sgemm.cl", build);
    let a = data(m * kk, 3);
    let b = data(kk * n, 4);
    let mut mem = TestMemory::default();
    let k = load_kernel(&mut mem, &co, &notes, "sgemm");
    mem.map(X_BASE, f32_bytes(&a), false, false);
    mem.map(Y_BASE, f32_bytes(&b), false, false);
    mem.map(Z_BASE, vec![0xff; 4 * m * n], true, false);
    let args = [
        ArgValue::Ptr(X_BASE),
        ArgValue::Ptr(Y_BASE),
        ArgValue::Ptr(Z_BASE),
        ArgValue::U32(m as u32),
        ArgValue::U32(n as u32),
        ArgValue::U32(kk as u32),
    ];
    let d = prepare_dispatch(&mut mem, &k, &args, [16, 16, 1], [n as u32, m as u32, 1]);
    assert!(d.lds_bytes() >= 2048, "the kernel's tiles need 2 KiB of LDS");
    let stats = run_dispatch(&d, &mut mem).unwrap();
    let c = mem.f32s(Z_BASE, m * n);
    for r in 0..m {
        for col in 0..n {
            // Same order of fused multiply-adds as the kernel: exact match expected.
            let mut acc = 0.0f32;
            for i in 0..kk {
                acc = a[r * kk + i].mul_add(b[i * n + col], acc);
            }
            let got = c[r * n + col];
            assert!((got - acc).abs() <= 1e-5 * (1.0 + acc.abs()), "c[{r}][{col}]: got {got} want {acc}");
        }
    }
    eprintln!("sgemm {m}x{n}x{kk} ({build:?}): {stats:?}");
}

#[test]
fn sgemm_builtins_ragged() {
    sgemm(Build::Builtins, 37, 45, 83);
}

#[test]
fn sgemm_libclc_ragged() {
    sgemm(Build::Libclc, 33, 29, 70);
}

fn conv2d(build: Build, group: [u32; 3]) {
    let (co, notes) = compile_cl("conv2d.cl", build);
    let (nb, c, h, w, kk) = (2usize, 3usize, 10usize, 9usize, 4usize);
    let inp = data(nb * c * h * w, 5);
    let wt = data(kk * c * 9, 6);
    let bias = data(kk, 7);
    let mut mem = TestMemory::default();
    let k = load_kernel(&mut mem, &co, &notes, "conv2d");
    mem.map(X_BASE, f32_bytes(&inp), false, false);
    mem.map(Y_BASE, f32_bytes(&wt), false, false);
    mem.map(W_BASE, f32_bytes(&bias), false, false);
    mem.map(Z_BASE, vec![0xff; 4 * nb * kk * h * w], true, false);
    let args = [
        ArgValue::Ptr(X_BASE),
        ArgValue::Ptr(Y_BASE),
        ArgValue::Ptr(W_BASE),
        ArgValue::Ptr(Z_BASE),
        ArgValue::U32(nb as u32),
        ArgValue::U32(c as u32),
        ArgValue::U32(h as u32),
        ArgValue::U32(w as u32),
        ArgValue::U32(kk as u32),
    ];
    let d = prepare_dispatch(&mut mem, &k, &args, group, [w as u32, h as u32, (nb * kk) as u32]);
    run_dispatch(&d, &mut mem).unwrap();
    let out = mem.f32s(Z_BASE, nb * kk * h * w);
    for n in 0..nb {
        for k in 0..kk {
            for y in 0..h {
                for x in 0..w {
                    let mut acc = bias[k];
                    for ci in 0..c {
                        for dy in 0..3 {
                            for dx in 0..3 {
                                let (iy, ix) = (y as i64 + dy - 1, x as i64 + dx - 1);
                                if iy < 0 || iy >= h as i64 || ix < 0 || ix >= w as i64 {
                                    continue;
                                }
                                let v = inp[((n * c + ci) * h + iy as usize) * w + ix as usize];
                                acc = v.mul_add(wt[(k * c + ci) * 9 + (dy * 3 + dx) as usize], acc);
                            }
                        }
                    }
                    let got = out[((n * kk + k) * h + y) * w + x];
                    assert!(
                        (got - acc).abs() <= 1e-5 * (1.0 + acc.abs()),
                        "out[{n}][{k}][{y}][{x}]: got {got} want {acc}"
                    );
                }
            }
        }
    }
}

#[test]
fn conv2d_builtins() {
    // The builtins build hard-codes 8 x 8 x 1 groups.
    conv2d(Build::Builtins, [8, 8, 1]);
}

#[test]
fn conv2d_libclc() {
    conv2d(Build::Libclc, [8, 8, 1]);
}

#[test]
fn conv2d_libclc_odd_3d_groups() {
    // 5 x 7 x 2 = 70 threads: three waves, the last with 6 lanes, and groups past every edge.
    conv2d(Build::Libclc, [5, 7, 2]);
}

/// Prints the simulated wave instructions per second on a larger sgemm (no timing assertion).
#[test]
fn simulated_instructions_per_second() {
    let (co, notes) = compile_cl("sgemm.cl", Build::Builtins);
    let (m, n, kk) = (128usize, 128usize, 256usize);
    let mut mem = TestMemory::default();
    let k = load_kernel(&mut mem, &co, &notes, "sgemm");
    mem.map(X_BASE, f32_bytes(&data(m * kk, 8)), false, false);
    mem.map(Y_BASE, f32_bytes(&data(kk * n, 9)), false, false);
    mem.map(Z_BASE, vec![0; 4 * m * n], true, false);
    let args = [
        ArgValue::Ptr(X_BASE),
        ArgValue::Ptr(Y_BASE),
        ArgValue::Ptr(Z_BASE),
        ArgValue::U32(m as u32),
        ArgValue::U32(n as u32),
        ArgValue::U32(kk as u32),
    ];
    let d = prepare_dispatch(&mut mem, &k, &args, [16, 16, 1], [n as u32, m as u32, 1]);
    let start = std::time::Instant::now();
    let stats = run_dispatch(&d, &mut mem).unwrap();
    let secs = start.elapsed().as_secs_f64();
    assert!(stats.instructions > 0 && stats.waves == 64 * 8);
    eprintln!(
        "sgemm {m}x{n}x{kk}: {} wave instructions in {secs:.3} s = {:.1} M wave instructions/s ({:.1} M lane-ops/s)",
        stats.instructions,
        stats.instructions as f64 / secs / 1e6,
        stats.instructions as f64 * 32.0 / secs / 1e6
    );
}

fn close(got: f32, want: f32, rel: f32) -> bool {
    got == want || (got - want).abs() <= rel * want.abs().max(f32::MIN_POSITIVE)
}

fn math(build: Build, correctly_rounded: bool) {
    let flags: &[&str] = if correctly_rounded { &["-cl-fp32-correctly-rounded-divide-sqrt"] } else { &[] };
    let (co, notes) = compile_cl_with("math.cl", build, flags);
    let rel = if correctly_rounded { 0.0 } else { 4e-7 };
    let n = 300usize;
    let a: Vec<f32> = data(n, 10).iter().map(|v| v * 50.0).collect();
    let b: Vec<f32> = data(n, 11).iter().map(|v| if *v == 0.0 { 0.25 } else { v * 7.0 }).collect();
    let ia: Vec<i32> = data(n, 12).iter().map(|v| (v * 1.0e6) as i32).collect();
    let ib: Vec<i32> = data(n, 13)
        .iter()
        .map(|v| match (v * 1000.0) as i32 {
            0 => 3,
            q => q,
        })
        .collect();
    let mut mem = TestMemory::default();
    let k = load_kernel(&mut mem, &co, &notes, "math");
    const IA: u64 = 0x3_4000_0000;
    const IB: u64 = 0x3_5000_0000;
    mem.map(X_BASE, f32_bytes(&a), false, false);
    mem.map(Y_BASE, f32_bytes(&b), false, false);
    mem.map(IA, u32_bytes(&ia.iter().map(|&v| v as u32).collect::<Vec<_>>()), false, false);
    mem.map(IB, u32_bytes(&ib.iter().map(|&v| v as u32).collect::<Vec<_>>()), false, false);
    mem.map(Z_BASE, vec![0; 32 * n], true, false);
    mem.map(W_BASE, vec![0; 32 * n], true, false);
    let args = [
        ArgValue::Ptr(X_BASE),
        ArgValue::Ptr(Y_BASE),
        ArgValue::Ptr(IA),
        ArgValue::Ptr(IB),
        ArgValue::Ptr(Z_BASE),
        ArgValue::Ptr(W_BASE),
        ArgValue::U32(n as u32),
    ];
    let d = prepare_dispatch(&mut mem, &k, &args, [64, 1, 1], [n as u32, 1, 1]);
    run_dispatch(&d, &mut mem).unwrap();
    let fo = mem.f32s(Z_BASE, 8 * n);
    let io: Vec<i32> = mem.u32s(W_BASE, 8 * n).into_iter().map(|v| v as i32).collect();
    for i in 0..n {
        let (x, y, p, q) = (a[i], b[i], ia[i], ib[i]);
        let f = &fo[8 * i..8 * i + 8];
        // OpenCL allows 2.5 ulp for division and 3 ulp for sqrt; the rest is exact.
        assert!(close(f[0], x / y, rel), "{x} / {y}: got {}", f[0]);
        assert!(close(f[1], x.abs().sqrt(), rel), "sqrt {x}: got {}", f[1]);
        assert_eq!(f[2], x.min(y));
        assert_eq!(f[3], x.max(y));
        assert_eq!(f[4], p as f32);
        assert_eq!(f[5], (x * 3.0).floor());
        assert_eq!(f[6], if x > y { x - y } else { y * 2.0 });
        assert_eq!(f[7], x.mul_add(y, 1.0));
        let o = &io[8 * i..8 * i + 8];
        assert_eq!(o[0], p / q, "{p} / {q}");
        assert_eq!(o[1], p % q, "{p} % {q}");
        assert_eq!(o[2], ((p as u32) / (q as u32)) as i32, "{p} /u {q}");
        assert_eq!(o[3], (x * 100.0) as i32);
        assert_eq!(o[4], p.min(q));
        assert_eq!(o[5], p.max(q));
        assert_eq!(o[6], p >> 3);
        assert_eq!(o[7], p.count_ones() as i32 + ((p as u32) >> 29) as i32);
    }
}

#[test]
fn math_builtins() {
    math(Build::Builtins, false);
}

/// Correctly rounded division and square root (v_div_scale / v_div_fmas / v_div_fixup and the
/// scaled v_sqrt sequence): results must equal the CPU's bit for bit.
#[test]
fn math_correctly_rounded_division_and_sqrt() {
    math(Build::Builtins, true);
}

#[test]
fn math_libclc() {
    math(Build::Libclc, false);
}

/// f16 bits -> value, written independently of the interpreter's conversion.
fn half_value(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = ((h >> 10) & 0x1f) as i32;
    let m = (h & 0x3ff) as f64;
    sign * if e == 0 { m * 2f64.powi(-24) } else { (1.0 + m / 1024.0) * 2f64.powi(e - 15) }
}

/// Rounds to the nearest f16 value (ties to even) by scaling to the f16 quantum at v's exponent.
fn round_half(v: f64) -> f64 {
    if v == 0.0 {
        return v;
    }
    let e = v.abs().log2().floor().max(-14.0) as i32;
    let quantum = 2f64.powi(e - 10);
    (v / quantum).round_ties_even() * quantum
}

fn half_ops(build: Build) {
    let (co, notes) = compile_cl("half.cl", build);
    let n = 200usize;
    // Halves spread over several binades, including values that need rounding when combined.
    let to_half_bits = |v: f32| -> u16 {
        let r = round_half(v as f64);
        (0u16..0x7c00).chain(0x8000..0xfc00).find(|&h| half_value(h) == r).unwrap()
    };
    let a: Vec<u16> = data(n, 20).iter().map(|v| to_half_bits(v * 40.0)).collect();
    let b: Vec<u16> = data(n, 21).iter().map(|v| to_half_bits(v * 3.0)).collect();
    let bytes16 = |v: &[u16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let mut mem = TestMemory::default();
    let k = load_kernel(&mut mem, &co, &notes, "half_ops");
    mem.map(X_BASE, bytes16(&a), false, false);
    mem.map(Y_BASE, bytes16(&b), false, false);
    mem.map(Z_BASE, vec![0; 8 * n], true, false);
    mem.map(W_BASE, vec![0; 4 * n], true, false);
    let args = [
        ArgValue::Ptr(X_BASE),
        ArgValue::Ptr(Y_BASE),
        ArgValue::Ptr(Z_BASE),
        ArgValue::Ptr(W_BASE),
        ArgValue::U32(n as u32),
    ];
    let d = prepare_dispatch(&mut mem, &k, &args, [64, 1, 1], [n as u32, 1, 1]);
    run_dispatch(&d, &mut mem).unwrap();
    let o: Vec<f64> =
        mem.bytes(Z_BASE, 8 * n).chunks(2).map(|c| half_value(u16::from_le_bytes([c[0], c[1]]))).collect();
    let f = mem.f32s(W_BASE, n);
    for i in 0..n {
        let (x, y) = (half_value(a[i]), half_value(b[i]));
        // x * y + 1.5 is contracted to one fused operation (one rounding).
        assert_eq!(o[4 * i], round_half(x * y + 1.5), "fma({x}, {y}, 1.5)");
        assert_eq!(o[4 * i + 1], round_half(x - y), "{x} - {y}");
        assert_eq!(o[4 * i + 2], if x > y { x } else { y * 0.5 }, "select {x} {y}");
        assert_eq!(o[4 * i + 3], round_half(x * 3.0), "(half)({x} * 3.0f)");
        assert_eq!(f[i] as f64, round_half(x + y), "(float)({x} + {y})");
    }
}

#[test]
fn half_precision_true16_builtins() {
    half_ops(Build::Builtins);
}

#[test]
fn half_precision_true16_libclc() {
    half_ops(Build::Libclc);
}

/// libclc's math library and global atomics (LLVM's atomic optimizer builds one atomic per wave
/// from mbcnt / readlane / ctz loops).
#[test]
fn libclc_math_functions_and_atomics() {
    let (co, notes) = compile_cl("libm.cl", Build::Libclc);
    let n = 333usize;
    let a: Vec<f32> = data(n, 30).iter().map(|v| v * 20.0).collect();
    let mut mem = TestMemory::default();
    let k = load_kernel(&mut mem, &co, &notes, "libm");
    mem.map(X_BASE, f32_bytes(&a), false, false);
    mem.map(Z_BASE, vec![0; 32 * n], true, false);
    mem.map(W_BASE, u32_bytes(&[0, 0]), true, false);
    let args = [ArgValue::Ptr(X_BASE), ArgValue::Ptr(Z_BASE), ArgValue::Ptr(W_BASE), ArgValue::U32(n as u32)];
    let d = prepare_dispatch(&mut mem, &k, &args, [64, 1, 1], [n as u32, 1, 1]);
    run_dispatch(&d, &mut mem).unwrap();
    let o = mem.f32s(Z_BASE, 8 * n);
    // libclc promises a few ulp; 4e-6 relative (or 1e-6 absolute near zero) catches real errors.
    let near = |got: f32, want: f64, what: &str, x: f32| {
        let tol = 4e-6 * want.abs().max(0.25);
        assert!((got as f64 - want).abs() <= tol, "{what}({x}): got {got}, want {want}");
    };
    for i in 0..n {
        let x = a[i] as f64;
        let f = &o[8 * i..8 * i + 8];
        near(f[0], x.exp(), "exp", a[i]);
        near(f[1], (x.abs() + 1.0).ln(), "log", a[i]);
        near(f[2], x.sin(), "sin", a[i]);
        near(f[3], x.cos(), "cos", a[i]);
        near(f[4], x.abs().powf(1.7f32 as f64), "pow", a[i]);
        near(f[5], x.tanh(), "tanh", a[i]);
        near(f[6], 1.0 / (x.abs() + 0.5).sqrt(), "rsqrt", a[i]);
        near(f[7], x.atan2(2.0), "atan2", a[i]);
    }
    assert_eq!(mem.u32s(W_BASE, 2), vec![n as u32, n as u32 - 1], "atomic_add count and atomic_max id");
}
