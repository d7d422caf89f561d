//! Buffers read as texels (`Access::Texels`) on the gl backend (Mesa's llvmpipe in CI): each
//! format reads the bytes of the bound range, a texel past the range reads as zero, a kernel
//! sees what an earlier dispatch of the same submission wrote, and specs or ranges that do not
//! fit the program or the device are refused before anything runs.

use std::time::Duration;

use sparkle::cache::CacheConfig;
use sparkle::{Access, Arg, BufferUsage, ErrorKind, KernelSpec, Runtime, ScalarType, TexelFormat};

const TIMEOUT: Duration = Duration::from_secs(60);

fn runtime() -> Runtime {
    Runtime::open_backend("gl", &CacheConfig::memory_only())
        .expect("a GL 4.3 context (Mesa's llvmpipe is enough)")
}

/// `out[i]` = the sum of texel `i`'s components, for `n` texels read through `sampler` (a
/// one-component texel reads as (r, 0, 0, 1): its sum is r).
fn summing(sampler: &str, format: TexelFormat) -> KernelSpec {
    let sum = if format.bytes() == 4 { "t.x" } else { "t.x + t.y + t.z + t.w" };
    KernelSpec::new("texel_sum", [64, 1, 1])
        .glsl(format!(
            "layout(binding = 0) uniform {sampler} x;
             layout(std430, binding = 1) buffer Out {{ float o[]; }};
             uniform uint n;
             void main() {{
                 uint i = gl_GlobalInvocationID.x;
                 if (i < n) {{ vec4 t = vec4(texelFetch(x, int(i))); o[i] = {sum}; }}
             }}"
        ))
        .storage("x", Access::Texels(format))
        .storage("o", Access::ReadWrite)
        .scalar("n", ScalarType::U32)
}

fn sums(runtime: &Runtime, spec: &KernelSpec, input: Arg<'_>, n: u32) -> Vec<f32> {
    let program = runtime.program(spec).unwrap();
    let out = runtime.upload(&vec![-1.0f32; n as usize], BufferUsage::InOut).unwrap();
    runtime
        .dispatch(&program, &[input, Arg::Buffer(&out), Arg::U32(n)], [n.div_ceil(64), 1, 1])
        .unwrap()
        .wait(TIMEOUT)
        .unwrap();
    runtime.download(&out).unwrap()
}

#[test]
fn each_format_reads_the_bound_ranges_bytes_and_zero_past_its_end() {
    let runtime = runtime();
    let align = runtime.info().limits.texel_buffer_offset_alignment;
    assert!(runtime.info().limits.max_texel_buffer_texels >= 65536, "GL 4.3 guarantees 65536 texels");
    let values: Vec<f32> = (0..4096).map(|i| i as f32 * 0.5 - 100.0).collect();
    let floats = runtime.upload(&values, BufferUsage::Input).unwrap();

    let skip = (align / 4) as usize;
    let range = Arg::Range { buffer: &floats, offset: align, len: 100 * 4 };
    let scalar = sums(&runtime, &summing("samplerBuffer", TexelFormat::R32F), range, 101);
    for (i, &got) in scalar.iter().enumerate().take(100) {
        assert_eq!(got, values[skip + i], "r32f texel {i} of a range starting at byte {align}");
    }
    assert_eq!(scalar[100], 0.0, "the texel past the range reads as zero");

    let vectors = sums(&runtime, &summing("samplerBuffer", TexelFormat::Rgba32F), Arg::Buffer(&floats), 1025);
    for (i, &got) in vectors.iter().enumerate().take(1024) {
        let want: f32 = values[4 * i..4 * i + 4].iter().sum();
        assert_eq!(got, want, "rgba32f texel {i}");
    }
    assert_eq!(vectors[1024], 0.0, "the texel past the buffer reads as zero");

    let words: Vec<u32> = (0..256u32).map(|i| i * 3 + 1).collect();
    let uints = runtime.upload(&words, BufferUsage::Input).unwrap();
    let read = sums(&runtime, &summing("usamplerBuffer", TexelFormat::R32Ui), Arg::Buffer(&uints), 256);
    assert!(read.iter().zip(&words).all(|(&got, &want)| got == want as f32), "r32ui texels");
}

