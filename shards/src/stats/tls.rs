//! Envoy's `ssl.*` of one listener or cluster on one shard: handshakes, their failures by cause, and the versions, cipher suites and key-exchange groups chosen, under BoringSSL's names (what Envoy's series carry).
//!
//! Counted once per handshake, never per request: the by-name counts sit
//! behind a lock the admin's reads share.

use std::io;
use std::sync::Mutex;

use rustls::{CipherSuite, NamedGroup, ProtocolVersion};

use super::Counter;

/// A listener's or a cluster's TLS handshakes on one shard.
#[derive(Debug, Default)]
pub struct TlsStats {
    /// Handshakes done, resumed ones included.
    pub handshake: Counter,
    pub session_reused: Counter,
    /// Done without a peer certificate.
    pub no_certificate: Counter,
    /// Refused for a reason other than the peer's certificate: no common
    /// version or suite, bytes that are no TLS.
    pub connection_error: Counter,
    /// The peer's certificate did not verify: its chain, its names
    /// (`match_subject_alt_names`), or none came where one is required.
    pub fail_verify_error: Counter,
    pub fail_verify_san: Counter,
    pub fail_verify_no_cert: Counter,
    /// By name, made at a name's first handshake (as Envoy's).
    versions: Named,
    ciphers: Named,
    curves: Named,
}

/// Counts by name, few names each.
#[derive(Debug, Default)]
struct Named(Mutex<Vec<(String, u64)>>);

impl Named {
    fn inc(&self, name: String) {
        let mut names = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match names.iter_mut().find(|(n, _)| *n == name) {
            Some((_, c)) => *c += 1,
            None => names.push((name, 1)),
        }
    }

    fn all(&self) -> Vec<(String, u64)> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Why a handshake failed, as Envoy counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsFailure {
    VerifyError,
    VerifySan,
    VerifyNoCert,
    /// Anything else rustls refused.
    Connection,
}

impl TlsFailure {
    /// The cause of a handshake's error, if it is rustls's (an error of
    /// the socket itself is not a failed handshake).
    pub fn of(e: &io::Error) -> Option<Self> {
        if e.kind() != io::ErrorKind::InvalidData {
            return None;
        }
        let tls = e.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>());
        Some(match tls {
            Some(rustls::Error::InvalidCertificate(c)) => match c {
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. } => Self::VerifySan,
                _ => Self::VerifyError,
            },
            Some(rustls::Error::NoCertificatesPresented) => Self::VerifyNoCert,
            _ => Self::Connection,
        })
    }
}

impl TlsStats {
    /// A handshake completed on `conn`.
    pub fn handshake_done(&self, conn: &rustls::CommonState) {
        self.handshake.inc();
        if conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
            self.session_reused.inc();
        }
        if conn.peer_certificates().is_none_or(|c| c.is_empty()) {
            self.no_certificate.inc();
        }
        if let Some(v) = conn.protocol_version() {
            self.versions.inc(version_name(v));
        }
        if let Some(s) = conn.negotiated_cipher_suite() {
            self.ciphers.inc(cipher_name(s.suite()));
        }
        if let Some(g) = conn.negotiated_key_exchange_group() {
            self.curves.inc(group_name(g.name()));
        }
    }

    pub fn failed(&self, why: TlsFailure) {
        match why {
            TlsFailure::VerifyError => &self.fail_verify_error,
            TlsFailure::VerifySan => &self.fail_verify_san,
            TlsFailure::VerifyNoCert => &self.fail_verify_no_cert,
            TlsFailure::Connection => &self.connection_error,
        }
        .inc();
    }

    /// Handshakes by version (`TLSv1.3`), cipher suite and key-exchange
    /// group (Envoy's `versions.*`, `ciphers.*`, `curves.*`).
    pub fn by_name(&self) -> [Vec<(String, u64)>; 3] {
        [self.versions.all(), self.ciphers.all(), self.curves.all()]
    }
}

fn version_name(v: ProtocolVersion) -> String {
    match v {
        ProtocolVersion::TLSv1_3 => "TLSv1.3".into(),
        ProtocolVersion::TLSv1_2 => "TLSv1.2".into(),
        other => format!("{other:?}"),
    }
}

/// BoringSSL's (OpenSSL's) name of a suite rustls negotiates.
fn cipher_name(s: CipherSuite) -> String {
    match s {
        CipherSuite::TLS13_AES_128_GCM_SHA256 => "TLS_AES_128_GCM_SHA256",
        CipherSuite::TLS13_AES_256_GCM_SHA384 => "TLS_AES_256_GCM_SHA384",
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256 => "TLS_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 => "ECDHE-ECDSA-AES128-GCM-SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 => "ECDHE-ECDSA-AES256-GCM-SHA384",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256 => {
            "ECDHE-ECDSA-CHACHA20-POLY1305"
        }
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => "ECDHE-RSA-AES128-GCM-SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => "ECDHE-RSA-AES256-GCM-SHA384",
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => "ECDHE-RSA-CHACHA20-POLY1305",
        other => return format!("{other:?}"),
    }
    .into()
}

/// BoringSSL's name of a key-exchange group.
fn group_name(g: NamedGroup) -> String {
    match g {
        NamedGroup::X25519 => "X25519",
        NamedGroup::secp256r1 => "P-256",
        NamedGroup::secp384r1 => "P-384",
        NamedGroup::secp521r1 => "P-521",
        NamedGroup::X25519MLKEM768 => "X25519MLKEM768",
        other => return format!("{other:?}"),
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_boringssls() {
        assert_eq!(version_name(ProtocolVersion::TLSv1_3), "TLSv1.3");
        assert_eq!(
            cipher_name(CipherSuite::TLS13_AES_256_GCM_SHA384),
            "TLS_AES_256_GCM_SHA384"
        );
        assert_eq!(
            cipher_name(CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
            "ECDHE-RSA-CHACHA20-POLY1305"
        );
        assert_eq!(group_name(NamedGroup::secp256r1), "P-256");
        assert_eq!(group_name(NamedGroup::X25519), "X25519");
    }

    #[test]
    fn failures_are_told_apart_by_rustls_error() {
        let wrap = |e: rustls::Error| io::Error::new(io::ErrorKind::InvalidData, e);
        let name = rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName);
        assert_eq!(TlsFailure::of(&wrap(name)), Some(TlsFailure::VerifySan));
        let issuer = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        assert_eq!(TlsFailure::of(&wrap(issuer)), Some(TlsFailure::VerifyError));
        assert_eq!(
            TlsFailure::of(&wrap(rustls::Error::NoCertificatesPresented)),
            Some(TlsFailure::VerifyNoCert)
        );
        let garbage = rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType);
        assert_eq!(TlsFailure::of(&wrap(garbage)), Some(TlsFailure::Connection));
        let gone = io::Error::from(io::ErrorKind::ConnectionReset);
        assert_eq!(TlsFailure::of(&gone), None);
        let s = TlsStats::default();
        s.failed(TlsFailure::VerifySan);
        assert_eq!(s.fail_verify_san.get(), 1);
    }
}
