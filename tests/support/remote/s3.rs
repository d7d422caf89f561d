//! A real S3-compatible server for a test: moto's server mode on 127.0.0.1 at a port the system
//! picks, started through the launcher beside this file with the Python environment that
//! `scripts/setup.sh` installs moto into, with one bucket created; stopped when dropped. Also
//! plain-HTTP helpers to seed, read, list and delete objects behind the cache's back.
//!
//! moto checks no signatures (any access key and secret do) but treats a request without an
//! `Authorization` header as anonymous and refuses it, so the helpers send a well-formed header
//! with a dummy signature. moto 5.2.5 honours `If-None-Match: *` on PUT: an existing key answers
//! 412 Precondition Failed and keeps its bytes (the fleet tests' `servers` module checks it).

use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use super::http::{self, Response};
use super::process::{Output, ServerProcess};

/// Names the Python interpreter that has `moto[server]` installed.
pub const S3_SERVER_VAR: &str = "SPARKLE_TEST_S3_SERVER";

/// The credentials and region clients use (moto accepts any).
pub const ACCESS_KEY_ID: &str = "sparkle-test-access-key";
pub const SECRET_ACCESS_KEY: &str = "sparkle-test-secret-key";
pub const REGION: &str = "us-east-1";

/// The bucket every server starts with.
pub const BUCKET: &str = "sparkle-fleet";

/// Names the lock that `scripts/setup.sh` holds while it installs moto in the background.
pub const SETUP_LOCK_VAR: &str = "SPARKLE_TEST_S3_SERVER_SETUP_LOCK";

/// How long a test waits for that installation (downloads on a slow network included).
const SETUP_BOUND: Duration = Duration::from_secs(900);

/// How long the launcher has to print its port (importing moto takes seconds on a busy machine).
const START_BOUND: Duration = Duration::from_secs(60);

/// The bound on each request a test makes itself.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The launcher script, run with `python -c` (whichever package's tests include this module).
const LAUNCHER: &str = include_str!("s3_server.py");

/// A running moto S3 server; dropping it stops it.
pub struct S3Server {
    process: ServerProcess,
    port: u16,
}

/// The interpreter that runs the server, if it is installed: the one named by
/// `SPARKLE_TEST_S3_SERVER`, else the environment `scripts/setup.sh` creates in
/// `${XDG_CACHE_HOME:-$HOME/.cache}/sparkle-test-servers/venv`.
pub fn s3_server_python() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(S3_SERVER_VAR).filter(|path| !path.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
    Some(cache.join("sparkle-test-servers/venv/bin/python")).filter(|python| python.is_file())
}

/// Waits until the background installation `scripts/setup.sh` started (if it did) is done: it
/// holds an exclusive lock on [`SETUP_LOCK_VAR`]'s file until then, so taking a shared one with
/// util-linux's `flock` (which the script uses too) returns at its end.
fn wait_for_setup() -> Result<(), String> {
    let Some(lock) = std::env::var_os(SETUP_LOCK_VAR).filter(|lock| !lock.is_empty()) else {
        return Ok(());
    };
    let status = Command::new("flock")
        .arg("--shared")
        .arg("--wait")
        .arg(SETUP_BOUND.as_secs().to_string())
        .arg(&lock)
        .arg("true")
        .status()
        .map_err(|e| format!("waiting for scripts/setup.sh to install moto: flock: {e}"))?;
    if !status.success() {
        return Err(format!(
            "scripts/setup.sh did not finish installing moto within {SETUP_BOUND:?} (lock {})",
            PathBuf::from(lock).display()
        ));
    }
    Ok(())
}

