//! Real servers for the fleet cache's tests, started by the tests on 127.0.0.1 at free ports and
//! stopped when dropped: Redis ([`RedisServer`]) and moto's S3-compatible server ([`S3Server`]),
//! both installed by `scripts/setup.sh`; a fault-injecting TCP proxy to put in front of either
//! ([`Proxy`]); and the skipping policy: a test whose server is not installed is skipped with one
//! line saying how to install it, except under CI (`CI` set), where it fails. Included with
//! `#[path]` by the library's fleet tests and by the tests of the `sparkle` command and of the
//! benchmark lab.

#![allow(dead_code)]

pub mod http;
mod process;
// The same proxy `sparkle-bench bench-fleet` puts in front of its remote.
#[path = "../../../bench/src/fault_proxy.rs"]
pub mod proxy;
pub mod redis;
pub mod resp;
pub mod s3;
mod servers;

use std::io::Write;
use std::net::{Ipv4Addr, TcpListener};

// Each test file uses some of these only.
#[allow(unused_imports)]
pub use {
    proxy::{Mode, Proxy},
    redis::RedisServer,
    resp::Reply,
    s3::S3Server,
    servers::Server,
};

/// A Redis server, or `None` (after saying so) when `redis-server` is not installed outside CI.
/// Panics when it is installed but does not start, and under CI when it is missing.
pub fn redis_or_skip() -> Option<RedisServer> {
    or_skip("redis-server", redis::redis_server_binary().is_some(), RedisServer::start)
}

/// An S3 server, or `None` (after saying so) when moto's server is not installed outside CI.
/// Panics when it is installed but does not start, and under CI when it is missing.
pub fn s3_or_skip() -> Option<S3Server> {
    or_skip("moto's S3 server", s3::s3_server_python().is_some(), S3Server::start)
}

/// Whether the tests run under CI, where a missing server must fail the test rather than skip it.
pub fn under_ci() -> bool {
    std::env::var_os("CI").is_some()
}

fn or_skip<T>(what: &str, installed: bool, start: impl FnOnce() -> Result<T, String>) -> Option<T> {
    if !installed {
        let message =
            format!("{what} is not installed; scripts/setup.sh installs it (e.g. `scripts/setup.sh true`)");
        if under_ci() {
            panic!("{message} (CI is set: a test never skips there)");
        }
        // Straight to the process's stderr: the test harness would swallow eprintln! output.
        let _ = writeln!(std::io::stderr(), "skipped: {message}");
        return None;
    }
    match start() {
        Ok(server) => Some(server),
        Err(why) => panic!("{what} is installed but did not start: {why}"),
    }
}

/// A port on 127.0.0.1 that was free a moment ago (bound, then released): for a server that
/// must be given its port, or for a remote where nothing listens.
pub fn free_local_port() -> Result<u16, String> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|e| format!("no free port on 127.0.0.1: {e}"))
}
