//! The `sparkle` command: parsing and the dispatch to each subcommand, and the pieces the
//! benchmark package (`sparkle-bench`) shares with it: the result type, the exit codes, plain
//! tables, the chart of a benchmark report and the log set-up. This crate is the command, not
//! a library to build on: that is `sparkle`.

mod cache;
pub mod chart;
#[cfg(feature = "remote")]
mod fleet;
mod info;
mod logging;
mod run;
pub mod table;
mod tune;

pub use logging::init_logging;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

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
Environment: SPARKLE_BACKEND=amdgpu|amdgpu-sim|gl|auto, SPARKLE_CACHE_DIR, SPARKLE_CACHE_MAX_SIZE, \
SPARKLE_CACHE_MAX_AGE_DAYS, SPARKLE_EGL_DEVICE, SPARKLE_GL_FENCES=thread|poll, SPARKLE_HOLD_CLOCKS=0|1, \
SPARKLE_SPIN_US, SPARKLE_TRACE=FILE (a timeline for Perfetto), SPARKLE_LOG (or RUST_LOG)")]
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
        /// Opens only the backend `SPARKLE_BACKEND` selects, as a program's `Runtime::from_env`
        /// does, and prints how long that took and its steps.
        #[arg(long)]
        timings: bool,
    },
    /// Runs one suite kernel and checks it against the CPU.
    Run {
        /// saxpy, sgemm or conv2d.
        kernel: String,
        /// saxpy: N · sgemm: M [N [K]] · conv2d: N [C [H [W [K [window [stride]]]]]].
        sizes: Vec<usize>,
        /// Seed of the random inputs.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Writes the run's timeline to FILE (Chrome trace-event JSON; open it in
        /// ui.perfetto.dev): cache lookups, compiles, transfers, submissions and GPU work.
        #[arg(long, value_name = "FILE")]
        trace: Option<std::path::PathBuf>,
        /// Runs it on the device the placement chooses among those SPARKLE_DEVICES lists
        /// (default: every real device), and prints each device's prediction, samples and the
        /// choice.
        #[arg(long)]
        explain: bool,
    },
    /// Draws the chart (SVG) of a saved `sparkle-bench bench --json-out` report, without measuring.
    Chart {
        /// The JSON report.
        report: std::path::PathBuf,
        /// The SVG to write.
        out: std::path::PathBuf,
    },
    /// Times every variant of a suite kernel for a problem on this GPU (the closest leaders and the
    /// default again, back to back) and keeps the fastest in the cache dir, unless it beats the
    /// default by less than 2%; later runs use it. Without a kernel, tunes the benchmark's
    /// problems.
    Tune {
        /// saxpy, sgemm or conv2d (all benchmark problems if omitted).
        kernel: Option<String>,
        /// saxpy: N · sgemm: M [N [K]] · conv2d: N [C [H [W [K [window [stride]]]]]].
        sizes: Vec<usize>,
        /// Tune again even if a choice is stored.
        #[arg(long)]
        force: bool,
        /// The benchmark's small problems (with no kernel given).
        #[arg(long)]
        quick: bool,
        /// The shapes of `bench --shapes` (with no kernel given).
        #[arg(long)]
        shapes: bool,
        /// conv2d N C H W K as one batch of `bench-pipeline`'s stage moved this way (staged,
        /// staged-in or mapped): the device copies included, the output where the mode puts it.
        /// The stage takes the choice for its largest batch in that mode.
        #[arg(long)]
        transfers: Option<sparkle::suite::conv2d::Transfers>,
        #[arg(long)]
        json: bool,
    },
    /// Inspects and maintains the on-disk program cache.
    Cache {
        #[command(subcommand)]
        action: cache::Action,
    },
}

/// `sparkle --version`: the version, then the backends and optional features of this build.
fn version_text() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        let backends: Vec<&str> = sparkle::runtime::BACKENDS.iter().map(|entry| entry.name).collect();
        let features: Vec<&str> = [("remote", cfg!(feature = "remote"))]
            .into_iter()
            .filter_map(|(name, on)| on.then_some(name))
            .collect();
        let features = if features.is_empty() { "none".to_owned() } else { features.join(", ") };
        format!("{} (backends: {}; features: {features})", env!("CARGO_PKG_VERSION"), backends.join(", "))
    })
}

/// The suite's problems: the published targets, or the shapes beyond them.
pub fn problem_set(shapes: bool) -> sparkle::suite::ProblemSet {
    if shapes {
        sparkle::suite::ProblemSet::Shapes
    } else {
        sparkle::suite::ProblemSet::Targets
    }
}

/// Starts writing a trace to `path` (with `--trace`); [`trace_written`] says how it went.
pub fn start_trace(path: Option<&std::path::Path>) -> Option<sparkle::trace::TraceGuard> {
    path.map(sparkle::trace::start)
}

/// Completes a trace started by [`start_trace`] and says where it went, on stderr. A trace that
/// could not be written is the library's one warning, never a failed command.
pub fn trace_written(guard: Option<sparkle::trace::TraceGuard>) {
    let Some(guard) = guard else { return };
    let summary = guard.finish();
    if summary.error.is_some() {
        return;
    }
    let dropped = match summary.dropped {
        0 => String::new(),
        dropped => format!(", {dropped} dropped: the buffer was full"),
    };
    eprintln!(
        "trace: {} ({} events{dropped}; open it in ui.perfetto.dev)",
        summary.path.display(),
        summary.events
    );
}

/// Parses the command line and runs the `sparkle` subcommand it names.
pub fn run() -> CliResult<ExitCode> {
    let matches = Cli::command().version(version_text()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|err| err.exit());
    match cli.command {
        Command::Info { json, timings: false } => info::run(json),
        Command::Info { json, timings: true } => info::timings(json),
        Command::Run { kernel, sizes, seed, trace, explain } => {
            run::run(&kernel, &sizes, seed, trace.as_deref(), explain)
        }
        Command::Chart { report, out } => chart::from_file(&report, &out),
        Command::Tune { kernel, sizes, force, quick, shapes, transfers, json } => {
            tune::run(kernel.as_deref(), &sizes, force, quick, json, problem_set(shapes), transfers)
        }
        Command::Cache { action } => cache::run(action),
    }
}

/// The exit status of a command's outcome; a failure is printed as one `error:` line first.
/// Usage errors exit with 2 (as clap does), every other failure with 1.
pub fn exit_code(outcome: CliResult<ExitCode>) -> ExitCode {
    match outcome {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err}");
            if err.is::<UsageError>() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

/// Makes a closed standard output end the process as it ends any Unix tool (`sparkle cache
/// stats | head -1`), instead of a panic in the next `print!`. Rust ignores `SIGPIPE` by default
/// so that writes fail with `EPIPE`; the command restores the default action, under which the
/// write that finds the pipe closed ends the process quietly.
pub fn die_quietly_on_closed_pipe() {
    // SAFETY: called first thing in `main`, before any thread exists; setting a signal's action
    // to the default changes no memory of this process.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// Milliseconds with three decimals, for tables.
pub fn ms(duration: std::time::Duration) -> String {
    format!("{:.3}", duration.as_secs_f64() * 1e3)
}
