//! `ws_load`: WebSocket load through a proxy, for benches/e2e/websocket.sh.
//!
//! ```text
//! ws_load --target ADDR [--conns C] [--size BYTES] [--duration S] [--warmup S]
//!         [--cpu LABEL=PID]... [--host HOST] [--path PATH]
//! ws_load --target ADDR --idle N [--hold S] [--size BYTES]
//! ```
//!
//! Every connection starts with the RFC 6455 handshake (`GET PATH`, default
//! `/ws`, with `Host`, default ADDR): anything but a `101` carrying the
//! right `Sec-WebSocket-Accept` for its key is an error, so a proxy that
//! answers itself (a 403, a 502) or mangles the handshake fails loudly.
//!
//! Load (the default): opens C connections (default 50), then each does
//! request/response ping-pong: one masked binary message of BYTES (default
//! 128; a fresh mask key and a sequence number in its first bytes each
//! time), wait for its echo (one unmasked binary frame with the same
//! payload, checked byte for byte), repeat. A warm-up (default 1 s) runs
//! before the measured window of S seconds (default 5). Prints
//!
//! ```text
//! result msgs=N secs=S rate=R p50_us=.. p90_us=.. p99_us=.. p999_us=.. max_us=.. errors=E
//! cpu_us_per_msg LABEL=X ... load=X
//! cpu_util LABEL=U ... load=U
//! ```
//!
//! `rate` counts the round trips that started and ended inside the window,
//! the percentiles are of their round-trip times (all samples, sorted).
//! `--cpu LABEL=PID` (repeatable) reads utime+stime of PID from /proc at the
//! window's start and end: its CPU-µs per message and its share of one CPU
//! over the window (`load` is this process, always reported). Errors (a
//! failed handshake, a closed or reset connection, a wrong echo, a
//! connection that stalls for the whole window or does not finish within
//! 5 s of its end) are counted, the first few printed on stderr; the exit
//! status is 1 if there was any, or if no message completed.
//!
//! Idle (`--idle N`): opens N connections (16 at a time), one BYTES message
//! echoed on each to prove the tunnel, prints `idle N open (T ms)`, holds
//! them S seconds (default 10), sends each a close frame and closes them;
//! any failure exits 1 at once.
//!
//! One glommio executor, one task per connection; pin it with taskset.

use std::cell::{Cell, RefCell};
use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::{Duration, Instant};

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use glommio::timer::sleep;

use benches::ws::{accept_key, base64, raise_nofile};

/// RFC 6455 §1.3: appended to the client's key before hashing.
const MAX_HEAD: usize = 16 * 1024;
/// Idle mode opens this many connections at a time.
const OPENERS: usize = 16;
/// After the window, connections have this long to finish their message.
const GRACE: Duration = Duration::from_secs(5);
/// Errors printed in full; the rest are only counted.
const SHOWN_ERRORS: usize = 5;

/// xorshift64*: mask keys, handshake keys (not cryptographic; a benchmark).
struct Rng(u64);

