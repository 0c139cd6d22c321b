//! The families `/stats/prometheus` writes, gathered from the shards' blocks, their hosts' counters, the snapshot and the control shard's views: `server.*` and `cluster.<name>.*` here, the client side's in `downstream.rs`, under Envoy's names.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use engine::stats::histogram::Merged;
use engine::tls::Expiry;
use engine::HealthStatus;
use shards::stats::envoy::Registry;
use shards::stats::envoy::{ClusterStats, Codes, Histogram};
use shards::stats::tls::TlsStats;
use shards::stats::{Counter, HostCounter, ShardStats};

use super::super::state::{Inner, ServerState};
use super::downstream;
use super::{Family, Kind};
use crate::outlier::ClusterOutlierStats;

const CLUSTER: &str = "envoy_cluster_name";
const CODE: &str = "envoy_response_code";
pub(super) const CLASS: &str = "envoy_response_code_class";

/// Every family, unordered.
pub(super) fn gather(inner: &Inner) -> Vec<Family> {
    let mut out = Vec::new();
    server(inner, &mut out);
    clusters(inner, &mut out);
    xds(inner, &mut out);
    downstream::http(inner, &mut out);
    downstream::listeners(inner, &mut out);
    super::listener_filters::proxy_proto(inner, &mut out);
    super::overload::overload(inner, &mut out);
    super::filters::filters(inner, &mut out);
    out
}

/// Families by their dotted name, made on first use.
#[derive(Default)]
pub(super) struct Families(BTreeMap<String, Family>);

impl Families {
    pub(super) fn get(&mut self, kind: Kind, dotted: &str) -> &mut Family {
        self.0
            .entry(dotted.to_owned())
            .or_insert_with(|| Family::new(kind, dotted))
    }

    pub(super) fn into_vec(self, out: &mut Vec<Family>) {
        out.extend(self.0.into_values());
    }
}

fn server(inner: &Inner, out: &mut Vec<Family>) {
    let (live, state) = match inner.server_state() {
        ServerState::Live => (1, 0),
        ServerState::Draining => (0, 1),
        ServerState::Initializing => (0, 3),
    };
    let uptime = super::super::state::started().elapsed().as_secs();
    let connections: u64 = inner
        .shards
        .iter()
        .map(|s| s.downstream.cx_active.get())
        .sum();
    let workers_started = u64::from(inner.shards.iter().all(|s| s.serving.get() == 1));
    // Chains with connections open that their listener no longer has (an
    // update changed or removed them): Envoy's draining filter chains,
    // here until their last connection closes.
    let mut draining = BTreeSet::new();
    for shard in &inner.shards {
        shard.envoy.listeners.each(|name, l| {
            let current = inner.snapshot.listener(name);
            for (id, _) in l.chains() {
                if current.is_none_or(|c| c.chain(id).is_none()) {
                    draining.insert((name.to_owned(), id));
                }
            }
        });
    }
    for (dotted, value) in [
        ("server.live", live),
        // The data shards are Envoy's workers.
        ("listener_manager.workers_started", workers_started),
        (
            "listener_manager.total_listeners_active",
            inner.snapshot.listeners.len() as u64,
        ),
        (
            "cluster_manager.active_clusters",
            inner.snapshot.clusters.len() as u64,
        ),
        (
            "listener_manager.total_filter_chains_draining",
            draining.len() as u64,
        ),
        ("server.state", state),
        (
            "server.days_until_first_cert_expiring",
            days_until_first_cert_expiring(inner),
        ),
        ("server.concurrency", inner.shards.len() as u64),
        ("server.uptime", uptime),
        ("server.total_connections", connections),
    ] {
        let mut f = Family::new(Kind::Gauge, dotted);
        f.push(dotted.to_owned(), Vec::new(), value);
        out.push(f);
    }
}

