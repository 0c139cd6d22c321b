//! The shape of Envoy's locality load-balancing example, written anew: a
//! `STRICT_DNS` cluster whose names a test DNS server resolves, checked by
//! HTTP health checks, one locality at priority 0 and two weighted ones
//! at priority 1 with `locality_weighted_lb_config`. Traffic stays in
//! priority 0 while its host passes, moves to priority 1 (shared by
//! locality weight) when it fails, and comes back.

mod support;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use demo_backend::{BackendHandle, BackendOptions};
use support::*;
use testsupport::{DnsServer, Zone};

/// Backends `name`s on one port at 127.0.0.1, .2, .3 …
fn backends_on_one_port(names: &[&str]) -> (Vec<BackendHandle>, u16) {
    'port: for _ in 0..20 {
        let first = backend(names[0]);
        let port = first.addr().port();
        let mut all = vec![first];
        for (i, name) in names.iter().enumerate().skip(1) {
            let addr = SocketAddr::from(([127, 0, 0, i as u8 + 1], port));
            match demo_backend::spawn_thread(addr, BackendOptions::new(*name), None) {
                Ok(b) => all.push(b),
                Err(_) => continue 'port,
            }
        }
        return (all, port);
    }
    panic!("no port free on every address");
}

/// How many of `n` requests each backend answered (errors by status).
fn shares(addr: SocketAddr, n: usize) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (status, body) in get_n(addr, "/", n) {
        let key = if status == 200 {
            body
        } else {
            status.to_string()
        };
        *out.entry(key).or_default() += 1;
    }
    out
}

#[test]
fn priority_zero_serves_until_its_host_fails_then_localities_share_by_weight() {
    let (mut backends, port) = backends_on_one_port(&["local-1", "local-2", "remote-1"]);
    let dns = DnsServer::start();
    for (i, name) in ["local-1.test", "local-2.test", "remote-1.test"]
        .iter()
        .enumerate()
    {
        let ip: IpAddr = format!("127.0.0.{}", i + 1).parse().unwrap();
        dns.set(name, Zone::Addrs(vec![ip], 30));
    }
    let ep = |name: &str| yaml::endpoint(name, port, &format!(", hostname: {name}"));
    let cluster = format!(
        r#"    type: STRICT_DNS
    dns_lookup_family: V4_ONLY
    dns_resolvers: [{{ socket_address: {{ address: {dns_ip}, port_value: {dns_port} }} }}]
    common_lb_config: {{ locality_weighted_lb_config: {{}} }}
    health_checks:
    - {{ timeout: 0.3s, interval: 0.05s, no_traffic_interval: 0.05s, unhealthy_threshold: 1, healthy_threshold: 1, http_health_check: {{ path: /, codec_client_type: HTTP2 }} }}
{h2}    load_assignment:
      cluster_name: web
      endpoints:
      - {{ locality: {{ region: local, zone: zone-1 }}, load_balancing_weight: 1, priority: 0, lb_endpoints: [{l1}] }}
      - {{ locality: {{ region: local, zone: zone-2 }}, load_balancing_weight: 1, priority: 1, lb_endpoints: [{l2}] }}
      - {{ locality: {{ region: remote, zone: zone-1 }}, load_balancing_weight: 3, priority: 1, lb_endpoints: [{r1}] }}
"#,
        dns_ip = dns.addr().ip(),
        dns_port = dns.addr().port(),
        h2 = yaml::h2_options(""),
        l1 = ep("local-1.test"),
        l2 = ep("local-2.test"),
        r1 = ep("remote-1.test"),
    );
    let gw = start(yaml::web_bootstrap("", &cluster), 1);
    let addr = gw.listener("ingress").unwrap();
    assert_eq!(answering(addr, 20), ["local-1"], "priority 0 takes all");

    // Priority 0's one host goes away: its check fails, priority 1 takes
    // everything, its localities by weight (1 : 3).
    backends.remove(0).stop();
    wait_answering(addr, &["local-2", "remote-1"]);
    let got = shares(addr, 400);
    let (l2, r1) = (got["local-2"], got["remote-1"]);
    assert_eq!(l2 + r1, 400, "{got:?}");
    assert!(
        (60..=140).contains(&l2),
        "about a quarter to local-2: {got:?}"
    );

    // It comes back: priority 0 takes everything again.
    let back = demo_backend::spawn_thread(
        SocketAddr::from(([127, 0, 0, 1], port)),
        BackendOptions::new("local-1"),
        None,
    )
    .expect("local-1 again");
    wait_answering(addr, &["local-1"]);
    back.stop();
    gw.shutdown();
}
