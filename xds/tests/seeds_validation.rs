//! Validation of the seed specs' fields: outlier detection (gRFC A50), least
//! request (gRFC A48), `common_lb_config` and the stateful session filter
//! (gRFC A55). Each rule has one bad value with its exact message; defaults
//! are checked on the engine types; a valid config is refused with
//! `PATH: not supported yet` until the data path implements the feature.
//! Every case runs through YAML (bootstrap) or protobuf bytes (xDS), and
//! envoy-types round trips prove the new field numbers match Envoy's.

// Several of Envoy's fields are deprecated upstream.
#![allow(deprecated)]

use std::time::{Duration, Instant};

use engine::{
    CommonLb, ConsecutiveErrors, FailurePercentageEjection, HealthStatus, HealthStatusSet,
    LeastRequest, OutlierDetection, SessionCookie, SessionHeader, SessionState, StatefulSession,
    StatefulSessionPerRoute, SuccessRateEjection,
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
    c.on_response(resp, t0).rejected
}

fn cds(c: &pb::Cluster) -> Option<String> {
    xds_response(ResourceType::Cluster, c)
}

fn od_path() -> Path {
    Path::root().field("outlier_detection")
}

fn dur(seconds: i64, nanos: i32) -> Option<prost_types::Duration> {
    Some(prost_types::Duration { seconds, nanos })
}

// ------------------------------------------------------ outlier detection

#[test]
fn valid_outlier_detection_is_not_supported_yet() {
    let not_yet = format!("{CLUSTER}.outlier_detection: not supported yet");
    assert_eq!(cluster_err("outlier_detection: {}"), not_yet);
    // Every A50 field at a valid value, and Envoy defaults spelled out.
    assert_eq!(
        cluster_err(
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
        ),
        not_yet
    );

    let mut c = base_cluster();
    c.outlier_detection = Some(pb::OutlierDetection::default());
    assert_eq!(
        cds(&c).as_deref(),
        Some("clusters[echo].outlier_detection: not supported yet")
    );
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
            "successful_active_health_check_uneject_host: false",
            "successful_active_health_check_uneject_host: false is not supported",
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
fn valid_least_request_is_not_supported_yet() {
    let not_yet = format!("{CLUSTER}.lb_policy: LEAST_REQUEST is not supported yet");
    assert_eq!(cluster_err("lb_policy: LEAST_REQUEST"), not_yet);
    assert_eq!(
        cluster_err("lb_policy: LEAST_REQUEST\nleast_request_lb_config: { choice_count: 2 }"),
        not_yet
    );
    assert_eq!(
        cluster_err(
            "lb_policy: LEAST_REQUEST\nleast_request_lb_config: { choice_count: 4294967295 }"
        ),
        not_yet
    );

    let mut c = base_cluster();
    c.lb_policy = pb::cluster::LbPolicy::LeastRequest as i32;
    c.lb_config = Some(pb::cluster::LbConfig::LeastRequestLbConfig(
        pb::cluster::LeastRequestLbConfig {
            choice_count: Some(3),
            ..Default::default()
        },
    ));
    assert_eq!(
        cds(&c).as_deref(),
        Some("clusters[echo].lb_policy: LEAST_REQUEST is not supported yet")
    );
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
            "lb_policy: LEAST_REQUEST\nleast_request_lb_config: { active_request_bias: { default_value: 1.0 } }"
        ),
        format!("{CLUSTER}.least_request_lb_config.active_request_bias: not supported")
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
        format!("{CLUSTER}.ring_hash_lb_config: not supported")
    );
    assert_eq!(
        cluster_err("round_robin_lb_config: {}"),
        format!("{CLUSTER}.round_robin_lb_config: not supported")
    );
    // Other policies are still plainly unsupported.
    assert_eq!(
        cluster_err("lb_policy: RANDOM"),
        format!("{CLUSTER}.lb_policy: RANDOM is not supported")
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
fn common_lb_config_fields_are_validated_then_not_supported_yet() {
    assert_eq!(
        cluster_err("common_lb_config: { healthy_panic_threshold: { value: 30 } }"),
        format!("{CLUSTER}.common_lb_config.healthy_panic_threshold: not supported yet")
    );
    assert_eq!(
        cluster_err(
            "common_lb_config: { override_host_status: { statuses: [HEALTHY, DRAINING] } }"
        ),
        format!("{CLUSTER}.common_lb_config.override_host_status: not supported yet")
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
        (
            "locality_weighted_lb_config: {}",
            "locality_weighted_lb_config",
        ),
        ("update_merge_window: 1s", "update_merge_window"),
        (
            "ignore_new_hosts_until_first_hc: true",
            "ignore_new_hosts_until_first_hc",
        ),
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
    assert_eq!(
        cds(&c).as_deref(),
        Some("clusters[echo].common_lb_config.override_host_status: not supported yet")
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
fn valid_stateful_session_filter_is_not_supported_yet_unless_optional() {
    let cookie =
        cookie_state("name: global-session-cookie, path: /Package1.Service2/Method3, ttl: 120s");
    assert_eq!(
        filter_err(&session_filter(false, &cookie)),
        format!("{}: not supported yet", ss(""))
    );
    let header = format!(
        "session_state: {{ name: envoy.http.stateful_session.header, typed_config: {{ \"@type\": {HEADER_STATE}, name: x-session }} }}, strict: true"
    );
    assert_eq!(
        filter_err(&session_filter(false, &header)),
        format!("{}: not supported yet", ss(""))
    );
    // No session_state: a no-op filter in Envoy, still not implemented here.
    assert_eq!(
        filter_err(&session_filter(false, "strict: false")),
        format!("{}: not supported yet", ss(""))
    );
    // is_optional: skipped, as any filter we do not implement (gRFC A39).
    let b = load(&session_filter(true, &cookie), "").unwrap();
    assert!(b.listeners[0].http.stateful_session.is_none());
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
    // An optional filter is skipped only once its config is valid.
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
    assert_eq!(
        xds_response(
            ResourceType::Listener,
            &listener_with(vec![session_filter_pb(&good, false)])
        ),
        Some(format!("{at}: not supported yet"))
    );
    assert_eq!(
        xds_response(
            ResourceType::Listener,
            &listener_with(vec![session_filter_pb(&good, true)])
        ),
        None
    );
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
}
