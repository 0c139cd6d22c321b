//! A data shard's routing context: the snapshot new streams start with, load balancing, override hosts and outlier counts.
//!
//! This is what a stream's phases 1, 2 and 5 ask of their shard
//! (docs/architecture.md, "Request phases"). It knows nothing of sockets,
//! and imports nothing of the data path: the shard's runtime (listeners,
//! connections, upstream pools, snapshot adoption, shutdown) is
//! `ShardRuntime` in `wire/runtime.rs`, above it, which calls in with
//! what only it knows, such as the streams in flight per host for least
//! request.

use crate::local_reply::LocalReply;
use crate::stats::recent_now;
use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use ahash::AHashMap;
use engine::lb::{ClusterLb, Pick};
use engine::outlier::{CallResult, HostCounters, HostReport};
use engine::override_host::{self, OverrideMiss};
use engine::session::CookieFormat;
use engine::snapshot::Host;
use engine::{
    ClusterSnapshot, ClusterTarget, EjectedSet, ForwardAction, HostId, LbPolicy, Snapshot,
    WeightedClusters,
};

use crate::stats::ShardStats;

/// The host a stream asks for ahead of its cluster's policy (Envoy's
/// upstream override host): what the stateful session filter found in the
/// request, which the router honours when the host may serve.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OverrideHost {
    /// The host, when the request named a valid, unexpired one.
    pub address: Option<SocketAddr>,
    /// The cluster a gRPC session names too (its `ip:port;cluster`
    /// dialect): on a weighted split the stream stays on it.
    pub cluster: Option<Box<str>>,
    /// `strict`: the host or nothing, answered with this status when it
    /// cannot serve.
    pub strict: Option<u16>,
}

/// A snapshot as a shard hands it to a stream: `Rc` around the `Arc` so
/// that taking it per stream is a shard-local increment, not an atomic one
/// on a cache line every shard shares.
#[allow(clippy::redundant_allocation)]
pub type SnapshotRef = Rc<Arc<Snapshot>>;

/// The routing context of one data shard; shard-local (`Rc`, `RefCell`).
pub struct Shard {
    pub id: usize,
    /// How many data shards the gateway runs: each takes its share of a
    /// listener's connection limit.
    pub data_shards: usize,
    pub stats: Arc<ShardStats>,
    /// The snapshot new streams start with.
    current: RefCell<SnapshotRef>,
    /// Balancing state per cluster name (cursor, schedules, usable hosts).
    lb: RefCell<AHashMap<String, ClusterLb>>,
    /// Hosts outlier detection ejected, as last pushed by the control shard.
    ejected: RefCell<Arc<EjectedSet>>,
    /// Outlier counters indexed by `HostId` (the active bucket; the control
    /// shard takes it every `interval`).
    outlier: RefCell<Vec<HostCounters>>,
    /// How new session cookies are written.
    pub cookie_format: CookieFormat,
    /// How connections drain (`--drain-time-s`, `--drain-strategy`).
    pub drain: crate::drain::DrainOptions,
    rng: Cell<u64>,
    /// Request ids: SipHash under a key from the OS over a counter, so
    /// that one id seen tells nothing of the next (the xorshift above is
    /// fast but invertible).
    ids: (std::hash::RandomState, Cell<u64>),
    /// `POST /healthcheck/fail` (until `/healthcheck/ok`): the health
    /// check filter answers 503.
    health_failed: Cell<bool>,
    /// Finished spans on their way to collectors (the tracing filter's).
    pub(crate) span_exporters: RefCell<crate::http_filter::tracing::Exporters>,
    /// The overload manager's actions, as the sampler sets them.
    pub overload: Arc<crate::overload::OverloadState>,
}

/// A nonzero xorshift seed from the clock, the process and the shard.
fn rng_seed(shard: usize) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mixed = (nanos ^ u64::from(std::process::id()) << 32)
        .wrapping_add((shard as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    // splitmix64 finaliser: spreads nearby seeds over the whole range.
    let mut z = mixed;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) | 1
}

