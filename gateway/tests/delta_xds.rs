//! The gateway's Delta xDS client (`api_type: DELTA_GRPC`) against the
//! in-process Delta ADS server (`testsupport::delta`), with real backends:
//! wildcard and named subscriptions, updates, removals (known and unknown),
//! NACKs, reconnection with `initial_resource_versions`, and a flood.

mod support;

use std::net::SocketAddr;
use std::time::Instant;

use support::control_plane::{wait_listener, WAIT};
use support::*;
use testsupport::delta::{DeltaRequest, DeltaServer};
use testsupport::resources::*;
use testsupport::type_url::{CLUSTER, ENDPOINT, LISTENER, ROUTE};

/// A bootstrap whose LDS/CDS come over Delta ADS from `ads`.
fn delta_bootstrap(ads: SocketAddr) -> engine::Bootstrap {
    let yaml = ads_bootstrap_yaml(ads).replace("api_type: GRPC", "api_type: DELTA_GRPC");
    assert!(yaml.contains("DELTA_GRPC"));
    xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml).expect("bootstrap")
}

/// Cluster `echo` (EDS over `backends`) behind listener `ingress` (RDS
/// `routes`), each type at version `<letter>1`.
fn serve_echo(server: &DeltaServer, backends: &[SocketAddr]) {
    server.set(CLUSTER, "c1", vec![eds_cluster("echo")]);
    server.set(ENDPOINT, "e1", vec![cla("echo", backends)]);
    server.set(LISTENER, "l1", vec![rds_listener("ingress", "routes")]);
    server.set(ROUTE, "r1", vec![routes("routes", "echo")]);
}

/// Waits until the last response of `type_url` (on any stream) is ACKed;
/// returns its nonce.
fn wait_acked(server: &DeltaServer, type_url: &str) -> String {
    let mut nonce = String::new();
    wait_until(WAIT, &format!("ACK of the last {type_url}"), || {
        nonce = server.last_nonce(type_url).unwrap_or_default();
        !nonce.is_empty() && server.requests().iter().any(|r| r.is_ack_of(&nonce))
    });
    nonce
}

fn wait_all_acked(server: &DeltaServer) {
    for t in [CLUSTER, ENDPOINT, LISTENER, ROUTE] {
        wait_acked(server, t);
    }
}

/// The gateway on a Delta server serving `serve_echo(backends)`; returns
/// once every type is ACKed and the listener serves.
fn world(backends: &[SocketAddr]) -> (DeltaServer, gateway::GatewayHandle, SocketAddr) {
    let server = DeltaServer::start();
    serve_echo(&server, backends);
    let gw = start(delta_bootstrap(server.addr()), 2);
    wait_all_acked(&server);
    let addr = wait_listener(gw.admin_addr.unwrap(), "ingress");
    (server, gw, addr)
}

/// `/config_dump`'s xds entry for `kind` (`clusters`, `endpoints`, …).
fn xds_type(gw: &gateway::GatewayHandle, kind: &str) -> serde_json::Value {
    let (_, body) = admin_get(gw.admin_addr.unwrap(), "/config_dump");
    let dump: serde_json::Value = serde_json::from_str(&body).expect("config_dump is JSON");
    let types = dump["xds"]["resources"].as_array().expect("xds.resources");
    let found = types.iter().find(|t| t["type"] == kind);
    found
        .cloned()
        .unwrap_or_else(|| panic!("no {kind} in {body}"))
}

/// Requests of `type_url` on `stream`, in order.
fn requests_of(server: &DeltaServer, stream: u64, type_url: &str) -> Vec<DeltaRequest> {
    let all = server.requests().into_iter();
    all.filter(|r| r.stream == stream && r.type_url == type_url)
        .collect()
}

fn all_from(replies: &[(u16, String)], backend: &str) -> bool {
    replies.iter().all(|(s, b)| *s == 200 && b == backend)
}

