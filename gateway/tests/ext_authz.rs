//! The external authorisation filter (`envoy.filters.http.ext_authz`) with an HTTP service: what the check carries, how each answer is taken (allow with headers, denial, error), failure modes, the body, per-route settings and the counters. Expected answers are Envoy 1.40's to the same configs and requests (recorded side by side, 2026-11-28); the gRPC service is in `ext_authz_grpc.rs`.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use support::h1_backend::{H1Answer, H1Backend, H1Request};
use support::h1_client::*;
use support::*;

/// A gateway whose connection manager checks with the HTTP service
/// `authz` (`service_fields`: more `http_service` fields; `filter_fields`:
/// more `ExtAuthz` fields), then routes `/open` (checks disabled) and
/// every other path to `backend`.
fn gateway(
    authz: SocketAddr,
    backend: SocketAddr,
    service_fields: &str,
    filter_fields: &str,
) -> (gateway::GatewayHandle, SocketAddr, SocketAddr) {
    let filters = format!(
        r#"          - name: envoy.filters.http.ext_authz
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz
              http_service:
                server_uri: {{ uri: "http://authz.local:9999/zzz", cluster: authz, timeout: 0.2s }}
                path_prefix: /check
{service_fields}
{filter_fields}"#
    );
    let routes = r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: /open }
                route: { cluster: backend }
                typed_per_filter_config:
                  envoy.filters.http.ext_authz:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute
                    disabled: true
              - match: { prefix: /nobody }
                route: { cluster: backend }
                typed_per_filter_config:
                  envoy.filters.http.ext_authz:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute
                    check_settings: { disable_request_body_buffering: true }
              - match: { prefix: / }
                route: { cluster: backend }"#;
    let clusters = format!(
        "{}{}",
        support::yaml::h1_cluster("authz", authz),
        support::yaml::h1_cluster("backend", backend)
    );
    let bootstrap =
        support::yaml::filters_bootstrap("", &filters, routes, &clusters).expect("bootstrap");
    let gw = start(bootstrap, 1);
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    (gw, addr, admin)
}

fn counter(admin: SocketAddr, outcome: &str) -> f64 {
    metric(
        admin,
        &format!("gateway_ext_authz_total{{outcome=\"{outcome}\"}}"),
    )
}

fn echo() -> H1Backend {
    H1Backend::start(|_| H1Answer::ok("upstream"))
}

/// The one request a backend saw.
fn only(be: &H1Backend) -> H1Request {
    let seen = be.requests();
    assert_eq!(seen.len(), 1, "{seen:?}");
    seen.into_iter().next().unwrap()
}

fn names(r: &H1Request) -> Vec<&str> {
    r.fields.iter().map(|(n, _)| n.as_str()).collect()
}

#[test]
fn the_check_carries_the_method_path_host_and_authorization_only() {
    let authz = H1Backend::start(|_| H1Answer::ok("yes"));
    let be = echo();
    let (_gw, addr, admin) = gateway(authz.addr(), be.addr(), "", "");
    let r = h1_get(
        addr,
        "example.com",
        "/foo?x=1",
        "Authorization: Bearer abc\r\nCookie: c=1\r\nX-Custom: c1\r\nX-Custom: c2\r\n",
    );
    assert_eq!((r.status, &r.body[..]), (200, &b"upstream"[..]));
    let check = only(&authz);
    // Envoy: the client's method and path after the prefix, its host.
    assert_eq!(
        (check.method.as_str(), check.target.as_str()),
        ("GET", "/check/foo?x=1")
    );
    assert_eq!(check.field("host"), Some("example.com"));
    assert_eq!(check.field("content-length"), Some("0"));
    assert_eq!(check.field("authorization"), Some("Bearer abc"));
    assert_eq!(check.field("x-envoy-internal"), Some("true"));
    assert_eq!(check.field("x-envoy-expected-rq-timeout-ms"), Some("200"));
    for absent in ["cookie", "x-custom", "x-forwarded-for"] {
        assert_eq!(check.field(absent), None, "{:?}", names(&check));
    }
    // The request goes on as it came.
    assert_eq!(only(&be).field("cookie"), Some("c=1"));
    assert_eq!(counter(admin, "ok"), 1.0);

    // A POST's check is a POST, without its body.
    let r = h1_post(addr, "example.com", "/form", "", b"0123456789abcdef");
    assert_eq!(r.status, 200);
    let post = &authz.requests()[1];
    assert_eq!(post.method, "POST");
    assert_eq!(post.field("content-length"), Some("0"));
    assert!(post.body.is_empty());
}

