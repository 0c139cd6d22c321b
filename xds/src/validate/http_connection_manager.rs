//! `HttpConnectionManager` → `engine::HttpConnectionManager`: codec,
//! routes (inline or RDS), HTTP/1.1 and HTTP/2 options and limits,
//! timeouts, and the HTTP filters (the router, the stateful session).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use engine::{
    HeadersWithUnderscoresAction, Http2FloodLimits, HttpConnectionManager, Rds, RouteConfig,
};
use prost::Name;

use super::common::{reject_set, timeout_or, u32_in};
use super::hcm_headers;
use super::route::route_config;
use super::source::Allowed;
use crate::decode::{any_type_name, any_type_url, unpack};
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::core::v3 as core;
use crate::pb::envoy::extensions::filters::http::compressor::v3::Compressor as PbCompressor;
use crate::pb::envoy::extensions::filters::http::cors::v3::Cors;
use crate::pb::envoy::extensions::filters::http::csrf::v3::CsrfPolicy;
use crate::pb::envoy::extensions::filters::http::decompressor::v3::Decompressor as PbDecompressor;
use crate::pb::envoy::extensions::filters::http::ext_authz::v3::ExtAuthz as PbExtAuthz;
use crate::pb::envoy::extensions::filters::http::fault::v3::HttpFault;
use crate::pb::envoy::extensions::filters::http::grpc_http1_bridge::v3::Config as PbGrpcBridge;
use crate::pb::envoy::extensions::filters::http::grpc_web::v3::GrpcWeb as PbGrpcWeb;
use crate::pb::envoy::extensions::filters::http::health_check::v3::HealthCheck as PbHealthCheck;
use crate::pb::envoy::extensions::filters::http::local_ratelimit::v3::LocalRateLimit as PbLocalRateLimit;
use crate::pb::envoy::extensions::filters::http::rbac::v3::Rbac as PbRbac;
use crate::pb::envoy::extensions::filters::http::router::v3::Router;
use crate::pb::envoy::extensions::filters::http::stateful_session::v3::StatefulSession;
use crate::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;

/// Envoy's name for the router filter; with no `typed_config` the filter is
/// identified by it (older configs do this).
const ROUTER_NAME: &str = "envoy.filters.http.router";

const WINDOW_RANGE: std::ops::RangeInclusive<u32> = 65_535..=2_147_483_647;
/// Our defaults when unset (Envoy's are 256 MiB for both): enough for a
/// fast stream without letting one connection pin much memory per core.
const DEFAULT_STREAM_WINDOW: u32 = 1024 * 1024;
const DEFAULT_CONNECTION_WINDOW: u32 = 16 * 1024 * 1024;
const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(3600);
const DEFAULT_STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Envoy's default `delayed_close_timeout`.
const DEFAULT_DELAYED_CLOSE: Duration = Duration::from_secs(1);

/// `http_protocol_options` (`Http1ProtocolOptions`): the fields we honour;
/// any other set field is refused by name.
fn http1_options(
    o: Option<&core::Http1ProtocolOptions>,
    path: &Path,
) -> Result<engine::Http1Options> {
    let Some(o) = o else {
        return Ok(engine::Http1Options::default());
    };
    reject_set!(
        path,
        o,
        header_key_format,
        allow_chunked_length,
        override_stream_error_on_invalid_http_message,
        send_fully_qualified_url,
        use_balsa_parser,
        allow_custom_methods,
        ignore_http_11_upgrade,
    );
    if !o.default_host_for_http_10.is_empty() && !o.accept_http_10 {
        return Err(Error::invalid(
            path.field("default_host_for_http_10"),
            "only meaningful with accept_http_10: true",
        ));
    }
    Ok(engine::Http1Options {
        accept_http_10: o.accept_http_10,
        default_host_for_http_10: Some(o.default_host_for_http_10.clone())
            .filter(|h| !h.is_empty()),
        allow_absolute_url: o.allow_absolute_url.unwrap_or(true),
        enable_trailers: o.enable_trailers,
    })
}

