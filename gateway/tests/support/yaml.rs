//! Pieces of Envoy YAML bootstraps for tests: a chain's TLS transport socket, an HTTP connection manager routing everything to one cluster, a listener over a route table of one's own, an HTTP/2 cluster of one host.

use std::net::SocketAddr;
use std::path::Path;

/// A filter chain's `transport_socket` (at a chain's field indentation)
/// serving the certificate and key in these files.
pub fn tls_socket(cert: &Path, key: &Path) -> String {
    format!(
        r#"      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_certificates:
            - certificate_chain: {{ filename: {} }}
              private_key: {{ filename: {} }}
"#,
        cert.display(),
        key.display()
    )
}

/// A chain's `filters`: the HTTP connection manager routing `/` to
/// `cluster`, `drain_timeout: 1s`.
pub fn hcm(cluster: &str) -> String {
    hcm_route(cluster, "")
}

/// [`hcm`] with more fields on the route action (`route_fields`, e.g.
/// `, hash_policy: [...]`).
pub fn hcm_route(cluster: &str, route_fields: &str) -> String {
    format!(
        r#"      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          drain_timeout: 1s
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{ prefix: "/" }}
                route: {{ cluster: {cluster}{route_fields} }}
          http_filters:
          - name: envoy.filters.http.router
"#
    )
}

/// A cluster's `typed_extension_protocol_options` for HTTP/2 upstreams
/// (at cluster-field indentation), with `http2_protocol_options` fields.
pub fn h2_options(http2_fields: &str) -> String {
    format!(
        r#"    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{ http2_protocol_options: {{ {http2_fields} }} }}
"#
    )
}

/// One `lb_endpoints` flow item at `addr` (the address may be a name in a
/// DNS cluster), with `extra` endpoint fields (`, health_check_config:
/// ...`).
pub fn endpoint(host: &str, port: u16, extra: &str) -> String {
    format!(
        "{{ endpoint: {{ address: {{ socket_address: {{ address: {host}, port_value: {port} }} }}{extra} }} }}"
    )
}

/// A bootstrap: an admin server and listener `ingress` on port 0, routing
/// `/` to cluster `web` (`route_fields` added to its route action), and
/// cluster `web` made of `cluster_fields` (YAML lines at cluster-field
/// indentation: type, options, `load_assignment`…).
pub fn web_bootstrap(route_fields: &str, cluster_fields: &str) -> engine::Bootstrap {
    routed_bootstrap(
        "web",
        route_fields,
        &format!("  - name: web\n    connect_timeout: 1s\n{cluster_fields}"),
    )
}

/// [`web_bootstrap`] routing `/` to `cluster`, with `clusters` (YAML
/// `clusters` entries).
pub fn routed_bootstrap(cluster: &str, route_fields: &str, clusters: &str) -> engine::Bootstrap {
    let yaml = format!(
        r#"
admin: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }} }}
static_resources:
  listeners:
  - name: ingress
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}
    filter_chains:
    - {hcm}
  clusters:
{clusters}"#,
        hcm = hcm_route(cluster, route_fields).trim_start(),
    );
    xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml).expect("bootstrap")
}

/// A `clusters` entry: `name`, HTTP/1.1 to the one host `addr`.
#[allow(dead_code)] // not every test binary uses each helper
pub fn h1_cluster(name: &str, addr: SocketAddr) -> String {
    format!(
        "  - name: {name}\n    type: STATIC\n    connect_timeout: 1s\n    load_assignment:\n      cluster_name: {name}\n      endpoints:\n      - lb_endpoints: [{}]\n",
        endpoint(&addr.ip().to_string(), addr.port(), "")
    )
}

/// A route table (at its field indentation) of one virtual host taking
/// every domain, whose one route sends every path to `cluster` with
/// `route_fields` (more route-action fields, `, key: value` each).
#[allow(dead_code)]
pub fn one_route(cluster: &str, route_fields: &str) -> String {
    format!(
        r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{ prefix: / }}
                route: {{ cluster: {cluster}{route_fields} }}"#
    )
}

/// A `clusters` entry: `name`, HTTP/2 to the one host `addr`.
pub fn h2_cluster(name: &str, addr: SocketAddr) -> String {
    format!(
        r#"  - name: {name}
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{ http2_protocol_options: {{}} }}
    load_assignment:
      cluster_name: {name}
      endpoints:
      - lb_endpoints:
        - endpoint: {{ address: {{ socket_address: {{ address: {}, port_value: {} }} }} }}
"#,
        addr.ip(),
        addr.port()
    )
}

/// A bootstrap: an admin server and listener `ingress` on port 0 whose
/// connection manager (router only) has `route_config` (YAML lines at
/// the route table's field indentation, 12 spaces), then `clusters`
/// (YAML `clusters` entries; may be empty).
pub fn route_table_bootstrap(
    route_config: &str,
    clusters: &str,
) -> Result<engine::Bootstrap, xds::Error> {
    hcm_bootstrap("", route_config, clusters)
}

/// [`route_table_bootstrap`] with `hcm_fields` (YAML lines at the
/// connection manager's field indentation, 10 spaces) in the connection
/// manager.
pub fn hcm_bootstrap(
    hcm_fields: &str,
    route_config: &str,
    clusters: &str,
) -> Result<engine::Bootstrap, xds::Error> {
    filters_bootstrap(hcm_fields, "", route_config, clusters)
}

/// [`hcm_bootstrap`] with `filters` (YAML `http_filters` entries at 10
/// spaces) before the router.
pub fn filters_bootstrap(
    hcm_fields: &str,
    filters: &str,
    route_config: &str,
    clusters: &str,
) -> Result<engine::Bootstrap, xds::Error> {
    let yaml = filters_yaml(hcm_fields, filters, route_config, clusters);
    xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml)
}

/// [`filters_bootstrap`]'s YAML.
pub fn filters_yaml(hcm_fields: &str, filters: &str, route_config: &str, clusters: &str) -> String {
    let clusters = match clusters.trim() {
        "" => String::new(),
        _ => format!("  clusters:\n{clusters}"),
    };
    format!(
        r#"
admin: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }} }}
static_resources:
  listeners:
  - name: ingress
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
{hcm_fields}
          http_filters:
{filters}
          - name: envoy.filters.http.router
          route_config:
{route_config}
{clusters}"#
    )
}
