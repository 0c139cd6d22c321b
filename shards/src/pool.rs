//! Shard-local pools of multiplexed HTTP/2 connections, one pool per host.
//!
//! Isolation rules this module enforces:
//! - A connection carries at most `conn_window / stream_window` streams, so
//!   streams whose readers stall (their stream windows full) can never use up
//!   the connection window that other streams on it need.
//! - When every connection is at its limit (ours or the peer's
//!   SETTINGS_MAX_CONCURRENT_STREAMS), another connection is opened, up to
//!   [`MAX_CONNS_PER_HOST`]; one client holding many streams therefore does not
//!   starve the others.
//! - Connection failures back off (exponentially, capped), so a dead host is
//!   not hammered with connects by every request.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use engine::Cluster;
use futures_util::future::{FutureExt, LocalBoxFuture, Shared};
use h2::client::SendRequest;

use crate::io;
use crate::stats::{HostStats, ShardStats};
use engine::HostId;

/// Upper bound of upstream connections per host on one shard.
pub const MAX_CONNS_PER_HOST: usize = 32;
const BACKOFF_BASE: Duration = Duration::from_millis(25);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Why no upstream stream could be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolError {
    /// TCP connect or h2 handshake failed (or the host is in backoff).
    ConnectFailure(Rc<str>),
}

/// One multiplexed upstream connection.
pub struct UpstreamConn {
    send: SendRequest<Bytes>,
    active: Cell<u32>,
    /// Set when the connection task ends or a GOAWAY/error is seen: no new
    /// streams go here.
    closed: Rc<Cell<bool>>,
    /// Our cap on streams for this connection (see module docs).
    cap: u32,
}

impl UpstreamConn {
    fn limit(&self) -> u32 {
        let peer = self.send.current_max_send_streams().min(u32::MAX as usize) as u32;
        self.cap.min(peer.max(1))
    }

    fn usable(&self) -> bool {
        !self.closed.get()
    }

    /// Marks the connection unusable for new streams (GOAWAY, error).
    pub fn retire(&self) {
        self.closed.set(true);
    }

    pub fn sender(&self) -> SendRequest<Bytes> {
        self.send.clone()
    }
}

/// A stream slot on a connection; releases the slot when dropped.
pub struct Lease {
    pub conn: Rc<UpstreamConn>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.conn
            .active
            .set(self.conn.active.get().saturating_sub(1));
    }
}

type PendingConnect = Shared<LocalBoxFuture<'static, Result<(), PoolError>>>;

/// What a connection attempt needs, owned apart from the pool so that an
/// attempt in flight never keeps a removed pool (and its connections) alive.
struct Target {
    addr: SocketAddr,
    cluster: Arc<Cluster>,
    shard_stats: Arc<ShardStats>,
    host: HostId,
}

impl Target {
    fn stats(&self) -> &HostStats {
        self.shard_stats.hosts.host(self.host)
    }
}

/// All connections of one shard to one host.
pub struct HostPool {
    pub addr: SocketAddr,
    target: Rc<Target>,
    conns: RefCell<Vec<Rc<UpstreamConn>>>,
    pending: RefCell<Option<PendingConnect>>,
    /// After a failed connect: no new attempt before this instant.
    retry_at: Cell<Option<Instant>>,
    backoff: Cell<Duration>,
    /// Streams of this shard on this host now: what least request compares.
    /// Kept here, not in the per-`HostId` stats, because a recycled id gets
    /// a new pool: streams still running on the id's previous host never
    /// count against its new one.
    in_flight: Cell<u32>,
}

/// Holds one of a pool's in-flight slots until dropped (whatever way the
/// stream ends).
pub struct InFlight(Rc<HostPool>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let n = &self.0.in_flight;
        n.set(n.get().saturating_sub(1));
    }
}

impl HostPool {
    /// Counts a stream in flight until the guard drops (A48: incremented on
    /// pick, decremented when the stream ends, whatever the outcome).
    pub fn enter(self: &Rc<Self>) -> InFlight {
        self.in_flight.set(self.in_flight.get() + 1);
        InFlight(Rc::clone(self))
    }

    pub fn in_flight(&self) -> u32 {
        self.in_flight.get()
    }

    pub fn new(
        addr: SocketAddr,
        host: HostId,
        cluster: Arc<Cluster>,
        shard_stats: Arc<ShardStats>,
    ) -> Rc<Self> {
        Rc::new(Self {
            addr,
            target: Rc::new(Target {
                addr,
                cluster,
                shard_stats,
                host,
            }),
            conns: RefCell::new(Vec::new()),
            pending: RefCell::new(None),
            retry_at: Cell::new(None),
            backoff: Cell::new(BACKOFF_BASE),
            in_flight: Cell::new(0),
        })
    }

