//! Downstream TLS: HTTP/1.1 and HTTP/2 by ALPN (and by preface without it), certificates by SNI, resumption, and handshakes that fail or stall without hurting anyone.

mod support;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use engine::tls::{CertificateSpec, DownstreamTls, DownstreamTlsSpec};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use support::tls_client::*;
use support::*;
use tokio_util::compat::FuturesAsyncReadCompatExt;

fn tls_for(certs: &[&Cert], alpn: &[&str]) -> Arc<DownstreamTls> {
    tls_with(certs, alpn, None)
}

fn tls_with(
    certs: &[&Cert],
    alpn: &[&str],
    client_auth: Option<engine::tls::ClientAuthSpec>,
) -> Arc<DownstreamTls> {
    build(DownstreamTlsSpec {
        client_auth,
        ..spec(certs, alpn)
    })
}

/// What the tests serve unless they say otherwise: `certs`, `alpn`,
/// TLS 1.2–1.3, tickets and a session cache.
fn spec(certs: &[&Cert], alpn: &[&str]) -> DownstreamTlsSpec {
    DownstreamTlsSpec::new(
        certs
            .iter()
            .map(|c| CertificateSpec {
                chain: vec![c.der.clone()],
                key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(c.key.clone())),
            })
            .collect(),
        alpn.iter().map(|p| p.as_bytes().to_vec()).collect(),
    )
}

fn build(spec: DownstreamTlsSpec) -> Arc<DownstreamTls> {
    Arc::new(DownstreamTls::build(spec).expect("tls builds"))
}

/// A gateway whose listener speaks TLS with `tls`, in front of one backend.
fn gateway(
    tls: Arc<DownstreamTls>,
    idle: Option<Duration>,
) -> (
    gateway::GatewayHandle,
    SocketAddr,
    demo_backend::BackendHandle,
) {
    let b = backend("b1");
    let mut l = (*listener(vec![prefix_route("/", "c", None)])).clone();
    l.filter_chains[0].tls = Some(tls);
    if idle.is_some() {
        l.filter_chains[0].http.idle_timeout = idle;
    }
    let gw = start(bootstrap(Arc::new(l), vec![cluster("c", &[b.addr()])]), 1);
    let addr = gw.listener("ingress").expect("listener");
    (gw, addr, b)
}

#[test]
fn http1_over_tls_by_alpn_and_without_it() {
    let a = cert(&["a.example"]);
    let (gw, addr, _b) = gateway(tls_for(&[&a], &["h2", "http/1.1"]), None);
    for alpn in [&["http/1.1"][..], &[]] {
        let mut s = tls_connect(addr, &client_config(&[&a], alpn), "a.example");
        for _ in 0..2 {
            assert_eq!(
                tls_get(&mut s),
                (200, b"hello from b1\n".to_vec()),
                "alpn {alpn:?}"
            );
        }
    }
    let admin = gw.admin_addr.expect("admin");
    assert_eq!(metric(admin, "gateway_downstream_tls_handshake"), 2.0);
    assert_eq!(metric(admin, "gateway_downstream_cx_http1_total"), 2.0);
}

#[test]
fn http2_over_tls_by_alpn() {
    let a = cert(&["a.example"]);
    let (gw, addr, _b) = gateway(tls_for(&[&a], &["h2", "http/1.1"]), None);
    let cfg = client_config(&[&a], &["h2"]);
    let status = client(move || async move {
        let tcp = glommio::net::TcpStream::connect(addr)
            .await
            .expect("connect");
        let tls = futures_rustls::TlsConnector::from(cfg)
            .connect(ServerName::try_from("a.example").unwrap(), tcp)
            .await
            .expect("handshake");
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let (mut send, conn) = h2::client::Builder::new()
            .initial_max_send_streams(100)
            .handshake::<_, Bytes>(tls.compat())
            .await
            .expect("h2 handshake");
        glommio::spawn_local(async move {
            let _ = conn.await;
        })
        .detach();
        let req = http::Request::get("https://a.example/").body(()).unwrap();
        let (resp, _) = send.send_request(req, true).expect("send");
        resp.await.expect("response").status().as_u16()
    });
    assert_eq!(status, 200);
    assert_eq!(
        metric(gw.admin_addr.unwrap(), "gateway_downstream_cx_http2_total"),
        1.0
    );
}

