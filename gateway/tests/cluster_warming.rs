//! The first health check of new hosts: cluster warming, as Envoy's (a
//! cluster added with an active health check serves only once each of its
//! hosts' first check ended, so its first requests go to hosts known good
//! rather than, in panic, to all), and `ignore_new_hosts_until_first_hc`
//! for hosts added to a serving cluster.

mod support;

use std::time::Duration;

use support::health_server::{Answer, HealthServer};
use support::*;

/// A `clusters` entry `name` of HTTP/2 `hosts`, each checked on its
/// `checks` port (`/healthz`, timeout 3 s) when `checks` is not empty.
fn cluster(name: &str, hosts: &[std::net::SocketAddr], checks: &[u16]) -> String {
    cluster_with(name, hosts, checks, "")
}

/// [`cluster`] with `extra` cluster fields (YAML lines).
fn cluster_with(name: &str, hosts: &[std::net::SocketAddr], checks: &[u16], extra: &str) -> String {
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
        "  - name: {name}\n    connect_timeout: 1s\n{extra}{health}{}    load_assignment: {{ cluster_name: {name}, endpoints: [{{ lb_endpoints: [{endpoints}] }}] }}\n",
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

#[test]
fn new_hosts_of_a_serving_cluster_wait_out_their_first_check_only_when_asked() {
    // `b1` serves and passes; `n1` and `n2` join with checks that answer
    // after 1.5 s. Counted as unhealthy (Envoy's default), they put the
    // cluster in panic (1 of 3 healthy) and take traffic unchecked; with
    // ignore_new_hosts_until_first_hc they are left out until checked.
    for ignore in [false, true] {
        let (b1, n1, n2) = (backend("b1"), backend("n1"), backend("n2"));
        let (h1, hn) = (HealthServer::start(), HealthServer::start());
        let extra = if ignore {
            "    common_lb_config: { ignore_new_hosts_until_first_hc: true }\n"
        } else {
            ""
        };
        let web = |hosts: &[std::net::SocketAddr], checks: &[u16]| {
            yaml::routed_bootstrap("web", "", &cluster_with("web", hosts, checks, extra))
        };
        let gw = start(web(&[b1.addr()], &[h1.addr.port()]), 1);
        let (admin, addr) = (gw.admin_addr.unwrap(), gw.listener("ingress").unwrap());
        assert_eq!(answering(addr, 2), ["b1"]);
        hn.set(Answer::Slow(Duration::from_millis(1500)));
        let port = hn.addr.port();
        gw.reload(web(
            &[b1.addr(), n1.addr(), n2.addr()],
            &[h1.addr.port(), port, port],
        ))
        .expect("reload");
        let (_, clusters) = admin_get(admin, "/clusters");
        let flags = format!("web::{}::health_flags::", n1.addr());
        let pending = if ignore {
            "/failed_active_hc/pending_active_hc\n"
        } else {
            "/failed_active_hc\n"
        };
        assert!(
            clusters.contains(&format!("{flags}{pending}")),
            "{clusters}"
        );
        if ignore {
            assert_eq!(answering(addr, 12), ["b1"]);
        } else {
            assert_eq!(answering(addr, 12), ["b1", "n1", "n2"]);
        }
        // Checked, they serve.
        wait_until(Duration::from_secs(10), "first checks", || {
            admin_get(admin, "/clusters")
                .1
                .contains(&format!("{flags}healthy"))
        });
        gw.shutdown();
    }
}
