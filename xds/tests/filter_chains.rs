//! A listener's filter chains as an Envoy config writes them: `filter_chain_match` normalised, overlaps refused naming both chains, Envoy's other refusals by path, `tls_inspector` and its timeout, `default_filter_chain`, and chain ids that say what changed.

use std::time::Duration;

use engine::filter_chain::{CidrRange, Connection, SourceType};
use engine::Listener;
use xds::bootstrap::{self, Format};

const AT: &str = "static_resources.listeners[0]";

const HCM: &str = r#"      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: s
          route_config: { virtual_hosts: [ { name: all, domains: ["*"], routes: [ { match: { prefix: "/" }, route: { cluster: c } } ] } ] }
          http_filters: [ { name: envoy.filters.http.router } ]
"#;

/// A chain with `matcher` (YAML flow map, or "" for none).
fn chain(name: &str, matcher: &str) -> String {
    let m = if matcher.is_empty() {
        String::new()
    } else {
        format!("      filter_chain_match: {matcher}\n")
    };
    format!("    - name: {name}\n{m}{HCM}")
}

/// A bootstrap whose listener has `listener_extra` (YAML at the listener's
/// field indentation) and `chains`.
fn load(listener_extra: &str, chains: &[String]) -> Result<Listener, String> {
    let yaml = format!(
        "static_resources:\n  clusters:\n  - name: c\n    load_assignment: {{ cluster_name: c, endpoints: [] }}\n  listeners:\n  - name: l\n    address: {{ socket_address: {{ address: 0.0.0.0, port_value: 8443 }} }}\n{listener_extra}    filter_chains:\n{}",
        chains.concat()
    );
    bootstrap::from_str(&yaml, Format::Yaml)
        .map(|b| (*b.listeners[0]).clone())
        .map_err(|e| e.to_string())
}

fn ok(extra: &str, chains: &[String]) -> Listener {
    load(extra, chains).unwrap_or_else(|e| panic!("refused: {e}"))
}

fn bad(extra: &str, chains: &[String]) -> String {
    match load(extra, chains) {
        Ok(_) => panic!("accepted"),
        Err(e) => e,
    }
}

const INSPECTOR: &str = "    listener_filters:\n    - name: envoy.filters.listener.tls_inspector\n      typed_config: { \"@type\": type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector }\n";

fn conn<'a>(peer: &str, sni: Option<&'a str>) -> Connection<'a> {
    Connection {
        local: "10.0.0.1:8443".parse().unwrap(),
        peer: peer.parse().unwrap(),
        direct_peer: peer.parse().unwrap(),
        server_name: sni,
        transport_protocol: if sni.is_some() { "tls" } else { "raw_buffer" },
        application_protocols: &[],
    }
}

fn chosen(l: &Listener, c: &Connection<'_>) -> Option<String> {
    l.select(c).map(|(_, c)| c.name.clone())
}

#[test]
fn every_match_field_is_read_and_normalised() {
    let l = ok(
        INSPECTOR,
        &[chain(
            "all",
            "{ destination_port: 8443, prefix_ranges: [ { address_prefix: 10.1.2.3, prefix_len: 8 } ], \
             server_names: [ A.Example, \"*.B.example\" ], transport_protocol: tls, \
             application_protocols: [h2], direct_source_prefix_ranges: [ { address_prefix: \"2001:db8::1\", prefix_len: 32 } ], \
             source_type: EXTERNAL, source_prefix_ranges: [ { address_prefix: 192.0.2.9, prefix_len: 40 } ], source_ports: [1, 65535] }",
        )],
    );
    let m = &l.filter_chains[0].filter_chain_match;
    assert_eq!(m.destination_port, Some(8443));
    assert_eq!(
        m.prefix_ranges,
        [CidrRange::new("10.0.0.0".parse().unwrap(), 8).unwrap()]
    );
    assert_eq!(m.server_names, ["a.example", "*.b.example"]);
    assert_eq!(m.transport_protocol, "tls");
    assert_eq!(m.application_protocols, ["h2"]);
    assert_eq!(
        m.direct_source_prefix_ranges[0].to_string(),
        "2001:db8::/32"
    );
    assert_eq!(m.source_type, SourceType::External);
    // IPv4 lengths above 32 are taken as 32 (A36).
    assert_eq!(m.source_prefix_ranges[0].to_string(), "192.0.2.9/32");
    assert_eq!(m.source_ports, [1, 65535]);
    assert!(l.listener_filters.tls_inspector);
    assert_eq!(l.listener_filters.timeout, Some(Duration::from_secs(15)));
}

