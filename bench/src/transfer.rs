//! `sparkle-bench bench-transfer`: how fast bytes move between host memory and a device buffer, at
//! sizes from 4 KiB to 256 MiB, each way Sparkle offers — plain buffers (`Runtime::write_buffer`,
//! `Runtime::read_buffer` from and to ordinary host memory) and staging buffers
//! (`BufferUsage::Staging`, host-visible memory the driver keeps pinned: a device copy between
//! it and the device buffer, submitted and waited for) — next to PyTorch's pageable and pinned
//! copies on the same GPU when `--peers` is given. Plain compares with pageable, staging with
//! pinned; staging with the host's copy into or out of the staging buffer is shown too.
//!
//! Every figure is wall-clock time around the whole operation, on both sides: an upload counts
//! until a fence behind it signalled (PyTorch: `copy_` then `torch.cuda.synchronize()`), a
//! read-back until the bytes are in host memory (staging: in the staging buffer). Host memory is
//! allocated and touched once before timing, on both sides. Every read-back is checked against
//! what was uploaded. A GPU is kept busy for 0.6 s before the first size, as the peer's is.
//! `--study` adds what the driver makes of plain GL ways to do the same (`plain_gl/study.rs`).

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sparkle::cache::CacheConfig;
use sparkle::{Buffer, BufferUsage, Runtime};

use crate::gpu_warm::warm_gpu;
use sparkle_cli::{table, CliResult, UsageError, WRONG_RESULT};

/// Sizes measured by default on a GPU.
const GPU_SIZES: [usize; 9] =
    [4 << 10, 64 << 10, 1 << 20, 2 << 20, 4 << 20, 16 << 20, 64 << 20, 128 << 20, 256 << 20];

/// Sizes measured by default on a CPU renderer.
const CPU_SIZES: [usize; 5] = [4 << 10, 64 << 10, 1 << 20, 2 << 20, 16 << 20];

const TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Sizes in bytes (repeat for several; default 4 KiB to 256 MiB on a GPU).
    #[arg(long = "size")]
    pub sizes: Vec<usize>,
    /// Also run PyTorch's pageable and pinned copies (bench/scripts/overhead_peers.py, python3).
    #[arg(long)]
    pub peers: bool,
    /// Also print the plain-GL study of the driver's transfer and fence costs.
    #[arg(long)]
    pub study: bool,
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON report to this file.
    #[arg(long)]
    pub json_out: Option<std::path::PathBuf>,
}

/// One size: GB/s of the median of each way.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TransferRow {
    pub bytes: usize,
    pub plain_up_gbps: f64,
    pub plain_down_gbps: f64,
    pub staged_up_gbps: f64,
    pub staged_down_gbps: f64,
    /// Staging including the host's copy into (out of) the staging buffer.
    pub staged_host_up_gbps: f64,
    pub staged_host_down_gbps: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<PeerRow>,
}

