//! `sparkle info`: every backend of this build (opened once each), the selected device, its GPU
//! id, the cache dir, the remote cache and statistics. Exits 1 when the selected backend cannot
//! open, or when a remote cache is configured that cannot be used (the configuration rule: a
//! program runs on its local tiers then, and says so once; `info` is where it shows). The
//! remote's URL is shown without its password.
//!
//! `sparkle info --timings` opens only the selected backend, as a program's `Runtime::from_env`
//! does, and prints how long that took and what each step cost.

use std::process::ExitCode;
use std::time::Instant;

use serde::Serialize;
use sparkle::cache::{CacheConfig, CacheStats};
use sparkle::runtime::BACKENDS;
use sparkle::{BackendChoice, DeviceInfo, Runtime};

use super::CliResult;

#[derive(Serialize)]
struct Info {
    backends: Vec<BackendStatus>,
    selected: Option<DeviceInfo>,
    selection_error: Option<String>,
    cache_dir: Option<String>,
    device_cache_dir: Option<String>,
    /// The remote cache's URL (without its password), when one is configured.
    remote: Option<String>,
    /// Why the configured remote cache is not used, when it is not.
    remote_problem: Option<String>,
    stats: Option<CacheStats>,
}

#[derive(Serialize)]
struct BackendStatus {
    backend: &'static str,
    summary: &'static str,
    available: bool,
    detail: String,
}

pub fn run(json: bool) -> CliResult<ExitCode> {
    let config = CacheConfig::from_env()?;
    let choice = BackendChoice::from_env()?;
    // Each backend is opened once; the selected one is reused, not opened again.
    let opened: Vec<(&'static str, sparkle::Result<Runtime>)> =
        BACKENDS.iter().map(|entry| (entry.name, Runtime::open_backend(entry.name, &config))).collect();
    let selected = match choice {
        BackendChoice::Only(name) => opened.iter().find(|(n, _)| *n == name).map(|(_, r)| r.clone()),
        BackendChoice::Auto => opened
            .iter()
            .zip(BACKENDS)
            .find(|((_, r), entry)| entry.in_auto && r.is_ok())
            .map(|((_, r), _)| r.clone())
            .or_else(|| Some(Runtime::open(BackendChoice::Auto, &config))),
    }
    .unwrap_or_else(|| Runtime::open(choice, &config));
    let backends = opened
        .iter()
        .zip(BACKENDS)
        .map(|((name, result), entry)| BackendStatus {
            backend: name,
            summary: entry.summary,
            available: result.is_ok(),
            detail: match result {
                Ok(runtime) => runtime.info().name.clone(),
                Err(err) => err.to_string(),
            },
        })
        .collect();
    let info = Info {
        backends,
        selected: selected.as_ref().ok().map(|r| r.info().clone()),
        selection_error: selected.as_ref().err().map(ToString::to_string),
        cache_dir: config.dir.as_ref().map(|d| d.display().to_string()),
        device_cache_dir: selected
            .as_ref()
            .ok()
            .and_then(Runtime::cache_dir)
            .map(|d| d.display().to_string()),
        remote: config.remote.as_ref().map(|remote| remote.redacted_url()),
        remote_problem: config.remote_problem.clone().or_else(|| {
            // Problems found when the tier opened (a key file, an endpoint, no trust chosen).
            let opened = selected.as_ref().ok().map(Runtime::cache_stats);
            opened.and_then(|stats| stats.remote_problem)
        }),
        stats: selected.as_ref().ok().map(Runtime::cache_stats),
    };
    let code =
        if selected.is_ok() && info.remote_problem.is_none() { ExitCode::SUCCESS } else { ExitCode::from(1) };
    if json {
        println!("{}", serde_json::to_string_pretty(&info)?);
        return Ok(code);
    }
    println!("Backends:");
    for status in &info.backends {
        let mark = if status.available { "available" } else { "unavailable" };
        println!("  {:<10} {mark}: {}", status.backend, status.detail);
        println!("  {:<10} ({})", "", status.summary);
    }
    match (&info.selected, &info.selection_error) {
        (Some(device), _) => {
            println!("\nSelected ({}): {}", device.backend, device.name);
            for (name, value) in &device.details {
                println!("  {name}: {value}");
            }
            let l = &device.limits;
            println!(
                "  limits: workgroup {:?} (≤ {} invocations), groups {:?}, shared memory {} B, buffers ≤ {} B, \
                 texel buffers {}",
                l.max_workgroup_size,
                l.max_workgroup_invocations,
                l.max_workgroup_count,
                l.max_shared_memory_bytes,
                l.max_storage_buffer_bytes,
                match l.max_texel_buffer_texels {
                    0 => "none".to_owned(),
                    texels => format!("≤ {texels} texels"),
                }
            );
            println!("\nGPU id {}:", device.gpu_id);
            for (name, value) in device.gpu_id.fields() {
                println!("  {name}: {value}");
            }
        }
        (None, Some(err)) => println!("\nSelected: none ({err})"),
        (None, None) => {}
    }
    println!("\nCache dir: {}", info.cache_dir.as_deref().unwrap_or("none (memory only)"));
    println!("Device cache dir: {}", info.device_cache_dir.as_deref().unwrap_or("none (memory only)"));
    match (&info.remote, &info.remote_problem) {
        (_, Some(problem)) => println!("Remote cache: not used: {problem}"),
        (Some(url), None) => println!("Remote cache: {url}"),
        (None, None) => println!("Remote cache: none (SPARKLE_CACHE_REMOTE is not set)"),
    }
    if let Some(stats) = &info.stats {
        println!("\nCache statistics (this process):\n{stats}");
    }
    Ok(code)
}

#[derive(Serialize)]
struct Timings {
    backend: &'static str,
    device: String,
    /// `Runtime::from_env`, from its call to its return (ms).
    open_ms: f64,
    /// From this command's start to the open's return (ms).
    since_start_ms: f64,
    phases: Vec<Phase>,
}

#[derive(Serialize)]
struct Phase {
    name: String,
    thread: String,
    start_ms: f64,
    ms: f64,
}

fn ms(duration: std::time::Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// `sparkle info --timings`.
pub fn timings(json: bool) -> CliResult<ExitCode> {
    let started = Instant::now();
    let runtime = Runtime::from_env()?;
    let since_start = started.elapsed();
    let open = runtime.open_timings();
    let report = Timings {
        backend: runtime.info().backend,
        device: runtime.info().name.clone(),
        open_ms: ms(open.total),
        since_start_ms: ms(since_start),
        phases: open
            .phases
            .iter()
            .map(|phase| Phase {
                name: match &phase.detail {
                    Some(detail) => format!("{} ({detail})", phase.name),
                    None => phase.name.to_string(),
                },
                thread: phase.thread.clone(),
                start_ms: ms(phase.start),
                ms: ms(phase.duration),
            })
            .collect(),
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("Runtime::from_env on {} ({}): {:.1} ms", report.device, report.backend, report.open_ms);
    println!("  (from this command's start: {:.1} ms)", report.since_start_ms);
    let rows: Vec<Vec<String>> = report
        .phases
        .iter()
        .map(|phase| {
            vec![
                format!("{:.1}", phase.start_ms),
                format!("{:.2}", phase.ms),
                phase.thread.clone(),
                phase.name.clone(),
            ]
        })
        .collect();
    println!("{}", crate::table::render(&["at ms", "took ms", "thread", "step"], &rows));
    Ok(ExitCode::SUCCESS)
}
