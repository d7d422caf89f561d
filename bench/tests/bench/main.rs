//! The benchmark lab's commands as users run them, in fresh processes of `sparkle-bench` on the
//! gl backend (Mesa's llvmpipe where there is no GPU): `bench` and its peers, `bench-overhead`,
//! `bench-transfer`, `bench-pipeline`, `bench-fleet` and `bench-child`. They check the reports'
//! structure and results, never the timings. One test binary; a module per command family.

use std::path::Path;
use std::process::Output;

#[path = "../../../tests/support/command.rs"]
mod command;
#[path = "../../../tests/support/cache/faults.rs"]
mod faults;
#[path = "../../../tests/support/gl.rs"]
mod gl_support;
#[cfg(feature = "remote")]
#[path = "../../../tests/support/remote/mod.rs"]
mod remote_support;
#[path = "../../../tests/support/shared_driver_cache.rs"]
mod shared_driver_cache;

#[cfg(feature = "gl")]
mod child;
#[cfg(feature = "gl")]
mod commands;
#[cfg(all(feature = "gl", feature = "remote"))]
mod fleet;
#[cfg(feature = "gl")]
mod pipeline;
#[cfg(all(feature = "gl", feature = "amdgpu-sim"))]
mod placement;
#[cfg(feature = "gl")]
mod startup;

/// Runs `sparkle-bench args` on the gl backend with its program cache in `cache`.
fn sparkle_bench(args: &[&str], cache: &Path) -> Output {
    sparkle_bench_with(args, cache, &[])
}

/// Runs `sparkle-bench args` on the gl backend with its program cache in `cache` and `env` on
/// top.
fn sparkle_bench_with(args: &[&str], cache: &Path, env: &[(&str, &str)]) -> Output {
    command::on_gl(env!("CARGO_BIN_EXE_sparkle-bench"), args, cache, env)
}
