//! `RemoteConfig`: which remote store the fleet tier uses and how it may use it, read from
//! `SPARKLE_CACHE_REMOTE` and its companions. Parsing is plain data and always compiled, so a
//! build without the `remote` feature still refuses a malformed URL and says that it has no
//! remote tier rather than ignoring the variable.
//!
//! The configuration rule: the program always runs. A remote that cannot be configured (a
//! malformed variable here, or a key file, endpoint or trust setting the tier cannot use when it
//! opens) is reported once on stderr and by `sparkle info` (which then exits 1), and the program
//! runs on its local tiers. Every message names the variable, what is wrong, and an example of
//! the same scheme.
//!
//! A URL may hold a password (`redis://:secret@host`): it is used to connect and never shown.
//! Messages, logs, statistics and `Debug` show [`redact_url`]'s form.

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
/// `1`: use remote objects that no trusted key signed. Without it (and without trusted keys or a
/// signing key) the remote is not used: whoever can write an unsigned store chooses the GPU code
/// its readers run.
pub const REMOTE_UNSIGNED_ENV: &str = "SPARKLE_CACHE_REMOTE_UNSIGNED";
/// A fixed number of milliseconds a lookup waits before the program compiles meanwhile.
pub const REMOTE_BUDGET_ENV: &str = "SPARKLE_CACHE_REMOTE_BUDGET_MS";
/// The most milliseconds a process waits at its end for publishes still in flight (default
/// 100, or the fixed lookup budget when longer; 0: none).
pub const REMOTE_EXIT_ENV: &str = "SPARKLE_CACHE_REMOTE_EXIT_MS";
/// The endpoint of an S3-compatible store other than AWS (`http://host:port`); `AWS_ENDPOINT_URL`
/// works as well.
pub const S3_ENDPOINT_ENV: &str = "SPARKLE_CACHE_S3_ENDPOINT";

/// An example value of the remote's URL for each scheme, for messages.
const EXAMPLE_S3: &str = "s3://my-bucket/sparkle";
const EXAMPLE_REDIS: &str = "redis://cache.example.com:6379/0";
const EXAMPLE_REDISS: &str = "rediss://cache.example.com:6380/0";
const EXAMPLE_FILE: &str = "file:///srv/sparkle-cache";
const EXAMPLE_ANY: &str =
    "s3://my-bucket/sparkle (or redis://cache.example.com:6379/0, file:///srv/sparkle-cache)";

/// Where the remote lives.
#[derive(Clone, PartialEq, Eq)]
pub enum RemoteLocation {
    /// An S3-compatible bucket, with an optional key prefix (no leading or trailing `/`).
    S3 {
        /// The bucket's name.
        bucket: String,
        /// The key prefix, possibly empty.
        prefix: String,
    },
    /// A Redis server; the URL is handed to the client as given (`redis://` or `rediss://`), and
    /// may hold a password: `Debug` shows it redacted.
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

impl std::fmt::Debug for RemoteLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteLocation::S3 { bucket, prefix } => {
                f.debug_struct("S3").field("bucket", bucket).field("prefix", prefix).finish()
            }
            RemoteLocation::Redis { url } => f.debug_struct("Redis").field("url", &redact_url(url)).finish(),
            RemoteLocation::Folder { path } => f.debug_struct("Folder").field("path", path).finish(),
        }
    }
}

/// How the fleet tier reaches its store and what it may do there. `Debug` redacts passwords
/// and S3 secrets.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteConfig {
    /// The URL as the user gave it; it may hold a password, so show
    /// [`redacted_url`](Self::redacted_url) instead.
    pub url: String,
    /// The store the URL names.
    pub location: RemoteLocation,
    /// Look up entries but never publish (for untrusted machines, such as CI of pull requests).
    pub read_only: bool,
    /// An ed25519 secret key file: what this machine publishes is signed with it. Its public
    /// half must be among `trusted_keys` (when they are given; otherwise it is the one key this
    /// machine trusts).
    pub signing_key: Option<PathBuf>,
    /// Public keys (64 hex digits each) whose signatures are accepted. When set, an unsigned or
    /// badly signed remote object (entry, driver archive, working set) is refused before any
    /// other use.
    pub trusted_keys: Option<Vec<[u8; 32]>>,
    /// Use remote objects that no trusted key signed (`SPARKLE_CACHE_REMOTE_UNSIGNED=1`): then
    /// whoever can write the store chooses the GPU code this machine runs. Without it, a tier
    /// with neither trusted keys nor a signing key is not used. Ignored when keys are trusted.
    pub allow_unsigned: bool,
    /// A fixed budget for every lookup, instead of one derived from what a compile costs.
    pub budget: Option<Duration>,
    /// The most a process waits at its end for publishes still in flight (default 100 ms, or
    /// `budget` when longer); never for a remote that answers nothing or slower than a budget.
    /// Publishes of programs whose lease the process holds get up to 3 s, but never longer than
    /// this without an answer from the remote.
    pub exit_budget: Option<Duration>,
    /// The S3 endpoint of an S3-compatible server (`http://host:port`); otherwise the usual AWS
    /// variables (`AWS_ENDPOINT_URL`, `AWS_REGION`, credentials) decide.
    pub s3_endpoint: Option<String>,
    /// Further S3 client settings as `object_store`'s configuration keys and values
    /// (`aws_access_key_id`, `aws_region`, …), applied after the environment: for programs that
    /// configure the remote in code rather than through the AWS variables.
    pub s3_options: Vec<(String, String)>,
}

