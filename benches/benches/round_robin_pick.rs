//! `engine::lb::pick_round_robin` over 10, 100 and 1000 routable hosts,
//! with equal weights (O(1) cursor) and unequal weights (smooth weighted
//! round robin, O(hosts) per pick).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use engine::lb::{pick_round_robin, RoundRobinState};
use engine::LbPolicy;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("round_robin_pick");
    g.measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(50)
        .throughput(Throughput::Elements(1));
    for weighted in [false, true] {
        let label = if weighted { "unequal" } else { "equal" };
        for n in [10usize, 100, 1000] {
            let cl = benches::pick_cluster(n, LbPolicy::RoundRobin, weighted);
            let mut st = RoundRobinState::default();
            // First pick sizes the weighted state; keep it out of the loop.
            pick_round_robin(&cl, &mut st).unwrap();
            g.bench_with_input(BenchmarkId::new(label, n), &cl, |b, cl| {
                b.iter(|| pick_round_robin(black_box(cl), &mut st).map(|h| h.id))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
