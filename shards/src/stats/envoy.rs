//! The series Envoy keeps per cluster, per connection manager (`stat_prefix`) and per listener, as one shard counts them: counters and latency histograms written by the shard alone, read and merged over shards by the admin.
//!
//! Each block is found by its name once (a pool's cluster when the pool
//! is made, a connection's manager and listener when it is accepted) and
//! then held: a request touches its blocks through those handles, with no
//! lookup and no lock. Blocks stay for the shard's life, as a name's
//! counters must not go back to zero while a dashboard watches them; how
//! many there are is bounded by the names the config ever had.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use engine::stats::histogram::{self, Merged, BUCKETS};

use super::{Counter, StatusClasses};

/// Single-writer counters made a chunk at a time, at the first count in
/// it: a histogram's samples fill a few of its decades, a cluster's
/// answers a few status classes, so a used block costs a few chunks, not
/// its whole range.
#[derive(Debug)]
struct Chunked<const CHUNK: usize, const N: usize>([OnceLock<Box<[AtomicU64; CHUNK]>>; N]);

impl<const CHUNK: usize, const N: usize> Default for Chunked<CHUNK, N> {
    fn default() -> Self {
        Self(std::array::from_fn(|_| OnceLock::new()))
    }
}

impl<const CHUNK: usize, const N: usize> Chunked<CHUNK, N> {
    /// Only the owning shard counts; an index past the range is dropped.
    #[inline]
    fn inc(&self, i: usize) {
        let Some(slot) = self.0.get(i / CHUNK) else {
            return;
        };
        let chunk = slot.get_or_init(|| Box::new(std::array::from_fn(|_| AtomicU64::new(0))));
        let c = &chunk[i % CHUNK];
        // One writer: a load and a store, as `Counter`'s.
        c.store(c.load(Relaxed).wrapping_add(1), Relaxed);
    }

    /// Each index counted, and its count.
    fn each(&self, mut f: impl FnMut(usize, u64)) {
        for (at, slot) in self.0.iter().enumerate() {
            let Some(chunk) = slot.get() else { continue };
            for (i, c) in chunk.iter().enumerate() {
                let n = c.load(Relaxed);
                if n != 0 {
                    f(at * CHUNK + i, n);
                }
            }
        }
    }

    /// Bytes its chunks hold.
    fn bytes(&self) -> usize {
        self.0.iter().filter(|s| s.get().is_some()).count() * CHUNK * 8
    }
}

/// Histogram buckets in chunks of 82 (a decade is 90 buckets).
const HISTOGRAM_CHUNK: usize = 82;
const _: () = assert!(HISTOGRAM_CHUNK * 10 == BUCKETS);

/// A latency histogram on one shard (microseconds), each chunk of its
/// buckets made at its first sample.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: Chunked<HISTOGRAM_CHUNK, 10>,
    sum: Counter,
    count: Counter,
}

impl Histogram {
    /// Only the owning shard records.
    #[inline]
    pub fn record(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.buckets.inc(histogram::bucket_of(us));
        self.sum.add(us);
        self.count.inc();
    }

    /// Adds this shard's samples to `into`.
    pub fn merge_into(&self, into: &mut Merged) {
        if self.count.get() == 0 {
            return;
        }
        self.buckets.each(|i, n| into.add(i, n));
        into.add_sum(self.sum.get());
    }

    pub fn count(&self) -> u64 {
        self.count.get()
    }

    /// Bytes its bucket chunks hold (its own size aside).
    pub fn bytes(&self) -> usize {
        self.buckets.bytes()
    }
}

/// Counts by HTTP status code (100..=599), a class at a time: Envoy's
/// `upstream_rq_<code>`, whose `_xx` and `_completed` are its sums.
#[derive(Debug, Default)]
pub struct Codes {
    counts: Chunked<100, 5>,
}

impl Codes {
    /// Only the owning shard records; a code outside 100..=599 is not
    /// one (the codecs refuse such heads).
    #[inline]
    pub fn record(&self, code: u16) {
        if let Some(i) = code.checked_sub(100) {
            self.counts.inc(usize::from(i));
        }
    }

    /// Each code counted, and its count.
    pub fn each(&self, mut f: impl FnMut(u16, u64)) {
        self.counts.each(|i, n| f(100 + i as u16, n));
    }

    /// Bytes its chunks hold.
    pub fn bytes(&self) -> usize {
        self.counts.bytes()
    }
}