/// (a) LDS and CDS are wildcard subscriptions, RDS and EDS named ones;
/// every first response is ACKed by nonce and traffic flows.
#[test]
fn wildcard_and_named_subscriptions_serve_traffic() {
    let b1 = backend("b1");
    let (server, gw, addr) = world(&[b1.addr()]);
    let stream1 = |t| requests_of(&server, 1, t);
    for t in [CLUSTER, LISTENER] {
        let first = &stream1(t)[0];
        assert!(first.resource_names_subscribe.is_empty(), "{first:?}");
        assert!(first.initial_resource_versions.is_empty(), "{first:?}");
        assert!(first.response_nonce.is_empty(), "{first:?}");
    }
    assert_eq!(
        server.requests()[0].node_id.as_deref(),
        Some("gw-test"),
        "the node rides on the stream's first message"
    );
    assert_eq!(stream1(ENDPOINT)[0].resource_names_subscribe, ["echo"]);
    assert_eq!(stream1(ROUTE)[0].resource_names_subscribe, ["routes"]);
    let replies = get_n(addr, "/", 4);
    assert!(all_from(&replies, "b1"), "{replies:?}");
    assert_eq!(
        xds_type(&gw, "endpoints")["subscribed"],
        serde_json::json!(["echo"])
    );
    assert_eq!(xds_type(&gw, "listeners")["version_info"], "l1");
    assert_eq!(admin_get(gw.admin_addr.unwrap(), "/ready").0, 200);
    assert!(server.requests().iter().all(|r| r.error_detail.is_none()));
    gw.shutdown();
}

/// (b) A changed ClusterLoadAssignment arrives alone (nothing else is
/// resent) and the gateway routes to the new endpoint.
#[test]
fn an_eds_delta_moves_traffic() {
    let (b1, b2) = (backend("b1"), backend("b2"));
    let (server, gw, addr) = world(&[b1.addr()]);
    let before = server.responses().len();
    server.set(ENDPOINT, "e2", vec![cla("echo", &[b2.addr()])]);
    wait_acked(&server, ENDPOINT);
    let sent = server.responses().split_off(before);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].resources, [("echo".into(), "e2".into())]);
    wait_until(WAIT, "b2 serves", || all_from(&get_n(addr, "/", 2), "b2"));
    assert_eq!(xds_type(&gw, "endpoints")["version_info"], "e2");
    gw.shutdown();
}

/// Clusters `echo` (at `a`) and `other` (at `b`) behind listener
/// `ingress`, whose routes send `/other` to `other` and the rest to `echo`.
fn serve_echo_and_other(server: &DeltaServer, a: SocketAddr, b: SocketAddr) {
    let clusters = vec![eds_cluster("echo"), eds_cluster("other")];
    server.set(CLUSTER, "c1", clusters);
    server.set(ENDPOINT, "e1", vec![cla("echo", &[a]), cla("other", &[b])]);
    server.set(LISTENER, "l1", vec![rds_listener("ingress", "routes")]);
    server.set(ROUTE, "r1", vec![routes("routes", "echo")]);
}

