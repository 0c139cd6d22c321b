//! One HTTP/1.1 request per new connection (`connection: close`), every step bounded in time, its failure told apart by whether any byte of an answer came (only then may a client resend a GET): what the fleet tests' clients send through an ECMP router.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// Why a request failed: `early` when no byte of an answer came (refused,
/// reset before the answer): only then may a client resend a GET.
#[derive(Debug)]
pub struct Failure {
    pub early: bool,
    pub what: String,
}

/// One request on a new connection (`connection: close`), every step
/// bounded by `limit`.
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    extra: &str,
    limit: Duration,
) -> Result<Reply, Failure> {
    let early = |what: String| Failure { early: true, what };
    let mut s = TcpStream::connect_timeout(&addr, limit)
        .map_err(|e| early(format!("connect {addr}: {e}")))?;
    s.set_read_timeout(Some(limit)).ok();
    s.set_write_timeout(Some(limit)).ok();
    let req = format!("{method} {path} HTTP/1.1\r\nhost: edge\r\n{extra}connection: close\r\n\r\n");
    s.write_all(req.as_bytes())
        .map_err(|e| early(format!("write {addr}: {e}")))?;
    // Framed by content-length when there is one: a complete answer is
    // complete even if the connection is reset before its FIN arrives.
    let mut got = Vec::new();
    let mut buf = [0u8; 16 << 10];
    loop {
        if let Some(reply) = complete(&got) {
            return Ok(reply);
        }
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => {
                return Err(Failure {
                    early: got.is_empty(),
                    what: format!("read {addr}: {e} after {:?}", String::from_utf8_lossy(&got)),
                })
            }
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    match text.split_once("\r\n\r\n") {
        Some((head, body)) => Ok(reply(head, body)),
        None => Err(Failure {
            early: got.is_empty(),
            what: format!("{addr}: incomplete answer {text:?}"),
        }),
    }
}

fn reply(head: &str, body: &str) -> Reply {
    Reply {
        status: head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0),
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// The answer in `got`, if its head and all of its content-length are in.
fn complete(got: &[u8]) -> Option<Reply> {
    let text = std::str::from_utf8(got).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let r = reply(head, body);
    let len: usize = r.header("content-length")?.parse().ok()?;
    (body.len() >= len).then_some(r)
}
