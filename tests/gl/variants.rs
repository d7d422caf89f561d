//! Variants of the suite's kernels on the gl backend (llvmpipe in CI): every vector width and
//! tile shape the tuner may pick is correct at ragged and aligned sizes; GPU time comes back
//! from timed submissions; a tuned choice is kept per GPU and found by a fresh runtime.

use std::time::Duration;

use sparkle::cache::CacheConfig;
use sparkle::suite::conv2d::{self, Conv2d, Shape};
use sparkle::suite::gemm::GemmVariant;
use sparkle::suite::saxpy::{Saxpy, SaxpyVariant};
use sparkle::suite::sgemm::{self, Sgemm};
use sparkle::suite::{self, tuning, Case};
use sparkle::{Arg, KernelSpec, Runtime};

fn backend() -> Runtime {
    Runtime::open_backend("gl", &CacheConfig::memory_only()).expect("a GL 4.3 context (llvmpipe is enough)")
}

fn assert_correct(backend: &Runtime, case: &dyn Case, spec: &KernelSpec, label: &str) {
    let program = backend.program(spec).unwrap_or_else(|e| panic!("{label} compiles: {e}"));
    let verdict = suite::run_and_verify(backend, &program, case).expect("the dispatch runs");
    assert!(verdict.passed(), "{} with {label}: {verdict}", case.describe());
}

fn gemm(bm: u32, bn: u32, bk: u32, tm: u32, tn: u32, va: u32, vb: u32) -> GemmVariant {
    GemmVariant { bm, bn, bk, tm, tn, va, vb, ..GemmVariant::SAFE }
}

/// Whether the device has float atomics, which split variants need.
fn has_float_atomics(backend: &Runtime) -> bool {
    let probe = sgemm::variant_spec(&GemmVariant { split: 2, ..GemmVariant::SAFE });
    backend.program(&probe).is_ok()
}

/// The tile shapes and widths the tuner offers, small and large.
fn gemm_variants(vec_a: bool, vec_b: bool) -> Vec<GemmVariant> {
    let (va, vb) = (if vec_a { 4 } else { 1 }, if vec_b { 4 } else { 1 });
    let warp = |v: GemmVariant| GemmVariant { warp: 1, ..v };
    let split = |v: GemmVariant, split| GemmVariant { split, ..v };
    vec![
        gemm(128, 128, 8, 8, 8, va, vb),
        // Scalar, transposing loads of the left matrix at any size.
        gemm(128, 128, 8, 8, 8, 1, vb),
        warp(gemm(64, 128, 16, 4, 8, 1, vb)),
        GemmVariant { frag: 1, ..gemm(128, 64, 16, 8, 8, va, vb) },
        warp(gemm(64, 128, 16, 4, 8, va, vb)),
        GemmVariant { unroll: 0, ..gemm(64, 64, 16, 4, 4, va, vb) },
        gemm(64, 32, 16, 8, 4, va, vb),
        warp(gemm(32, 64, 8, 4, 8, va, vb)),
        split(gemm(64, 64, 16, 4, 4, va, vb), 2),
        split(warp(gemm(32, 64, 16, 4, 4, va, vb)), 3),
        // More parts than a short K has slices: the empty ones add nothing.
        split(gemm(32, 32, 16, 4, 4, va, vb), 16),
        GemmVariant { frag: 1, ..split(gemm(64, 64, 16, 4, 4, va, vb), 2) },
        // Sliced-K: 2 and 4 groups, with fragments, the subgroup layout and branchless stores.
        GemmVariant { kslice: 2, ..gemm(64, 32, 16, 4, 4, va, vb) },
        GemmVariant { kslice: 4, ..gemm(32, 32, 8, 4, 4, va, vb) },
        GemmVariant { kslice: 2, frag: 1, store_always: 1, ..warp(gemm(64, 128, 8, 8, 8, va, vb)) },
        GemmVariant { kslice: 2, frag: 1, ..warp(gemm(64, 32, 16, 4, 4, va, vb)) },
        GemmVariant::SAFE,
    ]
}

#[test]
fn sgemm_variants_are_correct_at_ragged_and_aligned_sizes() {
    if crate::compiles_apart(module_path!(), "sgemm_variants_are_correct_at_ragged_and_aligned_sizes") {
        return;
    }
    let backend = backend();
    let atomics = has_float_atomics(&backend);
    // (M, N, K): ragged in every dimension, K and N multiples of 4 (vector paths) with ragged
    // tiles, a K tail shorter than a slice, and one exact multiple of the big tile.
    for (m, n, k) in [(1, 1, 1), (37, 45, 19), (131, 68, 36), (70, 132, 12), (128, 128, 64)] {
        let case = Sgemm::random(m, n, k, (m + n + k) as u64);
        let shape = case.shape();
        for v in gemm_variants(shape.vec_a, shape.vec_b).into_iter().filter(|v| v.split == 1 || atomics) {
            assert!(v.well_formed(), "{v}");
            assert_correct(&backend, &case, &sgemm::variant_spec(&v), &v.to_string());
        }
        assert_correct(&backend, &case, &case.default_spec(backend.info()), "the default");
    }
}