impl S3Server {
    /// Starts the server on 127.0.0.1 and creates [`BUCKET`]; waits at most a minute for it.
    pub fn start() -> Result<S3Server, String> {
        let python = s3_server_python().ok_or_else(|| {
            format!("moto's S3 server is not installed (nor named by {S3_SERVER_VAR}); scripts/setup.sh installs it")
        })?;
        wait_for_setup()?;
        let mut command = Command::new(&python);
        command.arg("-c").arg(LAUNCHER).env("PYTHONDONTWRITEBYTECODE", "1");
        let mut process = ServerProcess::spawn("moto S3 server", command, Output::Piped)?;
        let stdout = process.take_stdout().ok_or("the S3 server's output is not a pipe")?;
        // The port line is read on a thread so that waiting for it stays bounded.
        let (sender, receiver) = mpsc::channel();
        thread::spawn(move || {
            let mut line = String::new();
            let _ = sender.send(BufReader::new(stdout).read_line(&mut line).map(|_| line));
        });
        let line = match receiver.recv_timeout(START_BOUND) {
            Ok(Ok(line)) => line,
            Ok(Err(e)) => return Err(process.failure(&format!("reading its port: {e}"))),
            Err(_) => return Err(process.failure(&format!("printed no port within {START_BOUND:?}"))),
        };
        let port = line
            .trim()
            .parse()
            .map_err(|_| process.failure(&format!("printed {line:?} instead of its port")))?;
        let server = S3Server { process, port };
        let response = server.send("PUT", &format!("/{BUCKET}"), &[], &[])?;
        if response.status != 200 {
            return Err(server
                .process
                .failure(&format!("creating bucket {BUCKET}: {}", describe(&response))));
        }
        Ok(server)
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id (to stop it with SIGSTOP, as a hung server).
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Its address, for a [`super::Proxy`] in front of it.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// `http://127.0.0.1:PORT`
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// The bucket that exists from the start.
    pub fn bucket(&self) -> &'static str {
        BUCKET
    }

    /// `s3://BUCKET/prefix` (or `s3://BUCKET` for an empty prefix).
    pub fn url(&self, prefix: &str) -> String {
        let prefix = prefix.trim_matches('/');
        if prefix.is_empty() {
            format!("s3://{BUCKET}")
        } else {
            format!("s3://{BUCKET}/{prefix}")
        }
    }

    /// The environment a client needs to reach this server: the usual AWS variables (credentials,
    /// region, endpoint) and plain HTTP allowed.
    pub fn client_env(&self) -> Vec<(&'static str, String)> {
        Self::client_env_at(&self.endpoint())
    }

