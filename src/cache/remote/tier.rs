//! `RemoteTier`: the fleet cache below one GPU's disk tier. Lookups wait at most their budget,
//! and what comes back is checked — signature first when keys are trusted, then the same header,
//! identity and checksum checks as a disk entry — before a backend or the disk sees a byte. A
//! key whose object failed is never fetched again by this process and is reported once.
//! Publishing happens in the background, create-if-absent, only for entries that verify.
//!
//! Bounds. A lookup always asks, and waits at most its budget; past it the program compiles
//! while the request goes on, and whichever finishes first is used. Until the remote has
//! answered anything, one lookup waits its budget and the others do not wait at all; a remote
//! measured slower than the budget is not waited for either. A publish of a program whose
//! lookup has not answered waits for that answer (in the background), and goes only if the
//! remote does not have the program. Dropping the tier waits for the publishes in flight at
//! most one exit budget (`SPARKLE_CACHE_REMOTE_EXIT_MS`), and not at all for a remote that has
//! not answered or is slower than a lookup budget: a hung or distant remote costs a process at
//! most about one budget, whatever it compiled.
//!
//! The async clients run on the tier's own small runtime; callers block on a channel with a
//! timeout, so nothing async reaches the rest of the crate.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::breaker::{Breaker, Permit, Tripped};
use super::budget::Budgets;
use super::check::{self, Verdict};
use super::config::{
    RemoteConfig, REMOTE_EXIT_ENV, REMOTE_READ_ONLY_ENV, REMOTE_UNSIGNED_ENV, SIGNING_KEY_ENV,
    TRUSTED_KEYS_ENV,
};
use super::connecting::Connecting;
use super::driver_archive::DriverFolders;
use super::early::EarlyAnswers;
use super::envelope::{self, Kind, Provenance};
use super::lease::{self, Lease};
use super::signing::{Signer25519, TrustedKeys};
use super::store::{Got, Put, Store, StoreError};
use crate::cache::entry::{self, EntryHeader, Expect};
use crate::cache::stats::{self, duration_ns, CacheStats};
use crate::cache::working_set::{self, WORKING_SET_FILE};
use crate::cache::{Blob, CacheKey, GpuId};

/// Publishes in flight beyond this are dropped: a remote that takes them slower than programs
/// compile must not make the process hold every blob in memory.
const MAX_PENDING_PUBLISHES: usize = 256;
/// A remote known to be slower than a compile still gets one lookup this often.
const SLOW_RECHECK: Duration = Duration::from_secs(1);
/// How long dropping the tier waits for publishes still in flight, unless the user set it (or a
/// longer fixed lookup budget).
pub(crate) const DEFAULT_EXIT_BUDGET: Duration = Duration::from_millis(100);
/// A program entry larger than this is not one of ours (a GL binary or code object is
/// kilobytes to a few megabytes); a larger remote object is refused unread.
pub(crate) const MAX_ENTRY_BYTES: usize = 32 << 20;
/// The fleet's working set lists at most this many programs (a working set is a few thousand).
pub(crate) const MAX_WORKING_SET_KEYS: usize = 20_000;
/// Its object is at most this large (a line is 50 bytes or so).
const MAX_WORKING_SET_BYTES: usize = 2 << 20;

/// How long after connecting started a remote that has answered nothing is still waited for
/// (never more than one `budget` past the open, however): connecting takes two round trips (a
/// handshake and a first request), and a remote whose round trip fits the budget is worth
/// waiting for. Since connecting starts while the backend opens, a hung or distant remote costs
/// a process what of this the open did not cover: nothing where the open takes longer.
pub(crate) fn connect_deadline(budget: Duration) -> Duration {
    budget * 2
}

/// How long one request of a waiter may take.
const WAIT_REQUEST: Duration = Duration::from_secs(2);

/// Who compiles a program the remote does not have.
pub(crate) enum Claim {
    /// This process: it holds the lease.
    Mine(Lease),
    /// Another machine is compiling it right now.
    Theirs,
    /// The remote could not say (slow, failing): compile without a lease.
    Unknown,
}

/// What waiting for another machine's compile ended with.
pub(crate) enum Waited {
    /// Its entry came, verified.
    Hit(EntryHeader, Blob),
    /// Its lease went without an entry (the holder failed or died): this process took the
    /// lease over and compiles.
    Mine(Lease),
    /// Waited as long as the holder's expected compile allows, or the remote failed: the
    /// caller compiles without a lease.
    GaveUp,
}

/// What a lookup found.
pub(crate) enum RemoteLookup {
    /// A verified entry: its header and blob.
    Hit(EntryHeader, Blob),
    Miss,
    /// Not asked: the key was rejected before, the breaker is open, or no remote answered in
    /// time before.
    Skipped,
    /// The object failed verification (counted and reported).
    Rejected,
    /// No answer within the budget: the caller compiles while the request goes on, and uses
    /// whichever finishes first ([`RemoteTier::poll_late`]).
    Late(LateLookup),
    Failed,
}

/// A lookup still under way after its budget ran out. Dropped unanswered (the compile won),
/// it counts as a failure for the breaker, as a request that never answers would.
pub(crate) struct LateLookup {
    key: CacheKey,
    answer: Receiver<Result<Option<Got>, StoreError>>,
    budget: Duration,
    shared: Arc<Shared>,
    answered: bool,
}

impl Drop for LateLookup {
    fn drop(&mut self) {
        // A lookup that did not wait at all (a remote known slow or silent) says nothing new.
        if !self.answered && !self.budget.is_zero() {
            self.shared.failed(&format!(
                "no answer within {:.1} ms (what compiling costs), so it compiled instead",
                self.budget.as_secs_f64() * 1e3
            ));
        }
    }
}

#[derive(Default)]
pub(crate) struct RemoteCounters {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub rejected: AtomicU64,
    pub hedged: AtomicU64,
    /// Hedges the remote won: its entry came while the compile ran, and the compile was dropped.
    pub hedges_won: AtomicU64,
    pub errors: AtomicU64,
    pub skipped: AtomicU64,
    pub publishes: AtomicU64,
    pub publish_existing: AtomicU64,
    pub publish_errors: AtomicU64,
    /// Objects that did not verify, replaced by this machine's publish.
    pub replaced: AtomicU64,
    pub lookups: AtomicU64,
    pub lookup_ns: AtomicU64,
    pub waits: AtomicU64,
}

impl RemoteCounters {
    /// The counters now, as one process's ledger entry.
    fn snapshot(&self) -> super::RemoteLedger {
        let get = |counter: &AtomicU64| counter.load(Relaxed);
        super::RemoteLedger {
            processes: 1,
            hits: get(&self.hits),
            misses: get(&self.misses),
            rejected: get(&self.rejected),
            hedged: get(&self.hedged),
            hedges_won: get(&self.hedges_won),
            errors: get(&self.errors),
            skipped: get(&self.skipped),
            waits: get(&self.waits),
            publishes: get(&self.publishes),
            publish_existing: get(&self.publish_existing),
            publish_errors: get(&self.publish_errors),
            replaced: get(&self.replaced),
            lookups: get(&self.lookups),
            lookup_ns: get(&self.lookup_ns),
        }
    }
}

/// What the tier's tasks share with it.
struct Shared {
    store: Arc<Store>,
    url: String,
    gpu_folder: String,
    expect_backend: u32,
    gpu_hash: u64,
    provenance: Provenance,
    signer: Option<Signer25519>,
    trusted: Option<TrustedKeys>,
    breaker: Breaker,
    counters: RemoteCounters,
    pending: AtomicUsize,
    /// Whether the one "remote skipped" warning was given.
    warned_skip: AtomicBool,
    /// Why the remote could not be reached when the tier opened, said only once something needs
    /// the remote: a run that finds every program locally stays silent about it.
    deferred_skip: Mutex<Option<(Duration, String)>>,
    /// The last request failed outright (not merely slowly): publishing is pointless until one
    /// succeeds again.
    down: AtomicBool,
    /// When connecting started (`connecting.rs`: usually when the runtime began to open its
    /// backend, before the tier opened): the first requests are waited for only until
    /// [`connect_deadline`] past this, since a connection slower than a compile is not worth
    /// waiting for.
    opened_at: Instant,
    /// A smoothed round trip of requests on the open connection, in ns (0: none yet).
    round_trip_ns: AtomicU64,
    /// When a lookup last went to a remote known to be slower than its budget (ms since
    /// `opened_at`): one goes at most every [`SLOW_RECHECK`], so that a remote that became fast
    /// again is noticed.
    slow_recheck_ms: AtomicU64,
    /// The first requests' outcome: one round trip on the open connection, or why connecting
    /// failed; `None` while they are under way.
    probe: Mutex<Option<Result<Duration, String>>>,
    probed: std::sync::Condvar,
    /// The first requests connected (set under `probe`'s lock, announced on `probed`).
    connected: AtomicBool,
    /// Set when this process first needs to write (a publish, a lease claim, `write_check`):
    /// only then does the write check go. Most processes of a warm fleet only read, and a
    /// write check per process start would be one more request (an object store's PUT, its
    /// dearest kind) in the burst of first requests that their lookups queue behind.
    write_check_wanted: tokio::sync::Notify,
    /// Whether a publishing tier may write the store, learnt when it first needs to write:
    /// `None` until then, `Some(None)` when it was not asked (the first requests failed).
    writable: Mutex<Option<Option<Result<(), String>>>>,
    /// The store refused the write check: nothing is published.
    unwritable: AtomicBool,
    /// Lookups whose answer has not come, by key, and a publish of the key parked until one
    /// answers: it goes only if the remote does not have the program.
    awaited: Mutex<HashMap<CacheKey, Awaited>>,
    /// Whether any request was answered (the first requests, or a lookup).
    answered: AtomicBool,
    /// A lookup waited a whole budget for a remote that has answered nothing yet: later lookups
    /// do not wait for it (reset by the first answer).
    stalled: AtomicBool,
    /// How long dropping the tier waits for publishes in flight, at most.
    exit_budget: Duration,
    /// Publishes under way whose program's lease this process holds: other machines wait for
    /// them.
    leased_publishes: Arc<AtomicUsize>,
    /// When a request last got an answer (ns since `opened_at`): closing stops waiting for a
    /// remote that has not answered for one exit budget (or four round trips).
    last_answer_ns: AtomicU64,
}

