//! A cluster's `transport_socket` of type `envoy.transport_sockets.upstream_proxy_protocol` (`ProxyProtocolUpstreamTransport`) → `engine::UpstreamProxyProtocol` and the transport socket it wraps (TLS, or `raw_buffer`: plaintext).

use engine::UpstreamProxyProtocol;
use prost::Name;

use super::common::reject_set;
use super::listener_filters::tlv_selection;
use crate::decode::{any_type_name, unpack};
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::core::v3 as core;
use crate::pb::envoy::extensions::transport_sockets::proxy_protocol::v3::ProxyProtocolUpstreamTransport;

/// Envoy's name for the plaintext transport socket.
const RAW_BUFFER: &str = "envoy.transport_sockets.raw_buffer";

/// `Some` when `ts` is a PROXY protocol transport socket: its settings,
/// the socket it wraps (`None`: plaintext) and that socket's path.
pub(super) fn unwrap(
    ts: &core::TransportSocket,
    path: &Path,
) -> Result<Option<(UpstreamProxyProtocol, Option<core::TransportSocket>, Path)>> {
    let Some(core::transport_socket::ConfigType::TypedConfig(any)) = &ts.config_type else {
        return Ok(None);
    };
    let tpath = path.field("typed_config");
    if any_type_name(any, &tpath)? != ProxyProtocolUpstreamTransport::full_name() {
        return Ok(None);
    }
    let (cfg, cpath) = unpack::<ProxyProtocolUpstreamTransport>(any, &tpath)?;
    // Envoy marks `tlv_as_pool_key` not implemented; `allow_unspecified_address`
    // only matters for downstreams without addresses, which we never have.
    reject_set!(cpath, cfg, tlv_as_pool_key);
    let config = cfg.config.clone().unwrap_or_default();
    let kpath = cpath.field("config");
    use core::proxy_protocol_config::Version;
    let v2 = match Version::try_from(config.version) {
        Ok(Version::V1) => false,
        Ok(Version::V2) => true,
        Err(_) => {
            return Err(Error::invalid(
                kpath.field("version"),
                format!("{} is not V1 or V2", config.version),
            ))
        }
    };
    let pass_through = match &config.pass_through_tlvs {
        Some(p) => tlv_selection(p, &kpath.field("pass_through_tlvs"))?,
        None => engine::TlvSelection::None,
    };
    let mut added_tlvs = Vec::new();
    for (i, t) in config.added_tlvs.iter().enumerate() {
        let at = kpath.field("added_tlvs").index(i);
        reject_set!(at, t, format_string);
        let kind = u8::try_from(t.r#type).map_err(|_| {
            Error::invalid(
                at.field("type"),
                format!("{} is not a TLV type (0-255)", t.r#type),
            )
        })?;
        added_tlvs.push((kind, t.value.to_vec()));
    }
    if !v2 && (!added_tlvs.is_empty() || pass_through != engine::TlvSelection::None) {
        return Err(Error::invalid(
            kpath,
            "TLVs (added_tlvs, pass_through_tlvs) need version V2: a v1 header has none",
        ));
    }
    let ipath = cpath.field("transport_socket");
    let inner = match cfg.transport_socket {
        None => {
            return Err(Error::invalid(
                ipath,
                "required (the socket under the PROXY header: raw_buffer or tls)",
            ))
        }
        Some(inner) => {
            let raw = match &inner.config_type {
                None => inner.name == RAW_BUFFER,
                Some(core::transport_socket::ConfigType::TypedConfig(a)) => a
                    .type_url
                    .ends_with("envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer"),
            };
            (!raw).then_some(inner)
        }
    };
    Ok(Some((
        UpstreamProxyProtocol {
            v2,
            pass_through,
            added_tlvs,
        },
        inner,
        ipath,
    )))
}
