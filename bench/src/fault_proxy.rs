//! A TCP proxy on 127.0.0.1 for fault injection between a client and a server: it forwards
//! every connection to one target and, switched at run time, adds latency, refuses connections,
//! stalls, or cuts what the server sends after some bytes (a server that dies mid-reply).
//! Standard library only: the fleet benchmark uses it, and the tests include this same file.
//!
//! Each connection has a reader and a writer thread per direction: the reader decides what
//! happens to each chunk when it arrives (under the mode of that moment), the writer delivers it
//! when due. Latency is thus a delay line: every byte arrives its delay late, and throughput is
//! not divided by the number of chunks.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// What the proxy does to traffic. A change applies to new connections and, from its next
/// chunk, to open ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Bytes pass unchanged.
    Pass,
    /// Each chunk is delivered this much later than it arrived: `to_server` for what the client
    /// sends, `to_client` for what the server answers.
    Delay { to_server: Duration, to_client: Duration },
    /// New connections are accepted and closed at once; an open one is closed at its next chunk.
    Refuse,
    /// Connections are accepted and kept open, but nothing is forwarded until the mode changes
    /// (a server that hangs).
    Stall,
    /// Each connection delivers at most this many bytes to the client — counted from when it
    /// opened or the mode was last set, whichever is later — then both of its sides are closed.
    CutAfter(u64),
}

impl Mode {
    /// Added latency on answers only: each request waits `delay` more for its answer.
    pub fn latency(delay: Duration) -> Mode {
        Mode::Delay { to_server: Duration::ZERO, to_client: delay }
    }
}

/// How long the proxy waits for an upstream connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long dropping the proxy waits for its threads.
const STOP_BOUND: Duration = Duration::from_secs(5);

/// How often a stalled or sleeping thread looks at the mode and the stop flag.
const POLL: Duration = Duration::from_millis(5);

/// Chunks in flight per direction (backpressure for a slow reader).
const CHUNKS_IN_FLIGHT: usize = 1024;

/// A running proxy; dropping it closes every connection and stops its threads.
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

struct Shared {
    target: SocketAddr,
    state: Mutex<State>,
    stopping: AtomicBool,
    accepted: AtomicUsize,
    connections: Mutex<Vec<Arc<Connection>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

#[derive(Clone, Copy)]
struct State {
    mode: Mode,
    /// Bumped on every `set_mode`, so that byte counts restart.
    generation: u64,
}

/// Both sockets of one proxied connection.
struct Connection {
    client: TcpStream,
    server: TcpStream,
}

impl Connection {
    fn close(&self) {
        let _ = self.client.shutdown(Shutdown::Both);
        let _ = self.server.shutdown(Shutdown::Both);
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    ToServer,
    ToClient,
}

enum Chunk {
    Data {
        due: Instant,
        bytes: Vec<u8>,
    },
    /// The sender closed its side: pass the end on.
    End,
    /// Deliver nothing more and close the connection.
    Cut,
}

impl Proxy {
    /// Starts a proxy on 127.0.0.1 (a port the system picks) that forwards to `target`, in
    /// [`Mode::Pass`].
    pub fn start(target: SocketAddr) -> std::io::Result<Proxy> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            target,
            state: Mutex::new(State { mode: Mode::Pass, generation: 0 }),
            stopping: AtomicBool::new(false),
            accepted: AtomicUsize::new(0),
            connections: Mutex::new(Vec::new()),
            threads: Mutex::new(Vec::new()),
        });
        let acceptor = {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name("proxy-accept".into())
                .spawn(move || accept_loop(&shared, &listener))?
        };
        lock(&shared.threads).push(acceptor);
        Ok(Proxy { addr, shared })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port clients connect to (on 127.0.0.1).
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Switches what the proxy does, for new connections and open ones alike.
    pub fn set_mode(&self, mode: Mode) {
        let mut state = lock(&self.shared.state);
        state.mode = mode;
        state.generation += 1;
    }

    /// What the proxy does now.
    pub fn mode(&self) -> Mode {
        lock(&self.shared.state).mode
    }

