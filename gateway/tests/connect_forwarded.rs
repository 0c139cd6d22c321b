//! CONNECT sent on to the host (a `connect_matcher` route whose `upgrade_configs` enable CONNECT without `connect_config`, as Envoy does): the CONNECT request itself goes to an HTTP/1.1 host, whose 2xx makes the tunnel (HTTP/1.1 clients: the connection; HTTP/2 clients: the stream's DATA); and an HTTP/2 client's CONNECT terminated by the gateway (`connect_config`), answered 200 once the host is connected. Expected values recorded from Envoy 1.40 on the same bootstrap (2026-11-28).

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use h2::client::SendRequest;
use h2::RecvStream;
use http::Request;
use support::raw::{echo_backend, read_head, read_to_end};
use support::tunnel_backend::{Answer, TunnelBackend};
use support::*;

/// An HTTP/1.1 proxy backend: a CONNECT to `refused:1` gets 403 with a
/// body, any other 200 (with a length that frames nothing: the tunnel
/// follows), then the echo.
fn proxy_backend() -> TunnelBackend {
    TunnelBackend::start(|head| match head.starts_with("CONNECT refused:1 ") {
        true => Answer::Close(
            b"HTTP/1.1 403 Forbidden\r\ncontent-length: 4\r\n\r\nnope",
            Duration::from_millis(500),
        ),
        false => {
            Answer::Tunnel(b"HTTP/1.1 200 Connection established\r\ncontent-length: 0\r\n\r\n")
        }
    })
}

/// A gateway whose `connect_matcher` route sends CONNECT on to `target`
/// (`connect_config` when `terminate`), with `allow_connect` for HTTP/2.
fn gateway(target: SocketAddr, terminate: bool) -> (gateway::GatewayHandle, SocketAddr) {
    gateway_with(target, terminate, "")
}

/// [`gateway`] with more connection manager fields.
fn gateway_with(
    target: SocketAddr,
    terminate: bool,
    hcm_fields: &str,
) -> (gateway::GatewayHandle, SocketAddr) {
    let upgrade = match terminate {
        true => "{ upgrade_type: CONNECT, connect_config: {} }",
        false => "{ upgrade_type: CONNECT }",
    };
    let routes = format!(
        r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{ connect_matcher: {{}} }}
                route: {{ cluster: proxy, upgrade_configs: [{upgrade}] }}
              - match: {{ prefix: "/" }}
                direct_response: {{ status: 200, body: {{ inline_string: "plain" }} }}
"#
    );
    let cluster = format!(
        "  - name: proxy\n    type: STATIC\n    connect_timeout: 1s\n    load_assignment:\n      cluster_name: proxy\n      endpoints:\n      - lb_endpoints: [{}]\n",
        yaml::endpoint(&target.ip().to_string(), target.port(), "")
    );
    let fields =
        format!("          http2_protocol_options: {{ allow_connect: true }}\n{hcm_fields}");
    let b = yaml::hcm_bootstrap(&fields, &routes, &cluster)
        .unwrap_or_else(|e| panic!("bootstrap refused: {e}"));
    let gw = start(b, 1);
    let addr = gw.listener("ingress").unwrap();
    (gw, addr)
}

