//! `sparkle info`.

use std::process::ExitCode;

use serde::Serialize;
use sparkle::backend::{BackendChoice, BackendKind};
use sparkle::cache::{CacheConfig, CacheStats};
use sparkle::DeviceInfo;

use super::CliResult;

#[derive(Serialize)]
struct Info {
    backends: Vec<BackendStatus>,
    selected: Option<DeviceInfo>,
    cache_dir: Option<String>,
    device_cache_dir: Option<String>,
    stats: Option<CacheStats>,
}

#[derive(Serialize)]
struct BackendStatus {
    backend: BackendKind,
    available: bool,
    detail: String,
}

pub fn run(json: bool) -> CliResult<ExitCode> {
    let config = CacheConfig::from_env()?;
    let backends = BackendKind::ALL
        .iter()
        .map(|&kind| match sparkle::open(BackendChoice::Only(kind)) {
            Ok(backend) => {
                BackendStatus { backend: kind, available: true, detail: backend.info().name.clone() }
            }
            Err(err) => BackendStatus { backend: kind, available: false, detail: err.to_string() },
        })
        .collect();
    let selected = sparkle::open_from_env();
    let info = Info {
        backends,
        selected: selected.as_ref().ok().map(|b| b.info().clone()),
        cache_dir: config.dir.as_ref().map(|d| d.display().to_string()),
        device_cache_dir: selected.as_ref().ok().and_then(|b| b.cache_dir()).map(|d| d.display().to_string()),
        stats: selected.as_ref().ok().map(|b| b.cache_stats()),
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&info)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("Backends:");
    for status in &info.backends {
        let mark = if status.available { "available" } else { "unavailable" };
        println!("  {:<8} {mark}: {}", status.backend.name(), status.detail);
    }
    match (&selected, &info.selected) {
        (Ok(_), Some(device)) => {
            println!("\nSelected ({}): {}", device.backend, device.name);
            for (name, value) in &device.details {
                println!("  {name}: {value}");
            }
            let l = &device.limits;
            println!(
                "  limits: workgroup {:?} (≤ {} invocations), groups {:?}, shared memory {} B",
                l.max_workgroup_size,
                l.max_workgroup_invocations,
                l.max_workgroup_count,
                l.max_shared_memory_bytes
            );
            println!("\nGPU id {}:", device.gpu_id);
            for (name, value) in device.gpu_id.fields() {
                println!("  {name}: {value}");
            }
        }
        (Err(err), _) => println!("\nSelected: none ({err})"),
        _ => {}
    }
    println!("\nCache dir: {}", info.cache_dir.as_deref().unwrap_or("none (memory only)"));
    println!("Device cache dir: {}", info.device_cache_dir.as_deref().unwrap_or("none (memory only)"));
    if let Some(stats) = &info.stats {
        println!("\nCache statistics (this process):\n{stats}");
    }
    Ok(ExitCode::SUCCESS)
}
