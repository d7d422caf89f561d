//! The fleet cache: a remote tier below the disk tier, so that a program compiled on one
//! machine is not compiled again on the others. The lookup order is memory → disk → remote →
//! compile.
//!
//! - `config`: `SPARKLE_CACHE_REMOTE` (`s3://bucket/prefix`, `redis://host:port/db`,
//!   `rediss://…`, `file:///path`) and its companions; always compiled.
//! - `store`: the maintained clients (`object_store`, `redis`) behind one small surface.
//! - `envelope`: the remote object, a disk entry byte for byte inside a signed envelope with
//!   provenance; `signing`: ed25519 keys; `check`: the one check every object passes before it
//!   is used (and `sparkle cache remote verify` applies to the whole store).
//! - `connecting`: the connection, started while the runtime opens its backend.
//! - `budget`, `breaker`: a lookup never costs more than a compile, and a failing remote is
//!   skipped, then probed again.
//! - `lease`: compile leases, renewed while their holder compiles, so that a fleet compiles each
//!   program about once.
//! - `tier`: lookups, verification, background publishing (replacing what does not verify),
//!   statistics, and the bounds that keep a hung or distant remote at about one budget per process.
//! - `driver_archive`: the driver's own shader cache, shared per GPU id as one archive.
//! - `ledger`: the tier's counters of past processes, kept beside the entries for `cache stats`.
//! - `recipes`: the recipes kept beside the entries, and which GPU folders hold one device, so
//!   that a machine rebuilds after a driver update from what the fleet recorded;
//!   `fleet_files`: the placement's histories, per device set.
//! - `tls`: the cryptography of the clients' TLS (rustls with ring).

mod config;
mod ledger;
pub use config::{
    check_endpoint, example_for, hex_key, parse_hex_key, parse_location, parse_trusted_keys, redact_url,
    RemoteConfig, RemoteLocation, REMOTE_BUDGET_ENV, REMOTE_ENV, REMOTE_EXIT_ENV, REMOTE_READ_ONLY_ENV,
    REMOTE_UNSIGNED_ENV, S3_ENDPOINT_ENV, SIGNING_KEY_ENV, TRUSTED_KEYS_ENV,
};
#[cfg(feature = "remote")]
pub(crate) use ledger::append as append_ledger;
pub use ledger::{read as read_ledger, RemoteLedger, REMOTE_STATS_FILE};

#[cfg(feature = "remote")]
mod breaker;
#[cfg(feature = "remote")]
pub(crate) mod budget;
#[cfg(feature = "remote")]
mod check;
#[cfg(feature = "remote")]
mod connecting;
#[cfg(feature = "remote")]
mod driver_archive;
#[cfg(feature = "remote")]
mod early;
#[cfg(feature = "remote")]
pub(crate) mod envelope;
#[cfg(feature = "remote")]
pub(crate) mod fleet_files;
#[cfg(feature = "remote")]
mod lease;
#[cfg(feature = "remote")]
mod recipes;
#[cfg(feature = "remote")]
mod signing;
#[cfg(feature = "remote")]
mod store;
#[cfg(all(test, feature = "remote"))]
mod tests;
#[cfg(feature = "remote")]
mod tier;
#[cfg(feature = "remote")]
mod tls;

#[cfg(feature = "remote")]
pub(crate) use check::{classify, ObjectName, Verdict};
#[cfg(feature = "remote")]
pub use connecting::preconnect;
#[cfg(feature = "remote")]
pub(crate) use lease::Lease;
#[cfg(feature = "remote")]
pub(crate) use recipes::{publish_kept_recipe, publish_recipe, Fetched, FleetPrograms, FleetRecipes};
#[cfg(feature = "remote")]
pub use signing::{generate_key_file, public_key_of};
#[cfg(feature = "remote")]
pub(crate) use tier::{Claim, LateLookup, PendingClaim, PendingPeek, RemoteLookup, RemoteTier, Waited};

/// Says `problem` (why the remote tier is not used) on stderr, once per process however many
/// caches open with the same configuration.
pub(crate) fn report_problem_once(problem: &str) {
    static REPORTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut reported = REPORTED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if reported.iter().any(|seen| seen == problem) {
        return;
    }
    reported.push(problem.to_owned());
    tracing::warn!("{problem}; programs run on the local cache tiers");
}
