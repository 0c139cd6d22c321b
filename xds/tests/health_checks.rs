//! `health_checks` and an endpoint's `health_check_config` as an Envoy
//! config writes them: Envoy's defaults, each refusal's exact path.

use std::sync::Arc;
use std::time::Duration;

use engine::{Checker, Cluster};
use xds::bootstrap::{self, Format};

const AT: &str = "static_resources.clusters[0]";

/// A bootstrap with one cluster `c` whose health check is `hc` (YAML flow
/// mapping) and whose one endpoint carries `endpoint_extra`; `extra` goes
/// into the cluster.
fn load(hc: &str, endpoint_extra: &str, extra: &str) -> Result<Arc<Cluster>, String> {
    let yaml = format!(
        "static_resources:\n  clusters:\n  - name: c\n{extra}    health_checks: [{hc}]\n    load_assignment:\n      cluster_name: c\n      endpoints: [{{ lb_endpoints: [{{ endpoint: {{ address: {{ socket_address: {{ address: 10.0.0.1, port_value: 80 }} }}{endpoint_extra} }} }}] }}]\n"
    );
    bootstrap::from_str(&yaml, Format::Yaml)
        .map(|b| b.clusters.into_iter().next().expect("one cluster"))
        .map_err(|e| e.to_string())
}

const BASE: &str = "timeout: 1s, interval: 5s, unhealthy_threshold: 3, healthy_threshold: 2";

fn hc(rest: &str) -> String {
    format!("{{ {BASE}, {rest} }}")
}

fn bad(hc: &str, extra: &str) -> String {
    match load(hc, "", extra) {
        Ok(_) => panic!("{hc:?} was accepted"),
        Err(e) => e,
    }
}

#[test]
fn envoy_defaults() {
    let c = load(&hc("http_health_check: { path: /healthz }"), "", "").unwrap();
    let h = c.health_check.as_ref().unwrap();
    assert_eq!(h.timeout, Duration::from_secs(1));
    assert_eq!(h.interval, Duration::from_secs(5));
    assert_eq!(h.no_traffic_interval, Duration::from_secs(60));
    assert_eq!(h.no_traffic_healthy_interval, Duration::from_secs(60));
    assert_eq!(h.unhealthy_interval, h.interval);
    assert_eq!(h.unhealthy_edge_interval, h.interval);
    assert_eq!(h.healthy_edge_interval, h.interval);
    assert!(h.reuse_connection);
    let Checker::Http(http) = &h.checker else {
        panic!("an HTTP check")
    };
    assert_eq!(http.method, "GET");
    assert_eq!(http.expected, [(200, 201)]);
    assert!(http.is_expected(200) && !http.is_expected(201) && !http.is_expected(204));
    assert!(!http.http2);
    assert_eq!(http.response_buffer_size, 1024);

    // unhealthy_interval is what the unhealthy edge defaults to.
    let c = load(&hc("unhealthy_interval: 9s, tcp_health_check: {}"), "", "").unwrap();
    let h = c.health_check.as_ref().unwrap();
    assert_eq!(h.unhealthy_edge_interval, Duration::from_secs(9));
    assert!(matches!(&h.checker, Checker::Tcp(t) if t.send.is_empty() && t.receive.is_empty()));
}

#[test]
fn an_endpoints_health_check_config_and_hostname() {
    let c = load(
        &hc("tcp_health_check: {}"),
        ", hostname: web-1, health_check_config: { port_value: 8081, hostname: hc.example, address: { socket_address: { address: 10.0.0.9, port_value: 1 } } }",
        "",
    )
    .unwrap();
    let e = &c.endpoints[0];
    assert_eq!(e.hostname, "web-1");
    assert_eq!(e.check.hostname, "hc.example");
    assert_eq!(e.check.target(e.address), "10.0.0.9:8081".parse().unwrap());
    let c = load(
        &hc("tcp_health_check: {}"),
        ", health_check_config: { disable_active_health_check: true }",
        "",
    )
    .unwrap();
    assert!(c.endpoints[0].check.disabled);
}

