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

mod counters;
mod sweep;
#[cfg(test)]
mod tests;

use std::time::Instant;

use ahash::{AHashMap, AHashSet};

use crate::config::OutlierDetection;
use crate::host::HostId;

pub use counters::{grpc_to_http, CallResult, HostCounters, HostReport};

/// Why a host was ejected (Envoy's `OutlierEjectionType` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EjectionReason {
    Consecutive5xx,
    ConsecutiveGatewayFailure,
    SuccessRate,
    FailurePercentage,
}

impl EjectionReason {
    /// In declaration order, so that `ALL[r.index()] == r`.
    pub const ALL: [Self; 4] = [
        Self::Consecutive5xx,
        Self::ConsecutiveGatewayFailure,
        Self::SuccessRate,
        Self::FailurePercentage,
    ];

    /// Its place in [`Self::ALL`]: where per-reason counts are kept.
    pub fn index(self) -> usize {
        self as usize
    }

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
    /// Outliers detected but left in by the enforcement draw (Envoy's
    /// `ejections_detected_*` without `ejections_enforced_*`).
    pub not_enforced: Vec<(HostId, EjectionReason)>,
    /// Outliers detected but left in because `max_ejection_percent` was
    /// reached (Envoy's `ejections_overflow`); no draw was taken.
    pub overflow: Vec<(HostId, EjectionReason)>,
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

        match config.filter(|c| c.has_detector()) {
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

    pub fn is_ejected(&self, id: HostId) -> bool {
        self.hosts.get(&id).is_some_and(HostOutlier::is_ejected)
    }

    pub fn host(&self, id: HostId) -> Option<&HostOutlier> {
        self.hosts.get(&id)
    }

    /// Ends `id`'s ejection because its active health check passed
    /// (Envoy's `successful_active_health_check_uneject_host`): whether it
    /// was ejected and the cluster un-ejects on checks. The caller makes
    /// sure the check left the host passing (not still short of
    /// `healthy_threshold`). The multiplier stays, as Envoy keeps the
    /// ejection count: decay goes on sweep by sweep.
    pub fn uneject_after_check(&mut self, id: HostId) -> bool {
        if !self
            .config
            .as_ref()
            .is_some_and(|c| c.uneject_on_active_check)
        {
            return false;
        }
        match self.hosts.get_mut(&id) {
            Some(host) if host.is_ejected() => {
                host.ejected_since = None;
                true
            }
            _ => false,
        }
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
