//! DNS clusters (`STRICT_DNS`, `LOGICAL_DNS`) against a DNS server on
//! loopback: every address or the first, refreshes, TTLs, NXDOMAIN,
//! failures that keep the hosts, truncated answers, aliases, and host ids
//! that stay while their address does.

mod support;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use demo_backend::BackendOptions;
use support::*;
use testsupport::{DnsServer, Zone};

const WAIT: Duration = Duration::from_secs(10);

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Two backends on one port, at 127.0.0.1 (`b1`) and 127.0.0.2 (`b2`), as
/// two hosts of one name would be.
fn backend_pair() -> (
    demo_backend::BackendHandle,
    demo_backend::BackendHandle,
    u16,
) {
    for _ in 0..20 {
        let b1 = backend("b1");
        let port = b1.addr().port();
        if let Ok(b2) = demo_backend::spawn_thread(
            SocketAddr::from(([127, 0, 0, 2], port)),
            BackendOptions::new("b2"),
            None,
        ) {
            return (b1, b2, port);
        }
    }
    panic!("no port free on both 127.0.0.1 and 127.0.0.2");
}

/// A bootstrap: listener `ingress` routing to cluster `web`, of `kind`,
/// looking `name`:`port` up at `dns` with `extra` cluster fields.
fn bootstrap(kind: &str, name: &str, port: u16, dns: SocketAddr, extra: &str) -> engine::Bootstrap {
    let cluster = format!(
        r#"    type: {kind}
    dns_lookup_family: V4_ONLY
    typed_dns_resolver_config:
      name: envoy.network.dns_resolver.cares
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.network.dns_resolver.cares.v3.CaresDnsResolverConfig
        resolvers: [{{ socket_address: {{ address: {dns_ip}, port_value: {dns_port} }} }}]
        query_timeout_seconds: 1
        query_tries: 1
{extra}
{h2}    load_assignment: {{ cluster_name: web, endpoints: [{{ lb_endpoints: [{ep}] }}] }}
"#,
        dns_ip = dns.ip(),
        dns_port = dns.port(),
        h2 = yaml::h2_options(""),
        ep = yaml::endpoint(name, port, ""),
    );
    yaml::web_bootstrap("", &cluster)
}

#[test]
fn strict_dns_serves_every_address_and_follows_the_answers() {
    let (_b1, _b2, port) = backend_pair();
    let dns = DnsServer::start();
    dns.set(
        "web.test",
        Zone::Addrs(vec![ip("127.0.0.1"), ip("127.0.0.2")], 30),
    );
    let extra = "    dns_refresh_rate: 0.1s";
    let gw = start(
        bootstrap("STRICT_DNS", "web.test", port, dns.addr(), extra),
        2,
    );
    let admin = gw.admin_addr.unwrap();
    let addr = gw.listener("ingress").unwrap();
    // The first lookup is done before the listener serves.
    assert_eq!(answering(addr, 8), ["b1", "b2"]);
    let b1 = format!("gateway_upstream_rq_total{{cluster=\"web\",host=\"127.0.0.1:{port}\"}}");
    let before = metric(admin, &b1);
    assert!(before > 0.0);

    // An address gone: its host leaves; the one that stays keeps its id
    // (its counters go on from where they were).
    dns.set("web.test", Zone::Addrs(vec![ip("127.0.0.1")], 30));
    wait_answering(addr, &["b1"]);
    assert!(
        metric(admin, &b1) >= before + 8.0,
        "the host's counters went on"
    );
    assert_eq!(metric(admin, "gateway_dns_hosts{cluster=\"web\"}"), 1.0);

    // NXDOMAIN: no hosts at all, as Envoy takes it.
    dns.remove("web.test");
    wait_answering(addr, &["503"]);
    assert_eq!(metric(admin, "gateway_dns_hosts{cluster=\"web\"}"), 0.0);

    // An alias to a name with both addresses.
    dns.set(
        "pool.test",
        Zone::Addrs(vec![ip("127.0.0.2"), ip("127.0.0.1")], 30),
    );
    dns.set("web.test", Zone::Alias("pool.test".into()));
    wait_answering(addr, &["b1", "b2"]);
    assert!(
        metric(
            admin,
            "gateway_dns_lookups_total{cluster=\"web\",outcome=\"success\"}"
        ) >= 4.0
    );
    gw.shutdown();
}

