//! `envoy.filters.listener.proxy_protocol`: a PROXY header (v1 or v2) names the client for `x-forwarded-for`, the access log, filter-chain matching and RBAC, while `%DOWNSTREAM_DIRECT_REMOTE_ADDRESS%` stays the proxy that sent it; a missing, malformed, disallowed, slow or truncated header is closed and counted as Envoy 1.40 counts it, and holds up no other client.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use support::h1_backend::{H1Answer, H1Backend};
use support::*;

/// A listener `name` on port 0 whose `listener_filters` are `filters`
/// (YAML at the listener's field indentation), with chains `chains`
/// (default: one routing to cluster `c`), logging each request's client
/// addresses to `log`.
fn listener(name: &str, filters: &str, chains: &str) -> String {
    format!(
        "  - name: {name}\n    address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}\n{filters}    filter_chains:\n{chains}"
    )
}

/// A chain (at filter-chain indentation) with `matcher` routing to `c`;
/// the backend tells the chain by `x-chain`.
fn chain(tag: &str, matcher: &str, log: &Path) -> String {
    format!(
        r#"    - {matcher}
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: {tag}
          use_remote_address: true
          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: {}
              log_format: {{ text_format_source: {{ inline_string: "{tag} %DOWNSTREAM_REMOTE_ADDRESS% %DOWNSTREAM_DIRECT_REMOTE_ADDRESS%\n" }} }}
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{ prefix: "/" }}
                route: {{ cluster: c }}
                request_headers_to_add: [ {{ header: {{ key: x-chain, value: {tag} }} }} ]
          http_filters:
          - name: envoy.filters.http.router
"#,
        log.display()
    )
}

const PROXY_PROTOCOL: &str =
    "type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol";

fn filter(fields: &str, extra: &str) -> String {
    format!(
        "    listener_filters:\n    - name: envoy.filters.listener.proxy_protocol\n      typed_config: {{ \"@type\": {PROXY_PROTOCOL}{fields} }}\n{extra}"
    )
}

struct Setup {
    gw: gateway::GatewayHandle,
    backend: H1Backend,
    log: std::path::PathBuf,
}

impl Setup {
    fn addr(&self, listener: &str) -> SocketAddr {
        self.gw.listener(listener).expect("listener")
    }

    /// The `x-forwarded-for` and `x-chain` of the backend's `nth` request.
    fn seen(&self, nth: usize) -> (String, String) {
        let r = self.backend.requests();
        let r = r
            .get(nth)
            .unwrap_or_else(|| panic!("no request {nth}: {r:?}"));
        let f = |n| r.field(n).unwrap_or("-").to_owned();
        (f("x-forwarded-for"), f("x-chain"))
    }
}

fn setup() -> Setup {
    let backend = H1Backend::start(|_| H1Answer::ok("ok"));
    let dir = std::env::temp_dir().join(format!("gw-proxy-proto-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("access.log");
    let _ = std::fs::remove_file(&log);
    let strict = listener(
        "strict",
        &filter("", "    listener_filters_timeout: 1s\n"),
        &format!(
            "{}{}",
            chain(
                "tenant",
                "filter_chain_match: { source_prefix_ranges: [ { address_prefix: 10.9.0.0, prefix_len: 16 } ] }",
                &log
            ),
            chain("any", "filter_chain_match: {}", &log)
        ),
    );
    let lenient = listener(
        "lenient",
        &filter(
            ", allow_requests_without_proxy_protocol: true, stat_prefix: edge, disallowed_versions: [V1]",
            "",
        ),
        &chain("lenient", "filter_chain_match: {}", &log),
    );
    let yaml = format!(
        "admin: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }} }}\nstatic_resources:\n  listeners:\n{strict}{lenient}  clusters:\n{}",
        yaml::h1_cluster("c", backend.addr())
    );
    let b = xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml)
        .unwrap_or_else(|e| panic!("bootstrap refused: {e}\n{yaml}"));
    Setup {
        gw: start(b, 1),
        backend,
        log,
    }
}

const GET: &[u8] = b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";

/// Sends `header` then a GET on a new connection: the status line, or
/// `None` when the gateway closed without an answer.
fn send(addr: SocketAddr, header: &[u8]) -> Option<String> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut bytes = header.to_vec();
    bytes.extend_from_slice(GET);
    // A refused connection may be reset while we write.
    let _ = s.write_all(&bytes);
    status(&mut s)
}

