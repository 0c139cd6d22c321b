//! What downstream and upstream contexts are both built from: protocol
//! versions, a decoded certificate, the errors, the crypto provider for
//! the suites and groups named, and the check that takes a certificate in
//! the trust store as it is.

use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{NamedGroup, SupportedCipherSuite};

/// A TLS protocol version rustls speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TlsVersion {
    V1_2,
    V1_3,
}

/// One certificate chain and its private key, decoded.
#[derive(Debug)]
pub struct CertificateSpec {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

/// Why a TLS context cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    #[error("at least one certificate is required")]
    NoCertificate,
    #[error("certificate {index}: {reason}")]
    Certificate { index: usize, reason: String },
    #[error("cipher suite {0:?} is not supported (rustls offers ECDHE with AES-GCM or CHACHA20-POLY1305 for TLS 1.2; TLS 1.3 suites are not configurable, as in Envoy)")]
    CipherSuite(String),
    #[error("curve {0:?} is not supported (X25519, P-256 and P-384 are)")]
    Curve(String),
    #[error("no cipher suite left for the allowed versions")]
    NoCipherSuite,
    #[error("minimum version above maximum")]
    Versions,
    #[error("trusted_ca: {0}")]
    TrustedCa(String),
    #[error("{0}")]
    TicketKeys(String),
    #[error("{0}")]
    Rustls(String),
}

/// TLS 1.2 suites by their BoringSSL names.
fn suite(name: &str) -> Option<SupportedCipherSuite> {
    use rustls::crypto::ring::cipher_suite as s;
    Some(match name {
        "ECDHE-ECDSA-AES128-GCM-SHA256" => s::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        "ECDHE-RSA-AES128-GCM-SHA256" => s::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        "ECDHE-ECDSA-AES256-GCM-SHA384" => s::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        "ECDHE-RSA-AES256-GCM-SHA384" => s::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        "ECDHE-ECDSA-CHACHA20-POLY1305" => s::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        "ECDHE-RSA-CHACHA20-POLY1305" => s::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        _ => return None,
    })
}

fn group(name: &str) -> Option<NamedGroup> {
    Some(match name {
        "X25519" => NamedGroup::X25519,
        "P-256" => NamedGroup::secp256r1,
        "P-384" => NamedGroup::secp384r1,
        _ => return None,
    })
}

/// A ring provider limited to the TLS 1.2 suites and groups named (empty:
/// rustls's defaults), and the protocol versions from `min` to `max`:
/// what a server and a client context are both built on.
pub(super) fn provider_for(
    min: TlsVersion,
    max: TlsVersion,
    cipher_suites: &[String],
    ecdh_curves: &[String],
) -> Result<
    (
        CryptoProvider,
        Vec<&'static rustls::SupportedProtocolVersion>,
    ),
    TlsError,
> {
    if min > max {
        return Err(TlsError::Versions);
    }
    let mut provider = rustls::crypto::ring::default_provider();
    if !cipher_suites.is_empty() {
        let mut chosen: Vec<SupportedCipherSuite> = provider
            .cipher_suites
            .iter()
            .copied()
            .filter(|s| s.tls13().is_some())
            .collect();
        for name in cipher_suites {
            let s = suite(name).ok_or_else(|| TlsError::CipherSuite(name.clone()))?;
            if !chosen.contains(&s) {
                chosen.push(s);
            }
        }
        provider.cipher_suites = chosen;
    }
    if !ecdh_curves.is_empty() {
        let all = std::mem::take(&mut provider.kx_groups);
        for name in ecdh_curves {
            let g = group(name).ok_or_else(|| TlsError::Curve(name.clone()))?;
            let kx = all
                .iter()
                .find(|k| k.name() == g)
                .ok_or_else(|| TlsError::Curve(name.clone()))?;
            provider.kx_groups.push(*kx);
        }
    }
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = [
        (TlsVersion::V1_3, &rustls::version::TLS13),
        (TlsVersion::V1_2, &rustls::version::TLS12),
    ]
    .into_iter()
    .filter(|(v, _)| (min..=max).contains(v))
    .map(|(_, p)| p)
    .collect();
    let usable = provider.cipher_suites.iter().any(|s| {
        let v = if s.tls13().is_some() {
            TlsVersion::V1_3
        } else {
            TlsVersion::V1_2
        };
        (min..=max).contains(&v)
    });
    if !usable {
        return Err(TlsError::NoCipherSuite);
    }
    Ok((provider, versions))
}

/// Whether `cert` is itself one of `roots` and valid at `now`: a
/// self-signed certificate trusted as it is. webpki refuses a CA
/// certificate as an end entity (`openssl req -x509` makes one);
/// OpenSSL and BoringSSL, and so Envoy, take any certificate found in the
/// trust store.
pub(super) fn trusted_as_is(
    cert: &CertificateDer<'_>,
    roots: &[CertificateDer<'static>],
    now: rustls::pki_types::UnixTime,
) -> bool {
    if !roots.iter().any(|r| r.as_ref() == cert.as_ref()) {
        return false;
    }
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(cert.as_ref()) else {
        return false;
    };
    let Ok(now) = x509_parser::time::ASN1Time::from_timestamp(now.as_secs() as i64) else {
        return false;
    };
    parsed.validity().is_valid_at(now)
}

/// When a certificate stops being valid: its `notAfter`, in Unix seconds
/// (`None`: not a certificate x509-parser reads).
pub fn not_after(cert: &CertificateDer<'_>) -> Option<i64> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
    Some(parsed.validity().not_after.timestamp())
}

/// When a TLS context's certificates expire, the earliest of each kind,
/// in Unix seconds: its own (the leaves it presents) and the trusted CAs
/// it checks its peers with. What Envoy's
/// `ssl.certificate.<name>.expiration_unix_time_seconds` say.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Expiry {
    pub cert: Option<i64>,
    pub ca: Option<i64>,
}

impl Expiry {
    /// The earliest `notAfter` of `leaves` and of `cas`.
    pub fn of<'a>(
        leaves: impl IntoIterator<Item = &'a CertificateDer<'a>>,
        cas: impl IntoIterator<Item = &'a CertificateDer<'a>>,
    ) -> Self {
        Self {
            cert: leaves.into_iter().filter_map(not_after).min(),
            ca: cas.into_iter().filter_map(not_after).min(),
        }
    }
}

/// What a server certificate answers for, and the key it carries: the DNS
/// names of its subject alternative names, else (a certificate without
/// any, such as an X.509 v1 one) its subject's common names, as Envoy
/// takes them to choose a certificate by SNI; and its
/// SubjectPublicKeyInfo, to check the private key against. Parsed here
/// rather than by webpki, which rustls checks its own keys with and which
/// refuses v1 certificates that OpenSSL, and so Envoy, serve.
pub(super) fn server_identity(leaf: &CertificateDer<'_>) -> Result<(Vec<String>, Vec<u8>), String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(leaf.as_ref())
        .map_err(|e| format!("cannot parse the certificate: {e}"))?;
    let san: Vec<String> = parsed
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|ext| {
            ext.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    x509_parser::extensions::GeneralName::DNSName(d) => {
                        Some(d.to_ascii_lowercase())
                    }
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let names = if san.is_empty() {
        parsed
            .subject()
            .iter_common_name()
            .filter_map(|cn| cn.as_str().ok())
            .map(str::to_ascii_lowercase)
            .collect()
    } else {
        san
    };
    Ok((names, parsed.public_key().raw.to_vec()))
}
