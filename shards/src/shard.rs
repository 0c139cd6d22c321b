//! A data shard: owns its listeners' sockets, connections, upstream pools and
//! per-host state, and adopts snapshots pushed by the control shard.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use ahash::AHashMap;
use engine::lb::{pick_round_robin, RoundRobinState};
use engine::snapshot::Host;
use engine::{ClusterSnapshot, HostId, Snapshot};
use glommio::net::TcpListener;
use glommio::Task;

use crate::downstream;
use crate::pool::HostPool;
use crate::signal::Signal;
use crate::stats::ShardStats;
use crate::tick::Ticker;

/// A listener socket this shard accepts on.
struct RunningListener {
    address: SocketAddr,
    /// Dropping the task cancels the accept loop and closes the socket.
    _accept: Task<()>,
    /// Fired when the listener goes away: its connections drain.
    drain: Signal,
}

pub struct Shard {
    pub id: usize,
    pub stats: Arc<ShardStats>,
    /// The snapshot new streams start with. `Rc` around the `Arc` so that
    /// taking it per stream is a shard-local increment, not an atomic one on
    /// a cache line every shard shares.
    #[allow(clippy::redundant_allocation)]
    current: RefCell<Rc<Arc<Snapshot>>>,
    /// Upstream pools indexed by `HostId`.
    pools: RefCell<Vec<Option<Rc<HostPool>>>>,
    round_robin: RefCell<AHashMap<String, RoundRobinState>>,
    rng: Cell<u64>,
    listeners: RefCell<AHashMap<String, RunningListener>>,
    /// Fired on shutdown: every connection drains.
    pub shutdown: Signal,
    /// Coarse shard-wide tick for stream watchdogs (see `tick`).
    pub ticker: Ticker,
}

impl Shard {
    pub fn new(id: usize, stats: Arc<ShardStats>, first: Arc<Snapshot>) -> Rc<Self> {
        Rc::new(Self {
            id,
            stats,
            current: RefCell::new(Rc::new(first)),
            pools: RefCell::new(Vec::new()),
            round_robin: RefCell::new(AHashMap::new()),
            rng: Cell::new(
                0x9E37_79B9_7F4A_7C15 ^ (id as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9),
            ),
            listeners: RefCell::new(AHashMap::new()),
            shutdown: Signal::new(),
            ticker: Ticker::new(),
        })
    }

    /// The snapshot a new stream should use.
    #[inline]
    #[allow(clippy::redundant_allocation)] // deliberate: see `current`
    pub fn snapshot(&self) -> Rc<Arc<Snapshot>> {
        Rc::clone(&self.current.borrow())
    }

    /// xorshift64*: fast, shard-local randomness for weighted clusters.
    pub fn random(&self) -> u32 {
        let mut x = self.rng.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.set(x);
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
    }

