//! Priorities (Envoy's `LoadBalancerBase`): a cluster's hosts by their
//! endpoints' `priority`, traffic spilling from a priority to the next as
//! its health drops. Each priority is a `HostSetLb` of its own (the
//! policy's state per priority, as Envoy's per-priority host sets).
//!
//! Health of priority `p`: `min(100, overprovisioning × healthy_p /
//! hosts_p)` (draining hosts left out; overprovisioning is the load
//! assignment's `overprovisioning_factor`, 140 by default). Loads go in priority order, each up to its health scaled by
//! `100 / min(100, Σ health)`, the rounding left to the first available
//! priority. With no healthy host anywhere, loads follow host counts and
//! each priority may panic; while the priorities together are fully
//! available none panics.

use super::{HostSetLb, Pick};
use crate::config::LbPolicy;
use crate::ejected::EjectedSet;
use crate::host::HostId;
use crate::snapshot::ClusterSnapshot;

/// Each priority's share of traffic in percent (summing to 100 when any
/// host exists), from `(healthy, hosts)` per priority in priority order,
/// and whether the priorities together are fully available (then no
/// priority may panic). `overprovisioning` is the factor in percent.
pub fn priority_loads(counts: &[(u64, u64)], overprovisioning: u32) -> (Vec<u32>, bool) {
    let factor = u64::from(overprovisioning);
    let health: Vec<u64> = counts
        .iter()
        .map(|&(healthy, total)| {
            (factor * healthy)
                .checked_div(total)
                .map_or(0, |h| h.min(100))
        })
        .collect();
    let available = health.iter().sum::<u64>().min(100);
    let mut loads = vec![0u32; counts.len()];
    if available == 0 {
        // Total panic: by host count.
        let hosts: u64 = counts.iter().map(|c| c.1).sum();
        if hosts == 0 {
            return (loads, false);
        }
        let mut left = 100u64;
        for (l, c) in loads.iter_mut().zip(counts) {
            let share = (100 * c.1 / hosts).min(left);
            *l = share as u32;
            left -= share;
        }
        if let Some(first) = counts.iter().position(|c| c.1 > 0) {
            loads[first] += left as u32;
        }
        return (loads, false);
    }
    let mut left = 100u64;
    for (l, h) in loads.iter_mut().zip(&health) {
        let share = (h * 100 / available).min(left);
        *l = share as u32;
        left -= share;
    }
    if let Some(first) = health.iter().position(|h| *h > 0) {
        loads[first] += left as u32;
    }
    (loads, available == 100)
}

/// Shard-local balancing state of one cluster: its priorities' loads and
/// one `HostSetLb` per priority present, rebuilt lazily when the
/// snapshot or the ejections change (see the [module docs](super)).
#[derive(Debug, Default)]
pub struct ClusterLb {
    /// `generation` of the snapshot the loads were built for (0: none).
    generation: u64,
    epoch: u64,
    /// One per distinct priority, highest (0) first.
    sets: Vec<HostSetLb>,
    /// With `locality_weighted_lb_config`, parallel to `sets`: each
    /// locality's set and the schedule over their effective weights,
    /// unless the priority is in panic (then its whole set serves).
    localities: Vec<Localities>,
    /// Cumulative loads, parallel to `sets`: set `i` takes `r % 100` below
    /// `cumulative[i]` and at or above the previous bound.
    cumulative: Vec<u32>,
    allow_panic: bool,
}

