//! Clients that ask for large responses and never read them: what they cost
//! the gateway (its resident memory, measured on a `gateway` child process
//! so that the backend and clients in this process do not count), whether
//! a victim on its own connection is still served, and whether their
//! streams end at `stream_idle_timeout`.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use demo_backend::BackendOptions;
use support::*;

const GATEWAY: &str = env!("CARGO_BIN_EXE_gateway");
const TEMPLATE: &str = include_str!("data/gateway.yaml");

const HEADERS: u8 = 0x1;
const PING: u8 = 0x6;
const SETTINGS: u8 = 0x4;
const WINDOW_UPDATE: u8 = 0x8;
const END_STREAM_HEADERS: u8 = 0x5;
const INITIAL_WINDOW_SIZE: u16 = 0x4;
const MAX_WINDOW: u32 = (1 << 31) - 1;

/// Streams per attacking connection: the listener's default limit.
const STREAMS: u32 = 100;
/// What each stream asks for.
const RESPONSE_SIZE: &str = "1000000";

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// `GET /big` to authority `x` asking the demo backend for
/// [`RESPONSE_SIZE`] bytes, as an HPACK block of static-table entries and
/// literals without indexing.
fn big_get_block() -> Vec<u8> {
    let mut b = vec![0x82, 0x86, 0x04, 0x04];
    b.extend_from_slice(b"/big");
    b.extend_from_slice(&[0x01, 0x01, b'x']);
    let (name, value) = (b"x-response-size", RESPONSE_SIZE.as_bytes());
    b.push(0x00);
    b.push(name.len() as u8);
    b.extend_from_slice(name);
    b.push(value.len() as u8);
    b.extend_from_slice(value);
    b
}

/// An attacking connection: [`STREAMS`] large GETs it never reads the
/// answers of. `open_windows`: it announces the largest windows, so only
/// its socket holds the gateway back; otherwise its stream windows are 0.
fn never_reading_client(addr: SocketAddr, open_windows: bool) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    let window = if open_windows { MAX_WINDOW } else { 0 };
    let mut settings = INITIAL_WINDOW_SIZE.to_be_bytes().to_vec();
    settings.extend_from_slice(&window.to_be_bytes());
    frame(&mut out, SETTINGS, 0, 0, &settings);
    if open_windows {
        let inc = MAX_WINDOW - 65_535;
        frame(&mut out, WINDOW_UPDATE, 0, 0, &inc.to_be_bytes());
    }
    let block = big_get_block();
    for i in 0..STREAMS {
        frame(&mut out, HEADERS, END_STREAM_HEADERS, 1 + 2 * i, &block);
    }
    (&s).write_all(&out).expect("send requests");
    s
}

/// The gateway's resident set, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kb * 1024
}