impl std::fmt::Debug for RemoteConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let options: Vec<(&str, String)> = self
            .s3_options
            .iter()
            .map(|(key, value)| {
                let secret = ["secret", "token", "password", "key_id"].iter().any(|s| key.contains(s));
                (key.as_str(), if secret { "***".to_owned() } else { value.clone() })
            })
            .collect();
        f.debug_struct("RemoteConfig")
            .field("url", &self.redacted_url())
            .field("location", &self.location)
            .field("read_only", &self.read_only)
            .field("signing_key", &self.signing_key)
            .field(
                "trusted_keys",
                &self.trusted_keys.as_ref().map(|keys| keys.iter().map(hex_key).collect::<Vec<_>>()),
            )
            .field("allow_unsigned", &self.allow_unsigned)
            .field("budget", &self.budget)
            .field("exit_budget", &self.exit_budget)
            .field("s3_endpoint", &self.s3_endpoint.as_deref().map(redact_url))
            .field("s3_options", &options)
            .finish()
    }
}

impl RemoteConfig {
    /// A configuration for `url` with every option at its default (no trusted keys, no signing
    /// key, unsigned objects not used: set one of them before opening a cache with it).
    pub fn new(url: &str) -> Result<RemoteConfig, String> {
        Ok(RemoteConfig {
            url: url.to_owned(),
            location: parse_location(url)?,
            read_only: false,
            signing_key: None,
            trusted_keys: None,
            allow_unsigned: false,
            budget: None,
            exit_budget: None,
            s3_endpoint: None,
            s3_options: Vec::new(),
        })
    }

    /// The URL with any password replaced by `***`: what messages and statistics show.
    pub fn redacted_url(&self) -> String {
        redact_url(&self.url)
    }

    /// Reads the remote's configuration through `var`; `None` when `SPARKLE_CACHE_REMOTE` is
    /// unset or empty. Empty companion variables count as unset. An error names the variable,
    /// what is wrong and an example of the remote's own scheme.
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Result<Option<RemoteConfig>, CacheError> {
        let var = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let invalid = |var: &'static str, value: String, problem: String, example: &'static str| {
            CacheError::InvalidEnv { var, value, problem, example }
        };
        let Some(url) = var(REMOTE_ENV) else { return Ok(None) };
        let url = url.trim().to_owned();
        let mut config = RemoteConfig::new(&url)
            .map_err(|problem| invalid(REMOTE_ENV, redact_url(&url), problem, example_for(&url)))?;
        if let Some(value) = var(REMOTE_READ_ONLY_ENV) {
            config.read_only =
                parse_switch(&value).map_err(|problem| invalid(REMOTE_READ_ONLY_ENV, value, problem, "1"))?;
        }
        if let Some(value) = var(REMOTE_UNSIGNED_ENV) {
            config.allow_unsigned =
                parse_switch(&value).map_err(|problem| invalid(REMOTE_UNSIGNED_ENV, value, problem, "1"))?;
        }
        config.signing_key = var(SIGNING_KEY_ENV).map(|path| PathBuf::from(path.trim()));
        if let Some(value) = var(TRUSTED_KEYS_ENV) {
            config.trusted_keys = Some(parse_trusted_keys(&value).map_err(|problem| {
                invalid(TRUSTED_KEYS_ENV, value, problem, "<64 hex digits>,/etc/sparkle/fleet-keys.pub")
            })?);
        }
        if let Some(value) = var(REMOTE_BUDGET_ENV) {
            config.budget = Some(
                parse_budget_ms(&value)
                    .map_err(|problem| invalid(REMOTE_BUDGET_ENV, value, problem, "50"))?,
            );
        }
        if let Some(value) = var(REMOTE_EXIT_ENV) {
            let ms: u64 = value.trim().parse().ok().filter(|ms| *ms <= 600_000).ok_or_else(|| {
                invalid(
                    REMOTE_EXIT_ENV,
                    value.clone(),
                    "expected milliseconds from 0 to 600000".into(),
                    "100",
                )
            })?;
            config.exit_budget = Some(Duration::from_millis(ms));
        }
        if let Some(value) = var(S3_ENDPOINT_ENV) {
            let endpoint = check_endpoint(&value).map_err(|problem| {
                invalid(S3_ENDPOINT_ENV, redact_url(&value), problem, "http://127.0.0.1:9000")
            })?;
            config.s3_endpoint = Some(endpoint);
        }
        Ok(Some(config))
    }
}

