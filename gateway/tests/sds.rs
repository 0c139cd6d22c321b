//! SDS end to end: a listener's certificate from an SDS file and over ADS
//! (State of the World and Delta) is served once it comes, rotates for new
//! handshakes while open connections go on, and a bad one changes nothing.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use support::control_plane::{listener_addr, push, wait_listener, WAIT};
use support::tls_client::*;
use support::*;
use testsupport::delta::DeltaServer;
use testsupport::resources::ads_bootstrap_yaml;
use testsupport::type_url::{LISTENER, SECRET};
use testsupport::AdsServer;

/// A listener answering 200 itself over TLS, its certificate from
/// `secret` at `sds_config` (YAML flow).
fn tls_listener_yaml(secret: &str, sds_config: &str) -> String {
    format!(
        r#"{{"@type": type.googleapis.com/envoy.config.listener.v3.Listener, name: web,
  address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}},
  filter_chains: [{{
    transport_socket: {{name: envoy.transport_sockets.tls, typed_config: {{
      "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext,
      common_tls_context: {{tls_certificate_sds_secret_configs: [{{name: {secret}, sds_config: {sds_config}}}]}}}}}},
    filters: [{{name: envoy.filters.network.http_connection_manager, typed_config: {{
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager,
      stat_prefix: web,
      route_config: {{virtual_hosts: [{{name: all, domains: ["*"], routes: [{{match: {{prefix: /}}, direct_response: {{status: 200}}}}]}}]}},
      http_filters: [{{name: envoy.filters.http.router, typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}}}]}}}}]}}]}}"#
    )
}

/// A `tls_certificate` secret named `name` holding `c` inline (YAML flow).
fn secret_yaml(name: &str, c: &Cert) -> String {
    format!(
        r#"{{"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret, name: {name}, tls_certificate: {{certificate_chain: {{inline_string: {}}}, private_key: {{inline_string: {}}}}}}}"#,
        serde_json::to_string(&c.pem.0).unwrap(),
        serde_json::to_string(&c.pem.1).unwrap()
    )
}

/// The resources of a YAML `DiscoveryResponse`, named as the server sends
/// them.
fn resources(list: &[String]) -> Vec<(String, prost_types::Any)> {
    let yaml = format!("resources: [{}]", list.join(", "));
    let resp = xds::file::discovery_response(&yaml, xds::bootstrap::Format::Yaml).expect("yaml");
    resp.resources
        .into_iter()
        .zip(list)
        .map(|(any, text)| {
            let name = text.split("name: ").nth(1).unwrap();
            let name = name.split([',', '}']).next().unwrap().trim().to_string();
            (name, any)
        })
        .collect()
}

/// Whether a new handshake with `addr` succeeds trusting only `c`.
fn serves(addr: SocketAddr, c: &Cert) -> bool {
    tls_handshake(addr, &client_config(&[c], &[]), "a.example").is_ok()
}

fn wait_serving(addr: SocketAddr, c: &Cert) {
    wait_until(WAIT, "the new certificate served", || serves(addr, c));
}

#[test]
fn a_certificate_over_ads_is_waited_for_and_rotates_without_dropping_connections() {
    let server = AdsServer::start();
    server.set(
        LISTENER,
        "l1",
        resources(&[tls_listener_yaml("cert", "{ads: {}}")]),
    );
    let bootstrap = xds::bootstrap::from_str(
        &ads_bootstrap_yaml(server.addr()),
        xds::bootstrap::Format::Yaml,
    )
    .expect("bootstrap");
    let gw = start(bootstrap, 2);
    let admin = gw.admin_addr.unwrap();
    support::control_plane::wait_ack(&server, LISTENER, "l1");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        listener_addr(admin, "web"),
        None,
        "the listener warms until its secret comes"
    );

    let (a, b) = (cert(&["a.example"]), cert(&["a.example"]));
    push(&server, SECRET, "s1", resources(&[secret_yaml("cert", &a)]));
    let addr = wait_listener(admin, "web");
    let mut kept = tls_connect(addr, &client_config(&[&a], &[]), "a.example");
    assert_eq!(tls_get(&mut kept).0, 200);

    push(&server, SECRET, "s2", resources(&[secret_yaml("cert", &b)]));
    wait_serving(addr, &b);
    assert!(!serves(addr, &a), "new handshakes get the new certificate");
    assert_eq!(tls_get(&mut kept).0, 200, "the open connection goes on");
    assert_eq!(listener_addr(admin, "web"), Some(addr), "not drained");

    // A bad secret is NACKed; the current certificate stays.
    let mut bad = b.pem.clone();
    bad.0 = "not a certificate".into();
    let broken = Cert {
        der: b.der.clone(),
        key: b.key.clone(),
        pem: bad,
    };
    server.set(SECRET, "s3", resources(&[secret_yaml("cert", &broken)]));
    server.wait_for(WAIT, |r| r.type_url == SECRET && r.error_detail.is_some());
    assert!(serves(addr, &b));
    gw.shutdown();
}