/// The xDS client's, as Envoy's: `control_plane.connected_state` with
/// ADS, the CDS and LDS subscriptions' `update_*` under
/// `cluster_manager.cds.*` and `listener_manager.lds.*` (for the types a
/// source serves), and the warming gauges.
fn xds(inner: &Inner, out: &mut Vec<Family>) {
    let mut gauge = |dotted: &str, v: u64| {
        let mut f = Family::new(Kind::Gauge, dotted);
        f.push(dotted.to_owned(), Vec::new(), v);
        out.push(f);
    };
    let x = inner.xds.as_deref();
    let warming = x.map_or((0, 0), |x| {
        (x.warming_clusters.len(), x.warming_listeners.len())
    });
    gauge("cluster_manager.warming_clusters", warming.0 as u64);
    gauge("listener_manager.total_listeners_warming", warming.1 as u64);
    let Some(x) = x else {
        return;
    };
    if x.types.iter().any(|t| t.source == "ads") {
        gauge("control_plane.connected_state", u64::from(x.connected));
    }
    for (name, scope) in [
        ("clusters", "cluster_manager.cds"),
        ("listeners", "listener_manager.lds"),
    ] {
        let Some(t) = x
            .types
            .iter()
            .find(|t| t.name == name && !t.source.is_empty())
        else {
            continue;
        };
        let at_ms = t
            .last_update
            .and_then(|at| at.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as u64);
        // Each update received was accepted or rejected: an attempt. A
        // stream that failed is the ADS stream's, not counted here.
        for (s, kind, v) in [
            ("update_attempt", Kind::Counter, t.accepted + t.rejected),
            ("update_success", Kind::Counter, t.accepted),
            ("update_rejected", Kind::Counter, t.rejected),
            ("update_failure", Kind::Counter, 0),
            ("update_time", Kind::Gauge, at_ms),
        ] {
            let dotted = format!("{scope}.{s}");
            let mut f = Family::new(kind, &dotted);
            f.push(dotted.clone(), Vec::new(), v);
            out.push(f);
        }
    }
}

/// Envoy's `server.days_until_first_cert_expiring`: whole days until the
/// first of every listener's and cluster's certificates and trusted CAs
/// expires (0 once one has); `u32::MAX` without any, as Envoy.
fn days_until_first_cert_expiring(inner: &Inner) -> u64 {
    let listeners = inner
        .snapshot
        .listeners
        .iter()
        .flat_map(|l| l.chains())
        .filter_map(|c| Some(c.tls.as_ref()?.state()?.expiry));
    let clusters = inner
        .snapshot
        .clusters
        .values()
        .filter_map(|c| c.config.upstream.tls.as_ref()?.expiry());
    let first = listeners
        .chain(clusters)
        .flat_map(|e| [e.cert, e.ca])
        .flatten()
        .min();
    let Some(first) = first else {
        return u64::from(u32::MAX);
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    u64::try_from((first - now).max(0) / 86_400).unwrap_or(0)
}

/// Each shard's blocks of one kind, copied out once per scrape, by the
/// name they are read under (several blocks may share one: a connection
/// manager's on each listener that has it).
pub(super) struct Blocks<T>(Vec<HashMap<Box<str>, Vec<Arc<T>>>>);

impl<T> Blocks<T> {
    pub(super) fn of(inner: &Inner, registry: fn(&ShardStats) -> &Registry<T>) -> Self {
        Self::grouped(inner, registry, |name| Some(name.into()))
    }

    /// Read under `name_of` each block's registry name (`None`: left out).
    pub(super) fn grouped(
        inner: &Inner,
        registry: fn(&ShardStats) -> &Registry<T>,
        name_of: impl Fn(&str) -> Option<Box<str>>,
    ) -> Self {
        let shards = inner.shards.iter().map(|s| {
            let mut by: HashMap<Box<str>, Vec<Arc<T>>> = HashMap::new();
            for (name, b) in registry(s).all() {
                if let Some(n) = name_of(&name) {
                    by.entry(n).or_default().push(b);
                }
            }
            by
        });
        Self(shards.collect())
    }

    /// `f` on each block read as `name`, on each shard.
    pub(super) fn each(&self, name: &str, mut f: impl FnMut(&T)) {
        for shard in &self.0 {
            for b in shard.get(name).into_iter().flatten() {
                f(b);
            }
        }
    }

    /// Every block read as `name`, on every shard.
    pub(super) fn all(&self, name: &str) -> Vec<&T> {
        let each = self.0.iter().filter_map(|shard| shard.get(name));
        each.flatten().map(|b| &**b).collect()
    }

    /// `f` on each block read as `name` on shard `i` alone.
    pub(super) fn each_on(&self, i: usize, name: &str, mut f: impl FnMut(&T)) {
        for b in self
            .0
            .get(i)
            .and_then(|s| s.get(name))
            .into_iter()
            .flatten()
        {
            f(b);
        }
    }

    pub(super) fn sum(&self, name: &str, counter: impl Fn(&T) -> &Counter) -> u64 {
        let mut n = 0u64;
        self.each(name, |b| n = n.wrapping_add(counter(b).get()));
        n
    }

    pub(super) fn merged(&self, name: &str, hist: impl Fn(&T) -> &Histogram) -> Merged {
        let mut m = Merged::new();
        self.each(name, |b| hist(b).merge_into(&mut m));
        m
    }

    pub(super) fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().flat_map(|m| m.keys().map(|k| &**k))
    }
}

