//! Validation of the seed specs' fields: outlier detection (gRFC A50), least
//! request (gRFC A48), random, `load_balancing_policy`, `common_lb_config`
//! and the stateful session filter with its per-route config (gRFC A55).
//! Each rule has one bad value with its exact message; a valid config is
//! accepted and checked on the engine types it lands in, defaults included.
//! Every case runs through YAML (bootstrap) or protobuf bytes (xDS), and
//! envoy-types round trips prove the new field numbers match Envoy's.

// Several of Envoy's fields are deprecated upstream.
#![allow(deprecated)]

use std::time::{Duration, Instant};

use engine::{
    CommonLb, ConsecutiveErrors, FailurePercentageEjection, HealthStatus, HealthStatusSet,
    LbPolicy, LeastRequest, OutlierDetection, SessionCookie, SessionHeader, SessionState,
    StatefulSession, StatefulSessionPerRoute, SuccessRateEjection,
};
use prost::{Message, Name};
use xds::bootstrap::{self, Format};
use xds::client::{ResourceType, XdsClient};
use xds::pb::envoy::config::cluster::v3 as pb;
use xds::pb::envoy::config::core::v3 as pb_core;
use xds::pb::envoy::config::listener::v3::Listener as PbListener;
use xds::pb::envoy::extensions::filters::http::stateful_session::v3 as pb_ss;
use xds::pb::envoy::service::discovery::v3::DiscoveryResponse;
use xds::{validate, Path};

// ---------------------------------------------------------------- helpers

const HCM: &str = "static_resources.listeners[0].filter_chains[0].filters[0].typed_config";
const CLUSTER: &str = "static_resources.clusters[0]";

/// A bootstrap with one listener (whose `http_filters` are `FILTERS`
/// followed by the router) and one cluster `echo` (with `CLUSTER_EXTRA`
/// lines appended to it).
const BOOT: &str = r#"
static_resources:
  listeners:
  - name: ingress
    address: { socket_address: { address: 127.0.0.1, port_value: 0 } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes: [{ match: { prefix: / }, route: { cluster: echo } }]
          http_filters:
FILTERS
          - name: envoy.filters.http.router
            typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
  clusters:
  - name: echo
    load_assignment:
      cluster_name: echo
      endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: 8080 } } } }] }]
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: {} }
CLUSTER_EXTRA
"#;

fn load(filters: &str, cluster_extra: &str) -> Result<engine::Bootstrap, String> {
    let yaml = BOOT
        .replace("FILTERS\n", filters)
        .replace("CLUSTER_EXTRA\n", cluster_extra);
    bootstrap::from_str(&yaml, Format::Yaml).map_err(|e| e.to_string())
}

/// The error for a cluster with `extra` (YAML lines at the cluster's
/// indentation, e.g. `outlier_detection: {interval: 0s}`).
fn cluster_err(extra: &str) -> String {
    let extra: String = extra.lines().map(|l| format!("    {l}\n")).collect();
    match load("", &extra) {
        Ok(_) => panic!("cluster with {extra:?} was accepted"),
        Err(e) => e,
    }
}

/// A stateful session filter entry whose `typed_config` body is `body`
/// (YAML flow mapping content after `@type`).
fn session_filter(optional: bool, body: &str) -> String {
    format!(
        "          - name: envoy.filters.http.stateful_session\n            is_optional: {optional}\n            typed_config: {{ \"@type\": type.googleapis.com/envoy.extensions.filters.http.stateful_session.v3.StatefulSession, {body} }}\n"
    )
}

const COOKIE_STATE: &str =
    "type.googleapis.com/envoy.extensions.http.stateful_session.cookie.v3.CookieBasedSessionState";
const HEADER_STATE: &str =
    "type.googleapis.com/envoy.extensions.http.stateful_session.header.v3.HeaderBasedSessionState";

/// `session_state` with a cookie whose fields are `cookie`.
fn cookie_state(cookie: &str) -> String {
    format!(
        "session_state: {{ name: envoy.http.stateful_session.cookie, typed_config: {{ \"@type\": {COOKIE_STATE}, cookie: {{ {cookie} }} }} }}"
    )
}

fn filter_err(filters: &str) -> String {
    match load(filters, "") {
        Ok(_) => panic!("filters {filters:?} were accepted"),
        Err(e) => e,
    }
}

/// Where a stateful session filter at `http_filters[0]` has its config.
fn ss(rest: &str) -> String {
    format!("{HCM}.http_filters[0].typed_config{rest}")
}

/// The `echo` cluster as protobuf (from the same YAML as the bootstrap's).
fn base_cluster() -> pb::Cluster {
    let boot: serde_json::Value =
        serde_yaml::from_str(&BOOT.replace("FILTERS\n", "").replace("CLUSTER_EXTRA\n", ""))
            .unwrap();
    let cluster = boot["static_resources"]["clusters"][0].clone();
    xds::decode::from_json(cluster, &Path::root()).unwrap()
}

const ADS_BOOT: &str = r#"
node: { id: gw-1, cluster: edge }
dynamic_resources:
  ads_config:
    api_type: GRPC
    transport_api_version: V3
    grpc_services: [{ envoy_grpc: { cluster_name: xds } }]
  lds_config: { ads: {} }
  cds_config: { ads: {} }
static_resources:
  clusters:
  - name: xds
    load_assignment:
      cluster_name: xds
      endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: 18000 } } } }] }]
    http2_protocol_options: {}
"#;

/// Feeds `resource` (encoded protobuf) to an xDS client as the whole
/// response of its type; returns the NACK message, if any.
fn xds_response<M: Message + Name>(kind: ResourceType, resource: &M) -> Option<String> {
    xds_client(kind, resource).1
}

/// [`xds_response`], also returning the client (to look at what it kept).
fn xds_client<M: Message + Name>(kind: ResourceType, resource: &M) -> (XdsClient, Option<String>) {
    let t0 = Instant::now();
    let boot = bootstrap::from_str(ADS_BOOT, Format::Yaml).unwrap();
    let mut c = XdsClient::new(&boot, t0);
    c.on_stream_open();
    let resp = DiscoveryResponse {
        version_info: "v1".into(),
        resources: vec![prost_types::Any {
            type_url: M::type_url(),
            value: resource.encode_to_vec(),
        }],
        type_url: kind.type_url().into(),
        nonce: "n1".into(),
        ..Default::default()
    };
    let rejected = c.on_response(resp, t0).rejected;
    (c, rejected)
}

fn cds(c: &pb::Cluster) -> Option<String> {
    xds_response(ResourceType::Cluster, c)
}

/// The engine cluster a CDS response of `c` (named `echo`) yields.
fn cds_cluster(c: &pb::Cluster) -> engine::Cluster {
    let (client, rejected) = xds_client(ResourceType::Cluster, c);
    assert_eq!(rejected, None);
    (*client.clusters()["echo"]).clone()
}

/// The `echo` cluster of a bootstrap whose cluster has `extra` (YAML lines
/// at the cluster's indentation).
fn cluster_ok(extra: &str) -> engine::Cluster {
    let extra: String = extra.lines().map(|l| format!("    {l}\n")).collect();
    match load("", &extra) {
        Ok(b) => (*b.clusters[0]).clone(),
        Err(e) => panic!("cluster with {extra:?} was rejected: {e}"),
    }
}

fn od_path() -> Path {
    Path::root().field("outlier_detection")
}

fn dur(seconds: i64, nanos: i32) -> Option<prost_types::Duration> {
    Some(prost_types::Duration { seconds, nanos })
}

// ------------------------------------------------------ outlier detection

#[test]
fn valid_outlier_detection_is_accepted() {
    // Empty: every default filled in (Envoy's and A50's).
    let defaults = validate::outlier_detection(&Default::default(), &od_path()).unwrap();
    assert_eq!(
        cluster_ok("outlier_detection: {}").outlier_detection,
        Some(defaults.clone())
    );
    assert_eq!(cluster_ok("").outlier_detection, None);
    assert!(defaults.uneject_on_active_check);
    // Envoy's switch for un-ejecting on a passing active check.
    let kept =
        cluster_ok("outlier_detection: { successful_active_health_check_uneject_host: false }")
            .outlier_detection
            .unwrap();
    assert!(!kept.uneject_on_active_check);
    // Every A50 field at a valid value, and Envoy defaults spelled out.
    assert_eq!(
        cluster_ok(
            "outlier_detection:
  interval: 1s
  base_ejection_time: 0.5s
  max_ejection_time: 0.5s
  max_ejection_percent: 100
  consecutive_5xx: 3
  enforcing_consecutive_5xx: 0
  consecutive_gateway_failure: 2
  enforcing_consecutive_gateway_failure: 100
  enforcing_success_rate: 100
  success_rate_minimum_hosts: 0
  success_rate_request_volume: 0
  success_rate_stdev_factor: 0
  failure_percentage_threshold: 100
  enforcing_failure_percentage: 100
  failure_percentage_minimum_hosts: 1
  failure_percentage_request_volume: 1
  max_ejection_time_jitter: 0s
  successful_active_health_check_uneject_host: true
  always_eject_one_host: false
  detect_degraded_hosts: false
  split_external_local_origin_errors: false"
        )
        .outlier_detection,
        Some(OutlierDetection {
            interval: Duration::from_secs(1),
            base_ejection_time: Duration::from_millis(500),
            max_ejection_time: Duration::from_millis(500),
            max_ejection_percent: 100,
            // enforcing_consecutive_5xx: 0 turns it off.
            consecutive_5xx: None,
            consecutive_gateway_failure: Some(ConsecutiveErrors {
                threshold: 2,
                enforcement_percentage: 100
            }),
            success_rate: Some(SuccessRateEjection {
                stdev_factor: 0,
                enforcement_percentage: 100,
                minimum_hosts: 0,
                request_volume: 0,
            }),
            failure_percentage: Some(FailurePercentageEjection {
                threshold: 100,
                enforcement_percentage: 100,
                minimum_hosts: 1,
                request_volume: 1,
            }),
            uneject_on_active_check: true,
        })
    );

    // Over xDS.
    let mut c = base_cluster();
    c.outlier_detection = Some(pb::OutlierDetection::default());
    assert_eq!(cds_cluster(&c).outlier_detection, Some(defaults));
    c.outlier_detection = Some(pb::OutlierDetection {
        max_ejection_percent: Some(25),
        base_ejection_time: dur(400, 0),
        ..Default::default()
    });
    let od = cds_cluster(&c).outlier_detection.unwrap();
    assert_eq!(od.max_ejection_percent, 25);
    // max_ejection_time defaults to max(300 s, base_ejection_time).
    assert_eq!(od.max_ejection_time, Duration::from_secs(400));
}

#[test]
fn outlier_percentages_are_at_most_100() {
    for field in [
        "max_ejection_percent",
        "enforcing_consecutive_5xx",
        "enforcing_consecutive_gateway_failure",
        "enforcing_success_rate",
        "failure_percentage_threshold",
        "enforcing_failure_percentage",
    ] {
        assert_eq!(
            cluster_err(&format!("outlier_detection: {{ {field}: 101 }}")),
            format!("{CLUSTER}.outlier_detection.{field}: must be <= 100")
        );
    }
    // Over xDS: the issue's example.
    let mut c = base_cluster();
    c.outlier_detection = Some(pb::OutlierDetection {
        max_ejection_percent: Some(101),
        ..Default::default()
    });
    assert_eq!(
        cds(&c).as_deref(),
        Some("clusters[echo].outlier_detection.max_ejection_percent: must be <= 100")
    );
    c.outlier_detection = Some(pb::OutlierDetection {
        enforcing_failure_percentage: Some(u32::MAX),
        ..Default::default()
    });
    assert_eq!(
        cds(&c).as_deref(),
        Some("clusters[echo].outlier_detection.enforcing_failure_percentage: must be <= 100")
    );
}

