//! The amdgpu backend end to end on the simulated gfx1100 (`SPARKLE_BACKEND=amdgpu-sim`): the
//! same tests the hardware runs (`amdgpu_common`), at sizes the CPU interprets quickly — sgemm
//! with K well above one tile and ragged sizes, conv2d on a small ResNet-like shape — plus what
//! only a simulator can show in CI: kernels that fault (outside their buffers, into another
//! buffer, into their code), a kernel that hangs, invalid dispatches refused before anything
//! runs, and the permissions every GPU mapping gets. (The cache across processes on the
//! simulator: the lab's `child` tests, through `sparkle-bench bench-child`; `sparkle info` on
//! it: the command's `sim` tests.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::amdgpu_common::features::Waves;
use crate::amdgpu_common::{self, Sizes};
use sparkle::amdgpu::kmd::KernelDriver;
use sparkle::amdgpu::sim::{AmdgpuSim, SimDriver, SimOptions, Simulated};
use sparkle::amdgpu::{AmdgpuDevice, DeviceOptions};
use sparkle::cache::CacheConfig;
use sparkle::hal::BufferUsage;
use sparkle::kernel::{Access, KernelSpec, ScalarType};
use sparkle::runtime::Arg;
use sparkle::suite::conv2d::Shape;
use sparkle::suite::{self, Case};
use sparkle::{ErrorKind, KernelError, Runtime};
use sparkle_amdgpu_sim::MappedRange;

const SIZES: Sizes = Sizes {
    saxpy: &[1, 255, 257, 4099],
    sgemm: &[(1, 1, 1), (17, 33, 5), (65, 47, 100), (20, 36, 257)],
    conv2d: &[
        Shape { n: 1, c: 1, h: 1, w: 1, k: 1 },
        Shape { n: 2, c: 5, h: 17, w: 23, k: 3 },
        // The shape of a ResNet stage, scaled down for the interpreter.
        Shape { n: 1, c: 16, h: 14, w: 14, k: 16 },
    ],
};

fn sim() -> Runtime {
    Runtime::open_backend("amdgpu-sim", &CacheConfig::memory_only()).expect("the simulator opens anywhere")
}

#[test]
fn the_suite_matches_the_cpu() {
    let rt = sim();
    amdgpu_common::saxpy_matches_the_cpu(&rt, &SIZES);
    amdgpu_common::sgemm_matches_the_cpu(&rt, &SIZES);
    amdgpu_common::conv2d_matches_the_cpu(&rt, &SIZES);
}

#[test]
fn user_opencl_kernels_compile_and_run() {
    amdgpu_common::user_opencl_kernels_run(&sim());
}

#[test]
fn work_group_collectives_match_the_cpu() {
    amdgpu_common::cl2::collectives_match_the_cpu(&sim(), Waves::Wave32);
    amdgpu_common::cl2::collectives_match_the_cpu(&sim(), Waves::Wave64);
}

#[test]
fn opencl2_features_and_1024_work_items_match_the_cpu() {
    amdgpu_common::cl2::opencl2_features_match_the_cpu(&sim(), Waves::Wave32);
    amdgpu_common::cl2::opencl2_features_match_the_cpu(&sim(), Waves::Wave64);
}

#[test]
fn async_copies_match_the_cpu() {
    amdgpu_common::cl2::async_copies_match_the_cpu(&sim(), Waves::Wave32);
    amdgpu_common::cl2::async_copies_match_the_cpu(&sim(), Waves::Wave64);
}

#[test]
fn generic_addresses_reach_the_lds_and_private_apertures_as_on_a_card() {
    amdgpu_common::cl2::apertures_are_amdgpus(&sim(), Waves::Wave32);
    amdgpu_common::cl2::apertures_are_amdgpus(&sim(), Waves::Wave64);
    amdgpu_common::cl2::queue_descriptor_at_o0_holds_the_apertures(&sim());
}

#[test]
fn narrow_integers_match_the_cpu() {
    amdgpu_common::narrow::narrow_integers_match_the_cpu(&sim(), Waves::Wave32);
    amdgpu_common::narrow::narrow_integers_match_the_cpu(&sim(), Waves::Wave64);
}

#[test]
fn half_precision_matches_the_cpu() {
    amdgpu_common::narrow::half_precision_matches_the_cpu(&sim(), Waves::Wave32);
    amdgpu_common::narrow::half_precision_matches_the_cpu(&sim(), Waves::Wave64);
}

