//! The data path on our own HTTP/2 codec (`h2wire`): no task, lock or reference count per stream.
//!
//! The shape (docs/h2-codec.md, layer 4):
//!
//! - [`runtime::ShardRuntime`] is a data shard's runtime: it adopts
//!   snapshots (pools, listeners, then the routing context), runs a task
//!   per listener socket and starts the drain on shutdown;
//! - [`accept`] spawns a task per accepted connection;
//! - one task per downstream connection (`connection`) owns its socket
//!   and its codec; its deadlines and drain are one state machine
//!   (`lifecycle`), and its streams (`streams`) run the request phases and
//!   HTTP filters as events arrive;
//! - one task per upstream connection ([`pool`]) owns its socket and its
//!   `ClientConn`; the connections of one host form a shard-local
//!   [`pool::Pool`] that downstream tasks open streams on directly;
//! - an upstream task routes what its connection received into the
//!   inbox (`inbox`) of the downstream connection owning the stream, and
//!   wakes it; a downstream task that gave an upstream connection output
//!   wakes that connection's task. glommio runs every ready task before it
//!   polls the ring again, so one send carries all the requests the
//!   clients made in a turn.
//!
//! The tasks of one shard share a [`WireShard`]: the routing context
//! ([`crate::shard::Shard`], below this module: it never calls back up),
//! the inboxes, the pools and the shutdown signal. The runtime owns the
//! listener tasks, so it sits above them; what they share sits below them.

pub mod accept;
mod accounts;
pub mod body;
mod chain_drains;
mod codec;
mod connection;
mod dstream;
mod h2_stream;
mod inbox;
mod lifecycle;
mod logging;
mod opening;
mod outbuf;
pub mod pool;
mod proxied_pools;
mod proxy_header;
mod readbuf;
pub mod runtime;
mod side;
pub mod sockets;
mod streams;
mod tcp_proxy;
pub mod tls;
mod tunnel;
mod upcodec;
mod upgrade;

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use ahash::AHashMap;

use engine::snapshot::Host;
use engine::{ClusterSnapshot, HostId};

use crate::shard::Shard;
use crate::signal::Signal;
use inbox::Inboxes;
use pool::{Pool, PoolRef};

pub use readbuf::ReadBuf;

/// What the wire tasks of one shard share.
pub struct WireShard {
    /// The routing context.
    pub shard: Rc<Shard>,
    /// Inboxes of downstream connections; every pool holds them too, to
    /// deliver what its connections receive.
    pub(crate) inboxes: Rc<Inboxes>,
    /// The same inboxes, where paused streams' resumes go.
    pub(crate) resume: Rc<dyn crate::http_filter::ResumeSink>,
    /// Upstream pools indexed by `HostId`.
    pools: RefCell<Vec<Option<PoolRef>>>,
    /// Pools of clusters with `upstream_proxy_protocol`: one per
    /// downstream client (its address and the one it connected to) and
    /// host (`proxied_pools.rs`).
    proxied: RefCell<AHashMap<(std::net::SocketAddr, std::net::SocketAddr), Vec<PoolRef>>>,
    /// Each cluster's circuit breakers on this shard, by cluster name.
    budgets: RefCell<AHashMap<String, Rc<pool::Budget>>>,
    /// Fired on shutdown: every connection drains.
    pub(crate) shutdown: Signal,
    /// Fired when the shard stops serving for good (its drain is over):
    /// connections still opening end. A drain does not end an opening:
    /// a client accepted just before it (a hot restart's parent, a
    /// removed listener) is served once and told to go, never reset.
    pub(crate) stopped: Signal,
    /// Fired while the health check fails (`POST /healthcheck/fail`):
    /// connections of `drain_type: DEFAULT` listeners drain, new ones as
    /// soon as they open. `/healthcheck/ok` puts a fresh one in its place.
    pub(crate) health_drain: RefCell<Signal>,
    /// Access log output, and sink numbers this shard has looked up.
    pub(crate) logs: Arc<crate::access_log::LogWriter>,
    log_sinks: RefCell<AHashMap<engine::LogSink, u32>>,
    /// Lines rendered this turn, by sink, sent to the writer as one batch
    /// at the end of the turn ([`Self::flush_logs`]): one queue operation
    /// (and at most one wake-up of the writer) per turn, not per line.
    log_batch: RefCell<Vec<(u32, Vec<u8>)>>,
    /// The shard's own requests to clusters (`side`): request copies on
    /// their way to mirror clusters, filters' calls (authorisation).
    pub(crate) side: RefCell<side::SideRequests>,
    /// Streams by the body bytes they buffer, for the overload manager's
    /// `reset_high_memory_stream`.
    pub(crate) accounts: accounts::Accounts,
}

impl WireShard {
    pub fn new(shard: Rc<Shard>, logs: Arc<crate::access_log::LogWriter>) -> Rc<Self> {
        let inboxes: Rc<Inboxes> = Rc::default();
        Rc::new(Self {
            shard,
            resume: Rc::clone(&inboxes) as Rc<dyn crate::http_filter::ResumeSink>,
            inboxes,
            pools: RefCell::default(),
            proxied: RefCell::default(),
            budgets: RefCell::default(),
            shutdown: Signal::new(),
            stopped: Signal::new(),
            health_drain: RefCell::new(Signal::new()),
            logs,
            log_sinks: RefCell::default(),
            log_batch: RefCell::default(),
            side: RefCell::default(),
            accounts: accounts::Accounts::default(),
        })
    }