/// An example remote URL of the scheme `url` starts with (any scheme when it names none we know).
pub fn example_for(url: &str) -> &'static str {
    let scheme = url.split_once("://").map(|(scheme, _)| scheme.to_ascii_lowercase());
    match scheme.as_deref() {
        Some("s3") => EXAMPLE_S3,
        Some("redis") => EXAMPLE_REDIS,
        Some("rediss") => EXAMPLE_REDISS,
        Some("file") => EXAMPLE_FILE,
        _ => EXAMPLE_ANY,
    }
}

/// A lookup budget in milliseconds: a whole number from 1 to 600000.
fn parse_budget_ms(text: &str) -> Result<Duration, String> {
    let ms: u64 = text.trim().parse().map_err(|_| "expected a whole number of milliseconds".to_owned())?;
    match ms {
        0 => Err("a budget of 0 ms would skip every lookup, so the remote would never serve anything; \
                  use at least 1 (or unset it: the budget is then what a compile costs)"
            .into()),
        ms if ms > 600_000 => {
            Err("more than 10 minutes per lookup; a lookup is meant to cost less than a compile".into())
        }
        ms => Ok(Duration::from_millis(ms)),
    }
}

/// Checks an S3 endpoint: `http://` or `https://`, a host, an optional port, nothing a URL may not
/// hold. Returns it without a trailing `/`.
pub fn check_endpoint(text: &str) -> Result<String, String> {
    let text = text.trim().trim_end_matches('/');
    let Some((scheme, rest)) = text.split_once("://") else {
        return Err("expected a URL starting with http:// or https://".into());
    };
    if !matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https") {
        return Err(format!("the scheme `{scheme}` is not http or https"));
    }
    let authority = rest.split('/').next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or("an IPv6 host needs its closing `]`")?;
        (host, after.strip_prefix(':'))
    } else {
        match host_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    if host.is_empty() {
        return Err("the URL names no host".into());
    }
    if !host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b)) {
        return Err(format!("`{host}` is not a host name"));
    }
    if let Some(port) = port {
        if port.parse::<u16>().map_or(true, |port| port == 0) {
            return Err(format!("`{port}` is not a port number"));
        }
    }
    if text.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()) {
        return Err("the URL holds white space".into());
    }
    Ok(text.to_owned())
}

