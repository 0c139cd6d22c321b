//! `Cluster.health_checks` → `engine::HealthCheck`, and an endpoint's
//! `hostname` / `health_check_config` → `engine::EndpointCheck`, with
//! Envoy's ranges and defaults.

use std::time::Duration;

use engine::{
    AddedHeader, AppendAction, Checker, EndpointCheck, GrpcCheck, HealthCheck, HttpCheck, TcpCheck,
    DEFAULT_NO_TRAFFIC_INTERVAL,
};

use super::common::{duration, reject_set, socket_address_at};
use super::header_mutation::header_value_ok;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::core::v3 as core;
use crate::pb::envoy::config::endpoint::v3 as ep;

use core::health_check::{self as hc, HealthChecker};

/// Envoy's default `http_health_check.response_buffer_size`.
const DEFAULT_RESPONSE_BUFFER: u64 = 1024;
/// The most of a body a check searches (the probe reads no more).
const MAX_RESPONSE_BUFFER: u64 = 1 << 20;

/// `health_checks`: at most one (Envoy refuses more).
pub fn health_checks(list: &[core::HealthCheck], path: &Path) -> Result<Option<HealthCheck>> {
    match list {
        [] => Ok(None),
        [one] => health_check(one, &path.index(0)).map(Some),
        _ => Err(Error::unsupported_msg(
            path.clone(),
            "multiple health checks are not supported (as in Envoy)",
        )),
    }
}

fn health_check(h: &core::HealthCheck, path: &Path) -> Result<HealthCheck> {
    reject_set!(
        path,
        h,
        alt_port,
        event_service,
        event_logger,
        transport_socket_match_criteria,
    );
    if !h.event_log_path.is_empty() {
        return Err(Error::unsupported_msg(
            path.field("event_log_path"),
            "health check events are logged through the gateway's log",
        ));
    }
    let timeout = positive(h.timeout.as_ref(), path, "timeout")?
        .ok_or_else(|| Error::invalid(path.field("timeout"), "required"))?;
    let interval = positive(h.interval.as_ref(), path, "interval")?
        .ok_or_else(|| Error::invalid(path.field("interval"), "required"))?;
    let opt = |name: &str, d: Option<&prost_types::Duration>| -> Result<Duration> {
        match d {
            None => Ok(Duration::ZERO),
            Some(d) => duration(d, &path.field(name)),
        }
    };
    let threshold = |name: &str, v: Option<u32>| -> Result<u32> {
        // Required by Envoy; 0 behaves as 1 there (the first result counts).
        v.map(|v| v.max(1))
            .ok_or_else(|| Error::invalid(path.field(name), "required"))
    };
    let no_traffic_interval =
        positive(h.no_traffic_interval.as_ref(), path, "no_traffic_interval")?
            .unwrap_or(DEFAULT_NO_TRAFFIC_INTERVAL);
    let unhealthy_interval =
        positive(h.unhealthy_interval.as_ref(), path, "unhealthy_interval")?.unwrap_or(interval);
    let checker = match &h.health_checker {
        Some(HealthChecker::HttpHealthCheck(x)) => {
            Checker::Http(http(x, &path.field("http_health_check"))?)
        }
        Some(HealthChecker::TcpHealthCheck(x)) => {
            Checker::Tcp(tcp(x, &path.field("tcp_health_check"))?)
        }
        Some(HealthChecker::GrpcHealthCheck(x)) => {
            Checker::Grpc(grpc(x, &path.field("grpc_health_check"))?)
        }
        Some(HealthChecker::CustomHealthCheck(_)) => {
            return Err(Error::unsupported(path.field("custom_health_check")))
        }
        None => {
            return Err(Error::invalid(
                path.clone(),
                "one of http_health_check, tcp_health_check or grpc_health_check is required",
            ))
        }
    };
    Ok(HealthCheck {
        timeout,
        interval,
        initial_jitter: opt("initial_jitter", h.initial_jitter.as_ref())?,
        interval_jitter: opt("interval_jitter", h.interval_jitter.as_ref())?,
        interval_jitter_percent: h.interval_jitter_percent,
        unhealthy_threshold: threshold("unhealthy_threshold", h.unhealthy_threshold)?,
        healthy_threshold: threshold("healthy_threshold", h.healthy_threshold)?,
        reuse_connection: h.reuse_connection.unwrap_or(true),
        no_traffic_interval,
        no_traffic_healthy_interval: positive(
            h.no_traffic_healthy_interval.as_ref(),
            path,
            "no_traffic_healthy_interval",
        )?
        .unwrap_or(no_traffic_interval),
        unhealthy_interval,
        unhealthy_edge_interval: positive(
            h.unhealthy_edge_interval.as_ref(),
            path,
            "unhealthy_edge_interval",
        )?
        .unwrap_or(unhealthy_interval),
        healthy_edge_interval: positive(
            h.healthy_edge_interval.as_ref(),
            path,
            "healthy_edge_interval",
        )?
        .unwrap_or(interval),
        always_log_failures: h.always_log_health_check_failures,
        always_log_success: h.always_log_health_check_success,
        ignore_health_on_host_removal: false,
        close_connections_on_failure: false,
        tls_alpn: match &h.tls_options {
            None => Vec::new(),
            Some(t) => super::tls::alpn_protocols(
                &t.alpn_protocols,
                &path.field("tls_options").field("alpn_protocols"),
            )?,
        },
        checker,
    })
}