    /// Renders a line for `sink` into this turn's batch.
    pub(crate) fn log_line(&self, sink: u32, render: impl FnOnce(&mut Vec<u8>)) {
        let mut batch = self.log_batch.borrow_mut();
        match batch.iter_mut().find(|(s, _)| *s == sink) {
            Some((_, lines)) => render(lines),
            None => {
                let mut lines = Vec::with_capacity(4096);
                render(&mut lines);
                batch.push((sink, lines));
            }
        }
    }

    /// Hands this turn's lines to the writer; what its queue cannot take
    /// is dropped and counted, line by line.
    pub(crate) fn flush_logs(&self) {
        let mut batch = self.log_batch.borrow_mut();
        if batch.is_empty() {
            return;
        }
        for (sink, lines) in batch.drain(..) {
            let n = lines.iter().filter(|&&b| b == b'\n').count() as u64;
            if !self.logs.send(sink, lines) {
                self.shard.stats.downstream.access_log_dropped.add(n.max(1));
            }
        }
    }

    /// The access logs of a connection manager or a TCP proxy, as a
    /// connection uses them: each format with its sink's number (looked
    /// up once per connection, from this shard's cache).
    pub(crate) fn log_targets(&self, logs: &[engine::AccessLog]) -> logging::LogTargets {
        logs.iter()
            .map(|l| {
                let id = *self
                    .log_sinks
                    .borrow_mut()
                    .entry(l.sink.clone())
                    .or_insert_with(|| self.logs.sink_id(&l.sink));
                (id, Arc::clone(&l.format), l.filter.clone())
            })
            .collect()
    }

    /// Streams in flight to `host` (least request, A48): what
    /// [`Shard::pick_host`] is given to compare.
    #[inline]
    pub fn in_flight(&self, host: HostId) -> u32 {
        self.pools
            .borrow()
            .get(host.index())
            .and_then(Option::as_ref)
            .map_or(0, |p| p.borrow().in_flight)
    }

    /// The upstream pool for `host`, made on first use (and afresh
    /// when the host's id was recycled for another address); `None` when
    /// the cluster's `max_connection_pools` allows no new one.
    pub fn pool(&self, host: &Host, cluster: &ClusterSnapshot) -> Option<PoolRef> {
        let mut pools = self.pools.borrow_mut();
        let i = host.id.index();
        if pools.len() <= i {
            pools.resize(i + 1, None);
        }
        match &pools[i] {
            Some(p) if p.borrow().addr == host.address => Some(Rc::clone(p)),
            _ => {
                if let Some(old) = pools[i].take() {
                    old.borrow_mut().retire();
                }
                let p = self.new_pool(host, cluster)?;
                pools[i] = Some(Rc::clone(&p));
                Some(p)
            }
        }
    }

    /// A new pool for `host`, within its cluster's `max_connection_pools`
    /// (`None`, counted, past it).
    pub(crate) fn new_pool(&self, host: &Host, cluster: &ClusterSnapshot) -> Option<PoolRef> {
        let budget = self.budget(&cluster.config);
        if !budget.try_pool() {
            self.shard.stats.hosts.host(host.id).cx_pool_overflow.inc();
            // Rare: the cluster's block is looked up by name.
            let c = self.shard.stats.envoy.clusters.get(&cluster.config.name);
            c.upstream_cx_pool_overflow.inc();
            return None;
        }
        Some(Pool::new(
            (host.address, host.id, host.hostname.clone()),
            Arc::clone(&cluster.config),
            Rc::clone(&self.inboxes),
            Arc::clone(&self.shard.stats),
            budget,
        ))
    }

    /// The circuit breakers of `cluster` on this shard, made on first use.
    pub(crate) fn budget(&self, cluster: &engine::Cluster) -> Rc<pool::Budget> {
        let mut budgets = self.budgets.borrow_mut();
        if let Some(b) = budgets.get(&cluster.name) {
            return Rc::clone(b);
        }
        let b = Rc::new(pool::Budget::new(cluster, self.shard.data_shards));
        budgets.insert(cluster.name.clone(), Rc::clone(&b));
        b
    }

    /// Follows a new snapshot's circuit breakers: limits change in place
    /// (what is held stays counted); a cluster gone forgets its budget once
    /// nothing holds it.
    pub(crate) fn follow_budgets(&self, snap: &engine::Snapshot) {
        self.budgets
            .borrow_mut()
            .retain(|name, b| match snap.clusters.get(name) {
                Some(c) => {
                    b.set_limits(&c.config, self.shard.data_shards);
                    true
                }
                None => Rc::strong_count(b) > 1,
            });
    }

    /// Counts a stream's outcome on `pool`'s host for outlier detection,
    /// when the host's cluster in the current snapshot has it.
    pub(crate) fn record_outlier(&self, pool: &PoolRef, result: engine::outlier::CallResult) {
        let snap = self.shard.snapshot();
        let p = pool.borrow();
        let Some(cluster) = snap.cluster(p.cluster_name()) else {
            return;
        };
        if !cluster
            .config
            .outlier_detection
            .as_ref()
            .is_some_and(|o| o.has_detector())
        {
            return;
        }
        if let Some(host) = cluster.host_by_addr(&p.addr) {
            self.shard.record_outlier(cluster, host, result);
        }
    }

    /// Drops the pool of `host` (its connections close once their streams
    /// end).
    pub(crate) fn drop_pool(&self, host: HostId) {
        if let Some(slot) = self.pools.borrow_mut().get_mut(host.index()) {
            if let Some(p) = slot.take() {
                p.borrow_mut().retire();
            }
        }
        // Its clients' own pools (`upstream_proxy_protocol`) go too.
        for pools in self.proxied.borrow().values() {
            for p in pools.iter().filter(|p| p.borrow().host == host) {
                p.borrow_mut().retire();
            }
        }
    }
}
