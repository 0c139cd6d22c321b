//! `STRICT_DNS` and `LOGICAL_DNS` clusters as an Envoy config writes them: what each field means, Envoy's defaults, each refusal's exact path, and how the xDS client holds such a cluster back until its names are looked up.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::{Cluster, Dns, DnsFamily, DnsKind, Endpoint, HealthStatus};
use xds::bootstrap::{self, Format};
use xds::client::XdsClient;

const AT: &str = "static_resources.clusters[0]";
const CARES: &str = "envoy.extensions.network.dns_resolver.cares.v3.CaresDnsResolverConfig";

/// A bootstrap with one cluster `c` of `kind` whose endpoints are
/// `endpoints` (YAML flow list items) and whose extra fields are `extra`.
fn load(kind: &str, endpoints: &str, extra: &str) -> Result<Arc<Cluster>, String> {
    let yaml = format!(
        "static_resources:\n  clusters:\n  - name: c\n    type: {kind}\n{extra}    load_assignment:\n      cluster_name: c\n      endpoints: [{{ lb_endpoints: [{endpoints}] }}]\n"
    );
    bootstrap::from_str(&yaml, Format::Yaml)
        .map(|b| b.clusters.into_iter().next().expect("one cluster"))
        .map_err(|e| e.to_string())
}

fn endpoint(host: &str, port: u32) -> String {
    format!("{{ endpoint: {{ address: {{ socket_address: {{ address: {host}, port_value: {port} }} }} }} }}")
}

fn dns_of(extra: &str) -> Arc<Dns> {
    let c = load("STRICT_DNS", &endpoint("web.example.com", 80), extra)
        .unwrap_or_else(|e| panic!("{extra:?} refused: {e}"));
    Arc::clone(c.dns.as_ref().expect("a DNS cluster"))
}

fn bad(kind: &str, endpoints: &str, extra: &str) -> String {
    match load(kind, endpoints, extra) {
        Ok(_) => panic!("{extra:?} with {endpoints:?} was accepted"),
        Err(e) => e,
    }
}

fn cares(body: &str) -> String {
    format!(
        "    typed_dns_resolver_config:\n      name: envoy.network.dns_resolver.cares\n      typed_config:\n        \"@type\": type.googleapis.com/{CARES}\n{body}"
    )
}

#[test]
fn envoy_defaults() {
    let c = load(
        "STRICT_DNS",
        &format!(
            "{}, {{ endpoint: {{ address: {{ socket_address: {{ address: Api.Example.com., port_value: 8443 }} }} }}, load_balancing_weight: 3, health_status: DRAINING }}",
            endpoint("web.example.com", 80)
        ),
        "",
    )
    .unwrap();
    assert!(c.endpoints.is_empty(), "no hosts before a lookup");
    let d = c.dns.as_ref().unwrap();
    assert_eq!(d.kind, DnsKind::Strict);
    assert_eq!(d.refresh_rate, Duration::from_secs(5));
    assert_eq!(d.failure_refresh, None);
    assert!(!d.respect_ttl && !d.tcp);
    assert_eq!(d.family, DnsFamily::Auto);
    assert!(d.resolvers.is_empty(), "the system's");
    assert_eq!(
        (d.query_timeout, d.query_tries),
        (Duration::from_secs(5), 4)
    );
    let t: Vec<_> = d
        .targets
        .iter()
        .map(|t| (t.host.as_str(), t.port, t.weight, t.health))
        .collect();
    assert_eq!(
        t,
        [
            ("web.example.com", 80, 1, HealthStatus::Unknown),
            ("api.example.com.", 8443, 3, HealthStatus::Draining)
        ]
    );
    let l = load("LOGICAL_DNS", &endpoint("10.0.0.1", 80), "").unwrap();
    assert_eq!(l.dns.as_ref().unwrap().kind, DnsKind::Logical);
}

