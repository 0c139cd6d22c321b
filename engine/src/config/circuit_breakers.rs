//! `Cluster.circuit_breakers`: how much one cluster may hold at once
//! (connections, requests waiting for one, requests, retries, pools), with
//! Envoy's defaults. Data shards count shard-locally against their share.

/// Envoy's default `max_connections`, `max_pending_requests` and
/// `max_requests`.
pub const DEFAULT_CIRCUIT_LIMIT: u32 = 1024;
/// Envoy's default `max_retries`.
pub const DEFAULT_MAX_RETRIES: u32 = 3;

/// One priority's `thresholds`, Envoy's defaults filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CircuitThresholds {
    /// Upstream connections of the cluster (all hosts).
    pub max_connections: u32,
    /// Requests waiting for a connection with room.
    pub max_pending_requests: u32,
    /// Requests in flight.
    pub max_requests: u32,
    /// Retries in flight.
    pub max_retries: u32,
    /// Connection pools (one per host on a shard); `None`: no limit.
    pub max_connection_pools: Option<u32>,
    /// `retry_budget`: when set, retries in flight are bounded by a share
    /// of the requests in flight instead of `max_retries`.
    pub retry_budget: Option<RetryBudget>,
}

/// `retry_budget`: retries in flight may be `percent` of the requests
/// active and pending, and at least `min_concurrency`, so that retries
/// cannot multiply the load on a cluster in an outage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryBudget {
    /// `budget_percent` in hundredths of a percent (Envoy's default 20 %).
    pub basis_points: u32,
    /// `min_retry_concurrency` (Envoy's default 3).
    pub min_concurrency: u32,
}

impl RetryBudget {
    /// Retries that may be in flight with `active` requests active or
    /// pending.
    pub fn limit(&self, active: u32) -> u32 {
        let share = u64::from(active) * u64::from(self.basis_points) / 10_000;
        (share as u32).max(self.min_concurrency)
    }
}

impl Default for CircuitThresholds {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_CIRCUIT_LIMIT,
            max_pending_requests: DEFAULT_CIRCUIT_LIMIT,
            max_requests: DEFAULT_CIRCUIT_LIMIT,
            max_retries: DEFAULT_MAX_RETRIES,
            max_connection_pools: None,
            retry_budget: None,
        }
    }
}

impl CircuitThresholds {
    /// One data shard's share of each limit when `shards` shards count
    /// apart: the limit over the shard count, rounded up, so the shards
    /// together never hold more than the limit plus the shard count (and a
    /// limit of at least one leaves every shard at least one).
    pub fn per_shard(&self, shards: usize) -> CircuitThresholds {
        let n = shards.max(1) as u64;
        let share = |v: u32| -> u32 { (u64::from(v)).div_ceil(n) as u32 };
        CircuitThresholds {
            max_connections: share(self.max_connections),
            max_pending_requests: share(self.max_pending_requests),
            max_requests: share(self.max_requests),
            max_retries: share(self.max_retries),
            max_connection_pools: self.max_connection_pools.map(share),
            // The share of this shard's own requests; the floor shared.
            retry_budget: self.retry_budget.map(|b| RetryBudget {
                min_concurrency: share(b.min_concurrency),
                ..b
            }),
        }
    }
}

/// `circuit_breakers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CircuitBreakers {
    /// Priority `DEFAULT`'s thresholds (routes are all `DEFAULT`).
    pub default: CircuitThresholds,
    /// Priority `HIGH`'s, kept for routes of that priority.
    pub high: CircuitThresholds,
    /// `per_host_thresholds` `max_connections`: connections to one host.
    pub per_host_max_connections: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_round_up_and_never_reach_zero() {
        let t = CircuitThresholds {
            max_connections: 10,
            max_pending_requests: 1,
            max_requests: 1024,
            max_retries: 0,
            max_connection_pools: Some(5),
            retry_budget: None,
        };
        let s = t.per_shard(4);
        assert_eq!(s.max_connections, 3, "4 shards × 3 ≤ 10 + 4");
        assert_eq!(s.max_pending_requests, 1);
        assert_eq!(s.max_requests, 256);
        assert_eq!(s.max_retries, 0, "0 stays 0: no retries");
        assert_eq!(s.max_connection_pools, Some(2));
        assert_eq!(t.per_shard(1), t);
        assert_eq!(t.per_shard(0), t);
    }

    #[test]
    fn a_retry_budget_is_a_share_of_the_requests_with_a_floor() {
        let b = RetryBudget {
            basis_points: 2_000,
            min_concurrency: 3,
        };
        assert_eq!(b.limit(0), 3);
        assert_eq!(b.limit(10), 3);
        assert_eq!(b.limit(100), 20);
        assert_eq!(b.limit(1001), 200);
    }
}