/// Validates an `HttpConnectionManager` (inline routes or RDS).
pub fn http_connection_manager(
    m: &hcm::HttpConnectionManager,
    path: &Path,
    known_clusters: &HashSet<String>,
) -> Result<HttpConnectionManager> {
    // Order matters: of several errors, the first one checked is reported.
    reject_unimplemented(m, path)?;
    let codec_type = codec_type(m.codec_type, &path.field("codec_type"))?;
    let access_log = super::access_log::access_logs(&m.access_log, &path.field("access_log"))?;
    let http1 = http1_options(
        m.http_protocol_options.as_ref(),
        &path.field("http_protocol_options"),
    )?;
    if m.stat_prefix.is_empty() {
        return Err(Error::invalid(path.field("stat_prefix"), "required"));
    }
    let trust = hcm_headers::client_trust(m, path)?;
    let (route_config, rds) = routes(m, path, known_clusters)?;
    let mut http_filters = http_filters(&m.http_filters, &path.field("http_filters"))?;
    let tracing = match &m.tracing {
        Some(t) => super::tracing::tracing(
            t,
            &path.field("tracing"),
            router_child_spans(&m.http_filters),
        )?,
        None => None,
    };
    if let Some(tracing) = tracing {
        // Tracing sees the request before any filter and its end after.
        http_filters.insert(
            0,
            engine::HttpFilter {
                name: "tracing".to_owned(),
                config: engine::HttpFilterConfig::Tracing(Arc::new(tracing)),
            },
        );
    }
    let envoy_headers = router_envoy_headers(&m.http_filters);

    let h2 = m.http2_protocol_options.clone().unwrap_or_default();
    let h2path = path.field("http2_protocol_options");
    // `allow_connect` is read here (WebSocket over HTTP/2); the others
    // are refused by name.
    reject_unused_h2(
        &core::Http2ProtocolOptions {
            allow_connect: false,
            ..h2.clone()
        },
        &h2path,
    )?;
    let common = m.common_http_protocol_options.unwrap_or_default();
    let cpath = path.field("common_http_protocol_options");
    reject_set!(cpath, common, max_response_headers_kb);
    let headers_with_underscores_action =
        underscores_action(common.headers_with_underscores_action, &cpath)?;
    let headers_kb = u32_in(
        m.max_request_headers_kb,
        1..=8192,
        60,
        &path.field("max_request_headers_kb"),
    )?;
    let drain_timeout = match &m.drain_timeout {
        Some(d) => super::common::duration(d, &path.field("drain_timeout"))?,
        None => DEFAULT_DRAIN_TIMEOUT,
    };
    Ok(HttpConnectionManager {
        stat_prefix: m.stat_prefix.clone(),
        codec_type,
        http1,
        access_log,
        route_config: Arc::new(route_config),
        rds,
        max_concurrent_streams: u32_in(
            h2.max_concurrent_streams,
            1..=2_147_483_647,
            engine::DEFAULT_DOWNSTREAM_MAX_CONCURRENT_STREAMS,
            &h2path.field("max_concurrent_streams"),
        )?,
        max_header_list_size: headers_kb * 1024,
        max_headers_count: u32_in(
            common.max_headers_count,
            1..=u32::MAX,
            engine::DEFAULT_MAX_HEADERS_COUNT,
            &cpath.field("max_headers_count"),
        )?,
        headers_with_underscores_action,
        http2_flood: http2_flood_limits(&h2, &h2path)?,
        initial_stream_window_size: u32_in(
            h2.initial_stream_window_size,
            WINDOW_RANGE,
            DEFAULT_STREAM_WINDOW,
            &h2path.field("initial_stream_window_size"),
        )?,
        initial_connection_window_size: u32_in(
            h2.initial_connection_window_size,
            WINDOW_RANGE,
            DEFAULT_CONNECTION_WINDOW,
            &h2path.field("initial_connection_window_size"),
        )?,
        allow_connect: h2.allow_connect,
        local_reply: m
            .local_reply_config
            .as_ref()
            .map(|c| super::local_reply::local_reply(c, &path.field("local_reply_config")))
            .transpose()?
            .map(Arc::new),
        idle_timeout: timeout_or(
            common.idle_timeout.as_ref(),
            DEFAULT_IDLE_TIMEOUT,
            &cpath.field("idle_timeout"),
        )?,
        stream_idle_timeout: timeout_or(
            m.stream_idle_timeout.as_ref(),
            DEFAULT_STREAM_IDLE_TIMEOUT,
            &path.field("stream_idle_timeout"),
        )?,
        max_stream_duration: limit(
            common.max_stream_duration.as_ref(),
            &cpath.field("max_stream_duration"),
        )?,
        delayed_close_timeout: match &m.delayed_close_timeout {
            Some(d) => super::common::duration(d, &path.field("delayed_close_timeout"))?,
            None => DEFAULT_DELAYED_CLOSE,
        },
        request_headers_timeout: limit(
            m.request_headers_timeout.as_ref(),
            &path.field("request_headers_timeout"),
        )?,
        request_timeout: limit(m.request_timeout.as_ref(), &path.field("request_timeout"))?,
        max_connection_duration: limit(
            common.max_connection_duration.as_ref(),
            &cpath.field("max_connection_duration"),
        )?,
        max_requests_per_connection: common.max_requests_per_connection.filter(|&n| n > 0),
        drain_timeout,
        trust,
        request_id: hcm_headers::request_id(m, path)?,
        add_user_agent: m.add_user_agent.unwrap_or(false),
        via: hcm_headers::via(m, path)?,
        server_header: hcm_headers::server_header(m, path)?,
        path_normalization: hcm_headers::path_normalization(m, path)?,
        strip_host_port: hcm_headers::strip_host_port(m, path)?,
        strip_trailing_host_dot: m.strip_trailing_host_dot,
        append_x_forwarded_port: m.append_x_forwarded_port,
        envoy_headers,
        http_filters,
        upgrades: super::upgrade::manager_upgrades(
            &m.upgrade_configs,
            &path.field("upgrade_configs"),
        )?,
    })
}

