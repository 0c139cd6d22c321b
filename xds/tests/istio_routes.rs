//! A virtual host and route as Istio writes them (retry policy with `previous_hosts`, `include_request_attempt_count`, `max_grpc_timeout: 0s`, a `decorator`, `metadata`) validate into what the data path reads.

use std::time::Duration;

use xds::bootstrap::{from_str, Format};

const ISTIO: &str = r#"
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
          http_filters:
          - name: envoy.filters.http.router
          route_config:
            name: "8080"
            virtual_hosts:
            - name: reviews.default.svc.cluster.local:8080
              domains: ["reviews.default.svc.cluster.local", "reviews"]
              include_request_attempt_count: true
              routes:
              - name: default
                match: { prefix: / }
                metadata: { filter_metadata: { istio: { config: /apis/networking.istio.io/v1/namespaces/default/virtual-service/reviews } } }
                decorator: { operation: "reviews.default.svc.cluster.local:8080/*" }
                route:
                  cluster: reviews
                  timeout: 0s
                  max_grpc_timeout: 0s
                  grpc_timeout_offset: 0.005s
                  retry_policy:
                    retry_on: connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes
                    num_retries: 2
                    retry_host_predicate:
                    - name: envoy.retry_host_predicates.previous_hosts
                      typed_config: { "@type": type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate }
                    host_selection_retry_max_attempts: "5"
                    retriable_status_codes: [503]
  clusters:
  - name: reviews
    load_assignment: { cluster_name: reviews }
"#;

#[test]
fn istios_route_validates_into_what_the_data_path_reads() {
    let b = from_str(ISTIO, Format::Yaml).expect("Istio's route is accepted");
    let vh = &b.listeners[0].filter_chains[0]
        .http
        .route_config
        .virtual_hosts[0];
    let route = &vh.routes[0];
    assert_eq!(
        route.decorator.as_ref().map(|d| d.operation.as_str()),
        Some("reviews.default.svc.cluster.local:8080/*")
    );
    let action = route.action.forward().expect("forwards");
    assert_eq!(action.timeout, None);
    assert_eq!(action.max_grpc_timeout, Some(Duration::ZERO));
    assert_eq!(action.grpc_timeout_offset, Some(Duration::from_millis(5)));
    assert_eq!(action.attempt_count, (true, false));
    let p = action.retry_policy.as_ref().expect("a retry policy");
    assert_eq!(p.num_retries, 2);
    assert!(p.previous_hosts);
    assert_eq!(p.host_selection_max_attempts, 5);
    assert_eq!(p.retriable_status_codes, [503]);
    for c in [
        "connect-failure",
        "refused-stream",
        "unavailable",
        "cancelled",
        "retriable-status-codes",
    ] {
        assert!(
            p.retry_on.contains(engine::RetryOn::by_name(c).unwrap()),
            "{c}"
        );
    }
    assert!(!p.retry_on.contains(engine::RetryOn::FIVE_XX));
    // gRPC requests: the client's grpc-timeout less the offset, else none.
    assert_eq!(
        action.timeout_for(Some(Duration::from_secs(2))),
        Some(Duration::from_millis(1995))
    );
    assert_eq!(action.timeout_for(None), None);
}