/// Codes over shards, by code.
fn codes(
    blocks: &Blocks<ClusterStats>,
    name: &str,
    which: impl Fn(&ClusterStats) -> &Codes,
) -> BTreeMap<u16, u64> {
    let mut by_code = BTreeMap::new();
    blocks.each(name, |b| {
        which(b).each(|code, n| *by_code.entry(code).or_insert(0u64) += n);
    });
    by_code
}

type ClusterCounter = fn(&ClusterStats) -> &Counter;

/// The cluster's counters, its own (a host's go when it leaves).
const CLUSTER_COUNTERS: [(&str, ClusterCounter); 22] = [
    ("upstream_rq_total", |c| &c.upstream_rq_total),
    ("upstream_rq_retry", |c| &c.upstream_rq_retry),
    ("upstream_rq_retry_success", |c| {
        &c.upstream_rq_retry_success
    }),
    ("upstream_rq_retry_limit_exceeded", |c| {
        &c.upstream_rq_retry_limit_exceeded
    }),
    ("upstream_rq_retry_overflow", |c| {
        &c.upstream_rq_retry_overflow
    }),
    ("upstream_rq_per_try_timeout", |c| {
        &c.upstream_rq_per_try_timeout
    }),
    ("upstream_rq_timeout", |c| &c.upstream_rq_timeout),
    ("upstream_rq_pending_overflow", |c| {
        &c.upstream_rq_pending_overflow
    }),
    ("upstream_cx_total", |c| &c.upstream_cx_total),
    ("upstream_cx_connect_fail", |c| &c.upstream_cx_connect_fail),
    ("upstream_cx_overflow", |c| &c.upstream_cx_overflow),
    ("upstream_cx_max_requests", |c| &c.upstream_cx_max_requests),
    ("upstream_cx_idle_timeout", |c| &c.upstream_cx_idle_timeout),
    ("upstream_cx_pool_overflow", |c| {
        &c.upstream_cx_pool_overflow
    }),
    ("upstream_cx_destroy", |c| &c.upstream_cx_destroy),
    ("upstream_cx_destroy_local", |c| {
        &c.upstream_cx_destroy_local
    }),
    ("upstream_cx_destroy_remote", |c| {
        &c.upstream_cx_destroy_remote
    }),
    ("upstream_cx_destroy_with_active_rq", |c| {
        &c.upstream_cx_destroy_with_active_rq
    }),
    ("upstream_cx_destroy_local_with_active_rq", |c| {
        &c.upstream_cx_destroy_local_with_active_rq
    }),
    ("upstream_cx_destroy_remote_with_active_rq", |c| {
        &c.upstream_cx_destroy_remote_with_active_rq
    }),
    ("upstream_cx_rx_bytes_total", |c| {
        &c.upstream_cx_rx_bytes_total
    }),
    ("upstream_cx_tx_bytes_total", |c| {
        &c.upstream_cx_tx_bytes_total
    }),
];

