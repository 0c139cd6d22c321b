//! The HTTP connection manager's limits (`max_headers_count`, the underscore
//! action, the HTTP/2 flood limits), the buffer limits of listeners and
//! clusters, and the per-listener connection limit from `layered_runtime`:
//! Envoy's defaults, values as set, and bad values named by field.

use engine::{HeadersWithUnderscoresAction, Http2FloodLimits};
use xds::bootstrap::{self, Format};

const GOOD: &str = include_str!("data/bootstrap.yaml");
const HCM: &str = "static_resources.listeners[0].filter_chains[0].filters[0].typed_config";
const COMMON: &str = "            idle_timeout: 0s\n";
const H2: &str = "            initial_stream_window_size: 65535\n";
const USERS_H2: &str = "            max_concurrent_streams: 500\n";

fn load(yaml: &str) -> Result<engine::Bootstrap, String> {
    bootstrap::from_str(yaml, Format::Yaml).map_err(|e| e.to_string())
}

/// The good config with `extra` lines added after `at` (which must occur
/// exactly once).
fn with(at: &str, extra: &str) -> String {
    assert_eq!(GOOD.matches(at).count(), 1, "{at:?} must occur once");
    GOOD.replace(at, &format!("{at}{extra}"))
}

fn ok(at: &str, extra: &str) -> engine::Bootstrap {
    load(&with(at, extra)).unwrap_or_else(|e| panic!("{extra:?} rejected: {e}"))
}

fn bad(at: &str, extra: &str) -> String {
    match load(&with(at, extra)) {
        Ok(_) => panic!("config with {extra:?} was accepted"),
        Err(e) => e,
    }
}

/// The good config with a `layered_runtime` section.
fn runtime(section: &str) -> Result<engine::Bootstrap, String> {
    load(&format!("{GOOD}layered_runtime:\n{section}"))
}

#[test]
fn envoy_defaults_when_unset() {
    let b = load(GOOD).unwrap();
    let h = &b.listeners[0].filter_chains[0].http;
    assert_eq!(h.max_headers_count, 100);
    assert_eq!(
        h.headers_with_underscores_action,
        HeadersWithUnderscoresAction::Allow
    );
    assert_eq!(
        h.http2_flood,
        Http2FloodLimits {
            max_outbound_frames: 10_000,
            max_outbound_control_frames: 1_000,
            max_consecutive_inbound_frames_with_empty_payload: 1,
            max_inbound_priority_frames_per_stream: 100,
            max_inbound_window_update_frames_per_data_frame_sent: 10,
        }
    );
    assert!(b
        .clusters
        .iter()
        .all(|c| c.per_connection_buffer_limit_bytes == 1 << 20));
    assert!(b.runtime.listener_connection_limits.is_empty());
}

#[test]
fn limits_as_set() {
    let b = ok(
        COMMON,
        "            max_headers_count: 20\n            headers_with_underscores_action: DROP_HEADER\n",
    );
    let h = &b.listeners[0].filter_chains[0].http;
    assert_eq!(h.max_headers_count, 20);
    assert_eq!(
        h.headers_with_underscores_action,
        HeadersWithUnderscoresAction::DropHeader
    );
    let b = ok(
        COMMON,
        "            headers_with_underscores_action: REJECT_REQUEST\n",
    );
    assert_eq!(
        b.listeners[0].filter_chains[0]
            .http
            .headers_with_underscores_action,
        HeadersWithUnderscoresAction::RejectRequest
    );
    let b = ok(
        H2,
        "            max_outbound_frames: 500\n            max_outbound_control_frames: 50\n            max_consecutive_inbound_frames_with_empty_payload: 0\n            max_inbound_priority_frames_per_stream: 0\n            max_inbound_window_update_frames_per_data_frame_sent: 3\n",
    );
    assert_eq!(
        b.listeners[0].filter_chains[0].http.http2_flood,
        Http2FloodLimits {
            max_outbound_frames: 500,
            max_outbound_control_frames: 50,
            max_consecutive_inbound_frames_with_empty_payload: 0,
            max_inbound_priority_frames_per_stream: 0,
            max_inbound_window_update_frames_per_data_frame_sent: 3,
        }
    );
}

#[test]
fn bad_limits_are_named() {
    assert_eq!(
        bad(COMMON, "            max_headers_count: 0\n"),
        format!(
            "{HCM}.common_http_protocol_options.max_headers_count: 0 is out of range 1..=4294967295"
        )
    );
    for field in [
        "max_outbound_frames",
        "max_outbound_control_frames",
        "max_inbound_window_update_frames_per_data_frame_sent",
    ] {
        assert_eq!(
            bad(H2, &format!("            {field}: 0\n")),
            format!("{HCM}.http2_protocol_options.{field}: 0 is out of range 1..=4294967295")
        );
    }
    let e = bad(
        COMMON,
        "            headers_with_underscores_action: SOMETIMES\n",
    );
    assert!(
        e.contains("common_http_protocol_options.headers_with_underscores_action"),
        "{e}"
    );
    assert_eq!(
        bad(COMMON, "            headers_with_underscores_action: 7\n"),
        format!(
            "{HCM}.common_http_protocol_options.headers_with_underscores_action: unknown value 7"
        )
    );
}