fn status(s: &mut TcpStream) -> Option<String> {
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    text.lines()
        .next()
        .filter(|l| l.starts_with("HTTP/1.1"))
        .map(str::to_owned)
}

/// A v2 header: PROXY over TCP from `src` to `dst`, with `tlvs`.
fn v2(src: SocketAddr, dst: SocketAddr, tlvs: &[(u8, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let list: Vec<proxywire::Tlv> = tlvs
        .iter()
        .map(|(kind, value)| proxywire::Tlv {
            kind: *kind,
            value: value.to_vec(),
        })
        .collect();
    proxywire::encode_v2(proxywire::Command::Proxy, Some((src, dst)), &list, &mut out);
    out
}

#[test]
fn the_header_names_the_client_everywhere_and_the_proxy_stays_direct() {
    let t = setup();
    let addr = t.addr("strict");
    let ok = Some("HTTP/1.1 200 OK".to_owned());
    assert_eq!(
        send(addr, b"PROXY TCP4 192.0.2.10 198.51.100.1 5000 80\r\n"),
        ok
    );
    assert_eq!(t.seen(0), ("192.0.2.10".into(), "any".into()));
    // The source picks the chain (`source_prefix_ranges`).
    assert_eq!(
        send(addr, b"PROXY TCP4 10.9.1.1 198.51.100.1 5001 80\r\n"),
        ok
    );
    assert_eq!(t.seen(1), ("10.9.1.1".into(), "tenant".into()));
    let (src, dst) = (
        "[2001:db8::7]:6000".parse().unwrap(),
        "[2001:db8::1]:443".parse().unwrap(),
    );
    assert_eq!(send(addr, &v2(src, dst, &[(0x02, b"example.com")])), ok);
    assert_eq!(t.seen(2), ("2001:db8::7".into(), "any".into()));
    // LOCAL (a balancer's own health check) and UNKNOWN: the connection's
    // own addresses.
    let mut local = Vec::new();
    proxywire::encode_v2(proxywire::Command::Local, None, &[], &mut local);
    assert_eq!(send(addr, &local), ok);
    assert_eq!(send(addr, b"PROXY UNKNOWN\r\n"), ok);
    assert_eq!(t.seen(3).0, "127.0.0.1");
    assert_eq!(t.seen(4).0, "127.0.0.1");
    let log = wait_lines(&t.log, 5);
    let lines: Vec<&str> = log.lines().collect();
    assert!(
        lines[0].starts_with("any 192.0.2.10:5000 127.0.0.1:"),
        "{log}"
    );
    assert!(
        lines[1].starts_with("tenant 10.9.1.1:5001 127.0.0.1:"),
        "{log}"
    );
    assert!(
        lines[2].starts_with("any [2001:db8::7]:6000 127.0.0.1:"),
        "{log}"
    );
    assert_eq!(envoy_counter(&t.gw, "proxy_proto.versions.v1.found"), 3);
    assert_eq!(envoy_counter(&t.gw, "proxy_proto.versions.v2.found"), 2);
    assert_eq!(envoy_counter(&t.gw, "downstream_cx_proxy_proto_error"), 0);
    t.gw.shutdown();
}

#[test]
fn bad_headers_are_closed_unanswered_and_counted_as_envoy_counts_them() {
    let t = setup();
    let addr = t.addr("strict");
    // No header at all.
    assert_eq!(send(addr, b""), None);
    // Lies: an address of the wrong family, a port out of range, a
    // multicast source, garbage after the signature.
    for bad in [
        &b"PROXY TCP4 2001:db8::1 192.0.2.1 1 2\r\n"[..],
        b"PROXY TCP4 192.0.2.1 192.0.2.2 1 70000\r\n",
        b"PROXY TCP4 224.0.0.1 192.0.2.2 1 2\r\n",
        b"PROXY TCP4 192.0.2.1\r\n",
        b"PROXY TCP4 192.0.2.1 192.0.2.2 1 2\n",
    ] {
        assert_eq!(send(addr, bad), None, "{}", String::from_utf8_lossy(bad));
    }
    // A v2 header whose length is too short for its addresses.
    let mut short = v2(
        "192.0.2.1:1".parse().unwrap(),
        "192.0.2.2:2".parse().unwrap(),
        &[],
    );
    short[15] = 4;
    short.truncate(20);
    assert_eq!(send(addr, &short), None);
    assert_eq!(envoy_counter(&t.gw, "proxy_proto.not_found_disallowed"), 1);
    assert_eq!(envoy_counter(&t.gw, "proxy_proto.versions.v1.error"), 5);
    assert_eq!(envoy_counter(&t.gw, "proxy_proto.versions.v2.error"), 1);
    assert_eq!(envoy_counter(&t.gw, "downstream_cx_proxy_proto_error"), 7);
    assert!(t.backend.requests().is_empty());

    // `allow_requests_without_proxy_protocol`, its own `stat_prefix`, and
    // v1 disallowed there: found and disallowed, not an error.
    let lenient = t.addr("lenient");
    assert_eq!(send(lenient, b""), Some("HTTP/1.1 200 OK".to_owned()));
    assert_eq!(t.seen(0).0, "127.0.0.1");
    assert_eq!(
        send(lenient, b"PROXY TCP4 192.0.2.1 192.0.2.2 1 2\r\n"),
        None
    );
    // A malformed header is refused even where none is required.
    assert_eq!(send(lenient, b"PROXY TCP9 x\r\n"), None);
    assert_eq!(
        envoy_counter(&t.gw, "proxy_proto.edge.not_found_allowed"),
        1
    );
    assert_eq!(
        envoy_counter(&t.gw, "proxy_proto.edge.versions.v1.found"),
        1
    );
    assert_eq!(
        envoy_counter(&t.gw, "proxy_proto.edge.versions.v1.disallowed"),
        1
    );
    assert_eq!(
        envoy_counter(&t.gw, "proxy_proto.edge.versions.v1.error"),
        1
    );
    assert_eq!(envoy_counter(&t.gw, "downstream_cx_proxy_proto_error"), 8);
    let prom = admin_get(t.gw.admin_addr.expect("admin"), "/stats/prometheus").1;
    for line in [
        "envoy_downstream_cx_proxy_proto_error{} 8",
        "envoy_proxy_proto_not_found_disallowed{} 1",
        "envoy_proxy_proto_error{envoy_proxy_protocol_version=\"1\"} 5",
        "envoy_proxy_proto_found{envoy_proxy_protocol_prefix=\"edge\",envoy_proxy_protocol_version=\"1\"} 1",
        "envoy_proxy_proto_not_found_allowed{envoy_proxy_protocol_prefix=\"edge\"} 1",
    ] {
        assert!(prom.lines().any(|l| l == line), "no {line} in\n{prom}");
    }
    t.gw.shutdown();
}

#[test]
fn a_slow_header_is_read_and_a_stalled_one_times_out_without_holding_anyone_up() {
    let t = setup();
    let addr = t.addr("strict");
    // One byte at a time, 20 ms apart: read.
    let mut slow = TcpStream::connect(addr).expect("connect");
    slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for b in b"PROXY TCP4 192.0.2.30 192.0.2.2 1 2\r\n" {
        slow.write_all(&[*b]).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    slow.write_all(GET).unwrap();
    assert_eq!(status(&mut slow).as_deref(), Some("HTTP/1.1 200 OK"));
    assert_eq!(t.seen(0).0, "192.0.2.30");
    // Stalled mid-header (v1, then v2): closed at `listener_filters_timeout`
    // (1 s), while other clients are served meanwhile.
    let began = Instant::now();
    let mut stalled: Vec<TcpStream> = [
        &b"PROXY TCP4 192.0.2."[..],
        &v2(
            "192.0.2.1:1".parse().unwrap(),
            "192.0.2.2:2".parse().unwrap(),
            &[],
        )[..20],
    ]
    .iter()
    .map(|part| {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.write_all(part).unwrap();
        s
    })
    .collect();
    for i in 0..3 {
        let header = format!("PROXY TCP4 192.0.2.{} 192.0.2.2 1 2\r\n", 40 + i);
        assert_eq!(
            send(addr, header.as_bytes()).as_deref(),
            Some("HTTP/1.1 200 OK")
        );
    }
    assert!(
        began.elapsed() < Duration::from_millis(900),
        "served while others stall"
    );
    for s in &mut stalled {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(status(s), None);
    }
    let took = began.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "closed at the timeout: {took:?}"
    );
    let label = format!(
        "listener.127.0.0.1_{}.downstream_pre_cx_timeout",
        addr.port()
    );
    assert_eq!(envoy_counter(&t.gw, &label), 2);
    // Timeouts are not PROXY errors (as in Envoy).
    assert_eq!(envoy_counter(&t.gw, "downstream_cx_proxy_proto_error"), 0);
    t.gw.shutdown();
}

/// A backend that takes a PROXY header at the start of each connection
/// (recorded, one per connection), then answers every HTTP/1.1 request 200
/// (or, for a raw tunnel, echoes what it reads).
struct ProxyBackend {
    addr: SocketAddr,
    headers: std::sync::Arc<std::sync::Mutex<Vec<proxywire::Header>>>,
}

impl ProxyBackend {
    fn start(echo: bool) -> Self {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let headers = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = std::sync::Arc::clone(&headers);
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                let seen = std::sync::Arc::clone(&seen);
                std::thread::spawn(move || serve_proxied(s, &seen, echo));
            }
        });
        Self { addr, headers }
    }

    fn headers(&self) -> Vec<proxywire::Header> {
        self.headers.lock().unwrap().clone()
    }
}