/// The lookups of one key under way, and a publish waiting for their answer.
#[derive(Default)]
struct Awaited {
    in_flight: usize,
    parked: Option<Parked>,
}

/// A publish waiting for the answer of its key's lookup.
struct Parked {
    sealed: Vec<u8>,
    check_existing: bool,
    lease: Option<Lease>,
}

pub(crate) struct RemoteTier {
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
    /// Whether this machine publishes: not read-only, and able to sign when keys are trusted.
    publishes: bool,
    /// Why it does not, when it does not.
    not_publishing: Option<String>,
    /// The driver cache folders shared through the remote, when the cache has a folder.
    drivers: Mutex<Option<DriverFolders>>,
    /// The GPU folder whose ledger gets this process's counters at the end.
    ledger_dir: Mutex<Option<std::path::PathBuf>>,
    rejected: Mutex<HashSet<CacheKey>>,
    /// Lookups and claims that went while the driver caches were fetched (`early.rs`).
    early: EarlyAnswers,
    pub(crate) budgets: Budgets,
}

impl RemoteTier {
    /// Opens the tier for `gpu`. An error says why the configuration cannot be used (the caller
    /// reports it once, and the program runs on its local tiers): a signing key that is not a
    /// secret key or whose public half is not trusted, a store the client cannot be built for,
    /// or no trust chosen at all (neither trusted keys, nor a signing key, nor
    /// `SPARKLE_CACHE_REMOTE_UNSIGNED=1`).
    pub fn open(gpu: &GpuId, config: &RemoteConfig) -> Result<RemoteTier, String> {
        let trusted_list = config.trusted_keys.clone();
        let signer = config
            .signing_key
            .as_deref()
            .map(|path| Signer25519::load(path, trusted_list.as_deref()))
            .transpose()?;
        // A machine with a signing key and no list trusts its own key.
        let trusted_list = trusted_list.or_else(|| signer.as_ref().map(|signer| vec![signer.public_key()]));
        if trusted_list.is_none() && !config.allow_unsigned {
            return Err(format!(
                "nothing says which of its objects to trust, and without a signature whoever can write the \
                 store chooses the GPU code this machine runs; set {TRUSTED_KEYS_ENV} to the public keys of \
                 the machines that publish (`sparkle cache keygen FILE` makes a key pair; e.g. \
                 {TRUSTED_KEYS_ENV}=/etc/sparkle/fleet-keys.pub), or {REMOTE_UNSIGNED_ENV}=1 to use \
                 unsigned objects anyway"
            ));
        }
        let trusted = trusted_list.as_deref().map(TrustedKeys::new).transpose()?;
        let not_publishing = if config.read_only {
            Some(format!("this machine only reads the remote cache ({REMOTE_READ_ONLY_ENV}=1)"))
        } else if signer.is_none() && trusted.is_some() {
            let why = format!(
                "this machine trusts only signed entries ({TRUSTED_KEYS_ENV}) but has no signing key \
                 ({SIGNING_KEY_ENV}), so it publishes nothing"
            );
            tracing::warn!(
                remote = %config.redacted_url(),
                "{why} to the remote cache (set {REMOTE_READ_ONLY_ENV}=1 to say that this is intended)"
            );
            Some(why)
        } else {
            None
        };
        let publishes = not_publishing.is_none();
        // Usually under way since the runtime began to open its backend.
        let Connecting { store, runtime, started: connecting_since, mut connect, .. } =
            super::connecting::take_or_start(config)?;
        // A connection made while the backend opened is taken now, not by the task below: the
        // first lookup comes right after this and must find the remote answered and timed.
        // (Polled once, never waited for: this may run inside a program's own async runtime.)
        let connected_at_open =
            if connect.is_finished() { futures_util::FutureExt::now_or_never(&mut connect) } else { None };
        let shared = Arc::new(Shared {
            store,
            url: config.redacted_url(),
            gpu_folder: gpu.dir_name(),
            expect_backend: gpu.backend_tag(),
            gpu_hash: gpu.hash(),
            provenance: Provenance {
                sparkle: env!("CARGO_PKG_VERSION").into(),
                backend: gpu.backend().into(),
                gpu: gpu.fields().to_vec(),
                created_unix_ns: 0,
            },
            signer,
            trusted,
            breaker: Breaker::new(),
            counters: RemoteCounters::default(),
            pending: AtomicUsize::new(0),
            warned_skip: AtomicBool::new(false),
            deferred_skip: Mutex::new(None),
            down: AtomicBool::new(false),
            opened_at: connecting_since,
            round_trip_ns: AtomicU64::new(0),
            slow_recheck_ms: AtomicU64::new(0),
            probe: Mutex::new(None),
            probed: std::sync::Condvar::new(),
            connected: AtomicBool::new(false),
            write_check_wanted: tokio::sync::Notify::new(),
            writable: Mutex::new(None),
            unwritable: AtomicBool::new(false),
            awaited: Mutex::new(HashMap::new()),
            answered: AtomicBool::new(false),
            stalled: AtomicBool::new(false),
            leased_publishes: Arc::new(AtomicUsize::new(0)),
            last_answer_ns: AtomicU64::new(0),
            exit_budget: config.exit_budget.unwrap_or_else(|| {
                config.budget.map_or(DEFAULT_EXIT_BUDGET, |fixed| fixed.max(DEFAULT_EXIT_BUDGET))
            }),
        });
        // Connect now, so that the first lookup does not pay for it, then time one request on
        // the open connection: the round trip a lookup costs. Connecting (a TCP handshake and a
        // first request) takes about two round trips: half of it is the first estimate, so that
        // a distant remote is known as one before the timed request comes back.
        if let Some(Ok(Ok(took))) = &connected_at_open {
            shared.observe_round_trip(*took / 2);
            shared.succeeded();
        }
        let warm = Arc::clone(&shared);
        runtime.spawn(async move {
            let taken_at_open = connected_at_open.is_some();
            let joined = match connected_at_open {
                Some(joined) => joined,
                None => connect.await,
            };
            let connected = match joined {
                Ok(connected) => connected,
                Err(err) => Err(StoreError(format!("connecting stopped: {err}"))),
            };
            let outcome = match connected {
                Ok(took) => {
                    if !taken_at_open {
                        warm.observe_round_trip(took / 2);
                        warm.succeeded();
                    }
                    {
                        let _probe = warm.probe.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        warm.connected.store(true, Relaxed);
                    }
                    warm.probed.notify_all();
                    if warm.store.connects_with_a_request() {
                        // Connecting was itself a request (an object store's first list): it
                        // is the probe, and a second one would only add to the burst of first
                        // requests that every process of a fleet sends as it starts.
                        Ok(took / 2)
                    } else {
                        let started = Instant::now();
                        warm.store.ping().await.map(|()| started.elapsed())
                    }
                }
                Err(err) => Err(err),
            };
            let timed_apart = !warm.store.connects_with_a_request();
            let outcome = match outcome {
                Ok(round_trip) => {
                    if timed_apart {
                        warm.succeeded();
                        warm.observe_round_trip(round_trip);
                    }
                    Ok(round_trip)
                }
                Err(err) => {
                    // Unreachable from the start: skip it from now on (the breaker probes it
                    // again after its backoff) rather than letting every lookup find that out.
                    warm.down.store(true, Relaxed);
                    if let Tripped::Opened(backoff) = warm.breaker.trip() {
                        *warm.deferred_skip.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                            Some((backoff, err.0.clone()));
                    }
                    Err(err.0)
                }
            };
            let reachable = outcome.is_ok();
            *warm.probe.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(outcome);
            warm.probed.notify_all();
            if !reachable {
                *warm.writable.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(None);
                warm.probed.notify_all();
            } else if publishes {
                // Asked when this process first needs to write (a bucket that does not exist
                // was already said by the probe); `sparkle info` and `cache remote` ask at once.
                warm.write_check_wanted.notified().await;
                let writable = warm.store.check_writable().await.map_err(|err| err.0);
                if let Err(why) = &writable {
                    warm.unwritable.store(true, Relaxed);
                    tracing::warn!(
                        remote = %warm.url,
                        "the remote program cache cannot be written ({why}), so this machine only reads it; \
                         give it write access (a bucket that exists, a folder this user may write), or set \
                         {REMOTE_READ_ONLY_ENV}=1 to say that reading is all it should do"
                    );
                }
                *warm.writable.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some(Some(writable));
                warm.probed.notify_all();
            }
        });
        tracing::debug!(remote = %config.redacted_url(), publishes, "remote program cache opened");
        Ok(RemoteTier {
            shared,
            runtime: Some(runtime),
            publishes,
            not_publishing,
            rejected: Mutex::new(HashSet::new()),
            early: EarlyAnswers::default(),
            budgets: Budgets::new(config.budget),
            drivers: Mutex::new(None),
            ledger_dir: Mutex::new(None),
        })
    }

