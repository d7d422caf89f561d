//! The `sparkle` command: device info, running and verifying the kernel suite, benchmarks, and
//! cache maintenance.

// `x % n == 0` reads as well as `is_multiple_of` and was written for Rust 1.85 (is_multiple_of is 1.87);
// the package's MSRV moved to 1.88 for the Redis client only.
#![allow(clippy::manual_is_multiple_of)]
mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::init_logging();
    match cli::run() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err}");
            if err.is::<cli::UsageError>() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
