//! The cache folder as an attack surface: a GPU folder that everyone may write or that another
//! user owns is never loaded from (memory-only, one warning), and no kernel name or source can
//! make the cache read or write outside its folder, on gl and on amdgpu-sim. (Private 0700 folders,
//! foreign entries and links leading out are covered by the cache tests' `permissions` and
//! `symlinks`; the permissions each kind of amdgpu buffer asks for by the unit tests in
//! `src/amdgpu/tests/memory.rs`; what the simulated GPU enforces — W^X mappings, kernels faulting
//! outside their buffers — by the simulator tests' `backend`.)

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use crate::cache_support::{self, capture, gpu, is_root, Counts, Source};
use sparkle::cache::{CacheConfig, ProgramCache};

/// Seeds `root` with entries of `sources`, then loosens the GPU folder with `loosen` and opens it
/// again: nothing may be loaded from it, and one warning must say why.
fn refused_after(root: &Path, loosen: impl FnOnce(&Path), says: &str) {
    let gpu = gpu("loosened");
    let counts = Arc::new(Counts::default());
    let sources: Vec<Source> = (0..3).map(|i| Source::new(&gpu, &format!("s{i}"), &counts)).collect();
    let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(root));
    for s in &sources {
        cache.get(&s.key, s).unwrap();
    }
    let gpu_dir = cache.gpu_dir().unwrap();
    drop(cache);
    loosen(&gpu_dir);
    let (cache, captured) = capture(|| {
        let cache = ProgramCache::open(gpu.clone(), &CacheConfig::in_dir(root));
        for s in &sources {
            let program = cache.get(&s.key, s).unwrap();
            assert_eq!(program.payload, cache_support::payload(s.key, &s.text, s.size));
        }
        cache
    });
    assert_eq!(counts.loads.load(SeqCst), 0, "an entry was loaded from an unsafe folder");
    assert_eq!(counts.compiles.load(SeqCst), 6);
    assert!(!cache.is_persistent() && !cache.is_read_only());
    let warnings = captured.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains(says) && warnings[0].contains("memory only"), "{warnings:?}");
    // Explicitly read-only use refuses it too.
    let (read_only, captured) = capture(|| {
        ProgramCache::<cache_support::Program>::open(
            gpu.clone(),
            &CacheConfig { read_only: true, ..CacheConfig::in_dir(root) },
        )
    });
    assert!(!read_only.is_read_only());
    assert_eq!(captured.warnings().len(), 1);
}

#[test]
fn a_world_writable_gpu_folder_is_not_loaded_from() {
    let dir = tempfile::tempdir().unwrap();
    refused_after(
        dir.path(),
        |gpu_dir| std::fs::set_permissions(gpu_dir, std::fs::Permissions::from_mode(0o777)).unwrap(),
        "writable by every user",
    );
}

