//! The overload manager (`overload_manager` in the bootstrap): the global downstream connection limit closes connections past it as they come, `stop_accepting_requests` answers 503 "envoy overloaded", `disable_http_keepalive` ends connections after their response, `stop_accepting_connections` leaves new ones waiting until the pressure passes, `reduce_timeouts` shortens idle timeouts, `reset_high_memory_stream` resets the streams that buffer the most; each counted under Envoy's names, and the gauges say which actions act.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use support::h1_backend::{H1Answer, H1Backend};
use support::*;

const FIXED_HEAP: &str =
    "type.googleapis.com/envoy.extensions.resource_monitors.fixed_heap.v3.FixedHeapConfig";
const CONNECTIONS: &str = "type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig";

/// A bootstrap with `overload` (YAML at the bootstrap's top level) and an
/// idle timeout of `idle`.
fn start_with(overload: &str, idle: &str, backend: SocketAddr) -> gateway::GatewayHandle {
    let hcm = format!("          common_http_protocol_options: {{ idle_timeout: {idle} }}\n");
    start_hcm(overload, &hcm, backend)
}

/// A bootstrap with `overload` and the connection manager's fields `hcm`
/// (YAML lines at its field indentation).
fn start_hcm(overload: &str, hcm: &str, backend: SocketAddr) -> gateway::GatewayHandle {
    let yaml = yaml::filters_yaml(
        hcm,
        "",
        &yaml::one_route("c", ""),
        &yaml::h1_cluster("c", backend),
    );
    let yaml = format!("{overload}{yaml}");
    let b = xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml)
        .unwrap_or_else(|e| panic!("bootstrap refused: {e}\n{yaml}"));
    start(b, 1)
}

fn monitors(max_connections: u64, max_heap: u64) -> String {
    format!(
        "overload_manager:\n  refresh_interval: 0.05s\n  resource_monitors:\n  - name: envoy.resource_monitors.global_downstream_max_connections\n    typed_config: {{ \"@type\": {CONNECTIONS}, max_active_downstream_connections: {max_connections} }}\n  - name: envoy.resource_monitors.fixed_heap\n    typed_config: {{ \"@type\": {FIXED_HEAP}, max_heap_size_bytes: {max_heap} }}\n"
    )
}

fn action(name: &str, monitor: &str, trigger: &str) -> String {
    format!(
        "  - name: envoy.overload_actions.{name}\n    triggers: [ {{ name: envoy.resource_monitors.{monitor}, {trigger} }} ]\n"
    )
}

/// A GET on `s`: the status line and the `connection` field, or `None`
/// when the connection closed without an answer.
fn get(s: &mut TcpStream) -> Option<(String, Option<String>)> {
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let head = &text[..end];
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if text.len() >= end + 4 + len {
                let status = head.lines().next().unwrap_or("").to_owned();
                let connection = head
                    .lines()
                    .find_map(|l| l.strip_prefix("connection: "))
                    .map(str::to_owned);
                return Some((status, connection));
            }
        }
    }
}

fn closed_unanswered(addr: SocketAddr) -> bool {
    let mut s = TcpStream::connect(addr).expect("connect");
    get(&mut s).is_none()
}

