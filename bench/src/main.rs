//! The benchmark lab of Sparkle: the suite's time to first result and throughput against its
//! peers, the gl backend's overheads against a plain GL loop, transfers, the conv2d pipeline and
//! the fleet cache. Its figures go to BENCHMARKS.md; its raw files to `bench/measurements/`.
//! It is not part of what Sparkle ships: the library is `sparkle`, the command `sparkle`.

mod backends;
mod bench;
#[cfg(feature = "remote")]
mod bench_fleet;
#[cfg(feature = "remote")]
mod bench_fleet_together;
#[cfg(feature = "remote")]
#[allow(dead_code)] // The fleet tests use the modes and accessors the benchmark does not.
mod fault_proxy;
mod gpu_warm;
mod host_memory;
mod overhead;
mod pipeline;
mod placement;
mod plain_gl;
mod progress;
mod startup;
mod timeline;
mod transfer;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sparkle_cli::{problem_set, CliResult};

#[derive(Parser)]
#[command(
    name = "sparkle-bench",
    version,
    about = "Sparkle's benchmarks: the suite, overheads, transfers, pipelines, the fleet"
)]
#[command(after_help = "Exit codes: 0 success, 1 failure, 2 usage error, 3 wrong result.\n\
Run from the repository root: the peers' scripts are bench/scripts/*.py (or SPARKLE_PEERS_SCRIPT, \
SPARKLE_OVERHEAD_PEERS_SCRIPT). The environment of `sparkle --help` applies.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Time to first correct result with empty vs warm caches, and per-kernel throughput.
    Bench {
        #[arg(long)]
        json: bool,
        /// Repetitions of each cache scenario (the median is reported).
        #[arg(long, default_value_t = 3)]
        repeats: usize,
        /// Also run PyTorch (cuBLAS/cuDNN) at the same sizes on the same GPU, through
        /// `python3 bench/scripts/peers.py` (or SPARKLE_PEERS_SCRIPT), and print the ratios.
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
    /// A mixed stream of problem sizes on each device alone and on a placement over them all:
    /// the placement's choice per shape and the totals.
    BenchPlacement(placement::Options),
    /// Draws a trace (SPARKLE_TRACE, --trace) as an SVG timeline: a row per thread and GPU
    /// track, spans by category, flows as lines.
    Timeline(timeline::Options),
    /// What a process pays to start, from its `main`: the open (against a plain EGL open), the
    /// suite's first results, and N = 1, 100, 1,000 distinct kernels cold, warm and from a warm
    /// fleet, in fresh processes.
    BenchStartup(startup::Options),
    /// Where cold program builds can run at once in one process: N distinct kernels one by one,
    /// with the driver's parallel compile, and on K independent contexts (one thread each, the
    /// binaries loaded back on the first). Run it with the driver's disk cache off.
    BenchCompileContexts {
        /// Programs per configuration.
        #[arg(long, default_value_t = 96)]
        kernels: usize,
        /// Numbers of independent contexts to try.
        #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
        contexts: Vec<usize>,
    },
    /// One measured process of `bench-startup`.
    #[command(name = "startup-child", hide = true)]
    StartupChild {
        /// `sparkle` or `plain-egl`.
        #[arg(long, default_value = "sparkle")]
        mode: String,
        #[arg(long, default_value_t = 0)]
        kernels: usize,
        #[arg(long)]
        one_by_one: bool,
    },
    /// One measured run of the suite in a fresh process; used by `bench`.
    #[command(name = "bench-child", hide = true)]
    BenchChild {
        /// Keep programs in memory only (the driver's own cache may still work).
        #[arg(long)]
        no_cache: bool,
    },
}

fn main() -> ExitCode {
    startup::mark_main();
    sparkle_cli::die_quietly_on_closed_pipe();
    sparkle_cli::init_logging();
    sparkle_cli::exit_code(run())
}

fn run() -> CliResult<ExitCode> {
    progress::start_clock();
    match Cli::parse().command {
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
        Command::BenchPipeline(options) => pipeline::run(options),
        Command::BenchOverhead(options) => overhead::run(options),
        #[cfg(feature = "remote")]
        Command::BenchFleet(options) => bench_fleet::run(options),
        Command::BenchTransfer(options) => transfer::run(options),
        Command::BenchPlacement(options) => placement::run(options),
        Command::Timeline(options) => timeline::run(options),
        Command::BenchChild { no_cache } => bench::child(no_cache),
        Command::BenchStartup(options) => startup::run(options),
        Command::BenchCompileContexts { kernels, contexts } => {
            let report = plain_gl::compile_contexts::run(kernels, &contexts, &startup::generated_glsl)?;
            print!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        Command::StartupChild { mode, kernels, one_by_one } => startup::child(&mode, kernels, one_by_one),
    }
}
