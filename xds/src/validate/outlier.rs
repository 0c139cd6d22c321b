//! `Cluster.outlier_detection` → `engine::OutlierDetection`: gRFC A50's
//! validation rules plus Envoy's own (which are stricter where they differ),
//! with Envoy's defaults.

use std::time::Duration;

use engine::{
    ConsecutiveErrors, FailurePercentageEjection, OutlierDetection, SuccessRateEjection,
    DEFAULT_BASE_EJECTION_TIME, DEFAULT_MAX_EJECTION_TIME, DEFAULT_OUTLIER_INTERVAL,
};

use super::common::{reject_set, strict_duration};
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::cluster::v3 as pb;

/// Validates `outlier_detection` (at `path`) and fills in Envoy's defaults.
///
/// - `interval`, `base_ejection_time`, `max_ejection_time`: valid
///   `google.protobuf.Duration`s, not negative (A50) and not zero (Envoy).
///   `max_ejection_time` may not be below `base_ejection_time` (Envoy).
/// - `max_ejection_percent`, `failure_percentage_threshold` and every
///   `enforcing_*`: at most 100 (A50, Envoy).
/// - Envoy's local-origin split, `monitors`, `max_ejection_time_jitter`,
///   `always_eject_one_host` and `detect_degraded_hosts` are not supported
///   (their defaults may be spelled out).
pub fn outlier_detection(o: &pb::OutlierDetection, path: &Path) -> Result<OutlierDetection> {
    reject_set!(
        path,
        o,
        split_external_local_origin_errors,
        consecutive_local_origin_failure,
        enforcing_consecutive_local_origin_failure,
        enforcing_local_origin_success_rate,
        enforcing_failure_percentage_local_origin,
        monitors,
    );
    if o.max_ejection_time_jitter
        .as_ref()
        .is_some_and(|d| d.seconds != 0 || d.nanos != 0)
    {
        return Err(Error::unsupported(path.field("max_ejection_time_jitter")));
    }
    // BoolValues whose default is what we do.
    for (name, value, default) in [
        ("always_eject_one_host", o.always_eject_one_host, false),
        ("detect_degraded_hosts", o.detect_degraded_hosts, false),
    ] {
        if let Some(v) = value.filter(|v| *v != default) {
            return Err(Error::unsupported_value(path.field(name), v));
        }
    }

    let interval = positive(
        o.interval.as_ref(),
        DEFAULT_OUTLIER_INTERVAL,
        path,
        "interval",
    )?;
    let base_ejection_time = positive(
        o.base_ejection_time.as_ref(),
        DEFAULT_BASE_EJECTION_TIME,
        path,
        "base_ejection_time",
    )?;
    let max_ejection_time = match &o.max_ejection_time {
        None => DEFAULT_MAX_EJECTION_TIME.max(base_ejection_time),
        Some(d) => {
            let max = positive(Some(d), Duration::ZERO, path, "max_ejection_time")?;
            if max < base_ejection_time {
                return Err(Error::invalid(
                    path.field("max_ejection_time"),
                    format!("must not be less than base_ejection_time ({base_ejection_time:?})"),
                ));
            }
            max
        }
    };
    let max_ejection_percent = percent(o.max_ejection_percent, 10, path, "max_ejection_percent")?;

    let consecutive_5xx = consecutive(
        o.consecutive_5xx,
        percent(
            o.enforcing_consecutive_5xx,
            100,
            path,
            "enforcing_consecutive_5xx",
        )?,
    );
    let consecutive_gateway_failure = consecutive(
        o.consecutive_gateway_failure,
        percent(
            o.enforcing_consecutive_gateway_failure,
            0,
            path,
            "enforcing_consecutive_gateway_failure",
        )?,
    );

    let enforcing_success_rate = percent(
        o.enforcing_success_rate,
        100,
        path,
        "enforcing_success_rate",
    )?;
    let success_rate = (enforcing_success_rate > 0).then_some(SuccessRateEjection {
        stdev_factor: o.success_rate_stdev_factor.unwrap_or(1900),
        enforcement_percentage: enforcing_success_rate,
        minimum_hosts: o.success_rate_minimum_hosts.unwrap_or(5),
        request_volume: o.success_rate_request_volume.unwrap_or(100),
    });

    let threshold = percent(
        o.failure_percentage_threshold,
        85,
        path,
        "failure_percentage_threshold",
    )?;
    let enforcing_failure_percentage = percent(
        o.enforcing_failure_percentage,
        0,
        path,
        "enforcing_failure_percentage",
    )?;
    let failure_percentage =
        (enforcing_failure_percentage > 0).then_some(FailurePercentageEjection {
            threshold,
            enforcement_percentage: enforcing_failure_percentage,
            minimum_hosts: o.failure_percentage_minimum_hosts.unwrap_or(5),
            request_volume: o.failure_percentage_request_volume.unwrap_or(50),
        });

    Ok(OutlierDetection {
        interval,
        base_ejection_time,
        max_ejection_time,
        max_ejection_percent,
        consecutive_5xx,
        consecutive_gateway_failure,
        success_rate,
        failure_percentage,
        uneject_on_active_check: o
            .successful_active_health_check_uneject_host
            .unwrap_or(true),
    })
}

/// A duration field that must be greater than 0 (Envoy's `gt: {}`).
fn positive(
    d: Option<&prost_types::Duration>,
    default: Duration,
    path: &Path,
    name: &str,
) -> Result<Duration> {
    let Some(d) = d else {
        return Ok(default);
    };
    let fpath = path.field(name);
    let d = strict_duration(d, &fpath)?;
    if d.is_zero() {
        return Err(Error::invalid(fpath, "must be greater than 0"));
    }
    Ok(d)
}

/// A `UInt32Value` percentage: at most 100.
fn percent(v: Option<u32>, default: u32, path: &Path, name: &str) -> Result<u32> {
    match v {
        None => Ok(default),
        Some(v) if v <= 100 => Ok(v),
        Some(_) => Err(Error::invalid(path.field(name), "must be <= 100")),
    }
}

/// A consecutive-errors detector (threshold default 5), off when it never
/// ejects: enforcement 0, or a threshold of 0 (which Envoy's count, compared
/// after each increment, can never equal).
fn consecutive(threshold: Option<u32>, enforcement_percentage: u32) -> Option<ConsecutiveErrors> {
    let threshold = threshold.unwrap_or(5);
    (threshold > 0 && enforcement_percentage > 0).then_some(ConsecutiveErrors {
        threshold,
        enforcement_percentage,
    })
}
