//! A TLS client for tests (rustls, blocking), self-signed certificates, and one HTTP/1.1 GET over it.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, ServerName};

/// A self-signed certificate for `names`: what the server presents and
/// the client trusts.
pub struct Cert {
    pub der: CertificateDer<'static>,
    pub key: Vec<u8>,
    /// The same, as PEM files hold them.
    pub pem: (String, String),
}

pub fn cert(names: &[&str]) -> Cert {
    let key = rcgen::KeyPair::generate().expect("key");
    let params =
        rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .expect("params");
    let c = params.self_signed(&key).expect("cert");
    Cert {
        der: c.der().clone(),
        key: key.serialize_der(),
        pem: (c.pem(), key.serialize_pem()),
    }
}

pub fn client_config(trust: &[&Cert], alpn: &[&str]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in trust {
        roots.add(c.der.clone()).expect("root");
    }
    let mut cfg = rustls::ClientConfig::builder_with_provider(engine::tls::provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    Arc::new(cfg)
}

pub type Tls = rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream>;

pub fn tls_connect(addr: SocketAddr, cfg: &Arc<rustls::ClientConfig>, sni: &str) -> Tls {
    tls_handshake(addr, cfg, sni).expect("handshake")
}

/// A TLS connection to `addr` for `sni`, or the error its handshake ended
/// with (a refused or closed connection, a certificate not trusted).
pub fn tls_handshake(
    addr: SocketAddr,
    cfg: &Arc<rustls::ClientConfig>,
    sni: &str,
) -> std::io::Result<Tls> {
    let tcp = std::net::TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let conn = rustls::ClientConnection::new(
        Arc::clone(cfg),
        ServerName::try_from(sni.to_string()).unwrap(),
    )
    .expect("client");
    let mut s = rustls::StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn.complete_io(&mut s.sock)?;
    }
    Ok(s)
}

/// One HTTP/1.1 GET on `s`: the status and body (content-length framing).
pub fn tls_get(s: &mut Tls) -> (u16, Vec<u8>) {
    let (status, _, body) = http1_get(s);
    (status, body)
}

/// One HTTP/1.1 GET on any stream: the status, the head as text, and the
/// body (content-length framing).
pub fn http1_get(s: &mut (impl Read + Write)) -> (u16, String, Vec<u8>) {
    s.write_all(b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).expect("read");
        assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&buf));
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let len: usize = text[..end]
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .expect("a length")
                .parse()
                .unwrap();
            if buf.len() >= end + 4 + len {
                let status = text[9..12].parse().unwrap();
                return (
                    status,
                    text[..end].to_string(),
                    buf[end + 4..end + 4 + len].to_vec(),
                );
            }
        }
    }
}

/// A test server's TLS: `cert`, offering `alpn`.
pub fn server_config(cert: &Cert, alpn: &[&str]) -> Arc<rustls::ServerConfig> {
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key.clone().into());
    let mut cfg = rustls::ServerConfig::builder_with_provider(engine::tls::provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert.der.clone()], key)
        .expect("server config");
    cfg.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
    Arc::new(cfg)
}
