//! Clusters that speak HTTP/1.1 (Envoy's default), in cleartext and over TLS, and `auto_config` choosing by ALPN: pooled keep-alive connections, both body framings, bodies that run to the close, `max_requests_per_connection`, malformed answers, SNI and certificate checks.

mod support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use engine::tls::{UpstreamTls, UpstreamTlsSpec};
use engine::{UpstreamOptions, UpstreamProtocol};
use http::HeaderMap;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use support::h1_backend::{H1Answer, H1Backend, H1Request};
use support::tls_client::{cert, server_config, Cert};
use support::*;

/// A gateway in front of one HTTP/1.1 cluster `c` with `upstream`.
fn gateway_h1(
    backend: std::net::SocketAddr,
    upstream: UpstreamOptions,
) -> (gateway::GatewayHandle, std::net::SocketAddr) {
    let mut c = (*cluster("c", &[backend])).clone();
    c.upstream = upstream;
    let gw = start(
        bootstrap(
            listener(vec![prefix_route("/", "c", Some(Duration::from_secs(5)))]),
            vec![Arc::new(c)],
        ),
        1,
    );
    let addr = gw.listener("ingress").expect("listener");
    (gw, addr)
}

fn h1() -> UpstreamOptions {
    UpstreamOptions {
        protocol: UpstreamProtocol::Http1,
        ..Default::default()
    }
}

fn echo(r: &H1Request) -> H1Answer {
    H1Answer::ok(&format!(
        "{} {} {}",
        r.method,
        r.target,
        String::from_utf8_lossy(&r.body)
    ))
}

#[test]
fn requests_reuse_one_keep_alive_connection() {
    let b = H1Backend::start(echo);
    let (_gw, addr) = gateway_h1(b.addr(), h1());
    let replies = client(move || async move {
        let c = connect(addr).await;
        let mut out = Vec::new();
        for i in 0..10 {
            let r = get(&c, &format!("/n/{i}?q=1"), &[("te", "trailers")])
                .await
                .expect("reply");
            out.push((r.status.as_u16(), r.body));
        }
        out
    });
    for (i, (status, body)) in replies.iter().enumerate() {
        assert_eq!(*status, 200);
        assert_eq!(&body[..], format!("GET /n/{i}?q=1 ").as_bytes());
    }
    assert_eq!(b.connections(), 1, "one kept-alive connection");
    let seen = b.requests();
    assert_eq!(seen.len(), 10);
    let r = &seen[0];
    assert_eq!(r.field("host"), Some("test.local"));
    assert_eq!(r.field("te"), None, "te is hop-by-hop on HTTP/1.1");
    assert!(r.field("x-forwarded-for").is_some());
    assert!(seen.iter().all(|r| r.conn == 0));
}

#[test]
fn the_edge_sets_forwarded_proto_and_the_expected_timeout_as_envoy() {
    let b = H1Backend::start(echo);
    let (_gw, addr) = gateway_h1(b.addr(), h1());
    client(move || async move {
        let c = connect(addr).await;
        get(&c, "/plain", &[]).await.expect("reply");
        // What a client says of either is replaced at the edge
        // (`use_remote_address`).
        let spoofed = [
            ("x-forwarded-proto", "https"),
            ("x-envoy-expected-rq-timeout-ms", "1"),
        ];
        get(&c, "/spoofed", &spoofed).await.expect("reply");
    });
    for r in b.requests() {
        let names: Vec<&str> = r.fields.iter().map(|(n, _)| n.as_str()).collect();
        let at = |name: &str| names.iter().position(|n| n.eq_ignore_ascii_case(name));
        assert_eq!(r.field("x-forwarded-proto"), Some("http"), "{}", r.target);
        assert_eq!(r.field("x-envoy-expected-rq-timeout-ms"), Some("5000"));
        let count = |name: &str| {
            names
                .iter()
                .filter(|n| n.eq_ignore_ascii_case(name))
                .count()
        };
        assert_eq!(count("x-forwarded-proto"), 1);
        assert_eq!(count("x-envoy-expected-rq-timeout-ms"), 1);
        // After the client's fields, in Envoy's order.
        assert!(at("x-forwarded-for") < at("x-forwarded-proto"), "{names:?}");
        assert!(at("x-forwarded-proto") < at("x-envoy-expected-rq-timeout-ms"));
    }
}