#[test]
fn overlapping_chains_are_refused_naming_both() {
    // Masked host bits make the two ranges the same.
    let e = bad(
        "",
        &[
            chain("a", "{ prefix_ranges: [ { address_prefix: 10.0.0.0, prefix_len: 8 } ] }"),
            chain("b", "{ source_type: ANY, prefix_ranges: [ { address_prefix: 10.9.9.9, prefix_len: 8 } ] }"),
        ],
    );
    assert_eq!(
        e,
        format!(
            "{AT}.filter_chains[1].filter_chain_match: overlaps filter_chains[0] (\"a\"): a \
             connection could match both (multiple filter chains with the same matching rules)"
        )
    );
    // Names compare lowercase; the same name twice in one chain too.
    assert!(bad(
        INSPECTOR,
        &[
            chain("a", "{ server_names: [X.com] }"),
            chain("b", "{ server_names: [x.com] }")
        ]
    )
    .contains("filter_chains[1].filter_chain_match: overlaps filter_chains[0] (\"a\")"));
    assert!(
        bad(INSPECTOR, &[chain("a", "{ server_names: [x.com, X.COM] }")])
            .contains("filter_chains[0].filter_chain_match: lists the same match twice")
    );
    // Two chains without a match: the same.
    assert!(bad("", &[chain("a", ""), chain("b", "")]).contains("overlaps"));
}

#[test]
fn what_envoy_refuses_is_refused_by_path() {
    let one = |m: &str| bad(INSPECTOR, &[chain("a", m)]);
    let at = format!("{AT}.filter_chains[0].filter_chain_match");
    assert_eq!(
        one("{ server_names: [\"foo*.com\"] }"),
        format!(
            "{at}.server_names[0]: \"foo*.com\": partial wildcards are not supported in \
             server_names (only a leading \"*.\")"
        )
    );
    assert!(one("{ server_names: [\"*\"] }").contains("partial wildcards"));
    assert!(one("{ server_names: [\"a.*.com\"] }").contains("partial wildcards"));
    assert_eq!(
        one("{ address_suffix: x }"),
        format!("{at}.address_suffix: not supported")
    );
    assert_eq!(
        one("{ destination_port: 0 }"),
        format!("{at}.destination_port: 0 is not a port (1 to 65535)")
    );
    assert_eq!(
        one("{ source_ports: [80, 70000] }"),
        format!("{at}.source_ports[1]: 70000 is not a port (1 to 65535)")
    );
    assert_eq!(
        one("{ prefix_ranges: [ { address_prefix: 10.0.0, prefix_len: 8 } ] }"),
        format!("{at}.prefix_ranges[0].address_prefix: malformed IP address \"10.0.0\"")
    );
    assert_eq!(
        one("{ source_prefix_ranges: [ { address_prefix: \"::\", prefix_len: 129 } ] }"),
        format!("{at}.source_prefix_ranges[0].prefix_len: 129 is above 128")
    );
    // Listener filters other than PROXY protocol and the TLS inspector,
    // and the inspector's fingerprints.
    let e = bad(
        "    listener_filters:\n    - name: envoy.filters.listener.original_dst\n",
        &[chain("a", "")],
    );
    assert_eq!(
        e,
        format!(
            "{AT}.listener_filters[0].name: listener filter \"envoy.filters.listener.original_dst\" \
             is not supported; only envoy.filters.listener.proxy_protocol and \
             envoy.filters.listener.tls_inspector are"
        )
    );
    let e = bad(
        "    listener_filters:\n    - name: i\n      typed_config: { \"@type\": type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector, enable_ja3_fingerprinting: true }\n",
        &[chain("a", "")],
    );
    assert_eq!(
        e,
        format!("{AT}.listener_filters[0].typed_config.enable_ja3_fingerprinting: not supported")
    );
    assert_eq!(
        bad("    use_original_dst: true\n", &[chain("a", "")]),
        format!("{AT}.use_original_dst: not supported")
    );
    assert!(load("", &[])
        .unwrap_err()
        .contains("no filter chains specified"));
}

