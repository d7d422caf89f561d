//! The GL driver's shader cache inside Sparkle's cache dir, in fresh processes of the `sparkle`
//! command (drivers read its location once per process): with no driver variable set it lands
//! in `<cache dir>/drivers/gl` (Mesa's llvmpipe writes `mesa_shader_cache/` there, NVIDIA
//! `GLCache/`), what the user set or switched off is left alone, a read-only cache touches
//! nothing, variables inherited from a Sparkle process are not taken for the user's, and
//! `sparkle cache verify` / `clear` treat the folder as part of the cache. (A cache that is off,
//! in `sparkle-bench bench-child --no-cache`: the lab's `child` tests; a second runtime in one
//! process keeping the first one's choice: the library's `gl::driver_cache`.)

use std::path::Path;
use std::process::Output;

use crate::command::{files_under, text, with_own_driver_cache};

/// Runs `sparkle` on gl with `cache` as its cache dir, a private HOME (where a driver's default
/// cache would go), no driver variable inherited, and `env` on top.
fn sparkle(args: &[&str], cache: &Path, home: &Path, env: &[(&str, &str)]) -> Output {
    with_own_driver_cache(env!("CARGO_BIN_EXE_sparkle"), args, cache, home, env)
}

/// `sparkle info --json`'s `driver shader cache` line and GL version.
fn info(cache: &Path, home: &Path, env: &[(&str, &str)]) -> (String, String) {
    let output = sparkle(&["info", "--json"], cache, home, env);
    assert!(output.status.success(), "{}", text(&output));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let details = json["selected"]["details"].as_array().unwrap();
    let detail = |name: &str| {
        details
            .iter()
            .find(|pair| pair[0] == name)
            .and_then(|pair| pair[1].as_str())
            .unwrap_or_else(|| panic!("no {name} in {details:?}"))
            .to_owned()
    };
    (detail("driver shader cache"), detail("GL version"))
}

/// Runs one kernel (a compile, so the driver writes its cache) and checks its result.
fn run_saxpy(cache: &Path, home: &Path, env: &[(&str, &str)]) {
    let output = sparkle(&["run", "saxpy", "1000"], cache, home, env);
    assert!(text(&output).contains("result: correct"), "{}", text(&output));
}

/// The folder the driver's own cache writes into under `dir`, for the driver in use.
fn driver_subfolder(gl_version: &str) -> Option<&'static str> {
    if gl_version.contains("Mesa") {
        Some("mesa_shader_cache")
    } else if gl_version.contains("NVIDIA") {
        Some("GLCache")
    } else {
        None
    }
}

#[test]
fn with_no_variable_set_the_drivers_files_land_in_the_cache_dir_and_clear_removes_them() {
    let tmp = tempfile::tempdir().unwrap();
    let (cache, home) = (tmp.path().join("cache"), tmp.path().join("home"));
    std::fs::create_dir(&home).unwrap();
    let inside = std::fs::canonicalize(tmp.path()).unwrap().join("cache").join("drivers").join("gl");

    let (placement, version) = info(&cache, &home, &[]);
    assert!(placement.contains(&inside.display().to_string()), "{placement}");
    assert!(placement.contains("chosen by Sparkle"), "{placement}");

    run_saxpy(&cache, &home, &[]);
    let written = files_under(&inside);
    match driver_subfolder(&version) {
        Some(subfolder) => {
            assert!(
                written.iter().any(|f| f.starts_with(inside.join(subfolder))),
                "no driver file in {}: {written:?}",
                inside.display()
            );
        }
        None => eprintln!("driver {version}: its files are not known; only the placement was checked"),
    }
    assert!(files_under(&home).is_empty(), "the driver's default folder was used: {:?}", files_under(&home));

    let verify = sparkle(&["cache", "verify"], &cache, &home, &[]);
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify));
    assert!(text(&verify).contains("1 driver cache folder(s)"), "{}", text(&verify));
    let stats = sparkle(&["cache", "stats"], &cache, &home, &[]);
    assert!(text(&stats).contains("drivers/gl"), "{}", text(&stats));

    let clear = sparkle(&["cache", "clear"], &cache, &home, &[]);
    assert_eq!(clear.status.code(), Some(0), "{}", text(&clear));
    assert!(text(&clear).contains("1 driver cache folder(s)"), "{}", text(&clear));
    assert!(!cache.join("drivers").exists(), "{:?}", files_under(&cache));
    assert!(files_under(&cache).is_empty(), "{:?}", files_under(&cache));
}

