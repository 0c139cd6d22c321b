//! Routes that answer themselves: `redirect` (each part of the `location`, the status codes) and `direct_response` (inline, file and empty bodies, HEAD, 204, a 3xx's own `location`), over HTTP/1.1 and HTTP/2, counted in `/stats`; and their config errors. The expected answers are Envoy 1.40's to the same bootstrap and requests (recorded 2026-11-27).

mod support;

use std::io::Write;
use std::net::SocketAddr;

use support::h1_client::*;
use support::*;

/// The routes under test, one per prefix, in one virtual host.
const ROUTES: &str = r#"
              - { match: { prefix: /https/ }, redirect: { https_redirect: true } }
              - { match: { prefix: /host/ }, redirect: { host_redirect: new.example.com } }
              - { match: { prefix: /port/ }, redirect: { port_redirect: 8443 } }
              - { match: { prefix: /pathq/ }, redirect: { path_redirect: "/new?y=2", strip_query: true } }
              - { match: { prefix: /old/ }, redirect: { prefix_rewrite: /new/, response_code: PERMANENT_REDIRECT } }
              - match: { prefix: /r/ }
                redirect:
                  regex_rewrite: { pattern: { regex: '^/r/(\d+)/(.*)$' }, substitution: '/s/\2/\1' }
                  response_code: FOUND
              - { match: { prefix: /strip/ }, redirect: { strip_query: true, response_code: SEE_OTHER } }
              - { match: { prefix: /ok }, direct_response: { status: 200, body: { inline_string: "ok\n" } } }
              - { match: { prefix: /down }, direct_response: { status: 503 } }
              - { match: { prefix: /none }, direct_response: { status: 204, body: { inline_string: "should-not" } } }
              - { match: { prefix: /moved }, direct_response: { status: 301, body: { inline_string: "moved" } } }
              - { match: { prefix: /file }, direct_response: { status: 200, body: { filename: BODY_FILE } } }
"#;

fn bootstrap_with(routes: &str, table_fields: &str) -> Result<engine::Bootstrap, xds::Error> {
    let table = format!(
        r#"            {table_fields}
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:{routes}"#
    );
    support::yaml::route_table_bootstrap(&table, "")
}

fn gateway() -> (gateway::GatewayHandle, SocketAddr) {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let file = std::env::temp_dir().join(format!("gw-body-{}-{n}", std::process::id()));
    std::fs::write(&file, "from-file\nline2\n").unwrap();
    let routes = ROUTES.replace("BODY_FILE", &file.display().to_string());
    let bootstrap = bootstrap_with(&routes, "");
    // Read at load: the file is not needed past this.
    std::fs::remove_file(&file).unwrap();
    let gw = start(bootstrap.expect("bootstrap"), 1);
    let addr = gw.listener("ingress").expect("listener");
    (gw, addr)
}

/// One HTTP/1.1 request on a connection of its own.
fn h1(addr: SocketAddr, method: &str, host: &str, path: &str, extra: &str) -> Response {
    let (mut s, mut r) = open(addr);
    let req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n");
    s.write_all(req.as_bytes()).unwrap();
    read_response(&mut r, method == "HEAD")
}