#[test]
fn fixed_sgemm_variants_are_correct_on_their_problem_and_refuse_any_other() {
    if crate::compiles_apart(
        module_path!(),
        "fixed_sgemm_variants_are_correct_on_their_problem_and_refuse_any_other",
    ) {
        return;
    }
    let backend = backend();
    let limits = &backend.info().limits;
    // Whole tiles of 64×128×8 and of 128×128×8 (slices 8 or 16 deep), K longer than a slice.
    for (m, n, k) in [(128, 256, 48), (256, 128, 32)] {
        let case = Sgemm::random(m, n, k, (m + k) as u64);
        let fixed: Vec<(String, KernelSpec)> =
            case.variants(limits).into_iter().filter(|(label, _)| label.ends_with(" fixed")).collect();
        assert!(!fixed.is_empty(), "{m}x{n}x{k} is whole tiles: the tuner is offered fixed variants");
        for (label, spec) in &fixed {
            assert_correct(&backend, &case, spec, label);
        }
        // The same program on another problem, even one of whole tiles, is refused before it runs.
        let (label, spec) = &fixed[0];
        let program = backend.program(spec).unwrap();
        let other = Sgemm::random(m, n, k + 16, 1);
        let buffers = other.upload(&backend).unwrap();
        let err = other.dispatch(&backend, &program, &buffers).unwrap_err();
        assert_eq!(err.kind(), sparkle::ErrorKind::InvalidArgument, "{label}: {err}");
        assert!(err.to_string().contains(&format!("{m}×{n}×{k} product only")), "{err}");
        // So is a dispatch made by hand: the spec pins M, N and K.
        let args = [
            Arg::Buffer(&buffers[0]),
            Arg::Buffer(&buffers[1]),
            Arg::Buffer(&buffers[2]),
            Arg::U32(m as u32),
            Arg::U32(n as u32),
            Arg::U32((k + 16) as u32),
        ];
        let mut commands = backend.commands();
        let err = commands.dispatch(&program, &args, [1, 1, 1]).map(|_| ()).unwrap_err();
        assert!(
            err.to_string().contains(&format!("built for K = {k} only, and this dispatch passes {}", k + 16)),
            "{err}"
        );
    }
    // A ragged problem is offered none.
    let ragged = Sgemm::random(130, 128, 32, 3);
    assert!(ragged.variants(limits).iter().all(|(label, _)| !label.ends_with(" fixed")));
}

#[test]
fn sgemm_variants_reading_texels_are_correct_fixed_and_ragged() {
    if crate::compiles_apart(module_path!(), "sgemm_variants_reading_texels_are_correct_fixed_and_ragged") {
        return;
    }
    let backend = backend();
    let limits = &backend.info().limits;
    // Whole tiles (texel forms of the fixed twins) and ragged sizes, with 1- and 4-wide loads.
    for (m, n, k) in [(128, 256, 48), (130, 131, 37), (200, 136, 72)] {
        let case = Sgemm::random(m, n, k, (m * 3 + k) as u64);
        let texels: Vec<(String, KernelSpec)> =
            case.variants(limits).into_iter().filter(|(label, _)| label.ends_with(" texels")).collect();
        assert!(!texels.is_empty(), "{m}x{n}x{k}: the tuner is offered variants reading texels");
        assert_eq!(
            texels.iter().any(|(label, _)| label.ends_with(" fixed texels")),
            m % 128 == 0 && n % 128 == 0,
            "{m}x{n}x{k}: the fixed twins' texel forms where the problem is whole tiles"
        );
        for (label, spec) in &texels {
            assert_correct(&backend, &case, spec, label);
        }
    }
}

