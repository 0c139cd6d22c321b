//! SDS over ADS: a listener naming a secret subscribes to it and warms
//! until it comes; a new version rotates the certificate in place (the
//! listener is not rebuilt); a bad one is NACKed and changes nothing.

use std::time::Instant;

use super::tests::{any, boot, response, BOOT};
use super::*;
use crate::pb::envoy::config::listener::v3::Listener as PbListener;
use crate::pb::envoy::extensions::transport_sockets::tls::v3::Secret;

fn tls_listener(name: &str, secret: &str) -> prost_types::Any {
    any::<PbListener>(&format!(
        r#"
name: {name}
address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}
filter_chains:
- transport_socket:
    name: envoy.transport_sockets.tls
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
      common_tls_context:
        tls_certificate_sds_secret_configs: [{{ name: {secret}, sds_config: {{ ads: {{}} }} }}]
  filters:
  - name: envoy.filters.network.http_connection_manager
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: {name}
      route_config: {{ virtual_hosts: [{{ name: all, domains: ["*"], routes: [{{ match: {{ prefix: / }}, direct_response: {{ status: 200 }} }}] }}] }}
      http_filters:
      - name: envoy.filters.http.router
        typed_config: {{ "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }}
"#
    ))
}

/// A self-signed certificate for `dns` and its key, PEM, each quoted for
/// YAML.
fn self_signed(dns: &str) -> (String, String) {
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec![dns.to_string()])
        .expect("params")
        .self_signed(&key)
        .expect("cert");
    (
        serde_json::to_string(&cert.pem()).unwrap(),
        serde_json::to_string(&key.serialize_pem()).unwrap(),
    )
}

fn cert_secret(name: &str, dns: &str) -> prost_types::Any {
    let (cert, key) = self_signed(dns);
    any::<Secret>(&format!(
        "name: {name}\ntls_certificate: {{ certificate_chain: {{ inline_string: {cert} }}, private_key: {{ inline_string: {key} }} }}"
    ))
}

fn names(c: &mut XdsClient) -> Vec<Vec<String>> {
    let b = c.compose();
    let tls = b.listeners[0].filter_chains[0].tls.as_ref().expect("tls");
    tls.state().expect("ready").names.clone()
}

#[test]
fn a_listener_waits_for_its_secret_and_rotates_in_place() {
    let t0 = Instant::now();
    let mut c = XdsClient::new(&boot(BOOT), t0);
    c.on_stream_open();
    let out = c.on_response(
        response(
            ResourceType::Listener,
            "1",
            "n1",
            vec![tls_listener("web", "cert")],
        ),
        t0,
    );
    assert!(out.rejected.is_none(), "{:?}", out.rejected);
    let sds = out
        .requests
        .iter()
        .find(|r| r.type_url == ResourceType::Secret.type_url())
        .expect("subscribes to the secret");
    assert_eq!(sds.resource_names, ["cert"]);
    assert!(
        c.compose().listeners.is_empty(),
        "warming without its secret"
    );
    assert_eq!(c.warming().0, ["web"]);

    let out = c.on_response(
        response(
            ResourceType::Secret,
            "s1",
            "n2",
            vec![cert_secret("cert", "a.example")],
        ),
        t0,
    );
    assert!(out.rejected.is_none(), "{:?}", out.rejected);
    assert_eq!(names(&mut c), [vec!["a.example".to_string()]]);
    let before = Arc::clone(&c.compose().listeners[0]);

    // A new version: the same listener, a new certificate.
    c.on_response(
        response(
            ResourceType::Secret,
            "s2",
            "n3",
            vec![cert_secret("cert", "b.example")],
        ),
        t0,
    );
    assert_eq!(names(&mut c), [vec!["b.example".to_string()]]);
    assert!(
        Arc::ptr_eq(&before, &c.compose().listeners[0]),
        "rotation does not rebuild (or drain) the listener"
    );

    // A bad one is NACKed and the current certificate stays.
    let bad = any::<Secret>(
        "name: cert\ntls_certificate: { certificate_chain: { inline_string: x }, private_key: { inline_string: y } }",
    );
    let out = c.on_response(response(ResourceType::Secret, "s3", "n4", vec![bad]), t0);
    let e = out.rejected.expect("NACK");
    assert!(
        e.contains("secrets[cert].tls_certificate.certificate_chain"),
        "{e}"
    );
    assert_eq!(
        out.requests[0].error_detail.as_ref().unwrap().code,
        NACK_CODE
    );
    assert_eq!(c.status(ResourceType::Secret).version, "s2");
    assert_eq!(names(&mut c), [vec!["b.example".to_string()]]);

    // A secret nobody named is not kept; a listener gone unsubscribes.
    c.on_response(
        response(
            ResourceType::Secret,
            "s4",
            "n5",
            vec![cert_secret("other", "o.example")],
        ),
        t0,
    );
    assert!(!c.secrets().contains_key("other"));
    let out = c.on_response(response(ResourceType::Listener, "2", "n6", vec![]), t0);
    let sds = out
        .requests
        .iter()
        .find(|r| r.type_url == ResourceType::Secret.type_url())
        .expect("unsubscribes");
    assert!(sds.resource_names.is_empty());
    assert!(c.secrets().is_empty());
}