#[test]
fn a_gpu_folder_owned_by_another_user_is_not_loaded_from() {
    if !is_root() {
        eprintln!("skipped: giving a folder to another user needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    refused_after(
        dir.path(),
        |gpu_dir| std::os::unix::fs::chown(gpu_dir, Some(54321), None).unwrap(),
        "belongs to another user",
    );
}

/// Every path under `root` is `<gpu folder>/<2 hex>/<32 hex>`, a recipe
/// `<gpu folder>/recipes/<32 hex>.recipe`, or a file the cache keeps beside them (descriptions,
/// the working set); nothing else was created anywhere.
#[cfg(any(feature = "gl", feature = "amdgpu-sim"))]
fn only_cache_files(root: &Path) -> usize {
    let mut entries = 0;
    for gpu in std::fs::read_dir(root).unwrap().flatten() {
        // The GL driver's own shader cache, which the cache keeps as an opaque folder.
        if gpu.file_name() == sparkle::cache::DRIVER_CACHES_DIR {
            continue;
        }
        assert!(gpu.file_type().unwrap().is_dir(), "{:?}", gpu.path());
        for item in std::fs::read_dir(gpu.path()).unwrap().flatten() {
            let name = item.file_name().into_string().unwrap();
            if item.file_type().unwrap().is_file() {
                assert!(
                    name.ends_with(".txt")
                        || name.ends_with(".json")
                        || name == sparkle::cache::WORKING_SET_FILE,
                    "{name}"
                );
                continue;
            }
            if name == sparkle::cache::recipe::RECIPES_DIR {
                for recipe in std::fs::read_dir(item.path()).unwrap().flatten() {
                    let recipe = recipe.file_name().into_string().unwrap();
                    let key = recipe.strip_suffix(".recipe").unwrap_or("");
                    assert!(sparkle::cache::CacheKey::from_hex(key).is_some(), "{recipe}");
                }
                continue;
            }
            assert!(name.len() == 2 && name.bytes().all(|b| b.is_ascii_hexdigit()), "{name}");
            for entry in std::fs::read_dir(item.path()).unwrap().flatten() {
                let entry_name = entry.file_name().into_string().unwrap();
                assert!(entry_name.len() == 32 && entry_name.starts_with(&name), "{entry_name}");
                entries += 1;
            }
        }
    }
    entries
}

/// Names no kernel should be able to turn into a path.
#[cfg(any(feature = "gl", feature = "amdgpu-sim"))]
fn hostile_names() -> Vec<String> {
    vec![
        "../../../../../../tmp/escaped".into(),
        "/etc/passwd".into(),
        "a\0b".into(),
        "..".into(),
        ".".into(),
        "".into(),
        "k".repeat(100_000),
        "ünïcödé/名前/😀".into(),
        "name with spaces\nand a newline".into(),
        "%s%n%x".into(),
    ]
}

/// Asks `backend` for a program of every hostile name (each with its own source, which carries
/// the name too) in a cache folder inside a fresh folder: every entry must land at its hashed
/// path and nothing may appear beside the cache folder.
#[cfg(any(feature = "gl", feature = "amdgpu-sim"))]
fn no_kernel_name_or_source_leads_outside_the_cache_folder_on(
    backend: &str,
    spec: impl Fn(&str, usize) -> sparkle::KernelSpec,
) {
    use sparkle::Runtime;
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("cache");
    let runtime = Runtime::open_backend(backend, &CacheConfig::in_dir(&root)).expect("the backend opens");
    let names = hostile_names();
    let mut accepted = 0;
    for (index, name) in names.iter().enumerate() {
        match runtime.program(&spec(name, index)) {
            Ok(_) => accepted += 1,
            Err(err) => {
                let text = err.to_string();
                assert!(!text.is_empty());
            }
        }
    }
    let entries = only_cache_files(&root);
    assert_eq!(entries, accepted, "{backend}: one entry per accepted kernel, each at its hashed path");
    let outside: Vec<_> = std::fs::read_dir(outer.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(
        outside,
        vec![std::ffi::OsString::from("cache")],
        "{backend}: files appeared beside the cache folder"
    );
    assert!(!Path::new("/tmp/escaped").exists());
    assert!(accepted > 0, "{backend}: no kernel was accepted at all, so nothing was checked");
    eprintln!("{backend}: {accepted} of {} hostile names accepted, all entries at hashed paths", names.len());
}

#[cfg(feature = "gl")]
#[test]
fn no_kernel_name_or_source_leads_outside_the_cache_folder() {
    use sparkle::{Access, KernelSpec};
    no_kernel_name_or_source_leads_outside_the_cache_folder_on("gl", |name, index| {
        KernelSpec::new(name, [64, 1, 1])
            .glsl(format!(
                "// {name} ../../outside\nlayout(std430, binding = 0) buffer B {{ float v[]; }};\n\
                 void main() {{ v[gl_GlobalInvocationID.x] = {index}.0; }}"
            ))
            .storage("v", Access::ReadWrite)
    });
}

/// The same on amdgpu-sim, whose programs are code objects compiled by clang from OpenCL C.
#[cfg(feature = "amdgpu-sim")]
#[test]
fn no_kernel_name_or_source_leads_outside_the_amdgpu_sim_cache_folder() {
    use sparkle::{Access, KernelSpec};
    no_kernel_name_or_source_leads_outside_the_cache_folder_on("amdgpu-sim", |name, index| {
        KernelSpec::new(name, [64, 1, 1])
            .opencl(
                "hostile",
                format!(
                    "// {name} ../../outside\n__kernel void hostile(__global float *v) {{ v[get_global_id(0)] = {index}.0f; }}"
                ),
            )
            .storage("v", Access::ReadWrite)
    });
}
