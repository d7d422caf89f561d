//! `sparkle cache remote [verify]|pull|push|keygen`: the fleet cache from the command line.
//! `remote`, `pull` and `push` open the selected backend's device, because the remote keeps
//! entries per GPU id; `keygen` makes a signing key pair.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use sparkle::Runtime;

use super::CliResult;

/// How long `push` waits for its publishes.
const PUSH_WAIT: Duration = Duration::from_secs(120);

const NO_REMOTE: &str =
    "no remote cache is configured: set SPARKLE_CACHE_REMOTE (e.g. s3://my-bucket/sparkle, \
redis://cache.example.com:6379/0 or file:///srv/sparkle-cache)";

fn bar(what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    if let Ok(style) = ProgressStyle::with_template("{msg} {bar:40} {pos}/{len} ({elapsed})") {
        bar.set_style(style);
    }
    bar.set_message(what.to_owned());
    bar
}

pub fn status(json: bool) -> CliResult<ExitCode> {
    let runtime = Runtime::from_env()?;
    let stats = runtime.cache_stats();
    let Some(status) = runtime.fleet().remote_status() else {
        return Err(stats.remote_problem.unwrap_or_else(|| NO_REMOTE.to_owned()).into());
    };
    if json {
        let value = serde_json::json!({ "gpu_id": runtime.info().gpu_id.to_string(), "remote": status, "stats": stats });
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!("Remote: {}{}", status.url, if status.read_only { " (read-only)" } else { "" });
        println!("GPU id: {} ({})", runtime.info().gpu_id, runtime.info().name);
        match (&status.latency_ms, &status.error) {
            (Some(ms), _) => println!("Reachable: yes, {ms:.2} ms per request"),
            (None, why) => println!("Reachable: no ({})", why.as_deref().unwrap_or("no answer")),
        }
        match (status.writable, &status.write_error) {
            (Some(true), _) => println!("Writable: yes"),
            (Some(false), why) => {
                println!("Writable: no ({}); this machine only reads it", why.as_deref().unwrap_or("refused"))
            }
            (None, _) if status.read_only => println!("Writable: not asked (this machine only reads it)"),
            (None, _) => {}
        }
        if let (Some(entries), Some(bytes)) = (status.entries, status.bytes) {
            println!("Entries for this GPU: {entries} ({})", sparkle::cache::human_bytes(bytes));
        }
        println!("\nThis process:\n{stats}");
    }
    let usable = status.latency_ms.is_some() && status.writable != Some(false);
    Ok(if usable { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

pub fn verify(fix: bool, all: bool, json: bool) -> CliResult<ExitCode> {
    let runtime = Runtime::from_env()?;
    let bar = bar(if fix { "verifying and fixing" } else { "verifying" });
    let progress = |done: usize, total: usize| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    };
    let report = runtime.fleet().remote_verify(all, fix, &progress);
    bar.finish_and_clear();
    let report = report?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let rows: Vec<Vec<String>> = report
            .objects
            .iter()
            .map(|o| vec![o.name.clone(), o.bytes.to_string(), o.state.to_owned(), o.detail.clone()])
            .collect();
        print!("{}", super::table::render(&["object", "bytes", "state", "detail"], &rows));
        println!(
            "{} objects: {} accepted, {} refused, {} replaced, {} removed, {} unreadable",
            report.objects.len(),
            report.accepted,
            report.refused,
            report.replaced,
            report.removed,
            report.unreadable
        );
        if report.refused > 0 && !fix {
            eprintln!(
                "{} refused object(s) left; `sparkle cache remote verify --fix` replaces or removes them",
                report.refused
            );
        }
    }
    Ok(if report.refused == 0 && report.unreadable == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

pub fn pull(working_set: bool, json: bool) -> CliResult<ExitCode> {
    let runtime = Runtime::from_env()?;
    let bar = bar("pulling");
    let progress = |done: usize, total: usize| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    };
    let report = runtime.fleet().pull(working_set, &progress);
    bar.finish_and_clear();
    let report = report?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "pulled {} of {} entries ({} already here, {} not on the remote, {} refused, {} failed)",
            report.fetched,
            report.wanted,
            report.already_local,
            report.missing,
            report.rejected,
            report.failed
        );
        if let Some(why) = &report.first_failure {
            println!("first failure: {why}");
        }
    }
    // A refusal is a failure too: the remote holds something this machine will not use.
    Ok(if report.failed == 0 && report.rejected == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

pub fn push(json: bool) -> CliResult<ExitCode> {
    let runtime = Runtime::from_env()?;
    let bar = bar("pushing");
    let progress = |done: usize, total: usize| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    };
    let report = runtime.fleet().push(PUSH_WAIT, &progress);
    bar.finish_and_clear();
    let report = report?;
    let stats = runtime.cache_stats();
    if json {
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "push": report, "stats": stats }))?);
    } else {
        println!(
            "offered {} verified local entries: {} published, {} already there, {} replacing objects that do \
             not verify here, {} failed{}",
            report.offered,
            stats.remote_publishes,
            stats.remote_publish_existing,
            stats.remote_replaced,
            stats.remote_publish_errors,
            if report.unfinished > 0 { format!(", {} unfinished", report.unfinished) } else { String::new() }
        );
    }
    if report.working_set_failed {
        eprintln!("the working set could not be published (see the warning above)");
    }
    Ok(if stats.remote_publish_errors == 0 && report.unfinished == 0 && !report.working_set_failed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

pub fn keygen(out: &Path) -> CliResult<ExitCode> {
    let public = sparkle::cache::remote::generate_key_file(out)
        .map_err(|err| format!("cannot write a new key to {}: {err}", out.display()))?;
    println!("{public}");
    eprintln!(
        "secret key written to {} (keep it private; point SPARKLE_CACHE_SIGNING_KEY at it); list the public key \
         above in SPARKLE_CACHE_TRUSTED_KEYS on the machines that should accept its entries",
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}