    /// The object name of `key` on this GPU.
    fn name(&self, key: CacheKey) -> String {
        format!("{}/{}", self.shared.gpu_folder, key.hex())
    }

    fn runtime(&self) -> &tokio::runtime::Runtime {
        // Taken only in `drop`.
        self.runtime.as_ref().unwrap_or_else(|| unreachable!("the runtime lives until the tier is dropped"))
    }

    pub(crate) fn is_rejected(&self, key: CacheKey) -> bool {
        self.rejected.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(&key)
    }

    /// Marks `key` as never to be fetched again in this process; the first time, says why.
    pub fn reject(&self, key: CacheKey, why: &str) {
        let first = self.rejected.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key);
        if first {
            stats::add(&self.shared.counters.rejected, 1);
            tracing::warn!(
                %key, remote = %self.shared.url,
                "a remote cache entry was refused and is compiled here instead: {why}"
            );
        }
    }

    /// Looks `key` up, waiting at most its budget (not at all for a remote that is slower than
    /// the budget, or has answered nothing while an earlier lookup waited a whole budget).
    pub fn lookup(&self, key: CacheKey) -> RemoteLookup {
        self.shared.needed();
        let counters = &self.shared.counters;
        if self.is_rejected(key) || self.shared.breaker.permit() == Permit::Skip {
            stats::add(&counters.skipped, 1);
            // A lease claimed early would hold other machines up for a compile it does not cover.
            self.forget_early(key);
            return RemoteLookup::Skipped;
        }
        let budget = self.budgets.for_key(key);
        let wait = self.shared.wait_for(budget);
        let started = Instant::now();
        let early = self.early.take_lookup(key);
        let went_early = early.is_some();
        let receiver = early.unwrap_or_else(|| {
            let (sender, receiver) = sync_channel(1);
            let name = self.name(key);
            let shared = Arc::clone(&self.shared);
            shared.awaiting(key);
            self.runtime().spawn(async move {
                let _ = sender.send(shared.get_entry(key, &name).await);
            });
            receiver
        });
        let answer = if wait.is_zero() {
            receiver.try_recv().map_err(|err| match err {
                TryRecvError::Empty => RecvTimeoutError::Timeout,
                TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
            })
        } else {
            receiver.recv_timeout(wait)
        };
        let waited = started.elapsed();
        stats::add(&counters.lookups, 1);
        stats::add_duration(&counters.lookup_ns, waited);
        match answer {
            // An early answer's wait here is not the request's round trip.
            Ok(answer) => self.settle(key, answer, if went_early { Duration::ZERO } else { waited }),
            Err(RecvTimeoutError::Timeout) => {
                stats::add(&counters.hedged, 1);
                if !wait.is_zero() {
                    self.shared.observe_round_trip(budget);
                    if !self.shared.answered.load(Relaxed) {
                        // A whole budget for a remote that answers nothing: not again.
                        self.shared.stalled.store(true, Relaxed);
                    }
                }
                RemoteLookup::Late(LateLookup {
                    key,
                    answer: receiver,
                    budget: wait,
                    shared: Arc::clone(&self.shared),
                    answered: false,
                })
            }
            Err(RecvTimeoutError::Disconnected) => {
                stats::add(&counters.errors, 1);
                RemoteLookup::Failed
            }
        }
    }

    /// The answer of a lookup that outlived its budget, once it came: `None` while it has
    /// not (and after it was handed out once).
    pub fn poll_late(&self, late: &mut LateLookup) -> Option<RemoteLookup> {
        if late.answered {
            return None;
        }
        let answer = match late.answer.try_recv() {
            Err(TryRecvError::Empty) => return None,
            Ok(answer) => answer,
            Err(TryRecvError::Disconnected) => Err(StoreError("the request was dropped".into())),
        };
        late.answered = true;
        Some(self.settle(late.key, answer, Duration::ZERO))
    }

    /// Counts a hedge the remote won: its entry is used and the compile was dropped.
    pub fn won_hedge(&self) {
        stats::add(&self.shared.counters.hedges_won, 1);
    }

    /// What the remote's answer to a lookup of `key` means; `waited` (zero when unknown) feeds
    /// the round trip the tier expects.
    fn settle(
        &self,
        key: CacheKey,
        answer: Result<Option<Got>, StoreError>,
        waited: Duration,
    ) -> RemoteLookup {
        let counters = &self.shared.counters;
        if answer.is_ok() && !waited.is_zero() {
            self.shared.observe_round_trip(waited);
        }
        // The request's own task told the breaker and counted an error already.
        match answer {
            Ok(Some(got)) => match self.verify(key, got) {
                Ok((header, blob)) => RemoteLookup::Hit(header, blob),
                Err(why) => {
                    self.reject(key, &why);
                    RemoteLookup::Rejected
                }
            },
            Ok(None) => {
                stats::add(&counters.misses, 1);
                RemoteLookup::Miss
            }
            Err(_) => RemoteLookup::Failed,
        }
    }

    /// Checks a fetched object: size, envelope, signature (when keys are trusted, before
    /// anything else reads the payload), then the entry as the disk tier checks one.
    fn verify(&self, key: CacheKey, got: Got) -> Result<(EntryHeader, Blob), String> {
        self.shared.verify_entry(key, &got)
    }

    /// Claims the compile of `key` for this process, so that the fleet compiles each program
    /// about once: the first machine to miss compiles, the others wait for its entry. Waits for
    /// the answer at most `timeout`. Read-only machines never claim.
    pub fn claim(&self, key: CacheKey, timeout: Duration) -> Claim {
        if !self.publishes() {
            return Claim::Unknown;
        }
        self.shared.write_check_wanted.notify_one();
        let (name, token, expected) =
            (format!("{}.lease", self.name(key)), lease::new_token(), self.budgets.for_key(key));
        let shared = Arc::clone(&self.shared);
        let claimed = self.block_on(timeout, async move {
            Ok::<_, StoreError>(Shared::claim(shared, name, token, expected).await)
        });
        claimed.unwrap_or(Claim::Unknown)
    }

    /// [`claim`](Self::claim), waiting for the answer at most the lookup budget of `key`; past it
    /// the claim goes on, to be polled while the program compiles (`Err`). `Ok(Unknown)` when
    /// this machine does not publish.
    pub fn claim_within(&self, key: CacheKey) -> Result<Claim, PendingClaim> {
        let Some(pending) = self.claim_later(key) else { return Ok(Claim::Unknown) };
        match pending.answer.recv_timeout(self.budgets.for_key(key)) {
            Ok(claim) => Ok(claim),
            Err(RecvTimeoutError::Timeout) => Err(pending),
            Err(RecvTimeoutError::Disconnected) => Ok(Claim::Unknown),
        }
    }

    /// [`claim`](Self::claim) without waiting: the answer is polled (the hedge learns it while
    /// its compile runs). `None` when this machine does not publish.
    pub fn claim_later(&self, key: CacheKey) -> Option<PendingClaim> {
        if !self.publishes() {
            self.forget_early(key);
            return None;
        }
        if let Some(answer) = self.early.take_claim(key) {
            return Some(PendingClaim { answer });
        }
        self.shared.write_check_wanted.notify_one();
        let (name, token, expected) =
            (format!("{}.lease", self.name(key)), lease::new_token(), self.budgets.for_key(key));
        let shared = Arc::clone(&self.shared);
        let (sender, answer) = sync_channel(1);
        self.runtime().spawn(async move {
            let _ = sender.send(Shared::claim(shared, name, token, expected).await);
        });
        Some(PendingClaim { answer })
    }

    /// Whether the first load or compile of this process would wait for the fleet's driver
    /// caches now (a machine's first process for this GPU, while they are fetched).
    pub fn driver_caches_pending(&self) -> bool {
        match self.drivers.try_lock() {
            Ok(drivers) => drivers.as_ref().is_some_and(DriverFolders::fetching),
            // Another thread is waiting for them right now.
            Err(std::sync::TryLockError::WouldBlock) => true,
            Err(std::sync::TryLockError::Poisoned(drivers)) => {
                drivers.into_inner().as_ref().is_some_and(DriverFolders::fetching)
            }
        }
    }

    /// Looks `key` up now, while the driver caches are fetched, instead of after the wait for
    /// them; with `claim` (this process holds its machine's turn at the program) a miss claims
    /// the program's lease at once. The lookup and the claim that ask later take the answers
    /// (`early.rs`). Does nothing when nothing waits for the driver caches, when `key` went
    /// already, or when a lookup would be skipped.
    pub fn look_up_early(&self, key: CacheKey, claim: bool) {
        if !self.driver_caches_pending()
            || self.early.started(key)
            || self.is_rejected(key)
            || self.shared.breaker.is_open()
        {
            return;
        }
        let claim = claim && self.publishes();
        tracing::debug!(%key, claim, "remote lookup started while the driver caches are fetched");
        let name = self.name(key);
        let (lease_name, token, expected) =
            (format!("{name}.lease"), lease::new_token(), self.budgets.for_key(key));
        let (lookup_sender, lookup) = sync_channel(1);
        let (claim_sender, claimed) = sync_channel(1);
        let shared = Arc::clone(&self.shared);
        shared.awaiting(key);
        self.runtime().spawn(async move {
            let answer = shared.get_entry(key, &name).await;
            let missing = matches!(answer, Ok(None));
            let _ = lookup_sender.send(answer);
            if claim && missing {
                // A machine that only reads sends no write check; this one is about to write.
                shared.write_check_wanted.notify_one();
                let claimed = Shared::claim(Arc::clone(&shared), lease_name, token, expected).await;
                // Nobody will take it (the program came from elsewhere, or the process ends).
                if let Err(std::sync::mpsc::SendError(Claim::Mine(lease))) = claim_sender.send(claimed) {
                    shared.release(lease).await;
                }
            }
        });
        self.early.keep(key, lookup, claim.then_some(claimed));
    }

    /// The program of `key` came from elsewhere (this machine's disk): an early lookup's answers
    /// are not needed, and a lease its claim holds is released.
    pub fn forget_early(&self, key: CacheKey) {
        self.early.forget(key, &mut |lease| self.release(lease));
    }

    /// Waits for the entry of `key` that another machine is compiling, as long as its lease is
    /// alive (its holder renews it while it compiles), at most [`lease::wait_bound`] of the
    /// compile time the holder expects. Polls with a growing interval; counted once, as a wait.
    pub fn wait_for(&self, key: CacheKey) -> Waited {
        stats::add(&self.shared.counters.waits, 1);
        let lease_name = format!("{}.lease", self.name(key));
        let started = Instant::now();
        let mut bound = lease::wait_bound(self.budgets.for_key(key));
        let mut poll = lease::FIRST_POLL;
        let (mut lease_checked, mut failures) = (Instant::now(), 0);
        loop {
            std::thread::sleep(poll);
            poll = (poll * 3 / 2).min(lease::MAX_POLL);
            match self.peek(key) {
                Peeked::Hit(header, blob) => return Waited::Hit(header, blob),
                Peeked::Missing => failures = 0,
                Peeked::Refused => return Waited::GaveUp,
                // A loaded store may miss one answer; three in a row is a failing one.
                Peeked::Failed => {
                    failures += 1;
                    if failures == lease::WAIT_FAILURES {
                        return Waited::GaveUp;
                    }
                    continue;
                }
            }
            // The entry is looked for at every poll; the lease (whether its holder still lives)
            // less often: every waiter of a fleet polls the same store.
            if lease_checked.elapsed() < lease::LEASE_CHECK_EVERY && started.elapsed() < bound {
                continue;
            }
            lease_checked = Instant::now();
            let shared = Arc::clone(&self.shared);
            let name = lease_name.clone();
            match self.block_on(WAIT_REQUEST, async move { shared.store.lease(&name).await }) {
                Ok(Some(held)) => {
                    bound = bound.max(lease::wait_bound(held.expected));
                    if started.elapsed() > bound {
                        tracing::debug!(%key, "waited {bound:?} for another machine's compile; compiling here");
                        return Waited::GaveUp;
                    }
                }
                // Released: published (look once more), or its holder failed or died (take over).
                Ok(None) => {
                    if let Peeked::Hit(header, blob) = self.peek(key) {
                        return Waited::Hit(header, blob);
                    }
                    // As long as any request of a waiter: a loaded store answers slowly.
                    match self.claim(key, WAIT_REQUEST) {
                        Claim::Mine(lease) => return Waited::Mine(lease),
                        Claim::Theirs => continue,
                        Claim::Unknown => return Waited::GaveUp,
                    }
                }
                Err(_) => return Waited::GaveUp,
            }
        }
    }

    /// A lookup of `key` for a waiter: not counted as a lookup or a miss.
    fn peek(&self, key: CacheKey) -> Peeked {
        let shared = Arc::clone(&self.shared);
        let name = self.name(key);
        let fetched = self.block_on(WAIT_REQUEST, async move {
            shared.store.get(&name, MAX_ENTRY_BYTES + envelope::MAX_OVERHEAD).await
        });
        match fetched {
            Ok(None) => Peeked::Missing,
            Ok(Some(got)) => match self.verify(key, got) {
                Ok((header, blob)) => Peeked::Hit(header, blob),
                Err(why) => {
                    self.reject(key, &why);
                    Peeked::Refused
                }
            },
            Err(_) => Peeked::Failed,
        }
    }

    /// [`recheck`](Self::recheck) without waiting: polled by the hedge.
    pub fn recheck_later(&self, key: CacheKey) -> PendingPeek {
        let shared = Arc::clone(&self.shared);
        let name = self.name(key);
        let (sender, answer) = sync_channel(1);
        self.runtime().spawn(async move {
            let got = shared.store.get(&name, MAX_ENTRY_BYTES + envelope::MAX_OVERHEAD).await;
            let found = match got {
                Ok(Some(got)) => shared.verify_entry(key, &got).ok(),
                _ => None,
            };
            let _ = sender.send(found);
        });
        PendingPeek { answer }
    }

    /// A quiet second look at `key` before compiling under a fresh lease (the previous holder
    /// may have published in between): the verified entry, if there is one now.
    pub fn recheck(&self, key: CacheKey) -> Option<(EntryHeader, Blob)> {
        match self.peek(key) {
            Peeked::Hit(header, blob) => Some((header, blob)),
            _ => None,
        }
    }

    /// Releases a lease when the program could not be published (its compile failed). Counted
    /// among the publishes in flight, which closing the tier waits for (bounded).
    pub fn release(&self, lease: Lease) {
        let shared = Arc::clone(&self.shared);
        shared.pending.fetch_add(1, Relaxed);
        self.runtime().spawn(async move {
            shared.release(lease).await;
            shared.pending.fetch_sub(1, Relaxed);
        });
    }

    /// Counts a hit that the backend loaded.
    pub fn loaded(&self) {
        stats::add(&self.shared.counters.hits, 1);
    }

    /// Whether this process publishes (configured to, and the store took the write check or
    /// has not answered it yet).
    pub fn publishes(&self) -> bool {
        self.publishes && !self.shared.unwritable.load(Relaxed)
    }

    /// Whether the store took this machine's write check, waiting for it at most `timeout`;
    /// `None` when this machine does not publish, the store could not be reached, or no answer
    /// came in time.
    pub fn write_check(&self, timeout: Duration) -> Option<Result<(), String>> {
        if !self.publishes {
            return None;
        }
        self.shared.write_check_wanted.notify_one();
        let writable = self.shared.writable.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (writable, _) = self
            .shared
            .probed
            .wait_timeout_while(writable, timeout, |writable| writable.is_none())
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        writable.clone().flatten()
    }

    /// Why this process does not publish, when it does not.
    pub fn why_not_publishing(&self) -> Option<&str> {
        self.not_publishing.as_deref()
    }

    /// Publishes `blob` as the entry of `key`, in the background and only if the entry as
    /// built verifies. Never blocks on the network.
    pub fn publish(&self, key: CacheKey, blob: &Blob, compile_time: Duration, lease: Option<Lease>) {
        // A key whose remote object was refused here is compiled here: the object there is
        // replaced, or it would keep every machine compiling.
        self.publish_entry(key, blob, compile_time, lease, self.is_rejected(key));
    }

    /// Publishes like [`publish`](Self::publish), and when the remote holds an object for `key`
    /// already, checks it as a reader of this machine would and replaces it (compare-and-swap)
    /// if it does not verify: an object signed with a key no longer trusted (key rotation), an
    /// unsigned or damaged one. What `sparkle cache push` does for every local entry.
    pub fn publish_checked(&self, key: CacheKey, blob: &Blob, compile_time: Duration) {
        self.publish_entry(key, blob, compile_time, None, true);
    }

    fn publish_entry(
        &self,
        key: CacheKey,
        blob: &Blob,
        compile_time: Duration,
        lease: Option<Lease>,
        check_existing: bool,
    ) {
        if !self.publishes() {
            if let Some(lease) = lease {
                self.release(lease);
            }
            return;
        }
        self.shared.needed();
        if self.shared.down.load(Relaxed) || self.shared.breaker.is_open() {
            // A remote that fails or is being skipped: publishing would only wait on it.
            if let Some(lease) = lease {
                self.release(lease);
            }
            return;
        }
        if self.shared.pending.load(Relaxed) >= MAX_PENDING_PUBLISHES {
            stats::add(&self.shared.counters.publish_errors, 1);
            tracing::debug!(%key, "too many publishes to the remote cache in flight; not publishing this one");
            return;
        }
        let expect = Expect { backend: self.shared.expect_backend, gpu_hash: self.shared.gpu_hash, key };
        let now = crate::cache::now_unix_ns();
        let header = EntryHeader::new(expect, blob.format, &blob.bytes, duration_ns(compile_time), now);
        let mut entry_bytes = Vec::with_capacity(entry::HEADER_LEN + blob.bytes.len());
        entry_bytes.extend_from_slice(&header.to_bytes());
        entry_bytes.extend_from_slice(&blob.bytes);
        if let Err(problem) = entry::verify_bytes(&entry_bytes, &expect) {
            tracing::error!(%key, %problem, "an entry built for the remote cache does not verify; not published");
            if let Some(lease) = lease {
                self.release(lease);
            }
            return;
        }
        self.publish_object(key, entry_bytes, lease, check_existing);
    }

    /// Seals the entry `payload` of `key` (signed when a key is configured) and stores it
    /// create-if-absent in the background; with `check_existing`, an object already there that
    /// does not verify is replaced. While a lookup of `key` is still under way, the publish
    /// waits for its answer and goes only if the remote does not have the program.
    fn publish_object(
        &self,
        key: CacheKey,
        payload: Vec<u8>,
        mut lease: Option<Lease>,
        check_existing: bool,
    ) {
        self.shared.write_check_wanted.notify_one();
        let name = self.name(key);
        if let Some(lease) = &mut lease {
            // Other machines wait for this publish: closing waits for it longer (bounded).
            self.shared.leased_publishes.fetch_add(1, Relaxed);
            lease.publishing = Some(Arc::clone(&self.shared.leased_publishes));
        }
        let sealed = self.seal(&name, Kind::Entry, &payload);
        let Some(parked) = self.shared.park(key, Parked { sealed, check_existing, lease }) else { return };
        let shared = Arc::clone(&self.shared);
        shared.pending.fetch_add(1, Relaxed);
        self.runtime().spawn(async move {
            shared.store_entry(key, &name, parked).await;
            shared.pending.fetch_sub(1, Relaxed);
        });
    }

    /// Runs `future` on the tier's runtime and waits for it, at most `timeout`.
    pub(crate) fn block_on<T: Send + 'static>(
        &self,
        timeout: Duration,
        future: impl std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.background().block_on(timeout, future)
    }

    /// A handle on the tier that a helper thread may keep.
    pub(crate) fn background(&self) -> Background {
        Background { shared: Arc::clone(&self.shared), handle: self.runtime().handle().clone() }
    }

    /// Adds this tier's counters to `stats`.
    pub fn fill(&self, out: &mut CacheStats) {
        let c = &self.shared.counters;
        let now = c.snapshot();
        out.remote = Some(self.shared.url.clone());
        out.remote_hits = now.hits;
        out.remote_misses = now.misses;
        out.remote_rejected = now.rejected;
        out.remote_hedged = now.hedged;
        out.remote_hedges_won = now.hedges_won;
        out.remote_errors = now.errors;
        out.remote_skipped = now.skipped;
        out.remote_publishes = now.publishes;
        out.remote_publish_existing = now.publish_existing;
        out.remote_publish_errors = now.publish_errors;
        out.remote_replaced = now.replaced;
        out.remote_lookups = now.lookups;
        out.remote_lookup_time = Duration::from_nanos(now.lookup_ns);
        out.remote_waits = now.waits;
    }

    /// The names and sizes of this GPU's objects on the remote.
    pub fn list(&self, timeout: Duration) -> Result<Vec<(String, u64)>, StoreError> {
        let shared = Arc::clone(&self.shared);
        self.block_on(timeout, async move { shared.store.list(Some(&shared.gpu_folder)).await })
    }

    /// The names and sizes of the objects of this GPU's folder, or of every GPU's (`all`),
    /// without the tier's own probe objects.
    pub fn list_objects(&self, all: bool, timeout: Duration) -> Result<Vec<(String, u64)>, String> {
        let shared = Arc::clone(&self.shared);
        let listed = self.block_on(timeout, async move {
            let folder = (!all).then_some(shared.gpu_folder.as_str());
            shared.store.list(folder).await
        });
        let mut objects = listed.map_err(|err| err.0)?;
        objects.retain(|(name, _)| !name.starts_with('.'));
        objects.sort();
        Ok(objects)
    }

    /// Fetches the object `name` and checks it as a machine of its GPU would before using it;
    /// `Ok(None)` when it is gone. A lease or a foreign object is not fetched.
    pub(crate) fn check_object(&self, name: &str, timeout: Duration) -> Result<Option<Checked>, String> {
        match check::classify(name) {
            check::ObjectName::Lease => return Ok(Some(Checked { verdict: Verdict::Lease, got: None })),
            check::ObjectName::Other => return Ok(Some(Checked { verdict: Verdict::Other, got: None })),
            _ => {}
        }
        let max = MAX_ENTRY_BYTES.max(super::driver_archive::MAX_ARCHIVE_BYTES) + envelope::MAX_OVERHEAD;
        let shared = Arc::clone(&self.shared);
        let owned = name.to_owned();
        let got = self
            .block_on(timeout, async move { shared.store.get(&owned, max).await })
            .map_err(|err| err.0)?;
        Ok(got.map(|got| {
            let verdict = match &got {
                Got::Object { bytes, .. } => check::check_any(name, bytes, self.shared.trusted.as_ref()),
                Got::TooLarge { size } => {
                    Verdict::Refused(format!("{size} bytes, more than any object of ours"))
                }
            };
            Checked { verdict, got: Some(got) }
        }))
    }

    /// Whether `name` is the entry object of `key` in this GPU's folder.
    pub(crate) fn is_own_entry(&self, name: &str, key: CacheKey) -> bool {
        name == self.name(key)
    }

    /// Removes the object `name` (`cache remote verify --fix`).
    pub fn delete_object(&self, name: &str, timeout: Duration) -> Result<(), String> {
        let shared = Arc::clone(&self.shared);
        let owned = name.to_owned();
        self.block_on(timeout, async move { shared.store.delete(&owned).await }).map_err(|err| err.0)
    }

    /// Replaces the refused entry object of `key` (as `checked` found it) with this machine's
    /// own entry of `blob`, compare-and-swap; `Ok(false)` when it changed meanwhile.
    pub(crate) fn replace_entry(
        &self,
        key: CacheKey,
        checked: Checked,
        blob: &Blob,
        compile_time: Duration,
        timeout: Duration,
    ) -> Result<bool, String> {
        if !self.publishes() {
            return Err(self.why_not_publishing().unwrap_or("this machine does not publish").to_owned());
        }
        let expect = Expect { backend: self.shared.expect_backend, gpu_hash: self.shared.gpu_hash, key };
        let header = EntryHeader::new(
            expect,
            blob.format,
            &blob.bytes,
            duration_ns(compile_time),
            crate::cache::now_unix_ns(),
        );
        let mut entry_bytes = header.to_bytes().to_vec();
        entry_bytes.extend_from_slice(&blob.bytes);
        let name = self.name(key);
        let sealed = self.seal(&name, Kind::Entry, &entry_bytes);
        let shared = Arc::clone(&self.shared);
        let replaced = self.block_on(timeout, async move {
            match checked.got {
                Some(Got::Object { bytes, version }) => {
                    shared.store.replace_if(&name, &version, &bytes, sealed).await
                }
                _ => {
                    shared.store.delete(&name).await?;
                    shared.store.put_if_absent(&name, sealed).await.map(|put| put == Put::Created)
                }
            }
        });
        let replaced = replaced.map_err(|err| err.0)?;
        if replaced {
            stats::add(&self.shared.counters.replaced, 1);
        }
        Ok(replaced)
    }

    /// Fetches and verifies the entry of `key` for a prefetch: `Ok(None)` when the remote has
    /// none; a rejected object is an error and is never fetched again.
    pub fn fetch(&self, key: CacheKey, timeout: Duration) -> Result<Option<(EntryHeader, Blob)>, String> {
        if self.is_rejected(key) {
            return Err("refused earlier in this process".into());
        }
        let shared = Arc::clone(&self.shared);
        let name = self.name(key);
        let fetched = self.block_on(timeout, async move {
            shared.store.get(&name, MAX_ENTRY_BYTES + envelope::MAX_OVERHEAD).await
        });
        match fetched {
            Ok(Some(got)) => self.verify(key, got).map(Some).inspect_err(|why| self.reject(key, why)),
            Ok(None) => Ok(None),
            Err(err) => Err(err.0),
        }
    }

    /// Shares the driver cache folders under `root` through the remote: on a machine's `first`
    /// open for this GPU starts fetching them in the background; publishes those that grew when
    /// the tier is dropped.
    pub fn sync_driver_caches(&self, root: &std::path::Path, first: bool) {
        let folders = DriverFolders::open(self, root, first);
        *self.drivers.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(folders);
    }

    /// Puts `folders` in place of the driver folders this tier shares (tests: a fetch that
    /// lasts as long as the test needs).
    #[cfg(test)]
    pub(crate) fn set_driver_folders(&self, folders: DriverFolders) {
        *self.drivers.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(folders);
    }

    /// Records this process's counters in the ledger of `gpu_dir` when the tier is dropped.
    pub fn keep_ledger_in(&self, gpu_dir: &std::path::Path) {
        *self.ledger_dir.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(gpu_dir.to_path_buf());
    }

    /// Called before the first work that reaches the driver (a load or a compile): waits,
    /// bounded, for the driver caches being fetched, so that the driver finds them.
    pub fn settle_driver_caches(&self) {
        if let Some(folders) = &*self.drivers.lock().unwrap_or_else(std::sync::PoisonError::into_inner) {
            folders.settle();
        }
    }

    /// Seals `payload` and stores it as `file` of this GPU's folder, replacing what is there
    /// (objects any machine may supersede, such as a driver cache archive), in the background.
    pub(crate) fn replace_object(&self, file: &str, kind: Kind, payload: Vec<u8>) {
        if !self.publishes() || self.shared.down.load(Relaxed) || payload.len() > MAX_ENTRY_BYTES {
            return;
        }
        self.shared.write_check_wanted.notify_one();
        let name = format!("{}/{file}", self.shared.gpu_folder);
        let sealed = self.seal(&name, kind, &payload);
        let shared = Arc::clone(&self.shared);
        shared.pending.fetch_add(1, Relaxed);
        self.runtime().spawn(async move {
            if let Err(err) = shared.store.put(&name, sealed).await {
                tracing::debug!(object = %name, error = %err, "could not publish to the remote cache");
            }
            shared.pending.fetch_sub(1, Relaxed);
        });
    }

    fn seal(&self, name: &str, kind: Kind, payload: &[u8]) -> Vec<u8> {
        let provenance =
            Provenance { created_unix_ns: crate::cache::now_unix_ns(), ..self.shared.provenance.clone() };
        let signer = self.shared.signer.as_ref();
        let sign = signer.map(|signer| move |message: &[u8]| signer.sign(message));
        envelope::seal(name, kind, &provenance, payload, sign.as_ref().map(|f| f as envelope::Sign<'_>))
    }

    /// The remote's URL as configured.
    pub fn url(&self) -> &str {
        &self.shared.url
    }

    /// The fleet's working set on the remote, checked as every remote object is (envelope,
    /// kind, a trusted signature when keys are trusted) and capped at [`MAX_WORKING_SET_KEYS`];
    /// `Ok(None)` when there is none.
    pub fn fetch_working_set(&self, timeout: Duration) -> Result<Option<Vec<(CacheKey, u64)>>, String> {
        let fetched = self.background().fetch_object(
            WORKING_SET_FILE,
            Kind::WorkingSet,
            MAX_WORKING_SET_BYTES,
            timeout,
        )?;
        let Some(payload) = fetched else { return Ok(None) };
        let text = std::str::from_utf8(&payload).map_err(|_| "the working set is not text".to_owned())?;
        let mut set = working_set::parse(text);
        set.truncate(MAX_WORKING_SET_KEYS);
        Ok(Some(set))
    }

    /// Replaces the fleet's working set with (the first [`MAX_WORKING_SET_KEYS`] of) `set`,
    /// sealed and signed as every object this machine publishes; waits at most `timeout`.
    pub fn publish_working_set(&self, set: &[(CacheKey, u64)], timeout: Duration) -> Result<(), String> {
        if !self.publishes() {
            return Err("this machine does not publish".into());
        }
        let text: String =
            set.iter().take(MAX_WORKING_SET_KEYS).map(|(key, ns)| format!("{} {ns}\n", key.hex())).collect();
        let name = format!("{}/{WORKING_SET_FILE}", self.shared.gpu_folder);
        let sealed = self.seal(&name, Kind::WorkingSet, text.as_bytes());
        let shared = Arc::clone(&self.shared);
        self.block_on(timeout, async move { shared.store.put(&name, sealed).await }).map_err(|err| err.0)
    }

    /// One round trip to the store; its time.
    pub fn ping(&self, timeout: Duration) -> Result<Duration, StoreError> {
        let shared = Arc::clone(&self.shared);
        let started = Instant::now();
        self.block_on(timeout, async move { shared.store.ping().await }).map(|()| started.elapsed())
    }

    /// Waits until the publishes in flight are done, at most `timeout`; returns how many are left.
    pub fn drain(&self, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        while self.shared.pending.load(Relaxed) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.shared.pending.load(Relaxed)
    }
}

/// A claim under way, polled without blocking.
pub(crate) struct PendingClaim {
    answer: Receiver<Claim>,
}

impl PendingClaim {
    /// The claim's outcome once it came (`Unknown` if its request was dropped).
    pub fn poll(&mut self) -> Option<Claim> {
        match self.answer.try_recv() {
            Ok(claim) => Some(claim),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(Claim::Unknown),
        }
    }
}

/// A look at an entry under way, polled without blocking: `Some(None)` when there is no
/// verified entry.
pub(crate) struct PendingPeek {
    answer: Receiver<Option<(EntryHeader, Blob)>>,
}

impl PendingPeek {
    /// The entry found, once the answer came.
    pub fn poll(&mut self) -> Option<Option<(EntryHeader, Blob)>> {
        match self.answer.try_recv() {
            Ok(found) => Some(found),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => Some(None),
        }
    }
}

/// What a waiter's look at an entry found.
enum Peeked {
    Hit(EntryHeader, Blob),
    Missing,
    /// Refused (counted and reported).
    Refused,
    Failed,
}

/// An object of the store, fetched and checked (`cache remote verify`).
pub(crate) struct Checked {
    /// What the check found.
    pub verdict: Verdict,
    /// What was read, kept for a compare-and-swap replacement.
    got: Option<Got>,
}

/// What the tier's first requests found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probe {
    /// Still connecting.
    Pending,
    /// Connected; one request took this long.
    Ready(Duration),
    /// Could not connect (the breaker decides when to try again).
    Failed,
}

