//! The HTTP connection manager's limits end to end, each with a victim on
//! its own connection that keeps being served while the offender is cut
//! off or refused: `max_headers_count`, `headers_with_underscores_action`,
//! the HTTP/2 flood limits (`max_outbound_control_frames`,
//! `max_inbound_priority_frames_per_stream`,
//! `max_consecutive_inbound_frames_with_empty_payload`,
//! `max_inbound_window_update_frames_per_data_frame_sent`), the
//! per-listener connection limit of `layered_runtime`, and the connection
//! lifetime limits (`max_connection_duration`,
//! `max_requests_per_connection`: a drain, then a fresh connection is
//! served). The backend is the `h2` crate's server with its default
//! settings.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use engine::{HeadersWithUnderscoresAction, HttpConnectionManager, Runtime};
use http::{Response, StatusCode};
use support::*;

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const PRIORITY: u8 = 0x2;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const END_HEADERS: u8 = 0x4;
const ENHANCE_YOUR_CALM: u32 = 0xb;

/// An h2c backend (the `h2` crate, default settings) answering 200 with
/// the request's header names, comma-joined, in `x-names`; counts the
/// requests it saw.
fn h2_backend() -> (SocketAddr, Arc<AtomicU64>) {
    let seen = Arc::new(AtomicU64::new(0));
    let count = Arc::clone(&seen);
    let addr = support::h2c_server::h2c_server(move |_, mut conn| {
        let count = Arc::clone(&count);
        async move {
            while let Some(Ok((req, mut respond))) = conn.accept().await {
                count.fetch_add(1, Ordering::Relaxed);
                let names: Vec<&str> = req.headers().keys().map(|k| k.as_str()).collect();
                let resp = Response::builder()
                    .header("x-names", names.join(","))
                    .body(())
                    .unwrap();
                let _ = respond.send_response(resp, true);
            }
        }
    });
    (addr, seen)
}

struct Gw {
    handle: Option<gateway::GatewayHandle>,
    addr: SocketAddr,
    admin: SocketAddr,
}

impl Drop for Gw {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown();
        }
    }
}

/// A gateway (one data shard) in front of `backend`, its connection
/// manager edited by `edit`, with `runtime`.
fn gateway(
    backend: SocketAddr,
    edit: impl FnOnce(&mut HttpConnectionManager),
    runtime: Runtime,
) -> Gw {
    let mut l = (*listener(vec![prefix_route("/", "c", None)])).clone();
    edit(&mut l.filter_chains[0].http);
    let mut b = bootstrap(Arc::new(l), vec![cluster("c", &[backend])]);
    b.runtime = runtime;
    let handle = start(b, 1);
    let addr = handle.listener("ingress").expect("listener bound");
    let admin = handle.admin_addr.expect("admin");
    Gw {
        handle: Some(handle),
        addr,
        admin,
    }
}

/// GETs on one connection of their own: the statuses (0 for an error).
fn victim(addr: SocketAddr, n: usize) -> Vec<u16> {
    client(move || async move {
        let c = connect(addr).await;
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(get(&c, "/", &[]).await.map_or(0, |r| r.status.as_u16()));
        }
        out
    })
}

/// One GET with `headers` on a connection of its own.
fn get_with(addr: SocketAddr, headers: Vec<(String, String)>) -> Result<Reply, h2::Error> {
    client(move || async move {
        let c = connect(addr).await;
        let h: Vec<(&str, &str)> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        get(&c, "/", &h).await
    })
}

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

fn preface() -> Vec<u8> {
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    frame(&mut out, SETTINGS, 0, 0, &[]);
    out
}

/// A POST to authority `x` as an HPACK block of static-table entries.
fn post_block() -> Vec<u8> {
    vec![0x83, 0x86, 0x84, 0x01, 0x01, b'x']
}