#[test]
fn a_certificate_over_delta_ads_is_served_and_rotated() {
    let server = DeltaServer::start();
    server.set(
        LISTENER,
        "l1",
        resources(&[tls_listener_yaml("cert", "{ads: {}}")]),
    );
    let (a, b) = (cert(&["a.example"]), cert(&["a.example"]));
    server.set(SECRET, "s1", resources(&[secret_yaml("cert", &a)]));
    let yaml = ads_bootstrap_yaml(server.addr()).replace("api_type: GRPC", "api_type: DELTA_GRPC");
    let bootstrap =
        xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml).expect("bootstrap");
    let gw = start(bootstrap, 1);
    let addr = wait_listener(gw.admin_addr.unwrap(), "web");
    let mut kept = tls_connect(addr, &client_config(&[&a], &[]), "a.example");
    assert_eq!(tls_get(&mut kept).0, 200);
    server.set(SECRET, "s2", resources(&[secret_yaml("cert", &b)]));
    wait_serving(addr, &b);
    assert_eq!(tls_get(&mut kept).0, 200, "the open connection goes on");
    gw.shutdown();
}

/// Writes an SDS file at `dir/sds.yaml` whose secret `cert` reads
/// `dir`'s certificate files, then those files, each by an atomic rename.
fn install_sds(dir: &Path, c: &Cert) {
    let sds = format!(
        "resources:\n- \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret\n  name: cert\n  tls_certificate:\n    certificate_chain: {{ filename: {} }}\n    private_key: {{ filename: {} }}\n",
        dir.join("cert.pem").display(),
        dir.join("key.pem").display()
    );
    for (name, text) in [
        ("cert.pem", &c.pem.0),
        ("key.pem", &c.pem.1),
        ("sds.yaml", &sds),
    ] {
        let tmp = dir.join(format!("{name}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, dir.join(name)).unwrap();
    }
}

#[test]
fn a_certificate_from_an_sds_file_rotates_when_its_files_change() {
    let dir = std::env::temp_dir().join(format!("gw-sds-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (cert(&["a.example"]), cert(&["a.example"]));
    install_sds(&dir, &a);
    let listener = tls_listener_yaml(
        "cert",
        &format!(
            "{{path_config_source: {{path: {}, watched_directory: {{path: {}}}}}}}",
            dir.join("sds.yaml").display(),
            dir.display()
        ),
    );
    let yaml = format!(
        "admin: {{address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}}}\nstatic_resources:\n  listeners: [{}]\n",
        listener.replacen(
            "\"@type\": type.googleapis.com/envoy.config.listener.v3.Listener, ",
            "",
            1
        )
    );
    let bootstrap = xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml).expect("valid");
    let gw = start(bootstrap, 1);
    let addr = gw.listener("web").expect("listener");
    let admin = gw.admin_addr.unwrap();
    let mut kept = tls_connect(addr, &client_config(&[&a], &[]), "a.example");
    assert_eq!(tls_get(&mut kept).0, 200);

    // The certificate files change (the secret file stays): read again.
    for (name, text) in [("cert.pem", &b.pem.0), ("key.pem", &b.pem.1)] {
        let tmp = dir.join(format!("{name}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, dir.join(name)).unwrap();
    }
    wait_serving(addr, &b);
    assert_eq!(tls_get(&mut kept).0, 200, "the open connection goes on");
    assert!(metric(admin, "gateway_tls_certificate_reloads_total") >= 1.0);

    // The secret file itself changes, back to `a`.
    install_sds(&dir, &a);
    wait_serving(addr, &a);
    gw.shutdown();
    std::fs::remove_dir_all(&dir).ok();
}

/// A cluster `tlsb` to `backend` over TLS whose trusted CA is SDS secret
/// `ca` over ADS; upstream connections idle out after a second.
fn tls_cluster_yaml(backend: SocketAddr) -> String {
    format!(
        r#"{{"@type": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: tlsb, type: STATIC, connect_timeout: 1s,
  load_assignment: {{cluster_name: tlsb, endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {}}}}}}}}}]}}]}},
  typed_extension_protocol_options: {{envoy.extensions.upstreams.http.v3.HttpProtocolOptions: {{
    "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions,
    common_http_protocol_options: {{idle_timeout: 1s}}, explicit_http_config: {{http_protocol_options: {{}}}}}}}},
  transport_socket: {{name: envoy.transport_sockets.tls, typed_config: {{
    "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext,
    common_tls_context: {{validation_context_sds_secret_config: {{name: ca, sds_config: {{ads: {{}}}}}}}}}}}}}}"#,
        backend.port()
    )
}