#[test]
fn the_inspector_s_timeout_and_its_continue_flag() {
    let l = ok(
        &format!("{INSPECTOR}    listener_filters_timeout: 0.5s\n    continue_on_listener_filters_timeout: true\n"),
        &[chain("a", "")],
    );
    let i = &l.listener_filters;
    assert_eq!(i.timeout, Some(Duration::from_millis(500)));
    assert!(i.continue_on_timeout);
    let l = ok(
        &format!("{INSPECTOR}    listener_filters_timeout: 0s\n"),
        &[chain("a", "")],
    );
    assert_eq!(l.listener_filters.timeout, None);
    // By name alone, as older configs write it.
    let l = ok(
        "    listener_filters: [ { name: envoy.filters.listener.tls_inspector } ]\n",
        &[chain("a", "")],
    );
    assert!(l.listener_filters.tls_inspector);
    assert!(!ok("", &[chain("a", "")]).listener_filters.any());
}

const PROXY_PROTOCOL: &str =
    "type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol";

/// `envoy.filters.listener.proxy_protocol` with `fields` (flow style).
fn proxy_protocol(fields: &str) -> String {
    format!(
        "    listener_filters:\n    - name: envoy.filters.listener.proxy_protocol\n      typed_config: {{ \"@type\": {PROXY_PROTOCOL}{fields} }}\n"
    )
}

#[test]
fn proxy_protocol_and_what_it_refuses() {
    let l = ok(&proxy_protocol(""), &[chain("a", "")]);
    let f = &l.listener_filters;
    let p = f.proxy_protocol.as_deref().expect("proxy_protocol");
    assert!(p.allow_v1 && p.allow_v2 && !p.allow_without);
    assert_eq!(p.stat_prefix, "");
    assert_eq!(p.pass_through, engine::TlvSelection::None);
    assert!(!f.tls_inspector);
    assert_eq!(f.timeout, Some(Duration::from_secs(15)));
    let l = ok(
        &proxy_protocol(
            ", allow_requests_without_proxy_protocol: true, stat_prefix: edge, \
             disallowed_versions: [V1], pass_through_tlvs: { match_type: INCLUDE, tlv_type: [1, 0xE0] }",
        ),
        &[chain("a", "")],
    );
    let p = l
        .listener_filters
        .proxy_protocol
        .as_deref()
        .expect("proxy_protocol");
    assert!(p.allow_without && !p.allow_v1 && p.allow_v2);
    assert_eq!(p.stat_prefix, "edge");
    assert_eq!(p.pass_through, engine::TlvSelection::Types(vec![1, 0xE0]));
    // With the inspector after it, one timer for both.
    let both = format!(
        "{}    - name: envoy.filters.listener.tls_inspector\n    listener_filters_timeout: 2s\n",
        proxy_protocol(", pass_through_tlvs: {}")
    );
    let l = ok(&both, &[chain("a", "")]);
    assert!(l.listener_filters.tls_inspector);
    assert_eq!(l.listener_filters.timeout, Some(Duration::from_secs(2)));
    assert_eq!(
        l.listener_filters
            .proxy_protocol
            .as_deref()
            .map(|p| &p.pass_through),
        Some(&engine::TlvSelection::All)
    );
    // By name alone.
    let l = ok(
        "    listener_filters: [ { name: envoy.filters.listener.proxy_protocol } ]\n",
        &[chain("a", "")],
    );
    assert!(l.listener_filters.proxy_protocol.is_some());

    // Refusals, by path.
    assert_eq!(
        bad(
            &proxy_protocol(", disallowed_versions: [V1, V2]"),
            &[chain("a", "")]
        ),
        format!(
            "{AT}.listener_filters[0].typed_config.disallowed_versions: all PROXY protocol \
             versions are disallowed"
        )
    );
    assert_eq!(
        bad(
            &proxy_protocol(", rules: [ { tlv_type: 2, on_tlv_present: { key: authority } } ]"),
            &[chain("a", "")]
        ),
        format!("{AT}.listener_filters[0].typed_config.rules: not supported")
    );
    assert_eq!(
        bad(
            &proxy_protocol(", pass_through_tlvs: { match_type: INCLUDE, tlv_type: [256] }"),
            &[chain("a", "")]
        ),
        format!(
            "{AT}.listener_filters[0].typed_config.pass_through_tlvs.tlv_type[0]: 256 is not a \
             TLV type (0-255)"
        )
    );
    let e = bad(&proxy_protocol(", bogus_field: 1"), &[chain("a", "")]);
    assert!(e.contains("bogus_field"), "{e}");
    let reversed = format!("{INSPECTOR}    - name: envoy.filters.listener.proxy_protocol\n");
    assert_eq!(
        bad(&reversed, &[chain("a", "")]),
        format!(
            "{AT}.listener_filters[1]: envoy.filters.listener.proxy_protocol must come before \
             envoy.filters.listener.tls_inspector: the PROXY header is the connection's first bytes"
        )
    );
    let twice = format!(
        "{}    - name: envoy.filters.listener.proxy_protocol\n",
        proxy_protocol("")
    );
    assert_eq!(
        bad(&twice, &[chain("a", "")]),
        format!("{AT}.listener_filters[1]: envoy.filters.listener.proxy_protocol is listed twice")
    );
}