/// (c) Removing cluster `other` by delta makes its route 503 and
/// unsubscribes its EDS name (re-adding it subscribes again); after the
/// route table's removal the listener keeps serving its last one (as in
/// Envoy, which ignores RDS removals); removing the listener closes it.
#[test]
fn removals_drop_clusters_eds_subscriptions_and_listeners() {
    let (a, b) = (backend("a"), backend("b"));
    let server = DeltaServer::start();
    serve_echo_and_other(&server, a.addr(), b.addr());
    let gw = start(delta_bootstrap(server.addr()), 1);
    wait_all_acked(&server);
    let addr = wait_listener(gw.admin_addr.unwrap(), "ingress");
    assert_eq!(get_n(addr, "/other", 1), [(200, "b".to_string())]);

    server.set(CLUSTER, "c2", vec![eds_cluster("echo")]);
    let removal = server.responses().last().cloned().unwrap();
    assert_eq!(removal.removed_resources, ["other"], "{removal:?}");
    assert!(
        removal.resources.is_empty(),
        "echo is unchanged: {removal:?}"
    );
    wait_acked(&server, CLUSTER);
    let unsub = server.wait_for(WAIT, |r| {
        r.type_url == ENDPOINT && !r.resource_names_unsubscribe.is_empty()
    });
    assert_eq!(unsub.resource_names_unsubscribe, ["other"]);
    assert!(unsub.resource_names_subscribe.is_empty());
    assert_eq!(get_n(addr, "/other", 1)[0].0, 503);
    assert_eq!(get_n(addr, "/", 1), [(200, "a".to_string())]);
    let json = |v: &[&str]| serde_json::json!(v);
    assert_eq!(xds_type(&gw, "endpoints")["subscribed"], json(&["echo"]));
    assert_eq!(xds_type(&gw, "clusters")["names"], json(&["echo"]));

    // Back again: subscribed (and sent) again.
    server.set(
        CLUSTER,
        "c3",
        vec![eds_cluster("echo"), eds_cluster("other")],
    );
    let resub = server.wait_for(WAIT, |r| r.resource_names_subscribe == ["other"]);
    assert!(resub.stream == unsub.stream && resub.response_nonce.is_empty());
    wait_until(WAIT, "other serves again", || {
        get_n(addr, "/other", 1) == [(200, "b".to_string())]
    });

    // A route table's removal is ignored while a listener names it, as
    // Envoy ignores it: the table stays in use.
    server.remove(ROUTE, &["routes"]);
    wait_acked(&server, ROUTE);
    assert_eq!(xds_type(&gw, "routes")["names"], json(&["routes"]));
    assert_eq!(
        get_n(addr, "/", 2),
        [(200, "a".to_string()), (200, "a".to_string())]
    );

    server.remove(LISTENER, &["ingress"]);
    wait_acked(&server, LISTENER);
    wait_until(WAIT, "listener closed", || {
        std::net::TcpStream::connect(addr).is_err()
    });
    assert_eq!(xds_type(&gw, "listeners")["names"], json(&[]));
    gw.shutdown();
}

/// (d) Removals of names the gateway never held are ACKed, counted, and
/// change nothing.
#[test]
fn removing_unknown_names_is_acked_and_changes_nothing() {
    let b1 = backend("b1");
    let (server, gw, addr) = world(&[b1.addr()]);
    server.remove(CLUSTER, &["ghost", "phantom"]);
    server.remove(ENDPOINT, &["ghost"]);
    let sent = server.responses();
    assert_eq!(sent[sent.len() - 2].removed_resources, ["ghost", "phantom"]);
    wait_acked(&server, CLUSTER);
    wait_acked(&server, ENDPOINT);
    assert!(server.requests().iter().all(|r| r.error_detail.is_none()));
    let clusters = xds_type(&gw, "clusters");
    assert_eq!(clusters["names"], serde_json::json!(["echo"]));
    assert_eq!(clusters["unknown_removals"], 2, "{clusters}");
    assert_eq!(xds_type(&gw, "endpoints")["unknown_removals"], 1);
    let stats = stats(&gw);
    let line = "gateway_xds_unknown_removals_total{type=\"clusters\"} 2";
    assert!(stats.contains(line), "{stats}");
    let replies = get_n(addr, "/", 4);
    assert!(all_from(&replies, "b1"), "{replies:?}");
    gw.shutdown();
}

