//! Control-shard sweep: the consecutive-errors, success-rate and
//! failure-percentage detectors, ejection, multiplier decay and un-ejection.

use std::time::{Duration, Instant};

use ahash::AHashMap;

use super::{ClusterOutlier, EjectionReason, HostOutlier, HostReport, SweepOutcome};
use crate::host::HostId;

impl ClusterOutlier {
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
            self.out.overflow.push((id, reason));
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
