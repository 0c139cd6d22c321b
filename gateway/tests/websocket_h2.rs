//! WebSocket over HTTP/2 (RFC 8441, `allow_connect`): an extended CONNECT routed as the HTTP/1.1 upgrade it stands for, sent to an HTTP/1.1 backend as one (`GET`, `upgrade`, `connection`), its 101 answered 200, the tunnel's bytes as the stream's DATA both ways under the streams' flow control, ends passed on; refusals, a tunnel that stops reading, and the expected values Envoy 1.40 gave for the same bootstrap and requests.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use glommio::net::TcpStream;
use h2::client::SendRequest;
use h2::RecvStream;
use http::Request;
use support::tunnel_backend::TunnelBackend;
use support::*;
use tokio_util::compat::FuturesAsyncReadCompatExt;

const ALL_TO_WS: &str = r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              response_headers_to_add: [{ header: { key: x-added, value: "yes" } }]
              routes:
              - match: { prefix: "/off" }
                route: { cluster: ws, upgrade_configs: [{ upgrade_type: websocket, enabled: false }] }
              - match: { prefix: "/" }
                route: { cluster: ws, timeout: 0.3s }
"#;

/// A gateway over `backend` with `hcm_fields`, routing as `ALL_TO_WS`.
fn gateway(hcm_fields: &str, backend: SocketAddr) -> (gateway::GatewayHandle, SocketAddr) {
    let clusters = format!(
        "  - name: ws\n    type: STATIC\n    connect_timeout: 1s\n    load_assignment:\n      cluster_name: ws\n      endpoints:\n      - lb_endpoints: [{}]\n",
        yaml::endpoint(&backend.ip().to_string(), backend.port(), "")
    );
    let b = yaml::hcm_bootstrap(hcm_fields, ALL_TO_WS, &clusters)
        .unwrap_or_else(|e| panic!("bootstrap refused: {e}"));
    let gw = start(b, 1);
    let addr = gw.listener("ingress").unwrap();
    (gw, addr)
}

const WS_ON_H2: &str = "          upgrade_configs: [{ upgrade_type: websocket }]
          http2_protocol_options: { allow_connect: true }";

/// An HTTP/2 client connection, once the gateway's SETTINGS came: whether
/// they enable extended CONNECT.
async fn connect_h2(addr: SocketAddr) -> (SendRequest<Bytes>, bool) {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    // Each stream's window a small part of the connection's: a stream the
    // client does not read holds back only itself.
    let (send, conn) = h2::client::Builder::new()
        .initial_window_size(64 * 1024)
        .initial_connection_window_size(16 << 20)
        .handshake::<_, Bytes>(tcp.compat())
        .await
        .expect("handshake");
    glommio::spawn_local(async move {
        let _ = conn.await;
    })
    .detach();
    let mut send = send.ready().await.expect("ready");
    // The SETTINGS frame may come after the handshake resolves: a ping's
    // worth of time is enough on loopback.
    for _ in 0..50 {
        if send.is_extended_connect_protocol_enabled() {
            break;
        }
        glommio::timer::sleep(Duration::from_millis(10)).await;
        send = send.ready().await.expect("ready");
    }
    let enabled = send.is_extended_connect_protocol_enabled();
    (send, enabled)
}

/// Opens a WebSocket stream on `path`: its response head and its two
/// directions.
async fn open_ws(
    send: &SendRequest<Bytes>,
    path: &str,
) -> Result<(http::response::Parts, RecvStream, h2::SendStream<Bytes>), h2::Error> {
    let mut req = Request::builder()
        .method("CONNECT")
        .uri(format!("http://example{path}"))
        .header("sec-websocket-version", "13")
        .header("sec-websocket-protocol", "chat")
        .body(())
        .unwrap();
    req.extensions_mut()
        .insert(h2::ext::Protocol::from_static("websocket"));
    let (resp, tx) = send.clone().ready().await?.send_request(req, false)?;
    let (parts, rx) = resp.await?.into_parts();
    Ok((parts, rx, tx))
}

