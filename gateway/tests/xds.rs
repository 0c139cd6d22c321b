//! The gateway against an in-process ADS server (`testsupport`), with real
//! h2 backends and traffic flowing: ACK/NACK, EDS and RDS updates under
//! load, cluster and listener add/remove, control plane restarts.

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::control_plane::*;
use support::*;
use testsupport::resources::*;
use testsupport::{type_url, AdsServer};

fn res<M: prost::Message + prost::Name>(name: &str, m: &M) -> (String, prost_types::Any) {
    (name.to_string(), testsupport::any(m))
}

fn serve_echo(server: &AdsServer, backends: &[SocketAddr]) {
    server.set(type_url::CLUSTER, "c1", vec![eds_cluster("echo")]);
    server.set(type_url::ENDPOINT, "e1", vec![cla("echo", backends)]);
    server.set(
        type_url::LISTENER,
        "l1",
        vec![rds_listener("ingress", "routes")],
    );
    server.set(type_url::ROUTE, "r1", vec![routes("routes", "echo")]);
}

/// Requests in a loop from 4 concurrent streams until stopped; counts
/// replies by (status, backend) and failures.
struct Traffic {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<BTreeMap<String, u64>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Traffic {
    fn start(addr: SocketAddr) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(BTreeMap::new()));
        let (s, m) = (Arc::clone(&stop), Arc::clone(&seen));
        let thread = std::thread::spawn(move || {
            client(move || async move {
                let c = connect(addr).await;
                let mut workers = Vec::new();
                for _ in 0..4 {
                    let (c, s, m) = (c.clone(), Arc::clone(&s), Arc::clone(&m));
                    workers.push(glommio::spawn_local(async move {
                        while !s.load(Ordering::Relaxed) {
                            let key = match get(&c, "/", &[]).await {
                                Ok(r) if r.status == 200 => {
                                    r.header("x-backend").unwrap_or("?").to_string()
                                }
                                Ok(r) => format!("status {}", r.status),
                                Err(e) => format!("error {e}"),
                            };
                            *m.lock().unwrap().entry(key).or_default() += 1;
                        }
                    }));
                }
                for w in workers {
                    w.await;
                }
            })
        });
        Self {
            stop,
            seen,
            thread: Some(thread),
        }
    }

    fn snapshot(&self) -> BTreeMap<String, u64> {
        self.seen.lock().unwrap().clone()
    }

    /// Waits until `backend` answered at least `n` more times.
    fn wait_served_by(&self, backend: &str, n: u64) {
        let start = self.snapshot().get(backend).copied().unwrap_or(0);
        let deadline = Instant::now() + WAIT;
        while self.snapshot().get(backend).copied().unwrap_or(0) < start + n {
            assert!(
                Instant::now() < deadline,
                "{backend} never served; seen {:?}",
                self.snapshot()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn stop(mut self) -> BTreeMap<String, u64> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        self.snapshot()
    }
}

/// A per-host counter from `/clusters` (summed over shards).
fn host_stat(admin: SocketAddr, cluster: &str, host: SocketAddr, stat: &str) -> u64 {
    let (_, text) = admin_get(admin, "/clusters");
    let prefix = format!("{cluster}::{host}::{stat}::");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {prefix} in {text}"))
}

fn failures(seen: &BTreeMap<String, u64>) -> Vec<(&String, &u64)> {
    seen.iter()
        .filter(|(k, _)| k.starts_with("status") || k.starts_with("error"))
        .collect()
}

#[test]
fn initial_config_is_acked_and_served() {
    let b = backend("b1");
    let server = AdsServer::start();
    serve_echo(&server, &[b.addr()]);
    let gw = start(ads_bootstrap(server.addr()), 2);
    let admin = gw.admin_addr.unwrap();
    for (t, v) in [
        (type_url::CLUSTER, "c1"),
        (type_url::ENDPOINT, "e1"),
        (type_url::LISTENER, "l1"),
        (type_url::ROUTE, "r1"),
    ] {
        wait_ack(&server, t, v);
    }
    let first = &server.requests()[0];
    assert_eq!(first.type_url, type_url::CLUSTER, "CDS is requested first");
    assert!(first.has_node);
    assert_eq!(first.node_id, "gw-test");
    let eds = server.wait_for(WAIT, |r| r.type_url == type_url::ENDPOINT);
    assert_eq!(eds.resource_names, ["echo"]);

    let addr = wait_listener(admin, "ingress");
    let replies = get_n(addr, "/", 4);
    assert!(
        replies.iter().all(|(s, b)| *s == 200 && b == "b1"),
        "{replies:?}"
    );
    assert_eq!(admin_get(admin, "/ready").0, 200);
    gw.shutdown();
}

#[test]
fn eds_add_and_remove_under_load_fail_no_request() {
    let (b1, b2, b3) = (backend("b1"), backend("b2"), backend("b3"));
    let server = AdsServer::start();
    serve_echo(&server, &[b1.addr()]);
    let gw = start(ads_bootstrap(server.addr()), 2);
    wait_ack(&server, type_url::ROUTE, "r1");
    let addr = wait_listener(gw.admin_addr.unwrap(), "ingress");

    let traffic = Traffic::start(addr);
    traffic.wait_served_by("b1", 50);
    let admin = gw.admin_addr.unwrap();
    let b1_seen = |t: &Traffic| t.snapshot().get("b1").copied().unwrap_or(0);
    let (b1_total, b1_before) = (
        host_stat(admin, "echo", b1.addr(), "rq_total"),
        b1_seen(&traffic),
    );
    push(
        &server,
        type_url::ENDPOINT,
        "e2",
        vec![cla("echo", &[b1.addr(), b2.addr()])],
    );
    traffic.wait_served_by("b2", 50);
    // b1 survived the update: same HostId, so its counters carried over
    // (had they restarted, the total would miss the requests before it).
    let served_since = b1_seen(&traffic) - b1_before;
    let total = host_stat(admin, "echo", b1.addr(), "rq_total");
    assert!(
        total + 8 >= b1_total + served_since,
        "rq_total {total} < {b1_total} + {served_since}"
    );
    push(
        &server,
        type_url::ENDPOINT,
        "e3",
        vec![cla("echo", &[b2.addr(), b3.addr()])],
    );
    traffic.wait_served_by("b3", 50);
    push(
        &server,
        type_url::ENDPOINT,
        "e4",
        vec![cla("echo", &[b1.addr()])],
    );
    // Streams that started before the update may still finish on b2/b3
    // (each stream keeps its snapshot); after those, only b1 serves.
    traffic.wait_served_by("b1", 20);
    let before = traffic.snapshot();
    traffic.wait_served_by("b1", 100);
    let seen = traffic.stop();
    assert!(failures(&seen).is_empty(), "failed requests: {seen:?}");
    assert_eq!(seen.get("b2"), before.get("b2"), "{seen:?}");
    assert_eq!(seen.get("b3"), before.get("b3"), "{seen:?}");
    gw.shutdown();
}

/// Clusters `echo` (at `a`) and `other` (at `b`) behind listener `ingress`,
/// whose routes send `/other` to `other` and the rest to `echo`; returns
/// once the gateway serves it.
fn echo_and_other(a: SocketAddr, b: SocketAddr) -> (AdsServer, gateway::GatewayHandle, SocketAddr) {
    let server = AdsServer::start();
    server.set(
        type_url::CLUSTER,
        "c1",
        vec![eds_cluster("echo"), eds_cluster("other")],
    );
    server.set(
        type_url::ENDPOINT,
        "e1",
        vec![cla("echo", &[a]), cla("other", &[b])],
    );
    server.set(
        type_url::LISTENER,
        "l1",
        vec![rds_listener("ingress", "routes")],
    );
    server.set(type_url::ROUTE, "r1", vec![routes("routes", "echo")]);
    let gw = start(ads_bootstrap(server.addr()), 1);
    wait_ack(&server, type_url::ROUTE, "r1");
    let addr = wait_listener(gw.admin_addr.unwrap(), "ingress");
    (server, gw, addr)
}

#[test]
fn rds_update_changes_routes() {
    let (a, b) = (backend("a"), backend("b"));
    let (server, gw, addr) = echo_and_other(a.addr(), b.addr());
    assert_eq!(get_n(addr, "/", 1), [(200, "a".to_string())]);
    assert_eq!(get_n(addr, "/other", 1), [(200, "b".to_string())]);
    push(
        &server,
        type_url::ROUTE,
        "r2",
        vec![routes("routes", "other")],
    );
    assert_eq!(get_n(addr, "/", 1), [(200, "b".to_string())]);
    gw.shutdown();
}

#[test]
fn cluster_removal_gives_503_and_unsubscribes_its_endpoints() {
    let (a, b) = (backend("a"), backend("b"));
    let (server, gw, addr) = echo_and_other(a.addr(), b.addr());
    assert_eq!(get_n(addr, "/other", 1)[0].0, 200);
    push(&server, type_url::CLUSTER, "c2", vec![eds_cluster("echo")]);
    server.wait_for(WAIT, |r| {
        r.type_url == type_url::ENDPOINT && r.resource_names == ["echo"]
    });
    assert_eq!(get_n(addr, "/other", 1)[0].0, 503);
    assert_eq!(get_n(addr, "/", 1), [(200, "a".to_string())]);
    gw.shutdown();
}

#[test]
fn invalid_cluster_is_nacked_and_the_previous_one_keeps_serving() {
    let b1 = backend("b1");
    let server = AdsServer::start();
    serve_echo(&server, &[b1.addr()]);
    let gw = start(ads_bootstrap(server.addr()), 2);
    wait_ack(&server, type_url::ROUTE, "r1");
    let admin = gw.admin_addr.unwrap();
    let addr = wait_listener(admin, "ingress");

    let mut bad = eds_cluster_pb("echo");
    bad.lb_policy = 6; // CLUSTER_PROVIDED
    server.set(type_url::CLUSTER, "c2", vec![res("echo", &bad)]);
    let nack = server.wait_for(WAIT, |r| {
        r.type_url == type_url::CLUSTER && r.error_detail.is_some()
    });
    assert_eq!(
        nack.version_info, "c1",
        "NACK names the version still in use"
    );
    let (code, message) = nack.error_detail.clone().unwrap();
    assert_eq!(code, 3);
    assert_eq!(
        message,
        "clusters[echo].lb_policy: CLUSTER_PROVIDED is not supported"
    );
    assert_eq!(
        Some(nack.response_nonce.clone()),
        server.last_nonce(type_url::CLUSTER)
    );

    let replies = get_n(addr, "/", 3);
    assert!(replies.iter().all(|(s, _)| *s == 200), "{replies:?}");
    let (_, dump) = admin_get(admin, "/config_dump");
    assert!(dump.contains("CLUSTER_PROVIDED is not supported"), "{dump}");
    let dump: serde_json::Value = serde_json::from_str(&dump).unwrap();
    let active = &dump["dynamic_active"]["clusters"][0];
    assert_eq!(active["version_info"], "c1", "{dump}");
    assert_eq!(active["resource"]["name"], "echo", "{dump}");
    assert_eq!(dump["static_resources"]["clusters"][0]["name"], "xds");
    let (_, stats) = admin_get(admin, "/stats");
    assert!(
        stats.contains("gateway_xds_update_rejected_total{type=\"clusters\"} 1"),
        "{stats}"
    );
    // Under Envoy's names: what an alert on rejected updates reads.
    assert_eq!(
        envoy_metric(admin, "envoy_cluster_manager_cds_update_rejected{}"),
        1.0
    );
    assert!(envoy_metric(admin, "envoy_cluster_manager_cds_update_success{}") >= 1.0);
    assert_eq!(
        envoy_metric(admin, "envoy_control_plane_connected_state{}"),
        1.0
    );
    assert!(envoy_metric(admin, "envoy_listener_manager_lds_update_success{}") >= 1.0);

    // A valid version afterwards is accepted.
    push(&server, type_url::CLUSTER, "c3", vec![eds_cluster("echo")]);
    gw.shutdown();
}

#[test]
fn control_plane_restart_resumes_without_failed_requests() {
    let b1 = backend("b1");
    let server = AdsServer::start();
    let ads_addr = server.addr();
    serve_echo(&server, &[b1.addr()]);
    let gw = start(ads_bootstrap(ads_addr), 2);
    wait_ack(&server, type_url::ROUTE, "r1");
    let admin = gw.admin_addr.unwrap();
    let addr = wait_listener(admin, "ingress");

    let traffic = Traffic::start(addr);
    traffic.wait_served_by("b1", 50);
    server.stop();
    // The outage: keep serving the last good config.
    std::thread::sleep(Duration::from_millis(300));
    traffic.wait_served_by("b1", 50);

    let server = AdsServer::start_on(ads_addr).expect("restart on the same port");
    serve_echo(&server, &[b1.addr()]);
    // The new stream re-requests every type with the versions held.
    let cds = server.wait_for(WAIT, |r| r.type_url == type_url::CLUSTER);
    assert_eq!(cds.version_info, "c1");
    assert!(cds.response_nonce.is_empty());
    let eds = server.wait_for(WAIT, |r| r.type_url == type_url::ENDPOINT);
    assert_eq!(
        (eds.version_info.as_str(), eds.resource_names.clone()),
        ("e1", vec!["echo".to_string()])
    );
    wait_ack(&server, type_url::ROUTE, "r1");
    traffic.wait_served_by("b1", 50);
    let seen = traffic.stop();
    assert!(failures(&seen).is_empty(), "failed requests: {seen:?}");
    let (_, stats) = admin_get(admin, "/stats");
    assert!(stats.contains("gateway_xds_connected 1"), "{stats}");
    gw.shutdown();
}

#[test]
fn listeners_are_added_and_removed() {
    let b1 = backend("b1");
    let server = AdsServer::start();
    serve_echo(&server, &[b1.addr()]);
    let gw = start(ads_bootstrap(server.addr()), 2);
    wait_ack(&server, type_url::ROUTE, "r1");
    let admin = gw.admin_addr.unwrap();
    wait_listener(admin, "ingress");

    push(
        &server,
        type_url::LISTENER,
        "l2",
        vec![
            rds_listener("ingress", "routes"),
            rds_listener("second", "routes"),
        ],
    );
    let second = wait_listener(admin, "second");
    assert_eq!(get_n(second, "/", 1), [(200, "b1".to_string())]);

    push(
        &server,
        type_url::LISTENER,
        "l3",
        vec![rds_listener("ingress", "routes")],
    );
    assert!(listener_addr(admin, "second").is_none());
    // Give the shards' accept loops a moment to close after the drain signal.
    let deadline = Instant::now() + WAIT;
    while std::net::TcpStream::connect(second).is_ok() {
        assert!(Instant::now() < deadline, "removed listener still accepts");
        std::thread::sleep(Duration::from_millis(20));
    }
    gw.shutdown();
}

#[test]
fn not_ready_until_the_first_fetch_and_serving_through_an_absent_control_plane() {
    // Nothing listens on the ADS address: the gateway starts, serves its
    // static resources, reports not ready, and keeps retrying.
    let unused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let ads_addr = unused.local_addr().unwrap();
    drop(unused);
    let gw = start(ads_bootstrap(ads_addr), 1);
    let admin = gw.admin_addr.unwrap();
    assert_eq!(admin_get(admin, "/ready").0, 503);
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, stats) = admin_get(admin, "/stats");
        assert!(stats.contains("gateway_xds_connected 0"), "{stats}");
        assert!(
            stats.contains("gateway_xds_stream_restarts_total 0"),
            "{stats}"
        );
        if !stats.contains("gateway_xds_connect_failures_total 0") {
            break; // failed attempts are counted, not taken for restarts
        }
        assert!(Instant::now() < deadline, "{stats}");
        std::thread::sleep(Duration::from_millis(20));
    }

    // The control plane comes up late: the gateway connects on its own.
    let b1 = backend("b1");
    let server = AdsServer::start_on(ads_addr).expect("bind the ADS port");
    serve_echo(&server, &[b1.addr()]);
    wait_ack(&server, type_url::ROUTE, "r1");
    let addr = wait_listener(admin, "ingress");
    assert_eq!(get_n(addr, "/", 1), [(200, "b1".to_string())]);
    assert_eq!(admin_get(admin, "/ready").0, 200);
    gw.shutdown();
}

