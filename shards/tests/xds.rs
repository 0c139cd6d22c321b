//! The gateway against an in-process ADS server (`testsupport`), with real
//! h2 backends and traffic flowing: ACK/NACK, EDS and RDS updates under
//! load, cluster and listener add/remove, control plane restarts.

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prost::Message;
use support::*;
use testsupport::{type_url, AdsServer, RecordedRequest};
use xds::decode::from_json;
use xds::error::Path;
use xds::pb::envoy::config::cluster::v3::Cluster as PbCluster;
use xds::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use xds::pb::envoy::config::listener::v3::Listener as PbListener;
use xds::pb::envoy::config::route::v3::RouteConfiguration;

const WAIT: Duration = Duration::from_secs(10);

fn ads_bootstrap(ads: SocketAddr) -> engine::Bootstrap {
    let yaml = format!(
        r#"
node: {{ id: gw-test, cluster: edge }}
admin: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }} }}
dynamic_resources:
  ads_config:
    api_type: GRPC
    transport_api_version: V3
    grpc_services: [{{ envoy_grpc: {{ cluster_name: xds }} }}]
  lds_config: {{ ads: {{}} }}
  cds_config: {{ ads: {{}} }}
static_resources:
  clusters:
  - name: xds
    type: STATIC
    connect_timeout: 0.25s
    load_assignment:
      cluster_name: xds
      endpoints: [{{ lb_endpoints: [{{ endpoint: {{ address: {{ socket_address: {{ address: {ip}, port_value: {port} }} }} }} }}] }}]
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{ http2_protocol_options: {{}} }}
"#,
        ip = ads.ip(),
        port = ads.port()
    );
    xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml).expect("bootstrap")
}

fn pb<M: Message + Default + prost::Name>(yaml: &str) -> M {
    let value: serde_json::Value = serde_yaml::from_str(yaml).expect("yaml");
    from_json(value, &Path::root()).expect("valid resource")
}

fn res<M: Message + prost::Name>(name: &str, m: &M) -> (String, prost_types::Any) {
    (name.to_string(), testsupport::any(m))
}

fn eds_cluster(name: &str) -> (String, prost_types::Any) {
    res(name, &eds_cluster_pb(name))
}

fn eds_cluster_pb(name: &str) -> PbCluster {
    pb(&format!(
        r#"
name: {name}
type: EDS
eds_cluster_config: {{ eds_config: {{ ads: {{}} }} }}
connect_timeout: 0.5s
typed_extension_protocol_options:
  envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
    "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
    explicit_http_config: {{ http2_protocol_options: {{}} }}
"#
    ))
}

fn cla(name: &str, addrs: &[SocketAddr]) -> (String, prost_types::Any) {
    let eps: Vec<String> = addrs
        .iter()
        .map(|a| {
            format!(
                "{{ endpoint: {{ address: {{ socket_address: {{ address: {}, port_value: {} }} }} }} }}",
                a.ip(),
                a.port()
            )
        })
        .collect();
    let m: ClusterLoadAssignment = pb(&format!(
        "cluster_name: {name}\nendpoints: [{{ lb_endpoints: [{}] }}]",
        eps.join(", ")
    ));
    res(name, &m)
}

