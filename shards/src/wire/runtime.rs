//! A data shard's runtime: it adopts snapshots (upstream pools, listeners, then the routing context), runs the accept task of each listener, and starts the drain on shutdown.
//!
//! It owns the listener tasks, so it stands above `accept` and the
//! connections; what those tasks share ([`WireShard`]: the routing context,
//! inboxes, pools, the shutdown signal) stands below them. The data shard's
//! main task (`crate::data_shard`) is its only caller.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use ahash::AHashMap;
use engine::snapshot::Host;
use engine::{HealthStatus, Snapshot};
use glommio::net::TcpListener;
use glommio::Task;

use super::accept::{accept_loop, ConnGate};
use super::chain_drains::ChainDrains;
use super::sockets::{ListenSockets, Owner};
use super::WireShard;
use crate::shard::Shard;
use crate::signal::Signal;

/// A listener this shard accepts on: its socket, or the sockets a previous
/// process handed over (more than one when it ran more shards).
struct RunningListener {
    address: SocketAddr,
    /// Dropping a task cancels its accept loop and closes its socket.
    _accepts: Vec<Task<()>>,
    /// The sockets' descriptors as registered for a hot restart, taken
    /// out of the registry before the sockets close.
    registered: Vec<i32>,
    sockets: Arc<ListenSockets>,
    owner: Owner,
    /// Fired when the listener (or one of its chains) goes away: its
    /// connections drain.
    drains: Rc<ChainDrains>,
    /// Its open connections, for the runtime connection limit.
    gate: Rc<ConnGate>,
}

impl Drop for RunningListener {
    fn drop(&mut self) {
        // Before the tasks (fields) drop and close the sockets.
        for fd in &self.registered {
            self.sockets.closing(self.address, self.owner, *fd);
        }
    }
}

/// The runtime of one data shard, owned by its main task.
pub struct ShardRuntime {
    wire: Rc<WireShard>,
    listeners: AHashMap<String, RunningListener>,
    /// `POST /drain_listeners` stopped the listeners: later snapshots
    /// start none (as in Envoy, until the process restarts).
    stopped: bool,
    /// The process's listening sockets (hot restart).
    sockets: Arc<ListenSockets>,
}

impl ShardRuntime {
    /// A runtime around `shard`, with no listener yet: the first
    /// [`Self::apply`] starts them.
    pub fn new(
        shard: Rc<Shard>,
        logs: Arc<crate::access_log::LogWriter>,
        sockets: Arc<ListenSockets>,
    ) -> Self {
        Self {
            wire: WireShard::new(shard, logs),
            listeners: AHashMap::new(),
            stopped: false,
            sockets,
        }
    }

    /// The sockets this shard accepts on for `address`: those a previous
    /// process handed over for it, else one bound now.
    fn listen(&self, address: SocketAddr) -> std::io::Result<Vec<TcpListener>> {
        use std::os::fd::{FromRawFd, IntoRawFd};
        let shard = &self.wire.shard;
        let taken = self
            .sockets
            .take(address, Owner::Shard(shard.id), shard.data_shards);
        if taken.is_empty() {
            return Ok(vec![TcpListener::bind(address)?]);
        }
        taken
            .into_iter()
            .map(|fd| {
                // SAFETY: a listening TCP socket the registry owned, now
                // owned by the listener alone.
                let l = unsafe { TcpListener::from_raw_fd(fd.into_raw_fd()) };
                l.set_nonblocking()?;
                Ok(l)
            })
            .collect()
    }

    /// Adopts a new snapshot: drops pools of hosts that left (their
    /// connections close once in-flight streams finish), stops listeners
    /// that went, hands the snapshot to the routing context (new streams
    /// start with it), then starts the new listeners. A listener that
    /// cannot bind is an error; the rest of the snapshot is adopted all
    /// the same.
    pub fn apply(&mut self, snap: Arc<Snapshot>) -> std::io::Result<()> {
        let old = self.wire.shard.snapshot();
        self.reconcile_pools(&old, &snap);
        self.stop_listeners(&snap);
        // Hosts new to their cluster may hold a recycled id: their pools
        // start afresh, as `adopt` resets their counters.
        let wire = &self.wire;
        wire.follow_budgets(&snap);
        wire.follow_overload(&snap);
        wire.shard
            .adopt(Arc::clone(&snap), |h| wire.drop_pool(h.id));
        // Only now: glommio runs a spawned task at once, so a new
        // listener's accept loop serves a connection already queued (a
        // hot restart's handed-over socket has them) before `start_listeners`
        // returns, and that connection must find its listener in the
        // shard's snapshot, not be refused by the one before it.
        self.start_listeners(&snap)
    }

