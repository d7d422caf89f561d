//! The kernels users write beyond the suite, run unchanged on a card (`amdgpu::hardware`) and on the
//! simulated gfx1100 (`sim::backend`): double precision, private arrays and register
//! spills (scratch), printf (its text checked), sub-groups; each checked against the CPU, as
//! wave32 and as wave64.

use std::sync::{Arc, Mutex};

use sparkle::amdgpu::{PrintfOutput, PrintfSink};
use sparkle::hal::BufferUsage;
use sparkle::kernel::{Access, KernelSpec};
use sparkle::runtime::{Arg, Program};
use sparkle::Runtime;

use super::TIMEOUT;

/// The wave size kernels are compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waves {
    Wave32,
    /// `-mwavefrontsize64`.
    Wave64,
}

/// An OpenCL C kernel `name` (also its entry point) for `waves`.
fn opencl(name: &str, workgroup: [u32; 3], source: &str, waves: Waves) -> KernelSpec {
    let spec = KernelSpec::new(name, workgroup).opencl(name, source);
    match waves {
        Waves::Wave32 => spec,
        Waves::Wave64 => spec.opencl_option("-mwavefrontsize64"),
    }
}

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
pub fn fp64_matches_the_cpu(rt: &Runtime, waves: Waves) {
    let spec = opencl("fp64", [32, 1, 1], FP64, waves)
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

const PRIVATE_ARRAY: &str = "__kernel void private_array(__global const uint *idx, __global uint *out) {
    uint g = get_global_id(0);
    uint a[96];
    for (int i = 0; i < 96; i++) a[i] = g * 3u + (uint)(i * i);
    a[idx[g] % 96u] += 1000u;
    out[g] = a[idx[g] % 96u] + a[(idx[g] * 7u) % 96u];
}
";

const SPILL: &str = "__kernel __attribute__((amdgpu_num_vgpr(24)))
void spill(__global const float *in, __global float *out) {
    uint g = get_global_id(0);
    float v[40];
    for (int i = 0; i < 40; i++) v[i] = in[g * 40 + i];
    for (int r = 0; r < 3; r++) {
        for (int i = 0; i < 40; i++) v[i] = v[i] * 1.0001f + v[(i + 7) % 40] * 0.5f;
    }
    float acc = 0.0f;
    for (int i = 0; i < 40; i++) acc += v[i] * (float)(i + 1);
    out[g] = acc;
}
";

/// Generic pointers (OpenCL C 2.0) to private and local memory, through a call the compiler
/// keeps: flat loads and stores into the private and shared apertures, and a call stack.
const GENERIC: &str = "__attribute__((noinline)) uint sum_and_bump(uint *p, uint n) {
    uint s = 0;
    for (uint i = 0; i < n; i++) { s += p[i]; p[i] += 1u; }
    return s;
}
__kernel __attribute__((reqd_work_group_size(32, 1, 1)))
void generic_ptrs(__global const uint *in, __global uint *out) {
    __local uint shared[32];
    uint g = get_global_id(0), l = get_local_id(0);
    uint mine[8];
    for (uint i = 0; i < 8u; i++) mine[i] = in[g] + i;
    shared[l] = in[g] * 2u;
    barrier(CLK_LOCAL_MEM_FENCE);
    uint a = sum_and_bump(mine, 1u + in[g] % 8u);
    uint b = l == 0 ? sum_and_bump(shared, 32u) : 0u;
    barrier(CLK_LOCAL_MEM_FENCE);
    out[g] = a + b + mine[0] + shared[(l + 1u) % 32u];
}
";

fn run_u32(rt: &Runtime, spec: &KernelSpec, input: &[u32], out_len: usize, groups: u32) -> Option<Vec<u32>> {
    let program = compile(rt, spec)?;
    let src = rt.upload(input, BufferUsage::Input).unwrap();
    let dst = rt.create_buffer((out_len * 4) as u64, BufferUsage::Output).unwrap();
    rt.dispatch(&program, &[Arg::Buffer(&src), Arg::Buffer(&dst)], [groups, 1, 1])
        .unwrap()
        .wait(TIMEOUT)
        .unwrap();
    Some(rt.download(&dst).unwrap())
}

