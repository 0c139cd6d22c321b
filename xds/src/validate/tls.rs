//! A filter chain's `transport_socket`: `envoy.transport_sockets.tls` with a `DownstreamTlsContext`, its files read and PEM decoded, built into `engine::tls::DownstreamTls` with every refusal at its field path.

use std::sync::Arc;

use std::path::PathBuf;

use engine::tls::{
    CertificateSpec, ClientAuthSpec, DownstreamTls, DownstreamTlsSpec, Rebuild, RebuildError,
    Rebuilt, SanMatcher, SanType, SecretRef, SecretView, TlsError, TlsSource, TlsVersion,
};
use prost::Name;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::common::reject_set;
use super::route_match::string_matcher;
use super::sds::{self, ReadError, ReadResult};
use crate::decode::{any_type_name, unpack};
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::core::v3 as core;
use crate::pb::envoy::extensions::transport_sockets::tls::v3 as tls;

/// Envoy's name for the TLS transport socket.
const TLS_SOCKET: &str = "envoy.transport_sockets.tls";

/// The downstream TLS of a filter chain's `transport_socket`. A context
/// whose certificates come from files or SDS keeps the recipe to read
/// them again; one that names static or ADS secrets is pending until
/// [`engine::tls::DownstreamTls::resolve`] finds them.
pub(crate) fn transport_socket(
    ts: &core::TransportSocket,
    path: &Path,
) -> Result<Arc<DownstreamTls>> {
    let (ctx, cpath) = tls_context::<tls::DownstreamTlsContext>(ts, path, "a")?;
    let secrets = secret_refs(&ctx, &cpath)?;
    let first = downstream_tls_context(&ctx, &cpath, &SecretView::empty());
    let common = ctx.common_tls_context.clone().unwrap_or_default();
    let params = tls_params(&common, &cpath.field("common_tls_context"))?;
    let alpn = alpn_protocols(
        &common.alpn_protocols,
        &cpath.field("common_tls_context").field("alpn_protocols"),
    )?;
    let first = match first {
        Ok((spec, files)) if files.is_empty() && secrets.is_empty() => {
            return Ok(Arc::new(build(spec, &cpath)?));
        }
        Ok(read) => Some(read),
        Err(ReadError::Waiting(_)) => None,
        Err(ReadError::Invalid(e)) => return Err(e),
    };
    let at = cpath.clone();
    // When its files or secrets change, the context is read again exactly
    // as now.
    let rebuild: Rebuild<DownstreamTlsSpec> =
        Arc::new(
            move |view| match downstream_tls_context(&ctx, &cpath, view) {
                Ok((spec, files)) => Ok(Rebuilt { spec, files }),
                Err(ReadError::Waiting(r)) => Err(RebuildError::Waiting(r)),
                Err(ReadError::Invalid(e)) => Err(RebuildError::Invalid(e.to_string())),
            },
        );
    let source = TlsSource::new(secrets, rebuild);
    Ok(Arc::new(match first {
        Some((spec, files)) => {
            DownstreamTls::build_sourced(spec, source, files).map_err(|e| tls_error(e, &at))?
        }
        None => DownstreamTls::from_source(
            source,
            alpn.iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect(),
            params.min_version,
            params.max_version,
        ),
    }))
}

/// Every `SdsSecretConfig` of a downstream context, validated.
fn secret_refs(ctx: &tls::DownstreamTlsContext, path: &Path) -> Result<Vec<SecretRef>> {
    use tls::downstream_tls_context::SessionTicketKeysType as T;
    let mut refs = match &ctx.common_tls_context {
        Some(common) => sds::common_refs(common, &path.field("common_tls_context"))?,
        None => Vec::new(),
    };
    if let Some(T::SessionTicketKeysSdsSecretConfig(c)) = &ctx.session_ticket_keys_type {
        refs.push(sds::secret_ref(
            c,
            &path.field("session_ticket_keys_sds_secret_config"),
        )?);
    }
    Ok(refs)
}

