//! The `sparkle` command as users run it, in fresh processes: exit codes, `info`, `run`, `tune`,
//! `chart`, `cache …` and the fleet cache from the command line, the GL driver's cache placed by
//! the command, and the backends it selects. One test binary; a module per area. The library's
//! own tests are in the workspace's `tests/`, the lab's commands in `bench/tests/`.

use std::path::Path;
use std::process::Output;

#[path = "../../../tests/support/cache/mod.rs"]
mod cache_support;
#[path = "../../../tests/support/command.rs"]
mod command;
#[cfg(feature = "gl")]
#[path = "../../../tests/support/cache/faults.rs"]
mod faults;
#[cfg(feature = "gl")]
#[path = "../../../tests/support/gl.rs"]
mod gl_support;
#[cfg(all(feature = "gl", feature = "remote"))]
#[path = "../../../tests/support/remote/mod.rs"]
mod remote_support;
#[path = "../../../tests/support/shared_driver_cache.rs"]
mod shared_driver_cache;

#[cfg(feature = "amdgpu")]
mod amdgpu;
mod cache;
mod chart;
#[cfg(feature = "gl")]
mod driver_cache;
#[cfg(all(feature = "gl", feature = "remote"))]
mod fleet;
#[cfg(feature = "gl")]
mod general;
#[cfg(feature = "gl")]
mod gl_cache;
#[cfg(all(feature = "gl", feature = "amdgpu-sim"))]
mod placement;
#[cfg(feature = "amdgpu-sim")]
mod rebuild;
#[cfg(feature = "amdgpu-sim")]
mod sim;
#[cfg(feature = "gl")]
mod trace;
#[cfg(feature = "gl")]
mod tune;

/// Runs `sparkle args` on the gl backend with its program cache in `cache`.
fn sparkle(args: &[&str], cache: &Path) -> Output {
    command::on_gl(env!("CARGO_BIN_EXE_sparkle"), args, cache, &[])
}