#[test]
fn the_global_connection_limit_and_stop_accepting_connections() {
    let backend = H1Backend::start(|_| H1Answer::ok("ok"));
    // A petabyte heap: no heap pressure. Three connections at most;
    // `stop_accepting_connections` from two of three.
    let overload = format!(
        "{}  actions:\n{}",
        monitors(3, 1 << 50),
        action(
            "stop_accepting_connections",
            "global_downstream_max_connections",
            "threshold: { value: 0.66 }"
        )
    );
    let gw = start_with(&overload, "60s", backend.addr());
    let addr = gw.listener("ingress").expect("listener");
    let mut first = TcpStream::connect(addr).expect("connect");
    assert_eq!(
        get(&mut first).map(|r| r.0).as_deref(),
        Some("HTTP/1.1 200 OK")
    );
    let mut second = TcpStream::connect(addr).expect("connect");
    assert!(get(&mut second).is_some());
    // Two of three: the sampler stops the accepts (within its 50 ms
    // refresh); a new connection waits in the backlog, unanswered.
    let admin = gw.admin_addr.expect("admin");
    wait_until(
        Duration::from_secs(5),
        "stop_accepting_connections acts",
        || {
            envoy_metric(
                admin,
                "envoy_overload_envoy_overload_actions_stop_accepting_connections_active{}",
            ) == 1.0
        },
    );
    let mut waiting = TcpStream::connect(addr).expect("queued in the backlog");
    waiting
        .set_read_timeout(Some(Duration::from_millis(300)))
        .ok();
    waiting
        .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    let mut byte = [0u8; 1];
    assert!(
        waiting.read(&mut byte).is_err(),
        "not accepted while overloaded"
    );
    // One closes: the pressure passes, the waiting one is served.
    drop(first);
    waiting.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let mut rest = Vec::new();
    let _ = waiting.read(&mut byte);
    rest.push(byte[0]);
    assert_eq!(byte[0], b'H', "answered once accepted");
    drop(waiting);
    // The hard limit: past three open, a new connection is closed as it
    // is accepted (whatever the actions say).
    let mut third = TcpStream::connect(addr).expect("connect");
    let _ = get(&mut third);
    wait_until(Duration::from_secs(5), "three open", || {
        envoy_metric(admin, "envoy_server_total_connections{}") >= 2.0
    });
    let opened: Vec<TcpStream> = (0..3)
        .filter_map(|_| TcpStream::connect(addr).ok())
        .collect();
    let refused = opened.len();
    drop(opened);
    assert!(refused > 0);
    let label = format!(
        "listener.127.0.0.1_{}.downstream_global_cx_overflow",
        addr.port()
    );
    wait_until(Duration::from_secs(5), "overflow counted", || {
        envoy_counter(&gw, &label) >= 1
    });
    drop((second, third));
    gw.shutdown();
}

#[test]
fn stop_accepting_requests_and_disable_keepalive_follow_the_heap() {
    let backend = H1Backend::start(|_| H1Answer::ok("ok"));
    // A one-byte heap: always saturated; no connection limit to speak of.
    let overload = format!(
        "{}  actions:\n{}{}",
        monitors(1_000_000, 1),
        action(
            "stop_accepting_requests",
            "fixed_heap",
            "threshold: { value: 0.95 }"
        ),
        action("shrink_heap", "fixed_heap", "threshold: { value: 0.9 }"),
    );
    let gw = start_with(&overload, "60s", backend.addr());
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    wait_until(
        Duration::from_secs(5),
        "stop_accepting_requests acts",
        || {
            envoy_metric(
                admin,
                "envoy_overload_envoy_overload_actions_stop_accepting_requests_active{}",
            ) == 1.0
        },
    );
    let mut s = TcpStream::connect(addr).expect("connect");
    let (status, _) = get(&mut s).expect("answered");
    assert_eq!(status, "HTTP/1.1 503 Service Unavailable");
    assert!(backend.requests().is_empty());
    assert_eq!(
        envoy_counter(&gw, "http.ingress.downstream_rq_overload_close"),
        1
    );
    assert_eq!(
        envoy_metric(
            admin,
            "envoy_overload_envoy_resource_monitors_fixed_heap_pressure{}"
        ),
        100.0
    );
    gw.shutdown();

    // Keep-alive off at a scaled level of 1: every response closes.
    let overload = format!(
        "{}  actions:\n{}",
        monitors(1_000_000, 1),
        action(
            "disable_http_keepalive",
            "fixed_heap",
            "scaled: { scaling_threshold: 0.5, saturation_threshold: 0.9 }"
        ),
    );
    let gw = start_with(&overload, "60s", backend.addr());
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    wait_until(
        Duration::from_secs(5),
        "disable_http_keepalive acts",
        || {
            envoy_metric(
                admin,
                "envoy_overload_envoy_overload_actions_disable_http_keepalive_scale_percent{}",
            ) == 100.0
        },
    );
    let mut s = TcpStream::connect(addr).expect("connect");
    let (status, connection) = get(&mut s).expect("answered");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(connection.as_deref(), Some("close"));
    assert!(
        get(&mut s).is_none(),
        "the connection ended after its response"
    );
    assert_eq!(
        envoy_counter(&gw, "http.ingress.downstream_cx_overload_disable_keepalive"),
        1
    );
    gw.shutdown();
}

