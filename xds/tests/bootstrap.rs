//! Bootstrap decoding and validation: a realistic good config in YAML and
//! JSON, and one bad config per class of error with its exact message.

mod support;

use std::time::Duration;

use engine::{ClusterTarget, DomainMatcher, HeaderMatchKind, HealthStatus, PathMatch};
use support::{bad, edit, load, GOOD, HCM};
use xds::bootstrap::{self, Format};

fn data(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

#[test]
fn good_yaml_maps_every_field() {
    let b = bootstrap::load_file(data("bootstrap.yaml")).unwrap();
    assert_eq!(b.node.id, "gateway-0");
    assert_eq!(b.node.cluster, "edge");
    assert_eq!(b.admin, Some("127.0.0.1:9901".parse().unwrap()));

    assert_eq!(b.listeners.len(), 1);
    let l = &b.listeners[0];
    assert_eq!(l.name, "ingress");
    assert_eq!(l.address, "0.0.0.0:10000".parse().unwrap());
    let h = &l.filter_chains[0].http;
    assert_eq!(h.stat_prefix, "ingress_http");
    assert_eq!(h.max_concurrent_streams, 256);
    assert_eq!(h.max_header_list_size, 96 * 1024);
    assert_eq!(h.initial_stream_window_size, 65535);
    assert_eq!(h.initial_connection_window_size, 16 * 1024 * 1024);
    assert_eq!(h.idle_timeout, None);
    assert_eq!(h.stream_idle_timeout, Some(Duration::from_secs(60)));
    assert_eq!(h.drain_timeout, Duration::from_secs(2));

    let rc = &h.route_config;
    assert_eq!(rc.name, "local_route");
    let api = &rc.virtual_hosts[0];
    assert_eq!(
        api.domains,
        [
            DomainMatcher::Exact("api.example.com".into()),
            DomainMatcher::Exact("api.example.com:8080".into())
        ]
    );
    let users = &api.routes[0];
    assert_eq!(users.name, "users");
    assert!(matches!(&users.matcher.path, PathMatch::Prefix(p) if p == "/users/"));
    assert!(users.matcher.case_sensitive);
    let tenant = &users.matcher.headers[0];
    assert_eq!(tenant.name, "x-tenant");
    let HeaderMatchKind::Regex(re) = &tenant.kind else {
        panic!("ignore_case exact should be a regex: {tenant:?}")
    };
    assert!(re.is_match("ACME") && !re.is_match("acme2"));
    assert!(matches!(&users.matcher.headers[1].kind, HeaderMatchKind::Exact(m) if m == "GET"));
    assert!(
        matches!(&users.action.forward().unwrap().target, ClusterTarget::Cluster(c) if c == "users")
    );
    assert_eq!(
        users.action.forward().unwrap().timeout,
        Some(Duration::from_millis(2500))
    );
    assert_eq!(
        users.action.forward().unwrap().prefix_rewrite.as_deref(),
        Some("/v2/users/")
    );

    let items = &api.routes[1];
    let PathMatch::Regex(re) = &items.matcher.path else {
        panic!("safe_regex expected")
    };
    assert!(re.is_match("/items/42") && !re.is_match("/items/42/x"));
    let ClusterTarget::Weighted(w) = &items.action.forward().unwrap().target else {
        panic!("weighted expected")
    };
    assert_eq!(w.total_weight, 100);
    assert_eq!(items.action.forward().unwrap().timeout, None);

    let wild = &rc.virtual_hosts[1];
    assert_eq!(
        wild.domains,
        [
            DomainMatcher::Suffix(".example.com".into()),
            DomainMatcher::Prefix("static.".into()),
            DomainMatcher::Any
        ]
    );
    let hz = &wild.routes[0];
    assert!(!hz.matcher.case_sensitive);
    assert!(matches!(
        &hz.action.forward().unwrap().host_rewrite,
        Some(engine::HostRewrite::Literal(h)) if h == "backend.internal"
    ));
    assert_eq!(
        hz.action.forward().unwrap().timeout,
        Some(engine::DEFAULT_ROUTE_TIMEOUT)
    );

    assert_eq!(b.clusters.len(), 2);
    let c = &b.clusters[0];
    assert_eq!(c.name, "users");
    assert_eq!(c.connect_timeout, Duration::from_millis(250));
    assert_eq!(c.http2.max_concurrent_streams, 500);
    assert_eq!(
        c.http2.initial_stream_window_size,
        engine::UpstreamHttp2::default().initial_stream_window_size
    );
    assert_eq!(
        c.endpoints,
        [
            engine::Endpoint {
                address: "10.0.0.1:8080".parse().unwrap(),
                weight: 1,
                health: HealthStatus::Unknown,
                hostname: String::new(),
                check: Default::default(),
                placement: Default::default(),
            },
            engine::Endpoint {
                address: "[::1]:8080".parse().unwrap(),
                weight: 3,
                health: HealthStatus::Draining,
                hostname: String::new(),
                check: Default::default(),
                placement: Default::default(),
            },
        ]
    );
    let canary = &b.clusters[1];
    assert_eq!(canary.connect_timeout, engine::DEFAULT_CONNECT_TIMEOUT);
    assert_eq!(canary.http2, engine::UpstreamHttp2::default());
}

#[test]
fn json_with_camel_case_names_matches_yaml() {
    let yaml = bootstrap::load_file(data("bootstrap.yaml")).unwrap();
    let json = bootstrap::load_file(data("bootstrap.json")).unwrap();
    // Regex has no PartialEq; Debug shows everything including patterns.
    assert_eq!(format!("{yaml:?}"), format!("{json:?}"));
    let text = std::fs::read_to_string(data("bootstrap.json")).unwrap();
    let from_str = bootstrap::from_str(&text, Format::Json).unwrap();
    assert_eq!(format!("{yaml:?}"), format!("{from_str:?}"));
}

#[test]
fn defaults_when_unset() {
    let b = load(&edit(
        "          stream_idle_timeout: 60s\n          drain_timeout: 2s\n          max_request_headers_kb: 96\n          common_http_protocol_options:\n            idle_timeout: 0s\n          http2_protocol_options:\n            max_concurrent_streams: 256\n            initial_stream_window_size: 65535\n",
        "",
    ))
    .unwrap();
    let h = &b.listeners[0].filter_chains[0].http;
    assert_eq!(
        h.max_concurrent_streams,
        engine::DEFAULT_DOWNSTREAM_MAX_CONCURRENT_STREAMS
    );
    assert_eq!(h.max_header_list_size, engine::DEFAULT_MAX_HEADER_LIST_SIZE);
    assert_eq!(h.initial_stream_window_size, 1024 * 1024);
    assert_eq!(h.initial_connection_window_size, 16 * 1024 * 1024);
    assert_eq!(h.idle_timeout, Some(Duration::from_secs(3600)));
    assert_eq!(h.stream_idle_timeout, Some(Duration::from_secs(300)));
    assert_eq!(h.drain_timeout, Duration::from_secs(5));
}

#[test]
fn unknown_field_names_its_path() {
    assert_eq!(
        bad(
            "    lb_policy: ROUND_ROBIN\n",
            "    lb_policy: ROUND_ROBIN\n    bogus: 1\n"
        ),
        "static_resources.clusters[0].bogus: unknown field"
    );
    // Inside an Any, by the name as written.
    assert_eq!(
        bad(
            "          codec_type: HTTP2\n",
            "          codec_type: HTTP2\n          routeConfigs: {}\n"
        ),
        format!("{HCM}.routeConfigs: unknown field")
    );
}

#[test]
fn type_errors_name_their_path() {
    let e = bad("port_value: 10000", "port_value: \"ten\"");
    assert!(
        e.starts_with("static_resources.listeners[0].address.socket_address.port_value: "),
        "{e}"
    );
    let e = bad("lb_policy: ROUND_ROBIN", "lb_policy: FASTEST");
    assert!(
        e.starts_with("static_resources.clusters[0].lb_policy: "),
        "{e}"
    );
}

#[test]
fn cluster_provided_is_not_supported() {
    assert_eq!(
        bad("lb_policy: ROUND_ROBIN", "lb_policy: CLUSTER_PROVIDED"),
        "static_resources.clusters[0].lb_policy: CLUSTER_PROVIDED is not supported"
    );
}

#[test]
fn eds_cluster_needs_eds_cluster_config() {
    assert_eq!(
        bad("type: STATIC", "type: EDS"),
        "static_resources.clusters[0].eds_cluster_config: required with type EDS"
    );
}

#[test]
fn missing_router_is_rejected() {
    let e = bad(
        "          - name: envoy.filters.http.router\n            typed_config:\n              \"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router\n",
        "",
    );
    assert_eq!(
        e,
        format!("{HCM}.http_filters: must end with the router filter (envoy.filters.http.router)")
    );
}

#[test]
fn unknown_http_filter_must_be_optional() {
    assert_eq!(
        bad("is_optional: true", "is_optional: false"),
        format!(
            "{HCM}.http_filters[0].typed_config: HTTP filter \"envoy.filters.http.lua\" \
             (type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua) is not supported \
             (set is_optional: true to skip it)"
        )
    );
}

#[test]
fn optional_unknown_filter_is_skipped() {
    // The good config has an optional Lua filter before the router.
    assert!(GOOD.contains("envoy.filters.http.lua"));
    assert!(load(GOOD).is_ok());
}

#[test]
fn bad_regex_is_rejected() {
    assert_eq!(
        bad("/items/[0-9]+", "/items/[0-9+"),
        format!(
            "{HCM}.route_config.virtual_hosts[0].routes[1].match.safe_regex.regex: \
             invalid regex \"/items/[0-9+\": unclosed character class"
        )
    );
}

#[test]
fn unknown_cluster_is_rejected_unless_validation_is_off() {
    let (from, to) = ("cluster: canary, host", "cluster: nope, host");
    assert_eq!(
        bad(from, to),
        format!(
            "{HCM}.route_config.virtual_hosts[1].routes[0].route.cluster: unknown cluster \"nope\""
        )
    );
    let off = edit(from, to).replace(
        "            name: local_route\n",
        "            name: local_route\n            validate_clusters: false\n",
    );
    assert!(load(&off).is_ok());
}

#[test]
fn duplicate_endpoint_is_rejected() {
    assert_eq!(
        bad("address: \"::1\"", "address: 10.0.0.1"),
        "static_resources.clusters[0].load_assignment.endpoints[0].lb_endpoints[1].endpoint.address: \
         duplicate endpoint 10.0.0.1:8080"
    );
}

#[test]
fn bad_port_and_address_are_rejected() {
    assert_eq!(
        bad("port_value: 10000", "port_value: 70000"),
        "static_resources.listeners[0].address.socket_address.port_value: 70000 is not a valid port"
    );
    assert_eq!(
        bad("address: 10.0.0.2", "address: backend.local"),
        "static_resources.clusters[1].load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.\
         socket_address.address: \"backend.local\" is not an IP address (DNS names are not supported)"
    );
}

#[test]
fn http1_options_are_taken_and_the_rest_refused_by_name() {
    assert_eq!(
        bad(
            "codec_type: HTTP2",
            "codec_type: HTTP1\n          http_protocol_options: {allow_chunked_length: true}"
        ),
        format!("{HCM}.http_protocol_options.allow_chunked_length: not supported")
    );
    assert_eq!(
        bad(
            "codec_type: HTTP2",
            "codec_type: HTTP1\n          http_protocol_options: {default_host_for_http_10: a}"
        ),
        format!("{HCM}.http_protocol_options.default_host_for_http_10: only meaningful with accept_http_10: true")
    );
    let boot = load(&edit(
        "codec_type: HTTP2",
        "codec_type: HTTP1\n          http_protocol_options: {accept_http_10: true, default_host_for_http_10: d.example, allow_absolute_url: false, enable_trailers: true}",
    ))
    .expect("valid");
    let hcm = &boot.listeners[0].filter_chains[0].http;
    assert_eq!(hcm.codec_type, engine::CodecType::Http1);
    assert_eq!(
        hcm.http1,
        engine::Http1Options {
            accept_http_10: true,
            default_host_for_http_10: Some("d.example".into()),
            allow_absolute_url: false,
            enable_trailers: true,
        }
    );
}

#[test]
fn known_but_unimplemented_fields_are_rejected_when_set() {
    assert_eq!(
        bad(
            "          codec_type: HTTP2\n",
            "          codec_type: HTTP2\n          proxy_100_continue: true\n"
        ),
        format!("{HCM}.proxy_100_continue: not supported")
    );
    // Contents of unmodelled message fields are not inspected.
    assert_eq!(
        bad(
            "    lb_policy: ROUND_ROBIN\n",
            "    lb_policy: ROUND_ROBIN\n    lb_subset_config: {fallback_policy: ANY_ENDPOINT, subset_selectors: [{keys: [a]}]}\n"
        ),
        "static_resources.clusters[0].lb_subset_config: not supported"
    );
    assert_eq!(
        bad(
            "node:\n",
            "dynamic_resources: {lds_resources_locator: x}\nnode:\n"
        ),
        "dynamic_resources.lds_resources_locator: not supported"
    );
    assert_eq!(
        bad("          route_config:\n            name: local_route\n", "          rds: {route_config_name: x}\n          route_config_x:\n            name: local_route\n")
            .split(": ")
            .next(),
        Some(format!("{HCM}.route_config_x").as_str())
    );
}

#[test]
fn rds_needs_a_config_source_and_ads() {
    let yaml = r#"
static_resources:
  listeners:
  - name: l
    address: { socket_address: { address: "::", port_value: 8080 } }
    filter_chains:
    - filters:
      - name: hcm
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: x
          rds: { route_config_name: routes }
          http_filters: [{ name: envoy.filters.http.router }]
"#;
    assert_eq!(
        load(yaml).unwrap_err(),
        format!("{HCM}.rds.config_source: required")
    );
    let yaml = yaml.replace(
        "{ route_config_name: routes }",
        "{ route_config_name: routes, config_source: { ads: {} } }",
    );
    assert_eq!(
        load(&yaml).unwrap_err(),
        "static_resources.listeners[0]: its rds config_source `ads` needs dynamic_resources.ads_config"
    );
}

#[test]
fn domain_rules() {
    assert_eq!(
        bad("\"static.*\"", "\"static.*.com\""),
        format!(
            "{HCM}.route_config.virtual_hosts[1].domains[1]: \"static.*.com\": '*' is only allowed \
             as the first or last character"
        )
    );
    assert_eq!(
        bad("\"static.*\"", "\"API.example.COM\""),
        format!(
            "{HCM}.route_config.virtual_hosts[1].domains[1]: duplicate domain \"API.example.COM\" \
             (also in virtual_hosts[0])"
        )
    );
}

#[test]
fn out_of_range_values_are_rejected() {
    assert_eq!(
        bad("max_request_headers_kb: 96", "max_request_headers_kb: 9000"),
        format!("{HCM}.max_request_headers_kb: 9000 is out of range 1..=8192")
    );
    assert_eq!(
        bad("initial_stream_window_size: 65535", "initial_stream_window_size: 100"),
        format!("{HCM}.http2_protocol_options.initial_stream_window_size: 100 is out of range 65535..=2147483647")
    );
    assert_eq!(
        bad("connect_timeout: 0.25s", "connect_timeout: 0s"),
        "static_resources.clusters[0].connect_timeout: must be greater than 0"
    );
}

#[test]
fn duplicate_cluster_names_are_rejected() {
    assert_eq!(
        bad("  - name: canary\n", "  - name: users\n"),
        "static_resources.clusters[1].name: duplicate cluster name \"users\""
    );
}

#[test]
fn unsupported_network_filter_is_rejected() {
    let e = bad(
        "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        "type.googleapis.com/envoy.extensions.filters.network.redis_proxy.v3.RedisProxy",
    );
    assert!(
        e.starts_with(&format!(
            "{HCM}: network filter \"envoy.filters.network.http_connection_manager\" \
             (type.googleapis.com/envoy.extensions.filters.network.redis_proxy.v3.RedisProxy) is not supported"
        )),
        "{e}"
    );
}

/// An HCM given as a TypedStruct (as control planes without the proto
/// schema send it) decodes like the plain one.
const TYPED_STRUCT_HCM: &str = r#"
static_resources:
  clusters:
  - name: c
    http2_protocol_options: {}
  listeners:
  - name: l
    address: { socket_address: { address: "::", port_value: 8080 } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/xds.type.v3.TypedStruct
          type_url: type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          value:
            stat_prefix: ts
            http2_protocol_options: { max_concurrent_streams: 7 }
            route_config:
              virtual_hosts:
              - name: all
                domains: ["*"]
                routes: [{ match: { prefix: "/" }, route: { cluster: c } }]
            http_filters:
            - name: FILTER
              typed_config:
                "@type": type.googleapis.com/udpa.type.v1.TypedStruct
                type_url: TYPE
"#;

fn typed_struct_hcm(filter: &str, type_url: &str) -> Result<engine::Bootstrap, String> {
    load(
        &TYPED_STRUCT_HCM
            .replace("FILTER", filter)
            .replace("TYPE", type_url),
    )
}

#[test]
fn typed_struct_wrapped_configs() {
    let router = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router";
    let b = typed_struct_hcm("envoy.filters.http.router", router).unwrap();
    assert_eq!(b.listeners[0].filter_chains[0].http.stat_prefix, "ts");
    assert_eq!(
        b.listeners[0].filter_chains[0].http.max_concurrent_streams,
        7
    );

    // A TypedStruct of a filter we do not have is reported by its inner type.
    let e = typed_struct_hcm("my.filter", "type.googleapis.com/acme.Filter").unwrap_err();
    assert_eq!(
        e,
        format!(
            "{HCM}.value.http_filters[0].typed_config: HTTP filter \"my.filter\" \
             (type.googleapis.com/acme.Filter) is not supported (set is_optional: true to skip it)"
        )
    );

    // Errors inside the wrapped message carry the path through `value`.
    let e = load(
        &TYPED_STRUCT_HCM
            .replace("stat_prefix: ts", "stat_prefix: ts\n            bogus: 1")
            .replace("TYPE", router),
    )
    .unwrap_err();
    assert_eq!(e, format!("{HCM}.value.bogus: unknown field"));
}

#[test]
fn load_file_reports_io_and_syntax_errors() {
    let e = bootstrap::load_file(data("missing.yaml")).unwrap_err();
    assert!(matches!(e, xds::Error::Io { .. }), "{e}");
    let e = bootstrap::from_str("{", Format::Json).unwrap_err();
    assert!(matches!(e, xds::Error::Syntax(_)), "{e}");
    let e = bootstrap::from_str("a: [", Format::Yaml).unwrap_err();
    assert!(matches!(e, xds::Error::Syntax(_)), "{e}");
}
