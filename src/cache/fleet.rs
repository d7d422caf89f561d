//! Fleet maintenance of one GPU's cache: `pull` prefetches remote entries onto the local disk
//! (the working set first, in first-use order), `push` publishes verified local entries and the
//! working set, `remote_status` says whether the remote answers, how fast, and what it holds.
//! Every entry pulled passes the same checks as a lookup before it is written locally.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;

use super::disk_tier::Lookup;
use super::program_cache::ProgramCache;
use super::remote::{classify, ObjectName, RemoteTier, Verdict};
use super::working_set;
use super::CacheKey;

/// Parallel fetches of a pull: enough to hide a store's latency, few enough to be polite.
const PULL_PARALLELISM: usize = 8;
/// One maintenance request gives up after this long.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// What `pull` and `push` say without a remote.
const NO_REMOTE: &str =
    "no remote cache is configured: set SPARKLE_CACHE_REMOTE (e.g. s3://my-bucket/sparkle, \
redis://cache.example.com:6379/0 or file:///srv/sparkle-cache)";

/// What `pull` did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PullReport {
    /// Entries the pull looked for.
    pub wanted: usize,
    /// Fetched, verified and written to the local disk.
    pub fetched: usize,
    /// Already on the local disk.
    pub already_local: usize,
    /// Not on the remote.
    pub missing: usize,
    /// Refused: failed verification or signature.
    pub rejected: usize,
    /// Could not be fetched or written (the first reason is kept).
    pub failed: usize,
    /// The reason of the first failure.
    pub first_failure: Option<String>,
}

/// What `push` did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PushReport {
    /// Verified local entries of this GPU.
    pub local_entries: usize,
    /// Handed to the remote (create-if-absent: already-present ones stay as they are).
    pub offered: usize,
    /// Publishes still unfinished when the push stopped waiting.
    pub unfinished: usize,
    /// Whether the working set could not be published.
    pub working_set_failed: bool,
}

/// One object of the remote, as [`ProgramCache::remote_verify`] found it.
#[derive(Debug, Clone, Serialize)]
pub struct RemoteObject {
    /// Its name: `<gpu folder>/<file>`.
    pub name: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// `ok`, `refused`, `replaced` (by this machine's own entry), `removed`, `lease`, `other`
    /// (not an object Sparkle writes: left alone), `gone` or `unreadable`.
    pub state: &'static str,
    /// How it passed (who signed it), or why it was refused, or what went wrong.
    pub detail: String,
}

/// What [`ProgramCache::remote_verify`] found and did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RemoteVerifyReport {
    /// Every object looked at, in name order.
    pub objects: Vec<RemoteObject>,
    /// Objects that pass this machine's checks.
    pub accepted: usize,
    /// Objects refused and left on the remote.
    pub refused: usize,
    /// Refused entries replaced by this machine's verified local entry.
    pub replaced: usize,
    /// Refused objects removed.
    pub removed: usize,
    /// Objects that could not be read (or fixed): the first reason is in their detail.
    pub unreadable: usize,
}

/// The remote as seen from this machine.
#[derive(Debug, Clone, Serialize)]
pub struct RemoteStatus {
    /// The remote's URL.
    pub url: String,
    /// Round trip of one request, when one came back.
    pub latency_ms: Option<f64>,
    /// Why the remote did not answer, when it did not.
    pub error: Option<String>,
    /// This GPU's entries on the remote and their bytes (when it answered).
    pub entries: Option<u64>,
    /// The bytes of those entries.
    pub bytes: Option<u64>,
    /// Whether this machine only reads the remote (it publishes nothing).
    pub read_only: bool,
    /// Whether the store took a small write from this machine (`None`: it does not publish, or
    /// no answer came).
    pub writable: Option<bool>,
    /// Why the store refused that write, when it did.
    pub write_error: Option<String>,
}

