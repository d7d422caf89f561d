//! `RemoteConfig`: which remote store the fleet tier uses and how it may use it, read from
//! `SPARKLE_CACHE_REMOTE` and its companions. Parsing is plain data and always compiled, so a
//! build without the `remote` feature still refuses a malformed URL and says that it has no
//! remote tier rather than ignoring the variable.

use std::path::PathBuf;
use std::time::Duration;

use super::super::config::parse_switch;
use super::super::CacheError;

/// The fleet tier's store: `s3://bucket/prefix`, `redis://…`, `rediss://…` or `file:///path`.
pub const REMOTE_ENV: &str = "SPARKLE_CACHE_REMOTE";
/// `1`: look entries up on the remote, never publish.
pub const REMOTE_READ_ONLY_ENV: &str = "SPARKLE_CACHE_REMOTE_READ_ONLY";
/// The ed25519 secret key file this machine signs what it publishes with.
pub const SIGNING_KEY_ENV: &str = "SPARKLE_CACHE_SIGNING_KEY";
/// Public keys whose signatures are accepted: 64 hex digits each, or key files
/// ([`parse_trusted_keys`]).
pub const TRUSTED_KEYS_ENV: &str = "SPARKLE_CACHE_TRUSTED_KEYS";
/// The most milliseconds a lookup may wait past its opening.
pub const REMOTE_BUDGET_ENV: &str = "SPARKLE_CACHE_REMOTE_BUDGET_MS";
/// The endpoint of an S3-compatible store other than AWS (`http://host:port`).
pub const S3_ENDPOINT_ENV: &str = "SPARKLE_CACHE_S3_ENDPOINT";

/// Where the remote lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteLocation {
    /// An S3-compatible bucket, with an optional key prefix (no leading or trailing `/`).
    S3 {
        /// The bucket's name.
        bucket: String,
        /// The key prefix, possibly empty.
        prefix: String,
    },
    /// A Redis server; the URL is handed to the client as given (`redis://` or `rediss://`).
    Redis {
        /// The server's URL.
        url: String,
    },
    /// A local or mounted folder (`file:///path`), e.g. a shared network file system.
    Folder {
        /// The folder.
        path: PathBuf,
    },
}

/// How the fleet tier reaches its store and what it may do there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteConfig {
    /// The URL as the user gave it (shown in messages; credentials are never part of it).
    pub url: String,
    /// The store the URL names.
    pub location: RemoteLocation,
    /// Look up entries but never publish (for untrusted machines, such as CI of pull requests).
    pub read_only: bool,
    /// An ed25519 secret key file: what this machine publishes is signed with it.
    pub signing_key: Option<PathBuf>,
    /// Public keys (64 hex digits each) whose signatures are accepted. When set, an unsigned or
    /// badly signed remote entry is refused before any other use.
    pub trusted_keys: Option<Vec<[u8; 32]>>,
    /// A fixed budget for every lookup, instead of one derived from what a compile costs.
    pub budget: Option<Duration>,
    /// The S3 endpoint of an S3-compatible server (`http://host:port`); otherwise the usual AWS
    /// variables (`AWS_ENDPOINT_URL`, `AWS_REGION`, credentials) decide.
    pub s3_endpoint: Option<String>,
    /// Further S3 client settings as `object_store`'s configuration keys and values
    /// (`aws_access_key_id`, `aws_region`, …), applied after the environment: for programs that
    /// configure the remote in code rather than through the AWS variables.
    pub s3_options: Vec<(String, String)>,
}

impl RemoteConfig {
    /// A configuration for `url` with every option at its default.
    pub fn new(url: &str) -> Result<RemoteConfig, String> {
        Ok(RemoteConfig {
            url: url.to_owned(),
            location: parse_location(url)?,
            read_only: false,
            signing_key: None,
            trusted_keys: None,
            budget: None,
            s3_endpoint: None,
            s3_options: Vec::new(),
        })
    }

    /// Reads the remote's configuration through `var`; `None` when `SPARKLE_CACHE_REMOTE` is
    /// unset or empty. Empty companion variables count as unset.
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<Option<RemoteConfig>, CacheError> {
        let var = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let invalid = |var: &'static str, value: String, problem: String, example: &'static str| {
            CacheError::InvalidEnv { var, value, problem, example }
        };
        let Some(url) = var(REMOTE_ENV) else { return Ok(None) };
        let url = url.trim().to_owned();
        let mut config = RemoteConfig::new(&url)
            .map_err(|problem| invalid(REMOTE_ENV, url.clone(), problem, "s3://bucket/prefix"))?;
        if let Some(value) = var(REMOTE_READ_ONLY_ENV) {
            config.read_only =
                parse_switch(&value).map_err(|problem| invalid(REMOTE_READ_ONLY_ENV, value, problem, "1"))?;
        }
        config.signing_key = var(SIGNING_KEY_ENV).map(PathBuf::from);
        if let Some(value) = var(TRUSTED_KEYS_ENV) {
            config.trusted_keys = Some(parse_trusted_keys(&value).map_err(|problem| {
                invalid(TRUSTED_KEYS_ENV, value, problem, "<64 hex digits>,<64 hex digits>")
            })?);
        }
        if let Some(value) = var(REMOTE_BUDGET_ENV) {
            let ms: u64 = value.trim().parse().map_err(|_| {
                invalid(REMOTE_BUDGET_ENV, value.clone(), "expected a number of milliseconds".into(), "50")
            })?;
            config.budget = Some(Duration::from_millis(ms));
        }
        config.s3_endpoint = var(S3_ENDPOINT_ENV).map(|v| v.trim().trim_end_matches('/').to_owned());
        Ok(Some(config))
    }
}

