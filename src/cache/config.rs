//! `CacheConfig`: where the cache lives, how large it may grow and whether it may be written, with
//! the defaults and the environment variables (`SPARKLE_CACHE_DIR`, `SPARKLE_CACHE_MAX_SIZE`,
//! `SPARKLE_CACHE_MAX_AGE_DAYS`, `SPARKLE_CACHE_READ_ONLY`, `SPARKLE_CACHE_REMOTE`…) that override them, and the one parser
//! for each kind of value, shared with the `sparkle cache` command line.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::remote::RemoteConfig;
use super::CacheError;

/// The cache folder (default `$XDG_CACHE_HOME/sparkle`, else `~/.cache/sparkle`).
pub const DIR_ENV: &str = "SPARKLE_CACHE_DIR";
/// The most bytes this user's entries and driver caches may take on disk (`500M`, `2G`, …;
/// [`parse_max_size`]).
pub const MAX_SIZE_ENV: &str = "SPARKLE_CACHE_MAX_SIZE";
/// Entries not used for this many days are pruned ([`parse_age_days`]).
pub const MAX_AGE_ENV: &str = "SPARKLE_CACHE_MAX_AGE_DAYS";
/// `1`, `true` or `yes`: load entries from disk but never write there.
pub const READ_ONLY_ENV: &str = "SPARKLE_CACHE_READ_ONLY";

pub const DEFAULT_MAX_MEMORY_ENTRIES: usize = 1024;
pub const DEFAULT_MAX_MEMORY_BYTES: u64 = 512 << 20;
pub const DEFAULT_MAX_DISK_BYTES: u64 = 1 << 30;
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(30 * 24 * 3600);
/// Smallest size bound accepted: below it pruning would remove nearly every entry it writes.
pub const MIN_DISK_BYTES: u64 = 64 << 10;

/// How a [`ProgramCache`](super::ProgramCache) stores programs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheConfig {
    /// The cache folder (one subfolder per GPU); `None` keeps programs in memory only.
    pub dir: Option<PathBuf>,
    /// Most programs kept in memory while none of them is in use.
    pub max_memory_entries: usize,
    /// Most blob bytes kept in memory while none of them is in use.
    pub max_memory_bytes: u64,
    /// Size bound of the whole cache folder; pruning removes least recently used entries.
    pub max_disk_bytes: u64,
    /// Entries not used for this long are removed when the cache prunes; `None`: no age limit.
    pub max_age: Option<Duration>,
    /// Read entries from `dir` but never write there: no publish, no removal, no recorded use, no
    /// description files. A folder the cache cannot write to but can read is used this way too.
    pub read_only: bool,
    /// The fleet cache below the disk tier (`SPARKLE_CACHE_REMOTE`); `None`: this machine only.
    pub remote: Option<RemoteConfig>,
    /// Why the remote variables could not be used, when they could not: the cache then works
    /// without a remote tier and reports this once (the configuration rule of
    /// [`RemoteConfig::from_lookup`]: the program always runs).
    pub remote_problem: Option<String>,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self::memory_only()
    }
}

impl CacheConfig {
    /// Default bounds, nothing on disk.
    pub fn memory_only() -> CacheConfig {
        CacheConfig {
            dir: None,
            max_memory_entries: DEFAULT_MAX_MEMORY_ENTRIES,
            max_memory_bytes: DEFAULT_MAX_MEMORY_BYTES,
            max_disk_bytes: DEFAULT_MAX_DISK_BYTES,
            max_age: Some(DEFAULT_MAX_AGE),
            read_only: false,
            remote: None,
            remote_problem: None,
        }
    }

    /// Default bounds, persisted in `dir`.
    pub fn in_dir(dir: impl Into<PathBuf>) -> CacheConfig {
        CacheConfig { dir: Some(dir.into()), ..CacheConfig::memory_only() }
    }

