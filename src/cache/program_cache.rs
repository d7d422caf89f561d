//! `ProgramCache`: the request flow tying the tiers together — memory hit, else (once per key)
//! disk hit → verify → backend load, else (once per key among the processes sharing the folder,
//! `process_flight`) disk hit after another process's compile, else compile → publish → insert —
//! and its statistics.

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use super::disk_tier::{DiskTier, Lookup};
use super::memory::{Entry, MemoryTier, ProgramHandle};
use super::process_flight::{ProcessLock, Turn, WaitBudgets};
#[cfg(feature = "remote")]
use super::remote::{Claim, LateLookup, Lease, PendingClaim, PendingPeek, RemoteLookup, RemoteTier, Waited};
use super::single_flight::{Join, Outcome, SingleFlight};
use super::stats::{self, duration_ns, CacheStats, Counters};
use super::working_set::WorkingSet;
use super::{CacheConfig, CacheKey, GpuId, LoadFailure, ProgramSource};

/// Where the hedge stands while its compile runs.
#[cfg(feature = "remote")]
enum Hedge {
    /// The lookup has not answered.
    Lookup(LateLookup),
    /// It missed; this process's claim of the lease is under way.
    Claiming(PendingClaim),
    /// This process holds the lease; a last look for an entry is under way.
    Rechecking(PendingPeek),
    /// Another machine holds the lease: the compile is given up.
    Theirs,
    /// Nothing more to learn: the compile runs to its end.
    Done,
}

/// What the remote step of a miss decided.
#[cfg(feature = "remote")]
enum FromRemote<P: Send + Sync + 'static> {
    Served(ProgramHandle<P>),
    /// Compile here; with the fleet's lease on this program when this process claimed it.
    Compile(Option<Lease>),
    /// Compile here while the lookup (or the claim of its lease) goes on, and use whichever
    /// finishes first.
    Race(Hedge),
}

/// The program cache of one GPU. Share it between threads by reference or in an `Arc`.
pub struct ProgramCache<P: Send + Sync + 'static> {
    gpu: GpuId,
    memory: Arc<MemoryTier<P>>,
    flights: SingleFlight<Arc<Entry<P>>>,
    disk: Option<DiskTier>,
    /// Which programs this machine used, in first-use order (with the disk tier only).
    working_set: Option<WorkingSet>,
    #[cfg(feature = "remote")]
    remote: Option<RemoteTier>,
    /// Why the configured remote tier is not used, when it is not.
    pub(super) remote_problem: Option<String>,
    /// How long a miss waits for another process's compile of the same program.
    wait_budgets: WaitBudgets,
    /// Keys whose stored program did not match its request, warned about once.
    mismatched: std::sync::Mutex<std::collections::HashSet<CacheKey>>,
    counters: Counters,
}

