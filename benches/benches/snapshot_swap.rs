//! Config updates: building a new `engine::Snapshot` when one cluster
//! changes among many unchanged ones (control shard), and adopting it on a
//! data shard (pointer swap, per-stream `Rc` clone, and the per-host pool
//! reconciliation `ShardRuntime::apply` performs).
//!
//! The shard side reproduces the pattern of shards/src/shard.rs
//! (`current: RefCell<Rc<Arc<Snapshot>>>`, `snapshot()`, `adopt()`) and
//! shards/src/wire/runtime.rs (`apply()`, `reconcile_pools()`) without
//! depending on glommio.

// `Rc<Arc<Snapshot>>` is the point: a shard-local count around the shared
// snapshot, as in shards/src/shard.rs.
#![allow(clippy::redundant_allocation)]

use std::cell::RefCell;
use std::hint::black_box;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use engine::{
    Bootstrap, Cluster, ClusterSnapshot, Endpoint, HealthStatus, HostRegistry, LbPolicy, Node,
    Snapshot, UpstreamHttp2,
};

/// Unchanged clusters around the one that changes, and their size.
const UNCHANGED_CLUSTERS: usize = 100;
const UNCHANGED_HOSTS: usize = 20;

fn addr(cluster: usize, i: usize) -> SocketAddr {
    SocketAddr::from((
        [10, (cluster % 250) as u8, (i >> 8) as u8, i as u8],
        8000 + (cluster / 250) as u16 * 100 + (i >> 16) as u16,
    ))
}

fn cluster(idx: usize, hosts: usize, variant: u32) -> Arc<Cluster> {
    Arc::new(Cluster {
        name: format!("cluster-{idx}"),
        connect_timeout: Duration::from_secs(1),
        lb_policy: LbPolicy::RoundRobin,
        endpoints: (0..hosts)
            .map(|i| Endpoint {
                address: addr(idx, i),
                weight: 1,
                // The change: one endpoint flips health, as an EDS update would.
                health: if i == 0 && variant == 1 {
                    HealthStatus::Draining
                } else {
                    HealthStatus::Healthy
                },
                hostname: String::new(),
                check: Default::default(),
                placement: Default::default(),
            })
            .collect(),
        eds: None,
        dns: None,
        http2: UpstreamHttp2::default(),
        upstream: Default::default(),
        outlier_detection: None,
        per_connection_buffer_limit_bytes: engine::DEFAULT_PER_CONNECTION_BUFFER_LIMIT,
        health_check: None,
        circuit_breakers: Default::default(),
        per_endpoint_stats: false,
        common_lb: Default::default(),
    })
}

/// Two bootstraps that differ only in the last cluster (`changed` hosts).
/// Unchanged clusters are shared `Arc`s, as after config parsing they are
/// distinct but equal; `cluster_eq` compares them by value either way.
fn bootstraps(unchanged: usize, changed: usize) -> [Bootstrap; 2] {
    let shared: Vec<Arc<Cluster>> = (0..unchanged)
        .map(|i| cluster(i, UNCHANGED_HOSTS, 0))
        .collect();
    [0, 1].map(|variant| {
        let mut clusters: Vec<Arc<Cluster>> = shared
            .iter()
            .map(|c| Arc::new((**c).clone())) // equal by value, not by pointer
            .collect();
        clusters.push(cluster(unchanged, changed, variant));
        Bootstrap {
            node: Node::default(),
            admin: None,
            listeners: vec![],
            clusters,
            dynamic: None,
            runtime: Default::default(),
            overload: None,
            secrets: Default::default(),
        }
    })
}

fn build(c: &mut Criterion) {
    let mut g = c.benchmark_group("snapshot_build");
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(20);
    // One changed cluster of 10 / 1000 / 10000 endpoints among 100 unchanged
    // clusters of 20 (2000 hosts).
    let cases = [
        (UNCHANGED_CLUSTERS, 10),
        (UNCHANGED_CLUSTERS, 1000),
        (UNCHANGED_CLUSTERS, 10_000),
        // Same 10-endpoint change with 10x the unchanged hosts: shows how
        // much of a rebuild is proportional to what did *not* change.
        (10 * UNCHANGED_CLUSTERS, 10),
    ];
    for (unchanged, changed) in cases {
        let boots = bootstraps(unchanged, changed);
        let mut registry = HostRegistry::new();
        let mut prev = Snapshot::build(1, &boots[0], None, &mut registry);
        let mut version = 1u64;
        let id = BenchmarkId::new(
            format!("unchanged_{}x{}", unchanged, UNCHANGED_HOSTS),
            format!("changed_{changed}"),
        );
        g.bench_function(id, |b| {
            b.iter(|| {
                version += 1;
                let next = Snapshot::build(
                    version,
                    &boots[(version % 2) as usize],
                    Some(&prev),
                    &mut registry,
                );
                // The old version is released as the control shard does.
                prev = next;
            })
        });
        // Sanity: the unchanged clusters really were reused.
        let again = Snapshot::build(
            version + 1,
            &boots[((version + 1) % 2) as usize],
            Some(&prev),
            &mut registry,
        );
        assert!(Arc::ptr_eq(
            &prev.clusters["cluster-0"],
            &again.clusters["cluster-0"]
        ));
    }
    // For scale: building the changed cluster alone.
    for changed in [10usize, 1000, 10_000] {
        let c = cluster(0, changed, 0);
        let mut registry = HostRegistry::new();
        g.bench_function(BenchmarkId::new("cluster_only", changed), |b| {
            b.iter(|| {
                registry.begin();
                let s = ClusterSnapshot::build(Arc::clone(&c), &mut registry);
                registry.finish();
                s
            })
        });
    }
    g.finish();
}

