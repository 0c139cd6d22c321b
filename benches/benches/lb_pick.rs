//! `engine::lb::ClusterLb::pick` per policy: least request with
//! `choice_count` 2 (power of two choices, equal weights), round robin and
//! random, over 10, 100 and 1,000 healthy hosts of equal weight; plus
//! weighted least request (weights 1..=7, `active_request_bias` 1.0, the EDF
//! schedule) at 100 hosts.
//!
//! As on a data shard: one `ClusterLb` per cluster, no ejected hosts, the
//! in-flight counts read from a `Vec<u32>` indexed by `HostId` (fixed
//! pseudo-random values in `0..16`), and the shard's xorshift64* rng
//! (shards/src/shard.rs `random_u64`). The first pick (which builds the
//! candidate lists) is outside the timed loop.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use engine::lb::ClusterLb;
use engine::{ClusterSnapshot, EjectedSet, LbPolicy, LeastRequest};

/// The shard's xorshift64*.
fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// In-flight counts by `HostId` index, in `0..16`.
fn active_counts(snap: &ClusterSnapshot) -> Vec<u32> {
    let len = snap
        .hosts
        .iter()
        .map(|h| h.id.index() + 1)
        .max()
        .unwrap_or(0);
    let mut r = rng(0xA5A5_5A5A_1234_5678);
    (0..len).map(|_| (r() >> 60) as u32).collect()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("p2c_pick");
    g.sample_size(50).throughput(Throughput::Elements(1));
    let least_request = LbPolicy::LeastRequest(LeastRequest {
        choice_count: 2,
        ..LeastRequest::default()
    });
    let cases = [
        (
            "least_request_p2c",
            least_request,
            false,
            &[10usize, 100, 1000][..],
        ),
        ("round_robin", LbPolicy::RoundRobin, false, &[10, 100, 1000]),
        ("random", LbPolicy::Random, false, &[10, 100, 1000]),
        ("least_request_weighted", least_request, true, &[100]),
    ];
    let ejected = EjectedSet::default();
    for (label, policy, weighted, sizes) in cases {
        for &n in sizes {
            let cl = benches::pick_cluster(n, policy, weighted);
            let active = active_counts(&cl);
            let mut lb = ClusterLb::default();
            let mut rand = rng(0x9E37_79B9_7F4A_7C15);
            lb.pick(&cl, &ejected, |id| active[id.index()], &mut rand)
                .unwrap();
            g.bench_with_input(BenchmarkId::new(label, n), &cl, |b, cl| {
                b.iter(|| {
                    lb.pick(black_box(cl), &ejected, |id| active[id.index()], &mut rand)
                        .map(|p| p.host.id)
                })
            });
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
