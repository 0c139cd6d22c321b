//! WebSocket over HTTP/1.1 (`upgrade_configs`, connection manager and route): the upgrade's request on a connection of its own, the 101 through the response phases, then a tunnel with the bytes both sides sent early, half-closes passed on; refusals (403 where nothing enables it, a backend's own answer, a backend down), the stream idle timeout, and the access log.

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use support::raw::{read_head, read_n, read_to_end};
use support::tunnel_backend::TunnelBackend;
use support::*;

const UPGRADE: &str = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n";

/// Sends an upgrade request for `path` with `early` bytes after its head.
fn upgrade(addr: SocketAddr, path: &str, early: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: example\r\n{UPGRADE}\r\n{early}"
    )
    .unwrap();
    s
}

/// A gateway over `backend` with the connection manager's `hcm_fields`
/// and `route_config` (YAML at their indentations, see
/// `support::yaml::hcm_bootstrap`).
fn gateway(hcm_fields: &str, route_config: &str, backend: SocketAddr) -> gateway::GatewayHandle {
    let clusters = format!(
        "  - name: ws\n    type: STATIC\n    connect_timeout: 1s\n    load_assignment:\n      cluster_name: ws\n      endpoints:\n      - lb_endpoints: [{}]\n",
        yaml::endpoint(&backend.ip().to_string(), backend.port(), "")
    );
    let b = yaml::hcm_bootstrap(hcm_fields, route_config, &clusters)
        .unwrap_or_else(|e| panic!("bootstrap refused: {e}"));
    start(b, 1)
}

const ALL_TO_WS: &str = r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              response_headers_to_add: [{ header: { key: x-added, value: "yes" } }]
              routes:
              - match: { prefix: "/" }
                route: { cluster: ws }
"#;

/// A gateway whose connection manager enables WebSocket, routing all to
/// `backend` (`ALL_TO_WS`), and its listener's address.
fn ws_gateway(backend: SocketAddr) -> (gateway::GatewayHandle, SocketAddr) {
    let gw = gateway(
        "          upgrade_configs: [{ upgrade_type: websocket }]",
        ALL_TO_WS,
        backend,
    );
    let addr = gw.listener("ingress").unwrap();
    (gw, addr)
}

#[test]
fn a_websocket_is_upgraded_end_to_end_with_early_bytes_both_ways() {
    let backend = TunnelBackend::websocket();
    let (gw, addr) = ws_gateway(backend.addr);
    let mut c = upgrade(addr, "/chat?room=1", "EARLY");
    let (head, rest) = read_head(&mut c);
    let lines: Vec<&str> = head.lines().collect();
    assert_eq!(lines[0], "HTTP/1.1 101 Switching Protocols", "{head}");
    for want in [
        "sec-websocket-accept: abc",
        "x-backend: b1",
        "x-added: yes",
        "server: envoy",
        "connection: upgrade",
        "upgrade: websocket",
    ] {
        assert!(lines.contains(&want), "no {want:?} in {head}");
    }
    // The backend's first bytes, then the client's early ones echoed.
    let mut got = String::from_utf8(rest).unwrap();
    while got.len() < "HELLOEARLY".len() {
        got.push_str(&read_n(&mut c, 1));
    }
    assert_eq!(got, "HELLOEARLY");
    c.write_all(b"MORE").unwrap();
    assert_eq!(read_n(&mut c, 4), "MORE");
    let big = vec![b'x'; 300_000];
    let mut writer = c.try_clone().unwrap();
    let sent = big.clone();
    let w = std::thread::spawn(move || {
        writer.write_all(&sent).unwrap();
        writer.shutdown(Shutdown::Write).unwrap();
    });
    let mut echoed = vec![0u8; big.len()];
    c.read_exact(&mut echoed).unwrap();
    w.join().unwrap();
    assert!(echoed == big);
    // Our end passed on: the backend says goodbye and the tunnel closes.
    assert_eq!(read_to_end(&mut c), "BYE");
    let heads = backend.heads();
    let head = heads[0].to_ascii_lowercase();
    assert!(head.starts_with("get /chat?room=1 http/1.1\r\n"), "{head}");
    for want in [
        "\r\nupgrade: websocket\r\n",
        "\r\nconnection: upgrade\r\n",
        "\r\nsec-websocket-key: dghlihnhbxbszsbub25jzq==\r\n",
        "\r\nx-forwarded-proto: http\r\n",
        "\r\nx-request-id: ",
    ] {
        assert!(head.contains(want), "no {want:?} in {head}");
    }
    assert!(!head.contains("content-length"), "{head}");
    wait_stat(&gw, "gateway_tunnel_cx_active 0");
    // The tunnel ran in a task of its own: the connection is counted
    // until it ends, once.
    wait_stat(&gw, "gateway_downstream_cx_active 0");
    wait_stat(&gw, "gateway_downstream_cx_total 1");
    wait_stat(
        &gw,
        &format!("gateway_tunnel_rx_bytes_total {}", 5 + 4 + big.len()),
    );
    // Envoy's connection manager counts the connection's bytes, its
    // tunnel's included: the request head and every byte after it, once.
    let request = format!("GET /chat?room=1 HTTP/1.1\r\nHost: example\r\n{UPGRADE}\r\n");
    let admin = gw.admin_addr.unwrap();
    let hcm = "{envoy_http_conn_manager_prefix=\"ingress\"}";
    let rx = envoy_metric(
        admin,
        &format!("envoy_http_downstream_cx_rx_bytes_total{hcm}"),
    );
    assert_eq!(rx, (request.len() + 5 + 4 + big.len()) as f64);
    let tx = envoy_metric(
        admin,
        &format!("envoy_http_downstream_cx_tx_bytes_total{hcm}"),
    );
    assert!(tx > (5 + 5 + 4 + big.len() + 3) as f64, "{tx}");
    gw.shutdown();
}

