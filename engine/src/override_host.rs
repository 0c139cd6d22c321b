//! Override-host lookup (gRFC A55, Envoy's stateful sessions): the host a
//! session names is used when it is in the cluster, its EDS health status is
//! in `common_lb_config.override_host_status`, and outlier detection has not
//! ejected it; otherwise the cluster's policy picks.
//!
//! The lookup reads the cluster snapshot's immutable address map (built on
//! the control shard, shared by every data shard) and the shard's copy of the
//! ejected set: one hash probe and one bit test, no lock, no allocation.

use std::net::SocketAddr;

use crate::ejected::EjectedSet;
use crate::snapshot::{ClusterSnapshot, Host};

/// Why a session's host could not be used (each is counted in `/stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverrideMiss {
    /// No host with that address in the cluster (removed from EDS, or a
    /// cookie from another cluster or gateway fleet).
    NotFound,
    /// The host's health status is not in `override_host_status`.
    StatusNotInSet,
    /// Outlier detection ejected the host.
    Ejected,
}

/// Looks up the host a session names in `cluster`.
#[inline]
pub fn lookup<'a>(
    cluster: &'a ClusterSnapshot,
    addr: &SocketAddr,
    ejected: &EjectedSet,
) -> Result<&'a Host, OverrideMiss> {
    let host = cluster.host_by_addr(addr).ok_or(OverrideMiss::NotFound)?;
    if !cluster
        .config
        .common_lb
        .override_host_status
        .contains(host.health)
    {
        return Err(OverrideMiss::StatusNotInSet);
    }
    if ejected.contains(host.id) {
        return Err(OverrideMiss::Ejected);
    }
    Ok(host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::*;
    use crate::host::HostRegistry;
    use std::sync::Arc;
    use std::time::Duration;

    fn cluster(status: HealthStatusSet) -> ClusterSnapshot {
        let ep = |port, health| Endpoint {
            address: SocketAddr::from(([10, 0, 0, 1], port)),
            weight: 1,
            health,
            hostname: String::new(),
            check: Default::default(),
            placement: Default::default(),
        };
        let c = Cluster {
            name: "c".into(),
            connect_timeout: Duration::from_secs(1),
            lb_policy: LbPolicy::RoundRobin,
            endpoints: vec![
                ep(1, HealthStatus::Healthy),
                ep(2, HealthStatus::Draining),
                ep(3, HealthStatus::Unhealthy),
            ],
            eds: None,
            dns: None,
            http2: UpstreamHttp2::default(),
            upstream: Default::default(),
            outlier_detection: None,
            per_connection_buffer_limit_bytes: crate::config::DEFAULT_PER_CONNECTION_BUFFER_LIMIT,
            health_check: None,
            circuit_breakers: Default::default(),
            per_endpoint_stats: false,
            common_lb: CommonLb {
                override_host_status: status,
                ..CommonLb::default()
            },
        };
        ClusterSnapshot::build(Arc::new(c), &mut HostRegistry::new())
    }

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, 1], port))
    }

    #[test]
    fn default_set_keeps_healthy_and_refuses_draining() {
        let c = cluster(HealthStatusSet::DEFAULT_OVERRIDE_HOST_STATUS);
        let none = EjectedSet::default();
        assert_eq!(lookup(&c, &addr(1), &none).unwrap().address, addr(1));
        assert_eq!(
            lookup(&c, &addr(2), &none),
            Err(OverrideMiss::StatusNotInSet)
        );
        assert_eq!(
            lookup(&c, &addr(3), &none),
            Err(OverrideMiss::StatusNotInSet)
        );
        assert_eq!(lookup(&c, &addr(9), &none), Err(OverrideMiss::NotFound));
    }

    #[test]
    fn draining_in_the_set_keeps_its_sessions_unless_ejected() {
        let set: HealthStatusSet = [HealthStatus::Healthy, HealthStatus::Draining]
            .into_iter()
            .collect();
        let c = cluster(set);
        let none = EjectedSet::default();
        assert_eq!(lookup(&c, &addr(2), &none).unwrap().address, addr(2));
        let ejected = EjectedSet::new(1, [c.host_by_addr(&addr(2)).unwrap().id]);
        assert_eq!(lookup(&c, &addr(2), &ejected), Err(OverrideMiss::Ejected));
        // An empty set disables overrides altogether (Envoy).
        let c = cluster(HealthStatusSet::EMPTY);
        assert_eq!(
            lookup(&c, &addr(1), &none),
            Err(OverrideMiss::StatusNotInSet)
        );
    }
}
