//! Winograd F(2×2, 3×3) and F(4×4, 3×3) conv2d on the gl backend (llvmpipe in CI): every
//! layout of their variants matches the CPU reference at ragged shapes (odd H and W, channels
//! off the tile sizes, several images); a broken variant of either is caught by its tolerance;
//! the tuner offers both beside the implicit GEMM, and a stored Winograd choice selects it again
//! in a fresh runtime.

use sparkle::cache::CacheConfig;
use sparkle::suite::conv2d::{Conv2d, Shape};
use sparkle::suite::gemm::GemmVariant;
use sparkle::suite::winograd::{self, WinogradVariant};
use sparkle::suite::{self, tuning, Case};
use sparkle::{KernelSpec, Runtime};

fn backend() -> Runtime {
    Runtime::open_backend("gl", &CacheConfig::memory_only()).expect("a GL 4.3 context (llvmpipe is enough)")
}

fn verdict_of(backend: &Runtime, case: &dyn Case, spec: &KernelSpec) -> suite::Verdict {
    let program = backend.program(spec).unwrap_or_else(|e| panic!("{} compiles: {e}", spec.name));
    suite::run_and_verify(backend, &program, case).expect("the dispatch runs")
}

fn variant(bm: u32, bn: u32, bk: u32, tm: u32, tn: u32, va: u32, vb: u32) -> WinogradVariant {
    WinogradVariant { gemm: GemmVariant { bm, bn, bk, tm, tn, va, vb, ..GemmVariant::SAFE }, tile: 2 }
}

/// The same product on F(4×4).
fn f4(variant: WinogradVariant) -> WinogradVariant {
    WinogradVariant { tile: 4, ..variant }
}

/// F(2×2): the first output tile's half of the ragged shapes (the halves are two tests, so that
/// the binary's two threads share the compiles instead of one test running long at its end).
#[test]
fn winograd_variants_match_the_reference_at_ragged_shapes() {
    if crate::compiles_apart(module_path!(), "winograd_variants_match_the_reference_at_ragged_shapes") {
        return;
    }
    variants_match_the_reference_at_ragged_shapes(&winograd::OUTPUT_TILES[..1]);
}

/// F(4×4) (and any larger output tile): the other half.
#[test]
fn winograd_larger_tile_variants_match_the_reference_at_ragged_shapes() {
    if crate::compiles_apart(
        module_path!(),
        "winograd_larger_tile_variants_match_the_reference_at_ragged_shapes",
    ) {
        return;
    }
    variants_match_the_reference_at_ragged_shapes(&winograd::OUTPUT_TILES[1..]);
}

