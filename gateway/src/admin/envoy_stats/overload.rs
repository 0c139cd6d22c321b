//! The overload manager's series, under Envoy's names: each configured action's `overload.<action>.active` (1 when saturated) and `.scale_percent` (its level, 0–100), each monitor's `overload.<monitor>.pressure` (0–100), and with `reset_high_memory_stream` the streams it reset (`envoy.overload_actions.reset_high_memory_stream.count`).

use engine::overload::ActionKind;
use shards::overload::Act;

use super::super::state::Inner;
use super::{Family, Kind};

pub(super) fn overload(inner: &Inner, out: &mut Vec<Family>) {
    let Some(config) = &inner.snapshot.overload else {
        return;
    };
    let state = &inner.overload;
    let mut series = |kind: Kind, dotted: String, value: u64| {
        let mut f = Family::new(kind, &dotted);
        f.push(dotted.clone(), Vec::new(), value);
        out.push(f);
    };
    let mut gauge = |dotted: String, value: u64| series(Kind::Gauge, dotted, value);
    let mut counters = Vec::new();
    for a in &config.actions {
        let level = state.level(Act::of(&a.kind));
        let name = a.kind.name();
        gauge(format!("overload.{name}.active"), u64::from(level >= 1.0));
        gauge(
            format!("overload.{name}.scale_percent"),
            (level * 100.0).round() as u64,
        );
        if a.kind == ActionKind::ResetHighMemoryStream {
            // Envoy's root-scope counter, made when the action is
            // configured; every shard's resets.
            let reset = inner
                .shards
                .iter()
                .map(|s| s.downstream.rq_overload_reset.get())
                .sum();
            counters.push((format!("{name}.count"), reset));
        }
    }
    let (heap, connections) = state.pressures();
    for (monitor, configured, pressure) in [
        (
            engine::overload::Monitor::FixedHeap,
            config.max_heap_bytes.is_some(),
            heap,
        ),
        (
            engine::overload::Monitor::DownstreamConnections,
            config.max_downstream_connections.is_some(),
            connections,
        ),
    ] {
        if configured {
            gauge(
                format!("overload.{}.pressure", monitor.name()),
                (pressure * 100.0).round() as u64,
            );
        }
    }
    for (dotted, value) in counters {
        series(Kind::Counter, dotted, value);
    }
}