#[test]
fn selection_and_the_default_chain() {
    let default = format!("    default_filter_chain:\n      name: fallback\n{HCM}");
    let l = ok(
        &format!("{INSPECTOR}{default}"),
        &[
            chain(
                "internal",
                "{ source_prefix_ranges: [ { address_prefix: 10.0.0.0, prefix_len: 8 } ] }",
            ),
            chain("api", "{ server_names: [api.example] }"),
        ],
    );
    assert_eq!(
        chosen(&l, &conn("10.2.3.4:5", None)).as_deref(),
        Some("internal")
    );
    assert_eq!(
        chosen(&l, &conn("192.0.2.1:5", Some("api.example"))).as_deref(),
        Some("api")
    );
    assert_eq!(
        chosen(&l, &conn("192.0.2.1:5", None)).as_deref(),
        Some("fallback")
    );
    let l = ok(
        "",
        &[chain("internal", "{ source_type: SAME_IP_OR_LOOPBACK }")],
    );
    assert_eq!(chosen(&l, &conn("192.0.2.1:5", None)), None);
    assert_eq!(
        chosen(&l, &conn("127.0.0.1:5", None)).as_deref(),
        Some("internal")
    );
}

#[test]
fn a_chain_s_id_changes_with_its_configuration_only() {
    let a = chain("a", "{ source_ports: [1] }");
    let b = chain("b", "");
    let first = ok("", &[a.clone(), b.clone()]);
    let again = ok("", &[a.clone(), b.clone()]);
    let changed = ok("", &[a, b.replace("prefix: \"/\"", "prefix: \"/x\"")]);
    let ids = |l: &Listener| l.filter_chains.iter().map(|c| c.id).collect::<Vec<_>>();
    assert_eq!(ids(&first), ids(&again));
    assert_eq!(ids(&first)[0], ids(&changed)[0]);
    assert_ne!(ids(&first)[1], ids(&changed)[1]);
}

