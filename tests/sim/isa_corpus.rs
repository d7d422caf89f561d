//! The ISA coverage corpus (`tests/fixtures/isa_corpus`: kernels using libclc's built-in
//! surface — math in f32, f64 and f16, integer, common, geometric, relational, atomics,
//! conversions, vector loads and stores, barriers — compiled for gfx1100 and gfx1030 at -O2,
//! committed with LLVM's own disassembly; `tools/isa/build_corpus.sh` rebuilds it): for each
//! target, the simulator's decoder agrees with `llvm-objdump` on every instruction word of every
//! kernel (offset, size and mnemonic here, every operand in amdgpu-sim's `objdump_check`; gfx1030
//! code is decoded into gfx11 instructions but keeps its gfx10 names), and the opcodes the
//! interpreter cannot execute are exactly those listed in `unimplemented.txt` (gfx1100) and
//! `unimplemented-gfx1030.txt`, so that the lists only ever shrink on purpose. The integer and
//! half-precision kernels, whose opcodes were the last implemented, also run here against the CPU
//! on both targets; `isa_corpus_cpu` runs the other eight against CPU references within
//! OpenCL's error bounds.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use sparkle::amdgpu::sim::SimGpu;
use sparkle::hal::BufferUsage;
use sparkle::runtime::Arg;
use sparkle_amdgpu_codeobj::codeobj::CodeObject;
use sparkle_amdgpu_sim::isa::survey_code;

use crate::isa_corpus_support::{corpus, corpus_program, dispatch, f16_to_f32, f32_to_f16, sim, Random};

/// LLVM's spelling reduced to the decoder's: no encoding suffix, one name for dual issue.
fn normalise(mnemonic: &str) -> String {
    if mnemonic.starts_with("v_dual_") {
        return "v_dual".into();
    }
    let mut m = mnemonic;
    for suffix in ["_e64_dpp", "_e32_dpp", "_dpp", "_e64", "_e32", "_sdwa"] {
        if let Some(stripped) = m.strip_suffix(suffix) {
            m = stripped;
            break;
        }
    }
    m.to_string()
}

/// offset -> (mnemonic, size in bytes) from an `llvm-objdump -d` listing.
fn objdump(listing: &str) -> BTreeMap<u64, (String, u8)> {
    let mut out = BTreeMap::new();
    for line in listing.lines() {
        let Some((text, comment)) = line.split_once("//") else { continue };
        let Some((address, words)) = comment.trim().split_once(':') else { continue };
        let Ok(address) = u64::from_str_radix(address.trim(), 16) else { continue };
        let Some(mnemonic) = text.split_whitespace().next() else { continue };
        // The dwords, then maybe a branch target (`<kernel+0x54>`).
        let dwords =
            words.split_whitespace().take_while(|w| w.len() == 8 && u32::from_str_radix(w, 16).is_ok());
        let size = dwords.count() as u8 * 4;
        out.insert(address, (normalise(mnemonic), size));
    }
    out
}

struct Coverage {
    /// mnemonic -> (occurrences, why the interpreter cannot execute it, if it cannot)
    opcodes: BTreeMap<String, (usize, Option<String>)>,
    words: usize,
}

/// Surveys every kernel of the corpus compiled for `target` (ISA generation `gfx`).
fn survey(target: &str, gfx: sparkle_amdgpu_sim::isa::Gfx) -> Coverage {
    let dir = corpus().join(target);
    let mut coverage = Coverage { opcodes: BTreeMap::new(), words: 0 };
    let mut disagreements = Vec::new();
    let mut objects: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "co"))
        .collect();
    objects.sort();
    assert!(objects.len() >= 10, "the corpus is missing: {}", dir.display());
    for path in objects {
        let bytes = std::fs::read(&path).unwrap();
        let listing = objdump(&std::fs::read_to_string(path.with_extension("dis")).unwrap());
        let co = CodeObject::parse(&bytes).unwrap();
        for kernel in co.kernels() {
            assert!(!kernel.code_ranges.is_empty(), "{}: no function symbols", path.display());
            let wave64 = kernel.descriptor.wave_size() == 64;
            let image = co.image().unrelocated();
            for inst in survey_code(gfx, image, kernel.entry_offset, &kernel.code_ranges, wave64) {
                let (want, size) = listing.get(&inst.offset).unwrap_or_else(|| {
                    panic!("{}: llvm-objdump has no instruction at {:#x}", path.display(), inst.offset)
                });
                let got =
                    inst.mnemonic.map(str::to_string).unwrap_or_else(|| format!("<{:?}>", inst.executable));
                if (&got, inst.size) != (want, *size) {
                    let name = path.file_name().unwrap().to_string_lossy();
                    disagreements.push(format!(
                        "{name} at {:#x}: decoder {got} ({} bytes), llvm-objdump {want} ({size} bytes)",
                        inst.offset, inst.size
                    ));
                }
                coverage.words += inst.size as usize / 4;
                let entry = coverage.opcodes.entry(got).or_insert((0, None));
                entry.0 += 1;
                if let Err(why) = inst.executable {
                    entry.1.get_or_insert(why);
                }
            }
        }
    }
    assert!(
        disagreements.is_empty(),
        "{target}: {} disagreements:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
    coverage
}

