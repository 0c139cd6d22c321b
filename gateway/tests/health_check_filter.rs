//! The health check filter (`envoy.filters.http.health_check`): checks answered here with the node's cluster, 503 while the gateway fails its health checks (and the others told so), clusters' healthy shares, pass-through with a cache, and the counters. Expected answers are Envoy 1.40's to the same bootstrap and requests (recorded 2026-11-28).

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use support::h1_backend::{H1Answer, H1Backend};
use support::h1_client::*;
use support::*;

fn bootstrap(filter: &str, backend: SocketAddr) -> Result<engine::Bootstrap, xds::Error> {
    let yaml = format!(
        r#"
node: {{ id: gw-1, cluster: front-proxy }}
admin: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }} }}
static_resources:
  listeners:
  - name: ingress
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          http_filters:
          - name: envoy.filters.http.health_check
            typed_config: {{ "@type": type.googleapis.com/envoy.extensions.filters.http.health_check.v3.HealthCheck, headers: [ {{ name: ":path", string_match: {{ exact: /healthz }} }} ], {filter} }}
          - name: envoy.filters.http.router
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes: [ {{ match: {{ prefix: / }}, route: {{ cluster: backend }} }} ]
  clusters:
  - name: backend
    type: STATIC
    load_assignment:
      cluster_name: backend
      endpoints:
      - lb_endpoints:
        - endpoint: {{ address: {{ socket_address: {{ address: {ip}, port_value: {port} }} }} }}
  - name: half
    type: STATIC
    load_assignment:
      cluster_name: half
      endpoints:
      - lb_endpoints:
        - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: 1 }} }} }}
        - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: 2 }} }} }}
          health_status: UNHEALTHY
"#,
        ip = backend.ip(),
        port = backend.port()
    );
    xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml)
}

fn start_with(
    filter: &str,
    backend: SocketAddr,
) -> (gateway::GatewayHandle, SocketAddr, SocketAddr) {
    let gw = start(bootstrap(filter, backend).expect("bootstrap"), 1);
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    (gw, addr, admin)
}

/// Waits until `f` holds (the admin's actions reach the shards through
/// the control shard).
fn eventually(mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < deadline, "not within 5 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn checks_are_answered_here_and_fail_with_the_gateway() {
    let be = H1Backend::start(|_| H1Answer::ok("from-backend"));
    let (_gw, addr, admin) = start_with("pass_through_mode: false", be.addr());
    let hc = h1_get(addr, "x", "/healthz", "");
    assert_eq!(hc.status, 200);
    assert!(hc.body.is_empty());
    assert_eq!(hc.header("content-length"), Some("0"));
    assert_eq!(hc.header("content-type"), None);
    assert_eq!(
        hc.header("x-envoy-upstream-healthchecked-cluster"),
        Some("front-proxy")
    );
    // The query is part of :path: not a check.
    assert_eq!(h1_get(addr, "x", "/healthz?x=1", "").body, b"from-backend");
    assert!(be.requests().iter().all(|r| r.target != "/healthz"));

    assert_eq!(admin_post(admin, "/healthcheck/fail").0, 200);
    eventually(|| h1_get(addr, "x", "/healthz", "").status == 503);
    let failing = h1_get(addr, "x", "/healthz", "");
    assert_eq!(
        failing.header("x-envoy-immediate-health-check-fail"),
        Some("true")
    );
    // Other requests go on, told that the gateway is going away.
    let other = h1_get(addr, "x", "/app", "");
    assert_eq!(other.body, b"from-backend");
    assert_eq!(
        other.header("x-envoy-immediate-health-check-fail"),
        Some("true")
    );
    assert_eq!(admin_post(admin, "/healthcheck/ok").0, 200);
    eventually(|| h1_get(addr, "x", "/healthz", "").status == 200);
    assert_eq!(
        h1_get(addr, "x", "/app", "").header("x-envoy-immediate-health-check-fail"),
        None
    );

    let (_, stats) = admin_get(admin, "/stats");
    assert!(
        stats.contains("gateway_health_check_filter_total{outcome=\"failed\"}"),
        "{stats}"
    );
}

#[test]
fn clusters_healthy_shares_decide() {
    let be = H1Backend::start(|_| H1Answer::ok("from-backend"));
    for (pct, want) in [("50", 200), ("51", 503)] {
        let filter = format!(
            "pass_through_mode: false, cluster_min_healthy_percentages: {{ half: {{ value: {pct} }}, backend: {{ value: 100 }} }}"
        );
        let (_gw, addr, _) = start_with(&filter, be.addr());
        assert_eq!(h1_get(addr, "x", "/healthz", "").status, want, "{pct}");
    }
    let (_gw, addr, admin) = start_with(
        "pass_through_mode: false, cluster_min_healthy_percentages: { nowhere: { value: 1 } }",
        be.addr(),
    );
    assert_eq!(h1_get(addr, "x", "/healthz", "").status, 503);
    let (_, stats) = admin_get(admin, "/stats");
    assert!(
        stats.contains(
            "gateway_health_check_filter_total{outcome=\"failed_cluster_not_found\"} 1\n"
        ),
        "{stats}"
    );
    let hcm = "{envoy_http_conn_manager_prefix=\"ingress\"}";
    for (s, v) in [
        ("failed_cluster_not_found", 1.0),
        ("request_total", 1.0),
        ("failed", 1.0),
        ("ok", 0.0),
    ] {
        let series = format!("envoy_http_health_check_{s}{hcm}");
        assert_eq!(envoy_metric(admin, &series), v, "{series}");
    }
    // A health check is a request, but its answer is counted nowhere in
    // the manager's answers (Envoy's).
    let rq = |s: &str| envoy_metric(admin, &format!("envoy_http_downstream_rq_{s}{hcm}"));
    assert_eq!((rq("total"), rq("completed")), (1.0, 0.0));
    let class5 = "envoy_http_downstream_rq_xx{envoy_response_code_class=\"5\",envoy_http_conn_manager_prefix=\"ingress\"}";
    assert_eq!(envoy_metric(admin, class5), 0.0);
}

#[test]
fn pass_through_checks_go_upstream_once_per_cache_period() {
    let be = H1Backend::start(|r| match r.target.as_str() {
        "/healthz" => {
            H1Answer::raw("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 4\r\n\r\ndown")
        }
        _ => H1Answer::ok("ok"),
    });
    let (_gw, addr, admin) = start_with("pass_through_mode: true, cache_time: 30s", be.addr());
    let first = h1_get(addr, "x", "/healthz", "");
    assert_eq!((first.status, &first.body[..]), (503, &b"down"[..]));
    assert_eq!(
        first.header("x-envoy-upstream-healthchecked-cluster"),
        Some("front-proxy")
    );
    for _ in 0..3 {
        let cached = h1_get(addr, "x", "/healthz", "");
        assert_eq!(cached.status, 503);
        assert!(cached.body.is_empty());
    }
    let upstream = be
        .requests()
        .iter()
        .filter(|r| r.target == "/healthz")
        .count();
    assert_eq!(upstream, 1);
    let (_, stats) = admin_get(admin, "/stats");
    assert!(
        stats.contains("gateway_health_check_filter_total{outcome=\"cached_response\"} 3\n"),
        "{stats}"
    );
}

#[test]
fn pass_through_mode_is_required() {
    let e = bootstrap("cache_time: 1s", "127.0.0.1:1".parse().unwrap())
        .expect_err("refused")
        .to_string();
    assert!(e.contains("pass_through_mode: required"), "{e}");
}