#[test]
fn copies_and_chained_dispatches_in_one_submission() {
    amdgpu_common::copies_and_chained_dispatches_in_one_submission(&sim(), 3000);
}

fn store_at(rt: &Runtime, index_offset: u32) -> sparkle::Result<()> {
    let spec = KernelSpec::new("store_at", [64, 1, 1])
        .opencl(
            "store_at",
            "__kernel void store_at(__global uint *out, uint offset) { out[get_global_id(0) + offset] = 7u; }",
        )
        .storage("out", Access::ReadWrite)
        .scalar("offset", ScalarType::U32);
    let program = rt.program(&spec)?;
    let out = rt.create_buffer(64 * 4, BufferUsage::Output)?;
    rt.dispatch(&program, &[Arg::Buffer(&out), Arg::U32(index_offset)], [1, 1, 1])?
        .wait(Duration::from_secs(60))
}

#[test]
fn a_kernel_writing_outside_its_buffers_is_a_reported_page_fault() {
    let rt = sim();
    store_at(&rt, 0).expect("in bounds");
    let err = store_at(&rt, 1 << 28).expect_err("a gigabyte past the buffer is unmapped");
    assert_eq!(err.kind(), ErrorKind::DeviceLost, "{err}");
    let message = err.to_string();
    assert!(message.contains("GPU page fault at 0x") && message.contains("(write)"), "{message}");
    assert!(message.contains("store_at"), "the fault names the kernel: {message}");
    // The process lives on, and a new device works.
    store_at(&sim(), 0).expect("a fresh simulated device runs");
}

/// A simulated device whose driver the test keeps, to look at its mappings and buffers.
fn sim_with(options: SimOptions) -> (Arc<SimDriver>, Runtime) {
    let driver = SimDriver::new(options);
    let device = AmdgpuDevice::<Simulated>::new(driver.clone(), DeviceOptions::default()).unwrap();
    (driver, Runtime::from_device::<AmdgpuSim>(device, &CacheConfig::memory_only()))
}

fn saxpy_is_right(rt: &Runtime) {
    let case = suite::saxpy::Saxpy::random(1000, 3);
    let program = rt.program(&case.spec()).unwrap();
    assert!(suite::run_and_verify(rt, &program, &case).unwrap().passed());
}

#[test]
fn a_kernel_that_never_ends_times_out_naming_it_and_other_runtimes_stay_usable() {
    // A small instruction budget, so that the hang is found in about a second.
    let (_, rt) = sim_with(SimOptions { instruction_budget: 20_000_000, ..SimOptions::default() });
    let bystander = sim();
    let spec = KernelSpec::new("spin", [32, 1, 1])
        .opencl("spin", "__kernel void spin(__global uint *out, uint n) { uint i = 0; while (n != 0) { i++; } out[0] = i; }")
        .storage("out", Access::ReadWrite)
        .scalar("n", ScalarType::U32);
    let program = rt.program(&spec).unwrap();
    let out = rt.create_buffer(4, BufferUsage::Output).unwrap();
    let started = Instant::now();
    let submission = rt.dispatch(&program, &[Arg::Buffer(&out), Arg::U32(1)], [1, 1, 1]).unwrap();
    // A wait shorter than the hang: a timeout naming the kernel; the submission goes on.
    let early = submission.wait(Duration::from_millis(5)).unwrap_err();
    assert_eq!(early.kind(), ErrorKind::Timeout, "{early}");
    assert!(early.to_string().contains("kernel `spin`"), "{early}");
    // Another runtime computes correctly while the simulated GPU of the first one hangs.
    saxpy_is_right(&bystander);
    // The budget runs out: the simulated GPU resets the context, as a hung GPU's driver does.
    let hung = submission.wait(Duration::from_secs(120)).unwrap_err();
    assert_eq!(hung.kind(), ErrorKind::DeviceLost, "{hung}");
    let text = hung.to_string();
    assert!(text.contains("kernel spin") && text.contains("budget") && text.contains("reset"), "{text}");
    // The reset device refuses further work (no result comes back as success), naming the cause.
    let case = suite::saxpy::Saxpy::random(100, 1);
    let saxpy = rt.program(&case.spec()).unwrap();
    let after = suite::run_and_verify(&rt, &saxpy, &case).unwrap_err();
    assert_eq!(after.kind(), ErrorKind::DeviceLost, "{after}");
    // The process, the other runtime and a new one are fine.
    saxpy_is_right(&bystander);
    saxpy_is_right(&sim());
    eprintln!("hang found after {:?}: {text}", started.elapsed());
}

