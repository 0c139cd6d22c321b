//! `RING_HASH` / `MAGLEV` clusters and route `hash_policy` as Envoy's docs,
//! Istio and Envoy Gateway write them: defaults, ranges, refusals by name.

use engine::{HashOn, LbPolicy};
use xds::bootstrap::{self, Format};

fn cluster(extra: &str) -> Result<LbPolicy, String> {
    let yaml = format!("static_resources:\n  clusters:\n  - name: c\n{extra}");
    bootstrap::from_str(&yaml, Format::Yaml)
        .map(|b| b.clusters[0].lb_policy)
        .map_err(|e| e.to_string())
}

#[test]
fn ring_hash_and_maglev_with_envoys_defaults_and_ranges() {
    assert_eq!(
        cluster("    lb_policy: RING_HASH\n").unwrap(),
        LbPolicy::RingHash(engine::RingHash {
            minimum_ring_size: 1024,
            maximum_ring_size: 8 * 1024 * 1024
        })
    );
    assert_eq!(
        cluster("    lb_policy: RING_HASH\n    ring_hash_lb_config: { minimum_ring_size: 4096, maximum_ring_size: 65536 }\n")
            .unwrap(),
        LbPolicy::RingHash(engine::RingHash {
            minimum_ring_size: 4096,
            maximum_ring_size: 65536
        })
    );
    assert_eq!(
        cluster("    lb_policy: MAGLEV\n").unwrap(),
        LbPolicy::Maglev(engine::Maglev { table_size: 65537 })
    );
    assert_eq!(
        cluster("    lb_policy: MAGLEV\n    maglev_lb_config: { table_size: 251 }\n").unwrap(),
        LbPolicy::Maglev(engine::Maglev { table_size: 251 })
    );
    let at = "static_resources.clusters[0]";
    for (extra, want) in [
        (
            "    lb_policy: MAGLEV\n    maglev_lb_config: { table_size: 65536 }\n",
            "maglev_lb_config.table_size: 65536 is not a prime",
        ),
        (
            "    lb_policy: RING_HASH\n    ring_hash_lb_config: { minimum_ring_size: 9000, maximum_ring_size: 8000 }\n",
            "ring_hash_lb_config.minimum_ring_size: 9000 is above maximum_ring_size (8000)",
        ),
        (
            "    lb_policy: RING_HASH\n    ring_hash_lb_config: { hash_function: MURMUR_HASH_2 }\n",
            "ring_hash_lb_config.hash_function",
        ),
        (
            "    lb_policy: ROUND_ROBIN\n    maglev_lb_config: {}\n",
            "maglev_lb_config: only allowed with lb_policy MAGLEV",
        ),
    ] {
        let e = cluster(extra).unwrap_err();
        assert!(e.contains(&format!("{at}.{want}")), "{extra}: {e}");
    }
}

fn route(hash_policy: &str) -> Result<Vec<engine::HashPolicy>, String> {
    let yaml = format!(
        r#"static_resources:
  listeners:
  - name: l
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: s
          route_config:
            virtual_hosts:
            - name: v
              domains: ["*"]
              routes:
              - match: {{ prefix: "/" }}
                route: {{ cluster: c, hash_policy: {hash_policy} }}
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: c
    lb_policy: RING_HASH
"#
    );
    let b = bootstrap::from_str(&yaml, Format::Yaml).map_err(|e| e.to_string())?;
    let chain = b.listeners[0].chains().next().unwrap();
    let rc = chain.http.route_config.as_ref();
    Ok(rc.virtual_hosts[0].routes[0]
        .action
        .forward()
        .unwrap()
        .hash_policy
        .clone())
}

