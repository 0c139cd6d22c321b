//! Outlier detection: gRFC A50's success-rate and failure-percentage
//! algorithms plus Envoy's consecutive-5xx and consecutive-gateway-failure
//! detectors, as pure logic (no I/O, injected time and randomness).
//!
//! Two halves, one per side of the thread-per-core split:
//!
//! - [`HostCounters`] lives on each data shard, one per [`HostId`], and is
//!   touched only by its shard (plain integers, no atomics). [`take`] is
//!   A50's bucket swap: the shard hands the active bucket to the control
//!   shard and starts a fresh one.
//! - [`ClusterOutlier`] lives on the control shard, one per cluster. Every
//!   `interval` the control shard sums the shards' [`HostReport`]s and calls
//!   [`sweep`], which ejects and un-ejects hosts; the resulting set is pushed
//!   to the data shards as an [`EjectedSet`](crate::ejected::EjectedSet).
//!
//! Envoy ejects on a consecutive-errors streak immediately; here the streak
//! trips a flag that the next sweep acts on, so such an ejection waits at
//! most one `interval` (the price of keeping shards free of shared state).
//!
//! [`take`]: HostCounters::take
//! [`sweep`]: ClusterOutlier::sweep

use std::time::{Duration, Instant};

use ahash::{AHashMap, AHashSet};

use crate::config::{ConsecutiveErrors, OutlierDetection};
use crate::host::HostId;

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

/// Shard-local counters of one host (one per [`HostId`] on each data
/// shard). Plain integers: only the owning shard touches them.
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
    fn volume(&self) -> u64 {
        self.success.saturating_add(self.failure)
    }
}

/// Why a host was ejected (Envoy's `OutlierEjectionType` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EjectionReason {
    Consecutive5xx,
    ConsecutiveGatewayFailure,
    SuccessRate,
    FailurePercentage,
}

impl EjectionReason {
    pub const ALL: [Self; 4] = [
        Self::Consecutive5xx,
        Self::ConsecutiveGatewayFailure,
        Self::SuccessRate,
        Self::FailurePercentage,
    ];

    /// The suffix of Envoy's `outlier_detection.ejections_*` stats.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Consecutive5xx => "consecutive_5xx",
            Self::ConsecutiveGatewayFailure => "consecutive_gateway_failure",
            Self::SuccessRate => "success_rate",
            Self::FailurePercentage => "failure_percentage",
        }
    }
}

/// Per-host detector state on the control shard (what /clusters shows).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostOutlier {
    /// When the current ejection started (the sweep's timestamp); None when
    /// not ejected.
    pub ejected_since: Option<Instant>,
    /// Reason of the current or last ejection.
    pub reason: Option<EjectionReason>,
    /// A50's ejection time multiplier: +1 per ejection, -1 per sweep spent
    /// un-ejected.
    pub multiplier: u32,
    /// Success rate (0.0..=1.0) over the last interval, when the host had
    /// any request.
    pub success_rate: Option<f64>,
}

/// What one sweep did (the control shard counts these in /stats).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SweepOutcome {
    pub ejected: Vec<(HostId, EjectionReason)>,
    pub unejected: Vec<HostId>,
    /// Outliers detected but not ejected: enforcement draw failed or
    /// max_ejection_percent reached.
    pub not_enforced: Vec<(HostId, EjectionReason)>,
}

/// The detector of one cluster, owned by the control shard.
#[derive(Debug, Default)]
pub struct ClusterOutlier {
    hosts: AHashMap<HostId, HostOutlier>,
    /// The cluster's hosts in the order of the last `update`. Sweeps walk
    /// this rather than `hosts`, whose iteration order is seeded per
    /// process: which hosts the ejection cap lets through, and which draw
    /// each outlier gets, must be reproducible.
    order: Vec<HostId>,
    /// `None`: no detector configured, no sweeps.
    config: Option<OutlierDetection>,
    /// A50's "timer start timestamp": the last sweep, or when sweeps began.
    timer_start: Option<Instant>,
    /// When the next sweep is due; `None` with `timer_start` set only when
    /// the interval is too long for an `Instant` (never due).
    next_sweep: Option<Instant>,
}

impl ClusterOutlier {
    pub fn new() -> Self {
        Self::default()
    }

    /// Called with the cluster's config and current host ids whenever the
    /// cluster's snapshot changes (and once at start). Hosts no longer
    /// present are forgotten (un-ejected); new hosts start un-ejected with
    /// multiplier 0.
    ///
    /// Timer as A50 "when a new config is provided": unset, it starts now
    /// (next sweep at now + interval); set, it keeps its start (next sweep
    /// at timer_start + new interval, not before now). A `config` that is
    /// `None` or has no detector at all stops the sweeps and un-ejects
    /// everyone; all state is dropped then, as Envoy drops the cluster's
    /// detector.
    ///
    /// A50 also resets the call counters when the timer starts. They live on
    /// the data shards, so the caller does that: when `next_sweep()` goes
    /// from `None` to `Some`, drain the shards' counters (or drop their
    /// first reports) so counts from before detection began do not weigh on
    /// the first sweep.
    pub fn update(&mut self, config: Option<&OutlierDetection>, hosts: &[HostId], now: Instant) {
        let mut present = AHashSet::with_capacity(hosts.len());
        self.order.clear();
        for &id in hosts {
            if present.insert(id) {
                self.order.push(id);
            }
        }
        self.hosts.retain(|id, _| present.contains(id));
        for &id in &self.order {
            self.hosts.entry(id).or_default();
        }

        match config.filter(|c| has_detector(c)) {
            None => {
                self.config = None;
                self.timer_start = None;
                self.next_sweep = None;
                for host in self.hosts.values_mut() {
                    *host = HostOutlier::default();
                }
            }
            Some(config) => {
                let start = *self.timer_start.get_or_insert(now);
                self.next_sweep = start.checked_add(config.interval).map(|due| due.max(now));
                if self.config.as_ref() != Some(config) {
                    self.config = Some(config.clone());
                }
            }
        }
    }