impl Rng {
    fn new(salt: u64) -> Self {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Rng((t ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[derive(Clone)]
struct Args {
    target: SocketAddr,
    host: String,
    path: String,
    conns: usize,
    size: usize,
    duration: Duration,
    warmup: Duration,
    idle: Option<usize>,
    hold: Duration,
    cpu: Vec<(String, u32)>,
}

const USAGE: &str = "usage: ws_load --target ADDR [--conns C] [--size BYTES] [--duration S] \
                     [--warmup S] [--cpu LABEL=PID]... [--host HOST] [--path PATH]\n       \
                     ws_load --target ADDR --idle N [--hold S] [--size BYTES]";

fn secs(v: &str, what: &str) -> Result<Duration, String> {
    v.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
        .ok_or(format!("{what}: bad number of seconds {v:?}"))
}

fn parse_args() -> Result<Args, String> {
    let mut target = None;
    let mut host = None;
    let mut path = "/ws".to_string();
    let mut conns = 50;
    let mut size = 128;
    let mut duration = Duration::from_secs(5);
    let mut warmup = Duration::from_secs(1);
    let mut idle = None;
    let mut hold = Duration::from_secs(10);
    let mut cpu = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--target" => {
                target = Some(value()?.parse().map_err(|e| format!("--target: {e}"))?);
            }
            "--host" => host = Some(value()?),
            "--path" => path = value()?,
            "--conns" => conns = value()?.parse().map_err(|e| format!("--conns: {e}"))?,
            "--size" => size = value()?.parse().map_err(|e| format!("--size: {e}"))?,
            "--duration" => duration = secs(&value()?, "--duration")?,
            "--warmup" => warmup = secs(&value()?, "--warmup")?,
            "--idle" => idle = Some(value()?.parse().map_err(|e| format!("--idle: {e}"))?),
            "--hold" => hold = secs(&value()?, "--hold")?,
            "--cpu" => {
                let v = value()?;
                let (label, pid) = v
                    .split_once('=')
                    .and_then(|(l, p)| Some((l.to_string(), p.parse::<u32>().ok()?)))
                    .ok_or(format!("--cpu: expected LABEL=PID, got {v:?}"))?;
                cpu.push((label, pid));
            }
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    let target: SocketAddr = target.ok_or(format!("--target ADDR is required\n{USAGE}"))?;
    if conns == 0 {
        return Err("--conns must be at least 1".into());
    }
    if size > 64 * 1024 * 1024 {
        return Err("--size: at most 64 MiB".into());
    }
    Ok(Args {
        host: host.unwrap_or_else(|| target.to_string()),
        target,
        path,
        conns,
        size,
        duration,
        warmup,
        idle,
        hold,
        cpu,
    })
}

/// A client frame's header: FIN + binary (or `opcode`), the masked length,
/// the mask key's place left zero. Returns the header and where the key goes.
fn client_header(opcode: u8, len: usize) -> (Vec<u8>, usize) {
    let mut h = vec![0x80 | opcode];
    if len < 126 {
        h.push(0x80 | len as u8);
    } else if len <= usize::from(u16::MAX) {
        h.push(0x80 | 126);
        h.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        h.push(0x80 | 127);
        h.extend_from_slice(&(len as u64).to_be_bytes());
    }
    let at = h.len();
    h.extend_from_slice(&[0; 4]);
    (h, at)
}

/// `dst` = `src` XOR the repeating `mask`.
fn mask_into(dst: &mut [u8], src: &[u8], mask: [u8; 4]) {
    let m = u64::from_ne_bytes([
        mask[0], mask[1], mask[2], mask[3], mask[0], mask[1], mask[2], mask[3],
    ]);
    let mut d = dst.chunks_exact_mut(8);
    let mut s = src.chunks_exact(8);
    for (d, s) in (&mut d).zip(&mut s) {
        let v = u64::from_ne_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]) ^ m;
        d.copy_from_slice(&v.to_ne_bytes());
    }
    for (i, (d, s)) in d.into_remainder().iter_mut().zip(s.remainder()).enumerate() {
        *d = s ^ mask[i & 3];
    }
}

/// A server frame at the start of `b`: (first byte, payload range, bytes
/// used), or None while incomplete. A masked server frame is an error.
fn server_frame(b: &[u8]) -> Result<Option<(u8, std::ops::Range<usize>, usize)>, String> {
    if b.len() < 2 {
        return Ok(None);
    }
    if b[1] & 0x80 != 0 {
        return Err("the server masked its frame".into());
    }
    let (len, at) = match b[1] & 0x7f {
        126 if b.len() < 4 => return Ok(None),
        126 => (usize::from(u16::from_be_bytes([b[2], b[3]])), 4),
        127 if b.len() < 10 => return Ok(None),
        127 => {
            let l = u64::from_be_bytes([b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9]]);
            (usize::try_from(l).unwrap_or(usize::MAX), 10)
        }
        l => (usize::from(l), 2),
    };
    if len > 64 * 1024 * 1024 {
        return Err(format!("a server frame of {len} bytes"));
    }
    if b.len() < at + len {
        return Ok(None);
    }
    Ok(Some((b[0], at..at + len, at + len)))
}

/// One WebSocket client connection after its handshake.
struct Ws {
    s: TcpStream,
    /// Read bytes, `rbuf[..filled]` not yet parsed.
    rbuf: Vec<u8>,
    filled: usize,
    /// The message's payload (unmasked) and the frame that carries it.
    payload: Vec<u8>,
    frame: Vec<u8>,
    key_at: usize,
    rng: Rng,
    seq: u64,
}

