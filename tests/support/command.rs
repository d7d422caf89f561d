//! The workspace's commands run as users run them on the gl backend, with the program cache in a
//! test's folder, and their output read as one text. Included with `#[path]` by the test binaries
//! of the `sparkle` command (sparkle-cli) and of the benchmark lab (sparkle-bench); each passes
//! its own binary (`env!("CARGO_BIN_EXE_…")`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `binary args` on the gl backend with its program cache in `cache`, and `env` on top.
pub fn on_gl(binary: &str, args: &[&str], cache: &Path, env: &[(&str, &str)]) -> Output {
    Command::new(binary)
        .args(args)
        .env("SPARKLE_CACHE_DIR", cache)
        .env("SPARKLE_BACKEND", "gl")
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("{binary} does not run: {e}"))
}

/// Standard output followed by standard error.
pub fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// Runs `binary args` on gl with `cache` as its cache dir, a private HOME (where a driver's
/// default cache would go), no driver variable inherited (`gl_support::DRIVER_VARS`, which
/// the including binary declares), and `env` on top.
#[cfg(feature = "gl")]
pub fn with_own_driver_cache(
    binary: &str,
    args: &[&str],
    cache: &Path,
    home: &Path,
    env: &[(&str, &str)],
) -> Output {
    let mut command = Command::new(binary);
    command.args(args).env("SPARKLE_BACKEND", "gl").env("SPARKLE_CACHE_DIR", cache).env("HOME", home);
    for var in crate::gl_support::DRIVER_VARS {
        command.env_remove(var);
    }
    command.envs(env.iter().copied());
    command.output().unwrap_or_else(|e| panic!("{binary} does not run: {e}"))
}

/// Regular files under `dir`, at any depth.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            let file_type = entry.file_type().unwrap();
            if file_type.is_dir() {
                out.extend(files_under(&path));
            } else if file_type.is_file() {
                out.push(path);
            }
        }
    }
    out
}
