//! The gRPC-Web filter (`envoy.filters.http.grpc_web`) in front of an HTTP/2 gRPC backend: binary and text requests over HTTP/1.1 and HTTP/2, what the backend sees, the trailer frame, trailers-only and failed answers, local replies and bad base64. Expected bytes are Envoy 1.40's to the same requests (recorded side by side, 2026-11-28).

mod support;

use std::net::SocketAddr;

use bytes::Bytes;
use support::grpc_echo::backend;
use support::h1_client::*;
use support::*;

fn gateway(backend: SocketAddr) -> (gateway::GatewayHandle, SocketAddr, SocketAddr) {
    gateway_with(backend, "")
}

/// [`gateway`] with `before` (filters ahead of gRPC-Web).
fn gateway_with(
    backend: SocketAddr,
    before: &str,
) -> (gateway::GatewayHandle, SocketAddr, SocketAddr) {
    let filters = format!(
        r#"{before}
          - name: envoy.filters.http.grpc_web
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.grpc_web.v3.GrpcWeb"#
    );
    let routes = r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: /dead }
                route: { cluster: dead }
              - match: { prefix: / }
                route: { cluster: grpc }"#;
    let clusters = format!(
        "{}  - name: dead\n    type: STATIC\n    connect_timeout: 1s\n    load_assignment: {{ cluster_name: dead }}\n",
        support::yaml::h2_cluster("grpc", backend)
    );
    let bootstrap =
        support::yaml::filters_bootstrap("", &filters, routes, &clusters).expect("bootstrap");
    let gw = start(bootstrap, 1);
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    (gw, addr, admin)
}

/// `hello` as one gRPC frame.
const HELLO: &[u8] = b"\x00\x00\x00\x00\x05hello";

fn web_post(addr: SocketAddr, path: &str, ct: &str, extra: &str, body: &[u8]) -> Response {
    h1_post(
        addr,
        "example.com",
        path,
        &format!("Content-Type: {ct}\r\n{extra}"),
        body,
    )
}

#[test]
fn a_binary_call_over_http1_answers_with_a_trailer_frame() {
    let (be, seen) = backend();
    let (_gw, addr, admin) = gateway(be);
    let r = web_post(
        addr,
        "/test.Echo/Unary",
        "application/grpc-web+proto",
        "X-Grpc-Web: 1\r\nX-User-Agent: grpc-web-javascript/0.1\r\nTE: foo\r\n",
        HELLO,
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/grpc-web+proto"));
    assert_eq!(r.header("x-custom-header"), Some("hv"));
    assert_eq!(r.header("grpc-status"), None);
    let mut want = HELLO.to_vec();
    want.extend_from_slice(
        b"\x80\x00\x00\x00\x33grpc-status:0\r\ngrpc-message:\r\nx-custom-trailer:tv\r\n",
    );
    assert_eq!(r.body, want);
    // What the backend saw: gRPC.
    let (fields, body) = seen.lock().unwrap().pop().unwrap();
    let field = |n: &str| fields.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
    assert_eq!(field("content-type"), Some("application/grpc"));
    assert_eq!(field("te"), Some("trailers"));
    assert_eq!(field("grpc-accept-encoding"), Some("identity"));
    assert_eq!(field("content-length"), None);
    assert_eq!(field("x-grpc-web"), Some("1"));
    assert_eq!(field("x-user-agent"), Some("grpc-web-javascript/0.1"));
    assert_eq!(body, HELLO);
    assert_eq!(
        metric(admin, "gateway_grpc_web_total{outcome=\"converted\"}"),
        1.0
    );

    // Plain `application/grpc-web` too; the answer's type is `+proto`.
    let r = web_post(addr, "/test.Echo/Unary", "application/grpc-web", "", HELLO);
    assert_eq!(r.header("content-type"), Some("application/grpc-web+proto"));
}

#[test]
fn text_calls_decode_the_request_and_encode_each_frame() {
    let (be, seen) = backend();
    let (_gw, addr, _admin) = gateway(be);
    let accept = "Accept: application/grpc-web-text\r\n";
    let r = web_post(
        addr,
        "/test.Echo/Stream",
        "application/grpc-web-text",
        accept,
        b"AAAAAAVoZWxsbw==",
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("application/grpc-web-text+proto")
    );
    assert_eq!(seen.lock().unwrap().pop().unwrap().1, HELLO);
    let body = String::from_utf8(r.body).unwrap();
    // Three frames and the trailers' frame, each padded on its own.
    let trailers = "gAAAADNncnBjLXN0YXR1czowDQpncnBjLW1lc3NhZ2U6DQp4LWN1c3RvbS10cmFpbGVyOnR2DQo=";
    assert_eq!(body, format!("{0}{0}{0}{trailers}", "AAAAAAVoZWxsbw=="));

    // A text request without the text `accept` is answered in binary,
    // and `accept` with more than the one type too.
    for extra in ["", "Accept: application/grpc-web-text, */*\r\n"] {
        let r = web_post(
            addr,
            "/test.Echo/Unary",
            "application/grpc-web-text",
            extra,
            b"AAAAAAVoZWxsbw==",
        );
        assert_eq!(
            r.header("content-type"),
            Some("application/grpc-web+proto"),
            "{extra}"
        );
        assert!(r.body.starts_with(HELLO));
    }
}

#[test]
fn failures_keep_their_status_where_grpc_web_clients_read_it() {
    let (be, _seen) = backend();
    let (_gw, addr, admin) = gateway(be);
    let ct = "application/grpc-web+proto";
    // A failure after the head: its trailers' frame.
    let r = web_post(addr, "/test.Echo/Fail", ct, "", HELLO);
    assert_eq!(r.status, 200);
    let frame = b"grpc-status:5\r\ngrpc-message:not found: caf%C3%A9\r\n";
    let mut want = vec![0x80, 0, 0, 0, frame.len() as u8];
    want.extend_from_slice(frame);
    assert_eq!(r.body, want);
    // Trailers-only: the status stays in the head, no body.
    let r = web_post(addr, "/test.Echo/Only", ct, "", HELLO);
    assert_eq!((r.status, r.header("grpc-status")), (200, Some("5")));
    assert_eq!(r.header("grpc-message"), Some("failed here"));
    assert_eq!(r.header("content-type"), Some(ct));
    assert!(r.body.is_empty());
    // Not gRPC: the HTTP status kept, gRPC's from it, no body.
    let r = web_post(addr, "/plain", ct, "", HELLO);
    assert_eq!((r.status, r.header("grpc-status")), (503, Some("14")));
    assert_eq!(r.header("content-type"), Some(ct));
    assert!(r.body.is_empty());
    // A local reply: its body is the message.
    let r = web_post(addr, "/dead", ct, "", HELLO);
    assert_eq!((r.status, r.header("grpc-status")), (503, Some("14")));
    assert_eq!(r.header("grpc-message"), Some("no healthy upstream"));
    assert_eq!(r.header("content-length"), Some("0"));
    assert!(r.body.is_empty());
    // Bad base64: 400 with gRPC's INTERNAL, nothing sent upstream.
    let r = web_post(
        addr,
        "/test.Echo/Unary",
        "application/grpc-web-text",
        "",
        b"!!!!",
    );
    assert_eq!((r.status, r.header("grpc-status")), (400, Some("13")));
    assert_eq!(
        r.header("grpc-message"),
        Some("Bad gRPC-web request, invalid base64 data.")
    );
    assert_eq!(r.header("content-type"), Some(ct));
    assert_eq!(
        metric(admin, "gateway_grpc_web_total{outcome=\"bad_request\"}"),
        1.0
    );
}

#[test]
fn other_requests_pass_untouched() {
    let (be, seen) = backend();
    let (_gw, addr, _admin) = gateway(be);
    for ct in [
        "application/json",
        "application/grpc-web+json",
        "application/grpc-web; charset=utf-8",
    ] {
        let _ = web_post(addr, "/plain", ct, "", b"{\"a\":1}");
        let (fields, _) = seen.lock().unwrap().pop().unwrap();
        let field = |n: &str| fields.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        assert_eq!(field("content-type"), Some(ct));
        assert_eq!(field("content-length"), Some("7"), "{ct}");
        assert_eq!(field("te"), None);
    }
}

#[test]
fn a_call_over_http2_ends_its_body_with_the_trailer_frame() {
    let (be, _seen) = backend();
    let (_gw, addr, _admin) = gateway(be);
    let reply = client(move || async move {
        let c = connect(addr).await;
        request(
            &c,
            "POST",
            "/test.Echo/Unary",
            &[("content-type", "application/grpc-web+proto")],
            Some(Bytes::from_static(HELLO)),
            None,
        )
        .await
        .expect("reply")
    });
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("content-type"),
        Some("application/grpc-web+proto")
    );
    assert!(reply.body.starts_with(HELLO));
    assert!(reply.body[HELLO.len()..].starts_with(b"\x80\x00\x00\x00\x33grpc-status:0\r\n"));
    // No HTTP/2 trailers carry a status.
    assert!(reply
        .trailers
        .as_ref()
        .is_none_or(|t| t.get("grpc-status").is_none()));
}

