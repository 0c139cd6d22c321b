//! The CORS filter (`envoy.filters.http.cors`) and its policies (`cors.v3.CorsPolicy` in `typed_per_filter_config`, or a virtual host's or route's legacy `cors`) → `engine::CorsPolicy`.

use engine::CorsPolicy;

use super::common::runtime_fraction;
use super::header_mutation::header_value_ok;
use super::route_match::string_matcher;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::core::v3::RuntimeFractionalPercent;
use crate::pb::envoy::config::route::v3 as route;
use crate::pb::envoy::extensions::filters::http::cors::v3 as pb;
use crate::pb::envoy::r#type::matcher::v3::StringMatcher;

/// The fields both policy messages have, borrowed.
struct Fields<'a> {
    origins: &'a [StringMatcher],
    allow_methods: &'a str,
    allow_headers: &'a str,
    expose_headers: &'a str,
    max_age: &'a str,
    allow_credentials: Option<bool>,
    allow_private_network_access: Option<bool>,
    forward_not_matching_preflights: Option<bool>,
    filter_enabled: Option<&'a RuntimeFractionalPercent>,
    shadow_enabled: Option<&'a RuntimeFractionalPercent>,
}

/// `cors.v3.CorsPolicy` (at `path`).
pub(super) fn cors_policy(p: &pb::CorsPolicy, path: &Path) -> Result<CorsPolicy> {
    policy(
        Fields {
            origins: &p.allow_origin_string_match,
            allow_methods: &p.allow_methods,
            allow_headers: &p.allow_headers,
            expose_headers: &p.expose_headers,
            max_age: &p.max_age,
            allow_credentials: p.allow_credentials,
            allow_private_network_access: p.allow_private_network_access,
            forward_not_matching_preflights: p.forward_not_matching_preflights,
            filter_enabled: p.filter_enabled.as_ref(),
            shadow_enabled: p.shadow_enabled.as_ref(),
        },
        path,
    )
}

/// A virtual host's or route action's legacy `cors` (at `path`).
pub(super) fn legacy_cors_policy(p: &route::CorsPolicy, path: &Path) -> Result<CorsPolicy> {
    let filter_enabled = p
        .enabled_specifier
        .as_ref()
        .map(|route::cors_policy::EnabledSpecifier::FilterEnabled(f)| f);
    policy(
        Fields {
            origins: &p.allow_origin_string_match,
            allow_methods: &p.allow_methods,
            allow_headers: &p.allow_headers,
            expose_headers: &p.expose_headers,
            max_age: &p.max_age,
            allow_credentials: p.allow_credentials,
            allow_private_network_access: p.allow_private_network_access,
            forward_not_matching_preflights: p.forward_not_matching_preflights,
            filter_enabled,
            shadow_enabled: p.shadow_enabled.as_ref(),
        },
        path,
    )
}

fn policy(f: Fields<'_>, path: &Path) -> Result<CorsPolicy> {
    let opath = path.field("allow_origin_string_match");
    let allow_origins = f
        .origins
        .iter()
        .enumerate()
        .map(|(i, m)| string_matcher(m, &opath.index(i)))
        .collect::<Result<Vec<_>>>()?;
    // Each string goes out as a header's value as it is.
    let value = |s: &str, field: &str| -> Result<Option<String>> {
        if !header_value_ok(s) {
            return Err(Error::invalid(
                path.field(field),
                format!("{s:?} cannot be a header's value (control characters)"),
            ));
        }
        Ok((!s.is_empty()).then(|| s.to_owned()))
    };
    Ok(CorsPolicy {
        allow_origins,
        allow_methods: value(f.allow_methods, "allow_methods")?,
        allow_headers: value(f.allow_headers, "allow_headers")?,
        expose_headers: value(f.expose_headers, "expose_headers")?,
        max_age: value(f.max_age, "max_age")?,
        allow_credentials: f.allow_credentials,
        allow_private_network_access: f.allow_private_network_access,
        forward_not_matching_preflights: f.forward_not_matching_preflights,
        filter_enabled: f
            .filter_enabled
            .map(|e| runtime_fraction(e, &path.field("filter_enabled")))
            .transpose()?,
        shadow_enabled: f
            .shadow_enabled
            .map(|e| runtime_fraction(e, &path.field("shadow_enabled")))
            .transpose()?,
    })
}