/// Gauges, its hosts' sums (what is open now).
const HOST_GAUGES: [(&str, HostCounter); 2] = [
    ("upstream_rq_active", |h| &h.rq_active),
    ("upstream_cx_active", |h| &h.cx_active),
];

type ClusterHistogram = fn(&ClusterStats) -> &Histogram;

const CLUSTER_HISTOGRAMS: [(&str, ClusterHistogram); 3] = [
    ("upstream_rq_time", |c| &c.upstream_rq_time),
    ("upstream_cx_connect_ms", |c| &c.upstream_cx_connect_ms),
    ("upstream_cx_length_ms", |c| &c.upstream_cx_length_ms),
];

/// The code families: `<prefix>upstream_rq` by code, `_xx` by class,
/// `_completed` in all.
fn code_families(
    fam: &mut Families,
    name: &str,
    by_code: &BTreeMap<u16, u64>,
    names: (&str, &str, &str),
    stat_prefix: &str,
) {
    let (per_code, per_class, completed) = names;
    let label = || vec![(CLUSTER, name.to_owned())];
    let mut classes = BTreeMap::new();
    let f = fam.get(Kind::Counter, per_code);
    for (code, n) in by_code {
        *classes.entry(code / 100).or_insert(0) += n;
        let mut l = vec![(CODE, code.to_string())];
        l.extend(label());
        f.push(
            format!("cluster.{name}.{stat_prefix}upstream_rq_{code}"),
            l,
            *n,
        );
    }
    let f = fam.get(Kind::Counter, per_class);
    for (class, n) in &classes {
        let mut l = vec![(CLASS, class.to_string())];
        l.extend(label());
        f.push(
            format!("cluster.{name}.{stat_prefix}upstream_rq_{class}xx"),
            l,
            *n,
        );
    }
    let total: u64 = by_code.values().sum();
    fam.get(Kind::Counter, completed).push(
        format!("cluster.{name}.{stat_prefix}upstream_rq_completed"),
        label(),
        total,
    );
}

