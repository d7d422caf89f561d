//! The `sparkle` command: device info, running and tuning the suite's kernels, and cache
//! maintenance.

use std::process::ExitCode;

fn main() -> ExitCode {
    sparkle_cli::die_quietly_on_closed_pipe();
    sparkle_cli::init_logging();
    sparkle_cli::exit_code(sparkle_cli::run())
}
