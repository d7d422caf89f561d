//! The gl backend through the shared program cache, on the machine's GL driver (Mesa's llvmpipe
//! in CI): damaged entries never reach `glProgramBinary`, refused binaries are recompiled,
//! compile errors carry the driver's log and are not cached, and runtimes on many threads share
//! the device. Programs persisting across processes are tested through `sparkle-bench
//! bench-child` (the lab's `child` tests), and a driver without program binaries through the
//! `sparkle` command (its `gl_cache` tests).

use std::path::Path;

use crate::faults::{entry_files, payload, with_payload};
use crate::gl_support::driver_is_mesa;
use sparkle::cache::{CacheConfig, CacheStats, HEADER_LEN};
use sparkle::gl::GlError;
use sparkle::suite::{self, Case};
use sparkle::{Access, Arg, BufferUsage, ErrorKind, KernelError, KernelSpec, Runtime, ScalarType};

fn open(dir: &Path) -> Runtime {
    Runtime::open_backend("gl", &CacheConfig::in_dir(dir))
        .expect("a GL 4.3 context (Mesa's llvmpipe is enough)")
}

fn memory_only() -> Runtime {
    Runtime::open_backend("gl", &CacheConfig::memory_only()).expect("a GL context")
}

fn small_cases() -> Vec<Box<dyn Case>> {
    vec![
        Box::new(suite::saxpy::Saxpy::random(1000, 3)),
        Box::new(suite::sgemm::Sgemm::random(40, 24, 33, 3)),
        Box::new(suite::conv2d::Conv2d::random(suite::conv2d::Shape { n: 1, c: 3, h: 9, w: 11, k: 2 }, 3)),
    ]
}

fn run_suite(backend: &Runtime) {
    for case in small_cases() {
        let program = backend.program(&case.spec()).expect("suite kernel");
        let verdict = suite::run_and_verify(backend, &program, case.as_ref()).expect("dispatch");
        assert!(verdict.passed(), "{}: {verdict}", case.describe());
    }
}

/// Runs the suite on a fresh backend over `dir` and returns that backend's cache statistics.
fn run_suite_in(dir: &Path) -> CacheStats {
    let backend = open(dir);
    run_suite(&backend);
    backend.cache_stats()
}

#[test]
fn damaged_entries_are_rejected_before_the_driver_and_recompiled() {
    let dir = tempfile::tempdir().unwrap();
    run_suite_in(dir.path());
    let entries = entry_files(dir.path());
    assert_eq!(entries.len(), 3);
    for path in &entries {
        let mut bytes = std::fs::read(path).unwrap();
        let middle = HEADER_LEN + (bytes.len() - HEADER_LEN) / 2;
        bytes[middle] ^= 0x40;
        std::fs::write(path, bytes).unwrap();
    }

    let stats = run_suite_in(dir.path());
    assert_eq!(stats.disk_rejected, 3, "every damaged entry is caught by verification");
    assert_eq!(stats.driver_refused, 0, "no damaged blob reached glProgramBinary");
    assert_eq!(stats.compiles, 3);
    assert_eq!(stats.disk_hits, 0);

    // The recompiled programs were written back and load cleanly.
    let stats = run_suite_in(dir.path());
    assert_eq!((stats.disk_hits, stats.compiles), (3, 0));
}

#[test]
fn a_verified_binary_the_driver_refuses_is_recompiled_and_replaced() {
    if !driver_is_mesa() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    run_suite_in(dir.path());
    // Damage each blob but re-seal the entry, as if a driver update had changed the format:
    // verification passes, so only the driver can refuse it.
    for path in entry_files(dir.path()) {
        let bytes = std::fs::read(&path).unwrap();
        let mut damaged = payload(&bytes).to_vec();
        let middle = damaged.len() / 2;
        damaged[middle] ^= 0x40;
        std::fs::write(&path, with_payload(&bytes, &damaged)).unwrap();
    }

    let stats = run_suite_in(dir.path());
    assert_eq!(stats.disk_rejected, 0, "the re-sealed entries pass verification");
    assert_eq!(stats.driver_refused, 3, "llvmpipe checks its own blob and refuses it");
    assert_eq!(stats.compiles, 3);

    let stats = run_suite_in(dir.path());
    assert_eq!((stats.disk_hits, stats.driver_refused), (3, 0));
}