impl<P: Send + Sync + 'static> ProgramCache<P> {
    /// Opens the cache for `gpu`. Never fails: a folder that cannot be used leaves the cache in
    /// memory only, with one warning; a folder that can be read but not written (or
    /// `config.read_only`) is used read-only, said once. Opening changes nothing on disk beyond
    /// creating the folders and description files: pruning (size and age bounds) happens only
    /// when this process writes an entry.
    pub fn open(gpu: GpuId, config: &CacheConfig) -> ProgramCache<P> {
        let disk = config.dir.as_deref().and_then(|dir| DiskTier::open(&gpu, config, dir));
        let (working_set, known) = match &disk {
            Some(disk) if !disk.read_only() => {
                let (set, known) = WorkingSet::open(disk.gpu_dir());
                (Some(set), known)
            }
            _ => (None, Vec::new()),
        };
        let wait_budgets = WaitBudgets::new(&known);
        #[cfg(feature = "remote")]
        let (remote, remote_problem) = match (&config.remote, &config.remote_problem) {
            (_, Some(problem)) => (None, Some(problem.clone())),
            (Some(remote), None) => match RemoteTier::open(&gpu, remote) {
                Ok(tier) => (Some(tier), None),
                Err(why) => (
                    None,
                    Some(format!("the remote program cache {} is not used: {why}", remote.redacted_url())),
                ),
            },
            (None, None) => (None, None),
        };
        #[cfg(feature = "remote")]
        if let Some(remote) = &remote {
            for (key, compile_ns) in &known {
                remote.budgets.record(*key, *compile_ns);
            }
            if let (Some(disk), Some(root)) = (&disk, &config.dir) {
                if !disk.read_only() {
                    remote.sync_driver_caches(root, known.is_empty());
                    remote.keep_ledger_in(disk.gpu_dir());
                }
            }
        }
        #[cfg(not(feature = "remote"))]
        let remote_problem = {
            let _ = known;
            config.remote_problem.clone().or_else(|| {
                config.remote.as_ref().map(|remote| {
                    format!(
                        "the remote program cache {} is not used: this build of Sparkle has no remote cache \
                         tier (cargo feature `remote`)",
                        remote.redacted_url()
                    )
                })
            })
        };
        if let Some(problem) = &remote_problem {
            super::remote::report_problem_once(problem);
        }
        ProgramCache {
            gpu,
            memory: MemoryTier::new(config.max_memory_entries, config.max_memory_bytes),
            flights: SingleFlight::new(),
            disk,
            working_set,
            #[cfg(feature = "remote")]
            remote,
            remote_problem,
            wait_budgets,
            mismatched: std::sync::Mutex::new(std::collections::HashSet::new()),
            counters: Counters::default(),
        }
    }

    /// The GPU this cache holds programs for.
    pub fn gpu(&self) -> &GpuId {
        &self.gpu
    }

    pub(super) fn disk(&self) -> Option<&DiskTier> {
        self.disk.as_ref().filter(|disk| disk.enabled())
    }

    /// Whether entries are written to disk (false when configured memory-only, read-only or
    /// degraded).
    pub fn is_persistent(&self) -> bool {
        self.disk().is_some_and(|disk| !disk.read_only())
    }

    /// Whether entries are read from disk but never written there (configured, or a folder this
    /// process may not write).
    pub fn is_read_only(&self) -> bool {
        self.disk().is_some_and(DiskTier::read_only)
    }

    /// This GPU's folder inside the cache folder (also when read-only); `None` when memory-only.
    pub fn gpu_dir(&self) -> Option<PathBuf> {
        self.disk().map(|disk| disk.gpu_dir().to_path_buf())
    }

    /// Looks `key` up in memory, traced: the handle (a hit, counted), or the lookup's open span
    /// for the caller to finish as a miss.
    #[inline]
    fn look_up(&self, key: &CacheKey) -> Result<ProgramHandle<P>, crate::trace::Span> {
        let mut span = crate::trace::span("cache", "cache memory");
        match self.memory.get(key) {
            Some(handle) => {
                span.arg("hit", true);
                Ok(handle)
            }
            None => Err(span),
        }
    }

    /// The program for `key` if memory holds it (counted and traced as [`get`](Self::get)'s
    /// memory hits are), without anything to build it from.
    #[inline]
    pub fn memory_hit(&self, key: &CacheKey) -> Option<ProgramHandle<P>> {
        // A miss is not a lookup of its own in the trace: `get` follows and shows it.
        self.look_up(key).map_err(crate::trace::Span::discard).ok()
    }

    /// The program for `key`: from memory, else loaded from disk or compiled by `source`, once
    /// however many threads ask at the same time. A compile error (with the compiler's log) goes
    /// to every thread that asked, and nothing is cached.
    #[inline]
    pub fn get<S: ProgramSource<P>>(&self, key: &CacheKey, source: &S) -> Result<ProgramHandle<P>, S::Error> {
        let mut span = match self.look_up(key) {
            Ok(handle) => return Ok(handle),
            Err(span) => span,
        };
        // A flow from this miss to the compile it may cause.
        let miss_flow =
            if span.is_on() { crate::trace::next_flow_id(crate::trace::FlowKind::Miss) } else { 0 };
        if miss_flow != 0 {
            span.arg("hit", false);
            span.flow(crate::trace::Flow::Out(miss_flow));
        }
        drop(span);
        self.get_slow(key, source, miss_flow)
    }

    #[cold]
    fn get_slow<S: ProgramSource<P>>(
        &self,
        key: &CacheKey,
        source: &S,
        miss_flow: u64,
    ) -> Result<ProgramHandle<P>, S::Error> {
        loop {
            match self.flights.join(*key, || self.memory.get(key)) {
                Join::Found(handle) => return Ok(handle),
                Join::Follow(follower) => match follower.wait() {
                    Outcome::Done(Ok(entry)) => {
                        stats::add(&self.counters.coalesced, 1);
                        return Ok(ProgramHandle::new(entry));
                    }
                    Outcome::Done(Err(shared)) => {
                        if let Some(err) = shared.downcast_ref::<S::Error>() {
                            stats::add(&self.counters.coalesced, 1);
                            return Err(err.clone());
                        }
                        // The leader used another source type; this thread tries on its own.
                    }
                    Outcome::Abandoned => {}
                },
                Join::Lead(leader) => {
                    return match self.load_or_compile(*key, source, miss_flow) {
                        Ok((handle, compiled_here)) => {
                            leader.finish(Ok(handle.entry_arc()));
                            self.keep_recipe(*key, source, compiled_here);
                            Ok(handle)
                        }
                        Err(err) => {
                            leader.finish(Err(Arc::new(err.clone())));
                            Err(err)
                        }
                    };
                }
            }
        }
    }

    /// The leader's work: no lock is held here. The handle, and whether this process compiled
    /// it (rather than finding it on disk or on the remote).
    fn load_or_compile<S: ProgramSource<P>>(
        &self,
        key: CacheKey,
        source: &S,
        miss_flow: u64,
    ) -> Result<(ProgramHandle<P>, bool), S::Error> {
        // Held until this function returns, after the publish: other processes of this machine
        // that miss the key meanwhile wait for this one's entry instead of compiling it too.
        let mut _turn = None;
        // A machine's first process waits for the fleet's driver caches before anything reaches
        // the driver; its remote lookup need not wait with it.
        #[cfg(feature = "remote")]
        let early = self.look_up_early(key);
        #[cfg(not(feature = "remote"))]
        let early = None;
        self.before_driver_work();
        let mut over_foreign = false;
        if let Some(disk) = self.disk() {
            let found = match early {
                // This machine's turn was taken before the wait: one look finds what another
                // process of this machine published before it.
                Some(lock) => {
                    _turn = Some(lock);
                    self.look_on_disk(disk, key, source, &mut over_foreign)?
                }
                None => match self.look_on_disk(disk, key, source, &mut over_foreign)? {
                    Some(found) => Some(found),
                    None => {
                        let (lock, look_again) = self.take_turn(disk, key);
                        _turn = lock;
                        if look_again {
                            self.look_on_disk(disk, key, source, &mut over_foreign)?
                        } else {
                            None
                        }
                    }
                },
            };
            if let Some(found) = found {
                #[cfg(feature = "remote")]
                if let Some(remote) = &self.remote {
                    remote.forget_early(key);
                }
                return Ok((found, false));
            }
        }
        #[cfg(feature = "remote")]
        let mut lease: Option<Lease> = None;
        #[cfg(feature = "remote")]
        if let Some(remote) = &self.remote {
            let mut span = crate::trace::span("cache", "cache remote");
            span.arg_with("budget_us", || remote.budgets.for_key(key).as_micros() as u64);
            let from_remote = self.load_remote(remote, key, source, over_foreign)?;
            span.arg(
                "result",
                match &from_remote {
                    FromRemote::Served(_) => "hit",
                    FromRemote::Compile(_) => "miss: compile here",
                    FromRemote::Race(_) => "late: compile and lookup race",
                },
            );
            drop(span);
            match from_remote {
                FromRemote::Served(found) => return Ok((found, false)),
                FromRemote::Compile(claimed) => lease = claimed,
                FromRemote::Race(hedge) => match self.race(remote, key, source, hedge, over_foreign)? {
                    Ok(found) => return Ok((found, false)),
                    Err(claimed) => lease = claimed,
                },
            }
        }
        let built = match traced_compile(source, miss_flow) {
            Ok(built) => built,
            Err(err) => {
                #[cfg(feature = "remote")]
                if let (Some(remote), Some(lease)) = (&self.remote, lease) {
                    remote.release(lease);
                }
                return Err(self.compile_failed(err));
            }
        };
        let handle = self.compiled(
            key,
            built,
            over_foreign,
            #[cfg(feature = "remote")]
            lease,
        );
        Ok((handle, true))
    }

    /// The disk step of a miss: a verified entry the backend loads (`Some`), else `None` after
    /// dealing with what was there. `over_foreign` is set when another user's entry is in the way.
    fn look_on_disk<S: ProgramSource<P>>(
        &self,
        disk: &DiskTier,
        key: CacheKey,
        source: &S,
        over_foreign: &mut bool,
    ) -> Result<Option<ProgramHandle<P>>, S::Error> {
        let start = Instant::now();
        let mut span = crate::trace::span("cache", "cache disk");
        let lookup = disk.lookup(key);
        span.arg_with("result", || lookup_name(&lookup));
        drop(span);
        match lookup {
            Lookup::Missing | Lookup::Unusable => {}
            Lookup::Foreign => *over_foreign = true,
            Lookup::Rejected => {
                stats::add(&self.counters.disk_rejected, 1);
                stats::add_duration(&self.counters.load_ns, start.elapsed());
            }
            Lookup::Hit(verified) => {
                let loaded = traced_load(source, &verified.blob);
                stats::add_duration(&self.counters.load_ns, start.elapsed());
                let loaded = loaded.map(|program| {
                    let mismatch = self.mismatch(source, &program);
                    (program, mismatch)
                });
                match loaded {
                    Ok((program, Some(why))) => {
                        drop(program);
                        let first =
                            self.mismatched.lock().unwrap_or_else(PoisonError::into_inner).insert(key);
                        if first {
                            tracing::warn!(%key, "a cache entry on disk is not used and is compiled again: {why}");
                        }
                        disk.remove(key, verified.identity);
                    }
                    Ok((program, None)) => {
                        disk.record_use(&verified);
                        self.record_first_use(key, verified.header.compile_time_ns);
                        stats::add(&self.counters.disk_hits, 1);
                        stats::add(&self.counters.saved_ns, verified.header.compile_time_ns);
                        let cost = verified.blob.bytes.len() as u64;
                        return Ok(Some(self.memory.insert(
                            key,
                            program,
                            cost,
                            verified.header.compile_time_ns,
                        )));
                    }
                    Err(LoadFailure::Failed(err)) => {
                        // Out of memory or a lost device says nothing about the entry: keep it.
                        stats::add(&self.counters.load_errors, 1);
                        return Err(err);
                    }
                    Err(LoadFailure::Refused(reason)) => {
                        tracing::warn!(
                            %key, %reason,
                            "the driver refused a verified cache entry; compiling it again"
                        );
                        stats::add(&self.counters.driver_refused, 1);
                        disk.remove(key, verified.identity);
                    }
                }
            }
        }
        Ok(None)
    }

    /// This process's turn at `key` among the processes of this machine sharing the cache
    /// folder, waiting (bounded) for one that is compiling it now: the lock to hold while
    /// compiling, if this process took it, and whether to look on disk again (the lock was
    /// free or waited for, so another process may have published the entry since the lookup).
    fn take_turn(&self, disk: &DiskTier, key: CacheKey) -> (Option<ProcessLock>, bool) {
        let waited = |wait: std::time::Duration| {
            stats::add(&self.counters.process_waits, 1);
            stats::add_duration(&self.counters.process_wait_ns, wait);
        };
        match disk.take_turn(key, self.wait_budgets.for_key(key)) {
            Turn::Held(lock, wait) => {
                if let Some(wait) = wait {
                    waited(wait);
                }
                (Some(lock), true)
            }
            Turn::Finished(wait) => {
                waited(wait);
                (None, true)
            }
            Turn::GaveUp(wait) => {
                waited(wait);
                stats::add(&self.counters.process_waits_gave_up, 1);
                (None, true)
            }
            Turn::Unavailable => (None, false),
        }
    }

    /// Counts a compile that failed.
    fn compile_failed<E>(&self, err: E) -> E {
        stats::add(&self.counters.misses, 1);
        stats::add(&self.counters.compiles, 1);
        stats::add(&self.counters.compile_errors, 1);
        err
    }

    /// Keeps what a compile built: on disk, on the remote (in the background), in memory.
    fn compiled(
        &self,
        key: CacheKey,
        built: super::Built<P>,
        over_foreign: bool,
        #[cfg(feature = "remote")] lease: Option<Lease>,
    ) -> ProgramHandle<P> {
        stats::add(&self.counters.misses, 1);
        stats::add(&self.counters.compiles, 1);
        stats::add_duration(&self.counters.compile_ns, built.compile_time);
        let compile_ns = duration_ns(built.compile_time);
        self.record_first_use(key, compile_ns);
        let cost = built.blob.as_ref().map_or(1, |blob| blob.bytes.len() as u64);
        if let (Some(disk), Some(blob)) = (self.disk(), &built.blob) {
            let mut span = crate::trace::span("cache", "cache publish (disk)");
            span.arg("bytes", blob.bytes.len());
            let published = disk.publish(key, blob, built.compile_time, over_foreign);
            drop(span);
            if published {
                stats::add(&self.counters.disk_writes, 1);
            }
        }
        #[cfg(feature = "remote")]
        if let Some(remote) = &self.remote {
            remote.budgets.record(key, compile_ns);
            match &built.blob {
                Some(blob) => {
                    let mut span = crate::trace::span("cache", "cache publish (remote, queued)");
                    span.arg("bytes", blob.bytes.len());
                    remote.publish(key, blob, built.compile_time, lease)
                }
                None => {
                    if let Some(lease) = lease {
                        remote.release(lease);
                    }
                }
            }
        }
        self.memory.insert(key, built.program, cost, compile_ns)
    }

    /// The hedge: compiles while the remote lookup that outlived its budget goes on, and uses
    /// whichever finishes first. When the answer is a miss the compile goes on while this
    /// process claims the program's lease: if another machine holds it, the compile is given up
    /// and this process waits for that machine's entry as any waiter does, so that a slow store
    /// does not make every machine compile everything. `Err(lease)`: compile here (holding the
    /// fleet's lease on it, when one was taken) — the remote's entry came first but the driver
    /// refused it, or the holder's entry never came.
    #[cfg(feature = "remote")]
    fn race<S: ProgramSource<P>>(
        &self,
        remote: &RemoteTier,
        key: CacheKey,
        source: &S,
        mut stage: Hedge,
        over_foreign: bool,
    ) -> Result<Result<ProgramHandle<P>, Option<Lease>>, S::Error> {
        let mut span = crate::trace::span("cache", "hedge: compile against the remote lookup");
        span.arg_with("kernel", || source.kernel_name().to_owned());
        let mut won = None;
        let mut lease = None;
        let raced = source.compile_racing(&mut || match &mut stage {
            Hedge::Lookup(late) => match remote.poll_late(late) {
                Some(RemoteLookup::Hit(header, blob)) => {
                    won = Some((header, blob));
                    true
                }
                Some(RemoteLookup::Miss) => {
                    stage = remote.claim_later(key).map_or(Hedge::Done, Hedge::Claiming);
                    false
                }
                Some(_) => {
                    stage = Hedge::Done;
                    false
                }
                None => false,
            },
            Hedge::Claiming(pending) => match pending.poll() {
                // The machine that compiled it may have published and released its lease
                // between the lookup and the claim: look once more.
                Some(Claim::Mine(claimed)) => {
                    lease = Some(claimed);
                    stage = Hedge::Rechecking(remote.recheck_later(key));
                    false
                }
                // Another machine compiles it: this compile is not wanted.
                Some(Claim::Theirs) => {
                    stage = Hedge::Theirs;
                    true
                }
                Some(Claim::Unknown) => {
                    stage = Hedge::Done;
                    false
                }
                None => false,
            },
            Hedge::Rechecking(pending) => match pending.poll() {
                Some(Some((header, blob))) => {
                    if let Some(claimed) = lease.take() {
                        remote.release(claimed);
                    }
                    won = Some((header, blob));
                    true
                }
                Some(None) => {
                    stage = Hedge::Done;
                    false
                }
                None => false,
            },
            Hedge::Theirs | Hedge::Done => false,
        });
        match (raced, won) {
            (Ok(Some(built)), _) => {
                span.arg("winner", "compile");
                drop(span);
                Ok(Ok(self.compiled(key, built, over_foreign, lease)))
            }
            (Ok(None), Some((header, blob))) => {
                span.arg("winner", "remote");
                drop(span);
                remote.won_hedge();
                match self.serve_remote(remote, key, source, header, blob, over_foreign)? {
                    FromRemote::Served(found) => Ok(Ok(found)),
                    _ => Ok(Err(lease)),
                }
            }
            // Given up for another machine's compile: wait for its entry.
            (Ok(None), None) if matches!(stage, Hedge::Theirs) => {
                span.arg("winner", "another machine");
                drop(span);
                match remote.wait_for(key) {
                    Waited::Hit(header, blob) => {
                        match self.serve_remote(remote, key, source, header, blob, over_foreign)? {
                            FromRemote::Served(found) => Ok(Ok(found)),
                            _ => Ok(Err(None)),
                        }
                    }
                    Waited::Mine(claimed) => Ok(Err(Some(claimed))),
                    Waited::GaveUp => Ok(Err(None)),
                }
            }
            // Gave up with nothing to show: cannot happen, but compiling is always right.
            (Ok(None), None) => Ok(Err(lease)),
            (Err(err), _) => {
                if let Some(claimed) = lease {
                    remote.release(claimed);
                }
                Err(self.compile_failed(err))
            }
        }
    }

    /// While the driver caches are fetched from the fleet (a machine's first process for this
    /// GPU), starts the remote lookup of `key` before waiting for them; when this process can
    /// take its machine's turn at `key` at once, a miss also claims the program's fleet lease
    /// then, and the turn is returned, to be held as if taken after the wait. Another process
    /// of this machine holding the turn: the lookup alone goes (that process claims).
    #[cfg(feature = "remote")]
    fn look_up_early(&self, key: CacheKey) -> Option<ProcessLock> {
        let remote = self.remote.as_ref()?;
        if !remote.driver_caches_pending() {
            return None;
        }
        let (lock, claim) = match self.disk().map(|disk| disk.take_turn(key, std::time::Duration::ZERO)) {
            Some(Turn::Held(lock, _)) => (Some(lock), true),
            Some(Turn::Unavailable) | None => (None, true),
            Some(Turn::Finished(_) | Turn::GaveUp(_)) => (None, false),
        };
        remote.look_up_early(key, claim);
        lock
    }

    /// Lets the driver caches being fetched from the remote arrive (bounded) before the first
    /// load or compile reaches the driver.
    fn before_driver_work(&self) {
        #[cfg(feature = "remote")]
        if let Some(remote) = &self.remote {
            let _span = crate::trace::span("cache", "wait for the driver caches from the fleet");
            remote.settle_driver_caches();
        }
    }

    /// Why a program loaded from a stored entry fails its request's check
    /// ([`ProgramSource::check_loaded`]), if it does: then it is counted, and the caller drops it,
    /// reports it and compiles.
    fn mismatch<S: ProgramSource<P>>(&self, source: &S, program: &P) -> Option<String> {
        let why = source.check_loaded(program).err()?;
        stats::add(&self.counters.interface_refused, 1);
        Some(format!(
            "its program does not match the kernel asked for (if the compiled program fails the same way, \
             the kernel's spec is what does not match): {why}"
        ))
    }

    fn record_first_use(&self, key: CacheKey, compile_ns: u64) {
        self.wait_budgets.record(key, compile_ns);
        if let Some(set) = &self.working_set {
            set.record(key, compile_ns);
        }
    }

    /// The remote step of a miss: a verified remote entry the backend loads is kept on disk and
    /// served; `Ok(None)` means compile. A driver that refuses the blob gets the key marked as
    /// refused for this process.
    #[cfg(feature = "remote")]
    fn load_remote<S: ProgramSource<P>>(
        &self,
        remote: &RemoteTier,
        key: CacheKey,
        source: &S,
        over_foreign: bool,
    ) -> Result<FromRemote<P>, S::Error> {
        let (header, blob) = match remote.lookup(key) {
            RemoteLookup::Hit(header, blob) => (header, blob),
            // Nobody has it: compile here, or wait for the machine compiling it right now.
            RemoteLookup::Miss => match remote.claim_within(key) {
                // No answer within the budget: compile while it comes.
                Err(pending) => return Ok(FromRemote::Race(Hedge::Claiming(pending))),
                Ok(claim) => match claim {
                    // The machine that compiled it may have published and released its lease
                    // between our lookup and our claim: look once more before compiling.
                    Claim::Mine(lease) => match remote.recheck(key) {
                        Some((header, blob)) => {
                            remote.release(lease);
                            (header, blob)
                        }
                        None => return Ok(FromRemote::Compile(Some(lease))),
                    },
                    Claim::Unknown => return Ok(FromRemote::Compile(None)),
                    Claim::Theirs => match remote.wait_for(key) {
                        Waited::Hit(header, blob) => (header, blob),
                        Waited::Mine(lease) => return Ok(FromRemote::Compile(Some(lease))),
                        Waited::GaveUp => return Ok(FromRemote::Compile(None)),
                    },
                },
            },
            RemoteLookup::Late(late) => return Ok(FromRemote::Race(Hedge::Lookup(late))),
            _ => return Ok(FromRemote::Compile(None)),
        };
        self.serve_remote(remote, key, source, header, blob, over_foreign)
    }

    /// Loads a verified remote entry: kept on disk and served, or, when the driver refuses
    /// it, the key is refused for this process and the caller compiles.
    #[cfg(feature = "remote")]
    fn serve_remote<S: ProgramSource<P>>(
        &self,
        remote: &RemoteTier,
        key: CacheKey,
        source: &S,
        header: super::entry::EntryHeader,
        blob: super::Blob,
        over_foreign: bool,
    ) -> Result<FromRemote<P>, S::Error> {
        let start = Instant::now();
        let loaded = traced_load(source, &blob);
        stats::add_duration(&self.counters.load_ns, start.elapsed());
        let loaded = loaded.map(|program| {
            let mismatch = self.mismatch(source, &program);
            (program, mismatch)
        });
        match loaded {
            Ok((program, Some(why))) => {
                drop(program);
                remote.reject(key, &why);
                Ok(FromRemote::Compile(None))
            }
            Ok((program, None)) => {
                remote.loaded();
                stats::add(&self.counters.saved_ns, header.compile_time_ns);
                self.record_first_use(key, header.compile_time_ns);
                let compile_time = std::time::Duration::from_nanos(header.compile_time_ns);
                if let Some(disk) = self.disk() {
                    if disk.publish(key, &blob, compile_time, over_foreign) {
                        stats::add(&self.counters.disk_writes, 1);
                    }
                }
                let cost = blob.bytes.len() as u64;
                Ok(FromRemote::Served(self.memory.insert(key, program, cost, header.compile_time_ns)))
            }
            Err(LoadFailure::Failed(err)) => {
                stats::add(&self.counters.load_errors, 1);
                Err(err)
            }
            Err(LoadFailure::Refused(reason)) => {
                remote.reject(key, &format!("the driver refused it: {reason}"));
                Ok(FromRemote::Compile(None))
            }
        }
    }

    /// The remote tier, when one is configured and usable.
    #[cfg(feature = "remote")]
    pub(super) fn remote(&self) -> Option<&RemoteTier> {
        self.remote.as_ref()
    }

    /// Gets every request, in parallel (up to the machine's parallelism), results in order.
    pub fn warm_up<S: ProgramSource<P> + Sync>(
        &self,
        requests: &[(CacheKey, S)],
    ) -> Vec<Result<ProgramHandle<P>, S::Error>> {
        let threads = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        self.warm_up_with_threads(requests, threads)
    }

    /// [`warm_up`](Self::warm_up) with up to `threads` requests in flight: more than the CPU
    /// count pays off when a backend's compile mostly waits on a driver compiling on its own
    /// threads.
    pub fn warm_up_with_threads<S: ProgramSource<P> + Sync>(
        &self,
        requests: &[(CacheKey, S)],
        threads: usize,
    ) -> Vec<Result<ProgramHandle<P>, S::Error>> {
        let threads = threads.min(requests.len());
        if threads <= 1 {
            return requests.iter().map(|(key, source)| self.get(key, source)).collect();
        }
        let next = AtomicUsize::new(0);
        let work = || {
            let mut done = Vec::new();
            loop {
                let index = next.fetch_add(1, Relaxed);
                let Some((key, source)) = requests.get(index) else { return done };
                done.push((index, self.get(key, source)));
            }
        };
        let parts: Vec<Vec<_>> = std::thread::scope(|scope| {
            // The calling thread works too; a helper that cannot be spawned is simply missing.
            let helpers: Vec<_> = (1..threads)
                .filter_map(|_| {
                    std::thread::Builder::new().name("sparkle-warm-up".into()).spawn_scoped(scope, work).ok()
                })
                .collect();
            let mut parts = vec![work()];
            for helper in helpers {
                parts.push(helper.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
            }
            parts
        });
        let mut slots: Vec<Option<Result<ProgramHandle<P>, S::Error>>> =
            (0..requests.len()).map(|_| None).collect();
        for (index, result) in parts.into_iter().flatten() {
            slots[index] = Some(result);
        }
        slots
            .into_iter()
            .map(|slot| slot.expect("every index below requests.len() is taken by exactly one worker"))
            .collect()
    }

    /// A snapshot of the statistics.
    /// Programs this cache compiled so far ([`CacheStats::compiles`] alone: one counter read,
    /// where the statistics visit every tier).
    pub fn compiles(&self) -> u64 {
        self.counters.compiles.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Everything counted so far, per tier.
    pub fn stats(&self) -> CacheStats {
        let mut stats = CacheStats::default();
        self.memory.fill(&mut stats);
        self.counters.fill(&mut stats);
        if let Some(disk) = &self.disk {
            disk.fill(&mut stats);
        }
        #[cfg(feature = "remote")]
        if let Some(remote) = &self.remote {
            remote.fill(&mut stats);
        }
        stats.remote_problem = self.remote_problem.clone();
        stats
    }

    /// Whether `key` is in memory; not counted as a use.
    pub fn contains_in_memory(&self, key: &CacheKey) -> bool {
        self.memory.contains(key)
    }

    /// Keys in memory, least recently used first.
    pub fn memory_keys_by_recency(&self) -> Vec<CacheKey> {
        self.memory.keys_by_recency()
    }

    /// Keys being loaded or compiled right now.
    pub fn in_flight(&self) -> usize {
        self.flights.running()
    }

    /// Keeps what is needed to build `key` again beside its entry (`recipe`), once: after a
    /// request this process served from disk, the remote or a compile, with a writable disk.
    fn keep_recipe<S: ProgramSource<P>>(&self, key: CacheKey, source: &S, compiled_here: bool) {
        if let Some(disk) = self.disk().filter(|disk| !disk.read_only()) {
            let _kept = super::recipe::keep(disk.gpu_dir(), &self.gpu, key, || source.recipe());
            // The fleet gets it too, so that its machines rebuild after a driver update: from
            // the process that compiled the program, which publishes the entry too. One that
            // found the entry on disk or on the remote does not publish again what the fleet
            // has (a fresh machine fed by the fleet would otherwise upload a recipe per program
            // and wait for those uploads at exit); `sparkle cache push` publishes the others.
            #[cfg(not(feature = "remote"))]
            let _ = compiled_here;
            #[cfg(feature = "remote")]
            if let (Some(sealed), Some(remote), true) = (_kept, self.remote(), compiled_here) {
                super::remote::publish_recipe(remote, key, sealed);
            }
        }
    }

    /// Whether this GPU folder holds an entry file for `key` (not verified; not a use).
    pub fn has_entry_on_disk(&self, key: &CacheKey) -> bool {
        self.disk().is_some_and(|disk| super::files::entry_path(disk.gpu_dir(), *key).is_file())
    }

    /// Counts a program built again from another driver's recipe (`recipe`).
    pub fn note_rebuilt(&self) {
        stats::add(&self.counters.rebuilt, 1);
    }
}

/// A disk lookup's outcome, in the trace.
fn lookup_name(lookup: &Lookup) -> &'static str {
    match lookup {
        Lookup::Missing => "missing",
        Lookup::Foreign => "another user's entry",
        Lookup::Rejected => "rejected",
        Lookup::Unusable => "unusable",
        Lookup::Hit(_) => "hit",
    }
}

/// `source.compile()` in a trace span named after the kernel, ending the flow from its miss.
fn traced_compile<P, S: ProgramSource<P>>(source: &S, miss_flow: u64) -> Result<super::Built<P>, S::Error> {
    let mut span = crate::trace::span("cache", "compile");
    span.arg_with("kernel", || source.kernel_name().to_owned());
    if miss_flow != 0 {
        span.flow(crate::trace::Flow::In(miss_flow));
    }
    source.compile()
}

/// `source.load(blob)` in a trace span named after the kernel.
fn traced_load<P, S: ProgramSource<P>>(source: &S, blob: &super::Blob) -> Result<P, LoadFailure<S::Error>> {
    let mut span = crate::trace::span("cache", "load program");
    span.arg_with("kernel", || source.kernel_name().to_owned());
    span.arg("bytes", blob.bytes.len());
    source.load(blob)
}