#[test]
fn allowed_and_disallowed_headers_choose_what_the_check_carries() {
    let authz = H1Backend::start(|_| H1Answer::ok("yes"));
    let be = echo();
    let (_gw, addr, _admin) = gateway(
        authz.addr(),
        be.addr(),
        r#"                authorization_request:
                  headers_to_add: [ { key: x-added, value: fixed }, { key: authorization, value: overridden } ]"#,
        r#"              allowed_headers: { patterns: [ { exact: x-custom }, { prefix: x-b } ] }
              disallowed_headers: { patterns: [ { exact: x-blocked } ] }"#,
    );
    let r = h1_get(
        addr,
        "example.com",
        "/",
        "Authorization: Bearer abc\r\nX-Custom: c1\r\nx-custom: c2\r\nX-Beta: b\r\nX-Blocked: no\r\nCookie: c=1\r\n",
    );
    assert_eq!(r.status, 200);
    let check = only(&authz);
    // Repeated fields joined, as Envoy joins them.
    assert_eq!(check.field("x-custom"), Some("c1,c2"));
    assert_eq!(check.field("x-beta"), Some("b"));
    assert_eq!(check.field("x-blocked"), None);
    assert_eq!(check.field("cookie"), None);
    assert_eq!(check.field("x-added"), Some("fixed"));
    // `headers_to_add` replaces the client's field of that name.
    let auth: Vec<_> = check
        .fields
        .iter()
        .filter(|(n, _)| n == "authorization")
        .collect();
    assert_eq!(auth.len(), 1);
    assert_eq!(auth[0].1, "overridden");
}

#[test]
fn an_allowing_answer_passes_the_headers_the_config_names() {
    let authz = H1Backend::start(|_| {
        H1Answer::raw(
            "HTTP/1.1 200 OK\r\nx-auth-user: alice\r\nx-existing: from-authz\r\nx-extra: e\r\nx-resp-only: r\r\nx-ignored: i\r\ncontent-length: 3\r\n\r\nyes",
        )
    });
    let be = echo();
    let (_gw, addr, _admin) = gateway(
        authz.addr(),
        be.addr(),
        r#"                authorization_response:
                  allowed_upstream_headers: { patterns: [ { exact: x-auth-user }, { exact: x-existing } ] }
                  allowed_upstream_headers_to_append: { patterns: [ { exact: x-extra } ] }
                  allowed_client_headers_on_success: { patterns: [ { exact: x-resp-only } ] }"#,
        "",
    );
    let r = h1_get(
        addr,
        "example.com",
        "/",
        "X-Auth-User: mallory\r\nX-Existing: client\r\nX-Extra: client\r\n",
    );
    assert_eq!((r.status, &r.body[..]), (200, &b"upstream"[..]));
    assert_eq!(r.header("x-resp-only"), Some("r"));
    assert_eq!(r.header("x-auth-user"), None);
    let up = only(&be);
    let all = |name: &str| -> Vec<&str> {
        up.fields
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    };
    // Replaced, not added to: the client cannot claim to be alice's peer.
    assert_eq!(all("x-auth-user"), ["alice"]);
    assert_eq!(all("x-existing"), ["from-authz"]);
    // Appended as a line of its own.
    assert_eq!(all("x-extra"), ["client", "e"]);
    assert!(all("x-ignored").is_empty());
    // The service's framing never reaches the upstream request.
    assert_eq!(up.field("content-length"), None);
}

