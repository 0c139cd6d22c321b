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
"#
    ))
}

pub fn eds_cluster(name: &str) -> Resource {
    (name.to_string(), any(&eds_cluster_pb(name)))
}

/// A `ClusterLoadAssignment` for `name` with one endpoint per address,
/// built from the prost structs (YAML would take seconds at 10,000 hosts).
pub fn cla_pb(name: &str, addrs: &[SocketAddr]) -> ClusterLoadAssignment {
    use xds::pb::envoy::config::core::v3::{address, socket_address, Address, SocketAddress};
    use xds::pb::envoy::config::endpoint::v3::{
        lb_endpoint, Endpoint, LbEndpoint, LocalityLbEndpoints,
    };
    let lb_endpoints = addrs
        .iter()
        .map(|a| LbEndpoint {
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

pub fn cla(name: &str, addrs: &[SocketAddr]) -> Resource {
    (name.to_string(), any(&cla_pb(name, addrs)))
}

/// A listener on 127.0.0.1, port 0, whose routes come over RDS as `routes`.
pub fn rds_listener(name: &str, routes: &str) -> Resource {
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
      - name: envoy.filters.http.router
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