/// Sends `frames` after the preface on a connection of its own and reads
/// until the gateway closes it: the GOAWAY error code it sent, if any.
/// `None` also when the connection stays open for 1 s.
fn offend(addr: SocketAddr, frames: &[u8]) -> Option<u32> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut out = preface();
    out.extend_from_slice(frames);
    s.write_all(&out).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => return None,
        }
    }
    // Find the GOAWAY among the frames.
    let mut at = 0;
    while at + 9 <= got.len() {
        let len = u32::from_be_bytes([0, got[at], got[at + 1], got[at + 2]]) as usize;
        if got[at + 3] == GOAWAY && at + 9 + 8 <= got.len() {
            let p = &got[at + 9..];
            return Some(u32::from_be_bytes([p[4], p[5], p[6], p[7]]));
        }
        at += 9 + len;
    }
    None
}

/// What a stream reset by the gateway looks like to the `h2` client.
fn reset_reason(r: Result<Reply, h2::Error>) -> Option<h2::Reason> {
    r.err().and_then(|e| e.reason())
}

#[test]
fn requests_over_max_headers_count_are_reset_and_counted() {
    let (backend, seen) = h2_backend();
    let gw = gateway(backend, |h| h.max_headers_count = 10, Runtime::default());
    // 4 pseudo-header fields + 6: at the limit.
    let fields = |n: usize| -> Vec<(String, String)> {
        (0..n).map(|i| (format!("x-h{i}"), "v".into())).collect()
    };
    assert_eq!(get_with(gw.addr, fields(6)).unwrap().status, StatusCode::OK);
    // One over: reset, as Envoy does for HTTP/2 (INTERNAL_ERROR).
    assert_eq!(
        reset_reason(get_with(gw.addr, fields(7))),
        Some(h2::Reason::INTERNAL_ERROR)
    );
    assert_eq!(victim(gw.addr, 3), [200, 200, 200]);
    assert_eq!(
        seen.load(Ordering::Relaxed),
        4,
        "the reset one never went upstream"
    );
    assert_eq!(
        metric(gw.admin, "gateway_downstream_rq_header_overflow"),
        1.0
    );
}

#[test]
fn underscores_rejected_reset_the_request_and_are_counted() {
    let (backend, seen) = h2_backend();
    let gw = gateway(
        backend,
        |h| h.headers_with_underscores_action = HeadersWithUnderscoresAction::RejectRequest,
        Runtime::default(),
    );
    assert_eq!(
        reset_reason(get_with(gw.addr, vec![("x_user".into(), "1".into())])),
        Some(h2::Reason::INTERNAL_ERROR)
    );
    assert_eq!(victim(gw.addr, 2), [200, 200]);
    assert_eq!(seen.load(Ordering::Relaxed), 2);
    assert_eq!(
        metric(
            gw.admin,
            "gateway_downstream_rq_rejected_with_underscores_in_headers"
        ),
        1.0
    );
}

#[test]
fn underscores_dropped_never_reach_the_backend_and_are_counted() {
    let (backend, _) = h2_backend();
    let gw = gateway(
        backend,
        |h| h.headers_with_underscores_action = HeadersWithUnderscoresAction::DropHeader,
        Runtime::default(),
    );
    let r = get_with(
        gw.addr,
        vec![("x_user".into(), "1".into()), ("x-keep".into(), "2".into())],
    )
    .unwrap();
    assert_eq!(r.status, StatusCode::OK);
    let names = r.header("x-names").unwrap().to_string();
    assert!(names.split(',').any(|n| n == "x-keep"), "{names}");
    assert!(!names.contains("x_user"), "{names}");
    assert_eq!(
        metric(
            gw.admin,
            "gateway_downstream_dropped_headers_with_underscores"
        ),
        1.0
    );
}