#[test]
fn outlier_durations_are_positive_valid_and_ordered() {
    for field in ["interval", "base_ejection_time", "max_ejection_time"] {
        assert_eq!(
            cluster_err(&format!("outlier_detection: {{ {field}: -1s }}")),
            format!("{CLUSTER}.outlier_detection.{field}: must not be negative")
        );
        assert_eq!(
            cluster_err(&format!("outlier_detection: {{ {field}: 0s }}")),
            format!("{CLUSTER}.outlier_detection.{field}: must be greater than 0")
        );
    }
    // Envoy: max_ejection_time may not be below base_ejection_time (default 30 s).
    assert_eq!(
        cluster_err("outlier_detection: { max_ejection_time: 10s }"),
        format!(
            "{CLUSTER}.outlier_detection.max_ejection_time: must not be less than base_ejection_time (30s)"
        )
    );
    assert_eq!(
        cluster_err("outlier_detection: { base_ejection_time: 2s, max_ejection_time: 1.5s }"),
        format!(
            "{CLUSTER}.outlier_detection.max_ejection_time: must not be less than base_ejection_time (2s)"
        )
    );

    // Over xDS, with Durations outside google.protobuf.Duration's own rules.
    let mut c = base_cluster();
    for (d, msg) in [
        (
            dur(1, -1),
            "{seconds: 1, nanos: -1} is not a valid google.protobuf.Duration",
        ),
        (
            dur(0, 1_000_000_000),
            "{seconds: 0, nanos: 1000000000} is not a valid google.protobuf.Duration",
        ),
        (
            dur(315_576_000_001, 0),
            "{seconds: 315576000001, nanos: 0} is not a valid google.protobuf.Duration",
        ),
        (
            dur(i64::MIN, 0),
            &*format!(
                "{{seconds: {}, nanos: 0}} is not a valid google.protobuf.Duration",
                i64::MIN
            ),
        ),
        (dur(0, -5), "must not be negative"),
    ] {
        c.outlier_detection = Some(pb::OutlierDetection {
            interval: d,
            ..Default::default()
        });
        assert_eq!(
            cds(&c),
            Some(format!("clusters[echo].outlier_detection.interval: {msg}"))
        );
    }
}

#[test]
fn outlier_fields_we_do_not_implement_are_rejected_by_name() {
    for (yaml, msg) in [
        (
            "split_external_local_origin_errors: true",
            "split_external_local_origin_errors: not supported",
        ),
        (
            "consecutive_local_origin_failure: 5",
            "consecutive_local_origin_failure: not supported",
        ),
        (
            "enforcing_consecutive_local_origin_failure: 100",
            "enforcing_consecutive_local_origin_failure: not supported",
        ),
        (
            "enforcing_local_origin_success_rate: 100",
            "enforcing_local_origin_success_rate: not supported",
        ),
        (
            "enforcing_failure_percentage_local_origin: 1",
            "enforcing_failure_percentage_local_origin: not supported",
        ),
        ("monitors: [{ name: m }]", "monitors: not supported"),
        (
            "max_ejection_time_jitter: 1s",
            "max_ejection_time_jitter: not supported",
        ),
        (
            "always_eject_one_host: true",
            "always_eject_one_host: true is not supported",
        ),
        (
            "detect_degraded_hosts: true",
            "detect_degraded_hosts: true is not supported",
        ),
    ] {
        assert_eq!(
            cluster_err(&format!("outlier_detection: {{ {yaml} }}")),
            format!("{CLUSTER}.outlier_detection.{msg}")
        );
    }
    assert_eq!(
        cluster_err("outlier_detection: { bogus: 1 }"),
        format!("{CLUSTER}.outlier_detection.bogus: unknown field")
    );
}

#[test]
fn outlier_defaults_follow_envoy_and_a50() {
    let d = validate::outlier_detection(&Default::default(), &od_path()).unwrap();
    assert_eq!(
        d,
        OutlierDetection {
            interval: Duration::from_secs(10),
            base_ejection_time: Duration::from_secs(30),
            max_ejection_time: Duration::from_secs(300),
            max_ejection_percent: 10,
            consecutive_5xx: Some(ConsecutiveErrors {
                threshold: 5,
                enforcement_percentage: 100
            }),
            // enforcing_consecutive_gateway_failure defaults to 0.
            consecutive_gateway_failure: None,
            success_rate: Some(SuccessRateEjection {
                stdev_factor: 1900,
                enforcement_percentage: 100,
                minimum_hosts: 5,
                request_volume: 100,
            }),
            // enforcing_failure_percentage defaults to 0 (A50: off).
            failure_percentage: None,
            uneject_on_active_check: true,
        }
    );

    // max_ejection_time defaults to max(300 s, base_ejection_time).
    let d = validate::outlier_detection(
        &pb::OutlierDetection {
            base_ejection_time: dur(400, 0),
            ..Default::default()
        },
        &od_path(),
    )
    .unwrap();
    assert_eq!(d.max_ejection_time, Duration::from_secs(400));

    // Everything set: A50's mapping of the Envoy fields.
    let d = validate::outlier_detection(
        &pb::OutlierDetection {
            interval: dur(1, 500_000_000),
            base_ejection_time: dur(2, 0),
            max_ejection_time: dur(20, 0),
            max_ejection_percent: Some(50),
            consecutive_5xx: Some(7),
            enforcing_consecutive_5xx: Some(0),
            consecutive_gateway_failure: Some(3),
            enforcing_consecutive_gateway_failure: Some(40),
            enforcing_success_rate: Some(0),
            success_rate_stdev_factor: Some(1000),
            failure_percentage_threshold: Some(60),
            enforcing_failure_percentage: Some(90),
            failure_percentage_minimum_hosts: Some(3),
            failure_percentage_request_volume: Some(20),
            ..Default::default()
        },
        &od_path(),
    )
    .unwrap();
    assert_eq!(
        d,
        OutlierDetection {
            interval: Duration::from_millis(1500),
            base_ejection_time: Duration::from_secs(2),
            max_ejection_time: Duration::from_secs(20),
            max_ejection_percent: 50,
            consecutive_5xx: None,
            consecutive_gateway_failure: Some(ConsecutiveErrors {
                threshold: 3,
                enforcement_percentage: 40
            }),
            // enforcing_success_rate: 0 turns success rate off (A50).
            success_rate: None,
            failure_percentage: Some(FailurePercentageEjection {
                threshold: 60,
                enforcement_percentage: 90,
                minimum_hosts: 3,
                request_volume: 20,
            }),
            uneject_on_active_check: true,
        }
    );

    // Failure percentage on with its own defaults; a threshold of 0
    // consecutive errors can never be reached.
    let d = validate::outlier_detection(
        &pb::OutlierDetection {
            enforcing_failure_percentage: Some(100),
            consecutive_5xx: Some(0),
            ..Default::default()
        },
        &od_path(),
    )
    .unwrap();
    assert_eq!(
        d.failure_percentage,
        Some(FailurePercentageEjection {
            threshold: 85,
            enforcement_percentage: 100,
            minimum_hosts: 5,
            request_volume: 50,
        })
    );
    assert_eq!(d.consecutive_5xx, None);
}

// ---------------------------------------------------------- least request

#[test]
fn valid_least_request_is_accepted() {
    assert_eq!(cluster_ok("").lb_policy, LbPolicy::RoundRobin);
    assert_eq!(
        cluster_ok("lb_policy: ROUND_ROBIN").lb_policy,
        LbPolicy::RoundRobin
    );
    assert_eq!(
        cluster_ok("lb_policy: LEAST_REQUEST").lb_policy,
        LbPolicy::LeastRequest(LeastRequest {
            choice_count: 2,
            active_request_bias: 1.0
        })
    );
    assert_eq!(
        cluster_ok("lb_policy: LEAST_REQUEST\nleast_request_lb_config: { choice_count: 3 }")
            .lb_policy,
        LbPolicy::LeastRequest(LeastRequest {
            choice_count: 3,
            active_request_bias: 1.0
        })
    );
    // gRFC A48: choice_count is capped at 10.
    assert_eq!(
        cluster_ok(
            "lb_policy: LEAST_REQUEST\nleast_request_lb_config: { choice_count: 4294967295 }"
        )
        .lb_policy,
        LbPolicy::LeastRequest(LeastRequest {
            choice_count: 10,
            active_request_bias: 1.0
        })
    );

    let mut c = base_cluster();
    c.lb_policy = pb::cluster::LbPolicy::LeastRequest as i32;
    c.lb_config = Some(pb::cluster::LbConfig::LeastRequestLbConfig(
        pb::cluster::LeastRequestLbConfig {
            choice_count: Some(11),
            active_request_bias: Some(pb_core::RuntimeDouble {
                default_value: 0.5,
                runtime_key: "ignored".into(),
            }),
            ..Default::default()
        },
    ));
    assert_eq!(
        cds_cluster(&c).lb_policy,
        LbPolicy::LeastRequest(LeastRequest {
            choice_count: 10,
            active_request_bias: 0.5
        })
    );
}

#[test]
fn random_is_accepted() {
    assert_eq!(cluster_ok("lb_policy: RANDOM").lb_policy, LbPolicy::Random);
    let mut c = base_cluster();
    c.lb_policy = pb::cluster::LbPolicy::Random as i32;
    assert_eq!(cds_cluster(&c).lb_policy, LbPolicy::Random);
    // least_request_lb_config still needs LEAST_REQUEST.
    assert_eq!(
        cluster_err("lb_policy: RANDOM\nleast_request_lb_config: {}"),
        format!("{CLUSTER}.least_request_lb_config: only allowed with lb_policy LEAST_REQUEST")
    );
}

#[test]
fn active_request_bias_is_finite_and_not_negative() {
    let lr = |bias: &str| {
        format!(
            "lb_policy: LEAST_REQUEST\nleast_request_lb_config: {{ active_request_bias: {bias} }}"
        )
    };
    let bias_of = |c: engine::Cluster| match c.lb_policy {
        LbPolicy::LeastRequest(l) => l.active_request_bias,
        other => panic!("{other:?}"),
    };
    assert_eq!(bias_of(cluster_ok(&lr("{ default_value: 2.5 }"))), 2.5);
    // 0 (the proto default once the message is present): plain round robin
    // by weight in Envoy's weighted variant.
    assert_eq!(bias_of(cluster_ok(&lr("{}"))), 0.0);
    // The runtime key is ignored: there is no runtime.
    assert_eq!(
        bias_of(cluster_ok(&lr(
            "{ default_value: 1.5, runtime_key: upstream.lr_bias }"
        ))),
        1.5
    );
    let at = format!("{CLUSTER}.least_request_lb_config.active_request_bias.default_value");
    assert_eq!(
        cluster_err(&lr("{ default_value: -1 }")),
        format!("{at}: -1 is not a finite number >= 0")
    );
    assert_eq!(
        cluster_err(&lr("{ default_value: -0.5 }")),
        format!("{at}: -0.5 is not a finite number >= 0")
    );
    assert_eq!(
        cluster_err(&lr("{ default_value: NaN }")),
        format!("{at}: NaN is not a finite number >= 0")
    );
    assert_eq!(
        cluster_err(&lr("{ default_value: Infinity }")),
        format!("{at}: inf is not a finite number >= 0")
    );

    // Over xDS: NaN and a negative value.
    let mut c = base_cluster();
    c.lb_policy = pb::cluster::LbPolicy::LeastRequest as i32;
    for (v, shown) in [(f64::NAN, "NaN"), (-2.0, "-2"), (f64::NEG_INFINITY, "-inf")] {
        c.lb_config = Some(pb::cluster::LbConfig::LeastRequestLbConfig(
            pb::cluster::LeastRequestLbConfig {
                active_request_bias: Some(pb_core::RuntimeDouble {
                    default_value: v,
                    ..Default::default()
                }),
                ..Default::default()
            },
        ));
        assert_eq!(
            cds(&c),
            Some(format!(
                "clusters[echo].least_request_lb_config.active_request_bias.default_value: {shown} is not a finite number >= 0"
            ))
        );
    }
}