#[test]
fn reduce_timeouts_shortens_the_idle_timeouts_and_reject_closes() {
    let backend = H1Backend::start(|_| H1Answer::ok("ok"));
    let reduce = "  - name: envoy.overload_actions.reduce_timeouts\n    triggers: [ { name: envoy.resource_monitors.fixed_heap, scaled: { scaling_threshold: 0.5, saturation_threshold: 0.9 } } ]\n    typed_config:\n      \"@type\": type.googleapis.com/envoy.config.overload.v3.ScaleTimersOverloadActionConfig\n      timer_scale_factors: [ { timer: HTTP_DOWNSTREAM_CONNECTION_IDLE, min_timeout: 0.2s } ]\n";
    let overload = format!("{}  actions:\n{reduce}", monitors(1_000_000, 1));
    let gw = start_with(&overload, "30s", backend.addr());
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    wait_until(Duration::from_secs(5), "reduce_timeouts acts", || {
        envoy_metric(
            admin,
            "envoy_overload_envoy_overload_actions_reduce_timeouts_active{}",
        ) == 1.0
    });
    let mut s = TcpStream::connect(addr).expect("connect");
    assert!(get(&mut s).is_some());
    let began = Instant::now();
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut byte = [0u8; 1];
    let n = s.read(&mut byte).unwrap_or(0);
    assert_eq!(n, 0, "closed as idle");
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "idle 0.2 s instead of 30 s: {:?}",
        began.elapsed()
    );
    gw.shutdown();

    // HTTP_DOWNSTREAM_STREAM_IDLE: a request whose backend says nothing
    // for 30 s is answered 408 after the 0.2 s floor instead.
    let slow = H1Backend::start(|_| {
        std::thread::sleep(Duration::from_secs(6));
        H1Answer::ok("late")
    });
    let reduce = reduce.replace(
        "HTTP_DOWNSTREAM_CONNECTION_IDLE",
        "HTTP_DOWNSTREAM_STREAM_IDLE",
    );
    let overload = format!("{}  actions:\n{reduce}", monitors(1_000_000, 1));
    let gw = start_hcm(
        &overload,
        "          stream_idle_timeout: 30s\n",
        slow.addr(),
    );
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    wait_until(Duration::from_secs(5), "reduce_timeouts acts", || {
        envoy_metric(
            admin,
            "envoy_overload_envoy_overload_actions_reduce_timeouts_active{}",
        ) == 1.0
    });
    let mut s = TcpStream::connect(addr).expect("connect");
    let began = Instant::now();
    let (status, _) = get(&mut s).expect("answered");
    assert_eq!(status, "HTTP/1.1 408 Request Timeout");
    assert!(
        began.elapsed() < Duration::from_secs(4),
        "stream idle 0.2 s instead of 30 s: {:?}",
        began.elapsed()
    );
    assert_eq!(metric(admin, "gateway_downstream_rq_idle_timeout"), 1.0);
    gw.shutdown();

    let overload = format!(
        "{}  actions:\n{}",
        monitors(1_000_000, 1),
        action(
            "reject_incoming_connections",
            "fixed_heap",
            "threshold: { value: 0.5 }"
        ),
    );
    let gw = start_with(&overload, "30s", backend.addr());
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    wait_until(Duration::from_secs(5), "reject acts", || {
        envoy_metric(
            admin,
            "envoy_overload_envoy_overload_actions_reject_incoming_connections_active{}",
        ) == 1.0
    });
    assert!(closed_unanswered(addr));
    let label = format!(
        "listener.127.0.0.1_{}.downstream_cx_overload_reject",
        addr.port()
    );
    assert!(envoy_counter(&gw, &label) >= 1);
    gw.shutdown();
}

