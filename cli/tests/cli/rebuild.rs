//! `sparkle cache rebuild` after a driver update, on the simulated GPU: a "driver update" is a
//! new compiler identity (`SPARKLE_CLANG` names a script of this test's whose `--version` names
//! another build; the suite's kernels are prebuilt code objects, so it compiles nothing). A run
//! with the first driver, the rebuild with the second, then a run with the second loads its
//! program from disk; `cache stats` shows what was rebuilt.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

#[path = "../../../tests/support/fake_compiler.rs"]
mod fake_compiler;

/// Runs `sparkle args` on the simulator with the compiler `build`, caching in `cache`.
fn sparkle(tools: &Path, cache: &Path, build: &str, args: &[&str]) -> Output {
    let script = fake_compiler::script(tools, build);
    Command::new(env!("CARGO_BIN_EXE_sparkle"))
        .args(args)
        .env("SPARKLE_BACKEND", "amdgpu-sim")
        .env("SPARKLE_CACHE_DIR", cache)
        .env("SPARKLE_CLANG", &script)
        .env("SPARKLE_LLD", "/bin/false")
        .env_remove("SPARKLE_CACHE_REMOTE")
        .env_remove("SPARKLE_CACHE_REBUILD")
        .output()
        .unwrap()
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

#[test]
fn after_rebuild_the_new_driver_loads_from_disk_and_stats_show_it() {
    let tools = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let run = |build: &str| sparkle(tools.path(), cache.path(), build, &["run", "saxpy", "1024"]);

    let a = run("driver-a");
    assert!(a.status.success() && text(&a).contains("(compiled)"), "{}", text(&a));

    let rebuild = sparkle(tools.path(), cache.path(), "driver-b", &["cache", "rebuild"]);
    let out = text(&rebuild);
    assert!(rebuild.status.success(), "{out}");
    assert!(out.contains("[1/1] saxpy (") && out.contains("): rebuilt"), "progress: {out}");
    assert!(out.contains("rebuilt 1 of 1 programs from amdgpu-sim-"), "{out}");

    let c = run("driver-b");
    assert!(c.status.success() && text(&c).contains("(loaded from the disk cache)"), "{}", text(&c));

    let stats = sparkle(tools.path(), cache.path(), "driver-b", &["cache", "stats", "--json"]);
    assert!(stats.status.success(), "{}", text(&stats));
    let json: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    let rebuilt: Vec<&serde_json::Value> =
        json.as_object().unwrap().values().filter_map(|gpu| gpu.get("rebuilt")).collect();
    assert_eq!(rebuilt.len(), 1, "{json}");
    assert_eq!(
        (&rebuilt[0]["rebuilt"], &rebuilt[0]["failed"], &rebuilt[0]["refused"]),
        (&1.into(), &0.into(), &0.into())
    );
    let table = sparkle(tools.path(), cache.path(), "driver-b", &["cache", "stats"]);
    assert!(text(&table).contains("Rebuilt after a driver update"), "{}", text(&table));

    // Nothing left to do: a second rebuild finds the program there.
    let again = sparkle(tools.path(), cache.path(), "driver-b", &["cache", "rebuild", "--json"]);
    assert!(again.status.success(), "{}", text(&again));
    let report: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!((&report["rebuilt"], &report["present"]), (&0.into(), &1.into()), "{report}");
}

#[test]
fn rebuild_fails_with_nothing_to_rebuild_or_a_bad_from() {
    let tools = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let nothing = sparkle(tools.path(), cache.path(), "driver-b", &["cache", "rebuild"]);
    assert_eq!(nothing.status.code(), Some(1), "{}", text(&nothing));
    assert!(
        text(&nothing).contains("no GPU folder of this device under another driver"),
        "{}",
        text(&nothing)
    );
    let bad = sparkle(
        tools.path(),
        cache.path(),
        "driver-b",
        &["cache", "rebuild", "--from", "gl-0123456789abcdef"],
    );
    assert_eq!(bad.status.code(), Some(1), "{}", text(&bad));
    assert!(text(&bad).contains("--from gl-0123456789abcdef"), "{}", text(&bad));
}

#[test]
fn a_damaged_recipe_fails_the_rebuild_without_compiling_from_it() {
    let tools = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let a = sparkle(tools.path(), cache.path(), "driver-a", &["run", "saxpy", "1024"]);
    assert!(a.status.success(), "{}", text(&a));
    let recipes: Vec<_> = fs::read_dir(cache.path())
        .unwrap()
        .map(|gpu| gpu.unwrap().path().join("recipes"))
        .filter(|dir| dir.is_dir())
        .flat_map(|dir| fs::read_dir(dir).unwrap().map(|f| f.unwrap().path()))
        .collect();
    assert_eq!(recipes.len(), 1, "{recipes:?}");
    let mut bytes = fs::read(&recipes[0]).unwrap();
    let last = bytes.len() - 3;
    bytes[last] ^= 0x20;
    fs::write(&recipes[0], bytes).unwrap();

    let rebuild = sparkle(tools.path(), cache.path(), "driver-b", &["cache", "rebuild"]);
    let out = text(&rebuild);
    assert_eq!(rebuild.status.code(), Some(1), "{out}");
    assert!(out.contains("recipe refused, not compiled: payload checksum mismatch"), "{out}");
    assert!(out.contains("rebuilt 0 of 1 programs"), "{out}");
    // The new driver's run compiles it, as without a rebuild.
    let c = sparkle(tools.path(), cache.path(), "driver-b", &["run", "saxpy", "1024"]);
    assert!(c.status.success() && text(&c).contains("(compiled)"), "{}", text(&c));
}
