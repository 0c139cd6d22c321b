//! Arbitrary bytes decoded as a Listener, Cluster, RouteConfiguration or ClusterLoadAssignment (first byte picks) and run through xds's validators: no panic, only Ok or an Err that names a field path.
#![no_main]

use std::collections::HashSet;

use libfuzzer_sys::fuzz_target;
use prost::Message;
use xds::pb::envoy::config::cluster::v3::Cluster;
use xds::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use xds::pb::envoy::config::listener::v3::Listener;
use xds::pb::envoy::config::route::v3::RouteConfiguration;
use xds::{validate, Error, Path};

fuzz_target!(|data: &[u8]| {
    let Some((&kind, bytes)) = data.split_first() else {
        return;
    };
    // Routes naming these pass the inline-table cluster check; others not.
    let known: HashSet<String> = ["backend", "echo", "xds_cluster"]
        .into_iter()
        .map(String::from)
        .collect();
    let path = Path::root().field("resource");
    let result = match kind % 4 {
        0 => Listener::decode(bytes)
            .ok()
            .map(|l| validate::listener(&l, &path, &known).map(drop)),
        1 => Cluster::decode(bytes)
            .ok()
            .map(|c| validate::cluster(&c, &path).map(drop)),
        2 => RouteConfiguration::decode(bytes).ok().map(|rc| {
            // Inline (validate_clusters defaults to true) or over RDS.
            let inline = kind & 4 != 0;
            validate::route_config(&rc, &path, &known, inline).map(drop)
        }),
        _ => ClusterLoadAssignment::decode(bytes)
            .ok()
            .map(|la| validate::cluster_load_assignment(&la, &path).map(drop)),
    };
    if let Some(Err(e)) = result {
        clear(&e);
    }
});

/// A rejection says where and what: `PATH: message`, the path under the
/// resource we validated.
fn clear(e: &Error) {
    let text = e.to_string();
    assert!(
        text.starts_with("resource"),
        "error without the resource's path: {text:?} ({e:?})"
    );
    let (_, message) = text.split_once(": ").expect("PATH: message");
    assert!(!message.trim().is_empty(), "empty message: {text:?}");
}
