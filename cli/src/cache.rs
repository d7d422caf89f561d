//! `sparkle cache stats|list|verify|prune|clear`: the on-disk cache, without opening a GPU; and
//! `sparkle cache rebuild`, which opens the selected backend's device to build, for the driver
//! installed now, the working set another driver of the same GPU used.
//! Driver cache folders (`drivers/<name>`, where a driver keeps its own shader cache) show as
//! rows of their own; they count against the size bound, are pruned and cleared as a whole, and
//! are never verified (their files are the driver's to check).
//!
//! Exit codes: 0 done (and, for `verify` and `clear`, no problem left); 1 the command failed or
//! problems are left; 2 the command line is wrong.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;
use serde::Serialize;
use sparkle::cache::{parse_age_days, parse_max_size, CacheConfig, DiskStore, MAX_AGE_ENV, MAX_SIZE_ENV};
use sparkle::runtime::RebuildOutcome;

use super::{table, CliResult};

const EXIT_CODES: &str = "Exit codes: 0 done (verify, clear: no problem left), 1 failed or problems left, \
2 wrong command line";

#[derive(Subcommand)]
#[command(after_help = EXIT_CODES)]
pub enum Action {
    /// Entries and bytes per GPU, and the size of each driver's own cache folder.
    #[command(after_help = EXIT_CODES)]
    Stats {
        #[arg(long)]
        json: bool,
    },
    /// Every entry, then the driver cache folders (with --json: the entries only).
    #[command(after_help = EXIT_CODES)]
    List {
        #[arg(long)]
        json: bool,
    },
    /// Checks every entry completely and removes those that fail. Also reports problems: entries
    /// of other users (never loaded), things that are not regular files at an entry's path
    /// (folders, links, FIFOs), GPU or shard folders that are links. Exit code 1 while problems
    /// are left (remove them with --fix).
    #[command(after_help = EXIT_CODES)]
    Verify {
        /// Also remove the problems: a folder with its contents, a link as a link (never its
        /// target), another user's entry where the folder's permissions allow it.
        #[arg(long)]
        fix: bool,
    },
    /// Removes entries and driver cache folders older than an age, then, beyond a size, the
    /// driver cache folders (the driver rebuilds them in the next run) and the least recently
    /// used entries.
    #[command(after_help = EXIT_CODES)]
    Prune {
        /// e.g. 500M or 2G, at least 64K (parsed as SPARKLE_CACHE_MAX_SIZE is); default
        /// SPARKLE_CACHE_MAX_SIZE or the built-in bound.
        #[arg(long, value_name = "SIZE", value_parser = max_size_arg, allow_hyphen_values = true)]
        max_size: Option<u64>,
        /// Entries unused for longer are removed; 0, off or never: no age limit (as in
        /// SPARKLE_CACHE_MAX_AGE_DAYS); default SPARKLE_CACHE_MAX_AGE_DAYS.
        #[arg(long, value_name = "DAYS", value_parser = max_age_arg, allow_hyphen_values = true)]
        max_age_days: Option<AgeLimit>,
    },
    /// Removes every entry and driver cache folder of yours, and the problems `verify --fix`
    /// removes. Exit code 1 if something could not be removed.
    #[command(after_help = EXIT_CODES)]
    Clear,
    /// After a driver update: builds for the driver installed now the programs another driver of
    /// this GPU used (its working set, in first-use order), from the kernel specs kept with its
    /// entries, with progress. Opens the selected backend's device. A damaged or foreign spec is
    /// refused and never compiled from; a program that fails is reported and the rebuild goes
    /// on. Exit code 1 when some program was refused or failed.
    #[command(after_help = EXIT_CODES)]
    Rebuild {
        /// The GPU folder whose working set to rebuild (its name, e.g. amdgpu-sim-0123456789abcdef,
        /// or its 16-digit GPU id); default: the most recently used folder of this device under
        /// another driver.
        #[arg(long, value_name = "GPU")]
        from: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// The fleet cache (SPARKLE_CACHE_REMOTE): whether it answers and may be written, its
    /// latency, this GPU's entries there, and this process's remote statistics; `verify` checks
    /// every object. Opens the selected backend's device. Exit code 1 when it does not answer, or
    /// cannot be written by a machine that publishes.
    #[cfg(feature = "remote")]
    #[command(after_help = EXIT_CODES)]
    Remote {
        #[command(subcommand)]
        action: Option<RemoteAction>,
        #[arg(long, global = true)]
        json: bool,
    },
    /// Prefetches this GPU's entries from the fleet cache onto the local disk, in the
    /// background of nothing else: every entry, the working set first. Exit code 1 when an
    /// entry (or the working set) was refused or could not be fetched.
    #[cfg(feature = "remote")]
    #[command(after_help = EXIT_CODES)]
    Pull {
        /// Only the programs recorded as used (here, or by machines that pushed), in first-use
        /// order.
        #[arg(long)]
        working_set: bool,
        #[arg(long)]
        json: bool,
    },
    /// Publishes this GPU's verified local entries and its working set to the fleet cache
    /// (create-if-absent: what is there stays, unless it does not verify here — unsigned, signed
    /// by a key no longer trusted, damaged — and is then replaced: how a key rotation completes).
    #[cfg(feature = "remote")]
    #[command(after_help = EXIT_CODES)]
    Push {
        #[arg(long)]
        json: bool,
    },
    /// Makes a signing key pair for the fleet cache: the secret key goes to FILE (0600, never
    /// overwritten), the public key is printed (list it in SPARKLE_CACHE_TRUSTED_KEYS).
    #[cfg(feature = "remote")]
    #[command(after_help = EXIT_CODES)]
    Keygen {
        #[arg(value_name = "FILE")]
        out: PathBuf,
    },
}

/// What `sparkle cache remote` does besides showing the remote's state.
#[cfg(feature = "remote")]
#[derive(Subcommand)]
pub enum RemoteAction {
    /// Checks every object of this GPU on the fleet cache as this machine would before using it
    /// (a trusted signature when SPARKLE_CACHE_TRUSTED_KEYS is set, then every check a disk
    /// entry passes) and says why each refused one is refused. Exit code 1 while refused
    /// objects are left (fix them with --fix).
    #[command(after_help = EXIT_CODES)]
    Verify {
        /// Fix what is refused: an entry this machine has verified on its local disk replaces
        /// the remote one (compare-and-swap), every other refused object is removed. Needs a
        /// machine that publishes (a signing key when keys are trusted).
        #[arg(long)]
        fix: bool,
        /// Every GPU's objects, not only this GPU's.
        #[arg(long)]
        all: bool,
    },
}

/// An age bound from the command line; `None` inside means no limit.
#[derive(Clone, Copy, Debug)]
pub struct AgeLimit(Option<Duration>);

fn max_size_arg(text: &str) -> Result<u64, String> {
    parse_max_size(text).map_err(|problem| format!("{problem}; for example 512M (as in {MAX_SIZE_ENV})"))
}

fn max_age_arg(text: &str) -> Result<AgeLimit, String> {
    parse_age_days(text)
        .map(AgeLimit)
        .map_err(|problem| format!("{problem}; for example 30, or 0 for no limit (as in {MAX_AGE_ENV})"))
}

/// Prints the problems left and says how to remove them.
fn print_problems(problems: &[(PathBuf, String)], hint: &str) {
    for (path, why) in problems {
        println!("  problem {}: {why}", path.display());
    }
    if !problems.is_empty() {
        eprintln!("{} problem(s) left{hint}", problems.len());
    }
}

#[derive(Serialize, Default)]
struct GpuSummary {
    /// `gpu` (a GPU folder of program entries) or `driver cache` (a driver's own folder).
    kind: &'static str,
    description: String,
    entries: u64,
    bytes: u64,
    compile_time_s: f64,
    /// Entries that cannot be used, and misplaced things (see `cache list`).
    problems: u64,
    /// Driver cache folders: the files the driver keeps there.
    #[serde(skip_serializing_if = "Option::is_none")]
    files: Option<u64>,
    /// GPU folders: what the fleet cache did in past processes on this machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    remote: Option<sparkle::cache::remote::RemoteLedger>,
    /// GPU folders: what was rebuilt into it after a driver update.
    #[serde(skip_serializing_if = "Option::is_none")]
    rebuilt: Option<sparkle::cache::recipe::RebuildLedger>,
}

const DRIVER_CACHE_KIND: &str = "driver cache";

/// The row name of a driver cache folder (`drivers/<name>`).
fn driver_row(name: &str) -> String {
    format!("{}/{name}", sparkle::cache::DRIVER_CACHES_DIR)
}

pub fn run(action: Action) -> CliResult<ExitCode> {
    if let Action::Rebuild { from, json } = &action {
        return rebuild(from.as_deref(), *json);
    }
    #[cfg(feature = "remote")]
    match action {
        Action::Remote { action: None, json } => return super::fleet::status(json),
        Action::Remote { action: Some(RemoteAction::Verify { fix, all }), json } => {
            return super::fleet::verify(fix, all, json)
        }
        Action::Pull { working_set, json } => return super::fleet::pull(working_set, json),
        Action::Push { json } => return super::fleet::push(json),
        Action::Keygen { out } => return super::fleet::keygen(&out),
        _ => {}
    }
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
                if entry.problem.is_some() {
                    summary.problems += 1;
                }
                if !entry.key.is_empty() {
                    summary.entries += 1;
                    summary.bytes += entry.file_size;
                    summary.compile_time_s += entry.compile_time.as_secs_f64();
                }
            }
            for (dir, summary) in gpus.iter_mut() {
                summary.kind = "gpu";
                summary.remote = sparkle::cache::remote::read_ledger(&root.join(dir));
                summary.rebuilt = sparkle::cache::recipe::read_ledger(&root.join(dir));
            }
            for driver in store.driver_caches()? {
                let summary = gpus.entry(driver_row(&driver.name)).or_default();
                summary.kind = DRIVER_CACHE_KIND;
                summary.description =
                    "the driver's own shader cache (its format; sized, pruned and cleared as a whole)\n"
                        .into();
                summary.bytes = driver.bytes;
                summary.files = Some(driver.files);
                summary.problems = u64::from(driver.problem.is_some());
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&gpus)?);
            } else {
                println!("Cache dir: {}", root.display());
                let rows: Vec<Vec<String>> = gpus
                    .iter()
                    .map(|(dir, s)| {
                        let name = if s.kind == DRIVER_CACHE_KIND {
                            format!("driver shader cache, {} files", s.files.unwrap_or(0))
                        } else {
                            s.description
                                .lines()
                                .find_map(|l| l.strip_prefix("renderer: "))
                                .unwrap_or("")
                                .to_owned()
                        };
                        vec![
                            dir.clone(),
                            name,
                            if s.kind == DRIVER_CACHE_KIND { "-".into() } else { s.entries.to_string() },
                            s.bytes.to_string(),
                            format!("{:.1}", s.compile_time_s * 1e3),
                            s.problems.to_string(),
                        ]
                    })
                    .collect();
                let header = ["gpu", "device", "entries", "bytes", "compile ms held", "problems"];
                print!("{}", table::render(&header, &rows));
                let remote: Vec<Vec<String>> = gpus
                    .iter()
                    .filter_map(|(dir, s)| s.remote.map(|r| (dir, r)))
                    .map(|(dir, r)| {
                        vec![
                            dir.clone(),
                            r.processes.to_string(),
                            r.hits.to_string(),
                            r.misses.to_string(),
                            r.rejected.to_string(),
                            format!("{} ({} won by the remote)", r.hedged, r.hedges_won),
                            r.errors.to_string(),
                            format!("{:.2}", r.mean_lookup_ms()),
                            format!("{} ({} already there)", r.publishes, r.publish_existing),
                        ]
                    })
                    .collect();
                let rebuilt: Vec<Vec<String>> = gpus
                    .iter()
                    .filter_map(|(dir, s)| s.rebuilt.as_ref().map(|r| (dir, r)))
                    .map(|(dir, r)| {
                        vec![
                            dir.clone(),
                            r.from.clone().unwrap_or_default(),
                            r.rebuilt.to_string(),
                            r.failed.to_string(),
                            r.refused.to_string(),
                        ]
                    })
                    .collect();
                if !rebuilt.is_empty() {
                    println!("\nRebuilt after a driver update (from another driver's working set):");
                    let header = ["gpu", "from", "rebuilt", "failed", "refused"];
                    print!("{}", table::render(&header, &rebuilt));
                }
                if !remote.is_empty() {
                    println!("\nFleet cache, as processes on this machine used it (SPARKLE_CACHE_REMOTE):");
                    let header = [
                        "gpu",
                        "processes",
                        "hits",
                        "misses",
                        "rejected",
                        "hedged",
                        "errors",
                        "lookup ms (mean)",
                        "published",
                    ];
                    print!("{}", table::render(&header, &remote));
                }
            }
        }
        Action::List { json } => {
            let entries = store.list()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&entries)?);
            } else {
                let mut rows: Vec<Vec<String>> = entries
                    .iter()
                    .map(|e| {
                        vec![
                            if e.key.is_empty() { "-".to_owned() } else { e.key.clone() },
                            e.gpu_dir.clone(),
                            format!("0x{:04x}", e.blob_format),
                            e.file_size.to_string(),
                            format!("{:.1}", e.compile_time.as_secs_f64() * 1e3),
                            e.problem.clone().unwrap_or_else(|| "ok".into()),
                        ]
                    })
                    .collect();
                for driver in store.driver_caches()? {
                    rows.push(vec![
                        "-".into(),
                        driver_row(&driver.name),
                        "-".into(),
                        driver.bytes.to_string(),
                        "-".into(),
                        driver
                            .problem
                            .unwrap_or_else(|| format!("driver shader cache ({} files)", driver.files)),
                    ]);
                }
                print!("{}", table::render(&["key", "gpu", "format", "bytes", "compile ms", "state"], &rows));
            }
        }
        Action::Verify { fix } => {
            let report = store.verify(fix)?;
            println!(
                "checked {} entries: {} valid, {} removed; {} driver cache folder(s), whose files the driver checks",
                report.checked,
                report.valid,
                report.removed.len(),
                report.driver_caches
            );
            for (path, why) in &report.removed {
                println!("  removed {}: {why}", path.display());
            }
            for (path, why) in &report.fixed {
                println!("  fixed (removed) {}: {why}", path.display());
            }
            let hint = if fix { "" } else { "; `sparkle cache verify --fix` removes them" };
            print_problems(&report.problems, hint);
            if !report.problems.is_empty() {
                return Ok(ExitCode::FAILURE);
            }
        }
        Action::Prune { max_size, max_age_days } => {
            let max_bytes = max_size.unwrap_or(config.max_disk_bytes);
            let max_age = max_age_days.map_or(config.max_age, |AgeLimit(age)| age);
            let report = store.prune(max_bytes, max_age)?;
            println!(
                "removed {} entries and {} driver cache folder(s) ({} bytes); {} entries and {} driver cache \
                 folder(s) ({} bytes, {} of them the drivers') remain",
                report.removed_entries,
                report.removed_driver_caches,
                report.removed_bytes,
                report.remaining_entries,
                report.remaining_driver_caches,
                report.remaining_bytes,
                report.remaining_driver_bytes
            );
        }
        #[cfg(feature = "remote")]
        Action::Remote { .. } | Action::Pull { .. } | Action::Push { .. } | Action::Keygen { .. } => {
            unreachable!("the fleet actions return before the cache folder is opened")
        }
        Action::Rebuild { .. } => unreachable!("rebuild returns before the cache folder is opened"),
        Action::Clear => {
            let report = store.clear()?;
            println!(
                "removed {} entries, {} driver cache folder(s) ({} bytes) and {} problem(s)",
                report.removed_entries,
                report.removed_driver_caches,
                report.removed_bytes,
                report.removed_problems
            );
            print_problems(&report.problems, "");
            if !report.problems.is_empty() {
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `sparkle cache rebuild`: the foreground rebuild, one progress line per program on stderr.
fn rebuild(from: Option<&str>, json: bool) -> CliResult<ExitCode> {
    // This process does the rebuild itself: no background one beside it.
    std::env::set_var(sparkle::runtime::REBUILD_ENV, "off");
    let runtime = sparkle::Runtime::from_env()?;
    let report = runtime.rebuild_working_set(from, &mut |step| {
        let what = match step.outcome {
            RebuildOutcome::Rebuilt => "rebuilt".to_owned(),
            RebuildOutcome::Present => "already there".to_owned(),
            RebuildOutcome::NoRecipe => "no recipe kept (used before recipes were kept)".to_owned(),
            RebuildOutcome::Refused(why) => format!("recipe refused, not compiled: {why}"),
            RebuildOutcome::Failed(why) => format!("failed: {why}"),
        };
        eprintln!("[{}/{}] {} ({}): {what}", step.done, step.total, step.kernel.unwrap_or("?"), step.key);
    })?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "rebuilt {} of {} programs from {} for {} ({} already there, {} without a recipe, {} refused, {} failed)",
            report.rebuilt,
            report.planned,
            report.from,
            runtime.info().gpu_id.dir_name(),
            report.present,
            report.no_recipe,
            report.refused.len(),
            report.failed.len()
        );
        for refused in &report.refused {
            println!("  refused {refused}");
        }
        for failed in &report.failed {
            println!("  failed {failed}");
        }
    }
    Ok(if report.refused.is_empty() && report.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