/// (e) A delta with an invalid cluster is NACKed (same nonce, error
/// detail) and changes nothing; the next good delta applies.
#[test]
fn a_bad_delta_is_nacked_and_a_later_good_one_applies() {
    let (b1, b2) = (backend("b1"), backend("b2"));
    let (server, gw, addr) = world(&[b1.addr()]);
    let mut bad = eds_cluster_pb("echo");
    bad.lb_policy = 6; // CLUSTER_PROVIDED
    let bad_new = eds_cluster_pb("new");
    let bad_set = vec![
        ("echo".to_string(), testsupport::any(&bad)),
        ("new".to_string(), testsupport::any(&bad_new)),
    ];
    server.set(CLUSTER, "c2", bad_set);
    let nonce = server.last_nonce(CLUSTER).unwrap();
    let nack = server.wait_for(WAIT, |r| r.is_nack_of(&nonce));
    let (code, message) = nack.error_detail.clone().unwrap();
    assert_eq!(code, 3);
    assert!(message.contains("CLUSTER_PROVIDED"), "{message}");
    let clusters = xds_type(&gw, "clusters");
    assert_eq!(clusters["version_info"], "c1", "{clusters}");
    assert_eq!(clusters["names"], serde_json::json!(["echo"]), "{clusters}");
    assert_eq!(clusters["error_state"]["version_info"], "c2");
    assert!(!xds_type(&gw, "endpoints")["subscribed"]
        .to_string()
        .contains("new"));
    assert!(all_from(&get_n(addr, "/", 3), "b1"));

    // A good delta afterwards. The server, like go-control-plane, takes
    // what it sent as held even when NACKed, so both resources change to
    // be resent: echo fixed, `new` with another connect timeout. Both
    // apply, and EDS subscribes to `new`.
    let good = eds_cluster_with("new", "connect_timeout: 0.75s");
    server.set(CLUSTER, "c3", vec![eds_cluster("echo"), good]);
    wait_acked(&server, CLUSTER);
    server.wait_for(WAIT, |r| r.resource_names_subscribe == ["new"]);
    let clusters = xds_type(&gw, "clusters");
    assert_eq!(clusters["version_info"], "c3");
    assert_eq!(clusters["names"], serde_json::json!(["echo", "new"]));
    assert!(clusters["error_state"].is_null(), "{clusters}");
    server.set(ENDPOINT, "e2", vec![cla("echo", &[b2.addr()])]);
    wait_acked(&server, ENDPOINT);
    wait_until(WAIT, "b2 serves", || all_from(&get_n(addr, "/", 2), "b2"));
    gw.shutdown();
}

/// (f) After a control plane restart the new stream carries
/// `initial_resource_versions` for everything held. The restarted server
/// lost cluster `other` and moved `echo`'s endpoint: it sends just that
/// (the removals, the new endpoints), nothing held at the same version,
/// and the gateway follows.
#[test]
fn reconnect_sends_initial_resource_versions() {
    let (a, b, a2) = (backend("a"), backend("b"), backend("a2"));
    let server = DeltaServer::start();
    serve_echo_and_other(&server, a.addr(), b.addr());
    let gw = start(delta_bootstrap(server.addr()), 1);
    wait_all_acked(&server);
    let addr = wait_listener(gw.admin_addr.unwrap(), "ingress");
    let ads_addr = server.addr();
    server.stop();
    assert_eq!(get_n(addr, "/other", 1), [(200, "b".to_string())]);

    let server = DeltaServer::start_on(ads_addr).expect("restart on the same port");
    server.set(CLUSTER, "c1", vec![eds_cluster("echo")]);
    server.set(ENDPOINT, "e2", vec![cla("echo", &[a2.addr()])]);
    server.set(LISTENER, "l1", vec![rds_listener("ingress", "routes")]);
    server.set(ROUTE, "r1", vec![routes("routes", "echo")]);
    let held = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    };
    for (t, versions) in [
        (CLUSTER, held(&[("echo", "c1"), ("other", "c1")])),
        (ENDPOINT, held(&[("echo", "e1"), ("other", "e1")])),
        (LISTENER, held(&[("ingress", "l1")])),
        (ROUTE, held(&[("routes", "r1")])),
    ] {
        let r = server.wait_for(WAIT, |r| r.type_url == t);
        assert_eq!(r.initial_resource_versions, versions, "{r:?}");
        assert!(r.response_nonce.is_empty(), "{r:?}");
    }
    assert_eq!(server.requests()[0].node_id.as_deref(), Some("gw-test"));
    server.wait_for(WAIT, |r| r.resource_names_unsubscribe == ["other"]);
    wait_until(WAIT, "a2 serves", || all_from(&get_n(addr, "/", 2), "a2"));
    assert_eq!(get_n(addr, "/other", 1)[0].0, 503);
    wait_acked(&server, ENDPOINT);
    for r in server.responses() {
        let (added, removed) = (&r.resources, &r.removed_resources);
        match r.type_url.as_str() {
            CLUSTER => assert!(added.is_empty() && removed == &["other"], "{r:?}"),
            ENDPOINT => {
                assert_eq!(added, &[("echo".into(), "e2".into())], "{r:?}");
                assert_eq!(removed, &["other"], "{r:?}");
            }
            // The wildcard's first response, empty; no RouteConfiguration.
            _ => assert!(r.type_url == LISTENER && added.is_empty(), "{r:?}"),
        }
    }
    assert!(stats(&gw).contains("gateway_xds_connected 1"));
    gw.shutdown();
}