/// Reads `rx` until it holds `n` bytes (or ends).
async fn read_n(rx: &mut RecvStream, n: usize) -> Result<Bytes, h2::Error> {
    let mut got = BytesMut::new();
    while got.len() < n {
        let Some(chunk) = rx.data().await else { break };
        let chunk = chunk?;
        let _ = rx.flow_control().release_capacity(chunk.len());
        got.extend_from_slice(&chunk);
    }
    Ok(got.freeze())
}

#[test]
fn a_websocket_over_http2_tunnels_through_an_http1_backend() {
    let backend = TunnelBackend::websocket();
    let (gw, addr) = gateway(WS_ON_H2, backend.addr);
    let big = Bytes::from(vec![b'x'; 300_000]);
    let sent = big.clone();
    let (head, hello, early, echoed, rest) = client(move || async move {
        let (send, enabled) = connect_h2(addr).await;
        assert!(enabled, "SETTINGS_ENABLE_CONNECT_PROTOCOL not announced");
        let (head, mut rx, mut tx) = open_ws(&send, "/chat?room=1").await.unwrap();
        let hello = read_n(&mut rx, 5).await.unwrap();
        tx.send_data(Bytes::from_static(b"EARLY"), false).unwrap();
        let early = read_n(&mut rx, 5).await.unwrap();
        // More than any window: flow control both ways, and past the
        // route's 0.3 s timeout, which a tunnel does not have.
        glommio::timer::sleep(Duration::from_millis(500)).await;
        let writer = glommio::spawn_local(async move {
            let mut b = sent;
            while !b.is_empty() {
                tx.reserve_capacity(b.len().min(64 * 1024));
                let cap = match std::future::poll_fn(|cx| tx.poll_capacity(cx)).await {
                    Some(Ok(c)) => c,
                    _ => return,
                };
                let part = b.split_to(cap.min(b.len()));
                let last = b.is_empty();
                tx.send_data(part, last).unwrap();
            }
        });
        // The echo, then (our end reached the backend as its socket's
        // end) its goodbye, and its close ends the stream.
        let mut echoed = read_n(&mut rx, usize::MAX).await.unwrap();
        writer.await;
        let rest = echoed.split_off(echoed.len().saturating_sub(3));
        (head, hello, early, echoed, rest)
    });
    assert_eq!(head.status, 200);
    let h = |n: &str| head.headers.get(n).and_then(|v| v.to_str().ok());
    assert_eq!(h("sec-websocket-accept"), Some("abc"));
    assert_eq!(h("x-backend"), Some("b1"));
    assert_eq!(h("x-added"), Some("yes"));
    assert_eq!(h("upgrade"), None);
    assert_eq!(h("connection"), None);
    assert_eq!((&hello[..], &early[..]), (&b"HELLO"[..], &b"EARLY"[..]));
    assert!(echoed == big, "echoed {} bytes", echoed.len());
    assert_eq!(&rest[..], b"BYE");
    // As Envoy 1.40 wrote it for the same request: a GET upgrade with no
    // body framing. And a `sec-websocket-key`, which Envoy leaves out
    // (RFC 8441's client sends none) and RFC 6455 servers require.
    let heads = backend.heads();
    let head = heads[0].to_ascii_lowercase();
    assert!(head.starts_with("get /chat?room=1 http/1.1\r\n"), "{head}");
    for want in [
        "\r\nhost: example\r\n",
        "\r\nsec-websocket-version: 13\r\n",
        "\r\nsec-websocket-protocol: chat\r\n",
        "\r\nupgrade: websocket\r\n",
        "\r\nconnection: upgrade\r\n",
        "\r\nx-forwarded-proto: http\r\n",
        "\r\nx-request-id: ",
        "\r\nx-envoy-expected-rq-timeout-ms: 300\r\n",
    ] {
        assert!(head.contains(want), "no {want:?} in {head}");
    }
    let key = head
        .split("\r\n")
        .find_map(|l| l.strip_prefix("sec-websocket-key: "))
        .unwrap_or_else(|| panic!("no key in {head}"));
    assert!(key.len() == 24 && key.ends_with("=="), "{key}");
    for unwanted in ["content-length", "transfer-encoding"] {
        assert!(!head.contains(unwanted), "{unwanted} in {head}");
    }
    wait_stat(&gw, "gateway_downstream_rq_upgrades_total 1");
    // The upgraded connection closed with its stream: none is left to
    // go back to the pool.
    let host = format!(
        "gateway_upstream_cx_active{{cluster=\"ws\",host=\"{}\"}} 0",
        backend.addr
    );
    wait_stat(&gw, &host);
    gw.shutdown();
}

