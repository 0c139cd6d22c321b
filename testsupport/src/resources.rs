//! Envoy resources for tests, written as the YAML an operator would write
//! and decoded through the gateway's own decoder (so a typo fails loudly),
//! packed as `(name, Any)` pairs ready for [`crate::AdsServer::set`].

use std::net::SocketAddr;

use prost::{Message, Name};
use xds::pb::envoy::config::cluster::v3::Cluster;
use xds::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use xds::pb::envoy::config::listener::v3::Listener;
use xds::pb::envoy::config::route::v3::RouteConfiguration;

use crate::any;

/// EDS health statuses, for [`cla_health`].
pub use xds::pb::envoy::config::core::v3::HealthStatus;

/// A resource named `name`, packed.
pub type Resource = (String, prost_types::Any);

/// Decodes YAML into an Envoy message; panics (in a test) if invalid.
pub fn from_yaml<M: Message + Name + Default>(yaml: &str) -> M {
    let value: serde_json::Value = serde_yaml::from_str(yaml).expect("test YAML parses");
    xds::decode::from_json(value, &xds::Path::root())
        .unwrap_or_else(|e| panic!("test resource {}: {e}", M::full_name()))
}

/// A bootstrap whose listeners and clusters come from the ADS server at
/// `ads` (static cluster `xds`), admin on port 0.
pub fn ads_bootstrap_yaml(ads: SocketAddr) -> String {
    format!(
        r#"
node: {{ id: gw-test, cluster: edge }}
admin: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }} }}
dynamic_resources:
  ads_config:
    api_type: GRPC
    transport_api_version: V3
    grpc_services: [{{ envoy_grpc: {{ cluster_name: xds }} }}]
  lds_config: {{ ads: {{}} }}
  cds_config: {{ ads: {{}} }}
static_resources:
  clusters:
  - name: xds
    type: STATIC
    connect_timeout: 0.25s
    load_assignment:
      cluster_name: xds
      endpoints: [{{ lb_endpoints: [{{ endpoint: {{ address: {{ socket_address: {{ address: {ip}, port_value: {port} }} }} }} }}] }}]
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{ http2_protocol_options: {{}} }}
"#,
        ip = ads.ip(),
        port = ads.port()
    )
}

/// An HTTP/2 `EDS` cluster (endpoints over ADS under its own name).
pub fn eds_cluster_pb(name: &str) -> Cluster {
    eds_cluster_with_pb(name, "")
}

pub fn eds_cluster(name: &str) -> Resource {
    (name.to_string(), any(&eds_cluster_pb(name)))
}

/// [`eds_cluster_pb`] with more top-level `Cluster` fields, given as YAML
/// (indented consistently; the common indentation is removed), e.g.
///
/// ```text
/// lb_policy: LEAST_REQUEST
/// common_lb_config: { override_host_status: { statuses: [UNKNOWN, HEALTHY, DRAINING] } }
/// outlier_detection: { interval: 0.2s, consecutive_5xx: 5, max_ejection_percent: 50 }
/// ```
pub fn eds_cluster_with_pb(name: &str, extra: &str) -> Cluster {
    from_yaml(&format!(
        r#"
name: {name}
type: EDS
eds_cluster_config: {{ eds_config: {{ ads: {{}} }} }}
connect_timeout: 0.5s
typed_extension_protocol_options:
  envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
    "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
    explicit_http_config: {{ http2_protocol_options: {{}} }}
{}
"#,
        dedent(extra)
    ))
}

/// [`eds_cluster_with_pb`], packed.
pub fn eds_cluster_with(name: &str, extra: &str) -> Resource {
    (name.to_string(), any(&eds_cluster_with_pb(name, extra)))
}