#[test]
fn what_the_user_set_or_switched_off_is_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let (cache, home, mine) = (tmp.path().join("cache"), tmp.path().join("home"), tmp.path().join("mine"));
    std::fs::create_dir(&home).unwrap();
    std::fs::create_dir(&mine).unwrap();
    let mine_text = mine.to_str().unwrap();
    let user = [("MESA_SHADER_CACHE_DIR", mine_text), ("__GL_SHADER_DISK_CACHE_PATH", mine_text)];

    let (placement, version) = info(&cache, &home, &user);
    assert!(placement.contains(mine_text) && placement.contains("chosen by the user"), "{placement}");
    run_saxpy(&cache, &home, &user);
    if let Some(subfolder) = driver_subfolder(&version) {
        assert!(mine.join(subfolder).exists(), "{:?}", files_under(&mine));
    }
    assert!(!cache.join("drivers").exists(), "{:?}", files_under(&cache));

    // One driver's variable set by the user leaves the other driver's to Sparkle.
    let (placement, _) = info(&cache, &home, &[("__GL_SHADER_DISK_CACHE_PATH", mine_text)]);
    if version.contains("Mesa") {
        assert!(placement.contains("chosen by Sparkle through MESA_SHADER_CACHE_DIR"), "{placement}");
    } else if version.contains("NVIDIA") {
        assert!(placement.contains("chosen by the user"), "{placement}");
    }

    let off = [("MESA_SHADER_CACHE_DISABLE", "true"), ("__GL_SHADER_DISK_CACHE", "0")];
    let other_cache = tmp.path().join("other");
    let (placement, _) = info(&other_cache, &home, &off);
    assert!(placement.starts_with("off (the user set"), "{placement}");
    run_saxpy(&other_cache, &home, &off);
    assert!(!other_cache.join("drivers").exists(), "{:?}", files_under(&other_cache));
}

#[test]
fn a_read_only_cache_touches_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (cache, home) = (tmp.path().join("cache"), tmp.path().join("home"));
    std::fs::create_dir(&home).unwrap();

    std::fs::create_dir(&cache).unwrap();
    let read_only = [("SPARKLE_CACHE_READ_ONLY", "1")];
    let (placement, _) = info(&cache, &home, &read_only);
    assert!(placement.contains("default location"), "{placement}");
    run_saxpy(&cache, &home, &read_only);
    assert!(files_under(&cache).is_empty(), "{:?}", files_under(&cache));
}

#[test]
fn variables_a_sparkle_parent_set_are_not_taken_for_the_users() {
    let tmp = tempfile::tempdir().unwrap();
    let (cache, home) = (tmp.path().join("cache"), tmp.path().join("home"));
    std::fs::create_dir(&home).unwrap();
    let parent = tmp.path().join("parent").join("drivers").join("gl");
    let parent_text = parent.to_str().unwrap();
    let inherited = [
        ("MESA_SHADER_CACHE_DIR", parent_text),
        ("__GL_SHADER_DISK_CACHE_PATH", parent_text),
        ("SPARKLE_DRIVER_CACHE_SET", parent_text),
    ];
    let (placement, _) = info(&cache, &home, &inherited);
    let inside = std::fs::canonicalize(&cache).unwrap().join("drivers").join("gl");
    assert!(placement.contains("chosen by Sparkle"), "{placement}");
    assert!(placement.starts_with(&inside.display().to_string()), "{placement}");
    assert!(!parent.exists());
}