impl ClusterLb {
    /// Picks a host by `cluster.config.lb_policy`. `ejected` is the shard's
    /// current outlier-ejection set (its `epoch` changes whenever the set
    /// does); `active(id)` returns this shard's active request count for a
    /// host (for least request); `rng()` returns a uniform u64. Returns None
    /// when no host can be chosen at all.
    ///
    /// See the [module docs](super) for the host classes, the panic rule and
    /// each policy. No allocation once the lists are built.
    #[inline]
    pub fn pick<'a>(
        &mut self,
        cluster: &'a ClusterSnapshot,
        ejected: &EjectedSet,
        active: impl Fn(HostId) -> u32,
        rng: &mut impl FnMut() -> u64,
    ) -> Option<Pick<'a>> {
        self.pick_by(
            cluster,
            cluster.config.lb_policy,
            ejected,
            &active,
            rng,
            None,
        )
    }

    /// [`ClusterLb::pick`] with the request's hash, which `RING_HASH` and
    /// `MAGLEV` look up (without one they use a random draw, as Envoy
    /// does) and which chooses the priority for them; the other policies
    /// ignore it.
    #[inline]
    pub fn pick_hashed<'a>(
        &mut self,
        cluster: &'a ClusterSnapshot,
        ejected: &EjectedSet,
        active: impl Fn(HostId) -> u32,
        rng: &mut impl FnMut() -> u64,
        hash: Option<u64>,
    ) -> Option<Pick<'a>> {
        self.pick_by(
            cluster,
            cluster.config.lb_policy,
            ejected,
            &active,
            rng,
            hash,
        )
    }

    pub(crate) fn pick_by<'a, A, R>(
        &mut self,
        cluster: &'a ClusterSnapshot,
        policy: LbPolicy,
        ejected: &EjectedSet,
        active: &A,
        rng: &mut R,
        hash: Option<u64>,
    ) -> Option<Pick<'a>>
    where
        A: Fn(HostId) -> u32,
        R: FnMut() -> u64,
    {
        if !(self.built_for(cluster) && self.epoch == ejected.epoch) {
            self.rebuild(cluster, ejected);
        }
        let set = match self.sets.len() {
            0 => return None,
            // One priority (the usual case): no draw.
            1 => 0,
            _ => {
                let r = (hash.unwrap_or_else(&mut *rng) % 100) as u32;
                self.cumulative
                    .iter()
                    .position(|bound| r < *bound)
                    .unwrap_or(0)
            }
        };
        let allow_panic = self.allow_panic;
        if let Some(loc) = self.localities.get_mut(set).filter(|l| !l.sets.is_empty()) {
            if !loc.started {
                // A random start, as Envoy's scheduler makes a random
                // number of picks when it is made: shards and gateways
                // built at the same moment do not all begin alike.
                loc.started = true;
                loc.edf.randomize(&mut *rng);
            }
            let i = loc.edf.next(|_, base| u128::from(base));
            if let Some(l) = i.and_then(|i| loc.sets.get_mut(i as usize)) {
                return l.pick_by(cluster, policy, ejected, active, rng, hash, false);
            }
        }
        self.sets[set].pick_by(cluster, policy, ejected, active, rng, hash, allow_panic)
    }

    fn built_for(&self, cluster: &ClusterSnapshot) -> bool {
        self.generation == cluster.generation
    }

    /// The priorities present, their health and loads; each set's own
    /// candidates are rebuilt by its next pick.
    fn rebuild(&mut self, cluster: &ClusterSnapshot, ejected: &EjectedSet) {
        self.epoch = ejected.epoch;
        self.generation = cluster.generation;
        // (priority, healthy, hosts), by priority.
        let mut counts: Vec<(u32, u64, u64)> = Vec::new();
        // ((priority, locality), weight, healthy, hosts), by key.
        let weighted = cluster.config.common_lb.locality_weighted;
        let mut per_locality: Vec<((u32, u32), u32, u64, u64)> = Vec::new();
        for h in &cluster.hosts {
            if h.excluded() {
                continue;
            }
            let healthy = u64::from(h.health.is_routable() && !ejected.contains(h.id));
            let priority = h.placement.priority;
            match counts.binary_search_by_key(&priority, |c| c.0) {
                Ok(i) => {
                    counts[i].1 += healthy;
                    counts[i].2 += 1;
                }
                Err(i) => counts.insert(i, (priority, healthy, 1)),
            }
            if weighted {
                let key = (priority, h.placement.locality);
                match per_locality.binary_search_by_key(&key, |c| c.0) {
                    Ok(i) => {
                        per_locality[i].2 += healthy;
                        per_locality[i].3 += 1;
                    }
                    Err(i) => {
                        per_locality.insert(i, (key, h.placement.locality_weight, healthy, 1))
                    }
                }
            }
        }
        // Sets are kept by priority: a set's cursor and schedule survive
        // a rebuild that keeps its priority.
        let mut old = std::mem::take(&mut self.sets);
        self.sets = counts
            .iter()
            .map(|c| match old.iter().position(|s| s.priority() == c.0) {
                Some(i) => old.swap_remove(i),
                None => HostSetLb::new(c.0, None),
            })
            .collect();
        let pairs: Vec<(u64, u64)> = counts.iter().map(|c| (c.1, c.2)).collect();
        let factor = cluster.config.common_lb.overprovisioning_factor;
        let (loads, full) = priority_loads(&pairs, factor);
        self.allow_panic = !full;
        let mut old_localities = std::mem::take(&mut self.localities);
        if weighted {
            let threshold = u64::from(cluster.config.common_lb.healthy_panic_threshold.min(100));
            for &(priority, healthy, total) in &counts {
                // The previous build of this priority: its host sets are
                // reused, and its schedule too when the weights are the
                // same (a rebuild for an ejection elsewhere must not
                // restart it: a restart favours its first picks).
                let mut old = old_localities
                    .iter_mut()
                    .find(|l| l.priority == priority)
                    .map(std::mem::take)
                    .unwrap_or_default();
                let mut loc = Localities {
                    priority,
                    ..Localities::default()
                };
                // A priority in panic serves from all its hosts, as Envoy.
                let panic = self.allow_panic && threshold > 0 && 100 * healthy < threshold * total;
                let mut effective_weights = Vec::new();
                for &((_, l), w, h, n) in per_locality.iter().filter(|c| c.0 .0 == priority) {
                    let effective = u64::from(w) * (u64::from(factor) * h / n).min(100);
                    if effective == 0 || panic {
                        continue;
                    }
                    effective_weights.push(effective);
                    loc.sets.push(
                        match old.sets.iter().position(|s| s.locality() == Some(l)) {
                            Some(i) => old.sets.swap_remove(i),
                            None => HostSetLb::new(priority, Some(l)),
                        },
                    );
                }
                loc.weights = schedule_weights(&effective_weights);
                loc.ids = loc.sets.iter().map(HostSetLb::locality).collect();
                if old.started && old.weights == loc.weights && old.ids == loc.ids {
                    loc.edf = std::mem::take(&mut old.edf);
                    loc.started = true;
                } else {
                    loc.edf
                        .rebuild(loc.weights.iter().copied(), |_, base| u128::from(base));
                }
                self.localities.push(loc);
            }
        }
        old_localities.clear();
        self.cumulative.clear();
        let mut sum = 0;
        for l in loads {
            sum += l;
            self.cumulative.push(sum);
        }
    }
}

