//! `/clusters`: per host address, health, weight, in-flight and totals, in
//! Envoy's `cluster::host::stat::value` text form or as JSON.

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::Inner;

pub(super) fn text(inner: &Inner) -> String {
    // Envoy's `cluster::host::stat::value` lines, so existing scripts parse it.
    let mut out = String::new();
    let mut names: Vec<&String> = inner.snapshot.clusters.keys().collect();
    names.sort();
    for name in names {
        let c = &inner.snapshot.clusters[name];
        for h in &c.hosts {
            let a = h.address;
            let _ = writeln!(out, "{name}::{a}::health_flags::{}", h.health.as_str());
            let _ = writeln!(out, "{name}::{a}::weight::{}", h.weight);
            let _ = writeln!(
                out,
                "{name}::{a}::rq_active::{}",
                inner.host_sum(h.id, |s| &s.rq_active)
            );
            let _ = writeln!(
                out,
                "{name}::{a}::rq_total::{}",
                inner.host_sum(h.id, |s| &s.rq_total)
            );
            let _ = writeln!(
                out,
                "{name}::{a}::cx_active::{}",
                inner.host_sum(h.id, |s| &s.cx_active)
            );
            let _ = writeln!(
                out,
                "{name}::{a}::cx_connect_fail::{}",
                inner.host_sum(h.id, |s| &s.cx_connect_fail)
            );
        }
    }
    out
}

pub(super) fn json(inner: &Inner) -> Value {
    let mut names: Vec<&String> = inner.snapshot.clusters.keys().collect();
    names.sort();
    let clusters: Vec<Value> = names
        .into_iter()
        .map(|name| {
            let c = &inner.snapshot.clusters[name];
            let hosts: Vec<Value> = c
                .hosts
                .iter()
                .map(|h| {
                    json!({
                        "address": h.address.to_string(),
                        "health_status": h.health.as_str(),
                        "weight": h.weight,
                        "rq_active": inner.host_sum(h.id, |s| &s.rq_active),
                        "rq_total": inner.host_sum(h.id, |s| &s.rq_total),
                        "cx_active": inner.host_sum(h.id, |s| &s.cx_active),
                        "cx_connect_fail": inner.host_sum(h.id, |s| &s.cx_connect_fail),
                    })
                })
                .collect();
            json!({ "name": name, "hosts": hosts })
        })
        .collect();
    json!({ "cluster_statuses": clusters })
}