/// The part of the tier a helper thread may hold: its store, its state, its runtime.
#[derive(Clone)]
pub(crate) struct Background {
    shared: Arc<Shared>,
    handle: tokio::runtime::Handle,
}

impl Background {
    /// Runs `future` on the tier's runtime and waits for it, at most `timeout`.
    pub(crate) fn block_on<T: Send + 'static>(
        &self,
        timeout: Duration,
        future: impl std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (sender, receiver) = sync_channel(1);
        self.handle.spawn(async move {
            let _ = sender.send(future.await);
        });
        match receiver.recv_timeout(timeout) {
            Ok(result) => result,
            Err(_) => Err(StoreError(format!("no answer within {} ms", timeout.as_millis()))),
        }
    }

    /// Waits at most `timeout` for the tier's first requests: connecting, then one timed round
    /// trip.
    pub(crate) fn probe(&self, timeout: Duration) -> Probe {
        let probe = self.shared.probe.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (probe, _) = self
            .shared
            .probed
            .wait_timeout_while(probe, timeout, |probe| probe.is_none())
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*probe {
            None => Probe::Pending,
            Some(Ok(round_trip)) => Probe::Ready(*round_trip),
            Some(Err(_)) => Probe::Failed,
        }
    }

    /// The round trip the tier believes a request costs (0 before anything was timed).
    #[cfg(test)]
    pub(crate) fn round_trip_estimate(&self) -> Duration {
        Duration::from_nanos(self.shared.round_trip_ns.load(Relaxed))
    }

    /// Waits at most `timeout` for the tier's connection (before its timed request); whether it
    /// connected.
    pub(crate) fn wait_connected(&self, timeout: Duration) -> bool {
        let probe = self.shared.probe.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (_probe, _) = self
            .shared
            .probed
            .wait_timeout_while(probe, timeout, |probe| {
                probe.is_none() && !self.shared.connected.load(Relaxed)
            })
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.shared.connected.load(Relaxed)
    }

    /// Something waited a whole budget for a remote that did not connect: lookups do not wait
    /// for it again until it answers.
    pub(crate) fn stall(&self) {
        if !self.shared.answered.load(Relaxed) {
            self.shared.stalled.store(true, Relaxed);
        }
    }

    /// When the tier opened.
    pub(crate) fn opened_at(&self) -> Instant {
        self.shared.opened_at
    }

    /// Fetches the object `file` of this GPU's folder and checks its envelope, kind and (with
    /// trusted keys) signature; returns its payload. `Ok(None)`: the remote has none.
    pub(crate) fn fetch_object(
        &self,
        file: &str,
        kind: Kind,
        max_payload: usize,
        timeout: Duration,
    ) -> Result<Option<Vec<u8>>, String> {
        let name = format!("{}/{file}", self.shared.gpu_folder);
        let shared = Arc::clone(&self.shared);
        let max = max_payload.saturating_add(envelope::MAX_OVERHEAD);
        let fetched = {
            let name = name.clone();
            self.block_on(timeout, async move { shared.store.get(&name, max).await })
        };
        let bytes = match fetched {
            Ok(Some(Got::Object { bytes, .. })) => bytes,
            Ok(Some(Got::TooLarge { size })) => {
                return Err(format!("{name} is {size} bytes, more than such an object may take ({max})"))
            }
            Ok(None) => return Ok(None),
            Err(err) => return Err(err.0),
        };
        let opened = check::open_checked(&name, &bytes, kind, self.shared.trusted.as_ref())?;
        Ok(Some(opened.payload.to_vec()))
    }

    pub(crate) fn url(&self) -> &str {
        &self.shared.url
    }
}