fn serve_proxied(mut s: TcpStream, seen: &std::sync::Mutex<Vec<proxywire::Header>>, echo: bool) {
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let rest = loop {
        let Ok(n) = s.read(&mut chunk) else { return };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        match proxywire::parse(&buf) {
            Ok(proxywire::Parsed::Complete { header, consumed }) => {
                seen.lock().unwrap().push(header);
                break buf[consumed..].to_vec();
            }
            Ok(proxywire::Parsed::Incomplete) => continue,
            Err(_) => return,
        }
    };
    if echo {
        let _ = s.write_all(&rest);
        while let Ok(n) = s.read(&mut chunk) {
            if n == 0 || s.write_all(&chunk[..n]).is_err() {
                return;
            }
        }
        return;
    }
    let mut pending = rest;
    loop {
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            pending.drain(..end + 4);
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
        }
        let Ok(n) = s.read(&mut chunk) else { return };
        if n == 0 {
            return;
        }
        pending.extend_from_slice(&chunk[..n]);
    }
}

/// A cluster `name` (HTTP/1.1 or, with `tcp`, for a tunnel) to `addr`
/// whose connections open with a PROXY header (`config`: the
/// `ProxyProtocolConfig` fields, flow style).
fn proxied_cluster(name: &str, addr: SocketAddr, config: &str) -> String {
    format!(
        r#"  - name: {name}
    type: STATIC
    connect_timeout: 1s
    transport_socket:
      name: envoy.transport_sockets.upstream_proxy_protocol
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.proxy_protocol.v3.ProxyProtocolUpstreamTransport
        config: {{ {config} }}
        transport_socket: {{ name: envoy.transport_sockets.raw_buffer }}
    load_assignment:
      cluster_name: {name}
      endpoints:
      - lb_endpoints:
        - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {} }} }} }}