#[test]
fn an_inner_hop_keeps_the_clients_forwarded_proto_and_suppressed_headers_stay_out() {
    // No `use_remote_address`, and the router's `suppress_envoy_headers`.
    let b = H1Backend::start(echo);
    let mut l = (*listener(vec![prefix_route("/", "c", Some(Duration::from_secs(5)))])).clone();
    for chain in l.chains_mut() {
        chain.http.trust.use_remote_address = false;
        chain.http.envoy_headers = false;
    }
    let mut c = (*cluster("c", &[b.addr()])).clone();
    c.upstream = h1();
    let gw = start(bootstrap(Arc::new(l), vec![Arc::new(c)]), 1);
    let addr = gw.listener("ingress").expect("listener");
    client(move || async move {
        let c = connect(addr).await;
        get(&c, "/plain", &[]).await.expect("reply");
        get(&c, "/trusted", &[("x-forwarded-proto", "https")])
            .await
            .expect("reply");
    });
    let seen = b.requests();
    assert_eq!(seen[0].field("x-forwarded-proto"), Some("http"));
    assert_eq!(seen[1].field("x-forwarded-proto"), Some("https"));
    assert!(seen
        .iter()
        .all(|r| r.field("x-envoy-expected-rq-timeout-ms").is_none()));
}

#[test]
fn request_bodies_go_with_either_framing_and_response_trailers_when_enabled() {
    let b = H1Backend::start(|r| {
        if r.target == "/trailers" {
            return H1Answer::raw(
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nx-check: yes\r\n\r\n",
            );
        }
        echo(r)
    });
    let mut with_trailers = h1();
    with_trailers.http1_trailers = true;
    let (_gw, addr) = gateway_h1(b.addr(), with_trailers);
    let (sized, unsized_, trailed) = client(move || async move {
        let c = connect(addr).await;
        let sized = request(
            &c,
            "POST",
            "/sized",
            &[("content-length", "11")],
            Some(Bytes::from_static(b"hello world")),
            None,
        )
        .await
        .expect("sized");
        let mut t = HeaderMap::new();
        t.insert("x-sum", "42".parse().unwrap());
        let unsized_ = request(
            &c,
            "POST",
            "/chunked",
            &[],
            Some(Bytes::from(vec![b'a'; 100_000])),
            Some(t),
        )
        .await
        .expect("chunked");
        let trailed = get(&c, "/trailers", &[]).await.expect("trailers");
        (sized, unsized_, trailed)
    });
    assert_eq!(&sized.body[..], b"POST /sized hello world");
    assert_eq!(unsized_.status, 200);
    assert_eq!(unsized_.body.len(), "POST /chunked ".len() + 100_000);
    assert_eq!(&trailed.body[..], b"hello");
    assert_eq!(
        trailed
            .trailers
            .as_ref()
            .and_then(|t| t.get("x-check"))
            .map(|v| v.to_str().unwrap()),
        Some("yes")
    );
    let seen = b.requests();
    assert_eq!(seen[0].field("content-length"), Some("11"));
    assert_eq!(seen[0].field("transfer-encoding"), None);
    assert_eq!(seen[1].field("transfer-encoding"), Some("chunked"));
    assert_eq!(seen[1].body.len(), 100_000);
    assert_eq!(
        seen[1].trailers.as_deref().map(str::trim),
        Some("x-sum: 42")
    );
}

#[test]
fn trailers_are_dropped_without_enable_trailers_as_in_envoy() {
    let b = H1Backend::start(|_| {
        H1Answer::raw(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nx-check: yes\r\n\r\n",
        )
    });
    let (_gw, addr) = gateway_h1(b.addr(), h1());
    let r = client(move || async move {
        let c = connect(addr).await;
        let mut t = HeaderMap::new();
        t.insert("x-sum", "42".parse().unwrap());
        request(
            &c,
            "POST",
            "/",
            &[],
            Some(Bytes::from_static(b"abc")),
            Some(t),
        )
        .await
        .expect("reply")
    });
    assert_eq!(&r.body[..], b"ok");
    assert!(r.trailers.is_none_or(|t| t.get("x-check").is_none()));
    let seen = b.requests();
    assert_eq!(seen[0].body, b"abc");
    assert_eq!(seen[0].trailers, None);
}

