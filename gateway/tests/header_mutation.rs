//! `request_headers_to_add/remove` and `response_headers_to_add/remove` on a route, its virtual host and its table, end to end: what the backend receives and the client sees, on proxied responses and on the replies the router makes (redirects, direct responses, no healthy upstream), not on 404s; and the names a config may not touch. Expected values are Envoy 1.40's on the same bootstrap (recorded 2026-11-27).

mod support;

use std::net::SocketAddr;

use support::h1_backend::{H1Answer, H1Backend};
use support::h1_client::*;
use support::*;

/// A table whose three levels each add `x-m` (request and response) with
/// `action`, in front of `backend`; `/redirect`, `/direct` and `/down`
/// (a cluster without hosts) answer from the router.
fn bootstrap(
    backend: SocketAddr,
    action: &str,
    table_extra: &str,
) -> Result<engine::Bootstrap, xds::Error> {
    let add = |v: &str| {
        format!(
            "[{{ header: {{ key: x-m, value: {v} }}, append_action: {action} }}, {{ header: {{ key: x-backend, value: {v} }}, append_action: {action} }}]"
        )
    };
    let table = format!(
        r#"            {table_extra}
            request_headers_to_add: {rc}
            response_headers_to_add: {rc}
            virtual_hosts:
            - name: all
              domains: ["*"]
              request_headers_to_add: {vh}
              response_headers_to_add: {vh}
              routes:
              - match: {{ prefix: /redirect }}
                redirect: {{ path_redirect: /x }}
                response_headers_to_add: {route}
              - match: {{ prefix: /direct }}
                direct_response: {{ status: 200, body: {{ inline_string: d }} }}
                response_headers_to_add: {route}
              - match: {{ prefix: /down }}
                route: {{ cluster: empty }}
                response_headers_to_add: {route}
              - match: {{ prefix: /fmt }}
                route: {{ cluster: web }}
                request_headers_to_add:
                - header: {{ key: x-peer, value: "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%" }}
                - header: {{ key: x-ua, value: "%REQ(user-agent)%" }}
                - header: {{ key: x-absent, value: "%REQ(x-nothing)%" }}
                response_headers_to_add:
                - header: {{ key: x-upstream, value: "%UPSTREAM_HOST%" }}
                - header: {{ key: x-seen, value: "%RESP(x-backend)% %RESPONSE_CODE%" }}
                response_headers_to_remove: [server]
              - match: {{ prefix: / }}
                route: {{ cluster: web }}
                request_headers_to_add: {route}
                response_headers_to_add: {route}
            - name: other
              domains: ["other"]
              routes: []"#,
        rc = add("rc"),
        vh = add("vh"),
        route = add("route"),
    );
    let clusters = format!(
        r#"  - name: web
    connect_timeout: 1s
    load_assignment:
      cluster_name: web
      endpoints:
      - lb_endpoints:
        - endpoint: {{ address: {{ socket_address: {{ address: {ip}, port_value: {port} }} }} }}
  - name: empty
    connect_timeout: 1s
    load_assignment: {{ cluster_name: empty }}
"#,
        ip = backend.ip(),
        port = backend.port(),
    );
    support::yaml::route_table_bootstrap(&table, &clusters)
}

fn backend() -> H1Backend {
    H1Backend::start(|_| {
        H1Answer::raw(
            "HTTP/1.1 200 OK\r\nx-backend: 1\r\nserver: backend\r\ncontent-length: 2\r\n\r\nok",
        )
    })
}

fn send(addr: SocketAddr, host: &str, path: &str, extra: &str) -> Response {
    h1_get(addr, host, path, &format!("user-agent: probe\r\n{extra}"))
}

fn values<'a>(fields: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    fields
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
        .collect()
}

/// (what the backend got of `x-m`, what the client got of `x-m` and of
/// `x-backend`) for one request to `/` with `action` at every level.
fn through(
    action: &str,
    most_specific: bool,
    client_x_m: bool,
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let b = backend();
    let table = if most_specific {
        "most_specific_header_mutations_wins: true"
    } else {
        ""
    };
    let gw = start(bootstrap(b.addr(), action, table).expect("bootstrap"), 1);
    let addr = gw.listener("ingress").expect("listener");
    let extra = if client_x_m { "x-m: client\r\n" } else { "" };
    let resp = send(addr, "a", "/", extra);
    assert_eq!(resp.status, 200);
    let got = b.requests().pop().expect("a request");
    let owned = |v: Vec<&str>| v.into_iter().map(String::from).collect::<Vec<_>>();
    (
        owned(values(&got.fields, "x-m")),
        owned(values(&resp.headers, "x-m")),
        owned(values(&resp.headers, "x-backend")),
    )
}

