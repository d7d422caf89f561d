//! The fleet clients speak TLS: an `https://` S3 endpoint and a `rediss://` URL are reached with
//! a TLS handshake (rustls, with the ring provider the tier installs), and a server that breaks
//! the handshake off costs a compile, never a panic or a failed program. Each test runs in a
//! process of its own: the TLS provider belongs to the process, and a test beside it may already
//! have installed one.

use std::io::Read;
use std::net::TcpListener;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use crate::cache_support::{gpu, payload, Counts, Program, Source};
use crate::isolated;
use sparkle::cache::{CacheConfig, ProgramCache, RemoteConfig};

/// A server on 127.0.0.1 that reads the first bytes of each connection and closes it; the
/// receiver gets whether they began a TLS handshake record (content type 22, version 3.x).
fn handshake_listener() -> (u16, mpsc::Receiver<bool>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (seen, received) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut head = [0u8; 2];
            let tls = stream.read_exact(&mut head).is_ok() && head == [0x16, 0x03];
            if seen.send(tls).is_err() {
                return;
            }
        }
    });
    (port, received)
}

/// Gets one program through a cache whose remote is `remote`: compiled here, correct.
fn get_through(remote: RemoteConfig, tag: &str) {
    let counts = Arc::new(Counts::default());
    let source = Source::new(&gpu("tls gpu"), &format!("{tag} kernel"), &counts);
    let dir = tempfile::tempdir().unwrap();
    let config = CacheConfig { remote: Some(remote), ..CacheConfig::in_dir(dir.path()) };
    let cache: ProgramCache<Program> = ProgramCache::open(gpu("tls gpu"), &config);
    let program = cache.get(&source.key, &source).unwrap();
    assert_eq!(program.payload, payload(source.key, &source.text, source.size));
    assert_eq!(counts.compiles.load(SeqCst), 1, "the remote served nothing: compiled here");
}

#[test]
fn an_https_s3_endpoint_is_reached_over_tls_and_a_broken_handshake_costs_a_compile() {
    if isolated::ran_in_own_process(
        module_path!(),
        "an_https_s3_endpoint_is_reached_over_tls_and_a_broken_handshake_costs_a_compile",
        &[],
    ) {
        return;
    }
    let (port, seen) = handshake_listener();
    let mut remote = RemoteConfig::new("s3://bucket/prefix").unwrap();
    remote.s3_endpoint = Some(format!("https://127.0.0.1:{port}"));
    remote.s3_options = vec![
        ("aws_access_key_id".into(), "test".into()),
        ("aws_secret_access_key".into(), "test".into()),
        ("aws_region".into(), "us-east-1".into()),
    ];
    remote.allow_unsigned = true;
    get_through(remote, "https");
    assert_eq!(seen.recv_timeout(Duration::from_secs(20)), Ok(true), "the client began a TLS handshake");
}

#[test]
fn a_rediss_url_is_reached_over_tls_and_a_broken_handshake_costs_a_compile() {
    if isolated::ran_in_own_process(
        module_path!(),
        "a_rediss_url_is_reached_over_tls_and_a_broken_handshake_costs_a_compile",
        &[],
    ) {
        return;
    }
    let (port, seen) = handshake_listener();
    let mut remote = RemoteConfig::new(&format!("rediss://127.0.0.1:{port}/0")).unwrap();
    remote.allow_unsigned = true;
    get_through(remote, "rediss");
    assert_eq!(seen.recv_timeout(Duration::from_secs(20)), Ok(true), "the client began a TLS handshake");
}
