//! The fleet cache's test servers themselves: a real Redis and a real S3-compatible server start,
//! store binary bytes, refuse create-if-absent writes on existing keys, and stop when dropped;
//! the fault-injecting proxy passes, delays, stalls, cuts and refuses. Every wait is bounded.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::remote_support::{redis_or_skip, resp, s3, s3_or_skip, Mode, Proxy, Reply};

/// The bound on any single read or write a test does itself.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Every byte value, CR and LF included, and not valid UTF-8.
fn binary(length: usize) -> Vec<u8> {
    (0..length).map(|i| (i * 7 % 256) as u8).collect()
}

fn refused(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    matches!(TcpStream::connect_timeout(&addr, IO_TIMEOUT), Err(e) if e.kind() == ErrorKind::ConnectionRefused)
}

#[test]
fn redis_stores_binary_bytes_and_set_nx_refuses_an_existing_key() {
    let Some(redis) = redis_or_skip() else { return };
    assert_eq!(redis.url(), format!("redis://127.0.0.1:{}/0", redis.port()));

    let key = b"sparkle:entry:\x00\xff\r\n";
    let value = binary(100_000);
    redis.set(key, &value).unwrap();
    assert_eq!(redis.get(key).unwrap(), Some(value.clone()));
    assert_eq!(redis.get(b"sparkle:absent").unwrap(), None);

    assert!(!redis.set_nx(key, b"second writer").unwrap(), "SET NX must refuse an existing key");
    assert_eq!(redis.get(key).unwrap(), Some(value), "a refused SET NX must leave the first bytes");
    assert!(redis.set_nx(b"sparkle:new", b"first").unwrap());
    assert_eq!(redis.keys("sparkle:*").unwrap(), vec![key.to_vec(), b"sparkle:new".to_vec()]);

    assert!(redis.del(b"sparkle:new").unwrap());
    assert!(!redis.del(b"sparkle:new").unwrap());
    assert!(matches!(redis.command(&[b"NO-SUCH-COMMAND"]).unwrap(), Reply::Error(_)));
}

#[test]
fn redis_stops_when_dropped() {
    let Some(mut redis) = redis_or_skip() else { return };
    let port = redis.port();
    redis.stop();
    assert!(refused(port), "nothing may listen on {port} once the server stopped");
    drop(redis);
}

#[test]
fn s3_puts_gets_lists_and_deletes_binary_objects() {
    let Some(s3) = s3_or_skip() else { return };
    assert_eq!(s3.endpoint(), format!("http://127.0.0.1:{}", s3.port()));
    assert_eq!(s3.url("fleet/"), format!("s3://{}/fleet", s3.bucket()));

    let value = binary(300_000);
    let keys = ["fleet/gl/a b+c%.bin", "fleet/gl/plain", "fleet/amdgpu/x"];
    for key in keys {
        s3.put_raw(key, &value).unwrap();
    }
    s3.put_raw("other/y", b"").unwrap();
    assert_eq!(s3.get_raw(keys[0]).unwrap(), Some(value.clone()));
    assert_eq!(s3.get_raw("other/y").unwrap(), Some(Vec::new()));
    assert_eq!(s3.get_raw("fleet/absent").unwrap(), None);

    assert_eq!(s3.list("fleet/gl/").unwrap(), vec!["fleet/gl/a b+c%.bin", "fleet/gl/plain"]);
    assert_eq!(s3.list("").unwrap().len(), 4);
    assert!(s3.list("nothing/").unwrap().is_empty());

    s3.delete(keys[0]).unwrap();
    assert_eq!(s3.get_raw(keys[0]).unwrap(), None);
    s3.delete(keys[0]).unwrap();
    assert_eq!(s3.list("fleet/gl/").unwrap(), vec!["fleet/gl/plain"]);
}

