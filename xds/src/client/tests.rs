//! Protocol tests: requests, ACK/NACK, SotW deletion, warming, timeouts.

use std::time::{Duration, Instant};

use prost::{Message, Name};

use super::*;
use crate::decode::from_json;
use crate::error::Path;
use crate::pb::envoy::config::cluster::v3::Cluster as PbCluster;
use crate::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use crate::pb::envoy::config::listener::v3::Listener as PbListener;
use crate::pb::envoy::config::route::v3::RouteConfiguration;

pub(super) const BOOT: &str = r#"
node: { id: gw-1, cluster: edge, metadata: { team: x } }
dynamic_resources:
  ads_config:
    api_type: GRPC
    transport_api_version: V3
    grpc_services: [{ envoy_grpc: { cluster_name: xds } }]
  lds_config: { ads: {} }
  cds_config: { ads: {}, initial_fetch_timeout: 15s }
static_resources:
  clusters:
  - name: xds
    type: STATIC
    load_assignment:
      cluster_name: xds
      endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: 18000 } } } }] }]
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: {} }
"#;

pub(super) fn boot(yaml: &str) -> engine::Bootstrap {
    crate::bootstrap::from_str(yaml, crate::bootstrap::Format::Yaml).unwrap()
}

pub(super) fn any<M: Message + Name + Default>(yaml: &str) -> prost_types::Any {
    let value: serde_json::Value = serde_yaml::from_str(yaml).unwrap();
    let m: M = from_json(value, &Path::root()).unwrap();
    prost_types::Any {
        type_url: M::type_url(),
        value: m.encode_to_vec(),
    }
}

pub(super) fn eds_cluster(name: &str) -> prost_types::Any {
    any::<PbCluster>(&format!(
        r#"
name: {name}
type: EDS
eds_cluster_config: {{ eds_config: {{ ads: {{}} }} }}
connect_timeout: 1s
typed_extension_protocol_options:
  envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
    "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
    explicit_http_config: {{ http2_protocol_options: {{}} }}
"#
    ))
}

/// A client whose stream is open and which holds CDS cluster `echo` (EDS).
fn with_eds_cluster_echo(t0: Instant) -> XdsClient {
    let mut c = XdsClient::new(&boot(BOOT), t0);
    c.on_stream_open();
    c.on_response(
        response(ResourceType::Cluster, "v1", "n1", vec![eds_cluster("echo")]),
        t0,
    );
    c
}

fn any_cla(m: &ClusterLoadAssignment) -> prost_types::Any {
    prost_types::Any {
        type_url: ClusterLoadAssignment::type_url(),
        value: m.encode_to_vec(),
    }
}

pub(super) fn cla(name: &str, ports: &[u16]) -> prost_types::Any {
    let eps: Vec<String> = ports
        .iter()
        .map(|p| format!("{{ endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {p} }} }} }} }}"))
        .collect();
    any::<ClusterLoadAssignment>(&format!(
        "cluster_name: {name}\nendpoints: [{{ lb_endpoints: [{}] }}]",
        eps.join(", ")
    ))
}

