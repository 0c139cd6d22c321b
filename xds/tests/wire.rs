//! Wire compatibility with Envoy's real protos (the `envoy-types` crate):
//! messages built and encoded by envoy-types decode with our structs and
//! validate, and every field we model survives envoy → ours → envoy
//! unchanged, which proves our field numbers and types match Envoy's.

// Several of Envoy's fields we accept are deprecated upstream.
#![allow(deprecated)]

use std::collections::{HashMap, HashSet};

use envoy_types::pb::envoy::config::cluster::v3 as e_cluster;
use envoy_types::pb::envoy::config::core::v3 as e_core;
use envoy_types::pb::envoy::config::endpoint::v3 as e_ep;
use envoy_types::pb::envoy::config::listener::v3 as e_listener;
use envoy_types::pb::envoy::config::route::v3 as e_route;
use envoy_types::pb::envoy::extensions::filters::http::router::v3 as e_router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3 as e_hcm;
use envoy_types::pb::envoy::extensions::upstreams::http::v3 as e_up;
use envoy_types::pb::envoy::r#type::matcher::v3 as e_matcher;
use envoy_types::pb::envoy::r#type::v3 as e_type;
use envoy_types::pb::google::protobuf as e_wkt;
use prost::{Message, Name};
use xds::pb::envoy::config::cluster::v3 as o_cluster;
use xds::pb::envoy::config::endpoint::v3 as o_ep;
use xds::pb::envoy::config::listener::v3 as o_listener;
use xds::pb::envoy::config::route::v3 as o_route;
use xds::pb::envoy::extensions::filters::network::http_connection_manager::v3 as o_hcm;
use xds::{validate, Path};

fn dur(seconds: i64, nanos: i32) -> Option<e_wkt::Duration> {
    Some(e_wkt::Duration { seconds, nanos })
}
fn u32v(value: u32) -> Option<e_wkt::UInt32Value> {
    Some(e_wkt::UInt32Value { value })
}
fn any<M: Message + Name>(m: &M) -> e_wkt::Any {
    e_wkt::Any {
        type_url: M::type_url(),
        value: m.encode_to_vec(),
    }
}
fn sock(address: &str, port: u32) -> Option<e_core::Address> {
    Some(e_core::Address {
        address: Some(e_core::address::Address::SocketAddress(
            e_core::SocketAddress {
                address: address.into(),
                port_specifier: Some(e_core::socket_address::PortSpecifier::PortValue(port)),
                ..Default::default()
            },
        )),
    })
}

/// Encodes `theirs`, decodes it as `Ours`, re-encodes, decodes as `Theirs`
/// again and checks nothing was lost or changed.
fn round_trip<Theirs, Ours>(theirs: &Theirs) -> Ours
where
    Theirs: Message + Default + PartialEq + std::fmt::Debug,
    Ours: Message + Default,
{
    let ours = Ours::decode(theirs.encode_to_vec().as_slice()).expect("ours decodes envoy's bytes");
    let back = Theirs::decode(ours.encode_to_vec().as_slice()).expect("envoy decodes our bytes");
    assert_eq!(&back, theirs, "fields changed across the round trip");
    ours
}

fn h2_options() -> e_core::Http2ProtocolOptions {
    e_core::Http2ProtocolOptions {
        max_concurrent_streams: u32v(64),
        initial_stream_window_size: u32v(1 << 20),
        initial_connection_window_size: u32v(1 << 24),
        ..Default::default()
    }
}