#[test]
fn hash_policies_as_written() {
    let p = route(
        "[{ header: { header_name: X-User }, terminal: true }, { cookie: { name: sid, ttl: 0s } }, { connection_properties: { source_ip: true } }, { query_parameter: { name: u } }]",
    )
    .unwrap();
    assert_eq!(p[0].kind, HashOn::Header("x-user".into()));
    assert!(p[0].terminal);
    assert_eq!(
        p[1].kind,
        HashOn::Cookie {
            name: "sid".into(),
            ttl: Some(std::time::Duration::ZERO),
            path: None
        }
    );
    assert_eq!(p[2].kind, HashOn::SourceIp);
    assert_eq!(p[3].kind, HashOn::QueryParameter("u".into()));
    for (hp, want) in [
        ("[{ filter_state: { key: k } }]", "hash_policy[0].filter_state: not supported"),
        (
            "[{ cookie: { name: s, attributes: [{ name: SameSite, value: Lax }] } }]",
            "hash_policy[0].cookie.attributes: not supported",
        ),
        (
            "[{ header: { header_name: x, regex_rewrite: { pattern: { regex: a }, substitution: b } } }]",
            "hash_policy[0].header.regex_rewrite: not supported",
        ),
        ("[{ terminal: true }]", "hash_policy[0]: one of header"),
    ] {
        let e = route(hp).unwrap_err();
        assert!(e.contains(want), "{hp}: {e}");
    }
}

#[test]
fn locality_weighted_balancing_and_placements() {
    let yaml = "static_resources:\n  clusters:\n  - name: c\n    common_lb_config: { locality_weighted_lb_config: {} }\n    load_assignment:\n      cluster_name: c\n      endpoints:\n      - { locality: { zone: a }, load_balancing_weight: 3, lb_endpoints: [{ endpoint: { address: { socket_address: { address: 10.0.0.1, port_value: 80 } } } }] }\n      - { locality: { zone: b }, priority: 1, lb_endpoints: [{ endpoint: { address: { socket_address: { address: 10.0.0.2, port_value: 80 } } } }] }\n";
    let b = bootstrap::from_str(yaml, Format::Yaml).unwrap();
    let c = &b.clusters[0];
    assert!(c.common_lb.locality_weighted);
    assert_eq!(
        c.endpoints[0].placement,
        engine::Placement {
            priority: 0,
            locality: 0,
            locality_weight: 3
        }
    );
    assert_eq!(
        c.endpoints[1].placement,
        engine::Placement {
            priority: 1,
            locality: 1,
            locality_weight: 0
        }
    );
    let e = cluster(
        "    lb_policy: MAGLEV\n    common_lb_config: { locality_weighted_lb_config: {} }\n",
    )
    .unwrap_err();
    assert!(
        e.contains(
            "common_lb_config.locality_weighted_lb_config: not supported with RING_HASH or MAGLEV"
        ),
        "{e}"
    );
}

#[test]
fn load_assignment_policy_overprovisioning_factor() {
    let with_policy = |kind: &str, policy: &str| {
        let yaml = format!(
            "static_resources:\n  clusters:\n  - name: c\n    type: {kind}\n    load_assignment:\n      cluster_name: c\n      policy: {policy}\n      endpoints:\n      - lb_endpoints: [{{ endpoint: {{ address: {{ socket_address: {{ address: backend.test, port_value: 80 }} }} }} }}]\n"
        );
        let yaml = if kind == "STATIC" {
            yaml.replace("backend.test", "10.0.0.1")
        } else {
            yaml
        };
        bootstrap::from_str(&yaml, Format::Yaml)
            .map(|b| b.clusters[0].common_lb.overprovisioning_factor)
            .map_err(|e| e.to_string())
    };
    assert_eq!(with_policy("STATIC", "{}"), Ok(140));
    assert_eq!(
        with_policy("STATIC", "{ overprovisioning_factor: 100 }"),
        Ok(100)
    );
    assert_eq!(
        with_policy("STRICT_DNS", "{ overprovisioning_factor: 250 }"),
        Ok(250)
    );
    let e = with_policy("STATIC", "{ overprovisioning_factor: 0 }").unwrap_err();
    assert!(
        e.contains("load_assignment.policy.overprovisioning_factor: 0 is out of range"),
        "{e}"
    );
    for (field, value) in [
        ("weighted_priority_health", "true"),
        ("endpoint_stale_after", "5s"),
        ("drop_overloads", "[{ category: lb }]"),
    ] {
        let e = with_policy("STATIC", &format!("{{ {field}: {value} }}")).unwrap_err();
        assert!(
            e.contains(&format!("load_assignment.policy.{field}")) && e.contains("not supported"),
            "{e}"
        );
    }
}
