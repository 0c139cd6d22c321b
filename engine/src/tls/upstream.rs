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
use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, SignatureScheme};

use super::common::{provider_for, trusted_as_is, CertificateSpec, Expiry, TlsError, TlsVersion};
use super::san::{self, SanMatcher};
use super::source::{Sourced, TlsSource};

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

/// What a rotation replaces as one: the rustls config and the expiry
/// shown with it.
#[derive(Debug)]
pub struct UpstreamState {
    pub config: Arc<ClientConfig>,
    /// When its client certificate and its trusted CAs expire.
    pub expiry: Expiry,
}

/// What an `UpstreamTlsContext` says before any secret is read: enough
/// to name, compare and show a context still waiting for its secrets.
#[derive(Debug, Clone)]
pub struct UpstreamMeta {
    pub sni: Option<String>,
    /// `alpn_protocols`, or the cluster's protocols when none are set.
    pub alpn: Vec<Vec<u8>>,
    /// Whether `alpn` is the context's own.
    pub alpn_configured: bool,
    /// Whether server certificates are checked (a validation context).
    pub verifies: bool,
    /// A digest of the context as configured (its secrets by name): two
    /// equal ones make the same connections, whatever the secrets hold
    /// now, since a secret's change is read into the context in place.
    pub fingerprint: u64,
}

/// A cluster's upstream TLS, built once per configuration and shared by
/// every connection of every shard through the snapshot; its build is
/// swapped in place when its files or SDS secrets change.
pub struct UpstreamTls {
    /// Shared with the same context offering a health check's ALPN
    /// ([`Self::with_alpn`]), so both follow a rotation.
    tls: Arc<Sourced<UpstreamTlsSpec, UpstreamState>>,
    pub sni: Option<String>,
    pub alpn: Vec<String>,
    /// What an active health check offers in ALPN without its own
    /// `tls_options.alpn_protocols`: the context's configured list (none
    /// when the pools' list was filled in from the cluster's protocols).
    pub check_alpn: Vec<Vec<u8>>,
    /// Whether server certificates are checked (`trusted_ca` given).
    pub verifies: bool,
    sni_name: Option<ServerName<'static>>,
    /// A health check's ALPN, put on each build's config when it connects.
    alpn_override: Option<Vec<Vec<u8>>>,
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
            .field("secrets", &self.tls.secrets())
            .finish_non_exhaustive()
    }
}

impl UpstreamTls {
    /// A context built once from `spec`, with nothing to read again.
    pub fn build(spec: UpstreamTlsSpec) -> Result<Self, TlsError> {
        let meta = UpstreamMeta {
            sni: spec.sni.clone(),
            alpn: spec.alpn.clone(),
            alpn_configured: spec.alpn_configured,
            verifies: spec.trusted_ca.is_some(),
            fingerprint: fingerprint(&spec),
        };
        Self::with(meta, Sourced::built(build_state(spec)?))
    }

    /// A context built now from `spec`, which `source` read from `files`:
    /// kept with the recipe to read it again.
    pub fn build_sourced(
        meta: UpstreamMeta,
        spec: UpstreamTlsSpec,
        source: TlsSource<UpstreamTlsSpec>,
        files: Vec<PathBuf>,
    ) -> Result<Self, TlsError> {
        Self::with(meta, Sourced::built_from(build_state(spec)?, source, files))
    }

    /// A context read from `source`: pending until
    /// [`crate::tls::Reloadable::resolve`] finds the secrets it names.
    pub fn from_source(
        meta: UpstreamMeta,
        source: TlsSource<UpstreamTlsSpec>,
    ) -> Result<Self, TlsError> {
        Self::with(meta, Sourced::pending(source))
    }

    fn with(
        meta: UpstreamMeta,
        tls: Sourced<UpstreamTlsSpec, UpstreamState>,
    ) -> Result<Self, TlsError> {
        let sni_name = match &meta.sni {
            None => None,
            Some(s) => Some(
                ServerName::try_from(s.clone())
                    .map_err(|e| TlsError::Rustls(format!("sni {s:?}: {e}")))?,
            ),
        };
        Ok(Self {
            tls: Arc::new(tls),
            alpn: meta
                .alpn
                .iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect(),
            check_alpn: if meta.alpn_configured {
                meta.alpn
            } else {
                Vec::new()
            },
            sni: meta.sni,
            verifies: meta.verifies,
            sni_name,
            alpn_override: None,
            fingerprint: meta.fingerprint,
        })
    }

    /// The config a new connection takes (`None` while a secret it names
    /// has not come).
    pub fn client_config(&self) -> Option<Arc<ClientConfig>> {
        let current = self.tls.load()?;
        Some(match &self.alpn_override {
            None => Arc::clone(&current.config),
            Some(alpn) => {
                // Health checks only: a copy per connection they open.
                let mut config = (*current.config).clone();
                config.alpn_protocols = alpn.clone();
                Arc::new(config)
            }
        })
    }

    /// When its client certificate and trusted CAs expire, once built.
    pub fn expiry(&self) -> Option<Expiry> {
        self.tls.load().map(|c| c.expiry)
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
    /// active health check's. Session resumption and rotations are shared
    /// with the original.
    pub fn with_alpn(self: &Arc<Self>, alpn: &[Vec<u8>]) -> Arc<Self> {
        let offered: Vec<&[u8]> = match &self.alpn_override {
            Some(a) => a.iter().map(Vec::as_slice).collect(),
            None => self.alpn.iter().map(String::as_bytes).collect(),
        };
        if offered.iter().copied().eq(alpn.iter().map(Vec::as_slice)) {
            return Arc::clone(self);
        }
        let fingerprint = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (self.fingerprint, alpn).hash(&mut h);
            h.finish()
        };
        Arc::new(Self {
            tls: Arc::clone(&self.tls),
            alpn: alpn
                .iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect(),
            sni: self.sni.clone(),
            check_alpn: self.check_alpn.clone(),
            verifies: self.verifies,
            sni_name: self.sni_name.clone(),
            alpn_override: Some(alpn.to_vec()),
            fingerprint,
        })
    }
}

super::source::reloadable!(UpstreamTls, build_state);

/// The rustls config a decoded context makes.
fn build_state(spec: UpstreamTlsSpec) -> Result<UpstreamState, TlsError> {
    let (provider, versions) = provider_for(
        spec.min_version,
        spec.max_version,
        &spec.cipher_suites,
        &spec.ecdh_curves,
    )?;
    let provider = Arc::new(provider);
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
    config.alpn_protocols = spec.alpn;
    config.resumption = if spec.max_session_keys == 0 {
        rustls::client::Resumption::disabled()
    } else {
        rustls::client::Resumption::in_memory_sessions(spec.max_session_keys)
    };
    Ok(UpstreamState {
        config: Arc::new(config),
        expiry,
    })
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