/// PyTorch's copies at one size (the peers script's row).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerRow {
    pub bytes: usize,
    pub pageable_up_gbps: f64,
    pub pageable_down_gbps: f64,
    pub pinned_up_gbps: f64,
    pub pinned_down_gbps: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct PeerReport {
    device: String,
    torch: String,
    rows: Vec<PeerRow>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TransferReport {
    pub device: String,
    pub rows: Vec<TransferRow>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub study: Option<String>,
    pub correct: bool,
    pub mismatches: Vec<String>,
}

pub fn run(options: Options) -> CliResult<ExitCode> {
    let runtime = Runtime::open(sparkle::runtime::BackendChoice::from_env()?, &CacheConfig::from_env()?)?;
    let gpu = runtime.info().class == sparkle::DeviceClass::Gpu;
    let sizes = if options.sizes.is_empty() {
        if gpu {
            GPU_SIZES.to_vec()
        } else {
            CPU_SIZES.to_vec()
        }
    } else {
        options.sizes.clone()
    };
    let limit = runtime.info().limits.max_storage_buffer_bytes;
    if let Some(&bad) = sizes.iter().find(|&&s| s == 0 || s as u64 > limit) {
        return Err(UsageError(format!("--size {bad}: give 1 to {limit} bytes")).into());
    }
    let mut report = measure(&runtime, &sizes)?;
    if options.peers {
        let peers = run_peers(&sizes)?;
        report.peer_device = Some(format!("{} (PyTorch {})", peers.device, peers.torch));
        for (row, peer) in report.rows.iter_mut().zip(peers.rows) {
            row.peer = Some(peer);
        }
    }
    if options.study {
        report.study = Some(study(&runtime, &options.sizes)?);
    }
    if let Some(path) = &options.json_out {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .map_err(|err| format!("cannot write the JSON report to {}: {err}", path.display()))?;
    }
    if options.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(if report.correct { ExitCode::SUCCESS } else { ExitCode::from(WRONG_RESULT) })
}

/// The plain-GL study at `sizes` (the GPU's or CPU renderer's default list where none are given).
fn study(runtime: &Runtime, sizes: &[usize]) -> CliResult<String> {
    if runtime.backend() != "gl" {
        return Err(UsageError("--study looks at the GL driver: run it on the gl backend".into()).into());
    }
    let baseline = crate::plain_gl::Baseline::open()?;
    let variant = sparkle::suite::saxpy::SaxpyVariant::SAFE;
    let kernel = crate::plain_gl::BaselineKernel { spec: variant.spec(), groups: variant.groups(1024) };
    let inputs = crate::plain_gl::SaxpyInputs {
        a: 2.0,
        x: (1..=1024).map(|i| i as f32).collect(),
        y: vec![0.0; 1024],
    };
    let gpu = runtime.info().class == sparkle::DeviceClass::Gpu;
    let sizes: &[usize] = match sizes {
        [] if gpu => &GPU_SIZES,
        [] => &CPU_SIZES,
        given => given,
    };
    // On a GPU, kernels of about 0.7 ms beside a 16 MiB copy (about 0.33 ms on an H100); a CPU
    // renderer gets a small version that only shows the study runs.
    // One saxpy launch of about the copy's length beside copies made by kernels (64M floats:
    // 0.27 ms on an H100).
    let (floats, launches, copy_bytes, reps, step_floats) =
        if gpu { (8 << 20, 16, 16 << 20, 15, 64 << 20) } else { (1 << 16, 2, 1 << 20, 3, 1 << 18) };
    let overlap = crate::plain_gl::OverlapPlan {
        floats,
        groups: variant.groups(floats),
        launches,
        copy_bytes,
        reps,
        step_floats,
        step_groups: variant.groups(step_floats),
    };
    Ok(crate::plain_gl::study::run(&baseline, &kernel, &inputs, sizes, &overlap)?)
}

fn reps(size: usize) -> usize {
    match size {
        0..=1_048_576 => 20,
        1_048_577..=16_777_216 => 8,
        _ => 3,
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn gbps(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / time.as_secs_f64() / 1e9
}

/// Every size, every way.
pub fn measure(runtime: &Runtime, sizes: &[usize]) -> CliResult<TransferReport> {
    // The peer warms its GPU before it times anything; so does this side, or the first sizes
    // would pay for a clock and link still rising.
    warm_gpu(runtime)?;
    let mut rows = Vec::new();
    let mut mismatches = Vec::new();
    let scratch =
        [runtime.create_buffer(4, BufferUsage::InOut)?, runtime.create_buffer(4, BufferUsage::InOut)?];
    for &size in sizes {
        let device = runtime.create_buffer(size as u64, BufferUsage::InOut)?;
        let staging = runtime.create_buffer(size as u64, BufferUsage::Staging)?;
        // Touched before timing, on both sides: no page faults in the timed copies.
        let host: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let mut back = vec![0u8; size];
        let mut check = |what: &str, back: &mut Vec<u8>| {
            if back != &host {
                mismatches.push(format!("{what} of {size} bytes read back other bytes"));
            }
            back.fill(0);
        };
        let time = |f: &mut dyn FnMut() -> sparkle::Result<()>| -> sparkle::Result<Duration> {
            f()?;
            let mut times = Vec::new();
            for _ in 0..reps(size) {
                let started = Instant::now();
                f()?;
                times.push(started.elapsed());
            }
            Ok(median(times))
        };
        let plain_up = time(&mut || {
            runtime.write_buffer(&device, 0, &host)?;
            fence(runtime, &scratch)
        })?;
        let plain_down = time(&mut || runtime.read_buffer(&device, 0, &mut back))?;
        check("a plain read-back", &mut back);
        let staged_host_up = time(&mut || {
            runtime.write_buffer(&staging, 0, &host)?;
            copy(runtime, &staging, &device, size)
        })?;
        let staged_up = time(&mut || copy(runtime, &staging, &device, size))?;
        runtime.read_buffer(&device, 0, &mut back)?;
        check("a plain read-back after a staged upload", &mut back);
        let staged_host_down = time(&mut || {
            copy(runtime, &device, &staging, size)?;
            runtime.read_buffer(&staging, 0, &mut back)
        })?;
        check("a staged read-back", &mut back);
        let staged_down = time(&mut || copy(runtime, &device, &staging, size))?;
        runtime.read_buffer(&staging, 0, &mut back)?;
        check("a staged read-back", &mut back);
        rows.push(TransferRow {
            bytes: size,
            plain_up_gbps: gbps(size, plain_up),
            plain_down_gbps: gbps(size, plain_down),
            staged_up_gbps: gbps(size, staged_up),
            staged_down_gbps: gbps(size, staged_down),
            staged_host_up_gbps: gbps(size, staged_host_up),
            staged_host_down_gbps: gbps(size, staged_host_down),
            peer: None,
        });
    }
    Ok(TransferReport {
        device: runtime.info().name.clone(),
        rows,
        peer_device: None,
        study: None,
        correct: mismatches.is_empty(),
        mismatches,
    })
}

/// Waits until every device command before it (an upload among them) has completed: a
/// four-byte copy between two scratch buffers, submitted and waited for.
fn fence(runtime: &Runtime, scratch: &[Buffer; 2]) -> sparkle::Result<()> {
    copy(runtime, &scratch[0], &scratch[1], 4)
}

/// A device copy of `size` bytes, submitted and waited for.
fn copy(runtime: &Runtime, src: &Buffer, dst: &Buffer, size: usize) -> sparkle::Result<()> {
    let mut commands = runtime.commands();
    commands.copy(src, 0, dst, 0, size as u64)?;
    runtime.submit(commands)?.wait(TIMEOUT)
}

fn run_peers(sizes: &[usize]) -> CliResult<PeerReport> {
    let output = peers_script(&["transfers".to_owned()], sizes.iter().map(|s| s.to_string()))?;
    Ok(serde_json::from_slice(&output)
        .map_err(|err| format!("the peers script printed no report ({err})"))?)
}

/// Runs `bench/scripts/overhead_peers.py` (or `SPARKLE_OVERHEAD_PEERS_SCRIPT`) with `args`; its stdout.
pub fn peers_script(first: &[String], rest: impl Iterator<Item = String>) -> CliResult<Vec<u8>> {
    let script = std::env::var_os("SPARKLE_OVERHEAD_PEERS_SCRIPT").map_or_else(
        || std::path::PathBuf::from("bench/scripts/overhead_peers.py"),
        std::path::PathBuf::from,
    );
    if !script.exists() {
        return Err(format!(
            "the peers script {} is not there; run from the repository root or set SPARKLE_OVERHEAD_PEERS_SCRIPT",
            script.display()
        )
        .into());
    }
    let output = Command::new("python3")
        .arg(&script)
        .args(first)
        .args(rest)
        .output()
        .map_err(|err| format!("cannot run python3 for the peers: {err}"))?;
    if !output.status.success() {
        return Err(format!(
            "the peers script failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )
        .into());
    }
    Ok(output.stdout)
}

fn size_name(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

pub fn render(report: &TransferReport) -> String {
    let mut out = format!(
        "Transfers on {} (GB/s of the median wall time; an upload counts until a fence behind it signalled;\n\
         staged: a device copy from or to a staging buffer; +host copy: with the host's copy into or out of it)\n",
        report.device
    );
    if let Some(peer) = &report.peer_device {
        out.push_str(&format!("PyTorch on {peer}: copy_ then torch.cuda.synchronize(), wall time\n"));
    }
    let peer = |row: &TransferRow, pick: fn(&PeerRow) -> f64| {
        row.peer.as_ref().map_or_else(|| "-".to_owned(), |p| format!("{:.2}", pick(p)))
    };
    let rows: Vec<Vec<String>> = report
        .rows
        .iter()
        .map(|r| {
            vec![
                size_name(r.bytes),
                format!("{:.2}", r.plain_up_gbps),
                peer(r, |p| p.pageable_up_gbps),
                format!("{:.2}", r.staged_up_gbps),
                peer(r, |p| p.pinned_up_gbps),
                format!("{:.2}", r.staged_host_up_gbps),
                format!("{:.2}", r.plain_down_gbps),
                peer(r, |p| p.pageable_down_gbps),
                format!("{:.2}", r.staged_down_gbps),
                peer(r, |p| p.pinned_down_gbps),
                format!("{:.2}", r.staged_host_down_gbps),
            ]
        })
        .collect();
    out.push_str(&table::render(
        &[
            "size",
            "up plain",
            "torch pageable",
            "up staged",
            "torch pinned",
            "+host copy",
            "down plain",
            "torch pageable",
            "down staged",
            "torch pinned",
            "+host copy",
        ],
        &rows,
    ));
    if let Some(study) = &report.study {
        out.push_str("\nPlain GL on the same device (the study):\n");
        out.push_str(study);
    }
    out.push_str(&format!("correct: {}\n", if report.correct { "yes" } else { "NO" }));
    for m in &report.mismatches {
        out.push_str(&format!("  {m}\n"));
    }
    out
}
