//! The gateway fed by the in-process ADS server (`testsupport`): bootstrap,
//! pushes that wait for the ACK, and the listener's bound address.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use testsupport::resources::ads_bootstrap_yaml;
use testsupport::{AdsServer, RecordedRequest};

use super::admin_get;

pub const WAIT: Duration = Duration::from_secs(10);

/// A bootstrap whose listeners and clusters come from the ADS server at `ads`.
pub fn ads_bootstrap(ads: SocketAddr) -> engine::Bootstrap {
    xds::bootstrap::from_str(&ads_bootstrap_yaml(ads), xds::bootstrap::Format::Yaml)
        .expect("bootstrap")
}

/// Sets a type's resources and waits until the gateway ACKs that version
/// (an ACK means every shard serves it).
pub fn push(
    server: &AdsServer,
    type_url: &str,
    version: &str,
    resources: Vec<(String, prost_types::Any)>,
) {
    server.set(type_url, version, resources);
    wait_ack(server, type_url, version);
}

/// Waits for the ACK of `version` of `type_url`.
pub fn wait_ack(server: &AdsServer, type_url: &str, version: &str) -> RecordedRequest {
    let (t, v) = (type_url.to_string(), version.to_string());
    server.wait_for(WAIT, move |r| {
        r.type_url == t
            && r.version_info == v
            && r.error_detail.is_none()
            && !r.response_nonce.is_empty()
    })
}

/// The bound address of listener `name` if the gateway serves it now.
pub fn listener_addr(admin: SocketAddr, name: &str) -> Option<SocketAddr> {
    let (_, body) = admin_get(admin, "/listeners");
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["listeners"]
        .as_array()?
        .iter()
        .find(|l| l["name"] == name)?["address"]
        .as_str()?
        .parse()
        .ok()
}

/// The bound address of listener `name`, once the gateway serves it.
pub fn wait_listener(admin: SocketAddr, name: &str) -> SocketAddr {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(a) = listener_addr(admin, name) {
            return a;
        }
        assert!(Instant::now() < deadline, "listener {name} never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Serves cluster `echo` (EDS, with `cluster_extra` YAML fields) over
/// `backends` behind listener `ingress` (RDS `routes`, with `filters` before
/// the router), all from a new ADS server, on `shards` shards. Returns once
/// every first version is ACKed and the listener serves.
pub fn ads_world(
    backends: &[SocketAddr],
    cluster_extra: &str,
    filters: &[String],
    shards: usize,
) -> (AdsServer, gateway::GatewayHandle, SocketAddr) {
    use testsupport::resources::*;
    use testsupport::type_url;
    let server = AdsServer::start();
    server.set(
        type_url::CLUSTER,
        "c1",
        vec![eds_cluster_with("echo", cluster_extra)],
    );
    server.set(type_url::ENDPOINT, "e1", vec![cla("echo", backends)]);
    server.set(
        type_url::LISTENER,
        "l1",
        vec![rds_listener_with_filters("ingress", "routes", filters)],
    );
    server.set(type_url::ROUTE, "r1", vec![routes("routes", "echo")]);
    let gw = super::start(ads_bootstrap(server.addr()), shards);
    for (t, v) in [
        (type_url::CLUSTER, "c1"),
        (type_url::ENDPOINT, "e1"),
        (type_url::LISTENER, "l1"),
        (type_url::ROUTE, "r1"),
    ] {
        wait_ack(&server, t, v);
    }
    let addr = wait_listener(gw.admin_addr.unwrap(), "ingress");
    (server, gw, addr)
}
