//! The admin's `/`: a live dashboard (one HTML page, its script inline, no outside asset) and the `/dashboard.json` it polls: listeners and their serving state, clusters with their hosts (health, ejections and why, requests in flight), each cluster's answers and latency buckets (the page charts rates, error ratios and p50/p99 from the difference between two polls), and the xDS state. Read-only.

use engine::stats::histogram::{Merged, ENVOY_DEFAULT_BUCKETS_MS};
use serde_json::{json, Value};
use shards::stats::envoy::ClusterStats;

use super::state::{Inner, ServerState};

/// The page: built at compile time from `dashboard.html`.
pub(super) const PAGE: &str = include_str!("dashboard.html");

/// Hosts listed per cluster, at most (the counts cover them all): a page
/// of 10,000 hosts is not one anybody reads.
const MAX_HOSTS: usize = 50;

pub(super) fn json(inner: &Inner) -> Value {
    let state = match inner.server_state() {
        ServerState::Live => "LIVE",
        ServerState::Draining => "DRAINING",
        ServerState::Initializing => "INITIALIZING",
    };
    let listeners: Vec<Value> = inner
        .snapshot
        .listeners
        .iter()
        .map(|l| {
            let state = match inner.flags.listeners_drained() {
                true => "draining",
                false => "serving",
            };
            json!({ "name": l.name, "address": l.address.to_string(), "state": state })
        })
        .chain(inner.not_serving.iter().map(|n| {
            json!({
                "name": n.name,
                "address": n.address.to_string(),
                "state": "not serving",
                "error": n.error,
            })
        }))
        .collect();
    let mut names: Vec<&String> = inner.snapshot.clusters.keys().collect();
    names.sort();
    // Each shard's cluster blocks, copied out under one lock each.
    let blocks: Vec<_> = inner
        .shards
        .iter()
        .map(|s| s.envoy.clusters.all())
        .collect();
    let clusters: Vec<Value> = names
        .into_iter()
        .filter_map(|name| Some((name, inner.snapshot.clusters.get(name)?)))
        .map(|(name, c)| cluster(inner, &blocks, name, c))
        .collect();
    let xds = inner.xds.as_ref().map(|x| {
        let types: Vec<Value> = x
            .types
            .iter()
            .filter(|t| !t.source.is_empty())
            .map(|t| {
                json!({
                    "type": t.name,
                    "source": t.source,
                    "version": t.version,
                    "accepted": t.accepted,
                    "rejected": t.rejected,
                    "last_error": t.last_error.as_ref().map(|e| json!({
                        "version": e.version,
                        "message": e.message,
                    })),
                })
            })
            .collect();
        json!({ "connected": x.connected, "server": x.server, "types": types })
    });
    json!({
        "server": {
            "version": concat!("gateway/", env!("CARGO_PKG_VERSION")),
            "state": state,
            "shards": inner.shards.len(),
            "uptime_s": super::state::started().elapsed().as_secs(),
        },
        "listeners": listeners,
        "clusters": clusters,
        "xds": xds,
    })
}

type ClusterBlocks = std::collections::HashMap<Box<str>, std::sync::Arc<ClusterStats>>;

fn cluster(
    inner: &Inner,
    blocks: &[ClusterBlocks],
    name: &str,
    c: &engine::snapshot::ClusterSnapshot,
) -> Value {
    let mut completed = 0u64;
    let mut errors = 0u64;
    let mut times = Merged::new();
    for shard in blocks {
        if let Some(b) = shard.get(name) {
            b.upstream_rq.each(|code, n| {
                completed += n;
                if code >= 500 {
                    errors += n;
                }
            });
            b.upstream_rq_time.merge_into(&mut times);
        }
    }
    let le: Vec<u64> = ENVOY_DEFAULT_BUCKETS_MS
        .iter()
        .map(|&b| times.cumulative_le_ms(b))
        .collect();
    let mut healthy = 0;
    let mut ejected = 0;
    let hosts: Vec<Value> = c
        .hosts
        .iter()
        .enumerate()
        .filter_map(|(i, h)| {
            let outlier = inner.outlier.hosts.get(&h.id);
            let is_ejected = outlier.is_some_and(|o| o.ejected_since.is_some());
            let passing = matches!(
                h.health,
                engine::HealthStatus::Healthy | engine::HealthStatus::Unknown
            );
            healthy += usize::from(passing && !is_ejected && !h.excluded());
            ejected += usize::from(is_ejected);
            (i < MAX_HOSTS).then(|| {
                let rq_active: u64 = inner
                    .shards
                    .iter()
                    .filter_map(|s| s.hosts.get(h.id))
                    .map(|hs| hs.rq_active.get())
                    .sum();
                json!({
                    "address": h.address.to_string(),
                    "health": format!("{:?}", h.health),
                    "ejected": is_ejected,
                    "reason": outlier.and_then(|o| o.reason).map(|r| format!("{r:?}")),
                    "rq_active": rq_active,
                })
            })
        })
        .collect();
    json!({
        "name": name,
        "hosts_total": c.hosts.len(),
        "healthy": healthy,
        "ejected": ejected,
        "hosts": hosts,
        "completed": completed,
        "errors": errors,
        "le_ms": ENVOY_DEFAULT_BUCKETS_MS,
        "le": le,
        "count": times.count(),
    })
}
