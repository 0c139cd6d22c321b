//! `circuit_breakers` as Istio and Envoy's docs write it: Envoy's defaults,
//! each priority once, `per_host_thresholds` with only `max_connections`.

use engine::{CircuitThresholds, Cluster};
use xds::bootstrap::{self, Format};

fn load(cb: &str) -> Result<Cluster, String> {
    let yaml = format!("static_resources:\n  clusters:\n  - name: c\n    circuit_breakers: {cb}\n");
    bootstrap::from_str(&yaml, Format::Yaml)
        .map(|b| (*b.clusters[0]).clone())
        .map_err(|e| e.to_string())
}

#[test]
fn envoy_defaults_and_what_istio_writes() {
    let c = load("{}").unwrap();
    assert_eq!(c.circuit_breakers.default, CircuitThresholds::default());
    let d = CircuitThresholds::default();
    assert_eq!(
        (
            d.max_connections,
            d.max_pending_requests,
            d.max_requests,
            d.max_retries
        ),
        (1024, 1024, 1024, 3)
    );
    // Istio's: every limit at its largest, track_remaining on.
    let c = load(
        "{ thresholds: [{ max_connections: 4294967295, max_pending_requests: 4294967295, max_requests: 4294967295, max_retries: 4294967295, track_remaining: true }] }",
    )
    .unwrap();
    assert_eq!(c.circuit_breakers.default.max_requests, u32::MAX);
    assert_eq!(
        c.circuit_breakers.default.per_shard(16).max_requests,
        u32::MAX.div_ceil(16)
    );
    let c = load(
        "{ thresholds: [{ max_requests: 7 }, { priority: HIGH, max_requests: 9, max_connection_pools: 2 }], per_host_thresholds: [{ max_connections: 3 }] }",
    )
    .unwrap();
    let cb = c.circuit_breakers;
    assert_eq!(cb.default.max_requests, 7);
    assert_eq!(cb.default.max_connections, 1024, "unset: Envoy's default");
    assert_eq!(
        (cb.high.max_requests, cb.high.max_connection_pools),
        (9, Some(2))
    );
    assert_eq!(cb.per_host_max_connections, Some(3));
    assert_eq!(cb.default.retry_budget, None);
    let c = load(
        "{ thresholds: [{ retry_budget: {} }, { priority: HIGH, retry_budget: { budget_percent: { value: 12.5 }, min_retry_concurrency: 8 } }] }",
    )
    .unwrap();
    let cb = c.circuit_breakers;
    let envoy_defaults = engine::RetryBudget {
        basis_points: 2_000,
        min_concurrency: 3,
    };
    assert_eq!(cb.default.retry_budget, Some(envoy_defaults));
    assert_eq!(
        cb.high.retry_budget,
        Some(engine::RetryBudget {
            basis_points: 1_250,
            min_concurrency: 8
        })
    );
    // Per shard: the floor is shared, the share is of the shard's own.
    let two = cb.high.per_shard(2).retry_budget.unwrap();
    assert_eq!((two.basis_points, two.min_concurrency), (1_250, 4));
}

#[test]
fn refusals_name_their_field() {
    for (cb, want) in [
        (
            "{ thresholds: [{ max_requests: 1 }, { max_requests: 2 }] }",
            "circuit_breakers.thresholds[1].priority: a second thresholds entry",
        ),
        (
            "{ thresholds: [{ retry_budget: { budget_percent: { value: 120 } } }] }",
            "circuit_breakers.thresholds[0].retry_budget.budget_percent.value: 120 is not within 0..=100",
        ),
        (
            "{ per_host_thresholds: [{ retry_budget: {} }] }",
            "circuit_breakers.per_host_thresholds[0].retry_budget: not supported",
        ),
        (
            "{ per_host_thresholds: [{ max_requests: 1 }] }",
            "circuit_breakers.per_host_thresholds[0].max_requests: not supported",
        ),
    ] {
        let e = load(cb).unwrap_err();
        assert!(e.contains(want), "{cb}: {e}");
    }
}
