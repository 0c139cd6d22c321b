//! Shared fixtures for the benchmarks in benches/benches, and the accept
//! loop of the measuring servers in src/bin (the benchmarks themselves and
//! the e2e scripts live outside this library).

pub mod ws;

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
            hostname: String::new(),
            check: Default::default(),
            placement: Default::default(),
        })
        .collect();
    let c = Cluster {
        name: format!("c{n}"),
        connect_timeout: Duration::from_secs(1),
        lb_policy: policy,
        endpoints,
        eds: None,
        dns: None,
        http2: UpstreamHttp2::default(),
        upstream: Default::default(),
        outlier_detection: None,
        per_connection_buffer_limit_bytes: engine::DEFAULT_PER_CONNECTION_BUFFER_LIMIT,
        common_lb: Default::default(),
        health_check: None,
        circuit_breakers: Default::default(),
        per_endpoint_stats: false,
    };
    let snap = ClusterSnapshot::build(Arc::new(c), &mut HostRegistry::new());
    assert_eq!(snap.weighted, weighted);
    snap
}

/// Runs an accept loop on one glommio executor (pinned to `cpu` if given):
/// binds `listen`, prints `listening on ADDR` (scripts wait for it), and
/// spawns `serve(stream)` per connection. Returns only if the executor
/// cannot start. The measuring servers `wire_backend` and `wire_proxy`
/// share it.
pub fn serve_on_one_core<F, Fut>(
    name: &'static str,
    listen: SocketAddr,
    cpu: Option<usize>,
    serve: F,
) -> std::process::ExitCode
where
    F: Fn(glommio::net::TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let placement = cpu.map_or(glommio::Placement::Unbound, glommio::Placement::Fixed);
    let result = glommio::LocalExecutorBuilder::new(placement)
        .name(name)
        .io_memory(1 << 20)
        .spawn(move || async move {
            let listener = match glommio::net::TcpListener::bind(listen) {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("{name}: cannot listen on {listen}: {e}");
                    std::process::exit(1);
                }
            };
            println!("listening on {}", listener.local_addr().unwrap_or(listen));
            loop {
                match listener.accept().await {
                    Ok(s) => {
                        glommio::spawn_local(serve(s)).detach();
                    }
                    Err(e) => eprintln!("{name}: accept: {e}"),
                }
            }
        })
        .and_then(|h| h.join());
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
