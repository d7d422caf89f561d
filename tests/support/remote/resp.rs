//! A minimal Redis client for the tests themselves (RESP2 over a TCP connection, binary-safe),
//! independent of the client the cache uses: tests poison and inspect entries with it. One
//! connection per command, every step bounded by a timeout.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One reply, as Redis sends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Integer(i64),
    /// `None` is the null bulk string (a missing key).
    Bulk(Option<Vec<u8>>),
    /// `None` is the null array.
    Array(Option<Vec<Reply>>),
}

/// Sends one command (its arguments, binary-safe) to the server at `addr` on a new connection
/// and reads its reply; each of connecting, writing and reading gives up after `timeout`.
pub fn command(addr: SocketAddr, args: &[&[u8]], timeout: Duration) -> Result<Reply, String> {
    let stream = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect to {addr}: {e}"))?;
    stream.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    stream.set_write_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    let mut request = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        request.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        request.extend_from_slice(arg);
        request.extend_from_slice(b"\r\n");
    }
    (&stream).write_all(&request).map_err(|e| format!("send to {addr}: {e}"))?;
    read_reply(&mut BufReader::new(&stream)).map_err(|e| format!("reply from {addr}: {e}"))
}

fn read_reply(reader: &mut impl BufRead) -> Result<Reply, String> {
    let line = read_line(reader)?;
    let (kind, rest) = line.split_at(1);
    let number = || rest.parse::<i64>().map_err(|_| format!("not a number in {line:?}"));
    match kind {
        "+" => Ok(Reply::Simple(rest.to_string())),
        "-" => Ok(Reply::Error(rest.to_string())),
        ":" => Ok(Reply::Integer(number()?)),
        "$" => match usize::try_from(number()?) {
            Err(_) => Ok(Reply::Bulk(None)),
            Ok(length) => {
                let mut data = vec![0; length + 2];
                reader.read_exact(&mut data).map_err(|e| e.to_string())?;
                if !data.ends_with(b"\r\n") {
                    return Err("a bulk string without its CRLF".into());
                }
                data.truncate(length);
                Ok(Reply::Bulk(Some(data)))
            }
        },
        "*" => match usize::try_from(number()?) {
            Err(_) => Ok(Reply::Array(None)),
            Ok(count) => {
                (0..count).map(|_| read_reply(reader)).collect::<Result<_, _>>().map(Some).map(Reply::Array)
            }
        },
        _ => Err(format!("unknown reply {line:?}")),
    }
}

fn read_line(reader: &mut impl BufRead) -> Result<String, String> {
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line).map_err(|e| e.to_string())?;
    if !line.ends_with(b"\r\n") || line.len() < 3 {
        return Err(format!("a truncated reply line {:?}", String::from_utf8_lossy(&line)));
    }
    line.truncate(line.len() - 2);
    String::from_utf8(line).map_err(|_| "a reply line that is not UTF-8".into())
}
