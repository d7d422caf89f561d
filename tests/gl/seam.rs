//! The runtime seam on the gl backend (Mesa's llvmpipe in CI): specs checked against what the
//! compiled program declares, programs shared between specs without sharing spec state,
//! asynchronous submissions that never block, host access ordered only behind the work that
//! needs it, and the GLSL a kernel is compiled from.

use std::time::{Duration, Instant};

use crate::gl_support;
use sparkle::cache::CacheConfig;
use sparkle::{Access, Arg, BufferUsage, ErrorKind, KernelError, KernelSpec, Runtime, ScalarType};

fn runtime() -> Runtime {
    Runtime::open_backend("gl", &CacheConfig::memory_only())
        .expect("a GL 4.3 context (Mesa's llvmpipe is enough)")
}

const AXPB: &str = "layout(std430, binding = 0) buffer Data { float v[]; };
uniform float a;
uniform float b;
uniform uint n;
void main() { uint i = gl_GlobalInvocationID.x; if (i < n) v[i] = a * v[i] + b; }";

fn axpb(order: &[(&str, ScalarType)]) -> KernelSpec {
    let mut spec = KernelSpec::new("axpb", [64, 1, 1]).glsl(AXPB).storage("v", Access::ReadWrite);
    for &(name, ty) in order {
        spec = spec.scalar(name, ty);
    }
    spec
}

fn run_axpb(
    runtime: &Runtime,
    spec: &KernelSpec,
    args: impl Fn(&sparkle::Buffer) -> Vec<Arg<'_>>,
) -> Vec<f32> {
    let program = runtime.program(spec).unwrap();
    let data = runtime.upload(&[1.0f32, 2.0, 3.0], BufferUsage::InOut).unwrap();
    runtime.dispatch(&program, &args(&data), [1, 1, 1]).unwrap().wait(Duration::from_secs(30)).unwrap();
    runtime.download(&data).unwrap()
}

#[test]
fn specs_listing_scalars_in_another_order_share_the_program_but_not_its_bindings() {
    let runtime = runtime();
    let first = axpb(&[("a", ScalarType::F32), ("b", ScalarType::F32), ("n", ScalarType::U32)]);
    let swapped = axpb(&[("n", ScalarType::U32), ("b", ScalarType::F32), ("a", ScalarType::F32)]);
    let got =
        run_axpb(&runtime, &first, |d| vec![Arg::Buffer(d), Arg::F32(10.0), Arg::F32(1.0), Arg::U32(3)]);
    assert_eq!(got, vec![11.0, 21.0, 31.0]);
    let got =
        run_axpb(&runtime, &swapped, |d| vec![Arg::Buffer(d), Arg::U32(3), Arg::F32(1.0), Arg::F32(10.0)]);
    assert_eq!(got, vec![11.0, 21.0, 31.0], "the second spec's values went to the right uniforms");
    assert_eq!(runtime.cache_stats().compiles, 1, "both specs compile to one program");
}

fn interface_error(runtime: &Runtime, spec: &KernelSpec) -> String {
    let err = runtime.program(spec).expect_err("the spec disagrees with the shader");
    assert_eq!(err.kind(), ErrorKind::InvalidKernel, "{err}");
    assert!(matches!(err.detail::<KernelError>(), Some(KernelError::Interface { .. })), "{err:?}");
    err.to_string()
}

#[test]
fn a_spec_that_disagrees_with_the_shader_is_refused_naming_both_sides() {
    let runtime = runtime();
    let misspelt = axpb(&[("a", ScalarType::F32), ("bb", ScalarType::F32), ("n", ScalarType::U32)]);
    let message = interface_error(&runtime, &misspelt);
    assert!(message.contains("kernel `axpb`, binding `bb`") && message.contains("`b` (float)"), "{message}");

    let wrong_type = axpb(&[("a", ScalarType::F32), ("b", ScalarType::F32), ("n", ScalarType::I32)]);
    let message = interface_error(&runtime, &wrong_type);
    assert!(message.contains("binding `n`: the spec says i32 but the program declares `uint`"), "{message}");

    let missing = axpb(&[("a", ScalarType::F32), ("n", ScalarType::U32)]);
    let message = interface_error(&runtime, &missing);
    assert!(message.contains("binding `b`") && message.contains("does not list it"), "{message}");

    let unused = KernelSpec::new("unused", [64, 1, 1])
        .glsl(
            "layout(std430, binding = 0) buffer Data { float v[]; }; uniform uint n; uniform float unused;
               void main() { if (gl_GlobalInvocationID.x < n) v[gl_GlobalInvocationID.x] = 1.0; }",
        )
        .storage("v", Access::ReadWrite)
        .scalar("n", ScalarType::U32)
        .scalar("unused", ScalarType::F32);
    let message = interface_error(&runtime, &unused);
    assert!(message.contains("binding `unused`") && message.contains("removed it"), "{message}");
}

