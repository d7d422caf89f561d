//! Command-line parsing and the dispatch to each subcommand.

mod bench;
mod cache;
mod info;
mod run;
mod table;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A command's failure, shown to the user as one message.
pub type CliResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Exit code of a result that disagrees with the CPU reference. Usage errors exit with 2 (as
/// clap does), every other failure with 1.
pub const WRONG_RESULT: u8 = 3;

/// A command line that asks for something impossible; exits with 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

#[derive(Parser)]
#[command(name = "sparkle", version, about = "GPU compute that never pays for the same compile twice")]
#[command(after_help = "Exit codes: 0 success, 1 failure, 2 usage error, 3 wrong result.\n\
Environment: SPARKLE_BACKEND=gl|auto, SPARKLE_CACHE_DIR, SPARKLE_CACHE_MAX_SIZE, \
SPARKLE_CACHE_MAX_AGE_DAYS, SPARKLE_EGL_DEVICE, SPARKLE_LOG (or RUST_LOG)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Backends found, the device in use, its GPU id, the cache dir and statistics.
    Info {
        #[arg(long)]
        json: bool,
    },
    /// Runs one suite kernel and checks it against the CPU.
    Run {
        /// saxpy, sgemm or conv2d.
        kernel: String,
        /// saxpy: N · sgemm: M [N [K]] · conv2d: N [C [H [W [K]]]].
        sizes: Vec<usize>,
        /// Seed of the random inputs.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Time to first correct result with empty vs warm caches, and per-kernel throughput.
    Bench {
        #[arg(long)]
        json: bool,
        /// Repetitions of each cache scenario (the median is reported).
        #[arg(long, default_value_t = 3)]
        repeats: usize,
    },
    /// Inspects and maintains the on-disk program cache.
    Cache {
        #[command(subcommand)]
        action: cache::Action,
    },
    /// One measured run of the suite in a fresh process; used by `bench`.
    #[command(name = "bench-child", hide = true)]
    BenchChild {
        /// Keep programs in memory only (the driver's own cache may still work).
        #[arg(long)]
        no_cache: bool,
    },
}

pub fn init_logging() {
    let filter = std::env::var("SPARKLE_LOG")
        .ok()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .unwrap_or_else(|| "warn".to_owned());
    let filter = tracing_subscriber::EnvFilter::try_new(&filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
}

pub fn run() -> CliResult<ExitCode> {
    match Cli::parse().command {
        Command::Info { json } => info::run(json),
        Command::Run { kernel, sizes, seed } => run::run(&kernel, &sizes, seed),
        Command::Bench { json, repeats } => bench::run(json, repeats.max(1)),
        Command::Cache { action } => cache::run(action),
        Command::BenchChild { no_cache } => bench::child(no_cache),
    }
}

/// Milliseconds with three decimals, for tables.
pub fn ms(duration: std::time::Duration) -> String {
    format!("{:.3}", duration.as_secs_f64() * 1e3)
}