#[test]
fn redirects_compose_the_location_as_envoy() {
    let (_gw, addr) = gateway();
    let xfp_https = "x-forwarded-proto: https\r\n";
    // (host, path, extra fields) → (status, location)
    let cases = [
        (
            "example.com",
            "/https/a/b?x=1",
            "",
            301,
            "https://example.com/https/a/b?x=1",
        ),
        (
            "example.com:80",
            "/https/a/b?x=1",
            "",
            301,
            "https://example.com/https/a/b?x=1",
        ),
        (
            "example.com:8080",
            "/https/a",
            "",
            301,
            "https://example.com:8080/https/a",
        ),
        (
            "example.com:443",
            "/https/a",
            "",
            301,
            "https://example.com:443/https/a",
        ),
        // The client's x-forwarded-proto is kept (not an edge listener)
        // and is the request's scheme: https already, :80 kept.
        (
            "example.com:80",
            "/https/a",
            xfp_https,
            301,
            "https://example.com:80/https/a",
        ),
        ("[::1]:80", "/https/a", "", 301, "https://[::1]/https/a"),
        (
            "example.com:8080",
            "/host/a?x=1",
            "",
            301,
            "http://new.example.com/host/a?x=1",
        ),
        (
            "example.com:8080",
            "/port/a?x=1",
            "",
            301,
            "http://example.com:8443/port/a?x=1",
        ),
        (
            "example.com",
            "/pathq/a?x=1",
            "",
            301,
            "http://example.com/new?y=2",
        ),
        (
            "example.com",
            "/old/x?q=1",
            "",
            308,
            "http://example.com/new/x?q=1",
        ),
        (
            "example.com",
            "/r/123/foo/bar?x=1",
            "",
            302,
            "http://example.com/s/foo/bar/123?x=1",
        ),
        (
            "example.com",
            "/r/abc/foo?x=1",
            "",
            302,
            "http://example.com/r/abc/foo?x=1",
        ),
        (
            "example.com:8080",
            "/strip/a?x=1&y=2",
            "",
            303,
            "http://example.com:8080/strip/a",
        ),
    ];
    for (host, path, extra, status, location) in cases {
        let resp = h1(addr, "GET", host, path, extra);
        assert_eq!(resp.status, status, "{host}{path}");
        assert_eq!(resp.header("location"), Some(location), "{host}{path}");
        assert_eq!(resp.header("content-length"), Some("0"), "{host}{path}");
        assert_eq!(resp.header("content-type"), None);
        assert!(resp.body.is_empty());
    }
}

#[test]
fn a_redirect_keeps_the_connection_and_counts() {
    let (gw, addr) = gateway();
    let (mut s, mut r) = open(addr);
    for _ in 0..2 {
        s.write_all(b"GET /https/k HTTP/1.1\r\nHost: a.example\r\n\r\n")
            .unwrap();
        let resp = read_response(&mut r, false);
        assert_eq!(resp.status, 301);
        assert_eq!(resp.header("location"), Some("https://a.example/https/k"));
        assert_eq!(resp.header("connection"), None, "kept alive");
    }
    let admin = gw.admin_addr.expect("admin");
    assert_eq!(metric(admin, "gateway_downstream_rq_redirect"), 2.0);
    assert_eq!(metric(admin, "gateway_downstream_rq_direct_response"), 0.0);
}

#[test]
fn direct_responses_over_http1() {
    let (gw, addr) = gateway();
    let resp = h1(addr, "GET", "a", "/ok", "");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"ok\n");
    assert_eq!(resp.header("content-type"), Some("text/plain"));
    assert_eq!(resp.header("content-length"), Some("3"));
    // HEAD: the length of the body it would have, no body.
    let resp = h1(addr, "HEAD", "a", "/ok", "");
    assert_eq!(
        (resp.status, resp.header("content-length")),
        (200, Some("3"))
    );
    // No body: no content-type.
    let resp = h1(addr, "GET", "a", "/down", "");
    assert_eq!(resp.status, 503);
    assert_eq!(resp.header("content-type"), None);
    assert!(resp.body.is_empty());
    // A 204 has no content, whatever the config says (Envoy writes the
    // bytes anyway).
    let (mut s, mut r) = open(addr);
    s.write_all(b"GET /none HTTP/1.1\r\nHost: a\r\n\r\nGET /ok HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    let resp = read_response(&mut r, false);
    assert_eq!(resp.status, 204);
    assert_eq!(resp.header("content-length"), None);
    // The next response on the connection follows at once: no stray bytes.
    let next = read_response(&mut r, false);
    assert_eq!((next.status, &next.body[..]), (200, &b"ok\n"[..]));
    let resp = h1(addr, "GET", "a", "/file", "");
    assert_eq!(resp.body, b"from-file\nline2\n");
    // A 3xx points at the request's own URL, scheme from x-forwarded-proto.
    let resp = h1(
        addr,
        "GET",
        "ex.com:8080",
        "/moved/x?q=1",
        "x-forwarded-proto: https\r\n",
    );
    assert_eq!(resp.status, 301);
    assert_eq!(
        resp.header("location"),
        Some("https://ex.com:8080/moved/x?q=1")
    );
    assert_eq!(resp.body, b"moved");
    let admin = gw.admin_addr.expect("admin");
    assert_eq!(metric(admin, "gateway_downstream_rq_direct_response"), 7.0);
    assert_eq!(metric(admin, "gateway_downstream_rq_redirect"), 0.0);
}