    /// When the next sweep is due (None: no sweeps).
    pub fn next_sweep(&self) -> Option<Instant> {
        self.next_sweep
    }

    /// One sweep at `now` with the interval's reports summed over shards
    /// (hosts without a report had no requests; reports of hosts not in the
    /// cluster are ignored). Runs, in order: the consecutive detectors, A50's
    /// success-rate then failure-percentage algorithms, then multiplier decay
    /// and un-ejection. Hosts already ejected are left out of the detectors,
    /// including the success-rate statistics, as Envoy does.
    pub fn sweep(
        &mut self,
        now: Instant,
        reports: &AHashMap<HostId, HostReport>,
        rng: &mut impl FnMut() -> u32,
    ) -> SweepOutcome {
        let mut out = SweepOutcome::default();
        let Some(config) = &self.config else {
            return out;
        };
        self.timer_start = Some(now);
        self.next_sweep = now.checked_add(config.interval);

        let report = |id: &HostId| reports.get(id).copied().unwrap_or_default();
        for id in &self.order {
            if let Some(host) = self.hosts.get_mut(id) {
                let r = report(id);
                host.success_rate = (r.volume() > 0).then(|| r.success as f64 / r.volume() as f64);
            }
        }

        let mut ejector = Ejector {
            ejected: self.hosts.values().filter(|h| h.is_ejected()).count() as u64,
            hosts: &mut self.hosts,
            host_count: self.order.len() as u64,
            max_ejection_percent: u64::from(config.max_ejection_percent),
            now,
            rng,
            out: &mut out,
        };

        // (a) Consecutive errors. Gateway failures first: Envoy's monitor
        // notifies that detector before the 5xx one for the same response,
        // and a host the first ejects is skipped by the second.
        for id in &self.order {
            if ejector.is_ejected(id) {
                continue;
            }
            let r = report(id);
            let detectors = [
                (
                    r.consecutive_gateway_failure,
                    config.consecutive_gateway_failure,
                    EjectionReason::ConsecutiveGatewayFailure,
                ),
                (
                    r.consecutive_5xx,
                    config.consecutive_5xx,
                    EjectionReason::Consecutive5xx,
                ),
            ];
            for (tripped, detector, reason) in detectors {
                if let (true, Some(d)) = (tripped, detector) {
                    if ejector.consider(*id, reason, d.enforcement_percentage) {
                        break;
                    }
                }
            }
        }

        // (b) A50 success rate: statistics over the hosts with enough volume.
        if let Some(sr) = config.success_rate {
            let candidates: Vec<(HostId, f64)> = self
                .order
                .iter()
                .filter(|id| !ejector.is_ejected(id))
                .filter_map(|id| {
                    let r = report(id);
                    let volume = r.volume();
                    // A host without requests has no rate, whatever
                    // request_volume says (Envoy's accumulator yields none).
                    (volume > 0 && volume >= u64::from(sr.request_volume))
                        .then(|| (*id, r.success as f64 / volume as f64))
                })
                .collect();
            if !candidates.is_empty() && candidates.len() as u64 >= u64::from(sr.minimum_hosts) {
                let rates: Vec<f64> = candidates.iter().map(|&(_, rate)| rate).collect();
                let (mean, stdev) = mean_and_stdev(&rates);
                let threshold = mean - stdev * (f64::from(sr.stdev_factor) / 1000.0);
                for (id, rate) in candidates {
                    if rate < threshold {
                        ejector.consider(
                            id,
                            EjectionReason::SuccessRate,
                            sr.enforcement_percentage,
                        );
                    }
                }
            }
        }

        // (c) A50 failure percentage. minimum_hosts counts every host of the
        // cluster, as A50 says (not only those with enough volume).
        if let Some(fp) = config.failure_percentage {
            if self.order.len() as u64 >= u64::from(fp.minimum_hosts) {
                for id in &self.order {
                    if ejector.is_ejected(id) {
                        continue;
                    }
                    let r = report(id);
                    let volume = r.volume();
                    if volume == 0 || volume < u64::from(fp.request_volume) {
                        continue;
                    }
                    // `>=`, as Envoy's code and the proto comment ("greater
                    // than or equal to this value") have it; A50's step text
                    // says "greater than". Integer math, so the boundary is
                    // exact: failure / volume >= threshold / 100.
                    if u128::from(r.failure) * 100 >= u128::from(fp.threshold) * u128::from(volume)
                    {
                        ejector.consider(
                            *id,
                            EjectionReason::FailurePercentage,
                            fp.enforcement_percentage,
                        );
                    }
                }
            }
        }

        // (d) Decay and un-ejection, for every host.
        let cap = config.base_ejection_time.max(config.max_ejection_time);
        for id in &self.order {
            let Some(host) = self.hosts.get_mut(id) else {
                continue;
            };
            match host.ejected_since {
                None => host.multiplier = host.multiplier.saturating_sub(1),
                Some(since) => {
                    let duration =
                        ejection_duration(config.base_ejection_time, host.multiplier, cap);
                    // `>=` as Envoy's `checkHostForUneject` (A50 says
                    // "after"): a host due exactly at a sweep leaves then,
                    // not one interval later. An end past what `Instant`
                    // holds never comes.
                    if since.checked_add(duration).is_some_and(|end| now >= end) {
                        host.ejected_since = None;
                        out.unejected.push(*id);
                    }
                }
            }
        }
        out
    }

    pub fn is_ejected(&self, id: HostId) -> bool {
        self.hosts.get(&id).is_some_and(HostOutlier::is_ejected)
    }

    pub fn host(&self, id: HostId) -> Option<&HostOutlier> {
        self.hosts.get(&id)
    }