/// Every layout of the variants of each output tile of `tiles` matches the CPU at ragged shapes.
fn variants_match_the_reference_at_ragged_shapes(tiles: &[u32]) {
    assert!(!tiles.is_empty());
    let backend = backend();
    for shape in [
        // One pixel: a single tile, three quarters of it padding.
        Shape { n: 1, c: 1, h: 1, w: 1, k: 1 },
        // Odd H and W (ragged tiles), channels off every tile size, two images.
        Shape { n: 2, c: 3, h: 7, w: 9, k: 5 },
        // C a multiple of 4 (vector weight loads), tile count a multiple of 4 (vector V and M).
        Shape { n: 2, c: 8, h: 5, w: 11, k: 12 },
        // Three images, K past one 32-row tile, even sizes.
        Shape { n: 3, c: 12, h: 6, w: 6, k: 37 },
        // Odd sizes with a tile count that is a multiple of 4 (vector V and M) but C that is not.
        Shape { n: 4, c: 5, h: 3, w: 5, k: 9 },
        // A width that is a multiple of 4: F(4×4) stores rows of outputs as vectors.
        Shape { n: 2, c: 4, h: 8, w: 12, k: 6 },
        // More than 32 items of VB tiles per channel, and not a multiple of 32 (50 with VB = 4
        // for F(2×2), 50 of one tile for F(4×4)): a warp's tiles are spread over its lanes.
        Shape { n: 2, c: 4, h: 20, w: 20, k: 6 },
    ] {
        let case = Conv2d::random(shape, (shape.h * 31 + shape.w) as u64);
        let va = if shape.c % 4 == 0 { 4 } else { 1 };
        let mut variants = Vec::new();
        for &tile in tiles {
            let vb = if winograd::tiles(shape, tile) % 4 == 0 { 4 } else { 1 };
            let of_tile = |v: WinogradVariant| WinogradVariant { tile, ..v };
            variants.extend(
                [
                    variant(32, 32, 16, 4, 4, 1, vb),
                    variant(32, 32, 16, 4, 4, va, vb),
                    variant(64, 32, 16, 8, 4, va, vb),
                    WinogradVariant {
                        gemm: GemmVariant { warp: 1, frag: 1, ..variant(32, 64, 8, 4, 8, va, vb).gemm },
                        tile,
                    },
                    // The big tiles a GPU picks: 8x8 per invocation, subgroup layout or fragments.
                    WinogradVariant { gemm: GemmVariant { va, vb, ..GemmVariant::BIG }, tile },
                    WinogradVariant {
                        gemm: GemmVariant {
                            frag: 1,
                            store_always: 1,
                            ..variant(128, 64, 8, 8, 8, va, vb).gemm
                        },
                        tile,
                    },
                ]
                .map(of_tile),
            );
            if vb == 4 {
                // The scalar paths also run where vectors could.
                variants.push(of_tile(variant(32, 32, 16, 4, 4, 1, 1)));
            }
        }
        for v in variants {
            assert!(v.fits(&backend.info().limits, shape), "{v} fits {shape:?}");
            let verdict = verdict_of(&backend, &case, &v.spec());
            assert!(verdict.passed(), "{} with {v}: {verdict}", case.describe());
        }
    }
}

#[test]
fn the_tolerance_catches_a_winograd_variant_that_drops_one_tap() {
    // A kernel whose weight transform ignores the centre tap must fail: the bound is tight
    // enough to see one missing term of a few channels.
    let backend = backend();
    let shape = Shape { n: 1, c: 4, h: 5, w: 5, k: 3 };
    let case = Conv2d::random(shape, 5);
    let good = variant(32, 32, 16, 4, 4, 4, 1);
    assert!(verdict_of(&backend, &case, &good.spec()).passed());
    let mut broken = good.spec();
    let sparkle::KernelSource::Glsl(source) = &mut broken.sources[0] else { panic!("a GLSL source") };
    let centre = "float g1 = w[base + 3u + uint(j)];";
    assert!(source.contains(centre));
    *source = source.replace(centre, "float g1 = j == 1 ? 0.0 : w[base + 3u + uint(j)];");
    let verdict = verdict_of(&backend, &case, &broken);
    assert!(!verdict.passed(), "a conv2d without its centre tap passed: {verdict}");

    // F(4×4): its looser bound (larger transform coefficients) still sees the missing tap.
    let good = f4(good);
    assert!(verdict_of(&backend, &case, &good.spec()).passed());
    let mut broken = good.spec();
    let sparkle::KernelSource::Glsl(source) = &mut broken.sources[0] else { panic!("a GLSL source") };
    let column = "g_of(w[base + uint(j)], w[base + 3u + uint(j)], w[base + 6u + uint(j)], gg[j]);";
    assert!(source.contains(column));
    *source = source.replace(
        column,
        "g_of(w[base + uint(j)], j == 1 ? 0.0 : w[base + 3u + uint(j)], w[base + 6u + uint(j)], gg[j]);",
    );
    let verdict = verdict_of(&backend, &case, &broken);
    assert!(!verdict.passed(), "an F(4×4) conv2d without its centre tap passed: {verdict}");
}

