//! The connection manager's own edits, end to end over HTTP/1.1: `x-request-id` (generated, replaced at the edge, preserved, echoed), `via`, `server`, Envoy's `x-envoy-*` fields from external and internal clients, `x-forwarded-for` with trusted hops, path normalization and host port stripping, `add_user_agent`, `request_id_extension`. Expected values are Envoy 1.40's on the same settings and requests (recorded 2026-11-27).

mod support;

use std::io::Write;
use std::net::SocketAddr;

use support::h1_backend::{H1Answer, H1Backend, H1Request};
use support::h1_client::*;
use support::*;

/// A gateway whose connection manager has `hcm_fields`, in front of `b`:
/// `/direct` answers itself, `example.com` and `*` are told apart by
/// `x-vhost` on the request.
fn gateway(hcm_fields: &str, b: &H1Backend) -> (gateway::GatewayHandle, SocketAddr) {
    let gw = start(bootstrap(hcm_fields, b), 1);
    let addr = gw.listener("ingress").expect("listener");
    (gw, addr)
}

/// [`gateway`]'s bootstrap.
fn bootstrap(hcm_fields: &str, b: &H1Backend) -> engine::Bootstrap {
    let table = r#"            virtual_hosts:
            - name: example
              domains: ["example.com"]
              request_headers_to_add: [ { header: { key: x-vhost, value: example } } ]
              routes:
              - { match: { prefix: / }, route: { cluster: web } }
            - name: any
              domains: ["*"]
              request_headers_to_add: [ { header: { key: x-vhost, value: any } } ]
              routes:
              - { match: { prefix: /direct }, direct_response: { status: 200, body: { inline_string: d } } }
              - { match: { prefix: / }, route: { cluster: web } }"#;
    let clusters = format!(
        r#"  - name: web
    connect_timeout: 1s
    load_assignment:
      cluster_name: web
      endpoints:
      - lb_endpoints:
        - endpoint: {{ address: {{ socket_address: {{ address: {ip}, port_value: {port} }} }} }}
"#,
        ip = b.addr().ip(),
        port = b.addr().port(),
    );
    support::yaml::hcm_bootstrap(hcm_fields, table, &clusters).expect("bootstrap")
}

fn backend() -> H1Backend {
    H1Backend::start(|_| {
        H1Answer::raw(
            "HTTP/1.1 200 OK\r\nserver: py\r\nvia: 1.1 upstream-proxy\r\ncontent-length: 2\r\n\r\nok",
        )
    })
}

/// One request through; what the backend got, and the response.
fn through(hcm_fields: &str, path: &str, extra: &str) -> (Option<H1Request>, Response) {
    let b = backend();
    let (_gw, addr) = gateway(hcm_fields, &b);
    let resp = h1_get(addr, "h", path, extra);
    (b.requests().pop(), resp)
}

fn is_uuid_v4(v: &str) -> bool {
    let b = v.as_bytes();
    b.len() == 36
        && [8, 13, 18, 23].iter().all(|&i| b[i] == b'-')
        && b[14] == b'4'
        && matches!(b[19], b'8' | b'9' | b'a' | b'b')
        && v.chars()
            .all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c))
}