fn clusters(inner: &Inner, out: &mut Vec<Family>) {
    let mut fam = Families::default();
    let blocks = Blocks::of(inner, |s| &s.envoy.clusters);
    let names: BTreeSet<&String> = inner.snapshot.clusters.keys().collect();
    for name in names {
        let Some(c) = inner.snapshot.clusters.get(name) else {
            continue;
        };
        let label = || vec![(CLUSTER, name.clone())];
        let stat = |s: &str| format!("cluster.{name}.{s}");
        for (s, f) in CLUSTER_COUNTERS {
            let v = blocks.sum(name, f);
            fam.get(Kind::Counter, &format!("cluster.{s}"))
                .push(stat(s), label(), v);
        }
        let host_sum = |f: HostCounter| -> u64 {
            c.hosts.iter().map(|h| inner.host_sum(h.id, f)).sum::<u64>()
        };
        for (s, f) in HOST_GAUGES {
            fam.get(Kind::Gauge, &format!("cluster.{s}"))
                .push(stat(s), label(), host_sum(f));
        }
        code_families(
            &mut fam,
            name,
            &codes(&blocks, name, |b| &b.upstream_rq),
            (
                "cluster.upstream_rq",
                "cluster.upstream_rq_xx",
                "cluster.upstream_rq_completed",
            ),
            "",
        );
        code_families(
            &mut fam,
            name,
            &codes(&blocks, name, |b| &b.retry_upstream_rq),
            (
                "cluster.retry.upstream_rq",
                "cluster.retry.upstream_rq_xx",
                "cluster.retry.upstream_rq_completed",
            ),
            "retry.",
        );
        // Envoy's membership: all hosts; healthy ones (neither failed nor
        // ejected); degraded; excluded from balancing.
        let ejected = |h: &engine::snapshot::Host| {
            inner
                .outlier
                .hosts
                .get(&h.id)
                .is_some_and(|o| o.ejected_since.is_some())
        };
        let total = c.hosts.len() as u64;
        let healthy = c
            .hosts
            .iter()
            .filter(|h| {
                matches!(h.health, HealthStatus::Healthy | HealthStatus::Unknown)
                    && !h.excluded()
                    && !ejected(h)
            })
            .count() as u64;
        let degraded = c
            .hosts
            .iter()
            .filter(|h| h.health == HealthStatus::Degraded)
            .count() as u64;
        let excluded = c.hosts.iter().filter(|h| h.excluded()).count() as u64;
        for (s, v) in [
            ("membership_total", total),
            ("membership_healthy", healthy),
            ("membership_degraded", degraded),
            ("membership_excluded", excluded),
        ] {
            fam.get(Kind::Gauge, &format!("cluster.{s}"))
                .push(stat(s), label(), v);
        }
        if let Some(o) = inner.outlier.clusters.get(name.as_str()) {
            let ejections = c.hosts.iter().filter(|h| ejected(h)).count() as u64;
            fam.get(Kind::Gauge, "cluster.outlier_detection.ejections_active")
                .push(
                    stat("outlier_detection.ejections_active"),
                    label(),
                    ejections,
                );
            for (s, v) in outlier_counters(o) {
                let s = format!("outlier_detection.{s}");
                fam.get(Kind::Counter, &format!("cluster.{s}"))
                    .push(stat(&s), label(), v);
            }
        }
        if let Some(h) = inner.health.get(name.as_str()) {
            for (s, v) in [
                ("health_check.attempt", h.checks.attempt.get()),
                ("health_check.success", h.checks.success.get()),
                ("health_check.failure", h.checks.failure.get()),
                (
                    "health_check.network_failure",
                    h.checks.network_failure.get(),
                ),
                (
                    "health_check.passive_failure",
                    h.checks.passive_failure.get(),
                ),
                // `service_name_matcher` is refused: nothing to verify.
                ("health_check.verify_cluster", 0),
            ] {
                fam.get(Kind::Counter, &format!("cluster.{s}"))
                    .push(stat(s), label(), v);
            }
            fam.get(Kind::Gauge, "cluster.health_check.healthy").push(
                stat("health_check.healthy"),
                label(),
                h.healthy,
            );
            fam.get(Kind::Gauge, "cluster.health_check.degraded").push(
                stat("health_check.degraded"),
                label(),
                h.degraded,
            );
        }
        if c.config.per_endpoint_stats {
            endpoints(&mut fam, inner, name, c, &ejected);
        }
        if c.config.upstream.tls.is_some() {
            let ssl: Vec<_> = blocks.all(name).into_iter().map(|b| &b.ssl).collect();
            let base = format!("cluster.{name}");
            let expiry = c.config.upstream.tls.as_ref().and_then(|t| t.expiry());
            ssl_families(
                &mut fam,
                ("cluster", &base),
                (CLUSTER, name),
                ("cipher_suite", expiry.unwrap_or_default()),
                &ssl,
            );
        }
        for (s, f) in CLUSTER_HISTOGRAMS {
            let m = blocks.merged(name, f);
            fam.get(Kind::Histogram, &format!("cluster.{s}"))
                .push_histogram(stat(s), label(), m);
        }
    }
    fam.into_vec(out);
}

