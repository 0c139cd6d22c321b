//! Opening a stream: the pool's connection that takes it, or a new
//! connection (and its task) when all are full, or a wait.

use std::rc::Rc;
use std::time::Instant;

use super::conn::UpConn;
use super::state::{Pool, PoolRef};
use super::task;
use crate::wire::codec::Proto;

/// Upper bound of HTTP/2 connections per host on one shard.
pub const MAX_CONNS_PER_HOST: usize = 32;
/// Upper bound of HTTP/1.1 connections per host on one shard: one per
/// request in flight. Envoy's default `max_connections` circuit breaker.
pub const MAX_H1_CONNS_PER_HOST: usize = 1024;

/// Why no upstream stream could be opened now.
pub(crate) enum Acquire {
    /// On this connection slot.
    Ready(usize),
    /// Every connection is full: a [`Delivered::Retry`] comes when one has
    /// room.
    ///
    /// [`Delivered::Retry`]: crate::wire::inbox::Delivered::Retry
    Wait,
    /// The host is backing off after failed connects.
    Failed,
    /// A circuit breaker is open: too many requests wait for a connection
    /// (`max_pending_requests`), or none may be opened and none is there to
    /// wait for (`max_connections`). Answered 503 with `x-envoy-overloaded`.
    Overflow,
}

impl Pool {
    fn room(c: &UpConn) -> bool {
        !c.dead
            && !c.draining
            && !c.alpn_pending
            && (c.conn.open_streams() as u32) < c.cap
            && c.conn.can_open_stream()
    }

    fn max_conns(&self) -> usize {
        let fixed = match self.protocol() {
            Some(Proto::H1) => MAX_H1_CONNS_PER_HOST,
            _ => MAX_CONNS_PER_HOST,
        };
        match self.budget.per_host_connections() {
            Some(m) => fixed.min(m as usize),
            None => fixed,
        }
    }

    /// Queues a stream for room, within `max_pending_requests`.
    fn wait(&mut self, inbox: usize, down: u32) -> Acquire {
        if !self.budget.try_pending() {
            self.stats.hosts.host(self.host).rq_pending_overflow.inc();
            self.cluster_stats.upstream_rq_pending_overflow.inc();
            return Acquire::Overflow;
        }
        self.waiters.push_back((inbox, down));
        Acquire::Wait
    }

    /// A connection slot that may open one more stream now, opening a new
    /// connection if all are full; else the caller waits or fails.
    pub(crate) fn acquire(pool: &PoolRef, inbox: usize, down: u32) -> Acquire {
        let mut p = pool.borrow_mut();
        // A client connection's streams go to one upstream connection while
        // it has room: the requests a client sent together then leave in
        // one write, their responses come back in one read and go out to
        // the client in one write. Spread over all connections they took a
        // write and a read on each.
        let n = p.conns.len();
        if n > 0 && Self::room(&p.conns[inbox % n]) {
            return Acquire::Ready(inbox % n);
        }
        if let Some(slot) = p
            .conns
            .iter()
            .enumerate()
            .filter(|(_, c)| Self::room(c))
            .min_by_key(|(_, c)| c.conn.open_streams())
            .map(|(i, _)| i)
        {
            return Acquire::Ready(slot);
        }
        if p.retry_at.is_some_and(|at| Instant::now() < at) {
            return Acquire::Failed;
        }
        // A handshake that will say which protocol the host speaks: wait
        // for it rather than open more connections blind.
        if p.retired {
            // The host left, or its cluster's settings changed: a waiter
            // here would wait for nothing (no new connection opens).
            return Acquire::Failed;
        }
        let learning = p.conns.iter().any(|c| c.alpn_pending && !c.dead);
        let live = p.conns.iter().filter(|c| !c.dead).count();
        if learning || live >= p.max_conns() {
            return p.wait(inbox, down);
        }
        if !p.budget.try_connection() {
            // The cluster holds all the connections it may: wait for room
            // on one of this host's, if it has any.
            p.stats.hosts.host(p.host).cx_overflow.inc();
            p.cluster_stats.upstream_cx_overflow.inc();
            if live == 0 {
                p.stats.hosts.host(p.host).rq_pending_overflow.inc();
                p.cluster_stats.upstream_rq_pending_overflow.inc();
                return Acquire::Overflow;
            }
            return p.wait(inbox, down);
        }
        let (slot, gen) = p.open();
        // A handshake to learn the protocol: the stream waits for it.
        let waited = p.conns[slot].alpn_pending.then(|| p.wait(inbox, down));
        drop(p);
        // Spawned with no borrow held: glommio may poll it at once.
        glommio::spawn_local(task::drive(Rc::clone(pool), slot, gen)).detach();
        waited.unwrap_or(Acquire::Ready(slot))
    }
}