#[test]
fn storage_order_access_and_size_are_checked_against_the_shader() {
    let runtime = runtime();
    let source = "layout(std430, binding = 0) readonly buffer X { float x[]; };
                  layout(std430, binding = 1) buffer Y { float y[]; };
                  void main() { y[gl_GlobalInvocationID.x] += x[gl_GlobalInvocationID.x]; }";
    let swapped = KernelSpec::new("add", [1, 1, 1])
        .glsl(source)
        .storage("y", Access::ReadWrite)
        .storage("x", Access::ReadOnly);
    let message = interface_error(&runtime, &swapped);
    assert!(message.contains("binding `y`") && message.contains("declares it at binding 1"), "{message}");

    let writes_read_only = KernelSpec::new("add", [1, 1, 1])
        .glsl(source)
        .storage("x", Access::ReadOnly)
        .storage("y", Access::ReadOnly);
    let message = interface_error(&runtime, &writes_read_only);
    assert!(
        message.contains("binding `y`: the spec says ReadOnly but the program may write it"),
        "{message}"
    );

    let fixed = KernelSpec::new("histogram", [1, 1, 1])
        .glsl("layout(std430, binding = 0) buffer Counts { uint counts[16]; }; void main() { counts[15] = 1u; }")
        .storage("counts", Access::ReadWrite);
    let program = runtime.program(&fixed).unwrap();
    let small = runtime.create_buffer(32, BufferUsage::InOut).unwrap();
    let err = runtime.dispatch(&program, &[Arg::Buffer(&small)], [1, 1, 1]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("32 bytes are fewer than the 64 bytes"), "{err}");
    let enough = runtime.create_buffer(64, BufferUsage::InOut).unwrap();
    runtime
        .dispatch(&program, &[Arg::Buffer(&enough)], [1, 1, 1])
        .unwrap()
        .wait(Duration::from_secs(30))
        .unwrap();
    assert_eq!(runtime.download::<u32>(&enough).unwrap()[15], 1);
}

#[test]
fn blocks_at_one_binding_are_views_of_one_buffer() {
    let runtime = runtime();
    // Reads pairs through a `vec2` view and writes sums through a `float` view of the same buffer.
    let source = "layout(std430, binding = 0) readonly buffer Pairs { vec2 pairs[]; };
                  layout(std430, binding = 0) buffer Words { float words[]; };
                  layout(std430, binding = 1) buffer Sums { float sums[]; };
                  void main() {
                      uint i = gl_GlobalInvocationID.x;
                      vec2 p = pairs[i];
                      sums[i] = p.x + p.y;
                      if (i == 0u) words[7] = 100.0;
                  }";
    let spec = KernelSpec::new("pair_sums", [4, 1, 1])
        .glsl(source)
        .storage("pairs", Access::ReadWrite)
        .storage("sums", Access::ReadWrite);
    let program = runtime.program(&spec).unwrap();
    let data = runtime.upload(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], BufferUsage::InOut).unwrap();
    let sums = runtime.create_buffer(16, BufferUsage::InOut).unwrap();
    runtime
        .dispatch(&program, &[Arg::Buffer(&data), Arg::Buffer(&sums)], [1, 1, 1])
        .unwrap()
        .wait(Duration::from_secs(30))
        .unwrap();
    let sums = runtime.download::<f32>(&sums).unwrap();
    assert_eq!(sums[..3], [3.0, 7.0, 11.0]);
    assert!(sums[3] == 15.0 || sums[3] == 107.0, "the last pair is read before or after the write: {sums:?}");
    assert_eq!(runtime.download::<f32>(&data).unwrap()[7], 100.0, "written through the other view");

    // The buffer must suit every view: ReadOnly is refused while one view may write.
    let read_only = KernelSpec::new("pair_sums", [4, 1, 1])
        .glsl(source)
        .storage("pairs", Access::ReadOnly)
        .storage("sums", Access::ReadWrite);
    let message = interface_error(&runtime, &read_only);
    assert!(message.contains("the spec says ReadOnly but the program may write it"), "{message}");
}

