//! One GL driver shader cache for every process of a test run. Mesa's llvmpipe spends most of
//! a GL test's time in LLVM, compiling shaders, and many tests and the processes they start
//! compile the same programs (the suite's kernels, the tuner's variants). Mesa keeps compiled
//! shaders in its own cache (`MESA_SHADER_CACHE_DIR`), but each process's first runtime points
//! that cache into its own test's cache folder, which is removed when that test ends: every later
//! compile of the process, and every process a test starts, began cold.
//!
//! So each test binary that includes this file points Mesa's cache, before `main`, at one folder
//! of the build's target folder (`CARGO_TARGET_TMPDIR`), where the processes it starts find it
//! too, by inheritance. This changes only how fast the driver finishes a compile: Sparkle's own
//! program cache, whose compiles, hits and files the tests count, stays in each test's folder, and
//! the driver still compiles every program it has not compiled before in this run. Tests of where
//! the driver's cache goes run their processes without the driver variables
//! (`gl_support::DRIVER_VARS`). A variable the user set (or a switched-off cache) is left alone.
//! Included with `#[path]` by the test binaries that run GL work.

#![allow(dead_code)]

/// Mesa's variable for its cache folder.
const MESA_DIR: &str = "MESA_SHADER_CACHE_DIR";

/// Every variable that, when set, means someone already chose where (or whether) the driver
/// caches: then nothing is changed.
const CHOSEN: &[&str] =
    &[MESA_DIR, "MESA_GLSL_CACHE_DIR", "MESA_SHADER_CACHE_DISABLE", "MESA_GLSL_CACHE_DISABLE"];

/// The folder every process of the run shares.
pub fn folder() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("driver-shader-cache")
}

/// Points Mesa's shader cache at [`folder`] unless a driver cache variable is already set.
pub fn share() {
    if CHOSEN.iter().any(|var| std::env::var_os(var).is_some()) {
        return;
    }
    // Mesa creates the folder; a folder it cannot create only means compiling as before.
    std::env::set_var(MESA_DIR, folder());
}

/// Takes the shared folder back from a process `command` will start, when this binary set it:
/// that process places the driver's cache itself, as any process would without the tests (for
/// the tests of what travels with a cache folder, such as the fleet tier's driver archive).
pub fn own_driver_cache(command: &mut std::process::Command) -> &mut std::process::Command {
    if std::env::var_os(MESA_DIR).is_some_and(|value| value == folder().as_os_str()) {
        command.env_remove(MESA_DIR);
    }
    command
}

/// Runs [`share`] when the test binary starts, before `main` and so before any test thread
/// exists: setting a variable is only sound while no other thread reads the environment.
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static SHARE_AT_START: extern "C" fn() = {
    extern "C" fn share_at_start() {
        share();
    }
    share_at_start
};