#[test]
fn a_denial_is_the_services_answer_and_a_5xx_is_an_error() {
    let authz = H1Backend::start(|req| {
        match req.target.as_str() {
        "/check/denied" => H1Answer::raw(
            "HTTP/1.1 403 Forbidden\r\nx-deny-reason: policy\r\nwww-authenticate: Bearer\r\nset-cookie: a=1\r\nset-cookie: b=2\r\nserver: authz\r\ncontent-length: 4\r\n\r\nnope",
        ),
        "/check/moved" => {
            H1Answer::raw("HTTP/1.1 302 Found\r\nlocation: /login\r\ncontent-length: 0\r\n\r\n")
        }
        "/check/created" => H1Answer::raw("HTTP/1.1 201 Created\r\ncontent-length: 0\r\n\r\n"),
        _ => H1Answer::raw("HTTP/1.1 503 Unavailable\r\nx-why: down\r\ncontent-length: 4\r\n\r\ndown"),
    }
    });
    let be = echo();
    let (_gw, addr, admin) = gateway(authz.addr(), be.addr(), "", "");
    let denied = h1_get(addr, "example.com", "/denied", "");
    assert_eq!((denied.status, &denied.body[..]), (403, &b"nope"[..]));
    assert_eq!(denied.header("x-deny-reason"), Some("policy"));
    assert_eq!(denied.header("www-authenticate"), Some("Bearer"));
    let cookies: Vec<_> = denied
        .headers
        .iter()
        .filter(|(n, _)| n == "set-cookie")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(cookies, ["a=1", "b=2"]);
    // A body without a type of its own: text/plain, as Envoy.
    assert_eq!(denied.header("content-type"), Some("text/plain"));
    assert_eq!(denied.header("content-length"), Some("4"));
    assert_ne!(denied.header("server"), Some("authz"));

    let moved = h1_get(addr, "example.com", "/moved", "");
    assert_eq!(
        (moved.status, moved.header("location")),
        (302, Some("/login"))
    );
    // Only 200 allows: a 201 is the client's answer too.
    let created = h1_get(addr, "example.com", "/created", "");
    assert_eq!(created.status, 201);
    // A 5xx is no answer: 403, empty, nothing of the service's.
    let failed = h1_get(addr, "example.com", "/broken", "");
    assert_eq!((failed.status, &failed.body[..]), (403, &b""[..]));
    assert_eq!(failed.header("x-why"), None);
    assert!(be.requests().is_empty());
    assert_eq!(counter(admin, "denied"), 3.0);
    assert_eq!(counter(admin, "error"), 1.0);
    // Envoy's, for this connection manager (no stat_prefix: no label).
    let hcm = "{envoy_http_conn_manager_prefix=\"ingress\"}";
    for (s, v) in [
        ("denied", 3.0),
        ("error", 1.0),
        ("ok", 0.0),
        ("shadow_denied", 0.0),
    ] {
        let series = format!("envoy_http_ext_authz_{s}{hcm}");
        assert_eq!(envoy_metric(admin, &series), v, "{series}");
    }
}

#[test]
fn allowed_client_headers_choose_a_denials_fields() {
    let authz = H1Backend::start(|_| {
        H1Answer::raw(
            "HTTP/1.1 401 Unauthorized\r\nx-deny-reason: policy\r\nwww-authenticate: Bearer\r\nset-cookie: a=1\r\ncontent-type: text/x-authz\r\ncontent-length: 5\r\n\r\nhello",
        )
    });
    let be = echo();
    let (_gw, addr, _admin) = gateway(
        authz.addr(),
        be.addr(),
        r#"                authorization_response:
                  allowed_client_headers: { patterns: [ { exact: x-deny-reason } ] }"#,
        "              max_denied_response_body_bytes: 3",
    );
    let r = h1_get(addr, "example.com", "/", "");
    assert_eq!((r.status, &r.body[..]), (401, &b"hel"[..]));
    assert_eq!(r.header("x-deny-reason"), Some("policy"));
    // Passed whatever the list says, as Envoy passes it.
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    assert_eq!(r.header("set-cookie"), None);
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert_eq!(r.header("content-length"), Some("3"));
}