    /// Drops the pools of hosts that left their cluster, whose cluster's
    /// connection settings changed, or that just failed their checks in a
    /// cluster that closes connections then. Work proportional to what changed:
    /// clusters shared (same `Arc`) with the current snapshot are skipped.
    fn reconcile_pools(&self, old: &Snapshot, snap: &Snapshot) {
        let drop_pool = |h: &Host| self.wire.drop_pool(h.id);
        for (name, old_c) in &old.clusters {
            match snap.clusters.get(name) {
                Some(new_c) if Arc::ptr_eq(old_c, new_c) => {}
                Some(new_c) => {
                    let same_settings = old_c.config.same_connections(&new_c.config);
                    // A55: a DRAINING host keeps its connections only while
                    // sessions may still reach it (DRAINING in the set).
                    let keep_draining = new_c
                        .config
                        .common_lb
                        .override_host_status
                        .contains(HealthStatus::Draining);
                    // Envoy's `close_connections_on_host_health_failure`:
                    // a host that just failed its checks loses its pool.
                    let close_on_failure = new_c
                        .config
                        .health_check
                        .as_ref()
                        .is_some_and(|hc| hc.close_connections_on_failure);
                    for h in &old_c.hosts {
                        let survives = new_c.host_by_addr(&h.address).is_some_and(|n| {
                            n.id == h.id
                                && (keep_draining || n.health != HealthStatus::Draining)
                                && !(close_on_failure && n.active.failed() && !h.active.failed())
                        });
                        if !survives || !same_settings {
                            drop_pool(h);
                        }
                    }
                }
                None => old_c.hosts.iter().for_each(drop_pool),
            }
        }
    }

    /// Stops the listeners `snap` no longer has (or has elsewhere); those
    /// it keeps drain only the chains that went.
    fn stop_listeners(&mut self, snap: &Snapshot) {
        self.listeners.retain(|name, l| match snap.listener(name) {
            Some(cfg) if cfg.address == l.address => {
                l.drains.keep_chains(cfg);
                true
            }
            _ => {
                l.drains.fire_all();
                false
            }
        });
    }

    /// Starts the listeners of `snap` not running yet.
    fn start_listeners(&mut self, snap: &Snapshot) -> std::io::Result<()> {
        // The new snapshot may change a connection limit: a loop waiting
        // for a free slot looks again.
        for l in self.listeners.values() {
            l.gate.nudge();
        }
        let mut first_err = None;
        for cfg in &snap.listeners {
            if self.listeners.contains_key(&cfg.name) || self.stopped {
                continue;
            }
            match self.listen(cfg.address) {
                Ok(socks) => {
                    use std::os::fd::AsRawFd;
                    let drains = Rc::new(ChainDrains::new(cfg));
                    let gate = Rc::new(ConnGate::new(self.sockets.shard_load(self.wire.shard.id)));
                    let owner = Owner::Shard(self.wire.shard.id);
                    let mut registered = Vec::with_capacity(socks.len());
                    let mut accepts = Vec::with_capacity(socks.len());
                    for sock in socks {
                        let fd = sock.as_raw_fd();
                        self.sockets.opened(cfg.address, owner, fd);
                        registered.push(fd);
                        accepts.push(glommio::spawn_local(accept_loop(
                            Rc::clone(&self.wire),
                            sock,
                            Rc::from(cfg.name.as_str()),
                            Rc::clone(&drains),
                            Rc::clone(&gate),
                        )));
                    }
                    self.listeners.insert(
                        cfg.name.clone(),
                        RunningListener {
                            address: cfg.address,
                            _accepts: accepts,
                            registered,
                            sockets: Arc::clone(&self.sockets),
                            owner,
                            drains,
                            gate,
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

    /// `/healthcheck/fail` (true) or `/healthcheck/ok` (false): the
    /// connections of `drain_type: DEFAULT` listeners drain while it fails.
    pub fn set_health_failed(&mut self, failed: bool) {
        self.wire.shard.set_health_failed(failed);
        let mut signal = self.wire.health_drain.borrow_mut();
        match (failed, signal.is_fired()) {
            (true, false) => signal.fire(),
            (false, true) => *signal = Signal::new(),
            _ => {}
        }
    }

    /// `POST /drain_listeners`: every connection drains (`--drain-time-s`);
    /// the sockets close now, or with `graceful` at the end of the drain
    /// time (new connections meanwhile drain as they open), as Envoy's.
    /// Later snapshots start no listener.
    pub fn drain_listeners(&mut self, graceful: bool) {
        self.stopped = true;
        let listeners: Vec<RunningListener> = self.listeners.drain().map(|(_, l)| l).collect();
        if !graceful {
            for l in &listeners {
                l.drains.fire_all();
            }
            return;
        }
        for l in &listeners {
            l.drains.fire_chains();
        }
        let drain_time = self.wire.shard.drain.time;
        glommio::spawn_local(async move {
            glommio::timer::sleep(drain_time).await;
            // The sockets close; connections still opening end.
            for l in &listeners {
                l.drains.fire_all();
            }
        })
        .detach();
    }

    /// The drain is over: connections still opening end.
    pub fn stop(&self) {
        self.wire.stopped.fire();
    }

    /// Stops accepting everywhere and tells every connection to drain.
    pub fn begin_shutdown(&mut self) {
        for (_, l) in self.listeners.drain() {
            l.drains.fire_all();
        }
        self.wire.shutdown.fire();
    }
}
