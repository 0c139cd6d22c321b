//! `tcp_proxy` filter chains: bytes both ways with half-closes passed on, TLS passed through unread to the backend `tls_inspector` chose by SNI (next to a chain that terminates TLS), weighted clusters, the idle timeout, an unknown cluster and failed connects (`max_connect_attempts`, access log flags), and a client that stops reading stalling nobody else.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::raw::{echo_backend, read_n, read_to_end};
use support::tls_client::*;
use support::{yaml, *};

/// A `clusters` entry: `name`, plain TCP to `addrs`.
fn tcp_cluster(name: &str, addrs: &[SocketAddr]) -> String {
    let eps: Vec<String> = addrs
        .iter()
        .map(|a| yaml::endpoint(&a.ip().to_string(), a.port(), ""))
        .collect();
    format!(
        "  - name: {name}\n    type: STATIC\n    connect_timeout: 1s\n    load_assignment:\n      cluster_name: {name}\n      endpoints:\n      - lb_endpoints: [{}]\n",
        eps.join(", ")
    )
}

/// A chain's `filters`: a TCP proxy with `fields` (YAML flow entries:
/// `cluster: x, idle_timeout: 1s`).
fn tcp_filter(fields: &str) -> String {
    format!(
        r#"      filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config: {{ "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: tcp, {fields} }}
"#
    )
}

/// A bootstrap: listener `ingress` on port 0 (`listener_fields` YAML at
/// its field indentation) with `chains`, then `clusters`.
fn bootstrap(listener_fields: &str, chains: &str, clusters: &str) -> engine::Bootstrap {
    let yaml = format!(
        r#"admin: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }} }}
static_resources:
  listeners:
  - name: ingress
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}
{listener_fields}    filter_chains:
{chains}  clusters:
{clusters}"#
    );
    xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml)
        .unwrap_or_else(|e| panic!("bootstrap refused: {e}\n{yaml}"))
}

/// One chain proxying everything with `fields`.
fn proxy_gateway(fields: &str, clusters: &str) -> (gateway::GatewayHandle, SocketAddr) {
    let chain = format!("    -{}", &tcp_filter(fields)[5..]);
    let gw = start(bootstrap("", &chain, clusters), 1);
    let addr = gw.listener("ingress").expect("listener");
    (gw, addr)
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

#[test]
fn bytes_go_both_ways_and_half_closes_are_passed_on() {
    let backend = echo_backend("hi ", "bye");
    let (gw, addr) = proxy_gateway("cluster: echo", &tcp_cluster("echo", &[backend]));
    let mut c = connect(addr);
    // The backend speaks first: nothing waits for the client's bytes.
    assert_eq!(read_n(&mut c, 3), "hi ");
    let big: Vec<u8> = (0..200_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let writer = {
        let mut w = c.try_clone().unwrap();
        let big = big.clone();
        std::thread::spawn(move || {
            w.write_all(&big).unwrap();
            // Our half ends; the backend's goes on until it answers it.
            w.shutdown(Shutdown::Write).unwrap();
        })
    };
    let mut echoed = vec![0u8; big.len()];
    c.read_exact(&mut echoed).unwrap();
    writer.join().unwrap();
    assert!(echoed == big, "the bytes came back changed");
    assert_eq!(read_to_end(&mut c), "bye");
    wait_stat(&gw, "gateway_tcp_proxy_cx_total 1");
    wait_stat(&gw, &format!("gateway_tunnel_rx_bytes_total {}", big.len()));
    wait_stat(
        &gw,
        &format!("gateway_tunnel_tx_bytes_total {}", big.len() + 6),
    );
    wait_stat(&gw, "gateway_tunnel_cx_active 0");
    gw.shutdown();
}

/// A TLS backend for `name` (its own certificate): answers one line
/// read over TLS with `from <name>: <line>`.
fn tls_backend(name: &'static str) -> (SocketAddr, Cert) {
    let c = cert(&[name]);
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(c.key.clone().into());
    let cfg = rustls::ServerConfig::builder_with_provider(engine::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![c.der.clone()], key)
        .unwrap();
    let cfg = Arc::new(cfg);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { return };
            let conn = rustls::ServerConnection::new(Arc::clone(&cfg)).unwrap();
            std::thread::spawn(move || {
                let mut tls = rustls::StreamOwned::new(conn, s);
                let mut line = String::new();
                if BufReader::new(&mut tls).read_line(&mut line).is_ok() {
                    let _ = write!(tls, "from {name}: {line}");
                    let _ = tls.flush();
                    tls.conn.send_close_notify();
                    let _ = tls.flush();
                }
            });
        }
    });
    (addr, c)
}