#[test]
fn a_priority_flood_ends_its_connection_only() {
    let (backend, _) = h2_backend();
    let gw = gateway(backend, |_| {}, Runtime::default());
    // Envoy's default: 100 × (1 + 0 streams) PRIORITY frames; one more.
    let mut frames = Vec::new();
    for i in 0..101u32 {
        frame(&mut frames, PRIORITY, 0, 1 + 2 * i, &[0, 0, 0, 0, 15]);
    }
    assert_eq!(victim(gw.addr, 1), [200]);
    assert_eq!(offend(gw.addr, &frames), Some(ENHANCE_YOUR_CALM));
    assert_eq!(victim(gw.addr, 2), [200, 200]);
    assert_eq!(
        metric(
            gw.admin,
            "gateway_downstream_cx_inbound_priority_frames_flood"
        ),
        1.0
    );
    // 100 is within the limit.
    let mut frames = Vec::new();
    for i in 0..100u32 {
        frame(&mut frames, PRIORITY, 0, 1 + 2 * i, &[0, 0, 0, 0, 15]);
    }
    assert_eq!(offend(gw.addr, &frames), None);
}

#[test]
fn consecutive_empty_frames_end_their_connection_only() {
    let (backend, _) = h2_backend();
    let gw = gateway(backend, |_| {}, Runtime::default());
    // A request body of two empty DATA frames in a row (Envoy's default
    // allows one).
    let mut frames = Vec::new();
    frame(&mut frames, HEADERS, END_HEADERS, 1, &post_block());
    frame(&mut frames, DATA, 0, 1, &[]);
    frame(&mut frames, DATA, 0, 1, &[]);
    assert_eq!(offend(gw.addr, &frames), Some(ENHANCE_YOUR_CALM));
    assert_eq!(victim(gw.addr, 2), [200, 200]);
    assert_eq!(
        metric(gw.admin, "gateway_downstream_cx_inbound_empty_frames_flood"),
        1.0
    );
}

#[test]
fn a_window_update_flood_ends_its_connection_only() {
    let (backend, _) = h2_backend();
    let gw = gateway(backend, |_| {}, Runtime::default());
    // Nothing sent to it, no stream: 5 WINDOW_UPDATE frames are allowed.
    let mut frames = Vec::new();
    for _ in 0..6 {
        frame(&mut frames, WINDOW_UPDATE, 0, 0, &1u32.to_be_bytes());
    }
    assert_eq!(offend(gw.addr, &frames), Some(ENHANCE_YOUR_CALM));
    assert_eq!(victim(gw.addr, 2), [200, 200]);
    assert_eq!(
        metric(
            gw.admin,
            "gateway_downstream_cx_inbound_window_update_frames_flood"
        ),
        1.0
    );
}

#[test]
fn a_client_that_never_reads_its_ping_acks_is_closed_as_an_outbound_flood() {
    let (backend, _) = h2_backend();
    let gw = gateway(backend, |_| {}, Runtime::default());
    let s = TcpStream::connect(gw.addr).unwrap();
    s.set_write_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    (&s).write_all(&preface()).unwrap();
    let mut batch = Vec::new();
    for i in 0..1000u64 {
        frame(&mut batch, PING, 0, 0, &i.to_be_bytes());
    }
    // PINGs until the gateway closes the connection: their ACKs fill the
    // kernel's buffers, then pile up unwritten in the gateway past
    // Envoy's default of 1000 control frames.
    let start = Instant::now();
    let mut closed = false;
    while start.elapsed() < Duration::from_secs(4) {
        match (&s).write_all(&batch) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => {
                closed = true;
                break;
            }
        }
        if metric(gw.admin, "gateway_downstream_cx_outbound_control_flood") > 0.0 {
            closed = true;
            break;
        }
    }
    assert!(closed, "the gateway kept the connection");
    assert_eq!(
        metric(gw.admin, "gateway_downstream_cx_outbound_control_flood"),
        1.0
    );
    assert_eq!(
        metric(gw.admin, "gateway_downstream_cx_protocol_error"),
        0.0
    );
    assert_eq!(victim(gw.addr, 2), [200, 200]);
    drop(s);
}