impl Shared {
    /// How long a lookup waits for its answer before the program compiles meanwhile: its budget,
    /// unless the remote is known to be slower than that, or answered nothing while an earlier
    /// lookup waited a whole budget (then not at all: the request still goes, and may still
    /// win the race against the compile). Until the remote has answered anything, the wait also
    /// ends [`connect_deadline`] after connecting started.
    fn wait_for(&self, budget: Duration) -> Duration {
        let answered = self.answered.load(Relaxed);
        if (!answered && self.stalled.load(Relaxed)) || self.slower_than(budget) {
            Duration::ZERO
        } else if !answered {
            (self.opened_at + connect_deadline(budget)).saturating_duration_since(Instant::now()).min(budget)
        } else {
            budget
        }
    }

    /// A lookup of `key` is about to ask.
    fn awaiting(&self, key: CacheKey) {
        self.awaited
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(key)
            .or_default()
            .in_flight += 1;
    }

    /// Parks a publish of `key` behind its lookup still under way; gives it back when none is.
    fn park(&self, key: CacheKey, parked: Parked) -> Option<Parked> {
        let mut awaited = self.awaited.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match awaited.get_mut(&key) {
            Some(waiting) => {
                if let Some(Parked { lease: Some(lease), .. }) = waiting.parked.replace(parked) {
                    // Cannot happen (one publish per key and process); the lease expires.
                    drop(lease);
                }
                None
            }
            None => Some(parked),
        }
    }

