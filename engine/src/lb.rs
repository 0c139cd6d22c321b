//! Load-balancing policies over a cluster's routable hosts.
//!
//! State is shard-local: each data shard passes its own [`RoundRobinState`],
//! so picks never touch memory shared with another core.

use crate::snapshot::{ClusterSnapshot, Host};

/// Shard-local round-robin state of one cluster.
#[derive(Debug, Default, Clone)]
pub struct RoundRobinState {
    cursor: u32,
    /// Smooth weighted round robin "current weight" per host index; only used
    /// when weights differ. Reset when the host list changes length.
    current: Vec<i64>,
}

/// Picks the next host by round robin; smooth weighted (as nginx and Envoy's
/// EDF scheduler produce: interleaved, proportional) when weights differ.
/// Returns `None` when the cluster has no routable host.
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
    if state.current.len() != routable.len() {
        state.current = vec![0; routable.len()];
    }
    let mut total: i64 = 0;
    let mut best = 0;
    for (slot, &hi) in routable.iter().enumerate() {
        let w = i64::from(cluster.hosts[hi as usize].weight);
        total += w;
        state.current[slot] += w;
        if state.current[slot] > state.current[best] {
            best = slot;
        }
    }
    state.current[best] -= total;
    Some(&cluster.hosts[routable[best] as usize])
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
            least_request: None,
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
    fn weighted_is_smooth_and_proportional() {
        use HealthStatus::*;
        let c = cluster(&[(1, 5, Healthy), (2, 1, Healthy), (3, 1, Healthy)]);
        // nginx's classic example: a a b a c a a
        assert_eq!(ports(&c, 7), vec![1, 1, 2, 1, 3, 1, 1]);
    }

    #[test]
    fn no_routable_host() {
        let c = cluster(&[(1, 1, HealthStatus::Draining)]);
        assert!(pick_round_robin(&c, &mut RoundRobinState::default()).is_none());
    }
}