/// A kernel that stores to or loads from any GPU address (`hi:lo`).
fn poke_spec() -> KernelSpec {
    KernelSpec::new("poke", [64, 1, 1])
        .opencl(
            "poke",
            "__kernel void poke(__global uint *out, uint lo, uint hi, uint load) {
                 __global uint *p = (__global uint *)(((ulong)hi << 32) | lo);
                 if (load != 0u) { out[get_global_id(0)] = *p; } else { *p = 0xdeadu; out[get_global_id(0)] = 1u; }
             }",
        )
        .storage("out", Access::ReadWrite)
        .scalar("lo", ScalarType::U32)
        .scalar("hi", ScalarType::U32)
        .scalar("load", ScalarType::U32)
}

/// Mappings in `after` that are not in `before`.
fn added(before: &[MappedRange], after: &[MappedRange]) -> Vec<MappedRange> {
    after.iter().filter(|m| !before.contains(m)).copied().collect()
}

#[test]
fn code_is_mapped_read_only_and_executable_data_never_executable() {
    let (driver, rt) = sim_with(SimOptions::default());
    let before = driver.mappings();
    let case = suite::saxpy::Saxpy::random(1000, 3);
    let program = rt.program(&case.spec()).unwrap();
    let code = added(&before, &driver.mappings());
    assert_eq!(code.len(), 1, "one code buffer per program: {code:x?}");
    assert!(code[0].flags.executable && code[0].flags.readable && !code[0].flags.writeable, "{code:x?}");
    let before = driver.mappings();
    let data = rt.upload(&[1.0f32; 1000], BufferUsage::InOut).unwrap();
    let data_mapping = added(&before, &driver.mappings());
    assert_eq!(data_mapping.len(), 1);
    assert!(data_mapping[0].flags.writeable && !data_mapping[0].flags.executable, "{data_mapping:x?}");
    assert!(suite::run_and_verify(&rt, &program, &case).unwrap().passed());
    // Whatever the backend made along the way (kernel arguments, command buffers, fences): no
    // mapping is ever both writable and executable.
    let all = driver.mappings();
    assert!(all.iter().all(|m| !(m.flags.writeable && m.flags.executable)), "{all:x?}");
    drop(data);
}