#[test]
fn a_body_that_runs_to_the_close_arrives_whole_and_the_next_request_reconnects() {
    let big = "x".repeat(300_000);
    let body = big.clone();
    let b = H1Backend::start(move |r| {
        if r.target == "/close" {
            H1Answer::raw(format!(
                "HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n{body}"
            ))
            .closing()
        } else {
            echo(r)
        }
    });
    let (_gw, addr) = gateway_h1(b.addr(), h1());
    let (first, second) = client(move || async move {
        let c = connect(addr).await;
        let first = get(&c, "/close", &[]).await.expect("first");
        let second = get(&c, "/after", &[]).await.expect("second");
        (first, second)
    });
    assert_eq!(first.status, 200);
    assert_eq!(first.body.len(), big.len(), "the whole body, to the close");
    assert_eq!(&second.body[..], b"GET /after ");
    assert_eq!(b.connections(), 2);
}

#[test]
fn a_large_response_flows_through_the_window() {
    let b = H1Backend::start(|_| {
        let body = "y".repeat(4 << 20);
        H1Answer::raw(format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ))
    });
    let (_gw, addr) = gateway_h1(b.addr(), h1());
    let lens = client(move || async move {
        let c = connect(addr).await;
        let mut lens = Vec::new();
        for _ in 0..3 {
            lens.push(get(&c, "/big", &[]).await.expect("reply").body.len());
        }
        lens
    });
    assert_eq!(lens, vec![4 << 20; 3]);
    assert_eq!(b.connections(), 1);
}

#[test]
fn max_requests_per_connection_replaces_connections() {
    let b = H1Backend::start(echo);
    let mut opts = h1();
    opts.max_requests_per_connection = Some(2);
    let (gw, addr) = gateway_h1(b.addr(), opts);
    let statuses = client(move || async move {
        let c = connect(addr).await;
        let mut out = Vec::new();
        for _ in 0..5 {
            out.push(get(&c, "/", &[]).await.expect("reply").status.as_u16());
        }
        out
    });
    assert_eq!(statuses, vec![200; 5]);
    let per_conn: Vec<u64> = b.requests().iter().map(|r| r.conn).collect();
    assert_eq!(per_conn, vec![0, 0, 1, 1, 2]);
    let admin = gw.admin_addr.expect("admin");
    let series = format!(
        "gateway_upstream_cx_max_requests{{cluster=\"c\",host=\"{}\"}}",
        b.addr()
    );
    wait_until(Duration::from_secs(5), "counted", || {
        metric(admin, &series) >= 2.0
    });
}

/// Requests 100 ms apart for longer than the idle timeout keep one
/// connection (the idle time runs from the last stream, not the connect);
/// a pause past it closes the connection, and the next request opens
/// another. Without the timeout the pause changes nothing.
#[test]
fn idle_timeout_closes_connections_without_streams() {
    let run = |idle_timeout: Option<Duration>| {
        let b = H1Backend::start(echo);
        let mut opts = h1();
        opts.idle_timeout = idle_timeout;
        let (gw, addr) = gateway_h1(b.addr(), opts);
        let statuses = client(move || async move {
            let c = connect(addr).await;
            let mut out = Vec::new();
            for _ in 0..8 {
                out.push(get(&c, "/", &[]).await.expect("reply").status.as_u16());
                glommio::timer::sleep(Duration::from_millis(100)).await;
            }
            glommio::timer::sleep(Duration::from_millis(900)).await;
            out.push(get(&c, "/", &[]).await.expect("reply").status.as_u16());
            out
        });
        assert_eq!(statuses, vec![200; 9]);
        let admin = gw.admin_addr.expect("admin");
        let series = format!(
            "gateway_upstream_cx_idle_timeout{{cluster=\"c\",host=\"{}\"}}",
            b.addr()
        );
        let per_conn: Vec<u64> = b.requests().iter().map(|r| r.conn).collect();
        (per_conn, metric(admin, &series))
    };
    let (per_conn, closed) = run(Some(Duration::from_millis(400)));
    assert_eq!(per_conn, [vec![0; 8], vec![1]].concat());
    assert_eq!(closed, 1.0);
    let (per_conn, closed) = run(None);
    assert_eq!(per_conn, vec![0; 9]);
    assert_eq!(closed, 0.0);
}

