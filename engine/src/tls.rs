//! Downstream TLS as a filter chain's `DownstreamTlsContext` sets it: certificates chosen by SNI and key type, protocol versions, TLS 1.2 cipher suites and key-exchange groups by their Envoy (BoringSSL) names, ALPN, session resumption; built into one rustls `ServerConfig`.
//!
//! Built once per configuration, on the control shard, and shared by the
//! data shards through the snapshot: a handshake clones nothing but the
//! `Arc`. What rustls cannot do (TLS 1.0 and 1.1, CBC and RSA-key-exchange
//! suites, other groups) is an error naming the value, never a silent
//! downgrade of what the operator asked for.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::CertificateDer;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{ServerConfig, SignatureScheme};

/// What a `DownstreamTlsContext` asks for, decoded (files read, PEM parsed).
#[derive(Debug)]
pub struct DownstreamTlsSpec {
    /// In configuration order: the first is the default when no SNI
    /// matches.
    pub certificates: Vec<CertificateSpec>,
    pub alpn: Vec<Vec<u8>>,
    pub min_version: TlsVersion,
    pub max_version: TlsVersion,
    /// BoringSSL names (`ECDHE-ECDSA-AES128-GCM-SHA256`, `[A|B]` groups
    /// flattened by the caller); empty: rustls's defaults.
    pub cipher_suites: Vec<String>,
    /// `X25519`, `P-256`, `P-384`; empty: rustls's defaults.
    pub ecdh_curves: Vec<String>,
    pub require_sni: bool,
    /// Stateless resumption (tickets, keys made by this process).
    pub session_tickets: bool,
    /// `session_ticket_keys` (80 bytes each, the first seals): tickets
    /// every gateway with the same keys opens. Empty: keys this process
    /// makes.
    pub ticket_keys: Vec<Vec<u8>>,
    /// Stateful resumption (a session cache per process).
    pub session_cache: bool,
    /// The server's cipher suite order wins (Envoy's default).
    pub prefer_server_ciphers: bool,
    /// Client certificates (mTLS): asked for and checked against these
    /// roots.
    pub client_auth: Option<ClientAuthSpec>,
}

impl DownstreamTlsSpec {
    /// `certificates` and `alpn` with what an otherwise empty
    /// `DownstreamTlsContext` means: TLS 1.2–1.3, rustls's suites and
    /// curves, session tickets (keys made by this process) and a session
    /// cache, the server's cipher order, no client certificates.
    pub fn new(certificates: Vec<CertificateSpec>, alpn: Vec<Vec<u8>>) -> Self {
        Self {
            certificates,
            alpn,
            min_version: TlsVersion::V1_2,
            max_version: TlsVersion::V1_3,
            cipher_suites: Vec::new(),
            ecdh_curves: Vec::new(),
            require_sni: false,
            session_tickets: true,
            ticket_keys: Vec::new(),
            session_cache: true,
            prefer_server_ciphers: true,
            client_auth: None,
        }
    }
}

/// `validation_context` with `require_client_certificate`: which client
/// certificates a listener takes.
#[derive(Debug)]
pub struct ClientAuthSpec {
    /// `trusted_ca`: the roots a client certificate must chain to.
    pub roots: Vec<CertificateDer<'static>>,
    /// `require_client_certificate`: a client without one fails the
    /// handshake; otherwise a certificate is asked for but optional (one
    /// that is sent must still be valid).
    pub required: bool,
    /// `suppress_client_ca_list`: the CertificateRequest names no CAs.
    pub suppress_ca_list: bool,
    /// `match_typed_subject_alt_names`: a client certificate must also
    /// have a name one of these takes (none: any good chain).
    pub san_matchers: Vec<SanMatcher>,
}

/// What a reload replaces as one: the rustls config and the certificate
/// names shown with it.
#[derive(Debug)]
pub struct TlsState {
    pub config: Arc<ServerConfig>,
    /// The names of each certificate (its SAN's DNS names, else its
    /// subject's common names), in configuration order.
    pub names: Vec<Vec<String>>,
    /// When its certificates and its trusted CAs expire.
    pub expiry: Expiry,
}

/// A listener's downstream TLS: the built rustls config (swapped in place
/// when its certificate files or SDS secrets change, so every snapshot
/// that holds this context sees the new certificates and no listener
/// restarts), and what the admin's config dump shows of it.
pub struct DownstreamTls {
    /// No build while a secret it names has not come: its listener warms.
    tls: Sourced<DownstreamTlsSpec, TlsState>,
    pub alpn: Vec<String>,
    pub min_version: TlsVersion,
    pub max_version: TlsVersion,
}

