//! Backend faults on gl: a kernel that outlives its wait ends in a Timeout naming the kernel,
//! and this runtime and others stay usable; invalid dispatches are refused before submission,
//! naming the kernel and the limit; a shader declaring more shared memory than the device has
//! fails to build with the driver's reason. (The plain timeout, argument and buffer-size checks
//! are in the gl tests' `seam` and `cache`; this module adds what they do not cover.)
//!
//! llvmpipe ends no truly endless loop (the GL thread would hang forever), so the long kernel is
//! a long finite one, as in the gl tests' `seam`.

use std::time::{Duration, Instant};

use crate::gl_support;
use sparkle::cache::CacheConfig;
use sparkle::suite::{self, Case};
use sparkle::{Access, Arg, BufferUsage, ErrorKind, KernelError, KernelSpec, Runtime};

fn runtime() -> Runtime {
    Runtime::open_backend("gl", &CacheConfig::memory_only()).expect("a GL context")
}

#[test]
fn a_kernel_outliving_its_wait_times_out_by_name_and_everything_stays_usable() {
    let first = runtime();
    let program = first.program(&gl_support::slow_spec("practically_endless")).unwrap();
    let (groups, out) = gl_support::slow_dispatch(&first, &program);
    let started = Instant::now();
    let submission = first.dispatch(&program, &[Arg::Buffer(&out)], [groups, 1, 1]).unwrap();
    let err = submission.wait(Duration::from_millis(20)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(err.to_string().contains("kernel `practically_endless`"), "the timeout names the kernel: {err}");

    // Another runtime, opened while the kernel still runs, computes correctly (its work queues
    // behind the long kernel on llvmpipe's one GL thread, so it is given time).
    let second = runtime();
    let case = suite::saxpy::Saxpy::random(513, 9);
    let saxpy = second.program(&case.spec()).unwrap();
    assert!(suite::run_and_verify(&second, &saxpy, &case).unwrap().passed());
    // The timed-out submission finishes on its own and the first runtime goes on.
    submission.wait(Duration::from_secs(300)).unwrap();
    assert!(first.download::<f32>(&out).unwrap().iter().all(|v| v.fract() == 0.5));
    let again = first.program(&case.spec()).unwrap();
    assert!(suite::run_and_verify(&first, &again, &case).unwrap().passed());
    eprintln!("long kernel took {:?}", started.elapsed());
}

#[test]
fn invalid_dispatches_name_the_kernel_and_the_limit() {
    let runtime = runtime();
    let limits = runtime.info().limits.clone();
    let case = suite::saxpy::Saxpy::random(64, 1);
    let program = runtime.program(&case.spec()).unwrap();
    let x = runtime.upload(&[1.0f32; 64], BufferUsage::Input).unwrap();
    let y = runtime.upload(&[1.0f32; 64], BufferUsage::InOut).unwrap();
    let args = [Arg::Buffer(&x), Arg::Buffer(&y), Arg::F32(2.0), Arg::U32(64)];
    for axis in 0..3 {
        let mut groups = [1, 1, 1];
        groups[axis] = limits.max_workgroup_count[axis] + 1;
        let err = runtime.dispatch(&program, &args, groups).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        let text = err.to_string();
        assert!(
            text.contains("saxpy") && text.contains(&limits.max_workgroup_count[axis].to_string()),
            "{text}"
        );
        let zero = runtime.dispatch(&program, &args, [0, 1, 1]).unwrap_err();
        assert!(matches!(zero.detail::<KernelError>(), Some(KernelError::Grid { .. })), "{zero}");
    }
    let wide = KernelSpec::new("wide", [limits.max_workgroup_size[0] + 1, 1, 1]).glsl("void main() {}");
    let err = runtime.program(&wide).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("wide") && text.contains(&limits.max_workgroup_size[0].to_string()), "{text}");
    let crowded = KernelSpec::new("crowded", [limits.max_workgroup_invocations, 2, 1]).glsl("void main() {}");
    let text = runtime.program(&crowded).unwrap_err().to_string();
    assert!(
        text.contains("crowded") && text.contains(&limits.max_workgroup_invocations.to_string()),
        "{text}"
    );
}

#[test]
fn a_shader_declaring_more_shared_memory_than_the_device_has_fails_with_the_drivers_reason() {
    let runtime = runtime();
    let limit = runtime.info().limits.max_shared_memory_bytes;
    let floats = limit / 4 + 1024;
    let spec = KernelSpec::new("hoarder", [64, 1, 1])
        .glsl(format!(
            "layout(std430, binding = 0) buffer Out {{ float o[]; }};
             shared float scratch[{floats}];
             void main() {{
                 scratch[gl_LocalInvocationID.x * 97u] = 1.0;
                 barrier();
                 o[gl_GlobalInvocationID.x] = scratch[{last}u - gl_LocalInvocationID.x];
             }}",
            last = floats - 1
        ))
        .storage("o", Access::ReadWrite);
    let err = match runtime.program(&spec) {
        Err(err) => err,
        Ok(_) => {
            // GL has no query for a program's shared memory: a driver that compiles it anyway
            // (its hardware has more than the GL limit it reports) is its own judge.
            eprintln!("this driver compiles {} bytes of shared memory (reported limit {limit})", floats * 4);
            return;
        }
    };
    assert_eq!(err.kind(), ErrorKind::Compile, "{err}");
    let text = err.to_string();
    assert!(text.contains("hoarder"), "{text}");
    if runtime.info().details.iter().any(|(name, value)| name == "vendor" && value.contains("Mesa")) {
        assert!(text.to_lowercase().contains("shared"), "the driver's reason reaches the user: {text}");
    }
    eprintln!("{limit}-byte device, {} bytes declared: {text}", floats * 4);
}