#[test]
fn a_failing_server_keeps_the_hosts_found_before() {
    let (_b1, _b2, port) = backend_pair();
    let dns = DnsServer::start();
    dns.set("web.test", Zone::Addrs(vec![ip("127.0.0.2")], 30));
    let extra = "    dns_refresh_rate: 0.1s\n    dns_failure_refresh_rate: { base_interval: 0.1s, max_interval: 0.2s }";
    let gw = start(
        bootstrap("STRICT_DNS", "web.test", port, dns.addr(), extra),
        1,
    );
    let admin = gw.admin_addr.unwrap();
    let addr = gw.listener("ingress").unwrap();
    assert_eq!(answering(addr, 4), ["b2"]);

    let failures = "gateway_dns_lookups_total{cluster=\"web\",outcome=\"failure\"}";
    for zone in [Zone::ServFail, Zone::Silent] {
        let seen = metric(admin, failures);
        dns.set("web.test", zone);
        wait_until(WAIT, "a failed lookup", || metric(admin, failures) > seen);
        assert_eq!(answering(addr, 4), ["b2"], "the hosts stay");
    }
    gw.shutdown();
}

#[test]
fn respect_dns_ttl_looks_up_again_at_the_ttl() {
    let (_b1, _b2, port) = backend_pair();
    let dns = DnsServer::start();
    dns.set("web.test", Zone::Addrs(vec![ip("127.0.0.1")], 1));
    dns.set("other.test", Zone::Addrs(vec![ip("127.0.0.1")], 1));
    // The refresh rate is an hour: only the TTL can bring a second lookup.
    let extra = "    dns_refresh_rate: 3600s\n    respect_dns_ttl: true";
    let gw = start(
        bootstrap("STRICT_DNS", "web.test", port, dns.addr(), extra),
        1,
    );
    wait_until(WAIT, "a lookup at the TTL", || dns.asked("web.test").0 >= 2);
    dns.set("web.test", Zone::Addrs(vec![ip("127.0.0.2")], 1));
    wait_answering(gw.listener("ingress").unwrap(), &["b2"]);
    gw.shutdown();

    // Without respect_dns_ttl the TTL changes nothing.
    let extra = "    dns_refresh_rate: 3600s";
    let gw = start(
        bootstrap("STRICT_DNS", "other.test", port, dns.addr(), extra),
        1,
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(dns.asked("other.test").0, 1);
    gw.shutdown();
}

#[test]
fn logical_dns_takes_the_first_address() {
    let (_b1, _b2, port) = backend_pair();
    let dns = DnsServer::start();
    dns.set(
        "web.test",
        Zone::Addrs(vec![ip("127.0.0.2"), ip("127.0.0.1")], 30),
    );
    let gw = start(
        bootstrap("LOGICAL_DNS", "web.test", port, dns.addr(), ""),
        2,
    );
    assert_eq!(answering(gw.listener("ingress").unwrap(), 8), ["b2"]);
    gw.shutdown();
}

#[test]
fn a_truncated_answer_is_asked_again_over_tcp() {
    let (_b1, _b2, port) = backend_pair();
    let dns = DnsServer::start();
    dns.set(
        "web.test",
        Zone::TruncatedUdp(vec![ip("127.0.0.1"), ip("127.0.0.2")], 30),
    );
    let gw = start(bootstrap("STRICT_DNS", "web.test", port, dns.addr(), ""), 1);
    assert_eq!(answering(gw.listener("ingress").unwrap(), 8), ["b1", "b2"]);
    assert_eq!(dns.asked("web.test"), (1, 1));
    gw.shutdown();
}

#[test]
fn a_name_that_does_not_resolve_at_start_serves_503_until_it_does() {
    let (_b1, _b2, port) = backend_pair();
    let dns = DnsServer::start();
    let extra = "    dns_refresh_rate: 0.1s";
    let gw = start(
        bootstrap("STRICT_DNS", "late.test", port, dns.addr(), extra),
        1,
    );
    let addr = gw.listener("ingress").unwrap();
    assert_eq!(answering(addr, 2), ["503"]);
    dns.set("late.test", Zone::Addrs(vec![ip("127.0.0.1")], 30));
    wait_answering(addr, &["b1"]);
    gw.shutdown();
}

#[test]
fn the_ads_server_can_be_found_by_dns() {
    use testsupport::resources::*;
    use testsupport::{type_url, AdsServer};
    let b = backend("b1");
    let server = AdsServer::start();
    server.set(type_url::CLUSTER, "c1", vec![eds_cluster("echo")]);
    server.set(type_url::ENDPOINT, "e1", vec![cla("echo", &[b.addr()])]);
    server.set(
        type_url::LISTENER,
        "l1",
        vec![rds_listener("ingress", "routes")],
    );
    server.set(type_url::ROUTE, "r1", vec![routes("routes", "echo")]);
    let dns = DnsServer::start();
    dns.set("xds.test", Zone::Addrs(vec![server.addr().ip()], 30));
    // The bootstrap of the tests' ADS world, its `xds` cluster found by name.
    let yaml = ads_bootstrap_yaml(server.addr())
        .replace("type: STATIC", "type: STRICT_DNS\n    dns_lookup_family: V4_ONLY")
        .replace(
            &format!("address: {}, port_value: {}", server.addr().ip(), server.addr().port()),
            &format!("address: xds.test, port_value: {}", server.addr().port()),
        )
        .replace(
            "    connect_timeout: 0.25s\n",
            &format!(
                "    connect_timeout: 0.25s\n    dns_resolvers: [{{ socket_address: {{ address: {}, port_value: {} }} }}]\n",
                dns.addr().ip(),
                dns.addr().port()
            ),
        );
    assert!(
        yaml.contains("xds.test") && yaml.contains("dns_resolvers"),
        "{yaml}"
    );
    let boot = xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml).expect("bootstrap");
    let gw = start(boot, 1);
    control_plane::wait_ack(&server, type_url::ROUTE, "r1");
    let addr = control_plane::wait_listener(gw.admin_addr.unwrap(), "ingress");
    assert_eq!(answering(addr, 2), ["b1"]);
    gw.shutdown();
}

