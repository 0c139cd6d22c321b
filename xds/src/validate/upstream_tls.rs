//! A cluster's `transport_socket`: `envoy.transport_sockets.tls` with an `UpstreamTlsContext`, its files read and PEM decoded (its client certificate and validation context inline, from files or from SDS), built into `engine::tls::UpstreamTls` with every refusal at its field path.

use std::path::PathBuf;
use std::sync::Arc;

use engine::tls::{
    Rebuild, RebuildError, Rebuilt, SecretView, TlsSource, UpstreamMeta, UpstreamTls,
    UpstreamTlsSpec,
};
use engine::UpstreamProtocol;
use prost::Message;

use super::common::reject_set;
use super::sds::{self, ReadError, ReadResult};
use super::tls::{
    alpn_protocols, certificate, reject_unimplemented_common, san_matchers, tls_context, tls_error,
    tls_params, trusted_roots,
};
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::core::v3 as core;
use crate::pb::envoy::extensions::transport_sockets::tls::v3 as tls;

/// The upstream TLS of a cluster speaking `protocol`. A context whose
/// certificates come from files or SDS keeps the recipe to read them
/// again; one that names static or ADS secrets is pending (its cluster
/// warms) until they are found.
pub(super) fn transport_socket(
    ts: &core::TransportSocket,
    protocol: UpstreamProtocol,
    path: &Path,
) -> Result<Arc<UpstreamTls>> {
    let (ctx, cpath) = tls_context::<tls::UpstreamTlsContext>(ts, path, "an")?;
    let secrets = sds::common_refs(
        ctx.common_tls_context
            .as_ref()
            .unwrap_or(&Default::default()),
        &cpath.field("common_tls_context"),
    )?;
    let meta = meta(&ctx, protocol, &cpath)?;
    let first = match upstream_tls_context(&ctx, protocol, &cpath, &SecretView::empty()) {
        Ok((spec, files)) if files.is_empty() && secrets.is_empty() => {
            let built = UpstreamTls::build(spec).map_err(|e| tls_error(e, &cpath))?;
            return Ok(Arc::new(built));
        }
        Ok(read) => Some(read),
        Err(ReadError::Waiting(_)) => None,
        Err(ReadError::Invalid(e)) => return Err(e),
    };
    let at = cpath.clone();
    // When its files or secrets change, the context is read again exactly
    // as now.
    let rebuild: Rebuild<UpstreamTlsSpec> =
        Arc::new(
            move |view| match upstream_tls_context(&ctx, protocol, &cpath, view) {
                Ok((spec, files)) => Ok(Rebuilt { spec, files }),
                Err(ReadError::Waiting(r)) => Err(RebuildError::Waiting(r)),
                Err(ReadError::Invalid(e)) => Err(RebuildError::Invalid(e.to_string())),
            },
        );
    let source = TlsSource::new(secrets, rebuild);
    let built = match first {
        Some((spec, files)) => UpstreamTls::build_sourced(meta, spec, source, files),
        None => UpstreamTls::from_source(meta, source),
    };
    Ok(Arc::new(built.map_err(|e| tls_error(e, &at))?))
}

/// What the context says before any secret is read. Its fingerprint is
/// the context itself (secrets by name): a secret's change is read into
/// the same context, so it does not make the cluster's connections
/// different.
fn meta(
    ctx: &tls::UpstreamTlsContext,
    protocol: UpstreamProtocol,
    path: &Path,
) -> Result<UpstreamMeta> {
    let common = ctx.common_tls_context.clone().unwrap_or_default();
    let (alpn, alpn_configured) = alpn(&common, protocol, path)?;
    if ctx.sni.len() > 255 {
        return Err(Error::invalid(path.field("sni"), "longer than 255 bytes"));
    }
    let fingerprint = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (ctx.encode_to_vec(), protocol as u8).hash(&mut h);
        h.finish()
    };
    Ok(UpstreamMeta {
        sni: Some(ctx.sni.clone()).filter(|s| !s.is_empty()),
        alpn,
        alpn_configured,
        verifies: common.validation_context_type.is_some(),
        fingerprint,
    })
}

/// `alpn_protocols`, or the cluster's own protocols when none are set
/// (Envoy's rule); and whether they were set.
fn alpn(
    common: &tls::CommonTlsContext,
    protocol: UpstreamProtocol,
    path: &Path,
) -> Result<(Vec<Vec<u8>>, bool)> {
    let cpath = path.field("common_tls_context");
    let alpn = alpn_protocols(&common.alpn_protocols, &cpath.field("alpn_protocols"))?;
    if !alpn.is_empty() {
        return Ok((alpn, true));
    }
    let own = match protocol {
        UpstreamProtocol::Http1 => vec![b"http/1.1".to_vec()],
        UpstreamProtocol::Http2 => vec![b"h2".to_vec()],
        UpstreamProtocol::Auto => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
    };
    Ok((own, false))
}

/// What the context asks for, decoded from what `view` holds now, and the
/// files it was read from.
fn upstream_tls_context(
    ctx: &tls::UpstreamTlsContext,
    protocol: UpstreamProtocol,
    path: &Path,
    view: &SecretView,
) -> ReadResult<(UpstreamTlsSpec, Vec<PathBuf>)> {
    reject_unimplemented_upstream(ctx, path)?;
    let cpath = path.field("common_tls_context");
    let common = ctx.common_tls_context.clone().unwrap_or_default();
    reject_unimplemented_common(&common, &cpath)?;
    let mut files = Vec::new();
    let (trusted_ca, san_matchers) = match sds::validation(&common, &cpath, view, &mut files)? {
        None => (None, Vec::new()),
        Some((v, vpath)) => {
            if v.suppress_client_ca_list {
                return Err(Error::invalid(
                    vpath.field("suppress_client_ca_list"),
                    "only meaningful on a listener",
                )
                .into());
            }
            (
                Some(trusted_roots(&v, &vpath, &mut files)?),
                san_matchers(&v, &vpath)?,
            )
        }
    };
    let certs_path = cpath.field("tls_certificates");
    let mut named: Vec<(tls::TlsCertificate, Path)> = common
        .tls_certificates
        .iter()
        .enumerate()
        .map(|(i, c)| (c.clone(), certs_path.index(i)))
        .collect();
    named.extend(sds::certificates(&common, &cpath, view, &mut files)?);
    let client_certificate = match named.as_slice() {
        [] => None,
        [(one, at)] => Some(certificate(one, at, &mut files)?),
        _ => {
            return Err(Error::invalid(
                certs_path,
                "an upstream context takes at most one certificate (inline or from SDS)",
            )
            .into())
        }
    };
    let params = tls_params(&common, &cpath)?;
    let (alpn, alpn_configured) = alpn(&common, protocol, path)?;
    let spec = UpstreamTlsSpec {
        sni: Some(ctx.sni.clone()).filter(|s| !s.is_empty()),
        alpn,
        alpn_configured,
        min_version: params.min_version,
        max_version: params.max_version,
        cipher_suites: params.cipher_suites,
        ecdh_curves: params.ecdh_curves,
        client_certificate,
        trusted_ca,
        san_matchers,
        max_session_keys: ctx.max_session_keys.unwrap_or(1) as usize,
    };
    Ok((spec, files))
}

fn reject_unimplemented_upstream(ctx: &tls::UpstreamTlsContext, path: &Path) -> Result<()> {
    reject_set!(
        path,
        ctx,
        allow_renegotiation,
        enforce_rsa_key_usage,
        auto_host_sni,
        auto_sni_san_validation,
    );
    Ok(())
}