#[test]
fn refresh_ttl_family_and_resolvers() {
    let d = dns_of(
        "    dns_refresh_rate: 2s\n    respect_dns_ttl: true\n    use_tcp_for_dns_lookups: true\n    dns_lookup_family: V4_PREFERRED\n    dns_failure_refresh_rate: { base_interval: 0.5s }\n",
    );
    assert_eq!(d.refresh_rate, Duration::from_secs(2));
    assert!(d.respect_ttl && d.tcp);
    assert_eq!(d.family, DnsFamily::V4Preferred);
    assert_eq!(
        d.failure_refresh,
        Some((Duration::from_millis(500), Duration::from_secs(5))),
        "max_interval: ten times the base"
    );
    for (name, family) in [
        ("AUTO", DnsFamily::Auto),
        ("V4_ONLY", DnsFamily::V4Only),
        ("V6_ONLY", DnsFamily::V6Only),
        ("ALL", DnsFamily::All),
    ] {
        assert_eq!(
            dns_of(&format!("    dns_lookup_family: {name}\n")).family,
            family
        );
    }
    let d = dns_of(
        "    dns_resolvers: [{ socket_address: { address: 10.0.0.53, port_value: 5353 } }]\n",
    );
    assert_eq!(d.resolvers, [SocketAddr::from(([10, 0, 0, 53], 5353))]);
    let d = dns_of(&cares(
        "        resolvers: [{ socket_address: { address: \"::1\", port_value: 53 } }]\n        query_timeout_seconds: 2\n        query_tries: 1\n        dns_resolver_options: { use_tcp_for_dns_lookups: true }\n",
    ));
    assert_eq!(d.resolvers, ["[::1]:53".parse::<SocketAddr>().unwrap()]);
    assert_eq!(
        (d.query_timeout, d.query_tries, d.tcp),
        (Duration::from_secs(2), 1, true)
    );
    let gai = "    typed_dns_resolver_config:\n      name: envoy.network.dns_resolver.getaddrinfo\n      typed_config: { \"@type\": type.googleapis.com/envoy.extensions.network.dns_resolver.getaddrinfo.v3.GetAddrInfoDnsResolverConfig }\n";
    assert!(
        dns_of(gai).resolvers.is_empty(),
        "getaddrinfo: the system's servers"
    );
}

#[test]
fn refusals_name_the_field() {
    let one = endpoint("web.example.com", 80);
    let cases: Vec<(&str, String, String, &str)> = vec![
        (
            "LOGICAL_DNS",
            format!("{one}, {one}"),
            String::new(),
            "load_assignment.endpoints: LOGICAL_DNS needs exactly one endpoint",
        ),
        (
            "STRICT_DNS",
            endpoint("\"bad name!\"", 80),
            String::new(),
            "socket_address.address: \"bad name!\" is neither a host name nor an IP address",
        ),
        (
            "STRICT_DNS",
            endpoint("web.example.com", 0),
            String::new(),
            "port_value: 0 is not a valid port",
        ),
        (
            "STRICT_DNS",
            one.clone(),
            "    dns_refresh_rate: 0.001s\n".into(),
            "dns_refresh_rate: must be more than 1ms",
        ),
        (
            "STRICT_DNS",
            one.clone(),
            "    dns_failure_refresh_rate: { base_interval: 2s, max_interval: 1s }\n".into(),
            "dns_failure_refresh_rate.max_interval: must not be below base_interval",
        ),
        (
            "STRICT_DNS",
            one.clone(),
            "    dns_jitter: 1s\n".into(),
            "dns_jitter: only 0 is supported",
        ),
        (
            "STRICT_DNS",
            one.clone(),
            "    dns_resolvers: [{ socket_address: { address: 10.0.0.53, port_value: 53 } }]\n"
                .to_string()
                + &cares(""),
            "dns_resolvers: set typed_dns_resolver_config or dns_resolvers, not both",
        ),
        (
            "STRICT_DNS",
            one.clone(),
            cares("        query_timeout_seconds: 0\n"),
            "query_timeout_seconds: must be between 1 and 3600",
        ),
        (
            "STRICT_DNS",
            one.clone(),
            "    typed_dns_resolver_config:\n      name: apple\n      typed_config: { \"@type\": type.googleapis.com/envoy.extensions.network.dns_resolver.apple.v3.AppleDnsResolverConfig }\n".into(),
            "is not supported (c-ares and getaddrinfo are)",
        ),
    ];
    for (kind, endpoints, extra, want) in cases {
        let e = bad(kind, &endpoints, &extra);
        assert!(e.starts_with(AT) && e.contains(want), "{extra:?}: {e}");
    }
}