#[test]
fn bad_names_are_input_errors_and_the_gl_thread_lives_on() {
    let runtime = runtime();
    let nul = axpb(&[("a\0", ScalarType::F32)]);
    let err = runtime.program(&nul).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidKernel);
    assert!(err.to_string().contains("not an identifier"), "{err}");
    let good = axpb(&[("a", ScalarType::F32), ("b", ScalarType::F32), ("n", ScalarType::U32)]);
    let got = run_axpb(&runtime, &good, |d| vec![Arg::Buffer(d), Arg::F32(2.0), Arg::F32(0.0), Arg::U32(3)]);
    assert_eq!(got, vec![2.0, 4.0, 6.0]);
}

#[test]
fn workgroup_size_is_declared_first_and_line_numbers_are_the_users() {
    let runtime = runtime();
    let spec = KernelSpec::new("wgsize", [32, 1, 1])
        .glsl("layout(std430, binding = 0) buffer Out { uint o[]; };\nshared uint scratch[gl_WorkGroupSize.x];\nvoid main() { scratch[gl_LocalInvocationID.x] = gl_WorkGroupSize.x; barrier(); o[gl_GlobalInvocationID.x] = scratch[0]; }\n")
        .storage("o", Access::ReadWrite);
    let program = runtime.program(&spec).unwrap();
    let out = runtime.create_buffer(32 * 4, BufferUsage::Output).unwrap();
    runtime
        .dispatch(&program, &[Arg::Buffer(&out)], [1, 1, 1])
        .unwrap()
        .wait(Duration::from_secs(30))
        .unwrap();
    assert!(runtime.download::<u32>(&out).unwrap().iter().all(|&v| v == 32));

    let disagreeing =
        KernelSpec::new("local", [32, 1, 1]).glsl("layout(local_size_x = 64) in;\nvoid main() {}\n");
    let err = runtime.program(&disagreeing).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidKernel);
    assert!(err.to_string().contains("[64, 1, 1]") && err.to_string().contains("[32, 1, 1]"), "{err}");

    let broken = KernelSpec::new("broken", [1, 1, 1]).glsl("#version 450\n\nvoid main() {\n  oops();\n}\n");
    let log = runtime.program(&broken).unwrap_err().to_string();
    assert!(
        log.contains(":4(") || log.contains(":4:") || log.contains("(4)"),
        "the error points at line 4: {log}"
    );
}