#[test]
fn request_ids_as_envoy_generates_replaces_and_echoes_them() {
    const URA: &str = "          use_remote_address: true\n";
    let id = |fields: &str, extra: &str| {
        let (got, resp) = through(fields, "/", extra);
        let up = got
            .expect("upstream")
            .field("x-request-id")
            .map(String::from);
        (up, resp.header("x-request-id").map(String::from))
    };
    // Default: generated, not in the response.
    let (up, down) = id("", "");
    assert!(up.as_deref().is_some_and(is_uuid_v4), "{up:?}");
    assert_eq!(down, None);
    // A client's is kept off the edge, replaced at it (even a UUID),
    // kept there with preserve_external_request_id.
    let abc = "x-request-id: abc\r\n";
    assert_eq!(id("", abc).0.as_deref(), Some("abc"));
    let replaced = id(URA, abc).0.unwrap();
    assert!(is_uuid_v4(&replaced), "{replaced}");
    let uuid = "x-request-id: 11111111-2222-4333-8444-555555555555\r\n";
    assert_ne!(
        id(URA, uuid).0.as_deref(),
        Some("11111111-2222-4333-8444-555555555555")
    );
    let preserve =
        "          use_remote_address: true\n          preserve_external_request_id: true\n";
    assert_eq!(id(preserve, abc).0.as_deref(), Some("abc"));
    // Echoed: the same value as upstream, also on the gateway's replies.
    let echo = "          always_set_request_id_in_response: true\n";
    let (up, down) = id(echo, "");
    assert!(up.is_some() && up == down, "{up:?} {down:?}");
    let (_, direct) = through(echo, "/direct", abc);
    assert_eq!(direct.header("x-request-id"), Some("abc"));
    let (_, generated) = through(echo, "/direct", "");
    assert!(generated.header("x-request-id").is_some_and(is_uuid_v4));
    // Off: none made, a client's left alone even at the edge.
    let off = "          use_remote_address: true\n          generate_request_id: false\n";
    assert_eq!(id(off, "").0, None);
    assert_eq!(id(off, abc).0.as_deref(), Some("abc"));
}

#[test]
fn via_and_server_as_envoy_writes_them() {
    let via = "          via: gw1\n";
    let (got, resp) = through(via, "/", "via: 1.1 client-proxy\r\n");
    assert_eq!(got.unwrap().field("via"), Some("1.1 client-proxy, gw1"));
    assert_eq!(resp.header("via"), Some("1.1 upstream-proxy, gw1"));
    let (_, direct) = through(via, "/direct", "");
    assert_eq!(direct.header("via"), Some("gw1"));
    // Every `via` the upstream sent, joined, then ours.
    let two = H1Backend::start(|_| {
        H1Answer::raw("HTTP/1.1 200 OK\r\nvia: 1.1 a\r\nvia: 1.1 b\r\ncontent-length: 2\r\n\r\nok")
    });
    let (_gw, addr) = gateway(via, &two);
    let resp = h1_get(addr, "h", "/", "");
    assert_eq!(resp.header("via"), Some("1.1 a,1.1 b, gw1"));

    // (settings, proxied response's server, a local reply's)
    for (fields, proxied, local) in [
        ("", Some("envoy"), Some("envoy")),
        ("          server_name: edge\n", Some("edge"), Some("edge")),
        (
            "          server_name: edge\n          server_header_transformation: APPEND_IF_ABSENT\n",
            Some("py"),
            Some("edge"),
        ),
        (
            "          server_name: edge\n          server_header_transformation: PASS_THROUGH\n",
            Some("py"),
            None,
        ),
    ] {
        let (_, resp) = through(fields, "/", "");
        assert_eq!(resp.header("server"), proxied, "{fields}");
        let (_, reply) = through(fields, "/direct", "");
        assert_eq!(reply.header("server"), local, "{fields}");
    }
}

/// What a client sent of Envoy's internal fields (Envoy 1.40's case A).
const ENVOY_FIELDS: &str = "x-envoy-retry-on: 5xx\r\nx-envoy-max-retries: 3\r\nx-envoy-upstream-rq-timeout-ms: 1234\r\nx-envoy-expected-rq-timeout-ms: 999\r\nx-envoy-internal: true\r\nx-envoy-external-address: 9.9.9.9\r\nx-envoy-foo: bar\r\nx-envoy-original-path: /orig\r\nx-envoy-decorator-operation: op\r\nx-forwarded-client-cert: By=x\r\n";

fn fields_of(r: &H1Request, prefix: &str) -> Vec<String> {
    r.fields
        .iter()
        .filter(|(n, _)| n.starts_with(prefix))
        .map(|(n, v)| format!("{n}: {v}"))
        .collect()
}