/// One priority's localities under locality-weighted balancing: drawn by
/// Envoy's earliest-deadline-first schedule over their effective weights
/// (interleaved in proportion, not random draws).
#[derive(Debug, Default)]
struct Localities {
    priority: u32,
    /// The localities with a positive effective weight.
    sets: Vec<HostSetLb>,
    edf: super::edf::Edf,
    /// The schedule's weights and the localities of `sets`, as built.
    weights: Vec<u32>,
    ids: Vec<Option<u32>>,
    /// Whether the schedule had its random start.
    started: bool,
}

/// Effective locality weights as the schedule takes them: scaled down
/// together when the largest is above 2^24, so the schedule's steps
/// (`EDF_SCALE / weight`) keep their precision and no weight is clipped
/// alone; none below 1.
fn schedule_weights(effective: &[u64]) -> Vec<u32> {
    let max = effective.iter().copied().max().unwrap_or(0);
    let scale = (max >> 24) + 1;
    effective
        .iter()
        .map(|w| u32::try_from(w / scale).unwrap_or(u32::MAX).max(1))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::*;
    use crate::host::HostRegistry;
    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::time::Duration;

    /// Host `i` on port `i + 1`, with `(priority, health)`.
    fn cluster(hosts: &[(u32, HealthStatus)], policy: LbPolicy) -> ClusterSnapshot {
        let c = Cluster {
            name: "c".into(),
            connect_timeout: Duration::from_secs(1),
            lb_policy: policy,
            endpoints: hosts
                .iter()
                .enumerate()
                .map(|(i, (p, h))| Endpoint {
                    address: SocketAddr::from(([127, 0, 0, 1], i as u16 + 1)),
                    weight: 1,
                    health: *h,
                    hostname: String::new(),
                    check: Default::default(),
                    placement: Placement {
                        priority: *p,
                        ..Default::default()
                    },
                })
                .collect(),
            eds: None,
            dns: None,
            http2: UpstreamHttp2::default(),
            upstream: Default::default(),
            outlier_detection: None,
            per_connection_buffer_limit_bytes: crate::DEFAULT_PER_CONNECTION_BUFFER_LIMIT,
            health_check: None,
            circuit_breakers: Default::default(),
            per_endpoint_stats: false,
            common_lb: CommonLb::default(),
        };
        ClusterSnapshot::build(Arc::new(c), &mut HostRegistry::new())
    }

    /// Picks per port over 1,000 draws of a counting rng.
    fn spread(c: &ClusterSnapshot, ejected: &EjectedSet) -> Vec<u32> {
        let mut lb = ClusterLb::default();
        let mut n = vec![0u32; c.hosts.len()];
        let mut x = 0u64;
        let mut rng = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            x
        };
        for _ in 0..1000 {
            let p = lb.pick(c, ejected, |_| 0, &mut rng).unwrap();
            n[p.host.address.port() as usize - 1] += 1;
        }
        n
    }

    /// `hosts`' cluster with an active health check configured.
    fn checked_config(hosts: &[(u32, HealthStatus)]) -> Arc<Cluster> {
        let mut config = (*cluster(hosts, LbPolicy::RoundRobin).config).clone();
        config.health_check = Some(Arc::new(crate::active_health::tests::hc()));
        Arc::new(config)
    }

    /// Each endpoint of `config`'s verdict, by its index.
    fn verdicts_by_index(
        config: &Cluster,
        verdict: impl Fn(usize) -> crate::active_health::Verdict,
    ) -> crate::active_health::ClusterVerdicts {
        crate::active_health::ClusterVerdicts {
            version: 1,
            hosts: config
                .endpoints
                .iter()
                .enumerate()
                .map(|(i, e)| (e.address, verdict(i)))
                .collect(),
        }
    }

    #[test]
    fn a_new_snapshot_where_the_old_one_was_is_still_new() {
        // A verdict change rebuilds the snapshot with the same config and
        // host count, and the allocator may put it where the old one was
        // (here: the same variable). The balancer must see the change.
        use crate::active_health::Verdict;
        use HealthStatus::*;
        let config = checked_config(&[(0, Healthy), (0, Healthy), (1, Healthy)]);
        let mut registry = HostRegistry::new();
        let verdicts = |healthy: [bool; 3]| {
            verdicts_by_index(&config, |i| Verdict {
                healthy: healthy[i],
                degraded: false,
                excluded: false,
            })
        };
        let none = EjectedSet::default();
        let mut slot = ClusterSnapshot::build_checked(
            Arc::clone(&config),
            &mut registry,
            Some(&verdicts([true, true, true])),
        );
        let mut lb = ClusterLb::default();
        let mut rng = || 0;
        assert_eq!(
            lb.pick(&slot, &none, |_| 0, &mut rng)
                .unwrap()
                .host
                .address
                .port(),
            1
        );
        let before = &slot as *const ClusterSnapshot;
        slot = ClusterSnapshot::build_checked(
            Arc::clone(&config),
            &mut registry,
            Some(&verdicts([false, false, true])),
        );
        assert_eq!(before, &slot as *const ClusterSnapshot);
        for _ in 0..4 {
            let p = lb.pick(&slot, &none, |_| 0, &mut rng).unwrap();
            assert_eq!(p.host.address.port(), 3, "P0 failed: all to P1");
        }
    }

    #[test]
    fn hosts_excluded_by_the_immediate_fail_header_leave_their_priority() {
        // P0: one passing host and two failed, P1: one host. Failed
        // hosts count against P0 (1 of 3: it spills); excluded ones are
        // left out as Envoy leaves them (1 of 1: it keeps everything).
        use crate::active_health::Verdict;
        use HealthStatus::*;
        let config = checked_config(&[(0, Healthy), (0, Healthy), (0, Healthy), (1, Healthy)]);
        let p1_share = |excluded: bool| {
            let checks = verdicts_by_index(&config, |i| Verdict {
                healthy: i == 0 || i == 3,
                degraded: false,
                excluded: excluded && (i == 1 || i == 2),
            });
            let c = ClusterSnapshot::build_checked(
                Arc::clone(&config),
                &mut HostRegistry::new(),
                Some(&checks),
            );
            spread(&c, &EjectedSet::default())[3]
        };
        assert!(p1_share(false) > 400, "1 of 3 healthy: P1 takes over half");
        assert_eq!(p1_share(true), 0);
    }

    #[test]
    fn the_clusters_overprovisioning_factor_moves_the_spill() {
        use HealthStatus::*;
        let none = EjectedSet::default();
        // P0: 4 of 5 healthy (80 %). At Envoy's 140 it keeps everything.
        let hosts = [
            (0, Healthy),
            (0, Healthy),
            (0, Healthy),
            (0, Healthy),
            (0, Unhealthy),
            (1, Healthy),
        ];
        let c = cluster(&hosts, LbPolicy::RoundRobin);
        assert_eq!(spread(&c, &none)[5], 0);
        // At 100 it keeps 80 % and P1 takes 20 %.
        let mut config = (*c.config).clone();
        config.common_lb.overprovisioning_factor = 100;
        let c = ClusterSnapshot::build(Arc::new(config), &mut HostRegistry::new());
        let p1 = spread(&c, &none)[5];
        assert!((180..=220).contains(&p1), "{p1} of 1000");
    }

    #[test]
    fn traffic_spills_to_the_next_priority_as_health_drops() {
        use HealthStatus::*;
        let none = EjectedSet::default();
        for policy in [
            LbPolicy::RoundRobin,
            LbPolicy::Random,
            LbPolicy::Maglev(Default::default()),
        ] {
            // All of P0 healthy: P1 idles.
            let c = cluster(
                &[(0, Healthy), (0, Healthy), (1, Healthy), (1, Healthy)],
                policy,
            );
            let n = spread(&c, &none);
            assert_eq!(n[2] + n[3], 0, "{policy:?} {n:?}");
            // Half of P0: 70 % stays on its healthy host, 30 % to P1.
            let c = cluster(
                &[(0, Healthy), (0, Unhealthy), (1, Healthy), (1, Healthy)],
                policy,
            );
            let n = spread(&c, &none);
            assert_eq!(n[1], 0, "{policy:?}: the unhealthy host is not in panic");
            let p1 = n[2] + n[3];
            assert!((250..=350).contains(&p1), "{policy:?} {n:?}");
            // Outlier ejection counts as unhealthy too.
            let c = cluster(&[(0, Healthy), (0, Healthy), (1, Healthy)], policy);
            let ejected = EjectedSet::new(1, [c.hosts[0].id, c.hosts[1].id]);
            let n = spread(&c, &ejected);
            assert_eq!(n[2], 1000, "{policy:?} {n:?}");
        }
    }

    /// Locality-weighted, round robin: locality 0 (weight 1) holds host 1,
    /// locality 1 (weight 3) hosts 2 and 3, with `health`.
    fn one_and_three(health: [HealthStatus; 3]) -> ClusterSnapshot {
        let mut c = (*cluster(
            &[(0, health[0]), (0, health[1]), (0, health[2])],
            LbPolicy::RoundRobin,
        )
        .config)
            .clone();
        c.common_lb.locality_weighted = true;
        for (i, e) in c.endpoints.iter_mut().enumerate() {
            e.placement.locality = u32::from(i > 0);
            e.placement.locality_weight = if i > 0 { 3 } else { 1 };
        }
        ClusterSnapshot::build(Arc::new(c), &mut HostRegistry::new())
    }

    #[test]
    fn localities_share_a_priority_by_weight_and_health() {
        use HealthStatus::*;
        let build = one_and_three;
        let none = EjectedSet::default();
        // Envoy's EDF schedule: one pick in four to locality 0, exactly,
        // in any 1,000 picks (whatever the random start).
        let n = spread(&build([Healthy, Healthy, Healthy]), &none);
        assert_eq!(n[0], 250, "25 % to locality 0: {n:?}");
        assert!(n[1].abs_diff(n[2]) <= 20, "round robin within: {n:?}");
        // Half of locality 1 down: its weight × min(1, 1.4 × ½) = 2.1 of
        // 3.1, so locality 0 gets 100 of every 310 picks.
        let n = spread(&build([Healthy, Healthy, Unhealthy]), &none);
        assert_eq!(n[2], 0);
        assert!((322..=323).contains(&n[0]), "{n:?}");
    }

    #[test]
    fn the_locality_schedule_survives_rebuilds_that_change_nothing_of_it() {
        // A rebuild for every pick (a new ejected-set epoch each time, as
        // ejections in other clusters bring): the schedule is kept, so
        // locality 0 (weight 1 of 4) still gets exactly its quarter.
        use HealthStatus::*;
        let c = one_and_three([Healthy, Healthy, Healthy]);
        let mut lb = ClusterLb::default();
        let mut x = 7u64;
        let mut rng = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            x >> 11
        };
        let mut first = 0;
        for epoch in 0..400 {
            let set = EjectedSet::new(epoch, []);
            let p = lb.pick(&c, &set, |_| 0, &mut rng).unwrap();
            first += u32::from(p.host.address.port() == 1);
        }
        assert_eq!(first, 100);
    }

    #[test]
    fn huge_locality_weights_are_scaled_together() {
        let w = schedule_weights(&[50_000_000 * 100, 100_000_000 * 100, 1]);
        assert_eq!(w[1] / w[0], 2, "{w:?}");
        assert_eq!(w[2], 1);
        assert_eq!(
            schedule_weights(&[3, 100]),
            [3, 100],
            "small ones as they are"
        );
    }

    #[test]
    fn shards_take_the_snapshots_hash_table_unless_their_hosts_differ() {
        use HealthStatus::*;
        let c = cluster(
            &[(0, Healthy), (0, Healthy), (0, Healthy), (0, Unhealthy)],
            LbPolicy::Maglev(Default::default()),
        );
        assert_eq!(c.hash_tables.len(), 1);
        assert_eq!(c.hash_tables[0].candidates, [0, 1, 2]);
        let prebuilt = &c.hash_tables[0].table;
        let mut lb = ClusterLb::default();
        let none = EjectedSet::default();
        lb.pick_hashed(&c, &none, |_| 0, &mut || 0, Some(42))
            .unwrap();
        let took = lb.sets[0].table.as_ref().unwrap();
        assert!(Arc::ptr_eq(took, prebuilt), "no build on the shard");
        // An ejection changes the candidates: the shard builds its own,
        // and no key goes to the ejected host.
        let ejected = EjectedSet::new(1, [c.hosts[1].id]);
        for k in 0..200u64 {
            let p = lb
                .pick_hashed(&c, &ejected, |_| 0, &mut || 0, Some(k * 7919))
                .unwrap();
            assert_ne!(p.host.id, c.hosts[1].id);
        }
        assert!(!Arc::ptr_eq(lb.sets[0].table.as_ref().unwrap(), prebuilt));
        // Back to no ejection: the snapshot's table again.
        lb.pick_hashed(&c, &EjectedSet::new(2, []), |_| 0, &mut || 0, Some(1))
            .unwrap();
        assert!(Arc::ptr_eq(lb.sets[0].table.as_ref().unwrap(), prebuilt));
    }

    #[test]
    fn loads_spill_as_envoys_priority_load_formula() {
        // Envoy's docs: P0 at 100 % → all to P0; healthy 80 % of P0 →
        // 140 × 0.8 = 112 → still all to P0.
        assert_eq!(
            priority_loads(&[(10, 10), (10, 10)], 140),
            (vec![100, 0], true)
        );
        assert_eq!(
            priority_loads(&[(8, 10), (10, 10)], 140),
            (vec![100, 0], true)
        );
        // 50 % healthy: 70 to P0, 30 to P1.
        assert_eq!(
            priority_loads(&[(5, 10), (10, 10)], 140),
            (vec![70, 30], true)
        );
        // 20 % and 20 %: 28 + 28 = 56 available, scaled to 100.
        assert_eq!(
            priority_loads(&[(2, 10), (2, 10)], 140),
            (vec![50, 50], false)
        );
        // Three levels: P0 at 40 % (56), P1 at 20 % (28), P2 fully (100):
        // 56, 28, then 16.
        assert_eq!(
            priority_loads(&[(4, 10), (2, 10), (10, 10)], 140),
            (vec![56, 28, 16], true)
        );
        // An empty priority takes nothing and is skipped.
        assert_eq!(priority_loads(&[(0, 0), (3, 3)], 140), (vec![0, 100], true));
    }

    #[test]
    fn with_nothing_healthy_loads_follow_host_counts() {
        assert_eq!(
            priority_loads(&[(0, 3), (0, 1)], 140),
            (vec![75, 25], false)
        );
        assert_eq!(
            priority_loads(&[(0, 1), (0, 2)], 140),
            (vec![34, 66], false)
        );
        assert_eq!(priority_loads(&[], 140), (vec![], false));
    }

    #[test]
    fn the_assignments_overprovisioning_factor_scales_health() {
        // 100: no headroom, P0 at 80 % keeps 80.
        assert_eq!(
            priority_loads(&[(8, 10), (10, 10)], 100),
            (vec![80, 20], true)
        );
        // 200: P0 at 50 % still counts as fully available.
        assert_eq!(
            priority_loads(&[(5, 10), (10, 10)], 200),
            (vec![100, 0], true)
        );
        // 200: P0 at 30 % is 60.
        assert_eq!(
            priority_loads(&[(3, 10), (10, 10)], 200),
            (vec![60, 40], true)
        );
    }
}
