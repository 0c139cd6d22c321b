//! Load-balancing settings of a cluster: `least_request_lb_config`
//! (gRFC A48) and `common_lb_config` (Envoy; `override_host_status` is
//! gRFC A55's).

use engine::{CommonLb, HealthStatus, HealthStatusSet, LeastRequest, MAX_LEAST_REQUEST_CHOICES};

use super::reject_set;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::cluster::v3 as pb;

/// Validates `least_request_lb_config` (at `path`; `None` when unset) for
/// `lb_policy: LEAST_REQUEST`. `choice_count` defaults to 2 and must be at
/// least 2 (Envoy, A48); values above [`MAX_LEAST_REQUEST_CHOICES`] are
/// lowered to it, as gRFC A48 does. `active_request_bias` (weighted least
/// request) and `slow_start_config` are not supported.
pub fn least_request_lb_config(
    l: Option<&pb::cluster::LeastRequestLbConfig>,
    path: &Path,
) -> Result<LeastRequest> {
    let Some(l) = l else {
        return Ok(LeastRequest::default());
    };
    reject_set!(path, l, active_request_bias, slow_start_config);
    let choice_count = match l.choice_count {
        None => LeastRequest::default().choice_count,
        Some(n) if n < 2 => {
            return Err(Error::invalid(path.field("choice_count"), "must be >= 2"));
        }
        Some(n) => n.min(MAX_LEAST_REQUEST_CHOICES),
    };
    Ok(LeastRequest {
        choice_count,
        ..LeastRequest::default()
    })
}

/// Validates `common_lb_config` (at `path`) into Envoy's defaults overlaid
/// with what is set:
/// - `healthy_panic_threshold.value` in `[0, 100]` (Envoy), rounded to a
///   whole percent as Envoy does;
/// - `override_host_status.statuses`: known `HealthStatus` values (Envoy);
///   an empty list is an empty set (host overrides disabled).
///
/// The zone-aware, locality-weighted and consistent-hashing settings,
/// `update_merge_window`, `ignore_new_hosts_until_first_hc` and
/// `close_connections_on_host_set_change` are not supported.
pub fn common_lb_config(c: &pb::cluster::CommonLbConfig, path: &Path) -> Result<CommonLb> {
    use pb::cluster::common_lb_config::LocalityConfigSpecifier as L;
    match &c.locality_config_specifier {
        Some(L::ZoneAwareLbConfig(_)) => {
            return Err(Error::unsupported(path.field("zone_aware_lb_config")))
        }
        Some(L::LocalityWeightedLbConfig(_)) => {
            return Err(Error::unsupported(
                path.field("locality_weighted_lb_config"),
            ))
        }
        None => {}
    }
    reject_set!(
        path,
        c,
        update_merge_window,
        ignore_new_hosts_until_first_hc,
        close_connections_on_host_set_change,
        consistent_hashing_lb_config,
    );
    let mut out = CommonLb::default();
    if let Some(p) = &c.healthy_panic_threshold {
        if !(0.0..=100.0).contains(&p.value) {
            return Err(Error::invalid(
                path.field("healthy_panic_threshold").field("value"),
                format!("{} is out of range [0, 100]", p.value),
            ));
        }
        out.healthy_panic_threshold = p.value.round() as u32;
    }
    if let Some(set) = &c.override_host_status {
        let spath = path.field("override_host_status").field("statuses");
        out.override_host_status = set
            .statuses
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                HealthStatus::from_i32(v)
                    .ok_or_else(|| Error::invalid(spath.index(i), format!("unknown value {v}")))
            })
            .collect::<Result<HealthStatusSet>>()?;
    }
    Ok(out)
}