#[test]
fn the_tuner_offers_winograd_and_a_stored_winograd_choice_is_selected_again() {
    let dir = tempfile::tempdir().unwrap();
    let config = CacheConfig { dir: Some(dir.path().to_path_buf()), ..CacheConfig::memory_only() };
    let shape = Shape { n: 1, c: 4, h: 6, w: 6, k: 8 };
    let case = Conv2d::random(shape, 11);
    let first = Runtime::open_backend("gl", &config).unwrap();
    let variants = suite::variants_for(&first, &case);
    let implicit = variants.iter().filter(|(l, _)| !l.starts_with("winograd")).count();
    let offered: Vec<&(String, KernelSpec)> =
        variants.iter().filter(|(l, _)| l.starts_with("winograd f4x4 ")).collect();
    let f2 = variants.iter().filter(|(l, _)| l.starts_with("winograd f2x2 ")).count();
    assert!(
        implicit > 0 && f2 > 0 && !offered.is_empty(),
        "{:?}",
        variants.iter().map(|v| &v.0).collect::<Vec<_>>()
    );
    // The default stays the implicit GEMM.
    assert!(WinogradVariant::from_spec(&case.default_spec(first.info())).is_none());

    // Check a few Winograd variants (timing them all is too slow on llvmpipe) and store one as
    // a tuned choice, as `sparkle tune` would.
    let winograd_only: Vec<(String, KernelSpec)> = offered.iter().take(2).map(|&v| v.clone()).collect();
    let mut timings = Vec::new();
    for (label, spec) in &winograd_only {
        let program = first.program(spec).unwrap();
        let verdict = suite::run_and_verify(&first, &program, &case).unwrap();
        assert!(verdict.passed(), "{label}: {verdict}");
        timings.push(label.clone());
    }
    let choice = tuning::Choice { variant: timings[0].clone(), ms: 1.0, timer: "wall".into(), candidates: 2 };
    tuning::Tuning::store(&first, &tuning::key(&case), choice).unwrap();
    drop(first);

    let second = Runtime::open_backend("gl", &config).unwrap();
    let spec = suite::chosen_spec(&second, &case);
    let chosen = WinogradVariant::from_spec(&spec).expect("the stored Winograd choice is selected");
    assert_eq!(chosen.to_string(), timings[0]);
    let program = second.program(&spec).unwrap();
    let verdict = suite::run_and_verify(&second, &program, &case).unwrap();
    assert!(verdict.passed(), "{verdict}");
}

#[test]
fn winograd_buffers_are_made_only_for_a_winograd_variant() {
    let backend = backend();
    let case = Conv2d::random(Shape { n: 1, c: 3, h: 5, w: 7, k: 2 }, 4);
    let implicit = backend.program(&case.default_spec(backend.info())).unwrap();
    let winograd = backend.program(&variant(32, 32, 16, 4, 4, 4, 4).spec()).unwrap();
    assert_eq!(case.upload_for(&backend, &implicit).unwrap().len(), 4, "input, weights, bias, output");
    assert_eq!(case.upload_for(&backend, &winograd).unwrap().len(), 7, "plus Winograd's three");
    assert_eq!(case.upload(&backend).unwrap().len(), 7, "every variant's buffers, for the tuner");

    let lean = case.upload_for(&backend, &implicit).unwrap();
    let mut commands = backend.commands();
    let err = case.record(&mut commands, &winograd, &lean).unwrap_err();
    assert!(err.to_string().contains("upload_for"), "{err}");

    // F(4×4)'s intermediate buffers are smaller than F(2×2)'s here: an F(2×2) program over them
    // is refused before anything runs, and the buffers made for any variant serve both.
    let larger = backend.program(&f4(variant(32, 32, 16, 4, 4, 1, 1)).spec()).unwrap();
    let small = case.upload_for(&backend, &larger).unwrap();
    let err = case.record(&mut backend.commands(), &winograd, &small).unwrap_err();
    assert!(err.to_string().contains("bytes for its"), "{err}");
    assert!(suite::run_and_verify(&backend, &larger, &case).unwrap().passed());
    let any = case.upload(&backend).unwrap();
    for program in [&winograd, &larger] {
        case.record(&mut backend.commands(), program, &any).unwrap();
    }
}
