//! The example configs in `deploy/examples/` stay valid.

use std::path::PathBuf;
use std::time::Instant;

use xds::client::{ResourceType, XdsClient};

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/examples")
        .join(name)
}

#[test]
fn ads_example_is_valid() {
    let b = xds::bootstrap::load_file(example("ads.yaml")).unwrap();
    let d = b.dynamic.as_ref().unwrap();
    assert_eq!(d.ads.as_ref().unwrap().cluster, "xds_cluster");
    assert!(matches!(d.lds, Some(engine::ConfigSource::Ads { .. })));
}

#[test]
fn file_source_example_is_valid_and_serves_a_listener() {
    let b = xds::bootstrap::load_file(example("files/bootstrap.yaml")).unwrap();
    let now = Instant::now();
    let mut client = XdsClient::new(&b, now);
    for (kind, file) in [
        (ResourceType::Cluster, "files/cds.yaml"),
        (ResourceType::Listener, "files/lds.yaml"),
    ] {
        let resp = xds::file::load_discovery_response(&example(file)).unwrap();
        let out = client.on_file(kind, &resp, now);
        assert!(out.rejected.is_none(), "{file}: {:?}", out.rejected);
    }
    let composed = client.compose();
    assert_eq!(composed.listeners.len(), 1);
    assert_eq!(composed.clusters[0].name, "echo");
}

#[test]
fn tunnels_example_is_valid() {
    let b = xds::bootstrap::load_file(example("tunnels.yaml")).unwrap();
    let web = &b.listeners[0].filter_chains[0];
    let ws = &web.http.route_config.virtual_hosts[0].routes[0];
    assert_eq!(
        ws.action.forward().unwrap().upgrades[0].upgrade_type,
        "websocket"
    );
    let passthrough = &b.listeners[1];
    assert!(passthrough.listener_filters.tls_inspector);
    assert!(passthrough
        .filter_chains
        .iter()
        .all(|c| c.tcp_proxy.is_some() && c.tls.is_none()));
}