    /// A lookup's request: the object `name` holding the entry of `key`, with what its answer
    /// means for a publish parked behind it ([`answer_came`](Self::answer_came)).
    async fn get_entry(&self, key: CacheKey, name: &str) -> Result<Option<Got>, StoreError> {
        let answer = self.store.get(name, MAX_ENTRY_BYTES + envelope::MAX_OVERHEAD).await;
        self.answer_came(key, name, &answer).await;
        answer
    }

    /// A lookup of `key` got `answer`: a publish parked behind it goes now if the remote does
    /// not have the program (or has one this machine refuses), and is dropped if it does.
    async fn answer_came(&self, key: CacheKey, name: &str, answer: &Result<Option<Got>, StoreError>) {
        match answer {
            Ok(_) => self.succeeded(),
            Err(err) => {
                stats::add(&self.counters.errors, 1);
                self.errored(&err.0);
            }
        }
        let parked = {
            let mut awaited = self.awaited.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let Some(waiting) = awaited.get_mut(&key) else { return };
            waiting.in_flight = waiting.in_flight.saturating_sub(1);
            let parked = if answer.is_ok() || waiting.in_flight == 0 { waiting.parked.take() } else { None };
            if waiting.in_flight == 0 {
                awaited.remove(&key);
            }
            parked
        };
        let Some(mut parked) = parked else { return };
        self.pending.fetch_add(1, Relaxed);
        match answer {
            Ok(None) => self.store_entry(key, name, parked).await,
            Ok(Some(got)) if self.verify_entry(key, got).is_ok() => {
                // The remote has it: nothing to publish.
                stats::add(&self.counters.publish_existing, 1);
                if let Some(lease) = parked.lease.take() {
                    self.release(lease).await;
                }
            }
            Ok(Some(_)) => {
                parked.check_existing = true;
                self.store_entry(key, name, parked).await;
            }
            Err(_) => {
                stats::add(&self.counters.publish_errors, 1);
                if let Some(lease) = parked.lease.take() {
                    self.release(lease).await;
                }
            }
        }
        self.pending.fetch_sub(1, Relaxed);
    }