#[test]
fn tls_options_offer_their_alpn_over_the_cluster_s_tls() {
    let tls = "    transport_socket:\n      name: envoy.transport_sockets.tls\n      typed_config: { \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext }\n";
    let c = load(
        &hc("http_health_check: { path: /h }, tls_options: { alpn_protocols: [h2, http/1.1] }"),
        "",
        tls,
    )
    .unwrap();
    assert!(c.upstream.tls.is_some(), "checks over TLS are accepted");
    let h = c.health_check.as_ref().unwrap();
    assert_eq!(h.tls_alpn, [b"h2".to_vec(), b"http/1.1".to_vec()]);
    // The cluster's ignore_health_on_host_removal travels with its check.
    assert!(!h.ignore_health_on_host_removal);
    let c = load(
        &hc("tcp_health_check: {}"),
        "",
        "    ignore_health_on_host_removal: true\n",
    )
    .unwrap();
    assert!(
        c.health_check
            .as_ref()
            .unwrap()
            .ignore_health_on_host_removal
    );
    // Without tls_options: the cluster's own ALPN.
    let c = load(&hc("http_health_check: { path: /h }"), "", tls).unwrap();
    assert!(c.health_check.as_ref().unwrap().tls_alpn.is_empty());
}

#[test]
fn refusals_name_their_field() {
    let cases: [(&str, &str, &str); 13] = [
        (
            "{ interval: 5s, unhealthy_threshold: 1, healthy_threshold: 1, tcp_health_check: {} }",
            "",
            "health_checks[0].timeout: required",
        ),
        (
            "{ timeout: 0s, interval: 5s, unhealthy_threshold: 1, healthy_threshold: 1, tcp_health_check: {} }",
            "",
            "health_checks[0].timeout: must be greater than 0",
        ),
        (
            "{ timeout: 1s, interval: 5s, healthy_threshold: 1, tcp_health_check: {} }",
            "",
            "health_checks[0].unhealthy_threshold: required",
        ),
        (
            &format!("{{ {BASE} }}"),
            "",
            "health_checks[0]: one of http_health_check, tcp_health_check or grpc_health_check is required",
        ),
        (
            &hc("http_health_check: {}"),
            "",
            "health_checks[0].http_health_check.path: required",
        ),
        (
            &hc("http_health_check: { path: /h, expected_statuses: [{ start: 200, end: 700 }] }"),
            "",
            "health_checks[0].http_health_check.expected_statuses[0]: [200, 700) is not a range",
        ),
        (
            &hc("http_health_check: { path: /h, method: CONNECT }"),
            "",
            "health_checks[0].http_health_check.method: CONNECT is not allowed",
        ),
        (
            &hc("tcp_health_check: { send: { text: zz } }"),
            "",
            "health_checks[0].tcp_health_check.send.text: \"zz\" is not hex",
        ),
        (
            &hc("http_health_check: { path: /h, response_buffer_size: 2, receive: [{ text: \"414243\" }] }"),
            "",
            "health_checks[0].http_health_check.receive: 3 bytes to find exceed response_buffer_size (2)",
        ),
        (
            &hc("grpc_health_check: {}"),
            "",
            "health_checks[0].grpc_health_check: cluster \"c\" must support HTTP/2",
        ),
        (
            &hc("custom_health_check: { name: x }"),
            "",
            "health_checks[0].custom_health_check: not supported",
        ),
        (
            &hc("tcp_health_check: {}, tls_options: { alpn_protocols: [h2, \"\"] }"),
            "",
            "health_checks[0].tls_options.alpn_protocols[1]: must be 1 to 255 bytes",
        ),
        (
            &hc("tcp_health_check: {}, transport_socket_match_criteria: { a: b }"),
            "",
            "health_checks[0].transport_socket_match_criteria: not supported",
        ),
    ];
    for (h, extra, want) in cases {
        let e = bad(h, extra);
        assert!(e.contains(&format!("{AT}.{want}")), "{h}: {e}");
    }
    let yaml = format!(
        "static_resources:\n  clusters:\n  - name: c\n    health_checks: [{}, {}]\n",
        hc("tcp_health_check: {}"),
        hc("tcp_health_check: {}")
    );
    let e = bootstrap::from_str(&yaml, Format::Yaml)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("multiple health checks are not supported"),
        "{e}"
    );
}
