//! Envoy's other two forms of the same series: `/stats?format=json` (`{"stats": [{name, value}…, {"histograms": …}]}`) and the text form (`name: value` lines, histograms as quantiles), under Envoy's dotted stat names.
//!
//! Both list counters and gauges together by name, then the histograms as
//! Envoy's ten quantiles in milliseconds. Envoy gives each quantile for
//! the last flush interval and since start; the gateway has no flush
//! interval (a scrape sees every sample), so the interval is `null` in
//! JSON and the cumulative value is repeated in text.

use std::fmt::Write as _;

use engine::stats::histogram::Merged;
use serde_json::{json, Value as Json};

use super::{Family, Query, Value};

/// Envoy's quantiles, in percent.
const QUANTILES: [f64; 10] = [0.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 100.0];

/// Counters and gauges, and histograms, by Envoy's stat name.
type Taken<'a> = (Vec<(&'a str, u64)>, Vec<(&'a str, &'a Merged)>);

/// The series the query takes, by Envoy's stat name: the numbers, then
/// the histograms.
fn taken<'a>(families: &'a [Family], query: &Query) -> Taken<'a> {
    let (mut numbers, mut histograms) = (Vec::new(), Vec::new());
    for s in families.iter().flat_map(|f| &f.series) {
        if !query.takes(s) {
            continue;
        }
        match &s.value {
            Value::Int(v) => numbers.push((s.stat.as_str(), *v)),
            Value::Histogram(m) => histograms.push((s.stat.as_str(), &**m)),
        }
    }
    numbers.sort_unstable_by(|a, b| a.0.cmp(b.0));
    histograms.sort_unstable_by(|a, b| a.0.cmp(b.0));
    (numbers, histograms)
}

/// A quantile in milliseconds (the shards record microseconds).
fn quantile_ms(m: &Merged, percent: f64) -> Option<f64> {
    m.quantile(percent / 100.0).map(|us| us / 1000.0)
}

pub(super) fn json(families: &[Family], query: &Query) -> Json {
    let (numbers, histograms) = taken(families, query);
    let mut stats: Vec<Json> = numbers
        .iter()
        .map(|(name, v)| json!({ "name": name, "value": v }))
        .collect();
    if !histograms.is_empty() {
        let computed: Vec<Json> = histograms
            .iter()
            .map(|(name, m)| {
                let values: Vec<Json> = QUANTILES
                    .iter()
                    .map(|&q| json!({ "interval": null, "cumulative": quantile_ms(m, q) }))
                    .collect();
                json!({ "name": name, "values": values })
            })
            .collect();
        stats.push(json!({
            "histograms": {
                "supported_quantiles": QUANTILES,
                "computed_quantiles": computed,
            }
        }));
    }
    json!({ "stats": stats })
}

pub(super) fn text(families: &[Family], query: &Query) -> String {
    let (numbers, histograms) = taken(families, query);
    let mut out = String::new();
    for (name, v) in numbers {
        let _ = writeln!(out, "{name}: {v}");
    }
    for (name, m) in histograms {
        if m.is_empty() {
            let _ = writeln!(out, "{name}: No recorded values");
            continue;
        }
        let _ = write!(out, "{name}:");
        for q in QUANTILES {
            let v = quantile_ms(m, q).unwrap_or(0.0);
            let _ = write!(out, " P{q}({v},{v})");
        }
        out.push('\n');
    }
    out
}