    /// Stores a sealed entry create-if-absent (replacing an object there that does not verify,
    /// with `check_existing`), then releases its lease.
    async fn store_entry(&self, key: CacheKey, name: &str, parked: Parked) {
        let Parked { sealed, check_existing, lease } = parked;
        let kept = check_existing.then(|| sealed.clone());
        let result = self.store.put_if_absent(name, sealed).await;
        if result.is_ok() {
            self.heard();
        }
        let counters = &self.counters;
        match (result, kept) {
            (Ok(Put::Created), _) => stats::add(&counters.publishes, 1),
            (Ok(Put::AlreadyThere), Some(sealed)) => self.replace_if_refused(key, name, sealed).await,
            (Ok(Put::AlreadyThere), None) => stats::add(&counters.publish_existing, 1),
            (Err(err), _) => {
                stats::add(&counters.publish_errors, 1);
                self.down.store(true, Relaxed);
                tracing::debug!(object = %name, error = %err, "could not publish to the remote cache");
            }
        }
        if let Some(lease) = lease {
            self.release(lease).await;
        }
    }

    /// Takes the lease `name` (and keeps renewing it) unless another machine holds it.
    async fn claim(shared: Arc<Shared>, name: String, token: String, expected: Duration) -> Claim {
        match shared.store.claim(&name, &token, expected).await {
            Ok(true) => {
                let lease = Lease {
                    name,
                    token,
                    expected,
                    released: Arc::new(AtomicBool::new(false)),
                    publishing: None,
                };
                let (name, token, released) =
                    (lease.name.clone(), lease.token.clone(), Arc::clone(&lease.released));
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(lease::RENEW_EVERY).await;
                        if released.load(Relaxed) {
                            return;
                        }
                        match shared.store.renew(&name, &token, expected).await {
                            Ok(true) => {}
                            Ok(false) | Err(_) => return,
                        }
                    }
                });
                Claim::Mine(lease)
            }
            Ok(false) => Claim::Theirs,
            Err(err) => {
                tracing::debug!(lease = %name, error = %err, "could not claim a compile in the remote cache");
                Claim::Unknown
            }
        }
    }

    /// Stops renewing `lease` and removes it.
    async fn release(&self, lease: Lease) {
        lease.released.store(true, Relaxed);
        if self.store.release_lease(&lease.name, &lease.token, lease.expected).await.is_ok() {
            self.heard();
        }
    }

    /// Whether requests are known to take longer than `budget` (no side effects).
    fn known_slower_than(&self, budget: Duration) -> bool {
        let round_trip = self.round_trip_ns.load(Relaxed);
        round_trip != 0 && round_trip > duration_ns(budget)
    }

    /// The object name of `key` on this GPU.
    fn name(&self, key: CacheKey) -> String {
        format!("{}/{}", self.gpu_folder, key.hex())
    }

    /// Checks a fetched entry object of `key`: its size, then everything [`check::check_entry`]
    /// checks (a trusted signature over its name when keys are trusted, before anything else
    /// reads it), against this GPU and this key.
    fn verify_entry(&self, key: CacheKey, got: &Got) -> Result<(EntryHeader, Blob), String> {
        let bytes = match got {
            Got::Object { bytes, .. } => bytes,
            Got::TooLarge { size } => {
                return Err(format!("{size} bytes is more than any entry may take ({MAX_ENTRY_BYTES} bytes)"))
            }
        };
        let expect = Expect { backend: self.expect_backend, gpu_hash: self.gpu_hash, key };
        let (header, payload) = check::check_entry(&self.name(key), bytes, &expect, self.trusted.as_ref())?;
        Ok((header, Blob { format: header.blob_format, bytes: payload.to_vec() }))
    }

    /// The publish of `key` found an object there: keeps it if it verifies here, else replaces
    /// it with `sealed` — compare-and-swap, so that what another machine put there meanwhile
    /// stays. A replaced object is counted and logged.
    async fn replace_if_refused(&self, key: CacheKey, name: &str, sealed: Vec<u8>) {
        let counters = &self.counters;
        let got = match self.store.get(name, MAX_ENTRY_BYTES + envelope::MAX_OVERHEAD).await {
            Ok(Some(got)) => got,
            // Gone meanwhile (removed by `cache remote verify --fix`): publish again.
            Ok(None) => {
                match self.store.put_if_absent(name, sealed).await {
                    Ok(Put::Created) => stats::add(&counters.publishes, 1),
                    Ok(Put::AlreadyThere) => stats::add(&counters.publish_existing, 1),
                    Err(_) => stats::add(&counters.publish_errors, 1),
                }
                return;
            }
            Err(err) => {
                stats::add(&counters.publish_errors, 1);
                tracing::debug!(object = %name, error = %err, "could not read the remote object to check it");
                return;
            }
        };
        let why = match self.verify_entry(key, &got) {
            Ok(_) => {
                stats::add(&counters.publish_existing, 1);
                return;
            }
            Err(why) => why,
        };
        let replaced = match got {
            Got::Object { bytes, version } => self.store.replace_if(name, &version, &bytes, sealed).await,
            // Too large to compare by content: removed, then created again.
            Got::TooLarge { .. } => match self.store.delete(name).await {
                Ok(()) => self.store.put_if_absent(name, sealed).await.map(|put| put == Put::Created),
                Err(err) => Err(err),
            },
        };
        match replaced {
            Ok(true) => {
                stats::add(&counters.replaced, 1);
                tracing::info!(object = %name, "replaced a remote cache entry that does not verify here: {why}");
            }
            // Another machine replaced it first.
            Ok(false) => stats::add(&counters.publish_existing, 1),
            Err(err) => {
                stats::add(&counters.publish_errors, 1);
                tracing::debug!(object = %name, error = %err, "could not replace a remote object that does not verify");
            }
        }
    }

    /// Folds one request's round trip into the smoothed one: quickly down (a remote that
    /// recovered is used again after a recheck or two), slowly up (one slow answer is not a
    /// slow remote).
    fn observe_round_trip(&self, round_trip: Duration) {
        let sample = duration_ns(round_trip).max(1);
        let _ = self.round_trip_ns.fetch_update(Relaxed, Relaxed, |old| {
            Some(match old {
                0 => sample,
                old if sample < old => old / 4 + sample / 4 * 3,
                old => old / 4 * 3 + sample / 4,
            })
        });
    }

    /// Whether requests are known to take longer than `budget`; then one lookup in every
    /// [`SLOW_RECHECK`] still goes, to notice a remote that became fast again.
    fn slower_than(&self, budget: Duration) -> bool {
        let round_trip = self.round_trip_ns.load(Relaxed);
        if round_trip == 0 || round_trip <= duration_ns(budget) {
            return false;
        }
        let now_ms = u64::try_from(self.opened_at.elapsed().as_millis()).unwrap_or(u64::MAX);
        let last = self.slow_recheck_ms.load(Relaxed);
        let due = now_ms.saturating_sub(last) >= u64::try_from(SLOW_RECHECK.as_millis()).unwrap_or(u64::MAX);
        !(due && self.slow_recheck_ms.compare_exchange(last, now_ms, Relaxed, Relaxed).is_ok())
    }

    /// A request got an answer now.
    fn heard(&self) {
        self.last_answer_ns.fetch_max(duration_ns(self.opened_at.elapsed()), Relaxed);
    }

    fn succeeded(&self) {
        self.heard();
        self.answered.store(true, Relaxed);
        self.stalled.store(false, Relaxed);
        self.down.store(false, Relaxed);
        self.breaker.success();
    }

    /// A request failed outright (connection, server error).
    fn errored(&self, why: &str) {
        self.down.store(true, Relaxed);
        self.failed(why);
    }

    /// Feeds a failure to the breaker; the first time it opens, says why the remote is skipped.
    fn failed(&self, why: &str) {
        if let Tripped::Opened(backoff) = self.breaker.failure() {
            self.warn_skipped(backoff, why);
        }
    }

    /// Something needs the remote now: the warning deferred when the tier opened, if any, is
    /// given.
    fn needed(&self) {
        let deferred = self.deferred_skip.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some((backoff, why)) = deferred {
            self.warn_skipped(backoff, &why);
        }
    }

    /// The one warning saying why the remote is skipped; later openings of the breaker are
    /// logged at debug level.
    fn warn_skipped(&self, backoff: Duration, why: &str) {
        if !self.warned_skip.swap(true, Relaxed) {
            tracing::warn!(
                remote = %self.url,
                "the remote program cache is skipped for {:.0} s (programs are compiled here meanwhile, and it \
                 is tried again later): {why}",
                backoff.as_secs_f64()
            );
        } else {
            tracing::debug!(remote = %self.url, "the remote program cache is skipped again: {why}");
        }
    }
}