/// Envoy's `cluster.<name>.*` that are not the sum of its hosts'.
#[derive(Debug, Default)]
pub struct ClusterStats {
    /// Attempts put on a connection (`upstream_rq_total`).
    pub upstream_rq_total: Counter,
    /// The answers the cluster gave its requests, the gateway's own for
    /// them (a refused connection's 503) included: Envoy's
    /// `upstream_rq_<code>` (and `_xx`, `_completed`).
    pub upstream_rq: Codes,
    /// The answers that were retried (`retry.upstream_rq_<code>`).
    pub retry_upstream_rq: Codes,
    /// From the request's end (as the router saw it) to the answer's end.
    pub upstream_rq_time: Histogram,
    /// From the connection's start to its being usable (TLS included).
    pub upstream_cx_connect_ms: Histogram,
    /// From the connection's start to its close.
    pub upstream_cx_length_ms: Histogram,
    pub upstream_rq_retry: Counter,
    pub upstream_rq_retry_success: Counter,
    pub upstream_rq_retry_limit_exceeded: Counter,
    pub upstream_rq_per_try_timeout: Counter,
    /// Counted here as well as per host: a host's counters go when it
    /// leaves the config (its id is reused), a cluster's must not.
    pub upstream_rq_timeout: Counter,
    pub upstream_rq_pending_overflow: Counter,
    pub upstream_rq_retry_overflow: Counter,
    /// Connections attempted (Envoy counts a failed one too).
    pub upstream_cx_total: Counter,
    pub upstream_cx_connect_fail: Counter,
    pub upstream_cx_overflow: Counter,
    pub upstream_cx_max_requests: Counter,
    pub upstream_cx_idle_timeout: Counter,
    pub upstream_cx_pool_overflow: Counter,
    /// Connections ended (a refused connect too, as the remote's), by
    /// whom, and of those with requests still on them.
    pub upstream_cx_destroy: Counter,
    pub upstream_cx_destroy_local: Counter,
    pub upstream_cx_destroy_remote: Counter,
    pub upstream_cx_destroy_with_active_rq: Counter,
    pub upstream_cx_destroy_local_with_active_rq: Counter,
    pub upstream_cx_destroy_remote_with_active_rq: Counter,
    /// Bytes read from and written to its hosts (over TLS, the
    /// plaintext, as Envoy's).
    pub upstream_cx_rx_bytes_total: Counter,
    pub upstream_cx_tx_bytes_total: Counter,
    /// Its TLS handshakes (`ssl.*`), for a cluster with a TLS transport.
    pub ssl: super::tls::TlsStats,
}

/// Envoy's `http.<stat_prefix>.*`: a connection manager's.
#[derive(Debug, Default)]
pub struct HttpStats {
    pub downstream_cx_total: Counter,
    pub downstream_cx_active: Counter,
    pub downstream_cx_http1_total: Counter,
    pub downstream_cx_http2_total: Counter,
    pub downstream_cx_ssl_total: Counter,
    /// Open now, by protocol and TLS (gauges).
    pub downstream_cx_http1_active: Counter,
    pub downstream_cx_http2_active: Counter,
    pub downstream_cx_ssl_active: Counter,
    pub downstream_rq_total: Counter,
    pub downstream_rq_active: Counter,
    pub downstream_rq_http1_total: Counter,
    pub downstream_rq_http2_total: Counter,
    /// Answers by class (`downstream_rq_1xx` … `_5xx`), and in all
    /// (`downstream_rq_completed`).
    pub downstream_rq_xx: StatusClasses,
    pub downstream_rq_completed: Counter,
    /// From the request's head to the answer's end.
    pub downstream_rq_time: Histogram,
    pub downstream_cx_destroy: Counter,
    /// Closed by the client (its FIN, or its socket failed) or by the
    /// gateway; and of those, with requests still open.
    pub downstream_cx_destroy_remote: Counter,
    pub downstream_cx_destroy_local: Counter,
    pub downstream_cx_destroy_active_rq: Counter,
    pub downstream_cx_destroy_remote_active_rq: Counter,
    pub downstream_cx_destroy_local_active_rq: Counter,
    /// Bytes read from and written to its clients (over TLS, the
    /// plaintext, as Envoy's).
    pub downstream_cx_rx_bytes_total: Counter,
    pub downstream_cx_tx_bytes_total: Counter,
    pub downstream_cx_length_ms: Histogram,
    /// Requests no route took (`no_route`).
    pub no_route: Counter,
    /// The overload manager's: requests answered 503
    /// (`stop_accepting_requests`), connections closed after a response
    /// (`disable_http_keepalive`).
    pub downstream_rq_overload_close: Counter,
    pub downstream_cx_overload_disable_keepalive: Counter,
}

