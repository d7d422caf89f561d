//! Compile leases: so that a fleet compiles each program about once, the first machine to miss a
//! program takes its lease (`<gpu folder>/<key>.lease`) and compiles, and the others wait for its
//! entry instead of compiling too.
//!
//! Under load a compile takes several times what it takes on an idle machine, so a waiter does
//! not guess how long to wait: the holder renews its lease while it compiles (every third of the
//! lease's time to live), and a waiter waits as long as the lease is alive — bounded by a
//! multiple of the compile time the holder expects, which the lease states. A holder that died
//! stops renewing, its lease expires, and a waiter takes it over. Waiting polls with a growing
//! interval and counts once, as a wait, never as misses.
//!
//! Redis: `SET NX PX` (the server expires the lease), renewed and released by scripts that
//! compare the holder's token first. Object stores and folders: a create-if-absent object holding
//! its expiry time, rewritten to renew, ignored once expired.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use super::store::{Got, Put, Store, StoreError};

/// A lease not renewed for this long frees itself: a holder that died holds nobody up longer.
pub(crate) const LEASE_TTL: Duration = Duration::from_secs(10);
/// The holder renews its lease this often.
pub(crate) const RENEW_EVERY: Duration = Duration::from_millis(LEASE_TTL.as_millis() as u64 / 3);
/// A waiter waits at most this many times the compile time the holder expects…
pub(crate) const WAIT_FACTOR: u32 = 20;
/// …but never less than this (a loaded machine compiles many times slower than it measured)…
pub(crate) const MIN_WAIT: Duration = Duration::from_secs(3);
/// …nor more than this.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(60);
/// The first poll of a waiter comes after this; each later one after half as long again, up to
/// [`MAX_POLL`].
pub(crate) const FIRST_POLL: Duration = Duration::from_millis(5);
pub(crate) const MAX_POLL: Duration = Duration::from_millis(100);
/// A waiter looks at the lease itself (is its holder alive?) at most this often; at every poll
/// it looks for the entry only.
pub(crate) const LEASE_CHECK_EVERY: Duration = Duration::from_millis(250);
/// Failed looks in a row after which a waiter stops waiting and compiles.
pub(crate) const WAIT_FAILURES: u32 = 3;

/// A compile lease this process holds: renewed in the background until released.
pub(crate) struct Lease {
    /// The lease object's name.
    pub name: String,
    /// What this holder wrote there, to tell its lease from a successor's.
    pub token: String,
    /// The compile time this holder expects, as the lease states it.
    pub expected: Duration,
    /// Set when the lease is released: the renewal stops.
    pub released: Arc<AtomicBool>,
    /// While a publish of its program is under way: the count of such publishes, which this
    /// lease leaves when it goes.
    pub publishing: Option<Arc<AtomicUsize>>,
}

#[cfg(test)]
impl Lease {
    /// A lease named `name` that nothing renews, for tests of code that hands leases around.
    pub(crate) fn for_test(name: &str) -> Lease {
        Lease {
            name: name.to_owned(),
            token: new_token(),
            expected: Duration::from_millis(1),
            released: Arc::new(AtomicBool::new(false)),
            publishing: None,
        }
    }
}

impl Drop for Lease {
    /// A lease dropped without being released (its hedge ended first) stops being renewed and
    /// expires on its own.
    fn drop(&mut self) {
        self.released.store(true, Relaxed);
        if let Some(count) = self.publishing.take() {
            count.fetch_sub(1, Relaxed);
        }
    }
}

/// A lease someone holds, as a waiter reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held {
    /// The compile time its holder expects.
    pub expected: Duration,
}

/// A token unique to this process and lease.
pub(crate) fn new_token() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{}-{}-{}", std::process::id(), NEXT.fetch_add(1, Relaxed), crate::cache::now_unix_ns())
}

/// How long a waiter waits at most for a holder that expects to compile for `expected`.
pub(crate) fn wait_bound(expected: Duration) -> Duration {
    (expected * WAIT_FACTOR).clamp(MIN_WAIT, MAX_WAIT)
}

fn now_ms() -> u64 {
    crate::cache::now_unix_ns() / 1_000_000
}

fn ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// The lease's text: `<token> <expected ms>`, after `<expires ms> ` where the store cannot
/// expire it itself.
fn lease_text(token: &str, expected: Duration, expires_ms: Option<u64>) -> String {
    match expires_ms {
        Some(expires) => format!("{expires} {token} {}", ms(expected)),
        None => format!("{token} {}", ms(expected)),
    }
}

/// Reads a lease's text: its token and expected compile time, and its expiry where it has one.
fn parse(text: &str, with_expiry: bool) -> Option<(Option<u64>, String, Duration)> {
    let mut words = text.split_whitespace();
    let expires = if with_expiry { Some(words.next()?.parse().ok()?) } else { None };
    let token = words.next()?.to_owned();
    let expected = Duration::from_millis(words.next()?.parse().ok()?);
    Some((expires, token, expected))
}

