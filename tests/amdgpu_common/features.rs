//! The kernels users write beyond the suite, run unchanged on a card (`amdgpu_hw.rs`) and on the
//! simulated gfx1100 (`amdgpu_sim_backend.rs`): double precision, private arrays and register
//! spills (scratch), printf, sub-group operations; each checked against the CPU.

use sparkle::hal::BufferUsage;
use sparkle::kernel::{Access, KernelSpec};
use sparkle::runtime::{Arg, Program};
use sparkle::Runtime;

use super::TIMEOUT;

/// The program, or None (with a note) when no compiler is installed.
pub fn compile(rt: &Runtime, spec: &KernelSpec) -> Option<Program> {
    match rt.program(spec) {
        Ok(program) => Some(program),
        Err(err) if err.kind() == sparkle::ErrorKind::Unavailable => {
            eprintln!("skipping `{}`: {err}", spec.name);
            None
        }
        Err(err) => panic!("{err}"),
    }
}

const FP64: &str = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable
__kernel void fp64(__global const double *x, __global const double *y, __global double *out) {
    uint i = get_global_id(0);
    double a = x[i], b = y[i];
    __global double *o = out + 10 * i;
    o[0] = a + b;
    o[1] = a * b;
    o[2] = fma(a, b, 1.5);
    o[3] = a / b;
    o[4] = sqrt(fabs(a));
    o[5] = (double)(int)clamp(a, -2.0e9, 2.0e9) + (double)(uint)fmin(fabs(b), 4.0e9);
    o[6] = (double)(float)a;
    o[7] = floor(a) - ceil(b);
    o[8] = a - b * 0.25;
    o[9] = fmin(a, b) + fmax(a, b) * 2.0;
}
";

/// The operands: ordinary values, both signs, exact and inexact quotients, huge and tiny
/// magnitudes (the division's scaling paths) and denormals.
fn fp64_operands() -> Vec<(f64, f64)> {
    let mut v = vec![
        (1.0, 3.0),
        (-7.5, 2.0),
        (10.0, -0.1),
        (1e300, 1e-300),
        (1e-300, 1e300),
        (3.0e-310, 7.0),
        (5.0, 3.0e-310),
        (1.7e308, 0.5),
        (2.0f64.powi(1020), 2.0f64.powi(-40)),
        (2.0f64.powi(-1000), 2.0f64.powi(60)),
        (123456.789, 0.001),
        (0.0, 2.0),
        (-0.0, -5.0),
        (f64::MAX, 3.0),
        (1.0e-5, 1.0e5),
        (2.5e10, 1.25e-12),
    ];
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    while v.len() < 96 {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let a = ((state >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 2.0f64.powi((state % 40) as i32 - 20);
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let b = ((state >> 11) as f64 / (1u64 << 53) as f64 + 0.01) * 2.0f64.powi((state % 30) as i32 - 15);
        v.push((a, b));
    }
    v
}

/// Whether `got` is within `ulps` of `want` (NaN matches NaN; zeros match whatever their sign).
fn within_ulps(got: f64, want: f64, ulps: u64) -> bool {
    if want.is_nan() || got.is_nan() {
        return want.is_nan() && got.is_nan();
    }
    if want == got {
        return true;
    }
    if want.is_sign_negative() != got.is_sign_negative() {
        return false;
    }
    got.to_bits().abs_diff(want.to_bits()) <= ulps
}

/// Double arithmetic, conversions, division and square root against the CPU: OpenCL requires
/// correctly rounded +, -, *, fma, / and sqrt in double precision (0 ulp), and the conversions are
/// exact or correctly rounded (out-of-range conversions are undefined in OpenCL C: clamped first).
pub fn fp64_matches_the_cpu(rt: &Runtime) {
    let spec = KernelSpec::new("fp64", [32, 1, 1])
        .opencl("fp64", FP64)
        .storage("x", Access::ReadOnly)
        .storage("y", Access::ReadOnly)
        .storage("out", Access::ReadWrite);
    let Some(program) = compile(rt, &spec) else { return };
    let operands = fp64_operands();
    let x: Vec<f64> = operands.iter().map(|p| p.0).collect();
    let y: Vec<f64> = operands.iter().map(|p| p.1).collect();
    let xb = rt.upload(&x, BufferUsage::Input).unwrap();
    let yb = rt.upload(&y, BufferUsage::Input).unwrap();
    let out = rt.create_buffer((operands.len() * 10 * 8) as u64, BufferUsage::Output).unwrap();
    let groups = [(operands.len() / 32) as u32, 1, 1];
    rt.dispatch(&program, &[Arg::Buffer(&xb), Arg::Buffer(&yb), Arg::Buffer(&out)], groups)
        .unwrap()
        .wait(TIMEOUT)
        .unwrap();
    let got: Vec<f64> = rt.download(&out).unwrap();
    for (i, &(a, b)) in operands.iter().enumerate() {
        let want = [
            a + b,
            a * b,
            a.mul_add(b, 1.5),
            a / b,
            a.abs().sqrt(),
            (a.clamp(-2.0e9, 2.0e9) as i32) as f64 + (b.abs().min(4.0e9) as u32) as f64,
            (a as f32) as f64,
            a.floor() - b.ceil(),
            a - b * 0.25,
            a.min(b) + a.max(b) * 2.0,
        ];
        for (k, &w) in want.iter().enumerate() {
            let g = got[10 * i + k];
            assert!(within_ulps(g, w, 0), "fp64 result {k} for ({a:e}, {b:e}): got {g:e}, want {w:e}");
        }
    }
}
