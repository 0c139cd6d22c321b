//! The admin's live dashboard: `/` is one HTML page with its script inline and no outside asset, read-only; `/dashboard.json`, which it polls, carries the listeners, the clusters with their hosts, answers and latency buckets, and the server's state, with hostile names as plain JSON strings (the page writes every value as text).

mod support;

use std::net::TcpListener;

use support::h1_backend::{H1Answer, H1Backend};
use support::h1_client::*;
use support::*;

#[test]
fn the_dashboard_is_one_page_and_its_json_matches_the_stats() {
    let be = H1Backend::start(|r| match r.target.as_str() {
        "/fail" => H1Answer::raw("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n"),
        _ => H1Answer::ok("ok"),
    });
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let routes = r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { path: /dead }
                route: { cluster: "<img src=x onerror=alert(1)>" }
              - match: { prefix: / }
                route: { cluster: backend }"#;
    let clusters = format!(
        "{}{}",
        support::yaml::h1_cluster("backend", be.addr()),
        support::yaml::h1_cluster("\"<img src=x onerror=alert(1)>\"", dead)
    );
    let bootstrap = support::yaml::filters_bootstrap("", "", routes, &clusters).expect("bootstrap");
    let gw = start(bootstrap, 1);
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    for (path, status) in [("/ok", 200), ("/ok", 200), ("/fail", 503), ("/dead", 503)] {
        assert_eq!(h1_get(addr, "example.com", path, "").status, status);
    }

    let (status, page) = admin_get(admin, "/");
    assert_eq!(status, 200);
    assert!(page.starts_with("<!doctype html>"));
    assert!(page.contains("fetch(\"/dashboard.json\""));
    // No outside asset: every script and style is inline.
    for attr in [
        "src=\"http",
        "href=\"http",
        "src=\"//",
        "href=\"//",
        "<link",
        "@import",
    ] {
        assert!(!page.contains(attr), "{attr}");
    }
    // Read-only: no form, nothing posted.
    assert!(!page.contains("<form") && !page.contains("method: \"POST\""));
    // Values go in as text, never as markup.
    assert!(!page.contains("innerHTML"));

    let (status, body) = admin_get(admin, "/dashboard.json");
    assert_eq!(status, 200);
    let d: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(d["server"]["state"], "LIVE");
    assert_eq!(d["listeners"][0]["name"], "ingress");
    assert_eq!(d["listeners"][0]["state"], "serving");
    let cluster = |name: &str| {
        d["clusters"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["name"] == name))
            .unwrap_or_else(|| panic!("no cluster {name}: {body}"))
            .clone()
    };
    let backend = cluster("backend");
    assert_eq!(backend["completed"], 3);
    assert_eq!(backend["errors"], 1);
    assert_eq!(backend["count"], 3);
    assert_eq!(backend["le"].as_array().map(Vec::len), Some(19));
    assert_eq!(backend["le"][18], 3);
    assert_eq!(backend["hosts_total"], 1);
    assert_eq!(backend["healthy"], 1);
    assert_eq!(backend["hosts"][0]["address"], be.addr().to_string());
    // The hostile name is a JSON string like any other.
    let odd = cluster("<img src=x onerror=alert(1)>");
    assert_eq!(odd["completed"], 1);
    assert_eq!(odd["errors"], 1);
    assert_eq!(odd["count"], 0);
    // The answers match Envoy's series on /stats/prometheus.
    let (_, prom) = admin_get(
        admin,
        "/stats/prometheus?filter=cluster%5C.backend%5C.upstream_rq_completed",
    );
    assert!(
        prom.contains("envoy_cluster_upstream_rq_completed{envoy_cluster_name=\"backend\"} 3"),
        "{prom}"
    );
    let (status, help) = admin_get(admin, "/help");
    assert_eq!(status, 200);
    assert!(help.contains("/stats/prometheus"));
}

/// A page on another site cannot make this instance fail its health
/// check: a browser's cross-site POST (it says its `Origin`) is refused.
#[test]
fn a_cross_site_post_to_the_admin_is_refused() {
    use std::io::{Read, Write};
    let be = H1Backend::start(|_| H1Answer::ok("ok"));
    let (_gw, _, admin) = support::one_backend_gateway(be.addr());
    let mut s = std::net::TcpStream::connect(admin).unwrap();
    s.write_all(
        b"POST /healthcheck/fail HTTP/1.1\r\nhost: x\r\norigin: https://evil.example\r\n\r\n",
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    assert_eq!(admin_get(admin, "/ready"), (200, "LIVE\n".to_owned()));
    // The page itself may run only its own script.
    let mut s = std::net::TcpStream::connect(admin).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    let mut page = String::new();
    s.read_to_string(&mut page).unwrap();
    assert!(page.contains("content-security-policy: default-src 'none'"));
    assert!(page.contains("x-content-type-options: nosniff"));
}