/// The `T` (a Downstream- or UpstreamTlsContext) in `envoy.transport_sockets.tls`'s
/// `typed_config`, and its path; any other transport socket is refused by
/// name. `article`: "a" or "an", for the message.
pub(super) fn tls_context<T: prost::Message + Name + Default>(
    ts: &core::TransportSocket,
    path: &Path,
    article: &str,
) -> Result<(T, Path)> {
    let tpath = path.field("typed_config");
    let Some(core::transport_socket::ConfigType::TypedConfig(any)) = &ts.config_type else {
        return Err(Error::invalid(
            tpath,
            format!("required ({TLS_SOCKET} with {article} {})", T::NAME),
        ));
    };
    if any_type_name(any, &tpath)? != T::full_name() {
        return Err(Error::unsupported_msg(
            tpath,
            format!(
                "transport socket {:?} is not supported; only {TLS_SOCKET} ({}) is",
                ts.name,
                T::type_url()
            ),
        ));
    }
    unpack::<T>(any, &tpath)
}

/// What the context asks for, decoded from what `view` holds now (and
/// the files its secrets and data sources name), and the files it was
/// read from.
fn downstream_tls_context(
    ctx: &tls::DownstreamTlsContext,
    path: &Path,
    view: &SecretView,
) -> ReadResult<(DownstreamTlsSpec, Vec<PathBuf>)> {
    reject_unimplemented_downstream(ctx, path)?;
    if ctx.ocsp_staple_policy
        != tls::downstream_tls_context::OcspStaplePolicy::LenientStapling as i32
    {
        return Err(
            Error::unsupported_value(path.field("ocsp_staple_policy"), "OCSP stapling").into(),
        );
    }
    use tls::downstream_tls_context::SessionTicketKeysType as T;
    let mut files = Vec::new();
    let (session_tickets, ticket_keys) = match &ctx.session_ticket_keys_type {
        None => (true, Vec::new()),
        Some(T::DisableStatelessSessionResumption(disable)) => (!disable, Vec::new()),
        Some(T::SessionTicketKeys(k)) => (
            true,
            ticket_keys(
                k,
                &path.field("session_ticket_keys").field("keys"),
                &mut files,
            )?,
        ),
        Some(T::SessionTicketKeysSdsSecretConfig(c)) => {
            let r = sds::secret_ref(c, &path.field("session_ticket_keys_sds_secret_config"))?;
            let (k, kpath) = sds::ticket_keys(&r, view, &mut files)?;
            (true, ticket_keys(&k, &kpath.field("keys"), &mut files)?)
        }
    };
    let cpath = path.field("common_tls_context");
    let common = ctx.common_tls_context.clone().unwrap_or_default();
    reject_unimplemented_common(&common, &cpath)?;
    let required = ctx.require_client_certificate.unwrap_or(false);
    let client_auth = match sds::validation(&common, &cpath, view, &mut files)? {
        None if required => {
            return Err(Error::invalid(
                path.field("require_client_certificate"),
                "needs common_tls_context.validation_context.trusted_ca",
            )
            .into())
        }
        None => None,
        Some((v, vpath)) => Some(validation_context(&v, required, &vpath, &mut files)?),
    };
    let certs_path = cpath.field("tls_certificates");
    if common.tls_certificates.is_empty() && common.tls_certificate_sds_secret_configs.is_empty() {
        return Err(Error::invalid(
            certs_path,
            "at least one certificate is required (inline, or tls_certificate_sds_secret_configs)",
        )
        .into());
    }
    let mut certificates = Vec::new();
    for (i, c) in common.tls_certificates.iter().enumerate() {
        certificates.push(certificate(c, &certs_path.index(i), &mut files)?);
    }
    for (c, at) in sds::certificates(&common, &cpath, view, &mut files)? {
        certificates.push(certificate(&c, &at, &mut files)?);
    }
    let params = tls_params(&common, &cpath)?;
    let alpn = alpn_protocols(&common.alpn_protocols, &cpath.field("alpn_protocols"))?;
    let spec = DownstreamTlsSpec {
        certificates,
        alpn,
        min_version: params.min_version,
        max_version: params.max_version,
        cipher_suites: params.cipher_suites,
        ecdh_curves: params.ecdh_curves,
        require_sni: ctx.require_sni.unwrap_or(false),
        session_tickets,
        ticket_keys,
        session_cache: !ctx.disable_stateful_session_resumption,
        prefer_server_ciphers: !ctx.prefer_client_ciphers,
        client_auth,
    };
    Ok((spec, files))
}

fn reject_unimplemented_downstream(ctx: &tls::DownstreamTlsContext, path: &Path) -> Result<()> {
    reject_set!(path, ctx, session_timeout, full_scan_certs_on_sni_mismatch);
    Ok(())
}