#[test]
fn other_protocol_options_still_fail_by_name() {
    assert_eq!(
        bad(H2, "            hpack_table_size: 0\n"),
        format!("{HCM}.http2_protocol_options.hpack_table_size: not supported")
    );
    assert_eq!(
        bad(COMMON, "            max_response_headers_kb: 80\n"),
        format!("{HCM}.common_http_protocol_options.max_response_headers_kb: not supported")
    );
    // Upstream connections have no flood limits.
    assert_eq!(
        bad(USERS_H2, "            max_outbound_frames: 100\n"),
        "static_resources.clusters[0].typed_extension_protocol_options\
         [\"envoy.extensions.upstreams.http.v3.HttpProtocolOptions\"]\
         .explicit_http_config.http2_protocol_options.max_outbound_frames: not supported"
    );
}

#[test]
fn cluster_buffer_limit() {
    let at = "    connect_timeout: 0.25s\n";
    let b = ok(at, "    per_connection_buffer_limit_bytes: 65536\n");
    let users = b.clusters.iter().find(|c| c.name == "users").unwrap();
    assert_eq!(users.per_connection_buffer_limit_bytes, 65536);
    assert_eq!(
        bad(at, "    per_connection_buffer_limit_bytes: 0\n"),
        "static_resources.clusters[0].per_connection_buffer_limit_bytes: must be at least 1"
    );
}

#[test]
fn listener_connection_limits_from_static_layers() {
    let b = runtime(
        "  layers:\n  - name: base\n    static_layer:\n      envoy.resource_limits.listener.ingress.connection_limit: 2\n      envoy.resource_limits.listener.other.connection_limit: \"7\"\n",
    )
    .unwrap();
    assert_eq!(b.runtime.connection_limit("ingress"), Some(2));
    assert_eq!(b.runtime.connection_limit("other"), Some(7));
    assert_eq!(b.runtime.connection_limit("unknown"), None);
    // Nested spelling, and a later layer overriding an earlier one.
    let b = runtime(
        "  layers:\n  - name: base\n    static_layer:\n      envoy.resource_limits.listener.ingress.connection_limit: 2\n  - name: override\n    static_layer:\n      envoy:\n        resource_limits:\n          listener:\n            ingress:\n              connection_limit: 5\n",
    )
    .unwrap();
    assert_eq!(b.runtime.connection_limit("ingress"), Some(5));
}

#[test]
fn other_runtime_content_is_named() {
    assert_eq!(
        runtime("  layers:\n  - name: disk\n    disk_layer: { symlink_root: /srv/runtime }\n")
            .unwrap_err(),
        "layered_runtime.layers[0].disk_layer: not supported"
    );
    assert_eq!(
        runtime("  layers:\n  - name: admin\n    admin_layer: {}\n").unwrap_err(),
        "layered_runtime.layers[0].admin_layer: not supported"
    );
    assert_eq!(
        runtime(
            "  layers:\n  - name: base\n    static_layer:\n      overload.global_downstream_max_connections: 100\n"
        )
        .unwrap_err(),
        "layered_runtime.layers[0].static_layer[\"overload.global_downstream_max_connections\"]: \
         runtime key \"overload.global_downstream_max_connections\" is not supported (only \
         envoy.resource_limits.listener.<listener name>.connection_limit is)"
    );
    let key = "layered_runtime.layers[0].static_layer[\"envoy.resource_limits.listener.ingress.connection_limit\"]";
    for (value, why) in [
        ("0", "must be at least 1"),
        ("2.5", "must be a whole number of connections"),
        ("-1", "must be a whole number of connections"),
        ("true", "must be a whole number of connections"),
    ] {
        assert_eq!(
            runtime(&format!(
                "  layers:\n  - name: base\n    static_layer:\n      envoy.resource_limits.listener.ingress.connection_limit: {value}\n"
            ))
            .unwrap_err(),
            format!("{key}: {why}")
        );
    }
    assert!(runtime("  layers:\n  - name: empty\n")
        .unwrap_err()
        .starts_with("layered_runtime.layers[0]: one of static_layer"));
}

#[test]
fn connection_lifetime_limits() {
    let h = load(GOOD).unwrap().listeners[0].filter_chains[0]
        .http
        .clone();
    assert_eq!(h.max_connection_duration, None);
    assert_eq!(h.max_requests_per_connection, None);
    let b = ok(
        COMMON,
        "            max_connection_duration: 90s\n            max_requests_per_connection: 1000\n",
    );
    let h = &b.listeners[0].filter_chains[0].http;
    assert_eq!(
        h.max_connection_duration,
        Some(std::time::Duration::from_secs(90))
    );
    assert_eq!(h.max_requests_per_connection, Some(1000));
    // 0 is no limit, as in Envoy.
    let b = ok(
        COMMON,
        "            max_connection_duration: 0s\n            max_requests_per_connection: 0\n",
    );
    let h = &b.listeners[0].filter_chains[0].http;
    assert_eq!(
        (h.max_connection_duration, h.max_requests_per_connection),
        (None, None)
    );
    assert_eq!(
        bad(COMMON, "            max_connection_duration: -1s\n"),
        format!("{HCM}.common_http_protocol_options.max_connection_duration: must not be negative")
    );
}