#[test]
fn the_listener_connection_limit_holds_new_connections_until_one_closes() {
    let (backend, _) = h2_backend();
    let mut runtime = Runtime::default();
    runtime
        .listener_connection_limits
        .insert("ingress".into(), 2);
    let gw = gateway(backend, |_| {}, runtime);
    // The limit and the HCM limits in force show in /config_dump.
    let (_, dump) = admin_get(gw.admin, "/config_dump");
    let dump: serde_json::Value = serde_json::from_str(&dump).unwrap();
    let layer = &dump["layered_runtime"]["layers"][0]["static_layer"];
    assert_eq!(
        layer["envoy.resource_limits.listener.ingress.connection_limit"],
        2
    );
    let l = &dump["static_resources"]["listeners"][0];
    assert_eq!(l["per_connection_buffer_limit_bytes"], 1 << 20);
    let hcm = &l["filter_chains"][0]["http_connection_manager"];
    assert_eq!(hcm["max_headers_count"], 100);
    assert_eq!(hcm["headers_with_underscores_action"], "ALLOW");
    assert_eq!(hcm["http2_flood_limits"]["max_outbound_frames"], 10_000);
    // Two idle connections take the listener's two slots.
    let first = TcpStream::connect(gw.addr).unwrap();
    let second = TcpStream::connect(gw.addr).unwrap();
    wait_until(Duration::from_secs(2), "two connections open", || {
        metric(gw.admin, "gateway_downstream_cx_active") == 2.0
    });
    // A third connection's request waits...
    let addr = gw.addr;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(victim(addr, 1));
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(rx.try_recv().is_err(), "served past the connection limit");
    assert_eq!(metric(gw.admin, "gateway_downstream_cx_active"), 2.0);
    assert!(metric(gw.admin, "gateway_downstream_cx_overflow") >= 1.0);
    // ...until one of the first two closes.
    drop(first);
    let got = rx
        .recv_timeout(Duration::from_secs(3))
        .expect("served once a slot freed");
    assert_eq!(got, [200]);
    drop(second);
}

#[test]
fn a_connection_drains_after_max_requests_per_connection() {
    let (backend, _) = h2_backend();
    let gw = gateway(
        backend,
        |h| h.max_requests_per_connection = Some(3),
        Runtime::default(),
    );
    let addr = gw.addr;
    let got = client(move || async move {
        let c = connect(addr).await;
        let mut out = Vec::new();
        for _ in 0..4 {
            out.push(get(&c, "/", &[]).await.map(|r| r.status.as_u16()).ok());
        }
        out
    });
    // Three served; the GOAWAY after the third leaves the fourth
    // unprocessed (above its last stream id), so the client must retry it
    // on a new connection.
    assert_eq!(got[..3], [Some(200); 3]);
    assert_eq!(got[3], None, "the fourth went past the GOAWAY");
    assert_eq!(
        metric(gw.admin, "gateway_downstream_cx_max_requests_reached"),
        1.0
    );
    // A new connection is served as usual.
    assert_eq!(victim(addr, 2), [200, 200]);
}

#[test]
fn a_connection_drains_at_max_connection_duration() {
    let (backend, _) = h2_backend();
    let gw = gateway(
        backend,
        |h| h.max_connection_duration = Some(Duration::from_millis(300)),
        Runtime::default(),
    );
    let addr = gw.addr;
    let (first, later) = client(move || async move {
        let c = connect(addr).await;
        let first = get(&c, "/", &[]).await.map(|r| r.status.as_u16()).ok();
        // Idle past the lifetime: the gateway drains and closes it.
        glommio::timer::sleep(Duration::from_millis(800)).await;
        let later = get(&c, "/", &[]).await.map(|r| r.status.as_u16()).ok();
        (first, later)
    });
    assert_eq!(first, Some(200));
    assert_eq!(later, None, "served past max_connection_duration");
    assert_eq!(
        metric(gw.admin, "gateway_downstream_cx_max_duration_reached"),
        1.0
    );
    assert_eq!(metric(gw.admin, "gateway_downstream_cx_idle_timeout"), 0.0);
    assert_eq!(metric(gw.admin, "gateway_downstream_cx_active"), 0.0);
}