#[test]
fn a_dns_cluster_waits_for_its_first_lookup_and_takes_each_new_answer() {
    let yaml = format!(
        "static_resources:\n  clusters:\n  - name: c\n    type: STRICT_DNS\n    load_assignment: {{ cluster_name: c, endpoints: [{{ lb_endpoints: [{}] }}] }}\n",
        endpoint("web.example.com", 80)
    );
    let b = bootstrap::from_str(&yaml, Format::Yaml).unwrap();
    let mut client = XdsClient::new(&b, Instant::now());
    assert!(
        client.compose().clusters.is_empty(),
        "not warm before a lookup"
    );
    let list = client.dns_clusters();
    assert_eq!(list.len(), 1);
    let (name, dns) = &list[0];
    let hosts = |addrs: &[&str]| -> Vec<Endpoint> {
        addrs
            .iter()
            .map(|a| Endpoint {
                address: a.parse().unwrap(),
                weight: 1,
                health: HealthStatus::Unknown,
                hostname: String::new(),
                check: Default::default(),
                placement: Default::default(),
            })
            .collect()
    };
    assert!(client.on_dns(name, dns, hosts(&["10.0.0.1:80", "10.0.0.2:80"])));
    let composed = client.compose();
    assert_eq!(
        composed.clusters[0].endpoints,
        hosts(&["10.0.0.1:80", "10.0.0.2:80"])
    );
    assert!(
        !client.on_dns(name, dns, hosts(&["10.0.0.1:80", "10.0.0.2:80"])),
        "the same answer changes nothing"
    );
    assert!(
        client.on_dns(name, dns, Vec::new()),
        "no hosts is an answer too"
    );
    let other = Arc::new(Dns {
        refresh_rate: Duration::from_secs(9),
        ..(**dns).clone()
    });
    assert!(
        !client.on_dns(name, &other, hosts(&["10.0.0.9:80"])),
        "a config the cluster does not have"
    );
    assert!(!client.on_dns("nope", dns, hosts(&["10.0.0.9:80"])));
}

#[test]
fn a_dns_clusters_overprovisioning_factor_follows_its_config() {
    let yaml = |factor: u32| {
        format!(
            "static_resources:\n  clusters:\n  - name: c\n    type: STRICT_DNS\n    load_assignment: {{ cluster_name: c, policy: {{ overprovisioning_factor: {factor} }}, endpoints: [{{ lb_endpoints: [{}] }}] }}\n",
            endpoint("web.example.com", 80)
        )
    };
    let b = bootstrap::from_str(&yaml(140), Format::Yaml).unwrap();
    let mut client = XdsClient::new(&b, Instant::now());
    let (name, dns) = client.dns_clusters()[0].clone();
    let host = Endpoint {
        address: "10.0.0.1:80".parse().unwrap(),
        weight: 1,
        health: HealthStatus::Unknown,
        hostname: String::new(),
        check: Default::default(),
        placement: Default::default(),
    };
    assert!(client.on_dns(&name, &dns, vec![host.clone()]));
    let factor = |c: &mut XdsClient| c.compose().clusters[0].common_lb.overprovisioning_factor;
    assert_eq!(factor(&mut client), 140);
    // Only the policy changes: the lookup's answer stays, the factor moves.
    let b = bootstrap::from_str(&yaml(100), Format::Yaml).unwrap();
    client.set_statics(&b, Instant::now());
    assert_eq!(client.compose().clusters[0].endpoints, vec![host]);
    assert_eq!(factor(&mut client), 100);
}
