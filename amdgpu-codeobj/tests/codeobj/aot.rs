//! The committed ahead-of-time code objects (`shaders/aot/`): every suite kernel exists for every
//! AOT target, was built from the source as it is now (no compiler needed to check that), is the
//! blob the manifest describes, and parses into a kernel the backend accepts for its target.

use std::path::Path;

use sparkle_amdgpu_codeobj::aot::{self, Manifest, AOT_TARGETS, SUITE};
use sparkle_amdgpu_codeobj::codeobj::{CodeObject, RunLimits};

/// The repository root (the `sparkle` package), where `shaders/` lies.
fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

#[test]
fn every_suite_kernel_is_built_for_every_target() {
    let manifest = Manifest::load(root()).unwrap();
    for kernel in SUITE {
        for &target in AOT_TARGETS {
            let entry = manifest.entry(kernel.name, target).unwrap_or_else(|| {
                panic!("no {target} blob for {}: run `cargo run -p sparkle-tools --bin aot`", kernel.name)
            });
            assert_eq!(entry.source, format!("shaders/{}", kernel.file));
            assert_eq!(entry.blob, aot::blob_path(kernel.name, target));
            let defines: Vec<(String, String)> =
                kernel.defines.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            assert_eq!(entry.defines, defines, "{} {target}", kernel.name);
            assert!(entry.flags.contains(&format!("-mcpu={target}")), "{:?}", entry.flags);
            assert!(entry.compiler.contains("clang version 22"), "{}", entry.compiler);
        }
    }
    assert_eq!(manifest.entries.len(), SUITE.len() * AOT_TARGETS.len());
}

#[test]
fn committed_blobs_match_their_sources() {
    let manifest = Manifest::load(root()).unwrap();
    let stale: Vec<String> = manifest
        .entries
        .iter()
        .filter_map(|entry| entry.check_source(root()).err().map(|e| e.to_string()))
        .collect();
    assert!(stale.is_empty(), "stale AOT blobs:\n{}", stale.join("\n"));
}

#[test]
fn committed_blobs_parse_and_are_runnable_on_their_target() {
    let manifest = Manifest::load(root()).unwrap();
    for entry in &manifest.entries {
        let blob = entry.read_blob(root()).unwrap();
        let co = CodeObject::parse(&blob).unwrap_or_else(|e| panic!("{}: {e}", entry.blob));
        assert_eq!(co.target().name(), entry.target, "{}", entry.blob);
        let names: Vec<&str> = co.kernels().iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, [entry.kernel.as_str()], "{}", entry.blob);
        let (kernel, layout) = co
            .check_runnable(&entry.kernel, &RunLimits::backend_default(co.target()))
            .unwrap_or_else(|e| panic!("{}: {e}", entry.blob));
        assert_eq!(layout.size(), kernel.metadata.kernarg_segment_size);
        assert_eq!(co.image().relocation_count(), 0, "{}", entry.blob);
    }
}

#[test]
fn a_changed_source_is_detected() {
    let manifest = Manifest::load(root()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let entry = &manifest.entries[0];
    let copy = dir.path().join(&entry.source);
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    let mut source = std::fs::read_to_string(root().join(&entry.source)).unwrap();
    std::fs::write(&copy, &source).unwrap();
    entry.check_source(dir.path()).unwrap();
    source.push_str("\n// edited\n");
    std::fs::write(&copy, &source).unwrap();
    let err = entry.check_source(dir.path()).unwrap_err().to_string();
    assert!(err.contains("cargo run -p sparkle-tools --bin aot"), "{err}");
}
