//! `local_reply_config` → the engine's [`LocalReplyConfig`]: mappers with their `AccessLogFilter`s (the filters the gateway can decide; the others refused by name), new statuses within 200..=599, bodies, headers and body formats checked and parsed once.

use engine::access_log::filter::{Comparison, LogFilter};
use engine::{BodyFormat, LocalReplyConfig, ReplyMapper};

use super::access_log::log_format;
use super::header_mutation::header_mutation;
use super::route_match::header_matcher;
use super::tls::data_source;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::accesslog::v3 as accesslog;
use crate::pb::envoy::config::core::v3 as core;
use crate::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;

/// Envoy's response flags a `response_flag_filter` may name.
const RESPONSE_FLAGS: [&str; 30] = [
    "LH", "UH", "UT", "LR", "UR", "UF", "UC", "UO", "NR", "DI", "FI", "RL", "UAEX", "RLSE", "DC",
    "URX", "SI", "IH", "DPE", "UMSDR", "RFCF", "NFCF", "DT", "UPE", "NC", "OM", "DF", "DO", "DR",
    "UDO",
];

/// `local_reply_config` at `path`.
pub(super) fn local_reply(c: &hcm::LocalReplyConfig, path: &Path) -> Result<LocalReplyConfig> {
    let mut mappers = Vec::with_capacity(c.mappers.len());
    for (i, m) in c.mappers.iter().enumerate() {
        mappers.push(mapper(m, &path.field("mappers").index(i))?);
    }
    let body_format = c
        .body_format
        .as_ref()
        .map(|f| body_format(f, &path.field("body_format")))
        .transpose()?;
    Ok(LocalReplyConfig {
        mappers,
        body_format,
    })
}

fn mapper(m: &hcm::ResponseMapper, path: &Path) -> Result<ReplyMapper> {
    let Some(f) = &m.filter else {
        return Err(Error::invalid(path.field("filter"), "required"));
    };
    let filter = log_filter(f, &path.field("filter"))?;
    let status = match m.status_code {
        Some(s) if (200..600).contains(&s) => Some(s as u16),
        Some(s) => {
            return Err(Error::invalid(
                path.field("status_code"),
                format!("{s} is not within [200, 600)"),
            ))
        }
        None => None,
    };
    let body = m
        .body
        .as_ref()
        .map(|d| data_source(Some(d), &path.field("body")))
        .transpose()?
        .map(Vec::into_boxed_slice);
    let body_format = m
        .body_format_override
        .as_ref()
        .map(|f| body_format(f, &path.field("body_format_override")))
        .transpose()?;
    // Checked as a route's `response_headers_to_add` are (names the
    // gateway owns refused), values parsed as formats.
    let headers = header_mutation(&m.headers_to_add, &path.field("headers_to_add"), &[], path)?;
    Ok(ReplyMapper {
        filter,
        status,
        body,
        body_format,
        headers,
    })
}

fn body_format(f: &core::SubstitutionFormatString, path: &Path) -> Result<BodyFormat> {
    use core::substitution_format_string::Format as F;
    if f.format.is_none() {
        return Err(Error::invalid(
            path.clone(),
            "one of text_format, json_format or text_format_source is required",
        ));
    }
    let format = log_format(f, path)?;
    let content_type = match (&f.content_type[..], &f.format) {
        ("", Some(F::JsonFormat(_))) => "application/json".to_string(),
        ("", _) => "text/plain".to_string(),
        (t, _) if super::header_mutation::header_value_ok(t) => t.to_string(),
        _ => {
            return Err(Error::invalid(
                path.field("content_type"),
                "not a valid header value",
            ))
        }
    };
    Ok(BodyFormat {
        format,
        content_type,
    })
}

