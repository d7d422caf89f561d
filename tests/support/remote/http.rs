//! A minimal HTTP/1.1 client for the tests themselves: one request per connection
//! (`Connection: close`), the whole response read, a body shorter than its `Content-Length` an
//! error. Tests use it to seed and inspect the S3 server behind the cache's back.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// A response, read to its end.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// Names in lower case, in the order sent.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first header named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Sends `method target` (an origin-form target: a path and maybe a query, already encoded) with
/// `headers` and `body` to `addr`, and reads the response. The whole exchange gives up after
/// `timeout`.
pub fn request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> Result<Response, String> {
    let deadline = Instant::now() + timeout;
    let what = format!("{method} http://{addr}{target}");
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("{what}: cannot connect: {e}"))?;
    stream.set_write_timeout(Some(timeout)).map_err(|e| format!("{what}: {e}"))?;
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body))
        .map_err(|e| format!("{what}: {e}"))?;

    let mut raw = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("{what}: no complete response within {timeout:?}"));
        }
        stream.set_read_timeout(Some(left)).map_err(|e| format!("{what}: {e}"))?;
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("{what}: reading the response: {e}")),
        }
    }
    parse(&raw).map_err(|e| format!("{what}: {e}"))
}

fn parse(raw: &[u8]) -> Result<Response, String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| format!("the connection closed inside the response head ({} bytes)", raw.len()))?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "a response head that is not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("a malformed status line {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let mut response = Response { status, headers, body: Vec::new() };
    let rest = &raw[end + 4..];
    response.body = if response.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        dechunk(rest)?
    } else if let Some(length) = response.header("content-length") {
        let length: usize = length.parse().map_err(|_| format!("a malformed Content-Length {length:?}"))?;
        if rest.len() < length {
            return Err(format!("the body ended after {} of {length} bytes", rest.len()));
        }
        rest[..length].to_vec()
    } else {
        rest.to_vec()
    };
    Ok(response)
}

fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let line_end =
            rest.windows(2).position(|w| w == b"\r\n").ok_or("the body ended inside a chunk header")?;
        let size_text =
            std::str::from_utf8(&rest[..line_end]).map_err(|_| "a chunk size that is not text")?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("a malformed chunk size {size_text:?}"))?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        if rest.len() < size + 2 {
            return Err(format!("the body ended inside a chunk of {size} bytes"));
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}