    /// Whether this pool was built for `cluster`'s current connection settings.
    pub fn same_settings(&self, cluster: &Cluster) -> bool {
        let own = &self.target.cluster;
        own.connect_timeout == cluster.connect_timeout && own.http2 == cluster.http2
    }

    /// Number of open connections (for admin).
    pub fn connections(&self) -> usize {
        self.conns.borrow().iter().filter(|c| c.usable()).count()
    }

    /// Returns a stream slot, connecting if needed.
    pub async fn acquire(self: &Rc<Self>) -> Result<Lease, PoolError> {
        loop {
            let pending = {
                let mut conns = self.conns.borrow_mut();
                conns.retain(|c| c.usable());
                let best = conns.iter().min_by_key(|c| c.active.get()).cloned();
                if let Some(c) = &best {
                    if c.active.get() < c.limit() {
                        return Ok(self.lease(c.clone()));
                    }
                }
                let pending = self.pending.borrow().clone();
                match (pending, best) {
                    (Some(p), _) => p,
                    // All connections full and no room for another: queue on
                    // the least loaded one (h2's `ready()` waits for a slot).
                    (None, Some(c)) if conns.len() >= MAX_CONNS_PER_HOST => {
                        return Ok(self.lease(c));
                    }
                    (None, best) => {
                        if let Some(at) = self.retry_at.get() {
                            if Instant::now() < at {
                                if let Some(c) = best {
                                    return Ok(self.lease(c));
                                }
                                return Err(PoolError::ConnectFailure(
                                    "connection failure (backing off)".into(),
                                ));
                            }
                        }
                        let fut = Self::connect(Rc::downgrade(self), Rc::clone(&self.target))
                            .boxed_local()
                            .shared();
                        *self.pending.borrow_mut() = Some(fut.clone());
                        fut
                    }
                }
            };
            pending.await?;
        }
    }

    fn lease(&self, conn: Rc<UpstreamConn>) -> Lease {
        conn.active.set(conn.active.get() + 1);
        Lease { conn }
    }

    async fn connect(pool: Weak<Self>, target: Rc<Target>) -> Result<(), PoolError> {
        let result = open(&target).await;
        // The pool may have been dropped (host removed) while we connected:
        // then a new connection is simply dropped, which closes it.
        let Some(pool) = pool.upgrade() else {
            return Err(PoolError::ConnectFailure("host removed".into()));
        };
        *pool.pending.borrow_mut() = None;
        match result {
            Ok(conn) => {
                pool.retry_at.set(None);
                pool.backoff.set(BACKOFF_BASE);
                pool.conns.borrow_mut().push(conn);
                Ok(())
            }
            Err(msg) => {
                target.stats().cx_connect_fail.inc();
                let b = pool.backoff.get();
                pool.retry_at.set(Some(Instant::now() + b));
                pool.backoff.set((b * 2).min(BACKOFF_MAX));
                Err(PoolError::ConnectFailure(msg.into()))
            }
        }
    }
}

async fn open(target: &Target) -> Result<Rc<UpstreamConn>, String> {
    let c = &target.cluster;
    let tcp = io::connect(target.addr, c.connect_timeout)
        .await
        .map_err(|e| format!("connect {}: {e}", target.addr))?;
    let h = &c.http2;
    // Cap streams so that stalled streams can never fill the connection
    // window (module docs); never below 1.
    let window_cap =
        (h.initial_connection_window_size / h.initial_stream_window_size.max(1)).max(1);
    let cap = h.max_concurrent_streams.min(window_cap).max(1);
    let (send, conn) = h2::client::Builder::new()
        .initial_max_send_streams(cap as usize)
        .initial_window_size(h.initial_stream_window_size)
        .initial_connection_window_size(h.initial_connection_window_size)
        .max_concurrent_reset_streams(cap as usize * 2)
        .handshake::<_, Bytes>(io::h2_io(tcp))
        .await
        .map_err(|e| format!("h2 handshake with {}: {e}", target.addr))?;
    let closed = Rc::new(Cell::new(false));
    target.stats().cx_total.inc();
    target.stats().cx_active.inc();
    let closed2 = Rc::clone(&closed);
    let shard_stats = Arc::clone(&target.shard_stats);
    let host = target.host;
    glommio::spawn_local(async move {
        let _ = conn.await;
        closed2.set(true);
        shard_stats.hosts.host(host).cx_active.dec();
    })
    .detach();
    Ok(Rc::new(UpstreamConn {
        send,
        active: Cell::new(0),
        closed,
        cap,
    }))
}