/// (g) 200 CDS and 200 EDS deltas in one burst: the gateway ACKs every
/// one, in order, within the bounded wait, ends on the last versions,
/// keeps serving, and still applies the next real change.
#[test]
fn a_flood_of_deltas_ends_on_the_last_version() {
    let (b1, b2) = (backend("b1"), backend("b2"));
    let (server, gw, addr) = world(&[b1.addr()]);
    let before = server.responses().len();
    let started = Instant::now();
    let last_c = server.flood(CLUSTER, 200);
    let last_e = server.flood(ENDPOINT, 200);
    assert_eq!((last_c.as_str(), last_e.as_str()), ("c1.f200", "e1.f200"));
    wait_acked(&server, CLUSTER);
    wait_acked(&server, ENDPOINT);
    let took = started.elapsed();
    eprintln!("400 deltas sent and ACKed in {took:?}");
    let flood: Vec<String> = server.responses()[before..]
        .iter()
        .map(|r| r.nonce.clone())
        .collect();
    assert_eq!(flood.len(), 400);
    let acked: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|r| r.error_detail.is_none() && flood.contains(&r.response_nonce))
        .map(|r| r.response_nonce)
        .collect();
    assert_eq!(acked, flood, "every delta ACKed once, in order");
    assert!(server.requests().iter().all(|r| r.error_detail.is_none()));
    assert_eq!(xds_type(&gw, "clusters")["version_info"], last_c.as_str());
    assert_eq!(xds_type(&gw, "endpoints")["version_info"], last_e.as_str());
    assert!(all_from(&get_n(addr, "/", 4), "b1"));
    server.set(ENDPOINT, "e2", vec![cla("echo", &[b2.addr()])]);
    wait_acked(&server, ENDPOINT);
    wait_until(WAIT, "b2 serves", || all_from(&get_n(addr, "/", 2), "b2"));
    let stats = stats(&gw);
    let restarts = "gateway_xds_stream_restarts_total 0";
    assert!(stats.contains(restarts), "{stats}");
    gw.shutdown();
}

/// A delta removing route table `routes` (or the endpoints of `echo`)
/// while a listener (cluster) still names it: as in Envoy, which ignores
/// RDS and EDS removals, the last table / assignment stays in use, so later
/// versions of listeners and clusters using them apply (a first version
/// of this client dropped them, and every later update warmed for ever).
#[test]
fn rds_and_eds_removals_do_not_strand_later_updates() {
    let b1 = backend("b1");
    let (server, gw, addr) = world(&[b1.addr()]);
    let admin = gw.admin_addr.unwrap();
    server.remove(ROUTE, &["routes"]);
    server.remove(ENDPOINT, &["echo"]);
    let second = rds_listener("second", "routes");
    server.set(
        LISTENER,
        "l2",
        vec![rds_listener("ingress", "routes"), second],
    );
    let slower = eds_cluster_with("echo", "connect_timeout: 0.75s");
    server.set(CLUSTER, "c2", vec![slower]);
    wait_all_acked(&server);
    assert!(
        all_from(&get_n(addr, "/", 2), "b1"),
        "the old versions serve"
    );
    let warming = || {
        let (_, body) = admin_get(admin, "/config_dump");
        let dump: serde_json::Value = serde_json::from_str(&body).unwrap();
        dump["xds"]["warming"].clone()
    };
    let nothing = serde_json::json!({ "clusters": [], "listeners": [] });
    let what = format!("updates applied (warming: {})", warming());
    wait_until(WAIT, &what, || warming() == nothing);
    let second = support::control_plane::listener_addr(admin, "second");
    assert!(all_from(&get_n(second.unwrap(), "/", 2), "b1"));
    gw.shutdown();
}