#[test]
fn s3_answers_412_to_a_conditional_put_on_an_existing_key() {
    let Some(s3) = s3_or_skip() else { return };
    s3.put_raw("entry", b"first writer").unwrap();

    let response =
        s3.send("PUT", &s3::object_path("entry"), &[("If-None-Match", "*")], b"second writer").unwrap();
    assert_eq!(response.status, 412, "{response:?}");
    assert_eq!(s3.get_raw("entry").unwrap().as_deref(), Some(&b"first writer"[..]));

    assert!(s3.put_if_absent("fresh", b"one").unwrap());
    assert!(!s3.put_if_absent("fresh", b"two").unwrap());
    assert_eq!(s3.get_raw("fresh").unwrap().as_deref(), Some(&b"one"[..]));
}

#[test]
fn s3_stops_when_dropped() {
    let Some(mut s3) = s3_or_skip() else { return };
    let port = s3.port();
    s3.stop();
    assert!(refused(port), "nothing may listen on {port} once the server stopped");
}

/// A test target: for each line `LENGTH\n` it reads, it answers LENGTH bytes of [`binary`].
struct Generator {
    addr: SocketAddr,
    stopping: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
}

impl Generator {
    fn start() -> Generator {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = listener.local_addr().unwrap();
        let stopping = Arc::new(AtomicBool::new(false));
        let streams = Arc::new(Mutex::new(Vec::new()));
        let (stop, open) = (Arc::clone(&stopping), Arc::clone(&streams));
        thread::spawn(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                if let Ok(copy) = stream.try_clone() {
                    open.lock().unwrap().push(copy);
                }
                thread::spawn(move || Generator::serve(stream));
            }
        });
        Generator { addr, stopping, streams }
    }

    fn serve(mut stream: TcpStream) {
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while let Ok(1) = stream.read(&mut byte) {
            if byte[0] != b'\n' {
                line.push(byte[0]);
                continue;
            }
            let length = String::from_utf8_lossy(&line).trim().parse().unwrap_or(0);
            line.clear();
            if stream.write_all(&binary(length)).is_err() {
                return;
            }
        }
    }
}

impl Drop for Generator {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, IO_TIMEOUT);
        for stream in self.streams.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT).unwrap();
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    stream
}

/// Asks for `length` bytes and reads exactly that many.
fn ask(stream: &mut TcpStream, length: usize) -> Vec<u8> {
    stream.write_all(format!("{length}\n").as_bytes()).unwrap();
    let mut answer = vec![0; length];
    stream.read_exact(&mut answer).unwrap();
    answer
}

/// Everything the other side sends until it closes (a reset counts as a close).
fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return received,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return received,
            Err(e) => {
                panic!("the connection neither closed nor answered: {e} after {} bytes", received.len())
            }
        }
    }
}

#[test]
fn proxy_passes_bytes_unchanged() {
    let target = Generator::start();
    let proxy = Proxy::start(target.addr).unwrap();
    let mut stream = connect(proxy.addr());
    for length in [1, 1000, 1_000_000] {
        assert_eq!(ask(&mut stream, length), binary(length));
    }
    assert_eq!(proxy.connections(), 1);
    assert_eq!(proxy.mode(), Mode::Pass);
}

#[test]
fn proxy_delays_answers_and_requests_by_at_least_the_delay() {
    let target = Generator::start();
    let proxy = Proxy::start(target.addr).unwrap();
    let mut stream = connect(proxy.addr());
    let delay = Duration::from_millis(150);
    for mode in [Mode::latency(delay), Mode::Delay { to_server: delay, to_client: Duration::ZERO }] {
        proxy.set_mode(mode);
        let started = Instant::now();
        assert_eq!(ask(&mut stream, 200_000), binary(200_000));
        assert!(started.elapsed() >= delay, "{mode:?}: answered after {:?}", started.elapsed());
    }
}