/// Private memory (scratch): a kernel whose registers spill (180 bytes per work-item), then a
/// dynamically indexed private array (388 bytes: the queue's scratch ring grows), then generic
/// pointers into private and local memory.
pub fn private_memory_matches_the_cpu(rt: &Runtime, waves: Waves) {
    // Register spills.
    let spec = opencl("spill", [32, 1, 1], SPILL, waves)
        .storage("in", Access::ReadOnly)
        .storage("out", Access::ReadWrite);
    let Some(program) = compile(rt, &spec) else { return };
    let items = 64usize;
    let input: Vec<f32> = (0..items * 40).map(|i| ((i * 37) % 101) as f32 * 0.01 - 0.5).collect();
    let src = rt.upload(&input, BufferUsage::Input).unwrap();
    let dst = rt.create_buffer((items * 4) as u64, BufferUsage::Output).unwrap();
    rt.dispatch(&program, &[Arg::Buffer(&src), Arg::Buffer(&dst)], [(items / 32) as u32, 1, 1])
        .unwrap()
        .wait(TIMEOUT)
        .unwrap();
    let got: Vec<f32> = rt.download(&dst).unwrap();
    for g in 0..items {
        let mut v: Vec<f32> = input[g * 40..g * 40 + 40].to_vec();
        for _ in 0..3 {
            for i in 0..40 {
                v[i] = v[i] * 1.0001 + v[(i + 7) % 40] * 0.5;
            }
        }
        let want: f32 = v.iter().enumerate().map(|(i, x)| x * (i + 1) as f32).sum();
        // The compiler may contract and reorder: compare with a tolerance of the sum's size.
        let scale: f32 = v.iter().enumerate().map(|(i, x)| (x * (i + 1) as f32).abs()).sum();
        assert!(
            (got[g] - want).abs() <= 1e-4 * scale.max(1.0),
            "spill item {g}: got {}, want {want}",
            got[g]
        );
    }

    // A dynamically indexed private array.
    let spec = opencl("private_array", [64, 1, 1], PRIVATE_ARRAY, waves)
        .storage("idx", Access::ReadOnly)
        .storage("out", Access::ReadWrite);
    let n = 256usize;
    let idx: Vec<u32> = (0..n as u32).map(|i| i.wrapping_mul(2_654_435_761) >> 7).collect();
    let got = run_u32(rt, &spec, &idx, n, (n / 64) as u32).expect("compiled above");
    let want: Vec<u32> = (0..n)
        .map(|g| {
            let mut a: Vec<u32> = (0..96u32).map(|i| g as u32 * 3 + i * i).collect();
            let (i, j) = ((idx[g] % 96) as usize, ((idx[g].wrapping_mul(7)) % 96) as usize);
            a[i] += 1000;
            a[i] + a[j]
        })
        .collect();
    assert_eq!(got, want, "private array");

    // Generic pointers into private and local memory through a call.
    let spec = opencl("generic_ptrs", [32, 1, 1], GENERIC, waves)
        .storage("in", Access::ReadOnly)
        .storage("out", Access::ReadWrite);
    let n = 64usize;
    let input: Vec<u32> = (0..n as u32).map(|i| i * 5 + 3).collect();
    let got = run_u32(rt, &spec, &input, n, (n / 32) as u32).expect("compiled above");
    for group in 0..n / 32 {
        let base = group * 32;
        let mut shared: Vec<u32> = (0..32).map(|l| input[base + l] * 2).collect();
        let b0: u32 = shared.iter().sum();
        shared.iter_mut().for_each(|s| *s += 1);
        for l in 0..32 {
            let g = base + l;
            let count = 1 + input[g] % 8;
            let a: u32 = (0..count).map(|i| input[g] + i).sum();
            let mine0 = input[g] + 1;
            let b = if l == 0 { b0 } else { 0 };
            let want = a + b + mine0 + shared[(l + 1) % 32];
            assert_eq!(got[g], want, "generic pointers, work-item {g}");
        }
    }
}

const PRINTF: &str = "__kernel void hello(__global const uint *a, __global uint *out) {
    uint i = get_global_id(0);
    if (i < 3) printf(\"hello %u from %d: %.2f %s %ld\\n\", a[i], (int)i, 0.5f * (float)i, \"ok\", -(long)i);
    out[i] = a[i] + 1u;
}
";

