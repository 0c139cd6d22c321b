//! Active health checking's pure logic (Envoy's `HealthCheckerImplBase`):
//! one host's verdict as check outcomes arrive, when its next check is
//! due, and how the verdict combines with the host's EDS status. The
//! control shard's checkers drive it; it takes no clock and draws its
//! jitter from the RNG it is handed.
//!
//! ```text
//!            passed × healthy_threshold (× 1 on the very first check)
//!   ┌───────────┐ ───────────────────────────────────▶ ┌─────────┐
//!   │ unhealthy │                                      │ healthy │
//!   └───────────┘ ◀─────────────────────────────────── └─────────┘
//!     (start)    network/timeout/retriable × unhealthy_threshold,
//!                or any other failed answer at once
//! ```

use std::net::SocketAddr;
use std::time::Duration;

use ahash::AHashMap;

use crate::config::{HealthCheck, HealthStatus};

/// What one check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The host answered as expected; `degraded`: with
    /// `x-envoy-degraded`.
    Passed { degraded: bool },
    /// No answer: the connection failed, closed or timed out. Counts
    /// towards `unhealthy_threshold`.
    Network,
    /// A status in `retriable_statuses`: counts towards
    /// `unhealthy_threshold`.
    Retriable,
    /// A wrong answer (status, payload, `NOT_SERVING`): unhealthy at once.
    Active,
    /// `x-envoy-immediate-health-check-fail` on an answer (the check's or
    /// a proxied one): unhealthy at once and *excluded* until a check
    /// passes.
    ImmediateFail,
}

/// Whether a result changed the host's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    Unchanged,
    /// The result points the other way but the threshold is not met yet.
    Pending,
    Changed,
}

/// A host's verdict as the shards see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Verdict {
    pub healthy: bool,
    pub degraded: bool,
    /// Failed through `x-envoy-immediate-health-check-fail`: left out of
    /// its priority's health and of panic mode until a check passes
    /// (Envoy's `EXCLUDED_VIA_IMMEDIATE_HC_FAIL`).
    pub excluded: bool,
}

/// One host's checking state.
#[derive(Debug, Clone)]
pub struct HostHealth {
    verdict: Verdict,
    /// No result yet: the first pass makes the host healthy at once (Envoy
    /// speeds start-up so).
    first: bool,
    passes: u32,
    failures: u32,
}

impl Default for HostHealth {
    fn default() -> Self {
        Self::new()
    }
}

impl HostHealth {
    /// A host never checked: unhealthy until its first pass.
    pub fn new() -> Self {
        Self {
            verdict: Verdict::default(),
            first: true,
            passes: 0,
            failures: 0,
        }
    }

    /// A host that carries `verdict` over (its cluster's check was
    /// reconfigured): counting starts again, the verdict stays.
    pub fn resumed(verdict: Verdict) -> Self {
        Self {
            verdict,
            first: false,
            passes: 0,
            failures: 0,
        }
    }

    pub fn verdict(&self) -> Verdict {
        self.verdict
    }

    /// Whether no check has ended yet.
    pub fn is_first(&self) -> bool {
        self.first
    }

    /// Applies one result.
    pub fn on_outcome(&mut self, outcome: Outcome, hc: &HealthCheck) -> Transition {
        let first = std::mem::replace(&mut self.first, false);
        match outcome {
            Outcome::Passed { degraded } => {
                self.failures = 0;
                let mut t = Transition::Unchanged;
                if self.verdict.excluded {
                    // Any pass ends the exclusion, healthy or not yet.
                    self.verdict.excluded = false;
                    t = Transition::Changed;
                }
                if !self.verdict.healthy {
                    self.passes += 1;
                    if first || self.passes >= hc.healthy_threshold {
                        self.verdict.healthy = true;
                        self.passes = 0;
                        t = Transition::Changed;
                    } else if t == Transition::Unchanged {
                        t = Transition::Pending;
                    }
                }
                if degraded != self.verdict.degraded {
                    self.verdict.degraded = degraded;
                    t = Transition::Changed;
                }
                t
            }
            failure => {
                self.passes = 0;
                let immediate = failure == Outcome::ImmediateFail;
                if !self.verdict.healthy {
                    if immediate && !self.verdict.excluded {
                        self.verdict.excluded = true;
                        return Transition::Changed;
                    }
                    return Transition::Unchanged;
                }
                self.failures += 1;
                let counted = matches!(failure, Outcome::Network | Outcome::Retriable);
                if !counted || self.failures >= hc.unhealthy_threshold {
                    self.verdict = Verdict {
                        excluded: immediate,
                        ..Verdict::default()
                    };
                    self.failures = 0;
                    Transition::Changed
                } else {
                    Transition::Pending
                }
            }
        }
    }

    /// How long until the next check after one that `passed` (or not)
    /// and made `transition`, as Envoy picks it: the *edge* intervals while
    /// a change is pending, the no-traffic ones until the cluster has
    /// carried traffic (`traffic`).
    pub fn next_interval(
        hc: &HealthCheck,
        passed: bool,
        transition: Transition,
        traffic: bool,
        rng: &mut impl FnMut() -> u64,
    ) -> Duration {
        let pending = transition == Transition::Pending;
        let base = match (traffic, passed) {
            (false, true) if !pending => hc.no_traffic_healthy_interval,
            (false, _) => hc.no_traffic_interval,
            (true, false) if pending => hc.unhealthy_edge_interval,
            (true, false) => hc.unhealthy_interval,
            (true, true) if pending => hc.healthy_edge_interval,
            (true, true) => hc.interval,
        };
        base + jitter(hc, base, rng)
    }