/// The connection manager's fields we do not implement, refused by name.
fn reject_unimplemented(m: &hcm::HttpConnectionManager, path: &Path) -> Result<()> {
    reject_set!(
        path,
        m,
        forward_client_cert_details,
        proxy_100_continue,
        stream_error_on_invalid_http_message,
        http3_protocol_options,
    );
    Ok(())
}

/// `codec_type` (at `path`): AUTO, HTTP1 or HTTP2.
fn codec_type(v: i32, path: &Path) -> Result<engine::CodecType> {
    use hcm::http_connection_manager::CodecType;
    match CodecType::try_from(v) {
        Ok(CodecType::Auto) => Ok(engine::CodecType::Auto),
        Ok(CodecType::Http1) => Ok(engine::CodecType::Http1),
        Ok(CodecType::Http2) => Ok(engine::CodecType::Http2),
        Ok(other) => Err(Error::unsupported_value(path.clone(), other.as_str_name())),
        Err(_) => Err(Error::invalid(path.clone(), format!("unknown value {v}"))),
    }
}

/// The route table: `route_config` inline (checked against
/// `known_clusters`), or `rds`, whose table starts empty under its name.
fn routes(
    m: &hcm::HttpConnectionManager,
    path: &Path,
    known_clusters: &HashSet<String>,
) -> Result<(RouteConfig, Option<Rds>)> {
    use hcm::http_connection_manager::RouteSpecifier;
    match &m.route_specifier {
        Some(RouteSpecifier::RouteConfig(rc)) => Ok((
            route_config(rc, &path.field("route_config"), known_clusters, true)?,
            None,
        )),
        Some(RouteSpecifier::Rds(r)) => {
            let rpath = path.field("rds");
            if r.route_config_name.is_empty() {
                return Err(Error::invalid(rpath.field("route_config_name"), "required"));
            }
            let source = match &r.config_source {
                Some(s) => super::source::config_source(
                    s,
                    &rpath.field("config_source"),
                    Allowed::AdsOnly,
                )?,
                None => return Err(Error::invalid(rpath.field("config_source"), "required")),
            };
            let rds = Rds {
                route_config_name: r.route_config_name.clone(),
                initial_fetch_timeout: super::source::initial_fetch_timeout(&source),
            };
            let empty = RouteConfig {
                name: r.route_config_name.clone(),
                virtual_hosts: Vec::new(),
            };
            Ok((empty, Some(rds)))
        }
        Some(RouteSpecifier::ScopedRoutes(_)) => {
            Err(Error::unsupported(path.field("scoped_routes")))
        }
        None => Err(Error::invalid(path.field("route_config"), "required")),
    }
}

/// An optional duration limit: unset or 0 is `None`, no limit.
fn limit(d: Option<&prost_types::Duration>, path: &Path) -> Result<Option<Duration>> {
    match d {
        Some(d) => Ok(Some(super::common::duration(d, path)?).filter(|d| !d.is_zero())),
        None => Ok(None),
    }
}