#[test]
fn sni_chooses_the_certificate() {
    let a = cert(&["a.example"]);
    let b = cert(&["*.b.example"]);
    let (_gw, addr, _b) = gateway(tls_for(&[&a, &b], &["http/1.1"]), None);
    // Each client trusts only the certificate it should get.
    let mut s = tls_connect(addr, &client_config(&[&b], &[]), "x.b.example");
    assert_eq!(tls_get(&mut s).0, 200);
    let mut s = tls_connect(addr, &client_config(&[&a], &[]), "a.example");
    assert_eq!(tls_get(&mut s).0, 200);
    // No match: the first certificate, which a client of b does not trust.
    let failed = tls_handshake(addr, &client_config(&[&b], &[]), "other.example").is_err();
    assert!(failed, "the default certificate is not b's");
}

#[test]
fn sessions_resume() {
    let a = cert(&["a.example"]);
    let (gw, addr, _b) = gateway(tls_for(&[&a], &["http/1.1"]), None);
    let cfg = client_config(&[&a], &["http/1.1"]);
    for _ in 0..3 {
        let mut s = tls_connect(addr, &cfg, "a.example");
        assert_eq!(tls_get(&mut s).0, 200);
    }
    let admin = gw.admin_addr.unwrap();
    assert_eq!(metric(admin, "gateway_downstream_tls_handshake"), 3.0);
    assert!(metric(admin, "gateway_downstream_tls_session_reused") >= 2.0);
}

/// TLS for `a` with session tickets sealed by `keys` only (no session
/// cache, so a resumption can only come from a ticket).
fn tls_with_ticket_keys(a: &Cert, keys: Vec<Vec<u8>>) -> Arc<DownstreamTls> {
    build(DownstreamTlsSpec {
        ticket_keys: keys,
        session_cache: false,
        ..spec(&[a], &["http/1.1"])
    })
}

#[test]
fn gateways_sharing_session_ticket_keys_resume_each_other_s_sessions() {
    let a = cert(&["a.example"]);
    let key = |fill: u8| vec![fill; engine::tls::TICKET_KEY_LEN];
    let (_gw1, first, _b1) = gateway(tls_with_ticket_keys(&a, vec![key(1)]), None);
    // The second holds a newer key first and the shared one after it.
    let (gw2, second, _b2) = gateway(tls_with_ticket_keys(&a, vec![key(2), key(1)]), None);
    let (gw3, stranger, _b3) = gateway(tls_with_ticket_keys(&a, vec![key(3)]), None);
    let cfg = client_config(&[&a], &["http/1.1"]);
    let mut s = tls_connect(first, &cfg, "a.example");
    assert_eq!(tls_get(&mut s).0, 200);
    let mut s = tls_connect(second, &cfg, "a.example");
    assert_eq!(tls_get(&mut s).0, 200);
    assert_eq!(
        s.conn.handshake_kind(),
        Some(rustls::HandshakeKind::Resumed),
        "the first gateway's ticket opens on the second"
    );
    let reused = |gw: &gateway::GatewayHandle| {
        metric(
            gw.admin_addr.unwrap(),
            "gateway_downstream_tls_session_reused",
        )
    };
    assert_eq!(reused(&gw2), 1.0);
    let mut s = tls_connect(stranger, &cfg, "a.example");
    assert_eq!(tls_get(&mut s).0, 200);
    assert_eq!(s.conn.handshake_kind(), Some(rustls::HandshakeKind::Full));
    assert_eq!(reused(&gw3), 0.0, "other keys: a full handshake");
}