/// With no control plane, the wait for the first resources ends at the
/// sources' `initial_fetch_timeout`, as Envoy's init manager does, and not
/// before. (The control shard has no periodic tick any more; here the ADS
/// client's reconnect attempts wake it too, so this checks the outcome,
/// not which wake-up delivered it.)
#[test]
fn ready_once_the_initial_fetch_timeout_passes_without_a_control_plane() {
    let unused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let ads_addr = unused.local_addr().unwrap();
    drop(unused);
    let yaml = testsupport::resources::ads_bootstrap_yaml(ads_addr)
        .replace(
            "lds_config: { ads: {} }",
            "lds_config: { ads: {}, initial_fetch_timeout: 0.4s }",
        )
        .replace(
            "cds_config: { ads: {} }",
            "cds_config: { ads: {}, initial_fetch_timeout: 0.4s }",
        );
    let boot = xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml).expect("bootstrap");
    let started = Instant::now();
    let gw = start(boot, 1);
    let admin = gw.admin_addr.unwrap();
    assert_eq!(admin_get(admin, "/ready").0, 503);
    while admin_get(admin, "/ready").0 != 200 {
        assert!(started.elapsed() < WAIT, "never ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(started.elapsed() >= Duration::from_millis(400));
    gw.shutdown();
}

#[test]
fn reload_keeps_xds_resources_and_refuses_to_change_dynamic_resources() {
    let b1 = backend("b1");
    let server = AdsServer::start();
    serve_echo(&server, &[b1.addr()]);
    let boot = ads_bootstrap(server.addr());
    let gw = start(boot.clone(), 1);
    wait_ack(&server, type_url::ROUTE, "r1");
    let admin = gw.admin_addr.unwrap();
    let addr = wait_listener(admin, "ingress");

    // Same dynamic_resources: the reload applies and xDS resources stay.
    gw.reload(boot.clone()).expect("reload");
    assert_eq!(get_n(addr, "/", 1), [(200, "b1".to_string())]);

    let mut changed = boot;
    changed.dynamic.as_mut().unwrap().lds = None;
    let err = gw.reload(changed).unwrap_err();
    assert!(err.contains("dynamic_resources cannot change"), "{err}");
    assert_eq!(get_n(addr, "/", 1), [(200, "b1".to_string())]);
    gw.shutdown();
}

/// ADS over TLS: the control plane is reached through the `xds` cluster's
/// `UpstreamTlsContext` (its CA verifies the server). A first gateway
/// terminates TLS in front of the (cleartext) ADS server with a
/// `tcp_proxy` chain.
#[test]
fn ads_over_tls_verifies_the_control_plane() {
    let b = backend("b1");
    let server = AdsServer::start();
    serve_echo(&server, &[b.addr()]);
    let dir = std::env::temp_dir().join(format!("gw-ads-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let c = support::tls_client::cert(&["xds.internal"]);
    let (cert, key) = (dir.join("xds.pem"), dir.join("xds.key"));
    std::fs::write(&cert, &c.pem.0).unwrap();
    std::fs::write(&key, &c.pem.1).unwrap();
    let front = format!(
        r#"static_resources:
  listeners:
  - name: xds_tls
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}
    filter_chains:
    - filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config: {{ "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: x, cluster: ads }}
{}  clusters:
  - name: ads
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: ads
      endpoints: [{{ lb_endpoints: [{{ endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {} }} }} }} }}] }}]