#[test]
fn a_kernel_reads_as_texels_what_an_earlier_dispatch_of_its_submission_wrote() {
    let runtime = runtime();
    let fill = runtime
        .program(
            &KernelSpec::new("fill", [64, 1, 1])
                .glsl(
                    "layout(std430, binding = 0) buffer V { float v[]; };
                     uniform float value;
                     void main() { v[gl_GlobalInvocationID.x] = value + float(gl_GlobalInvocationID.x); }",
                )
                .storage("v", Access::ReadWrite)
                .scalar("value", ScalarType::F32),
        )
        .unwrap();
    let sum = runtime.program(&summing("samplerBuffer", TexelFormat::R32F)).unwrap();
    let n = 64 * 64;
    let data = runtime.create_buffer(n as u64 * 4, BufferUsage::InOut).unwrap();
    let out = runtime.create_buffer(n as u64 * 4, BufferUsage::InOut).unwrap();
    for round in 0..4 {
        let value = round as f32 * 1000.0;
        let mut commands = runtime.commands();
        commands.dispatch(&fill, &[Arg::Buffer(&data), Arg::F32(value)], [64, 1, 1]).unwrap();
        commands.dispatch(&sum, &[Arg::Buffer(&data), Arg::Buffer(&out), Arg::U32(n)], [64, 1, 1]).unwrap();
        runtime.submit(commands).unwrap().wait(TIMEOUT).unwrap();
        let got: Vec<f32> = runtime.download(&out).unwrap();
        for (i, &g) in got.iter().enumerate() {
            assert_eq!(g, value + i as f32, "round {round}, texel {i}: the fill before it in the submission");
        }
    }
}

#[test]
fn texel_specs_and_ranges_that_do_not_fit_are_refused_before_running() {
    let runtime = runtime();
    let as_storage = KernelSpec::new("texel_sum", [64, 1, 1])
        .glsl(match &summing("samplerBuffer", TexelFormat::R32F).sources[0] {
            sparkle::KernelSource::Glsl(source) => source.clone(),
            other => panic!("a GLSL source, not {other:?}"),
        })
        .storage("x", Access::ReadOnly)
        .storage("o", Access::ReadWrite)
        .scalar("n", ScalarType::U32);
    let err = runtime.program(&as_storage).unwrap_err();
    assert!(
        err.to_string().contains("binding `x`: the program reads it as texels (a `samplerBuffer`)"),
        "{err}"
    );
    let wrong_type = summing("samplerBuffer", TexelFormat::R32I);
    let err = runtime.program(&wrong_type).unwrap_err();
    assert!(err.to_string().contains("r32i texels, which a `isamplerBuffer` reads"), "{err}");

    let program = runtime.program(&summing("samplerBuffer", TexelFormat::Rgba32F)).unwrap();
    let data = runtime.create_buffer(4096, BufferUsage::Input).unwrap();
    let out = runtime.create_buffer(4096, BufferUsage::InOut).unwrap();
    let ragged = Arg::Range { buffer: &data, offset: 0, len: 40 };
    let err = runtime.dispatch(&program, &[ragged, Arg::Buffer(&out), Arg::U32(2)], [1, 1, 1]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("40 bytes are not a whole number of rgba32f texels"), "{err}");
    let align = runtime.info().limits.texel_buffer_offset_alignment;
    if align > 16 {
        let misaligned = Arg::Range { buffer: &data, offset: 16, len: 64 };
        let err =
            runtime.dispatch(&program, &[misaligned, Arg::Buffer(&out), Arg::U32(2)], [1, 1, 1]).unwrap_err();
        assert!(err.to_string().contains("texel buffer offset alignment"), "{err}");
    }
}