#[test]
fn concurrent_requests_each_get_a_connection() {
    let b = H1Backend::start(|r| {
        std::thread::sleep(Duration::from_millis(100));
        echo(r)
    });
    let (_gw, addr) = gateway_h1(b.addr(), h1());
    let statuses = client(move || async move {
        let c = connect(addr).await;
        let all = (0..20).map(|i| {
            let c = c.clone();
            glommio::spawn_local(async move {
                get(&c, &format!("/{i}"), &[])
                    .await
                    .expect("reply")
                    .status
                    .as_u16()
            })
        });
        let mut out = Vec::new();
        for t in all.collect::<Vec<_>>() {
            out.push(t.await);
        }
        out
    });
    assert_eq!(statuses, vec![200; 20]);
    let conns = b.connections();
    assert!((2..=20).contains(&conns), "{conns} connections");
}

#[test]
fn a_malformed_answer_fails_its_request_only() {
    let b = H1Backend::start(|r| match r.target.as_str() {
        "/garbage" => H1Answer::raw("HTTP/1.1 abc\r\n\r\n"),
        "/switch" => H1Answer::raw("HTTP/1.1 101 Switching Protocols\r\nupgrade: x\r\n\r\n"),
        "/head" => H1Answer::raw("HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n"),
        _ => echo(r),
    });
    let (_gw, addr) = gateway_h1(b.addr(), h1());
    let (bad, switch, head, after) = client(move || async move {
        let c = connect(addr).await;
        let bad = get(&c, "/garbage", &[]).await.expect("reply");
        let switch = get(&c, "/switch", &[]).await.expect("reply");
        let head = request(&c, "HEAD", "/head", &[], None, None)
            .await
            .expect("reply");
        let after = get(&c, "/after", &[]).await.expect("reply");
        (bad, switch, head, after)
    });
    // Envoy answers a protocol error before the response head 502.
    assert_eq!(bad.status, 502);
    assert_eq!(switch.status, 502);
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("1000"));
    assert!(head.body.is_empty());
    assert_eq!(&after.body[..], b"GET /after ");
}

fn upstream_tls(
    protocol: UpstreamProtocol,
    sni: Option<&str>,
    trusted: Option<&CertificateDer<'static>>,
) -> UpstreamOptions {
    upstream_tls_matching(protocol, sni, trusted, vec![])
}

fn upstream_tls_matching(
    protocol: UpstreamProtocol,
    sni: Option<&str>,
    trusted: Option<&CertificateDer<'static>>,
    san_matchers: Vec<engine::tls::SanMatcher>,
) -> UpstreamOptions {
    let alpn: Vec<Vec<u8>> = match protocol {
        UpstreamProtocol::Http1 => vec![b"http/1.1".to_vec()],
        UpstreamProtocol::Http2 => vec![b"h2".to_vec()],
        UpstreamProtocol::Auto => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
    };
    let tls = UpstreamTls::build(UpstreamTlsSpec {
        sni: sni.map(str::to_string),
        alpn,
        alpn_configured: false,
        min_version: engine::tls::TlsVersion::V1_2,
        max_version: engine::tls::TlsVersion::V1_3,
        cipher_suites: vec![],
        ecdh_curves: vec![],
        client_certificate: None,
        trusted_ca: trusted.map(|c| vec![c.clone()]),
        san_matchers,
        max_session_keys: 1,
    })
    .expect("upstream tls");
    UpstreamOptions {
        protocol,
        tls: Some(Arc::new(tls)),
        ..Default::default()
    }
}

