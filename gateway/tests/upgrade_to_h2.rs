//! An HTTP/1.1 client's WebSocket upgrade and CONNECT routed to an HTTP/2 cluster, as Envoy 1.40 sends them (recorded side by side on the same bootstrap, 2026-11-28): an extended CONNECT (RFC 8441: `:protocol websocket`, the key and version kept, `upgrade` and `connection` dropped) or a CONNECT (`:authority` alone) on a connection of its own, whose 200 is the client's 101 (a CONNECT's 2xx, its 200), then the stream's DATA as the tunnel both ways, ends passed on; a refusal is the client's answer and closes the connection.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use support::raw::{read_head, read_to_end};
use support::*;

/// A gateway routing WebSocket upgrades and CONNECT (`connect_matcher`,
/// sent on) to the HTTP/2 cluster at `backend`.
fn gateway(backend: SocketAddr) -> (gateway::GatewayHandle, SocketAddr) {
    let routes = r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              response_headers_to_add: [{ header: { key: x-added, value: "yes" } }]
              routes:
              - match: { connect_matcher: {} }
                route: { cluster: h2, upgrade_configs: [{ upgrade_type: CONNECT }] }
              - match: { prefix: "/" }
                route: { cluster: h2 }
"#;
    let cluster = format!(
        "  - name: h2\n    type: STATIC\n    connect_timeout: 1s\n    typed_extension_protocol_options:\n      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:\n        \"@type\": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions\n        explicit_http_config: {{ http2_protocol_options: {{ allow_connect: true }} }}\n    load_assignment:\n      cluster_name: h2\n      endpoints:\n      - lb_endpoints: [{}]\n",
        yaml::endpoint(&backend.ip().to_string(), backend.port(), "")
    );
    let hcm = "          upgrade_configs: [{ upgrade_type: websocket }]";
    let b = yaml::hcm_bootstrap(hcm, routes, &cluster)
        .unwrap_or_else(|e| panic!("bootstrap refused: {e}"));
    let gw = start(b, 1);
    let addr = gw.listener("ingress").unwrap();
    (gw, addr)
}

/// Reads exactly `n` bytes.
fn read_exactly(c: &mut TcpStream, mut got: Vec<u8>, n: usize) -> Vec<u8> {
    while got.len() < n {
        let mut b = [0u8; 64];
        let k = c.read(&mut b).unwrap();
        assert!(k > 0, "closed after {got:?}");
        got.extend_from_slice(&b[..k]);
    }
    got
}

#[test]
fn a_websocket_upgrade_goes_to_an_http2_host_as_an_extended_connect() {
    let (backend, seen) = support::h2c_server::h2_tunnel_backend();
    let (gw, addr) = gateway(backend);
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(
        b"GET /chat?room=1 HTTP/1.1\r\nHost: example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\nearly",
    )
    .unwrap();
    let (head, got) = read_head(&mut c);
    let lower = head.to_ascii_lowercase();
    // The host's 200 is the client's 101, with its fields and the route's.
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    for want in [
        "\r\nupgrade: websocket",
        "\r\nconnection: upgrade",
        "\r\nx-backend: h2",
        "\r\nx-added: yes",
    ] {
        assert!(lower.contains(want), "no {want:?} in {head}");
    }
    assert!(!lower.contains("content-length"), "{head}");
    // The bytes sent with the request went first, then the tunnel's.
    assert_eq!(read_exactly(&mut c, got, 5), b"early");
    c.write_all(b"ping").unwrap();
    assert_eq!(read_exactly(&mut c, Vec::new(), 4), b"ping");
    // The client's end is the stream's END_STREAM; the host's, its close.
    c.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(read_to_end(&mut c), "BYE");
    // As Envoy 1.40 sent it on: an extended CONNECT with the key and
    // version kept, without `upgrade` and `connection`.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let s = &seen[0];
    assert_eq!(
        (&s.method[..], &s.uri[..], s.protocol.as_deref()),
        ("CONNECT", "http://example/chat?room=1", Some("websocket"))
    );
    for (name, value) in [
        ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("sec-websocket-version", "13"),
        ("x-forwarded-proto", "http"),
    ] {
        assert_eq!(s.field(name), Some(value), "{s:?}");
    }
    for unwanted in ["upgrade", "connection"] {
        assert_eq!(s.field(unwanted), None, "{s:?}");
    }
    wait_stat(&gw, "gateway_downstream_rq_upgrades_total 1");
    gw.shutdown();
}

#[test]
fn an_http2_host_s_refusal_is_the_client_s_answer() {
    let (backend, _) = support::h2c_server::h2_tunnel_backend();
    let (gw, addr) = gateway(backend);
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(
        b"GET /refused HTTP/1.1\r\nHost: example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .unwrap();
    let (head, rest) = read_head(&mut c);
    assert!(head.starts_with("HTTP/1.1 403 "), "{head}");
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains("\r\nconnection: close"), "{head}");
    assert!(!lower.contains("\r\nupgrade:"), "{head}");
    let body = String::from_utf8_lossy(&rest).into_owned() + &read_to_end(&mut c);
    assert_eq!(body, "denied by backend");
    gw.shutdown();
}

#[test]
fn an_http1_connect_goes_to_an_http2_host_as_a_connect_stream() {
    let (backend, seen) = support::h2c_server::h2_tunnel_backend();
    let (gw, addr) = gateway(backend);
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"CONNECT db.internal:5432 HTTP/1.1\r\nHost: db.internal:5432\r\n\r\nearly")
        .unwrap();
    let (head, got) = read_head(&mut c);
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("\r\nx-backend: h2"),
        "{head}"
    );
    assert_eq!(read_exactly(&mut c, got, 5), b"early");
    c.write_all(b"query").unwrap();
    assert_eq!(read_exactly(&mut c, Vec::new(), 5), b"query");
    c.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(read_to_end(&mut c), "BYE");
    // As Envoy 1.40 sent it: `:authority` alone, no `:protocol`.
    let seen = seen.lock().unwrap().clone();
    let s = &seen[0];
    assert_eq!(
        (&s.method[..], &s.uri[..], s.protocol.as_deref()),
        ("CONNECT", "db.internal:5432", None)
    );
    gw.shutdown();
}

#[test]
fn a_tunnel_to_an_http2_host_moves_more_than_its_windows_both_ways() {
    let (backend, _) = support::h2c_server::h2_tunnel_backend();
    let (gw, addr) = gateway(backend);
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(
        b"GET /bulk HTTP/1.1\r\nHost: example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .unwrap();
    let (head, mut got) = read_head(&mut c);
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    // 1 MiB each way: sixteen times the host's stream window (64 KiB),
    // written while the echo is read.
    const SIZE: usize = 1 << 20;
    let mut w = c.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let chunk: Vec<u8> = (0..16 * 1024).map(|i| (i % 251) as u8).collect();
        for _ in 0..SIZE / chunk.len() {
            w.write_all(&chunk).unwrap();
        }
        w.shutdown(std::net::Shutdown::Write).unwrap();
    });
    let mut b = vec![0u8; 64 * 1024];
    loop {
        let n = c.read(&mut b).unwrap();
        if n == 0 {
            break;
        }
        got.extend_from_slice(&b[..n]);
    }
    writer.join().unwrap();
    assert_eq!(got.len(), SIZE + 3);
    assert!(got[..SIZE]
        .iter()
        .enumerate()
        .all(|(i, &v)| v == ((i % (16 * 1024)) % 251) as u8));
    assert_eq!(&got[SIZE..], b"BYE");
    gw.shutdown();
}