    /// Reads the configuration from the process environment; see [`from_lookup`](Self::from_lookup).
    pub fn from_env() -> Result<CacheConfig, CacheError> {
        Self::from_lookup(|name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned()))
    }

    /// Builds the configuration from variables read through `var`:
    ///
    /// - the folder: `SPARKLE_CACHE_DIR`, else `$XDG_CACHE_HOME/sparkle` (absolute paths only, as
    ///   the XDG spec asks), else `$HOME/.cache/sparkle`; none of them: memory only, with a warning;
    /// - `SPARKLE_CACHE_MAX_SIZE`: bytes, optionally with a K, M, G or T suffix (powers of 1024,
    ///   `B`/`iB` allowed after it), e.g. `2G`; at least 64K ([`parse_max_size`]);
    /// - `SPARKLE_CACHE_MAX_AGE_DAYS`: days (fractions allowed); `0`, `off` or `never` lift the limit
    ///   ([`parse_age_days`]);
    /// - `SPARKLE_CACHE_READ_ONLY`: `1`, `true`, `yes` or `0`, `false`, `no` ([`parse_switch`]).
    ///
    /// - the remote tier: `SPARKLE_CACHE_REMOTE` and its companions ([`RemoteConfig::from_lookup`]).
    ///   They never make this fail: a remote that cannot be configured leaves `remote` unset and
    ///   says why in `remote_problem`, and the program runs on its local tiers.
    ///
    /// Empty variables count as unset.
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<CacheConfig, CacheError> {
        let var = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let dir = if let Some(dir) = var(DIR_ENV) {
            Some(PathBuf::from(dir))
        } else if let Some(xdg) = var("XDG_CACHE_HOME").filter(|x| Path::new(x).is_absolute()) {
            Some(Path::new(&xdg).join("sparkle"))
        } else if let Some(home) = var("HOME") {
            Some(Path::new(&home).join(".cache").join("sparkle"))
        } else {
            tracing::warn!(
                "no cache folder: none of {DIR_ENV}, XDG_CACHE_HOME and HOME is set; programs are kept \
                 in memory only and compiled again in every run (set {DIR_ENV} to keep them)"
            );
            None
        };
        let mut config = CacheConfig { dir, ..CacheConfig::memory_only() };
        if let Some(value) = var(MAX_SIZE_ENV) {
            config.max_disk_bytes = parse_max_size(&value).map_err(|problem| CacheError::InvalidEnv {
                var: MAX_SIZE_ENV,
                value,
                problem,
                example: "512M",
            })?;
        }
        if let Some(value) = var(MAX_AGE_ENV) {
            config.max_age = parse_age_days(&value).map_err(|problem| CacheError::InvalidEnv {
                var: MAX_AGE_ENV,
                value,
                problem,
                example: "30",
            })?;
        }
        if let Some(value) = var(READ_ONLY_ENV) {
            config.read_only = parse_switch(&value).map_err(|problem| CacheError::InvalidEnv {
                var: READ_ONLY_ENV,
                value,
                problem,
                example: "1",
            })?;
        }
        match RemoteConfig::from_lookup(var) {
            Ok(remote) => config.remote = remote,
            Err(err) => config.remote_problem = Some(err.to_string()),
        }
        Ok(config)
    }
}

/// Parses `1234`, `64K`, `512M`, `2G`, `1T` (optionally `KB`, `KiB`, …; case-insensitive).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let digits_end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, suffix) = text.split_at(digits_end);
    if number.is_empty() {
        return Err("expected a number of bytes, optionally followed by K, M, G or T".into());
    }
    let number: u64 = number.parse().map_err(|_| "the number is too large".to_owned())?;
    let suffix = suffix.trim().to_ascii_lowercase();
    let unit = suffix.strip_suffix("ib").or_else(|| suffix.strip_suffix('b')).unwrap_or(&suffix);
    let shift = match unit {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return Err(format!("unknown unit {suffix:?}; use K, M, G or T")),
    };
    number.checked_mul(1u64 << shift).ok_or_else(|| "the size does not fit in 64 bits".to_owned())
}

/// [`parse_size`], refusing bounds below [`MIN_DISK_BYTES`] (64K): a cache that small keeps
/// almost nothing.
pub fn parse_max_size(text: &str) -> Result<u64, String> {
    let bytes = parse_size(text)?;
    if bytes < MIN_DISK_BYTES {
        return Err(format!(
            "{bytes} bytes is below the smallest cache size, 64K (to empty the cache, use `sparkle cache clear`)"
        ));
    }
    Ok(bytes)
}

/// Parses `1`, `true`, `yes` / `0`, `false`, `no` (case-insensitive); anything else is an error.
pub fn parse_switch(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" => Ok(true),
        "0" | "false" | "no" => Ok(false),
        _ => Err("expected 1, true or yes to switch on, 0, false or no to switch off".into()),
    }
}

