//! The listener filters' families: the PROXY protocol filter's `proxy_proto.[<stat_prefix>.]*` (shared by every listener with the same prefix, as Envoy's) and the root `downstream_cx_proxy_proto_error`, from the start for each prefix the listeners name.

use std::collections::BTreeSet;

use shards::stats::proxy_proto::{ProxyProtoStats, VersionStats};
use shards::stats::Counter;

use super::super::state::Inner;
use super::families::{Blocks, Families};
use super::{Family, Kind};

const PREFIX: &str = "envoy_proxy_protocol_prefix";
const VERSION: &str = "envoy_proxy_protocol_version";

type VersionCounter = fn(&VersionStats) -> &Counter;

const VERSION_COUNTERS: [(&str, VersionCounter); 3] = [
    ("found", |v| &v.found),
    ("disallowed", |v| &v.disallowed),
    ("error", |v| &v.error),
];

type Versioned = fn(&ProxyProtoStats) -> &VersionStats;

const VERSIONS: [(&str, Versioned); 2] = [("1", |s| &s.v1), ("2", |s| &s.v2)];

pub(super) fn proxy_proto(inner: &Inner, out: &mut Vec<Family>) {
    let prefixes: BTreeSet<&str> = inner
        .snapshot
        .listeners
        .iter()
        .filter_map(|l| l.listener_filters.proxy_protocol.as_ref())
        .map(|p| p.stat_prefix.as_str())
        .collect();
    if prefixes.is_empty() {
        return;
    }
    let mut fam = Families::default();
    let errors: u64 = inner
        .shards
        .iter()
        .map(|s| s.downstream.cx_proxy_proto_error.get())
        .sum();
    fam.get(Kind::Counter, "downstream_cx_proxy_proto_error")
        .push("downstream_cx_proxy_proto_error".into(), Vec::new(), errors);
    let blocks = Blocks::of(inner, |s| &s.envoy.proxy_proto);
    for prefix in prefixes {
        let (base, label) = match prefix {
            "" => ("proxy_proto".to_owned(), Vec::new()),
            p => (format!("proxy_proto.{p}"), vec![(PREFIX, p.to_owned())]),
        };
        for (name, f) in [
            (
                "not_found_allowed",
                (|s| &s.not_found_allowed) as fn(&ProxyProtoStats) -> &Counter,
            ),
            ("not_found_disallowed", |s| &s.not_found_disallowed),
        ] {
            fam.get(Kind::Counter, &format!("proxy_proto.{name}")).push(
                format!("{base}.{name}"),
                label.clone(),
                blocks.sum(prefix, f),
            );
        }
        for (version, of) in VERSIONS {
            for (name, f) in VERSION_COUNTERS {
                let mut labels = label.clone();
                labels.push((VERSION, version.to_owned()));
                let mut v = 0u64;
                blocks.each(prefix, |b| v = v.wrapping_add(f(of(b)).get()));
                fam.get(Kind::Counter, &format!("proxy_proto.{name}")).push(
                    format!("{base}.versions.v{version}.{name}"),
                    labels,
                    v,
                );
            }
        }
    }
    fam.into_vec(out);
}