#[test]
fn a_compile_error_carries_the_driver_log_and_nothing_is_cached() {
    let dir = tempfile::tempdir().unwrap();
    let backend = open(dir.path());
    let broken = KernelSpec::new("broken", [64, 1, 1]).glsl("void main() { undefined_thing = 1; }");
    let err = backend.program(&broken).expect_err("a compile error");
    assert_eq!(err.kind(), ErrorKind::Compile, "{err}");
    match err.detail::<GlError>() {
        Some(GlError::Compile { kernel, log }) => {
            assert_eq!(kernel, "broken");
            assert!(log.contains("undefined_thing"), "the driver's log names the problem: {log}");
        }
        other => panic!("expected a GL compile error as the source, got {other:?}"),
    }
    assert!(entry_files(dir.path()).is_empty());
    assert_eq!(backend.cache_stats().compile_errors, 1);
    // Asking again compiles again (and fails again): the failure was not cached.
    assert!(backend.program(&broken).is_err());
    assert_eq!(backend.cache_stats().compile_errors, 2);
}

#[test]
fn a_user_kernel_goes_through_the_same_path_and_many_threads_compile_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let backend = open(dir.path());
    let kernel = KernelSpec::new("scale", [64, 1, 1])
        .glsl(
            "layout(std430, binding = 0) buffer Data { float v[]; };
             uniform uint n; uniform float factor;
             void main() { uint i = gl_GlobalInvocationID.x; if (i < n) v[i] *= factor; }",
        )
        .storage("v", Access::ReadWrite)
        .scalar("n", ScalarType::U32)
        .scalar("factor", ScalarType::F32);
    let programs: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8).map(|_| s.spawn(|| backend.program(&kernel).unwrap())).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(backend.cache_stats().compiles, 1);

    let data = backend.upload(&[1.0f32, 2.0, 3.0, 4.0, 5.0], BufferUsage::InOut).unwrap();
    backend
        .dispatch(&programs[3], &[Arg::Buffer(&data), Arg::U32(4), Arg::F32(3.0)], [1, 1, 1])
        .unwrap()
        .wait(std::time::Duration::from_secs(30))
        .unwrap();
    assert_eq!(backend.download::<f32>(&data).unwrap(), vec![3.0, 6.0, 9.0, 12.0, 5.0]);
    assert_eq!(entry_files(dir.path()).len(), 1);
}

#[test]
fn bad_dispatches_are_refused_before_the_driver() {
    let backend = memory_only();
    let spec = suite::saxpy::spec();
    let program = backend.program(&spec).unwrap();
    let x = backend.upload(&[1.0f32; 4], BufferUsage::Input).unwrap();

    let too_few = backend.dispatch(&program, &[Arg::Buffer(&x)], [1, 1, 1]).unwrap_err();
    assert!(
        matches!(
            too_few.detail::<KernelError>(),
            Some(KernelError::ArgumentCount { expected: 4, got: 1, .. })
        ),
        "{too_few}"
    );
    assert_eq!(too_few.kind(), ErrorKind::InvalidArgument);

    let wrong_type =
        backend.dispatch(&program, &[Arg::Buffer(&x), Arg::U32(1), Arg::F32(1.0), Arg::U32(4)], [1, 1, 1]);
    let wrong_type = wrong_type.unwrap_err();
    assert!(matches!(wrong_type.detail::<KernelError>(), Some(KernelError::ArgumentType { index: 1, .. })));

    let limit = backend.info().limits.max_workgroup_count[0];
    let too_many = backend.dispatch(
        &program,
        &[Arg::Buffer(&x), Arg::Buffer(&x), Arg::F32(1.0), Arg::U32(4)],
        [limit + 1, 1, 1],
    );
    let too_many = too_many.unwrap_err();
    assert!(matches!(too_many.detail::<KernelError>(), Some(KernelError::Grid { .. })), "{too_many}");

    let huge_group = KernelSpec::new("huge", [4096, 1024, 1]).glsl("void main() {}");
    let huge = backend.program(&huge_group).unwrap_err();
    assert!(matches!(huge.detail::<KernelError>(), Some(KernelError::ExceedsLimit { .. })), "{huge}");

    let out_of_bounds = backend.write_buffer(&x, 8, &[0u8; 16]).unwrap_err();
    assert_eq!(out_of_bounds.kind(), ErrorKind::InvalidArgument);
    assert!(out_of_bounds.to_string().contains("outside the 16-byte buffer"), "{out_of_bounds}");
}

#[test]
fn many_backends_on_many_threads_share_the_device() {
    // Backends opened and dropped concurrently share one context per device; a driver that
    // sees contexts made and destroyed on many threads crashes — this must simply work. (Torn
    // down during process exit: the command's `gl_cache` tests.)
    std::thread::scope(|s| {
        for round in 0..4u64 {
            s.spawn(move || {
                for i in 0..3 {
                    let backend = memory_only();
                    let case = suite::saxpy::Saxpy::random(300 + i, round * 10 + i as u64);
                    let program = backend.program(&case.spec()).unwrap();
                    assert!(suite::run_and_verify(&backend, &program, &case).unwrap().passed());
                }
            });
        }
    });
}