    /// The wait before a new host's first check: a random part of
    /// `initial_jitter`.
    pub fn initial_delay(hc: &HealthCheck, rng: &mut impl FnMut() -> u64) -> Duration {
        below(hc.initial_jitter, rng)
    }
}

/// `interval_jitter` plus `interval_jitter_percent` of `base`, each a
/// uniform draw below its bound.
fn jitter(hc: &HealthCheck, base: Duration, rng: &mut impl FnMut() -> u64) -> Duration {
    let pct = base.saturating_mul(hc.interval_jitter_percent) / 100;
    below(hc.interval_jitter, rng) + below(pct, rng)
}

fn below(bound: Duration, rng: &mut impl FnMut() -> u64) -> Duration {
    let ms = bound.as_millis() as u64;
    if ms == 0 {
        return Duration::ZERO;
    }
    Duration::from_millis(rng() % ms)
}

/// The status a host shows the data path: Envoy's `healthStatus()`. A
/// failed check first (UNHEALTHY), then an unhealthy EDS status
/// (UNHEALTHY, DRAINING, TIMEOUT), then degradation (DEGRADED), else the
/// EDS status. `verdict` is `None` while the host has not passed a check.
pub fn combined_status(eds: HealthStatus, verdict: Option<Verdict>) -> HealthStatus {
    match verdict {
        Some(Verdict { healthy: false, .. }) | None => HealthStatus::Unhealthy,
        _ if !eds.is_routable() => eds,
        Some(Verdict { degraded: true, .. }) => HealthStatus::Degraded,
        Some(_) => eds,
    }
}

/// Where active checking stands for one host of a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActiveCheck {
    /// Not checked (no `health_checks`, or `disable_active_health_check`).
    Off,
    /// Checked, no verdict yet (unhealthy until the first check passes).
    Pending,
    /// The same in a cluster with `ignore_new_hosts_until_first_hc`: also
    /// left out, like a draining host, until its first check ended
    /// (Envoy's `PENDING_ACTIVE_HC`).
    PendingExcluded,
    Done(Verdict),
}

impl ActiveCheck {
    /// Failed through `x-envoy-immediate-health-check-fail` and not passed
    /// since, or new and not checked yet in a cluster that ignores such
    /// hosts: the balancers leave it out like a draining host.
    pub fn excluded(self) -> bool {
        matches!(
            self,
            Self::PendingExcluded | Self::Done(Verdict { excluded: true, .. })
        )
    }

    /// Its last check verdict is a failure.
    pub fn failed(self) -> bool {
        matches!(self, Self::Done(Verdict { healthy: false, .. }))
    }

    /// No check of the host has ended yet.
    pub fn pending(self) -> bool {
        matches!(self, Self::Pending | Self::PendingExcluded)
    }

    /// Envoy's `health_flags` of a host (`/clusters`): the flags of its
    /// EDS status, active checking and outlier ejection in Envoy's order,
    /// or `healthy` when none is set. A host not checked yet shows
    /// `/failed_active_hc` alone, as Envoy 1.40 shows it, and
    /// `/pending_active_hc` too with `ignore_new_hosts_until_first_hc`.
    pub fn envoy_flags(
        self,
        eds: HealthStatus,
        outlier_ejected: bool,
        pending_removal: bool,
    ) -> String {
        let failed_active = matches!(
            self,
            Self::Pending | Self::PendingExcluded | Self::Done(Verdict { healthy: false, .. })
        );
        let degraded_active = matches!(
            self,
            Self::Done(Verdict {
                healthy: true,
                degraded: true,
                ..
            })
        );
        let flags = [
            (failed_active, "/failed_active_hc"),
            (outlier_ejected, "/failed_outlier_check"),
            (
                matches!(eds, HealthStatus::Unhealthy | HealthStatus::Timeout),
                "/failed_eds_health",
            ),
            (degraded_active, "/degraded_active_hc"),
            (eds == HealthStatus::Degraded, "/degraded_eds_health"),
            (pending_removal, "/pending_dynamic_removal"),
            (self == Self::PendingExcluded, "/pending_active_hc"),
            (
                matches!(self, Self::Done(Verdict { excluded: true, .. })),
                "/excluded_via_immediate_hc_fail",
            ),
            (eds == HealthStatus::Draining, "/eds_status_draining"),
        ];
        let out: String = flags
            .iter()
            .filter(|(set, _)| *set)
            .map(|(_, name)| *name)
            .collect();
        if out.is_empty() {
            "healthy".into()
        } else {
            out
        }
    }
}

/// The verdicts of every checked host of one cluster, as the control
/// shard publishes them into snapshots. `version` grows with every
/// change, so a snapshot rebuild knows which clusters to rebuild.
#[derive(Debug, Clone, Default)]
pub struct ClusterVerdicts {
    pub version: u64,
    pub hosts: AHashMap<SocketAddr, Verdict>,
}

/// Every checked cluster's verdicts, by cluster name.
pub type ActiveHealth = AHashMap<String, ClusterVerdicts>;

#[cfg(test)]
pub(crate) mod tests;