/// Runs `poke` on a fresh device at the address `at` picks among its mappings (after the
/// program, `out` and a `victim` buffer of known contents exist); returns the error.
fn poke(load: bool, at: impl Fn(&[MappedRange], &[MappedRange], &[MappedRange]) -> u64) -> sparkle::Error {
    let (driver, rt) = sim_with(SimOptions::default());
    let before = driver.mappings();
    let program = rt.program(&poke_spec()).unwrap();
    let code = added(&before, &driver.mappings());
    let before = driver.mappings();
    let victim = rt.upload(&[5u32; 64], BufferUsage::InOut).unwrap();
    let victim_mapping = added(&before, &driver.mappings());
    let out = rt.create_buffer(64 * 4, BufferUsage::Output).unwrap();
    let address = at(&code, &victim_mapping, &driver.mappings());
    let args = [
        Arg::Buffer(&out),
        Arg::U32(address as u32),
        Arg::U32((address >> 32) as u32),
        Arg::U32(load.into()),
    ];
    let err = rt
        .dispatch(&program, &args, [1, 1, 1])
        .and_then(|s| s.wait(Duration::from_secs(60)))
        .expect_err("the access must fault");
    assert_eq!(err.kind(), ErrorKind::DeviceLost, "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("GPU page fault at {address:#x}")) && text.contains("in kernel poke"),
        "{text}"
    );
    assert!(text.contains(if load { "(read)" } else { "(write)" }), "{text}");
    // The victim was not touched (read back on the CPU through the driver: the device is lost).
    let mut bytes = vec![0u8; 256];
    driver.map_cpu(victim_mapping[0].bo, 4096).unwrap().read(0, &mut bytes).unwrap();
    assert!(bytes.chunks(4).all(|w| w == 5u32.to_le_bytes()), "the victim buffer changed");
    drop(victim);
    err
}

#[test]
fn a_kernel_cannot_reach_memory_outside_its_buffers() {
    // Another buffer of the same device, not bound to the dispatch.
    let write = poke(false, |_, victim, _| victim[0].start + 16);
    assert!(write.to_string().contains("not in the submission's BO list"), "{write}");
    let read = poke(true, |_, victim, _| victim[0].start);
    assert!(read.to_string().contains("not in the submission's BO list"), "{read}");
    // Its own code.
    let code = poke(false, |code, _, _| code[0].start + 256);
    assert!(code.to_string().contains("without write permission"), "{code}");
    // Past every mapping.
    let beyond = poke(false, |_, _, all| all.iter().map(|m| m.start + m.size).max().unwrap() + (1 << 20));
    assert!(beyond.to_string().contains("no buffer is mapped there"), "{beyond}");
    for err in [write, read, code, beyond] {
        eprintln!("{err}");
    }
}

#[test]
fn a_kernel_reading_texels_is_refused_before_it_compiles() {
    let spec = KernelSpec::new("texel_sum", [64, 1, 1])
        .opencl("texel_sum", "__kernel void texel_sum(__global const float *x) {}")
        .storage("x", Access::Texels(sparkle::TexelFormat::R32F));
    let err = sim().program(&spec).unwrap_err();
    assert!(matches!(err.detail::<KernelError>(), Some(KernelError::ExceedsLimit { .. })), "{err}");
    assert!(err
        .to_string()
        .contains("reads `x` as texels (Access::Texels), and this device has no texel buffers"));
}

#[test]
fn invalid_dispatches_are_refused_before_submission_naming_the_kernel_and_the_limit() {
    let (driver, rt) = sim_with(SimOptions::default());
    let case = suite::saxpy::Saxpy::random(64, 1);
    let program = rt.program(&case.spec()).unwrap();
    let x = rt.upload(&[1.0f32; 64], BufferUsage::Input).unwrap();
    let y = rt.upload(&[1.0f32; 64], BufferUsage::InOut).unwrap();
    let executed = driver.wave_instructions();
    let refused = |args: &[Arg<'_>], groups: [u32; 3]| {
        let err = rt.dispatch(&program, args, groups).expect_err("refused at dispatch");
        assert!(err.to_string().contains("saxpy"), "the error names the kernel: {err}");
        err
    };
    let full = [Arg::Buffer(&x), Arg::Buffer(&y), Arg::F32(2.0), Arg::U32(64)];
    // More work-items than the dispatch packet's 32-bit grid holds (the device's work-group
    // count limit is u32::MAX per axis: the product with the work-group size is what overflows).
    let huge = refused(&full, [u32::MAX, 1, 1]);
    let text = huge.to_string();
    assert_eq!(huge.kind(), ErrorKind::InvalidArgument, "{huge}");
    assert!(text.contains(&u32::MAX.to_string()) && text.contains("32-bit invocation id"), "{huge}");
    let none = refused(&full, [1, 0, 1]);
    assert!(matches!(none.detail::<KernelError>(), Some(KernelError::Grid { .. })), "{none}");
    // Buffers too small or misplaced for the binding.
    let empty = refused(
        &[Arg::Range { buffer: &x, offset: 0, len: 0 }, Arg::Buffer(&y), Arg::F32(2.0), Arg::U32(64)],
        [1, 1, 1],
    );
    assert!(empty.to_string().contains("0 bytes are fewer than"), "{empty}");
    let past = refused(
        &[Arg::Range { buffer: &x, offset: 128, len: 256 }, Arg::Buffer(&y), Arg::F32(2.0), Arg::U32(64)],
        [1, 1, 1],
    );
    assert!(past.to_string().contains("outside the 256-byte buffer"), "{past}");
    let misaligned = refused(
        &[Arg::Range { buffer: &x, offset: 4, len: 64 }, Arg::Buffer(&y), Arg::F32(2.0), Arg::U32(64)],
        [1, 1, 1],
    );
    assert!(misaligned.to_string().contains("alignment (16 bytes)"), "{misaligned}");
    let wrong_type = refused(&[Arg::Buffer(&x), Arg::Buffer(&y), Arg::U32(2), Arg::U32(64)], [1, 1, 1]);
    assert!(wrong_type.to_string().contains("`a`"), "{wrong_type}");
    assert_eq!(driver.wave_instructions(), executed, "a refused dispatch ran");
    // Work-groups the device cannot run, and more local memory than it has.
    let limits = rt.info().limits.clone();
    let wide = KernelSpec::new("wide", [limits.max_workgroup_size[0] + 1, 1, 1])
        .opencl("wide", "__kernel void wide(__global uint *o) { o[get_global_id(0)] = 1u; }")
        .storage("o", Access::ReadWrite);
    let text = rt.program(&wide).unwrap_err().to_string();
    assert!(text.contains("wide") && text.contains(&limits.max_workgroup_size[0].to_string()), "{text}");
    let hoarder = KernelSpec::new("hoarder", [64, 1, 1])
        .opencl(
            "hoarder",
            "__kernel void hoarder(__global float *o) {
                 __local float scratch[20000];
                 scratch[get_local_id(0) * 97u] = 1.0f;
                 barrier(CLK_LOCAL_MEM_FENCE);
                 o[get_global_id(0)] = scratch[19999u - get_local_id(0)];
             }",
        )
        .storage("o", Access::ReadWrite);
    let err = rt.program(&hoarder).unwrap_err();
    let text = err.to_string();
    assert_eq!(err.kind(), ErrorKind::Compile, "{text}");
    assert!(
        text.contains("hoarder") && text.contains("exceeds limit (65536)"),
        "the compiler's reason: {text}"
    );
    eprintln!(
        "{huge}\n{none}\n{empty}\n{past}\n{misaligned}\n{wrong_type}\n{}\n{text}",
        rt.program(&wide).unwrap_err()
    );
    // Nothing reached the simulated GPU, and the device computes on.
    assert_eq!(driver.wave_instructions(), executed, "a refused dispatch ran");
    assert!(suite::run_and_verify(&rt, &program, &case).unwrap().passed());
}

