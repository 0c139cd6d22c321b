//! Outlier detection on the control shard (gRFC A50 plus Envoy's
//! consecutive detectors): one `engine::outlier::ClusterOutlier` per cluster,
//! swept when its `interval` is due with the counts collected from every
//! data shard, and the resulting ejected set pushed back to them.
//!
//! ```text
//!  data shards: HostCounters per HostId (shard-local, no atomics)
//!        │  ShardMsg::CollectOutlier(clusters) ─▶ ShardReply::Outlier(reports)
//!        ▼
//!  control: merge ─▶ ClusterOutlier::sweep ─▶ EjectedSet (epoch + 1) ─▶ every shard
//! ```

use std::sync::Arc;
use std::time::Instant;

use ahash::AHashMap;
use engine::outlier::{ClusterOutlier, EjectionReason, HostOutlier, HostReport, SweepOutcome};
use engine::{EjectedSet, HostId, Snapshot};

/// Ejections counted by algorithm (indexed like `EjectionReason::ALL`).
#[derive(Debug, Default, Clone)]
pub struct OutlierStats {
    /// Hosts ejected.
    pub enforced: [u64; 4],
    /// Outliers found but left in: the enforcement draw said no, or
    /// `max_ejection_percent` was reached.
    pub not_enforced: [u64; 4],
    /// Ejections ended by their timer.
    pub unejected: u64,
    /// Ejections ended by a passing active health check.
    pub unejected_by_check: u64,
    /// Sweeps run (over all clusters).
    pub sweeps: u64,
}

/// One cluster's detections by algorithm (indexed like
/// `EjectionReason::ALL`): Envoy's `cluster.<name>.outlier_detection.*`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ClusterOutlierStats {
    /// Outliers found, ejected or not (`ejections_detected_*`).
    pub detected: [u64; 4],
    /// Outliers ejected (`ejections_enforced_*`).
    pub enforced: [u64; 4],
    /// Outliers left in because `max_ejection_percent` was reached
    /// (`ejections_overflow`).
    pub overflow: u64,
    /// Envoy's deprecated `ejections_total`: outliers of the consecutive
    /// 5xx and success-rate kinds under the cap, ejected or not.
    pub total_under_cap: u64,
}

/// What the admin server shows about outlier detection.
#[derive(Debug, Default, Clone)]
pub struct OutlierView {
    pub hosts: AHashMap<HostId, HostOutlier>,
    pub ejected_now: usize,
    pub stats: OutlierStats,
    /// Per cluster with a detector, by name.
    pub clusters: AHashMap<String, ClusterOutlierStats>,
}

/// The control shard's outlier detectors.
#[derive(Debug)]
pub struct OutlierControl {
    clusters: AHashMap<String, ClusterOutlier>,
    /// Epoch of the last set pushed.
    epoch: u64,
    /// The last set pushed (to tell whether a sweep changed anything).
    current: Arc<EjectedSet>,
    rng: u64,
    stats: OutlierStats,
    /// Kept while the cluster keeps a detector, so its counters only grow.
    cluster_stats: AHashMap<String, ClusterOutlierStats>,
}

impl OutlierControl {
    pub fn new(seed: u64) -> Self {
        Self {
            clusters: AHashMap::new(),
            epoch: 0,
            current: Arc::new(EjectedSet::default()),
            rng: seed | 1,
            stats: OutlierStats::default(),
            cluster_stats: AHashMap::new(),
        }
    }

    /// Follows a new snapshot: detectors for new clusters, config changes
    /// (A50's timer rules), hosts that left. Returns the ejected set to push
    /// when it changed (an ejected host left, or detection was turned off).
    pub fn on_snapshot(&mut self, snap: &Snapshot, now: Instant) -> Option<Arc<EjectedSet>> {
        self.clusters
            .retain(|name, _| snap.clusters.contains_key(name));
        let mut ids = Vec::new();
        for (name, c) in &snap.clusters {
            if c.config.outlier_detection.is_none() && !self.clusters.contains_key(name) {
                continue;
            }
            ids.clear();
            ids.extend(c.hosts.iter().map(|h| h.id));
            let detector = self.clusters.entry(name.clone()).or_default();
            detector.update(c.config.outlier_detection.as_ref(), &ids, now);
        }
        self.clusters
            .retain(|name, _| snap.clusters[name].config.outlier_detection.is_some());
        let clusters = &self.clusters;
        self.cluster_stats
            .retain(|name, _| clusters.contains_key(name));
        self.publish()
    }