#[test]
fn submission_returns_at_once_waits_time_out_and_reads_wait_for_their_writers() {
    let runtime = runtime();
    let program = runtime.program(&gl_support::slow_spec("slow")).unwrap();
    let (groups, busy) = gl_support::slow_dispatch(&runtime, &program);
    let other = runtime.upload(&[7.0f32], BufferUsage::InOut).unwrap();

    let started = Instant::now();
    let submission = runtime.dispatch(&program, &[Arg::Buffer(&busy)], [groups, 1, 1]).unwrap();
    let submitted_in = started.elapsed();
    assert!(!submission.is_done(), "the kernel takes far longer than submitting it ({submitted_in:?})");

    let err = submission.wait(Duration::from_millis(100)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(err.to_string().contains("kernel `slow`") && err.to_string().contains("100 ms"), "{err}");

    // A buffer the running kernel does not touch has no fence to wait for. (llvmpipe runs the
    // kernel inside the GL call, so here the read still queues behind it on the GL thread; that
    // reads wait only for their writers is tested backend-neutrally in the runtime's tests.)
    assert_eq!(runtime.download::<f32>(&other).unwrap(), vec![7.0]);

    // Reading the kernel's output waits for it; dropping the program meanwhile is fine.
    drop(program);
    let value = runtime.download::<f32>(&busy).unwrap()[0];
    assert!(submission.is_done());
    assert!(value.fract() == 0.5, "{value}");
    submission.wait(Duration::ZERO).unwrap();
}

#[test]
fn several_dispatches_and_copies_go_in_one_submission_in_order() {
    let runtime = runtime();
    let spec = axpb(&[("a", ScalarType::F32), ("b", ScalarType::F32), ("n", ScalarType::U32)]);
    let program = runtime.program(&spec).unwrap();
    let data = runtime.upload(&[1.0f32, 2.0, 3.0, 4.0], BufferUsage::InOut).unwrap();
    let copy = runtime.create_buffer(16, BufferUsage::Output).unwrap();
    let mut commands = runtime.commands();
    commands
        .dispatch(&program, &[Arg::Buffer(&data), Arg::F32(2.0), Arg::F32(0.0), Arg::U32(4)], [1, 1, 1])
        .unwrap();
    commands
        .dispatch(
            &program,
            &[Arg::Range { buffer: &data, offset: 0, len: 8 }, Arg::F32(1.0), Arg::F32(1.0), Arg::U32(2)],
            [1, 1, 1],
        )
        .unwrap();
    commands.copy(&data, 0, &copy, 0, 16).unwrap();
    assert_eq!(commands.len(), 3);
    let submission = runtime.submit(commands).unwrap();
    // The download waits for the submission by itself.
    assert_eq!(runtime.download::<f32>(&copy).unwrap(), vec![3.0, 5.0, 6.0, 8.0]);
    assert!(submission.is_done());

    let alignment = runtime.info().limits.storage_buffer_offset_alignment;
    if alignment > 4 {
        let misaligned =
            [Arg::Range { buffer: &data, offset: 4, len: 8 }, Arg::F32(1.0), Arg::F32(1.0), Arg::U32(1)];
        let err = runtime.commands().dispatch(&program, &misaligned, [1, 1, 1]).map(drop).unwrap_err();
        assert!(err.to_string().contains("alignment"), "{err}");
    }
    assert!(runtime.submit(runtime.commands()).is_err(), "an empty submission is refused");
}

/// A kernel that waits, then copies `src` into `dst`: every invocation is resident long before
/// it reads.
const SLOW_COPY: &str = "layout(std430, binding = 0) readonly buffer Src { uint src[]; };
layout(std430, binding = 1) buffer Dst { uint dst[]; };
uniform uint spins;
void main() {
    uint i = gl_GlobalInvocationID.x;
    uint delay = i;
    for (uint k = 0u; k < spins; k++) { delay = delay * 1664525u + 1013904223u; }
    dst[i] = src[i] + (delay == 0xdeadbeefu && spins == 7u ? 1u : 0u);
}";

/// Overwrites `v` with all ones.
const SCRIBBLE: &str = "layout(std430, binding = 0) buffer Data { uint v[]; };
void main() { v[gl_GlobalInvocationID.x] = 0xffffffffu; }";

/// A command that writes a buffer an earlier command of the same submission reads runs after
/// that read: the reader sees the old contents, whether a kernel or a copy writes. (The reader's
/// invocations wait before they read, so a GPU that started the writer beside it would let them
/// see its writes; an H100 did, before the runtime put a barrier there.)
#[test]
fn a_write_after_a_read_in_one_submission_waits_for_the_read() {
    let runtime = runtime();
    let reader = runtime
        .program(
            &KernelSpec::new("slow_copy", [64, 1, 1])
                .glsl(SLOW_COPY)
                .storage("src", Access::ReadOnly)
                .storage("dst", Access::ReadWrite)
                .scalar("spins", ScalarType::U32),
        )
        .unwrap();
    let writer = runtime
        .program(&KernelSpec::new("scribble", [64, 1, 1]).glsl(SCRIBBLE).storage("v", Access::ReadWrite))
        .unwrap();
    let gpu = runtime.info().class == sparkle::DeviceClass::Gpu;
    let (groups, spins) = if gpu { (128u32, 200_000u32) } else { (4, 1_000) };
    let words: Vec<u32> = (0..groups * 64).collect();
    let ones = vec![0xffff_ffffu32; words.len()];
    let src = runtime.upload(&words, BufferUsage::InOut).unwrap();
    let dst = runtime.create_buffer(words.len() as u64 * 4, BufferUsage::Output).unwrap();
    let scribbled = runtime.upload(&ones, BufferUsage::Input).unwrap();
    for (writes, round) in ["a kernel", "a copy"].into_iter().flat_map(|w| (0..3).map(move |r| (w, r))) {
        runtime.write_buffer(&src, 0, bytemuck::cast_slice(&words)).unwrap();
        let mut commands = runtime.commands();
        commands
            .dispatch(&reader, &[Arg::Buffer(&src), Arg::Buffer(&dst), Arg::U32(spins)], [groups, 1, 1])
            .unwrap();
        if writes == "a kernel" {
            commands.dispatch(&writer, &[Arg::Buffer(&src)], [groups, 1, 1]).unwrap();
        } else {
            commands.copy(&scribbled, 0, &src, 0, words.len() as u64 * 4).unwrap();
        }
        runtime.submit(commands).unwrap().wait(Duration::from_secs(60)).unwrap();
        let copied: Vec<u32> = runtime.download(&dst).unwrap();
        let late = copied.iter().filter(|&&word| word == 0xffff_ffff).count();
        assert_eq!(
            late,
            0,
            "{writes} writing, round {round}: {late} of {} words were read after the later write",
            words.len()
        );
        assert_eq!(copied, words, "{writes} writing, round {round}");
        assert_eq!(runtime.download::<u32>(&src).unwrap(), ones, "{writes} writing, round {round}");
    }
}