/// A duration that, when set, must be above zero (Envoy's `gt {}`).
fn positive(
    d: Option<&prost_types::Duration>,
    path: &Path,
    name: &str,
) -> Result<Option<Duration>> {
    let Some(d) = d else { return Ok(None) };
    let d = duration(d, &path.field(name))?;
    if d.is_zero() {
        return Err(Error::invalid(path.field(name), "must be greater than 0"));
    }
    Ok(Some(d))
}

fn http(h: &hc::HttpHealthCheck, path: &Path) -> Result<HttpCheck> {
    reject_set!(path, h, send, service_name_matcher);
    if h.path.is_empty() {
        return Err(Error::invalid(path.field("path"), "required"));
    }
    if !h.path.starts_with('/') || !header_value_ok(&h.path) {
        return Err(Error::invalid(
            path.field("path"),
            format!("{:?} is not a request path", h.path),
        ));
    }
    if !header_value_ok(&h.host) {
        return Err(Error::invalid(
            path.field("host"),
            "not a valid header value",
        ));
    }
    use crate::pb::envoy::r#type::v3::CodecClientType;
    let http2 = match CodecClientType::try_from(h.codec_client_type) {
        Ok(CodecClientType::Http1) => false,
        Ok(CodecClientType::Http2) => true,
        Ok(CodecClientType::Http3) => {
            return Err(Error::unsupported_value(
                path.field("codec_client_type"),
                "HTTP3",
            ))
        }
        Err(_) => {
            return Err(Error::invalid(
                path.field("codec_client_type"),
                format!("unknown value {}", h.codec_client_type),
            ))
        }
    };
    let method = match core::RequestMethod::try_from(h.method) {
        Ok(core::RequestMethod::MethodUnspecified) => "GET",
        // Envoy refuses both: they would not be a check of the host.
        Ok(core::RequestMethod::Connect) => {
            return Err(Error::invalid(
                path.field("method"),
                "CONNECT is not allowed",
            ))
        }
        Ok(m) => m.as_str_name(),
        Err(_) => {
            return Err(Error::invalid(
                path.field("method"),
                format!("unknown value {}", h.method),
            ))
        }
    };
    let mut headers_to_remove = Vec::with_capacity(h.request_headers_to_remove.len());
    for (i, name) in h.request_headers_to_remove.iter().enumerate() {
        if !super::common::is_token(name) {
            return Err(Error::invalid(
                path.field("request_headers_to_remove").index(i),
                format!("{name:?} is not a header name"),
            ));
        }
        headers_to_remove.push(name.to_ascii_lowercase());
    }
    let expected = match ranges(&h.expected_statuses, &path.field("expected_statuses"))? {
        r if r.is_empty() => vec![(200, 201)],
        r => r,
    };
    // 0: unlimited in Envoy; bounded here by what one check reads.
    let response_buffer_size = match h.response_buffer_size.unwrap_or(DEFAULT_RESPONSE_BUFFER) {
        0 => MAX_RESPONSE_BUFFER,
        n => n.min(MAX_RESPONSE_BUFFER),
    } as usize;
    let receive = payloads(&h.receive, &path.field("receive"))?;
    let wanted: usize = receive.iter().map(Vec::len).sum();
    if wanted > response_buffer_size {
        return Err(Error::invalid(
            path.field("receive"),
            format!("{wanted} bytes to find exceed response_buffer_size ({response_buffer_size})"),
        ));
    }
    Ok(HttpCheck {
        host: h.host.clone(),
        path: h.path.clone(),
        method: method.to_owned(),
        headers_to_add: added_headers(
            &h.request_headers_to_add,
            &path.field("request_headers_to_add"),
        )?,
        headers_to_remove,
        expected,
        retriable: ranges(&h.retriable_statuses, &path.field("retriable_statuses"))?,
        http2,
        receive,
        response_buffer_size,
    })
}

