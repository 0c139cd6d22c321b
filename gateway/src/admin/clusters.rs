//! `/clusters`: per host address, health, weight, in-flight and totals,
//! outlier ejection state, success rate of the last interval, and requests
//! routed by session override in the last minute — in Envoy's
//! `cluster::host::stat::value` text form or as JSON.

use std::fmt::Write as _;
use std::time::Instant;

use engine::outlier::HostOutlier;
use engine::snapshot::Host;
use engine::ClusterSnapshot;
use serde_json::{json, Map, Value};

use super::state::Inner;
use super::xds::rfc3339;
use shards::stats::{recent_now, HostCounter};

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

/// Requests a session's override host sent to `h` in the last minute,
/// summed over shards: 0 on a DRAINING host means no live session is left.
pub(super) fn override_last_minute(inner: &Inner, h: &Host) -> u64 {
    let now = recent_now();
    inner
        .shards
        .iter()
        .filter_map(|s| s.hosts.get(h.id))
        .map(|st| st.rq_override_recent.sum(now))
        .sum()
}

fn outlier<'a>(inner: &'a Inner, h: &Host) -> Option<&'a HostOutlier> {
    inner.outlier.hosts.get(&h.id)
}

/// Wall-clock time of a control-shard instant.
fn wall(inner: &Inner, at: Instant) -> String {
    let (mono, wall) = inner.epoch;
    let t = if at >= mono {
        wall + (at - mono)
    } else {
        wall - (mono - at)
    };
    rfc3339(t)
}

pub(super) fn text(inner: &Inner) -> String {
    // Envoy's `cluster::host::stat::value` lines, so existing scripts parse it.
    let mut out = String::new();
    for (name, c) in sorted_clusters(inner) {
        for h in &c.hosts {
            let a = h.address;
            let o = outlier(inner, h);
            let ejected = o.is_some_and(|o| o.ejected_since.is_some());
            let flags = h
                .active
                .envoy_flags(h.eds_health, ejected, h.pending_removal);
            let _ = writeln!(out, "{name}::{a}::health_flags::{flags}");
            let _ = writeln!(out, "{name}::{a}::weight::{}", h.weight);
            for (stat, f) in HOST_COUNTERS {
                let _ = writeln!(out, "{name}::{a}::{stat}::{}", inner.host_sum(h.id, f));
            }
            if let Some(rate) = o.and_then(|o| o.success_rate) {
                let _ = writeln!(out, "{name}::{a}::success_rate::{:.2}", rate * 100.0);
            }
            if let Some(o) = o.filter(|_| ejected) {
                let reason = o.reason.map_or("", |r| r.as_str());
                let _ = writeln!(out, "{name}::{a}::ejection_reason::{reason}");
                let _ = writeln!(out, "{name}::{a}::ejection_multiplier::{}", o.multiplier);
            }
            let recent = override_last_minute(inner, h);
            let _ = writeln!(out, "{name}::{a}::rq_override_last_minute::{recent}");
        }
    }
    out
}

pub(super) fn json(inner: &Inner) -> Value {
    let clusters: Vec<Value> = sorted_clusters(inner)
        .into_iter()
        .map(|(name, c)| {
            let hosts: Vec<Value> = c.hosts.iter().map(|h| host_json(inner, h)).collect();
            json!({
                "name": name,
                "lb_policy": c.config.lb_policy.as_str(),
                "hosts": hosts,
            })
        })
        .collect();
    json!({ "cluster_statuses": clusters })
}

fn host_json(inner: &Inner, h: &Host) -> Value {
    let mut host = Map::new();
    host.insert("address".into(), json!(h.address.to_string()));
    host.insert("health_status".into(), json!(h.health.as_str()));
    host.insert("eds_health_status".into(), json!(h.eds_health.as_str()));
    let ejected = outlier(inner, h).is_some_and(|o| o.ejected_since.is_some());
    host.insert(
        "health_flags".into(),
        json!(h
            .active
            .envoy_flags(h.eds_health, ejected, h.pending_removal)),
    );
    host.insert("weight".into(), json!(h.weight));
    for (stat, f) in HOST_COUNTERS {
        host.insert(stat.into(), json!(inner.host_sum(h.id, f)));
    }
    let o = outlier(inner, h);
    let ejection = o.and_then(|o| {
        let since = o.ejected_since?;
        Some(json!({
            "since": wall(inner, since),
            "reason": o.reason.map(|r| r.as_str()),
            "multiplier": o.multiplier,
        }))
    });
    host.insert("ejected".into(), json!(ejection.is_some()));
    if let Some(e) = ejection {
        host.insert("ejection".into(), e);
    }
    if let Some(o) = o {
        host.insert("ejection_multiplier".into(), json!(o.multiplier));
        host.insert("success_rate".into(), json!(o.success_rate));
    }
    host.insert(
        "rq_override_last_minute".into(),
        json!(override_last_minute(inner, h)),
    );
    Value::Object(host)
}
