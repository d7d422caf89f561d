//! A real Redis server for a test: Debian's `redis-server` on 127.0.0.1 at a free port, with no
//! configuration file and no persistence, stopped when dropped. Also the few commands tests use
//! to poison and inspect entries, binary-safe.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use super::process::{Output, ServerProcess};
use super::resp::{self, Reply};

/// Names the `redis-server` to run; otherwise it is looked up on PATH.
pub const REDIS_SERVER_VAR: &str = "SPARKLE_TEST_REDIS_SERVER";

/// How long a server has to answer PING after it was started.
const START_BOUND: Duration = Duration::from_secs(10);

/// How many ports are tried when the one picked was taken before the server bound it.
const PORT_ATTEMPTS: usize = 5;

/// The bound on each step (connect, send, reply) of a test's own command.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// A running `redis-server`; dropping it stops it.
pub struct RedisServer {
    process: ServerProcess,
    port: u16,
}

/// Why one attempt at starting failed.
enum Attempt {
    /// Another socket had the port: worth another port.
    PortTaken(String),
    Failed(String),
}

/// The `redis-server` binary the tests run, if it is installed.
pub fn redis_server_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(REDIS_SERVER_VAR) {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| candidate.is_file())
}

impl RedisServer {
    /// Starts a server bound to 127.0.0.1 on a free port and waits (at most 10 s) until it
    /// answers PING.
    pub fn start() -> Result<RedisServer, String> {
        let binary = redis_server_binary().ok_or_else(|| {
            format!("redis-server is not installed (nor named by {REDIS_SERVER_VAR}); scripts/setup.sh installs it")
        })?;
        let mut last = String::new();
        for _ in 0..PORT_ATTEMPTS {
            let port = super::free_local_port()?;
            match Self::start_on(&binary, port) {
                Ok(server) => return Ok(server),
                Err(Attempt::PortTaken(why)) => last = why,
                Err(Attempt::Failed(why)) => return Err(why),
            }
        }
        Err(format!("redis-server found no free port in {PORT_ATTEMPTS} attempts; the last: {last}"))
    }

    fn start_on(binary: &PathBuf, port: u16) -> Result<RedisServer, Attempt> {
        let mut command = Command::new(binary);
        command
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--logfile", "", "--dir", "."]);
        let process = ServerProcess::spawn("redis-server", command, Output::Log).map_err(Attempt::Failed)?;
        let mut server = RedisServer { process, port };
        let started = Instant::now();
        loop {
            if server.process.exited().is_some() {
                let log = server.process.log_tail();
                let why = server.process.failure(&format!("exited while starting on port {port}"));
                return Err(if log.contains("Address already in use") {
                    Attempt::PortTaken(why)
                } else {
                    Attempt::Failed(why)
                });
            }
            if let Ok(Reply::Simple(pong)) = server.command_with(&[b"PING"], Duration::from_millis(500)) {
                if pong == "PONG" {
                    // Whatever answered must be our process, not another server that got the
                    // port between our probe and the server's bind.
                    return match server.server_pid() {
                        Ok(pid) if pid == server.process.pid() => Ok(server),
                        Ok(pid) => {
                            Err(Attempt::PortTaken(format!("port {port} is another server's (pid {pid})")))
                        }
                        Err(why) => Err(Attempt::Failed(server.process.failure(&why))),
                    };
                }
            }
            if started.elapsed() > START_BOUND {
                return Err(Attempt::Failed(
                    server.process.failure(&format!("did not answer PING within {START_BOUND:?}")),
                ));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn server_pid(&self) -> Result<u32, String> {
        let info = bulk(self.command(&[b"INFO", b"server"])?)?.unwrap_or_default();
        String::from_utf8_lossy(&info)
            .lines()
            .find_map(|line| line.strip_prefix("process_id:"))
            .and_then(|pid| pid.trim().parse().ok())
            .ok_or_else(|| "INFO server names no process_id".to_string())
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

    /// The URL a client uses: `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        Self::url_at(self.addr())
    }

    /// The URL of database 0 at `addr` (a proxy in front of the server, say).
    pub fn url_at(addr: SocketAddr) -> String {
        format!("redis://{addr}/0")
    }

    /// Stops the server now (a remote that died); dropping it later does nothing more.
    pub fn stop(&mut self) {
        self.process.stop();
    }

    /// Runs one command on a new connection and returns the reply as it is (an error reply too).
    pub fn command(&self, args: &[&[u8]]) -> Result<Reply, String> {
        self.command_with(args, COMMAND_TIMEOUT)
    }

    fn command_with(&self, args: &[&[u8]], timeout: Duration) -> Result<Reply, String> {
        resp::command(self.addr(), args, timeout)
    }

    /// `SET key value`: writes raw bytes, replacing what was there.
    pub fn set(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        match self.command(&[b"SET", key, value])? {
            Reply::Simple(ok) if ok == "OK" => Ok(()),
            other => Err(format!("SET {}: unexpected reply {other:?}", show(key))),
        }
    }

    /// `SET key value NX`: writes only if the key is absent; true when it wrote.
    pub fn set_nx(&self, key: &[u8], value: &[u8]) -> Result<bool, String> {
        match self.command(&[b"SET", key, value, b"NX"])? {
            Reply::Simple(ok) if ok == "OK" => Ok(true),
            Reply::Bulk(None) => Ok(false),
            other => Err(format!("SET {} NX: unexpected reply {other:?}", show(key))),
        }
    }

    /// `GET key`: the raw bytes, or `None` when the key is absent.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        bulk(self.command(&[b"GET", key])?).map_err(|e| format!("GET {}: {e}", show(key)))
    }

    /// `DEL key`: true when the key existed.
    pub fn del(&self, key: &[u8]) -> Result<bool, String> {
        match self.command(&[b"DEL", key])? {
            Reply::Integer(count) => Ok(count > 0),
            other => Err(format!("DEL {}: unexpected reply {other:?}", show(key))),
        }
    }

    /// `KEYS pattern`, sorted.
    pub fn keys(&self, pattern: &str) -> Result<Vec<Vec<u8>>, String> {
        match self.command(&[b"KEYS", pattern.as_bytes()])? {
            Reply::Array(Some(replies)) => {
                let mut keys = replies
                    .into_iter()
                    .map(|reply| match reply {
                        Reply::Bulk(Some(key)) => Ok(key),
                        other => Err(format!("KEYS {pattern}: unexpected element {other:?}")),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                keys.sort();
                Ok(keys)
            }
            other => Err(format!("KEYS {pattern}: unexpected reply {other:?}")),
        }
    }
}

fn bulk(reply: Reply) -> Result<Option<Vec<u8>>, String> {
    match reply {
        Reply::Bulk(value) => Ok(value),
        other => Err(format!("unexpected reply {other:?}")),
    }
}

fn show(key: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(key))
}