/// `track_cluster_stats.per_endpoint_stats`: Envoy's
/// `cluster.<name>.endpoint.<ip>_<port>.*` for each of its hosts, from the
/// hosts' own counters, labelled with the cluster and the endpoint's
/// `ip:port`.
fn endpoints(
    fam: &mut Families,
    inner: &Inner,
    name: &str,
    c: &engine::snapshot::ClusterSnapshot,
    ejected: &dyn Fn(&engine::snapshot::Host) -> bool,
) {
    for h in &c.hosts {
        let sum = |f: HostCounter| inner.host_sum(h.id, f);
        let mut classes = [0u64; 5];
        for shard in &inner.shards {
            if let Some(st) = shard.hosts.get(h.id) {
                for (i, (_, n)) in st.responses.classes().iter().enumerate() {
                    classes[i] = classes[i].wrapping_add(*n);
                }
            }
        }
        let healthy = matches!(h.health, HealthStatus::Healthy | HealthStatus::Unknown)
            && !h.excluded()
            && !ejected(h);
        // A connection attempt counts whether or not it connected, as
        // Envoy's.
        let cx_total = sum(|s| &s.cx_total) + sum(|s| &s.cx_connect_fail);
        let series = [
            (
                "cx_connect_fail",
                Kind::Counter,
                sum(|s| &s.cx_connect_fail),
            ),
            ("cx_total", Kind::Counter, cx_total),
            // An answer in 5xx, or none (reset), is an error.
            ("rq_error", Kind::Counter, classes[4] + sum(|s| &s.rq_reset)),
            ("rq_success", Kind::Counter, classes[..4].iter().sum()),
            ("rq_timeout", Kind::Counter, sum(|s| &s.rq_timeout)),
            ("rq_total", Kind::Counter, sum(|s| &s.rq_total)),
            ("cx_active", Kind::Gauge, sum(|s| &s.cx_active)),
            ("healthy", Kind::Gauge, u64::from(healthy)),
            ("rq_active", Kind::Gauge, sum(|s| &s.rq_active)),
            ("rq_pending_active", Kind::Gauge, 0),
        ];
        // Envoy's dotted name as a listener's (`[__1]_80`); its label
        // keeps the address as it is.
        let dotted = downstream::address_label(h.address);
        for (s, kind, v) in series {
            let mut labels = vec![
                (CLUSTER, name.to_owned()),
                ("envoy_endpoint_address", h.address.to_string()),
            ];
            // A host with a name (a DNS cluster's, an EDS endpoint's
            // `hostname`) is labelled with it too, as Envoy's.
            if let Some(host) = h.hostname.as_deref().filter(|n| !n.is_empty()) {
                labels.push(("envoy_endpoint_hostname", host.to_owned()));
            }
            fam.get(kind, &format!("cluster.endpoint.{s}")).push(
                format!("cluster.{name}.endpoint.{dotted}.{s}"),
                labels,
                v,
            );
        }
    }
}