#[test]
fn a_listener_naming_a_held_secret_serves_at_once_and_a_wrong_kind_is_refused() {
    let t0 = Instant::now();
    let mut c = XdsClient::new(&boot(BOOT), t0);
    c.on_stream_open();
    c.on_response(
        response(
            ResourceType::Listener,
            "1",
            "n1",
            vec![tls_listener("a", "cert")],
        ),
        t0,
    );
    c.on_response(
        response(
            ResourceType::Secret,
            "s1",
            "n2",
            vec![cert_secret("cert", "a.example")],
        ),
        t0,
    );
    // A second listener naming the same secret is ready at once.
    let out = c.on_response(
        response(
            ResourceType::Listener,
            "2",
            "n3",
            vec![tls_listener("a", "cert"), tls_listener("b", "cert")],
        ),
        t0,
    );
    assert!(out.rejected.is_none());
    assert_eq!(c.compose().listeners.len(), 2);

    let ca = any::<Secret>("name: cert\nvalidation_context: { trusted_ca: { inline_string: x } }");
    let out = c.on_response(response(ResourceType::Secret, "s2", "n4", vec![ca]), t0);
    let e = out.rejected.expect("NACK");
    assert!(e.contains("a tls_certificate is needed here"), "{e}");
    let generic = any::<Secret>("name: cert\ngeneric_secret: {}");
    let e = c
        .on_response(
            response(ResourceType::Secret, "s3", "n5", vec![generic]),
            t0,
        )
        .rejected
        .expect("NACK");
    assert!(e.contains("generic_secret: not supported"), "{e}");
}

fn tls_cluster(name: &str, secret: &str) -> prost_types::Any {
    any::<crate::pb::envoy::config::cluster::v3::Cluster>(&format!(
        r#"
name: {name}
type: STATIC
connect_timeout: 1s
load_assignment:
  cluster_name: {name}
  endpoints: [{{ lb_endpoints: [{{ endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: 9443 }} }} }} }}] }}]
transport_socket:
  name: envoy.transport_sockets.tls
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
    common_tls_context:
      validation_context_sds_secret_config: {{ name: {secret}, sds_config: {{ ads: {{}} }} }}
"#
    ))
}

fn ca_secret(name: &str) -> prost_types::Any {
    let (ca, _) = self_signed("ca.example");
    any::<Secret>(&format!(
        "name: {name}\nvalidation_context: {{ trusted_ca: {{ inline_string: {ca} }} }}"
    ))
}

#[test]
fn a_cluster_waits_for_its_secret_keeps_its_context_across_pushes_and_rotates_in_place() {
    let t0 = Instant::now();
    let mut c = XdsClient::new(&boot(BOOT), t0);
    c.on_stream_open();
    let out = c.on_response(
        response(
            ResourceType::Cluster,
            "1",
            "n1",
            vec![tls_cluster("api", "ca")],
        ),
        t0,
    );
    assert!(out.rejected.is_none(), "{:?}", out.rejected);
    assert!(out
        .requests
        .iter()
        .any(|r| r.type_url == ResourceType::Secret.type_url() && r.resource_names == ["ca"]));
    let api = |c: &mut XdsClient| c.compose().clusters.into_iter().find(|c| c.name == "api");
    assert!(api(&mut c).is_none(), "warming without its secret");

    c.on_response(
        response(ResourceType::Secret, "s1", "n2", vec![ca_secret("ca")]),
        t0,
    );
    let served = api(&mut c).expect("served once its secret came");
    let tls = Arc::clone(served.upstream.tls.as_ref().unwrap());
    let first = tls.client_config().expect("built");

    // The same cluster pushed again keeps the very context (pools that
    // outlive the push hold it)...
    c.on_response(
        response(
            ResourceType::Cluster,
            "2",
            "n3",
            vec![tls_cluster("api", "ca")],
        ),
        t0,
    );
    let again = api(&mut c).unwrap();
    assert!(Arc::ptr_eq(again.upstream.tls.as_ref().unwrap(), &tls));
    // ...and a new secret rotates it in place.
    c.on_response(
        response(ResourceType::Secret, "s2", "n4", vec![ca_secret("ca")]),
        t0,
    );
    let rotated = tls.client_config().unwrap();
    assert!(
        !Arc::ptr_eq(&first, &rotated),
        "a new config for new connections"
    );
}
