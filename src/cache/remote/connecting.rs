//! The remote tier's connection, started before the tier itself. A runtime opens its backend
//! first (an EGL display and context: 30 ms on llvmpipe, 70–190 ms on NVIDIA) and only then its
//! program cache, since the cache is keyed by the GPU the backend found. Connecting to the
//! remote needs nothing of the GPU, so [`preconnect`] starts it when the runtime begins to open,
//! and the tier that opens afterwards with the same configuration takes that connection over.
//!
//! The tier's bounds count from when connecting started: a remote that has not connected within
//! one lookup budget of that is not waited for. A hung or distant remote then costs a process
//! only what of that budget the backend's open did not already cover — nothing, where the open
//! takes longer than the budget — instead of one whole budget after the open.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::config::RemoteConfig;
use super::store::{Store, StoreError};

/// A store being connected to, on the tier's own small runtime.
pub(crate) struct Connecting {
    /// The configuration it was started for: only a tier of the same one takes it over.
    config: RemoteConfig,
    pub store: Arc<Store>,
    pub runtime: tokio::runtime::Runtime,
    /// When connecting started.
    pub started: Instant,
    /// The connection's outcome and how long connecting took, timed on its own task (for
    /// Redis: the connection is the store's from then on). Not the time until the tier reads
    /// it: the tier is built after the backend opened, hundreds of milliseconds later on a busy
    /// machine, and that wait is not the remote's.
    pub connect: tokio::task::JoinHandle<Result<Duration, StoreError>>,
}

/// The connection [`preconnect`] started, until a tier takes it.
static STARTED: Mutex<Option<Connecting>> = Mutex::new(None);

/// Builds the store's client and its runtime, and starts connecting in the background. An
/// error says why the store cannot be used (its client cannot be built, or no thread started).
pub(crate) fn start(config: &RemoteConfig) -> Result<Connecting, String> {
    let store = Arc::new(Store::open(config).map_err(|err| err.0)?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("sparkle-remote")
        .enable_all()
        .build()
        .map_err(|err| format!("cannot start its background threads: {err}"))?;
    let started = Instant::now();
    let connecting = Arc::clone(&store);
    let connect = runtime.spawn(async move {
        let started = Instant::now();
        connecting.connect().await.map(|()| started.elapsed())
    });
    Ok(Connecting { config: config.clone(), store, runtime, started, connect })
}

/// Starts connecting to the remote `config` names, if any, so that the tier opened next with
/// the same configuration finds the connection under way or made. Called when a runtime starts
/// opening its backend. Problems are left for the tier's open to report.
pub fn preconnect(config: Option<&RemoteConfig>) {
    let Some(config) = config else { return };
    // A remote the tier will not use (no trust chosen) is not contacted either.
    if config.trusted_keys.is_none() && config.signing_key.is_none() && !config.allow_unsigned {
        return;
    }
    let mut started = STARTED.lock().unwrap_or_else(PoisonError::into_inner);
    if started.as_ref().is_some_and(|connecting| connecting.config == *config) {
        return;
    }
    match start(config) {
        Ok(connecting) => {
            if let Some(unused) = started.replace(connecting) {
                unused.runtime.shutdown_background();
            }
        }
        Err(why) => tracing::debug!(remote = %config.redacted_url(), "not connecting ahead: {why}"),
    }
}

/// The connection started ahead for `config`, if one was; else a new one, started now.
pub(crate) fn take_or_start(config: &RemoteConfig) -> Result<Connecting, String> {
    let ahead = STARTED.lock().unwrap_or_else(PoisonError::into_inner).take();
    match ahead {
        Some(connecting) if connecting.config == *config => Ok(connecting),
        Some(other) => {
            // Started for another configuration (a runtime opened with a cache configured in
            // code): not this tier's.
            other.runtime.shutdown_background();
            start(config)
        }
        None => start(config),
    }
}