impl Ws {
    /// Connects, sends the upgrade request, checks the `101`.
    async fn open(args: &Args, salt: u64) -> Result<Ws, String> {
        let s = TcpStream::connect(args.target)
            .await
            .map_err(|e| format!("connect to {}: {e}", args.target))?;
        s.set_nodelay(true).map_err(|e| format!("nodelay: {e}"))?;
        let mut rng = Rng::new(salt);
        let key = base64(&[rng.next().to_le_bytes(), rng.next().to_le_bytes()].concat());
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n",
            args.path, args.host
        );
        let (header, key_at) = client_header(0x2, args.size);
        let mut ws = Ws {
            s,
            rbuf: vec![0; (args.size + 14).max(4096)],
            filled: 0,
            payload: (0..args.size).map(|i| (i * 7 + 1) as u8).collect(),
            frame: [header, vec![0; args.size]].concat(),
            key_at,
            rng,
            seq: 0,
        };
        ws.s.write_all(request.as_bytes())
            .await
            .map_err(|e| format!("sending the upgrade request: {e}"))?;
        let end = loop {
            if let Some(at) = ws.rbuf[..ws.filled]
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
            {
                break at + 4;
            }
            if ws.filled >= MAX_HEAD.min(ws.rbuf.len()) {
                return Err("no end of the response head".into());
            }
            match ws.s.read(&mut ws.rbuf[ws.filled..]).await {
                Ok(0) => {
                    let got = String::from_utf8_lossy(&ws.rbuf[..ws.filled]).into_owned();
                    return Err(format!("closed during the handshake after {got:?}"));
                }
                Ok(n) => ws.filled += n,
                Err(e) => return Err(format!("reading the handshake: {e}")),
            }
        };
        let head = String::from_utf8_lossy(&ws.rbuf[..end]).into_owned();
        let status = head.lines().next().unwrap_or_default();
        if !status.starts_with("HTTP/1.1 101") {
            let more = String::from_utf8_lossy(&ws.rbuf[end..ws.filled]).into_owned();
            return Err(format!(
                "answered {status:?} instead of 101 Switching Protocols: {head:?} {more:?}"
            ));
        }
        let want = accept_key(&key);
        let accept = head.split("\r\n").find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case("sec-websocket-accept")
                .then(|| v.trim().to_string())
        });
        if accept.as_deref() != Some(want.as_str()) {
            return Err(format!(
                "Sec-WebSocket-Accept {accept:?}, expected {want:?}: {head:?}"
            ));
        }
        ws.rbuf.copy_within(end..ws.filled, 0);
        ws.filled -= end;
        Ok(ws)
    }

    /// Sends one message and waits for its echo, checked.
    async fn round_trip(&mut self) -> Result<(), String> {
        self.seq += 1;
        let n = self.payload.len().min(8);
        self.payload[..n].copy_from_slice(&self.seq.to_le_bytes()[..n]);
        let mask = (self.rng.next() as u32).to_ne_bytes();
        self.frame[self.key_at..self.key_at + 4].copy_from_slice(&mask);
        let at = self.key_at + 4;
        mask_into(&mut self.frame[at..], &self.payload, mask);
        self.s
            .write_all(&self.frame)
            .await
            .map_err(|e| format!("sending message {}: {e}", self.seq))?;
        loop {
            if let Some((b0, payload, used)) = server_frame(&self.rbuf[..self.filled])? {
                if b0 != 0x82 {
                    return Err(format!(
                        "message {}: a frame with first byte {b0:#04x} instead of a final binary one",
                        self.seq
                    ));
                }
                if self.rbuf[payload.clone()] != self.payload[..] {
                    return Err(format!(
                        "message {}: the echo differs ({} bytes for {})",
                        self.seq,
                        payload.len(),
                        self.payload.len()
                    ));
                }
                if used != self.filled {
                    return Err(format!(
                        "message {}: {} bytes more than its echo",
                        self.seq,
                        self.filled - used
                    ));
                }
                self.filled = 0;
                return Ok(());
            }
            match self.s.read(&mut self.rbuf[self.filled..]).await {
                Ok(0) => return Err(format!("closed while waiting for echo {}", self.seq)),
                Ok(n) => self.filled += n,
                Err(e) => return Err(format!("reading echo {}: {e}", self.seq)),
            }
        }
    }

    /// Sends a close frame (1000, normal closure); the caller drops the
    /// connection.
    async fn close(&mut self) {
        let (mut f, at) = client_header(0x8, 2);
        let mask = (self.rng.next() as u32).to_ne_bytes();
        f[at..at + 4].copy_from_slice(&mask);
        f.extend_from_slice(&[0, 0]);
        mask_into(&mut f[at + 4..], &1000u16.to_be_bytes(), mask);
        let _ = self.s.write_all(&f).await;
    }
}

