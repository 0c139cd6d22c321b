//! The health check filter (`envoy.filters.http.health_check`, `HealthCheck`) → `engine::HealthCheckFilter`.

use std::sync::Arc;

use engine::HealthCheckFilter;

use super::common::strict_duration;
use super::route_match::header_matcher;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::extensions::filters::http::health_check::v3 as pb;

/// `HealthCheck` (at `path`): `pass_through_mode` is required, as in
/// Envoy; percentages are 0..=100.
pub(super) fn health_check(h: &pb::HealthCheck, path: &Path) -> Result<HealthCheckFilter> {
    let Some(pass_through) = h.pass_through_mode else {
        return Err(Error::invalid(path.field("pass_through_mode"), "required"));
    };
    let cache_time = match &h.cache_time {
        Some(t) => Some(strict_duration(t, &path.field("cache_time"))?).filter(|t| !t.is_zero()),
        None => None,
    };
    let mut min_healthy: Vec<(String, f64)> = Vec::new();
    let mut names: Vec<&String> = h.cluster_min_healthy_percentages.keys().collect();
    names.sort();
    for name in names {
        let value = h.cluster_min_healthy_percentages[name].value;
        if !(0.0..=100.0).contains(&value) {
            return Err(Error::invalid(
                path.field("cluster_min_healthy_percentages").key(name),
                format!("{value} is not a percentage in 0..=100"),
            ));
        }
        min_healthy.push((name.clone(), value));
    }
    let hpath = path.field("headers");
    Ok(HealthCheckFilter {
        pass_through,
        cache_time,
        min_healthy,
        headers: h
            .headers
            .iter()
            .enumerate()
            .map(|(i, m)| header_matcher(m, &hpath.index(i)))
            .collect::<Result<Vec<_>>>()?,
        cache: Arc::default(),
    })
}