fn tcp(t: &hc::TcpHealthCheck, path: &Path) -> Result<TcpCheck> {
    reject_set!(path, t, proxy_protocol_config);
    let send = match &t.send {
        None => Vec::new(),
        Some(p) => payload(p, &path.field("send"))?,
    };
    Ok(TcpCheck {
        send,
        receive: payloads(&t.receive, &path.field("receive"))?,
    })
}

fn grpc(g: &hc::GrpcHealthCheck, path: &Path) -> Result<GrpcCheck> {
    if !header_value_ok(&g.authority) {
        return Err(Error::invalid(
            path.field("authority"),
            "not a valid header value",
        ));
    }
    Ok(GrpcCheck {
        service_name: g.service_name.clone(),
        authority: g.authority.clone(),
        initial_metadata: added_headers(&g.initial_metadata, &path.field("initial_metadata"))?,
    })
}

/// `Int64Range`s of statuses: each within [100, 600), start below end.
fn ranges(
    list: &[crate::pb::envoy::r#type::v3::Int64Range],
    path: &Path,
) -> Result<Vec<(u16, u16)>> {
    list.iter()
        .enumerate()
        .map(|(i, r)| {
            if !(100..600).contains(&r.start) || !(101..=600).contains(&r.end) || r.start >= r.end {
                return Err(Error::invalid(
                    path.index(i),
                    format!(
                        "[{}, {}) is not a range of statuses within [100, 600)",
                        r.start, r.end
                    ),
                ));
            }
            Ok((r.start as u16, r.end as u16))
        })
        .collect()
}

fn payloads(list: &[hc::Payload], path: &Path) -> Result<Vec<Vec<u8>>> {
    list.iter()
        .enumerate()
        .map(|(i, p)| payload(p, &path.index(i)))
        .collect()
}

/// A `Payload`: `text` is hex ("000000FF"), `binary` raw bytes.
fn payload(p: &hc::Payload, path: &Path) -> Result<Vec<u8>> {
    use hc::payload::Payload as P;
    match &p.payload {
        Some(P::Text(t)) => hex(t).ok_or_else(|| {
            Error::invalid(
                path.field("text"),
                format!("{t:?} is not hex-encoded bytes"),
            )
        }),
        Some(P::Binary(b)) if !b.is_empty() => Ok(b.clone()),
        _ => Err(Error::invalid(path.clone(), "text or binary is required")),
    }
}

fn hex(t: &str) -> Option<Vec<u8>> {
    if t.is_empty() || !t.len().is_multiple_of(2) {
        return None;
    }
    (0..t.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(t.get(i..i + 2)?, 16).ok())
        .collect()
}

fn added_headers(list: &[core::HeaderValueOption], path: &Path) -> Result<Vec<AddedHeader>> {
    let mut out = Vec::with_capacity(list.len());
    for (i, o) in list.iter().enumerate() {
        let opath = path.index(i);
        reject_set!(opath, o, keep_empty_value);
        let h = super::header_mutation::header_option(o, &opath)?;
        if h.name.starts_with(':') {
            return Err(Error::invalid(
                opath.field("header").field("key"),
                format!("{:?} is not a header name", h.name),
            ));
        }
        let overwrite = match h.action {
            AppendAction::AppendIfExistsOrAdd => false,
            AppendAction::OverwriteIfExistsOrAdd => true,
            AppendAction::AddIfAbsent | AppendAction::OverwriteIfExists => {
                let name = match h.action {
                    AppendAction::AddIfAbsent => "ADD_IF_ABSENT",
                    _ => "OVERWRITE_IF_EXISTS",
                };
                return Err(Error::unsupported_value(opath.field("append_action"), name));
            }
        };
        out.push(AddedHeader {
            name: h.name,
            value: h.value.to_owned(),
            overwrite,
        });
    }
    Ok(out)
}

/// An endpoint's `health_check_config`.
pub fn endpoint_check(
    c: Option<&ep::endpoint::HealthCheckConfig>,
    path: &dyn Fn() -> Path,
) -> Result<EndpointCheck> {
    let Some(c) = c else {
        return Ok(EndpointCheck::default());
    };
    let port = match c.port_value {
        0 => None,
        p => Some(u16::try_from(p).map_err(|_| {
            Error::invalid(path().field("port_value"), format!("{p} is not a port"))
        })?),
    };
    let address = match &c.address {
        None => None,
        Some(a) => Some(socket_address_at(
            Some(a),
            &|| path().field("address"),
            port.is_some(),
        )?),
    };
    if !header_value_ok(&c.hostname) {
        return Err(Error::invalid(
            path().field("hostname"),
            "not a valid header value",
        ));
    }
    Ok(EndpointCheck {
        port,
        address,
        hostname: c.hostname.clone(),
        disabled: c.disable_active_health_check,
    })
}
