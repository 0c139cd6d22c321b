//! Route matchers beyond path and headers: `query_parameters`, `grpc`, `path_separated_prefix` and `runtime_fraction`, end to end over HTTP/1.1, with the answers Envoy 1.40 gave to the same routes and requests (recorded 2026-11-27), and their config errors.

mod support;

use std::io::Write;
use std::net::SocketAddr;

use support::h1_client::*;
use support::*;

/// Each route answers its own name, so a response says which matched.
const ROUTES: &str = r#"
              - match:
                  prefix: /q
                  query_parameters:
                  - { name: v, string_match: { exact: "1" } }
                  - { name: debug, present_match: false }
                direct_response: { status: 200, body: { inline_string: q-exact } }
              - match:
                  prefix: /q
                  query_parameters:
                  - { name: v, string_match: { prefix: "a", ignore_case: true } }
                direct_response: { status: 200, body: { inline_string: q-prefix } }
              - match: { prefix: /q, query_parameters: [ { name: flag } ] }
                direct_response: { status: 200, body: { inline_string: q-present } }
              - match: { prefix: /svc, grpc: {} }
                direct_response: { status: 200, body: { inline_string: grpc } }
              - match: { path_separated_prefix: /api }
                direct_response: { status: 200, body: { inline_string: api } }
              - match:
                  prefix: /half
                  runtime_fraction: { default_value: { numerator: 50 }, runtime_key: half.key }
                direct_response: { status: 200, body: { inline_string: half } }
              - match:
                  prefix: /none
                  runtime_fraction: { default_value: { numerator: 0, denominator: MILLION } }
                direct_response: { status: 200, body: { inline_string: none } }
              - match: { prefix: / }
                direct_response: { status: 200, body: { inline_string: fallback } }
"#;

fn bootstrap_with(routes: &str) -> Result<engine::Bootstrap, xds::Error> {
    let table = format!(
        r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:{routes}"#
    );
    support::yaml::route_table_bootstrap(&table, "")
}

/// The name of the route that answered an HTTP/1.1 request.
fn matched(addr: SocketAddr, path: &str, extra: &str) -> String {
    let (mut s, mut r) = open(addr);
    let req = format!("GET {path} HTTP/1.1\r\nHost: h\r\n{extra}\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let resp = read_response(&mut r, false);
    assert_eq!(resp.status, 200, "{path}");
    // A gRPC request's local reply is trailers-only: the body is the
    // `grpc-message`, as in Envoy.
    match resp.header("grpc-message") {
        Some(m) => m.to_owned(),
        None => String::from_utf8(resp.body).unwrap(),
    }
}

#[test]
fn query_grpc_and_separated_prefix_matches_pick_routes_as_envoy() {
    let gw = start(bootstrap_with(ROUTES).expect("bootstrap"), 1);
    let addr = gw.listener("ingress").expect("listener");
    for (path, extra, want) in [
        ("/q?v=1", "", "q-exact"),
        ("/q?x=0&v=1", "", "q-exact"),
        // The first value counts.
        ("/q?v=2&v=1", "", "fallback"),
        // Both entries must match: `debug` must be absent.
        ("/q?v=1&debug", "", "fallback"),
        // Not percent-decoded.
        ("/q?v=%31", "", "fallback"),
        // Names are case-sensitive, ignore_case is for the value.
        ("/q?V=1", "", "fallback"),
        ("/q?v=ABC", "", "q-prefix"),
        // A name alone: present, with or without a value.
        ("/q?flag", "", "q-present"),
        ("/q?flag=", "", "q-present"),
        ("/q", "", "fallback"),
        ("/svc/M", "content-type: application/grpc\r\n", "grpc"),
        ("/svc/M", "content-type: application/grpc+proto\r\n", "grpc"),
        // Envoy 1.40: exact type or `+` suffix, case-sensitive.
        (
            "/svc/M",
            "content-type: application/grpc;x=y\r\n",
            "fallback",
        ),
        (
            "/svc/M",
            "content-type: application/grpc-web\r\n",
            "fallback",
        ),
        ("/svc/M", "content-type: Application/GRPC\r\n", "fallback"),
        ("/svc/M", "", "fallback"),
        ("/api", "", "api"),
        ("/api/v1", "", "api"),
        ("/api?x", "", "api"),
        ("/apix", "", "fallback"),
        ("/none", "", "fallback"),
    ] {
        assert_eq!(matched(addr, path, extra), want, "{path} {extra:?}");
    }
}

#[test]
fn runtime_fraction_takes_its_share_of_requests() {
    let gw = start(bootstrap_with(ROUTES).expect("bootstrap"), 1);
    let addr = gw.listener("ingress").expect("listener");
    // One connection, many requests: each is drawn on its own.
    let (mut s, mut r) = open(addr);
    let mut half = 0;
    for _ in 0..400 {
        s.write_all(b"GET /half HTTP/1.1\r\nHost: h\r\n\r\n")
            .unwrap();
        let resp = read_response(&mut r, false);
        half += usize::from(resp.body == b"half");
    }
    // 50 %: 200 expected; 6 standard deviations (10 each) either way.
    assert!((140..=260).contains(&half), "{half} of 400");
}

#[test]
fn bad_matchers_are_refused_naming_the_field() {
    for (routes, want) in [
        (
            "\n              - { match: { prefix: /, query_parameters: [ { string_match: { exact: a } } ] }, direct_response: { status: 200 } }",
            "query_parameters[0].name: required",
        ),
        (
            "\n              - { match: { prefix: /, query_parameters: [ { name: a, string_match: {} } ] }, direct_response: { status: 200 } }",
            "query_parameters[0].string_match: one of exact",
        ),
        (
            "\n              - { match: { path_separated_prefix: /api/ }, direct_response: { status: 200 } }",
            "path_separated_prefix: \"/api/\": at least 2 characters",
        ),
        (
            "\n              - { match: { path_separated_prefix: \"/a?b\" }, direct_response: { status: 200 } }",
            "path_separated_prefix",
        ),
        (
            "\n              - { match: { prefix: /, runtime_fraction: { runtime_key: k } }, direct_response: { status: 200 } }",
            "runtime_fraction.default_value: required",
        ),
    ] {
        let err = bootstrap_with(routes).expect_err(routes).to_string();
        assert!(err.contains(want), "{err}\nwanted {want:?}");
    }
}
