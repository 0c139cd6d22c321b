//! SDS: `SdsSecretConfig` references (static, `ads: {}`, or a `path_config_source` file) and the `Secret`s they name, found in what is held now and checked as Envoy checks them (a file holds exactly the one secret it is named for; a secret has the kind its field needs).

use std::collections::HashSet;
use std::path::PathBuf;

use engine::tls::{SecretRef, SecretSource, SecretView};
use engine::ConfigSource;
use prost::Message;

use super::source::{config_source, Allowed};
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::core::v3 as core;
use crate::pb::envoy::extensions::transport_sockets::tls::v3 as tls;

/// Why a context could not be read now.
#[derive(Debug)]
pub(super) enum ReadError {
    /// A secret it names is not held yet: the context waits.
    Waiting(SecretRef),
    Invalid(Error),
}

impl From<Error> for ReadError {
    fn from(e: Error) -> Self {
        Self::Invalid(e)
    }
}

pub(super) type ReadResult<T> = std::result::Result<T, ReadError>;

/// What a secret holds, by the name of its `type` field.
fn kind(s: &tls::Secret) -> &'static str {
    use tls::secret::Type as T;
    match &s.r#type {
        None => "nothing",
        Some(T::TlsCertificate(_)) => "tls_certificate",
        Some(T::SessionTicketKeys(_)) => "session_ticket_keys",
        Some(T::ValidationContext(_)) => "validation_context",
        Some(T::GenericSecret(_)) => "generic_secret",
    }
}

/// One `SdsSecretConfig`, validated. `sds_config` over ADS or from a file;
/// none names a static secret.
pub(super) fn secret_ref(c: &tls::SdsSecretConfig, path: &Path) -> Result<SecretRef> {
    if c.name.is_empty() {
        return Err(Error::invalid(path.field("name"), "required"));
    }
    let source = match &c.sds_config {
        None => SecretSource::Static,
        Some(s) => match config_source(s, &path.field("sds_config"), Allowed::AdsOrPath)? {
            ConfigSource::Ads { .. } => SecretSource::Ads,
            ConfigSource::Path(p) => SecretSource::File(p),
        },
    };
    Ok(SecretRef {
        name: c.name.clone(),
        source,
    })
}

/// The secret `r` names, from `view` or its file; the file read is added
/// to `files` (to watch).
fn find(r: &SecretRef, view: &SecretView, files: &mut Vec<PathBuf>) -> ReadResult<tls::Secret> {
    let at = Path::root().field("secrets").named(&r.name);
    match &r.source {
        SecretSource::File(file) => {
            files.push(file.clone());
            let resp = crate::file::load_discovery_response(file).map_err(|e| {
                Error::invalid(at.clone(), format!("SDS file {}: {e}", file.display()))
            })?;
            let [one] = resp.resources.as_slice() else {
                return Err(Error::invalid(
                    at,
                    format!(
                        "SDS file {} holds {} resources; exactly one secret is expected",
                        file.display(),
                        resp.resources.len()
                    ),
                )
                .into());
            };
            let secret = decode_any(one, &at)?;
            if secret.name != r.name {
                return Err(Error::invalid(
                    at,
                    format!(
                        "SDS file {} holds secret {:?}, not {:?}",
                        file.display(),
                        secret.name,
                        r.name
                    ),
                )
                .into());
            }
            Ok(secret)
        }
        _ => {
            let held = view.get(r).ok_or_else(|| ReadError::Waiting(r.clone()))?;
            // Held secrets were decoded once already: this cannot fail.
            tls::Secret::decode(held.encoded.as_slice())
                .map_err(|e| Error::invalid(at, format!("invalid Secret: {e}")).into())
        }
    }
}

/// An `Any` that must be a `Secret`.
pub(crate) fn decode_any(any: &prost_types::Any, path: &Path) -> Result<tls::Secret> {
    let url = <tls::Secret as prost::Name>::full_name();
    if any.type_url.rsplit('/').next() != Some(url.as_str()) {
        return Err(Error::invalid(
            path.clone(),
            format!("type_url {:?} where a {url} is expected", any.type_url),
        ));
    }
    tls::Secret::decode(any.value.as_slice())
        .map_err(|e| Error::invalid(path.clone(), format!("invalid {url}: {e}")))
}

