//! The gRPC HTTP/1.1 bridge (`envoy.filters.http.grpc_http1_bridge`) in front of an HTTP/2 gRPC backend: an HTTP/1.1 client's call answered with `grpc-status` / `grpc-message` in the head (503 for a failure), trailers-only and HTTP/2 calls untouched, and `upgrade_protobuf_to_grpc` framing a protobuf body and unframing the answer. Expected answers are Envoy 1.40's to the same requests (recorded side by side, 2026-11-28).

mod support;

use std::net::SocketAddr;

use bytes::Bytes;
use support::grpc_echo::backend;
use support::h1_client::*;
use support::*;

fn gateway(backend: SocketAddr, upgrade: bool) -> (gateway::GatewayHandle, SocketAddr) {
    let filters = format!(
        r#"          - name: envoy.filters.http.grpc_http1_bridge
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.grpc_http1_bridge.v3.Config
              upgrade_protobuf_to_grpc: {upgrade}"#
    );
    let routes = support::yaml::one_route("grpc", "");
    let clusters = support::yaml::h2_cluster("grpc", backend);
    let bootstrap =
        support::yaml::filters_bootstrap("", &filters, &routes, &clusters).expect("bootstrap");
    let gw = start(bootstrap, 1);
    let addr = gw.listener("ingress").expect("listener");
    (gw, addr)
}

/// `hello` as one gRPC frame.
const HELLO: &[u8] = b"\x00\x00\x00\x00\x05hello";

fn call(addr: SocketAddr, path: &str, ct: &str, body: &[u8]) -> Response {
    h1_post(
        addr,
        "example.com",
        path,
        &format!("Content-Type: {ct}\r\nTE: trailers\r\n"),
        body,
    )
}

#[test]
fn an_http1_call_gets_its_status_in_the_head() {
    let (be, seen) = backend();
    let (_gw, addr) = gateway(be, false);
    let r = call(addr, "/test.Echo/Unary", "application/grpc", HELLO);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("grpc-status"), Some("0"));
    assert_eq!(r.header("grpc-message"), Some(""));
    assert_eq!(r.header("content-length"), Some("10"));
    assert_eq!(r.header("x-custom-header"), Some("hv"));
    // Only those two of the trailers.
    assert_eq!(r.header("x-custom-trailer"), None);
    assert_eq!(r.body, HELLO);
    // The request went as it came.
    let (fields, body) = seen.lock().unwrap().pop().unwrap();
    let field = |n: &str| fields.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
    assert_eq!(field("content-type"), Some("application/grpc"));
    assert_eq!(body, HELLO);

    // A failure after the head: 503, its status and message.
    let r = call(addr, "/test.Echo/Fail", "application/grpc+proto", HELLO);
    assert_eq!(r.status, 503);
    assert_eq!(r.header("grpc-status"), Some("5"));
    assert_eq!(r.header("grpc-message"), Some("not found: caf%C3%A9"));
    assert_eq!(r.header("content-length"), Some("0"));
    // Trailers-only: 200, as it came.
    let r = call(addr, "/test.Echo/Only", "application/grpc", HELLO);
    assert_eq!((r.status, r.header("grpc-status")), (200, Some("5")));
    // Three messages: all of them, one length.
    let r = call(addr, "/test.Echo/Stream", "application/grpc", HELLO);
    assert_eq!(r.header("content-length"), Some("30"));
    assert_eq!(r.body, [HELLO, HELLO, HELLO].concat());
}

#[test]
fn an_http2_call_passes_untouched() {
    let (be, _seen) = backend();
    let (_gw, addr) = gateway(be, false);
    let reply = client(move || async move {
        let c = connect(addr).await;
        let headers = [("content-type", "application/grpc"), ("te", "trailers")];
        request(
            &c,
            "POST",
            "/test.Echo/Fail",
            &headers,
            Some(Bytes::from_static(HELLO)),
            None,
        )
        .await
        .expect("reply")
    });
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("grpc-status"), None);
    let trailers = reply.trailers.expect("trailers");
    assert_eq!(trailers.get("grpc-status").unwrap(), "5");
}

#[test]
fn a_protobuf_request_is_framed_and_its_answer_unframed() {
    let (be, seen) = backend();
    let (_gw, addr) = gateway(be, true);
    let r = call(addr, "/test.Echo/Unary", "application/x-protobuf", b"hello");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"hello");
    assert_eq!(r.header("content-length"), Some("5"));
    assert_eq!(r.header("grpc-status"), Some("0"));
    let (fields, body) = seen.lock().unwrap().pop().unwrap();
    let field = |n: &str| fields.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
    assert_eq!(field("content-type"), Some("application/grpc"));
    assert_eq!(field("content-length"), None);
    assert_eq!(body, HELLO);
    // With a parameter it is not protobuf as the bridge reads it.
    let _ = call(
        addr,
        "/test.Echo/Unary",
        "application/x-protobuf; foo=bar",
        b"hello",
    );
    let (fields, body) = seen.lock().unwrap().pop().unwrap();
    let field = |n: &str| fields.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
    assert_eq!(
        field("content-type"),
        Some("application/x-protobuf; foo=bar")
    );
    assert_eq!(body, b"hello");
}

#[test]
fn ignore_query_parameters_is_refused_by_name() {
    let filters = r#"          - name: envoy.filters.http.grpc_http1_bridge
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.grpc_http1_bridge.v3.Config
              ignore_query_parameters: true"#;
    let routes = support::yaml::one_route("grpc", "");
    let clusters = support::yaml::h2_cluster("grpc", "127.0.0.1:1".parse().unwrap());
    let err = support::yaml::filters_bootstrap("", filters, &routes, &clusters)
        .expect_err("refused")
        .to_string();
    assert!(err.contains("ignore_query_parameters"), "{err}");
}

#[test]
fn an_answer_past_the_held_bound_is_refused_not_cut() {
    let (be, _seen) = backend();
    let (_gw, addr) = gateway(be, false);
    // Three copies of a 400 KiB message: 1.2 MiB, past 1 MiB held.
    let payload = vec![b'm'; 400 * 1024];
    let mut framed = vec![0];
    framed.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    framed.extend_from_slice(&payload);
    let r = call(addr, "/test.Echo/Stream", "application/grpc", &framed);
    // A local reply to a gRPC request is gRPC's (as Envoy's): a 500 is
    // UNKNOWN, in a trailers-only answer.
    assert_eq!((r.status, r.header("grpc-status")), (200, Some("2")));
    assert!(r.body.is_empty());
    // The connection still serves the next call.
    let r = call(addr, "/test.Echo/Unary", "application/grpc", HELLO);
    assert_eq!((r.status, r.header("grpc-status")), (200, Some("0")));
}
