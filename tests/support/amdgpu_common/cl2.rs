//! OpenCL C 2.0 features users' kernels rely on, run unchanged on a card (`amdgpu::hardware`) and
//! on the simulated gfx1100 and gfx1030 (`sim`): the work-group collectives (reduce, scans,
//! broadcast, all/any over int, uint, long, float, double), the generic address space,
//! program-scope global variables, and work-groups of 1,024 work-items (the spec's size given
//! to the compiler), each against the CPU, as wave32 and wave64.

use sparkle::hal::BufferUsage;
use sparkle::kernel::{Access, KernelSpec};
use sparkle::runtime::Arg;
use sparkle::Runtime;

use super::features::{compile, Waves};
use super::TIMEOUT;

fn spec(name: &str, workgroup: [u32; 3], source: &str, waves: Waves) -> KernelSpec {
    let spec = KernelSpec::new(name, workgroup).opencl(name, source);
    match waves {
        Waves::Wave32 => spec,
        Waves::Wave64 => spec.opencl_option("-mwavefrontsize64"),
    }
}

const COLLECTIVES: &str = "
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
__kernel void collectives(__global const int *in, __global int *oi, __global long *ol,
                          __global float *of, __global double *od) {
    uint g = get_global_id(0), l = get_local_id(0);
    int x = in[g];
    __global int *o = oi + 10 * g;
    o[0] = work_group_reduce_add(x);
    o[1] = work_group_reduce_min(x);
    o[2] = work_group_reduce_max(x);
    o[3] = work_group_scan_inclusive_add(x);
    o[4] = work_group_scan_exclusive_add(x);
    o[5] = work_group_scan_inclusive_max(x);
    o[6] = work_group_broadcast(x, (size_t)(get_local_size(0) - 3));
    o[7] = work_group_all(x > -1000);
    o[8] = work_group_any(x == 7);
    o[9] = (int)work_group_reduce_max((uint)x);
    ol[2 * g] = work_group_scan_exclusive_add((long)x << 33);
    ol[2 * g + 1] = work_group_reduce_min((long)x * 1000000007L);
    of[2 * g] = work_group_reduce_add((float)x * 0.5f);
    of[2 * g + 1] = work_group_scan_inclusive_min((float)x);
    od[g] = work_group_scan_inclusive_add((double)x * 0.25);
}
";

/// The work-group collectives against the CPU, on work-groups of 256 and of 200 work-items (a
/// last wave that is partial). Float sums are of multiples of 0.5 small enough to be exact in
/// any order.
pub fn collectives_match_the_cpu(rt: &Runtime, waves: Waves) {
    for group in [256usize, 200] {
        let Some(program) = compile(
            rt,
            &spec("collectives", [group as u32, 1, 1], COLLECTIVES, waves)
                .storage("in", Access::ReadOnly)
                .storage("oi", Access::ReadWrite)
                .storage("ol", Access::ReadWrite)
                .storage("of", Access::ReadWrite)
                .storage("od", Access::ReadWrite),
        ) else {
            return;
        };
        let groups = 3;
        let n = group * groups;
        let input: Vec<i32> = (0..n as i32).map(|i| (i * 37 + 11) % 201 - 100).collect();
        let inb = rt.upload(&input, BufferUsage::Input).unwrap();
        let oi = rt.create_buffer((40 * n) as u64, BufferUsage::Output).unwrap();
        let ol = rt.create_buffer((16 * n) as u64, BufferUsage::Output).unwrap();
        let of = rt.create_buffer((8 * n) as u64, BufferUsage::Output).unwrap();
        let od = rt.create_buffer((8 * n) as u64, BufferUsage::Output).unwrap();
        let args =
            [Arg::Buffer(&inb), Arg::Buffer(&oi), Arg::Buffer(&ol), Arg::Buffer(&of), Arg::Buffer(&od)];
        rt.dispatch(&program, &args, [groups as u32, 1, 1]).unwrap().wait(TIMEOUT).unwrap();
        let gi: Vec<i32> = rt.download(&oi).unwrap();
        let gl: Vec<i64> = rt.download(&ol).unwrap();
        let gf: Vec<f32> = rt.download(&of).unwrap();
        let gd: Vec<f64> = rt.download(&od).unwrap();
        for wg in 0..groups {
            let xs = &input[wg * group..(wg + 1) * group];
            let sum: i32 = xs.iter().sum();
            let min = *xs.iter().min().unwrap();
            let max = *xs.iter().max().unwrap();
            let umax = xs.iter().map(|&x| x as u32).max().unwrap() as i32;
            let lmin = xs.iter().map(|&x| i64::from(x) * 1_000_000_007).min().unwrap();
            for (l, &x) in xs.iter().enumerate() {
                let g = wg * group + l;
                let inclusive: i32 = xs[..=l].iter().sum();
                let want = [
                    sum,
                    min,
                    max,
                    inclusive,
                    inclusive - x,
                    *xs[..=l].iter().max().unwrap(),
                    xs[group - 3],
                    1,
                    i32::from(xs.contains(&7)),
                    umax,
                ];
                assert_eq!(&gi[10 * g..10 * g + 10], &want, "int collectives, group of {group}, item {g}");
                let lscan: i64 = xs[..l].iter().map(|&v| i64::from(v) << 33).sum();
                assert_eq!((gl[2 * g], gl[2 * g + 1]), (lscan, lmin), "long collectives, item {g}");
                assert_eq!(gf[2 * g], sum as f32 * 0.5, "float reduce, item {g}");
                assert_eq!(gf[2 * g + 1], *xs[..=l].iter().min().unwrap() as f32, "float scan, item {g}");
                assert_eq!(gd[g], f64::from(inclusive) * 0.25, "double scan, item {g}");
            }
        }
    }
}