/// An `AccessLogFilter` at `path`.
pub(super) fn log_filter(f: &accesslog::AccessLogFilter, path: &Path) -> Result<LogFilter> {
    use accesslog::access_log_filter::FilterSpecifier as S;
    let Some(spec) = &f.filter_specifier else {
        return Err(Error::invalid(path.clone(), "one filter is required"));
    };
    Ok(match spec {
        S::StatusCodeFilter(s) => {
            let p = path.field("status_code_filter");
            let (op, v) = comparison(s.comparison.as_ref(), &p.field("comparison"))?;
            LogFilter::Status(op, v)
        }
        S::DurationFilter(d) => {
            let p = path.field("duration_filter");
            let (op, v) = comparison(d.comparison.as_ref(), &p.field("comparison"))?;
            LogFilter::Duration(op, v)
        }
        S::NotHealthCheckFilter(_) => LogFilter::NotHealthCheck,
        S::TraceableFilter(_) => LogFilter::Traceable,
        S::RuntimeFilter(r) => {
            // No runtime: the default percentage applies (0 % unset).
            let p = path.field("runtime_filter").field("percent_sampled");
            LogFilter::Sampled(match &r.percent_sampled {
                None => engine::Fraction {
                    numerator: 0,
                    denominator: 100,
                },
                Some(f) => super::common::fractional_percent(f, &p)?,
            })
        }
        S::AndFilter(a) => LogFilter::And(filters(&a.filters, &path.field("and_filter"))?),
        S::OrFilter(o) => LogFilter::Or(filters(&o.filters, &path.field("or_filter"))?),
        S::HeaderFilter(h) => {
            let p = path.field("header_filter").field("header");
            let h = h
                .header
                .as_ref()
                .ok_or_else(|| Error::invalid(p.clone(), "required"))?;
            LogFilter::Header(header_matcher(h, &p)?)
        }
        S::ResponseFlagFilter(r) => {
            let p = path.field("response_flag_filter").field("flags");
            for (i, flag) in r.flags.iter().enumerate() {
                if !RESPONSE_FLAGS.contains(&flag.as_str()) {
                    return Err(Error::invalid(
                        p.index(i),
                        format!("{flag:?} is not a response flag"),
                    ));
                }
            }
            LogFilter::Flags(r.flags.clone())
        }
        S::GrpcStatusFilter(g) => LogFilter::GrpcStatus {
            statuses: g.statuses.iter().map(|&s| s as u32).collect(),
            exclude: g.exclude,
        },
        S::ExtensionFilter(_) => return Err(Error::unsupported(path.field("extension_filter"))),
        S::MetadataFilter(_) => return Err(Error::unsupported(path.field("metadata_filter"))),
        S::LogTypeFilter(_) => return Err(Error::unsupported(path.field("log_type_filter"))),
    })
}

/// An `and_filter`'s or `or_filter`'s list: at least two, as Envoy wants.
fn filters(list: &[accesslog::AccessLogFilter], path: &Path) -> Result<Vec<LogFilter>> {
    let p = path.field("filters");
    if list.len() < 2 {
        return Err(Error::invalid(p, "at least 2 filters are required"));
    }
    list.iter()
        .enumerate()
        .map(|(i, f)| log_filter(f, &p.index(i)))
        .collect()
}

fn comparison(c: Option<&accesslog::ComparisonFilter>, path: &Path) -> Result<(Comparison, u32)> {
    use accesslog::comparison_filter::Op;
    let c = c.ok_or_else(|| Error::invalid(path.clone(), "required"))?;
    let op = match Op::try_from(c.op) {
        Ok(Op::Eq) => Comparison::Eq,
        Ok(Op::Ge) => Comparison::Ge,
        Ok(Op::Le) => Comparison::Le,
        Ok(Op::Ne) => Comparison::Ne,
        Err(_) => {
            return Err(Error::invalid(
                path.field("op"),
                format!("unknown value {}", c.op),
            ))
        }
    };
    // The runtime key has no runtime to read: its default applies.
    let value = c
        .value
        .as_ref()
        .ok_or_else(|| Error::invalid(path.field("value"), "required"))?;
    Ok((op, value.default_value))
}
