//! Request mirroring (`request_mirror_policies`): copies stream to the mirror cluster with Envoy's `-shadow` host and the body the primary gets, fire and forget; the request copied is never delayed or failed by its mirror (one that stops reading is abandoned, where Envoy would stall the request), and what is not copied is counted. Expected values recorded from Envoy 1.40 on the same bootstraps and requests.

mod support;

use std::io::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use support::h1_backend::{H1Answer, H1Backend, H1Request};
use support::h1_client::*;
use support::*;

/// A bootstrap: listener `ingress` (with `listener_fields`), its route
/// `/` to `primary` with `route_fields` on the action and `vh_fields` on
/// the virtual host, clusters `primary` and `mirror`.
fn bootstrap(
    primary: SocketAddr,
    mirror: SocketAddr,
    fields: (&str, &str, &str),
) -> Result<engine::Bootstrap, xds::Error> {
    bootstrap_with(primary, mirror, fields, "")
}

/// [`bootstrap`] with `mirror_fields` on cluster `mirror`.
fn bootstrap_with(
    primary: SocketAddr,
    mirror: SocketAddr,
    (listener_fields, vh_fields, route_fields): (&str, &str, &str),
    mirror_fields: &str,
) -> Result<engine::Bootstrap, xds::Error> {
    let endpoint = |a: SocketAddr| support::yaml::endpoint(&a.ip().to_string(), a.port(), "");
    let yaml = format!(
        r#"
admin: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }} }}
static_resources:
  listeners:
  - name: ingress
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}
{listener_fields}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          http_filters:
          - name: envoy.filters.http.router
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
{vh_fields}
              routes:
              - match: {{ prefix: / }}
                route: {{ cluster: primary{route_fields} }}
  clusters:
  - name: primary
    connect_timeout: 1s
    load_assignment: {{ cluster_name: primary, endpoints: [ {{ lb_endpoints: [ {p} ] }} ] }}
  - name: mirror
    connect_timeout: 1s
    load_assignment: {{ cluster_name: mirror, endpoints: [ {{ lb_endpoints: [ {m} ] }} ] }}
{mirror_fields}"#,
        p = endpoint(primary),
        m = endpoint(mirror),
    );
    xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml)
}

const TO_MIRROR: &str = ", request_mirror_policies: [ { cluster: mirror } ]";

