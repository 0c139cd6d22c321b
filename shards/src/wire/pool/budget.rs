//! A cluster's circuit breakers on one shard (`circuit_breakers`): what its
//! streams and connections hold now against this shard's share of each
//! threshold. Shard-local cells, no atomics: the shards together never hold
//! more than a limit plus the shard count (see `CircuitThresholds::per_shard`).

use std::cell::Cell;

use engine::{CircuitThresholds, Cluster};

/// One cluster's counts and limits on one shard, shared by its pools.
#[derive(Debug)]
pub struct Budget {
    limits: Cell<CircuitThresholds>,
    per_host_connections: Cell<Option<u32>>,
    requests: Cell<u32>,
    pending: Cell<u32>,
    connections: Cell<u32>,
    pools: Cell<u32>,
    retries: Cell<u32>,
}

/// Takes one unit of `held` if it stays within `limit`.
fn take(held: &Cell<u32>, limit: u32) -> bool {
    let n = held.get();
    if n >= limit {
        return false;
    }
    held.set(n + 1);
    true
}

fn give(held: &Cell<u32>, n: u32) {
    held.set(held.get().saturating_sub(n));
}

impl Budget {
    pub fn new(cluster: &Cluster, shards: usize) -> Self {
        let b = Self {
            limits: Cell::new(CircuitThresholds::default()),
            per_host_connections: Cell::new(None),
            requests: Cell::new(0),
            pending: Cell::new(0),
            connections: Cell::new(0),
            pools: Cell::new(0),
            retries: Cell::new(0),
        };
        b.set_limits(cluster, shards);
        b
    }

    /// Follows a new config of the cluster: what is held stays counted.
    pub fn set_limits(&self, cluster: &Cluster, shards: usize) {
        let cb = &cluster.circuit_breakers;
        self.limits.set(cb.default.per_shard(shards));
        self.per_host_connections.set(
            cb.per_host_max_connections
                .map(|m| (u64::from(m).div_ceil(shards.max(1) as u64)) as u32),
        );
    }

    pub fn try_request(&self) -> bool {
        take(&self.requests, self.limits.get().max_requests)
    }
    pub fn end_request(&self) {
        give(&self.requests, 1);
    }
    pub fn try_pending(&self) -> bool {
        take(&self.pending, self.limits.get().max_pending_requests)
    }
    pub fn end_pending(&self, n: u32) {
        give(&self.pending, n);
    }
    pub fn try_connection(&self) -> bool {
        take(&self.connections, self.limits.get().max_connections)
    }
    pub fn end_connection(&self) {
        give(&self.connections, 1);
    }
    pub fn try_pool(&self) -> bool {
        take(
            &self.pools,
            self.limits.get().max_connection_pools.unwrap_or(u32::MAX),
        )
    }
    pub fn end_pool(&self) {
        give(&self.pools, 1);
    }
    pub fn try_retry(&self) -> bool {
        let limits = self.limits.get();
        let limit = match limits.retry_budget {
            // A share of what this shard has in flight for the cluster.
            Some(b) => b.limit(self.requests.get() + self.pending.get()),
            None => limits.max_retries,
        };
        take(&self.retries, limit)
    }
    pub fn end_retry(&self) {
        give(&self.retries, 1);
    }
    /// `per_host_thresholds.max_connections`, this shard's share.
    pub fn per_host_connections(&self) -> Option<u32> {
        self.per_host_connections.get()
    }
    /// Held now: requests, pending requests, connections, pools, retries.
    pub fn held(&self) -> [u32; 5] {
        [
            self.requests.get(),
            self.pending.get(),
            self.connections.get(),
            self.pools.get(),
            self.retries.get(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_hold_and_units_come_back() {
        let t = CircuitThresholds {
            max_connections: 1,
            max_pending_requests: 2,
            max_requests: 3,
            max_retries: 0,
            max_connection_pools: Some(1),
            retry_budget: None,
        };
        let b = Budget {
            limits: Cell::new(t),
            per_host_connections: Cell::new(None),
            requests: Cell::new(0),
            pending: Cell::new(0),
            connections: Cell::new(0),
            pools: Cell::new(0),
            retries: Cell::new(0),
        };
        assert!(b.try_request() && b.try_request() && b.try_request());
        assert!(!b.try_request());
        b.end_request();
        assert!(b.try_request());
        assert!(b.try_connection() && !b.try_connection());
        assert!(b.try_pending() && b.try_pending() && !b.try_pending());
        b.end_pending(5);
        assert_eq!(b.held()[1], 0, "never below zero");
        assert!(!b.try_retry(), "max_retries 0: none");
        assert!(b.try_pool() && !b.try_pool());
    }
}