/// Checks `target`'s survey against its list of unimplemented opcodes, `list` in the corpus.
fn check_coverage(target: &str, gfx: sparkle_amdgpu_sim::isa::Gfx, list: &str) {
    let coverage = survey(target, gfx);
    let missing: BTreeSet<&str> =
        coverage.opcodes.iter().filter(|(_, (_, why))| why.is_some()).map(|(m, _)| m.as_str()).collect();
    let listed_text = std::fs::read_to_string(corpus().join(list)).unwrap();
    let listed: BTreeSet<&str> =
        listed_text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    for (m, (count, why)) in &coverage.opcodes {
        eprintln!("{m:32} {count:6} {}", why.as_deref().unwrap_or("implemented"));
    }
    eprintln!(
        "corpus ({target}): {} instruction words, {} opcodes, {} implemented",
        coverage.words,
        coverage.opcodes.len(),
        coverage.opcodes.len() - missing.len()
    );
    let add: Vec<&str> = missing.difference(&listed).copied().collect();
    let remove: Vec<&str> = listed.difference(&missing).copied().collect();
    assert!(
        add.is_empty() && remove.is_empty(),
        "{target}: the opcodes the simulator cannot execute differ from tests/fixtures/isa_corpus/{list}:\n\
         add (not executable): {add:?}\nremove (now executable, or no longer in the corpus): {remove:?}"
    );
}

#[test]
fn the_decoder_agrees_with_llvm_objdump_and_the_unimplemented_opcodes_are_the_listed_ones() {
    check_coverage("gfx1100", sparkle_amdgpu_sim::isa::Gfx::Gfx11, "unimplemented.txt");
}

#[test]
fn the_gfx1030_decoder_agrees_with_llvm_objdump_and_the_unimplemented_opcodes_are_the_listed_ones() {
    check_coverage("gfx1030", sparkle_amdgpu_sim::isa::Gfx::Gfx10_3, "unimplemented-gfx1030.txt");
}

#[test]
fn the_integer_corpus_kernel_matches_the_cpu() {
    integer_kernel_matches_the_cpu(SimGpu::Gfx1100);
    integer_kernel_matches_the_cpu(SimGpu::Gfx1030);
}