/// `session_ticket_keys.keys` (at `kpath`), inline or from a secret:
/// at least one, each of Envoy's 80-byte format.
fn ticket_keys(
    k: &tls::TlsSessionTicketKeys,
    kpath: &Path,
    files: &mut Vec<PathBuf>,
) -> Result<Vec<Vec<u8>>> {
    if k.keys.is_empty() {
        return Err(Error::invalid(
            kpath.clone(),
            "at least one key is required",
        ));
    }
    let mut keys = Vec::with_capacity(k.keys.len());
    for (i, d) in k.keys.iter().enumerate() {
        let key = data_source(Some(d), &kpath.index(i))?;
        if key.len() != engine::tls::TICKET_KEY_LEN {
            return Err(Error::invalid(
                kpath.index(i),
                format!(
                    "{} bytes; a key is {} bytes (Envoy's format)",
                    key.len(),
                    engine::tls::TICKET_KEY_LEN
                ),
            ));
        }
        files.extend(file_of(Some(d)));
        keys.push(key);
    }
    Ok(keys)
}

/// The `common_tls_context` fields neither a downstream nor an upstream
/// context implements (certificates from a provider, a custom
/// handshaker or certificate selector, a key log), refused by name.
/// `cpath`: the `common_tls_context` itself.
pub(super) fn reject_unimplemented_common(
    common: &tls::CommonTlsContext,
    cpath: &Path,
) -> Result<()> {
    reject_set!(
        cpath,
        common,
        tls_certificate_certificate_provider,
        tls_certificate_certificate_provider_instance,
        custom_handshaker,
        tls_certificate_provider_instance,
        key_log,
        custom_tls_certificate_selector,
    );
    Ok(())
}

/// `common_tls_context.tls_params`, decoded.
pub(super) struct Params {
    pub min_version: TlsVersion,
    pub max_version: TlsVersion,
    pub cipher_suites: Vec<String>,
    pub ecdh_curves: Vec<String>,
}

/// `tls_params` of a downstream or upstream context.
pub(super) fn tls_params(common: &tls::CommonTlsContext, cpath: &Path) -> Result<Params> {
    let params = common.tls_params.clone().unwrap_or_default();
    let ppath = cpath.field("tls_params");
    reject_set!(ppath, params, signature_algorithms, compliance_policies);
    Ok(Params {
        min_version: version(
            params.tls_minimum_protocol_version,
            TlsVersion::V1_2,
            &ppath.field("tls_minimum_protocol_version"),
        )?,
        max_version: version(
            params.tls_maximum_protocol_version,
            TlsVersion::V1_3,
            &ppath.field("tls_maximum_protocol_version"),
        )?,
        cipher_suites: cipher_suites(&params.cipher_suites),
        ecdh_curves: params.ecdh_curves,
    })
}

/// `alpn_protocols` (at `path`), each 1 to 255 bytes.
pub(super) fn alpn_protocols(list: &[String], path: &Path) -> Result<Vec<Vec<u8>>> {
    let mut alpn = Vec::with_capacity(list.len());
    for (i, p) in list.iter().enumerate() {
        if p.is_empty() || p.len() > 255 {
            return Err(Error::invalid(path.index(i), "must be 1 to 255 bytes"));
        }
        alpn.push(p.as_bytes().to_vec());
    }
    Ok(alpn)
}

/// Builds the context, each refusal at its field.
fn build(spec: DownstreamTlsSpec, path: &Path) -> Result<DownstreamTls> {
    DownstreamTls::build(spec).map_err(|e| tls_error(e, path))
}

/// A context's build error at the field it is about (`path`: the context).
pub(super) fn tls_error(e: TlsError, path: &Path) -> Error {
    let cpath = path.field("common_tls_context");
    let certs_path = cpath.field("tls_certificates");
    let ppath = cpath.field("tls_params");
    {
        let at = match &e {
            TlsError::NoCertificate => certs_path.clone(),
            TlsError::Certificate { index, .. } => certs_path.index(*index),
            TlsError::CipherSuite(_) | TlsError::NoCipherSuite => ppath.field("cipher_suites"),
            TlsError::Curve(_) => ppath.field("ecdh_curves"),
            TlsError::Versions => ppath.clone(),
            TlsError::TrustedCa(_) => cpath.field("validation_context").field("trusted_ca"),
            TlsError::Rustls(_) => path.clone(),
            TlsError::TicketKeys(_) => path.field("session_ticket_keys"),
        };
        match e {
            TlsError::CipherSuite(_) | TlsError::Curve(_) => {
                Error::unsupported_msg(at, e.to_string())
            }
            _ => Error::invalid(at, e.to_string()),
        }
    }
}