#[test]
fn proxy_stalls_until_the_mode_changes() {
    let target = Generator::start();
    let proxy = Proxy::start(target.addr).unwrap();
    let mut stream = connect(proxy.addr());
    proxy.set_mode(Mode::Stall);
    stream.write_all(b"5000\n").unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut byte = [0u8; 1];
    let error = stream.read(&mut byte).expect_err("a stalled proxy must forward nothing");
    assert!(matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut), "{error}");
    proxy.set_mode(Mode::Pass);
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut answer = vec![0; 5000];
    stream.read_exact(&mut answer).unwrap();
    assert_eq!(answer, binary(5000));
}

#[test]
fn proxy_cuts_an_answer_after_n_bytes_counted_from_the_mode_change() {
    let target = Generator::start();
    let proxy = Proxy::start(target.addr).unwrap();

    // An open connection: the bytes it carried before the mode was set do not count.
    let mut open = connect(proxy.addr());
    assert_eq!(ask(&mut open, 5000), binary(5000));
    proxy.set_mode(Mode::CutAfter(1000));
    open.write_all(b"100000\n").unwrap();
    assert_eq!(read_until_closed(&mut open), binary(1000));

    // A new connection: its first 1000 bytes, then the end.
    let mut fresh = connect(proxy.addr());
    fresh.write_all(b"100000\n").unwrap();
    assert_eq!(read_until_closed(&mut fresh), binary(1000));
}

#[test]
fn proxy_refuses_new_and_open_connections_then_passes_again() {
    let target = Generator::start();
    let proxy = Proxy::start(target.addr).unwrap();
    let mut open = connect(proxy.addr());
    assert_eq!(ask(&mut open, 10), binary(10));

    proxy.set_mode(Mode::Refuse);
    let mut fresh = connect(proxy.addr());
    let _ = fresh.write_all(b"10\n");
    assert!(read_until_closed(&mut fresh).is_empty(), "a refused connection must get nothing");
    open.write_all(b"10\n").unwrap();
    assert!(read_until_closed(&mut open).is_empty(), "an open connection must be closed at its next request");
    assert_eq!(proxy.connections(), 2);

    proxy.set_mode(Mode::Pass);
    let mut again = connect(proxy.addr());
    assert_eq!(ask(&mut again, 10), binary(10));
}

#[test]
fn proxy_carries_redis_commands_and_cuts_a_reply_mid_value() {
    let Some(redis) = redis_or_skip() else { return };
    let proxy = Proxy::start(redis.addr()).unwrap();
    let value = binary(50_000);
    resp::command(proxy.addr(), &[b"SET", b"k", &value], IO_TIMEOUT).unwrap();
    assert_eq!(redis.get(b"k").unwrap(), Some(value.clone()));
    assert_eq!(resp::command(proxy.addr(), &[b"GET", b"k"], IO_TIMEOUT).unwrap(), Reply::Bulk(Some(value)));

    proxy.set_mode(Mode::CutAfter(10_000));
    let cut = resp::command(proxy.addr(), &[b"GET", b"k"], IO_TIMEOUT);
    assert!(cut.is_err(), "a reply cut mid-value must be an error, got {cut:?}");
}

#[test]
fn proxy_in_front_of_s3_delays_and_cuts_objects() {
    let Some(s3) = s3_or_skip() else { return };
    let value = binary(200_000);
    s3.put_raw("entry", &value).unwrap();
    let proxy = Proxy::start(s3.addr()).unwrap();
    let get = || s3.send_via(proxy.addr(), "GET", &s3::object_path("entry"), &[], b"");
    assert_eq!(get().unwrap().body, value);

    let delay = Duration::from_millis(100);
    proxy.set_mode(Mode::latency(delay));
    let started = Instant::now();
    assert_eq!(get().unwrap().body, value);
    assert!(started.elapsed() >= delay);

    proxy.set_mode(Mode::CutAfter(50_000));
    let cut = get().expect_err("a body cut short must be an error");
    assert!(cut.contains("ended after"), "{cut}");
}