#[test]
fn what_the_overload_manager_refuses() {
    let bad = |overload: &str| {
        let yaml = format!("{overload}static_resources: {{}}\n");
        xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml)
            .expect_err("refused")
            .to_string()
    };
    let m = monitors(10, 100);
    // Envoy's: the action needs the buffer accounting.
    let e = bad(&format!(
        "{m}  actions:\n{}",
        action(
            "reset_high_memory_stream",
            "fixed_heap",
            "threshold: { value: 0.5 }"
        )
    ));
    assert!(
        e.contains("overload_manager.actions[0].name")
            && e.contains("requires buffer_factory_config"),
        "{e}"
    );
    let e = bad(&format!(
        "{m}  buffer_factory_config: {{ minimum_account_to_track_power_of_two: 57 }}\n"
    ));
    assert!(
        e.contains("buffer_factory_config.minimum_account_to_track_power_of_two")
            && e.contains("[10, 56]"),
        "{e}"
    );
    let e = bad(&format!(
        "{m}  actions:\n{}",
        action(
            "reset_high_memory_streams",
            "fixed_heap",
            "threshold: { value: 0.5 }"
        )
    ));
    assert!(
        e.contains("overload_manager.actions[0].name") && e.contains("not supported"),
        "{e}"
    );
    let e = bad(&format!(
        "{m}  actions:\n{}",
        action(
            "stop_accepting_requests",
            "injected_resource",
            "threshold: { value: 0.5 }"
        )
    ));
    assert!(
        e.contains("triggers[0].name") && e.contains("not among resource_monitors"),
        "{e}"
    );
    let e = bad(&format!(
        "{m}  actions:\n{}",
        action(
            "stop_accepting_requests",
            "fixed_heap",
            "threshold: { value: 1.5 }"
        )
    ));
    assert!(e.contains("threshold.value") && e.contains("[0, 1]"), "{e}");
    let e = bad("overload_manager:\n  resource_monitors:\n  - name: envoy.resource_monitors.fixed_heap\n    typed_config: { \"@type\": type.googleapis.com/envoy.extensions.resource_monitors.fixed_heap.v3.FixedHeapConfig }\n");
    assert!(
        e.contains("max_heap_size_bytes") && e.contains("above 0"),
        "{e}"
    );
    let e = bad("overload_manager:\n  loadshed_points: [ { name: x, triggers: [] } ]\n");
    assert!(
        e.contains("overload_manager.loadshed_points: not supported"),
        "{e}"
    );
}

const SETTINGS: u8 = 0x4;
const HEADERS: u8 = 0x1;
const DATA: u8 = 0x0;
const RST_STREAM: u8 = 0x3;
const WINDOW_UPDATE: u8 = 0x8;

fn h2_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// `GET path` to authority `x` as an HPACK block (static entries and
/// literals without indexing).
fn h2_get(path: &str) -> Vec<u8> {
    let mut b = vec![0x82, 0x86, 0x04, path.len() as u8];
    b.extend_from_slice(path.as_bytes());
    b.extend_from_slice(&[0x01, 0x01, b'x']);
    b
}

/// The next frame on `s`: (type, flags, stream, payload); `None` when
/// none comes within `wait` (or the connection ended). SETTINGS are
/// acknowledged on the way.
fn next_frame(s: &mut TcpStream, wait: Duration) -> Option<(u8, u8, u32, Vec<u8>)> {
    s.set_read_timeout(Some(wait)).ok();
    let mut head = [0u8; 9];
    s.read_exact(&mut head).ok()?;
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).ok()?;
    if head[3] == SETTINGS && head[4] & 1 == 0 {
        let mut ack = Vec::new();
        h2_frame(&mut ack, SETTINGS, 1, 0, &[]);
        s.write_all(&ack).ok()?;
    }
    Some((head[3], head[4], stream, payload))
}

/// Reads frames until `want` matches one (returned), or `None` past
/// `wait` without one.
fn frame_until(
    s: &mut TcpStream,
    wait: Duration,
    want: impl Fn(u8, u32) -> bool,
) -> Option<(u8, u8, u32, Vec<u8>)> {
    let until = Instant::now() + wait;
    loop {
        let left = until.checked_duration_since(Instant::now())?;
        let f = next_frame(s, left.max(Duration::from_millis(1)))?;
        if want(f.0, f.2) {
            return Some(f);
        }
    }
}

/// A GET of `path` on an HTTP/1.1 connection: its status line and body.
fn get_path(s: &mut TcpStream, path: &str) -> Option<(String, String)> {
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
        .ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let len: usize = text[..end]
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if text.len() >= end + 4 + len {
                let status = text.lines().next().unwrap_or("").to_owned();
                return Some((status, text[end + 4..end + 4 + len].to_owned()));
            }
        }
    }
}