fn envoy_cluster() -> e_cluster::Cluster {
    let opts = e_up::HttpProtocolOptions {
        upstream_protocol_options: Some(
            e_up::http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(
                e_up::http_protocol_options::ExplicitHttpConfig {
                    protocol_config: Some(
                        e_up::http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
                            h2_options(),
                        ),
                    ),
                },
            ),
        ),
        ..Default::default()
    };
    let endpoint = |ip: &str, health: e_core::HealthStatus, weight| e_ep::LbEndpoint {
        host_identifier: Some(e_ep::lb_endpoint::HostIdentifier::Endpoint(
            e_ep::Endpoint {
                address: sock(ip, 8443),
                ..Default::default()
            },
        )),
        health_status: health as i32,
        load_balancing_weight: weight,
        ..Default::default()
    };
    e_cluster::Cluster {
        name: "backend".into(),
        cluster_discovery_type: Some(e_cluster::cluster::ClusterDiscoveryType::Type(
            e_cluster::cluster::DiscoveryType::Static as i32,
        )),
        connect_timeout: dur(1, 500_000_000),
        lb_policy: e_cluster::cluster::LbPolicy::RoundRobin as i32,
        typed_extension_protocol_options: HashMap::from([(
            e_up::HttpProtocolOptions::full_name(),
            any(&opts),
        )]),
        load_assignment: Some(e_ep::ClusterLoadAssignment {
            cluster_name: "backend".into(),
            endpoints: vec![e_ep::LocalityLbEndpoints {
                locality: Some(e_core::Locality {
                    region: "r".into(),
                    zone: "z".into(),
                    sub_zone: "s".into(),
                }),
                load_balancing_weight: u32v(5),
                lb_endpoints: vec![
                    endpoint("10.1.0.1", e_core::HealthStatus::Healthy, u32v(2)),
                    endpoint("fd00::1", e_core::HealthStatus::Degraded, None),
                ],
                ..Default::default()
            }],
            policy: Some(e_ep::cluster_load_assignment::Policy {
                overprovisioning_factor: u32v(150),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn cluster_from_envoy_bytes() {
    let ours: o_cluster::Cluster = round_trip(&envoy_cluster());
    let c = validate::cluster(&ours, &Path::root()).unwrap();
    assert_eq!(c.name, "backend");
    assert_eq!(c.connect_timeout, std::time::Duration::from_millis(1500));
    assert_eq!(
        c.http2,
        engine::UpstreamHttp2 {
            max_concurrent_streams: 64,
            initial_stream_window_size: 1 << 20,
            initial_connection_window_size: 1 << 24,
        }
    );
    assert_eq!(c.endpoints.len(), 2);
    assert_eq!(c.common_lb.overprovisioning_factor, 150);
    assert_eq!(c.endpoints[0].address, "10.1.0.1:8443".parse().unwrap());
    assert_eq!(c.endpoints[0].weight, 2);
    assert_eq!(c.endpoints[0].health, engine::HealthStatus::Healthy);
    assert_eq!(c.endpoints[1].health, engine::HealthStatus::Degraded);
    assert_eq!(c.endpoints[1].weight, 1);

    // ClusterLoadAssignment on its own, as EDS will deliver it.
    let la = envoy_cluster().load_assignment.unwrap();
    let ours: o_ep::ClusterLoadAssignment = round_trip(&la);
    let assignment = validate::cluster_load_assignment(&ours, &Path::root()).unwrap();
    assert_eq!(assignment.overprovisioning_factor, 150);
    assert_eq!(assignment.endpoints, c.endpoints);

    // The deprecated cluster-level field and the enums by number.
    let mut legacy = envoy_cluster();
    legacy.typed_extension_protocol_options.clear();
    legacy.http2_protocol_options = Some(h2_options());
    legacy.lb_policy = e_cluster::cluster::LbPolicy::ClusterProvided as i32;
    let ours: o_cluster::Cluster = round_trip(&legacy);
    assert_eq!(
        validate::cluster(&ours, &Path::root())
            .unwrap_err()
            .to_string(),
        "lb_policy: CLUSTER_PROVIDED is not supported"
    );
    legacy.lb_policy = 0;
    let ours: o_cluster::Cluster = round_trip(&legacy);
    assert_eq!(
        validate::cluster(&ours, &Path::root())
            .unwrap()
            .http2
            .max_concurrent_streams,
        64
    );
}

#[test]
fn unmodelled_fields_decode_and_are_rejected() {
    // Fields we declare as `gateway.v1.Unsupported` still decode from real
    // Envoy messages (contents skipped) and are then reported.
    let mut c = envoy_cluster();
    c.lb_subset_config = Some(e_cluster::cluster::LbSubsetConfig {
        subset_selectors: vec![e_cluster::cluster::lb_subset_config::LbSubsetSelector {
            keys: vec!["a".into()],
            ..Default::default()
        }],
        ..Default::default()
    });
    let ours = o_cluster::Cluster::decode(c.encode_to_vec().as_slice()).unwrap();
    assert_eq!(
        validate::cluster(&ours, &Path::root())
            .unwrap_err()
            .to_string(),
        "lb_subset_config: not supported"
    );
}

fn string_matcher(
    p: e_matcher::string_matcher::MatchPattern,
    ignore_case: bool,
) -> e_matcher::StringMatcher {
    e_matcher::StringMatcher {
        match_pattern: Some(p),
        ignore_case,
    }
}

fn envoy_route_config() -> e_route::RouteConfiguration {
    use e_route::header_matcher::HeaderMatchSpecifier as H;
    use e_route::route_action::{ClusterSpecifier, HostRewriteSpecifier};
    use e_route::route_match::PathSpecifier;
    let regex = |r: &str| e_matcher::RegexMatcher {
        regex: r.into(),
        engine_type: Some(e_matcher::regex_matcher::EngineType::GoogleRe2(
            e_matcher::regex_matcher::GoogleRe2::default(),
        )),
    };
    let header = |name: &str, spec: H, invert| e_route::HeaderMatcher {
        name: name.into(),
        header_match_specifier: Some(spec),
        invert_match: invert,
        ..Default::default()
    };
    use e_matcher::string_matcher::MatchPattern as M;
    let headers = vec![
        header("a", H::ExactMatch("x".into()), false),
        header("b", H::SafeRegexMatch(regex("[a-z]+")), true),
        header(
            "c",
            H::RangeMatch(e_type::Int64Range { start: -5, end: 10 }),
            false,
        ),
        header("d", H::PresentMatch(true), false),
        header("e", H::PrefixMatch("p".into()), false),
        header("f", H::SuffixMatch("s".into()), false),
        header("g", H::ContainsMatch("c".into()), false),
        header(
            "h",
            H::StringMatch(string_matcher(M::Exact("E".into()), true)),
            false,
        ),
        header(
            "i",
            H::StringMatch(string_matcher(M::Prefix("P".into()), false)),
            false,
        ),
        header(
            "j",
            H::StringMatch(string_matcher(M::Suffix("S".into()), false)),
            false,
        ),
        header(
            "k",
            H::StringMatch(string_matcher(M::Contains("C".into()), false)),
            false,
        ),
        header(
            "l",
            H::StringMatch(string_matcher(M::SafeRegex(regex("x.*")), false)),
            false,
        ),
    ];
    let route = |name: &str, path: PathSpecifier, action: e_route::RouteAction| e_route::Route {
        name: name.into(),
        r#match: Some(e_route::RouteMatch {
            path_specifier: Some(path),
            case_sensitive: Some(e_wkt::BoolValue { value: false }),
            headers: headers.clone(),
            ..Default::default()
        }),
        action: Some(e_route::route::Action::Route(action)),
        ..Default::default()
    };
    let weighted = e_route::WeightedCluster {
        clusters: vec![
            e_route::weighted_cluster::ClusterWeight {
                name: "backend".into(),
                weight: u32v(3),
                ..Default::default()
            },
            e_route::weighted_cluster::ClusterWeight {
                name: "other".into(),
                weight: u32v(1),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    e_route::RouteConfiguration {
        name: "rc".into(),
        validate_clusters: Some(e_wkt::BoolValue { value: true }),
        virtual_hosts: vec![e_route::VirtualHost {
            name: "vh".into(),
            domains: vec!["example.com".into(), "*.example.org".into()],
            routes: vec![
                route(
                    "r1",
                    PathSpecifier::Prefix("/api/".into()),
                    e_route::RouteAction {
                        cluster_specifier: Some(ClusterSpecifier::Cluster("backend".into())),
                        prefix_rewrite: "/".into(),
                        host_rewrite_specifier: Some(HostRewriteSpecifier::HostRewriteLiteral(
                            "h".into(),
                        )),
                        timeout: dur(3, 0),
                        ..Default::default()
                    },
                ),
                route(
                    "r2",
                    PathSpecifier::Path("/exact".into()),
                    e_route::RouteAction {
                        cluster_specifier: Some(ClusterSpecifier::WeightedClusters(weighted)),
                        ..Default::default()
                    },
                ),
                route(
                    "r3",
                    PathSpecifier::SafeRegex(regex("/r/[0-9]+")),
                    e_route::RouteAction {
                        cluster_specifier: Some(ClusterSpecifier::Cluster("other".into())),
                        timeout: dur(0, 0),
                        ..Default::default()
                    },
                ),
            ],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn envoy_listener() -> e_listener::Listener {
    let hcm = e_hcm::HttpConnectionManager {
        codec_type: e_hcm::http_connection_manager::CodecType::Http2 as i32,
        stat_prefix: "in".into(),
        route_specifier: Some(e_hcm::http_connection_manager::RouteSpecifier::RouteConfig(
            envoy_route_config(),
        )),
        http_filters: vec![e_hcm::HttpFilter {
            name: "envoy.filters.http.router".into(),
            config_type: Some(e_hcm::http_filter::ConfigType::TypedConfig(any(
                &e_router::Router::default(),
            ))),
            ..Default::default()
        }],
        http2_protocol_options: Some(h2_options()),
        common_http_protocol_options: Some(e_core::HttpProtocolOptions {
            idle_timeout: dur(30, 0),
            ..Default::default()
        }),
        stream_idle_timeout: dur(0, 0),
        drain_timeout: dur(1, 0),
        max_request_headers_kb: u32v(16),
        ..Default::default()
    };
    e_listener::Listener {
        name: "in".into(),
        address: sock("::", 8080),
        filter_chains: vec![e_listener::FilterChain {
            filters: vec![e_listener::Filter {
                name: "envoy.filters.network.http_connection_manager".into(),
                config_type: Some(e_listener::filter::ConfigType::TypedConfig(any(&hcm))),
            }],
            name: "only".into(),
            ..Default::default()
        }],
        stat_prefix: "in".into(),
        ..Default::default()
    }
}

#[test]
fn listener_and_routes_from_envoy_bytes() {
    let theirs = envoy_listener();
    let ours: o_listener::Listener = round_trip(&theirs);
    // The HCM and its route table travel in an Any: round-trip those too.
    let _: o_hcm::HttpConnectionManager = round_trip(&{
        let Some(e_listener::filter::ConfigType::TypedConfig(a)) =
            &theirs.filter_chains[0].filters[0].config_type
        else {
            unreachable!()
        };
        e_hcm::HttpConnectionManager::decode(a.value.as_slice()).unwrap()
    });
    let _: o_route::RouteConfiguration = round_trip(&envoy_route_config());

    let known: HashSet<String> = ["backend".to_string(), "other".to_string()].into();
    let l = validate::listener(&ours, &Path::root(), &known).unwrap();
    assert_eq!(l.address, "[::]:8080".parse().unwrap());
    let h = &l.filter_chains[0].http;
    assert_eq!(
        (h.max_concurrent_streams, h.max_header_list_size),
        (64, 16 * 1024)
    );
    assert_eq!(h.idle_timeout, Some(std::time::Duration::from_secs(30)));
    assert_eq!(h.stream_idle_timeout, None);
    let vh = &h.route_config.virtual_hosts[0];
    assert_eq!(vh.routes.len(), 3);
    assert_eq!(vh.routes[0].matcher.headers.len(), 12);
    assert!(!vh.routes[0].matcher.case_sensitive);
    assert!(matches!(
        vh.routes[0].matcher.headers[2].kind,
        engine::HeaderMatchKind::Range { start: -5, end: 10 }
    ));
    assert!(vh.routes[0].matcher.headers[1].invert);
    assert!(matches!(
        &vh.routes[0].action.forward().unwrap().host_rewrite,
        Some(engine::HostRewrite::Literal(h)) if h == "h"
    ));
    assert!(
        matches!(&vh.routes[1].action.forward().unwrap().target, engine::ClusterTarget::Weighted(w) if w.total_weight == 4)
    );
    assert_eq!(vh.routes[2].action.forward().unwrap().timeout, None);

    // An RDS-style table (not inline) accepts unknown clusters unless asked.
    let mut rc = envoy_route_config();
    rc.validate_clusters = None;
    let ours: o_route::RouteConfiguration = round_trip(&rc);
    assert!(validate::route_config(&ours, &Path::root(), &HashSet::new(), false).is_ok());
    assert!(validate::route_config(&ours, &Path::root(), &HashSet::new(), true).is_err());
}

#[test]
fn our_encoding_decodes_with_envoy_types() {
    // The other direction, starting from text: YAML → our structs → bytes
    // → envoy-types.
    let yaml = include_str!("data/bootstrap.yaml");
    let value: serde_json::Value = serde_yaml::from_str(yaml).unwrap();
    let ours: xds::pb::envoy::config::bootstrap::v3::Bootstrap =
        xds::decode::from_json(value, &Path::root()).unwrap();
    let theirs = envoy_types::pb::envoy::config::bootstrap::v3::Bootstrap::decode(
        ours.encode_to_vec().as_slice(),
    )
    .unwrap();
    let node = theirs.node.unwrap();
    assert_eq!(
        (node.id.as_str(), node.cluster.as_str()),
        ("gateway-0", "edge")
    );
    let sr = theirs.static_resources.unwrap();
    let cluster = &sr.clusters[0];
    assert_eq!(cluster.connect_timeout, dur(0, 250_000_000));
    let opts = &cluster.typed_extension_protocol_options[&e_up::HttpProtocolOptions::full_name()];
    let opts = e_up::HttpProtocolOptions::decode(opts.value.as_slice()).unwrap();
    let Some(e_up::http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(explicit)) =
        opts.upstream_protocol_options
    else {
        panic!("explicit_http_config expected")
    };
    let Some(
        e_up::http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(h2),
    ) = explicit.protocol_config
    else {
        panic!("http2_protocol_options expected")
    };
    assert_eq!(h2.max_concurrent_streams, u32v(500));
    let lbe = &cluster.load_assignment.as_ref().unwrap().endpoints[0].lb_endpoints[1];
    assert_eq!(lbe.health_status, e_core::HealthStatus::Draining as i32);
    assert_eq!(lbe.load_balancing_weight, u32v(3));

    let Some(e_listener::filter::ConfigType::TypedConfig(hcm)) =
        &sr.listeners[0].filter_chains[0].filters[0].config_type
    else {
        panic!("typed_config expected")
    };
    let hcm = e_hcm::HttpConnectionManager::decode(hcm.value.as_slice()).unwrap();
    assert_eq!(hcm.max_request_headers_kb, u32v(96));
    assert_eq!(hcm.stream_idle_timeout, dur(60, 0));
    let Some(e_hcm::http_connection_manager::RouteSpecifier::RouteConfig(rc)) = hcm.route_specifier
    else {
        panic!("route_config expected")
    };
    let route = &rc.virtual_hosts[0].routes[1];
    let Some(e_route::route::Action::Route(action)) = &route.action else {
        panic!("route action expected")
    };
    let Some(e_route::route_action::ClusterSpecifier::WeightedClusters(w)) =
        &action.cluster_specifier
    else {
        panic!("weighted_clusters expected")
    };
    assert_eq!(w.clusters[1].name, "canary");
    assert_eq!(w.clusters[1].weight, u32v(10));
}