fn integer_kernel_matches_the_cpu(target: SimGpu) {
    let rt = sim(target);
    let program = corpus_program(&rt, target, "integer", 64, &["x", "y", "o", "l"]);
    let n = 128usize;
    let mut random = Random(0x2545_f491);
    // Extremes for the saturating operations, 24-bit values where mad24/mul24 need them.
    let mut x: Vec<i32> = (0..n).map(|_| random.next() as i32).collect();
    let mut y: Vec<i32> = (0..n).map(|_| random.next() as i32).collect();
    x[..4].copy_from_slice(&[i32::MAX, i32::MIN, -1, 0]);
    y[..4].copy_from_slice(&[1, -1, i32::MIN, i32::MAX]);
    let xb = rt.upload(&x, BufferUsage::Input).unwrap();
    let yb = rt.upload(&y, BufferUsage::Input).unwrap();
    let ob = rt.create_buffer((n * 24 * 4) as u64, BufferUsage::Output).unwrap();
    let lb = rt.create_buffer((n * 4 * 8) as u64, BufferUsage::Output).unwrap();
    dispatch(&rt, &program, &[Arg::Buffer(&xb), Arg::Buffer(&yb), Arg::Buffer(&ob), Arg::Buffer(&lb)], 2);
    let o: Vec<i32> = rt.download(&ob).unwrap();
    let l: Vec<i64> = rt.download(&lb).unwrap();
    let s24 = |v: i32| (v << 8) >> 8;
    for i in 0..n {
        let (a, b) = (x[i], y[i] | 1);
        let (ua, ub) = (a as u32, b as u32);
        let want = [
            a.saturating_add(b),
            a.saturating_sub(b),
            ((a as i64 * b as i64) >> 32) as i32,
            s24(a).wrapping_mul(s24(b)).wrapping_add(7),
            a.leading_zeros() as i32,
            a.count_ones() as i32,
            a.rotate_left((b & 31) as u32),
            a.wrapping_abs(),
            (a as i64 - b as i64).unsigned_abs() as u32 as i32,
            ((a as i64 + b as i64) >> 1) as i32,
            ((a as i64 + b as i64 + 1) >> 1) as i32,
            a.min(b),
            a.max(b),
            a.wrapping_div(b),
            a.wrapping_rem(b),
            (ua / ub) as i32,
            (ua % ub) as i32,
            (a as i64 * b as i64 + 3).clamp(i32::MIN as i64, i32::MAX as i64) as i32,
            ((a as i16 as i32) << 16) | (b as u16 as i32),
            if a == 0 { 32 } else { a.trailing_zeros() as i32 },
            s24(a).wrapping_mul(s24(b)),
            (((ua as u64 * ub as u64) >> 32) as u32).wrapping_add(5) as i32,
            a.clamp(-5, 5),
            a.wrapping_shl((b & 31) as u32),
        ];
        for (k, w) in want.iter().enumerate() {
            // mad24/mul24 are defined for 24-bit operands only: compare them when those are.
            if matches!(k, 3 | 20) && (s24(a) != a || s24(b) != b) {
                continue;
            }
            assert_eq!(o[24 * i + k], *w, "{}: integer result {k} for ({a}, {b})", target.name());
        }
        let (la, lb) = (a as i64 * 1_000_003, b as i64);
        let wl = [
            la.wrapping_div(lb),
            la.wrapping_rem(lb),
            ((la as i128 * lb as i128) >> 64) as i64,
            la.count_ones() as i64 + lb.leading_zeros() as i64,
        ];
        assert_eq!(&l[4 * i..4 * i + 4], &wl, "{}: 64-bit integer results for ({a}, {b})", target.name());
    }
}

#[test]
fn the_half_precision_corpus_kernel_matches_the_cpu() {
    half_kernel_matches_the_cpu(SimGpu::Gfx1100);
    half_kernel_matches_the_cpu(SimGpu::Gfx1030);
}

fn half_kernel_matches_the_cpu(target: SimGpu) {
    let rt = sim(target);
    let program = corpus_program(&rt, target, "math_f16", 64, &["x", "y", "o"]);
    let n = 64usize;
    let values = [1.5f32, -2.25, 0.1, 1000.0, -0.0, 3.0e-5, 65000.0, 7.0, 0.333, -12.5, 2.0, 0.75];
    let x: Vec<u16> =
        (0..n).map(|i| f32_to_f16(values[i % values.len()] * (1.0 + i as f32 / 64.0))).collect();
    let y: Vec<u16> = (0..n).map(|i| f32_to_f16(values[(i * 5 + 3) % values.len()].abs() + 0.5)).collect();
    let xb = rt.upload(&x, BufferUsage::Input).unwrap();
    let yb = rt.upload(&y, BufferUsage::Input).unwrap();
    let ob = rt.create_buffer((n * 12 * 2) as u64, BufferUsage::Output).unwrap();
    dispatch(&rt, &program, &[Arg::Buffer(&xb), Arg::Buffer(&yb), Arg::Buffer(&ob)], 1);
    let o: Vec<u16> = rt.download(&ob).unwrap();
    for i in 0..n {
        let (a, b) = (f16_to_f32(x[i]) as f64, f16_to_f32(y[i]) as f64);
        let h = |v: f64| f32_to_f16(v as f32);
        let want = [
            h(a + b),
            h(a * b),
            h(a - b),
            h(a / b),
            h(a * b + 1.0),
            h(a.min(b)),
            h(a.max(b)),
            h(b.sqrt()),
            h(a.floor()),
            h(a.abs()),
            h(a * 2.5),
            h(if a > b { a } else { b }),
        ];
        for (k, w) in want.iter().enumerate() {
            let got = o[12 * i + k];
            // OpenCL allows half division and square root 1 ulp; the rest are exact.
            let ulps = if matches!(k, 3 | 7) { 1 } else { 0 };
            assert!(
                got.abs_diff(*w) <= ulps,
                "{}: half result {k} for ({a}, {b}): got {got:#06x}, want {w:#06x}",
                target.name()
            );
        }
    }
}