#[test]
fn choice_count_is_at_least_2() {
    for n in [0, 1] {
        assert_eq!(
            cluster_err(&format!(
                "lb_policy: LEAST_REQUEST\nleast_request_lb_config: {{ choice_count: {n} }}"
            )),
            format!("{CLUSTER}.least_request_lb_config.choice_count: must be >= 2")
        );
    }
    let mut c = base_cluster();
    c.lb_policy = pb::cluster::LbPolicy::LeastRequest as i32;
    c.lb_config = Some(pb::cluster::LbConfig::LeastRequestLbConfig(
        pb::cluster::LeastRequestLbConfig {
            choice_count: Some(1),
            ..Default::default()
        },
    ));
    assert_eq!(
        cds(&c).as_deref(),
        Some("clusters[echo].least_request_lb_config.choice_count: must be >= 2")
    );
}

#[test]
fn least_request_config_needs_its_policy_and_rejects_what_we_lack() {
    assert_eq!(
        cluster_err("least_request_lb_config: { choice_count: 2 }"),
        format!("{CLUSTER}.least_request_lb_config: only allowed with lb_policy LEAST_REQUEST")
    );
    assert_eq!(
        cluster_err(
            "lb_policy: LEAST_REQUEST\nleast_request_lb_config: { slow_start_config: { slow_start_window: 1s } }"
        ),
        format!("{CLUSTER}.least_request_lb_config.slow_start_config: not supported")
    );
    // The other lb_config choices are named too.
    assert_eq!(
        cluster_err("ring_hash_lb_config: {}"),
        format!("{CLUSTER}.ring_hash_lb_config: only allowed with lb_policy RING_HASH")
    );
    assert_eq!(
        cluster_err("round_robin_lb_config: {}"),
        format!("{CLUSTER}.round_robin_lb_config: not supported")
    );
    // Other policies are still plainly unsupported.
    assert_eq!(
        cluster_err("lb_policy: CLUSTER_PROVIDED"),
        format!("{CLUSTER}.lb_policy: CLUSTER_PROVIDED is not supported")
    );
    assert_eq!(
        cluster_err("lb_policy: LOAD_BALANCING_POLICY_CONFIG"),
        format!("{CLUSTER}.lb_policy: LOAD_BALANCING_POLICY_CONFIG requires load_balancing_policy")
    );
}

#[test]
fn least_request_defaults_and_a48_cap() {
    let p = Path::root().field("least_request_lb_config");
    let lr = |n: Option<u32>| {
        validate::least_request_lb_config(
            Some(&pb::cluster::LeastRequestLbConfig {
                choice_count: n,
                ..Default::default()
            }),
            &p,
        )
        .unwrap()
        .choice_count
    };
    assert_eq!(
        validate::least_request_lb_config(None, &p).unwrap(),
        LeastRequest::default()
    );
    assert_eq!(lr(None), 2);
    assert_eq!(lr(Some(2)), 2);
    assert_eq!(lr(Some(10)), 10);
    // gRFC A48: larger values are treated as 10.
    assert_eq!(lr(Some(11)), 10);
    assert_eq!(lr(Some(u32::MAX)), 10);
}

// -------------------------------------------------------- common_lb_config

