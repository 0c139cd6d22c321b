//! Per-request routing cost against the size of the target cluster: 10,
//! 1,000 and 10,000 hosts, equal weights (plus unequal weights, for
//! contrast). The route table is fixed; only the cluster grows.
//!
//! Each iteration is what the data path (shards/src/wire/stream.rs,
//! `on_request`) does before it touches the network, with the real shard (`shards::shard::Shard`
//! and the `shards::wire::WireShard` its connections share):
//! 1. `snap.listener(name)` for the current route table;
//! 2. `engine::route::route_request` (virtual host, then route);
//! 3. `snap.cluster(name)` for the route's cluster;
//! 4. `Shard::pick_host` (the shard's `RoundRobinState` by cluster name,
//!    then `engine::lb::pick_round_robin`; given `WireShard::in_flight`
//!    as the data path gives it);
//!
//! and, in `.../with_host_state`, also the per-host state the data path
//! then looks up by `HostId`: `stats.hosts.host(id).rq_total.inc()` and
//! `WireShard::pool(host, cluster)` (the pool exists: warm-up creates every
//! host's pool, as a shard that has sent to all hosts has them).

use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use engine::route::{route_request, RequestView};
use engine::{
    Bootstrap, Cluster, ClusterTarget, Endpoint, HealthStatus, HostRegistry, LbPolicy, Snapshot,
};
use http::request::Parts;
use shards::shard::Shard;
use shards::stats::ShardStats;
use shards::wire::WireShard;

/// A listener with an inline route table: 3 virtual hosts; the request
/// goes to the exact domain `api.example.com` and its third route.
const BOOT: &str = r#"
static_resources:
  listeners:
  - name: ingress
    address: { socket_address: { address: 127.0.0.1, port_value: 0 } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          route_config:
            name: routes
            virtual_hosts:
            - name: www
              domains: [www.example.com, "*.www.example.com"]
              routes: [{ match: { prefix: / }, route: { cluster: other } }]
            - name: api
              domains: [api.example.com, "api.example.com:*"]
              routes:
              - match: { prefix: /admin, headers: [{ name: x-admin, exact_match: "1" }] }
                route: { cluster: other }
              - match: { path: /v1/users }
                route: { cluster: other }
              - match: { prefix: / }
                route: { cluster: svc }
            - name: default
              domains: ["*"]
              routes: [{ match: { prefix: / }, route: { cluster: other } }]
          http_filters:
          - name: envoy.filters.http.router
            typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
  clusters:
  - name: other
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: other
      endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: 9 } } } }] }]
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: {} }
  # Its endpoints are replaced in code (10 to 10,000 of them).
  - name: svc
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: svc
      endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: 10 } } } }] }]
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: {} }
"#;

/// A `RequestView` over `http` request parts.
struct PartsView<'a>(&'a Parts);