/// Every work-item prints a 132-byte record: 10240 of them overflow a 1 MiB printf buffer.
const PRINTF_FLOOD: &str = "__kernel void flood(__global const uint *a, __global uint *out) {
    uint i = get_global_id(0);
    long v = (long)a[i] * 3;
    printf(\"%u %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld %ld end\\n\", i,
           v, v + 1, v + 2, v + 3, v + 4, v + 5, v + 6, v + 7, v + 8, v + 9, v + 10, v + 11, v + 12, v + 13, v + 14);
    out[i] = 1u;
}
";

/// printf: the text each dispatch printed reaches the runtime's sink, in dispatch order, the
/// lines exactly as C's printf formats them; a flood that overflows the buffer loses whole
/// records, says how many, and never prints a damaged line. `open` makes a runtime whose
/// printf output goes to the given sink (None where the backend is not available).
pub fn printf_reaches_the_sink(open: &dyn Fn(PrintfSink) -> Option<Runtime>, waves: Waves) {
    let outputs: Arc<Mutex<Vec<PrintfOutput>>> = Arc::default();
    let collected = outputs.clone();
    let sink =
        PrintfSink::Callback(Arc::new(move |o: &PrintfOutput| collected.lock().unwrap().push(o.clone())));
    let Some(rt) = open(sink) else { return };
    let spec = opencl("hello", [32, 1, 1], PRINTF, waves)
        .storage("a", Access::ReadOnly)
        .storage("out", Access::ReadWrite);
    let Some(program) = compile(&rt, &spec) else { return };
    let a = rt.upload(&[10u32, 20, 30, 40].repeat(8), BufferUsage::Input).unwrap();
    let out = rt.create_buffer(32 * 4, BufferUsage::Output).unwrap();
    // Two dispatches in one submission: two outputs, in order.
    let mut commands = rt.commands();
    commands.dispatch(&program, &[Arg::Buffer(&a), Arg::Buffer(&out)], [1, 1, 1]).unwrap();
    commands.dispatch(&program, &[Arg::Buffer(&a), Arg::Buffer(&out)], [1, 1, 1]).unwrap();
    rt.submit(commands).unwrap().wait(TIMEOUT).unwrap();
    let got: Vec<u32> = rt.download(&out).unwrap();
    assert_eq!(&got[..4], &[11, 21, 31, 41], "the kernel itself ran");
    let printed = std::mem::take(&mut *outputs.lock().unwrap());
    assert_eq!(printed.len(), 2, "one output per dispatch: {printed:?}");
    for output in &printed {
        assert_eq!(output.kernel, "hello");
        assert_eq!((output.dropped_records, &output.damaged), (0, &None));
        // Work-items reserve their records in whatever order the GPU runs them.
        let mut lines: Vec<&str> = output.text.lines().collect();
        lines.sort_unstable();
        assert_eq!(
            lines,
            ["hello 10 from 0: 0.00 ok 0", "hello 20 from 1: 0.50 ok -1", "hello 30 from 2: 1.00 ok -2"],
            "{:?}",
            output.text
        );
    }

    let spec = opencl("flood", [64, 1, 1], PRINTF_FLOOD, waves)
        .storage("a", Access::ReadOnly)
        .storage("out", Access::ReadWrite);
    let program = compile(&rt, &spec).expect("compiled above");
    let n = 10240usize;
    let values: Vec<u32> = (0..n as u32).collect();
    let a = rt.upload(&values, BufferUsage::Input).unwrap();
    let out = rt.create_buffer((n * 4) as u64, BufferUsage::Output).unwrap();
    rt.dispatch(&program, &[Arg::Buffer(&a), Arg::Buffer(&out)], [(n / 64) as u32, 1, 1])
        .unwrap()
        .wait(TIMEOUT)
        .unwrap();
    let printed = std::mem::take(&mut *outputs.lock().unwrap());
    assert_eq!(printed.len(), 1);
    let output = &printed[0];
    assert_eq!(output.damaged, None);
    let lines: Vec<&str> = output.text.lines().collect();
    assert!(output.dropped_records > 0, "10240 records of 132 bytes cannot fit in 1 MiB");
    assert_eq!(lines.len() + output.dropped_records as usize, n, "every record printed or counted");
    for line in &lines {
        let fields: Vec<&str> = line.split(' ').collect();
        let i: i64 = fields[0].parse().unwrap();
        let want: Vec<String> = (0..15).map(|k| (i * 3 + k).to_string()).collect();
        assert_eq!(&fields[1..16], want.as_slice(), "a damaged line: {line}");
        assert_eq!(fields[16], "end", "{line}");
    }
}