#[test]
fn bad_and_stalled_handshakes_are_counted_and_hurt_no_one() {
    let a = cert(&["a.example"]);
    let (gw, addr, _b) = gateway(
        tls_for(&[&a], &["http/1.1"]),
        Some(Duration::from_millis(300)),
    );
    let admin = gw.admin_addr.unwrap();
    // Plaintext to a TLS port: refused at once.
    let mut plain = std::net::TcpStream::connect(addr).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    plain
        .write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 512];
    while matches!(plain.read(&mut buf), Ok(n) if n > 0) {}
    // Silent: cut off at the handshake deadline (the idle timeout here).
    let t0 = Instant::now();
    let mut silent = std::net::TcpStream::connect(addr).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut victim = tls_connect(addr, &client_config(&[&a], &[]), "a.example");
    assert_eq!(tls_get(&mut victim).0, 200);
    assert!(
        matches!(silent.read(&mut buf), Ok(0)),
        "closed, not timed out"
    );
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(3),
        "closed after {waited:?}"
    );
    assert_eq!(tls_get(&mut victim).0, 200, "still served");
    // Half a ClientHello, then gone: abandoned, not refused.
    let mut half = std::net::TcpStream::connect(addr).unwrap();
    half.write_all(&[0x16, 0x03, 0x01, 0x00, 0x80, 0x01])
        .unwrap();
    drop(half);
    wait_until(Duration::from_secs(2), "each counted", || {
        metric(admin, "gateway_downstream_tls_handshake_error") == 1.0
            && metric(admin, "gateway_downstream_tls_handshake_timeout") == 1.0
            && metric(admin, "gateway_downstream_tls_handshake_abandoned") == 1.0
    });
}

/// A bootstrap whose listener reads its certificate from `dir`'s files.
fn file_bootstrap(dir: &std::path::Path, backend: SocketAddr) -> engine::Bootstrap {
    let yaml = format!(
        "admin: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }} }}\n\
         static_resources:\n  listeners:\n  - name: ingress\n    \
         address: {{ socket_address: {{ address: 127.0.0.1, port_value: 0 }} }}\n    \
         filter_chains:\n    - name: main\n{}{}  clusters:\n{}",
        support::yaml::tls_socket(&dir.join("cert.pem"), &dir.join("key.pem")),
        support::yaml::hcm("backend"),
        support::yaml::h2_cluster("backend", backend),
    );
    xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml).expect("valid bootstrap")
}

