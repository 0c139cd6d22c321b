//! A connection manager's `tracing` (its provider: `envoy.tracers.opentelemetry` over gRPC, `envoy.tracers.zipkin` with `HTTP_JSON`; its sampling) → `engine::Tracing`, run as the chain's first filter.

use std::time::Duration;

use engine::tracing::{Propagation, SamplingConfig};
use engine::{CustomTag, CustomTagValue, TraceProvider, Tracing};
use prost::Name;

use super::common::{duration, reject_set};
use crate::decode::{any_type_name, unpack};
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::core::v3 as core;
use crate::pb::envoy::config::trace::v3 as pb;
use crate::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::Tracing as PbTracing;

/// Envoy's default export timeout for a gRPC service without one.
const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(1);

/// `tracing` (at `path`); `None` without a provider, which traces
/// nothing (as in an Envoy whose bootstrap names no tracer either).
/// `child_spans`: the router's `start_child_span`, which Envoy reads as
/// `spawn_upstream_span`.
pub(super) fn tracing(t: &PbTracing, path: &Path, child_spans: bool) -> Result<Option<Tracing>> {
    let percent = |p: &Option<crate::pb::envoy::r#type::v3::Percent>, field: &str| -> Result<f64> {
        match p {
            None => Ok(100.0),
            Some(p) if (0.0..=100.0).contains(&p.value) => Ok(p.value),
            Some(p) => Err(Error::invalid(
                path.field(field).field("value"),
                format!("{} is not a percentage in 0..=100", p.value),
            )),
        }
    };
    let sampling = SamplingConfig {
        random_sampling: percent(&t.random_sampling, "random_sampling")?,
        client_sampling: percent(&t.client_sampling, "client_sampling")?,
        overall_sampling: percent(&t.overall_sampling, "overall_sampling")?,
    };
    let ppath = path.field("provider");
    let Some(provider) = &t.provider else {
        return Ok(None);
    };
    let cpath = ppath.field("typed_config");
    use pb::tracing::http::ConfigType;
    let Some(ConfigType::TypedConfig(any)) = &provider.config_type else {
        return Err(Error::invalid(cpath, "required"));
    };
    let name = any_type_name(any, &cpath)?;
    let provider = if name == pb::OpenTelemetryConfig::full_name() {
        let (o, opath) = unpack::<pb::OpenTelemetryConfig>(any, &cpath)?;
        open_telemetry(&o, &opath)?
    } else if name == pb::ZipkinConfig::full_name() {
        let (z, zpath) = unpack::<pb::ZipkinConfig>(any, &cpath)?;
        zipkin(&z, &zpath)?
    } else {
        return Err(Error::unsupported_msg(
            cpath,
            format!("tracer {name} is not supported (envoy.tracers.opentelemetry and envoy.tracers.zipkin are)"),
        ));
    };
    let tpath = path.field("custom_tags");
    let custom_tags = t
        .custom_tags
        .iter()
        .enumerate()
        .map(|(i, c)| custom_tag(c, &tpath.index(i)))
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(Tracing {
        provider,
        sampling,
        max_path_tag_length: t.max_path_tag_length.unwrap_or(256) as usize,
        custom_tags,
        spawn_upstream_span: t.spawn_upstream_span.unwrap_or(false) || child_spans,
    }))
}

/// A `custom_tags` entry (at `path`).
fn custom_tag(
    c: &crate::pb::envoy::r#type::tracing::v3::CustomTag,
    path: &Path,
) -> Result<CustomTag> {
    use crate::pb::envoy::r#type::tracing::v3::custom_tag::Type;
    if c.tag.is_empty() {
        return Err(Error::invalid(path.field("tag"), "required"));
    }
    let value = match &c.r#type {
        Some(Type::Literal(l)) => CustomTagValue::Fixed(l.value.clone()),
        Some(Type::Environment(e)) => CustomTagValue::Fixed(
            std::env::var(&e.name).unwrap_or_else(|_| e.default_value.clone()),
        ),
        Some(Type::RequestHeader(h)) if !h.name.is_empty() => CustomTagValue::RequestHeader {
            name: h.name.to_ascii_lowercase(),
            default_value: h.default_value.clone(),
        },
        Some(Type::RequestHeader(_)) => {
            return Err(Error::invalid(
                path.field("request_header").field("name"),
                "required",
            ))
        }
        // No filter of the gateway's writes dynamic metadata, and the
        // route, cluster and host metadata are not kept: the default
        // is what Envoy would tag with none found.
        Some(Type::Metadata(m)) => CustomTagValue::Fixed(m.default_value.clone()),
        Some(Type::Value(_)) => return Err(Error::unsupported(path.field("value"))),
        None => {
            return Err(Error::invalid(
                path.clone(),
                "one of literal, environment, request_header and metadata is required",
            ))
        }
    };
    Ok(CustomTag {
        tag: c.tag.clone(),
        value,
    })
}

