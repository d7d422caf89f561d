//! `sparkle cache stats|list|verify|prune|clear`: the on-disk cache, without opening a GPU.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;
use serde::Serialize;
use sparkle::cache::{CacheConfig, DiskStore};

use super::{table, CliResult};

#[derive(Subcommand)]
pub enum Action {
    /// Entries and bytes per GPU, and the compile time they hold.
    Stats {
        #[arg(long)]
        json: bool,
    },
    /// Every entry.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Checks every entry's header and checksum; removes the bad ones.
    Verify,
    /// Removes least recently used entries beyond a size, and entries older than an age.
    Prune {
        /// e.g. 500M or 2G; default SPARKLE_CACHE_MAX_SIZE or the built-in bound.
        #[arg(long)]
        max_size: Option<String>,
        /// Entries unused for longer are removed; default SPARKLE_CACHE_MAX_AGE_DAYS.
        #[arg(long)]
        max_age_days: Option<f64>,
    },
    /// Removes every entry.
    Clear,
}

#[derive(Serialize, Default)]
struct GpuSummary {
    description: String,
    entries: u64,
    bytes: u64,
    compile_time_s: f64,
}

pub fn run(action: Action) -> CliResult<ExitCode> {
    let config = CacheConfig::from_env()?;
    let Some(root) = config.dir.clone() else {
        return Err("there is no cache dir: set SPARKLE_CACHE_DIR (or XDG_CACHE_HOME or HOME)".into());
    };
    let store = DiskStore::open(&root);
    match action {
        Action::Stats { json } => {
            let mut gpus: BTreeMap<String, GpuSummary> = BTreeMap::new();
            for (dir, description) in store.gpus()? {
                gpus.entry(dir).or_default().description = description;
            }
            for entry in store.list()? {
                let summary = gpus.entry(entry.gpu_dir.clone()).or_default();
                summary.entries += 1;
                summary.bytes += entry.file_size;
                summary.compile_time_s += entry.compile_time.as_secs_f64();
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&gpus)?);
            } else {
                println!("Cache dir: {}", root.display());
                let rows: Vec<Vec<String>> = gpus
                    .iter()
                    .map(|(dir, s)| {
                        let name =
                            s.description.lines().find_map(|l| l.strip_prefix("renderer: ")).unwrap_or("");
                        vec![
                            dir.clone(),
                            name.to_owned(),
                            s.entries.to_string(),
                            s.bytes.to_string(),
                            format!("{:.1}", s.compile_time_s * 1e3),
                        ]
                    })
                    .collect();
                print!("{}", table::render(&["gpu", "device", "entries", "bytes", "compile ms held"], &rows));
            }
        }
        Action::List { json } => {
            let entries = store.list()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&entries)?);
            } else {
                let rows: Vec<Vec<String>> = entries
                    .iter()
                    .map(|e| {
                        vec![
                            e.key.clone(),
                            e.gpu_dir.clone(),
                            format!("0x{:04x}", e.blob_format),
                            e.file_size.to_string(),
                            format!("{:.1}", e.compile_time.as_secs_f64() * 1e3),
                            e.problem.clone().unwrap_or_else(|| "ok".into()),
                        ]
                    })
                    .collect();
                print!("{}", table::render(&["key", "gpu", "format", "bytes", "compile ms", "state"], &rows));
            }
        }
        Action::Verify => {
            let report = store.verify()?;
            println!(
                "checked {} entries: {} valid, {} removed",
                report.checked,
                report.valid,
                report.removed.len()
            );
            for (path, why) in &report.removed {
                println!("  removed {}: {why}", path.display());
            }
            for path in &report.skipped_foreign {
                println!("  skipped (owned by another user) {}", path.display());
            }
        }
        Action::Prune { max_size, max_age_days } => {
            let max_bytes = match max_size {
                Some(text) => sparkle::cache::parse_size(&text).map_err(|e| format!("--max-size: {e}"))?,
                None => config.max_disk_bytes,
            };
            let max_age = match max_age_days {
                Some(days) if days.is_finite() && days >= 0.0 => {
                    Some(Duration::from_secs_f64(days * 86_400.0))
                }
                Some(_) => return Err("--max-age-days must be a number of days, 0 or more".into()),
                None => config.max_age,
            };
            let report = store.prune(max_bytes, max_age)?;
            println!(
                "removed {} entries ({} bytes); {} entries ({} bytes) remain",
                report.removed_entries,
                report.removed_bytes,
                report.remaining_entries,
                report.remaining_bytes
            );
        }
        Action::Clear => {
            let report = store.clear()?;
            println!("removed {} entries ({} bytes)", report.removed_entries, report.removed_bytes);
        }
    }
    Ok(ExitCode::SUCCESS)
}
