//! `metadata` as Istio and Envoy Gateway write it (their names for what they made, under `filter_metadata`) is accepted on listeners, filter chains, route tables, virtual hosts, routes, clusters, localities and endpoints; `typed_filter_metadata` is refused by path.

use xds::bootstrap::{from_str, Format};

/// A bootstrap with `meta` (a flow mapping) as every owner's `metadata`.
fn with_metadata(meta: &str) -> Result<engine::Bootstrap, xds::Error> {
    let yaml = format!(
        r#"
static_resources:
  listeners:
  - name: ingress
    metadata: {meta}
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}
    filter_chains:
    - metadata: {meta}
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          http_filters:
          - name: envoy.filters.http.router
          route_config:
            metadata: {meta}
            virtual_hosts:
            - name: all
              metadata: {meta}
              domains: ["*"]
              routes:
              - match: {{ prefix: / }}
                metadata: {meta}
                route: {{ cluster: web }}
  clusters:
  - name: web
    metadata: {meta}
    load_assignment:
      cluster_name: web
      endpoints:
      - metadata: {meta}
        lb_endpoints:
        - metadata: {meta}
          endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: 8080 }} }} }}
"#
    );
    from_str(&yaml, Format::Yaml)
}

#[test]
fn filter_metadata_is_accepted_everywhere_envoy_has_it() {
    let istio = r#"{ filter_metadata: { istio: { config: "/apis/networking.istio.io/v1/namespaces/default/virtual-service/web", labels: ["a", 1, true, null, { k: v }] } } }"#;
    let b = with_metadata(istio).expect("accepted");
    assert_eq!(b.clusters[0].name, "web");
    let eg = r#"{ filter_metadata: { envoy-gateway: { resources: [{ kind: HTTPRoute, name: web, namespace: default }] } } }"#;
    assert!(with_metadata(eg).is_ok());
    assert!(with_metadata("{}").is_ok());
}

#[test]
fn typed_filter_metadata_is_refused_by_path() {
    let typed = r#"{ typed_filter_metadata: { x: { "@type": type.googleapis.com/google.protobuf.Struct, value: {} } } }"#;
    let e = with_metadata(typed).expect_err("refused").to_string();
    assert!(
        e.contains("metadata.typed_filter_metadata") && e.contains("not supported"),
        "{e}"
    );
}
