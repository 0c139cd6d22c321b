//! A listener's `listener_filters` (`proxy_protocol`, `tls_inspector`) and `listener_filters_timeout` → `engine::ListenerFilters`, every other listener filter and field refused by name.

use std::sync::Arc;

use engine::{ListenerFilters, ProxyProtocol, TlvSelection, LISTENER_FILTERS_TIMEOUT};
use prost::Name;

use super::common::{reject_set, timeout_or};
use crate::decode::{any_type_name, any_type_url, unpack};
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::core::v3 as core;
use crate::pb::envoy::config::listener::v3 as pb;
use crate::pb::envoy::extensions::filters::listener::proxy_protocol::v3::ProxyProtocol as PbProxyProtocol;
use crate::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector as PbTlsInspector;

/// Envoy's names for the listener filters we run.
const TLS_INSPECTOR: &str = "envoy.filters.listener.tls_inspector";
const PROXY_PROTOCOL: &str = "envoy.filters.listener.proxy_protocol";

/// `listener_filters`: `proxy_protocol` and `tls_inspector`, each at most
/// once, the PROXY header read first; with either, the listener's
/// `listener_filters_timeout` and `continue_on_listener_filters_timeout`.
pub(super) fn listener_filters(l: &pb::Listener, path: &Path) -> Result<ListenerFilters> {
    let fpath = path.field("listener_filters");
    let mut out = ListenerFilters::default();
    for (i, f) in l.listener_filters.iter().enumerate() {
        let at = fpath.index(i);
        reject_set!(at, f, filter_disabled);
        let (name, typed) = match &f.config_type {
            Some(pb::listener_filter::ConfigType::TypedConfig(any)) => {
                let tpath = at.field("typed_config");
                let name = any_type_name(any, &tpath)?;
                if name == PbTlsInspector::full_name() {
                    (TLS_INSPECTOR, Some((any, tpath)))
                } else if name == PbProxyProtocol::full_name() {
                    (PROXY_PROTOCOL, Some((any, tpath)))
                } else {
                    return Err(Error::unsupported_msg(
                        tpath.clone(),
                        format!(
                            "listener filter {:?} ({}) is not supported; only {} and {} are",
                            f.name,
                            any_type_url(any, &tpath)?,
                            PbProxyProtocol::type_url(),
                            PbTlsInspector::type_url()
                        ),
                    ));
                }
            }
            Some(pb::listener_filter::ConfigType::ConfigDiscovery(_)) => {
                return Err(Error::unsupported(at.field("config_discovery")));
            }
            None if f.name == TLS_INSPECTOR => (TLS_INSPECTOR, None),
            None if f.name == PROXY_PROTOCOL => (PROXY_PROTOCOL, None),
            None => {
                return Err(Error::unsupported_msg(
                    at.field("name"),
                    format!(
                        "listener filter {:?} is not supported; only {PROXY_PROTOCOL} and \
                         {TLS_INSPECTOR} are",
                        f.name
                    ),
                ));
            }
        };
        if name == TLS_INSPECTOR {
            if out.tls_inspector {
                return Err(Error::invalid(
                    at,
                    format!("{TLS_INSPECTOR} is listed twice"),
                ));
            }
            if let Some((any, tpath)) = typed {
                let (cfg, cpath) = unpack::<PbTlsInspector>(any, &tpath)?;
                // `initial_read_buffer_size` only sizes Envoy's first peek;
                // ours reads what the ClientHello needs.
                reject_set!(
                    cpath,
                    cfg,
                    enable_ja3_fingerprinting,
                    enable_ja4_fingerprinting
                );
            }
            out.tls_inspector = true;
        } else {
            if out.proxy_protocol.is_some() {
                return Err(Error::invalid(
                    at,
                    format!("{PROXY_PROTOCOL} is listed twice"),
                ));
            }
            if out.tls_inspector {
                // Envoy would let the inspector read the PROXY header as
                // the connection's first bytes, find no ClientHello and
                // take every TLS client for a plaintext one.
                return Err(Error::invalid(
                    at,
                    format!(
                        "{PROXY_PROTOCOL} must come before {TLS_INSPECTOR}: the PROXY header \
                         is the connection's first bytes"
                    ),
                ));
            }
            let cfg = match typed {
                Some((any, tpath)) => {
                    let (cfg, cpath) = unpack::<PbProxyProtocol>(any, &tpath)?;
                    proxy_protocol(&cfg, &cpath)?
                }
                None => proxy_protocol(&PbProxyProtocol::default(), &at)?,
            };
            out.proxy_protocol = Some(Arc::new(cfg));
        }
    }
    if out.any() {
        out.timeout = timeout_or(
            l.listener_filters_timeout.as_ref(),
            LISTENER_FILTERS_TIMEOUT,
            &path.field("listener_filters_timeout"),
        )?;
        out.continue_on_timeout = l.continue_on_listener_filters_timeout;
    }
    Ok(out)
}

/// `envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol`.
/// `rules` (TLVs copied into dynamic metadata) is refused: nothing here
/// reads dynamic metadata. `tlv_location` only says where `rules` write.
fn proxy_protocol(cfg: &PbProxyProtocol, path: &Path) -> Result<ProxyProtocol> {
    reject_set!(path, cfg, rules);
    let mut out = ProxyProtocol {
        allow_without: cfg.allow_requests_without_proxy_protocol,
        allow_v1: true,
        allow_v2: true,
        stat_prefix: cfg.stat_prefix.clone(),
        pass_through: TlvSelection::None,
    };
    for (i, v) in cfg.disallowed_versions.iter().enumerate() {
        match core::proxy_protocol_config::Version::try_from(*v) {
            Ok(core::proxy_protocol_config::Version::V1) => out.allow_v1 = false,
            Ok(core::proxy_protocol_config::Version::V2) => out.allow_v2 = false,
            Err(_) => {
                return Err(Error::invalid(
                    path.field("disallowed_versions").index(i),
                    format!("{v} is not a PROXY protocol version (V1 or V2)"),
                ))
            }
        }
    }
    if !out.allow_v1 && !out.allow_v2 {
        return Err(Error::invalid(
            path.field("disallowed_versions"),
            "all PROXY protocol versions are disallowed",
        ));
    }
    if let Some(p) = &cfg.pass_through_tlvs {
        out.pass_through = tlv_selection(p, &path.field("pass_through_tlvs"))?;
    }
    Ok(out)
}

/// `ProxyProtocolPassThroughTLVs`: all TLVs, or those of the listed types.
pub(super) fn tlv_selection(
    p: &core::ProxyProtocolPassThroughTlVs,
    path: &Path,
) -> Result<TlvSelection> {
    use core::proxy_protocol_pass_through_tl_vs::PassTlVsMatchType as M;
    let types = p
        .tlv_type
        .iter()
        .enumerate()
        .map(|(i, t)| {
            u8::try_from(*t).map_err(|_| {
                Error::invalid(
                    path.field("tlv_type").index(i),
                    format!("{t} is not a TLV type (0-255)"),
                )
            })
        })
        .collect::<Result<Vec<u8>>>()?;
    match M::try_from(p.match_type) {
        Ok(M::IncludeAll) => Ok(TlvSelection::All),
        Ok(M::Include) => Ok(TlvSelection::Types(types)),
        Err(_) => Err(Error::invalid(
            path.field("match_type"),
            format!("{} is not INCLUDE_ALL or INCLUDE", p.match_type),
        )),
    }
}
