//! Filter chains on one listener: `tls_inspector` and `filter_chain_match` pick a chain by SNI and transport (each its own certificate and routes), a connection no chain takes is closed unanswered, `default_filter_chain` takes the rest, and an update that changes one chain drains that chain's connections only.

mod support;

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use support::tls_client::*;
use support::{yaml, *};

/// A TLS chain for `names` (certificate files in `dir`, named by `tag`)
/// routing to cluster `cluster`, as Envoy YAML at a chain's indentation.
fn tls_chain(dir: &Path, tag: &str, names: &[&str], cluster: &str) -> String {
    format!(
        "    - name: {tag}\n      filter_chain_match: {{ server_names: {names:?} }}\n{}{}",
        tls_socket(dir, tag, names),
        yaml::hcm(cluster)
    )
}

/// A chain's `transport_socket` with a new certificate for `names`,
/// written to `dir` as `tag`.pem/.key/.der.
fn tls_socket(dir: &Path, tag: &str, names: &[&str]) -> String {
    let c = cert(names);
    let (cert_path, key_path) = (
        dir.join(format!("{tag}.pem")),
        dir.join(format!("{tag}.key")),
    );
    std::fs::write(&cert_path, &c.pem.0).unwrap();
    std::fs::write(&key_path, &c.pem.1).unwrap();
    std::fs::write(dir.join(format!("{tag}.der")), c.der.as_ref()).unwrap();
    yaml::tls_socket(&cert_path, &key_path)
}

/// A bootstrap: listener `ingress` on port 0 (or `port`) with
/// `tls_inspector` and `chains` (YAML), clusters named after the backends.
fn bootstrap_yaml(chains: &str, extra: &str, port: u16, backends: &[(&str, SocketAddr)]) -> String {
    let clusters: String = backends
        .iter()
        .map(|(name, addr)| yaml::h2_cluster(name, *addr))
        .collect();
    format!(
        r#"admin: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }} }}
static_resources:
  listeners:
  - name: ingress
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: {port} }} }}
    listener_filters:
    - name: envoy.filters.listener.tls_inspector
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector
    filter_chains:
{chains}{extra}  clusters:
{clusters}"#
    )
}

fn load(yaml: &str) -> engine::Bootstrap {
    xds::bootstrap::from_str(yaml, xds::bootstrap::Format::Yaml)
        .unwrap_or_else(|e| panic!("bootstrap refused: {e}\n{yaml}"))
}

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("gw-chains-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The certificate written for `tag`, for the client to trust.
fn trusted(dir: &Path, tag: &str) -> Cert {
    Cert {
        der: std::fs::read(dir.join(format!("{tag}.der")))
            .unwrap()
            .into(),
        key: Vec::new(),
        pem: (String::new(), String::new()),
    }
}

fn plain_get(addr: SocketAddr) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    http1_get(&mut s)
}

fn body(r: &(u16, Vec<u8>)) -> String {
    assert_eq!(r.0, 200);
    String::from_utf8_lossy(&r.1).trim().to_string()
}

/// Whether the server closes `addr`'s TLS connection for `sni` without a
/// handshake (no chain): the client sees the connection end.
fn refused(addr: SocketAddr, trust: &Cert, sni: &str) -> bool {
    tls_handshake(addr, &client_config(&[trust], &["http/1.1"]), sni).is_err()
}