/// `Http2ProtocolOptions` fields other than the stream limit, the windows
/// and the flood limits.
pub(crate) fn reject_unused_h2(h2: &core::Http2ProtocolOptions, path: &Path) -> Result<()> {
    reject_set!(
        path,
        h2,
        hpack_table_size,
        allow_connect,
        allow_metadata,
        stream_error_on_invalid_http_messaging,
        custom_settings_parameters,
        override_stream_error_on_invalid_http_message,
        connection_keepalive,
    );
    Ok(())
}

/// The flood limits of `Http2ProtocolOptions`: implemented for downstream
/// connections only, so a cluster rejects them.
pub(crate) fn reject_h2_flood_limits(h2: &core::Http2ProtocolOptions, path: &Path) -> Result<()> {
    reject_set!(
        path,
        h2,
        max_outbound_frames,
        max_outbound_control_frames,
        max_consecutive_inbound_frames_with_empty_payload,
        max_inbound_priority_frames_per_stream,
        max_inbound_window_update_frames_per_data_frame_sent,
    );
    Ok(())
}

/// A listener's flood limits, Envoy's defaults where unset (and Envoy's
/// ranges: the outbound limits and the WINDOW_UPDATE ratio at least 1).
fn http2_flood_limits(h2: &core::Http2ProtocolOptions, path: &Path) -> Result<Http2FloodLimits> {
    let d = Http2FloodLimits::default();
    Ok(Http2FloodLimits {
        max_outbound_frames: u32_in(
            h2.max_outbound_frames,
            1..=u32::MAX,
            d.max_outbound_frames,
            &path.field("max_outbound_frames"),
        )?,
        max_outbound_control_frames: u32_in(
            h2.max_outbound_control_frames,
            1..=u32::MAX,
            d.max_outbound_control_frames,
            &path.field("max_outbound_control_frames"),
        )?,
        max_consecutive_inbound_frames_with_empty_payload: h2
            .max_consecutive_inbound_frames_with_empty_payload
            .unwrap_or(d.max_consecutive_inbound_frames_with_empty_payload),
        max_inbound_priority_frames_per_stream: h2
            .max_inbound_priority_frames_per_stream
            .unwrap_or(d.max_inbound_priority_frames_per_stream),
        max_inbound_window_update_frames_per_data_frame_sent: u32_in(
            h2.max_inbound_window_update_frames_per_data_frame_sent,
            1..=u32::MAX,
            d.max_inbound_window_update_frames_per_data_frame_sent,
            &path.field("max_inbound_window_update_frames_per_data_frame_sent"),
        )?,
    })
}

/// `common_http_protocol_options.headers_with_underscores_action`.
fn underscores_action(v: i32, cpath: &Path) -> Result<HeadersWithUnderscoresAction> {
    use core::http_protocol_options::HeadersWithUnderscoresAction as Pb;
    match Pb::try_from(v) {
        Ok(Pb::Allow) => Ok(HeadersWithUnderscoresAction::Allow),
        Ok(Pb::RejectRequest) => Ok(HeadersWithUnderscoresAction::RejectRequest),
        Ok(Pb::DropHeader) => Ok(HeadersWithUnderscoresAction::DropHeader),
        Err(_) => Err(Error::invalid(
            cpath.field("headers_with_underscores_action"),
            format!("unknown value {v}"),
        )),
    }
}

/// Whether the router (the last filter, which [`http_filters`] checked)
/// adds Envoy's request headers: unless `suppress_envoy_headers`.
fn router_envoy_headers(filters: &[hcm::HttpFilter]) -> bool {
    router_config(filters).is_none_or(|r| !r.suppress_envoy_headers)
}

/// The router's `start_child_span`: a span per upstream attempt, as
/// `tracing.spawn_upstream_span` asks.
fn router_child_spans(filters: &[hcm::HttpFilter]) -> bool {
    router_config(filters).is_some_and(|r| r.start_child_span)
}

/// The router's config (the list's last filter), when it has one.
fn router_config(filters: &[hcm::HttpFilter]) -> Option<Router> {
    use hcm::http_filter::ConfigType;
    filters.last().and_then(|f| match &f.config_type {
        Some(ConfigType::TypedConfig(any)) => {
            <Router as prost::Message>::decode(any.value.as_slice()).ok()
        }
        _ => None,
    })
}