#[test]
fn refusals_reach_the_http2_client_as_responses() {
    let backend = TunnelBackend::websocket();
    let (gw, addr) = gateway(WS_ON_H2, backend.addr);
    let (off, refused, plain) = client(move || async move {
        let (send, _) = connect_h2(addr).await;
        // A route that disables WebSocket: 403, as Envoy answers.
        let (off, _, _) = open_ws(&send, "/off").await.unwrap();
        // The backend's own refusal, with its body.
        let (refused, mut rx, _tx) = open_ws(&send, "/refuse").await.unwrap();
        let body = read_n(&mut rx, usize::MAX).await.unwrap();
        // The connection still serves requests.
        let plain = get(&send, "/plain", &[]).await.unwrap();
        (off.status.as_u16(), (refused.status.as_u16(), body), plain)
    });
    assert_eq!(off, 403);
    assert_eq!(refused, (400, Bytes::from_static(b"nope")));
    assert_eq!((plain.status.as_u16(), &plain.body[..]), (200, &b"ok"[..]));
    wait_stat(&gw, "gateway_downstream_rq_upgrade_refused 1");
    gw.shutdown();

    // Without `allow_connect` the setting is not announced, and an
    // extended CONNECT sent anyway is malformed: its stream is reset.
    let (gw, addr) = gateway(
        "          upgrade_configs: [{ upgrade_type: websocket }]",
        backend.addr,
    );
    let (enabled, opened) = client(move || async move {
        let (send, enabled) = connect_h2(addr).await;
        (
            enabled,
            open_ws(&send, "/chat").await.map(|(p, _, _)| p.status),
        )
    });
    assert!(!enabled);
    assert!(opened.is_err(), "{opened:?}");
    let heads = backend.heads();
    assert_eq!(heads.len(), 2, "only /refuse and /plain reached it");
    assert!(
        heads[0].starts_with("GET /refuse HTTP/1.1\r\n"),
        "{heads:?}"
    );
    gw.shutdown();
}

#[test]
fn a_websocket_that_stops_reading_stalls_only_its_own_stream() {
    let backend = TunnelBackend::websocket();
    let (gw, addr) = gateway(WS_ON_H2, backend.addr);
    let answers = client(move || async move {
        let (send, _) = connect_h2(addr).await;
        let (head, _hog_rx, mut hog_tx) = open_ws(&send, "/hog").await.unwrap();
        assert_eq!(head.status, 200);
        // The hog sends without reading its echo: its window, then the
        // backend's socket, then ours fill; nothing else may wait for it.
        let chunk = Bytes::from(vec![b'h'; 64 * 1024]);
        for _ in 0..64 {
            hog_tx.reserve_capacity(chunk.len());
            let _ = hog_tx.send_data(chunk.clone(), false);
        }
        glommio::timer::sleep(Duration::from_millis(300)).await;
        let mut answers = Vec::new();
        for _ in 0..3 {
            let (head, mut rx, mut tx) = open_ws(&send, "/chat").await.unwrap();
            let hello = read_n(&mut rx, 5).await.unwrap();
            tx.send_data(Bytes::from_static(b"ping"), false).unwrap();
            let pong = read_n(&mut rx, 4).await.unwrap();
            let plain = get(&send, "/plain", &[]).await.unwrap();
            answers.push((head.status, hello, pong, plain.status));
        }
        drop(hog_tx);
        answers
    });
    for a in answers {
        assert_eq!(
            a,
            (
                http::StatusCode::OK,
                Bytes::from_static(b"HELLO"),
                Bytes::from_static(b"ping"),
                http::StatusCode::OK
            )
        );
    }
    gw.shutdown();
}

