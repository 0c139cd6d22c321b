//! `/clusters`: per host address, health, weight, in-flight and totals, in
//! Envoy's `cluster::host::stat::value` text form or as JSON.

use std::fmt::Write as _;

use engine::ClusterSnapshot;
use serde_json::{json, Map, Value};

use super::Inner;
use crate::stats::HostCounter;

/// The per-host counters both forms report, summed over shards.
const HOST_COUNTERS: [(&str, HostCounter); 4] = [
    ("rq_active", |s| &s.rq_active),
    ("rq_total", |s| &s.rq_total),
    ("cx_active", |s| &s.cx_active),
    ("cx_connect_fail", |s| &s.cx_connect_fail),
];

fn sorted_clusters(inner: &Inner) -> Vec<(&String, &ClusterSnapshot)> {
    let mut clusters: Vec<_> = inner
        .snapshot
        .clusters
        .iter()
        .map(|(name, c)| (name, &**c))
        .collect();
    clusters.sort_by_key(|(name, _)| *name);
    clusters
}

pub(super) fn text(inner: &Inner) -> String {
    // Envoy's `cluster::host::stat::value` lines, so existing scripts parse it.
    let mut out = String::new();
    for (name, c) in sorted_clusters(inner) {
        for h in &c.hosts {
            let a = h.address;
            let _ = writeln!(out, "{name}::{a}::health_flags::{}", h.health.as_str());
            let _ = writeln!(out, "{name}::{a}::weight::{}", h.weight);
            for (stat, f) in HOST_COUNTERS {
                let _ = writeln!(out, "{name}::{a}::{stat}::{}", inner.host_sum(h.id, f));
            }
        }
    }
    out
}

pub(super) fn json(inner: &Inner) -> Value {
    let clusters: Vec<Value> = sorted_clusters(inner)
        .into_iter()
        .map(|(name, c)| {
            let hosts: Vec<Value> = c
                .hosts
                .iter()
                .map(|h| {
                    let mut host = Map::new();
                    host.insert("address".into(), json!(h.address.to_string()));
                    host.insert("health_status".into(), json!(h.health.as_str()));
                    host.insert("weight".into(), json!(h.weight));
                    for (stat, f) in HOST_COUNTERS {
                        host.insert(stat.into(), json!(inner.host_sum(h.id, f)));
                    }
                    Value::Object(host)
                })
                .collect();
            json!({ "name": name, "hosts": hosts })
        })
        .collect();
    json!({ "cluster_statuses": clusters })
}