fn rds_listener(name: &str, port: u16, routes: &str) -> prost_types::Any {
    any::<PbListener>(&format!(
        r#"
name: {name}
address: {{ socket_address: {{ address: 127.0.0.1, port_value: {port} }} }}
filter_chains:
- filters:
  - name: envoy.filters.network.http_connection_manager
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: {name}
      rds: {{ route_config_name: {routes}, config_source: {{ ads: {{}} }} }}
      http_filters:
      - name: envoy.filters.http.router
        typed_config: {{ "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }}
"#
    ))
}

fn route(name: &str, cluster: &str) -> prost_types::Any {
    any::<RouteConfiguration>(&format!(
        r#"
name: {name}
virtual_hosts:
- name: all
  domains: ["*"]
  routes: [{{ match: {{ prefix: / }}, route: {{ cluster: {cluster} }} }}]
"#
    ))
}

pub(super) fn response(
    kind: ResourceType,
    version: &str,
    nonce: &str,
    resources: Vec<prost_types::Any>,
) -> DiscoveryResponse {
    DiscoveryResponse {
        version_info: version.into(),
        resources,
        type_url: kind.type_url().into(),
        nonce: nonce.into(),
        ..Default::default()
    }
}

fn names(b: &Bootstrap) -> (Vec<String>, Vec<String>) {
    (
        b.listeners.iter().map(|l| l.name.clone()).collect(),
        b.clusters.iter().map(|c| c.name.clone()).collect(),
    )
}

#[test]
fn first_requests_are_cds_then_lds_with_node() {
    let t0 = Instant::now();
    let mut c = XdsClient::new(&boot(BOOT), t0);
    let reqs = c.on_stream_open();
    let types: Vec<_> = reqs.iter().map(|r| r.type_url.as_str()).collect();
    assert_eq!(
        types,
        [
            ResourceType::Cluster.type_url(),
            ResourceType::Listener.type_url()
        ]
    );
    for r in &reqs {
        assert_eq!(r.version_info, "");
        assert_eq!(r.response_nonce, "");
        assert!(r.resource_names.is_empty());
        let node = r.node.as_ref().expect("node on every request by default");
        assert_eq!(node.id, "gw-1");
        assert_eq!(node.cluster, "edge");
        assert!(node.metadata.is_some(), "metadata is sent as given");
        assert_eq!(node.user_agent_name, crate::validate::USER_AGENT_NAME);
    }
}

#[test]
fn node_only_on_first_message_when_asked() {
    let yaml = BOOT.replace(
        "api_type: GRPC",
        "api_type: GRPC\n    set_node_on_first_message_only: true",
    );
    let mut c = XdsClient::new(&boot(&yaml), Instant::now());
    let reqs = c.on_stream_open();
    assert!(reqs[0].node.is_some());
    assert!(reqs[1].node.is_none());
    // And again on the next stream.
    c.on_stream_closed();
    assert!(c.on_stream_open()[0].node.is_some());
}

#[test]
fn eds_cluster_warms_before_it_serves_and_acks_carry_version_and_nonce() {
    let t0 = Instant::now();
    let mut c = XdsClient::new(&boot(BOOT), t0);
    c.on_stream_open();
    let out = c.on_response(
        response(ResourceType::Cluster, "v1", "n1", vec![eds_cluster("echo")]),
        t0,
    );
    assert!(out.rejected.is_none());
    assert_eq!(out.requests.len(), 2, "ACK + EDS subscription");
    let ack = &out.requests[0];
    assert_eq!(
        (
            ack.type_url.as_str(),
            ack.version_info.as_str(),
            ack.response_nonce.as_str()
        ),
        (ResourceType::Cluster.type_url(), "v1", "n1")
    );
    assert!(ack.error_detail.is_none());
    let sub = &out.requests[1];
    assert_eq!(sub.type_url, ResourceType::Endpoint.type_url());
    assert_eq!(sub.resource_names, ["echo"]);
    assert_eq!(
        names(&c.compose()).1,
        ["xds"],
        "echo waits for its endpoints"
    );
    assert_eq!(c.warming().1, ["echo"]);

    let out = c.on_response(
        response(
            ResourceType::Endpoint,
            "e1",
            "n2",
            vec![cla("echo", &[1, 2])],
        ),
        t0,
    );
    assert_eq!(out.requests.len(), 1);
    let b = c.compose();
    assert_eq!(names(&b).1, ["xds", "echo"]);
    assert_eq!(b.clusters[1].endpoints.len(), 2);
    assert!(c.warming().1.is_empty());
}

#[test]
fn nack_keeps_everything_and_names_the_field() {
    let t0 = Instant::now();
    let mut c = with_eds_cluster_echo(t0);
    c.on_response(
        response(ResourceType::Endpoint, "e1", "n2", vec![cla("echo", &[1])]),
        t0,
    );
    let before = c.compose();

    let mut bad = PbCluster::decode(eds_cluster("echo").value.as_slice()).unwrap();
    bad.lb_policy = 6; // CLUSTER_PROVIDED
    let bad = prost_types::Any {
        type_url: PbCluster::type_url(),
        value: bad.encode_to_vec(),
    };
    let out = c.on_response(response(ResourceType::Cluster, "v2", "n3", vec![bad]), t0);
    let nack = &out.requests[0];
    assert_eq!(
        nack.version_info, "v1",
        "NACK carries the last accepted version"
    );
    assert_eq!(nack.response_nonce, "n3");
    let err = nack.error_detail.as_ref().unwrap();
    assert_eq!(err.code, NACK_CODE);
    assert_eq!(
        err.message,
        "clusters[echo].lb_policy: CLUSTER_PROVIDED is not supported"
    );
    assert!(!out.changed);
    let st = c.status(ResourceType::Cluster);
    assert_eq!(
        (st.version.as_str(), st.accepted, st.rejected),
        ("v1", 1, 1)
    );
    assert_eq!(st.last_error.as_ref().unwrap().version, "v2");
    let after = c.compose();
    assert!(Arc::ptr_eq(&before.clusters[1], &after.clusters[1]));
}

#[test]
fn wrong_type_url_and_duplicates_are_nacked() {
    let t0 = Instant::now();
    let mut c = XdsClient::new(&boot(BOOT), t0);
    c.on_stream_open();
    let out = c.on_response(
        response(ResourceType::Cluster, "v1", "n1", vec![cla("echo", &[1])]),
        t0,
    );
    assert!(out.rejected.unwrap().starts_with("clusters[0]: type_url"));
    let out = c.on_response(
        response(
            ResourceType::Cluster,
            "v1",
            "n2",
            vec![eds_cluster("a"), eds_cluster("a")],
        ),
        t0,
    );
    assert_eq!(
        out.rejected.unwrap(),
        "clusters[a]: given twice in one response"
    );
    let out = c.on_response(
        response(ResourceType::Cluster, "v1", "n3", vec![eds_cluster("xds")]),
        t0,
    );
    assert_eq!(
        out.rejected.unwrap(),
        "clusters[xds].name: a static cluster has this name"
    );
}

#[test]
fn sotw_removes_missing_clusters_and_unsubscribes_their_endpoints() {
    let t0 = Instant::now();
    let mut c = XdsClient::new(&boot(BOOT), t0);
    c.on_stream_open();
    c.on_response(
        response(
            ResourceType::Cluster,
            "v1",
            "n1",
            vec![eds_cluster("a"), eds_cluster("b")],
        ),
        t0,
    );
    c.on_response(
        response(
            ResourceType::Endpoint,
            "e1",
            "n2",
            vec![cla("a", &[1]), cla("b", &[2])],
        ),
        t0,
    );
    assert_eq!(names(&c.compose()).1, ["xds", "a", "b"]);
    let out = c.on_response(
        response(ResourceType::Cluster, "v2", "n3", vec![eds_cluster("b")]),
        t0,
    );
    assert_eq!(out.requests[1].resource_names, ["b"]);
    assert_eq!(names(&c.compose()).1, ["xds", "b"]);
    assert!(!c.endpoints().contains_key("a"));
    // An empty CDS response removes every dynamic cluster.
    let out = c.on_response(response(ResourceType::Cluster, "v3", "n4", vec![]), t0);
    assert_eq!(
        out.requests[1].resource_names,
        Vec::<String>::new(),
        "empty list unsubscribes"
    );
    assert_eq!(names(&c.compose()).1, ["xds"]);
}

#[test]
fn eds_responses_do_not_delete_resources_they_omit() {
    let t0 = Instant::now();
    let mut c = XdsClient::new(&boot(BOOT), t0);
    c.on_stream_open();
    c.on_response(
        response(
            ResourceType::Cluster,
            "v1",
            "n1",
            vec![eds_cluster("a"), eds_cluster("b")],
        ),
        t0,
    );
    c.on_response(
        response(
            ResourceType::Endpoint,
            "e1",
            "n2",
            vec![cla("a", &[1]), cla("b", &[2])],
        ),
        t0,
    );
    c.on_response(
        response(ResourceType::Endpoint, "e2", "n3", vec![cla("a", &[3])]),
        t0,
    );
    let b = c.compose();
    assert_eq!(b.clusters[1].endpoints[0].address.port(), 3);
    assert_eq!(b.clusters[2].endpoints[0].address.port(), 2);
}

#[test]
fn initial_fetch_timeout_releases_a_cluster_without_endpoints() {
    let t0 = Instant::now();
    let mut c = with_eds_cluster_echo(t0);
    assert_eq!(c.next_deadline(), Some(t0 + Duration::from_secs(15)));
    assert!(!c.poll(t0 + Duration::from_secs(14)));
    assert_eq!(names(&c.compose()).1, ["xds"]);
    assert!(c.poll(t0 + Duration::from_secs(15)));
    let b = c.compose();
    assert_eq!(names(&b).1, ["xds", "echo"]);
    assert!(b.clusters[1].endpoints.is_empty());
    // Late endpoints still arrive.
    c.on_response(
        response(ResourceType::Endpoint, "e1", "n2", vec![cla("echo", &[1])]),
        t0,
    );
    assert_eq!(c.compose().clusters[1].endpoints.len(), 1);
}

#[test]
fn listener_waits_for_its_routes_and_their_clusters() {
    let t0 = Instant::now();
    let mut c = XdsClient::new(&boot(BOOT), t0);
    c.on_stream_open();
    let out = c.on_response(
        response(
            ResourceType::Listener,
            "l1",
            "n1",
            vec![rds_listener("ingress", 0, "r")],
        ),
        t0,
    );
    assert_eq!(out.requests[1].type_url, ResourceType::Route.type_url());
    assert_eq!(out.requests[1].resource_names, ["r"]);
    assert!(names(&c.compose()).0.is_empty(), "no routes yet");
    c.on_response(
        response(ResourceType::Cluster, "v1", "n2", vec![eds_cluster("echo")]),
        t0,
    );
    c.on_response(
        response(ResourceType::Route, "r1", "n3", vec![route("r", "echo")]),
        t0,
    );
    assert!(names(&c.compose()).0.is_empty(), "echo is still warming");
    c.on_response(
        response(ResourceType::Endpoint, "e1", "n4", vec![cla("echo", &[1])]),
        t0,
    );
    let b = c.compose();
    assert_eq!(names(&b).0, ["ingress"]);
    assert_eq!(b.listeners[0].filter_chains[0].http.route_config.name, "r");
    assert_eq!(
        b.listeners[0].filter_chains[0]
            .http
            .route_config
            .virtual_hosts
            .len(),
        1
    );

    // A route change to a warming cluster keeps the old table until it warms.
    c.on_response(
        response(
            ResourceType::Cluster,
            "v2",
            "n5",
            vec![eds_cluster("echo"), eds_cluster("new")],
        ),
        t0,
    );
    c.on_response(
        response(ResourceType::Route, "r2", "n6", vec![route("r", "new")]),
        t0,
    );
    let b2 = c.compose();
    assert!(Arc::ptr_eq(&b.listeners[0], &b2.listeners[0]));
    c.on_response(
        response(ResourceType::Endpoint, "e2", "n7", vec![cla("new", &[2])]),
        t0,
    );
    let b3 = c.compose();
    let target = &b3.listeners[0].filter_chains[0]
        .http
        .route_config
        .virtual_hosts[0]
        .routes[0]
        .action
        .forward()
        .unwrap()
        .target;
    assert!(matches!(target, engine::ClusterTarget::Cluster(n) if n == "new"));
}

#[test]
fn reconnect_rerequests_with_held_versions_and_names() {
    let t0 = Instant::now();
    let mut c = with_eds_cluster_echo(t0);
    c.on_response(
        response(ResourceType::Endpoint, "e1", "n2", vec![cla("echo", &[1])]),
        t0,
    );
    c.on_stream_closed();
    let reqs = c.on_stream_open();
    let summary: Vec<_> = reqs
        .iter()
        .map(|r| {
            (
                r.type_url.as_str(),
                r.version_info.as_str(),
                r.response_nonce.as_str(),
                r.resource_names.clone(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (ResourceType::Cluster.type_url(), "v1", "", vec![]),
            (
                ResourceType::Endpoint.type_url(),
                "e1",
                "",
                vec!["echo".to_string()]
            ),
            (ResourceType::Listener.type_url(), "", "", vec![]),
        ]
    );
}

#[test]
fn unchanged_resources_keep_their_arcs_across_updates() {
    let t0 = Instant::now();
    let mut c = XdsClient::new(&boot(BOOT), t0);
    c.on_stream_open();
    c.on_response(
        response(
            ResourceType::Cluster,
            "v1",
            "n1",
            vec![eds_cluster("a"), eds_cluster("b")],
        ),
        t0,
    );
    c.on_response(
        response(
            ResourceType::Endpoint,
            "e1",
            "n2",
            vec![cla("a", &[1]), cla("b", &[2])],
        ),
        t0,
    );
    let b1 = c.compose();
    c.on_response(
        response(ResourceType::Endpoint, "e2", "n3", vec![cla("a", &[3])]),
        t0,
    );
    let b2 = c.compose();
    assert!(!Arc::ptr_eq(&b1.clusters[1], &b2.clusters[1]), "a changed");
    assert!(Arc::ptr_eq(&b1.clusters[2], &b2.clusters[2]), "b did not");
}

#[test]
fn responses_with_unknown_type_are_ignored() {
    let mut c = XdsClient::new(&boot(BOOT), Instant::now());
    c.on_stream_open();
    let out = c.on_response(
        DiscoveryResponse {
            type_url: "type.googleapis.com/foo.Bar".into(),
            ..Default::default()
        },
        Instant::now(),
    );
    assert!(out.requests.is_empty());
    assert!(out.rejected.is_some());
}

#[test]
fn unknown_protobuf_fields_are_ignored_as_proto3_requires() {
    let t0 = Instant::now();
    let mut c = XdsClient::new(&boot(BOOT), t0);
    c.on_stream_open();
    let mut any = eds_cluster("echo");
    // Field 9999, varint 1: a field from a newer Envoy we have never heard of.
    any.value.extend_from_slice(&[0xf8, 0xe0, 0x04, 0x01]);
    let out = c.on_response(response(ResourceType::Cluster, "v1", "n1", vec![any]), t0);
    assert!(out.rejected.is_none(), "{:?}", out.rejected);
    assert!(c.clusters().contains_key("echo"));
}

#[test]
fn known_but_unimplemented_fields_are_nacked_by_name() {
    let t0 = Instant::now();
    let mut c = XdsClient::new(&boot(BOOT), t0);
    c.on_stream_open();
    let mut any = eds_cluster("echo");
    // lb_subset_config (field 22), an empty message: Envoy knows it, we
    // do not implement it, so it must not be ignored silently.
    any.value.extend_from_slice(&[0xb2, 0x01, 0x00]);
    let out = c.on_response(response(ResourceType::Cluster, "v1", "n1", vec![any]), t0);
    assert_eq!(
        out.rejected.as_deref(),
        Some("clusters[echo].lb_subset_config: not supported")
    );
}

#[test]
fn a_rejection_repeated_by_the_server_is_answered_ever_more_slowly() {
    let t0 = Instant::now();
    let mut c = XdsClient::new(&boot(BOOT), t0);
    c.on_stream_open();
    let mut bad = PbCluster::decode(eds_cluster("echo").value.as_slice()).unwrap();
    bad.lb_policy = 6; // CLUSTER_PROVIDED
    let bad = prost_types::Any {
        type_url: PbCluster::type_url(),
        value: bad.encode_to_vec(),
    };
    let mut delays = Vec::new();
    for i in 0..10 {
        let out = c.on_response(
            response(
                ResourceType::Cluster,
                "v2",
                &format!("n{i}"),
                vec![bad.clone()],
            ),
            t0,
        );
        assert_eq!(out.repeated, i);
        assert_eq!(out.requests[0].response_nonce, format!("n{i}"));
        delays.push(out.delay.as_millis());
    }
    assert_eq!(
        delays,
        [0, 100, 200, 400, 800, 1600, 3200, 6400, 10000, 10000]
    );
    // A different version (or error) is answered at once again.
    let out = c.on_response(
        response(ResourceType::Cluster, "v3", "n10", vec![bad.clone()]),
        t0,
    );
    assert_eq!(out.delay, Duration::ZERO);
    // And an accepted one resets the count.
    c.on_response(
        response(
            ResourceType::Cluster,
            "v4",
            "n11",
            vec![eds_cluster("echo")],
        ),
        t0,
    );
    let out = c.on_response(response(ResourceType::Cluster, "v3", "n12", vec![bad]), t0);
    assert_eq!(out.repeated, 0);
}

#[test]
fn each_eds_assignment_brings_its_own_overprovisioning_factor() {
    let t0 = Instant::now();
    let mut c = with_eds_cluster_echo(t0);
    let mut m = ClusterLoadAssignment::decode(cla("echo", &[1, 2]).value.as_slice()).unwrap();
    m.policy = Some(Default::default());
    m.policy.as_mut().unwrap().overprovisioning_factor = Some(200);
    let out = c.on_response(
        response(ResourceType::Endpoint, "e1", "n2", vec![any_cla(&m)]),
        t0,
    );
    assert!(out.rejected.is_none());
    let factor = |c: &mut XdsClient| c.compose().clusters[1].common_lb.overprovisioning_factor;
    assert_eq!(factor(&mut c), 200);
    // The next assignment without a policy goes back to Envoy's default.
    m.policy = None;
    c.on_response(
        response(ResourceType::Endpoint, "e2", "n3", vec![any_cla(&m)]),
        t0,
    );
    assert_eq!(factor(&mut c), 140);
}

#[test]
fn endpoint_errors_name_their_path() {
    let t0 = Instant::now();
    let mut c = with_eds_cluster_echo(t0);
    let mut m = ClusterLoadAssignment::decode(cla("echo", &[1, 2, 3]).value.as_slice()).unwrap();
    let lbe = &mut m.endpoints[0].lb_endpoints[2];
    lbe.load_balancing_weight = Some(0);
    let out = c.on_response(
        response(ResourceType::Endpoint, "e1", "n2", vec![any_cla(&m)]),
        t0,
    );
    assert_eq!(
        out.rejected.as_deref(),
        Some("endpoints[echo].endpoints[0].lb_endpoints[2].load_balancing_weight: 0 is out of range 1..=4294967295")
    );
    let dup = cla("echo", &[1, 2, 1]);
    let out = c.on_response(response(ResourceType::Endpoint, "e2", "n3", vec![dup]), t0);
    assert_eq!(
        out.rejected.as_deref(),
        Some("endpoints[echo].endpoints[0].lb_endpoints[2].endpoint.address: duplicate endpoint 127.0.0.1:1")
    );
}
