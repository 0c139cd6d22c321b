//! Pieces of Envoy YAML bootstraps for tests: a chain's TLS transport socket, an HTTP connection manager routing everything to one cluster, an HTTP/2 cluster of one host.

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
                route: {{ cluster: {cluster} }}
          http_filters:
          - name: envoy.filters.http.router
"#
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