const CL2: &str = "
__global int counter = 0;
__global float scale[4] = { 1.0f, 2.0f, 3.0f, 4.0f };

/* A generic pointer: called with a global and a local pointer. */
int sum3(const int *p) { return p[0] + p[1] + p[2]; }

__kernel void cl2(__global const int *in, __global int *out) {
    __local int tile[1024];
    uint g = get_global_id(0), l = get_local_id(0), n = get_local_size(0);
    tile[l] = in[g];
    barrier(CLK_LOCAL_MEM_FENCE);
    /* A tree reduction over all 1,024 work-items of the group. */
    for (uint s = n / 2; s > 0; s >>= 1) {
        if (l < s) tile[l] += tile[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    int total = tile[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    tile[l] = in[g];
    barrier(CLK_LOCAL_MEM_FENCE);
    int local_three = l + 2 < n ? sum3(&tile[l]) : 0;
    int global_three = g + 2 < get_global_size(0) ? sum3(&in[g]) : 0;
    out[5 * g] = total;
    out[5 * g + 1] = local_three;
    out[5 * g + 2] = global_three;
    out[5 * g + 3] = (int)(scale[l & 3] * 10.0f);
    out[5 * g + 4] = atomic_inc(&counter);
}
";

/// Work-groups of 1,024 work-items (a barrier-synchronised tree reduction over all of them),
/// generic pointers to global and local memory, and program-scope globals (a counter every
/// work-item increments — the values it returned are then distinct and consecutive — and an
/// initialised table).
pub fn opencl2_features_match_the_cpu(rt: &Runtime, waves: Waves) {
    let Some(program) = compile(
        rt,
        &spec("cl2", [1024, 1, 1], CL2, waves)
            .storage("in", Access::ReadOnly)
            .storage("out", Access::ReadWrite),
    ) else {
        return;
    };
    let groups = 2usize;
    let n = 1024 * groups;
    let input: Vec<i32> = (0..n as i32).map(|i| (i * 13) % 97 - 40).collect();
    let inb = rt.upload(&input, BufferUsage::Input).unwrap();
    let out = rt.create_buffer((20 * n) as u64, BufferUsage::Output).unwrap();
    rt.dispatch(&program, &[Arg::Buffer(&inb), Arg::Buffer(&out)], [groups as u32, 1, 1])
        .unwrap()
        .wait(TIMEOUT)
        .unwrap();
    let got: Vec<i32> = rt.download(&out).unwrap();
    for g in 0..n {
        let (wg, l) = (g / 1024, g % 1024);
        let xs = &input[wg * 1024..(wg + 1) * 1024];
        let total: i32 = xs.iter().sum();
        let local_three = if l + 2 < 1024 { xs[l] + xs[l + 1] + xs[l + 2] } else { 0 };
        let global_three = if g + 2 < n { input[g] + input[g + 1] + input[g + 2] } else { 0 };
        let want = [total, local_three, global_three, ((l & 3) as i32 + 1) * 10];
        assert_eq!(&got[5 * g..5 * g + 4], &want, "item {g}");
    }
    // The counter's old values: each once, consecutive (from wherever earlier dispatches of the
    // program left it).
    let mut olds: Vec<i32> = (0..n).map(|g| got[5 * g + 4]).collect();
    olds.sort_unstable();
    let first = olds[0];
    assert!(
        olds.iter().enumerate().all(|(k, &v)| v == first + k as i32),
        "atomic_inc on a program-scope global"
    );
}

const ASYNC_COPY: &str = "
__kernel void async_copy(__global const float *in, __global float *out, __global int *flat) {
    __local float tile[128];
    __local int ints[64];
    uint g = get_group_id(0), l = get_local_id(0);
    event_t e = async_work_group_copy(tile, in + g * 128, 128, 0);
    wait_group_events(1, &e);
    out[g * 128 + l] = tile[127 - l] * 2.0f;
    /* A strided copy into local memory, then one back out to global memory. */
    event_t f = async_work_group_strided_copy(ints, (__global const int *)in + g * 128, 64, 2, 0);
    wait_group_events(1, &f);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l < 64) ints[l] += 1;
    barrier(CLK_LOCAL_MEM_FENCE);
    event_t h = async_work_group_copy(flat + g * 64, ints, 64, 0);
    wait_group_events(1, &h);
}
";

/// `async_work_group_copy`, `async_work_group_strided_copy` and `wait_group_events` between
/// global and local memory (libclc implements them with generic pointers into the LDS
/// aperture) against the CPU.
pub fn async_copies_match_the_cpu(rt: &Runtime, waves: Waves) {
    let Some(program) = compile(
        rt,
        &spec("async_copy", [128, 1, 1], ASYNC_COPY, waves)
            .storage("in", Access::ReadOnly)
            .storage("out", Access::ReadWrite)
            .storage("flat", Access::ReadWrite),
    ) else {
        return;
    };
    let groups = 3usize;
    let input: Vec<f32> = (0..128 * groups).map(|i| i as f32 * 0.5 - 7.0).collect();
    let inb = rt.upload(&input, BufferUsage::Input).unwrap();
    let out = rt.create_buffer((4 * 128 * groups) as u64, BufferUsage::Output).unwrap();
    let flat = rt.create_buffer((4 * 64 * groups) as u64, BufferUsage::Output).unwrap();
    rt.dispatch(&program, &[Arg::Buffer(&inb), Arg::Buffer(&out), Arg::Buffer(&flat)], [groups as u32, 1, 1])
        .unwrap()
        .wait(TIMEOUT)
        .unwrap();
    let got: Vec<f32> = rt.download(&out).unwrap();
    let got_ints: Vec<i32> = rt.download(&flat).unwrap();
    for g in 0..groups {
        for l in 0..128 {
            assert_eq!(got[g * 128 + l], input[g * 128 + 127 - l] * 2.0, "group {g}, item {l}");
        }
        for k in 0..64 {
            let want = input[g * 128 + 2 * k].to_bits() as i32 + 1;
            assert_eq!(got_ints[g * 64 + k], want, "strided copy, group {g}, element {k}");
        }
    }
}

const APERTURES: &str = "
__kernel void apertures(__global ulong *out, __global int *sums) {
    __local int tile[256];
    int own[8];
    uint g = get_global_id(0), l = get_local_id(0);
    ulong shared_base, private_base;
    __asm__ volatile(\"s_mov_b64 %0, src_shared_base\" : \"=s\"(shared_base));
    __asm__ volatile(\"s_mov_b64 %0, src_private_base\" : \"=s\"(private_base));
    for (int k = 0; k < 8; k++) own[k] = (int)(g * 8 + k);
    tile[l] = (int)g;
    barrier(CLK_LOCAL_MEM_FENCE);
    /* Generic pointers into the LDS and into this work-item's private memory. */
    volatile int *to_local = (volatile int *)&tile[(l + 1) % get_local_size(0)];
    volatile int *to_private = (volatile int *)&own[g % 8];
    *to_private += 1000;
    sums[g] = *to_local + own[g % 8];
    out[4 * g] = shared_base;
    out[4 * g + 1] = private_base;
    out[4 * g + 2] = (ulong)to_local;
    out[4 * g + 3] = (ulong)to_private;
}
";

/// Generic (flat) addresses in the LDS and private apertures: the aperture registers read what
/// Linux's amdgpu driver programs (`SHARED_APERTURE`, `PRIVATE_APERTURE`), generic pointers
/// to `__local` and private variables carry them, and loads and stores through them reach the
/// right memory.
pub fn apertures_are_amdgpus(rt: &Runtime, waves: Waves) {
    let Some(program) = compile(
        rt,
        &spec("apertures", [256, 1, 1], APERTURES, waves)
            .storage("out", Access::ReadWrite)
            .storage("sums", Access::ReadWrite),
    ) else {
        return;
    };
    let n = 512usize;
    let out = rt.create_buffer((32 * n) as u64, BufferUsage::Output).unwrap();
    let sums = rt.create_buffer((4 * n) as u64, BufferUsage::Output).unwrap();
    rt.dispatch(&program, &[Arg::Buffer(&out), Arg::Buffer(&sums)], [2, 1, 1])
        .unwrap()
        .wait(TIMEOUT)
        .unwrap();
    let got: Vec<u64> = rt.download(&out).unwrap();
    let got_sums: Vec<i32> = rt.download(&sums).unwrap();
    let (shared, private) = (sparkle::amdgpu::ib::SHARED_APERTURE, sparkle::amdgpu::ib::PRIVATE_APERTURE);
    for g in 0..n {
        let row = &got[4 * g..4 * g + 4];
        assert_eq!((row[0], row[1]), (shared, private), "SRC_SHARED_BASE, SRC_PRIVATE_BASE (item {g})");
        assert_eq!(
            row[2] >> 32,
            shared >> 32,
            "a generic pointer to __local is in the shared aperture: {:#x}",
            row[2]
        );
        assert_eq!(row[3] >> 32, private >> 32, "a generic pointer to private memory: {:#x}", row[3]);
        let neighbour = (g / 256) * 256 + (g % 256 + 1) % 256;
        assert_eq!(got_sums[g], neighbour as i32 + (g * 8 + g % 8) as i32 + 1000, "item {g}");
    }
}

const QUEUE: &str = "
__kernel void queue(__global uint *out) {
    __constant uint *q = (__constant uint *)__builtin_amdgcn_queue_ptr();
    out[get_global_id(0)] = get_global_id(0) == 0 ? q[16] : q[17];
}
";

/// A kernel built at -O0 keeps the queue pointer: it gets a queue descriptor whose aperture
/// fields (offsets 64 and 68, where LLVM reads them) hold the apertures.
pub fn queue_descriptor_at_o0_holds_the_apertures(rt: &Runtime) {
    let Some(program) = compile(
        rt,
        &KernelSpec::new("queue", [64, 1, 1])
            .opencl("queue", QUEUE)
            .opencl_option("-O0")
            .storage("out", Access::ReadWrite),
    ) else {
        return;
    };
    let out = rt.create_buffer(64 * 4, BufferUsage::Output).unwrap();
    rt.dispatch(&program, &[Arg::Buffer(&out)], [1, 1, 1]).unwrap().wait(TIMEOUT).unwrap();
    let got: Vec<u32> = rt.download(&out).unwrap();
    assert_eq!(got[0] as u64, sparkle::amdgpu::ib::SHARED_APERTURE >> 32);
    assert_eq!(got[1] as u64, sparkle::amdgpu::ib::PRIVATE_APERTURE >> 32);
}