#[test]
fn reset_high_memory_stream_resets_the_stream_buffering_the_most() {
    // `/big` is a megabyte the client below never reads: the gateway
    // holds the 8 KiB its upstream window lets in. `/small` is two bytes.
    let big = format!(
        "HTTP/1.1 200 OK\r\ncontent-length: 1000000\r\n\r\n{}",
        "b".repeat(1_000_000)
    );
    let backend = H1Backend::start(move |r| match r.target.as_str() {
        "/big" => H1Answer::raw(big.clone()),
        _ => H1Answer::ok("ok"),
    });
    // Tracked from 2^9 bytes (Envoy's code: 2^(10-1)), so the 8 KiB held
    // are class 4 ([2^13, 2^14)). The action scales with the open
    // connections: one of ten is level 0.25 (classes 7 to 5 reset), two
    // are 0.75 (classes 7 to 1).
    let overload = format!(
        "{}  buffer_factory_config: {{ minimum_account_to_track_power_of_two: 10 }}\n  actions:\n{}",
        monitors(10, 1 << 50),
        action(
            "reset_high_memory_stream",
            "global_downstream_max_connections",
            "scaled: { scaling_threshold: 0.05, saturation_threshold: 0.25 }"
        )
    );
    let gw = start_with(&overload, "60s", backend.addr());
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    let scale = "envoy_overload_envoy_overload_actions_reset_high_memory_stream_scale_percent{}";

    // The hoarder: HTTP/2 with stream windows of 0, so that no byte of
    // its response can go; it gets the head, the body waits.
    let mut hoarder = TcpStream::connect(addr).expect("connect");
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    h2_frame(&mut out, SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 0]);
    h2_frame(&mut out, HEADERS, 0x5, 1, &h2_get("/big"));
    hoarder.write_all(&out).unwrap();
    let wait = Duration::from_secs(5);
    assert!(
        frame_until(&mut hoarder, wait, |t, s| t == HEADERS && s == 1).is_some(),
        "the response's head"
    );
    wait_until(wait, "one connection of ten", || {
        envoy_metric(admin, scale) == 25.0
    });
    // At 0.25 its class is not among those reset, however long it holds.
    let early = frame_until(&mut hoarder, Duration::from_millis(400), |t, _| {
        t == RST_STREAM
    });
    assert!(early.is_none(), "not reset at level 0.25: {early:?}");
    assert_eq!(
        envoy_counter(&gw, "envoy.overload_actions.reset_high_memory_stream.count"),
        0
    );

    // A second client: the level changes to 0.75, the pass resets the
    // hoarder's stream; the small streams are not even tracked.
    let mut small = TcpStream::connect(addr).expect("connect");
    assert_eq!(
        get_path(&mut small, "/small"),
        Some(("HTTP/1.1 200 OK".into(), "ok".into()))
    );
    let (_, _, _, code) = frame_until(&mut hoarder, wait, |t, s| t == RST_STREAM && s == 1)
        .expect("the hoarder's stream reset");
    assert_eq!(code, [0, 0, 0, 0], "RST_STREAM NO_ERROR, as Envoy's");
    assert_eq!(envoy_metric(admin, scale), 75.0);
    wait_until(wait, "the reset counted", || {
        envoy_counter(&gw, "envoy.overload_actions.reset_high_memory_stream.count") == 1
    });
    for _ in 0..3 {
        assert_eq!(
            get_path(&mut small, "/small"),
            Some(("HTTP/1.1 200 OK".into(), "ok".into()))
        );
    }
    // Only the stream went: the hoarder's connection still serves.
    let mut out = Vec::new();
    h2_frame(&mut out, HEADERS, 0x5, 3, &h2_get("/small"));
    h2_frame(&mut out, WINDOW_UPDATE, 0, 3, &1000u32.to_be_bytes());
    hoarder.write_all(&out).unwrap();
    let (_, _, _, body) =
        frame_until(&mut hoarder, wait, |t, s| t == DATA && s == 3).expect("an answer");
    assert_eq!(body, b"ok");
    assert_eq!(
        envoy_counter(&gw, "envoy.overload_actions.reset_high_memory_stream.count"),
        1
    );
    gw.shutdown();
}
