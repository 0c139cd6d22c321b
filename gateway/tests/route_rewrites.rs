//! A forwarding route's rewrites: `regex_rewrite` (the path the backend sees, query kept, every match replaced, exclusive with `prefix_rewrite`), the host rewrites (`host_rewrite_header`, `auto_host_rewrite`, `host_rewrite_path_regex`, `append_x_forwarded_host`) and `cluster_header`, as Envoy 1.40 makes them.

mod support;

use std::io::Write;

use support::h1_backend::{H1Answer, H1Backend};
use support::h1_client::*;
use support::*;

fn table(rewrite: &str) -> String {
    format!(
        r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{ prefix: / }}
                route: {{ cluster: web, {rewrite} }}"#
    )
}

fn clusters(b: &H1Backend) -> String {
    let a = b.addr();
    format!(
        "  - name: web\n    load_assignment:\n      cluster_name: web\n      endpoints:\n      - lb_endpoints:\n        - {}\n",
        support::yaml::endpoint(&a.ip().to_string(), a.port(), "")
    )
}

#[test]
fn regex_rewrite_changes_the_path_the_backend_sees() {
    let b = H1Backend::start(|_| H1Answer::ok("ok"));
    let rewrite = r"regex_rewrite: { pattern: { regex: '^/service/([^/]+)(/.*)$' }, substitution: '\2/instance/\1' }";
    let bs =
        support::yaml::route_table_bootstrap(&table(rewrite), &clusters(&b)).expect("bootstrap");
    let gw = start(bs, 1);
    let addr = gw.listener("ingress").expect("listener");
    for (path, want) in [
        ("/service/foo/v1/api?x=1", "/v1/api/instance/foo?x=1"),
        // No match: as it came.
        ("/other?q", "/other?q"),
    ] {
        let (mut s, mut r) = open(addr);
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes())
            .unwrap();
        assert_eq!(read_response(&mut r, false).status, 200);
        assert_eq!(b.requests().pop().unwrap().target, want);
    }
}

#[test]
fn prefix_and_regex_rewrites_exclude_each_other() {
    let b = H1Backend::start(|_| H1Answer::ok("ok"));
    let both = r"prefix_rewrite: /x, regex_rewrite: { pattern: { regex: a }, substitution: b }";
    let e = support::yaml::route_table_bootstrap(&table(both), &clusters(&b))
        .expect_err("refused")
        .to_string();
    assert!(
        e.contains("route.regex_rewrite") && e.contains("only one"),
        "{e}"
    );
}

/// (route fields, endpoint fields, path, request fields) → the `host` and
/// `x-forwarded-host` the backend saw; Envoy 1.40's answers to the same
/// routes and requests (recorded 2026-11-27).
#[test]
fn host_rewrites_as_envoy_makes_them() {
    let b = H1Backend::start(|_| H1Answer::ok("ok"));
    let a = b.addr();
    let cases = [
        (
            "host_rewrite_header: x-host",
            "",
            "/",
            "x-host: foo.example:81\r\n",
            "foo.example:81",
            None,
        ),
        // Absent or empty: the host as it came.
        ("host_rewrite_header: x-host", "", "/", "", "a", None),
        (
            "host_rewrite_header: x-host",
            "",
            "/",
            "x-host:\r\n",
            "a",
            None,
        ),
        (
            "host_rewrite_literal: lit.example, append_x_forwarded_host: true",
            "",
            "/",
            "",
            "lit.example",
            Some("a"),
        ),
        (
            "host_rewrite_literal: lit.example, append_x_forwarded_host: true",
            "",
            "/",
            "x-forwarded-host: prev.example\r\n",
            "lit.example",
            Some("prev.example,a"),
        ),
        // Nothing rewritten: no x-forwarded-host of ours.
        (
            "host_rewrite_header: x-host, append_x_forwarded_host: true",
            "",
            "/",
            "",
            "a",
            None,
        ),
        (
            "auto_host_rewrite: true",
            ", hostname: be.example",
            "/",
            "",
            "be.example",
            None,
        ),
        ("auto_host_rewrite: true", "", "/", "", "a", None),
        (
            r"host_rewrite_path_regex: { pattern: { regex: '^/prefix/(.+)/.+$' }, substitution: '\1' }",
            "",
            "/prefix/foo.example/x?q=1",
            "",
            "foo.example",
            None,
        ),
    ];
    for (rewrite, ep, path, extra, host, xfh) in cases {
        let clusters = format!(
            "  - name: web\n    load_assignment:\n      cluster_name: web\n      endpoints:\n      - lb_endpoints:\n        - {}\n",
            support::yaml::endpoint(&a.ip().to_string(), a.port(), ep)
        );
        let bs =
            support::yaml::route_table_bootstrap(&table(rewrite), &clusters).expect("bootstrap");
        let gw = start(bs, 1);
        let addr = gw.listener("ingress").expect("listener");
        let (mut s, mut r) = open(addr);
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: a\r\n{extra}\r\n").as_bytes())
            .unwrap();
        assert_eq!(read_response(&mut r, false).status, 200, "{rewrite}");
        let got = b.requests().pop().unwrap();
        assert_eq!(got.field("host"), Some(host), "{rewrite} {extra:?}");
        assert_eq!(got.field("x-forwarded-host"), xfh, "{rewrite} {extra:?}");
        if extra.starts_with("x-host: ") {
            assert!(got.field("x-host").is_some(), "the field still goes");
        }
    }
}

#[test]
fn cluster_header_names_the_cluster_per_request() {
    let b = H1Backend::start(|_| H1Answer::ok("ok"));
    let routes = |extra: &str| {
        format!(
            r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{ prefix: / }}
                route: {{ cluster_header: X-Cluster{extra} }}"#
        )
    };
    for (extra, missing) in [
        ("", 503),
        (", cluster_not_found_response_code: NOT_FOUND", 404),
    ] {
        let bs =
            support::yaml::route_table_bootstrap(&routes(extra), &clusters(&b)).expect("bootstrap");
        let gw = start(bs, 1);
        let addr = gw.listener("ingress").expect("listener");
        for (field, status) in [
            ("x-cluster: web\r\n", 200),
            ("x-cluster: nope\r\n", missing),
            ("x-cluster:\r\n", missing),
            ("", missing),
        ] {
            let (mut s, mut r) = open(addr);
            s.write_all(format!("GET / HTTP/1.1\r\nHost: a\r\n{field}\r\n").as_bytes())
                .unwrap();
            let resp = read_response(&mut r, false);
            assert_eq!(resp.status, status, "{extra} {field:?}");
            if status != 200 {
                // Envoy 1.40: no body.
                assert!(resp.body.is_empty());
            }
        }
        let got = b.requests().pop().unwrap();
        assert_eq!(got.field("x-cluster"), Some("web"), "the field still goes");
    }
    let e = support::yaml::route_table_bootstrap(
        &routes("").replace("X-Cluster", "':path'"),
        &clusters(&b),
    )
    .expect_err("refused")
    .to_string();
    assert!(e.contains("route.cluster_header"), "{e}");
}