#[test]
fn redirects_and_direct_responses_over_http2() {
    let (_gw, addr) = gateway();
    client(move || async move {
        let c = connect(addr).await;
        // The h2 client sends `:authority test.local`, `:scheme http`.
        let r = get(&c, "/https/a?x=1", &[]).await.unwrap();
        assert_eq!(r.status, 301);
        assert_eq!(r.header("location"), Some("https://test.local/https/a?x=1"));
        assert!(r.body.is_empty());
        let r = get(&c, "/old/x", &[]).await.unwrap();
        assert_eq!(
            (r.status.as_u16(), r.header("location")),
            (308, Some("http://test.local/new/x"))
        );
        let r = get(&c, "/ok", &[]).await.unwrap();
        assert_eq!((r.status.as_u16(), &r.body[..]), (200, &b"ok\n"[..]));
        assert_eq!(r.header("content-type"), Some("text/plain"));
        // 204 with a configured body: no DATA (Envoy's breaks the stream).
        let r = get(&c, "/none", &[]).await.unwrap();
        assert_eq!((r.status.as_u16(), r.body.len()), (204, 0));
    });
}

#[test]
fn bad_redirects_and_direct_responses_are_refused_by_path() {
    let refused = |routes: &str, table: &str| {
        bootstrap_with(routes, table)
            .expect_err("refused")
            .to_string()
    };
    let route = |action: &str| format!("\n              - {{ match: {{ prefix: / }}, {action} }}");
    let e = refused(&route("direct_response: { status: 600 }"), "");
    assert!(
        e.contains("routes[0].direct_response.status") && e.contains("[200, 600)"),
        "{e}"
    );
    let e = refused(&route("direct_response: { status: 199 }"), "");
    assert!(e.contains("direct_response.status"), "{e}");
    let big = "x".repeat(4097);
    let e = refused(
        &route(&format!(
            "direct_response: {{ status: 200, body: {{ inline_string: {big} }} }}"
        )),
        "",
    );
    assert!(
        e.contains("direct_response.body") && e.contains("4097 bytes"),
        "{e}"
    );
    // The table's own limit raises it; exactly the limit is accepted.
    let body = route(&format!(
        "direct_response: {{ status: 200, body: {{ inline_string: {big} }} }}"
    ));
    assert!(bootstrap_with(&body, "max_direct_response_body_size_bytes: 4097").is_ok());
    let at_limit = "x".repeat(4096);
    let at_limit = route(&format!(
        "direct_response: {{ status: 200, body: {{ inline_string: {at_limit} }} }}"
    ));
    assert!(bootstrap_with(&at_limit, "").is_ok());
    let e = refused(
        &route("direct_response: { status: 200, body: { filename: /nonexistent/body } }"),
        "",
    );
    assert!(e.contains("direct_response.body"), "{e}");
    let e = refused(&route("redirect: { port_redirect: 70000 }"), "");
    assert!(e.contains("redirect.port_redirect"), "{e}");
    let e = refused(&route("redirect: { response_code: 5 }"), "");
    assert!(e.contains("redirect.response_code"), "{e}");
    let e = refused(
        &route(r"redirect: { regex_rewrite: { pattern: { regex: '(' }, substitution: x } }"),
        "",
    );
    assert!(e.contains("redirect.regex_rewrite.pattern"), "{e}");
    let e = refused(
        &route(r"redirect: { regex_rewrite: { pattern: { regex: 'a(b)' }, substitution: '\2' } }"),
        "",
    );
    assert!(e.contains("regex_rewrite.substitution"), "{e}");
}