/// The name a connection manager's block is kept under on a shard: its
/// listener's and its `stat_prefix`, so each listener's counts stay apart
/// (Envoy's `listener.<address>.http.<prefix>.*`) and a prefix's are the
/// sum over its listeners (`http.<prefix>.*`). Either name may hold any
/// character: the listener's is length-prefixed.
pub fn http_block_name(listener: &str, prefix: &str) -> String {
    format!("{}:{listener}{prefix}", listener.len())
}

/// The listener and `stat_prefix` of an [`http_block_name`].
pub fn split_http_block_name(name: &str) -> Option<(&str, &str)> {
    let (len, rest) = name.split_once(':')?;
    let len: usize = len.parse().ok()?;
    (len <= rest.len() && rest.is_char_boundary(len)).then(|| rest.split_at(len))
}

/// Envoy's `listener.<address>.*`.
#[derive(Debug, Default)]
pub struct ListenerStats {
    pub downstream_cx_total: Counter,
    pub downstream_cx_active: Counter,
    pub downstream_cx_destroy: Counter,
    pub no_filter_chain_match: Counter,
    /// Listener filters (PROXY header, ClientHello) not done within
    /// `listener_filters_timeout`.
    pub downstream_pre_cx_timeout: Counter,
    /// Closed as accepted by the overload manager
    /// (`reject_incoming_connections`; the global connection limit).
    pub downstream_cx_overload_reject: Counter,
    pub downstream_global_cx_overflow: Counter,
    pub downstream_cx_length_ms: Histogram,
    /// Its TLS handshakes (`ssl.*`), for a listener with a TLS chain.
    pub ssl: super::tls::TlsStats,
    /// Connections open per filter chain id: those of a chain an update
    /// changed or removed are draining. Touched as a connection is given
    /// its chain and as it closes, not per request; an id leaves at 0, so
    /// the chains of past updates cost nothing.
    chains: Mutex<HashMap<u64, u64>>,
}

impl ListenerStats {
    fn chain_opened(&self, id: u64) {
        let mut chains = self.chains.lock().unwrap_or_else(|e| e.into_inner());
        *chains.entry(id).or_insert(0) += 1;
    }

    fn chain_closed(&self, id: u64) {
        let mut chains = self.chains.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = chains.get_mut(&id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                chains.remove(&id);
            }
        }
    }

    /// Connections open now, by filter chain id.
    pub fn chains(&self) -> Vec<(u64, u64)> {
        let chains = self.chains.lock().unwrap_or_else(|e| e.into_inner());
        chains.iter().map(|(&id, &n)| (id, n)).collect()
    }
}

/// How a connection ended, in Envoy's `*_cx_destroy_*` counters: by the
/// peer (`remote`) or by the gateway (`local`), and whether requests were
/// still on it (then its side's `*_active_rq` and the sum of both).
pub struct DestroyCounters<'a> {
    pub local: &'a Counter,
    pub remote: &'a Counter,
    pub local_active_rq: &'a Counter,
    pub remote_active_rq: &'a Counter,
    pub active_rq: &'a Counter,
}

impl DestroyCounters<'_> {
    pub fn count(&self, remote: bool, active_rq: bool) {
        let (by, by_with_rq) = match remote {
            true => (self.remote, self.remote_active_rq),
            false => (self.local, self.local_active_rq),
        };
        by.inc();
        if active_rq {
            by_with_rq.inc();
            self.active_rq.inc();
        }
    }
}

impl ClusterStats {
    /// `upstream_cx_destroy_*` (the total, `upstream_cx_destroy`, is
    /// counted apart: a refused connect has no requests to tell).
    pub fn destroys(&self) -> DestroyCounters<'_> {
        DestroyCounters {
            local: &self.upstream_cx_destroy_local,
            remote: &self.upstream_cx_destroy_remote,
            local_active_rq: &self.upstream_cx_destroy_local_with_active_rq,
            remote_active_rq: &self.upstream_cx_destroy_remote_with_active_rq,
            active_rq: &self.upstream_cx_destroy_with_active_rq,
        }
    }
}

impl HttpStats {
    /// `downstream_cx_destroy_*` (the total is the connection's guard's).
    pub fn destroys(&self) -> DestroyCounters<'_> {
        DestroyCounters {
            local: &self.downstream_cx_destroy_local,
            remote: &self.downstream_cx_destroy_remote,
            local_active_rq: &self.downstream_cx_destroy_local_active_rq,
            remote_active_rq: &self.downstream_cx_destroy_remote_active_rq,
            active_rq: &self.downstream_cx_destroy_active_rq,
        }
    }
}

