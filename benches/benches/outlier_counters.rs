//! Per-request counter work on a data shard:
//!
//! * `host_counters/{success,failure}`: `engine::outlier::HostCounters::record`
//!   for a 200 and for a 503, with both consecutive detectors on at
//!   threshold 5 (Envoy's default threshold; Envoy leaves the gateway-failure
//!   one unenforced by default, here it is on: the most work `record` does),
//!   so a failure streak trips and restarts every 5 calls;
//! * the in-flight gauge of a request, increment at pick and decrement at
//!   completion: `shards::stats::Counter` (single writer: relaxed load +
//!   store, no locked instruction) against `AtomicU64::fetch_add` /
//!   `fetch_sub` (a locked read-modify-write), and the same for a single
//!   counter increment.
//!
//! Single-threaded and uncontended: the locked RMW is measured at its
//! cheapest (no other core touches the line).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use engine::outlier::{CallResult, HostCounters};
use engine::{ConsecutiveErrors, OutlierDetection};
use shards::stats::Counter;

fn outlier_config() -> OutlierDetection {
    let five = Some(ConsecutiveErrors {
        threshold: 5,
        enforcement_percentage: 100,
    });
    OutlierDetection {
        interval: Duration::from_secs(10),
        base_ejection_time: Duration::from_secs(30),
        max_ejection_time: Duration::from_secs(300),
        max_ejection_percent: 10,
        consecutive_5xx: five,
        consecutive_gateway_failure: five,
        success_rate: None,
        failure_percentage: None,
        uneject_on_active_check: true,
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("counter_update");
    g.sample_size(50).throughput(Throughput::Elements(1));
    let config = outlier_config();

    for (label, result) in [
        ("host_counters/success", CallResult::Status(200)),
        ("host_counters/failure", CallResult::Status(503)),
    ] {
        let mut counters = HostCounters::default();
        g.bench_function(label, |b| {
            b.iter(|| black_box(&mut counters).record(black_box(result), black_box(&config)))
        });
        black_box(counters.take());
    }

    let gauge = Counter::default();
    g.bench_function("gauge_inc_dec/relaxed_load_store", |b| {
        b.iter(|| {
            let gauge = black_box(&gauge);
            gauge.inc();
            gauge.dec();
        })
    });
    let atomic = AtomicU64::new(0);
    g.bench_function("gauge_inc_dec/fetch_add", |b| {
        b.iter(|| {
            let atomic = black_box(&atomic);
            atomic.fetch_add(1, Relaxed);
            atomic.fetch_sub(1, Relaxed);
        })
    });
    g.bench_function("counter_inc/relaxed_load_store", |b| {
        b.iter(|| black_box(&gauge).inc())
    });
    g.bench_function("counter_inc/fetch_add", |b| {
        b.iter(|| black_box(&atomic).fetch_add(1, Relaxed))
    });
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
