//! Shared fixtures for the benchmarks in benches/benches (the benchmarks
//! themselves and the e2e scripts live outside this library).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use engine::{
    Cluster, ClusterSnapshot, Endpoint, HealthStatus, HostRegistry, LbPolicy, UpstreamHttp2,
};

/// A healthy cluster of `n` hosts under `policy`; with `weighted`, weights
/// 1..=7 so the weighted pick paths run.
pub fn pick_cluster(n: usize, policy: LbPolicy, weighted: bool) -> ClusterSnapshot {
    let endpoints = (0..n)
        .map(|i| Endpoint {
            address: SocketAddr::from(([10, (i >> 16) as u8, (i >> 8) as u8, i as u8], 8080)),
            weight: if weighted { 1 + (i % 7) as u32 } else { 1 },
            health: HealthStatus::Healthy,
        })
        .collect();
    let c = Cluster {
        name: format!("c{n}"),
        connect_timeout: Duration::from_secs(1),
        lb_policy: policy,
        endpoints,
        eds: None,
        http2: UpstreamHttp2::default(),
        outlier_detection: None,
        common_lb: Default::default(),
    };
    let snap = ClusterSnapshot::build(Arc::new(c), &mut HostRegistry::new());
    assert_eq!(snap.weighted, weighted);
    snap
}
