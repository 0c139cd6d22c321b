//! The external authorisation filter (`envoy.filters.http.ext_authz`, `ExtAuthz`, and `ExtAuthzPerRoute`) → `engine::ExtAuthz`, `engine::CheckSettings`.

use std::time::Duration;

use engine::{
    AuthzService, BufferSettings, CheckSettings, ExtAuthz, GrpcAuthz, HeaderMatchKind, HttpAuthz,
    PerRoute,
};

use super::common::{duration, feature_flag, reject_set, runtime_fraction};
use super::route_match::string_matcher;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::core::v3 as core;
use crate::pb::envoy::extensions::filters::http::ext_authz::v3 as pb;
use crate::pb::envoy::r#type::matcher::v3::ListStringMatcher;

/// Envoy's default check timeout when a gRPC service gives none.
const DEFAULT_TIMEOUT: Duration = Duration::from_millis(200);

/// `ExtAuthz` (at `path`). Metadata namespaces are accepted: the gateway
/// has no filter that writes dynamic metadata, so a check carries none,
/// as Envoy's would with those namespaces empty.
pub(super) fn ext_authz(a: &pb::ExtAuthz, path: &Path) -> Result<ExtAuthz> {
    reject_set!(
        path,
        a,
        clear_route_cache,
        route_metadata_context_namespaces,
        route_typed_metadata_context_namespaces,
        include_peer_certificate,
        bootstrap_metadata_labels_key,
        filter_metadata,
        emit_filter_state_stats
    );
    // Envoy takes V3 only; AUTO (unset) is V3 for a client of today.
    if a.transport_api_version == core::ApiVersion::V2 as i32 {
        return Err(Error::invalid(
            path.field("transport_api_version"),
            "only V3 is supported",
        ));
    }
    use pb::ext_authz::Services;
    let mut allowed_from_request = None;
    let service = match &a.services {
        Some(Services::GrpcService(g)) => AuthzService::Grpc(grpc(g, &path.field("grpc_service"))?),
        Some(Services::HttpService(h)) => {
            let hpath = path.field("http_service");
            let (service, allowed) = http(h, &hpath)?;
            allowed_from_request = allowed;
            AuthzService::Http(service)
        }
        None => {
            return Err(Error::invalid(
                path.clone(),
                "one of grpc_service and http_service is required",
            ))
        }
    };
    let status_on_error = match a.status_on_error.as_ref().map(|s| s.code) {
        None | Some(0) => 403,
        Some(c @ 100..=599) => c as u16,
        Some(c) => {
            return Err(Error::invalid(
                path.field("status_on_error").field("code"),
                format!("unknown value {c}"),
            ))
        }
    };
    // The top-level list wins over the HTTP service's deprecated one.
    let allowed_headers = match &a.allowed_headers {
        Some(l) => Some(matchers(l, &path.field("allowed_headers"))?),
        None => allowed_from_request,
    };
    Ok(ExtAuthz {
        service,
        failure_mode_allow: a.failure_mode_allow,
        failure_mode_allow_header_add: a.failure_mode_allow_header_add,
        with_request_body: a
            .with_request_body
            .as_ref()
            .map(|b| buffer_settings(b, &path.field("with_request_body")))
            .transpose()?,
        status_on_error,
        filter_enabled: a
            .filter_enabled
            .as_ref()
            .map(|f| runtime_fraction(f, &path.field("filter_enabled")))
            .transpose()?,
        deny_at_disable: feature_flag(
            a.deny_at_disable.as_ref(),
            false,
            &path.field("deny_at_disable"),
        )?,
        allowed_headers,
        disallowed_headers: match &a.disallowed_headers {
            Some(l) => matchers(l, &path.field("disallowed_headers"))?,
            None => Vec::new(),
        },
        include_tls_session: a.include_tls_session,
        encode_raw_headers: a.encode_raw_headers,
        stat_prefix: a.stat_prefix.clone(),
        max_denied_response_body_bytes: a.max_denied_response_body_bytes,
    })
}

fn grpc(g: &core::GrpcService, path: &Path) -> Result<GrpcAuthz> {
    reject_set!(path, g, initial_metadata, retry_policy);
    use core::grpc_service::TargetSpecifier;
    let e = match &g.target_specifier {
        Some(TargetSpecifier::EnvoyGrpc(e)) => e,
        Some(TargetSpecifier::GoogleGrpc(_)) => {
            return Err(Error::unsupported(path.field("google_grpc")))
        }
        None => return Err(Error::invalid(path.field("envoy_grpc"), "required")),
    };
    let epath = path.field("envoy_grpc");
    reject_set!(epath, e, retry_policy, max_receive_message_length);
    if e.cluster_name.is_empty() {
        return Err(Error::invalid(epath.field("cluster_name"), "required"));
    }
    Ok(GrpcAuthz {
        cluster: e.cluster_name.clone(),
        authority: e.authority.clone(),
        skip_envoy_headers: e.skip_envoy_headers,
        timeout: match &g.timeout {
            Some(t) => duration(t, &path.field("timeout"))?,
            None => DEFAULT_TIMEOUT,
        },
    })
}