/// The secret `r` names, as the kind `take` accepts (`wanted`: its field's
/// name), with the path its fields are reported at.
fn of_kind<T>(
    r: &SecretRef,
    view: &SecretView,
    files: &mut Vec<PathBuf>,
    wanted: &str,
    take: impl FnOnce(tls::secret::Type) -> Option<T>,
) -> ReadResult<(T, Path)> {
    let s = find(r, view, files)?;
    let path = Path::root().field("secrets").named(&r.name);
    let held = kind(&s);
    match s.r#type.and_then(take) {
        Some(v) => Ok((v, path.field(wanted))),
        None => {
            Err(Error::invalid(path, format!("{r} holds {held}; a {wanted} is needed here")).into())
        }
    }
}

/// The `tls_certificate` secret `r` names.
fn certificate(
    r: &SecretRef,
    view: &SecretView,
    files: &mut Vec<PathBuf>,
) -> ReadResult<(tls::TlsCertificate, Path)> {
    of_kind(r, view, files, "tls_certificate", |t| match t {
        tls::secret::Type::TlsCertificate(c) => Some(c),
        _ => None,
    })
}

/// The `validation_context` secret `r` names.
fn validation_context(
    r: &SecretRef,
    view: &SecretView,
    files: &mut Vec<PathBuf>,
) -> ReadResult<(tls::CertificateValidationContext, Path)> {
    of_kind(r, view, files, "validation_context", |t| match t {
        tls::secret::Type::ValidationContext(v) => Some(v),
        _ => None,
    })
}

/// The `session_ticket_keys` secret `r` names.
pub(super) fn ticket_keys(
    r: &SecretRef,
    view: &SecretView,
    files: &mut Vec<PathBuf>,
) -> ReadResult<(tls::TlsSessionTicketKeys, Path)> {
    of_kind(r, view, files, "session_ticket_keys", |t| match t {
        tls::secret::Type::SessionTicketKeys(k) => Some(k),
        _ => None,
    })
}

/// Every `SdsSecretConfig` of a `common_tls_context` (at `cpath`),
/// validated: its certificates' and its validation context's.
pub(super) fn common_refs(common: &tls::CommonTlsContext, cpath: &Path) -> Result<Vec<SecretRef>> {
    use tls::common_tls_context::ValidationContextType as V;
    let mut refs = Vec::new();
    let spath = cpath.field("tls_certificate_sds_secret_configs");
    for (i, c) in common.tls_certificate_sds_secret_configs.iter().enumerate() {
        refs.push(secret_ref(c, &spath.index(i))?);
    }
    match &common.validation_context_type {
        Some(V::ValidationContextSdsSecretConfig(c)) => refs.push(secret_ref(
            c,
            &cpath.field("validation_context_sds_secret_config"),
        )?),
        Some(V::CombinedValidationContext(c)) => {
            let vpath = cpath.field("combined_validation_context");
            super::common::reject_set!(
                vpath,
                c,
                validation_context_certificate_provider,
                validation_context_certificate_provider_instance,
            );
            let Some(sds) = &c.validation_context_sds_secret_config else {
                return Err(Error::invalid(
                    vpath.field("validation_context_sds_secret_config"),
                    "required",
                ));
            };
            refs.push(secret_ref(
                sds,
                &vpath.field("validation_context_sds_secret_config"),
            )?);
        }
        _ => {}
    }
    Ok(refs)
}

/// The certificates a `common_tls_context` names by SDS, in order, as the
/// `TlsCertificate`s to decode and their paths.
pub(super) fn certificates(
    common: &tls::CommonTlsContext,
    cpath: &Path,
    view: &SecretView,
    files: &mut Vec<PathBuf>,
) -> ReadResult<Vec<(tls::TlsCertificate, Path)>> {
    let spath = cpath.field("tls_certificate_sds_secret_configs");
    let mut out = Vec::new();
    for (i, c) in common.tls_certificate_sds_secret_configs.iter().enumerate() {
        let r = secret_ref(c, &spath.index(i))?;
        out.push(certificate(&r, view, files)?);
    }
    Ok(out)
}