fn rds_listener(name: &str, routes: &str) -> (String, prost_types::Any) {
    let m: PbListener = pb(&format!(
        r#"
name: {name}
address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}
filter_chains:
- filters:
  - name: envoy.filters.network.http_connection_manager
    typed_config:
      "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
      stat_prefix: {name}
      rds: {{ route_config_name: {routes}, config_source: {{ ads: {{}} }} }}
      drain_timeout: 1s
      http_filters:
      - name: envoy.filters.http.router
        typed_config: {{ "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }}
"#
    ));
    res(name, &m)
}

/// A route table sending `/` to `cluster` (and `/other` to `other`).
fn routes(name: &str, cluster: &str) -> (String, prost_types::Any) {
    let m: RouteConfiguration = pb(&format!(
        r#"
name: {name}
virtual_hosts:
- name: all
  domains: ["*"]
  routes:
  - {{ match: {{ prefix: /other }}, route: {{ cluster: other }} }}
  - {{ match: {{ prefix: / }}, route: {{ cluster: {cluster} }} }}
"#
    ));
    res(name, &m)
}

/// Sets a type's resources and waits until the gateway ACKs that version.
fn push(
    server: &AdsServer,
    type_url: &str,
    version: &str,
    resources: Vec<(String, prost_types::Any)>,
) {
    server.set(type_url, version, resources);
    wait_ack(server, type_url, version);
}

fn wait_ack(server: &AdsServer, type_url: &str, version: &str) -> RecordedRequest {
    let (t, v) = (type_url.to_string(), version.to_string());
    server.wait_for(WAIT, move |r| {
        r.type_url == t
            && r.version_info == v
            && r.error_detail.is_none()
            && !r.response_nonce.is_empty()
    })
}

/// The usual world: cluster `echo` (EDS: `backends`), listener `ingress`
/// routing everything via RDS `routes` to `echo`.
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

fn listener_addr(admin: SocketAddr, name: &str) -> Option<SocketAddr> {
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

fn wait_listener(admin: SocketAddr, name: &str) -> SocketAddr {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(a) = listener_addr(admin, name) {
            return a;
        }
        assert!(Instant::now() < deadline, "listener {name} never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Requests from a client thread: (status, x-backend) of each.
fn get_n(addr: SocketAddr, path: &'static str, n: usize) -> Vec<(u16, String)> {
    client(move || async move {
        let c = connect(addr).await;
        let mut out = Vec::new();
        for _ in 0..n {
            match get(&c, path, &[]).await {
                Ok(r) => out.push((
                    r.status.as_u16(),
                    r.header("x-backend").unwrap_or("").to_string(),
                )),
                Err(e) => out.push((0, e.to_string())),
            }
        }
        out
    })
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

#[test]
fn rds_update_changes_routes() {
    let (a, b) = (backend("a"), backend("b"));
    let server = AdsServer::start();
    server.set(
        type_url::CLUSTER,
        "c1",
        vec![eds_cluster("echo"), eds_cluster("other")],
    );
    server.set(
        type_url::ENDPOINT,
        "e1",
        vec![cla("echo", &[a.addr()]), cla("other", &[b.addr()])],
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
    let server = AdsServer::start();
    server.set(
        type_url::CLUSTER,
        "c1",
        vec![eds_cluster("echo"), eds_cluster("other")],
    );
    server.set(
        type_url::ENDPOINT,
        "e1",
        vec![cla("echo", &[a.addr()]), cla("other", &[b.addr()])],
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
    bad.lb_policy = 5; // MAGLEV
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
    assert_eq!(message, "clusters[echo].lb_policy: MAGLEV is not supported");
    assert_eq!(
        Some(nack.response_nonce.clone()),
        server.last_nonce(type_url::CLUSTER)
    );

    let replies = get_n(addr, "/", 3);
    assert!(replies.iter().all(|(s, _)| *s == 200), "{replies:?}");
    let (_, dump) = admin_get(admin, "/config_dump");
    assert!(dump.contains("MAGLEV is not supported"), "{dump}");
    let (_, stats) = admin_get(admin, "/stats");
    assert!(
        stats.contains("gateway_xds_update_rejected_total{type=\"clusters\"} 1"),
        "{stats}"
    );

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
    let (_, stats) = admin_get(admin, "/stats");
    assert!(stats.contains("gateway_xds_connected 0"), "{stats}");

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

/// A scratch directory unique to this test process and name.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("gw-xds-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Replaces a file the way Envoy documents for file sources: write a new
/// file, then rename it over the old one.
fn replace_file(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn cds_file(version: &str, backend: SocketAddr) -> String {
    format!(
        r#"
version_info: "{version}"
resources:
- "@type": type.googleapis.com/envoy.config.cluster.v3.Cluster
  name: echo
  type: STATIC
  connect_timeout: 0.5s
  load_assignment:
    cluster_name: echo
    endpoints: [{{ lb_endpoints: [{{ endpoint: {{ address: {{ socket_address: {{ address: {}, port_value: {} }} }} }} }}] }}]
  typed_extension_protocol_options:
    envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
      "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
      explicit_http_config: {{ http2_protocol_options: {{}} }}
"#,
        backend.ip(),
        backend.port()
    )
}

const LDS_FILE: &str = r#"
version_info: "1"
resources:
- "@type": type.googleapis.com/envoy.config.listener.v3.Listener
  name: ingress
  address: { socket_address: { address: 127.0.0.1, port_value: 0 } }
  filter_chains:
  - filters:
    - name: envoy.filters.network.http_connection_manager
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
        stat_prefix: ingress
        route_config:
          name: local
          virtual_hosts: [{ name: all, domains: ["*"], routes: [{ match: { prefix: / }, route: { cluster: echo } }] }]
        http_filters:
        - name: envoy.filters.http.router
          typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
"#;

#[test]
fn file_sources_are_read_at_start_and_reread_on_change() {
    let (b1, b2) = (backend("b1"), backend("b2"));
    let dir = scratch("files");
    let (cds, lds) = (dir.join("cds.yaml"), dir.join("lds.yaml"));
    std::fs::write(&cds, cds_file("1", b1.addr())).unwrap();
    std::fs::write(&lds, LDS_FILE).unwrap();
    let yaml = format!(
        r#"
admin: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }} }}
dynamic_resources:
  cds_config: {{ path_config_source: {{ path: {} }} }}
  lds_config: {{ path_config_source: {{ path: {} }} }}
"#,
        cds.display(),
        lds.display()
    );
    let boot = xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml).unwrap();
    let gw = start(boot, 2);
    let admin = gw.admin_addr.unwrap();
    assert_eq!(admin_get(admin, "/ready").0, 200);
    let addr = gw
        .listener("ingress")
        .expect("listener from the LDS file at start");
    assert_eq!(get_n(addr, "/", 1), [(200, "b1".to_string())]);

    replace_file(&cds, &cds_file("2", b2.addr()));
    let deadline = Instant::now() + WAIT;
    while get_n(addr, "/", 1)[0].1 != "b2" {
        assert!(Instant::now() < deadline, "CDS file change not applied");
        std::thread::sleep(Duration::from_millis(50));
    }

    // A broken file is rejected and changes nothing.
    replace_file(&cds, "version_info: \"3\"\nresources: [{ \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: echo, lb_policy: MAGLEV }]\n");
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, dump) = admin_get(admin, "/config_dump");
        if dump.contains("clusters[echo].lb_policy: MAGLEV is not supported") {
            break;
        }
        assert!(Instant::now() < deadline, "rejection not reported: {dump}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(get_n(addr, "/", 1), [(200, "b2".to_string())]);
    gw.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_bad_file_source_fails_the_start_naming_the_field() {
    let dir = scratch("badfile");
    let cds = dir.join("cds.yaml");
    std::fs::write(&cds, "resources: [{ \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster, name: x, bogus: 1 }]\n").unwrap();
    let yaml = format!(
        "dynamic_resources: {{ cds_config: {{ path: {} }} }}\n",
        cds.display()
    );
    let boot = xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml).unwrap();
    let err = shards::start(
        boot,
        shards::Options {
            shards: Some(1),
            cpus: None,
        },
    )
    .err()
    .expect("start fails")
    .to_string();
    assert!(err.contains("resources[0].bogus"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
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