/// Writes `c` as `dir`'s certificate and key, each by an atomic rename.
fn install(dir: &std::path::Path, c: &Cert) {
    for (name, text) in [("cert.pem", &c.pem.0), ("key.pem", &c.pem.1)] {
        let tmp = dir.join(format!("{name}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, dir.join(name)).unwrap();
    }
}

#[test]
fn changed_certificate_files_are_loaded_without_dropping_connections() {
    let dir = std::env::temp_dir().join(format!("gw-tls-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (old, new) = (cert(&["a.example"]), cert(&["a.example"]));
    install(&dir, &old);
    let b = backend("b1");
    let gw = start(file_bootstrap(&dir, b.addr()), 1);
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.unwrap();
    let mut kept = tls_connect(addr, &client_config(&[&old], &[]), "a.example");
    assert_eq!(tls_get(&mut kept).0, 200);

    install(&dir, &new);
    wait_until(
        Duration::from_secs(10),
        "the new certificate served",
        || {
            let tcp = std::net::TcpStream::connect(addr).unwrap();
            let conn = rustls::ClientConnection::new(
                client_config(&[&new], &[]),
                ServerName::try_from("a.example").unwrap(),
            )
            .unwrap();
            let mut s = rustls::StreamOwned::new(conn, tcp);
            while s.conn.is_handshaking() {
                if s.conn.complete_io(&mut s.sock).is_err() {
                    return false;
                }
            }
            true
        },
    );
    assert!(metric(admin, "gateway_tls_certificate_reloads_total") >= 1.0);
    assert_eq!(tls_get(&mut kept).0, 200, "the open connection goes on");

    // A broken file: counted, and the current certificate stays.
    let failed = metric(admin, "gateway_tls_certificate_reload_failures_total");
    std::fs::write(dir.join("cert.pem.tmp"), "not a certificate").unwrap();
    std::fs::rename(dir.join("cert.pem.tmp"), dir.join("cert.pem")).unwrap();
    wait_until(Duration::from_secs(10), "the failure counted", || {
        metric(admin, "gateway_tls_certificate_reload_failures_total") > failed
    });
    let mut s = tls_connect(addr, &client_config(&[&new], &[]), "a.example");
    assert_eq!(tls_get(&mut s).0, 200);
    gw.shutdown();
    std::fs::remove_dir_all(&dir).ok();
}

/// A CA, and a client certificate it signed: (CA certificate, client
/// chain, client key).
fn client_pki() -> (
    CertificateDer<'static>,
    Vec<CertificateDer<'static>>,
    Vec<u8>,
) {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("ca");
    let key = rcgen::KeyPair::generate().expect("key");
    let leaf = rcgen::CertificateParams::new(vec!["client.example".to_string()])
        .expect("params")
        .signed_by(&key, &ca, &ca_key)
        .expect("leaf");
    (
        ca.der().clone(),
        vec![leaf.der().clone()],
        key.serialize_der(),
    )
}

fn mtls_gateway(
    server: &Cert,
    ca: &CertificateDer<'static>,
    required: bool,
) -> (
    gateway::GatewayHandle,
    SocketAddr,
    demo_backend::BackendHandle,
) {
    mtls_gateway_matching(server, ca, required, vec![])
}

fn mtls_gateway_matching(
    server: &Cert,
    ca: &CertificateDer<'static>,
    required: bool,
    san_matchers: Vec<engine::tls::SanMatcher>,
) -> (
    gateway::GatewayHandle,
    SocketAddr,
    demo_backend::BackendHandle,
) {
    let auth = engine::tls::ClientAuthSpec {
        roots: vec![ca.clone()],
        required,
        suppress_ca_list: false,
        san_matchers,
    };
    gateway(tls_with(&[server], &[], Some(auth)), None)
}

/// A client trusting `server`, presenting `identity` if given; `None` if
/// the handshake (or the first request) fails.
fn mtls_get(
    addr: SocketAddr,
    server: &Cert,
    identity: Option<(Vec<CertificateDer<'static>>, Vec<u8>)>,
) -> Option<u16> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(server.der.clone()).unwrap();
    let b = rustls::ClientConfig::builder_with_provider(engine::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let cfg = match identity {
        Some((chain, key)) => b
            .with_client_auth_cert(chain, PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)))
            .unwrap(),
        None => b.with_no_client_auth(),
    };
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let conn =
        rustls::ClientConnection::new(Arc::new(cfg), ServerName::try_from("a.example").unwrap())
            .unwrap();
    let mut s = rustls::StreamOwned::new(conn, tcp);
    // TLS 1.3: the server checks the client's certificate after the
    // client's side of the handshake is done, so a refusal shows on the
    // first read.
    s.write_all(b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n")
        .ok()?;
    let mut buf = [0u8; 256];
    let n = s.read(&mut buf).ok()?;
    String::from_utf8_lossy(&buf[..n]).get(9..12)?.parse().ok()
}

#[test]
fn client_certificates_are_required_and_checked() {
    let server = cert(&["a.example"]);
    let (ca, chain, key) = client_pki();
    let (_, stranger_chain, stranger_key) = client_pki();
    let (gw, addr, _b) = mtls_gateway(&server, &ca, true);
    assert_eq!(
        mtls_get(addr, &server, Some((chain.clone(), key.clone()))),
        Some(200)
    );
    assert_eq!(mtls_get(addr, &server, None), None, "no certificate");
    assert_eq!(
        mtls_get(addr, &server, Some((stranger_chain, stranger_key))),
        None,
        "a certificate of another CA"
    );
    let admin = gw.admin_addr.unwrap();
    wait_until(Duration::from_secs(2), "refusals counted", || {
        metric(admin, "gateway_downstream_tls_handshake_error") == 2.0
    });

    // Not required: a client without a certificate is served too.
    let (_gw, addr, _b) = mtls_gateway(&server, &ca, false);
    assert_eq!(mtls_get(addr, &server, None), Some(200));
    assert_eq!(mtls_get(addr, &server, Some((chain, key))), Some(200));
}

#[test]
fn client_certificates_must_carry_a_name_the_matchers_take() {
    use engine::tls::{SanMatcher, SanType};
    let server = cert(&["a.example"]);
    let (ca, chain, key) = client_pki();
    let matcher = |name: &str| SanMatcher {
        san_type: SanType::Dns,
        matcher: engine::HeaderMatchKind::Exact(name.into()),
    };
    let (_gw, addr, _b) =
        mtls_gateway_matching(&server, &ca, true, vec![matcher("client.example")]);
    assert_eq!(
        mtls_get(addr, &server, Some((chain.clone(), key.clone()))),
        Some(200)
    );
    let (gw, addr, _b) = mtls_gateway_matching(&server, &ca, true, vec![matcher("other.example")]);
    assert_eq!(
        mtls_get(addr, &server, Some((chain, key))),
        None,
        "a good chain without a matching name"
    );
    let admin = gw.admin_addr.unwrap();
    wait_until(Duration::from_secs(2), "refusal counted", || {
        metric(admin, "gateway_downstream_tls_handshake_error") == 1.0
    });
}

#[test]
fn a_self_signed_client_certificate_in_trusted_ca_is_taken_as_it_is() {
    // `openssl req -x509` makes CA:TRUE certificates; BoringSSL (Envoy)
    // takes one found in the trust store as a client's certificate.
    let server = cert(&["a.example"]);
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(vec!["client.example".to_string()]).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let own = params.self_signed(&key).expect("cert");
    let (gw, addr, _b) = mtls_gateway(&server, own.der(), true);
    assert_eq!(
        mtls_get(
            addr,
            &server,
            Some((vec![own.der().clone()], key.serialize_der()))
        ),
        Some(200)
    );
    // Another self-signed certificate is still refused.
    let (_, stranger_chain, stranger_key) = client_pki();
    assert_eq!(
        mtls_get(addr, &server, Some((stranger_chain, stranger_key))),
        None
    );
    drop(gw);
}

#[test]
fn a_tls_client_that_reads_nothing_is_still_closed() {
    let a = cert(&["a.example"]);
    let b = backend("b1");
    let mut l = (*listener(vec![prefix_route("/", "c", None)])).clone();
    l.filter_chains[0].tls = Some(tls_for(&[&a], &["http/1.1"]));
    // The stream ends at 300 ms; over HTTP/1.1 that closes the connection,
    // whose last writes (and TLS close_notify) find its socket full.
    l.filter_chains[0].http.max_stream_duration = Some(Duration::from_millis(300));
    let gw = start(bootstrap(Arc::new(l), vec![cluster("c", &[b.addr()])]), 1);
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.unwrap();
    let mut s = tls_connect(addr, &client_config(&[&a], &[]), "a.example");
    s.write_all(b"GET / HTTP/1.1\r\nHost: a.example\r\nx-response-size: 50000000\r\n\r\n")
        .unwrap();
    // Never read: the gateway must give up on its writes on its own.
    wait_until(Duration::from_secs(10), "the connection closed", || {
        metric(admin, "gateway_downstream_cx_active") == 0.0
    });
    drop(s);
}