fn get_status(addr: std::net::SocketAddr, path: &'static str) -> (u16, Option<String>) {
    client(move || async move {
        let c = connect(addr).await;
        let r = get(&c, path, &[]).await.expect("reply");
        (r.status.as_u16(), r.header("x-backend").map(str::to_string))
    })
}

#[test]
fn tls_upstreams_send_sni_and_check_the_chain_but_not_the_name() {
    let good = cert(&["backend.internal"]);
    let other = cert(&["other.internal"]);
    let b = H1Backend::start_with(Some(server_config(&good, &["http/1.1"])), echo);
    // Trusted, named otherwise than the SNI: Envoy does not compare names.
    let (gw, addr) = gateway_h1(
        b.addr(),
        upstream_tls(
            UpstreamProtocol::Http1,
            Some("api.example"),
            Some(&good.der),
        ),
    );
    assert_eq!(get_status(addr, "/a").0, 200);
    assert_eq!(b.requests()[0].sni.as_deref(), Some("api.example"));
    // Envoy's cluster.<name>.ssl.*: the handshake, its version and suite
    // (the cipher's label is `cipher_suite` on a cluster, as Envoy's).
    let ssl = |gw: &gateway::GatewayHandle, s: &str| {
        let series = format!("envoy_cluster_ssl_{s}{{envoy_cluster_name=\"c\"}}");
        envoy_metric(gw.admin_addr.expect("admin"), &series)
    };
    assert_eq!(ssl(&gw, "handshake"), 1.0);
    assert_eq!(ssl(&gw, "connection_error"), 0.0);
    // When its trusted CA expires (rcgen's certificates: 4096-01-01), and
    // the days until the first certificate of the config does.
    let admin1 = gw.admin_addr.unwrap();
    let ca = "envoy_cluster_ssl_certificate_expiration_unix_time_seconds{envoy_tls_certificate=\"unnamed_ca_cert_e3b0c442\",envoy_cluster_name=\"c\"}";
    assert_eq!(envoy_metric(admin1, ca), 67_090_118_400.0);
    let days = envoy_metric(admin1, "envoy_server_days_until_first_cert_expiring{}");
    assert!((700_000.0..760_000.0).contains(&days), "{days}");
    let (_, page) = admin_get(gw.admin_addr.unwrap(), "/stats/prometheus?filter=ssl");
    assert!(
        page.contains(
            "envoy_cluster_ssl_versions{envoy_ssl_version=\"TLSv1.3\",envoy_cluster_name=\"c\"} 1"
        ),
        "{page}"
    );
    assert!(
        page.contains("envoy_cluster_ssl_ciphers{cipher_suite=\"TLS_"),
        "{page}"
    );
    // No SNI configured: none sent; no validation context: any certificate.
    let (_gw2, addr2) = gateway_h1(b.addr(), upstream_tls(UpstreamProtocol::Http1, None, None));
    assert_eq!(get_status(addr2, "/b").0, 200);
    assert_eq!(b.requests()[1].sni, None);
    // A chain that does not lead to trusted_ca: the connect fails.
    let (gw3, addr3) = gateway_h1(
        b.addr(),
        upstream_tls(UpstreamProtocol::Http1, None, Some(&other.der)),
    );
    assert_eq!(get_status(addr3, "/c").0, 503);
    let admin = gw3.admin_addr.expect("admin");
    let series = format!(
        "gateway_upstream_cx_connect_fail{{cluster=\"c\",host=\"{}\"}}",
        b.addr()
    );
    assert!(metric(admin, &series) >= 1.0);
    assert!(ssl(&gw3, "fail_verify_error") >= 1.0);
    assert_eq!(ssl(&gw3, "handshake"), 0.0);
    assert_eq!(b.requests().len(), 2);
    // Names are checked through match_typed_subject_alt_names only.
    let dns = |name: &str| engine::tls::SanMatcher {
        san_type: engine::tls::SanType::Dns,
        matcher: engine::HeaderMatchKind::Exact(name.into()),
    };
    let (_gw4, addr4) = gateway_h1(
        b.addr(),
        upstream_tls_matching(
            UpstreamProtocol::Http1,
            None,
            Some(&good.der),
            vec![dns("backend.internal")],
        ),
    );
    assert_eq!(get_status(addr4, "/d").0, 200);
    let (gw5, addr5) = gateway_h1(
        b.addr(),
        upstream_tls_matching(
            UpstreamProtocol::Http1,
            None,
            Some(&good.der),
            vec![dns("other.internal")],
        ),
    );
    assert_eq!(get_status(addr5, "/e").0, 503);
    assert!(ssl(&gw5, "fail_verify_san") >= 1.0);
    assert_eq!(ssl(&gw5, "fail_verify_error"), 0.0);
    assert_eq!(b.requests().len(), 3);
}

