//! Files kept beside the cache that travel through the fleet tier without belonging to a GPU
//! folder: the placement's history of a device set (`crate::runtime` `placement_history.rs`),
//! as `placement/<16 hex>.json` on the remote, so that a new machine of the fleet starts placing
//! work with what the fleet learned on the same devices.
//!
//! Such a file is read or written once per process at most (when the placement opens without a
//! local history, when it saves), so there is no tier behind it: each request opens the store
//! configured by `SPARKLE_CACHE_REMOTE` on a small runtime of its own and gives up after a
//! timeout (a publish: the exit budget, as the tier's publishes at a process's end). The object is sealed in the envelope every remote object has, signed when a signing
//! key is set, and checked as every remote object is before a byte of it is used: with trusted
//! keys only a trusted signature over its name passes; without, the remote is used only with
//! `SPARKLE_CACHE_REMOTE_UNSIGNED=1`. A machine that trusts keys but has no signing key, or is
//! read-only, publishes nothing. The file's own checks (its header, checksum and device set)
//! come after, in the caller.

use std::time::Duration;

use super::check;
use super::config::RemoteConfig;
use super::envelope::{self, Kind, Provenance};
use super::signing::{Signer25519, TrustedKeys};
use super::store::{Got, Store};

/// The folder of placement histories on the remote.
const PLACEMENT_FOLDER: &str = "placement";

/// The remote configured in the environment (`SPARKLE_CACHE_REMOTE` and its companions), when
/// one is configured and usable.
fn configured() -> Option<RemoteConfig> {
    match RemoteConfig::from_lookup(|name| std::env::var(name).ok().filter(|v| !v.trim().is_empty())) {
        Ok(config) => config,
        Err(err) => {
            tracing::debug!(error = %err, "the remote cache is not configured usably; the placement history stays local");
            None
        }
    }
}

/// Who signs this machine's objects and whose signatures it trusts, as the tier decides them;
/// an error when nothing says which objects to trust.
fn trust(config: &RemoteConfig) -> Result<(Option<Signer25519>, Option<TrustedKeys>), String> {
    let signer = config
        .signing_key
        .as_deref()
        .map(|path| Signer25519::load(path, config.trusted_keys.as_deref()))
        .transpose()?;
    let list =
        config.trusted_keys.clone().or_else(|| signer.as_ref().map(|signer| vec![signer.public_key()]));
    if list.is_none() && !config.allow_unsigned {
        return Err("nothing says which of its objects to trust (no trusted keys, no signing key, and \
                    SPARKLE_CACHE_REMOTE_UNSIGNED is not set)"
            .into());
    }
    let trusted = list.as_deref().map(TrustedKeys::new).transpose()?;
    Ok((signer, trusted))
}

/// Runs `work` on the store of `config` on a runtime of its own, at most `timeout`.
fn with_store<T>(
    config: &RemoteConfig,
    timeout: Duration,
    work: impl FnOnce(Store) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, String>> + Send>>,
) -> Result<T, String> {
    let store = Store::open(config).map_err(|err| err.0)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| format!("cannot start a runtime: {err}"))?;
    let outcome = runtime.block_on(async move {
        tokio::time::timeout(timeout, work(store))
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {} ms", timeout.as_millis())))
    });
    // A request still under way (a hung remote) must not hold the caller.
    runtime.shutdown_background();
    outcome
}

/// The object name of the placement history file `file` (`<16 hex>.json`).
fn placement_name(file: &str) -> String {
    format!("{PLACEMENT_FOLDER}/{file}")
}

/// How long a fetch of a history waits (once per machine and device set, when the placement
/// opens): the lookup budget when one is fixed, at least a quarter second (connecting takes two
/// round trips).
fn request_timeout(config: &RemoteConfig) -> Duration {
    config.budget.unwrap_or_default().max(Duration::from_millis(250))
}

/// The fleet's placement history `file` (its payload, once its envelope and signature passed),
/// when a remote is configured and holds one; at most `max` bytes. `Err` says why it is not used.
pub(crate) fn fetch_placement_history(file: &str, max: usize) -> Result<Option<Vec<u8>>, String> {
    let Some(config) = configured() else { return Ok(None) };
    let (_, trusted) = trust(&config)?;
    let name = placement_name(file);
    let owned = name.clone();
    let limit = max.saturating_add(envelope::MAX_OVERHEAD);
    let got = with_store(&config, request_timeout(&config), move |store| {
        Box::pin(async move { store.get(&owned, limit).await.map_err(|err| err.0) })
    })?;
    let bytes = match got {
        None => return Ok(None),
        Some(Got::TooLarge { size }) => return Err(format!("{size} bytes, more than a history may hold")),
        Some(Got::Object { bytes, .. }) => bytes,
    };
    let opened = check::open_checked(&name, &bytes, Kind::PlacementHistory, trusted.as_ref())?;
    Ok(Some(opened.payload.to_vec()))
}

/// Publishes the placement history `file` (replacing the fleet's: the latest learned is as good
/// as any), when a remote is configured and this machine publishes; failures are logged.
pub(crate) fn publish_placement_history(file: &str, payload: &[u8]) {
    let Some(config) = configured() else { return };
    if config.read_only {
        return;
    }
    let (signer, trusted) = match trust(&config) {
        Ok(trust) => trust,
        Err(why) => {
            tracing::debug!("the placement history is not published: {why}");
            return;
        }
    };
    if signer.is_none() && trusted.is_some() {
        // Trusting only signed objects without a key to sign: this machine publishes nothing.
        return;
    }
    let name = placement_name(file);
    let provenance = Provenance {
        sparkle: env!("CARGO_PKG_VERSION").into(),
        backend: PLACEMENT_FOLDER.into(),
        gpu: Vec::new(),
        created_unix_ns: crate::cache::now_unix_ns(),
    };
    let sign = signer.as_ref().map(|signer| move |message: &[u8]| signer.sign(message));
    let sealed = envelope::seal(
        &name,
        Kind::PlacementHistory,
        &provenance,
        payload,
        sign.as_ref().map(|f| f as envelope::Sign<'_>),
    );
    let owned = name.clone();
    // Saving happens when a placement closes, often at a process's end: it waits no longer than
    // the tier's publishes there (`SPARKLE_CACHE_REMOTE_EXIT_MS`).
    let exit_budget = config.exit_budget.unwrap_or_else(|| {
        config
            .budget
            .map_or(super::tier::DEFAULT_EXIT_BUDGET, |fixed| fixed.max(super::tier::DEFAULT_EXIT_BUDGET))
    });
    let stored = with_store(&config, exit_budget, move |store| {
        Box::pin(async move { store.put(&owned, sealed).await.map_err(|err| err.0) })
    });
    if let Err(err) = stored {
        tracing::debug!(object = %name, "could not publish the placement history to the remote cache: {err}");
    }
}