"#,
        addr.port()
    )
}

#[test]
fn upstream_connections_open_with_the_client_s_proxy_header() {
    let v1 = ProxyBackend::start(false);
    let b2 = ProxyBackend::start(false);
    let raw = ProxyBackend::start(true);
    let dir = std::env::temp_dir().join(format!("gw-proxy-up-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("access.log");
    let route = |tag: &str, cluster: &str| {
        chain(tag, "filter_chain_match: {}", &log)
            .replace("cluster: c }", &format!("cluster: {cluster} }}"))
    };
    let pass = ", pass_through_tlvs: { match_type: INCLUDE, tlv_type: [0xE0] }";
    let tunnel = "    - filters:\n      - name: envoy.filters.network.tcp_proxy\n        typed_config: { \"@type\": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: t, cluster: raw }\n";
    let yaml = format!(
        "admin: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }} }}\nstatic_resources:\n  listeners:\n{}{}{}  clusters:\n{}{}{}",
        listener("one", &filter("", ""), &route("one", "v1")),
        listener("two", &filter(pass, ""), &route("two", "v2")),
        listener("tcp", &filter("", ""), tunnel),
        proxied_cluster("v1", v1.addr, "version: V1"),
        proxied_cluster(
            "v2",
            b2.addr,
            "version: V2, added_tlvs: [ { type: 0xE1, value: YWRkZWQ= } ], pass_through_tlvs: { match_type: INCLUDE_ALL }"
        ),
        proxied_cluster("raw", raw.addr, "version: V2"),
    );
    let b = xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml)
        .unwrap_or_else(|e| panic!("bootstrap refused: {e}\n{yaml}"));
    let gw = start(b, 1);
    let one = gw.listener("one").expect("one");
    // Two requests of one client: one upstream connection, its header
    // naming that client; another client gets a connection of its own.
    let mut c = TcpStream::connect(one).expect("connect");
    c.write_all(b"PROXY TCP4 192.0.2.10 198.51.100.1 5000 80\r\n")
        .unwrap();
    for _ in 0..2 {
        c.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
        let mut got = [0u8; 64];
        let n = c.read(&mut got).unwrap();
        assert!(
            got[..n].starts_with(b"HTTP/1.1 200"),
            "{:?}",
            String::from_utf8_lossy(&got[..n])
        );
    }
    assert_eq!(
        send(one, b"PROXY TCP4 192.0.2.11 198.51.100.1 5001 80\r\n").as_deref(),
        Some("HTTP/1.1 200 OK")
    );
    let seen = v1.headers();
    let addrs: Vec<_> = seen.iter().map(|h| h.addresses).collect();
    let pair = |a: &str, b: &str| Some((a.parse().unwrap(), b.parse().unwrap()));
    assert_eq!(
        addrs,
        [
            pair("192.0.2.10:5000", "198.51.100.1:80"),
            pair("192.0.2.11:5001", "198.51.100.1:80")
        ]
    );
    assert!(seen.iter().all(|h| h.version == proxywire::Version::V1));
    drop(c);

    // v2: the added TLV first, then the client's that the listener kept.
    let two = gw.listener("two").expect("two");
    let header = v2(
        "[2001:db8::7]:6000".parse().unwrap(),
        "[2001:db8::1]:443".parse().unwrap(),
        &[(0xE0, &b"kept"[..]), (0xE2, &b"dropped"[..])],
    );
    assert_eq!(send(two, &header).as_deref(), Some("HTTP/1.1 200 OK"));
    let h = b2.headers().pop().expect("a header");
    assert_eq!(h.version, proxywire::Version::V2);
    assert_eq!(h.addresses, pair("[2001:db8::7]:6000", "[2001:db8::1]:443"));
    let tlvs: Vec<(u8, &[u8])> = h.tlvs.iter().map(|t| (t.kind, &t.value[..])).collect();
    assert_eq!(tlvs, [(0xE1, &b"added"[..]), (0xE0, &b"kept"[..])]);

    // A tunnel: the header, then the client's bytes untouched.
    let tcp = gw.listener("tcp").expect("tcp");
    let mut t = TcpStream::connect(tcp).expect("connect");
    t.set_read_timeout(Some(Duration::from_secs(5))).ok();
    t.write_all(b"PROXY TCP4 192.0.2.12 198.51.100.2 5002 22\r\nhello")
        .unwrap();
    let mut got = [0u8; 5];
    t.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"hello");
    let h = raw.headers().pop().expect("a header");
    assert_eq!(h.addresses, pair("192.0.2.12:5002", "198.51.100.2:22"));
    gw.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}