impl Drop for RemoteTier {
    fn drop(&mut self) {
        self.early.release_all(&mut |lease| self.release(lease));
        let drivers = self.drivers.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(drivers) = drivers {
            drivers.publish_grown(self);
        }
        // Publishes (and lease releases) are waited for only on a remote that answers, and as
        // fast as a lookup budget (one exit budget in all): a hung or distant one would hold
        // every process at its exit. Publishes of programs whose lease this process holds are
        // waited for even on a slow one, since other machines wait for them: up to
        // `lease::MIN_WAIT` while the remote keeps answering, and never past one exit budget
        // (or four of its round trips, on a remote measured slower) without an answer — a
        // remote that hangs after granting the lease costs one exit budget, and the lease,
        // neither published nor released, expires on the server.
        let typical = self.budgets.fixed().unwrap_or(super::budget::DEFAULT_BUDGET);
        let healthy = self.shared.answered.load(Relaxed)
            && !self.shared.known_slower_than(typical)
            && !self.shared.breaker.is_open();
        let exit_budget = self.shared.exit_budget;
        let quiet_at_most =
            exit_budget.max(Duration::from_nanos(self.shared.round_trip_ns.load(Relaxed)).saturating_mul(4));
        let leased = || self.shared.leased_publishes.load(Relaxed);
        let closing = Instant::now();
        let silent_for = || {
            let heard =
                self.shared.opened_at + Duration::from_nanos(self.shared.last_answer_ns.load(Relaxed));
            closing.elapsed().min(heard.elapsed())
        };
        loop {
            let waited = closing.elapsed();
            let go_on = if leased() > 0 {
                waited < lease::MIN_WAIT.max(exit_budget) && silent_for() < quiet_at_most
            } else {
                healthy && self.shared.pending.load(Relaxed) > 0 && waited < exit_budget
            };
            if !go_on {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let wait = closing.elapsed();
        let left = self.shared.pending.load(Relaxed).max(leased());
        let ledger_dir = self.ledger_dir.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(dir) = ledger_dir {
            let entry = self.shared.counters.snapshot();
            if !entry.is_empty() {
                super::append_ledger(&dir, &entry);
            }
        }
        if left > 0 && healthy {
            tracing::warn!(
                left, remote = %self.shared.url,
                "gave up waiting for publishes to the remote cache after {} ms ({REMOTE_EXIT_ENV})",
                wait.as_millis()
            );
        } else if left > 0 {
            tracing::debug!(left, remote = %self.shared.url, "publishes to a remote that does not answer in time are dropped");
        }
        if let Some(runtime) = self.runtime.take() {
            // Publishes were waited for above; a connection attempt still under way to a remote
            // that does not answer must not hold the process.
            runtime.shutdown_background();
        }
    }
}

// ---- Hooks for the objects kept beside the entries: recipes and device folders (`recipes.rs`) ----

impl RemoteTier {
    /// Seals `payload` as the object `name` (any folder) and stores it in the background,
    /// create-if-absent; an object there that does not pass this machine's checks
    /// (`recipes::check`) is replaced, compare-and-swap, as an entry's publish does.
    pub(crate) fn put_named(&self, name: String, kind: Kind, payload: Vec<u8>) {
        if !self.publishes() || self.shared.down.load(Relaxed) || payload.len() > MAX_ENTRY_BYTES {
            return;
        }
        let sealed = self.seal(&name, kind, &payload);
        let shared = Arc::clone(&self.shared);
        shared.pending.fetch_add(1, Relaxed);
        self.runtime().spawn(async move {
            let stored = match shared.store.put_if_absent(&name, sealed.clone()).await {
                Ok(Put::AlreadyThere) => {
                    match shared.store.get(&name, MAX_ENTRY_BYTES + envelope::MAX_OVERHEAD).await {
                        Ok(Some(Got::Object { bytes, version }))
                            if super::recipes::check(&name, &bytes, shared.trusted.as_ref()).is_err() =>
                        {
                            shared.store.replace_if(&name, &version, &bytes, sealed).await.map(drop)
                        }
                        other => other.map(drop),
                    }
                }
                other => other.map(drop),
            };
            if let Err(err) = stored {
                tracing::debug!(object = %name, error = %err, "could not publish to the remote cache");
            }
            shared.pending.fetch_sub(1, Relaxed);
        });
    }
}

impl Background {
    /// The store.
    pub(crate) fn store(&self) -> &Store {
        &self.shared.store
    }

    /// The keys whose signatures this machine trusts, when it trusts keys.
    pub(crate) fn trusted(&self) -> Option<&TrustedKeys> {
        self.shared.trusted.as_ref()
    }

    /// This GPU's folder name and identity.
    pub(crate) fn gpu(&self) -> (&str, &Provenance) {
        (&self.shared.gpu_folder, &self.shared.provenance)
    }
}