#[test]
fn envoy_internal_fields_from_clients_as_envoy_treats_them() {
    // At the edge, external: only unknown x-envoy-* pass; the external
    // address is ours; the router's timeout is the route's.
    let edge = "          use_remote_address: true\n";
    let extra = format!("{ENVOY_FIELDS}x-forwarded-for: 1.2.3.4\r\n");
    let (got, _) = through(edge, "/", &extra);
    let got = got.unwrap();
    assert_eq!(
        fields_of(&got, "x-envoy-"),
        [
            "x-envoy-foo: bar",
            "x-envoy-expected-rq-timeout-ms: 15000",
            "x-envoy-external-address: 127.0.0.1",
        ]
    );
    assert_eq!(got.field("x-forwarded-for"), Some("1.2.3.4,127.0.0.1"));
    assert_eq!(got.field("x-forwarded-client-cert"), None);

    // Not at the edge, not internal: the edge-only ones stay.
    let (got, _) = through("", "/", ENVOY_FIELDS);
    assert_eq!(
        fields_of(&got.unwrap(), "x-envoy-"),
        [
            "x-envoy-external-address: 9.9.9.9",
            "x-envoy-foo: bar",
            "x-envoy-original-path: /orig",
            "x-envoy-decorator-operation: op",
            "x-envoy-expected-rq-timeout-ms: 15000",
        ]
    );

    // Internal (loopback listed, no x-forwarded-for): kept, the router's
    // own consumed and honoured, and marked internal (Envoy's case B).
    let internal = "          use_remote_address: true\n          internal_address_config: { cidr_ranges: [ { address_prefix: 127.0.0.0, prefix_len: 8 } ] }\n";
    let (got, _) = through(internal, "/", ENVOY_FIELDS);
    assert_eq!(
        fields_of(&got.unwrap(), "x-envoy-"),
        [
            "x-envoy-external-address: 9.9.9.9",
            "x-envoy-foo: bar",
            "x-envoy-original-path: /orig",
            "x-envoy-decorator-operation: op",
            "x-envoy-expected-rq-timeout-ms: 1234",
            "x-envoy-internal: true",
        ]
    );
}

#[test]
fn a_trusted_hop_names_the_client() {
    let hops = "          use_remote_address: true\n          xff_num_trusted_hops: 1\n";
    let (got, _) = through(hops, "/", "x-forwarded-for: 1.1.1.1, 2.2.2.2\r\n");
    let got = got.unwrap();
    assert_eq!(
        got.field("x-forwarded-for"),
        Some("1.1.1.1, 2.2.2.2,127.0.0.1")
    );
    assert_eq!(got.field("x-envoy-external-address"), Some("2.2.2.2"));
    // A trusted hop's x-forwarded-proto is kept.
    let (got, _) = through(hops, "/", "x-forwarded-proto: https\r\n");
    assert_eq!(got.unwrap().field("x-forwarded-proto"), Some("https"));
    // Two fields are one list.
    let (got, _) = through(
        hops,
        "/",
        "x-forwarded-for: 1.1.1.1\r\nx-forwarded-for: 3.3.3.3\r\n",
    );
    let got = got.unwrap();
    assert_eq!(
        got.field("x-forwarded-for"),
        Some("1.1.1.1,3.3.3.3,127.0.0.1")
    );
    assert_eq!(got.field("x-envoy-external-address"), Some("3.3.3.3"));
}

#[test]
fn paths_are_normalized_before_routing() {
    let norm = "          normalize_path: true\n          merge_slashes: true\n";
    for (path, want) in [
        ("/a/../b", "/b"),
        ("//a///b?x=/../y", "/a/b?x=/../y"),
        ("/a/%2e%2e/b", "/b"),
        ("/%7Ea", "/~a"),
        ("/a%2Fb", "/a%2Fb"),
    ] {
        let (got, _) = through(norm, path, "");
        assert_eq!(got.unwrap().target, want, "{path}");
    }
    // Without the settings the path goes as it came.
    let (got, _) = through("", "/a/../b", "");
    assert_eq!(got.unwrap().target, "/a/../b");

    let redirect =
        format!("{norm}          path_with_escaped_slashes_action: UNESCAPE_AND_REDIRECT\n");
    let (got, resp) = through(&redirect, "/a%2Fb?q=1", "");
    assert!(got.is_none());
    assert_eq!(resp.status, 307);
    assert_eq!(resp.header("location"), Some("/a/b?q=1"));
    let reject = format!("{norm}          path_with_escaped_slashes_action: REJECT_REQUEST\n");
    let (got, resp) = through(&reject, "/a%2fb", "");
    assert!(got.is_none());
    assert_eq!(resp.status, 400);
    // A gRPC client follows no redirect: refused instead, as Envoy does.
    let (got, resp) = through(&redirect, "/a%2Fb", "content-type: application/grpc\r\n");
    assert!(got.is_none());
    assert_eq!(resp.header("grpc-status"), Some("13"));
    // A fragment is refused whatever the settings (Envoy 1.40).
    let (got, resp) = through("", "/a#b", "");
    assert!(got.is_none());
    assert_eq!(resp.status, 400);
    let forward =
        format!("{norm}          path_with_escaped_slashes_action: UNESCAPE_AND_FORWARD\n");
    let (got, _) = through(&forward, "/a/b%2F..%2Fc", "");
    assert_eq!(got.unwrap().target, "/a/c");
}