    /// Currently ejected hosts.
    pub fn ejected(&self) -> impl Iterator<Item = HostId> + '_ {
        self.order.iter().copied().filter(|id| self.is_ejected(*id))
    }
}

impl HostOutlier {
    fn is_ejected(&self) -> bool {
        self.ejected_since.is_some()
    }
}

/// Whether any detector is configured: without one there is nothing to
/// sweep for (A50 skips the timer when both of its algorithms are unset).
fn has_detector(config: &OutlierDetection) -> bool {
    config.consecutive_5xx.is_some()
        || config.consecutive_gateway_failure.is_some()
        || config.success_rate.is_some()
        || config.failure_percentage.is_some()
}

/// A50: `min(base_ejection_time * multiplier, max(base_ejection_time,
/// max_ejection_time))`; a product too large for a `Duration` is the cap.
fn ejection_duration(base: Duration, multiplier: u32, cap: Duration) -> Duration {
    base.checked_mul(multiplier).map_or(cap, |d| d.min(cap))
}

/// Mean and population standard deviation (A50 and Envoy divide by the
/// number of hosts, not by one less). Two passes: the deviations from the
/// computed mean keep the threshold below every rate of a spread-free set
/// even when the mean is off by an ulp.
fn mean_and_stdev(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0);
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    (mean, variance.sqrt())
}

/// Applies ejections within one sweep: the max_ejection_percent cap, the
/// enforcement draw and the bookkeeping.
struct Ejector<'a, R> {
    hosts: &'a mut AHashMap<HostId, HostOutlier>,
    host_count: u64,
    /// Hosts ejected now, including by this sweep.
    ejected: u64,
    max_ejection_percent: u64,
    now: Instant,
    rng: &'a mut R,
    out: &'a mut SweepOutcome,
}

