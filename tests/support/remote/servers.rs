//! One remote server of either kind, so that a fleet test runs the same checks against Redis and
//! against the S3-compatible server: whichever are installed (both under CI).

use std::net::SocketAddr;

use super::{RedisServer, S3Server};

pub enum Server {
    Redis(RedisServer),
    S3(S3Server),
}

impl Server {
    /// Both servers, started; one that is not installed is skipped outside CI (said once).
    pub fn both() -> Vec<Server> {
        let mut servers = Vec::new();
        if let Some(redis) = super::redis_or_skip() {
            servers.push(Server::Redis(redis));
        }
        if let Some(s3) = super::s3_or_skip() {
            servers.push(Server::S3(s3));
        }
        servers
    }

    pub fn name(&self) -> &'static str {
        match self {
            Server::Redis(_) => "redis",
            Server::S3(_) => "s3",
        }
    }

    pub fn addr(&self) -> SocketAddr {
        match self {
            Server::Redis(server) => server.addr(),
            Server::S3(server) => server.addr(),
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        match self {
            Server::Redis(server) => server.pid(),
            Server::S3(server) => server.pid(),
        }
    }
}