#[test]
fn a_service_that_hangs_fails_closed_in_its_timeout_and_others_go_on() {
    let authz = H1Backend::start(|_| {
        std::thread::sleep(Duration::from_millis(1500));
        H1Answer::ok("late")
    });
    let be = echo();
    let (_gw, addr, admin) = gateway(authz.addr(), be.addr(), "", "");
    let started = Instant::now();
    let checked = std::thread::spawn(move || h1_get(addr, "example.com", "/slow", ""));
    // Meanwhile a route without checks is served at once.
    let open = h1_get(addr, "example.com", "/open", "");
    assert_eq!(open.status, 200);
    assert!(started.elapsed() < Duration::from_millis(150));
    let r = checked.join().unwrap();
    let took = started.elapsed();
    assert_eq!((r.status, &r.body[..]), (403, &b""[..]));
    assert!(
        took >= Duration::from_millis(190) && took < Duration::from_millis(1200),
        "{took:?}"
    );
    assert_eq!(counter(admin, "error"), 1.0);
    // The route without checks counts nothing.
    assert_eq!(counter(admin, "ok"), 0.0);
    assert_eq!(counter(admin, "disabled"), 0.0);
}

#[test]
fn garbage_or_no_service_is_an_error_and_status_on_error_says_what() {
    // Not HTTP at all.
    let garbage = H1Backend::start(|_| H1Answer::raw("garbage\r\n\r\n").closing());
    let be = echo();
    let (_gw, addr, admin) = gateway(
        garbage.addr(),
        be.addr(),
        "",
        "              status_on_error: { code: 503 }",
    );
    let r = h1_get(addr, "example.com", "/", "");
    assert_eq!((r.status, &r.body[..]), (503, &b""[..]));
    assert_eq!(counter(admin, "error"), 1.0);

    // Nobody listens.
    let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nobody = gone.local_addr().unwrap();
    drop(gone);
    let (_gw2, addr2, _) = gateway(nobody, be.addr(), "", "");
    assert_eq!(h1_get(addr2, "example.com", "/", "").status, 403);
    assert!(be.requests().is_empty());
}

#[test]
fn failure_mode_allow_lets_a_failed_check_through_marked() {
    let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nobody = gone.local_addr().unwrap();
    drop(gone);
    let be = echo();
    let (_gw, addr, admin) = gateway(
        nobody,
        be.addr(),
        "",
        "              failure_mode_allow: true\n              failure_mode_allow_header_add: true",
    );
    let r = h1_get(addr, "example.com", "/", "");
    assert_eq!((r.status, &r.body[..]), (200, &b"upstream"[..]));
    assert_eq!(
        only(&be).field("x-envoy-auth-failure-mode-allowed"),
        Some("true")
    );
    assert_eq!(counter(admin, "error"), 1.0);
    assert_eq!(counter(admin, "failure_mode_allowed"), 1.0);
}

#[test]
fn the_body_goes_along_up_to_its_bound() {
    let authz = H1Backend::start(|_| H1Answer::ok("yes"));
    let be = echo();
    let strict = "              with_request_body: { max_request_bytes: 10 }";
    let (_gw, addr, admin) = gateway(authz.addr(), be.addr(), "", strict);
    let r = h1_post(addr, "example.com", "/small", "", b"hello");
    assert_eq!(r.status, 200);
    let check = only(&authz);
    assert_eq!(check.body, b"hello");
    assert_eq!(check.field("content-length"), Some("5"));
    assert_eq!(check.field("x-envoy-auth-partial-body"), Some("false"));
    assert_eq!(only(&be).body, b"hello");

    // Past the bound: 413, no check made, nothing counted.
    let big = [b'x'; 100];
    let r = h1_post(addr, "example.com", "/big", "", &big);
    assert_eq!(r.status, 413);
    assert_eq!(authz.requests().len(), 1);
    assert_eq!(counter(admin, "ok"), 1.0);
    assert_eq!(counter(admin, "error"), 0.0);

    // A route that takes no body in its checks.
    let r = h1_post(addr, "example.com", "/nobody", "", &big);
    assert_eq!(r.status, 200);
    let check = &authz.requests()[1];
    assert_eq!(check.field("content-length"), Some("0"));
    assert_eq!(check.field("x-envoy-auth-partial-body"), None);
}