/// The filter list must end in the router; any other filter is an error
/// unless `is_optional` (then it is skipped, as gRFC A39 specifies). The
/// stateful session filter (gRFC A55) is supported (at most one may be
/// configured). The filters we run, in order, the router last.
/// The filters of this family, by their config's type: `None`
/// for a type that is none of them.
fn edge_filter(
    type_name: &str,
    any: &prost_types::Any,
    path: &Path,
) -> Result<Option<engine::HttpFilterConfig>> {
    Ok(Some(if type_name == Cors::full_name() {
        // `Cors` has no fields: the policies are the routes'.
        let _ = unpack::<Cors>(any, path)?;
        engine::HttpFilterConfig::Cors
    } else if type_name == PbCompressor::full_name() {
        let (c, cpath) = unpack::<PbCompressor>(any, path)?;
        engine::HttpFilterConfig::Compressor(Arc::new(super::compressor::compressor(&c, &cpath)?))
    } else if type_name == PbDecompressor::full_name() {
        let (d, dpath) = unpack::<PbDecompressor>(any, path)?;
        engine::HttpFilterConfig::Decompressor(Arc::new(super::compressor::decompressor(
            &d, &dpath,
        )?))
    } else if type_name == PbHealthCheck::full_name() {
        let (h, hpath) = unpack::<PbHealthCheck>(any, path)?;
        engine::HttpFilterConfig::HealthCheck(Arc::new(super::health_check_filter::health_check(
            &h, &hpath,
        )?))
    } else if type_name == PbGrpcBridge::full_name() {
        let (b, bpath) = unpack::<PbGrpcBridge>(any, path)?;
        // The query is the gateway's to keep: a filter edits no `:path`.
        reject_set!(bpath, b, ignore_query_parameters);
        engine::HttpFilterConfig::GrpcHttp1Bridge {
            upgrade_protobuf_to_grpc: b.upgrade_protobuf_to_grpc,
        }
    } else if type_name == PbGrpcWeb::full_name() {
        // `GrpcWeb` has no fields.
        let _ = unpack::<PbGrpcWeb>(any, path)?;
        engine::HttpFilterConfig::GrpcWeb
    } else if type_name == PbRbac::full_name() {
        let (r, rpath) = unpack::<PbRbac>(any, path)?;
        engine::HttpFilterConfig::Rbac(Arc::new(super::rbac::http_rbac(&r, &rpath)?))
    } else if type_name == PbLocalRateLimit::full_name() {
        let (l, lpath) = unpack::<PbLocalRateLimit>(any, path)?;
        engine::HttpFilterConfig::LocalRateLimit(Arc::new(
            super::local_rate_limit::local_rate_limit(&l, &lpath)?,
        ))
    } else if type_name == PbExtAuthz::full_name() {
        let (a, apath) = unpack::<PbExtAuthz>(any, path)?;
        engine::HttpFilterConfig::ExtAuthz(Arc::new(super::ext_authz::ext_authz(&a, &apath)?))
    } else if type_name == HttpFault::full_name() {
        let (f, fpath) = unpack::<HttpFault>(any, path)?;
        engine::HttpFilterConfig::Fault(Arc::new(super::fault::fault(&f, &fpath)?))
    } else if type_name == CsrfPolicy::full_name() {
        let (p, ppath) = unpack::<CsrfPolicy>(any, path)?;
        engine::HttpFilterConfig::Csrf(Arc::new(super::csrf::csrf_policy(&p, &ppath)?))
    } else {
        return Ok(None);
    }))
}

/// Each compressor learns every compressor of its chain (coding and
/// `choose_first`, in order): they negotiate `accept-encoding` as one.
fn tell_compressors_of_each_other(filters: &mut [engine::HttpFilter]) {
    use engine::HttpFilterConfig::Compressor;
    let chain: Vec<_> = filters
        .iter()
        .filter_map(|f| match &f.config {
            Compressor(c) => Some(engine::ChainMember {
                coding: c.library.coding(),
                choose_first: c.choose_first,
                content_types: c.response.common.content_types.clone(),
            }),
            _ => None,
        })
        .collect();
    for f in filters {
        if let Compressor(c) = &mut f.config {
            Arc::make_mut(c).chain = chain.clone();
        }
    }
}

