//! How a cluster reaches its hosts: the protocol (`typed_extension_protocol_options` or the cluster's deprecated fields; HTTP/1.1 when nothing is said, as in Envoy), `max_requests_per_connection`, `idle_timeout`, and `transport_socket` (its TLS in `upstream_tls`).

use engine::{UpstreamHttp2, UpstreamOptions, UpstreamProtocol, UPSTREAM_IDLE_TIMEOUT};
use prost::Name;

use super::common::{reject_set, timeout_or, u32_in};
use super::http_connection_manager::{reject_h2_flood_limits, reject_unused_h2};
use crate::decode::unpack;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::cluster::v3 as pb;
use crate::pb::envoy::config::core::v3 as core;
use crate::pb::envoy::extensions::upstreams::http::v3 as upstream;

/// What the protocol options chose, with where each came from.
struct Chosen {
    protocol: UpstreamProtocol,
    h1: Option<(core::Http1ProtocolOptions, Path)>,
    h2: Option<(core::Http2ProtocolOptions, Path)>,
    common: Option<(core::HttpProtocolOptions, Path)>,
}

/// The cluster's upstream protocol, HTTP/2 settings, TLS and connection
/// reuse.
pub(super) fn upstream_options(
    c: &pb::Cluster,
    path: &Path,
) -> Result<(UpstreamHttp2, UpstreamOptions)> {
    use pb::cluster::ClusterProtocolSelection as S;
    if c.protocol_selection != S::UseConfiguredProtocol as i32 {
        return Err(Error::unsupported_value(
            path.field("protocol_selection"),
            "USE_DOWNSTREAM_PROTOCOL",
        ));
    }
    let chosen = protocol(c, path)?;
    let http2 = match &chosen.h2 {
        Some((h2, h2path)) => http2(h2, h2path)?,
        None => UpstreamHttp2::default(),
    };
    let enable_trailers = match &chosen.h1 {
        Some((h1, h1path)) => http1(h1, h1path)?,
        None => false,
    };
    let mut max_requests = c.max_requests_per_connection;
    let mut idle_timeout = Some(UPSTREAM_IDLE_TIMEOUT);
    if let Some((common, cpath)) = &chosen.common {
        idle_timeout = timeout_or(
            common.idle_timeout.as_ref(),
            UPSTREAM_IDLE_TIMEOUT,
            &cpath.field("idle_timeout"),
        )?;
        reject_set!(
            cpath,
            common,
            max_headers_count,
            max_connection_duration,
            max_stream_duration,
            headers_with_underscores_action,
            max_response_headers_kb,
        );
        if common.max_requests_per_connection.is_some() {
            if c.max_requests_per_connection.is_some() {
                return Err(Error::invalid(
                    path.field("max_requests_per_connection"),
                    "cannot be combined with common_http_protocol_options.max_requests_per_connection",
                ));
            }
            max_requests = common.max_requests_per_connection;
        }
    }
    let tspath = path.field("transport_socket");
    let (inner, proxy_protocol, ipath) = match &c.transport_socket {
        Some(ts) => match super::upstream_proxy::unwrap(ts, &tspath)? {
            Some((pp, inner, ipath)) => (inner, Some(pp), ipath),
            None => (Some(ts.clone()), None, tspath.clone()),
        },
        None => (None, None, tspath.clone()),
    };
    let tls = match &inner {
        Some(ts) => Some(super::upstream_tls::transport_socket(
            ts,
            chosen.protocol,
            &ipath,
        )?),
        None => None,
    };
    if chosen.protocol == UpstreamProtocol::Auto && tls.is_none() {
        return Err(Error::invalid(
            path.field("transport_socket"),
            "auto_config chooses the protocol by ALPN, which needs a TLS transport socket",
        ));
    }
    Ok((
        http2,
        UpstreamOptions {
            protocol: chosen.protocol,
            tls,
            // Envoy: 0 means no limit.
            max_requests_per_connection: max_requests.filter(|&n| n > 0),
            http1_trailers: enable_trailers,
            idle_timeout,
            proxy_protocol,
        },
    ))
}

/// The protocol from `typed_extension_protocol_options` or the cluster's
/// deprecated `http_protocol_options` / `http2_protocol_options` /
/// `common_http_protocol_options`, which cannot be mixed with it.
fn protocol(c: &pb::Cluster, path: &Path) -> Result<Chosen> {
    let opts_path = path.field("typed_extension_protocol_options");
    let key = upstream::HttpProtocolOptions::full_name();
    for k in c.typed_extension_protocol_options.keys() {
        if *k != key {
            return Err(Error::unsupported_msg(
                opts_path.key(k),
                format!("protocol options {k:?} are not supported; only {key:?} are"),
            ));
        }
    }
    if let Some(any) = c.typed_extension_protocol_options.get(&key) {
        for (set, field) in [
            (c.http2_protocol_options.is_some(), "http2_protocol_options"),
            (c.http_protocol_options.is_some(), "http_protocol_options"),
            (
                c.common_http_protocol_options.is_some(),
                "common_http_protocol_options",
            ),
        ] {
            if set {
                return Err(Error::invalid(
                    path.field(field),
                    format!("cannot be combined with typed_extension_protocol_options[{key:?}]"),
                ));
            }
        }
        let (opts, p) = unpack::<upstream::HttpProtocolOptions>(any, &opts_path.key(&key))?;
        return protocol_options(&opts, &p);
    }
    let common = c
        .common_http_protocol_options
        .map(|o| (o, path.field("common_http_protocol_options")));
    Ok(
        match (&c.http_protocol_options, &c.http2_protocol_options) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid(
                    path.field("http_protocol_options"),
                    "cannot be combined with http2_protocol_options",
                ))
            }
            (None, Some(h2)) => Chosen {
                protocol: UpstreamProtocol::Http2,
                h1: None,
                h2: Some((h2.clone(), path.field("http2_protocol_options"))),
                common,
            },
            (h1, None) => Chosen {
                protocol: UpstreamProtocol::Http1,
                h1: h1.clone().map(|o| (o, path.field("http_protocol_options"))),
                h2: None,
                common,
            },
        },
    )
}