/// A cleartext listener `plain` routing everything to cluster `tlsb`.
fn plain_listener_yaml() -> String {
    r#"{"@type": type.googleapis.com/envoy.config.listener.v3.Listener, name: plain,
  address: {socket_address: {address: 127.0.0.1, port_value: 0}},
  filter_chains: [{filters: [{name: envoy.filters.network.http_connection_manager, typed_config: {
    "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager,
    stat_prefix: plain,
    route_config: {virtual_hosts: [{name: all, domains: ["*"], routes: [{match: {prefix: /}, route: {cluster: tlsb}}]}]},
    http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]}}]}]}"#
        .to_string()
}

fn ca_secret_yaml(c: &Cert) -> String {
    format!(
        r#"{{"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret, name: ca, validation_context: {{trusted_ca: {{inline_string: {}}}}}}}"#,
        serde_json::to_string(&c.pem.0).unwrap()
    )
}

fn status(addr: SocketAddr) -> u16 {
    client(move || async move {
        let c = connect(addr).await;
        get(&c, "/", &[]).await.map_or(0, |r| r.status.as_u16())
    })
}

#[test]
fn an_upstream_validation_context_over_ads_is_waited_for_and_rotates_for_new_connections() {
    use support::h1_backend::{H1Answer, H1Backend};
    let (good, other) = (cert(&["backend.example"]), cert(&["other.example"]));
    let backend = H1Backend::start_with(Some(server_config(&good, &["http/1.1"])), |_| {
        H1Answer::ok("tls backend")
    });
    let server = AdsServer::start();
    server.set(
        testsupport::type_url::CLUSTER,
        "c1",
        resources(&[tls_cluster_yaml(backend.addr())]),
    );
    server.set(LISTENER, "l1", resources(&[plain_listener_yaml()]));
    let bootstrap = xds::bootstrap::from_str(
        &ads_bootstrap_yaml(server.addr()),
        xds::bootstrap::Format::Yaml,
    )
    .expect("bootstrap");
    let gw = start(bootstrap, 1);
    let admin = gw.admin_addr.unwrap();
    support::control_plane::wait_ack(&server, LISTENER, "l1");
    assert_eq!(
        listener_addr(admin, "plain"),
        None,
        "its cluster warms until the CA comes, and the listener with it"
    );

    push(&server, SECRET, "s1", resources(&[ca_secret_yaml(&good)]));
    let addr = wait_listener(admin, "plain");
    assert_eq!(status(addr), 200, "the backend's certificate is trusted");

    // A CA that does not sign the backend's certificate: the pooled
    // connection goes on; a new one (after the idle timeout) is refused.
    push(&server, SECRET, "s2", resources(&[ca_secret_yaml(&other)]));
    assert_eq!(status(addr), 200, "the open upstream connection goes on");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(status(addr), 503, "a new connection checks with the new CA");

    push(&server, SECRET, "s3", resources(&[ca_secret_yaml(&good)]));
    wait_until(WAIT, "trusted again", || status(addr) == 200);
    gw.shutdown();
}