    /// When the next sweep is due, over all clusters.
    pub fn next_due(&self) -> Option<Instant> {
        self.clusters.values().filter_map(|d| d.next_sweep()).min()
    }

    /// Clusters whose sweep is due.
    pub fn due(&self, now: Instant) -> Vec<String> {
        self.clusters
            .iter()
            .filter(|(_, d)| d.next_sweep().is_some_and(|at| at <= now))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Sweeps `due` with the counts collected from every shard. Returns the
    /// ejected set to push when it changed.
    pub fn sweep(
        &mut self,
        now: Instant,
        due: &[String],
        reports: &AHashMap<HostId, HostReport>,
    ) -> Option<Arc<EjectedSet>> {
        let mut state = self.rng;
        let mut rng = move || {
            // xorshift64*: the enforcement draws need no quality beyond this.
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
        };
        for name in due {
            let Some(d) = self.clusters.get_mut(name) else {
                continue;
            };
            let outcome = d.sweep(now, reports, &mut rng);
            self.stats.sweeps += 1;
            let per_cluster = self.cluster_stats.entry(name.clone()).or_default();
            count(&mut self.stats, per_cluster, &outcome, name);
        }
        self.rng = self.rng.wrapping_mul(6364136223846793005).wrapping_add(1);
        self.publish()
    }

    /// A checked host of `cluster` passed its active health check and its
    /// checks pass: its ejection ends at once when the cluster says so
    /// (`successful_active_health_check_uneject_host`). Returns the
    /// ejected set to push when it changed.
    pub fn uneject_after_check(&mut self, cluster: &str, id: HostId) -> Option<Arc<EjectedSet>> {
        let d = self.clusters.get_mut(cluster)?;
        if !d.uneject_after_check(id) {
            return None;
        }
        self.stats.unejected_by_check += 1;
        tracing::info!(
            cluster,
            host = id.0,
            "host returned from ejection: its active health check passed"
        );
        self.publish()
    }

    fn publish(&mut self) -> Option<Arc<EjectedSet>> {
        let ids = self.clusters.values().flat_map(|d| d.ejected());
        let next = EjectedSet::new(self.epoch + 1, ids);
        if next.iter().eq(self.current.iter()) {
            return None;
        }
        self.epoch += 1;
        self.current = Arc::new(next);
        Some(Arc::clone(&self.current))
    }

    /// The per-host state of every detector over `snap`'s hosts.
    pub fn view(&self, snap: &Snapshot) -> OutlierView {
        let mut hosts = AHashMap::new();
        for (name, d) in &self.clusters {
            let Some(c) = snap.cluster(name) else {
                continue;
            };
            for h in &c.hosts {
                if let Some(state) = d.host(h.id) {
                    hosts.insert(h.id, state.clone());
                }
            }
        }
        // Every cluster with a detector, counted or not: Envoy makes its
        // series with the detector.
        let clusters = self
            .clusters
            .keys()
            .map(|name| {
                let stats = self.cluster_stats.get(name).cloned().unwrap_or_default();
                (name.clone(), stats)
            })
            .collect();
        OutlierView {
            hosts,
            ejected_now: self.current.len(),
            stats: self.stats.clone(),
            clusters,
        }
    }
}

fn count(
    stats: &mut OutlierStats,
    per_cluster: &mut ClusterOutlierStats,
    outcome: &SweepOutcome,
    cluster: &str,
) {
    let under_cap = outcome.ejected.iter().chain(&outcome.not_enforced);
    for (_, reason) in under_cap.clone().chain(&outcome.overflow) {
        per_cluster.detected[reason.index()] += 1;
    }
    per_cluster.total_under_cap += under_cap
        .filter(|(_, r)| {
            matches!(
                r,
                EjectionReason::Consecutive5xx | EjectionReason::SuccessRate
            )
        })
        .count() as u64;
    per_cluster.overflow += outcome.overflow.len() as u64;
    for (id, reason) in &outcome.ejected {
        stats.enforced[reason.index()] += 1;
        per_cluster.enforced[reason.index()] += 1;
        tracing::info!(
            cluster,
            host = id.0,
            reason = reason.as_str(),
            "host ejected"
        );
    }
    // Gateway-wide, the cap's refusals are among those not enforced.
    for (_, reason) in outcome.not_enforced.iter().chain(&outcome.overflow) {
        stats.not_enforced[reason.index()] += 1;
    }
    stats.unejected += outcome.unejected.len() as u64;
    for id in &outcome.unejected {
        tracing::info!(cluster, host = id.0, "host returned from ejection");
    }
}