impl<R: FnMut() -> u32> Ejector<'_, R> {
    fn is_ejected(&self, id: &HostId) -> bool {
        self.hosts.get(id).is_some_and(HostOutlier::is_ejected)
    }

    /// An outlier was detected: ejects it unless the cap or the draw says
    /// no. Returns whether it was ejected.
    fn consider(
        &mut self,
        id: HostId,
        reason: EjectionReason,
        enforcement_percentage: u32,
    ) -> bool {
        // A50: stop when the ejected percentage is *greater than* the cap,
        // checked before each ejection, so one host is always ejectable
        // (with 10% of 3 hosts, 0% ejected is not above 10%). Envoy instead
        // refuses an ejection that would take the percentage above the cap
        // unless `always_eject_one_host`. No draw when capped, as A50 stops
        // before drawing.
        if self.ejected * 100 > self.max_ejection_percent * self.host_count {
            self.out.not_enforced.push((id, reason));
            return false;
        }
        if (self.rng)() % 100 >= enforcement_percentage {
            self.out.not_enforced.push((id, reason));
            return false;
        }
        let Some(host) = self.hosts.get_mut(&id) else {
            return false;
        };
        host.ejected_since = Some(self.now);
        host.multiplier = host.multiplier.saturating_add(1);
        host.reason = Some(reason);
        self.ejected += 1;
        self.out.ejected.push((id, reason));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{FailurePercentageEjection, SuccessRateEjection};

    const SEC: Duration = Duration::from_secs(1);

    /// No detector, cap off: tests enable what they exercise.
    fn config() -> OutlierDetection {
        OutlierDetection {
            interval: 10 * SEC,
            base_ejection_time: 30 * SEC,
            max_ejection_time: 300 * SEC,
            max_ejection_percent: 100,
            consecutive_5xx: None,
            consecutive_gateway_failure: None,
            success_rate: None,
            failure_percentage: None,
        }
    }

    fn consecutive(threshold: u32) -> Option<ConsecutiveErrors> {
        Some(ConsecutiveErrors {
            threshold,
            enforcement_percentage: 100,
        })
    }

    fn success_rate(stdev_factor: u32) -> Option<SuccessRateEjection> {
        Some(SuccessRateEjection {
            stdev_factor,
            enforcement_percentage: 100,
            minimum_hosts: 5,
            request_volume: 100,
        })
    }

    fn failure_percentage(threshold: u32) -> Option<FailurePercentageEjection> {
        Some(FailurePercentageEjection {
            threshold,
            enforcement_percentage: 100,
            minimum_hosts: 5,
            request_volume: 50,
        })
    }

    fn ids(n: u32) -> Vec<HostId> {
        (0..n).map(HostId).collect()
    }

    /// Reports of hosts 0, 1, ... with (success, failure) counts.
    fn counts(c: &[(u64, u64)]) -> AHashMap<HostId, HostReport> {
        c.iter()
            .enumerate()
            .map(|(i, &(success, failure))| {
                let report = HostReport {
                    success,
                    failure,
                    ..HostReport::default()
                };
                (HostId(i as u32), report)
            })
            .collect()
    }

    fn flagged(id: u32, consecutive_5xx: bool, gateway: bool) -> AHashMap<HostId, HostReport> {
        let report = HostReport {
            consecutive_5xx,
            consecutive_gateway_failure: gateway,
            ..HostReport::default()
        };
        [(HostId(id), report)].into_iter().collect()
    }

    /// An rng that returns `values` in order and fails the test on an
    /// unexpected draw.
    fn scripted(values: &[u32]) -> impl FnMut() -> u32 + '_ {
        let mut it = values.iter();
        move || *it.next().expect("unexpected rng draw")
    }

    fn never() -> impl FnMut() -> u32 {
        || panic!("unexpected rng draw")
    }

    fn detector(c: &OutlierDetection, hosts: u32, t0: Instant) -> ClusterOutlier {
        let mut d = ClusterOutlier::new();
        d.update(Some(c), &ids(hosts), t0);
        d
    }

    fn ejected(d: &ClusterOutlier) -> Vec<HostId> {
        d.ejected().collect()
    }

    #[test]
    fn grpc_to_http_table() {
        let table = [
            200, 499, 500, 400, 504, 404, 409, 403, 429, 400, 409, 400, 501, 500, 503, 500, 401,
        ];
        for (code, http) in table.into_iter().enumerate() {
            assert_eq!(grpc_to_http(code as u32), http, "grpc status {code}");
        }
        assert_eq!(grpc_to_http(17), 500);
        assert_eq!(grpc_to_http(u32::MAX), 500);
    }

    #[test]
    fn call_result_classification() {
        assert_eq!(CallResult::ConnectFailure.http_status(), 503);
        assert_eq!(CallResult::Reset.http_status(), 503);
        assert_eq!(CallResult::Timeout.http_status(), 504);
        assert_eq!(CallResult::Status(418).http_status(), 418);
        for r in [
            CallResult::ConnectFailure,
            CallResult::Reset,
            CallResult::Timeout,
            CallResult::Status(502),
            CallResult::Status(503),
            CallResult::Status(504),
        ] {
            assert!(r.is_failure() && r.is_gateway_failure(), "{r:?}");
        }
        for s in [500, 501, 505, 599] {
            let r = CallResult::Status(s);
            assert!(r.is_failure() && !r.is_gateway_failure(), "{s}");
        }
        for s in [0, 200, 404, 499, 600, 999] {
            let r = CallResult::Status(s);
            assert!(!r.is_failure() && !r.is_gateway_failure(), "{s}");
        }
    }

    #[test]
    fn five_503_trip_consecutive_5xx_and_a_success_resets_the_streak() {
        let c = OutlierDetection {
            consecutive_5xx: consecutive(5),
            ..config()
        };
        let mut h = HostCounters::default();
        for _ in 0..4 {
            h.record(CallResult::Status(503), &c);
        }
        h.record(CallResult::Status(200), &c);
        for _ in 0..4 {
            h.record(CallResult::Status(503), &c);
        }
        let r = h.take();
        assert_eq!((r.success, r.failure), (1, 8));
        assert!(!r.consecutive_5xx, "a 200 in between restarts the streak");

        // The streak carries over the take: 4 before, 1 after.
        h.record(CallResult::Status(500), &c);
        let r = h.take();
        assert!(r.consecutive_5xx);
        assert_eq!((r.success, r.failure), (0, 1), "a fresh bucket per take");
        assert!(h.take().is_empty(), "flags are handed over once");

        // A tripped streak restarts from 0: four more do not trip again.
        for _ in 0..4 {
            h.record(CallResult::Reset, &c);
        }
        assert!(!h.take().consecutive_5xx);
    }

    #[test]
    fn gateway_failures_are_502_503_504_and_local_origin_errors() {
        let c = OutlierDetection {
            consecutive_gateway_failure: consecutive(3),
            ..config()
        };
        let mut h = HostCounters::default();
        h.record(CallResult::Status(502), &c);
        h.record(CallResult::Status(504), &c);
        h.record(CallResult::Status(500), &c);
        h.record(CallResult::Status(503), &c);
        h.record(CallResult::Status(501), &c);
        let r = h.take();
        assert!(
            !r.consecutive_gateway_failure,
            "500 and 501 break the streak"
        );
        assert!(!r.consecutive_5xx, "no consecutive_5xx detector configured");
        assert_eq!(r.failure, 5);

        h.record(CallResult::ConnectFailure, &c);
        h.record(CallResult::Reset, &c);
        h.record(CallResult::Timeout, &c);
        assert!(h.take().consecutive_gateway_failure);

        // 500s count for consecutive_5xx but not for gateway failures.
        let c = OutlierDetection {
            consecutive_5xx: consecutive(3),
            ..c
        };
        for _ in 0..3 {
            h.record(CallResult::Status(500), &c);
        }
        let r = h.take();
        assert!(r.consecutive_5xx && !r.consecutive_gateway_failure);

        h.record(CallResult::Timeout, &c);
        h.reset();
        h.record(CallResult::Timeout, &c);
        h.record(CallResult::Timeout, &c);
        assert!(
            h.take()
                == HostReport {
                    failure: 2,
                    ..HostReport::default()
                }
        );
    }

    #[test]
    fn report_merge_and_emptiness() {
        let mut a = HostReport {
            success: 3,
            failure: 1,
            consecutive_5xx: true,
            consecutive_gateway_failure: false,
        };
        a.merge(&HostReport {
            success: 2,
            failure: 4,
            consecutive_5xx: false,
            consecutive_gateway_failure: true,
        });
        assert_eq!(
            a,
            HostReport {
                success: 5,
                failure: 5,
                consecutive_5xx: true,
                consecutive_gateway_failure: true,
            }
        );
        assert!(HostReport::default().is_empty());
        assert!(!a.is_empty());
        assert!(!HostReport {
            consecutive_gateway_failure: true,
            ..HostReport::default()
        }
        .is_empty());
    }

    #[test]
    fn success_rate_threshold_is_mean_minus_factor_times_population_stdev() {
        // Rates 1, 1, 1, 1, 0.5: mean 0.9, population stdev 0.2.
        // Factor 1.9: threshold 0.52, host 4 is an outlier. Factor 2.1:
        // threshold 0.48, it is not. (A sample stdev, 0.2236, would give
        // 0.475 with factor 1.9 and eject nobody.)
        let reports = counts(&[(100, 0), (100, 0), (100, 0), (100, 0), (50, 50)]);
        let t0 = Instant::now();
        let c = OutlierDetection {
            success_rate: success_rate(1900),
            ..config()
        };
        let mut d = detector(&c, 5, t0);
        let out = d.sweep(t0 + 10 * SEC, &reports, &mut scripted(&[0]));
        assert_eq!(out.ejected, [(HostId(4), EjectionReason::SuccessRate)]);
        assert!(out.not_enforced.is_empty() && out.unejected.is_empty());
        let host = d.host(HostId(4)).unwrap();
        assert_eq!(host.ejected_since, Some(t0 + 10 * SEC));
        assert_eq!(host.reason, Some(EjectionReason::SuccessRate));
        assert_eq!(host.multiplier, 1);
        assert_eq!(host.success_rate, Some(0.5));
        assert_eq!(d.host(HostId(0)).unwrap().success_rate, Some(1.0));

        let c = OutlierDetection {
            success_rate: success_rate(2100),
            ..config()
        };
        let mut d = detector(&c, 5, t0);
        let out = d.sweep(t0 + 10 * SEC, &reports, &mut never());
        assert_eq!(out, SweepOutcome::default());
        assert!(ejected(&d).is_empty());
    }

    #[test]
    fn success_rate_ignores_spread_free_rates() {
        // Three hosts at 0.1: stdev 0, so the threshold is the mean (an ulp
        // above 0.1 here: 0.30000000000000004 / 3) less a deviation at least
        // as large; outliers are strictly below it, so nobody is one.
        let reports = counts(&[(10, 90), (10, 90), (10, 90)]);
        let t0 = Instant::now();
        let c = OutlierDetection {
            success_rate: Some(SuccessRateEjection {
                minimum_hosts: 3,
                ..success_rate(1900).unwrap()
            }),
            ..config()
        };
        let mut d = detector(&c, 3, t0);
        assert_eq!(
            d.sweep(t0 + 10 * SEC, &reports, &mut never()),
            SweepOutcome::default()
        );
    }

    #[test]
    fn success_rate_request_volume_gate() {
        let t0 = Instant::now();
        let c = OutlierDetection {
            success_rate: success_rate(1900),
            ..config()
        };
        // Host 4 fails all of its 99 requests: below request_volume 100, it
        // is neither judged nor part of the statistics (counted, rates
        // 1,1,1,1,0,1 would give threshold 0.124 and eject it).
        let mut d = detector(&c, 6, t0);
        let low = counts(&[(100, 0), (100, 0), (100, 0), (100, 0), (0, 99), (100, 0)]);
        assert_eq!(
            d.sweep(t0 + 10 * SEC, &low, &mut never()),
            SweepOutcome::default()
        );
        assert_eq!(d.host(HostId(4)).unwrap().success_rate, Some(0.0));

        // At 100 requests it counts: rates 1,1,1,1,0,1, mean 0.833, stdev
        // 0.373, threshold 0.124.
        let enough = counts(&[(100, 0), (100, 0), (100, 0), (100, 0), (0, 100), (100, 0)]);
        let out = d.sweep(t0 + 20 * SEC, &enough, &mut scripted(&[0]));
        assert_eq!(out.ejected, [(HostId(4), EjectionReason::SuccessRate)]);
    }

    #[test]
    fn success_rate_minimum_hosts_gate() {
        // Rates 1,1,1,1,0: mean 0.8, stdev 0.4, threshold 0.04.
        let reports = counts(&[(100, 0), (100, 0), (100, 0), (100, 0), (0, 100)]);
        let t0 = Instant::now();
        let with_minimum = |minimum_hosts| OutlierDetection {
            success_rate: Some(SuccessRateEjection {
                minimum_hosts,
                ..success_rate(1900).unwrap()
            }),
            ..config()
        };
        // Six hosts, five with volume: minimum 6 is not met (the idle host
        // does not count).
        let mut d = detector(&with_minimum(6), 6, t0);
        assert_eq!(
            d.sweep(t0 + 10 * SEC, &reports, &mut never()),
            SweepOutcome::default()
        );
        let mut d = detector(&with_minimum(5), 6, t0);
        let out = d.sweep(t0 + 10 * SEC, &reports, &mut scripted(&[0]));
        assert_eq!(out.ejected, [(HostId(4), EjectionReason::SuccessRate)]);
        assert_eq!(d.host(HostId(5)).unwrap().success_rate, None);
    }

    #[test]
    fn ejected_hosts_are_left_out_of_success_rate_statistics() {
        // Host 0 is ejected by consecutive_5xx in step (a) of this sweep.
        // Without it, rates 1,1,1,1,0.5 give threshold 0.52 and host 5 is an
        // outlier; with it (0,1,1,1,1,0.5: threshold 0.024) it would not be.
        let t0 = Instant::now();
        let c = OutlierDetection {
            consecutive_5xx: consecutive(5),
            success_rate: success_rate(1900),
            ..config()
        };
        let mut d = detector(&c, 6, t0);
        let mut reports = counts(&[(0, 100), (100, 0), (100, 0), (100, 0), (100, 0), (50, 50)]);
        reports.get_mut(&HostId(0)).unwrap().consecutive_5xx = true;
        let out = d.sweep(t0 + 10 * SEC, &reports, &mut scripted(&[0, 0]));
        assert_eq!(
            out.ejected,
            [
                (HostId(0), EjectionReason::Consecutive5xx),
                (HostId(5), EjectionReason::SuccessRate),
            ]
        );
    }

    #[test]
    fn failure_percentage_threshold_is_inclusive() {
        let t0 = Instant::now();
        let c = OutlierDetection {
            failure_percentage: failure_percentage(50),
            ..config()
        };
        let mut d = detector(&c, 5, t0);
        // Host 0: exactly 50% failures, ejected (>=). Host 1: 49%, stays.
        // Host 2: 100% but only 49 requests (< request_volume 50), stays.
        let reports = counts(&[(50, 50), (51, 49), (0, 49), (50, 0)]);
        let out = d.sweep(t0 + 10 * SEC, &reports, &mut scripted(&[0]));
        assert_eq!(
            out.ejected,
            [(HostId(0), EjectionReason::FailurePercentage)]
        );
        assert!(out.not_enforced.is_empty());
        assert_eq!(ejected(&d), [HostId(0)]);
    }

    #[test]
    fn failure_percentage_minimum_hosts_counts_every_host() {
        let t0 = Instant::now();
        let c = OutlierDetection {
            failure_percentage: failure_percentage(85),
            ..config()
        };
        // Five hosts, only one with traffic: A50 counts all five.
        let mut d = detector(&c, 5, t0);
        let reports = counts(&[(0, 100)]);
        let out = d.sweep(t0 + 10 * SEC, &reports, &mut scripted(&[0]));
        assert_eq!(
            out.ejected,
            [(HostId(0), EjectionReason::FailurePercentage)]
        );
        // Four hosts: below minimum_hosts 5, nothing happens.
        let mut d = detector(&c, 4, t0);
        assert_eq!(
            d.sweep(t0 + 10 * SEC, &reports, &mut never()),
            SweepOutcome::default()
        );
    }

    #[test]
    fn enforcement_percentage_draw() {
        let t0 = Instant::now();
        let c = OutlierDetection {
            failure_percentage: Some(FailurePercentageEjection {
                enforcement_percentage: 50,
                ..failure_percentage(85).unwrap()
            }),
            ..config()
        };
        let reports = counts(&[(0, 100)]);
        let mut d = detector(&c, 5, t0);
        // 50 % 100 = 50 is not below 50: detected, not enforced.
        let out = d.sweep(t0 + 10 * SEC, &reports, &mut scripted(&[50]));
        assert!(out.ejected.is_empty());
        assert_eq!(
            out.not_enforced,
            [(HostId(0), EjectionReason::FailurePercentage)]
        );
        assert!(!d.is_ejected(HostId(0)));
        assert_eq!(d.host(HostId(0)).unwrap().multiplier, 0);
        // 49 is: ejected. The draw is taken modulo 100 (149 -> 49).
        let out = d.sweep(t0 + 20 * SEC, &reports, &mut scripted(&[149]));
        assert_eq!(
            out.ejected,
            [(HostId(0), EjectionReason::FailurePercentage)]
        );
        assert!(d.is_ejected(HostId(0)));
    }

    #[test]
    fn max_ejection_percent_always_allows_one() {
        let t0 = Instant::now();
        let c = OutlierDetection {
            max_ejection_percent: 10,
            failure_percentage: Some(FailurePercentageEjection {
                minimum_hosts: 3,
                ..failure_percentage(85).unwrap()
            }),
            ..config()
        };
        let mut d = detector(&c, 3, t0);
        let all_failing = counts(&[(0, 100), (0, 100), (0, 100)]);
        // 0 of 3 ejected is not above 10%: one goes; 1 of 3 is: the others
        // are detected but not enforced, without a draw.
        let out = d.sweep(t0 + 10 * SEC, &all_failing, &mut scripted(&[0]));
        assert_eq!(
            out.ejected,
            [(HostId(0), EjectionReason::FailurePercentage)]
        );
        assert_eq!(
            out.not_enforced,
            [
                (HostId(1), EjectionReason::FailurePercentage),
                (HostId(2), EjectionReason::FailurePercentage),
            ]
        );
        // Ejections from earlier sweeps count toward the cap.
        let out = d.sweep(t0 + 20 * SEC, &all_failing, &mut never());
        assert!(out.ejected.is_empty());
        assert_eq!(out.not_enforced.len(), 2);

        // 0% still lets one through.
        let c = OutlierDetection {
            max_ejection_percent: 0,
            ..c
        };
        let mut d = detector(&c, 3, t0);
        let out = d.sweep(t0 + 10 * SEC, &all_failing, &mut scripted(&[0]));
        assert_eq!(out.ejected.len(), 1);
    }

    #[test]
    fn max_ejection_percent_is_checked_before_each_ejection() {
        // 50% of 4: at 2 of 4 (50%, not above 50%) a third may still go;
        // at 3 of 4 the fourth may not. This is A50's rule verbatim.
        let t0 = Instant::now();
        let c = OutlierDetection {
            max_ejection_percent: 50,
            failure_percentage: Some(FailurePercentageEjection {
                minimum_hosts: 4,
                ..failure_percentage(85).unwrap()
            }),
            ..config()
        };
        let mut d = detector(&c, 4, t0);
        let all_failing = counts(&[(0, 100), (0, 100), (0, 100), (0, 100)]);
        let out = d.sweep(t0 + 10 * SEC, &all_failing, &mut scripted(&[0, 0, 0]));
        assert_eq!(out.ejected.len(), 3);
        assert_eq!(
            out.not_enforced,
            [(HostId(3), EjectionReason::FailurePercentage)]
        );
    }

    #[test]
    fn consecutive_flags_from_counters_eject() {
        let t0 = Instant::now();
        let c = OutlierDetection {
            consecutive_5xx: consecutive(5),
            consecutive_gateway_failure: consecutive(5),
            ..config()
        };
        // Two shards: 3 and 2 errors do not add up (streaks are per shard).
        let mut shard_a = HostCounters::default();
        let mut shard_b = HostCounters::default();
        for _ in 0..3 {
            shard_a.record(CallResult::Status(500), &c);
        }
        for _ in 0..2 {
            shard_b.record(CallResult::Status(500), &c);
        }
        let mut report = shard_a.take();
        report.merge(&shard_b.take());
        assert!(!report.consecutive_5xx);

        let mut d = detector(&c, 3, t0);
        for _ in 0..5 {
            shard_a.record(CallResult::Status(500), &c);
        }
        let mut reports = AHashMap::new();
        reports.insert(HostId(1), shard_a.take());
        for _ in 0..5 {
            shard_b.record(CallResult::Timeout, &c);
        }
        reports.insert(HostId(2), shard_b.take());
        let out = d.sweep(t0 + 10 * SEC, &reports, &mut scripted(&[0, 0]));
        // A gateway streak is also a 5xx streak; the gateway detector acts
        // first, as in Envoy.
        assert_eq!(
            out.ejected,
            [
                (HostId(1), EjectionReason::Consecutive5xx),
                (HostId(2), EjectionReason::ConsecutiveGatewayFailure),
            ]
        );

        // Already ejected: skipped, no draw.
        let out = d.sweep(t0 + 20 * SEC, &flagged(1, true, true), &mut never());
        assert_eq!(out, SweepOutcome::default());
    }

    #[test]
    fn gateway_detector_not_enforced_falls_back_to_5xx() {
        let t0 = Instant::now();
        let c = OutlierDetection {
            consecutive_5xx: Some(ConsecutiveErrors {
                threshold: 5,
                enforcement_percentage: 50,
            }),
            consecutive_gateway_failure: Some(ConsecutiveErrors {
                threshold: 5,
                enforcement_percentage: 10,
            }),
            ..config()
        };
        let mut d = detector(&c, 1, t0);
        let out = d.sweep(
            t0 + 10 * SEC,
            &flagged(0, true, true),
            &mut scripted(&[10, 50]),
        );
        assert_eq!(
            out.not_enforced,
            [
                (HostId(0), EjectionReason::ConsecutiveGatewayFailure),
                (HostId(0), EjectionReason::Consecutive5xx),
            ]
        );
        let out = d.sweep(
            t0 + 20 * SEC,
            &flagged(0, true, true),
            &mut scripted(&[10, 49]),
        );
        assert_eq!(out.ejected, [(HostId(0), EjectionReason::Consecutive5xx)]);

        // A flag whose detector is off is ignored.
        let c = OutlierDetection {
            consecutive_gateway_failure: None,
            ..c
        };
        let mut d = detector(&c, 1, t0);
        let out = d.sweep(t0 + 10 * SEC, &flagged(0, false, true), &mut never());
        assert_eq!(out, SweepOutcome::default());
    }

    #[test]
    fn ejection_time_grows_with_multiplier_up_to_the_cap() {
        // base 10 s, max 25 s, sweeps every 10 s; host 0 fails whenever it
        // is flagged.
        let t0 = Instant::now();
        let c = OutlierDetection {
            base_ejection_time: 10 * SEC,
            max_ejection_time: 25 * SEC,
            consecutive_5xx: consecutive(5),
            ..config()
        };
        let mut d = detector(&c, 2, t0);
        let bad = flagged(0, true, false);
        let none = AHashMap::new();
        let at = |d: &mut ClusterOutlier, secs: u32, r: &AHashMap<HostId, HostReport>| {
            d.sweep(t0 + secs * SEC, r, &mut || 0)
        };

        // Ejection 1 at 10 s: 10 s out, back at 20 s.
        assert_eq!(at(&mut d, 10, &bad).ejected.len(), 1);
        assert_eq!(at(&mut d, 20, &none).unejected, [HostId(0)]);
        assert_eq!(d.host(HostId(0)).unwrap().multiplier, 1);
        // Ejection 2 at 30 s: 20 s out, still out at 40 s, back at 50 s.
        assert_eq!(at(&mut d, 30, &bad).ejected.len(), 1);
        assert_eq!(d.host(HostId(0)).unwrap().multiplier, 2);
        assert!(at(&mut d, 40, &none).unejected.is_empty());
        assert_eq!(at(&mut d, 50, &none).unejected, [HostId(0)]);
        // Ejection 3 at 60 s: min(30 s, 25 s) = 25 s, back at the first
        // sweep from 85 s on, 90 s.
        assert_eq!(at(&mut d, 60, &bad).ejected.len(), 1);
        assert_eq!(d.host(HostId(0)).unwrap().multiplier, 3);
        assert!(at(&mut d, 70, &none).unejected.is_empty());
        assert!(at(&mut d, 80, &none).unejected.is_empty());
        assert_eq!(at(&mut d, 90, &none).unejected, [HostId(0)]);
    }

    #[test]
    fn ejection_time_cap_is_never_below_base() {
        // max_ejection_time below base: the cap is base (max(base, max)).
        let t0 = Instant::now();
        let c = OutlierDetection {
            base_ejection_time: 30 * SEC,
            max_ejection_time: 10 * SEC,
            consecutive_5xx: consecutive(5),
            ..config()
        };
        let mut d = detector(&c, 1, t0);
        d.sweep(t0 + 10 * SEC, &flagged(0, true, false), &mut || 0);
        let none = AHashMap::new();
        assert!(d
            .sweep(t0 + 20 * SEC, &none, &mut never())
            .unejected
            .is_empty());
        assert!(d
            .sweep(t0 + 30 * SEC, &none, &mut never())
            .unejected
            .is_empty());
        assert_eq!(
            d.sweep(t0 + 40 * SEC, &none, &mut never()).unejected,
            [HostId(0)]
        );
    }

    #[test]
    fn unejection_happens_at_the_first_sweep_at_or_after_the_end() {
        let t0 = Instant::now();
        let c = OutlierDetection {
            consecutive_5xx: consecutive(5),
            ..config()
        };
        let mut d = detector(&c, 1, t0);
        d.sweep(t0 + 10 * SEC, &flagged(0, true, false), &mut || 0);
        let none = AHashMap::new();
        // base 30 s from 10 s: due at 40 s exactly.
        let just_before = t0 + 40 * SEC - Duration::from_millis(1);
        assert!(d
            .sweep(just_before, &none, &mut never())
            .unejected
            .is_empty());
        assert!(d.is_ejected(HostId(0)));
        assert_eq!(
            d.sweep(t0 + 40 * SEC, &none, &mut never()).unejected,
            [HostId(0)]
        );
        let host = d.host(HostId(0)).unwrap();
        assert_eq!(host.ejected_since, None);
        assert_eq!(
            host.reason,
            Some(EjectionReason::Consecutive5xx),
            "last reason kept"
        );
        assert!(ejected(&d).is_empty());
    }

    #[test]
    fn multiplier_decays_by_one_per_sweep_while_not_ejected() {
        let t0 = Instant::now();
        let c = OutlierDetection {
            base_ejection_time: 10 * SEC,
            consecutive_5xx: consecutive(5),
            ..config()
        };
        let mut d = detector(&c, 1, t0);
        let bad = flagged(0, true, false);
        let none = AHashMap::new();
        d.sweep(t0 + 10 * SEC, &bad, &mut || 0); // multiplier 1, out till 20
        d.sweep(t0 + 20 * SEC, &none, &mut || 0); // back; no decay this sweep
        d.sweep(t0 + 30 * SEC, &bad, &mut || 0); // multiplier 2, out till 50
        let mult = |d: &ClusterOutlier| d.host(HostId(0)).unwrap().multiplier;
        d.sweep(t0 + 40 * SEC, &none, &mut never());
        assert_eq!(mult(&d), 2, "no decay while ejected");
        d.sweep(t0 + 50 * SEC, &none, &mut never());
        assert_eq!(
            mult(&d),
            2,
            "un-ejected by this sweep, after its decay step"
        );
        d.sweep(t0 + 60 * SEC, &none, &mut never());
        assert_eq!(mult(&d), 1);
        d.sweep(t0 + 70 * SEC, &none, &mut never());
        assert_eq!(mult(&d), 0);
        d.sweep(t0 + 80 * SEC, &none, &mut never());
        assert_eq!(mult(&d), 0);
        // Next ejection is back to base time.
        d.sweep(t0 + 90 * SEC, &bad, &mut || 0);
        assert_eq!(mult(&d), 1);
        assert_eq!(
            d.sweep(t0 + 100 * SEC, &none, &mut never()).unejected,
            [HostId(0)]
        );
    }

    #[test]
    fn config_change_keeps_the_timer_start() {
        let t0 = Instant::now();
        let c = OutlierDetection {
            consecutive_5xx: consecutive(5),
            ..config()
        };
        let mut d = ClusterOutlier::new();
        assert_eq!(d.next_sweep(), None);
        d.update(Some(&c), &ids(2), t0);
        assert_eq!(d.next_sweep(), Some(t0 + 10 * SEC));

        // Mid-interval change to 6 s: timer_start + 6 s.
        let shorter = OutlierDetection {
            interval: 6 * SEC,
            ..c.clone()
        };
        d.update(Some(&shorter), &ids(2), t0 + 4 * SEC);
        assert_eq!(d.next_sweep(), Some(t0 + 6 * SEC));
        // To 3 s, already elapsed: due now, not in the past.
        let shortest = OutlierDetection {
            interval: 3 * SEC,
            ..c.clone()
        };
        d.update(Some(&shortest), &ids(2), t0 + 5 * SEC);
        assert_eq!(d.next_sweep(), Some(t0 + 5 * SEC));
        // A host update alone does not restart the timer either.
        d.update(Some(&shortest), &ids(3), t0 + 5 * SEC);
        assert_eq!(d.next_sweep(), Some(t0 + 5 * SEC));

        // A sweep restarts it.
        d.sweep(t0 + 5 * SEC, &AHashMap::new(), &mut never());
        assert_eq!(d.next_sweep(), Some(t0 + 8 * SEC));
        d.update(Some(&c), &ids(3), t0 + 7 * SEC);
        assert_eq!(d.next_sweep(), Some(t0 + 15 * SEC));
    }

    #[test]
    fn config_removal_unejects_and_stops_sweeps() {
        let t0 = Instant::now();
        let c = OutlierDetection {
            consecutive_5xx: consecutive(5),
            ..config()
        };
        for off in [None, Some(config())] {
            let mut d = detector(&c, 2, t0);
            d.sweep(t0 + 10 * SEC, &flagged(1, true, false), &mut || 0);
            assert_eq!(ejected(&d), [HostId(1)]);

            d.update(off.as_ref(), &ids(2), t0 + 12 * SEC);
            assert_eq!(d.next_sweep(), None);
            assert!(ejected(&d).is_empty() && !d.is_ejected(HostId(1)));
            assert_eq!(d.host(HostId(1)), Some(&HostOutlier::default()));
            // A sweep without config does nothing, even with flags.
            let out = d.sweep(t0 + 20 * SEC, &flagged(0, true, false), &mut never());
            assert_eq!(out, SweepOutcome::default());
            assert_eq!(d.next_sweep(), None);

            // Re-enabled: the timer starts afresh.
            d.update(Some(&c), &ids(2), t0 + 21 * SEC);
            assert_eq!(d.next_sweep(), Some(t0 + 31 * SEC));
        }
    }

    #[test]
    fn host_removal_forgets_state() {
        let t0 = Instant::now();
        let c = OutlierDetection {
            consecutive_5xx: consecutive(5),
            ..config()
        };
        let mut d = detector(&c, 3, t0);
        d.sweep(t0 + 10 * SEC, &flagged(1, true, false), &mut || 0);
        assert!(d.is_ejected(HostId(1)));

        d.update(Some(&c), &[HostId(0), HostId(2)], t0 + 12 * SEC);
        assert!(!d.is_ejected(HostId(1)) && d.host(HostId(1)).is_none());
        assert!(ejected(&d).is_empty());
        // Reports of hosts that left are ignored.
        let out = d.sweep(t0 + 20 * SEC, &flagged(1, true, false), &mut never());
        assert_eq!(out, SweepOutcome::default());

        // Back (or the id recycled): a fresh host.
        d.update(Some(&c), &ids(3), t0 + 21 * SEC);
        assert_eq!(d.host(HostId(1)), Some(&HostOutlier::default()));
        assert_eq!(
            d.next_sweep(),
            Some(t0 + 30 * SEC),
            "host changes keep the timer"
        );
    }

    #[test]
    fn ejection_reason_names() {
        let names: Vec<_> = EjectionReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            names,
            [
                "consecutive_5xx",
                "consecutive_gateway_failure",
                "success_rate",
                "failure_percentage"
            ]
        );
    }
}