impl std::fmt::Debug for DownstreamTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state();
        f.debug_struct("DownstreamTls")
            .field("names", &state.as_ref().map(|s| &s.names))
            .field("alpn", &self.alpn)
            .field("secrets", &self.secrets())
            .finish_non_exhaustive()
    }
}

impl DownstreamTls {
    /// The current config and names (`None` while pending); a connection
    /// takes them once, at its handshake.
    pub fn state(&self) -> Option<Arc<Current<TlsState>>> {
        self.tls.load()
    }

    /// A context read from `source` (files or secrets that change): pending
    /// until [`Reloadable::resolve`] finds what it names. `alpn` and the
    /// versions are the context's own, known before any secret.
    pub fn from_source(
        source: TlsSource<DownstreamTlsSpec>,
        alpn: Vec<String>,
        min_version: TlsVersion,
        max_version: TlsVersion,
    ) -> Self {
        Self {
            tls: Sourced::pending(source),
            alpn,
            min_version,
            max_version,
        }
    }

    /// A context built once from `spec`, with nothing to read again.
    pub fn build(spec: DownstreamTlsSpec) -> Result<Self, TlsError> {
        Self::build_with(spec, Sourced::built)
    }

    /// A context built now from `spec`, which `source` read from `files`:
    /// kept with the recipe to read it again.
    pub fn build_sourced(
        spec: DownstreamTlsSpec,
        source: TlsSource<DownstreamTlsSpec>,
        files: Vec<PathBuf>,
    ) -> Result<Self, TlsError> {
        Self::build_with(spec, |state| Sourced::built_from(state, source, files))
    }

    fn build_with(
        spec: DownstreamTlsSpec,
        sourced: impl FnOnce(TlsState) -> Sourced<DownstreamTlsSpec, TlsState>,
    ) -> Result<Self, TlsError> {
        let alpn = spec
            .alpn
            .iter()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        let (min_version, max_version) = (spec.min_version, spec.max_version);
        Ok(Self {
            tls: sourced(build_state(spec)?),
            alpn,
            min_version,
            max_version,
        })
    }
}

source::reloadable!(DownstreamTls, build_state);

/// The rustls config and what is shown of it, from a decoded context.
fn build_state(spec: DownstreamTlsSpec) -> Result<TlsState, TlsError> {
    if spec.certificates.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    let (provider, versions) = provider_for(
        spec.min_version,
        spec.max_version,
        &spec.cipher_suites,
        &spec.ecdh_curves,
    )?;
    let roots = spec
        .client_auth
        .as_ref()
        .map(|a| &a.roots[..])
        .unwrap_or(&[]);
    let leaves = spec.certificates.iter().filter_map(|c| c.chain.first());
    let expiry = Expiry::of(leaves, roots);
    let mut names = Vec::with_capacity(spec.certificates.len());
    let mut keys = Vec::with_capacity(spec.certificates.len());
    for (index, cert) in spec.certificates.into_iter().enumerate() {
        let bad = |reason: String| TlsError::Certificate { index, reason };
        let Some(leaf) = cert.chain.first() else {
            return Err(bad("the chain has no certificate".into()));
        };
        let (dns, spki) = server_identity(leaf).map_err(bad)?;
        let signing = provider
            .key_provider
            .load_private_key(cert.key)
            .map_err(|e| bad(format!("private key: {e}")))?;
        if signing.public_key().is_some_and(|k| k.as_ref() != spki) {
            return Err(bad("the private key does not match the certificate".into()));
        }
        let key = CertifiedKey::new(cert.chain, signing);
        names.push(dns.clone());
        keys.push((Arc::new(key), dns));
    }
    let provider = Arc::new(provider);
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| TlsError::Rustls(e.to_string()))?;
    let builder = match spec.client_auth {
        None => builder.with_no_client_auth(),
        Some(auth) => builder.with_client_cert_verifier(client_verifier(auth, &provider)?),
    };
    let mut config = builder.with_cert_resolver(Arc::new(SniResolver {
        certs: keys,
        require_sni: spec.require_sni,
    }));
    config.alpn_protocols = spec.alpn;
    config.ignore_client_order = spec.prefer_server_ciphers;
    if !spec.ticket_keys.is_empty() {
        config.ticketer = Arc::new(
            tickets::SharedTicketer::new(&spec.ticket_keys).map_err(TlsError::TicketKeys)?,
        );
    } else if spec.session_tickets {
        config.ticketer =
            rustls::crypto::ring::Ticketer::new().map_err(|e| TlsError::Rustls(e.to_string()))?;
    }
    if !spec.session_cache {
        config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    }
    Ok(TlsState {
        config: Arc::new(config),
        names,
        expiry,
    })
}