#[test]
fn double_precision_matches_the_cpu() {
    amdgpu_common::features::fp64_matches_the_cpu(&sim(), Waves::Wave32);
    amdgpu_common::features::fp64_matches_the_cpu(&sim(), Waves::Wave64);
}

#[test]
fn an_instruction_the_simulator_lacks_refuses_the_kernel_at_load_and_the_device_stays_usable() {
    let rt = sim();
    let spec = KernelSpec::new("gws", [32, 1, 1])
        .opencl(
            "gws",
            "__kernel void gws(__global uint *out) {\n\
                 __asm__ volatile(\"ds_gws_init v0 gds\" ::: \"memory\");\n\
                 out[get_global_id(0)] = 1;\n\
             }\n",
        )
        .storage("out", Access::ReadWrite);
    let err = match rt.program(&spec) {
        Err(err) if err.kind() == ErrorKind::Unavailable => {
            eprintln!("skipping: {err}");
            return;
        }
        Err(err) => err,
        Ok(_) => panic!("a kernel using GWS loaded on the simulator"),
    };
    assert_eq!(err.kind(), ErrorKind::InvalidKernel, "{err}");
    let message = err.to_string();
    for part in ["`gws`", "ds_gws_init", "the global data share", "code offset"] {
        assert!(message.contains(part), "`{part}` missing from: {message}");
    }
    // Nothing was submitted: the device runs the next kernel.
    amdgpu_common::saxpy_matches_the_cpu(&rt, &Sizes { saxpy: &[300], sgemm: &[], conv2d: &[] });
}

#[test]
fn private_memory_matches_the_cpu() {
    amdgpu_common::features::private_memory_matches_the_cpu(&sim(), Waves::Wave32);
    amdgpu_common::features::private_memory_matches_the_cpu(&sim(), Waves::Wave64);
}