/// utime+stime of `pid` ("self" for this process) in clock ticks.
fn cpu_ticks(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const DONE: u8 = 2;

/// What the load's connection tasks share (one executor: no locks).
struct Shared {
    phase: Cell<u8>,
    errors: Cell<u64>,
    shown: RefCell<Vec<String>>,
    /// Round trips completed, per connection.
    progress: Vec<Cell<u64>>,
    finished: Cell<usize>,
    /// Round-trip times in the window, ns.
    samples: RefCell<Vec<u64>>,
}

impl Shared {
    fn error(&self, e: String) {
        self.errors.set(self.errors.get() + 1);
        let mut shown = self.shown.borrow_mut();
        if shown.len() < SHOWN_ERRORS {
            shown.push(e);
        }
    }
}

async fn conn_task(mut ws: Ws, i: usize, sh: Rc<Shared>) {
    let mut samples = Vec::with_capacity(1 << 14);
    loop {
        let phase = sh.phase.get();
        if phase == DONE {
            break;
        }
        let t0 = Instant::now();
        if let Err(e) = ws.round_trip().await {
            sh.error(format!("connection {i}: {e}"));
            break;
        }
        let ns = t0.elapsed().as_nanos() as u64;
        if phase == MEASURE && sh.phase.get() == MEASURE {
            samples.push(ns);
        }
        sh.progress[i].set(sh.progress[i].get() + 1);
    }
    ws.close().await;
    sh.samples.borrow_mut().extend_from_slice(&samples);
    sh.finished.set(sh.finished.get() + 1);
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i] as f64 / 1e3
}

async fn load(args: Args) -> u8 {
    println!(
        "ws_load: {} conns to {} (Host {}, GET {}), {}-byte messages, warm-up {:?}, measured {:?}",
        args.conns, args.target, args.host, args.path, args.size, args.warmup, args.duration
    );
    let mut conns = Vec::with_capacity(args.conns);
    for i in 0..args.conns {
        match Ws::open(&args, i as u64).await {
            Ok(ws) => conns.push(ws),
            Err(e) => {
                eprintln!("ws_load: connection {i}: {e}");
                println!("result msgs=0 errors=1");
                return 1;
            }
        }
    }
    let sh = Rc::new(Shared {
        phase: Cell::new(WARMUP),
        errors: Cell::new(0),
        shown: RefCell::new(Vec::new()),
        progress: (0..args.conns).map(|_| Cell::new(0)).collect(),
        finished: Cell::new(0),
        samples: RefCell::new(Vec::new()),
    });
    for (i, ws) in conns.into_iter().enumerate() {
        glommio::spawn_local(conn_task(ws, i, Rc::clone(&sh))).detach();
    }
    sleep(args.warmup).await;
    let pids: Vec<(String, String)> = args
        .cpu
        .iter()
        .map(|(l, p)| (l.clone(), p.to_string()))
        .chain([("load".to_string(), "self".to_string())])
        .collect();
    let before: Vec<Option<u64>> = pids.iter().map(|(_, p)| cpu_ticks(p)).collect();
    let at_start: Vec<u64> = sh.progress.iter().map(Cell::get).collect();
    let t0 = Instant::now();
    sh.phase.set(MEASURE);
    sleep(args.duration).await;
    sh.phase.set(DONE);
    let secs = t0.elapsed().as_secs_f64();
    let after: Vec<Option<u64>> = pids.iter().map(|(_, p)| cpu_ticks(p)).collect();
    for (i, (p, s)) in sh.progress.iter().zip(at_start).enumerate() {
        if p.get() == s {
            sh.error(format!(
                "connection {i}: no round trip completed in the window"
            ));
        }
    }
    let deadline = Instant::now() + GRACE;
    while sh.finished.get() < args.conns && Instant::now() < deadline {
        sleep(Duration::from_millis(10)).await;
    }
    let stuck = args.conns - sh.finished.get();
    if stuck > 0 {
        sh.error(format!(
            "{stuck} connection(s) still waiting for an echo {GRACE:?} after the window"
        ));
    }
    let mut samples = std::mem::take(&mut *sh.samples.borrow_mut());
    samples.sort_unstable();
    let n = samples.len();
    let errors = sh.errors.get();
    println!(
        "result msgs={n} secs={secs:.3} rate={:.0} p50_us={:.1} p90_us={:.1} p99_us={:.1} p999_us={:.1} max_us={:.1} errors={errors}",
        n as f64 / secs,
        pct(&samples, 0.50),
        pct(&samples, 0.90),
        pct(&samples, 0.99),
        pct(&samples, 0.999),
        pct(&samples, 1.0),
    );
    let hz = clk_tck();
    let mut per_msg = String::from("cpu_us_per_msg");
    let mut util = String::from("cpu_util");
    for ((label, _), (b, a)) in pids.iter().zip(before.iter().zip(&after)) {
        match (b, a) {
            (Some(b), Some(a)) => {
                let cpu_s = (a - b) as f64 / hz;
                per_msg += &format!(" {label}={:.2}", cpu_s * 1e6 / n.max(1) as f64);
                util += &format!(" {label}={:.2}", cpu_s / secs);
            }
            _ => {
                per_msg += &format!(" {label}=NA");
                util += &format!(" {label}=NA");
            }
        }
    }
    println!("{per_msg}\n{util}");
    for e in sh.shown.borrow().iter() {
        eprintln!("ws_load: error: {e}");
    }
    if errors > SHOWN_ERRORS as u64 {
        eprintln!(
            "ws_load: ... {} more error(s)",
            errors - SHOWN_ERRORS as u64
        );
    }
    if errors > 0 || n == 0 {
        eprintln!("ws_load: FAILED ({errors} error(s), {n} message(s) measured)");
        return 1;
    }
    0
}

