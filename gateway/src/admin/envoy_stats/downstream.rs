//! The client side's families under Envoy's names: `http.<stat_prefix>.*` (a connection manager's, summed over the listeners that have it; its filters' are `filters.rs`') and `listener.<address>.*` (with `worker_<n>.*` per data shard and `http.<stat_prefix>.*` per listener).

use std::collections::BTreeSet;

use shards::stats::envoy::{http_block_name, split_http_block_name};
use shards::stats::envoy::{Histogram, HttpStats, ListenerStats};
use shards::stats::Counter;

use super::super::state::Inner;
use super::families::{ssl_families, Blocks, Families, CLASS};
use super::{Family, Kind};

const HTTP: &str = "envoy_http_conn_manager_prefix";
const LISTENER: &str = "envoy_listener_address";
const WORKER: &str = "envoy_worker_id";

type HttpCounter = fn(&HttpStats) -> &Counter;

const HTTP_COUNTERS: [(&str, HttpCounter); 19] = [
    ("downstream_cx_total", |h| &h.downstream_cx_total),
    ("downstream_cx_destroy", |h| &h.downstream_cx_destroy),
    ("downstream_cx_destroy_local", |h| {
        &h.downstream_cx_destroy_local
    }),
    ("downstream_cx_destroy_remote", |h| {
        &h.downstream_cx_destroy_remote
    }),
    ("downstream_cx_destroy_active_rq", |h| {
        &h.downstream_cx_destroy_active_rq
    }),
    ("downstream_cx_destroy_local_active_rq", |h| {
        &h.downstream_cx_destroy_local_active_rq
    }),
    ("downstream_cx_destroy_remote_active_rq", |h| {
        &h.downstream_cx_destroy_remote_active_rq
    }),
    ("downstream_cx_rx_bytes_total", |h| {
        &h.downstream_cx_rx_bytes_total
    }),
    ("downstream_cx_tx_bytes_total", |h| {
        &h.downstream_cx_tx_bytes_total
    }),
    ("downstream_cx_http1_total", |h| {
        &h.downstream_cx_http1_total
    }),
    ("downstream_cx_http2_total", |h| {
        &h.downstream_cx_http2_total
    }),
    ("downstream_cx_ssl_total", |h| &h.downstream_cx_ssl_total),
    ("downstream_rq_total", |h| &h.downstream_rq_total),
    ("downstream_rq_completed", |h| &h.downstream_rq_completed),
    ("downstream_rq_http1_total", |h| {
        &h.downstream_rq_http1_total
    }),
    ("downstream_rq_overload_close", |h| {
        &h.downstream_rq_overload_close
    }),
    ("downstream_cx_overload_disable_keepalive", |h| {
        &h.downstream_cx_overload_disable_keepalive
    }),
    ("downstream_rq_http2_total", |h| {
        &h.downstream_rq_http2_total
    }),
    ("no_route", |h| &h.no_route),
];

const HTTP_GAUGES: [(&str, HttpCounter); 5] = [
    ("downstream_cx_active", |h| &h.downstream_cx_active),
    ("downstream_cx_http1_active", |h| {
        &h.downstream_cx_http1_active
    }),
    ("downstream_cx_http2_active", |h| {
        &h.downstream_cx_http2_active
    }),
    ("downstream_cx_ssl_active", |h| &h.downstream_cx_ssl_active),
    ("downstream_rq_active", |h| &h.downstream_rq_active),
];

type HttpHistogram = fn(&HttpStats) -> &Histogram;

const HTTP_HISTOGRAMS: [(&str, HttpHistogram); 2] = [
    ("downstream_rq_time", |h| &h.downstream_rq_time),
    ("downstream_cx_length_ms", |h| &h.downstream_cx_length_ms),
];

/// `http.<stat_prefix>.*`: every connection manager of the snapshot's
/// listeners, and any a shard still counts for.
pub(super) fn http(inner: &Inner, out: &mut Vec<Family>) {
    let mut prefixes: BTreeSet<String> = inner
        .snapshot
        .listeners
        .iter()
        .flat_map(|l| l.chains())
        // A TCP proxy's chain has no connection manager of its own.
        .filter(|c| c.tcp_proxy.is_none())
        .map(|c| c.http.stat_prefix.clone())
        .collect();
    // Each listener's block of a prefix, read as the prefix's.
    let blocks = Blocks::grouped(
        inner,
        |s| &s.envoy.http,
        |name| split_http_block_name(name).map(|(_, prefix)| prefix.into()),
    );
    prefixes.extend(blocks.names().map(str::to_owned));
    let mut fam = Families::default();
    for prefix in &prefixes {
        let label = || vec![(HTTP, prefix.clone())];
        let stat = |s: &str| format!("http.{prefix}.{s}");
        for (s, f) in HTTP_COUNTERS {
            let v = blocks.sum(prefix, f);
            fam.get(Kind::Counter, &format!("http.{s}"))
                .push(stat(s), label(), v);
        }
        for (s, f) in HTTP_GAUGES {
            let v = blocks.sum(prefix, f);
            fam.get(Kind::Gauge, &format!("http.{s}"))
                .push(stat(s), label(), v);
        }
        // Envoy keeps the five classes from the start.
        let f = fam.get(Kind::Counter, "http.downstream_rq_xx");
        for (i, n) in classes(&blocks, prefix).iter().enumerate() {
            let class = i + 1;
            let mut l = vec![(CLASS, class.to_string())];
            l.extend(label());
            f.push(stat(&format!("downstream_rq_{class}xx")), l, *n);
        }
        for (s, h) in HTTP_HISTOGRAMS {
            let m = blocks.merged(prefix, h);
            fam.get(Kind::Histogram, &format!("http.{s}"))
                .push_histogram(stat(s), label(), m);
        }
    }
    fam.into_vec(out);
}