#[test]
fn three_levels_in_envoys_order_both_ways() {
    let (up, down_m, down_b) = through("APPEND_IF_EXISTS_OR_ADD", false, true);
    assert_eq!(up, ["client", "route", "vh", "rc"]);
    assert_eq!(down_m, ["route", "vh", "rc"]);
    assert_eq!(down_b, ["1", "route", "vh", "rc"]);
    let (up, down_m, down_b) = through("OVERWRITE_IF_EXISTS_OR_ADD", false, true);
    assert_eq!(
        (up, down_m, down_b),
        (vec!["rc".into()], vec!["rc".into()], vec!["rc".into()])
    );
    let (up, _, down_b) = through("ADD_IF_ABSENT", false, true);
    assert_eq!((up, down_b), (vec!["client".into()], vec!["1".into()]));
    let (up, down_m, down_b) = through("OVERWRITE_IF_EXISTS", false, false);
    assert!(up.is_empty() && down_m.is_empty());
    assert_eq!(down_b, ["rc"]);
    let (up, down_m, _) = through("APPEND_IF_EXISTS_OR_ADD", true, false);
    assert_eq!(
        (up, down_m),
        (
            vec!["rc".into(), "vh".into(), "route".into()],
            vec!["rc".into(), "vh".into(), "route".into()]
        )
    );
}

#[test]
fn replies_the_router_makes_carry_the_response_headers_and_404s_do_not() {
    let b = backend();
    let gw = start(
        bootstrap(b.addr(), "APPEND_IF_EXISTS_OR_ADD", "").expect("bootstrap"),
        1,
    );
    let addr = gw.listener("ingress").expect("listener");
    for (path, status) in [("/redirect", 301), ("/direct", 200), ("/down", 503)] {
        let resp = send(addr, "a", path, "");
        assert_eq!(resp.status, status, "{path}");
        assert_eq!(
            values(&resp.headers, "x-m"),
            ["route", "vh", "rc"],
            "{path}"
        );
    }
    // No route: no route's headers (the other virtual host has none).
    let resp = send(addr, "other", "/", "");
    assert_eq!(resp.status, 404);
    assert!(values(&resp.headers, "x-m").is_empty());
    assert!(b.requests().is_empty(), "nothing went upstream");
}

#[test]
fn formatted_values_read_the_stream() {
    let b = backend();
    let gw = start(
        bootstrap(b.addr(), "APPEND_IF_EXISTS_OR_ADD", "").expect("bootstrap"),
        1,
    );
    let addr = gw.listener("ingress").expect("listener");
    let resp = send(addr, "a", "/fmt", "");
    assert_eq!(resp.status, 200);
    let got = b.requests().pop().expect("a request");
    assert_eq!(got.field("x-peer"), Some("127.0.0.1"));
    assert_eq!(got.field("x-ua"), Some("probe"));
    // A value that formats to nothing is left out.
    assert_eq!(got.field("x-absent"), None);
    assert_eq!(
        resp.header("x-upstream"),
        Some(b.addr().to_string().as_str())
    );
    assert_eq!(resp.header("x-seen"), Some("1 200"));
    // The backend's own server field removed by the route, and the
    // connection manager's set after it, as Envoy 1.40 does.
    assert_eq!(resp.header("server"), Some("envoy"));
}

#[test]
fn names_the_gateway_owns_and_bad_formats_are_refused_by_path() {
    let refused = |table: &str| {
        bootstrap(
            "127.0.0.1:1".parse().unwrap(),
            "APPEND_IF_EXISTS_OR_ADD",
            table,
        )
        .expect_err("refused")
        .to_string()
    };
    // The table's lists come after `table` in the YAML: repeating a key is
    // refused, so use the per-level removal lists, which the bootstrap
    // leaves unset.
    let e = refused("request_headers_to_remove: [host]");
    assert!(
        e.contains("route_config.request_headers_to_remove[0]")
            && e.contains("may not be modified"),
        "{e}"
    );
    let e = refused("response_headers_to_remove: [connection]");
    assert!(e.contains("response_headers_to_remove[0]"), "{e}");
    let e = refused("response_headers_to_remove: [\"bad name\"]");
    assert!(e.contains("not a header name"), "{e}");
}

#[test]
fn added_names_the_gateway_owns_and_unknown_operators_are_refused() {
    let with_route_add = |header: &str| {
        let table = format!(
            r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{ prefix: / }}
                direct_response: {{ status: 200 }}
                request_headers_to_add: [{{ header: {header} }}]"#
        );
        support::yaml::route_table_bootstrap(&table, "")
            .expect_err("refused")
            .to_string()
    };
    for key in [":path", "host", ":authority", "transfer-encoding"] {
        let e = with_route_add(&format!("{{ key: \"{key}\", value: x }}"));
        assert!(
            e.contains("request_headers_to_add[0].header.key") && e.contains("may not be modified"),
            "{e}"
        );
    }
    let e = with_route_add("{ key: x-a, value: \"%BOGUS%\" }");
    assert!(
        e.contains("request_headers_to_add[0].header.value") && e.contains("BOGUS"),
        "{e}"
    );
    let e = with_route_add("{ key: x-a, value: \"100%\" }");
    assert!(e.contains("header.value"), "{e}");
}
