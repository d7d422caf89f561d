//! The cache folder as an attack surface: a GPU folder that everyone may write or that another
//! user owns is never loaded from (memory-only, one warning), and no kernel name or source can
//! make the cache read or write outside its folder. (Private 0700 folders, foreign entries and
//! links leading out are covered by `cache_permissions.rs` and `cache_symlinks.rs`; the amdgpu
//! memory permissions by `amdgpu_memory.rs`.)

mod cache_support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use cache_support::{capture, gpu, is_root, Counts, Source};
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

/// Every path under `root` is `<gpu folder>/<2 hex>/<32 hex>` or a file the cache keeps beside
/// them; nothing else was created anywhere.
fn only_cache_files(root: &Path) -> usize {
    let mut entries = 0;
    for gpu in std::fs::read_dir(root).unwrap().flatten() {
        assert!(gpu.file_type().unwrap().is_dir(), "{:?}", gpu.path());
        for item in std::fs::read_dir(gpu.path()).unwrap().flatten() {
            let name = item.file_name().into_string().unwrap();
            if item.file_type().unwrap().is_file() {
                assert!(name.ends_with(".txt") || name.ends_with(".json"), "{name}");
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

#[cfg(feature = "gl")]
#[test]
fn no_kernel_name_or_source_leads_outside_the_cache_folder() {
    use sparkle::{Access, KernelSpec, Runtime};
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("cache");
    let runtime = Runtime::open_backend("gl", &CacheConfig::in_dir(&root)).expect("a GL context");
    let long = "k".repeat(100_000);
    let names = [
        "../../../../../../tmp/escaped",
        "/etc/passwd",
        "a\0b",
        "..",
        ".",
        "",
        long.as_str(),
        "ünïcödé/名前/😀",
        "name with spaces\nand a newline",
        "%s%n%x",
    ];
    let mut accepted = 0;
    for (index, name) in names.iter().enumerate() {
        let spec = KernelSpec::new(*name, [64, 1, 1])
            .glsl(format!(
                "// {name} ../../outside\nlayout(std430, binding = 0) buffer B {{ float v[]; }};\n\
                 void main() {{ v[gl_GlobalInvocationID.x] = {index}.0; }}"
            ))
            .storage("v", Access::ReadWrite);
        match runtime.program(&spec) {
            Ok(_) => accepted += 1,
            Err(err) => {
                let text = err.to_string();
                assert!(!text.is_empty());
            }
        }
    }
    let entries = only_cache_files(&root);
    assert_eq!(entries, accepted, "one entry per accepted kernel, each at its hashed path");
    let outside: Vec<_> = std::fs::read_dir(outer.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(outside, vec![std::ffi::OsString::from("cache")], "files appeared beside the cache folder");
    assert!(!Path::new("/tmp/escaped").exists());
    eprintln!("{accepted} of {} hostile names accepted, all entries at hashed paths", names.len());
}