const SUB_GROUPS: &str = "#pragma OPENCL EXTENSION cl_khr_subgroups : enable
__kernel void sub_groups(__global const uint *a, __global uint *out) {
    uint i = get_global_id(0);
    uint x = a[i];
    __global uint *o = out + 10 * i;
    o[0] = sub_group_reduce_add(x);
    o[1] = sub_group_reduce_max(x);
    o[2] = (uint)sub_group_reduce_min((int)x - 500);
    o[3] = sub_group_scan_inclusive_add(x);
    o[4] = sub_group_scan_exclusive_add(x);
    sub_group_barrier(CLK_GLOBAL_MEM_FENCE);
    o[5] = sub_group_broadcast(x, 3u);
    o[6] = sub_group_shuffle_xor(x, 1u);
    o[7] = sub_group_ballot((x & 1u) != 0u).x;
    o[8] = get_sub_group_size() | get_sub_group_id() << 8 | get_sub_group_local_id() << 16;
    o[9] = (uint)sub_group_any(x == 7u) | (uint)sub_group_all(x < 1000u) << 1;
}
";

/// Sub-group built-ins against the CPU, with work-groups of 44 work-items: on wave32 a full
/// sub-group of 32 and a partial one of 12 (on wave64, one partial sub-group of 44) — partial
/// sizes that are not powers of two.
pub fn sub_groups_match_the_cpu(rt: &Runtime, waves: Waves) {
    let spec = opencl("sub_groups", [44, 1, 1], SUB_GROUPS, waves)
        .storage("a", Access::ReadOnly)
        .storage("out", Access::ReadWrite);
    let Some(program) = compile(rt, &spec) else { return };
    let n = 88usize;
    let a: Vec<u32> = (0..n as u32).map(|i| (i * 37 + 11) % 101).collect();
    let src = rt.upload(&a, BufferUsage::Input).unwrap();
    let out = rt.create_buffer((n * 10 * 4) as u64, BufferUsage::Output).unwrap();
    rt.dispatch(&program, &[Arg::Buffer(&src), Arg::Buffer(&out)], [(n / 44) as u32, 1, 1])
        .unwrap()
        .wait(TIMEOUT)
        .unwrap();
    let got: Vec<u32> = rt.download(&out).unwrap();
    // Work-item 40 is in sub-group 1 on wave32, 0 on wave64.
    let wave = if got[10 * 40 + 8] >> 8 & 0xff == 1 { 32 } else { 64 };
    for i in 0..n {
        let (group, local) = (i / 44, i % 44);
        let (sub, lane) = (local / wave, local % wave);
        let start = group * 44 + sub * wave;
        let size = wave.min(44 - sub * wave);
        let members = &a[start..start + size];
        let xor_partner = lane ^ 1;
        let ballot = members.iter().take(32).enumerate().fold(0u32, |b, (l, &v)| b | ((v & 1) << l));
        let want = [
            members.iter().sum::<u32>(),
            *members.iter().max().unwrap(),
            members.iter().map(|&v| v as i32 - 500).min().unwrap() as u32,
            members[..=lane].iter().sum::<u32>(),
            members[..lane].iter().sum::<u32>(),
            members[3],
            if xor_partner < size { members[xor_partner] } else { got[10 * i + 6] },
            ballot,
            size as u32 | (sub as u32) << 8 | (lane as u32) << 16,
            members.contains(&7) as u32 | (members.iter().all(|&v| v < 1000) as u32) << 1,
        ];
        assert_eq!(&got[10 * i..10 * i + 10], &want, "work-item {i} (sub-group {sub}, lane {lane})");
    }
}