#[test]
fn auto_config_speaks_what_alpn_chose() {
    let c = cert(&["backend.internal"]);
    // An HTTP/1.1-only TLS backend.
    let h1b = H1Backend::start_with(Some(server_config(&c, &["http/1.1"])), echo);
    let (_gw, addr) = gateway_h1(h1b.addr(), upstream_tls(UpstreamProtocol::Auto, None, None));
    for _ in 0..3 {
        assert_eq!(get_status(addr, "/h1").0, 200);
    }
    assert_eq!(h1b.requests().len(), 3);
    // An HTTP/2 TLS backend: a gateway serving TLS with ALPN h2 in front
    // of a demo backend.
    let demo = backend("b2");
    let mut front = (*listener(vec![prefix_route("/", "c", None)])).clone();
    front.filter_chains[0].tls = Some(downstream_tls(&c, &["h2"]));
    let front_gw = start(
        bootstrap(Arc::new(front), vec![cluster("c", &[demo.addr()])]),
        1,
    );
    let front_addr = front_gw.listener("ingress").expect("listener");
    let (_gw2, addr2) = gateway_h1(front_addr, upstream_tls(UpstreamProtocol::Auto, None, None));
    for _ in 0..3 {
        assert_eq!(get_status(addr2, "/h2"), (200, Some("b2".into())));
    }
    let admin = front_gw.admin_addr.expect("admin");
    assert_eq!(metric(admin, "gateway_downstream_cx_http2_total"), 1.0);
    assert_eq!(metric(admin, "gateway_downstream_cx_http1_total"), 0.0);
    // Envoy's listener.<addr>.ssl.*: one handshake, no client certificate.
    let l = format!("envoy_listener_address=\"127.0.0.1_{}\"", front_addr.port());
    for (s, v) in [
        ("handshake", 1.0),
        ("no_certificate", 1.0),
        ("session_reused", 0.0),
    ] {
        assert_eq!(
            envoy_metric(admin, &format!("envoy_listener_ssl_{s}{{{l}}}")),
            v,
            "{s}"
        );
    }
    let versions = format!("envoy_listener_ssl_versions{{envoy_ssl_version=\"TLSv1.3\",{l}}}");
    assert_eq!(envoy_metric(admin, &versions), 1.0);
    let expires = format!("envoy_listener_ssl_certificate_expiration_unix_time_seconds{{envoy_tls_certificate=\"unnamed_cert_e3b0c442\",{l}}}");
    assert_eq!(envoy_metric(admin, &expires), 67_090_118_400.0);
    let (_, page) = admin_get(admin, "/stats/prometheus?filter=ssl%5C.curves");
    assert!(
        page.contains("envoy_listener_ssl_curves{envoy_ssl_curve=\""),
        "{page}"
    );
}

fn downstream_tls(c: &Cert, alpn: &[&str]) -> Arc<engine::tls::DownstreamTls> {
    use engine::tls::{CertificateSpec, DownstreamTls, DownstreamTlsSpec};
    Arc::new(
        DownstreamTls::build(DownstreamTlsSpec::new(
            vec![CertificateSpec {
                chain: vec![c.der.clone()],
                key: PrivateKeyDer::Pkcs8(c.key.clone().into()),
            }],
            alpn.iter().map(|p| p.as_bytes().to_vec()).collect(),
        ))
        .expect("downstream tls"),
    )
}