#[test]
fn a_work_item_leaving_its_private_segment_faults_naming_the_kernel() {
    let rt = sim();
    let spec = KernelSpec::new("wild", [32, 1, 1])
        .opencl(
            "wild",
            "__kernel void wild(__global const uint *idx, __global uint *out) {\n\
                 uint a[96];\n\
                 for (int i = 0; i < 96; i++) a[i] = (uint)i * idx[2];\n\
                 a[idx[0]] = 7u;\n\
                 out[get_global_id(0)] = a[idx[1]];\n\
             }\n",
        )
        .storage("idx", Access::ReadOnly)
        .storage("out", Access::ReadWrite);
    let Some(program) = amdgpu_common::features::compile(&rt, &spec) else { return };
    let idx = rt.upload(&[100_000u32, 3, 1], BufferUsage::Input).unwrap();
    let out = rt.create_buffer(32 * 4, BufferUsage::Output).unwrap();
    let err = rt
        .dispatch(&program, &[Arg::Buffer(&idx), Arg::Buffer(&out)], [1, 1, 1])
        .unwrap()
        .wait(Duration::from_secs(60))
        .expect_err("a store past the private segment faults");
    let message = err.to_string();
    assert!(message.contains("page fault") && message.contains("wild"), "{message}");
    assert!(message.contains("private segment"), "{message}");
}

#[test]
fn printf_reaches_the_sink() {
    let open = |sink| {
        let options = DeviceOptions { printf: sink, ..DeviceOptions::default() };
        let device = AmdgpuDevice::<Simulated>::new(SimDriver::new(SimOptions::default()), options).unwrap();
        Some(Runtime::from_device::<AmdgpuSim>(device, &CacheConfig::memory_only()))
    };
    amdgpu_common::features::printf_reaches_the_sink(&open, Waves::Wave32);
    amdgpu_common::features::printf_reaches_the_sink(&open, Waves::Wave64);
}

#[test]
fn sub_groups_match_the_cpu() {
    amdgpu_common::features::sub_groups_match_the_cpu(&sim(), Waves::Wave32);
    amdgpu_common::features::sub_groups_match_the_cpu(&sim(), Waves::Wave64);
}

#[test]
fn timed_submissions_report_the_simulated_gpu_clock() {
    let rt = sim();
    assert!(rt.measures_gpu_time());
    let program = rt.program(&suite::saxpy::spec()).unwrap();
    let n = 4096usize;
    let x = rt.upload(&vec![1.0f32; n], BufferUsage::Input).unwrap();
    let y = rt.upload(&vec![0.5f32; n], BufferUsage::InOut).unwrap();
    let args = [Arg::Buffer(&x), Arg::Buffer(&y), Arg::F32(2.0), Arg::U32(n as u32)];
    let timed = |dispatches: usize| {
        let mut commands = rt.commands();
        for _ in 0..dispatches {
            commands.dispatch(&program, &args, [(n / 256) as u32, 1, 1]).unwrap();
        }
        let started = Instant::now();
        let submission = rt.submit_timed(commands).unwrap();
        submission.wait(Duration::from_secs(60)).unwrap();
        let wall = started.elapsed();
        let gpu = submission.gpu_time().expect("a timed submission on amdgpu-sim has a GPU time");
        // The simulated clock is host time spent simulating: inside the submission's wall time.
        assert!(gpu > Duration::ZERO && gpu <= wall, "GPU time {gpu:?}, wall time {wall:?}");
        assert_eq!(submission.gpu_time(), Some(gpu), "read once, kept by the submission");
    };
    timed(1);
    timed(3);
    // An untimed submission has none.
    let mut commands = rt.commands();
    commands.dispatch(&program, &args, [(n / 256) as u32, 1, 1]).unwrap();
    let untimed = rt.submit(commands).unwrap();
    untimed.wait(Duration::from_secs(60)).unwrap();
    assert_eq!(untimed.gpu_time(), None);
    let got: Vec<f32> = rt.download(&y).unwrap();
    assert!(got.iter().all(|&v| v == 0.5 + 2.0 * 5.0), "{:?}", &got[..4]);
}

#[test]
fn an_image_kernel_is_refused_naming_images_not_a_link_error() {
    let rt = sim();
    let spec = KernelSpec::new("img", [64, 1, 1])
        .opencl(
            "img",
            "__kernel void img(read_only image2d_t im, sampler_t s, __global float4 *out) {\n\
                 out[get_global_id(0)] = read_imagef(im, s, (int2)((int)get_global_id(0), 0));\n\
             }\n",
        )
        .storage("out", Access::ReadWrite);
    let err = rt.program(&spec).expect_err("the amdgpu backend has no images");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    let message = err.to_string();
    assert!(message.contains("has no images") && message.contains("read_imagef"), "{message}");
    assert!(!message.contains("ld.lld"), "a feature, not a linker log: {message}");
}