/// The verifier of client certificates: chains to `trusted_ca`, checked
/// by webpki (validity period, key usage, signatures).
fn client_verifier(
    auth: ClientAuthSpec,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for root in &auth.roots {
        roots
            .add(root.clone())
            .map_err(|e| TlsError::TrustedCa(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(TlsError::TrustedCa("no certificate in it".into()));
    }
    let mut b = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::clone(provider),
    );
    if !auth.required {
        b = b.allow_unauthenticated();
    }
    if auth.suppress_ca_list {
        b = b.clear_root_hint_subjects();
    }
    let inner = b.build().map_err(|e| TlsError::TrustedCa(e.to_string()))?;
    Ok(Arc::new(ClientChecks {
        inner,
        matchers: auth.san_matchers,
        roots: auth.roots,
    }))
}

/// webpki's client verifier, and what Envoy checks beyond it: a name
/// `matchers` take, and a certificate that is itself in `trusted_ca` (a
/// self-signed one, even marked as a CA) taken as it is while valid, as
/// BoringSSL takes it.
#[derive(Debug)]
struct ClientChecks {
    inner: Arc<dyn rustls::server::danger::ClientCertVerifier>,
    matchers: Vec<SanMatcher>,
    roots: Vec<CertificateDer<'static>>,
}

impl rustls::server::danger::ClientCertVerifier for ClientChecks {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        let ok = match self
            .inner
            .verify_client_cert(end_entity, intermediates, now)
        {
            Err(rustls::Error::InvalidCertificate(_))
                if trusted_as_is(end_entity, &self.roots, now) =>
            {
                rustls::server::danger::ClientCertVerified::assertion()
            }
            other => other?,
        };
        if san::accepts(&self.matchers, end_entity) {
            Ok(ok)
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Picks a listener's certificate for a ClientHello: those whose names
/// match the SNI exactly, else by wildcard (`*.example.com` for one
/// label), else all of them (the first is the default); among those, the
/// first whose key can sign with a scheme the client offers (an ECDSA and
/// an RSA certificate for the same names serve old and new clients).
#[derive(Debug)]
struct SniResolver {
    certs: Vec<(Arc<CertifiedKey>, Vec<String>)>,
    require_sni: bool,
}

impl SniResolver {
    fn pick(&self, sni: Option<&str>, schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        let sni = sni.map(str::to_ascii_lowercase);
        if sni.is_none() && self.require_sni {
            return None;
        }
        let exact = |n: &String| Some(n.as_str()) == sni.as_deref();
        let wildcard = |n: &String| {
            let (Some(suffix), Some(sni)) = (n.strip_prefix("*."), sni.as_deref()) else {
                return false;
            };
            sni.split_once('.').is_some_and(|(_, rest)| rest == suffix)
        };
        let by_exact: Vec<&Arc<CertifiedKey>> = self
            .certs
            .iter()
            .filter(|(_, names)| names.iter().any(exact))
            .map(|(k, _)| k)
            .collect();
        let candidates = if !by_exact.is_empty() {
            by_exact
        } else {
            let by_wildcard: Vec<&Arc<CertifiedKey>> = self
                .certs
                .iter()
                .filter(|(_, names)| names.iter().any(wildcard))
                .map(|(k, _)| k)
                .collect();
            if by_wildcard.is_empty() {
                self.certs.iter().map(|(k, _)| k).collect()
            } else {
                by_wildcard
            }
        };
        candidates
            .iter()
            .find(|k| k.key.choose_scheme(schemes).is_some())
            .or(candidates.first())
            .map(|k| Arc::clone(k))
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.pick(hello.server_name(), hello.signature_schemes())
    }
}

/// The provider the gateway's TLS uses (for clients built in tests and
/// tools, to match).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

mod common;
mod san;
mod source;
mod tickets;
mod upstream;
pub use common::{not_after, CertificateSpec, Expiry, TlsError, TlsVersion};
use common::{provider_for, server_identity, trusted_as_is};
pub use san::{peer_identity, SanMatcher, SanType};
pub use source::{
    Current, Rebuild, RebuildError, Rebuilt, Reloadable, Resolution, SdsSecret, SecretMap,
    SecretRef, SecretSource, SecretView, Sourced, Step, TlsSource,
};
pub use tickets::TICKET_KEY_LEN;
pub use upstream::{UpstreamMeta, UpstreamState, UpstreamTls, UpstreamTlsSpec};

#[cfg(test)]
mod tests;