#[test]
fn a_route_enables_or_disables_what_its_manager_says() {
    let backend = TunnelBackend::websocket();
    // As Envoy's websocket example `envoy-ws-route.yaml`: the manager
    // lists nothing, one route enables WebSocket.
    let routes = r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: "/ws" }
                route: { cluster: ws, upgrade_configs: [{ upgrade_type: websocket }] }
              - match: { prefix: "/off" }
                route: { cluster: ws, upgrade_configs: [{ upgrade_type: websocket, enabled: false }] }
              - match: { prefix: "/" }
                direct_response: { status: 200, body: { inline_string: "NotWebSocket\n" } }
"#;
    let gw = gateway("", routes, backend.addr);
    let addr = gw.listener("ingress").unwrap();
    let mut c = upgrade(addr, "/ws/x", "");
    let (head, _) = read_head(&mut c);
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    drop(c);
    for path in ["/off/x", "/"] {
        let mut c = upgrade(addr, path, "");
        let answer = read_to_end(&mut c);
        assert!(
            answer.starts_with("HTTP/1.1 403 Forbidden\r\n"),
            "{path}: {answer}"
        );
    }
    let plain = h1_client::h1_get(addr, "example", "/", "");
    assert_eq!(
        (plain.status, &plain.body[..]),
        (200, &b"NotWebSocket\n"[..])
    );
    wait_stat(&gw, "gateway_downstream_rq_upgrade_refused 2");
    assert_eq!(backend.heads().len(), 1);
    gw.shutdown();
}

#[test]
fn a_backend_that_refuses_or_is_down_answers_the_client() {
    let backend = TunnelBackend::websocket();
    let (gw, addr) = ws_gateway(backend.addr);
    let mut c = upgrade(addr, "/refuse", "");
    let answer = read_to_end(&mut c);
    assert!(
        answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{answer}"
    );
    assert!(answer.contains("\r\nx-backend: b1\r\n"), "{answer}");
    assert!(answer.ends_with("\r\n\r\nnope"), "{answer}");
    gw.shutdown();

    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (gw, addr) = ws_gateway(dead);
    let mut c = upgrade(addr, "/chat", "");
    let answer = read_to_end(&mut c);
    assert!(
        answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{answer}"
    );
    gw.shutdown();
}

#[test]
fn a_quiet_tunnel_ends_at_the_stream_idle_timeout_and_is_logged() {
    let backend = TunnelBackend::websocket();
    let dir = std::env::temp_dir().join(format!("gw-ws-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("ws.log");
    let _ = std::fs::remove_file(&log);
    let fields = format!(
        r#"          upgrade_configs: [{{ upgrade_type: websocket }}]
          stream_idle_timeout: 0.4s
          access_log: [{{ name: envoy.access_loggers.file, typed_config: {{ "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog, path: {}, log_format: {{ text_format_source: {{ inline_string: "%RESPONSE_CODE% %BYTES_RECEIVED% %BYTES_SENT% %PROTOCOL% %UPSTREAM_CLUSTER%\n" }} }} }} }}]"#,
        log.display()
    );
    let gw = gateway(&fields, ALL_TO_WS, backend.addr);
    let addr = gw.listener("ingress").unwrap();
    let mut c = upgrade(addr, "/chat", "");
    let (head, rest) = read_head(&mut c);
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    let mut got = String::from_utf8(rest).unwrap();
    while got.len() < 5 {
        got.push_str(&read_n(&mut c, 1));
    }
    c.write_all(b"ping").unwrap();
    assert_eq!(read_n(&mut c, 4), "ping");
    let quiet = Instant::now();
    // Closed by the gateway, not half-closed: no "BYE".
    assert_eq!(read_to_end(&mut c), "");
    let waited = quiet.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(3),
        "closed after {waited:?}"
    );
    wait_stat(&gw, "gateway_tunnel_idle_timeout 1");
    let text = wait_lines(&log, 1);
    assert_eq!(text, "101 4 9 HTTP/1.1 ws\n");
    gw.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_websocket_client_that_stops_reading_stalls_only_itself() {
    let backend = TunnelBackend::websocket();
    let (gw, addr) = ws_gateway(backend.addr);
    let mut hog = upgrade(addr, "/hog", "");
    let (head, _) = read_head(&mut hog);
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    hog.set_write_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let chunk = vec![b'h'; 64 * 1024];
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until && hog.write(&chunk).is_ok() {}
    assert!(Instant::now() < until, "the hog was never held back");
    for i in 0..3 {
        let mut c = upgrade(addr, "/chat", "");
        let (head, _) = read_head(&mut c);
        assert!(head.starts_with("HTTP/1.1 101 "), "victim {i}: {head}");
        let plain = h1_client::h1_get(addr, "example", "/plain", "");
        assert_eq!((plain.status, &plain.body[..]), (200, &b"ok"[..]));
    }
    drop(hog);
    gw.shutdown();
}