/// `envoy.extensions.upstreams.http.v3.HttpProtocolOptions`.
fn protocol_options(o: &upstream::HttpProtocolOptions, path: &Path) -> Result<Chosen> {
    use upstream::http_protocol_options::explicit_http_config::ProtocolConfig as P;
    use upstream::http_protocol_options::UpstreamProtocolOptions as U;
    reject_set!(
        path,
        o,
        upstream_http_protocol_options,
        http_filters,
        header_validation_config,
    );
    let common = o
        .common_http_protocol_options
        .map(|c| (c, path.field("common_http_protocol_options")));
    let chosen = |protocol,
                  h1: Option<(&core::Http1ProtocolOptions, Path)>,
                  h2: Option<(&core::Http2ProtocolOptions, Path)>| Chosen {
        protocol,
        h1: h1.map(|(o, p)| (o.clone(), p)),
        h2: h2.map(|(o, p)| (o.clone(), p)),
        common: common.clone(),
    };
    match &o.upstream_protocol_options {
        Some(U::ExplicitHttpConfig(e)) => {
            let epath = path.field("explicit_http_config");
            match &e.protocol_config {
                Some(P::Http2ProtocolOptions(h2)) => Ok(chosen(
                    UpstreamProtocol::Http2,
                    None,
                    Some((h2, epath.field("http2_protocol_options"))),
                )),
                Some(P::HttpProtocolOptions(h1)) => Ok(chosen(
                    UpstreamProtocol::Http1,
                    Some((h1, epath.field("http_protocol_options"))),
                    None,
                )),
                Some(P::Http3ProtocolOptions(_)) => {
                    Err(Error::unsupported(epath.field("http3_protocol_options")))
                }
                None => Err(Error::invalid(
                    epath,
                    "one of http_protocol_options or http2_protocol_options is required",
                )),
            }
        }
        Some(U::AutoConfig(a)) => {
            let apath = path.field("auto_config");
            reject_set!(
                apath,
                a,
                http3_protocol_options,
                alternate_protocols_cache_options
            );
            let default_h2 = core::Http2ProtocolOptions::default();
            Ok(chosen(
                UpstreamProtocol::Auto,
                a.http_protocol_options
                    .as_ref()
                    .map(|h1| (h1, apath.field("http_protocol_options"))),
                Some((
                    a.http2_protocol_options.as_ref().unwrap_or(&default_h2),
                    apath.field("http2_protocol_options"),
                )),
            ))
        }
        Some(U::UseDownstreamProtocolConfig(_)) => Err(Error::unsupported_msg(
            path.field("use_downstream_protocol_config"),
            "not supported; use explicit_http_config or auto_config",
        )),
        None => Err(Error::invalid(
            path.clone(),
            "one of explicit_http_config or auto_config is required",
        )),
    }
}

/// `http2_protocol_options` of an upstream.
fn http2(h2: &core::Http2ProtocolOptions, h2path: &Path) -> Result<UpstreamHttp2> {
    // `allow_connect`: extended CONNECT goes to HTTP/2 hosts whose own
    // SETTINGS allow it, whether or not it is set here.
    let h2_checked = core::Http2ProtocolOptions {
        allow_connect: false,
        ..h2.clone()
    };
    reject_unused_h2(&h2_checked, h2path)?;
    reject_h2_flood_limits(h2, h2path)?;
    let d = UpstreamHttp2::default();
    Ok(UpstreamHttp2 {
        max_concurrent_streams: u32_in(
            h2.max_concurrent_streams,
            1..=2_147_483_647,
            d.max_concurrent_streams,
            &h2path.field("max_concurrent_streams"),
        )?,
        initial_stream_window_size: u32_in(
            h2.initial_stream_window_size,
            65_535..=2_147_483_647,
            d.initial_stream_window_size,
            &h2path.field("initial_stream_window_size"),
        )?,
        initial_connection_window_size: u32_in(
            h2.initial_connection_window_size,
            65_535..=2_147_483_647,
            d.initial_connection_window_size,
            &h2path.field("initial_connection_window_size"),
        )?,
    })
}

/// `http_protocol_options` of an upstream: `enable_trailers` (request
/// trailers go out in a chunked body, response trailers are passed on;
/// Envoy drops both without it). The other fields are about serving
/// clients and are refused by name.
fn http1(h1: &core::Http1ProtocolOptions, path: &Path) -> Result<bool> {
    reject_set!(
        path,
        h1,
        allow_absolute_url,
        accept_http_10,
        default_host_for_http_10,
        header_key_format,
        allow_chunked_length,
        override_stream_error_on_invalid_http_message,
        send_fully_qualified_url,
        use_balsa_parser,
        allow_custom_methods,
        ignore_http_11_upgrade,
    );
    Ok(h1.enable_trailers)
}