/// The file a `DataSource` reads, if it is one.
pub(super) fn file_of(d: Option<&core::DataSource>) -> Option<PathBuf> {
    match d?.specifier.as_ref()? {
        core::data_source::Specifier::Filename(f) => Some(PathBuf::from(f)),
        _ => None,
    }
}

/// `validation_context`: client certificates checked against
/// `trusted_ca` and `match_typed_subject_alt_names`. What would check more (pins, CRLs, depth)
/// or less (`ACCEPT_UNTRUSTED`, expired certificates) is refused by name.
fn validation_context(
    v: &tls::CertificateValidationContext,
    required: bool,
    path: &Path,
    files: &mut Vec<PathBuf>,
) -> Result<ClientAuthSpec> {
    Ok(ClientAuthSpec {
        roots: trusted_roots(v, path, files)?,
        required,
        suppress_ca_list: v.suppress_client_ca_list,
        san_matchers: san_matchers(v, path)?,
    })
}

/// `match_typed_subject_alt_names`. `OTHER_NAME` (matched by OID) is
/// refused by name; a matcher without a type or a string matcher is
/// invalid.
pub(super) fn san_matchers(
    v: &tls::CertificateValidationContext,
    path: &Path,
) -> Result<Vec<SanMatcher>> {
    use tls::subject_alt_name_matcher::SanType as T;
    let mpath = path.field("match_typed_subject_alt_names");
    v.match_typed_subject_alt_names
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let p = mpath.index(i);
            let san_type = match T::try_from(m.san_type) {
                Ok(T::Dns) => SanType::Dns,
                Ok(T::Uri) => SanType::Uri,
                Ok(T::Email) => SanType::Email,
                Ok(T::IpAddress) => SanType::IpAddress,
                Ok(T::OtherName) => {
                    return Err(Error::unsupported_value(p.field("san_type"), "OTHER_NAME"))
                }
                Ok(T::Unspecified) | Err(_) => {
                    return Err(Error::invalid(
                        p.field("san_type"),
                        "one of DNS, URI, EMAIL or IP_ADDRESS is required",
                    ))
                }
            };
            let Some(sm) = &m.matcher else {
                return Err(Error::invalid(p.field("matcher"), "required"));
            };
            Ok(SanMatcher {
                san_type,
                matcher: string_matcher(sm, &p.field("matcher"))?,
            })
        })
        .collect()
}

/// A validation context's `trusted_ca`, decoded; what the context would
/// check beyond the chain is refused by name. Adds the file it came from
/// to `files`.
pub(super) fn trusted_roots(
    v: &tls::CertificateValidationContext,
    path: &Path,
    files: &mut Vec<PathBuf>,
) -> Result<Vec<CertificateDer<'static>>> {
    reject_set!(
        path,
        v,
        verify_certificate_hash,
        verify_certificate_spki,
        require_signed_certificate_timestamp,
        crl,
        allow_expired_certificate,
        match_subject_alt_names,
        trust_chain_verification,
        custom_validator_config,
        ca_certificate_provider_instance,
        only_verify_leaf_cert_crl,
        max_verify_depth,
        system_root_certs,
    );
    sds::watched_directory(v.watched_directory.as_ref(), path)?;
    let capath = path.field("trusted_ca");
    let pem = data_source(v.trusted_ca.as_ref(), &capath)?;
    let roots = CertificateDer::pem_slice_iter(&pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| {
            Error::invalid(
                capath.clone(),
                format!("invalid PEM certificate: {}", pem_error(e)),
            )
        })?;
    if roots.is_empty() {
        return Err(Error::invalid(capath, "no PEM certificate in it"));
    }
    files.extend(file_of(v.trusted_ca.as_ref()));
    Ok(roots)
}

pub(super) fn unsupported_validation(
    v: &tls::common_tls_context::ValidationContextType,
    cpath: &Path,
) -> Error {
    use tls::common_tls_context::ValidationContextType as V;
    let name = match v {
        V::ValidationContext(_) => "validation_context",
        V::ValidationContextSdsSecretConfig(_) => "validation_context_sds_secret_config",
        V::CombinedValidationContext(_) => "combined_validation_context",
        V::ValidationContextCertificateProvider(_) => "validation_context_certificate_provider",
        V::ValidationContextCertificateProviderInstance(_) => {
            "validation_context_certificate_provider_instance"
        }
    };
    Error::unsupported(cpath.field(name))
}