/// `url` with the password (or a lone secret before `@`) and secret query parameters replaced by
/// `***`: `redis://user:***@host:6379/0`.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => format!("***@{host}"),
        },
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((name, _))
                        if ["pass", "secret", "token", "key", "auth"]
                            .iter()
                            .any(|s| name.to_ascii_lowercase().contains(s)) =>
                    {
                        format!("{name}=***")
                    }
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// Parses `s3://bucket[/prefix]`, `redis://…`, `rediss://…` or `file:///path`; an error says what
/// is wrong and shows an example of the same scheme.
pub fn parse_location(url: &str) -> Result<RemoteLocation, String> {
    let (scheme, rest) =
        url.split_once("://").ok_or_else(|| format!("expected a URL such as {EXAMPLE_ANY}"))?;
    match scheme.to_ascii_lowercase().as_str() {
        "s3" => {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(format!("the S3 URL names no bucket (e.g. {EXAMPLE_S3})"));
            }
            let prefix = prefix.trim_matches('/').to_owned();
            if prefix.split('/').any(|part| part == "." || part == "..") {
                return Err(format!("the S3 prefix may not contain `.` or `..` parts (e.g. {EXAMPLE_S3})"));
            }
            Ok(RemoteLocation::S3 { bucket: bucket.to_owned(), prefix })
        }
        "redis" | "rediss" => {
            let example = if scheme.eq_ignore_ascii_case("rediss") { EXAMPLE_REDISS } else { EXAMPLE_REDIS };
            let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
            if host.is_empty() || host.starts_with(['/', ':', '?']) {
                return Err(format!("the Redis URL names no host (e.g. {example})"));
            }
            Ok(RemoteLocation::Redis { url: url.to_owned() })
        }
        "file" => {
            let path = PathBuf::from(rest);
            if !path.is_absolute() {
                return Err(format!("a file URL needs an absolute path (e.g. {EXAMPLE_FILE})"));
            }
            Ok(RemoteLocation::Folder { path })
        }
        other => Err(format!(
            "unknown scheme `{other}`; use s3://, redis://, rediss:// or file:// (e.g. {EXAMPLE_ANY})"
        )),
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
        if contents.contains(SECRET_KEY_MARK) {
            return Err(format!(
                "{item} is a secret signing key file, not a list of public keys: keep it on the machine that \
                 signs ({SIGNING_KEY_ENV}) and list its public key (`sparkle cache keygen` printed it; it is \
                 on the file's first line) here instead"
            ));
        }
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

/// What the first line of a secret key file made by `sparkle cache keygen` says, before the key's
/// public half: how a secret key file is told from a public one (both hold 64 hex digits).
pub(crate) const SECRET_KEY_MARK: &str = "Sparkle cache signing key (ed25519 secret seed); public key ";

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
    fn every_error_shows_an_example_of_its_own_scheme() {
        for (url, example) in [
            ("redis://", "redis://cache.example.com"),
            ("rediss://:pw@", "rediss://cache.example.com"),
            ("file://relative", "file:///srv"),
            ("s3://", "s3://my-bucket"),
            ("ftp://x", "s3://my-bucket"),
        ] {
            let err = RemoteConfig::from_lookup(lookup(&[(REMOTE_ENV, url)])).unwrap_err().to_string();
            assert!(err.contains(REMOTE_ENV) && err.contains(example), "{url}: {err}");
            if url.starts_with("redis") {
                assert!(!err.contains("s3://"), "{url}: {err}");
            }
        }
    }

    #[test]
    fn passwords_never_show() {
        assert_eq!(redact_url("redis://:hunter2@host:6379/0"), "redis://:***@host:6379/0");
        assert_eq!(redact_url("redis://user:hunter2@host/0"), "redis://user:***@host/0");
        assert_eq!(redact_url("rediss://hunter2@host"), "rediss://***@host");
        assert_eq!(
            redact_url("redis://host/0?password=hunter2&protocol=resp3"),
            "redis://host/0?password=***&protocol=resp3"
        );
        assert_eq!(redact_url("s3://bucket/prefix"), "s3://bucket/prefix");
        let mut config = RemoteConfig::new("redis://:hunter2@127.0.0.1:1/0").unwrap();
        config.s3_options = vec![("aws_secret_access_key".into(), "hunter2".into())];
        let shown = format!("{config:?} {:?}", config.location);
        assert!(!shown.contains("hunter2"), "{shown}");
        // A malformed URL with a password: the error shows the URL without it.
        let err =
            RemoteConfig::from_lookup(lookup(&[(REMOTE_ENV, "redis://:hunter2@")])).unwrap_err().to_string();
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn endpoints_and_budgets_are_checked() {
        assert_eq!(check_endpoint("http://127.0.0.1:9000/").unwrap(), "http://127.0.0.1:9000");
        assert!(check_endpoint("https://s3.example.com").is_ok());
        assert!(check_endpoint("http://[::1]:9000").is_ok());
        for bad in [
            "garbage",
            "http://",
            "ftp://host",
            "http://ho st",
            "http://host:port",
            "http://host:0",
            "http://:9000",
        ] {
            assert!(check_endpoint(bad).is_err(), "{bad}");
        }
        let err = RemoteConfig::from_lookup(lookup(&[(REMOTE_ENV, "s3://b"), (S3_ENDPOINT_ENV, "garbage")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains(S3_ENDPOINT_ENV) && err.contains("garbage") && err.contains("http://"), "{err}");
        let err = RemoteConfig::from_lookup(lookup(&[(REMOTE_ENV, "s3://b"), (REMOTE_BUDGET_ENV, "0")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains(REMOTE_BUDGET_ENV) && err.contains("at least 1"), "{err}");
        let config = RemoteConfig::from_lookup(lookup(&[(REMOTE_ENV, "s3://b"), (REMOTE_UNSIGNED_ENV, "1")]))
            .unwrap()
            .unwrap();
        assert!(config.allow_unsigned);
        assert!(!RemoteConfig::new("s3://b").unwrap().allow_unsigned, "unsigned objects are opt-in");
    }

    #[test]
    fn a_secret_key_file_is_not_a_trusted_key_list() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, format!("# {SECRET_KEY_MARK}{}\n{}\n", "ab".repeat(32), "cd".repeat(32)))
            .unwrap();
        let err = parse_trusted_keys(path.to_str().unwrap()).unwrap_err();
        assert!(err.contains("secret signing key"), "{err}");
    }

    #[test]
    fn hex_keys_round_trip() {
        let key = [7u8; 32];
        assert_eq!(parse_hex_key(&hex_key(&key)), Some(key));
        assert_eq!(parse_hex_key("zz"), None);
    }
}