"#,
        yaml::tls_socket(&cert, &key),
        server.addr().port()
    );
    let front = start(
        xds::bootstrap::from_str(&front, xds::bootstrap::Format::Yaml).expect("front"),
        1,
    );
    let tls_addr = front.listener("xds_tls").expect("tls listener");
    let upstream_tls = |ca: &std::path::Path| {
        format!(
            "    transport_socket:\n      name: envoy.transport_sockets.tls\n      typed_config:\n        \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext\n        sni: xds.internal\n        common_tls_context: {{ validation_context: {{ trusted_ca: {{ filename: {} }}, match_typed_subject_alt_names: [ {{ san_type: DNS, matcher: {{ exact: xds.internal }} }} ] }} }}\n",
            ca.display()
        )
    };
    let with_tls = |ca: &std::path::Path| {
        let yaml = ads_bootstrap_yaml(tls_addr);
        let at = "    typed_extension_protocol_options:";
        let yaml = yaml.replacen(at, &format!("{}{at}", upstream_tls(ca)), 1);
        xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml).expect("bootstrap")
    };
    let gw = start(with_tls(&cert), 1);
    let admin = gw.admin_addr.unwrap();
    wait_ack(&server, type_url::LISTENER, "l1");
    let addr = wait_listener(admin, "ingress");
    assert!(get_n(addr, "/", 2)
        .iter()
        .all(|(s, b)| *s == 200 && b == "b1"));
    gw.shutdown();

    // A CA that did not sign the server's certificate: no stream, nothing
    // served (the gateway keeps trying).
    let other = support::tls_client::cert(&["xds.internal"]);
    let other_ca = dir.join("other.pem");
    std::fs::write(&other_ca, &other.pem.0).unwrap();
    let before = server.streams();
    let gw = start(with_tls(&other_ca), 1);
    std::thread::sleep(Duration::from_millis(500));
    let admin = gw.admin_addr.unwrap();
    assert_eq!(
        server.streams(),
        before,
        "no stream past a certificate that does not verify"
    );
    let (_, page) = admin_get(admin, "/config_dump");
    assert!(
        !page.contains("\"ingress\""),
        "nothing from an unverified server"
    );
    gw.shutdown();
    front.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