/// Parses a number of days; `0`, `off`, `never` and `none` mean no limit.
pub fn parse_age_days(text: &str) -> Result<Option<Duration>, String> {
    let text = text.trim();
    if ["off", "never", "none"].iter().any(|w| text.eq_ignore_ascii_case(w)) {
        return Ok(None);
    }
    let days: f64 = text.parse().map_err(|_| "expected a number of days".to_owned())?;
    if !days.is_finite() || !(0.0..=1e6).contains(&days) {
        return Err("expected a number of days between 0 and 1000000".into());
    }
    if days == 0.0 {
        return Ok(None);
    }
    Ok(Some(Duration::from_secs_f64(days * 86_400.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn sizes_parse_with_and_without_units() {
        assert_eq!(parse_size("1234"), Ok(1234));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("512m"), Ok(512 << 20));
        assert_eq!(parse_size("2 GiB"), Ok(2 << 30));
        assert_eq!(parse_size("1TB"), Ok(1 << 40));
        assert!(parse_size("").is_err());
        assert!(parse_size("12X").is_err());
        assert!(parse_size("-5").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("20000000000T").is_err());
    }

    #[test]
    fn ages_parse() {
        assert_eq!(parse_age_days("1"), Ok(Some(Duration::from_secs(86_400))));
        assert_eq!(parse_age_days("0.5"), Ok(Some(Duration::from_secs(43_200))));
        assert_eq!(parse_age_days("0"), Ok(None));
        assert_eq!(parse_age_days("never"), Ok(None));
        assert!(parse_age_days("soon").is_err());
        assert!(parse_age_days("-1").is_err());
        assert!(parse_age_days("1e300").is_err());
        assert!(parse_age_days("inf").is_err());
        assert!(parse_age_days("NaN").is_err());
    }

    #[test]
    fn max_sizes_below_64k_are_refused() {
        assert_eq!(parse_max_size("64K"), Ok(64 << 10));
        assert!(parse_max_size("0").is_err());
        assert!(parse_max_size("65535").is_err());
        let err = CacheConfig::from_lookup(lookup(&[(MAX_SIZE_ENV, "0")])).unwrap_err().to_string();
        assert!(err.contains(MAX_SIZE_ENV) && err.contains("512M") && err.contains("64K"), "{err}");
    }

    #[test]
    fn read_only_switch_is_strict() {
        for (text, value) in
            [("1", true), ("TRUE", true), ("yes", true), ("0", false), ("false", false), ("No", false)]
        {
            let c = CacheConfig::from_lookup(lookup(&[(READ_ONLY_ENV, text)])).unwrap();
            assert_eq!(c.read_only, value, "{text}");
        }
        assert!(!CacheConfig::from_lookup(lookup(&[])).unwrap().read_only);
        for bad in ["on", "2", "y", "enabled"] {
            let err = CacheConfig::from_lookup(lookup(&[(READ_ONLY_ENV, bad)])).unwrap_err().to_string();
            assert!(err.contains(READ_ONLY_ENV) && err.contains("true"), "{err}");
        }
    }

    #[test]
    fn dir_precedence() {
        let c =
            CacheConfig::from_lookup(lookup(&[(DIR_ENV, "/a"), ("XDG_CACHE_HOME", "/x"), ("HOME", "/h")]))
                .unwrap();
        assert_eq!(c.dir, Some(PathBuf::from("/a")));
        let c = CacheConfig::from_lookup(lookup(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")])).unwrap();
        assert_eq!(c.dir, Some(PathBuf::from("/x/sparkle")));
        let c = CacheConfig::from_lookup(lookup(&[("XDG_CACHE_HOME", "rel"), ("HOME", "/h")])).unwrap();
        assert_eq!(c.dir, Some(PathBuf::from("/h/.cache/sparkle")));
        let c = CacheConfig::from_lookup(lookup(&[(DIR_ENV, "")])).unwrap();
        assert_eq!(c.dir, None);
    }

    #[test]
    fn bad_values_name_the_variable_and_an_example() {
        let err = CacheConfig::from_lookup(lookup(&[(MAX_SIZE_ENV, "lots")])).unwrap_err().to_string();
        assert!(err.contains(MAX_SIZE_ENV) && err.contains("512M"), "{err}");
        let err = CacheConfig::from_lookup(lookup(&[(MAX_AGE_ENV, "soon")])).unwrap_err().to_string();
        assert!(err.contains(MAX_AGE_ENV) && err.contains("=30"), "{err}");
        let c = CacheConfig::from_lookup(lookup(&[(MAX_SIZE_ENV, "2G"), (MAX_AGE_ENV, "7")])).unwrap();
        assert_eq!(c.max_disk_bytes, 2 << 30);
        assert_eq!(c.max_age, Some(Duration::from_secs(7 * 86_400)));
    }

    #[test]
    fn a_remote_that_cannot_be_configured_never_stops_the_program() {
        use crate::cache::remote::{REMOTE_BUDGET_ENV, REMOTE_ENV, REMOTE_READ_ONLY_ENV, TRUSTED_KEYS_ENV};
        for (var, value) in [
            (REMOTE_ENV, "ftp://x"),
            (REMOTE_BUDGET_ENV, "soon"),
            (TRUSTED_KEYS_ENV, "abc"),
            (REMOTE_READ_ONLY_ENV, "on"),
        ] {
            let mut vars = vec![(DIR_ENV, "/a"), (var, value)];
            if var != REMOTE_ENV {
                vars.push((REMOTE_ENV, "redis://127.0.0.1:1/0"));
            }
            let c = CacheConfig::from_lookup(lookup(&vars)).unwrap();
            assert_eq!((c.dir.as_deref(), c.remote.as_ref()), (Some(Path::new("/a")), None), "{var}");
            let problem = c.remote_problem.unwrap_or_default();
            assert!(problem.contains(var), "{var}: {problem}");
        }
    }
}