/// Removes the indentation common to every non-blank line.
fn dedent(text: &str) -> String {
    let indent = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    text.lines()
        .map(|l| l.get(indent..).unwrap_or("").trim_end())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A `ClusterLoadAssignment` for `name` with one endpoint per address,
/// built from the prost structs (YAML would take seconds at 10,000 hosts).
pub fn cla_pb(name: &str, addrs: &[SocketAddr]) -> ClusterLoadAssignment {
    let endpoints: Vec<(SocketAddr, HealthStatus)> =
        addrs.iter().map(|a| (*a, HealthStatus::Unknown)).collect();
    cla_health_pb(name, &endpoints)
}

pub fn cla(name: &str, addrs: &[SocketAddr]) -> Resource {
    (name.to_string(), any(&cla_pb(name, addrs)))
}

/// A `ClusterLoadAssignment` for `name` with one endpoint per address, each
/// with its EDS `health_status` (e.g. `HealthStatus::Draining`).
pub fn cla_health_pb(
    name: &str,
    endpoints: &[(SocketAddr, HealthStatus)],
) -> ClusterLoadAssignment {
    use xds::pb::envoy::config::core::v3::{address, socket_address, Address, SocketAddress};
    use xds::pb::envoy::config::endpoint::v3::{
        lb_endpoint, Endpoint, LbEndpoint, LocalityLbEndpoints,
    };
    let lb_endpoints = endpoints
        .iter()
        .map(|(a, health)| LbEndpoint {
            host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                address: Some(Address {
                    address: Some(address::Address::SocketAddress(SocketAddress {
                        address: a.ip().to_string(),
                        port_specifier: Some(socket_address::PortSpecifier::PortValue(u32::from(
                            a.port(),
                        ))),
                        ..Default::default()
                    })),
                }),
                ..Default::default()
            })),
            health_status: *health as i32,
            ..Default::default()
        })
        .collect();
    ClusterLoadAssignment {
        cluster_name: name.into(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints,
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// [`cla_health_pb`], packed.
pub fn cla_health(name: &str, endpoints: &[(SocketAddr, HealthStatus)]) -> Resource {
    (name.to_string(), any(&cla_health_pb(name, endpoints)))
}

/// A listener on 127.0.0.1, port 0, whose routes come over RDS as `routes`.
pub fn rds_listener(name: &str, routes: &str) -> Resource {
    rds_listener_with_filters(name, routes, &[])
}

/// [`rds_listener`] with HTTP filters before the router, each one
/// `http_filters` entry as a YAML flow mapping (see [`cookie_session_filter`]).
pub fn rds_listener_with_filters(name: &str, routes: &str, filters: &[String]) -> Resource {
    let filters: String = filters.iter().map(|f| format!("      - {f}\n")).collect();
    let m: Listener = from_yaml(&format!(
        r#"
name: {name}
address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}
filter_chains:
- filters:
  - name: envoy.filters.network.http_connection_manager
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: {name}
      rds: {{ route_config_name: {routes}, config_source: {{ ads: {{}} }} }}
      drain_timeout: 1s
      http_filters:
{filters}      - name: envoy.filters.http.router
        typed_config: {{ "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }}
"#
    ));
    (name.to_string(), any(&m))
}

/// A route table: `/other` to cluster `other`, everything else to `cluster`.
pub fn routes(name: &str, cluster: &str) -> Resource {
    let m: RouteConfiguration = from_yaml(&format!(
        r#"
name: {name}
virtual_hosts:
- name: all
  domains: ["*"]
  routes:
  - {{ match: {{ prefix: /other }}, route: {{ cluster: other }} }}
  - {{ match: {{ prefix: / }}, route: {{ cluster: {cluster} }} }}
"#
    ));
    (name.to_string(), any(&m))
}

/// The stateful session filter (`envoy.filters.http.stateful_session`,
/// gRFC A55) with cookie-based session state, as an `http_filters` entry for
/// [`rds_listener_with_filters`]. `ttl` is a YAML duration (`"120s"`);
/// `path` and `ttl` are left unset when `None`.
pub fn cookie_session_filter(
    cookie: &str,
    path: Option<&str>,
    ttl: Option<&str>,
    strict: bool,
) -> String {
    let mut fields = vec![format!("name: {cookie}")];
    if let Some(p) = path {
        fields.push(format!("path: {p:?}"));
    }
    if let Some(t) = ttl {
        fields.push(format!("ttl: {t}"));
    }
    session_filter(
        "envoy.http.stateful_session.cookie",
        "envoy.extensions.http.stateful_session.cookie.v3.CookieBasedSessionState",
        &format!("cookie: {{ {} }}", fields.join(", ")),
        strict,
    )
}

/// The stateful session filter with header-based session state (`header`
/// carries base64 of the host's `ip:port`), as an `http_filters` entry.
pub fn header_session_filter(header: &str, strict: bool) -> String {
    session_filter(
        "envoy.http.stateful_session.header",
        "envoy.extensions.http.stateful_session.header.v3.HeaderBasedSessionState",
        &format!("name: {header}"),
        strict,
    )
}

fn session_filter(extension: &str, state_type: &str, state: &str, strict: bool) -> String {
    format!(
        r#"{{ name: envoy.filters.http.stateful_session, typed_config: {{ "@type": type.googleapis.com/envoy.extensions.filters.http.stateful_session.v3.StatefulSession, strict: {strict}, session_state: {{ name: {extension}, typed_config: {{ "@type": type.googleapis.com/{state_type}, {state} }} }} }} }}"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_decode() {
        let filters = [
            cookie_session_filter("sess", Some("/app"), Some("120s"), false),
            header_session_filter("x-session", true),
        ];
        let (_, l) = rds_listener_with_filters("l", "r", &filters[..1]);
        assert!(l.type_url.ends_with("Listener"));
        rds_listener_with_filters("l", "r", &filters[1..]);
        let c = eds_cluster_with_pb(
            "c",
            "
            lb_policy: LEAST_REQUEST
            outlier_detection: { interval: 0.2s, consecutive_5xx: 5 }
            ",
        );
        assert_eq!(c.lb_policy, 1, "LEAST_REQUEST");
        assert!(c.outlier_detection.is_some());
        let a = SocketAddr::from(([127, 0, 0, 1], 1));
        let cla = cla_health_pb("c", &[(a, HealthStatus::Draining)]);
        assert_eq!(
            cla.endpoints[0].lb_endpoints[0].health_status,
            HealthStatus::Draining as i32
        );
    }
}