impl<P: Send + Sync + 'static> ProgramCache<P> {
    /// The remote's reachability, latency and counts for this GPU; `None` without a remote.
    pub fn remote_status(&self) -> Option<RemoteStatus> {
        let remote = self.remote()?;
        let latency = remote.ping(REQUEST_TIMEOUT).map(|d| d.as_secs_f64() * 1e3).map_err(|err| err.0);
        let listed = latency.is_ok().then(|| remote.list(REQUEST_TIMEOUT).ok()).flatten();
        let entries: Option<Vec<_>> =
            listed.map(|objects| objects.into_iter().filter(|(name, _)| key_of(name).is_some()).collect());
        let write_check = remote.write_check(REQUEST_TIMEOUT);
        Some(RemoteStatus {
            writable: write_check.as_ref().map(Result::is_ok),
            write_error: write_check.and_then(Result::err),
            url: remote.url().to_owned(),
            latency_ms: latency.as_ref().ok().copied(),
            error: latency.err(),
            entries: entries.as_ref().map(|e| e.len() as u64),
            bytes: entries.as_ref().map(|e| e.iter().map(|(_, size)| size).sum()),
            read_only: remote.why_not_publishing().is_some(),
        })
    }

    /// Prefetches this GPU's remote entries onto the local disk: with `working_set_only`, the
    /// programs this machine (or the fleet, through `push`) recorded as used, in first-use
    /// order; otherwise every entry, the working set first. `progress(done, total)` is called
    /// as entries finish. An error says why nothing can be pulled: no usable remote, or no
    /// writable disk tier.
    pub fn pull(
        &self,
        working_set_only: bool,
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> Result<PullReport, String> {
        let remote = self.usable_remote()?;
        let disk = self.disk().filter(|disk| !disk.read_only()).ok_or(
            "pull writes entries to the local cache folder, and there is none that may be written (set \
             SPARKLE_CACHE_DIR to a writable folder, and not SPARKLE_CACHE_READ_ONLY)",
        )?;
        let mut keys: Vec<CacheKey> =
            working_set::read(disk.gpu_dir()).into_iter().map(|(key, _)| key).collect();
        let mut report = PullReport::default();
        match remote.fetch_working_set(REQUEST_TIMEOUT) {
            Ok(Some(shared_set)) => keys.extend(shared_set.into_iter().map(|(key, _)| key)),
            Ok(None) => {}
            Err(why) => {
                tracing::warn!(remote = %remote.url(), "the fleet's working set on the remote cache is not used: {why}");
                report.rejected += 1;
                report.first_failure.get_or_insert(format!("the fleet's working set: {why}"));
            }
        }
        // The listing (one request per thousand objects) keeps keys the remote does not hold
        // from costing a request each: a working set naming programs nobody published.
        let listed: Option<std::collections::HashSet<CacheKey>> = match remote.list(REQUEST_TIMEOUT) {
            Ok(objects) => Some(objects.iter().filter_map(|(name, _)| key_of(name)).collect()),
            Err(err) => {
                if !working_set_only {
                    report.failed += 1;
                    report.first_failure = Some(format!("listing the remote: {err}"));
                }
                None
            }
        };
        if let (false, Some(listed)) = (working_set_only, &listed) {
            let mut all: Vec<CacheKey> = listed.iter().copied().collect();
            all.sort_unstable();
            keys.extend(all);
        }
        let mut seen = std::collections::HashSet::new();
        keys.retain(|key| seen.insert(*key));
        if let Some(listed) = &listed {
            let before = keys.len();
            keys.retain(|key| listed.contains(key));
            report.missing += before - keys.len();
        }
        report.wanted = keys.len() + report.missing;
        let report = Mutex::new(report);
        let next = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        let work = || loop {
            let Some(&key) = keys.get(next.fetch_add(1, Relaxed)) else { return };
            let outcome = self.pull_one(remote, key);
            {
                let mut report = report.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                match outcome {
                    Pulled::Fetched => report.fetched += 1,
                    Pulled::Local => report.already_local += 1,
                    Pulled::Missing => report.missing += 1,
                    Pulled::Rejected => report.rejected += 1,
                    Pulled::Failed(why) => {
                        report.failed += 1;
                        report.first_failure.get_or_insert(why);
                    }
                }
            }
            progress(done.fetch_add(1, Relaxed) + 1, keys.len());
        };
        std::thread::scope(|scope| {
            for _ in 1..PULL_PARALLELISM.min(keys.len()) {
                scope.spawn(work);
            }
            work();
        });
        Ok(report.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Lists every object of this GPU's folder on the remote (of every GPU's with `all`) and
    /// checks each as a machine of its GPU would before using it: the envelope, a trusted
    /// signature over its name when keys are trusted, and for entries every check a disk entry
    /// passes. With `fix`, a refused entry of this GPU that has a verified entry on the local
    /// disk is replaced by it (compare-and-swap), and every other refused object is removed;
    /// leases and objects Sparkle does not write are left alone. `progress(done, total)`.
    pub fn remote_verify(
        &self,
        all: bool,
        fix: bool,
        progress: &dyn Fn(usize, usize),
    ) -> Result<RemoteVerifyReport, String> {
        let remote = self.usable_remote()?;
        if fix {
            if let Some(why) = remote.why_not_publishing() {
                return Err(format!("{why}: --fix changes the remote, which this machine does not"));
            }
        }
        let listed =
            remote.list_objects(all, REQUEST_TIMEOUT).map_err(|err| format!("listing the remote: {err}"))?;
        let mut report = RemoteVerifyReport::default();
        for (index, (name, bytes)) in listed.iter().enumerate() {
            let (state, detail) = self.verify_one(remote, name, fix, &mut report);
            report.objects.push(RemoteObject { name: name.clone(), bytes: *bytes, state, detail });
            progress(index + 1, listed.len());
        }
        Ok(report)
    }

    fn verify_one(
        &self,
        remote: &RemoteTier,
        name: &str,
        fix: bool,
        report: &mut RemoteVerifyReport,
    ) -> (&'static str, String) {
        let checked = match remote.check_object(name, REQUEST_TIMEOUT) {
            Ok(Some(checked)) => checked,
            Ok(None) => return ("gone", "removed since it was listed".into()),
            Err(why) => {
                report.unreadable += 1;
                return ("unreadable", why);
            }
        };
        let why = match &checked.verdict {
            Verdict::Accepted(how) => {
                report.accepted += 1;
                return ("ok", how.clone());
            }
            Verdict::Lease => return ("lease", "a compile lease (it expires on its own)".into()),
            Verdict::Other => return ("other", "not an object Sparkle writes; left alone".into()),
            Verdict::Refused(why) => why.clone(),
        };
        if !fix {
            report.refused += 1;
            return ("refused", why);
        }
        // This GPU's entry, with a verified local copy: the remote gets ours.
        let local = match (classify(name), self.disk()) {
            (ObjectName::Entry { key, .. }, Some(disk)) if remote.is_own_entry(name, key) => {
                match disk.lookup(key) {
                    Lookup::Hit(verified) => Some((key, verified)),
                    _ => None,
                }
            }
            _ => None,
        };
        let fixed = match local {
            Some((key, verified)) => remote
                .replace_entry(
                    key,
                    checked,
                    &verified.blob,
                    Duration::from_nanos(verified.header.compile_time_ns),
                    REQUEST_TIMEOUT,
                )
                .map(|replaced| if replaced { "replaced" } else { "gone" }),
            None => remote.delete_object(name, REQUEST_TIMEOUT).map(|()| "removed"),
        };
        match fixed {
            Ok("replaced") => {
                report.replaced += 1;
                ("replaced", format!("by this machine's entry; it was refused: {why}"))
            }
            Ok("removed") => {
                report.removed += 1;
                ("removed", format!("it was refused: {why}"))
            }
            Ok(_) => {
                ("gone", format!("changed by another machine while being replaced; it was refused: {why}"))
            }
            Err(err) => {
                report.refused += 1;
                report.unreadable += 1;
                ("refused", format!("{why}; and it could not be fixed: {err}"))
            }
        }
    }

    /// The remote tier, or why there is none.
    fn usable_remote(&self) -> Result<&RemoteTier, String> {
        match (self.remote(), &self.remote_problem) {
            (Some(remote), _) => Ok(remote),
            (None, Some(problem)) => Err(problem.clone()),
            (None, None) => Err(NO_REMOTE.to_owned()),
        }
    }

    fn pull_one(&self, remote: &RemoteTier, key: CacheKey) -> Pulled {
        let Some(disk) = self.disk() else { return Pulled::Failed("no disk tier".into()) };
        if let Lookup::Hit(_) = disk.lookup(key) {
            return Pulled::Local;
        }
        match remote.fetch(key, REQUEST_TIMEOUT) {
            Ok(Some((header, blob))) => {
                if disk.publish(key, &blob, Duration::from_nanos(header.compile_time_ns), false) {
                    Pulled::Fetched
                } else {
                    Pulled::Failed("could not write the entry to the local disk".into())
                }
            }
            Ok(None) => Pulled::Missing,
            Err(why) if remote.is_rejected(key) => {
                tracing::debug!(%key, %why, "pull: entry refused");
                Pulled::Rejected
            }
            Err(why) => Pulled::Failed(why),
        }
    }

    /// Publishes every verified local entry of this GPU and this machine's working set (merged
    /// into the remote's). Waits for the publishes, at most `wait`. An error says why nothing
    /// can be pushed: no usable remote, a machine that does not publish (read-only, or trusting
    /// keys without a signing key), or no disk tier.
    pub fn push(&self, wait: Duration, progress: &dyn Fn(usize, usize)) -> Result<PushReport, String> {
        let remote = self.usable_remote()?;
        if let Some(why) = remote.why_not_publishing() {
            return Err(format!("{why}: push publishes nothing"));
        }
        let disk = self.disk().ok_or(
            "push publishes the entries of the local cache folder, and there is none (set SPARKLE_CACHE_DIR)",
        )?;
        let keys = disk.entry_keys();
        let mut report = PushReport::default();
        for (index, key) in keys.iter().enumerate() {
            if let Lookup::Hit(verified) = disk.lookup(*key) {
                report.local_entries += 1;
                remote.publish_checked(
                    *key,
                    &verified.blob,
                    Duration::from_nanos(verified.header.compile_time_ns),
                );
                report.offered += 1;
                // Its recipe too, so that the fleet can rebuild it after a driver update.
                super::remote::publish_kept_recipe(remote, disk.gpu_dir(), *key);
            }
            progress(index + 1, keys.len());
        }
        let local = working_set::read(disk.gpu_dir());
        // The entries first: the working set then names what the remote holds.
        report.unfinished = remote.drain(wait);
        if !local.is_empty() {
            // Only a working set that passes this machine's checks is merged: a forged or
            // unsigned one is replaced by this machine's own. Of the remote's set, only the
            // programs the remote holds stay.
            let mut merged = match remote.fetch_working_set(REQUEST_TIMEOUT) {
                Ok(set) => set.unwrap_or_default(),
                Err(why) => {
                    tracing::warn!(remote = %remote.url(), "the fleet's working set on the remote cache is replaced: {why}");
                    Vec::new()
                }
            };
            if let Ok(objects) = remote.list(REQUEST_TIMEOUT) {
                let held: std::collections::HashSet<CacheKey> =
                    objects.iter().filter_map(|(name, _)| key_of(name)).collect();
                merged.retain(|(key, _)| held.contains(key));
            }
            let mut seen: std::collections::HashSet<_> = merged.iter().map(|(key, _)| *key).collect();
            merged.extend(local.into_iter().filter(|(key, _)| seen.insert(*key)));
            if let Err(err) = remote.publish_working_set(&merged, REQUEST_TIMEOUT) {
                tracing::warn!(remote = %remote.url(), error = %err, "could not publish the working set to the remote cache");
                report.working_set_failed = true;
            }
        }
        Ok(report)
    }
}

/// The fleet operations of one device's cache, without its program type: what
/// [`Runtime::fleet`](crate::Runtime::fleet) hands out.
pub trait FleetCache: Send + Sync {
    /// See [`ProgramCache::remote_status`].
    fn remote_status(&self) -> Option<RemoteStatus>;
    /// See [`ProgramCache::pull`].
    fn pull(
        &self,
        working_set_only: bool,
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> Result<PullReport, String>;
    /// See [`ProgramCache::push`].
    fn push(&self, wait: Duration, progress: &dyn Fn(usize, usize)) -> Result<PushReport, String>;
    /// See [`ProgramCache::remote_verify`].
    fn remote_verify(
        &self,
        all: bool,
        fix: bool,
        progress: &dyn Fn(usize, usize),
    ) -> Result<RemoteVerifyReport, String>;
}

impl<P: Send + Sync + 'static> FleetCache for ProgramCache<P> {
    fn remote_status(&self) -> Option<RemoteStatus> {
        ProgramCache::remote_status(self)
    }

    fn pull(
        &self,
        working_set_only: bool,
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> Result<PullReport, String> {
        ProgramCache::pull(self, working_set_only, progress)
    }

    fn push(&self, wait: Duration, progress: &dyn Fn(usize, usize)) -> Result<PushReport, String> {
        ProgramCache::push(self, wait, progress)
    }

    fn remote_verify(
        &self,
        all: bool,
        fix: bool,
        progress: &dyn Fn(usize, usize),
    ) -> Result<RemoteVerifyReport, String> {
        ProgramCache::remote_verify(self, all, fix, progress)
    }
}

enum Pulled {
    Fetched,
    Local,
    Missing,
    Rejected,
    Failed(String),
}

/// The key of an object name `<gpu folder>/<32 hex>`; `None` for other objects.
fn key_of(name: &str) -> Option<CacheKey> {
    name.rsplit('/').next().and_then(CacheKey::from_hex)
}