/// `HttpService` and its deprecated `authorization_request.allowed_headers`.
fn http(h: &pb::HttpService, path: &Path) -> Result<(HttpAuthz, Option<Vec<HeaderMatchKind>>)> {
    reject_set!(path, h, retry_policy);
    let upath = path.field("server_uri");
    let Some(uri) = &h.server_uri else {
        return Err(Error::invalid(upath, "required"));
    };
    use core::http_uri::HttpUpstreamType;
    let cluster = match &uri.http_upstream_type {
        Some(HttpUpstreamType::Cluster(c)) if !c.is_empty() => c.clone(),
        _ => return Err(Error::invalid(upath.field("cluster"), "required")),
    };
    let Some(timeout) = &uri.timeout else {
        return Err(Error::invalid(upath.field("timeout"), "required"));
    };
    let uri_authority = authority_of(&uri.uri).ok_or_else(|| {
        Error::invalid(
            upath.field("uri"),
            format!("{:?} is not an http(s) URI", uri.uri),
        )
    })?;
    if !h.path_prefix.is_empty() && !h.path_prefix.starts_with('/') {
        return Err(Error::invalid(
            path.field("path_prefix"),
            "must start with \"/\"",
        ));
    }
    let req = h.authorization_request.clone().unwrap_or_default();
    let rpath = path.field("authorization_request");
    let mut headers_to_add = Vec::with_capacity(req.headers_to_add.len());
    for (i, hv) in req.headers_to_add.iter().enumerate() {
        if hv.key.is_empty() {
            return Err(Error::invalid(
                rpath.field("headers_to_add").index(i).field("key"),
                "must not be empty",
            ));
        }
        let value = if hv.raw_value.is_empty() {
            hv.value.clone()
        } else {
            String::from_utf8_lossy(&hv.raw_value).into_owned()
        };
        headers_to_add.push((hv.key.to_ascii_lowercase(), value));
    }
    let allowed = req
        .allowed_headers
        .as_ref()
        .map(|l| matchers(l, &rpath.field("allowed_headers")))
        .transpose()?;
    let resp = h.authorization_response.clone().unwrap_or_default();
    let rspath = path.field("authorization_response");
    reject_set!(rspath, resp, dynamic_metadata_from_headers);
    let list = |l: &Option<ListStringMatcher>, field: &str| match l {
        Some(l) => matchers(l, &rspath.field(field)),
        None => Ok(Vec::new()),
    };
    Ok((
        HttpAuthz {
            cluster,
            uri_authority,
            timeout: duration(timeout, &upath.field("timeout"))?,
            path_prefix: h.path_prefix.clone(),
            headers_to_add,
            allowed_upstream_headers: list(
                &resp.allowed_upstream_headers,
                "allowed_upstream_headers",
            )?,
            allowed_upstream_headers_to_append: list(
                &resp.allowed_upstream_headers_to_append,
                "allowed_upstream_headers_to_append",
            )?,
            allowed_client_headers: list(&resp.allowed_client_headers, "allowed_client_headers")?,
            allowed_client_headers_on_success: list(
                &resp.allowed_client_headers_on_success,
                "allowed_client_headers_on_success",
            )?,
        },
        allowed,
    ))
}

/// `http://host[:port]/…` → `host[:port]`.
fn authority_of(uri: &str) -> Option<String> {
    let rest = uri
        .strip_prefix("http://")
        .or_else(|| uri.strip_prefix("https://"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    (!authority.is_empty()).then(|| authority.to_owned())
}

fn matchers(l: &ListStringMatcher, path: &Path) -> Result<Vec<HeaderMatchKind>> {
    let ppath = path.field("patterns");
    l.patterns
        .iter()
        .enumerate()
        .map(|(i, m)| string_matcher(m, &ppath.index(i)))
        .collect()
}

fn buffer_settings(b: &pb::BufferSettings, path: &Path) -> Result<BufferSettings> {
    if b.max_request_bytes == 0 {
        return Err(Error::invalid(
            path.field("max_request_bytes"),
            "must be greater than 0",
        ));
    }
    Ok(BufferSettings {
        max_request_bytes: b.max_request_bytes,
        allow_partial_message: b.allow_partial_message,
        pack_as_bytes: b.pack_as_bytes,
    })
}

/// `ExtAuthzPerRoute` (at `path`).
pub(super) fn ext_authz_per_route(
    r: &pb::ExtAuthzPerRoute,
    path: &Path,
) -> Result<PerRoute<CheckSettings>> {
    use pb::ext_authz_per_route::Override;
    match &r.r#override {
        Some(Override::Disabled(true)) => Ok(PerRoute::Disabled),
        Some(Override::Disabled(false)) => Err(Error::invalid(
            path.field("disabled"),
            "must be true when set",
        )),
        Some(Override::CheckSettings(c)) => {
            let cpath = path.field("check_settings");
            reject_set!(cpath, c, service_override);
            let mut context_extensions: Vec<(String, String)> = c
                .context_extensions
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            context_extensions.sort();
            Ok(PerRoute::Override(CheckSettings {
                context_extensions,
                disable_request_body_buffering: c.disable_request_body_buffering,
                with_request_body: c
                    .with_request_body
                    .as_ref()
                    .map(|b| buffer_settings(b, &cpath.field("with_request_body")))
                    .transpose()?,
            }))
        }
        None => Err(Error::invalid(
            path.clone(),
            "one of disabled and check_settings is required",
        )),
    }
}