#[test]
fn a_host_gone_from_the_answers_stays_while_its_checks_pass() {
    // Envoy's PENDING_DYNAMIC_REMOVAL: with an active check (TCP connect,
    // every 0.1 s), a host whose address left the answers keeps serving
    // until a check fails; `ignore_health_on_host_removal` lets it go at
    // once.
    for ignore in [false, true] {
        let (b1, b2, port) = backend_pair();
        let dns = DnsServer::start();
        let both = || Zone::Addrs(vec![ip("127.0.0.1"), ip("127.0.0.2")], 30);
        dns.set("web.test", both());
        let extra = format!(
            "    dns_refresh_rate: 0.1s\n    ignore_health_on_host_removal: {ignore}\n    health_checks:\n    - {{ timeout: 0.5s, interval: 0.1s, no_traffic_interval: 0.1s, unhealthy_threshold: 1, healthy_threshold: 1, tcp_health_check: {{}} }}"
        );
        let gw = start(
            bootstrap("STRICT_DNS", "web.test", port, dns.addr(), &extra),
            1,
        );
        let (admin, addr) = (gw.admin_addr.unwrap(), gw.listener("ingress").unwrap());
        assert_eq!(answering(addr, 8), ["b1", "b2"]);
        let b2_flags = format!("web::127.0.0.2:{port}::health_flags::");

        dns.set("web.test", Zone::Addrs(vec![ip("127.0.0.1")], 30));
        wait_until(WAIT, "the new answer", || {
            metric(admin, "gateway_dns_hosts{cluster=\"web\"}") == 1.0
        });
        if ignore {
            wait_answering(addr, &["b1"]);
            assert!(!admin_get(admin, "/clusters").1.contains(&b2_flags));
            gw.shutdown();
            continue;
        }
        // Still passing: it stays, and serves.
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(answering(addr, 8), ["b1", "b2"]);
        let (_, clusters) = admin_get(admin, "/clusters");
        assert!(
            clusters.contains(&format!("{b2_flags}/pending_dynamic_removal\n")),
            "{clusters}"
        );
        // Back in the answers, it is an ordinary host again.
        dns.set("web.test", both());
        wait_until(WAIT, "back in the answers", || {
            admin_get(admin, "/clusters")
                .1
                .contains(&format!("{b2_flags}healthy\n"))
        });
        // Gone again, then failing its check: it goes.
        dns.set("web.test", Zone::Addrs(vec![ip("127.0.0.1")], 30));
        wait_until(WAIT, "pending removal", || {
            admin_get(admin, "/clusters")
                .1
                .contains("/pending_dynamic_removal")
        });
        b2.stop();
        wait_until(WAIT, "removed after a failed check", || {
            !admin_get(admin, "/clusters").1.contains(&b2_flags)
        });
        assert_eq!(answering(addr, 8), ["b1"]);
        drop(b1);
        gw.shutdown();
    }
}
