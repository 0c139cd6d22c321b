//! Shard-side half of outlier detection: per-host call counters and the
//! reports they hand to the control shard.

use crate::config::{ConsecutiveErrors, OutlierDetection};

/// How one finished request counts for outlier detection (Envoy without
/// `split_external_local_origin_errors`: local-origin failures count as the
/// HTTP status Envoy maps them to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallResult {
    /// An HTTP status (already mapped from grpc-status when the response
    /// carried one, see [`grpc_to_http`]).
    Status(u16),
    /// Could not connect (Envoy counts it as 503).
    ConnectFailure,
    /// Upstream reset the stream / connection died (503).
    Reset,
    /// Route timeout (504).
    Timeout,
}

impl CallResult {
    /// The HTTP status Envoy's detector sees (its `resultToHttpCode`:
    /// `LocalOriginConnectFailed` is 503, `LocalOriginTimeout` 504).
    pub fn http_status(self) -> u16 {
        match self {
            Self::Status(status) => status,
            Self::ConnectFailure | Self::Reset => 503,
            Self::Timeout => 504,
        }
    }

    /// 5xx: a failure for success rate, failure percentage and
    /// consecutive_5xx.
    pub fn is_failure(self) -> bool {
        (500..600).contains(&self.http_status())
    }

    /// 502, 503, 504: consecutive_gateway_failure.
    pub fn is_gateway_failure(self) -> bool {
        matches!(self.http_status(), 502..=504)
    }
}

/// Envoy's `Grpc::Utility::grpcToHttpStatus`: the HTTP status a gRPC status
/// counts as, so a gRPC error carried in a 200 response still counts as a
/// failure when Envoy would count it as one.
pub fn grpc_to_http(grpc_status: u32) -> u16 {
    match grpc_status {
        0 => 200,  // OK
        1 => 499,  // CANCELLED
        2 => 500,  // UNKNOWN
        3 => 400,  // INVALID_ARGUMENT
        4 => 504,  // DEADLINE_EXCEEDED
        5 => 404,  // NOT_FOUND
        6 => 409,  // ALREADY_EXISTS
        7 => 403,  // PERMISSION_DENIED
        8 => 429,  // RESOURCE_EXHAUSTED
        9 => 400,  // FAILED_PRECONDITION
        10 => 409, // ABORTED
        11 => 400, // OUT_OF_RANGE
        12 => 501, // UNIMPLEMENTED
        13 => 500, // INTERNAL
        14 => 503, // UNAVAILABLE
        15 => 500, // DATA_LOSS
        16 => 401, // UNAUTHENTICATED
        _ => 500,
    }
}

/// Shard-local counters of one host (one per [`HostId`](crate::host::HostId)
/// on each data shard). Plain integers: only the owning shard touches them.
#[derive(Debug, Default, Clone)]
pub struct HostCounters {
    /// The active bucket.
    success: u64,
    failure: u64,
    /// Current streaks; they span buckets, as Envoy's do.
    consecutive_5xx: u32,
    consecutive_gateway_failure: u32,
    /// Whether each streak reached its threshold since the last `take`.
    tripped_5xx: bool,
    tripped_gateway_failure: bool,
}

impl HostCounters {
    /// Records one finished request. `config` is the cluster's outlier
    /// detection (thresholds for the consecutive detectors).
    ///
    /// Mirrors Envoy's `putHttpResponseCode`: a non-gateway 5xx breaks the
    /// gateway-failure streak but extends the 5xx one; anything below 500
    /// breaks both.
    pub fn record(&mut self, result: CallResult, config: &OutlierDetection) {
        if !result.is_failure() {
            self.success = self.success.saturating_add(1);
            self.consecutive_5xx = 0;
            self.consecutive_gateway_failure = 0;
            return;
        }
        self.failure = self.failure.saturating_add(1);
        if result.is_gateway_failure() {
            Self::extend(
                &mut self.consecutive_gateway_failure,
                &mut self.tripped_gateway_failure,
                config.consecutive_gateway_failure,
            );
        } else {
            self.consecutive_gateway_failure = 0;
        }
        Self::extend(
            &mut self.consecutive_5xx,
            &mut self.tripped_5xx,
            config.consecutive_5xx,
        );
    }

    /// Extends a streak; at the threshold it trips the flag and restarts
    /// from 0, as Envoy resets the counter once the detector has acted on it
    /// (so a host that keeps failing trips again after another `threshold`
    /// errors rather than never).
    fn extend(streak: &mut u32, tripped: &mut bool, detector: Option<ConsecutiveErrors>) {
        *streak = streak.saturating_add(1);
        // A threshold of 0 never trips, as in Envoy (`++count == 0`); the
        // validated config maps it to `None` anyway.
        if let Some(d) = detector.filter(|d| d.threshold > 0) {
            if *streak >= d.threshold {
                *tripped = true;
                *streak = 0;
            }
        }
    }

    /// Hands over the active bucket (and the tripped flags) and starts a new
    /// one; streaks carry on (a tripped streak already restarted from 0 when
    /// it tripped, as Envoy resets the counter on ejection).
    pub fn take(&mut self) -> HostReport {
        let report = HostReport {
            success: self.success,
            failure: self.failure,
            consecutive_5xx: self.tripped_5xx,
            consecutive_gateway_failure: self.tripped_gateway_failure,
        };
        self.success = 0;
        self.failure = 0;
        self.tripped_5xx = false;
        self.tripped_gateway_failure = false;
        report
    }

    /// Forget everything (a HostId recycled for a new host).
    pub fn reset(&mut self) {
        *self = Self::default();
    }
}

/// One host's counts over one interval, from one shard or summed over
/// shards.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct HostReport {
    pub success: u64,
    pub failure: u64,
    /// The consecutive-5xx streak reached its threshold.
    pub consecutive_5xx: bool,
    /// The consecutive-gateway-failure streak reached its threshold.
    pub consecutive_gateway_failure: bool,
}

impl HostReport {
    /// Nothing to report: shards need not send it.
    pub fn is_empty(&self) -> bool {
        self.success == 0
            && self.failure == 0
            && !self.consecutive_5xx
            && !self.consecutive_gateway_failure
    }

    /// Sums another shard's report into this one (counts add, flags OR).
    pub fn merge(&mut self, other: &HostReport) {
        self.success = self.success.saturating_add(other.success);
        self.failure = self.failure.saturating_add(other.failure);
        self.consecutive_5xx |= other.consecutive_5xx;
        self.consecutive_gateway_failure |= other.consecutive_gateway_failure;
    }

    /// Requests in the interval.
    pub(super) fn volume(&self) -> u64 {
        self.success.saturating_add(self.failure)
    }
}