impl Shard {
    pub fn new(
        id: usize,
        data_shards: usize,
        stats: Arc<ShardStats>,
        first: Arc<Snapshot>,
        cookie_format: CookieFormat,
        drain: crate::drain::DrainOptions,
        overload: Arc<crate::overload::OverloadState>,
    ) -> Rc<Self> {
        Rc::new(Self {
            id,
            data_shards,
            stats,
            current: RefCell::new(Rc::new(first)),
            lb: RefCell::new(AHashMap::new()),
            ejected: RefCell::new(Arc::new(EjectedSet::default())),
            outlier: RefCell::new(Vec::new()),
            cookie_format,
            drain,
            // Seeded per process and shard, so gateways behind one ECMP
            // group (and restarts) do not all sample the same hosts first.
            rng: Cell::new(rng_seed(id)),
            ids: (std::hash::RandomState::new(), Cell::new(0)),
            health_failed: Cell::new(false),
            span_exporters: RefCell::default(),
            overload,
        })
    }

    /// Whether the server is failing its health checks (`POST
    /// /healthcheck/fail`).
    pub fn health_failed(&self) -> bool {
        self.health_failed.get()
    }

    pub(crate) fn set_health_failed(&self, failed: bool) {
        self.health_failed.set(failed);
    }

    /// The snapshot a new stream should use.
    #[inline]
    pub fn snapshot(&self) -> SnapshotRef {
        Rc::clone(&self.current.borrow())
    }

    /// xorshift64*: fast, shard-local randomness for weighted clusters.
    pub fn random(&self) -> u32 {
        (self.random_u64() >> 32) as u32
    }

