//! The `sparkle` command run as users run it on the gl backend, with its cache in a test's
//! folder, and its output read as one text. Included with `#[path]` by the CLI tests of the gl
//! backend.

use std::path::Path;
use std::process::{Command, Output};

/// Runs `sparkle args` on the gl backend with its program cache in `cache`.
pub fn sparkle(args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sparkle"))
        .args(args)
        .env("SPARKLE_CACHE_DIR", cache)
        .env("SPARKLE_BACKEND", "gl")
        .output()
        .expect("the sparkle binary runs")
}

/// Standard output followed by standard error.
pub fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}
