//! `ws_echo --listen ADDR [--cpu N]`: a WebSocket echo backend (RFC 6455)
//! for benches/e2e/websocket.sh. Prints `listening on ADDR` once bound
//! (`--listen 127.0.0.1:0` picks a free port).
//!
//! Each connection's first bytes must be a `GET` with `Upgrade: websocket`
//! and a `Sec-WebSocket-Key`; it is answered `101 Switching Protocols` with
//! `Sec-WebSocket-Accept` = base64(SHA-1(key + the RFC's GUID)), anything
//! else `400` and closed. Then every data frame (text, binary,
//! continuation) is sent back with the same opcode and FIN bit and its
//! payload unmasked, a ping is answered with a pong, a close with a close
//! (its payload echoed) before the connection ends. Every frame read in
//! one read goes back in one write.
//!
//! One glommio executor (pinned to `--cpu` if given), one task per
//! connection: cheap enough per message that a proxy in front of it is the
//! bottleneck, and cheap per idle connection (its read buffer is given
//! back when it is empty). The accept key's SHA-1 and base64 are
//! `benches::ws`'s, shared with `ws_load`, which checks it.

use std::net::SocketAddr;
use std::process::ExitCode;

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;

use benches::ws::{accept_key, raise_nofile};

/// RFC 6455 §1.3: appended to the client's key before hashing.
/// The longest request head accepted.
const MAX_HEAD: usize = 16 * 1024;
/// The largest frame payload accepted.
const MAX_PAYLOAD: usize = 64 * 1024 * 1024;
/// Bytes asked of the socket per read (more when a frame needs them).
const READ_CHUNK: usize = 16 * 1024;

const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;
const OP_PONG: u8 = 0xA;

/// The value of header `name` (lower case) in `head`, if present.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.split("\r\n").skip(1).find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then_some(v.trim())
    })
}

/// The `101` for an upgrade request head, or why it is refused.
fn handshake_response(head: &str) -> Result<String, &'static str> {
    if !head.starts_with("GET ") {
        return Err("not a GET");
    }
    let upgrade = header(head, "upgrade").unwrap_or_default();
    if !upgrade
        .split(',')
        .any(|t| t.trim().eq_ignore_ascii_case("websocket"))
    {
        return Err("no Upgrade: websocket");
    }
    let key = header(head, "sec-websocket-key").ok_or("no Sec-WebSocket-Key")?;
    Ok(format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
        accept_key(key)
    ))
}

/// A frame's header as a server sends it: FIN/opcode byte `b0`, no mask.
fn put_header(out: &mut Vec<u8>, b0: u8, len: usize) {
    out.push(b0);
    if len < 126 {
        out.push(len as u8);
    } else if len <= usize::from(u16::MAX) {
        out.push(126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
}

/// Appends `payload` XOR `mask` (the key repeating from byte 0).
fn put_unmasked(out: &mut Vec<u8>, payload: &[u8], mask: [u8; 4]) {
    let start = out.len();
    out.extend_from_slice(payload);
    let m = u64::from_ne_bytes([
        mask[0], mask[1], mask[2], mask[3], mask[0], mask[1], mask[2], mask[3],
    ]);
    let dst = &mut out[start..];
    let mut words = dst.chunks_exact_mut(8);
    for w in &mut words {
        let v = u64::from_ne_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]) ^ m;
        w.copy_from_slice(&v.to_ne_bytes());
    }
    for (i, b) in words.into_remainder().iter_mut().enumerate() {
        *b ^= mask[i & 3];
    }
}

/// What parsing the buffered bytes found.
enum Parsed {
    /// A whole frame of `used` bytes: its first byte, payload range and mask.
    Frame {
        b0: u8,
        payload: std::ops::Range<usize>,
        mask: [u8; 4],
        used: usize,
    },
    /// More bytes are needed: at least this many in all.
    Need(usize),
}

/// Parses one frame at the start of `b`.
fn parse_frame(b: &[u8]) -> Result<Parsed, String> {
    if b.len() < 2 {
        return Ok(Parsed::Need(2));
    }
    let masked = b[1] & 0x80 != 0;
    let (len, mut at) = match b[1] & 0x7f {
        126 if b.len() < 4 => return Ok(Parsed::Need(4)),
        126 => (usize::from(u16::from_be_bytes([b[2], b[3]])), 4),
        127 if b.len() < 10 => return Ok(Parsed::Need(10)),
        127 => {
            let l = u64::from_be_bytes([b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9]]);
            (usize::try_from(l).unwrap_or(usize::MAX), 10)
        }
        l => (usize::from(l), 2),
    };
    if len > MAX_PAYLOAD {
        return Err(format!("frame of {len} bytes (limit {MAX_PAYLOAD})"));
    }
    let mut mask = [0u8; 4];
    if masked {
        if b.len() < at + 4 {
            return Ok(Parsed::Need(at + 4));
        }
        mask.copy_from_slice(&b[at..at + 4]);
        at += 4;
    }
    if b.len() < at + len {
        return Ok(Parsed::Need(at + len));
    }
    Ok(Parsed::Frame {
        b0: b[0],
        payload: at..at + len,
        mask,
        used: at + len,
    })
}

