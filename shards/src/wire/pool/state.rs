//! A host's pool as data: its connection slots, the streams routed on
//! them, the streams waiting for room and the back-off after failed
//! connects; and what downstream streams and connection tasks change in it.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ahash::AHashMap;
use engine::UpstreamProtocol;
use engine::{Cluster, HostId};
use h2wire::conn::ClientConfig;
use h2wire::ErrorCode;

use super::budget::Budget;
use super::conn::{UpConn, UpRef};
use crate::stats::envoy::ClusterStats;
use crate::stats::ShardStats;
use crate::wire::codec::Proto;
use crate::wire::inbox::{wake, Delivered, Inboxes};
use crate::wire::upcodec::UpCodec;

pub(super) const BACKOFF_BASE: Duration = Duration::from_millis(25);
pub(super) const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Streams one upstream connection may reset before their response head
/// came (the backend may not have accepted them yet) before it takes no
/// new streams and drains. Backends count such resets: the `h2` crate
/// (hyper, tonic) sends GOAWAY(ENHANCE_YOUR_CALM) past 20 streams reset
/// before its application accepted them, killing every stream on the
/// connection. Half that, plus the streams the connection still carries
/// when it starts draining, stays clear of it; a client's flood then costs
/// fresh upstream connections, never shared ones.
pub const RESET_BUDGET: u32 = 10;
/// The response window each upstream stream starts with
/// (SETTINGS_INITIAL_WINDOW_SIZE). A stream whose client keeps up is granted
/// more, doubling up to the cluster's `initial_stream_window_size`, within
/// its downstream connection's `per_connection_buffer_limit_bytes`
/// (`DownConn::forward`). Why start small: every stream gets the initial
/// window whether or not its client reads, so it is what unread responses
/// hold per stream. At 8 KiB, a connection's 100 streams hold 800 KiB, under
/// Envoy's default 1 MiB buffer limit; at the cluster default of 256 KiB it
/// would be 25 MiB. The cost: a response larger than this waits one
/// upstream round trip for its first grant.
pub const INITIAL_RESPONSE_WINDOW: u32 = 8 * 1024;
/// A stream's response window on `cluster`: it starts at
/// [`INITIAL_RESPONSE_WINDOW`] and grants may take it to the cluster's
/// `initial_stream_window_size`, but never past its
/// `per_connection_buffer_limit_bytes`: that is what Envoy lets one upstream
/// stream buffer before it stops reading it, and the window is what the
/// backend may send us unread.
pub(crate) fn stream_windows(cluster: &Cluster) -> (u32, u32) {
    let max = cluster
        .http2
        .initial_stream_window_size
        .min(cluster.per_connection_buffer_limit_bytes);
    (INITIAL_RESPONSE_WINDOW.min(max), max)
}

pub type PoolRef = Rc<RefCell<Pool>>;

/// All connections of one shard to one host.
pub struct Pool {
    pub addr: SocketAddr,
    pub host: HostId,
    /// The host's name, for `auto_host_rewrite`.
    pub hostname: Option<Box<str>>,
    pub(super) cluster: Arc<Cluster>,
    /// Where its connections deliver what they receive.
    pub(super) inboxes: Rc<Inboxes>,
    /// The shard's counters (the host's, and those of its connections).
    pub(super) stats: Arc<ShardStats>,
    pub(super) conns: Vec<UpConn>,
    /// Streams waiting for room: (inbox, downstream stream).
    pub(super) waiters: VecDeque<(usize, u32)>,
    pub(super) retry_at: Option<Instant>,
    pub(super) backoff: Duration,
    pub(super) next_gen: u32,
    /// Streams of this shard on this host now: what least request compares.
    pub in_flight: u32,
    /// The PROXY header its connections open with: the one client's it
    /// serves (a cluster with `upstream_proxy_protocol` has a pool per
    /// downstream client, as Envoy keys its pools by the header's
    /// addresses); `None`: its cluster sends none, or this is the host's
    /// shared pool, whose connections have no client behind them.
    pub(crate) proxy_header: Option<Box<[u8]>>,
    /// With `auto_config`: what ALPN chose on the last handshake.
    pub(super) auto: Option<Proto>,
    /// The host left the snapshot: no new streams; connections close once
    /// their streams are done.
    pub(crate) retired: bool,
    /// The cluster's circuit breakers on this shard, shared by its pools.
    pub budget: Rc<Budget>,
    /// The cluster's Envoy series on this shard, shared by its pools.
    pub cluster_stats: Arc<ClusterStats>,
}

