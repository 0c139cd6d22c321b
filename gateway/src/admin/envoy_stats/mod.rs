//! `/stats/prometheus`: Envoy's own series, as Envoy 1.40 exposes them (its names, its tag-extracted labels in its order, `# TYPE` lines, counters then gauges then histograms with Envoy's default buckets), summed and merged over the shards at the scrape; `?filter=` (a regex on Envoy's dotted stat name) and `?usedonly` as Envoy's.
//!
//! The series are gathered into [`Family`]s (`families.rs`), then sorted
//! and written as Envoy writes them, so a dashboard or alert built on
//! Envoy's reads the same lines.

mod downstream;
mod families;
mod filters;
mod forms;
mod listener_filters;
mod overload;

use std::fmt::Write as _;

use engine::stats::histogram::{Merged, ENVOY_DEFAULT_BUCKETS_MS};

use super::exposition::escape;
use super::state::Inner;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

enum Value {
    Int(u64),
    /// Microseconds (the shards record those), written in Envoy's
    /// milliseconds.
    Histogram(Box<Merged>),
}

/// One series: its labels in Envoy's order (the tag taken off the name's
/// end first), and its stat's dotted name (what `filter` reads, and what
/// orders a family's series).
struct Series {
    stat: String,
    labels: Vec<(&'static str, String)>,
    value: Value,
}

/// Every series of one metric name.
struct Family {
    kind: Kind,
    /// Envoy's name with its tags taken out (`cluster.upstream_rq_xx`):
    /// what orders the families.
    dotted: String,
    series: Vec<Series>,
}

impl Family {
    fn new(kind: Kind, dotted: &str) -> Self {
        Self {
            kind,
            dotted: dotted.to_owned(),
            series: Vec::new(),
        }
    }

    fn push(&mut self, stat: String, labels: Vec<(&'static str, String)>, value: u64) {
        self.series.push(Series {
            stat,
            labels,
            value: Value::Int(value),
        });
    }

    fn push_histogram(&mut self, stat: String, labels: Vec<(&'static str, String)>, m: Merged) {
        self.series.push(Series {
            stat,
            labels,
            value: Value::Histogram(Box::new(m)),
        });
    }
}

/// What the query asks: Envoy's `filter` (a regex, unanchored, on the
/// dotted stat name) and `usedonly`.
pub(super) struct Query {
    filter: Option<regex::Regex>,
    used_only: bool,
    /// `format=`: `json`, `prometheus`, else Envoy's text.
    pub(super) format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    Text,
    Json,
    Prometheus,
}

impl Query {
    /// `Err`: a `filter` that is no regex (Envoy answers 400 too).
    pub(super) fn parse(query: &str) -> Result<Self, String> {
        let mut q = Query {
            filter: None,
            used_only: false,
            format: Format::Text,
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "usedonly" => q.used_only = true,
                "format" => {
                    q.format = match v {
                        "json" => Format::Json,
                        "prometheus" => Format::Prometheus,
                        "text" | "" => Format::Text,
                        other => return Err(format!("unknown format {other:?}")),
                    }
                }
                "filter" if !v.is_empty() => {
                    let v = percent_decode(v);
                    let re = regex::RegexBuilder::new(&v)
                        .size_limit(1 << 20)
                        .build()
                        .map_err(|e| format!("invalid regex: {e}"))?;
                    q.filter = Some(re);
                }
                _ => {}
            }
        }
        Ok(q)
    }

    fn takes(&self, s: &Series) -> bool {
        let used = match &s.value {
            Value::Int(v) => *v != 0,
            Value::Histogram(m) => !m.is_empty(),
        };
        (!self.used_only || used) && self.filter.as_ref().is_none_or(|f| f.is_match(&s.stat))
    }
}

/// `%XX` and `+` in a query value.
fn percent_decode(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(x) => {
                        out.push(x);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Envoy's `/stats?format=json`.
pub(super) fn render_json(inner: &Inner, query: &Query) -> serde_json::Value {
    forms::json(&families::gather(inner), query)
}

/// Envoy's `/stats` text form (`name: value` lines).
pub(super) fn render_text(inner: &Inner, query: &Query) -> String {
    forms::text(&families::gather(inner), query)
}

/// The Prometheus page: every family, in Envoy's order.
pub(super) fn render(inner: &Inner, query: &Query) -> String {
    let mut families = families::gather(inner);
    families.sort_by(|a, b| (a.kind, &a.dotted).cmp(&(b.kind, &b.dotted)));
    let mut out = String::new();
    for mut f in families {
        f.series.retain(|s| query.takes(s));
        if f.series.is_empty() {
            continue;
        }
        f.series.sort_by(|a, b| a.stat.cmp(&b.stat));
        write_family(&mut out, &f);
    }
    out
}

/// Envoy's metric name for a dotted one: `envoy_` and the name with
/// every character but `[a-zA-Z0-9_]` made `_`.
fn metric_name(dotted: &str) -> String {
    let mut n = String::with_capacity(6 + dotted.len());
    n.push_str("envoy_");
    n.extend(
        dotted
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }),
    );
    n
}

fn labels(out: &mut String, labels: &[(&'static str, String)], le: Option<&str>) {
    out.push('{');
    let mut first = true;
    for (k, v) in labels {
        if !first {
            out.push(',');
        }
        first = false;
        let _ = write!(out, "{k}=\"{}\"", escape(v));
    }
    if let Some(le) = le {
        if !first {
            out.push(',');
        }
        let _ = write!(out, "le=\"{le}\"");
    }
    out.push('}');
}

fn write_family(out: &mut String, f: &Family) {
    let name = metric_name(&f.dotted);
    let _ = writeln!(out, "# TYPE {name} {}", f.kind.name());
    for s in &f.series {
        match &s.value {
            Value::Int(v) => {
                out.push_str(&name);
                labels(out, &s.labels, None);
                let _ = writeln!(out, " {v}");
            }
            Value::Histogram(m) => {
                for le in ENVOY_DEFAULT_BUCKETS_MS {
                    let _ = write!(out, "{name}_bucket");
                    labels(out, &s.labels, Some(&format!("{le}")));
                    let _ = writeln!(out, " {}", m.cumulative_le_ms(le));
                }
                let _ = write!(out, "{name}_bucket");
                labels(out, &s.labels, Some("+Inf"));
                let _ = writeln!(out, " {}", m.count());
                let _ = write!(out, "{name}_sum");
                labels(out, &s.labels, None);
                // Milliseconds, as Envoy's.
                let _ = writeln!(out, " {}", m.sum() as f64 / 1000.0);
                let _ = write!(out, "{name}_count");
                labels(out, &s.labels, None);
                let _ = writeln!(out, " {}", m.count());
            }
        }
    }
}

#[cfg(test)]
mod tests;