/// Envoy's `<scope>.ssl.*` of one listener or cluster (`base` is its
/// dotted stat name, `owner` its label), summed over `blocks`: the
/// counters Envoy makes with the TLS context (at zero from the start),
/// then handshakes by version, cipher suite and group under their labels,
/// which come first. `cipher` is the cipher's label: Envoy's listeners say
/// `envoy_ssl_cipher`, its clusters `cipher_suite`.
pub(super) fn ssl_families(
    fam: &mut Families,
    (scope, base): (&str, &str),
    owner: (&'static str, &str),
    (cipher, expiry): (&'static str, Expiry),
    blocks: &[&TlsStats],
) {
    // Its certificates' expiry: Envoy names a certificate configured
    // without a name (files, inline) `unnamed_cert_<sha256("")[..8]>`, so
    // its several unnamed ones are one series: the earliest here.
    for (name, at) in [
        ("unnamed_cert_e3b0c442", expiry.cert),
        ("unnamed_ca_cert_e3b0c442", expiry.ca),
    ] {
        let Some(at) = at else { continue };
        let mut l = vec![("envoy_tls_certificate", name.to_owned())];
        l.push((owner.0, owner.1.to_owned()));
        fam.get(
            Kind::Gauge,
            &format!("{scope}.ssl.certificate.expiration_unix_time_seconds"),
        )
        .push(
            format!("{base}.ssl.certificate.{name}.expiration_unix_time_seconds"),
            l,
            u64::try_from(at).unwrap_or(0),
        );
    }
    type TlsCounter = fn(&TlsStats) -> &Counter;
    let counters: [(&str, Option<TlsCounter>); 12] = [
        ("connection_error", Some(|t| &t.connection_error)),
        ("fail_verify_cert_hash", None),
        ("fail_verify_error", Some(|t| &t.fail_verify_error)),
        ("fail_verify_no_cert", Some(|t| &t.fail_verify_no_cert)),
        ("fail_verify_san", Some(|t| &t.fail_verify_san)),
        ("handshake", Some(|t| &t.handshake)),
        ("no_certificate", Some(|t| &t.no_certificate)),
        ("ocsp_staple_failed", None),
        ("ocsp_staple_omitted", None),
        ("ocsp_staple_requests", None),
        ("ocsp_staple_responses", None),
        ("session_reused", Some(|t| &t.session_reused)),
    ];
    let label = || vec![(owner.0, owner.1.to_owned())];
    for (s, f) in counters {
        let v = f.map_or(0, |f| blocks.iter().map(|b| f(b).get()).sum());
        fam.get(Kind::Counter, &format!("{scope}.ssl.{s}")).push(
            format!("{base}.ssl.{s}"),
            label(),
            v,
        );
    }
    let mut by_name: [BTreeMap<String, u64>; 3] = Default::default();
    for b in blocks {
        for (i, names) in b.by_name().into_iter().enumerate() {
            for (name, n) in names {
                *by_name[i].entry(name).or_insert(0) += n;
            }
        }
    }
    for ((s, tag), names) in [
        ("versions", "envoy_ssl_version"),
        ("ciphers", cipher),
        ("curves", "envoy_ssl_curve"),
    ]
    .into_iter()
    .zip(by_name)
    {
        let f = fam.get(Kind::Counter, &format!("{scope}.ssl.{s}"));
        for (name, n) in names {
            let mut l = vec![(tag, name.clone())];
            l.extend(label());
            f.push(format!("{base}.ssl.{s}.{name}"), l, n);
        }
    }
}

/// Envoy 1.40's `outlier_detection.*` counters of a cluster with a
/// detector. The local-origin and degradation detectors are not run here:
/// their series are kept at zero, as Envoy keeps them without the config
/// that turns them on.
fn outlier_counters(o: &ClusterOutlierStats) -> Vec<(String, u64)> {
    use engine::outlier::EjectionReason;
    let mut out = Vec::with_capacity(20);
    for (i, reason) in EjectionReason::ALL.iter().enumerate() {
        out.push((
            format!("ejections_detected_{}", reason.as_str()),
            o.detected[i],
        ));
        out.push((
            format!("ejections_enforced_{}", reason.as_str()),
            o.enforced[i],
        ));
    }
    for zero in [
        "ejections_detected_consecutive_local_origin_failure",
        "ejections_enforced_consecutive_local_origin_failure",
        "ejections_detected_local_origin_success_rate",
        "ejections_enforced_local_origin_success_rate",
        "ejections_detected_local_origin_failure_percentage",
        "ejections_enforced_local_origin_failure_percentage",
        "ejections_detected_degradation",
    ] {
        out.push((zero.to_owned(), 0));
    }
    out.push((
        "ejections_enforced_total".to_owned(),
        o.enforced.iter().sum(),
    ));
    out.push(("ejections_overflow".to_owned(), o.overflow));
    // Deprecated, kept as Envoy keeps them.
    out.push(("ejections_total".to_owned(), o.total_under_cap));
    out.push((
        "ejections_consecutive_5xx".to_owned(),
        o.detected[EjectionReason::Consecutive5xx.index()],
    ));
    out.push((
        "ejections_success_rate".to_owned(),
        o.detected[EjectionReason::SuccessRate.index()],
    ));
    out
}