#[test]
fn a_compressor_ahead_compresses_the_trailer_frame_in_its_stream() {
    use compression::{Coding, Decoder, DecoderParams};
    let (be, _seen) = backend();
    let gzip = r#"          - name: envoy.filters.http.compressor
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor
              response_direction_config: { common_config: { min_content_length: 1 } }
              compressor_library:
                name: gzip
                typed_config:
                  "@type": type.googleapis.com/envoy.extensions.compression.gzip.compressor.v3.Gzip"#;
    let (_gw, addr, _admin) = gateway_with(be, gzip);
    let ct = "application/grpc-web+proto";
    let r = web_post(
        addr,
        "/test.Echo/Unary",
        ct,
        "Accept-Encoding: gzip\r\n",
        HELLO,
    );
    assert_eq!(
        (r.status, r.header("content-encoding")),
        (200, Some("gzip"))
    );
    let mut params = DecoderParams::new(Coding::Gzip);
    params.max_inflate_ratio = 1 << 20;
    let mut d = Decoder::new(&params).unwrap();
    let mut body = Vec::new();
    d.write(&r.body, &mut body).unwrap();
    d.finish().unwrap();
    let mut want = HELLO.to_vec();
    want.extend_from_slice(
        b"\x80\x00\x00\x00\x33grpc-status:0\r\ngrpc-message:\r\nx-custom-trailer:tv\r\n",
    );
    assert_eq!(body, want);
}

#[test]
fn odd_answers_pass_or_end_whole() {
    let (be, _seen) = backend();
    let (_gw, addr, _admin) = gateway(be);
    // A backend that answers gRPC-Web itself: passed as it came.
    let r = web_post(addr, "/native", "application/grpc-web+proto", "", HELLO);
    assert_eq!((r.status, r.header("grpc-status")), (200, None));
    assert_eq!(r.body, HELLO);
    // A text answer that ends without trailers: what is held goes.
    let accept = "Accept: application/grpc-web-text\r\n";
    let text = "application/grpc-web-text";
    let r = web_post(
        addr,
        "/test.Echo/NoTrailers",
        text,
        accept,
        b"AAAAAAVoZWxsbw==",
    );
    assert_eq!(String::from_utf8(r.body).unwrap(), "AAAAAAVoZWxsbw==");
}
