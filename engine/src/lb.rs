//! Load-balancing policies over a cluster's routable hosts.
//!
//! State is shard-local: each data shard passes its own [`RoundRobinState`],
//! so picks never touch memory shared with another core.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::snapshot::{ClusterSnapshot, Host};

/// Virtual time one pick of a weight-1 host advances its deadline by;
/// a host of weight `w` advances by `EDF_SCALE / w`. u128 deadlines never
/// overflow in practice (2^88 picks of a weight-1 host).
const EDF_SCALE: u128 = 1 << 40;

/// Shard-local round-robin state of one cluster.
#[derive(Debug, Default, Clone)]
pub struct RoundRobinState {
    cursor: u32,
    /// Earliest-deadline-first schedule over `routable` slots, used when
    /// weights differ: `(deadline, slot)`, the smallest popped first (ties
    /// by slot, so the order is deterministic).
    edf: BinaryHeap<Reverse<(u128, u32)>>,
    /// Which cluster snapshot `edf` was built for (by address, checked with
    /// the host count): a new snapshot of the cluster restarts the schedule.
    built_for: usize,
}

/// Picks the next host by round robin; when weights differ, by Envoy's
/// earliest-deadline-first scheduler (interleaved and proportional to the
/// weights) in O(log hosts). Returns `None` when the cluster has no
/// routable host.
pub fn pick_round_robin<'a>(
    cluster: &'a ClusterSnapshot,
    state: &mut RoundRobinState,
) -> Option<&'a Host> {
    let routable = &cluster.routable;
    match routable.len() {
        0 => return None,
        1 => return Some(&cluster.hosts[routable[0] as usize]),
        _ => {}
    }
    if !cluster.weighted {
        // Equal weights: O(1) cursor.
        let i = state.cursor as usize % routable.len();
        state.cursor = state.cursor.wrapping_add(1);
        return Some(&cluster.hosts[routable[i] as usize]);
    }
    let id = cluster as *const ClusterSnapshot as usize;
    if state.built_for != id || state.edf.len() != routable.len() {
        state.built_for = id;
        state.edf = (0..routable.len() as u32)
            .map(|slot| Reverse((step(cluster, slot), slot)))
            .collect();
    }
    let mut top = state.edf.peek_mut()?;
    let Reverse((deadline, slot)) = *top;
    // Re-queue in place: one sift instead of a pop and a push.
    *top = Reverse((deadline + step(cluster, slot), slot));
    drop(top);
    Some(&cluster.hosts[routable[slot as usize] as usize])
}

fn step(cluster: &ClusterSnapshot, slot: u32) -> u128 {
    let host = &cluster.hosts[cluster.routable[slot as usize] as usize];
    EDF_SCALE / u128::from(host.weight.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::*;
    use crate::host::HostRegistry;
    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::time::Duration;

    fn cluster(weights: &[(u16, u32, HealthStatus)]) -> ClusterSnapshot {
        let c = Cluster {
            name: "c".into(),
            connect_timeout: Duration::from_secs(1),
            lb_policy: LbPolicy::RoundRobin,
            endpoints: weights
                .iter()
                .map(|(p, w, h)| Endpoint {
                    address: SocketAddr::from(([127, 0, 0, 1], *p)),
                    weight: *w,
                    health: *h,
                })
                .collect(),
            eds: None,
            http2: UpstreamHttp2::default(),
            outlier_detection: None,
            common_lb: Default::default(),
        };
        ClusterSnapshot::build(Arc::new(c), &mut HostRegistry::new())
    }

    fn ports(c: &ClusterSnapshot, n: usize) -> Vec<u16> {
        let mut st = RoundRobinState::default();
        (0..n)
            .map(|_| pick_round_robin(c, &mut st).unwrap().address.port())
            .collect()
    }

    #[test]
    fn equal_weights_rotate_and_skip_unroutable() {
        use HealthStatus::*;
        let c = cluster(&[
            (1, 1, Healthy),
            (2, 1, Draining),
            (3, 1, Unknown),
            (4, 1, Unhealthy),
        ]);
        assert_eq!(ports(&c, 4), vec![1, 3, 1, 3]);
    }

    #[test]
    fn weighted_is_interleaved_and_proportional() {
        use HealthStatus::*;
        let c = cluster(&[(1, 5, Healthy), (2, 1, Healthy), (3, 1, Healthy)]);
        // Deadlines 1/5, 2/5, … for host 1 and 1 for hosts 2 and 3: the
        // light hosts come after host 1's fifth pick, not in a burst.
        assert_eq!(ports(&c, 7), vec![1, 1, 1, 1, 1, 2, 3]);
        let many = ports(&c, 7000);
        for (port, want) in [(1, 5000), (2, 1000), (3, 1000)] {
            assert_eq!(many.iter().filter(|p| **p == port).count(), want);
        }
        // Never more than 5 picks of host 1 in a row once it runs steady.
        let longest = many.split(|p| *p != 1).map(<[u16]>::len).max().unwrap();
        assert!(longest <= 5, "{longest}");
    }

    #[test]
    fn a_new_snapshot_restarts_the_schedule() {
        use HealthStatus::*;
        let a = cluster(&[(1, 3, Healthy), (2, 1, Healthy)]);
        let b = cluster(&[(1, 1, Healthy), (2, 3, Healthy)]);
        let mut st = RoundRobinState::default();
        for _ in 0..5 {
            pick_round_robin(&a, &mut st);
        }
        let picks: Vec<u16> = (0..4)
            .map(|_| pick_round_robin(&b, &mut st).unwrap().address.port())
            .collect();
        assert_eq!(picks.iter().filter(|p| **p == 2).count(), 3, "{picks:?}");
    }

    #[test]
    fn no_routable_host() {
        let c = cluster(&[(1, 1, HealthStatus::Draining)]);
        assert!(pick_round_robin(&c, &mut RoundRobinState::default()).is_none());
    }
}