/// The data shard's side, as in shards/src/shard.rs.
struct ShardModel {
    current: RefCell<Rc<Arc<Snapshot>>>,
    /// Stand-in for `pools: RefCell<Vec<Option<Rc<HostPool>>>>`: the address
    /// a pool connects to, by host id.
    pools: RefCell<Vec<Option<Rc<SocketAddr>>>>,
}

impl ShardModel {
    fn new(first: Arc<Snapshot>) -> Self {
        Self {
            current: RefCell::new(Rc::new(first)),
            pools: RefCell::new(Vec::new()),
        }
    }

    /// `Shard::snapshot()`.
    #[inline]
    fn snapshot(&self) -> Rc<Arc<Snapshot>> {
        Rc::clone(&self.current.borrow())
    }

    /// The pointer swap of `Shard::adopt()`, at the end of `ShardRuntime::apply()`.
    fn swap(&self, snap: Arc<Snapshot>) {
        *self.current.borrow_mut() = Rc::new(snap);
    }

    /// `ShardRuntime::reconcile_pools()` then the swap: what `apply()` costs
    /// per shard besides listener reconciliation.
    fn apply(&self, snap: Arc<Snapshot>) {
        {
            let mut keep: Vec<Option<&ClusterSnapshot>> = vec![None; snap.host_capacity];
            let mut addr: Vec<Option<SocketAddr>> = vec![None; snap.host_capacity];
            for c in snap.clusters.values() {
                for h in &c.hosts {
                    keep[h.id.index()] = Some(c);
                    addr[h.id.index()] = Some(h.address);
                }
            }
            let mut pools = self.pools.borrow_mut();
            for (i, slot) in pools.iter_mut().enumerate() {
                let Some(p) = slot else { continue };
                let still = match (
                    keep.get(i).copied().flatten(),
                    addr.get(i).copied().flatten(),
                ) {
                    (Some(c), Some(a)) => a == **p && c.config.connect_timeout > Duration::ZERO,
                    _ => false,
                };
                if !still {
                    *slot = None;
                }
            }
        }
        self.swap(snap);
    }
}

fn swap(c: &mut Criterion) {
    let mut g = c.benchmark_group("snapshot_swap");
    g.measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(50);

    for changed in [10usize, 1000, 10_000] {
        let boots = bootstraps(UNCHANGED_CLUSTERS, changed);
        let mut registry = HostRegistry::new();
        let a = Arc::new(Snapshot::build(1, &boots[0], None, &mut registry));
        let b = Arc::new(Snapshot::build(2, &boots[1], Some(&a), &mut registry));
        let shard = ShardModel::new(Arc::clone(&a));
        // Pools exist for every host (a shard that has sent to all of them).
        {
            let mut pools = shard.pools.borrow_mut();
            pools.resize(b.host_capacity, None);
            for h in b.clusters.values().flat_map(|c| c.hosts.iter()) {
                pools[h.id.index()] = Some(Rc::new(h.address));
            }
        }
        let snaps = [a, b];
        let mut n = 0usize;
        let hosts = snaps[1].host_capacity;
        g.bench_function(
            BenchmarkId::new("apply_reconcile_and_swap", format!("{hosts}_hosts")),
            |bch| {
                bch.iter(|| {
                    n += 1;
                    // The control shard sends an `Arc::clone` to every shard.
                    shard.apply(Arc::clone(&snaps[n % 2]));
                })
            },
        );
    }

    let boots = bootstraps(UNCHANGED_CLUSTERS, 10);
    let mut registry = HostRegistry::new();
    let a = Arc::new(Snapshot::build(1, &boots[0], None, &mut registry));
    let b = Arc::new(Snapshot::build(2, &boots[1], Some(&a), &mut registry));
    let shard = ShardModel::new(Arc::clone(&a));
    let snaps = [a, b];
    let mut n = 0usize;
    g.bench_function("pointer_swap_only", |bch| {
        bch.iter(|| {
            n += 1;
            shard.swap(Arc::clone(&snaps[n % 2]));
        })
    });
    // Per stream: take the current snapshot (Rc increment) and release it.
    g.bench_function("per_stream_rc_clone", |bch| {
        bch.iter(|| {
            let s = shard.snapshot();
            black_box(s.version)
        })
    });
    // For comparison: what an `Arc` clone per stream would cost (uncontended;
    // with N shards hammering one cache line it is far worse).
    let arc = Arc::clone(&snaps[0]);
    g.bench_function("per_stream_arc_clone_reference", |bch| {
        bch.iter(|| {
            let s = Arc::clone(black_box(&arc));
            black_box(s.version)
        })
    });
    // A stream that outlives a swap keeps its version.
    g.bench_function("stream_survives_swap", |bch| {
        bch.iter_batched(
            || shard.snapshot(),
            |held| {
                n += 1;
                shard.swap(Arc::clone(&snaps[n % 2]));
                held.version
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, build, swap);
criterion_main!(benches);
