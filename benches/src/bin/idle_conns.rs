//! `idle_conns ADDR N [HOLD_SECS] [--requests K [--concurrent]]`: opens N
//! idle HTTP/2 cleartext (prior knowledge) connections to ADDR, completes
//! the handshake on each (client preface + SETTINGS, server SETTINGS
//! acknowledged, our SETTINGS acked by the server), prints `ready N` on
//! stdout, then holds them open for HOLD_SECS (default 60) or until killed.
//!
//! With `--requests K` (default 0: handshake only), each connection then
//! sends K `GET /` requests (HEADERS with END_STREAM|END_HEADERS on streams
//! 1, 3, 5, ...) and reads until every one has completed (a frame with
//! END_STREAM on its stream, or RST_STREAM) before it counts as ready: the
//! connection is idle *after* use, as real edge traffic leaves it (HPACK
//! tables filled, stream tables grown, buffers touched). The requests go
//! one after another, or with `--concurrent` all K at once, so the server
//! holds K streams at the same time (K must not exceed the server's
//! SETTINGS_MAX_CONCURRENT_STREAMS). The header block is what a browser
//! sends (authority, user-agent, accept, accept-encoding, accept-language,
//! cookie), hand-encoded as HPACK literals with incremental indexing so the
//! server's decoder table fills; every request repeats the same bytes.
//! Server PINGs are answered, SETTINGS acked, DATA credited back with
//! WINDOW_UPDATE; a GOAWAY, EOF or a read stalled for 5 s is an error.
//!
//! Used by benches/e2e/compare.sh to measure a proxy's memory per idle
//! connection (its RSS before and after, divided by N). Std only, no h2
//! crate: the point is to open many connections cheaply and exactly.