#[test]
fn conv2d_variants_are_correct_at_ragged_and_aligned_shapes() {
    if crate::compiles_apart(module_path!(), "conv2d_variants_are_correct_at_ragged_and_aligned_shapes") {
        return;
    }
    let backend = backend();
    let atomics = has_float_atomics(&backend);
    for shape in [
        Shape { n: 1, c: 1, h: 1, w: 1, k: 1 },
        Shape { n: 2, c: 3, h: 7, w: 9, k: 5 },
        Shape { n: 2, c: 8, h: 6, w: 10, k: 12 },
        Shape { n: 3, c: 4, h: 8, w: 8, k: 20 },
    ] {
        let case = Conv2d::random(shape, shape.w as u64);
        let gemm_shape = conv2d::gemm_shape(shape);
        for v in
            gemm_variants(gemm_shape.vec_a, gemm_shape.vec_b).into_iter().filter(|v| v.split == 1 || atomics)
        {
            assert_correct(&backend, &case, &conv2d::variant_spec(&v), &v.to_string());
        }
        assert_correct(&backend, &case, &case.default_spec(backend.info()), "the default");
    }
}

#[test]
fn conv2d_variants_are_correct_with_1x1_and_strided_windows() {
    if crate::compiles_apart(module_path!(), "conv2d_variants_are_correct_with_1x1_and_strided_windows") {
        return;
    }
    use conv2d::Window;
    let backend = backend();
    let atomics = has_float_atomics(&backend);
    for (shape, window) in [
        // 1×1 with C and K not multiples of 4, and aligned; stride 2 at odd and even sizes.
        (Shape { n: 2, c: 3, h: 7, w: 9, k: 5 }, Window { size: 1, stride: 1 }),
        (Shape { n: 2, c: 8, h: 6, w: 10, k: 12 }, Window { size: 1, stride: 2 }),
        (Shape { n: 1, c: 4, h: 9, w: 11, k: 6 }, Window { size: 3, stride: 2 }),
        (Shape { n: 2, c: 5, h: 8, w: 8, k: 8 }, Window { size: 3, stride: 2 }),
        (Shape { n: 1, c: 2, h: 10, w: 7, k: 3 }, Window { size: 5, stride: 3 }),
    ] {
        let case = Conv2d::random_window(shape, window, shape.w as u64);
        let gemm_shape = conv2d::window_gemm_shape(shape, window);
        for v in
            gemm_variants(gemm_shape.vec_a, gemm_shape.vec_b).into_iter().filter(|v| v.split == 1 || atomics)
        {
            let label = format!("{v} {window:?}");
            assert_correct(&backend, &case, &conv2d::window_variant_spec(&v, window), &label);
        }
        assert_correct(&backend, &case, &case.default_spec(backend.info()), "the default");
        assert_correct(&backend, &case, &case.spec(), "the safe variant");
        assert!(
            case.variants(&backend.info().limits).iter().all(|(label, _)| !label.starts_with("winograd")),
            "Winograd is 3×3 at stride 1 only"
        );
        // A program of another window is refused, never run.
        let program = backend.program(&conv2d::variant_spec(&GemmVariant::SAFE)).unwrap();
        let err =
            suite::run_and_verify(&backend, &program, &case).expect_err("a 3×3 program on another window");
        assert!(err.to_string().contains("window"), "{err}");
    }
}

#[test]
fn the_shape_set_runs_correctly_with_each_default_among_the_tuners_candidates() {
    let backend = backend();
    for case in suite::shape_cases(5, true) {
        let default = case.default_spec(backend.info());
        let variants = suite::variants_for(&backend, case.as_ref());
        // The tuner times the default beside the rest, so what it keeps is never slower than
        // the default on the same problem; other problems keep their own choice or the default.
        assert!(
            variants.iter().any(|(_, spec)| *spec == default),
            "{}: the default is a candidate",
            case.describe()
        );
        assert_correct(&backend, case.as_ref(), &default, "the default");
    }
    let keys: std::collections::HashSet<String> =
        suite::shape_cases(5, false).iter().map(|c| tuning::key(c.as_ref())).collect();
    assert_eq!(keys.len(), suite::shape_cases(5, false).len(), "every shape is tuned under its own key");
}

#[test]
fn split_variants_compile_wherever_float_atomics_exist() {
    // Mesa's llvmpipe and NVIDIA both offer GL_NV_shader_atomic_float; a device without it
    // refuses split variants at compile time (the tuner then rejects them).
    let backend = backend();
    let extensions = backend.info().details.iter().any(|(_, v)| v.contains("NVIDIA") || v.contains("Mesa"));
    if extensions {
        assert!(has_float_atomics(&backend), "split variants must compile on {}", backend.info().name);
    }
}