    /// How many connections it has accepted (refused ones included).
    pub fn connections(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wakes the acceptor from `accept`; it sees the flag and ends.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        let deadline = Instant::now() + STOP_BOUND;
        loop {
            // Closing unblocks every reader and writer; repeated in case a connection was being
            // set up while the flag was raised.
            for connection in lock(&self.shared.connections).drain(..) {
                connection.close();
            }
            let mut threads = lock(&self.shared.threads);
            let (finished, running): (Vec<_>, Vec<_>) = threads.drain(..).partition(|t| t.is_finished());
            *threads = running;
            drop(threads);
            for thread in finished {
                let _ = thread.join();
            }
            if lock(&self.shared.threads).is_empty() || Instant::now() >= deadline {
                return;
            }
            thread::sleep(POLL);
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking proxy thread must not take the whole proxy down with it.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener) {
    for client in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = client else {
            // Out of descriptors, say: try again soon rather than spin.
            thread::sleep(POLL);
            continue;
        };
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        if lock(&shared.state).mode == Mode::Refuse {
            drop(client);
            continue;
        }
        let handler = {
            let shared = Arc::clone(shared);
            thread::Builder::new().name("proxy-connection".into()).spawn(move || connect(&shared, client))
        };
        let mut threads = lock(&shared.threads);
        threads.retain(|t| !t.is_finished());
        if let Ok(handler) = handler {
            threads.push(handler);
        }
    }
}

/// Connects upstream for one accepted client and starts its four pump threads.
fn connect(shared: &Arc<Shared>, client: TcpStream) {
    let Ok(server) = TcpStream::connect_timeout(&shared.target, CONNECT_TIMEOUT) else {
        // As a dead server would: the client sees its connection closed.
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (Ok(client_copy), Ok(server_copy)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let connection = Arc::new(Connection { client: client_copy, server: server_copy });
    {
        let mut connections = lock(&shared.connections);
        connections.retain(|c| Arc::strong_count(c) > 1);
        connections.push(Arc::clone(&connection));
    }
    if shared.stopping.load(Ordering::SeqCst) {
        connection.close();
        return;
    }
    for (from, to, direction) in
        [(&client, &server, Direction::ToServer), (&server, &client, Direction::ToClient)]
    {
        let (Ok(from), Ok(to)) = (from.try_clone(), to.try_clone()) else {
            connection.close();
            return;
        };
        let (sender, receiver) = sync_channel(CHUNKS_IN_FLIGHT);
        let spawned = [
            spawn_pump(shared, &connection, move |shared, connection| {
                read_side(shared, connection, from, direction, &sender)
            }),
            spawn_pump(shared, &connection, move |shared, connection| {
                write_side(shared, connection, to, &receiver)
            }),
        ];
        if spawned.iter().any(|ok| !ok) {
            connection.close();
            return;
        }
    }
}

fn spawn_pump(
    shared: &Arc<Shared>,
    connection: &Arc<Connection>,
    pump: impl FnOnce(&Shared, &Connection) + Send + 'static,
) -> bool {
    let (shared_copy, connection) = (Arc::clone(shared), Arc::clone(connection));
    let spawned =
        thread::Builder::new().name("proxy-pump".into()).spawn(move || pump(&shared_copy, &connection));
    match spawned {
        Ok(handle) => {
            lock(&shared.threads).push(handle);
            true
        }
        Err(_) => false,
    }
}

/// Reads what one side sends and decides, chunk by chunk, what the writer delivers and when.
fn read_side(
    shared: &Shared,
    connection: &Connection,
    mut from: TcpStream,
    direction: Direction,
    to_writer: &SyncSender<Chunk>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    let mut generation = lock(&shared.state).generation;
    let mut delivered: u64 = 0;
    loop {
        let length = match from.read(&mut buffer) {
            Ok(0) => {
                let _ = to_writer.send(Chunk::End);
                return;
            }
            Ok(length) => length,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => {
                connection.close();
                return;
            }
        };
        let arrived = Instant::now();
        let state = loop {
            if shared.stopping.load(Ordering::SeqCst) {
                connection.close();
                return;
            }
            let state = *lock(&shared.state);
            if state.mode != Mode::Stall {
                break state;
            }
            thread::sleep(POLL);
        };
        if state.generation != generation {
            generation = state.generation;
            delivered = 0;
        }
        let bytes = buffer[..length].to_vec();
        let chunk = match (state.mode, direction) {
            (Mode::Refuse, _) => {
                connection.close();
                return;
            }
            (Mode::Delay { to_server, .. }, Direction::ToServer) => {
                Chunk::Data { due: arrived + to_server, bytes }
            }
            (Mode::Delay { to_client, .. }, Direction::ToClient) => {
                Chunk::Data { due: arrived + to_client, bytes }
            }
            (Mode::CutAfter(limit), Direction::ToClient) => {
                let room = usize::try_from(limit.saturating_sub(delivered)).unwrap_or(usize::MAX);
                if length > room {
                    let _ = to_writer.send(Chunk::Data { due: arrived, bytes: bytes[..room].to_vec() });
                    let _ = to_writer.send(Chunk::Cut);
                    return;
                }
                delivered += length as u64;
                Chunk::Data { due: arrived, bytes }
            }
            _ => Chunk::Data { due: arrived, bytes },
        };
        if to_writer.send(chunk).is_err() {
            connection.close();
            return;
        }
    }
}

/// Delivers the reader's chunks to the other side, each when it is due.
fn write_side(shared: &Shared, connection: &Connection, mut to: TcpStream, from_reader: &Receiver<Chunk>) {
    for chunk in from_reader {
        match chunk {
            Chunk::Data { due, bytes } => {
                while Instant::now() < due {
                    if shared.stopping.load(Ordering::SeqCst) {
                        connection.close();
                        return;
                    }
                    thread::sleep(due.saturating_duration_since(Instant::now()).min(POLL));
                }
                if to.write_all(&bytes).is_err() {
                    connection.close();
                    return;
                }
            }
            Chunk::End => {
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
            Chunk::Cut => {
                connection.close();
                return;
            }
        }
    }
    // The reader ended without a word: it already closed the connection.
}