impl Pool {
    pub(crate) fn new(
        (addr, host, hostname): (SocketAddr, HostId, Option<Box<str>>),
        cluster: Arc<Cluster>,
        inboxes: Rc<Inboxes>,
        stats: Arc<ShardStats>,
        budget: Rc<Budget>,
    ) -> PoolRef {
        let cluster_stats = stats.envoy.clusters.get(&cluster.name);
        Rc::new(RefCell::new(Self {
            addr,
            host,
            hostname,
            cluster_stats,
            cluster,
            inboxes,
            stats,
            conns: Vec::new(),
            waiters: VecDeque::new(),
            retry_at: None,
            backoff: BACKOFF_BASE,
            next_gen: 0,
            in_flight: 0,
            proxy_header: None,
            auto: None,
            retired: false,
            budget,
        }))
    }

    /// The `:scheme` of requests to the host: what its transport is.
    pub(crate) fn scheme(&self) -> &'static [u8] {
        if self.cluster.upstream.tls.is_some() {
            b"https"
        } else {
            b"http"
        }
    }

    /// The cluster the pool was made for.
    pub(crate) fn cluster(&self) -> Arc<Cluster> {
        Arc::clone(&self.cluster)
    }

    /// The name of the cluster the pool was made for.
    pub fn cluster_name(&self) -> &str {
        &self.cluster.name
    }

    /// A stream's response window: what it starts with, and the most
    /// grants may take it to.
    pub(crate) fn stream_windows(&self) -> (u32, u32) {
        stream_windows(&self.cluster)
    }

    pub(crate) fn retire(&mut self) {
        if !std::mem::replace(&mut self.retired, true) {
            self.budget.end_pool();
        }
        for c in &mut self.conns {
            wake(&mut c.waker);
        }
        // Nothing here will take them any more: they try again, and fail
        // (see `acquire`) rather than wait for a pool that is going.
        self.kick_all_waiters();
    }

    /// The connection a stream was opened on, while its slot holds it
    /// (same generation), dead or not.
    pub(super) fn opened_on(conns: &mut [UpConn], r: UpRef) -> Option<&mut UpConn> {
        conns.get_mut(r.slot).filter(|c| c.gen == r.gen)
    }

    /// The live connection a stream was opened on.
    pub(crate) fn conn(&mut self, r: UpRef) -> Option<&mut UpCodec> {
        Self::opened_on(&mut self.conns, r)
            .filter(|c| !c.dead)
            .map(|c| &mut c.conn)
    }

    /// Whether the connection of `r` takes request data now: not while its
    /// task holds the cluster's `per_connection_buffer_limit_bytes`
    /// unwritten (a backend whose socket does not drain though its windows
    /// are open). The data then waits unreleased, so the client's windows
    /// hold it back, until the task has written below half of it.
    pub(crate) fn takes_request_data(&mut self, r: UpRef) -> bool {
        let limit = self.cluster.per_connection_buffer_limit_bytes as usize;
        let Some(c) = Self::opened_on(&mut self.conns, r) else {
            return true;
        };
        if c.unwritten < limit {
            return true;
        }
        if !c.backed_up {
            c.backed_up = true;
            self.stats
                .hosts
                .host(self.host)
                .cx_flow_control_backed_up
                .inc();
        }
        false
    }

    /// `n` request bytes went to the codec of `r`'s connection: they count
    /// as unwritten until its task has taken and written them (the task
    /// may not run between several downstream turns, and the codec's
    /// output is not in [`UpConn::unwritten`] until it does).
    pub(crate) fn sent_request_data(&mut self, r: UpRef, n: u32) {
        if let Some(c) = Self::opened_on(&mut self.conns, r) {
            c.unwritten += n as usize;
        }
    }

    /// The live connection in `slot`.
    pub(crate) fn conn_at(&mut self, slot: usize) -> Option<&mut UpCodec> {
        self.conns
            .get_mut(slot)
            .filter(|c| !c.dead)
            .map(|c| &mut c.conn)
    }

    /// Wakes the task of `slot` to write what its connection has.
    pub(crate) fn flush(&mut self, slot: usize) {
        if let Some(c) = self.conns.get_mut(slot) {
            wake(&mut c.waker);
        }
    }

    /// Records that upstream stream `stream` on `slot` belongs to
    /// downstream stream `down` of connection `inbox`.
    pub(crate) fn route(&mut self, slot: usize, stream: u32, inbox: usize, down: u32) -> UpRef {
        let max = self.cluster.upstream.max_requests_per_connection;
        let c = &mut self.conns[slot];
        c.routes.insert(stream, (inbox, down));
        c.idle_since = None;
        c.requests += 1;
        // An attempt on a connection (Envoy's `upstream_rq_total`); on one
        // still connecting, counted once it is up (`task.rs`).
        if c.connected {
            self.cluster_stats.upstream_rq_total.inc();
        }
        if max.is_some_and(|max| c.requests >= max) && !c.draining {
            // Its streams go on to their end; new ones go elsewhere.
            c.draining = true;
            self.stats.hosts.host(self.host).cx_max_requests.inc();
            self.cluster_stats.upstream_cx_max_requests.inc();
        }
        UpRef {
            slot,
            gen: c.gen,
            stream,
        }
    }

    /// The downstream side is done with the stream: it no longer receives
    /// the stream's events, and its slot may go to a waiter.
    pub(crate) fn unroute(&mut self, r: UpRef) {
        if let Some(c) = Self::opened_on(&mut self.conns, r) {
            c.forget(r.stream);
            if (c.dead || c.draining) && c.routes.is_empty() {
                wake(&mut c.waker);
            }
        }
        self.kick_waiter();
    }

    /// Cancels upstream stream `r` (a no-op if it already closed both
    /// ways) and gives back `held` bytes of its window. A stream without
    /// its response head (`answered` false) may not have been accepted by
    /// the backend yet: such resets count against the connection's
    /// [`RESET_BUDGET`], which drains it once spent. Past the budget they
    /// are abandoned instead: unrouted without RST_STREAM, their answers
    /// given back as they come, until the draining connection closes with
    /// its last routed stream.
    pub(crate) fn cancel(&mut self, r: UpRef, answered: bool, held: u32) {
        let host = self.host;
        let Some(c) = Self::opened_on(&mut self.conns, r).filter(|c| !c.dead) else {
            return;
        };
        let may_reset = answered || c.early_resets < RESET_BUDGET;
        let sent = may_reset && c.conn.reset(r.stream, ErrorCode::CANCEL);
        c.conn.release(r.stream, held);
        if sent && !answered {
            c.early_resets += 1;
            if c.early_resets >= RESET_BUDGET && !c.draining {
                c.draining = true;
                self.stats.hosts.host(host).cx_reset_budget.inc();
                tracing::debug!(addr = %self.addr, "upstream connection spent its reset budget: draining");
            }
        }
    }

    /// Forgets a waiting stream (its client went away).
    pub(crate) fn cancel_wait(&mut self, inbox: usize, down: u32) {
        let before = self.waiters.len();
        self.waiters.retain(|&w| w != (inbox, down));
        self.budget
            .end_pending((before - self.waiters.len()) as u32);
    }

    /// A waiter given room could not take it (it ended meanwhile): the
    /// room goes to the next one.
    pub(crate) fn pass_room(&mut self) {
        self.kick_waiter();
    }

    pub(super) fn kick_waiter(&mut self) {
        while let Some((inbox, down)) = self.waiters.pop_front() {
            self.budget.end_pending(1);
            if self.inboxes.deliver(inbox, down, Delivered::Retry).is_ok() {
                return;
            }
        }
    }

    /// Every waiter tries again: a connection's protocol became known, and
    /// an HTTP/2 one may take them all.
    pub(super) fn kick_all_waiters(&mut self) {
        self.budget.end_pending(self.waiters.len() as u32);
        for (inbox, down) in std::mem::take(&mut self.waiters) {
            let _ = self.inboxes.deliver(inbox, down, Delivered::Retry);
        }
    }

    /// The protocol a new connection starts with; `None`: not known until
    /// its handshake (`auto_config`, no handshake yet).
    pub(super) fn protocol(&self) -> Option<Proto> {
        match self.cluster.upstream.protocol {
            UpstreamProtocol::Http2 => Some(Proto::H2),
            UpstreamProtocol::Http1 => Some(Proto::H1),
            UpstreamProtocol::Auto => self.auto,
        }
    }

    /// A codec for a new connection speaking `proto` (HTTP/2 when not
    /// known yet: replaced before any stream is opened on it), and its cap
    /// on streams.
    pub(crate) fn codec(&self, proto: Option<Proto>) -> (UpCodec, u32) {
        if proto == Some(Proto::H1) {
            let (initial, _) = self.stream_windows();
            return (
                UpCodec::h1(initial, self.cluster.upstream.http1_trailers),
                1,
            );
        }
        let h = &self.cluster.http2;
        let window_cap =
            (h.initial_connection_window_size / h.initial_stream_window_size.max(1)).max(1);
        let cap = h.max_concurrent_streams.min(window_cap).max(1);
        // The cap keeps the connection window larger than the streams'
        // windows at their largest, so one stream's unread response never
        // holds back another's.
        let conn = UpCodec::h2(ClientConfig {
            initial_stream_window: self.stream_windows().0,
            connection_window: h.initial_connection_window_size,
            ..ClientConfig::default()
        });
        (conn, cap)
    }

    /// A new connection in a free slot (its task is the caller's to
    /// spawn): the slot and its generation.
    pub(super) fn open(&mut self) -> (usize, u32) {
        let proto = self.protocol();
        let (conn, cap) = self.codec(proto);
        self.next_gen = self.next_gen.wrapping_add(1);
        let up = UpConn {
            gen: self.next_gen,
            conn,
            alpn_pending: proto.is_none(),
            connected: false,
            requests: 0,
            routes: AHashMap::default(),
            waker: None,
            dead: false,
            draining: false,
            early_resets: 0,
            task_done: false,
            cap,
            unwritten: 0,
            backed_up: false,
            idle_since: Some(Instant::now()),
        };
        let slot = match self.conns.iter().position(|c| c.dead && c.task_done) {
            Some(i) => {
                self.conns[i] = up;
                i
            }
            None => {
                self.conns.push(up);
                self.conns.len() - 1
            }
        };
        (slot, self.next_gen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(stream_window: u32, buffer_limit: u32) -> Cluster {
        Cluster {
            name: "c".into(),
            connect_timeout: Duration::from_secs(1),
            lb_policy: engine::LbPolicy::RoundRobin,
            endpoints: vec![],
            eds: None,
            dns: None,
            http2: engine::UpstreamHttp2 {
                initial_stream_window_size: stream_window,
                ..Default::default()
            },
            upstream: Default::default(),
            outlier_detection: None,
            common_lb: Default::default(),
            per_connection_buffer_limit_bytes: buffer_limit,
            health_check: None,
            circuit_breakers: Default::default(),
            per_endpoint_stats: false,
        }
    }

    #[test]
    fn a_stream_s_window_grows_to_the_cluster_s_window_within_its_buffer_limit() {
        assert_eq!(
            stream_windows(&cluster(256 << 10, 1 << 20)),
            (8 << 10, 256 << 10)
        );
        assert_eq!(
            stream_windows(&cluster(4 << 20, 1 << 20)),
            (8 << 10, 1 << 20)
        );
        // A buffer limit under the initial window holds the stream to it.
        assert_eq!(stream_windows(&cluster(256 << 10, 4096)), (4096, 4096));
        assert_eq!(stream_windows(&cluster(4096, 1 << 20)), (4096, 4096));
    }
}