/// A block that counts connections: a listener's, a connection manager's.
pub trait CountsConnections {
    /// `downstream_cx_total`, `_active`, `_destroy` and `_length_ms`.
    fn connections(&self) -> (&Counter, &Counter, &Counter, &Histogram);

    /// A connection was told apart by `tag` (what a tag means is the
    /// block's: a listener's filter chain id, a connection manager's
    /// protocol): counted open under it.
    fn tagged(&self, _tag: u64) {}

    /// A connection tagged `tag` closed.
    fn untagged(&self, _tag: u64) {}
}

/// A connection manager's tag bits: its connection's protocol, and TLS.
pub const HTTP1: u64 = 1;
pub const HTTP2: u64 = 2;
pub const SSL: u64 = 4;

impl HttpStats {
    fn kinds(&self, tag: u64) -> impl Iterator<Item = &Counter> {
        [
            (HTTP1, &self.downstream_cx_http1_active),
            (HTTP2, &self.downstream_cx_http2_active),
            (SSL, &self.downstream_cx_ssl_active),
        ]
        .into_iter()
        .filter(move |(bit, _)| tag & bit != 0)
        .map(|(_, c)| c)
    }
}

impl CountsConnections for HttpStats {
    fn connections(&self) -> (&Counter, &Counter, &Counter, &Histogram) {
        (
            &self.downstream_cx_total,
            &self.downstream_cx_active,
            &self.downstream_cx_destroy,
            &self.downstream_cx_length_ms,
        )
    }

    /// Its protocol's and TLS's `downstream_cx_*_active`.
    fn tagged(&self, tag: u64) {
        self.kinds(tag).for_each(Counter::inc);
    }

    fn untagged(&self, tag: u64) {
        self.kinds(tag).for_each(Counter::dec);
    }
}

impl CountsConnections for ListenerStats {
    fn connections(&self) -> (&Counter, &Counter, &Counter, &Histogram) {
        (
            &self.downstream_cx_total,
            &self.downstream_cx_active,
            &self.downstream_cx_destroy,
            &self.downstream_cx_length_ms,
        )
    }

    /// The filter chain it was given: how far a drain of it has got.
    fn tagged(&self, chain: u64) {
        self.chain_opened(chain);
    }

    fn untagged(&self, chain: u64) {
        self.chain_closed(chain);
    }
}

/// A connection counted in a block from its start to its drop (however
/// it ends): its total and active count, then its destroy and length.
#[derive(Debug)]
pub struct OpenConnection<T: CountsConnections> {
    pub stats: Arc<T>,
    since: Instant,
    /// What the block tells it apart by, once known.
    tag: Option<u64>,
}

impl<T: CountsConnections> OpenConnection<T> {
    pub fn new(stats: Arc<T>, now: Instant) -> Self {
        let (total, active, _, _) = stats.connections();
        total.inc();
        active.inc();
        Self {
            stats,
            since: now,
            tag: None,
        }
    }

    /// Tells the connection apart by `tag` (once: a connection keeps its
    /// chain and its protocol).
    pub fn tag(&mut self, tag: u64) {
        if self.tag.is_none() {
            self.stats.tagged(tag);
            self.tag = Some(tag);
        }
    }
}

impl<T: CountsConnections> Drop for OpenConnection<T> {
    fn drop(&mut self) {
        let (_, active, destroy, length) = self.stats.connections();
        active.dec();
        destroy.inc();
        length.record(self.since.elapsed());
        if let Some(tag) = self.tag {
            self.stats.untagged(tag);
        }
    }
}

/// One shard's blocks of one kind, by name.
#[derive(Debug)]
pub struct Registry<T> {
    blocks: Mutex<HashMap<Box<str>, Arc<T>>>,
}

impl<T> Default for Registry<T> {
    fn default() -> Self {
        Self {
            blocks: Mutex::new(HashMap::new()),
        }
    }
}

impl<T: Default> Registry<T> {
    /// The block named `name`, made if it is new. Called where a handle is
    /// made (a pool, a connection), not per request.
    pub fn get(&self, name: &str) -> Arc<T> {
        let mut blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = blocks.get(name) {
            return Arc::clone(b);
        }
        let b = Arc::new(T::default());
        blocks.insert(name.into(), Arc::clone(&b));
        b
    }
}

impl<T> Registry<T> {
    /// The block named `name`, if a connection or pool made it.
    pub fn find(&self, name: &str) -> Option<Arc<T>> {
        let blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        blocks.get(name).cloned()
    }

    /// Every block by name, copied out under one lock: what a scrape
    /// reads, so it takes each shard's lock once.
    pub fn all(&self) -> HashMap<Box<str>, Arc<T>> {
        let blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        blocks.clone()
    }