async fn idle(args: Args, n: usize) -> u8 {
    let start = Instant::now();
    let opened: Rc<RefCell<Vec<Ws>>> = Rc::new(RefCell::new(Vec::with_capacity(n)));
    let next = Rc::new(Cell::new(0usize));
    let failed: Rc<RefCell<Option<String>>> = Rc::new(RefCell::new(None));
    let mut tasks = Vec::new();
    for _ in 0..OPENERS.min(n) {
        let (opened, next, failed, args) = (
            Rc::clone(&opened),
            Rc::clone(&next),
            Rc::clone(&failed),
            args.clone(),
        );
        tasks.push(glommio::spawn_local(async move {
            while failed.borrow().is_none() {
                let i = next.get();
                if i >= n {
                    break;
                }
                next.set(i + 1);
                let r = match Ws::open(&args, i as u64).await {
                    Ok(mut ws) => ws.round_trip().await.map(|()| ws),
                    Err(e) => Err(e),
                };
                match r {
                    Ok(mut ws) => {
                        // Idle: keep the socket, not the message buffers.
                        ws.rbuf = Vec::new();
                        ws.payload = Vec::new();
                        ws.frame = Vec::new();
                        opened.borrow_mut().push(ws);
                    }
                    Err(e) => {
                        failed
                            .borrow_mut()
                            .get_or_insert(format!("connection {i}: {e}"));
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await;
    }
    if let Some(e) = failed.borrow().as_ref() {
        eprintln!(
            "ws_load: idle: {e} ({} of {n} were open)",
            opened.borrow().len()
        );
        return 1;
    }
    println!(
        "idle {n} open ({:.0} ms)",
        start.elapsed().as_secs_f64() * 1e3
    );
    let _ = std::io::stdout().flush();
    sleep(args.hold).await;
    let mut conns = std::mem::take(&mut *opened.borrow_mut());
    for ws in &mut conns {
        ws.close().await;
    }
    drop(conns);
    println!("idle closed");
    0
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ws_load: {e}");
            return ExitCode::from(2);
        }
    };
    raise_nofile();
    let result = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("ws_load")
        .io_memory(1 << 20)
        .spawn(move || async move {
            match args.idle {
                Some(n) => idle(args, n).await,
                None => load(args).await,
            }
        })
        .and_then(|h| h.join());
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("ws_load: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_key_is_the_rfc_example() {
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn frames_round_trip_through_mask_and_parse() {
        for len in [0usize, 5, 125, 126, 300, 65535, 65536] {
            let (h, at) = client_header(0x2, len);
            assert_eq!(h.len(), at + 4);
            let src: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut dst = vec![0; len];
            mask_into(&mut dst, &src, [9, 8, 7, 6]);
            let back: Vec<u8> = dst
                .iter()
                .enumerate()
                .map(|(i, b)| b ^ [9, 8, 7, 6][i & 3])
                .collect();
            assert_eq!(back, src);
            // The server's frame: the same length encoding, unmasked.
            let mut f = h[..at].to_vec();
            f[1] &= 0x7f;
            f.extend_from_slice(&src);
            assert_eq!(server_frame(&f[..f.len() - 1]).unwrap(), None);
            assert_eq!(
                server_frame(&f).unwrap(),
                Some((0x82, at..at + len, f.len()))
            );
        }
    }
}
