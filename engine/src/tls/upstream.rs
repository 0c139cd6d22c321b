//! Upstream TLS as a cluster's `UpstreamTlsContext` sets it: SNI, ALPN, versions, suites and groups, a client certificate, and server certificates checked the way Envoy checks them; built into one rustls `ClientConfig`.
//!
//! Envoy's checks differ from a browser's, and a proxy in its place must
//! behave like it, or configs that work there break here:
//!
//! - without `validation_context` the server's certificate is not checked
//!   at all (only the handshake's own signatures are);
//! - with `trusted_ca`, the chain must lead to one of those roots and be
//!   valid now, but the certificate's names are not compared with `sni`
//!   (Envoy checks names only through `match_typed_subject_alt_names`):
//!   backends are often reached by IP, with certificates naming a service.

use std::net::SocketAddr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, SignatureScheme};

use super::common::{provider_for, trusted_as_is, CertificateSpec, Expiry, TlsError, TlsVersion};
use super::san::{self, SanMatcher};

/// What an `UpstreamTlsContext` asks for, decoded (files read, PEM parsed).
#[derive(Debug)]
pub struct UpstreamTlsSpec {
    /// `sni`: sent, and used for nothing else; `None`: no SNI.
    pub sni: Option<String>,
    /// `alpn_protocols`, or the cluster's protocols when none are set.
    pub alpn: Vec<Vec<u8>>,
    /// Whether `alpn` is the context's own `alpn_protocols` (not filled in
    /// from the cluster's protocols): active health checks offer only
    /// that, as Envoy's do.
    pub alpn_configured: bool,
    pub min_version: TlsVersion,
    pub max_version: TlsVersion,
    /// BoringSSL names; empty: rustls's defaults.
    pub cipher_suites: Vec<String>,
    pub ecdh_curves: Vec<String>,
    /// A client certificate for backends that ask for one (mTLS).
    pub client_certificate: Option<CertificateSpec>,
    /// `validation_context.trusted_ca`; `None`: the server's certificate is
    /// not checked (Envoy's behaviour without a validation context).
    pub trusted_ca: Option<Vec<CertificateDer<'static>>>,
    /// `match_typed_subject_alt_names` (with `trusted_ca` only): the
    /// server's certificate must also have a name one of these takes.
    pub san_matchers: Vec<SanMatcher>,
    /// `max_session_keys` (Envoy's default 1): sessions kept per server
    /// name for resumption; 0 turns resumption off.
    pub max_session_keys: usize,
}

/// A cluster's upstream TLS, built once per configuration and shared by
/// every connection of every shard through the snapshot.
pub struct UpstreamTls {
    pub config: Arc<ClientConfig>,
    pub sni: Option<String>,
    pub alpn: Vec<String>,
    /// What an active health check offers in ALPN without its own
    /// `tls_options.alpn_protocols`: the context's configured list (none
    /// when the pools' list was filled in from the cluster's protocols).
    pub check_alpn: Vec<Vec<u8>>,
    /// Whether server certificates are checked (`trusted_ca` given).
    pub verifies: bool,
    /// When its client certificate and its trusted CAs expire.
    pub expiry: Expiry,
    sni_name: Option<ServerName<'static>>,
    /// A digest of everything the context was built from: two contexts
    /// with the same one make the same connections (each configuration
    /// push builds a new context, so pointers cannot tell).
    fingerprint: u64,
}

impl PartialEq for UpstreamTls {
    fn eq(&self, other: &Self) -> bool {
        self.fingerprint == other.fingerprint
    }
}

impl std::fmt::Debug for UpstreamTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamTls")
            .field("sni", &self.sni)
            .field("alpn", &self.alpn)
            .field("verifies", &self.verifies)
            .finish_non_exhaustive()
    }
}

