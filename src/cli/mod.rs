//! Command-line parsing and the dispatch to each subcommand.

mod backends;
mod bench;
#[cfg(feature = "remote")]
mod bench_fleet;
mod cache;
mod chart;
#[cfg(feature = "remote")]
#[allow(dead_code)] // The fleet tests use the modes and accessors the benchmark does not.
mod fault_proxy;
#[cfg(feature = "remote")]
mod fleet;
mod gpu_warm;
mod host_memory;
mod info;
mod overhead;
mod pipeline;
mod plain_gl;
mod progress;
mod run;
mod table;
mod transfer;
mod tune;

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
SPARKLE_SPIN_US, SPARKLE_LOG (or RUST_LOG)")]
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
        /// saxpy: N · sgemm: M [N [K]] · conv2d: N [C [H [W [K [window [stride]]]]]].
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
        /// Also run PyTorch (cuBLAS/cuDNN) at the same sizes on the same GPU, through
        /// `python3 scripts/peers.py` (or SPARKLE_PEERS_SCRIPT), and print the ratios.
        #[arg(long)]
        peers: bool,
        /// Small problem sizes (for CPU renderers).
        #[arg(long)]
        quick: bool,
        /// Skip the fresh-process startup scenarios; throughput only.
        #[arg(long)]
        no_startup: bool,
        /// Also write the JSON report to this file.
        #[arg(long)]
        json_out: Option<std::path::PathBuf>,
        /// Backends side by side, a comma list of SPARKLE_BACKEND names (e.g. gl,amdgpu-sim);
        /// default: the one SPARKLE_BACKEND picks. Startup runs and peers use the first.
        #[arg(long)]
        backends: Option<String>,
        /// Also measure the gl backend's overheads against a plain glow loop (bench-overhead).
        #[arg(long)]
        overheads: bool,
        /// Also draw the chart (SVG) of startup and throughput to this file.
        #[arg(long)]
        chart: Option<std::path::PathBuf>,
        /// Time the shapes beyond the published targets (non-square and ragged GEMMs, conv2d
        /// 1×1, stride 2, channels not a multiple of 4) instead of the targets' sizes.
        #[arg(long)]
        shapes: bool,
        /// Then the fleet scenarios of `bench-fleet` (a fresh machine with a warm remote at 0, 20
        /// and 200 ms, a dead remote), with the same number of repetitions.
        #[cfg(feature = "remote")]
        #[arg(long)]
        fleet: bool,
    },
    /// Draws the chart (SVG) of a saved `sparkle bench --json-out` report, without measuring.
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
        #[arg(long, value_parser = pipeline::parse_transfers)]
        transfers: Option<sparkle::suite::conv2d::Transfers>,
        #[arg(long)]
        json: bool,
    },
    /// What the gl backend costs over a plain glow loop making the same GL calls: per dispatch,
    /// dispatch → result round trip, program switch. Results are checked against the CPU.
    BenchOverhead(overhead::Options),
    /// conv2d over a stream of batches: synchronous vs pipelined, with each stage alone.
    BenchPipeline(pipeline::Options),
    /// The fleet cache on a fresh machine: fresh processes with an empty local cache and a
    /// warm remote (Redis) at added latencies, against cold and warm, and a dead remote.
    #[cfg(feature = "remote")]
    BenchFleet(bench_fleet::Options),
    /// Upload and read-back speed, 4 KiB to 256 MiB, plain and staging buffers (PyTorch's
    /// pageable and pinned copies beside them with --peers).
    BenchTransfer(transfer::Options),
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

pub fn init_logging() {
    let sparkle_log = std::env::var("SPARKLE_LOG").ok();
    let rust_log = std::env::var("RUST_LOG").ok();
    let (filter, complaint) = choose_log_filter(sparkle_log.as_deref(), rust_log.as_deref());
    if let Some(complaint) = complaint {
        eprintln!("{complaint}");
    }
    let filter = tracing_subscriber::EnvFilter::try_new(&filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colours_wanted(
            std::io::IsTerminal::is_terminal(&std::io::stderr()),
            std::env::var_os("NO_COLOR"),
        ))
        .init();
}

/// Colours in the log only on a terminal, and not when `NO_COLOR` is set to anything
/// (no-color.org): a piped or logged stderr must not carry escape codes.
fn colours_wanted(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|value| value.is_empty())
}

/// What is logged when nothing (or nothing usable) says otherwise: warnings never go unseen.
const DEFAULT_LOG_FILTER: &str = "warn";