fn open_telemetry(o: &pb::OpenTelemetryConfig, path: &Path) -> Result<TraceProvider> {
    reject_set!(path, o, http_service, resource_detectors, sampler);
    let gpath = path.field("grpc_service");
    let Some(g) = &o.grpc_service else {
        return Err(Error::invalid(gpath, "required"));
    };
    reject_set!(gpath, g, initial_metadata, retry_policy);
    use core::grpc_service::TargetSpecifier;
    let e = match &g.target_specifier {
        Some(TargetSpecifier::EnvoyGrpc(e)) => e,
        Some(TargetSpecifier::GoogleGrpc(_)) => {
            return Err(Error::unsupported(gpath.field("google_grpc")))
        }
        None => return Err(Error::invalid(gpath.field("envoy_grpc"), "required")),
    };
    if e.cluster_name.is_empty() {
        return Err(Error::invalid(
            gpath.field("envoy_grpc").field("cluster_name"),
            "required",
        ));
    }
    Ok(TraceProvider::OpenTelemetry {
        cluster: e.cluster_name.clone(),
        authority: e.authority.clone(),
        timeout: match &g.timeout {
            // Zero: none given (every export would time out at once).
            Some(t) => Some(duration(t, &gpath.field("timeout"))?)
                .filter(|t| !t.is_zero())
                .unwrap_or(DEFAULT_EXPORT_TIMEOUT),
            None => DEFAULT_EXPORT_TIMEOUT,
        },
        service_name: match o.service_name.as_str() {
            // Envoy's default resource name.
            "" => "unknown_service:envoy".to_owned(),
            name => name.to_owned(),
        },
    })
}

fn zipkin(z: &pb::ZipkinConfig, path: &Path) -> Result<TraceProvider> {
    reject_set!(path, z, collector_service);
    use pb::zipkin_config::{CollectorEndpointVersion as V, TraceContextOption as O};
    if z.collector_cluster.is_empty() {
        return Err(Error::invalid(path.field("collector_cluster"), "required"));
    }
    let visible = |s: &str| s.bytes().all(|b| b.is_ascii_graphic());
    if !visible(&z.collector_hostname) {
        return Err(Error::invalid(
            path.field("collector_hostname"),
            "must be a host name",
        ));
    }
    if !z.collector_endpoint.starts_with('/') || !visible(&z.collector_endpoint) {
        return Err(Error::invalid(
            path.field("collector_endpoint"),
            "required, a path starting with \"/\"",
        ));
    }
    match V::try_from(z.collector_endpoint_version) {
        Ok(V::HttpJson) => {}
        // Envoy refuses the deprecated value too.
        Ok(V::DeprecatedAndUnavailableDoNotUse) => {
            return Err(Error::invalid(
                path.field("collector_endpoint_version"),
                "HTTP_JSON is required (the unset value is deprecated and unavailable)",
            ))
        }
        _ => {
            return Err(Error::unsupported_msg(
                path.field("collector_endpoint_version"),
                "only HTTP_JSON is supported",
            ))
        }
    }
    let propagation = match O::try_from(z.trace_context_option) {
        Ok(O::UseB3WithW3cPropagation) => Propagation::B3WithW3c,
        _ => Propagation::B3,
    };
    Ok(TraceProvider::Zipkin {
        cluster: z.collector_cluster.clone(),
        endpoint: z.collector_endpoint.clone(),
        hostname: z.collector_hostname.clone(),
        trace_id_128bit: z.trace_id_128bit,
        shared_span_context: z.shared_span_context.unwrap_or(true),
        propagation,
    })
}
