//! Delta xDS protocol tests: wildcard and named subscriptions, ACK/NACK by nonce, removals (known and unknown), a rejected delta changing nothing, versions resent on a new stream.

use std::time::Instant;

use super::tests::{boot, cla, eds_cluster, BOOT};
use super::*;
use crate::pb::envoy::service::discovery::v3::{DeltaDiscoveryResponse, Resource};

fn delta_boot() -> engine::Bootstrap {
    boot(&BOOT.replace("api_type: GRPC", "api_type: DELTA_GRPC"))
}

fn delta(
    kind: ResourceType,
    nonce: &str,
    added: Vec<(&str, &str, prost_types::Any)>,
    removed: &[&str],
) -> DeltaDiscoveryResponse {
    DeltaDiscoveryResponse {
        system_version_info: format!("sys-{nonce}"),
        type_url: kind.type_url().to_owned(),
        nonce: nonce.to_owned(),
        resources: added
            .into_iter()
            .map(|(name, version, any)| Resource {
                name: name.to_owned(),
                version: version.to_owned(),
                resource: Some(any),
                ..Resource::default()
            })
            .collect(),
        removed_resources: removed.iter().map(|s| s.to_string()).collect(),
        ..DeltaDiscoveryResponse::default()
    }
}

#[test]
fn a_delta_stream_subscribes_wildcards_then_names_and_acks_by_nonce() {
    let t0 = Instant::now();
    let mut c = XdsClient::new(&delta_boot(), t0);
    assert!(c.is_delta());
    let open = c.on_delta_stream_open();
    let types: Vec<&str> = open.iter().map(|r| r.type_url.as_str()).collect();
    assert!(types.contains(&ResourceType::Cluster.type_url()));
    assert!(types.contains(&ResourceType::Listener.type_url()));
    // Wildcards: no names; the node on the first message only if asked.
    assert!(open.iter().all(|r| r.resource_names_subscribe.is_empty()));
    assert!(open[0].node.is_some());
    let out = c.on_delta_response(
        delta(
            ResourceType::Cluster,
            "n1",
            vec![("echo", "1", eds_cluster("echo"))],
            &[],
        ),
        t0,
    );
    assert!(out.rejected.is_none());
    assert_eq!(out.requests[0].response_nonce, "n1");
    assert!(out.requests[0].error_detail.is_none());
    // The EDS cluster's name is subscribed, named.
    let eds: Vec<_> = out
        .requests
        .iter()
        .filter(|r| r.type_url == ResourceType::Endpoint.type_url())
        .collect();
    assert_eq!(eds.len(), 1);
    assert_eq!(eds[0].resource_names_subscribe, ["echo"]);
    assert!(eds[0].response_nonce.is_empty());
    let out = c.on_delta_response(
        delta(
            ResourceType::Endpoint,
            "n2",
            vec![("echo", "e1", cla("echo", &[8080]))],
            &[],
        ),
        t0,
    );
    assert!(out.changed && out.rejected.is_none());
    assert_eq!(c.endpoints()["echo"].endpoints.len(), 1);
    // A second cluster arrives as a delta: the first stays.
    let out = c.on_delta_response(
        delta(
            ResourceType::Cluster,
            "n3",
            vec![("other", "1", eds_cluster("other"))],
            &[],
        ),
        t0,
    );
    assert!(out.rejected.is_none());
    assert_eq!(c.clusters().len(), 2);
    let eds: Vec<_> = out
        .requests
        .iter()
        .filter(|r| r.type_url == ResourceType::Endpoint.type_url())
        .collect();
    assert_eq!(eds[0].resource_names_subscribe, ["other"]);
    assert!(eds[0].resource_names_unsubscribe.is_empty());
    // Removing a cluster unsubscribes its endpoints.
    let out = c.on_delta_response(delta(ResourceType::Cluster, "n4", vec![], &["other"]), t0);
    assert_eq!(c.clusters().len(), 1);
    let eds: Vec<_> = out
        .requests
        .iter()
        .filter(|r| r.type_url == ResourceType::Endpoint.type_url())
        .collect();
    assert_eq!(eds[0].resource_names_unsubscribe, ["other"]);
}

#[test]
fn unknown_removals_are_ignored_and_a_bad_delta_changes_nothing() {
    let t0 = Instant::now();
    let mut c = XdsClient::new(&delta_boot(), t0);
    c.on_delta_stream_open();
    c.on_delta_response(
        delta(
            ResourceType::Cluster,
            "n1",
            vec![("echo", "1", eds_cluster("echo"))],
            &[],
        ),
        t0,
    );
    // Names never sent: ignored, counted, ACKed.
    let out = c.on_delta_response(
        delta(ResourceType::Cluster, "n2", vec![], &["ghost", "phantom"]),
        t0,
    );
    assert!(out.rejected.is_none());
    assert_eq!(c.status(ResourceType::Cluster).unknown_removals, 2);
    assert_eq!(c.clusters().len(), 1);
    // A delta with a bad resource: NACKed with its nonce, nothing changes,
    // and the next delta applies to the last accepted set.
    let bad = prost_types::Any {
        type_url: ResourceType::Cluster.type_url().to_owned(),
        value: vec![0xFF, 0xFF],
    };
    let out = c.on_delta_response(
        delta(
            ResourceType::Cluster,
            "n3",
            vec![("broken", "1", bad)],
            &["echo"],
        ),
        t0,
    );
    assert!(out.rejected.is_some());
    assert_eq!(out.requests[0].response_nonce, "n3");
    assert!(out.requests[0].error_detail.is_some());
    assert!(
        c.clusters().contains_key("echo"),
        "the removal was not applied"
    );
    let out = c.on_delta_response(
        delta(
            ResourceType::Cluster,
            "n4",
            vec![("two", "1", eds_cluster("two"))],
            &[],
        ),
        t0,
    );
    assert!(out.rejected.is_none());
    let names: Vec<&String> = c.clusters().keys().collect();
    assert_eq!(names, ["echo", "two"]);
    // A resource without a body rejects the response.
    let mut empty = delta(ResourceType::Cluster, "n5", vec![], &[]);
    empty.resources.push(Resource {
        name: "x".into(),
        ..Resource::default()
    });
    let out = c.on_delta_response(empty, t0);
    assert!(out
        .rejected
        .as_deref()
        .is_some_and(|e| e.contains("no body")));
    // A new stream tells the server what is held.
    let open = c.on_delta_stream_open();
    let cds = open
        .iter()
        .find(|r| r.type_url == ResourceType::Cluster.type_url())
        .expect("cds");
    assert_eq!(cds.initial_resource_versions.len(), 2);
    assert_eq!(cds.initial_resource_versions["two"], "1");
}