#[test]
fn an_http1_connect_goes_on_to_the_host_whose_2xx_makes_the_tunnel() {
    let backend = proxy_backend();
    let (gw, addr) = gateway(backend.addr, false);
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"CONNECT db.internal:5432 HTTP/1.1\r\nHost: db.internal:5432\r\n\r\nearly")
        .unwrap();
    let (head, mut got) = read_head(&mut c);
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert!(!head.contains("content-length"), "{head}");
    while got.len() < 5 {
        let mut b = [0u8; 5];
        let n = c.read(&mut b).unwrap();
        got.extend_from_slice(&b[..n]);
    }
    assert_eq!(&got[..], b"early");
    c.write_all(b"query").unwrap();
    let mut b = [0u8; 5];
    c.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"query");
    c.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(read_to_end(&mut c), "BYE");
    // As Envoy 1.40 sent it: the CONNECT itself, with the forwarding
    // fields.
    let head = backend.heads()[0].to_ascii_lowercase();
    assert!(
        head.starts_with("connect db.internal:5432 http/1.1\r\nhost: db.internal:5432\r\n"),
        "{head}"
    );
    for want in ["\r\nx-forwarded-proto: http\r\n", "\r\nx-request-id: "] {
        assert!(head.contains(want), "no {want:?} in {head}");
    }
    gw.shutdown();
    // A refusal is the client's answer, and the connection closes; the
    // host's answer, which `local_reply_config` does not shape.
    let (gw, addr) = gateway_with(
        backend.addr,
        false,
        "          local_reply_config: { body_format: { text_format: \"shaped %LOCAL_REPLY_BODY%\" } }",
    );
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"CONNECT refused:1 HTTP/1.1\r\nHost: refused:1\r\n\r\n")
        .unwrap();
    let answer = read_to_end(&mut c);
    assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
    assert!(answer.ends_with("\r\n\r\nnope"), "{answer}");
    wait_stat(&gw, "gateway_downstream_rq_upgrades_total 1");
    gw.shutdown();
}

/// An HTTP/2 CONNECT to `authority`: its status, and its stream's two
/// directions.
async fn h2_connect(
    send: &SendRequest<Bytes>,
    authority: &str,
) -> Result<(u16, RecvStream, h2::SendStream<Bytes>), h2::Error> {
    let req = Request::builder()
        .method("CONNECT")
        .uri(authority)
        .body(())
        .unwrap();
    let (resp, tx) = send.clone().ready().await?.send_request(req, false)?;
    let (parts, rx) = resp.await?.into_parts();
    Ok((parts.status.as_u16(), rx, tx))
}

async fn read_all(rx: &mut RecvStream) -> Bytes {
    let mut got = BytesMut::new();
    while let Some(Ok(chunk)) = rx.data().await {
        let _ = rx.flow_control().release_capacity(chunk.len());
        got.extend_from_slice(&chunk);
    }
    got.freeze()
}

#[test]
fn an_http2_connect_goes_on_to_the_host_as_a_stream_tunnel() {
    let backend = proxy_backend();
    let (gw, addr) = gateway(backend.addr, false);
    let (ok, refused) = client(move || async move {
        let send = connect(addr).await;
        let (status, mut rx, mut tx) = h2_connect(&send, "db.internal:5432").await.unwrap();
        tx.send_data(Bytes::from_static(b"ping"), true).unwrap();
        let got = read_all(&mut rx).await;
        let (refused, mut rx, _tx) = h2_connect(&send, "refused:1").await.unwrap();
        let body = read_all(&mut rx).await;
        ((status, got), (refused, body))
    });
    // The echo, then (our END_STREAM reached the host as its socket's
    // end) its goodbye.
    assert_eq!(ok, (200, Bytes::from_static(b"pingBYE")));
    assert_eq!(refused, (403, Bytes::from_static(b"nope")));
    let heads = backend.heads();
    assert!(
        heads[0].starts_with("CONNECT db.internal:5432 HTTP/1.1\r\nhost: db.internal:5432\r\n"),
        "{heads:?}"
    );
    gw.shutdown();
}

#[test]
fn an_http2_connect_its_route_terminates_is_answered_once_the_host_is_connected() {
    let (gw, addr) = gateway(echo_backend("hi ", " bye"), true);
    let got = client(move || async move {
        let send = connect(addr).await;
        let (status, mut rx, mut tx) = h2_connect(&send, "db.internal:5432").await.unwrap();
        tx.send_data(Bytes::from_static(b"query"), true).unwrap();
        (status, read_all(&mut rx).await)
    });
    // The host's bytes only: no request went to it.
    assert_eq!(got, (200, Bytes::from_static(b"hi query bye")));
    gw.shutdown();

    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (gw, addr) = gateway(dead, true);
    let status = client(move || async move {
        let send = connect(addr).await;
        h2_connect(&send, "db.internal:5432")
            .await
            .map(|(status, _, _)| status)
    });
    assert_eq!(status.unwrap(), 503);
    gw.shutdown();
}