#[test]
fn a_reload_that_changes_the_upstream_tls_takes_effect_on_the_same_hosts() {
    let good = cert(&["backend.internal"]);
    let other = cert(&["other.internal"]);
    let b = H1Backend::start_with(Some(server_config(&good, &["http/1.1"])), echo);
    let with = |upstream: UpstreamOptions| {
        let mut c = (*cluster("c", &[b.addr()])).clone();
        c.upstream = upstream;
        bootstrap(
            listener(vec![prefix_route("/", "c", Some(Duration::from_secs(5)))]),
            vec![Arc::new(c)],
        )
    };
    let gw = start(with(upstream_tls(UpstreamProtocol::Http1, None, None)), 1);
    let addr = gw.listener("ingress").expect("listener");
    assert_eq!(get_status(addr, "/a").0, 200, "not checked: taken");
    // Now checked against a CA that did not sign it: the pool's kept
    // connection must not carry on under the old settings.
    gw.reload(with(upstream_tls(
        UpstreamProtocol::Http1,
        None,
        Some(&other.der),
    )))
    .expect("reload");
    assert_eq!(get_status(addr, "/b").0, 503);
    // The same settings again (a new context, built alike): kept.
    gw.reload(with(upstream_tls(
        UpstreamProtocol::Http1,
        None,
        Some(&good.der),
    )))
    .expect("reload");
    assert_eq!(get_status(addr, "/c").0, 200);
    let conns = b.connections();
    gw.reload(with(upstream_tls(
        UpstreamProtocol::Http1,
        None,
        Some(&good.der),
    )))
    .expect("reload");
    assert_eq!(get_status(addr, "/d").0, 200);
    assert_eq!(
        b.connections(),
        conns,
        "an identical push keeps the connections"
    );
}

#[test]
fn an_upgrade_to_an_auto_config_host_that_picks_h2_goes_as_extended_connect() {
    use std::io::{Read, Write};
    // The host: a gateway serving TLS with ALPN h2 and extended CONNECT,
    // in front of an HTTP/1.1 WebSocket backend.
    let c = cert(&["backend.internal"]);
    let ws = support::tunnel_backend::TunnelBackend::websocket();
    let mut front = (*listener(vec![prefix_route("/", "c", None)])).clone();
    front.filter_chains[0].tls = Some(downstream_tls(&c, &["h2"]));
    front.filter_chains[0].http.allow_connect = true;
    front.filter_chains[0].http.upgrades = vec![engine::UpgradeConfig::enabling("websocket")];
    let mut to_ws = (*cluster("c", &[ws.addr])).clone();
    to_ws.upstream = h1();
    let front_gw = start(bootstrap(Arc::new(front), vec![Arc::new(to_ws)]), 1);
    let front_addr = front_gw.listener("ingress").expect("listener");
    // The gateway under test: an HTTP/1.1 client, an `auto_config` cluster.
    let mut l = (*listener(vec![prefix_route("/", "c", None)])).clone();
    l.filter_chains[0].http.upgrades = vec![engine::UpgradeConfig::enabling("websocket")];
    let mut up = (*cluster("c", &[front_addr])).clone();
    up.upstream = upstream_tls(UpstreamProtocol::Auto, None, None);
    let gw = start(bootstrap(Arc::new(l), vec![Arc::new(up)]), 1);
    let addr = gw.listener("ingress").expect("listener");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET /chat HTTP/1.1\r\nHost: example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").unwrap();
    let (head, mut got) = support::raw::read_head(&mut s);
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    // The backend's first bytes, then an echo, through both gateways.
    while got.len() < 5 {
        let mut b = [0u8; 16];
        let n = s.read(&mut b).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&b[..n]);
    }
    assert_eq!(&got[..5], b"HELLO");
    s.write_all(b"ping").unwrap();
    let mut b = [0u8; 4];
    s.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"ping");
    // It reached the front gateway as HTTP/2 (its extended CONNECT).
    let admin = front_gw.admin_addr.expect("admin");
    assert_eq!(metric(admin, "gateway_downstream_cx_http2_total"), 1.0);
    assert_eq!(metric(admin, "gateway_downstream_rq_upgrades_total"), 1.0);
}