/// Reads the request head; returns it and the bytes after it.
async fn read_head(s: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut got = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    loop {
        if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = got.split_off(at + 4);
            return Some((String::from_utf8_lossy(&got).into_owned(), rest));
        }
        if got.len() > MAX_HEAD {
            return None;
        }
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
        }
    }
}

async fn serve(mut s: TcpStream) {
    let _ = s.set_nodelay(true);
    let Some((head, rest)) = read_head(&mut s).await else {
        return;
    };
    let response = match handshake_response(&head) {
        Ok(r) => r,
        Err(why) => {
            let body = format!("{why}\n");
            let _ = s
                .write_all(
                    format!(
                        "HTTP/1.1 400 Bad Request\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                )
                .await;
            return;
        }
    };
    if s.write_all(response.as_bytes()).await.is_err() {
        return;
    }
    // rbuf[..filled] holds bytes read and not yet parsed.
    let mut filled = rest.len();
    let mut rbuf = rest;
    let mut out = Vec::new();
    let mut need = 2;
    loop {
        let mut at = 0;
        let mut closing = false;
        while !closing {
            match parse_frame(&rbuf[at..filled]) {
                Ok(Parsed::Need(n)) => {
                    need = n;
                    break;
                }
                Ok(Parsed::Frame {
                    b0,
                    payload,
                    mask,
                    used,
                }) => {
                    let payload = &rbuf[at + payload.start..at + payload.end];
                    let reply = match b0 & 0x0f {
                        OP_PONG => None,
                        OP_PING => Some(0x80 | OP_PONG),
                        OP_CLOSE => {
                            closing = true;
                            Some(0x80 | OP_CLOSE)
                        }
                        _ => Some(b0),
                    };
                    if let Some(b0) = reply {
                        put_header(&mut out, b0, payload.len());
                        put_unmasked(&mut out, payload, mask);
                    }
                    at += used;
                }
                Err(e) => {
                    eprintln!("ws_echo: {e}; closing the connection");
                    return;
                }
            }
        }
        if !out.is_empty() {
            if s.write_all(&out).await.is_err() {
                return;
            }
            out.clear();
            if out.capacity() > 4 * READ_CHUNK {
                out = Vec::new();
            }
        }
        if closing {
            return;
        }
        // Keep the unparsed tail at the front.
        rbuf.copy_within(at..filled, 0);
        filled -= at;
        if filled == 0 && rbuf.len() > READ_CHUNK {
            // A big frame went: give its buffer back.
            rbuf = Vec::new();
        }
        let want = (filled + READ_CHUNK).max(need);
        if rbuf.len() < want {
            rbuf.resize(want, 0);
        }
        match s.read(&mut rbuf[filled..]).await {
            Ok(0) | Err(_) => return,
            Ok(n) => filled += n,
        }
    }
}

fn parse_args() -> Result<(SocketAddr, Option<usize>), String> {
    let mut listen = None;
    let mut cpu = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--listen" => listen = Some(value()?.parse().map_err(|e| format!("--listen: {e}"))?),
            "--cpu" => cpu = Some(value()?.parse().map_err(|e| format!("--cpu: {e}"))?),
            "-h" | "--help" => return Err("usage: ws_echo --listen ADDR [--cpu N]".into()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok((listen.ok_or("--listen ADDR is required")?, cpu))
}

fn main() -> ExitCode {
    let (listen, cpu) = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ws_echo: {e}");
            return ExitCode::from(2);
        }
    };
    raise_nofile();
    benches::serve_on_one_core("ws_echo", listen, cpu, serve)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_masked_frame_is_echoed_unmasked() {
        let payload: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        let mask = [1, 2, 3, 4];
        let mut frame = vec![0x82, 0x80 | 126];
        frame.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i & 3]));
        assert!(matches!(parse_frame(&frame[..5]).unwrap(), Parsed::Need(8)));
        let Parsed::Frame {
            b0,
            payload: r,
            mask: m,
            used,
        } = parse_frame(&frame).unwrap()
        else {
            panic!("no frame");
        };
        assert_eq!((b0, used), (0x82, frame.len()));
        let mut out = Vec::new();
        put_header(&mut out, b0, r.len());
        put_unmasked(&mut out, &frame[r], m);
        assert_eq!(&out[..4], &[0x82, 126, 1, 44]);
        assert_eq!(&out[4..], &payload[..]);
    }
}
