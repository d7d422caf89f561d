//! The suite's kernels on the gl backend (Mesa's llvmpipe in CI): correct at several sizes,
//! including ones that are not multiples of the workgroup or tile size.

use sparkle::cache::CacheConfig;
use sparkle::suite::{self, conv2d::Shape, Case};
use sparkle::Runtime;

fn backend() -> Runtime {
    Runtime::open_backend("gl", &CacheConfig::memory_only())
        .expect("a GL 4.3 context (Mesa's llvmpipe is enough)")
}

fn assert_correct(backend: &Runtime, case: &dyn Case) {
    let program = backend.program(&case.spec()).expect("the suite kernel compiles");
    let verdict = suite::run_and_verify(backend, &program, case).expect("the dispatch runs");
    assert!(verdict.passed(), "{}: {verdict}", case.describe());
    assert!(verdict.checked > 0);
}

#[test]
fn saxpy_is_correct_at_ragged_sizes() {
    let backend = backend();
    for n in [1, 255, 256, 257, 10_007] {
        assert_correct(&backend, &suite::saxpy::Saxpy::random(n, n as u64));
    }
}

#[test]
fn sgemm_is_correct_for_any_shape() {
    let backend = backend();
    for (m, n, k) in [(1, 1, 1), (16, 16, 16), (17, 33, 5), (64, 48, 100), (129, 65, 257)] {
        assert_correct(&backend, &suite::sgemm::Sgemm::random(m, n, k, (m * n * k) as u64));
    }
}

#[test]
fn conv2d_is_correct_at_several_shapes() {
    let backend = backend();
    for shape in [
        Shape { n: 1, c: 1, h: 1, w: 1, k: 1 },
        Shape { n: 1, c: 3, h: 16, w: 16, k: 4 },
        Shape { n: 2, c: 5, h: 17, w: 23, k: 3 },
        Shape { n: 1, c: 16, h: 33, w: 40, k: 8 },
    ] {
        assert_correct(&backend, &suite::conv2d::Conv2d::random(shape, shape.h as u64));
    }
}