/// Envoy's cipher list syntax: names, and `[A|B]` groups of equal
/// preference (we keep their order). Exclusions (`-X`, `!X`) have no
/// meaning in a list that only names what is allowed: refused by name.
fn cipher_suites(list: &[String]) -> Vec<String> {
    list.iter()
        .flat_map(|s| s.trim_start_matches('[').trim_end_matches(']').split('|'))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn version(v: i32, default: TlsVersion, path: &Path) -> Result<TlsVersion> {
    use tls::tls_parameters::TlsProtocol as P;
    match P::try_from(v) {
        Ok(P::TlsAuto) => Ok(default),
        Ok(P::TlSv12) => Ok(TlsVersion::V1_2),
        Ok(P::TlSv13) => Ok(TlsVersion::V1_3),
        Ok(old @ (P::TlSv10 | P::TlSv11)) => Err(Error::unsupported_msg(
            path.clone(),
            format!(
                "{} is not supported: TLS 1.2 and 1.3 only (rustls)",
                old.as_str_name()
            ),
        )),
        Err(_) => Err(Error::invalid(path.clone(), format!("unknown value {v}"))),
    }
}

/// A `TlsCertificate`, inline or from a secret; the files it names are
/// added to `files`.
pub(super) fn certificate(
    c: &tls::TlsCertificate,
    path: &Path,
    files: &mut Vec<PathBuf>,
) -> Result<CertificateSpec> {
    reject_set!(
        path,
        c,
        password,
        ocsp_staple,
        signed_certificate_timestamp,
        private_key_provider,
        pkcs12,
        tls_params,
    );
    sds::watched_directory(c.watched_directory.as_ref(), path)?;
    files.extend(
        [c.certificate_chain.as_ref(), c.private_key.as_ref()]
            .into_iter()
            .filter_map(file_of),
    );
    let cpath = path.field("certificate_chain");
    let pem = data_source(c.certificate_chain.as_ref(), &cpath)?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| {
            Error::invalid(
                cpath.clone(),
                format!("invalid PEM certificate: {}", pem_error(e)),
            )
        })?;
    if chain.is_empty() {
        return Err(Error::invalid(cpath, "no PEM certificate in it"));
    }
    let kpath = path.field("private_key");
    let pem = data_source(c.private_key.as_ref(), &kpath)?;
    let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        Error::invalid(
            kpath,
            format!(
                "no PEM private key (PKCS#8, PKCS#1 or SEC1) in it: {}",
                pem_error(e)
            ),
        )
    })?;
    Ok(CertificateSpec { chain, key })
}

/// The bytes of a `DataSource`: a file's, inline, or an environment
/// variable's.
pub(crate) fn data_source(d: Option<&core::DataSource>, path: &Path) -> Result<Vec<u8>> {
    use core::data_source::Specifier as S;
    let Some(d) = d else {
        return Err(Error::invalid(path.clone(), "required"));
    };
    sds::watched_directory(d.watched_directory.as_ref(), path)?;
    match &d.specifier {
        Some(S::Filename(f)) => std::fs::read(f)
            .map_err(|e| Error::invalid(path.field("filename"), format!("cannot read {f:?}: {e}"))),
        Some(S::InlineBytes(b)) => Ok(b.clone()),
        Some(S::InlineString(s)) => Ok(s.as_bytes().to_vec()),
        Some(S::EnvironmentVariable(v)) => std::env::var(v)
            .map(String::into_bytes)
            .map_err(|e| Error::invalid(path.field("environment_variable"), format!("{v}: {e}"))),
        None => Err(Error::invalid(
            path.clone(),
            "one of filename, inline_bytes, inline_string, environment_variable is required",
        )),
    }
}

/// A PEM error as text: the markers it names as the words they are
/// (rustls's message shows them as byte lists).
fn pem_error(e: rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error as E;
    match e {
        E::MissingSectionEnd { end_marker } => format!(
            "no \"-----END {}-----\" line",
            String::from_utf8_lossy(&end_marker)
        ),
        E::IllegalSectionStart { line } => {
            format!("bad BEGIN line {:?}", String::from_utf8_lossy(&line))
        }
        other => other.to_string(),
    }
}
