//! `Cluster.outlier_detection`: passive ejection of failing hosts, with
//! Envoy's defaults.

use std::time::Duration;

/// Envoy's default `OutlierDetection.interval`.
pub const DEFAULT_OUTLIER_INTERVAL: Duration = Duration::from_secs(10);
/// Envoy's default `OutlierDetection.base_ejection_time`.
pub const DEFAULT_BASE_EJECTION_TIME: Duration = Duration::from_secs(30);
/// Envoy's default `OutlierDetection.max_ejection_time` (or
/// `base_ejection_time` when that is larger).
pub const DEFAULT_MAX_EJECTION_TIME: Duration = Duration::from_secs(300);

/// `Cluster.outlier_detection` (gRFC A50, Envoy's field semantics), with
/// Envoy's defaults applied. A host ejected `n` times stays out for
/// `min(base_ejection_time * n, max_ejection_time)`; at most
/// `max_ejection_percent` of the cluster is ejected at once.
///
/// A detector whose `enforcing_*` percentage is 0 never ejects, so it is
/// `None` here (A50 does the same for success rate and failure percentage).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutlierDetection {
    /// Time between ejection sweeps (default 10 s; greater than 0).
    pub interval: Duration,
    /// Ejection time per ejection so far (default 30 s; greater than 0).
    pub base_ejection_time: Duration,
    /// Cap on the ejection time: as configured (never below
    /// `base_ejection_time`), else `max(300 s, base_ejection_time)`.
    pub max_ejection_time: Duration,
    /// `0..=100`, default 10.
    pub max_ejection_percent: u32,
    /// `consecutive_5xx` (default 5) with `enforcing_consecutive_5xx`
    /// (default 100).
    pub consecutive_5xx: Option<ConsecutiveErrors>,
    /// `consecutive_gateway_failure` (502, 503, 504; default 5) with
    /// `enforcing_consecutive_gateway_failure` (default 0: off).
    pub consecutive_gateway_failure: Option<ConsecutiveErrors>,
    /// The `success_rate_*` fields, unless `enforcing_success_rate` is 0
    /// (default 100).
    pub success_rate: Option<SuccessRateEjection>,
    /// The `failure_percentage_*` fields, when `enforcing_failure_percentage`
    /// is above 0 (default 0: off).
    pub failure_percentage: Option<FailurePercentageEjection>,
    /// `successful_active_health_check_uneject_host` (default true): a
    /// passing active health check of a host no longer failing its checks
    /// ends the host's ejection at once, as Envoy's detector does.
    pub uneject_on_active_check: bool,
}

impl OutlierDetection {
    /// Whether any detector is on: without one nothing is counted or swept
    /// (A50 skips the timer when both of its algorithms are unset).
    pub fn has_detector(&self) -> bool {
        self.consecutive_5xx.is_some()
            || self.consecutive_gateway_failure.is_some()
            || self.success_rate.is_some()
            || self.failure_percentage.is_some()
    }
}

/// A consecutive-errors detector of [`OutlierDetection`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsecutiveErrors {
    /// Errors in a row that make a host an outlier.
    pub threshold: u32,
    /// Chance in percent (`1..=100`) that an outlier is actually ejected.
    pub enforcement_percentage: u32,
}

/// gRFC A50 `SuccessRateEjection`: hosts whose success rate is below
/// `mean - stdev * stdev_factor / 1000` are outliers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuccessRateEjection {
    /// `success_rate_stdev_factor`, in thousandths (default 1900 = 1.9).
    pub stdev_factor: u32,
    /// `enforcing_success_rate`: `1..=100`.
    pub enforcement_percentage: u32,
    /// `success_rate_minimum_hosts` (default 5).
    pub minimum_hosts: u32,
    /// `success_rate_request_volume` (default 100).
    pub request_volume: u32,
}

/// gRFC A50 `FailurePercentageEjection`: hosts failing at least
/// `threshold` percent of their requests are outliers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailurePercentageEjection {
    /// `failure_percentage_threshold`: `0..=100`, default 85.
    pub threshold: u32,
    /// `enforcing_failure_percentage`: `1..=100`.
    pub enforcement_percentage: u32,
    /// `failure_percentage_minimum_hosts` (default 5).
    pub minimum_hosts: u32,
    /// `failure_percentage_request_volume` (default 50).
    pub request_volume: u32,
}