    /// Each block, by name, in no order.
    pub fn each(&self, mut f: impl FnMut(&str, &T)) {
        let blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        for (name, b) in blocks.iter() {
            f(name, b);
        }
    }
}

/// A shard's blocks.
#[derive(Debug, Default)]
pub struct EnvoyStats {
    pub clusters: Registry<ClusterStats>,
    pub http: Registry<HttpStats>,
    pub listeners: Registry<ListenerStats>,
    /// The PROXY protocol listener filter's blocks, by `stat_prefix`.
    pub proxy_proto: Registry<super::proxy_proto::ProxyProtoStats>,
    /// The HTTP filters' blocks, per instance.
    pub filters: super::filters::FilterRegistries,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_records_microseconds_and_merges_over_shards() {
        let (a, b) = (Histogram::default(), Histogram::default());
        a.record(Duration::from_micros(400));
        a.record(Duration::from_millis(3));
        b.record(Duration::from_millis(30));
        let mut m = Merged::new();
        a.merge_into(&mut m);
        b.merge_into(&mut m);
        assert_eq!(m.count(), 3);
        assert_eq!(m.sum(), 400 + 3_000 + 30_000);
        assert_eq!(m.cumulative_le_ms(0.5), 1);
        assert_eq!(m.cumulative_le_ms(5.0), 2);
        assert_eq!(m.cumulative_le_ms(50.0), 3);
        // An idle histogram has no buckets; a used one, the chunks its
        // samples fell in.
        assert_eq!(Histogram::default().bytes(), 0);
        assert_eq!(a.bytes(), 2 * HISTOGRAM_CHUNK * 8);
    }

    #[test]
    fn codes_count_by_code_a_class_at_a_time() {
        let c = Codes::default();
        for code in [200, 200, 503, 99, 600, 599] {
            c.record(code);
        }
        let mut seen = Vec::new();
        c.each(|code, n| seen.push((code, n)));
        assert_eq!(seen, [(200, 2), (503, 1), (599, 1)]);
        assert_eq!(c.bytes(), 2 * 100 * 8);
    }

    #[test]
    fn a_listener_counts_its_connections_per_filter_chain_until_they_close() {
        let l = Arc::new(ListenerStats::default());
        let mut a = OpenConnection::new(Arc::clone(&l), Instant::now());
        let mut b = OpenConnection::new(Arc::clone(&l), Instant::now());
        let c = OpenConnection::new(Arc::clone(&l), Instant::now());
        a.tag(7);
        a.tag(8); // Once: a connection keeps its chain.
        b.tag(7);
        let mut chains = l.chains();
        chains.sort();
        assert_eq!(chains, [(7, 2)]);
        drop(a);
        assert_eq!(l.chains(), [(7, 1)]);
        drop((b, c));
        assert!(l.chains().is_empty());
        assert_eq!(l.downstream_cx_active.get(), 0);
    }

    #[test]
    fn a_connection_manager_block_name_holds_any_listener_and_prefix() {
        for (l, p) in [
            ("ingress", "ingress_http"),
            ("a:1", ":b"),
            ("", ""),
            ("é\0x", "9:"),
        ] {
            let name = http_block_name(l, p);
            assert_eq!(split_http_block_name(&name), Some((l, p)), "{name}");
        }
        assert_eq!(split_http_block_name("ingress"), None);
        assert_eq!(split_http_block_name("9:short"), None);
    }

    #[test]
    fn a_registry_hands_out_one_block_per_name() {
        let r: Registry<HttpStats> = Registry::default();
        let a = r.get("ingress_http");
        a.downstream_rq_total.inc();
        assert_eq!(r.get("ingress_http").downstream_rq_total.get(), 1);
        assert_eq!(r.get("other").downstream_rq_total.get(), 0);
        let mut names = Vec::new();
        r.each(|n, _| names.push(n.to_owned()));
        names.sort();
        assert_eq!(names, ["ingress_http", "other"]);
    }
}

#[cfg(test)]
mod sizes {
    /// What a block costs before its first histogram sample or status
    /// code (docs/observability.md states it): a cluster's counters, TLS
    /// ones included, within 1 KiB, its Arc and name aside.
    #[test]
    fn blocks_stay_within_what_the_docs_say() {
        assert!(std::mem::size_of::<super::ClusterStats>() <= 1024);
        assert!(std::mem::size_of::<super::HttpStats>() <= 640);
        assert!(std::mem::size_of::<super::ListenerStats>() <= 512);
    }
}