/// The validation context a `common_tls_context` (at `cpath`) has:
/// inline, an SDS secret, or a default with a secret merged into it; with
/// the path its fields are reported at. `None`: none. Providers are
/// refused by name.
pub(super) fn validation(
    common: &tls::CommonTlsContext,
    cpath: &Path,
    view: &SecretView,
    files: &mut Vec<PathBuf>,
) -> ReadResult<Option<(tls::CertificateValidationContext, Path)>> {
    use tls::common_tls_context::ValidationContextType as V;
    Ok(Some(match &common.validation_context_type {
        None => return Ok(None),
        Some(V::ValidationContext(v)) => (v.clone(), cpath.field("validation_context")),
        Some(V::ValidationContextSdsSecretConfig(c)) => {
            let r = secret_ref(c, &cpath.field("validation_context_sds_secret_config"))?;
            validation_context(&r, view, files)?
        }
        Some(V::CombinedValidationContext(c)) => {
            let vpath = cpath.field("combined_validation_context");
            let Some(sds_config) = &c.validation_context_sds_secret_config else {
                return Err(Error::invalid(
                    vpath.field("validation_context_sds_secret_config"),
                    "required",
                )
                .into());
            };
            let r = secret_ref(
                sds_config,
                &vpath.field("validation_context_sds_secret_config"),
            )?;
            let (dynamic, _) = validation_context(&r, view, files)?;
            let merged =
                combined_validation_context(c.default_validation_context.as_ref(), dynamic);
            (merged, vpath)
        }
        Some(other) => return Err(super::tls::unsupported_validation(other, cpath).into()),
    }))
}

/// `combined_validation_context`: the SDS secret merged into the default,
/// as Envoy merges them (protobuf merge: set fields replace, lists join).
fn combined_validation_context(
    default: Option<&tls::CertificateValidationContext>,
    dynamic: tls::CertificateValidationContext,
) -> tls::CertificateValidationContext {
    let mut merged = default.cloned().unwrap_or_default();
    // Encoded messages concatenate to their merge (the protobuf rule).
    merged
        .merge(dynamic.encode_to_vec().as_slice())
        .expect("a message's own encoding decodes");
    merged
}

/// `static_resources.secrets`: each named once, of a kind we read, and
/// encoded as SDS would hold it.
pub fn static_secrets(list: &[tls::Secret], path: &Path) -> Result<engine::tls::SecretMap> {
    let mut names = HashSet::new();
    let mut out = engine::tls::SecretMap::new();
    for (i, s) in list.iter().enumerate() {
        let spath = path.index(i);
        check_secret(s, &spath)?;
        if !names.insert(s.name.clone()) {
            return Err(Error::invalid(
                spath.field("name"),
                format!("duplicate secret name {:?}", s.name),
            ));
        }
        out.insert(
            s.name.clone(),
            std::sync::Arc::new(engine::tls::SdsSecret {
                version: String::new(),
                encoded: s.encode_to_vec(),
            }),
        );
    }
    Ok(out)
}

/// What every secret must be, wherever it comes from: named, and of a
/// kind a TLS context reads (`generic_secret` feeds filters we do not
/// have). Its contents are checked where a context reads it.
pub(crate) fn check_secret(s: &tls::Secret, path: &Path) -> Result<()> {
    if s.name.is_empty() {
        return Err(Error::invalid(path.field("name"), "required"));
    }
    match &s.r#type {
        None => Err(Error::invalid(
            path.clone(),
            "one of tls_certificate, session_ticket_keys, validation_context is required",
        )),
        Some(tls::secret::Type::GenericSecret(_)) => {
            Err(Error::unsupported(path.field("generic_secret")))
        }
        Some(_) => Ok(()),
    }
}

/// A `watched_directory`: accepted (the files themselves are polled, so
/// a rename in the directory is seen without it), its path required.
pub(super) fn watched_directory(w: Option<&core::WatchedDirectory>, path: &Path) -> Result<()> {
    match w {
        Some(w) if w.path.is_empty() => Err(Error::invalid(
            path.field("watched_directory").field("path"),
            "required",
        )),
        _ => Ok(()),
    }
}