/// Parses `s3://bucket[/prefix]`, `redis://…`, `rediss://…` or `file:///path`.
pub fn parse_location(url: &str) -> Result<RemoteLocation, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| "expected a URL such as s3://bucket/prefix or redis://host:6379/0".to_owned())?;
    match scheme.to_ascii_lowercase().as_str() {
        "s3" => {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err("the S3 URL names no bucket".into());
            }
            let prefix = prefix.trim_matches('/').to_owned();
            if prefix.split('/').any(|part| part == "." || part == "..") {
                return Err("the S3 prefix may not contain `.` or `..` parts".into());
            }
            Ok(RemoteLocation::S3 { bucket: bucket.to_owned(), prefix })
        }
        "redis" | "rediss" => {
            if rest.is_empty() || rest.starts_with('/') {
                return Err("the Redis URL names no host".into());
            }
            Ok(RemoteLocation::Redis { url: url.to_owned() })
        }
        "file" => {
            let path = PathBuf::from(rest);
            if !path.is_absolute() {
                return Err("a file URL needs an absolute path (file:///path)".into());
            }
            Ok(RemoteLocation::Folder { path })
        }
        other => Err(format!("unknown scheme `{other}`; use s3://, redis://, rediss:// or file://")),
    }
}

/// Parses a list of public keys separated by commas or white space: each is 64 hex digits, or
/// the path of a file holding such keys (one per line, `#` comments allowed).
pub fn parse_trusted_keys(text: &str) -> Result<Vec<[u8; 32]>, String> {
    let mut keys = Vec::new();
    for item in text.split(|c: char| c == ',' || c.is_whitespace()).filter(|s| !s.is_empty()) {
        if let Some(key) = parse_hex_key(item) {
            keys.push(key);
            continue;
        }
        let contents = std::fs::read_to_string(item)
            .map_err(|err| format!("`{item}` is neither 64 hex digits nor a readable key file ({err})"))?;
        for line in
            contents.lines().map(|l| l.split('#').next().unwrap_or("").trim()).filter(|l| !l.is_empty())
        {
            keys.push(parse_hex_key(line).ok_or_else(|| {
                format!("{item} holds `{line}`, which is not a public key of 64 hex digits")
            })?);
        }
    }
    if keys.is_empty() {
        return Err("no public key given".into());
    }
    Ok(keys)
}

/// 64 hex digits as 32 bytes.
pub fn parse_hex_key(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(key)
}

/// 32 bytes as 64 lowercase hex digits.
pub fn hex_key(key: &[u8; 32]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn locations_parse() {
        assert_eq!(
            parse_location("s3://bucket/a/b/").unwrap(),
            RemoteLocation::S3 { bucket: "bucket".into(), prefix: "a/b".into() }
        );
        assert_eq!(
            parse_location("s3://bucket").unwrap(),
            RemoteLocation::S3 { bucket: "bucket".into(), prefix: "".into() }
        );
        assert!(matches!(parse_location("redis://127.0.0.1:6379/0").unwrap(), RemoteLocation::Redis { .. }));
        assert!(matches!(parse_location("rediss://cache:6380").unwrap(), RemoteLocation::Redis { .. }));
        assert_eq!(
            parse_location("file:///srv/cache").unwrap(),
            RemoteLocation::Folder { path: "/srv/cache".into() }
        );
        for bad in ["bucket", "s3://", "s3:///prefix", "s3://b/../x", "redis://", "file://rel", "ftp://x"] {
            assert!(parse_location(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn environment_is_read_and_checked() {
        assert_eq!(RemoteConfig::from_lookup(lookup(&[])).unwrap(), None);
        let key = "ab".repeat(32);
        let config = RemoteConfig::from_lookup(lookup(&[
            (REMOTE_ENV, "redis://127.0.0.1:1/0"),
            (REMOTE_READ_ONLY_ENV, "yes"),
            (TRUSTED_KEYS_ENV, &format!("{key}, {key}")),
            (REMOTE_BUDGET_ENV, "25"),
        ]))
        .unwrap()
        .unwrap();
        assert!(config.read_only);
        assert_eq!(config.trusted_keys, Some(vec![[0xab; 32], [0xab; 32]]));
        assert_eq!(config.budget, Some(Duration::from_millis(25)));
        let err = RemoteConfig::from_lookup(lookup(&[(REMOTE_ENV, "ftp://x")])).unwrap_err().to_string();
        assert!(err.contains(REMOTE_ENV) && err.contains("s3://"), "{err}");
        let err = RemoteConfig::from_lookup(lookup(&[(REMOTE_ENV, "s3://b"), (TRUSTED_KEYS_ENV, "abc")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains(TRUSTED_KEYS_ENV) && err.contains("64 hex"), "{err}");
    }

    #[test]
    fn hex_keys_round_trip() {
        let key = [7u8; 32];
        assert_eq!(parse_hex_key(&hex_key(&key)), Some(key));
        assert_eq!(parse_hex_key("zz"), None);
    }
}