#[test]
fn tls_is_passed_through_unread_to_the_chain_sni_chose() {
    let (passed, backend_cert) = tls_backend("pass.example");
    let web = backend("W");
    let dir = std::env::temp_dir().join(format!("gw-tcp-proxy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let own = cert(&["web.example"]);
    let (cert_path, key_path) = (dir.join("web.pem"), dir.join("web.key"));
    std::fs::write(&cert_path, &own.pem.0).unwrap();
    std::fs::write(&key_path, &own.pem.1).unwrap();
    let chains = format!(
        "    - filter_chain_match: {{ server_names: [pass.example] }}\n{}    - filter_chain_match: {{ server_names: [web.example] }}\n{}{}",
        tcp_filter("cluster: passed"),
        yaml::tls_socket(&cert_path, &key_path),
        yaml::hcm("web"),
    );
    let listener_fields = "    listener_filters:\n    - name: envoy.filters.listener.tls_inspector\n      typed_config: { \"@type\": type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector }\n";
    let clusters = format!(
        "{}{}",
        tcp_cluster("passed", &[passed]),
        yaml::h2_cluster("web", web.addr())
    );
    let gw = start(bootstrap(listener_fields, &chains, &clusters), 1);
    let addr = gw.listener("ingress").expect("listener");
    // The client trusts only the backend's certificate: its handshake
    // is with the backend, through the gateway.
    let mut tls = tls_connect(addr, &client_config(&[&backend_cert], &[]), "pass.example");
    tls.write_all(b"ping\n").unwrap();
    assert_eq!(read_to_end(&mut tls), "from pass.example: ping\n");
    // The other name is the gateway's own, serving HTTP.
    let mut web_tls = tls_connect(addr, &client_config(&[&own], &["http/1.1"]), "web.example");
    let (status, body) = tls_get(&mut web_tls);
    assert_eq!(
        (status, String::from_utf8_lossy(&body).trim()),
        (200, "hello from W")
    );
    wait_stat(&gw, "gateway_tcp_proxy_cx_total 1");
    gw.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn weighted_clusters_share_the_connections() {
    let (a, b) = (echo_backend("A", "bye"), echo_backend("B", "bye"));
    let clusters = format!("{}{}", tcp_cluster("a", &[a]), tcp_cluster("b", &[b]));
    let (gw, addr) = proxy_gateway(
        "weighted_clusters: { clusters: [{ name: a, weight: 1 }, { name: b, weight: 3 }] }",
        &clusters,
    );
    let (mut to_a, mut to_b) = (0, 0);
    for _ in 0..80 {
        match read_n(&mut connect(addr), 1).as_str() {
            "A" => to_a += 1,
            _ => to_b += 1,
        }
    }
    // 1:3 of 80: 20 expected on a; far outside chance below 7 or above 35.
    assert!((7..=35).contains(&to_a), "a got {to_a}, b {to_b}");
    assert!(to_b > to_a, "a got {to_a}, b {to_b}");
    // The chain as /config_dump shows it: its proxy, weights and all.
    let (_, dump) = admin_get(gw.admin_addr.unwrap(), "/config_dump");
    let dump: serde_json::Value = serde_json::from_str(&dump).unwrap();
    let chain = dump
        .pointer("/static_resources/listeners/0/filter_chains/0")
        .unwrap_or_else(|| panic!("no chain in {dump}"));
    assert_eq!(chain["tcp_proxy"]["stat_prefix"], "tcp");
    assert_eq!(
        chain["tcp_proxy"]["target"]["weighted_clusters"],
        serde_json::json!([{ "name": "a", "weight": 1 }, { "name": "b", "weight": 3 }])
    );
    assert!(chain.get("http_connection_manager").is_none());
    gw.shutdown();
}

#[test]
fn the_idle_timeout_closes_both_sides() {
    let backend = echo_backend("", "bye");
    let (gw, addr) = proxy_gateway(
        "cluster: echo, idle_timeout: 0.3s",
        &tcp_cluster("echo", &[backend]),
    );
    let mut c = connect(addr);
    c.write_all(b"x").unwrap();
    assert_eq!(read_n(&mut c, 1), "x");
    let quiet = Instant::now();
    // Closed by the gateway: the backend's "bye" never comes (its side
    // is closed too, not half-closed).
    assert_eq!(read_to_end(&mut c), "");
    let waited = quiet.elapsed();
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(3),
        "closed after {waited:?}"
    );
    wait_stat(&gw, "gateway_tunnel_idle_timeout 1");
    gw.shutdown();
}

#[test]
fn unknown_clusters_and_failed_connects_close_the_client_with_their_flags() {
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let dir = std::env::temp_dir().join(format!("gw-tcp-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("tcp.log");
    let _ = std::fs::remove_file(&log);
    let access_log = format!(
        r#"access_log: [{{ name: envoy.access_loggers.file, typed_config: {{ "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog, path: {}, log_format: {{ text_format_source: {{ inline_string: "%UPSTREAM_CLUSTER% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %UPSTREAM_HOST% %PROTOCOL%\n" }} }} }} }}]"#,
        log.display()
    );
    let cases = [
        (
            format!("cluster: nowhere, {access_log}"),
            "gateway_tcp_proxy_cx_no_route 1",
        ),
        (
            format!("cluster: dead, max_connect_attempts: 2, {access_log}"),
            "gateway_tcp_proxy_connect_attempts_exceeded 1",
        ),
    ];
    for (fields, stat) in &cases {
        let (gw, addr) = proxy_gateway(fields, &tcp_cluster("dead", &[dead]));
        let mut c = connect(addr);
        let _ = c.write_all(b"lost");
        // Closed without a byte.
        assert_eq!(read_to_end(&mut c), "");
        wait_stat(&gw, stat);
        gw.shutdown();
    }
    let text = wait_lines(&log, 2);
    assert_eq!(text, format!("nowhere NR 0 0 - -\ndead UF 0 0 {dead} -\n"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_client_that_stops_reading_stalls_only_itself() {
    let backend = echo_backend("", "bye");
    let (gw, addr) = proxy_gateway("cluster: echo", &tcp_cluster("echo", &[backend]));
    // The hog sends and never reads: its echo fills the socket buffers
    // and the tunnel's, then its own sends stop.
    let mut hog = connect(addr);
    hog.set_write_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let chunk = vec![b'h'; 64 * 1024];
    let mut sent = 0usize;
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        match hog.write(&chunk) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    assert!(
        Instant::now() < until,
        "the hog was never held back ({sent} bytes sent)"
    );
    // Everyone else is served meanwhile.
    for i in 0..5 {
        let mut c = connect(addr);
        let msg = format!("victim {i}");
        c.write_all(msg.as_bytes()).unwrap();
        assert_eq!(read_n(&mut c, msg.len()), msg);
    }
    drop(hog);
    gw.shutdown();
}