#[test]
fn common_lb_config_fields_are_validated_and_accepted() {
    // The panic threshold is rounded to a whole percent.
    assert_eq!(
        cluster_ok("common_lb_config: { healthy_panic_threshold: { value: 30 } }").common_lb,
        CommonLb {
            healthy_panic_threshold: 30,
            ..CommonLb::default()
        }
    );
    assert_eq!(
        cluster_ok("common_lb_config: { healthy_panic_threshold: { value: 12.5 } }")
            .common_lb
            .healthy_panic_threshold,
        13
    );
    assert_eq!(
        cluster_ok("common_lb_config: { override_host_status: { statuses: [HEALTHY, DRAINING] } }")
            .common_lb,
        CommonLb {
            override_host_status: [HealthStatus::Healthy, HealthStatus::Draining]
                .into_iter()
                .collect(),
            ..CommonLb::default()
        }
    );
    for v in ["100.5", "-1", "1e9"] {
        assert_eq!(
            cluster_err(&format!(
                "common_lb_config: {{ healthy_panic_threshold: {{ value: {v} }} }}"
            )),
            format!(
                "{CLUSTER}.common_lb_config.healthy_panic_threshold.value: {} is out of range [0, 100]",
                v.parse::<f64>().unwrap()
            )
        );
    }
    for (yaml, field) in [
        ("zone_aware_lb_config: {}", "zone_aware_lb_config"),
        ("update_merge_window: 1s", "update_merge_window"),
        (
            "close_connections_on_host_set_change: true",
            "close_connections_on_host_set_change",
        ),
        (
            "consistent_hashing_lb_config: {}",
            "consistent_hashing_lb_config",
        ),
    ] {
        assert_eq!(
            cluster_err(&format!("common_lb_config: {{ {yaml} }}")),
            format!("{CLUSTER}.common_lb_config.{field}: not supported")
        );
    }
    // Nothing set: nothing changes, so it is accepted.
    let b = load("", "    common_lb_config: {}\n").unwrap();
    assert_eq!(b.clusters[0].common_lb, CommonLb::default());
    assert!(!b.clusters[0].common_lb.ignore_new_hosts_until_first_hc);
    let b = load(
        "",
        "    common_lb_config: { ignore_new_hosts_until_first_hc: true }\n",
    )
    .unwrap();
    assert!(b.clusters[0].common_lb.ignore_new_hosts_until_first_hc);

    // Over xDS: an unknown HealthStatus, then a valid set.
    let mut c = base_cluster();
    c.common_lb_config = Some(pb::cluster::CommonLbConfig {
        override_host_status: Some(pb_core::HealthStatusSet {
            statuses: vec![1, 9],
        }),
        ..Default::default()
    });
    assert_eq!(
        cds(&c).as_deref(),
        Some("clusters[echo].common_lb_config.override_host_status.statuses[1]: unknown value 9")
    );
    c.common_lb_config = Some(pb::cluster::CommonLbConfig {
        override_host_status: Some(pb_core::HealthStatusSet { statuses: vec![] }),
        ..Default::default()
    });
    // An explicitly empty set turns host overrides off.
    assert_eq!(
        cds_cluster(&c).common_lb,
        CommonLb {
            override_host_status: HealthStatusSet::EMPTY,
            ..CommonLb::default()
        }
    );
    c.common_lb_config = Some(pb::cluster::CommonLbConfig {
        healthy_panic_threshold: Some(xds::pb::envoy::r#type::v3::Percent { value: 99.5 }),
        override_host_status: Some(pb_core::HealthStatusSet {
            statuses: vec![0, 5],
        }),
        ..Default::default()
    });
    assert_eq!(
        cds_cluster(&c).common_lb,
        CommonLb {
            healthy_panic_threshold: 100,
            override_host_status: [HealthStatus::Unknown, HealthStatus::Degraded]
                .into_iter()
                .collect(),
            locality_weighted: false,
            overprovisioning_factor: 140,
            ignore_new_hosts_until_first_hc: false,
        }
    );
    c.common_lb_config = Some(pb::cluster::CommonLbConfig {
        healthy_panic_threshold: Some(xds::pb::envoy::r#type::v3::Percent { value: f64::NAN }),
        ..Default::default()
    });
    assert_eq!(
        cds(&c).as_deref(),
        Some("clusters[echo].common_lb_config.healthy_panic_threshold.value: NaN is out of range [0, 100]")
    );
}

#[test]
fn common_lb_defaults_are_envoys() {
    use HealthStatus::*;
    let p = Path::root().field("common_lb_config");
    let d = validate::common_lb_config(&Default::default(), &p).unwrap();
    assert_eq!(d, CommonLb::default());
    assert_eq!(d.healthy_panic_threshold, 50);
    assert_eq!(
        d.override_host_status.iter().collect::<Vec<_>>(),
        [Unknown, Healthy, Degraded]
    );
    assert!(!d.override_host_status.contains(Draining));

    let d = validate::common_lb_config(
        &pb::cluster::CommonLbConfig {
            healthy_panic_threshold: Some(xds::pb::envoy::r#type::v3::Percent { value: 33.5 }),
            override_host_status: Some(pb_core::HealthStatusSet {
                statuses: vec![3, 1, 3],
            }),
            ..Default::default()
        },
        &p,
    )
    .unwrap();
    // Rounded to a whole percent, as Envoy does.
    assert_eq!(d.healthy_panic_threshold, 34);
    assert_eq!(
        d.override_host_status,
        [Healthy, Draining].into_iter().collect::<HealthStatusSet>()
    );
    assert_eq!(
        format!("{:?}", d.override_host_status),
        "{Healthy, Draining}"
    );

    // An explicitly empty set disables host overrides.
    let d = validate::common_lb_config(
        &pb::cluster::CommonLbConfig {
            override_host_status: Some(pb_core::HealthStatusSet { statuses: vec![] }),
            healthy_panic_threshold: Some(xds::pb::envoy::r#type::v3::Percent { value: 0.0 }),
            ..Default::default()
        },
        &p,
    )
    .unwrap();
    assert!(d.override_host_status.is_empty());
    assert_eq!(d.healthy_panic_threshold, 0);
}

// ------------------------------------------------- stateful session filter

#[test]
fn valid_stateful_session_filter_is_accepted() {
    let cookie =
        cookie_state("name: global-session-cookie, path: /Package1.Service2/Method3, ttl: 120s");
    let session = |filters: &str| {
        load(filters, "")
            .unwrap_or_else(|e| panic!("{filters:?} was rejected: {e}"))
            .listeners[0]
            .filter_chains[0]
            .http
            .stateful_session()
            .cloned()
    };
    let expected = StatefulSession {
        session_state: Some(SessionState::Cookie(SessionCookie {
            name: "global-session-cookie".into(),
            ttl: Duration::from_secs(120),
            path: Some("/Package1.Service2/Method3".into()),
        })),
        strict: false,
        strict_not_found_status: 503,
    };
    assert_eq!(
        session(&session_filter(false, &cookie)),
        Some(expected.clone())
    );
    // is_optional only matters for filters we do not implement.
    assert_eq!(session(&session_filter(true, &cookie)), Some(expected));
    let header = format!(
        "session_state: {{ name: envoy.http.stateful_session.header, typed_config: {{ \"@type\": {HEADER_STATE}, name: X-Session }} }}, strict: true"
    );
    assert_eq!(
        session(&session_filter(false, &header)),
        Some(StatefulSession {
            session_state: Some(SessionState::Header(SessionHeader {
                name: "x-session".into()
            })),
            strict: true,
            strict_not_found_status: 503,
        })
    );
    // No session_state: a no-op filter, as in Envoy.
    assert_eq!(
        session(&session_filter(false, "strict: false")),
        Some(StatefulSession {
            session_state: None,
            strict: false,
            strict_not_found_status: 503,
        })
    );
    // No filter: no session.
    assert_eq!(session(""), None);
    // The engine has one session config per listener: a second filter is
    // refused rather than silently dropped.
    assert_eq!(
        filter_err(&format!(
            "{}{}",
            session_filter(false, &cookie),
            session_filter(true, "strict: true")
        )),
        format!(
            "{HCM}.http_filters[1].typed_config: only one stateful session filter is supported (another is http_filters[0])"
        )
    );
}

#[test]
fn cookie_fields_follow_a55() {
    let cookie_err = |fields: &str| filter_err(&session_filter(false, &cookie_state(fields)));
    let at = |field: &str| ss(&format!(".session_state.typed_config.cookie{field}"));
    assert_eq!(cookie_err("path: /"), format!("{}: required", at(".name")));
    assert_eq!(
        cookie_err("name: \"a b\""),
        format!(
            "{}: \"a b\" is not a valid cookie name (an RFC 7230 token)",
            at(".name")
        )
    );
    assert_eq!(
        cookie_err("name: \"s;x=1\""),
        format!(
            "{}: \"s;x=1\" is not a valid cookie name (an RFC 7230 token)",
            at(".name")
        )
    );
    assert_eq!(
        cookie_err("name: s, ttl: -1s"),
        format!("{}: must not be negative", at(".ttl"))
    );
    assert_eq!(
        cookie_err("name: s, path: relative/path"),
        format!("{}: must start with \"/\"", at(".path"))
    );
    assert_eq!(
        cookie_err("name: s, path: \"/a;b\""),
        format!("{}: must be printable ASCII without \";\"", at(".path"))
    );
    assert_eq!(
        cookie_err("name: s, path: \"/a\\r\\nSet-Cookie: x\""),
        format!("{}: must be printable ASCII without \";\"", at(".path"))
    );
    assert_eq!(
        cookie_err("name: s, attributes: [{ name: SameSite, value: Strict }]"),
        format!("{}: not supported", at(".attributes"))
    );
    // The cookie itself is required.
    assert_eq!(
        filter_err(&session_filter(
            false,
            &format!("session_state: {{ name: envoy.http.stateful_session.cookie, typed_config: {{ \"@type\": {COOKIE_STATE} }} }}")
        )),
        format!("{}: required", ss(".session_state.typed_config.cookie"))
    );
    // An optional filter's config is validated all the same.
    assert_eq!(
        filter_err(&session_filter(true, &cookie_state("name: s, ttl: -5s"))),
        format!("{}: must not be negative", at(".ttl"))
    );
    // The same through a TypedStruct: the path goes through `.value`.
    assert_eq!(
        filter_err(&session_filter(
            false,
            "session_state: { name: envoy.http.stateful_session.cookie, typed_config: { \"@type\": type.googleapis.com/xds.type.v3.TypedStruct, type_url: type.googleapis.com/envoy.extensions.http.stateful_session.cookie.v3.CookieBasedSessionState, value: { cookie: { name: \"\" } } } }"
        )),
        format!(
            "{}: required",
            ss(".session_state.typed_config.value.cookie.name")
        )
    );
}

#[test]
fn session_state_and_filter_fields() {
    let state = ss(".session_state");
    assert_eq!(
        filter_err(&session_filter(
            false,
            &format!("session_state: {{ typed_config: {{ \"@type\": {COOKIE_STATE}, cookie: {{ name: s }} }} }}")
        )),
        format!("{state}.name: required")
    );
    assert_eq!(
        filter_err(&session_filter(
            false,
            "session_state: { name: envoy.http.stateful_session.cookie }"
        )),
        format!("{state}.typed_config: required")
    );
    assert_eq!(
        filter_err(&session_filter(
            false,
            &format!("session_state: {{ name: envoy.http.stateful_session.header, typed_config: {{ \"@type\": {COOKIE_STATE}, cookie: {{ name: s }} }} }}")
        )),
        format!("{state}.name: \"envoy.http.stateful_session.header\" does not name this typed_config's extension; use \"envoy.http.stateful_session.cookie\"")
    );
    assert_eq!(
        filter_err(&session_filter(
            false,
            "session_state: { name: envoy.http.stateful_session.envelope, typed_config: { \"@type\": type.googleapis.com/envoy.extensions.http.stateful_session.envelope.v3.EnvelopeSessionState, header: { name: x } } }"
        )),
        format!("{state}.typed_config: session state type.googleapis.com/envoy.extensions.http.stateful_session.envelope.v3.EnvelopeSessionState is not supported; only {COOKIE_STATE} and {HEADER_STATE} are")
    );
    for (name, msg) in [
        ("\"\"", "required".to_owned()),
        (
            "\"x session\"",
            "\"x session\" is not a valid HTTP header name".to_owned(),
        ),
        (
            "\":authority\"",
            "\":authority\" is not a valid HTTP header name".to_owned(),
        ),
    ] {
        assert_eq!(
            filter_err(&session_filter(
                false,
                &format!("session_state: {{ name: envoy.http.stateful_session.header, typed_config: {{ \"@type\": {HEADER_STATE}, name: {name} }} }}")
            )),
            format!("{state}.typed_config.name: {msg}")
        );
    }
    assert_eq!(
        filter_err(&session_filter(false, "stat_prefix: sticky")),
        format!("{}: not supported", ss(".stat_prefix"))
    );
    assert_eq!(
        filter_err(&session_filter(
            false,
            "strict: true, status_on_strict_destination_not_found: 42"
        )),
        format!(
            "{}: 42 is not an HTTP status in 200..=599",
            ss(".status_on_strict_destination_not_found")
        )
    );
}

/// An LDS listener whose HCM has `filters` (prost structs) before the router.
fn listener_with(
    filters: Vec<
        xds::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpFilter,
    >,
) -> PbListener {
    use xds::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;
    let yaml = r#"
name: ingress
address: { socket_address: { address: 127.0.0.1, port_value: 0 } }
filter_chains:
- filters:
  - name: envoy.filters.network.http_connection_manager
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: ingress
      rds: { route_config_name: routes, config_source: { ads: {} } }
      http_filters:
      - name: envoy.filters.http.router
        typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
"#;
    let value: serde_json::Value = serde_yaml::from_str(yaml).unwrap();
    let mut l: PbListener = xds::decode::from_json(value, &Path::root()).unwrap();
    let any = match &l.filter_chains[0].filters[0].config_type {
        Some(xds::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(a)) => a,
        _ => unreachable!(),
    };
    let mut m = hcm::HttpConnectionManager::decode(any.value.as_slice()).unwrap();
    let router = m.http_filters.pop().unwrap();
    m.http_filters = filters;
    m.http_filters.push(router);
    l.filter_chains[0].filters[0].config_type = Some(
        xds::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(prost_types::Any {
            type_url: hcm::HttpConnectionManager::type_url(),
            value: m.encode_to_vec(),
        }),
    );
    l
}

fn session_filter_pb(
    s: &pb_ss::StatefulSession,
    optional: bool,
) -> xds::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpFilter {
    use xds::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;
    hcm::HttpFilter {
        name: "envoy.filters.http.stateful_session".into(),
        config_type: Some(hcm::http_filter::ConfigType::TypedConfig(
            prost_types::Any {
                type_url: pb_ss::StatefulSession::type_url(),
                value: s.encode_to_vec(),
            },
        )),
        is_optional: optional,
        ..Default::default()
    }
}

fn cookie_session(cookie: xds::pb::envoy::r#type::http::v3::Cookie) -> pb_ss::StatefulSession {
    use xds::pb::envoy::extensions::http::stateful_session::cookie::v3::CookieBasedSessionState;
    pb_ss::StatefulSession {
        session_state: Some(pb_core::TypedExtensionConfig {
            name: "envoy.http.stateful_session.cookie".into(),
            typed_config: Some(prost_types::Any {
                type_url: CookieBasedSessionState::type_url(),
                value: CookieBasedSessionState {
                    cookie: Some(cookie),
                }
                .encode_to_vec(),
            }),
        }),
        ..Default::default()
    }
}

#[test]
fn stateful_session_over_xds() {
    use xds::pb::envoy::r#type::http::v3::Cookie;
    let at =
        "listeners[ingress].filter_chains[0].filters[0].typed_config.http_filters[0].typed_config";
    let good = cookie_session(Cookie {
        name: "sticky".into(),
        ttl: dur(60, 0),
        path: "/".into(),
        ..Default::default()
    });
    for optional in [false, true] {
        let (client, rejected) = xds_client(
            ResourceType::Listener,
            &listener_with(vec![session_filter_pb(&good, optional)]),
        );
        assert_eq!(rejected, None);
        assert_eq!(
            client.listeners()["ingress"].filter_chains[0]
                .http
                .stateful_session()
                .cloned(),
            Some(StatefulSession {
                session_state: Some(SessionState::Cookie(SessionCookie {
                    name: "sticky".into(),
                    ttl: Duration::from_secs(60),
                    path: Some("/".into()),
                })),
                strict: false,
                strict_not_found_status: 503,
            })
        );
    }
    let bad = cookie_session(Cookie {
        name: "sticky".into(),
        ttl: dur(-1, 0),
        ..Default::default()
    });
    assert_eq!(
        xds_response(
            ResourceType::Listener,
            &listener_with(vec![session_filter_pb(&bad, true)])
        ),
        Some(format!(
            "{at}.session_state.typed_config.cookie.ttl: must not be negative"
        ))
    );
}

#[test]
fn stateful_session_defaults() {
    use xds::pb::envoy::extensions::http::stateful_session::header::v3::HeaderBasedSessionState;
    use xds::pb::envoy::r#type::http::v3::Cookie;
    let p = Path::root();
    let s = validate::stateful_session(
        &cookie_session(Cookie {
            name: "sticky".into(),
            ..Default::default()
        }),
        &p,
    )
    .unwrap();
    assert_eq!(
        s,
        StatefulSession {
            session_state: Some(SessionState::Cookie(SessionCookie {
                name: "sticky".into(),
                // gRFC A55: ttl defaults to 0 (a session cookie); no path
                // applies to every request path.
                ttl: Duration::ZERO,
                path: None,
            })),
            strict: false,
            strict_not_found_status: 503,
        }
    );
    let s = validate::stateful_session(
        &cookie_session(Cookie {
            name: "sticky".into(),
            ttl: dur(120, 500_000_000),
            path: "/Package1.Service2/Method3".into(),
            ..Default::default()
        }),
        &p,
    )
    .unwrap();
    assert_eq!(
        s.session_state,
        Some(SessionState::Cookie(SessionCookie {
            name: "sticky".into(),
            ttl: Duration::from_millis(120_500),
            path: Some("/Package1.Service2/Method3".into()),
        }))
    );

    let header = pb_ss::StatefulSession {
        session_state: Some(pb_core::TypedExtensionConfig {
            name: "envoy.http.stateful_session.header".into(),
            typed_config: Some(prost_types::Any {
                type_url: HeaderBasedSessionState::type_url(),
                value: HeaderBasedSessionState {
                    name: "X-Session-Host".into(),
                }
                .encode_to_vec(),
            }),
        }),
        strict: true,
        status_on_strict_destination_not_found: 404,
        ..Default::default()
    };
    assert_eq!(
        validate::stateful_session(&header, &p).unwrap(),
        StatefulSession {
            session_state: Some(SessionState::Header(SessionHeader {
                name: "x-session-host".into()
            })),
            strict: true,
            strict_not_found_status: 404,
        }
    );
    assert_eq!(
        validate::stateful_session(&Default::default(), &p).unwrap(),
        StatefulSession {
            session_state: None,
            strict: false,
            strict_not_found_status: 503,
        }
    );
}

#[test]
fn stateful_session_per_route() {
    use pb_ss::stateful_session_per_route::Override;
    let p = Path::root().field("typed_per_filter_config");
    let per_route = |o: Option<Override>| {
        validate::stateful_session_per_route(&pb_ss::StatefulSessionPerRoute { r#override: o }, &p)
            .map_err(|e| e.to_string())
    };
    assert_eq!(
        per_route(Some(Override::Disabled(true))),
        Ok(StatefulSessionPerRoute::Disabled)
    );
    assert_eq!(
        per_route(Some(Override::Disabled(false))),
        Err("typed_per_filter_config.disabled: must be true".into())
    );
    assert_eq!(
        per_route(None),
        Err("typed_per_filter_config: one of disabled and stateful_session is required".into())
    );
    assert_eq!(
        per_route(Some(Override::StatefulSession(Default::default()))),
        Ok(StatefulSessionPerRoute::Override(StatefulSession {
            session_state: None,
            strict: false,
            strict_not_found_status: 503,
        }))
    );
    assert_eq!(
        per_route(Some(Override::StatefulSession(pb_ss::StatefulSession {
            stat_prefix: "x".into(),
            ..Default::default()
        }))),
        Err("typed_per_filter_config.stateful_session.stat_prefix: not supported".into())
    );
}

// --------------------------------------------------- load_balancing_policy

const LBP: &str = "type.googleapis.com/envoy.extensions.load_balancing_policies";
const RR_NAME: &str = "envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin";
const LR_NAME: &str = "envoy.extensions.load_balancing_policies.least_request.v3.LeastRequest";
const RANDOM_NAME: &str = "envoy.extensions.load_balancing_policies.random.v3.Random";

/// `load_balancing_policy` YAML (at the cluster's indentation) with one
/// policy per `(type after LBP, typed_config fields)`.
fn lb_policies(policies: &[(&str, &str)]) -> String {
    let mut out = String::from("load_balancing_policy:\n  policies:");
    if policies.is_empty() {
        out.push_str(" []");
    }
    for (ty, body) in policies {
        let name = ty.split('.').next().unwrap();
        let body = if body.is_empty() {
            String::new()
        } else {
            format!(", {body}")
        };
        out.push_str(&format!(
            "\n  - typed_extension_config: {{ name: envoy.load_balancing_policies.{name}, typed_config: {{ \"@type\": \"{LBP}.{ty}\"{body} }} }}"
        ));
    }
    out
}

const RR: &str = "round_robin.v3.RoundRobin";
const LR: &str = "least_request.v3.LeastRequest";
const RANDOM: &str = "random.v3.Random";
const MAGLEV: &str = "maglev.v3.Maglev";
const RING_HASH: &str = "ring_hash.v3.RingHash";

fn lbp_policy(policies: &[(&str, &str)]) -> LbPolicy {
    cluster_ok(&lb_policies(policies)).lb_policy
}

fn lbp_err(policies: &[(&str, &str)]) -> String {
    cluster_err(&lb_policies(policies))
}

#[test]
fn load_balancing_policy_first_supported_wins() {
    assert_eq!(lbp_policy(&[(RR, "")]), LbPolicy::RoundRobin);
    assert_eq!(lbp_policy(&[(RANDOM, "")]), LbPolicy::Random);
    assert_eq!(
        lbp_policy(&[(LR, "")]),
        LbPolicy::LeastRequest(LeastRequest::default())
    );
    assert_eq!(lbp_policy(&[(RR, ""), (RANDOM, "")]), LbPolicy::RoundRobin);
    assert_eq!(lbp_policy(&[(RANDOM, ""), (RR, "")]), LbPolicy::Random);
    // Types we do not support are skipped in favour of the next.
    assert_eq!(
        lbp_policy(&[
            (MAGLEV, ""),
            (RING_HASH, "minimum_ring_size: 4"),
            (LR, "choice_count: 4")
        ]),
        LbPolicy::LeastRequest(LeastRequest {
            choice_count: 4,
            active_request_bias: 1.0
        })
    );
    // Entries after the one used are not looked into (as in Envoy), but
    // still need their name and typed_config.
    assert_eq!(
        lbp_policy(&[(RR, ""), (LR, "choice_count: 1")]),
        LbPolicy::RoundRobin
    );
    // Through a TypedStruct.
    assert_eq!(
        cluster_ok(&format!(
            "load_balancing_policy:\n  policies:\n  - typed_extension_config: {{ name: lr, typed_config: {{ \"@type\": type.googleapis.com/xds.type.v3.TypedStruct, type_url: \"{LBP}.{LR}\", value: {{ choice_count: 5 }} }} }}"
        ))
        .lb_policy,
        LbPolicy::LeastRequest(LeastRequest {
            choice_count: 5,
            active_request_bias: 1.0
        })
    );
}

#[test]
fn load_balancing_policy_none_supported_is_rejected() {
    let supported = format!("(supported: {RR_NAME}, {LR_NAME}, {RANDOM_NAME})");
    assert_eq!(
        lbp_err(&[(MAGLEV, ""), (RING_HASH, "")]),
        format!(
            "{CLUSTER}.load_balancing_policy: no supported policy in [envoy.extensions.load_balancing_policies.maglev.v3.Maglev, envoy.extensions.load_balancing_policies.ring_hash.v3.RingHash] {supported}"
        )
    );
    assert_eq!(
        lbp_err(&[]),
        format!("{CLUSTER}.load_balancing_policy: no supported policy in [] {supported}")
    );
    assert_eq!(
        cluster_err("load_balancing_policy: {}"),
        format!("{CLUSTER}.load_balancing_policy: no supported policy in [] {supported}")
    );
    // Every entry needs what Envoy requires of a TypedExtensionConfig.
    let at = format!("{CLUSTER}.load_balancing_policy.policies");
    assert_eq!(
        cluster_err("load_balancing_policy: { policies: [{}] }"),
        format!("{at}[0].typed_extension_config: required")
    );
    assert_eq!(
        cluster_err(&format!(
            "load_balancing_policy: {{ policies: [{{ typed_extension_config: {{ typed_config: {{ \"@type\": \"{LBP}.{RR}\" }} }} }}] }}"
        )),
        format!("{at}[0].typed_extension_config.name: required")
    );
    assert_eq!(
        cluster_err(&format!(
            "load_balancing_policy: {{ policies: [{{ typed_extension_config: {{ name: rr, typed_config: {{ \"@type\": \"{LBP}.{RR}\" }} }} }}, {{ typed_extension_config: {{ name: x }} }}] }}"
        )),
        format!("{at}[1].typed_extension_config.typed_config: required")
    );
}

#[test]
fn load_balancing_policy_fields() {
    let at =
        format!("{CLUSTER}.load_balancing_policy.policies[0].typed_extension_config.typed_config");
    // LeastRequest: the rules of least_request_lb_config.
    assert_eq!(
        lbp_policy(&[(
            LR,
            "choice_count: 20, active_request_bias: { default_value: 0.25, runtime_key: k }, enable_full_scan: true, selection_method: N_CHOICES"
        )]),
        LbPolicy::LeastRequest(LeastRequest {
            choice_count: 10,
            active_request_bias: 0.25
        })
    );
    assert_eq!(
        lbp_policy(&[(LR, "enable_full_scan: false")]),
        LbPolicy::LeastRequest(LeastRequest::default())
    );
    assert_eq!(
        lbp_err(&[(LR, "choice_count: 1")]),
        format!("{at}.choice_count: must be >= 2")
    );
    assert_eq!(
        lbp_err(&[(LR, "active_request_bias: { default_value: -1 }")]),
        format!("{at}.active_request_bias.default_value: -1 is not a finite number >= 0")
    );
    assert_eq!(
        lbp_err(&[(LR, "active_request_bias: { default_value: NaN }")]),
        format!("{at}.active_request_bias.default_value: NaN is not a finite number >= 0")
    );
    assert_eq!(
        lbp_err(&[(LR, "selection_method: FULL_SCAN")]),
        format!("{at}.selection_method: FULL_SCAN is not supported")
    );
    for (ty, field) in [
        (LR, "slow_start_config"),
        (LR, "locality_lb_config"),
        (RR, "slow_start_config"),
        (RR, "locality_lb_config"),
        (RANDOM, "locality_lb_config"),
    ] {
        assert_eq!(
            lbp_err(&[(ty, &format!("{field}: {{}}"))]),
            format!("{at}.{field}: not supported")
        );
    }
    // The policy that is used is validated, not skipped, when it has
    // something we lack.
    assert_eq!(
        lbp_err(&[(RR, "slow_start_config: {}"), (RANDOM, "")]),
        format!("{at}.slow_start_config: not supported")
    );
    assert_eq!(
        lbp_err(&[(LR, "bogus: 1")]),
        format!("{at}.bogus: unknown field")
    );
}

#[test]
fn load_balancing_policy_wins_over_lb_policy() {
    let random = lb_policies(&[(RANDOM, "")]);
    // As in Envoy, lb_policy (and least_request_lb_config) are then unused,
    // whatever they say.
    for lb in [
        "ROUND_ROBIN",
        "LEAST_REQUEST",
        "MAGLEV",
        "LOAD_BALANCING_POLICY_CONFIG",
    ] {
        assert_eq!(
            cluster_ok(&format!("lb_policy: {lb}\n{random}")).lb_policy,
            LbPolicy::Random
        );
    }
    assert_eq!(
        cluster_ok(&format!(
            "lb_policy: LEAST_REQUEST\nleast_request_lb_config: {{ choice_count: 5 }}\n{random}"
        ))
        .lb_policy,
        LbPolicy::Random
    );
    // ... but least_request_lb_config must still be valid.
    assert_eq!(
        cluster_err(&format!(
            "lb_policy: LEAST_REQUEST\nleast_request_lb_config: {{ choice_count: 1 }}\n{random}"
        )),
        format!("{CLUSTER}.least_request_lb_config.choice_count: must be >= 2")
    );

    // Over xDS, from protobuf bytes.
    use xds::pb::envoy::extensions::load_balancing_policies::least_request::v3 as lr;
    let policy = |name: &str, any: prost_types::Any| pb::load_balancing_policy::Policy {
        typed_extension_config: Some(pb_core::TypedExtensionConfig {
            name: name.into(),
            typed_config: Some(any),
        }),
    };
    let mut c = base_cluster();
    c.lb_policy = pb::cluster::LbPolicy::Maglev as i32;
    c.load_balancing_policy = Some(pb::LoadBalancingPolicy {
        policies: vec![
            policy(
                "maglev",
                prost_types::Any {
                    type_url: format!("{LBP}.{MAGLEV}"),
                    value: vec![],
                },
            ),
            policy(
                "least_request",
                prost_types::Any {
                    type_url: lr::LeastRequest::type_url(),
                    value: lr::LeastRequest {
                        choice_count: Some(3),
                        active_request_bias: Some(pb_core::RuntimeDouble {
                            default_value: 2.0,
                            runtime_key: String::new(),
                        }),
                        enable_full_scan: Some(true),
                        ..Default::default()
                    }
                    .encode_to_vec(),
                },
            ),
        ],
    });
    assert_eq!(
        cds_cluster(&c).lb_policy,
        LbPolicy::LeastRequest(LeastRequest {
            choice_count: 3,
            active_request_bias: 2.0
        })
    );
    c.load_balancing_policy.as_mut().unwrap().policies.remove(1);
    assert_eq!(
        cds(&c),
        Some(format!(
            "clusters[echo].load_balancing_policy: no supported policy in [envoy.extensions.load_balancing_policies.maglev.v3.Maglev] (supported: {RR_NAME}, {LR_NAME}, {RANDOM_NAME})"
        ))
    );
    c.load_balancing_policy = Some(pb::LoadBalancingPolicy {
        policies: vec![policy(
            "least_request",
            prost_types::Any {
                type_url: lr::LeastRequest::type_url(),
                value: lr::LeastRequest {
                    selection_method: lr::least_request::SelectionMethod::FullScan as i32,
                    ..Default::default()
                }
                .encode_to_vec(),
            },
        )],
    });
    assert_eq!(
        cds(&c),
        Some("clusters[echo].load_balancing_policy.policies[0].typed_extension_config.typed_config.selection_method: FULL_SCAN is not supported".into())
    );
}

// ------------------------------------------------- typed_per_filter_config

const SSPR: &str =
    "type.googleapis.com/envoy.extensions.filters.http.stateful_session.v3.StatefulSessionPerRoute";
const FILTER_CONFIG: &str = "type.googleapis.com/envoy.config.route.v3.FilterConfig";
const VHOST: &str = "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config.virtual_hosts[0]";

/// A bootstrap whose virtual host and route have the given
/// `typed_per_filter_config` (YAML flow mappings; `{}` for none).
fn load_per_route(vhost: &str, route: &str) -> Result<engine::Bootstrap, String> {
    let yaml = BOOT
        .replace("FILTERS\n", "")
        .replace("CLUSTER_EXTRA\n", "")
        .replace(
            "              routes: [{ match: { prefix: / }, route: { cluster: echo } }]",
            &format!(
                "              typed_per_filter_config: {vhost}\n              routes: [{{ match: {{ prefix: / }}, route: {{ cluster: echo }}, typed_per_filter_config: {route} }}]"
            ),
        );
    bootstrap::from_str(&yaml, Format::Yaml).map_err(|e| e.to_string())
}

/// `(virtual host, route)` stateful session configs.
fn per_route(
    vhost: &str,
    route: &str,
) -> (
    Option<StatefulSessionPerRoute>,
    Option<StatefulSessionPerRoute>,
) {
    let b = load_per_route(vhost, route)
        .unwrap_or_else(|e| panic!("{vhost} / {route} was rejected: {e}"));
    let vh = &b.listeners[0].filter_chains[0]
        .http
        .route_config
        .virtual_hosts[0];
    (
        vh.per_filter.stateful_session.clone(),
        vh.routes[0].per_filter.stateful_session.clone(),
    )
}

fn per_route_err(vhost: &str, route: &str) -> String {
    match load_per_route(vhost, route) {
        Ok(_) => panic!("{vhost} / {route} was accepted"),
        Err(e) => e,
    }
}

fn sticky_override() -> StatefulSessionPerRoute {
    StatefulSessionPerRoute::Override(StatefulSession {
        session_state: Some(SessionState::Cookie(SessionCookie {
            name: "route-cookie".into(),
            ttl: Duration::from_secs(30),
            path: Some("/api".into()),
        })),
        strict: true,
        strict_not_found_status: 503,
    })
}

/// A `StatefulSessionPerRoute` overriding with [`sticky_override`]'s cookie.
fn sticky_yaml() -> String {
    format!(
        "{{ \"@type\": {SSPR}, stateful_session: {{ strict: true, {} }} }}",
        cookie_state("name: route-cookie, ttl: 30s, path: /api")
    )
}

#[test]
fn per_route_stateful_session_lands_on_vhost_and_route() {
    let disabled = format!("{{ \"@type\": {SSPR}, disabled: true }}");
    assert_eq!(per_route("{}", "{}"), (None, None));
    // A route without its own config has its virtual host's, resolved when
    // the route table is validated.
    assert_eq!(
        per_route(
            &format!("{{ envoy.filters.http.stateful_session: {disabled} }}"),
            "{}"
        ),
        (
            Some(StatefulSessionPerRoute::Disabled),
            Some(StatefulSessionPerRoute::Disabled)
        )
    );
    // The key does not matter: the type says which filter it is for.
    assert_eq!(
        per_route("{}", &format!("{{ sticky: {} }}", sticky_yaml())),
        (None, Some(sticky_override()))
    );
    assert_eq!(
        per_route(
            &format!(
                "{{ envoy.filters.http.stateful_session: {} }}",
                sticky_yaml()
            ),
            &format!("{{ envoy.filters.http.stateful_session: {disabled} }}")
        ),
        (
            Some(sticky_override()),
            Some(StatefulSessionPerRoute::Disabled)
        )
    );
    // Validated with the filter's rules, at the entry's path.
    let at = format!("{VHOST}.routes[0].typed_per_filter_config[\"s\"]");
    assert_eq!(
        per_route_err(
            "{}",
            &format!("{{ s: {{ \"@type\": {SSPR}, disabled: false }} }}")
        ),
        format!("{at}.disabled: must be true")
    );
    assert_eq!(
        per_route_err("{}", &format!("{{ s: {{ \"@type\": {SSPR} }} }}")),
        format!("{at}: one of disabled and stateful_session is required")
    );
    assert_eq!(
        per_route_err(
            "{}",
            &format!(
                "{{ s: {{ \"@type\": {SSPR}, stateful_session: {{ {} }} }} }}",
                cookie_state("name: s, ttl: -1s")
            )
        ),
        format!(
            "{at}.stateful_session.session_state.typed_config.cookie.ttl: must not be negative"
        )
    );
    // At most one per map.
    assert_eq!(
        per_route_err(
            &format!("{{ b: {disabled}, a: {} }}", sticky_yaml()),
            "{}"
        ),
        format!(
            "{VHOST}.typed_per_filter_config[\"b\"]: only one stateful session per-route config is allowed (another is under \"a\")"
        )
    );
}

#[test]
fn per_route_filter_config_wrapper() {
    let wrap = |fields: &str| format!("{{ \"@type\": {FILTER_CONFIG}, {fields} }}");
    // config is unwrapped; is_optional does not matter for a supported type.
    for optional in [false, true] {
        assert_eq!(
            per_route(
                &format!(
                    "{{ sticky: {} }}",
                    wrap(&format!(
                        "config: {}, is_optional: {optional}",
                        sticky_yaml()
                    ))
                ),
                "{}"
            ),
            // The route has its virtual host's (resolved at validation).
            (Some(sticky_override()), Some(sticky_override()))
        );
    }
    // disabled: true disables the filter whatever `config` holds: it is the
    // stateful session filter's when the config is a
    // StatefulSessionPerRoute or the key is the filter's Envoy name.
    assert_eq!(
        per_route(
            "{}",
            &format!(
                "{{ envoy.filters.http.stateful_session: {} }}",
                wrap("disabled: true")
            )
        ),
        (None, Some(StatefulSessionPerRoute::Disabled))
    );
    assert_eq!(
        per_route(
            "{}",
            &format!(
                "{{ sticky: {} }}",
                wrap(&format!("disabled: true, config: {}", sticky_yaml()))
            )
        ),
        (None, Some(StatefulSessionPerRoute::Disabled))
    );
    // Disabling some other filter (which we never run) changes nothing.
    assert_eq!(
        per_route(
            &format!(
                "{{ envoy.filters.http.ext_authz: {} }}",
                wrap("disabled: true, config: { \"@type\": type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute, disabled: true }")
            ),
            "{}"
        ),
        (None, None)
    );
    // Without disabled, config is required.
    assert_eq!(
        per_route_err("{}", &format!("{{ x: {} }}", wrap("is_optional: true"))),
        format!(
            "{VHOST}.routes[0].typed_per_filter_config[\"x\"].config: required unless disabled is true"
        )
    );
}

#[test]
fn per_route_unknown_filter_configs_follow_a39() {
    let authz = "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExtProcPerRoute";
    let wrap = |fields: &str| format!("{{ \"@type\": {FILTER_CONFIG}, {fields} }}");
    let hint = format!("(wrap it in a {FILTER_CONFIG} with is_optional: true to skip it)");
    // Not optional: rejected, naming the key and type.
    assert_eq!(
        per_route_err(
            &format!("{{ envoy.filters.http.ext_proc: {{ \"@type\": {authz}, disabled: true }} }}"),
            "{}"
        ),
        format!(
            "{VHOST}.typed_per_filter_config[\"envoy.filters.http.ext_proc\"]: per-route config for \"envoy.filters.http.ext_proc\" ({authz}) is not supported {hint}"
        )
    );
    assert_eq!(
        per_route_err(
            "{}",
            &format!(
                "{{ authz: {} }}",
                wrap(&format!("config: {{ \"@type\": {authz} }}, is_optional: false"))
            )
        ),
        format!(
            "{VHOST}.routes[0].typed_per_filter_config[\"authz\"].config: per-route config for \"authz\" ({authz}) is not supported {hint}"
        )
    );
    // The listener-level StatefulSession is not a per-route config.
    assert_eq!(
        per_route_err(
            "{}",
            "{ s: { \"@type\": type.googleapis.com/envoy.extensions.filters.http.stateful_session.v3.StatefulSession } }"
        ),
        format!(
            "{VHOST}.routes[0].typed_per_filter_config[\"s\"]: per-route config for \"s\" (type.googleapis.com/envoy.extensions.filters.http.stateful_session.v3.StatefulSession) is not supported {hint}"
        )
    );
    // Optional: ignored, next to a stateful session entry.
    assert_eq!(
        per_route(
            "{}",
            &format!(
                "{{ authz: {}, sticky: {} }}",
                wrap(&format!(
                    "config: {{ \"@type\": {authz} }}, is_optional: true"
                )),
                sticky_yaml()
            )
        ),
        (None, Some(sticky_override()))
    );
}

#[test]
fn typed_per_filter_config_elsewhere_is_not_supported() {
    let msg = "not supported here; set typed_per_filter_config on the virtual host or route";
    let boot = BOOT.replace("FILTERS\n", "").replace("CLUSTER_EXTRA\n", "");
    // The route table's own entry is Envoy's third level: its virtual
    // hosts (and their routes) fill in from it.
    let rc_level = boot.replace(
        "          route_config:\n",
        &format!(
            "          route_config:\n            typed_per_filter_config: {{ s: {} }}\n",
            sticky_yaml()
        ),
    );
    let b = bootstrap::from_str(&rc_level, Format::Yaml).expect("a table-level config");
    let table = &b.listeners[0].filter_chains[0].http.route_config;
    assert_eq!(
        table.virtual_hosts[0].routes[0].per_filter.stateful_session,
        Some(sticky_override())
    );
    let weighted = boot.replace(
        "route: { cluster: echo }",
        &format!(
            "route: {{ weighted_clusters: {{ clusters: [{{ name: echo, weight: 1, typed_per_filter_config: {{ s: {} }} }}] }} }}",
            sticky_yaml()
        ),
    );
    assert_eq!(
        bootstrap::from_str(&weighted, Format::Yaml)
            .unwrap_err()
            .to_string(),
        format!(
            "{VHOST}.routes[0].route.weighted_clusters.clusters[0].typed_per_filter_config: {msg}"
        )
    );
}

#[test]
fn per_route_stateful_session_over_xds() {
    use xds::pb::envoy::config::route::v3 as route;
    use xds::pb::envoy::r#type::http::v3::Cookie;
    // An LDS listener with an inline route table, from protobuf bytes.
    let yaml = r#"
name: ingress
address: { socket_address: { address: 127.0.0.1, port_value: 0 } }
filter_chains:
- filters:
  - name: envoy.filters.network.http_connection_manager
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: ingress
      route_config:
        validate_clusters: false
        virtual_hosts:
        - name: all
          domains: ["*"]
          routes: [{ match: { prefix: / }, route: { cluster: echo } }]
      http_filters:
      - name: envoy.filters.http.router
        typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
"#;
    let value: serde_json::Value = serde_yaml::from_str(yaml).unwrap();
    let base: PbListener = xds::decode::from_json(value, &Path::root()).unwrap();
    let with = |vhost: Vec<(&str, prost_types::Any)>, rt: Vec<(&str, prost_types::Any)>| {
        use xds::pb::envoy::config::listener::v3::filter::ConfigType;
        use xds::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;
        let mut l = base.clone();
        let Some(ConfigType::TypedConfig(any)) = &l.filter_chains[0].filters[0].config_type else {
            unreachable!()
        };
        let mut m = hcm::HttpConnectionManager::decode(any.value.as_slice()).unwrap();
        let Some(hcm::http_connection_manager::RouteSpecifier::RouteConfig(rc)) =
            &mut m.route_specifier
        else {
            unreachable!()
        };
        let vh = &mut rc.virtual_hosts[0];
        vh.typed_per_filter_config = vhost.into_iter().map(|(k, a)| (k.into(), a)).collect();
        vh.routes[0].typed_per_filter_config = rt.into_iter().map(|(k, a)| (k.into(), a)).collect();
        l.filter_chains[0].filters[0].config_type =
            Some(ConfigType::TypedConfig(prost_types::Any {
                type_url: hcm::HttpConnectionManager::type_url(),
                value: m.encode_to_vec(),
            }));
        l
    };
    let any = |type_url: String, value: Vec<u8>| prost_types::Any { type_url, value };
    use pb_ss::stateful_session_per_route::Override;
    let disabled = any(
        pb_ss::StatefulSessionPerRoute::type_url(),
        pb_ss::StatefulSessionPerRoute {
            r#override: Some(Override::Disabled(true)),
        }
        .encode_to_vec(),
    );
    let sticky = pb_ss::StatefulSessionPerRoute {
        r#override: Some(Override::StatefulSession(cookie_session(Cookie {
            name: "sticky".into(),
            ..Default::default()
        }))),
    };
    let wrapped = any(
        route::FilterConfig::type_url(),
        route::FilterConfig {
            config: Some(any(
                pb_ss::StatefulSessionPerRoute::type_url(),
                sticky.encode_to_vec(),
            )),
            is_optional: false,
            disabled: false,
        }
        .encode_to_vec(),
    );
    let optional_unknown = any(
        route::FilterConfig::type_url(),
        route::FilterConfig {
            config: Some(any("type.googleapis.com/some.Filter".into(), vec![])),
            is_optional: true,
            disabled: false,
        }
        .encode_to_vec(),
    );
    let (client, rejected) = xds_client(
        ResourceType::Listener,
        &with(
            vec![("envoy.filters.http.stateful_session", disabled)],
            vec![("sticky", wrapped), ("other", optional_unknown)],
        ),
    );
    assert_eq!(rejected, None);
    let vh = &client.listeners()["ingress"].filter_chains[0]
        .http
        .route_config
        .virtual_hosts[0];
    assert_eq!(
        vh.per_filter.stateful_session,
        Some(StatefulSessionPerRoute::Disabled)
    );
    assert_eq!(
        vh.routes[0].per_filter.stateful_session,
        Some(StatefulSessionPerRoute::Override(StatefulSession {
            session_state: Some(SessionState::Cookie(SessionCookie {
                name: "sticky".into(),
                ttl: Duration::ZERO,
                path: None,
            })),
            strict: false,
            strict_not_found_status: 503,
        }))
    );
    assert_eq!(
        xds_response(
            ResourceType::Listener,
            &with(vec![("x", any("type.googleapis.com/some.Filter".into(), vec![]))], vec![])
        ),
        Some("listeners[ingress].filter_chains[0].filters[0].typed_config.route_config.virtual_hosts[0].typed_per_filter_config[\"x\"]: per-route config for \"x\" (type.googleapis.com/some.Filter) is not supported (wrap it in a type.googleapis.com/envoy.config.route.v3.FilterConfig with is_optional: true to skip it)".into())
    );

    // An RDS table on its own.
    let mut rc = route::RouteConfiguration {
        name: "routes".into(),
        virtual_hosts: vec![route::VirtualHost {
            name: "vh".into(),
            domains: vec!["*".into()],
            ..Default::default()
        }],
        ..Default::default()
    };
    rc.virtual_hosts[0].typed_per_filter_config.insert(
        "envoy.filters.http.stateful_session".into(),
        any(
            pb_ss::StatefulSessionPerRoute::type_url(),
            sticky.encode_to_vec(),
        ),
    );
    let t = validate::route_config(&rc, &Path::root(), &Default::default(), false).unwrap();
    assert!(matches!(
        t.virtual_hosts[0].per_filter.stateful_session,
        Some(StatefulSessionPerRoute::Override(_))
    ));
}

// ------------------------------------------- wire compatibility with Envoy

mod wire {
    use envoy_types::pb::envoy::config::cluster::v3 as e_cluster;
    use envoy_types::pb::envoy::config::core::v3 as e_core;
    use envoy_types::pb::envoy::extensions::filters::http::stateful_session::v3 as e_ss;
    use envoy_types::pb::envoy::extensions::http::stateful_session::cookie::v3 as e_cookie;
    use envoy_types::pb::envoy::extensions::http::stateful_session::header::v3 as e_header;
    use envoy_types::pb::envoy::r#type::http::v3 as e_http;
    use envoy_types::pb::envoy::r#type::v3 as e_type;
    use envoy_types::pb::google::protobuf as e_wkt;
    use prost::Message;

    use xds::pb::envoy::config::cluster::v3 as o_cluster;
    use xds::pb::envoy::extensions::filters::http::stateful_session::v3 as o_ss;
    use xds::pb::envoy::extensions::http::stateful_session::cookie::v3 as o_cookie;
    use xds::pb::envoy::extensions::http::stateful_session::header::v3 as o_header;

    /// Envoy's bytes → ours → bytes → Envoy's: nothing lost or changed, so
    /// every field number and type matches (empty messages stand in for the
    /// ones we declare as `gateway.v1.Unsupported`).
    fn round_trip<Theirs, Ours>(theirs: &Theirs) -> Ours
    where
        Theirs: Message + Default + PartialEq + std::fmt::Debug,
        Ours: Message + Default,
    {
        let ours = Ours::decode(theirs.encode_to_vec().as_slice()).expect("ours decodes Envoy's");
        let back = Theirs::decode(ours.encode_to_vec().as_slice()).expect("Envoy decodes ours");
        assert_eq!(&back, theirs, "fields changed across the round trip");
        ours
    }

    fn u32v(value: u32) -> Option<e_wkt::UInt32Value> {
        Some(e_wkt::UInt32Value { value })
    }
    fn boolv(value: bool) -> Option<e_wkt::BoolValue> {
        Some(e_wkt::BoolValue { value })
    }
    fn dur(seconds: i64) -> Option<e_wkt::Duration> {
        Some(e_wkt::Duration { seconds, nanos: 0 })
    }

    #[test]
    fn outlier_detection_field_numbers_match_envoy() {
        let theirs = e_cluster::OutlierDetection {
            consecutive_5xx: u32v(1),
            interval: dur(2),
            base_ejection_time: dur(3),
            max_ejection_percent: u32v(4),
            enforcing_consecutive_5xx: u32v(5),
            enforcing_success_rate: u32v(6),
            success_rate_minimum_hosts: u32v(7),
            success_rate_request_volume: u32v(8),
            success_rate_stdev_factor: u32v(9),
            consecutive_gateway_failure: u32v(10),
            enforcing_consecutive_gateway_failure: u32v(11),
            split_external_local_origin_errors: true,
            consecutive_local_origin_failure: u32v(13),
            enforcing_consecutive_local_origin_failure: u32v(14),
            enforcing_local_origin_success_rate: u32v(15),
            failure_percentage_threshold: u32v(16),
            enforcing_failure_percentage: u32v(17),
            enforcing_failure_percentage_local_origin: u32v(18),
            failure_percentage_minimum_hosts: u32v(19),
            failure_percentage_request_volume: u32v(20),
            max_ejection_time: dur(21),
            max_ejection_time_jitter: dur(22),
            successful_active_health_check_uneject_host: boolv(false),
            monitors: vec![e_core::TypedExtensionConfig::default()],
            always_eject_one_host: boolv(true),
            detect_degraded_hosts: boolv(true),
        };
        let ours: o_cluster::OutlierDetection = round_trip(&theirs);
        assert_eq!(ours.consecutive_5xx, Some(1));
        assert_eq!(ours.max_ejection_percent, Some(4));
        assert_eq!(ours.failure_percentage_request_volume, Some(20));
        assert_eq!(ours.max_ejection_time.map(|d| d.seconds), Some(21));
        assert_eq!(ours.monitors.len(), 1);
        assert_eq!(ours.detect_degraded_hosts, Some(true));
    }

    #[test]
    fn cluster_lb_field_numbers_match_envoy() {
        let theirs = e_cluster::Cluster {
            name: "echo".into(),
            lb_policy: e_cluster::cluster::LbPolicy::LeastRequest as i32,
            lb_config: Some(e_cluster::cluster::LbConfig::LeastRequestLbConfig(
                e_cluster::cluster::LeastRequestLbConfig {
                    choice_count: u32v(3),
                    active_request_bias: Some(e_core::RuntimeDouble {
                        default_value: 1.5,
                        runtime_key: "bias".into(),
                    }),
                    slow_start_config: Some(Default::default()),
                },
            )),
            common_lb_config: Some(e_cluster::cluster::CommonLbConfig {
                healthy_panic_threshold: Some(e_type::Percent { value: 12.5 }),
                locality_config_specifier: Some(
                    e_cluster::cluster::common_lb_config::LocalityConfigSpecifier::LocalityWeightedLbConfig(
                        Default::default(),
                    ),
                ),
                update_merge_window: dur(4),
                ignore_new_hosts_until_first_hc: true,
                close_connections_on_host_set_change: true,
                consistent_hashing_lb_config: Some(Default::default()),
                override_host_status: Some(e_core::HealthStatusSet {
                    statuses: vec![1, 3, 5],
                }),
            }),
            outlier_detection: Some(e_cluster::OutlierDetection {
                max_ejection_percent: u32v(100),
                ..Default::default()
            }),
            ..Default::default()
        };
        let ours: o_cluster::Cluster = round_trip(&theirs);
        let Some(o_cluster::cluster::LbConfig::LeastRequestLbConfig(lr)) = &ours.lb_config else {
            panic!("least_request_lb_config lost: {:?}", ours.lb_config)
        };
        assert_eq!(lr.choice_count, Some(3));
        assert_eq!(lr.active_request_bias.as_ref().unwrap().default_value, 1.5);
        let common = ours.common_lb_config.unwrap();
        assert_eq!(common.healthy_panic_threshold.unwrap().value, 12.5);
        assert_eq!(common.override_host_status.unwrap().statuses, [1, 3, 5]);

        // zone_aware_lb_config is the other member of its oneof.
        let theirs = e_cluster::cluster::CommonLbConfig {
            locality_config_specifier: Some(
                e_cluster::cluster::common_lb_config::LocalityConfigSpecifier::ZoneAwareLbConfig(
                    Default::default(),
                ),
            ),
            ..Default::default()
        };
        let _: o_cluster::cluster::CommonLbConfig = round_trip(&theirs);
    }

    #[test]
    fn stateful_session_field_numbers_match_envoy() {
        let cookie = e_cookie::CookieBasedSessionState {
            cookie: Some(e_http::Cookie {
                name: "sticky".into(),
                ttl: dur(120),
                path: "/svc".into(),
                attributes: vec![e_http::CookieAttribute::default()],
            }),
        };
        let ours: o_cookie::CookieBasedSessionState = round_trip(&cookie);
        let c = ours.cookie.unwrap();
        assert_eq!((c.name.as_str(), c.path.as_str()), ("sticky", "/svc"));
        assert_eq!(c.ttl.unwrap().seconds, 120);
        assert_eq!(c.attributes.len(), 1);

        let header = e_header::HeaderBasedSessionState {
            name: "x-session".into(),
        };
        let ours: o_header::HeaderBasedSessionState = round_trip(&header);
        assert_eq!(ours.name, "x-session");

        let session = e_ss::StatefulSession {
            session_state: Some(e_core::TypedExtensionConfig {
                name: "envoy.http.stateful_session.cookie".into(),
                typed_config: Some(e_wkt::Any {
                    type_url: "type.googleapis.com/envoy.extensions.http.stateful_session.cookie.v3.CookieBasedSessionState".into(),
                    value: cookie.encode_to_vec(),
                }),
            }),
            strict: true,
            stat_prefix: "sticky".into(),
            status_on_strict_destination_not_found: 404,
        };
        let ours: o_ss::StatefulSession = round_trip(&session);
        assert!(ours.strict);
        assert_eq!(ours.stat_prefix, "sticky");
        assert_eq!(ours.status_on_strict_destination_not_found, 404);
        assert_eq!(
            ours.session_state.unwrap().name,
            "envoy.http.stateful_session.cookie"
        );

        for o in [
            e_ss::stateful_session_per_route::Override::Disabled(true),
            e_ss::stateful_session_per_route::Override::StatefulSession(session.clone()),
        ] {
            let theirs = e_ss::StatefulSessionPerRoute {
                r#override: Some(o),
            };
            let ours: o_ss::StatefulSessionPerRoute = round_trip(&theirs);
            assert!(ours.r#override.is_some());
        }
    }

    fn any<M: prost::Message + prost::Name>(m: &M) -> e_wkt::Any {
        e_wkt::Any {
            type_url: M::type_url(),
            value: m.encode_to_vec(),
        }
    }

    #[test]
    fn load_balancing_policy_field_numbers_match_envoy() {
        use envoy_types::pb::envoy::extensions::load_balancing_policies::common::v3 as e_common;
        use envoy_types::pb::envoy::extensions::load_balancing_policies::least_request::v3 as e_lr;
        use envoy_types::pb::envoy::extensions::load_balancing_policies::random::v3 as e_random;
        use envoy_types::pb::envoy::extensions::load_balancing_policies::round_robin::v3 as e_rr;
        use xds::pb::envoy::extensions::load_balancing_policies::least_request::v3 as o_lr;
        use xds::pb::envoy::extensions::load_balancing_policies::random::v3 as o_random;
        use xds::pb::envoy::extensions::load_balancing_policies::round_robin::v3 as o_rr;

        let rr = e_rr::RoundRobin {
            slow_start_config: Some(e_common::SlowStartConfig::default()),
            locality_lb_config: Some(e_common::LocalityLbConfig::default()),
        };
        let ours: o_rr::RoundRobin = round_trip(&rr);
        assert!(ours.slow_start_config.is_some() && ours.locality_lb_config.is_some());

        let lr = e_lr::LeastRequest {
            choice_count: u32v(3),
            active_request_bias: Some(e_core::RuntimeDouble {
                default_value: 0.75,
                runtime_key: "lr.bias".into(),
            }),
            slow_start_config: Some(e_common::SlowStartConfig::default()),
            locality_lb_config: Some(e_common::LocalityLbConfig::default()),
            enable_full_scan: boolv(true),
            selection_method: e_lr::least_request::SelectionMethod::FullScan as i32,
        };
        let ours: o_lr::LeastRequest = round_trip(&lr);
        assert_eq!(ours.choice_count, Some(3));
        let bias = ours.active_request_bias.as_ref().unwrap();
        assert_eq!(
            (bias.default_value, bias.runtime_key.as_str()),
            (0.75, "lr.bias")
        );
        assert!(ours.slow_start_config.is_some() && ours.locality_lb_config.is_some());
        assert_eq!(ours.enable_full_scan, Some(true));
        assert_eq!(
            ours.selection_method,
            o_lr::least_request::SelectionMethod::FullScan as i32
        );

        let random = e_random::Random {
            locality_lb_config: Some(e_common::LocalityLbConfig::default()),
        };
        let ours: o_random::Random = round_trip(&random);
        assert!(ours.locality_lb_config.is_some());

        // Cluster.load_balancing_policy (41) and its Policy entries (4).
        let policy = |name: &str, typed_config| e_cluster::load_balancing_policy::Policy {
            typed_extension_config: Some(e_core::TypedExtensionConfig {
                name: name.into(),
                typed_config: Some(typed_config),
            }),
        };
        let lr = e_lr::LeastRequest {
            choice_count: u32v(4),
            enable_full_scan: boolv(false),
            ..Default::default()
        };
        let theirs = e_cluster::Cluster {
            name: "echo".into(),
            lb_policy: e_cluster::cluster::LbPolicy::Maglev as i32,
            load_balancing_policy: Some(e_cluster::LoadBalancingPolicy {
                policies: vec![
                    policy(
                        "envoy.load_balancing_policies.maglev",
                        e_wkt::Any {
                            type_url: "type.googleapis.com/envoy.extensions.load_balancing_policies.maglev.v3.Maglev".into(),
                            value: vec![],
                        },
                    ),
                    policy("envoy.load_balancing_policies.least_request", any(&lr)),
                    policy("envoy.load_balancing_policies.random", any(&e_random::Random::default())),
                ],
            }),
            ..Default::default()
        };
        let ours: o_cluster::Cluster = round_trip(&theirs);
        let lbp = ours.load_balancing_policy.as_ref().unwrap();
        assert_eq!(lbp.policies.len(), 3);
        assert_eq!(
            lbp.policies[1]
                .typed_extension_config
                .as_ref()
                .unwrap()
                .name,
            "envoy.load_balancing_policies.least_request"
        );
        // Envoy's bytes validate into the first supported policy.
        assert_eq!(
            xds::validate::load_balancing_policy(lbp, &xds::Path::root()).unwrap(),
            engine::LbPolicy::LeastRequest(engine::LeastRequest {
                choice_count: 4,
                active_request_bias: 1.0,
            })
        );
    }

    #[test]
    fn per_filter_config_field_numbers_match_envoy() {
        use envoy_types::pb::envoy::config::route::v3 as e_route;
        use xds::pb::envoy::config::route::v3 as o_route;

        let per_route = e_ss::StatefulSessionPerRoute {
            r#override: Some(e_ss::stateful_session_per_route::Override::Disabled(true)),
        };
        let fc = e_route::FilterConfig {
            config: Some(any(&per_route)),
            is_optional: true,
            disabled: true,
        };
        let ours: o_route::FilterConfig = round_trip(&fc);
        assert!(ours.is_optional && ours.disabled);
        assert_eq!(
            ours.config.as_ref().unwrap().type_url,
            "type.googleapis.com/envoy.extensions.filters.http.stateful_session.v3.StatefulSessionPerRoute"
        );

        // VirtualHost.typed_per_filter_config (15), Route's (13).
        let route = e_route::Route {
            r#match: Some(e_route::RouteMatch {
                path_specifier: Some(e_route::route_match::PathSpecifier::Prefix("/".into())),
                ..Default::default()
            }),
            action: Some(e_route::route::Action::Route(e_route::RouteAction {
                cluster_specifier: Some(e_route::route_action::ClusterSpecifier::Cluster(
                    "echo".into(),
                )),
                ..Default::default()
            })),
            typed_per_filter_config: [(
                "envoy.filters.http.stateful_session".to_string(),
                any(&e_route::FilterConfig {
                    config: Some(any(&per_route)),
                    ..Default::default()
                }),
            )]
            .into(),
            ..Default::default()
        };
        let vh = e_route::VirtualHost {
            name: "vh".into(),
            domains: vec!["*".into()],
            routes: vec![route],
            typed_per_filter_config: [("sticky".to_string(), any(&per_route))].into(),
            ..Default::default()
        };
        let ours: o_route::VirtualHost = round_trip(&vh);
        assert_eq!(ours.typed_per_filter_config.len(), 1);
        assert_eq!(ours.routes[0].typed_per_filter_config.len(), 1);
        let v = xds::validate::virtual_host(
            &ours,
            &xds::Path::root(),
            None,
            &xds::validate::TableDefaults::default(),
        )
        .unwrap();
        assert_eq!(
            v.per_filter.stateful_session,
            Some(engine::StatefulSessionPerRoute::Disabled)
        );
        assert_eq!(
            v.routes[0].per_filter.stateful_session,
            Some(engine::StatefulSessionPerRoute::Disabled)
        );
    }
}

/// `http_filters[].disabled: true` on the stateful session filter (Envoy's
/// "off unless a route enables it"): the filter stays in the chain without
/// a session state, so only a route's or virtual host's
/// `StatefulSessionPerRoute` turns sessions on. `disabled` stays rejected on
/// any other filter.
#[test]
fn disabled_stateful_session_filter_is_off_until_a_route_enables_it() {
    let cookie = cookie_state("name: s, path: /, ttl: 10s");
    let disabled = session_filter(false, &cookie).replace(
        "            is_optional: false\n",
        "            is_optional: false\n            disabled: true\n",
    );
    let boot = load(&disabled, "").unwrap_or_else(|e| panic!("rejected: {e}"));
    let session = boot.listeners[0].filter_chains[0]
        .http
        .stateful_session()
        .cloned();
    let session = session.expect("the filter is in the chain");
    assert_eq!(session.session_state, None, "off by default");
    // A route's own config turns it on (engine::session::effective).
    let on = StatefulSessionPerRoute::Override(StatefulSession {
        session_state: Some(SessionState::Cookie(SessionCookie {
            name: "r".into(),
            ttl: Duration::ZERO,
            path: None,
        })),
        strict: false,
        strict_not_found_status: 503,
    });
    let StatefulSessionPerRoute::Override(route_cfg) = &on else {
        unreachable!()
    };
    assert_eq!(
        engine::session::effective(Some(&session), None, Some(&on)),
        Some(route_cfg)
    );
    assert_eq!(engine::session::effective(Some(&session), None, None), None);

    let router_disabled = "          - name: envoy.filters.http.router\n            disabled: true\n            typed_config: { \"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }\n";
    let err = filter_err(router_disabled);
    assert!(
        err.ends_with("http_filters[0].disabled: not supported"),
        "{err}"
    );
}