/// The log filter from `SPARKLE_LOG`, else `RUST_LOG` (empty counts as unset), else `warn`. An
/// unparsable value is replaced by `warn`, with the one line to show the user saying why.
fn choose_log_filter(sparkle_log: Option<&str>, rust_log: Option<&str>) -> (String, Option<String>) {
    let chosen = [("SPARKLE_LOG", sparkle_log), ("RUST_LOG", rust_log)]
        .into_iter()
        .find_map(|(name, value)| Some((name, value?.trim())).filter(|(_, v)| !v.is_empty()));
    let Some((name, value)) = chosen else { return (DEFAULT_LOG_FILTER.to_owned(), None) };
    match tracing_subscriber::EnvFilter::try_new(value) {
        Ok(_) => (value.to_owned(), None),
        Err(err) => (
            DEFAULT_LOG_FILTER.to_owned(),
            Some(format!(
                "sparkle: {name}={value:?} is not a valid log filter ({err}); logging warnings and errors \
                 only. For example SPARKLE_LOG=sparkle=debug"
            )),
        ),
    }
}

fn problem_set(shapes: bool) -> sparkle::suite::ProblemSet {
    if shapes {
        sparkle::suite::ProblemSet::Shapes
    } else {
        sparkle::suite::ProblemSet::Targets
    }
}

pub fn run() -> CliResult<ExitCode> {
    progress::start_clock();
    let matches = Cli::command().version(version_text()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|err| err.exit());
    match cli.command {
        Command::Info { json } => info::run(json),
        Command::Run { kernel, sizes, seed } => run::run(&kernel, &sizes, seed),
        Command::Bench {
            json,
            repeats,
            peers,
            quick,
            no_startup,
            json_out,
            backends,
            overheads,
            chart,
            shapes,
            #[cfg(feature = "remote")]
            fleet,
        } => {
            let code = bench::run(bench::Options {
                json,
                repeats: repeats.max(1),
                peers,
                quick,
                startup: !no_startup,
                json_out,
                backends: backends.as_deref().map(backends::parse).transpose()?.unwrap_or_default(),
                overheads,
                chart,
                set: problem_set(shapes),
            })?;
            #[cfg(feature = "remote")]
            if fleet {
                let fleet_code = bench_fleet::run(bench_fleet::Options::with_repeats(repeats.max(1), json))?;
                if code == ExitCode::SUCCESS {
                    return Ok(fleet_code);
                }
            }
            Ok(code)
        }
        Command::Chart { report, out } => chart::from_file(&report, &out),
        Command::Tune { kernel, sizes, force, quick, shapes, transfers, json } => {
            tune::run(kernel.as_deref(), &sizes, force, quick, json, problem_set(shapes), transfers)
        }
        Command::BenchPipeline(options) => pipeline::run(options),
        Command::BenchOverhead(options) => overhead::run(options),
        #[cfg(feature = "remote")]
        Command::BenchFleet(options) => bench_fleet::run(options),
        Command::BenchTransfer(options) => transfer::run(options),
        Command::Cache { action } => cache::run(action),
        Command::BenchChild { no_cache } => bench::child(no_cache),
    }
}

/// Milliseconds with three decimals, for tables.
pub fn ms(duration: std::time::Duration) -> String {
    format!("{:.3}", duration.as_secs_f64() * 1e3)
}

#[cfg(test)]
mod log_filter_tests {
    use super::{choose_log_filter, colours_wanted};

    #[test]
    fn colours_only_on_a_terminal_without_no_color() {
        assert!(colours_wanted(true, None));
        assert!(!colours_wanted(false, None));
        assert!(!colours_wanted(true, Some("1".into())));
        assert!(colours_wanted(true, Some("".into())), "an empty NO_COLOR counts as unset");
    }

    #[test]
    fn unset_or_empty_means_warn() {
        assert_eq!(choose_log_filter(None, None), ("warn".to_owned(), None));
        assert_eq!(choose_log_filter(Some(""), None), ("warn".to_owned(), None));
        assert_eq!(choose_log_filter(Some("  "), Some("")), ("warn".to_owned(), None));
    }

    #[test]
    fn sparkle_log_wins_over_rust_log() {
        assert_eq!(choose_log_filter(Some("sparkle=debug"), Some("info")).0, "sparkle=debug");
        assert_eq!(choose_log_filter(None, Some("info")).0, "info");
        assert_eq!(choose_log_filter(Some(""), Some("info")).0, "info", "empty counts as unset");
    }

    #[test]
    fn an_unparsable_filter_falls_back_to_warn_and_says_why() {
        for bad in ["sparkle=loud", "[unclosed"] {
            let (filter, complaint) = choose_log_filter(Some(bad), Some("debug"));
            assert_eq!(filter, "warn", "{bad}");
            let complaint = complaint.unwrap_or_else(|| panic!("no complaint for {bad:?}"));
            assert!(complaint.contains("SPARKLE_LOG") && complaint.contains(bad), "{complaint}");
            assert!(complaint.contains("SPARKLE_LOG=sparkle=debug"), "{complaint}");
            assert_eq!(complaint.lines().count(), 1, "{complaint}");
        }
        let (filter, complaint) = choose_log_filter(None, Some("sparkle=loud"));
        assert_eq!(filter, "warn");
        assert!(complaint.is_some_and(|c| c.contains("RUST_LOG")));
    }
}
