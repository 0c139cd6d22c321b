//! Cluster warming, as Envoy's: a cluster added with an active health
//! check serves only once each of its hosts' first check ended, so its
//! first requests go to hosts known good rather than (in panic) to all.

mod support;

use std::time::Duration;

use support::health_server::{Answer, HealthServer};
use support::*;

/// A `clusters` entry `name` of HTTP/2 `hosts`, each checked on its
/// `checks` port (`/healthz`, timeout 3 s) when `checks` is not empty.
fn cluster(name: &str, hosts: &[std::net::SocketAddr], checks: &[u16]) -> String {
    let endpoints = hosts
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let hc = checks.get(i).map_or(String::new(), |p| {
                format!(", health_check_config: {{ port_value: {p} }}")
            });
            yaml::endpoint(&b.ip().to_string(), b.port(), &hc)
        })
        .collect::<Vec<_>>()
        .join(", ");
    let health = if checks.is_empty() {
        String::new()
    } else {
        "    health_checks:\n    - { timeout: 3s, interval: 1s, unhealthy_threshold: 1, healthy_threshold: 1, http_health_check: { path: /healthz } }\n".to_string()
    };
    format!(
        "  - name: {name}\n    connect_timeout: 1s\n{health}{}    load_assignment: {{ cluster_name: {name}, endpoints: [{{ lb_endpoints: [{endpoints}] }}] }}\n",
        yaml::h2_options("")
    )
}

#[test]
fn a_new_checked_cluster_serves_once_its_first_round_ended() {
    let (old, good, bad) = (backend("old"), backend("good"), backend("bad"));
    let gw = start(
        yaml::routed_bootstrap("web", "", &cluster("web", &[old.addr()], &[])),
        1,
    );
    let (admin, addr) = (gw.admin_addr.unwrap(), gw.listener("ingress").unwrap());
    assert_eq!(answering(addr, 2), ["old"]);

    // The route moves to a new cluster whose checks answer after 1.5 s:
    // `good` passes, `bad` fails.
    let (hg, hb) = (HealthServer::start(), HealthServer::start());
    hg.set(Answer::Slow(Duration::from_millis(1500)));
    hb.set(Answer::Status(503, vec![]));
    let clusters = format!(
        "{}{}",
        cluster("web", &[old.addr()], &[]),
        cluster(
            "web2",
            &[good.addr(), bad.addr()],
            &[hg.addr.port(), hb.addr.port()]
        )
    );
    gw.reload(yaml::routed_bootstrap("web2", "", &clusters))
        .expect("reload");
    // Warming: the route's cluster is not there yet (503, as an unknown
    // cluster), and no request reached `bad`.
    let (_, dump) = admin_get(admin, "/config_dump");
    let dump: serde_json::Value = serde_json::from_str(&dump).expect("config_dump JSON");
    assert_eq!(dump["warming_clusters"], serde_json::json!(["web2"]));
    assert_eq!(metric(admin, "gateway_clusters{state=\"warming\"}"), 1.0);
    assert_eq!(answering(addr, 4), ["503"]);
    assert_eq!(bad.requests(), 0);
    // Warmed: only the host that passed serves, from the first request on.
    wait_until(Duration::from_secs(10), "warmed", || {
        metric(admin, "gateway_clusters{state=\"warming\"}") == 0.0
    });
    assert_eq!(answering(addr, 8), ["good"]);
    assert_eq!(bad.requests(), 0);
    assert_eq!(metric(admin, "gateway_clusters{state=\"active\"}"), 2.0);
    gw.shutdown();
}