/// A `gateway` child on `config`: killed when dropped.
struct Gateway {
    child: std::process::Child,
    addr: SocketAddr,
    admin: SocketAddr,
    _dir: PathBuf,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_gateway(backend: SocketAddr, extra_hcm: &str) -> Gateway {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "unread-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let config = TEMPLATE
        .replace("@BACKEND_PORT@", &backend.port().to_string())
        .replace("@REWRITE@", "/")
        .replace("@TIMEOUT@", "0s")
        .replace(
            "          drain_timeout: 1s\n",
            &format!("          drain_timeout: 1s\n{extra_hcm}"),
        );
    let path = dir.join("gateway.yaml");
    std::fs::write(&path, config).unwrap();
    let mut child = Command::new(GATEWAY)
        .args(["--config", path.to_str().unwrap(), "--shards", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn gateway");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut addr, mut admin) = (None, None);
    while addr.is_none() || admin.is_none() {
        let line = lines.next().expect("gateway banner").unwrap();
        if let Some(rest) = line.strip_prefix("listener ingress on ") {
            addr = rest.trim().parse().ok();
        }
        if let Some(rest) = line.strip_prefix("admin on http://") {
            admin = rest.trim().trim_end_matches('/').parse().ok();
        }
    }
    // Keep draining stdout so the child never blocks on it.
    std::thread::spawn(move || for _ in lines {});
    Gateway {
        child,
        addr: addr.unwrap(),
        admin: admin.unwrap(),
        _dir: dir,
    }
}

/// `n` GETs of `size` bytes on one connection; the bodies that came whole.
fn victim_gets(addr: SocketAddr, n: usize, size: usize) -> usize {
    client(move || async move {
        let c = connect(addr).await;
        let mut whole = 0;
        for _ in 0..n {
            let r = get(&c, "/victim", &[("x-response-size", &size.to_string())]).await;
            match &r {
                Ok(r) if r.status == 200 && r.body.len() == size => whole += 1,
                Ok(r) => eprintln!("victim: {} with {} bytes", r.status, r.body.len()),
                Err(e) => eprintln!("victim: {e}"),
            }
        }
        whole
    })
}

#[test]
fn four_hundred_unread_megabyte_responses_cost_little_memory_and_no_victim() {
    let b = backend_with(BackendOptions::new("b"));
    let gw = start_gateway(b.addr(), "");
    // Warm up: the first connections and requests allocate what any load
    // would (pools, buffers); the budget is what the attack adds.
    assert_eq!(victim_gets(gw.addr, 20, 100_000), 20);
    let before = rss(gw.child.id());

    // Two connections with shut windows, two with open windows whose
    // sockets are never read: 400 streams of 1 MB.
    let mode = std::env::var("UR_MODE").unwrap_or_default();
    let attackers: Vec<TcpStream> = (0..4)
        .map(|i| {
            never_reading_client(
                gw.addr,
                match mode.as_str() {
                    "open" => true,
                    "shut" => false,
                    _ => i % 2 == 1,
                },
            )
        })
        .collect();
    wait_until(
        Duration::from_secs(10),
        "400 requests reach the backend",
        || b.requests() >= 20 + 4 * u64::from(STREAMS),
    );
    // Let the backend send all the windows allow.
    std::thread::sleep(Duration::from_secs(2));
    let during = rss(gw.child.id());
    let added = during.saturating_sub(before);
    eprintln!(
        "gateway RSS: {} KiB before, {} KiB with 400 unread responses (+{} KiB)",
        before / 1024,
        during / 1024,
        added / 1024
    );

    // A victim on its own connection is served meanwhile.
    let t = Instant::now();
    assert_eq!(victim_gets(gw.addr, 20, 200_000), 20);
    eprintln!("victim: 20 × 200 kB in {:?}", t.elapsed());
    assert!(
        added < 20 << 20,
        "400 unread 1 MB responses added {} KiB of RSS",
        added / 1024
    );
    // The two connections whose sockets stalled hit the output cap.
    let paused = metric(
        gw.admin,
        "gateway_downstream_flow_control_paused_reading_total",
    );
    assert!(paused >= 2.0, "paused {paused}");
    drop(attackers);
}

#[test]
fn streams_stalled_behind_an_unread_socket_end_at_the_stream_idle_timeout() {
    let b = backend_with(BackendOptions::new("b"));
    let gw = start_gateway(b.addr(), "          stream_idle_timeout: 1s\n");
    let attackers: Vec<TcpStream> = (0..2)
        .map(|i| never_reading_client(gw.addr, i % 2 == 1))
        .collect();
    wait_until(
        Duration::from_secs(10),
        "the requests reach the backend",
        || b.requests() >= 2 * u64::from(STREAMS),
    );
    // Every stream stalls: with a shut window, or behind the output cap.
    let waited = wait_until(Duration::from_secs(10), "the stalled streams end", || {
        metric(gw.admin, "gateway_downstream_rq_active") == 0.0
    });
    assert!(
        waited >= Duration::from_millis(500),
        "ended too soon: {waited:?}"
    );
    let idled = metric(gw.admin, "gateway_downstream_rq_idle_timeout");
    assert_eq!(idled, f64::from(2 * STREAMS));
    // The gateway still serves.
    assert_eq!(victim_gets(gw.addr, 5, 100_000), 5);
    drop(attackers);
}

#[test]
fn a_client_that_sends_pings_and_never_reads_the_acks_is_held_back_by_its_socket() {
    let b = backend_with(BackendOptions::new("b"));
    let gw = start_gateway(b.addr(), "");
    assert_eq!(victim_gets(gw.addr, 5, 100_000), 5);
    let before = rss(gw.child.id());
    // Up to 40 MB of PINGs, each answered by an ACK of the same size that
    // is never read. Read on, the gateway would hold them all.
    let s = TcpStream::connect(gw.addr).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    frame(&mut out, SETTINGS, 0, 0, &[]);
    (&s).write_all(&out).unwrap();
    let mut batch = Vec::new();
    for i in 0..1000u64 {
        frame(&mut batch, PING, 0, 0, &i.to_be_bytes());
    }
    let mut sent = 0usize;
    while sent < 40 << 20 {
        if (&s).write_all(&batch).is_err() {
            break; // the gateway stopped reading us
        }
        sent += batch.len();
    }
    std::thread::sleep(Duration::from_millis(500));
    let added = rss(gw.child.id()).saturating_sub(before);
    eprintln!(
        "sent {} KiB of PINGs; gateway RSS +{} KiB",
        sent / 1024,
        added / 1024
    );
    assert!(
        sent < 40 << 20,
        "the gateway read 40 MB it could not answer"
    );
    assert!(added < 8 << 20, "PING ACKs held: +{} KiB", added / 1024);
    assert_eq!(victim_gets(gw.addr, 5, 100_000), 5);
    drop(s);
}