#[test]
fn host_ports_come_off_before_the_virtual_host_is_chosen() {
    let b = backend();
    for (fields, port_of_listener, other_port) in [
        (
            "          strip_matching_host_port: true\n",
            "example",
            "any",
        ),
        (
            "          strip_any_host_port: true\n",
            "example",
            "example",
        ),
        ("", "any", "any"),
    ] {
        let (_gw, addr) = gateway(fields, &b);
        let host = format!("example.com:{}", addr.port());
        h1_get(addr, &host, "/", "");
        let got = b.requests().pop().unwrap();
        assert_eq!(got.field("x-vhost"), Some(port_of_listener), "{fields}");
        let want_host = if port_of_listener == "example" {
            "example.com".to_owned()
        } else {
            host
        };
        assert_eq!(got.field("host"), Some(want_host.as_str()), "{fields}");
        h1_get(addr, "example.com:99", "/", "");
        let got = b.requests().pop().unwrap();
        assert_eq!(got.field("x-vhost"), Some(other_port), "{fields}");
    }
}

#[test]
fn request_timeout_times_the_request_not_the_response() {
    let slow = H1Backend::start(|_| {
        std::thread::sleep(std::time::Duration::from_millis(600));
        H1Answer::ok("late")
    });
    let (_gw, addr) = gateway("          request_timeout: 0.3s\n", &slow);
    // A body that never comes in whole: 408, as Envoy 1.40 answers.
    let (mut s, mut r) = open(addr);
    s.write_all(b"POST / HTTP/1.1\r\nHost: h\r\ncontent-length: 100\r\n\r\nab")
        .unwrap();
    let started = std::time::Instant::now();
    let resp = read_response(&mut r, false);
    assert_eq!(resp.status, 408);
    assert_eq!(resp.body, b"request timeout");
    assert!(started.elapsed() >= std::time::Duration::from_millis(250));
    // A request in whole is not timed any more: a slow answer comes.
    let resp = h1_get(addr, "h", "/", "");
    assert_eq!(resp.status, 200);
    let body_in_time = "POST / HTTP/1.1\r\nHost: h\r\ncontent-length: 2\r\n\r\nok";
    let (mut s, mut r) = open(addr);
    s.write_all(body_in_time.as_bytes()).unwrap();
    assert_eq!(read_response(&mut r, false).status, 200);
}

#[test]
fn trailing_host_dots_and_the_forwarded_port() {
    let b = backend();
    let (_gw, addr) = gateway(
        "          strip_trailing_host_dot: true\n          append_x_forwarded_port: true\n",
        &b,
    );
    h1_get(addr, "example.com.", "/", "");
    let got = b.requests().pop().unwrap();
    assert_eq!(got.field("x-vhost"), Some("example"));
    assert_eq!(got.field("host"), Some("example.com"));
    let port = addr.port().to_string();
    assert_eq!(got.field("x-forwarded-port"), Some(port.as_str()));
    // Not an edge listener: a client's is kept.
    h1_get(addr, "h", "/", "x-forwarded-port: 443\r\n");
    assert_eq!(
        b.requests().pop().unwrap().field("x-forwarded-port"),
        Some("443")
    );
}