impl RequestView for PartsView<'_> {
    fn authority(&self) -> &str {
        self.0
            .uri
            .authority()
            .map(http::uri::Authority::as_str)
            .or_else(|| self.0.headers.get("host").and_then(|v| v.to_str().ok()))
            .unwrap_or("")
    }
    fn path(&self) -> &str {
        self.0
            .uri
            .path_and_query()
            .map_or("/", http::uri::PathAndQuery::as_str)
    }
    fn method(&self) -> &str {
        self.0.method.as_str()
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.0.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// The snapshot: the listener above, `other`, and `svc` with `hosts`
/// endpoints of equal (or 1..7) weights.
fn snapshot(hosts: usize, weighted: bool) -> Arc<Snapshot> {
    let mut boot: Bootstrap = xds::bootstrap::from_str(BOOT, xds::bootstrap::Format::Yaml).unwrap();
    let svc = boot.clusters.iter_mut().find(|c| c.name == "svc").unwrap();
    let template = (**svc).clone();
    *svc = Arc::new(Cluster {
        lb_policy: LbPolicy::RoundRobin,
        endpoints: (0..hosts)
            .map(|i| Endpoint {
                address: SocketAddr::from((
                    Ipv4Addr::new(10, (i >> 16) as u8, (i >> 8) as u8, i as u8),
                    8080,
                )),
                weight: if weighted { 1 + (i % 7) as u32 } else { 1 },
                health: HealthStatus::Healthy,
                hostname: String::new(),
                check: Default::default(),
                placement: Default::default(),
            })
            .collect(),
        ..template
    });
    let snap = Snapshot::build(1, &boot, None, &mut HostRegistry::new());
    let svc = snap.cluster("svc").unwrap();
    assert_eq!((svc.routable.len(), svc.weighted), (hosts, weighted));
    Arc::new(snap)
}

fn request() -> Parts {
    let (parts, ()) = http::Request::get("http://api.example.com/v2/items?page=3")
        .header("user-agent", "bench/1.0")
        .header("accept", "application/json")
        .body(())
        .unwrap()
        .into_parts();
    parts
}

/// Steps 1-4 of the module doc; returns the picked host's address.
#[inline]
fn route_and_pick(wire: &WireShard, snap: &Snapshot, parts: &Parts) -> Option<SocketAddr> {
    let shard = &wire.shard;
    let l = snap.listener("ingress")?;
    let route = route_request(&l.filter_chains[0].http.route_config, &PartsView(parts), 0)?;
    let name = match &route.action.forward()?.target {
        ClusterTarget::Cluster(name) => name.as_str(),
        ClusterTarget::Weighted(w) => w.pick(shard.random()),
        ClusterTarget::Header(_) => return None,
    };
    let cluster = snap.cluster(name)?;
    shard
        .pick_host(cluster, |id| wire.in_flight(id), None)
        .map(|p| p.host.address)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("route_vs_hosts");
    g.sample_size(50).throughput(Throughput::Elements(1));
    let parts = request();
    for (label, weighted) in [("equal", false), ("unequal", true)] {
        for hosts in [10usize, 1000, 10_000] {
            let snap = snapshot(hosts, weighted);
            let shard = Shard::new(
                0,
                1,
                Arc::new(ShardStats::default()),
                Arc::clone(&snap),
                Default::default(),
                Default::default(),
                Default::default(),
            );
            let logs =
                std::sync::Arc::new(shards::access_log::LogWriter::start().expect("log writer"));
            let wire = WireShard::new(shard, logs);
            // Sanity: the request reaches `svc` and rotates over its hosts.
            let a = route_and_pick(&wire, &snap, &parts).unwrap();
            let b = route_and_pick(&wire, &snap, &parts).unwrap();
            assert!(a != b && snap.cluster("svc").unwrap().host_by_addr(&a).is_some());

            g.bench_function(
                BenchmarkId::new(format!("{label}/route_and_pick"), hosts),
                |b| b.iter(|| route_and_pick(&wire, black_box(&snap), black_box(&parts))),
            );
            if weighted {
                continue;
            }
            g.bench_function(
                BenchmarkId::new(format!("{label}/with_host_state"), hosts),
                |b| {
                    b.iter(|| {
                        let snap = black_box(&snap);
                        let l = snap.listener("ingress").unwrap();
                        let route = route_request(
                            &l.filter_chains[0].http.route_config,
                            &PartsView(black_box(&parts)),
                            0,
                        )
                        .unwrap();
                        let Some(ClusterTarget::Cluster(name)) =
                            route.action.forward().map(|a| &a.target)
                        else {
                            unreachable!()
                        };
                        let cluster = snap.cluster(name).unwrap();
                        let host = wire
                            .shard
                            .pick_host(cluster, |id| wire.in_flight(id), None)
                            .unwrap()
                            .host;
                        wire.shard.stats.hosts.host(host.id).rq_total.inc();
                        wire.pool(host, cluster)
                    })
                },
            );
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