    /// The same environment for a client that reaches the server through `endpoint` (a proxy).
    pub fn client_env_at(endpoint: &str) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID.to_string()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY.to_string()),
            ("AWS_REGION", REGION.to_string()),
            ("AWS_DEFAULT_REGION", REGION.to_string()),
            ("AWS_ENDPOINT_URL", endpoint.to_string()),
            ("AWS_ALLOW_HTTP", "true".to_string()),
        ]
    }

    /// Stops the server now (a remote that died); dropping it later does nothing more.
    pub fn stop(&mut self) {
        self.process.stop();
    }

    /// Writes `bytes` at `key`, replacing what was there.
    pub fn put_raw(&self, key: &str, bytes: &[u8]) -> Result<(), String> {
        let response = self.send("PUT", &object_path(key), &[], bytes)?;
        match response.status {
            200 => Ok(()),
            _ => Err(format!("PUT {key}: {}", describe(&response))),
        }
    }

    /// Writes `bytes` at `key` only if it is absent (`If-None-Match: *`); true when it wrote.
    pub fn put_if_absent(&self, key: &str, bytes: &[u8]) -> Result<bool, String> {
        let response = self.send("PUT", &object_path(key), &[("If-None-Match", "*")], bytes)?;
        match response.status {
            200 => Ok(true),
            412 => Ok(false),
            _ => Err(format!("PUT {key} If-None-Match: *: {}", describe(&response))),
        }
    }

    /// The bytes at `key`, or `None` when there is no such object.
    pub fn get_raw(&self, key: &str) -> Result<Option<Vec<u8>>, String> {
        let response = self.send("GET", &object_path(key), &[], &[])?;
        match response.status {
            200 => Ok(Some(response.body)),
            404 => Ok(None),
            _ => Err(format!("GET {key}: {}", describe(&response))),
        }
    }

    /// Deletes `key` (no error when it is absent, as in S3).
    pub fn delete(&self, key: &str) -> Result<(), String> {
        let response = self.send("DELETE", &object_path(key), &[], &[])?;
        match response.status {
            200 | 204 => Ok(()),
            _ => Err(format!("DELETE {key}: {}", describe(&response))),
        }
    }

    /// The keys that start with `prefix`, sorted (every page of the listing).
    pub fn list(&self, prefix: &str) -> Result<Vec<String>, String> {
        let mut keys = Vec::new();
        let mut continuation: Option<String> = None;
        loop {
            let mut target = format!("/{BUCKET}?list-type=2&prefix={}", encode(prefix, false));
            if let Some(token) = &continuation {
                target.push_str(&format!("&continuation-token={}", encode(token, false)));
            }
            let response = self.send("GET", &target, &[], &[])?;
            if response.status != 200 {
                return Err(format!("listing {prefix:?}: {}", describe(&response)));
            }
            let xml = String::from_utf8_lossy(&response.body);
            keys.extend(elements(&xml, "Key"));
            continuation =
                match elements(&xml, "IsTruncated").first().map(String::as_str) {
                    Some("true") => Some(elements(&xml, "NextContinuationToken").pop().ok_or_else(|| {
                        format!("listing {prefix:?}: truncated without a continuation token")
                    })?),
                    _ => None,
                };
            if continuation.is_none() {
                keys.sort();
                return Ok(keys);
            }
        }
    }

    /// Sends one request with the headers moto needs (a dummy signature, a binary body), for a
    /// test that checks a status itself. `target` is an encoded path and query.
    pub fn send(
        &self,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Response, String> {
        self.send_via(self.addr(), method, target, headers, body)
    }

    /// [`S3Server::send`] to `addr` instead: a proxy in front of the server.
    pub fn send_via(
        &self,
        addr: SocketAddr,
        method: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Response, String> {
        let authorization = format!(
            "AWS4-HMAC-SHA256 Credential={ACCESS_KEY_ID}/20260101/{REGION}/s3/aws4_request, \
             SignedHeaders=host, Signature=0000000000000000000000000000000000000000000000000000000000000000"
        );
        let mut all = vec![("Authorization", authorization.as_str())];
        if !body.is_empty() {
            // Without it moto's web framework would take the body for a form and drop it.
            all.push(("Content-Type", "application/octet-stream"));
        }
        all.extend_from_slice(headers);
        http::request(addr, method, target, &all, body, REQUEST_TIMEOUT)
    }
}

/// The path of `key` in the bucket, encoded.
pub fn object_path(key: &str) -> String {
    format!("/{BUCKET}/{}", encode(key, true))
}

/// Percent-encodes all but unreserved characters (and `/` when `keep_slash`).
fn encode(text: &str, keep_slash: bool) -> String {
    let mut encoded = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) || (keep_slash && byte == b'/') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// The text of every `<name>…</name>` element, XML entities decoded.
fn elements(xml: &str, name: &str) -> Vec<String> {
    let (open, close) = (format!("<{name}>"), format!("</{name}>"));
    let mut found = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find(&open) {
        rest = &rest[start + open.len()..];
        let Some(end) = rest.find(&close) else { break };
        found.push(unescape(&rest[..end]));
        rest = &rest[end + close.len()..];
    }
    found
}

fn unescape(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let Some(semicolon) = rest.find(';') else { break };
        let entity = &rest[1..semicolon];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => entity
                .strip_prefix("#x")
                .map(|hex| u32::from_str_radix(hex, 16))
                .or_else(|| entity.strip_prefix('#').map(str::parse))
                .and_then(Result::ok)
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[semicolon + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn describe(response: &Response) -> String {
    let body = String::from_utf8_lossy(&response.body);
    format!("status {}: {}", response.status, body.chars().take(300).collect::<String>())
}