#[test]
fn sni_and_transport_choose_the_chain_and_no_match_is_closed_unanswered() {
    let (a, b, p) = (backend("A"), backend("B"), backend("P"));
    let dir = tmp("select");
    let chains = format!(
        "{}{}    - name: plain\n      filter_chain_match: {{ transport_protocol: raw_buffer }}\n{}",
        tls_chain(&dir, "a", &["a.example"], "ca"),
        tls_chain(&dir, "b", &["*.b.example"], "cb"),
        yaml::hcm("cp"),
    );
    let yaml = bootstrap_yaml(
        &chains,
        "",
        0,
        &[("ca", a.addr()), ("cb", b.addr()), ("cp", p.addr())],
    );
    let gw = start(load(&yaml), 1);
    let addr = gw.listener("ingress").expect("listener");
    let (ta, tb) = (trusted(&dir, "a"), trusted(&dir, "b"));
    let cfg_a = client_config(&[&ta], &["http/1.1"]);
    let cfg_b = client_config(&[&tb], &["http/1.1"]);
    assert_eq!(
        body(&tls_get(&mut tls_connect(addr, &cfg_a, "a.example"))),
        "hello from A"
    );
    // The chain's own certificate: the client trusts only b's.
    assert_eq!(
        body(&tls_get(&mut tls_connect(addr, &cfg_b, "x.b.example"))),
        "hello from B"
    );
    let (status, _, plain) = plain_get(addr);
    assert_eq!(
        (status, String::from_utf8_lossy(&plain).trim()),
        (200, "hello from P")
    );
    // TLS to a name no chain has: closed before any byte of a handshake.
    assert!(refused(addr, &ta, "other.example"));
    let admin = gw.admin_addr.expect("admin");
    wait_until(Duration::from_secs(2), "counted", || {
        metric(admin, "gateway_downstream_cx_no_filter_chain_match") == 1.0
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_default_chain_takes_connections_no_chain_matches() {
    let (a, d) = (backend("A"), backend("D"));
    let dir = tmp("default");
    let chains = tls_chain(&dir, "a", &["a.example"], "ca");
    let default = format!(
        "    default_filter_chain:\n{}{}",
        tls_socket(&dir, "d", &["d.example"]),
        yaml::hcm("cd")
    );
    let yaml = bootstrap_yaml(&chains, &default, 0, &[("ca", a.addr()), ("cd", d.addr())]);
    let gw = start(load(&yaml), 1);
    let addr = gw.listener("ingress").expect("listener");
    let td = trusted(&dir, "d");
    let cfg_d = client_config(&[&td], &["http/1.1"]);
    assert_eq!(
        body(&tls_get(&mut tls_connect(addr, &cfg_d, "d.example"))),
        "hello from D"
    );
    let ta = trusted(&dir, "a");
    let cfg_a = client_config(&[&ta], &["http/1.1"]);
    assert_eq!(
        body(&tls_get(&mut tls_connect(addr, &cfg_a, "a.example"))),
        "hello from A"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Envoy's filter-chain-only update: the chain whose configuration
/// changed drains (its idle connection is closed, new connections get the
/// new routes); the unchanged chain's connection goes on untouched.
#[test]
fn an_update_drains_only_the_changed_chain_s_connections() {
    let (a, p, p2) = (backend("A"), backend("P"), backend("P2"));
    let dir = tmp("drain");
    let backends = [("ca", a.addr()), ("cp", p.addr()), ("cp2", p2.addr())];
    let a_chain = tls_chain(&dir, "a", &["a.example"], "ca");
    let chains = |plain_cluster: &str| {
        format!(
            "{a_chain}    - name: plain\n      filter_chain_match: {{ transport_protocol: raw_buffer }}\n{}",
            yaml::hcm(plain_cluster),
        )
    };
    let gw = start(load(&bootstrap_yaml(&chains("cp"), "", 0, &backends)), 1);
    let addr = gw.listener("ingress").expect("listener");
    let ta = trusted(&dir, "a");
    let mut tls = tls_connect(addr, &client_config(&[&ta], &["http/1.1"]), "a.example");
    assert_eq!(body(&tls_get(&mut tls)), "hello from A");
    let mut plain = TcpStream::connect(addr).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&http1_get(&mut plain).2).trim(),
        "hello from P"
    );

    // The same chains, the plaintext one routing elsewhere.
    let next = bootstrap_yaml(&chains("cp2"), "", addr.port(), &backends);
    gw.reload(load(&next)).expect("reload");

    // The changed chain's idle connection is closed…
    let mut byte = [0u8; 1];
    assert_eq!(plain.read(&mut byte).expect("closed, not timed out"), 0);
    // …new ones get the new routes, and the TLS connection goes on.
    assert_eq!(
        String::from_utf8_lossy(&plain_get(addr).2).trim(),
        "hello from P2"
    );
    let (status, _, kept) = http1_get(&mut tls);
    assert_eq!(
        (status, String::from_utf8_lossy(&kept).trim()),
        (200, "hello from A")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A gateway whose one plaintext chain routes to backend P; `switch`
/// changes the chain to route to P2.
struct PlainChain {
    gw: gateway::GatewayHandle,
    addr: SocketAddr,
    backends: [demo_backend::BackendHandle; 2],
}

impl PlainChain {
    fn yaml(&self, cluster: &str, port: u16) -> String {
        let chain = format!("    - name: plain\n{}", yaml::hcm(cluster));
        let [p, p2] = &self.backends;
        bootstrap_yaml(&chain, "", port, &[("cp", p.addr()), ("cp2", p2.addr())])
    }

    fn start() -> Self {
        let backends = [backend("P"), backend("P2")];
        let chain = format!("    - name: plain\n{}", yaml::hcm("cp"));
        let yaml = bootstrap_yaml(
            &chain,
            "",
            0,
            &[("cp", backends[0].addr()), ("cp2", backends[1].addr())],
        );
        let gw = start(load(&yaml), 1);
        let addr = gw.listener("ingress").expect("listener");
        Self { gw, addr, backends }
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s
    }

    fn switch(&self) {
        let yaml = self.yaml("cp2", self.addr.port());
        self.gw.reload(load(&yaml)).expect("reload");
    }
}

/// A request in flight when its chain changes is answered, with
/// `Connection: close`, and the connection then closes: the drain waits
/// for streams, it does not cut them.
#[test]
fn a_request_in_flight_on_a_changed_chain_finishes_with_connection_close() {
    let g = PlainChain::start();
    let admin = g.gw.admin_addr.expect("admin");
    let mut s = g.connect();
    std::io::Write::write_all(
        &mut s,
        b"GET / HTTP/1.1\r\nHost: a\r\nx-delay-ms: 800\r\n\r\n",
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // The dashboard counts it on its chain…
    let listener = || {
        let (_, body) = admin_get(admin, "/dashboard.json");
        let d: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        d["listeners"][0].clone()
    };
    let l = listener();
    assert_eq!(l["chains"][0]["name"], "plain", "{l}");
    assert_eq!(l["chains"][0]["connections"], 1, "{l}");
    assert_eq!(l["draining_connections"], 0, "{l}");
    g.switch();
    // …and, once the update changed that chain, as draining: the drain's
    // progress, until it closes.
    let l = listener();
    assert_eq!(l["chains"][0]["connections"], 0, "{l}");
    assert_eq!(
        (
            l["draining_connections"].as_u64(),
            l["draining_chains"].as_u64()
        ),
        (Some(1), Some(1)),
        "{l}"
    );
    let draining = "envoy_listener_manager_total_filter_chains_draining{}";
    assert_eq!(envoy_metric(admin, draining), 1.0);
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) => panic!("not closed after the response: {e}"),
        }
    }
    let text = String::from_utf8_lossy(&got).to_lowercase();
    assert!(text.starts_with("http/1.1 200"), "{text}");
    assert!(text.contains("connection: close"), "{text}");
    assert!(text.ends_with("hello from p\n"), "{text}");
    // Closed on both sides (the gateway lingers for the client's FIN):
    // the drain is done.
    drop(s);
    wait_until(Duration::from_secs(2), "drain done", || {
        listener()["draining_connections"] == 0
    });
    assert_eq!(envoy_metric(admin, draining), 0.0);
}

/// A connection still opening (the inspector waits for its first byte)
/// when an update changes its chain is served by the chain it was accepted
/// under, once, and told to go: it never keeps a chain the listener has
/// dropped.
#[test]
fn a_connection_opening_across_an_update_is_told_to_go() {
    let g = PlainChain::start();
    let mut s = g.connect();
    std::thread::sleep(Duration::from_millis(200));
    g.switch();
    std::thread::sleep(Duration::from_millis(200));
    let (status, head, body) = http1_get(&mut s);
    assert_eq!(status, 200);
    assert!(head.to_lowercase().contains("connection: close"), "{head}");
    assert_eq!(String::from_utf8_lossy(&body).trim(), "hello from P");
    assert_eq!(
        String::from_utf8_lossy(&plain_get(g.addr).2).trim(),
        "hello from P2"
    );
}

/// `listener_filters_timeout`: a client that sends nothing is closed when
/// it passes (counted); with `continue_on_listener_filters_timeout` it is
/// given a chain as plaintext instead and served when it speaks.
#[test]
fn the_inspector_s_timeout_closes_or_continues_as_plaintext() {
    let p = backend("P");
    let chains = format!(
        "    - name: plain\n      filter_chain_match: {{ transport_protocol: raw_buffer }}\n{}",
        yaml::hcm("cp")
    );
    let run = |extra: &str| {
        let yaml = bootstrap_yaml(&chains, "", 0, &[("cp", p.addr())]).replace(
            "    filter_chains:\n",
            &format!("{extra}    filter_chains:\n"),
        );
        let gw = start(load(&yaml), 1);
        let addr = gw.listener("ingress").expect("listener");
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        std::thread::sleep(Duration::from_millis(600));
        (gw, s)
    };
    let (gw, mut silent) = run("    listener_filters_timeout: 0.3s\n");
    assert!(
        matches!(silent.read(&mut [0u8; 1]), Ok(0)),
        "closed at the timeout"
    );
    let admin = gw.admin_addr.expect("admin");
    wait_until(Duration::from_secs(2), "counted", || {
        metric(admin, "gateway_downstream_cx_listener_filters_timeout") == 1.0
    });
    let (_gw, mut late) =
        run("    listener_filters_timeout: 0.3s\n    continue_on_listener_filters_timeout: true\n");
    let (status, _, body) = http1_get(&mut late);
    assert_eq!(status, 200);
    assert_eq!(String::from_utf8_lossy(&body).trim(), "hello from P");
}