impl UpstreamTls {
    pub fn build(spec: UpstreamTlsSpec) -> Result<Self, TlsError> {
        let fingerprint = fingerprint(&spec);
        let (provider, versions) = provider_for(
            spec.min_version,
            spec.max_version,
            &spec.cipher_suites,
            &spec.ecdh_curves,
        )?;
        let provider = Arc::new(provider);
        let sni_name = match &spec.sni {
            None => None,
            Some(s) => Some(
                ServerName::try_from(s.clone())
                    .map_err(|e| TlsError::Rustls(format!("sni {s:?}: {e}")))?,
            ),
        };
        let verifies = spec.trusted_ca.is_some();
        let expiry = Expiry::of(
            spec.client_certificate
                .iter()
                .filter_map(|c| c.chain.first()),
            spec.trusted_ca.iter().flatten(),
        );
        let verifier: Arc<dyn ServerCertVerifier> = match spec.trusted_ca {
            Some(roots) => Arc::new(ChainOnly::new(roots, spec.san_matchers, &provider)?),
            None => Arc::new(Unchecked(Arc::clone(&provider))),
        };
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&versions)
            .map_err(|e| TlsError::Rustls(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let mut config = match spec.client_certificate {
            None => builder.with_no_client_auth(),
            Some(cert) => builder
                .with_client_auth_cert(cert.chain, cert.key)
                .map_err(|e| TlsError::Certificate {
                    index: 0,
                    reason: e.to_string(),
                })?,
        };
        config.alpn_protocols = spec.alpn.clone();
        let check_alpn = if spec.alpn_configured {
            spec.alpn.clone()
        } else {
            Vec::new()
        };
        config.resumption = if spec.max_session_keys == 0 {
            rustls::client::Resumption::disabled()
        } else {
            rustls::client::Resumption::in_memory_sessions(spec.max_session_keys)
        };
        Ok(Self {
            config: Arc::new(config),
            alpn: spec
                .alpn
                .iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect(),
            sni: spec.sni,
            check_alpn,
            verifies,
            expiry,
            sni_name,
            fingerprint,
        })
    }

    /// The name a connection to `addr` is opened with: the configured SNI,
    /// else the address itself (rustls sends no SNI for an IP address, as
    /// Envoy sends none without `sni`).
    pub fn server_name(&self, addr: SocketAddr) -> ServerName<'static> {
        match &self.sni_name {
            Some(n) => n.clone(),
            None => ServerName::IpAddress(addr.ip().into()),
        }
    }

    /// The same context offering exactly `alpn` (none when empty): an
    /// active health check's. Session resumption is shared with the
    /// original.
    pub fn with_alpn(self: &Arc<Self>, alpn: &[Vec<u8>]) -> Arc<Self> {
        if self.config.alpn_protocols == alpn {
            return Arc::clone(self);
        }
        let mut config = (*self.config).clone();
        config.alpn_protocols = alpn.to_vec();
        let fingerprint = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (self.fingerprint, alpn).hash(&mut h);
            h.finish()
        };
        Arc::new(Self {
            config: Arc::new(config),
            alpn: alpn
                .iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect(),
            sni: self.sni.clone(),
            check_alpn: self.check_alpn.clone(),
            verifies: self.verifies,
            expiry: self.expiry,
            sni_name: self.sni_name.clone(),
            fingerprint,
        })
    }
}

/// A digest of a spec (its certificates and key included).
fn fingerprint(spec: &UpstreamTlsSpec) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (&spec.sni, &spec.alpn, spec.min_version, spec.max_version).hash(&mut h);
    spec.alpn_configured.hash(&mut h);
    (
        &spec.cipher_suites,
        &spec.ecdh_curves,
        spec.max_session_keys,
    )
        .hash(&mut h);
    if let Some(c) = &spec.client_certificate {
        c.chain.hash(&mut h);
        c.key.secret_der().hash(&mut h);
    }
    spec.trusted_ca.hash(&mut h);
    // Matchers hold regexes, which do not hash: their description does.
    format!("{:?}", spec.san_matchers).hash(&mut h);
    h.finish()
}

/// Checks the chain against `trusted_ca` (validity period, key usage,
/// signatures), and the names only through `match_typed_subject_alt_names`,
/// never against the SNI: Envoy's check.
#[derive(Debug)]
struct ChainOnly(
    Arc<WebPkiServerVerifier>,
    Vec<SanMatcher>,
    Vec<CertificateDer<'static>>,
);