/// A backend that serves plain requests on kept-alive connections, and
/// closes a connection that served one when an upgrade comes on it (the
/// race of a keep-alive close with the next request); an upgrade first
/// on its connection gets 101 and an echo.
fn closing_keep_alive_backend() -> SocketAddr {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let mut served = 0;
                loop {
                    let mut head = Vec::new();
                    let mut b = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        match s.read(&mut b) {
                            Ok(1) => head.push(b[0]),
                            _ => return,
                        }
                    }
                    let upgrade = String::from_utf8_lossy(&head)
                        .to_ascii_lowercase()
                        .contains("\r\nupgrade: websocket\r\n");
                    if upgrade && served > 0 {
                        return;
                    }
                    if upgrade {
                        let _ = s.write_all(b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n");
                        let mut buf = [0u8; 4096];
                        while let Ok(n @ 1..) = s.read(&mut buf) {
                            if s.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                        return;
                    }
                    served += 1;
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
                }
            });
        }
    });
    addr
}

#[test]
fn a_tunnel_whose_kept_alive_connection_was_closed_is_sent_again() {
    let (gw, addr) = gateway(WS_ON_H2, closing_keep_alive_backend());
    let (plain, status, echo) = client(move || async move {
        let (send, _) = connect_h2(addr).await;
        // Leaves a kept-alive connection in the host's pool.
        let plain = get(&send, "/plain", &[]).await.unwrap().status;
        let (head, mut rx, mut tx) = open_ws(&send, "/chat").await.unwrap();
        tx.send_data(Bytes::from_static(b"ping"), false).unwrap();
        (plain, head.status, read_n(&mut rx, 4).await.unwrap())
    });
    assert_eq!((plain.as_u16(), status.as_u16()), (200, 200));
    assert_eq!(&echo[..], b"ping");
    // Counted once, though sent twice.
    wait_stat(&gw, "gateway_downstream_rq_upgrades_total 1");
    gw.shutdown();
}

#[test]
fn a_websocket_over_http2_goes_to_an_http2_host_as_an_extended_connect() {
    let (backend, seen) = support::h2c_server::h2_tunnel_backend();
    let clusters = format!(
        "  - name: ws\n    type: STATIC\n    connect_timeout: 1s\n    typed_extension_protocol_options:\n      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:\n        \"@type\": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions\n        explicit_http_config: {{ http2_protocol_options: {{ allow_connect: true }} }}\n    load_assignment:\n      cluster_name: ws\n      endpoints:\n      - lb_endpoints: [{}]\n",
        yaml::endpoint(&backend.ip().to_string(), backend.port(), "")
    );
    let b = yaml::hcm_bootstrap(WS_ON_H2, ALL_TO_WS, &clusters)
        .unwrap_or_else(|e| panic!("bootstrap refused: {e}"));
    let gw = start(b, 1);
    let addr = gw.listener("ingress").unwrap();
    let (status, echo) = client(move || async move {
        let (send, _) = connect_h2(addr).await;
        let (head, mut rx, mut tx) = open_ws(&send, "/chat?room=1").await.unwrap();
        tx.send_data(Bytes::from_static(b"ping"), true).unwrap();
        (head.status, read_n(&mut rx, usize::MAX).await.unwrap())
    });
    assert_eq!(status.as_u16(), 200);
    // Echoed, then the host's END_STREAM after ours.
    assert_eq!(&echo[..], b"pingBYE");
    // As Envoy 1.40 sent it on: the extended CONNECT itself, no key.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let s = &seen[0];
    assert_eq!(
        (&s.method[..], &s.uri[..], s.protocol.as_deref()),
        ("CONNECT", "http://example/chat?room=1", Some("websocket"))
    );
    assert_eq!(s.field("sec-websocket-key"), None);
    wait_stat(&gw, "gateway_downstream_rq_upgrades_total 1");
    gw.shutdown();
}
