//! The `sparkle` command: device info, running and verifying the kernel suite, benchmarks, and
//! cache maintenance.

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