/// Waits (up to 5 s) for the backend's `n`th request.
fn wait_request(b: &H1Backend, n: usize) -> H1Request {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(r) = b.requests().get(n) {
            return r.clone();
        }
        assert!(Instant::now() < until, "no request {n} at the backend");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn send(addr: SocketAddr, raw: &str) -> Response {
    let (mut s, mut r) = open(addr);
    s.write_all(raw.as_bytes()).unwrap();
    read_response(&mut r, false)
}

#[test]
fn a_copy_carries_the_head_with_the_shadow_host_and_the_whole_body() {
    let primary = H1Backend::start(|_| H1Answer::ok("primary"));
    let mirror = H1Backend::start(|_| H1Answer::ok("mirror"));
    let bs = bootstrap(primary.addr(), mirror.addr(), ("", "", TO_MIRROR)).expect("bootstrap");
    let gw = start(bs, 1);
    let addr = gw.listener("ingress").expect("listener");

    let r = send(
        addr,
        "GET /a?q=1 HTTP/1.1\r\nHost: example.com:8080\r\nx-one: 1\r\n\r\n",
    );
    assert_eq!((r.status, r.body.as_slice()), (200, &b"primary"[..]));
    let (p, m) = (wait_request(&primary, 0), wait_request(&mirror, 0));
    assert_eq!((m.method.as_str(), m.target.as_str()), ("GET", "/a?q=1"));
    assert_eq!(p.field("host"), Some("example.com:8080"));
    assert_eq!(m.field("host"), Some("example.com-shadow:8080"));
    let rest = |r: &H1Request| -> Vec<(String, String)> {
        r.fields
            .iter()
            .filter(|(n, _)| !n.eq_ignore_ascii_case("host"))
            .cloned()
            .collect()
    };
    // Every other field as the primary got it, in its order, then Envoy's
    // mark of a request the proxy made. (Envoy 1.40 also appends its
    // node's own address to the copy's `x-forwarded-for`; the gateway
    // does not.)
    let mut want = rest(&p);
    want.push(("x-envoy-internal".into(), "true".into()));
    assert_eq!(rest(&m), want);

    let r = send(
        addr,
        "POST /up HTTP/1.1\r\nHost: example.com\r\ncontent-length: 10\r\n\r\n0123456789",
    );
    assert_eq!(r.status, 200);
    let m = wait_request(&mirror, 1);
    assert_eq!(m.field("host"), Some("example.com-shadow"));
    assert_eq!(m.body, b"0123456789");

    // A chunked body with trailers, in pieces, streamed to both.
    let (mut s, mut rd) = open(addr);
    s.write_all(
        b"POST /chunks HTTP/1.1\r\nHost: h\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n",
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    s.write_all(b"2\r\nde\r\n0\r\nx-t: 1\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut rd, false).status, 200);
    let m = wait_request(&mirror, 2);
    assert_eq!(m.body, b"abcde");
    assert_eq!(wait_request(&primary, 2).body, b"abcde");
    wait_stat(&gw, "gateway_mirror_rq_total 3");
    wait_stat(&gw, "gateway_mirror_rq_active 0");
}

#[test]
fn a_mirror_that_hangs_or_refuses_never_touches_the_request_copied() {
    let primary = H1Backend::start(|_| H1Answer::ok("primary"));
    let hanging = H1Backend::start(|_| {
        std::thread::sleep(Duration::from_secs(3));
        H1Answer::ok("late")
    });
    let route = ", timeout: 0.5s, request_mirror_policies: [ { cluster: mirror } ]";
    let bs = bootstrap(primary.addr(), hanging.addr(), ("", "", route)).expect("bootstrap");
    let gw = start(bs, 1);
    let addr = gw.listener("ingress").expect("listener");
    let r = send(addr, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"primary"[..]));
    // Answered while its copy still waits, which its route's timeout ends.
    assert!(stats(&gw).contains("gateway_mirror_rq_active 1"));
    wait_request(&hanging, 0);
    wait_stat(&gw, "gateway_mirror_rq_timeout 1");
    wait_stat(&gw, "gateway_mirror_rq_active 0");

    // Nothing listens where the mirror is.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gone = closed.local_addr().unwrap();
    drop(closed);
    let bs = bootstrap(primary.addr(), gone, ("", "", TO_MIRROR)).expect("bootstrap");
    let gw = start(bs, 1);
    let addr = gw.listener("ingress").expect("listener");
    for _ in 0..3 {
        let r = send(
            addr,
            "POST / HTTP/1.1\r\nHost: h\r\ncontent-length: 2\r\n\r\nhi",
        );
        assert_eq!((r.status, r.body.as_slice()), (200, &b"primary"[..]));
    }
    wait_stat(&gw, "gateway_mirror_rq_failed 3");
    wait_stat(&gw, "gateway_mirror_rq_active 0");
}

#[test]
fn a_body_past_the_buffer_limit_streams_to_a_mirror_that_reads() {
    let primary = H1Backend::start(|r| H1Answer::ok(&r.body.len().to_string()));
    let mirror = H1Backend::start(|r| H1Answer::ok(&r.body.len().to_string()));
    let listener = "    per_connection_buffer_limit_bytes: 16384";
    let bs =
        bootstrap(primary.addr(), mirror.addr(), (listener, "", TO_MIRROR)).expect("bootstrap");
    let gw = start(bs, 1);
    let addr = gw.listener("ingress").expect("listener");
    let body = "x".repeat(200_000);
    let r = send(
        addr,
        &format!(
            "POST / HTTP/1.1\r\nHost: h\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ),
    );
    assert_eq!((r.status, r.body.as_slice()), (200, &b"200000"[..]));
    assert_eq!(wait_request(&mirror, 0).body.len(), 200_000);
    wait_stat(&gw, "gateway_mirror_rq_active 0");
}

#[test]
fn a_mirror_that_stops_reading_is_abandoned_and_the_request_goes_on() {
    let primary = H1Backend::start(|r| H1Answer::ok(&r.body.len().to_string()));
    // Accepts, and never reads.
    let deaf = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let deaf_addr = deaf.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in deaf.incoming().flatten() {
            held.push(c);
        }
    });
    let listener = "    per_connection_buffer_limit_bytes: 16384";
    let mirror_fields = "    per_connection_buffer_limit_bytes: 16384";
    let bs = bootstrap_with(
        primary.addr(),
        deaf_addr,
        (listener, "", TO_MIRROR),
        mirror_fields,
    )
    .expect("bootstrap");
    let gw = start(bs, 1);
    let addr = gw.listener("ingress").expect("listener");
    // Far more than the kernel's buffers on the way to the mirror hold.
    let n = 8 << 20;
    let (mut s, mut rd) = open(addr);
    let sender = std::thread::spawn(move || {
        s.write_all(
            format!("POST / HTTP/1.1\r\nHost: h\r\ncontent-length: {n}\r\n\r\n").as_bytes(),
        )
        .unwrap();
        let chunk = vec![b'y'; 64 << 10];
        for _ in 0..n / chunk.len() {
            s.write_all(&chunk).unwrap();
        }
        s
    });
    let r = read_response(&mut rd, false);
    drop(sender.join());
    assert_eq!((r.status, r.body), (200, n.to_string().into_bytes()));
    wait_stat(&gw, "gateway_mirror_rq_backlog_overflow 1");
    wait_stat(&gw, "gateway_mirror_rq_active 0");
}

#[test]
fn a_copy_of_a_request_its_client_abandons_is_abandoned_too() {
    let primary = H1Backend::start(|_| H1Answer::ok("primary"));
    let mirror = H1Backend::start(|_| H1Answer::ok("mirror"));
    let bs = bootstrap(primary.addr(), mirror.addr(), ("", "", TO_MIRROR)).expect("bootstrap");
    let gw = start(bs, 1);
    let addr = gw.listener("ingress").expect("listener");
    let (mut s, _rd) = open(addr);
    s.write_all(b"POST / HTTP/1.1\r\nHost: h\r\ncontent-length: 10\r\n\r\n01234")
        .unwrap();
    // The head reached the mirror with the primary's.
    wait_stat(&gw, "gateway_mirror_rq_active 1");
    s.shutdown(std::net::Shutdown::Both).unwrap();
    wait_stat(&gw, "gateway_mirror_rq_abandoned 1");
    wait_stat(&gw, "gateway_mirror_rq_active 0");
    assert!(
        mirror.requests().is_empty(),
        "no request completed at the mirror"
    );
}

#[test]
fn shares_and_cluster_headers_choose_what_is_copied_where() {
    let primary = H1Backend::start(|_| H1Answer::ok("primary"));
    let mirror = H1Backend::start(|_| H1Answer::ok("mirror"));
    let route = ", request_mirror_policies: [ \
        { cluster: mirror, runtime_fraction: { default_value: { numerator: 0 } } }, \
        { cluster_header: x-mirror-to } ]";
    let bs = bootstrap(primary.addr(), mirror.addr(), ("", "", route)).expect("bootstrap");
    let gw = start(bs, 1);
    let addr = gw.listener("ingress").expect("listener");
    // No field, an unknown cluster, an empty name: no copy.
    for field in ["", "x-mirror-to: nowhere\r\n", "x-mirror-to: \r\n"] {
        let r = send(addr, &format!("GET / HTTP/1.1\r\nHost: h\r\n{field}\r\n"));
        assert_eq!(r.status, 200);
    }
    wait_stat(&gw, "gateway_mirror_rq_unknown_cluster 1");
    let r = send(
        addr,
        "GET /named HTTP/1.1\r\nHost: h\r\nx-mirror-to: mirror\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    assert_eq!(wait_request(&mirror, 0).target, "/named");
    wait_stat(&gw, "gateway_mirror_rq_total 1");
    assert_eq!(mirror.requests().len(), 1, "a 0% share copies nothing");
}

#[test]
fn the_most_specific_list_of_policies_applies_whole() {
    let primary = H1Backend::start(|_| H1Answer::ok("primary"));
    let mirror = H1Backend::start(|_| H1Answer::ok("mirror"));
    let vh = "              request_mirror_policies: [ { cluster: mirror, disable_shadow_host_suffix_append: true } ]";
    // The virtual host's list, for a route without one.
    let bs = bootstrap(primary.addr(), mirror.addr(), ("", vh, "")).expect("bootstrap");
    let gw = start(bs, 1);
    let addr = gw.listener("ingress").expect("listener");
    assert_eq!(
        send(addr, "GET / HTTP/1.1\r\nHost: h:1\r\n\r\n").status,
        200
    );
    assert_eq!(wait_request(&mirror, 0).field("host"), Some("h:1"));
    drop(gw);
    // The route's own replaces it.
    let route =
        ", request_mirror_policies: [ { cluster: mirror, host_rewrite_literal: m.example } ]";
    let bs = bootstrap(primary.addr(), mirror.addr(), ("", vh, route)).expect("bootstrap");
    let gw = start(bs, 1);
    let addr = gw.listener("ingress").expect("listener");
    assert_eq!(
        send(addr, "GET / HTTP/1.1\r\nHost: h:1\r\n\r\n").status,
        200
    );
    assert_eq!(wait_request(&mirror, 1).field("host"), Some("m.example"));
    wait_stat(&gw, "gateway_mirror_rq_total 1");
    let (_, dump) = admin_get(gw.admin_addr.expect("admin"), "/config_dump");
    let dump: String = dump.split_whitespace().collect();
    assert!(
        dump.contains(r#""request_mirror_policies":[{"cluster":"mirror","disable_shadow_host_suffix_append":false,"host_rewrite_literal":"m.example"}]"#),
        "{dump}"
    );
}

#[test]
fn a_retried_request_is_copied_once() {
    let tries = std::sync::atomic::AtomicU32::new(0);
    let primary = H1Backend::start(move |_| {
        if tries.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 2 {
            H1Answer::raw("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n")
        } else {
            H1Answer::ok("third")
        }
    });
    let mirror = H1Backend::start(|_| H1Answer::ok("mirror"));
    let route = ", retry_policy: { retry_on: 5xx, num_retries: 2 }, request_mirror_policies: [ { cluster: mirror } ]";
    let bs = bootstrap(primary.addr(), mirror.addr(), ("", "", route)).expect("bootstrap");
    let gw = start(bs, 1);
    let addr = gw.listener("ingress").expect("listener");
    let r = send(addr, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"third"[..]));
    wait_request(&mirror, 0);
    wait_stat(&gw, "gateway_mirror_rq_active 0");
    assert_eq!(primary.requests().len(), 3);
    assert_eq!(mirror.requests().len(), 1);
}

#[test]
fn bad_policies_are_refused_by_name() {
    let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
    for (route, want) in [
        (
            ", request_mirror_policies: [ { cluster: nowhere } ]",
            "request_mirror_policies[0].cluster: unknown cluster \"nowhere\"",
        ),
        (
            ", request_mirror_policies: [ { cluster: mirror, cluster_header: x } ]",
            "only one of cluster and cluster_header",
        ),
        (
            ", request_mirror_policies: [ { runtime_fraction: { default_value: { numerator: 1 } } } ]",
            "one of cluster or cluster_header is required",
        ),
        (
            ", request_mirror_policies: [ { cluster_header: \"a\\nb\" } ]",
            "is not a request field name",
        ),
        (
            ", request_mirror_policies: [ { cluster: mirror, request_headers_mutations: [ { remove: x } ] } ]",
            "request_mirror_policies[0].request_headers_mutations",
        ),
    ] {
        let e = bootstrap(a, a, ("", "", route)).expect_err(route).to_string();
        assert!(e.contains(want), "{route}: {e}");
    }
    // Envoy takes a name no request can carry (it copies nothing).
    let odd = ", request_mirror_policies: [ { cluster_header: 'a b' } ]";
    bootstrap(a, a, ("", "", odd)).expect("accepted");
}

/// What an HTTP/2 mirror received: authority, path, body, trailers.
type Seen = std::sync::Arc<std::sync::Mutex<Vec<(String, String, Vec<u8>, Option<String>)>>>;

/// An h2c backend recording what it receives, answering 200 "mirror".
fn h2_mirror(seen: Seen) -> SocketAddr {
    support::h2c_server::h2c_server(move |_, mut conn| {
        let seen = seen.clone();
        async move {
            while let Some(Ok((req, mut respond))) = conn.accept().await {
                let seen = seen.clone();
                glommio::spawn_local(async move {
                    let (parts, mut body) = req.into_parts();
                    let mut data = Vec::new();
                    while let Some(Ok(chunk)) = body.data().await {
                        let _ = body.flow_control().release_capacity(chunk.len());
                        data.extend_from_slice(&chunk);
                    }
                    let trailers = body.trailers().await.ok().flatten().map(|t| {
                        t.iter()
                            .map(|(n, v)| format!("{n}: {}", v.to_str().unwrap_or("")))
                            .collect::<Vec<_>>()
                            .join(", ")
                    });
                    seen.lock().unwrap().push((
                        parts
                            .uri
                            .authority()
                            .map(|a| a.to_string())
                            .unwrap_or_default(),
                        parts.uri.path().to_owned(),
                        data,
                        trailers,
                    ));
                    let mut send = respond
                        .send_response(http::Response::new(()), false)
                        .unwrap();
                    let _ = send.send_data(bytes::Bytes::from_static(b"mirror"), true);
                })
                .detach();
            }
        }
    })
}

#[test]
fn an_http2_request_is_copied_to_an_http2_mirror_with_its_body_and_trailers() {
    let primary = H1Backend::start(|r| H1Answer::ok(&format!("{}", r.body.len())));
    let seen = Seen::default();
    let mirror = h2_mirror(seen.clone());
    let h2 = support::yaml::h2_options("");
    let bs = bootstrap_with(primary.addr(), mirror, ("", "", TO_MIRROR), &h2).expect("bootstrap");
    let gw = start(bs, 1);
    let addr = gw.listener("ingress").expect("listener");
    let body = bytes::Bytes::from(vec![b'z'; 100_000]);
    let reply = client(move || async move {
        let c = connect(addr).await;
        let mut t = http::HeaderMap::new();
        t.insert("x-sum", "42".parse().unwrap());
        request(&c, "POST", "/h2", &[], Some(body), Some(t))
            .await
            .unwrap()
    });
    assert_eq!(
        (reply.status.as_u16(), &reply.body[..]),
        (200, &b"100000"[..])
    );
    let until = Instant::now() + Duration::from_secs(5);
    while seen.lock().unwrap().is_empty() {
        assert!(Instant::now() < until, "no copy at the mirror");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (authority, path, data, trailers) = seen.lock().unwrap()[0].clone();
    assert_eq!(
        (authority.as_str(), path.as_str()),
        ("test.local-shadow", "/h2")
    );
    assert_eq!(data.len(), 100_000);
    assert_eq!(trailers.as_deref(), Some("x-sum: 42"));
    wait_stat(&gw, "gateway_mirror_rq_active 0");
}

#[test]
fn a_copy_held_back_by_a_full_connection_goes_on_when_it_drains() {
    let primary = H1Backend::start(|r| H1Answer::ok(&r.body.len().to_string()));
    // Reads nothing for half a second, then the whole request.
    let slow = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let slow_addr = slow.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::Read;
        let Ok((mut c, _)) = slow.accept() else {
            return;
        };
        std::thread::sleep(Duration::from_millis(500));
        let mut got = Vec::new();
        let mut buf = [0u8; 65536];
        let body_at = loop {
            let n = c.read(&mut buf).unwrap_or(0);
            assert!(n > 0, "the copy ended early");
            got.extend_from_slice(&buf[..n]);
            if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
        };
        let head = String::from_utf8_lossy(&got[..body_at]).to_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while got.len() - body_at < len {
            let n = c.read(&mut buf).unwrap_or(0);
            assert!(n > 0, "the copy ended early");
            got.extend_from_slice(&buf[..n]);
        }
        let _ = c.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
        let _ = tx.send(got.len() - body_at);
    });
    // The copy may fall 8 MiB behind; its connection holds 16 KiB.
    let listener = "    per_connection_buffer_limit_bytes: 8388608";
    let mirror_fields = "    per_connection_buffer_limit_bytes: 16384";
    let bs = bootstrap_with(
        primary.addr(),
        slow_addr,
        (listener, "", TO_MIRROR),
        mirror_fields,
    )
    .expect("bootstrap");
    let gw = start(bs, 1);
    let addr = gw.listener("ingress").expect("listener");
    // More than the kernel's buffers on the way hold.
    let n = 6_000_000;
    let body = "b".repeat(n);
    let r = send(
        addr,
        &format!("POST / HTTP/1.1\r\nHost: h\r\ncontent-length: {n}\r\n\r\n{body}"),
    );
    assert_eq!((r.status, r.body), (200, n.to_string().into_bytes()));
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(n));
    wait_stat(&gw, "gateway_mirror_rq_active 0");
    let s = stats(&gw);
    for quiet in [
        "gateway_mirror_rq_timeout 0",
        "gateway_mirror_rq_backlog_overflow 0",
    ] {
        assert!(s.lines().any(|l| l == quiet), "{quiet}:\n{s}");
    }
}