impl Store {
    /// Takes the lease `name` for [`LEASE_TTL`] unless a live one is there; `expected` is the
    /// compile time this holder expects (waiters size their wait by it).
    pub async fn claim(&self, name: &str, token: &str, expected: Duration) -> Result<bool, StoreError> {
        match self {
            Store::Objects { .. } => {
                let text = || lease_text(token, expected, Some(now_ms() + ms(LEASE_TTL))).into_bytes();
                if self.put_if_absent(name, text()).await? == Put::Created {
                    return Ok(true);
                }
                // Someone holds it, unless it expired (its holder died) or cannot be read.
                if self.lease(name).await?.is_some() {
                    return Ok(false);
                }
                self.delete(name).await?;
                Ok(self.put_if_absent(name, text()).await? == Put::Created)
            }
            Store::Redis { .. } => {
                let mut connection = self.redis().await?;
                let set: Option<String> = redis::cmd("SET")
                    .arg(self.redis_name(name))
                    .arg(lease_text(token, expected, None))
                    .arg("NX")
                    .arg("PX")
                    .arg(ms(LEASE_TTL))
                    .query_async(&mut connection)
                    .await
                    .map_err(|err| StoreError(format!("Redis SET NX PX: {err}")))?;
                Ok(set.is_some())
            }
        }
    }

    /// The live lease `name`, if any.
    pub async fn lease(&self, name: &str) -> Result<Option<Held>, StoreError> {
        let with_expiry = matches!(self, Store::Objects { .. });
        let text = match self.get(name, 256).await? {
            Some(Got::Object { bytes, .. }) => String::from_utf8(bytes).unwrap_or_default(),
            _ => return Ok(None),
        };
        Ok(match parse(&text, with_expiry) {
            Some((Some(expires), _, _)) if expires < now_ms() => None,
            Some((_, _, expected)) => Some(Held { expected }),
            // Not a lease of ours (an older format): as good as none.
            None => None,
        })
    }

    /// Renews this holder's lease `name` for another [`LEASE_TTL`]; `Ok(false)` when it is not
    /// this holder's any more (it expired and another machine took it).
    pub async fn renew(&self, name: &str, token: &str, expected: Duration) -> Result<bool, StoreError> {
        match self {
            Store::Objects { .. } => {
                let ours = match self.get(name, 256).await? {
                    Some(Got::Object { bytes, .. }) => String::from_utf8(bytes)
                        .ok()
                        .and_then(|text| parse(&text, true))
                        .is_some_and(|(_, held_by, _)| held_by == token),
                    _ => false,
                };
                if ours {
                    let text = lease_text(token, expected, Some(now_ms() + ms(LEASE_TTL)));
                    self.put(name, text.into_bytes()).await?;
                }
                Ok(ours)
            }
            Store::Redis { .. } => {
                let mut connection = self.redis().await?;
                let renewed: i64 = redis::cmd("EVAL")
                    .arg("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0")
                    .arg(1)
                    .arg(self.redis_name(name))
                    .arg(lease_text(token, expected, None))
                    .arg(ms(LEASE_TTL))
                    .query_async(&mut connection)
                    .await
                    .map_err(|err| StoreError(format!("Redis lease renewal script: {err}")))?;
                Ok(renewed == 1)
            }
        }
    }

    /// Removes this holder's lease `name` (not a successor's, on Redis).
    pub async fn release_lease(&self, name: &str, token: &str, expected: Duration) -> Result<(), StoreError> {
        match self {
            Store::Objects { .. } => self.delete(name).await,
            Store::Redis { .. } => {
                let mut connection = self.redis().await?;
                redis::cmd("EVAL")
                    .arg("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0")
                    .arg(1)
                    .arg(self.redis_name(name))
                    .arg(lease_text(token, expected, None))
                    .query_async::<i64>(&mut connection)
                    .await
                    .map(drop)
                    .map_err(|err| StoreError(format!("Redis lease release script: {err}")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_texts_round_trip_and_bounds_hold() {
        let text = lease_text("12-3-4", Duration::from_millis(250), Some(99));
        assert_eq!(parse(&text, true), Some((Some(99), "12-3-4".into(), Duration::from_millis(250))));
        let text = lease_text("12-3-4", Duration::from_millis(250), None);
        assert_eq!(parse(&text, false), Some((None, "12-3-4".into(), Duration::from_millis(250))));
        assert_eq!(parse("1700000000000", true), None, "an older lease is no lease");
        assert_eq!(wait_bound(Duration::from_millis(5)), MIN_WAIT);
        assert_eq!(wait_bound(Duration::from_millis(500)), Duration::from_secs(10));
        assert_eq!(wait_bound(Duration::from_secs(100)), MAX_WAIT);
        assert_ne!(new_token(), new_token());
    }
}