#[test]
fn internal_clients_steer_retries_and_external_ones_do_not() {
    let failing = H1Backend::start(|_| {
        H1Answer::raw("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n")
    });
    let steer = "x-envoy-retry-on: 5xx\r\nx-envoy-max-retries: 2\r\n";
    let internal = "          use_remote_address: true\n          internal_address_config: { cidr_ranges: [ { address_prefix: 127.0.0.0, prefix_len: 8 } ] }\n";
    // (settings, attempts the backend saw): Envoy 1.40's case B and A.
    for (fields, attempts) in [(internal, 3), ("          use_remote_address: true\n", 1)] {
        let (_gw, addr) = gateway(fields, &failing);
        let before = failing.requests().len();
        let resp = h1_get(addr, "h", "/", steer);
        assert_eq!(resp.status, 503);
        assert_eq!(failing.requests().len() - before, attempts, "{fields}");
    }
}

/// What the backend got for a request through a gateway whose node is
/// `node` (id, cluster) and whose manager has `add_user_agent: true`.
fn with_node(node: (&str, &str), extra: &str) -> H1Request {
    let b = backend();
    let mut bs = bootstrap("          add_user_agent: true", &b);
    (bs.node.id, bs.node.cluster) = (node.0.into(), node.1.into());
    let gw = start(bs, 1);
    let addr = gw.listener("ingress").expect("listener");
    h1_get(addr, "h", "/", extra);
    b.requests().pop().expect("a request")
}

#[test]
fn add_user_agent_names_the_node_as_envoy_does() {
    // No user-agent: the node's cluster is one; the node's names added.
    let r = with_node(("node-1", "front-cluster"), "");
    assert_eq!(r.field("user-agent"), Some("front-cluster"));
    assert_eq!(
        r.field("x-envoy-downstream-service-cluster"),
        Some("front-cluster")
    );
    assert_eq!(r.field("x-envoy-downstream-service-node"), Some("node-1"));
    // The client's own user-agent stays; an empty one is filled; the
    // client's node fields are replaced.
    let r = with_node(("node-1", "front-cluster"), "user-agent: curl/8\r\n");
    assert_eq!(r.field("user-agent"), Some("curl/8"));
    let r = with_node(("node-1", "front-cluster"), "user-agent:\r\n");
    assert_eq!(r.field("user-agent"), Some("front-cluster"));
    let evil =
        "x-envoy-downstream-service-cluster: evil\r\nx-envoy-downstream-service-node: evilnode\r\n";
    let r = with_node(("node-1", "front-cluster"), evil);
    let all = |n: &str| -> Vec<&str> {
        r.fields
            .iter()
            .filter(|(k, _)| k == n)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    assert_eq!(all("x-envoy-downstream-service-cluster"), ["front-cluster"]);
    assert_eq!(all("x-envoy-downstream-service-node"), ["node-1"]);
    // A node without a cluster: empty values, as Envoy sends them; no id,
    // no node field of ours (a non-edge client's is kept, as in Envoy).
    let r = with_node(("", ""), evil);
    assert_eq!(r.field("user-agent"), Some(""));
    assert_eq!(r.field("x-envoy-downstream-service-cluster"), Some(""));
    assert_eq!(r.field("x-envoy-downstream-service-node"), Some("evilnode"));
}

#[test]
fn the_uuid_request_id_extension_is_taken_and_others_are_refused() {
    let b = backend();
    let uuid = r#"          request_id_extension:
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig
              pack_trace_reason: true
              use_request_id_for_trace_sampling: false"#;
    let (_gw, addr) = gateway(uuid, &b);
    h1_get(addr, "h", "/", "");
    let id = b
        .requests()
        .pop()
        .unwrap()
        .field("x-request-id")
        .unwrap()
        .to_owned();
    // UUID v4, as without the extension (no tracing to pack a reason for).
    assert_eq!((id.len(), &id[14..15]), (36, "4"), "{id}");
    let other = r#"          request_id_extension:
            typed_config: { "@type": type.googleapis.com/google.protobuf.Empty }"#;
    let table = "            virtual_hosts: []";
    let e = support::yaml::hcm_bootstrap(other, table, "")
        .expect_err("refused")
        .to_string();
    assert!(e.contains("request_id_extension.typed_config"), "{e}");
}
