//! The admin's `/`: a live dashboard (one HTML page, its script inline, no outside asset) and the `/dashboard.json` it polls: listeners with their serving state and each filter chain's connections (and those still draining), clusters with their hosts (health, ejections and why, success rates, requests in flight, stateful sessions routed in the last minute), each cluster's answers and latency buckets (the page charts rates, error ratios and p50/p99 from the difference between two polls), and the xDS state. Read-only.

use std::collections::HashMap;

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
    let listeners = listeners(inner);
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

/// Each listener: its state, its filter chains with the connections each
/// has open, and the connections still open on chains an update changed
/// or removed (a drain's progress); then listeners an update removed
/// whose connections are still draining, and those that could not bind.
fn listeners(inner: &Inner) -> Vec<Value> {
    // Connections open per listener name and chain id, over the shards.
    let mut open: HashMap<&str, HashMap<u64, u64>> = HashMap::new();
    let blocks: Vec<_> = inner
        .shards
        .iter()
        .map(|s| s.envoy.listeners.all())
        .collect();
    for shard in &blocks {
        for (name, b) in shard {
            for (id, n) in b.chains() {
                *open.entry(&**name).or_default().entry(id).or_default() += n;
            }
        }
    }
    let mut out = Vec::new();
    for l in &inner.snapshot.listeners {
        let state = match inner.flags.listeners_drained() {
            true => "draining",
            false => "serving",
        };
        let mut counts = open.remove(l.name.as_str()).unwrap_or_default();
        let chains: Vec<Value> = l
            .chains()
            .map(|c| {
                let n = counts.remove(&c.id).unwrap_or(0);
                json!({ "name": c.name, "connections": n })
            })
            .collect();
        // What is left are chains this listener no longer has.
        out.push(json!({
            "name": l.name,
            "address": l.address.to_string(),
            "state": state,
            "chains": chains,
            "draining_chains": counts.len(),
            "draining_connections": counts.values().sum::<u64>(),
        }));
    }
    let mut gone: Vec<(&str, u64, usize)> = open
        .into_iter()
        .filter(|(_, c)| !c.is_empty())
        .map(|(name, c)| (name, c.values().sum(), c.len()))
        .collect();
    gone.sort();
    for (name, connections, chains) in gone {
        out.push(json!({
            "name": name,
            "address": "",
            "state": "removed, draining",
            "chains": [],
            "draining_chains": chains,
            "draining_connections": connections,
        }));
    }
    out.extend(inner.not_serving.iter().map(|n| {
        json!({
            "name": n.name,
            "address": n.address.to_string(),
            "state": "not serving",
            "error": n.error,
            "chains": [],
            "draining_chains": 0,
            "draining_connections": 0,
        })
    }));
    out
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
    let mut sessions = 0;
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
            let host_sessions = super::clusters::override_last_minute(inner, h);
            sessions += host_sessions;
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
                    "sessions": host_sessions,
                    "success_rate": outlier.and_then(|o| o.success_rate),
                })
            })
        })
        .collect();
    json!({
        "name": name,
        "hosts_total": c.hosts.len(),
        "healthy": healthy,
        "ejected": ejected,
        "sessions": sessions,
        "hosts": hosts,
        "completed": completed,
        "errors": errors,
        "le_ms": ENVOY_DEFAULT_BUCKETS_MS,
        "le": le,
        "count": times.count(),
    })
}