#[test]
fn a_partial_body_is_its_start_and_the_upstream_gets_it_all() {
    let authz = H1Backend::start(|_| H1Answer::ok("yes"));
    let be = echo();
    let partial =
        "              with_request_body: { max_request_bytes: 10, allow_partial_message: true }";
    let (_gw, addr, _admin) = gateway(authz.addr(), be.addr(), "", partial);
    // More than any stream window: the upstream still gets all of it.
    let body: Vec<u8> = (0..300_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let r = h1_post(addr, "example.com", "/", "", &body);
    assert_eq!(r.status, 200);
    let check = only(&authz);
    assert_eq!(check.body, &body[..10]);
    assert_eq!(check.field("x-envoy-auth-partial-body"), Some("true"));
    assert_eq!(only(&be).body.len(), body.len());
    // No body at all: no mark.
    assert_eq!(h1_get(addr, "example.com", "/", "").status, 200);
    assert_eq!(authz.requests()[1].field("x-envoy-auth-partial-body"), None);
}

#[test]
fn a_body_longer_than_the_clients_window_is_gathered_whole() {
    let authz = H1Backend::start(|req| match req.body.len() {
        200_000 => H1Answer::ok("yes"),
        n => H1Answer::raw(format!(
            "HTTP/1.1 403 Forbidden\r\ncontent-length: {}\r\n\r\n{n}",
            n.to_string().len()
        )),
    });
    let be = echo();
    let (_gw, addr, _admin) = gateway(
        authz.addr(),
        be.addr(),
        "",
        "              with_request_body: { max_request_bytes: 1000000 }",
    );
    let body = vec![b'z'; 200_000];
    let r = h1_post(addr, "example.com", "/", "", &body);
    assert_eq!((r.status, &r.body[..]), (200, &b"upstream"[..]));
    assert_eq!(only(&be).body.len(), 200_000);
}

#[test]
fn filter_enabled_and_deny_at_disable() {
    let authz = H1Backend::start(|_| H1Answer::ok("yes"));
    let be = echo();
    let off =
        "              filter_enabled: { default_value: { numerator: 0, denominator: HUNDRED } }";
    let (_gw, addr, admin) = gateway(authz.addr(), be.addr(), "", off);
    assert_eq!(h1_get(addr, "example.com", "/", "").status, 200);
    assert!(authz.requests().is_empty());
    assert_eq!(counter(admin, "disabled"), 1.0);

    let deny = format!("{off}\n              deny_at_disable: {{ default_value: true }}");
    let (_gw2, addr2, admin2) = gateway(authz.addr(), be.addr(), "", &deny);
    let r = h1_get(addr2, "example.com", "/", "");
    assert_eq!((r.status, &r.body[..]), (403, &b""[..]));
    assert_eq!(counter(admin2, "disabled"), 1.0);
    assert_eq!(counter(admin2, "error"), 0.0);
    // A route that disables the filter is still served.
    assert_eq!(h1_get(addr2, "example.com", "/open", "").status, 200);
    assert!(authz.requests().is_empty());
}

#[test]
fn a_config_the_gateway_cannot_run_is_refused_by_name() {
    let filter = |fields: &str| {
        format!(
            r#"          - name: envoy.filters.http.ext_authz
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz
{fields}"#
        )
    };
    let routes = support::yaml::one_route("backend", "");
    let clusters = support::yaml::h1_cluster("backend", "127.0.0.1:1".parse().unwrap());
    let cases = [
        ("              failure_mode_allow: true", "one of grpc_service and http_service is required"),
        (
            "              http_service: { server_uri: { uri: \"http://a\", cluster: backend, timeout: 1s } }\n              clear_route_cache: true",
            "clear_route_cache",
        ),
        (
            "              http_service: { server_uri: { uri: \"http://a\", cluster: backend } }",
            "server_uri.timeout",
        ),
        (
            "              grpc_service: { envoy_grpc: { cluster_name: backend } }\n              with_request_body: { max_request_bytes: 0 }",
            "max_request_bytes",
        ),
        (
            "              grpc_service: { google_grpc: { target_uri: x, stat_prefix: y } }",
            "google_grpc",
        ),
    ];
    for (fields, want) in cases {
        let err = support::yaml::filters_bootstrap("", &filter(fields), &routes, &clusters)
            .expect_err(fields)
            .to_string();
        assert!(err.contains(want), "{fields}: {err}");
    }
}

#[test]
fn a_body_of_exactly_the_bound_is_whole_once_its_end_comes() {
    use std::io::Write;
    let authz = H1Backend::start(|_| H1Answer::ok("yes"));
    let be = echo();
    let strict = "              with_request_body: { max_request_bytes: 10 }";
    let (_gw, addr, _admin) = gateway(authz.addr(), be.addr(), "", strict);
    // Ten bytes, then the chunked body's end in a later write.
    let (mut s, mut r) = open(addr);
    let head = "POST / HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n";
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(b"a\r\n0123456789\r\n").unwrap();
    s.flush().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    s.write_all(b"0\r\n\r\n").unwrap();
    let resp = read_response(&mut r, false);
    assert_eq!((resp.status, &resp.body[..]), (200, &b"upstream"[..]));
    let check = only(&authz);
    assert_eq!(check.body, b"0123456789");
    assert_eq!(check.field("x-envoy-auth-partial-body"), Some("false"));
    assert_eq!(only(&be).body, b"0123456789");
}

#[test]
fn a_body_held_by_an_earlier_pause_is_gathered_too() {
    // A fault's delay holds the body first (up to the connection's
    // buffer, 1 MiB); the check then gathers 1.5 MiB past it.
    let authz = H1Backend::start(|req| match req.body.len() {
        1_500_000 => H1Answer::ok("yes"),
        n => H1Answer::raw(format!(
            "HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nx-got: {n}\r\n\r\n"
        )),
    });
    let be = echo();
    let filters = r#"          - name: envoy.filters.http.fault
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault
              delay: { fixed_delay: 0.2s, percentage: { numerator: 100 } }
          - name: envoy.filters.http.ext_authz
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz
              http_service:
                server_uri: { uri: "http://authz", cluster: authz, timeout: 2s }
              with_request_body: { max_request_bytes: 2000000 }"#;
    let clusters = format!(
        "{}{}",
        support::yaml::h1_cluster("authz", authz.addr()),
        support::yaml::h1_cluster("backend", be.addr())
    );
    let routes = support::yaml::one_route("backend", "");
    let bootstrap =
        support::yaml::filters_bootstrap("", filters, &routes, &clusters).expect("bootstrap");
    let gw = start(bootstrap, 1);
    let addr = gw.listener("ingress").expect("listener");
    let body = vec![b'q'; 1_500_000];
    let r = h1_post(addr, "example.com", "/", "", &body);
    assert_eq!(
        (r.status, &r.body[..]),
        (200, &b"upstream"[..]),
        "{:?}",
        r.header("x-got")
    );
    assert_eq!(only(&be).body.len(), 1_500_000);
}

#[test]
fn an_http2_body_with_trailers_is_gathered_and_goes_on_in_order() {
    let authz = H1Backend::start(|_| H1Answer::ok("yes"));
    let be = echo();
    let strict = "              with_request_body: { max_request_bytes: 100 }";
    let (_gw, addr, _admin) = gateway(authz.addr(), be.addr(), "", strict);
    let reply = client(move || async move {
        let c = connect(addr).await;
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-checksum", http::HeaderValue::from_static("abc"));
        request(
            &c,
            "POST",
            "/",
            &[],
            Some(bytes::Bytes::from_static(b"first second")),
            Some(trailers),
        )
        .await
        .expect("reply")
    });
    assert_eq!(reply.status, 200);
    let check = only(&authz);
    assert_eq!(check.body, b"first second");
    assert_eq!(check.field("x-envoy-auth-partial-body"), Some("false"));
    let up = only(&be);
    assert_eq!(up.body, b"first second");
}