    /// A uniform draw in `[0, 1)` (a scaled overload action's).
    pub fn unit(&self) -> f64 {
        (self.random_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// 128 unpredictable bits for an `x-request-id`.
    pub fn request_id_bits(&self) -> u128 {
        use std::hash::BuildHasher;
        let (key, counter) = &self.ids;
        let n = counter.get().wrapping_add(1);
        counter.set(n);
        (u128::from(key.hash_one((n, 0u8))) << 64) | u128::from(key.hash_one((n, 1u8)))
    }

    /// 64 random bits (xorshift64*).
    pub fn random_u64(&self) -> u64 {
        let mut x = self.rng.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Picks a host by the cluster's policy, skipping ejected hosts (unless
    /// the cluster is in panic). Least request compares `active`: this
    /// shard's streams in flight per host, which the caller counts (the
    /// wire layer, per upstream pool). A generic closure, so the lookup
    /// inlines into the pick: no allocation, no dynamic call.
    pub fn pick_host<'a>(
        &self,
        cluster: &'a ClusterSnapshot,
        active: impl Fn(HostId) -> u32,
        hash: Option<u64>,
    ) -> Option<Pick<'a>> {
        let mut lbs = self.lb.borrow_mut();
        let name = cluster.config.name.as_str();
        let lb = match lbs.get_mut(name) {
            Some(lb) => lb,
            None => lbs.entry(name.to_owned()).or_default(),
        };
        let ejected = self.ejected.borrow();
        let pick = lb.pick_hashed(cluster, &ejected, active, &mut || self.random_u64(), hash)?;
        let lb_stats = &self.stats.lb;
        match cluster.config.lb_policy {
            LbPolicy::RoundRobin => lb_stats.round_robin.inc(),
            LbPolicy::Random => lb_stats.random.inc(),
            LbPolicy::LeastRequest(_) => lb_stats.least_request.inc(),
            LbPolicy::RingHash(_) => lb_stats.ring_hash.inc(),
            LbPolicy::Maglev(_) => lb_stats.maglev.inc(),
        }
        if hash.is_none()
            && matches!(
                cluster.config.lb_policy,
                LbPolicy::RingHash(_) | LbPolicy::Maglev(_)
            )
        {
            lb_stats.hash_missing.inc();
        }
        if pick.panic {
            lb_stats.panic.inc();
        }
        Some(pick)
    }

    /// The host a session names, if it may serve (see `engine::override_host`).
    #[inline]
    pub fn override_host<'a>(
        &self,
        cluster: &'a ClusterSnapshot,
        addr: &SocketAddr,
    ) -> Result<&'a Host, OverrideMiss> {
        override_host::lookup(cluster, addr, &self.ejected.borrow())
    }

    /// Phase 2's cluster: the route's, a weighted pick (on a weighted
    /// split a session stays on the side that holds its host), or the one
    /// the request's `field` of the route's `cluster_header` names (absent:
    /// "", no cluster).
    pub fn choose_cluster<'a>(
        &self,
        action: &'a ForwardAction,
        session: Option<&OverrideHost>,
        snap: &Snapshot,
        field: impl FnOnce(&str) -> Option<&'a str>,
    ) -> &'a str {
        match &action.target {
            ClusterTarget::Cluster(name) => name.as_str(),
            ClusterTarget::Weighted(w) => session
                .and_then(|s| session_cluster(w, s, snap))
                .unwrap_or_else(|| w.pick(self.random())),
            ClusterTarget::Header(name) => field(name).unwrap_or(""),
        }
    }

    /// Phase 2's host: the session's override host when it may serve,
    /// else the cluster's policy (`active` as in [`Self::pick_host`]).
    /// `Err` is the local reply: a `strict` session whose host cannot
    /// serve, or no usable host.
    pub fn choose_host<'a>(
        &self,
        cluster: &'a ClusterSnapshot,
        session: Option<&OverrideHost>,
        active: impl Fn(HostId) -> u32,
        hash: impl FnOnce() -> Option<u64>,
    ) -> Result<&'a Host, LocalReply> {
        let sess_stats = &self.stats.session;
        if let Some(s) = session {
            if let Some(addr) = &s.address {
                match self.override_host(cluster, addr) {
                    Ok(h) => {
                        sess_stats.override_used.inc();
                        self.stats
                            .hosts
                            .host(h.id)
                            .rq_override_recent
                            .inc(recent_now());
                        return Ok(h);
                    }
                    Err(miss) => {
                        match miss {
                            OverrideMiss::NotFound => sess_stats.host_not_found.inc(),
                            OverrideMiss::StatusNotInSet => sess_stats.status_not_in_set.inc(),
                            OverrideMiss::Ejected => sess_stats.host_ejected.inc(),
                        }
                        if let Some(status) = s.strict {
                            // `strict`: the session's host or nothing.
                            sess_stats.strict_refused.inc();
                            return Err(LocalReply::SessionHostUnavailable(status));
                        }
                    }
                }
            }
        }
        // Hashed only for the policies that read it, as Envoy asks for
        // the hash only then (a cookie policy may make a cookie).
        let hash = match cluster.config.lb_policy {
            LbPolicy::RingHash(_) | LbPolicy::Maglev(_) => hash(),
            _ => None,
        };
        match self.pick_host(cluster, active, hash) {
            Some(pick) => Ok(pick.host),
            None => {
                self.stats.rq_no_healthy_upstream.inc();
                Err(LocalReply::NoHealthyUpstream)
            }
        }
    }

    /// Adopts the ejected set the control shard pushed.
    pub fn set_ejected(&self, set: Arc<EjectedSet>) {
        *self.ejected.borrow_mut() = set;
    }

    /// Counts a finished request for outlier detection, when the cluster
    /// has it.
    pub fn record_outlier(&self, cluster: &ClusterSnapshot, host: &Host, result: CallResult) {
        let Some(config) = cluster.config.outlier_detection.as_ref() else {
            return;
        };
        if !config.has_detector() {
            return;
        }
        // A long stream may outlive its host: if the host left and its id
        // went to another host meanwhile, the result is not the new host's.
        let current = self.snapshot();
        let same_host = current
            .cluster(&cluster.config.name)
            .and_then(|c| c.host_by_addr(&host.address))
            .is_some_and(|h| h.id == host.id);
        if !same_host {
            return;
        }
        let host = host.id;
        let mut counters = self.outlier.borrow_mut();
        if counters.len() <= host.index() {
            counters.resize_with(host.index() + 1, HostCounters::default);
        }
        counters[host.index()].record(result, config);
    }

    /// Hands the outlier counts of `clusters`' hosts to the control shard
    /// and starts new ones (A50's bucket swap).
    pub fn collect_outlier(&self, clusters: &[String]) -> Vec<(HostId, HostReport)> {
        let snap = self.snapshot();
        let mut counters = self.outlier.borrow_mut();
        let mut out = Vec::new();
        for name in clusters {
            let Some(c) = snap.cluster(name) else {
                continue;
            };
            for h in &c.hosts {
                if let Some(counter) = counters.get_mut(h.id.index()) {
                    let report = counter.take();
                    if !report.is_empty() {
                        out.push((h.id, report));
                    }
                }
            }
        }
        out
    }

    /// Adopts a new snapshot for routing: per-host state of hosts new to
    /// their cluster starts afresh, balancing state of clusters that left
    /// goes, and new streams start with `snap`. `on_new_host` sees each host
    /// new to its cluster (the runtime drops its pool). The runtime's
    /// `apply` reconciles pools and listeners around this.
    pub fn adopt(&self, snap: Arc<Snapshot>, on_new_host: impl FnMut(&Host)) {
        self.reset_host_state(&snap, on_new_host);
        self.lb
            .borrow_mut()
            .retain(|name, _| snap.clusters.contains_key(name));
        self.stats.snapshot_version.set(snap.version);
        self.stats.snapshots_applied.inc();
        *self.current.borrow_mut() = Rc::new(snap);
    }

    /// Resets the counters of hosts new to their cluster (a recycled id
    /// must not inherit another host's counts), and the outlier counts of
    /// changed clusters without detection. Work proportional to what
    /// changed: clusters shared (same `Arc`) with the current snapshot are
    /// skipped.
    fn reset_host_state(&self, snap: &Snapshot, mut on_new_host: impl FnMut(&Host)) {
        let old = self.snapshot();
        for (name, new_c) in &snap.clusters {
            let old_c = old.clusters.get(name);
            if old_c.is_some_and(|o| Arc::ptr_eq(o, new_c)) {
                continue;
            }
            if !new_c
                .config
                .outlier_detection
                .as_ref()
                .is_some_and(|o| o.has_detector())
            {
                // Detection off: forget the counts, so that turning it on
                // again starts from zero (A50 resets counters when its
                // timer starts).
                let mut counters = self.outlier.borrow_mut();
                for h in &new_c.hosts {
                    if let Some(c) = counters.get_mut(h.id.index()) {
                        c.reset();
                    }
                }
            }
            for h in &new_c.hosts {
                let known = old_c
                    .and_then(|o| o.host_by_addr(&h.address))
                    .is_some_and(|o| o.id == h.id);
                if !known {
                    on_new_host(h);
                    if let Some(st) = self.stats.hosts.get(h.id) {
                        st.reset_counters();
                    }
                    if let Some(c) = self.outlier.borrow_mut().get_mut(h.id.index()) {
                        c.reset();
                    }
                }
            }
        }
    }
}

/// The weighted cluster a session belongs to: the one gRPC's cookie names,
/// else the first whose hosts include the session's host. `None`: split as
/// usual.
fn session_cluster<'a>(
    w: &'a WeightedClusters,
    session: &OverrideHost,
    snap: &Snapshot,
) -> Option<&'a str> {
    let names = || w.clusters.iter().map(|(n, _)| n.as_str());
    if let Some(named) = &session.cluster {
        if let Some(n) = names().find(|n| *n == &**named) {
            return Some(n);
        }
    }
    let addr = session.address?;
    names().find(|n| {
        snap.cluster(n)
            .is_some_and(|c| c.host_by_addr(&addr).is_some())
    })
}
