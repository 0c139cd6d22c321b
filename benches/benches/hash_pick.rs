//! A consistent-hash pick (`RING_HASH`, `MAGLEV`) over 10, 1,000 and
//! 10,000 hosts: the request's hash from a header (`hash_policy`), then the
//! ring's binary search or Maglev's table slot. Target (issue 28): at most
//! 150 ns per pick, flat in host count. The tables' build (on the control
//! shard with each snapshot; on a data shard only while its candidates
//! differ, under ejections or panic) is timed beside it.

use std::hint::black_box;
use std::net::SocketAddr;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use engine::lb::hash::HashTable;
use engine::lb::hash_policy::{request_hash, HashInput};
use engine::lb::ClusterLb;
use engine::{EjectedSet, HashOn, HashPolicy, LbPolicy};

/// A request with one header, `x-user`, whose value changes per pick.
struct Req(String);

impl HashInput for Req {
    fn header_values(&self, name: &str) -> Vec<&[u8]> {
        if name == "x-user" {
            vec![self.0.as_bytes()]
        } else {
            Vec::new()
        }
    }
    fn cookie(&self, _: &str) -> Option<&[u8]> {
        None
    }
    fn path(&self) -> &[u8] {
        b"/"
    }
    fn peer(&self) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, 1], 5555))
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("hash_pick");
    g.measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(50)
        .throughput(Throughput::Elements(1));
    let policy = [HashPolicy {
        kind: HashOn::Header("x-user".into()),
        terminal: false,
    }];
    let users: Vec<Req> = (0..1024).map(|i| Req(format!("user-{i}"))).collect();
    let none = EjectedSet::default();
    for (label, lb) in [
        ("ring_hash", LbPolicy::RingHash(Default::default())),
        ("maglev", LbPolicy::Maglev(Default::default())),
    ] {
        for n in [10usize, 1000, 10_000] {
            let cl = benches::pick_cluster(n, lb, false);
            let mut state = ClusterLb::default();
            // The first pick builds the table; keep it out of the loop.
            state
                .pick_hashed(&cl, &none, |_| 0, &mut || 7, Some(1))
                .unwrap();
            let mut i = 0usize;
            g.bench_with_input(BenchmarkId::new(label, n), &cl, |b, cl| {
                b.iter(|| {
                    i = (i + 1) & 1023;
                    let (h, _) = request_hash(&policy, &users[i], String::new);
                    state
                        .pick_hashed(black_box(cl), &none, |_| 0, &mut || 7, h)
                        .map(|p| p.host.id)
                })
            });
        }
    }
    g.finish();
    let mut g = c.benchmark_group("hash_table_build");
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(10);
    for (label, lb) in [
        ("ring_hash", LbPolicy::RingHash(Default::default())),
        ("maglev", LbPolicy::Maglev(Default::default())),
    ] {
        let cl = benches::pick_cluster(10_000, lb, false);
        let all: Vec<u32> = (0..cl.hosts.len() as u32).collect();
        g.bench_function(BenchmarkId::new(label, 10_000), |b| {
            b.iter(|| HashTable::build(lb, black_box(&cl.hosts), &all).is_some())
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