#[test]
fn saxpy_variants_are_correct_and_vec4_refuses_ragged_n() {
    let backend = backend();
    for n in [1usize, 3, 4, 1020, 4100, 70_001] {
        let case = Saxpy::random(n, n as u64);
        let variants = SaxpyVariant::candidates(&backend.info().limits, n);
        assert_eq!(variants.iter().any(|v| v.vec == 4), n % 4 == 0, "n = {n}");
        for v in variants.iter().filter(|v| v.per_thread != 2 && v.workgroup != 512) {
            assert_correct(&backend, &case, &v.spec(), &v.to_string());
        }
    }
    let ragged = Saxpy::random(10, 1);
    let vec4 = SaxpyVariant { workgroup: 64, per_thread: 2, vec: 4 };
    let program = backend.program(&vec4.spec()).unwrap();
    let buffers = ragged.upload(&backend).unwrap();
    let err = ragged.dispatch(&backend, &program, &buffers).unwrap_err();
    assert!(err.to_string().contains("multiple of 4"), "{err}");
}

#[test]
fn timed_submissions_report_gpu_time_and_untimed_ones_do_not() {
    let backend = backend();
    assert!(backend.measures_gpu_time());
    let case = Sgemm::random(96, 96, 96, 3);
    let program = backend.program(&case.default_spec(backend.info())).unwrap();
    let buffers = case.upload(&backend).unwrap();

    let started = std::time::Instant::now();
    let mut commands = backend.commands();
    case.record(&mut commands, &program, &buffers).unwrap();
    let timed = backend.submit_timed(commands).unwrap();
    timed.wait(Duration::from_secs(60)).unwrap();
    let wall = started.elapsed();
    let gpu = timed.gpu_time().expect("a timed submission reports its GPU time");
    assert!(gpu > Duration::ZERO && gpu <= wall, "gpu {gpu:?}, wall {wall:?}");
    assert_eq!(timed.gpu_time(), Some(gpu), "reading it twice gives the same time");

    let untimed = case.dispatch(&backend, &program, &buffers).unwrap();
    untimed.wait(Duration::from_secs(60)).unwrap();
    assert_eq!(untimed.gpu_time(), None);
}

#[test]
fn a_tuned_choice_is_kept_per_gpu_and_found_by_a_fresh_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let config = CacheConfig { dir: Some(dir.path().to_path_buf()), ..CacheConfig::memory_only() };
    let case = Sgemm::random(64, 64, 64, 9);
    let options = tuning::Options {
        runs: 2,
        budget: Duration::ZERO,
        warm_up: Duration::from_millis(10),
        max_candidates: Some(3),
    };
    let first = Runtime::open_backend("gl", &config).unwrap();
    assert!(tuning::Tuning::load(&first).is_none(), "nothing is stored before tuning");
    let outcome = tuning::tune(&first, &case, options).unwrap();
    assert_eq!(outcome.timings.len() + outcome.rejected.len(), 3);
    assert!(outcome.rejected.is_empty(), "{:?}", outcome.rejected);
    let path = tuning::Tuning::store(&first, &outcome.key, outcome.choice.clone()).unwrap();
    let gpu_dir = dir.path().join(first.info().gpu_id.dir_name());
    assert_eq!(path, gpu_dir.join(tuning::FILE_NAME));
    drop(first);

    let second = Runtime::open_backend("gl", &config).unwrap();
    let stored = tuning::Tuning::load(&second).expect("the choice was kept on disk");
    assert_eq!(stored.choice(&case), Some(&outcome.choice));
    let spec = suite::chosen_spec(&second, &case);
    let variants = case.variants(&second.info().limits);
    let winner = variants.iter().find(|(l, _)| *l == outcome.choice.variant).map(|(_, s)| s.clone());
    assert_eq!(Some(spec), winner);
    // Asked again, from what this process remembers of the file: the same.
    assert_eq!(Some(suite::chosen_spec(&second, &case)), winner);
    // Another problem of the same kernel is not tuned: it gets the default.
    let other = Sgemm::random(64, 64, 32, 9);
    assert_eq!(suite::chosen_spec(&second, &other), other.default_spec(second.info()));

    // A damaged file means defaults, never a failure.
    std::fs::write(&path, b"{ not json").unwrap();
    assert_eq!(suite::chosen_spec(&second, &case), case.default_spec(second.info()));

    // A choice another process writes over the file is used from the next call on.
    let (label, replacement) = variants.iter().find(|(l, _)| *l != outcome.choice.variant).unwrap().clone();
    let mut replaced = stored.clone();
    replaced.choices.insert(outcome.key.clone(), tuning::Choice { variant: label, ..outcome.choice.clone() });
    std::fs::write(&path, serde_json::to_vec_pretty(&replaced).unwrap()).unwrap();
    assert_eq!(suite::chosen_spec(&second, &case), replacement);
    // So is one this process stores, whatever the file's size and time.
    tuning::Tuning::store(&second, &outcome.key, outcome.choice.clone()).unwrap();
    assert_eq!(Some(suite::chosen_spec(&second, &case)), winner);
}