fn http_filters(filters: &[hcm::HttpFilter], path: &Path) -> Result<Vec<engine::HttpFilter>> {
    use hcm::http_filter::ConfigType;
    let mut stateful_session: Option<usize> = None;
    let mut out = Vec::with_capacity(2);
    if filters.is_empty() {
        return Err(Error::invalid(
            path.clone(),
            format!("must end with the router filter ({ROUTER_NAME})"),
        ));
    }
    let last = filters.len() - 1;
    for (i, f) in filters.iter().enumerate() {
        let fpath = path.index(i);
        // Reaching the end of this match means `f` is the router.
        match &f.config_type {
            Some(ConfigType::TypedConfig(any)) => {
                let tpath = fpath.field("typed_config");
                let type_name = any_type_name(any, &tpath)?;
                if type_name == StatefulSession::full_name() {
                    let (config, cpath) = unpack::<StatefulSession>(any, &tpath)?;
                    let mut config = super::session::stateful_session(&config, &cpath)?;
                    if f.disabled {
                        // Envoy: off unless a route or virtual host enables
                        // it with its own per-route config. A filter with no
                        // session state is exactly that (`session::effective`).
                        config.session_state = None;
                    }
                    if let Some(first) = stateful_session {
                        return Err(Error::unsupported_msg(
                            tpath.clone(),
                            format!(
                                "only one stateful session filter is supported (another is http_filters[{first}])"
                            ),
                        ));
                    }
                    stateful_session = Some(i);
                    out.push(engine::HttpFilter {
                        name: f.name.clone(),
                        config: engine::HttpFilterConfig::StatefulSession(config),
                    });
                    continue;
                }
                reject_set!(fpath, f, disabled);
                if let Some(config) = edge_filter(&type_name, any, &tpath)? {
                    let kind = std::mem::discriminant(&config);
                    // Several compressors may share a chain (one per
                    // coding); any other filter of these is one per chain.
                    let several = matches!(config, engine::HttpFilterConfig::Compressor(_));
                    if let Some(first) = out.iter().position(|o: &engine::HttpFilter| {
                        !several && std::mem::discriminant(&o.config) == kind
                    }) {
                        return Err(Error::unsupported_msg(
                            tpath.clone(),
                            format!(
                                "only one filter of this type is supported (another is http_filters[{first}])"
                            ),
                        ));
                    }
                    out.push(engine::HttpFilter {
                        name: f.name.clone(),
                        config,
                    });
                    continue;
                }
                if type_name == Router::full_name() {
                    let (router, rpath) = unpack::<Router>(any, &tpath)?;
                    reject_set!(
                        rpath,
                        router,
                        dynamic_stats,
                        upstream_log,
                        strict_check_headers,
                        respect_expected_rq_timeout,
                        suppress_grpc_request_failure_code_stats,
                        upstream_http_filters,
                    );
                } else if f.is_optional {
                    continue;
                } else {
                    return Err(Error::unsupported_msg(
                        tpath.clone(),
                        format!(
                            "HTTP filter {:?} ({}) is not supported (set is_optional: true to skip it)",
                            f.name,
                            any_type_url(any, &tpath)?
                        ),
                    ));
                }
            }
            _ if f.disabled => return Err(Error::unsupported(fpath.field("disabled"))),
            Some(ConfigType::ConfigDiscovery(_)) if f.is_optional => continue,
            Some(ConfigType::ConfigDiscovery(_)) => {
                return Err(Error::unsupported(fpath.field("config_discovery")))
            }
            None if f.name == ROUTER_NAME => {}
            None if f.is_optional => continue,
            None => {
                return Err(Error::unsupported_msg(
                    fpath.field("name"),
                    format!(
                        "HTTP filter {:?} is not supported (set is_optional: true to skip it)",
                        f.name
                    ),
                ))
            }
        };
        if i != last {
            return Err(Error::invalid(
                fpath,
                "the router filter must be the last filter",
            ));
        }
        out.push(engine::HttpFilter {
            name: f.name.clone(),
            config: engine::HttpFilterConfig::Router,
        });
        tell_compressors_of_each_other(&mut out);
        return Ok(out);
    }
    // The last filter was an optional one we skipped.
    Err(Error::invalid(
        path.clone(),
        format!("must end with the router filter ({ROUTER_NAME})"),
    ))
}