impl ChainOnly {
    fn new(
        roots: Vec<CertificateDer<'static>>,
        matchers: Vec<SanMatcher>,
        provider: &Arc<CryptoProvider>,
    ) -> Result<Self, TlsError> {
        let mut store = rustls::RootCertStore::empty();
        for root in &roots {
            store
                .add(root.clone())
                .map_err(|e| TlsError::TrustedCa(e.to_string()))?;
        }
        if store.is_empty() {
            return Err(TlsError::TrustedCa("no certificate in it".into()));
        }
        WebPkiServerVerifier::builder_with_provider(Arc::new(store), Arc::clone(provider))
            .build()
            .map(|v| Self(v, matchers, roots))
            .map_err(|e| TlsError::TrustedCa(e.to_string()))
    }
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // webpki compares the name last, once the chain has verified: a
        // name mismatch therefore means the chain is good.
        let verified = match self.0.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => ServerCertVerified::assertion(),
            // webpki's refusal of a CA certificate as an end entity comes
            // as an `Other` error: whatever it is, a certificate that is
            // itself trusted and valid now is taken.
            Err(rustls::Error::InvalidCertificate(_))
                if trusted_as_is(end_entity, &self.2, now) =>
            {
                ServerCertVerified::assertion()
            }
            other => other?,
        };
        if san::accepts(&self.1, end_entity) {
            Ok(verified)
        } else {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// No `validation_context`: any certificate is taken (Envoy's behaviour),
/// but the handshake's signatures must still be made by its key, so the
/// session is at least with whoever holds that key.
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls::SanType;

    fn provider() -> Arc<CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    /// A CA (self-signed, CA:TRUE, as `openssl req -x509` makes) and a
    /// leaf for `api.internal` it signed.
    fn pki() -> (CertificateDer<'static>, CertificateDer<'static>) {
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(vec!["ca.internal".to_string()]).expect("p");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&ca_key).expect("ca");
        let key = rcgen::KeyPair::generate().expect("key");
        let leaf = rcgen::CertificateParams::new(vec!["api.internal".to_string()])
            .expect("p")
            .signed_by(&key, &ca, &ca_key)
            .expect("leaf");
        (ca.der().clone(), leaf.der().clone())
    }

    fn verify(v: &ChainOnly, cert: &CertificateDer<'_>, name: &str) -> bool {
        let name = ServerName::try_from(name.to_string()).expect("name");
        v.verify_server_cert(cert, &[], &name, &[], UnixTime::now())
            .is_ok()
    }

    #[test]
    fn the_chain_is_checked_but_not_the_name_unless_matchers_say() {
        let (ca, leaf) = pki();
        let (other_ca, _) = pki();
        let v = ChainOnly::new(vec![ca.clone()], vec![], &provider()).expect("verifier");
        assert!(verify(&v, &leaf, "api.internal"));
        assert!(
            verify(&v, &leaf, "anything.else"),
            "Envoy does not compare names"
        );
        let stranger = ChainOnly::new(vec![other_ca], vec![], &provider()).expect("verifier");
        assert!(!verify(&stranger, &leaf, "api.internal"));
        let dns = |n: &str| SanMatcher {
            san_type: SanType::Dns,
            matcher: crate::matcher::HeaderMatchKind::Exact(n.into()),
        };
        let matching = ChainOnly::new(vec![ca.clone()], vec![dns("api.internal")], &provider())
            .expect("verifier");
        assert!(verify(&matching, &leaf, "x"));
        let other =
            ChainOnly::new(vec![ca], vec![dns("web.internal")], &provider()).expect("verifier");
        assert!(!verify(&other, &leaf, "api.internal"));
    }

    #[test]
    fn a_self_signed_ca_certificate_in_trusted_ca_is_taken_as_it_is() {
        let (ca, _) = pki();
        let (other, _) = pki();
        let v = ChainOnly::new(vec![ca.clone()], vec![], &provider()).expect("verifier");
        assert!(verify(&v, &ca, "ca.internal"));
        assert!(!verify(&v, &other, "ca.internal"), "not in the trust store");
        // rcgen certificates run to 4096.
        let later = UnixTime::since_unix_epoch(std::time::Duration::from_secs(80_000_000_000));
        assert!(
            !trusted_as_is(&ca, std::slice::from_ref(&ca), later),
            "expired by then"
        );
    }
}