    pub fn pick_host<'a>(&self, cluster: &'a ClusterSnapshot) -> Option<&'a Host> {
        let mut rr = self.round_robin.borrow_mut();
        let name = cluster.config.name.as_str();
        if let Some(st) = rr.get_mut(name) {
            return pick_round_robin(cluster, st);
        }
        let st = rr.entry(name.to_owned()).or_default();
        pick_round_robin(cluster, st)
    }

    pub fn pool(&self, host: &Host, cluster: &ClusterSnapshot) -> Rc<HostPool> {
        let mut pools = self.pools.borrow_mut();
        let i = host.id.index();
        if pools.len() <= i {
            pools.resize(i + 1, None);
        }
        match &pools[i] {
            Some(p) if p.addr == host.address => Rc::clone(p),
            _ => {
                let p = HostPool::new(
                    host.address,
                    host.id,
                    Arc::clone(&cluster.config),
                    Arc::clone(&self.stats),
                );
                pools[i] = Some(Rc::clone(&p));
                p
            }
        }
    }

    /// Open upstream connections per host id (admin view).
    pub fn pool_connections(&self) -> Vec<(usize, usize)> {
        self.pools
            .borrow()
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.as_ref().map(|p| (i, p.connections())))
            .collect()
    }

    /// Adopts a new snapshot: swaps the pointer, drops pools of hosts that
    /// left (their connections close once in-flight streams finish), and
    /// starts or stops listeners.
    pub fn apply(self: &Rc<Self>, snap: Arc<Snapshot>) -> std::io::Result<()> {
        self.reconcile_pools(&snap);
        self.round_robin
            .borrow_mut()
            .retain(|name, _| snap.clusters.contains_key(name));
        let result = self.reconcile_listeners(&snap);
        self.stats.snapshot_version.set(snap.version);
        self.stats.snapshots_applied.inc();
        *self.current.borrow_mut() = Rc::new(snap);
        result
    }

    /// Work proportional to what changed: clusters shared (same `Arc`) with
    /// the current snapshot are skipped.
    fn reconcile_pools(&self, snap: &Snapshot) {
        let old = Rc::clone(&self.current.borrow());
        let mut pools = self.pools.borrow_mut();
        let mut drop_pool = |id: HostId| {
            if let Some(slot) = pools.get_mut(id.index()) {
                *slot = None;
            }
        };
        for (name, old_c) in &old.clusters {
            match snap.clusters.get(name) {
                Some(new_c) if Arc::ptr_eq(old_c, new_c) => {}
                Some(new_c) => {
                    let same_settings = old_c.config.connect_timeout
                        == new_c.config.connect_timeout
                        && old_c.config.http2 == new_c.config.http2;
                    for h in &old_c.hosts {
                        let survives = new_c.host_by_addr(&h.address).is_some_and(|n| n.id == h.id);
                        if !survives || !same_settings {
                            drop_pool(h.id);
                        }
                    }
                }
                None => old_c.hosts.iter().for_each(|h| drop_pool(h.id)),
            }
        }
        // Hosts new to their cluster may hold a recycled id: start afresh.
        for (name, new_c) in &snap.clusters {
            let old_c = old.clusters.get(name);
            if old_c.is_some_and(|o| Arc::ptr_eq(o, new_c)) {
                continue;
            }
            for h in &new_c.hosts {
                let known = old_c
                    .and_then(|o| o.host_by_addr(&h.address))
                    .is_some_and(|o| o.id == h.id);
                if !known {
                    drop_pool(h.id);
                    if let Some(st) = self.stats.hosts.get(h.id) {
                        st.reset_counters();
                    }
                }
            }
        }
    }

    fn reconcile_listeners(self: &Rc<Self>, snap: &Snapshot) -> std::io::Result<()> {
        let mut running = self.listeners.borrow_mut();
        running.retain(|name, l| {
            let keep = snap
                .listener(name)
                .is_some_and(|cfg| cfg.address == l.address);
            if !keep {
                l.drain.fire();
            }
            keep
        });
        let mut first_err = None;
        for cfg in &snap.listeners {
            if running.contains_key(&cfg.name) {
                continue;
            }
            match TcpListener::bind(cfg.address) {
                Ok(sock) => {
                    let drain = Signal::new();
                    let task = glommio::spawn_local(downstream::accept_loop(
                        Rc::clone(self),
                        sock,
                        Rc::from(cfg.name.as_str()),
                        drain.clone(),
                    ));
                    running.insert(
                        cfg.name.clone(),
                        RunningListener {
                            address: cfg.address,
                            _accept: task,
                            drain,
                        },
                    );
                }
                Err(e) => {
                    first_err.get_or_insert(std::io::Error::other(format!(
                        "listener {} on {}: {e}",
                        cfg.name, cfg.address
                    )));
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Stops accepting everywhere and tells every connection to drain.
    pub fn begin_shutdown(&self) {
        for (_, l) in self.listeners.borrow_mut().drain() {
            l.drain.fire();
        }
        self.shutdown.fire();
    }
}