/// Answers by class over the blocks read as `name`.
fn classes(blocks: &Blocks<HttpStats>, name: &str) -> [u64; 5] {
    let mut classes = [0u64; 5];
    blocks.each(name, |h| {
        for (i, (_, n)) in h.downstream_rq_xx.classes().iter().enumerate() {
            classes[i] = classes[i].wrapping_add(*n);
        }
    });
    classes
}

/// Envoy's name for a listener's address: `127.0.0.1_10000`,
/// `[__1]_10000`.
pub(super) fn address_label(address: std::net::SocketAddr) -> String {
    match address.ip() {
        std::net::IpAddr::V4(ip) => format!("{ip}_{}", address.port()),
        std::net::IpAddr::V6(ip) => {
            format!("[{}]_{}", ip.to_string().replace(':', "_"), address.port())
        }
    }
}

type ListenerCounter = fn(&ListenerStats) -> &Counter;

const LISTENER_COUNTERS: [(&str, Kind, ListenerCounter); 7] = [
    ("downstream_cx_total", Kind::Counter, |l| {
        &l.downstream_cx_total
    }),
    ("downstream_cx_destroy", Kind::Counter, |l| {
        &l.downstream_cx_destroy
    }),
    ("no_filter_chain_match", Kind::Counter, |l| {
        &l.no_filter_chain_match
    }),
    ("downstream_pre_cx_timeout", Kind::Counter, |l| {
        &l.downstream_pre_cx_timeout
    }),
    ("downstream_cx_overload_reject", Kind::Counter, |l| {
        &l.downstream_cx_overload_reject
    }),
    ("downstream_global_cx_overflow", Kind::Counter, |l| {
        &l.downstream_global_cx_overflow
    }),
    ("downstream_cx_active", Kind::Gauge, |l| {
        &l.downstream_cx_active
    }),
];

/// `listener.<ip>_<port>.*`, for each listener of the snapshot (the
/// shards count by the listener's name): its connections, each data
/// shard's (Envoy's workers), and its connection managers' answers.
pub(super) fn listeners(inner: &Inner, out: &mut Vec<Family>) {
    let mut fam = Families::default();
    let blocks = Blocks::of(inner, |s| &s.envoy.listeners);
    let http = Blocks::of(inner, |s| &s.envoy.http);
    for l in &inner.snapshot.listeners {
        let address = address_label(l.address);
        let label = || vec![(LISTENER, address.clone())];
        let stat = |s: &str| format!("listener.{address}.{s}");
        for (s, kind, f) in LISTENER_COUNTERS {
            let v = blocks.sum(&l.name, f);
            fam.get(kind, &format!("listener.{s}"))
                .push(stat(s), label(), v);
        }
        let m = blocks.merged(&l.name, |b| &b.downstream_cx_length_ms);
        fam.get(Kind::Histogram, "listener.downstream_cx_length_ms")
            .push_histogram(stat("downstream_cx_length_ms"), label(), m);
        if l.chains().any(|c| c.tls.is_some()) {
            let ssl: Vec<_> = blocks.all(&l.name).into_iter().map(|b| &b.ssl).collect();
            let base = format!("listener.{address}");
            // The earliest over its chains' contexts.
            let mut expiry = engine::tls::Expiry::default();
            for e in l
                .chains()
                .filter_map(|c| Some(c.tls.as_ref()?.state()?.expiry))
            {
                expiry.cert = expiry.cert.into_iter().chain(e.cert).min();
                expiry.ca = expiry.ca.into_iter().chain(e.ca).min();
            }
            ssl_families(
                &mut fam,
                ("listener", &base),
                (LISTENER, &address),
                ("envoy_ssl_cipher", expiry),
                &ssl,
            );
        }
        // Each data shard's connections, the worker's label first.
        for worker in 0..inner.shards.len() {
            for (s, kind, f) in [
                (
                    "downstream_cx_total",
                    Kind::Counter,
                    (|l| &l.downstream_cx_total) as ListenerCounter,
                ),
                ("downstream_cx_active", Kind::Gauge, |l| {
                    &l.downstream_cx_active
                }),
            ] {
                let mut v = 0u64;
                blocks.each_on(worker, &l.name, |b| v = v.wrapping_add(f(b).get()));
                let mut labels = vec![(WORKER, worker.to_string())];
                labels.extend(label());
                fam.get(kind, &format!("listener.worker.{s}")).push(
                    stat(&format!("worker_{worker}.{s}")),
                    labels,
                    v,
                );
            }
        }
        // Its connection managers' answers: Envoy's per-listener copy of
        // the classes and `_completed`, from the start.
        let prefixes: BTreeSet<&str> = l
            .chains()
            .filter(|c| c.tcp_proxy.is_none())
            .map(|c| c.http.stat_prefix.as_str())
            .collect();
        for prefix in prefixes {
            let name = http_block_name(&l.name, prefix);
            let labels = || vec![(HTTP, prefix.to_owned()), (LISTENER, address.clone())];
            let stat = |s: &str| format!("listener.{address}.http.{prefix}.{s}");
            let f = fam.get(Kind::Counter, "listener.http.downstream_rq_xx");
            for (i, n) in classes(&http, &name).iter().enumerate() {
                let class = i + 1;
                let mut l = vec![(CLASS, class.to_string())];
                l.extend(labels());
                f.push(stat(&format!("downstream_rq_{class}xx")), l, *n);
            }
            let completed = http.sum(&name, |h| &h.downstream_rq_completed);
            fam.get(Kind::Counter, "listener.http.downstream_rq_completed")
                .push(stat("downstream_rq_completed"), labels(), completed);
        }
    }
    fam.into_vec(out);
}
