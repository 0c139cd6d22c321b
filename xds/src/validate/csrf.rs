//! The CSRF filter (`envoy.filters.http.csrf`, `csrf.v3.CsrfPolicy`, as the filter's config and per route) → `engine::CsrfPolicy`.

use engine::CsrfPolicy;

use super::common::runtime_fraction;
use super::route_match::string_matcher;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::extensions::filters::http::csrf::v3 as pb;

/// `CsrfPolicy` (at `path`): `filter_enabled` is required, as in Envoy.
pub(super) fn csrf_policy(p: &pb::CsrfPolicy, path: &Path) -> Result<CsrfPolicy> {
    let Some(enabled) = &p.filter_enabled else {
        return Err(Error::invalid(path.field("filter_enabled"), "required"));
    };
    let opath = path.field("additional_origins");
    Ok(CsrfPolicy {
        filter_enabled: runtime_fraction(enabled, &path.field("filter_enabled"))?,
        shadow_enabled: p
            .shadow_enabled
            .as_ref()
            .map(|s| runtime_fraction(s, &path.field("shadow_enabled")))
            .transpose()?,
        additional_origins: p
            .additional_origins
            .iter()
            .enumerate()
            .map(|(i, m)| string_matcher(m, &opath.index(i)))
            .collect::<Result<Vec<_>>>()?,
    })
}