/// A chain whose one filter is a TCP proxy with `fields` (YAML flow
/// entries).
fn tcp_chain(name: &str, fields: &str) -> String {
    format!(
        "    - name: {name}\n      filters:\n      - name: envoy.filters.network.tcp_proxy\n        typed_config: {{ \"@type\": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, {fields} }}\n"
    )
}

#[test]
fn tcp_proxy_chains_and_what_they_refuse() {
    let l = ok(
        "",
        &[tcp_chain(
            "t",
            "stat_prefix: t, cluster: later, idle_timeout: 0s, max_connect_attempts: 3, max_downstream_connection_duration: 60s",
        )],
    );
    let t = l.filter_chains[0]
        .tcp_proxy
        .as_ref()
        .expect("a tcp_proxy chain");
    // A cluster not (yet) configured is taken, as Envoy takes it.
    assert!(matches!(&t.target, engine::TcpTarget::Cluster(c) if c == "later"));
    assert_eq!(t.idle_timeout, None);
    assert_eq!(t.max_connect_attempts, 3);
    assert_eq!(
        t.max_downstream_connection_duration,
        Some(Duration::from_secs(60))
    );
    let l = ok("", &[tcp_chain("t", "stat_prefix: t, cluster: c")]);
    let t = l.filter_chains[0].tcp_proxy.as_ref().unwrap();
    assert_eq!(t.idle_timeout, Some(Duration::from_secs(3600)));
    assert_eq!(t.max_connect_attempts, 1);
    let l = ok(
        "",
        &[tcp_chain(
            "t",
            "stat_prefix: t, weighted_clusters: { clusters: [{ name: a, weight: 1 }, { name: b, weight: 3 }] }",
        )],
    );
    let engine::TcpTarget::Weighted(w) = &l.filter_chains[0].tcp_proxy.as_ref().unwrap().target
    else {
        panic!("weighted")
    };
    assert_eq!((w.pick(0), w.pick(1), w.pick(3)), ("a", "b", "b"));
    // HTTP and TCP chains side by side.
    let l = ok(
        INSPECTOR,
        &[
            chain("h", "{ server_names: [h.example] }"),
            tcp_chain("t", "stat_prefix: t, cluster: c").replace(
                "      filters:",
                "      filter_chain_match: { server_names: [t.example] }\n      filters:",
            ),
        ],
    );
    assert!(l.filter_chains[0].tcp_proxy.is_none());
    assert!(l.filter_chains[1].tcp_proxy.is_some());

    let at = format!("{AT}.filter_chains[0].filters[0].typed_config");
    let one = |fields: &str| bad("", &[tcp_chain("t", fields)]);
    assert_eq!(one("cluster: c"), format!("{at}.stat_prefix: required"));
    assert_eq!(
        one("stat_prefix: t"),
        format!("{at}: one of cluster or weighted_clusters is required")
    );
    assert_eq!(
        one("stat_prefix: t, cluster: c, tunneling_config: { hostname: h }"),
        format!("{at}.tunneling_config: not supported")
    );
    assert_eq!(
        one("stat_prefix: t, cluster: c, upstream_connect_mode: ON_DOWNSTREAM_DATA"),
        format!("{at}.upstream_connect_mode: ON_DOWNSTREAM_DATA is not supported")
    );
    assert_eq!(
        one("stat_prefix: t, weighted_clusters: { clusters: [{ name: a, weight: 0 }] }"),
        format!("{at}.weighted_clusters.clusters[0].weight: must be at least 1")
    );
    assert_eq!(
        one("stat_prefix: t, cluster: c, max_connect_attempts: 0"),
        format!("{at}.max_connect_attempts: 0 is out of range 1..=4294967295")
    );
    // Other network filters are named in the refusal.
    let e = bad(
        "",
        &["    - name: r\n      filters:\n      - name: envoy.filters.network.redis_proxy\n        typed_config: { \"@type\": type.googleapis.com/google.protobuf.Empty }\n".to_string()],
    );
    assert!(
        e.contains("network filter \"envoy.filters.network.redis_proxy\"")
            && e.contains("only type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager and type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy are"),
        "{e}"
    );
}
