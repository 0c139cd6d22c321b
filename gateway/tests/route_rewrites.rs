//! A forwarding route's `regex_rewrite`: the path the backend sees (query kept, every match replaced), and its exclusion with `prefix_rewrite`.

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