use std::io::{Error, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_DATA: u8 = 0x0;
const FRAME_HEADERS: u8 = 0x1;
const FRAME_RST_STREAM: u8 = 0x3;
const FRAME_SETTINGS: u8 = 0x4;
const FRAME_PUSH_PROMISE: u8 = 0x5;
const FRAME_PING: u8 = 0x6;
const FRAME_GOAWAY: u8 = 0x7;
const FRAME_WINDOW_UPDATE: u8 = 0x8;
const FRAME_CONTINUATION: u8 = 0x9;
const FLAG_ACK: u8 = 0x1;
const FLAG_END_STREAM: u8 = 0x1;
const FLAG_END_HEADERS: u8 = 0x4;
const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
/// HPACK dynamic table size both ends start with (RFC 7541 §4.2).
const DEFAULT_TABLE_SIZE: u32 = 4096;
/// Credit DATA back once this much is consumed (half the default window).
const WINDOW_REFILL: u32 = 32 * 1024;
/// Longest a single read may block, and longest a connection's requests may
/// take in all.
const READ_TIMEOUT: Duration = Duration::from_secs(5);
const REQUESTS_TIMEOUT: Duration = Duration::from_secs(30);

const USER_AGENT: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/124.0";
const ACCEPT: &str = "text/html,application/xhtml+xml,*/*;q=0.8";
const ACCEPT_ENCODING: &str = "gzip, deflate, br";
const ACCEPT_LANGUAGE: &str = "en-US,en;q=0.9";
const COOKIE: &str = "session=3f9a1c7e5b2d48a6b0e1f2c3d4a5b6c7; theme=dark; \
                      _ga=GA1.1.1234567890.1700000000; consent=yes; lang=en";

fn frame_header(len: usize, kind: u8, flags: u8, stream: u32) -> [u8; 9] {
    let l = (len as u32).to_be_bytes();
    let s = stream.to_be_bytes();
    [l[1], l[2], l[3], kind, flags, s[0], s[1], s[2], s[3]]
}

/// Appends an HPACK integer (RFC 7541 §5.1) with an N-bit prefix; `high`
/// holds the bits above the prefix in the first byte.
fn hpack_int(out: &mut Vec<u8>, prefix_bits: u32, high: u8, mut v: usize) {
    let max = (1usize << prefix_bits) - 1;
    if v < max {
        out.push(high | v as u8);
        return;
    }
    out.push(high | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

/// Appends a literal header field with incremental indexing whose name is
/// static-table entry `name_index` (RFC 7541 §6.2.1); the value is a raw
/// (non-Huffman) string literal.
fn hpack_literal_indexed_name(out: &mut Vec<u8>, name_index: usize, value: &str) {
    hpack_int(out, 6, 0x40, name_index);
    hpack_int(out, 7, 0x00, value.len());
    out.extend_from_slice(value.as_bytes());
}

/// The request header block, the same for every request of every
/// connection: static-table pseudo-headers, then literals that each add a
/// dynamic-table entry on the server.
fn request_block(authority: &str) -> Vec<u8> {
    let mut b = vec![0x82, 0x86, 0x84]; // :method GET, :scheme http, :path /
    hpack_literal_indexed_name(&mut b, 1, authority); // :authority
    hpack_literal_indexed_name(&mut b, 58, USER_AGENT);
    hpack_literal_indexed_name(&mut b, 19, ACCEPT);
    hpack_literal_indexed_name(&mut b, 16, ACCEPT_ENCODING);
    hpack_literal_indexed_name(&mut b, 17, ACCEPT_LANGUAGE);
    hpack_literal_indexed_name(&mut b, 32, COOKIE);
    b
}

/// What each connection does after its handshake.
#[derive(Clone, Copy)]
struct Plan {
    requests: u32,
    concurrent: bool,
}

/// Raises the soft open-files limit to the hard limit.
fn raise_nofile() {
    // SAFETY: plain getrlimit/setrlimit on a local struct.
    unsafe {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

/// A client connection: the socket, bytes read but not yet parsed, and the
/// server's settings that matter to us.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
    /// Server's SETTINGS_MAX_CONCURRENT_STREAMS (None: unlimited).
    max_streams: Option<u32>,
    /// HPACK table size we encode against; a pending size update to emit at
    /// the start of the next header block when the server lowered it.
    table_size: u32,
    pending_table_update: Option<u32>,
}

impl Conn {
    /// Next whole frame, reading from the socket as needed.
    fn next_frame(&mut self, what: &str) -> std::io::Result<Frame> {
        let mut chunk = [0u8; 4096];
        loop {
            if self.buf.len() >= 9 {
                let b = &self.buf;
                let len = (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]);
                if b.len() >= 9 + len {
                    let stream = u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff;
                    let f = Frame {
                        kind: b[3],
                        flags: b[4],
                        stream,
                        payload: b[9..9 + len].to_vec(),
                    };
                    self.buf.drain(..9 + len);
                    return Ok(f);
                }
            }
            let n = match self.s.read(&mut chunk) {
                Ok(n) => n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(Error::new(
                        ErrorKind::TimedOut,
                        format!("no frame from the server for {READ_TIMEOUT:?} {what}"),
                    ));
                }
                Err(e) => return Err(e),
            };
            if n == 0 {
                return Err(Error::new(
                    ErrorKind::UnexpectedEof,
                    format!("server closed {what}"),
                ));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Handles connection-level frames: acks SETTINGS (recording the ones we
    /// use), answers PING, fails on GOAWAY. Returns true for a SETTINGS ack.
    fn connection_frame(&mut self, f: &Frame) -> std::io::Result<bool> {
        match f.kind {
            FRAME_SETTINGS if f.flags & FLAG_ACK != 0 => return Ok(true),
            FRAME_SETTINGS => {
                for p in f.payload.chunks_exact(6) {
                    let id = u16::from_be_bytes([p[0], p[1]]);
                    let v = u32::from_be_bytes([p[2], p[3], p[4], p[5]]);
                    match id {
                        SETTINGS_MAX_CONCURRENT_STREAMS => self.max_streams = Some(v),
                        SETTINGS_HEADER_TABLE_SIZE if v < self.table_size => {
                            self.table_size = v;
                            self.pending_table_update = Some(v);
                        }
                        _ => {}
                    }
                }
                self.s
                    .write_all(&frame_header(0, FRAME_SETTINGS, FLAG_ACK, 0))?;
            }
            FRAME_PING if f.flags & FLAG_ACK == 0 => {
                let mut pong = frame_header(f.payload.len(), FRAME_PING, FLAG_ACK, 0).to_vec();
                pong.extend_from_slice(&f.payload);
                self.s.write_all(&pong)?;
            }
            FRAME_GOAWAY => {
                let p = &f.payload;
                let (last, code) = if p.len() >= 8 {
                    (
                        u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & 0x7fff_ffff,
                        u32::from_be_bytes([p[4], p[5], p[6], p[7]]),
                    )
                } else {
                    (0, 0)
                };
                let debug = String::from_utf8_lossy(p.get(8..).unwrap_or_default());
                return Err(Error::other(format!(
                    "server sent GOAWAY (last stream {last}, error code {code:#x}, debug {debug:?})"
                )));
            }
            _ => {}
        }
        Ok(false)
    }

    /// Sends `WINDOW_UPDATE` for `stream` (0: the connection).
    fn window_update(&mut self, stream: u32, increment: u32) -> std::io::Result<()> {
        let mut f = frame_header(4, FRAME_WINDOW_UPDATE, 0, stream).to_vec();
        f.extend_from_slice(&increment.to_be_bytes());
        self.s.write_all(&f)
    }

    /// One HEADERS frame carrying a GET on `stream`.
    fn request_frame(&mut self, out: &mut Vec<u8>, stream: u32, block: &[u8]) {
        let mut update = Vec::new();
        if let Some(size) = self.pending_table_update.take() {
            hpack_int(&mut update, 5, 0x20, size as usize); // dynamic table size update
        }
        out.extend_from_slice(&frame_header(
            update.len() + block.len(),
            FRAME_HEADERS,
            FLAG_END_STREAM | FLAG_END_HEADERS,
            stream,
        ));
        out.extend_from_slice(&update);
        out.extend_from_slice(block);
    }

    /// Sends `plan.requests` GETs and reads until all have completed;
    /// returns how many of them the server reset rather than answered.
    fn run_requests(&mut self, plan: Plan, block: &[u8]) -> std::io::Result<usize> {
        let k = plan.requests as usize;
        if plan.concurrent {
            if let Some(max) = self.max_streams.filter(|&m| m < plan.requests) {
                return Err(Error::other(format!(
                    "--concurrent {k} requests exceed the server's max concurrent streams ({max})"
                )));
            }
        }
        let deadline = Instant::now() + REQUESTS_TIMEOUT;
        let mut done = vec![false; k];
        let mut stream_unacked = vec![0u32; k];
        let mut conn_unacked = 0u32;
        let mut completed = 0usize;
        let mut resets = 0usize;
        let mut sent = 0usize;
        let mut in_header_block = false;
        let mut out = Vec::new();
        while completed < k || in_header_block {
            // Send: everything at once, or the next one once the last is done.
            if sent < k && (plan.concurrent || completed == sent) {
                out.clear();
                let n = if plan.concurrent { k - sent } else { 1 };
                for i in sent..sent + n {
                    self.request_frame(&mut out, 2 * i as u32 + 1, block);
                }
                self.s.write_all(&out)?;
                sent += n;
            }
            if Instant::now() > deadline {
                return Err(Error::new(
                    ErrorKind::TimedOut,
                    format!("{completed} of {k} requests completed in {REQUESTS_TIMEOUT:?}"),
                ));
            }
            let f = self.next_frame("while waiting for responses")?;
            if f.stream == 0 {
                self.connection_frame(&f)?;
                continue;
            }
            // Our streams are odd and numbered from 1; anything else
            // (pushed streams) only matters to the connection window.
            let idx = ((f.stream - 1) / 2) as usize;
            let ours = f.stream % 2 == 1 && idx < sent;
            match f.kind {
                FRAME_HEADERS | FRAME_PUSH_PROMISE | FRAME_CONTINUATION => {
                    in_header_block = f.flags & FLAG_END_HEADERS == 0;
                }
                FRAME_DATA => {
                    let len = f.payload.len() as u32;
                    conn_unacked += len;
                    if conn_unacked >= WINDOW_REFILL {
                        self.window_update(0, conn_unacked)?;
                        conn_unacked = 0;
                    }
                    if ours && !done[idx] && f.flags & FLAG_END_STREAM == 0 {
                        stream_unacked[idx] += len;
                        if stream_unacked[idx] >= WINDOW_REFILL {
                            self.window_update(f.stream, stream_unacked[idx])?;
                            stream_unacked[idx] = 0;
                        }
                    }
                }
                _ => {}
            }
            let ends = match f.kind {
                FRAME_HEADERS | FRAME_DATA => f.flags & FLAG_END_STREAM != 0,
                FRAME_RST_STREAM => true,
                _ => false,
            };
            if ends && ours && !done[idx] {
                done[idx] = true;
                completed += 1;
                resets += usize::from(f.kind == FRAME_RST_STREAM);
            }
        }
        Ok(resets)
    }
}

/// Connects, completes the h2 handshake, then runs `plan`'s requests;
/// returns the socket and how many requests were reset.
fn open(addr: SocketAddr, plan: Plan, block: &[u8]) -> std::io::Result<(TcpStream, usize)> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(3))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(READ_TIMEOUT))?;
    let mut c = Conn {
        s,
        buf: Vec::with_capacity(256),
        max_streams: None,
        table_size: DEFAULT_TABLE_SIZE,
        pending_table_update: None,
    };
    let mut hello = PREFACE.to_vec();
    hello.extend_from_slice(&frame_header(0, FRAME_SETTINGS, 0, 0)); // empty SETTINGS
    c.s.write_all(&hello)?;
    let (mut got_settings, mut got_ack) = (false, false);
    while !(got_settings && got_ack) {
        let f = c.next_frame("during handshake")?;
        if f.stream == 0 {
            got_settings |= f.kind == FRAME_SETTINGS && f.flags & FLAG_ACK == 0;
            got_ack |= c.connection_frame(&f)?;
        }
    }
    let resets = if plan.requests > 0 {
        c.run_requests(plan, block)?
    } else {
        0
    };
    c.s.set_read_timeout(None)?;
    Ok((c.s, resets))
}

const USAGE: &str = "usage: idle_conns ADDR N [HOLD_SECS] [--requests K [--concurrent]]";

fn main() -> ExitCode {
    let mut pos = Vec::new();
    let mut plan = Plan {
        requests: 0,
        concurrent: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--requests" => match args.next().and_then(|k| k.parse::<u32>().ok()) {
                Some(k) if k < 1 << 30 => plan.requests = k,
                _ => {
                    eprintln!("idle_conns: --requests needs a count below 2^30\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "--concurrent" => plan.concurrent = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            _ if a.starts_with("--") => {
                eprintln!("idle_conns: unknown option {a}\n{USAGE}");
                return ExitCode::from(2);
            }
            _ => pos.push(a),
        }
    }
    if pos.len() < 2 || pos.len() > 3 {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    }
    let Ok(addr) = pos[0].parse::<SocketAddr>() else {
        eprintln!("idle_conns: bad address {}", pos[0]);
        return ExitCode::from(2);
    };
    let Ok(n) = pos[1].parse::<usize>() else {
        eprintln!("idle_conns: bad count {}", pos[1]);
        return ExitCode::from(2);
    };
    let hold = Duration::from_secs(pos.get(2).and_then(|h| h.parse().ok()).unwrap_or(60));
    raise_nofile();

    let block = request_block(&addr.to_string());
    let start = Instant::now();
    let mut conns = Vec::with_capacity(n);
    let mut resets = 0;
    for i in 0..n {
        match open(addr, plan, &block) {
            Ok((s, r)) => {
                conns.push(s);
                resets += r;
            }
            Err(e) => {
                eprintln!("idle_conns: connection {i} to {addr}: {e}");
                return ExitCode::from(1);
            }
        }
    }
    let ms = start.elapsed().as_secs_f64() * 1e3;
    if plan.requests == 0 {
        println!("ready {n} ({ms:.0} ms)");
    } else {
        let mode = if plan.concurrent {
            "concurrent"
        } else {
            "sequential"
        };
        println!(
            "ready {n} ({ms:.0} ms, {} {mode} requests each, {resets} reset)",
            plan.requests
        );
    }
    let _ = std::io::stdout().flush();

    // Hold; the runner measures, then kills us (or HOLD_SECS pass).
    std::thread::sleep(hold);
    drop(conns);
    ExitCode::SUCCESS
}
