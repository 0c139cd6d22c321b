//! Shard-local pools of upstream connections on `h2wire::conn::ClientConn`, one pool per host, each connection driven by its own task.
//!
//! Isolation rules: a connection carries at most `connection window ÷ stream window` streams
//! (stalled streams can never use up the window others need); when every
//! connection is full another is opened, up to [`MAX_CONNS_PER_HOST`];
//! failed connects back off exponentially. A client connection's streams
//! go to the same upstream connection while it has room (batching), else
//! to the least loaded one. Requests are written into a
//! new connection's `ClientConn` at once and go out when the TCP connect
//! completes, so the first requests to a host do not wait for a
//! round of the pool.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use ahash::AHashMap;
use engine::{Cluster, HostId};
use futures_lite::AsyncRead;
use h2wire::conn::{ClientConfig, ClientConn, ClientEvent};
use h2wire::ErrorCode;

use super::inbox::{park, wake, Delivered, Inboxes};
use super::outbuf::OutBuf;
use super::readbuf::ReadBuf;
use crate::io;
use crate::stats::ShardStats;

/// Upper bound of upstream connections per host on one shard.
pub const MAX_CONNS_PER_HOST: usize = 32;
const BACKOFF_BASE: Duration = Duration::from_millis(25);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
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

/// How long a closing upstream connection may take to write its last
/// frames (GOAWAY, resets) to a backend that may not be reading.
const CLOSE_FLUSH: Duration = Duration::from_secs(1);
/// Bytes asked of an upstream socket per read: one read brings the
/// answers of many clients' streams.
const READ_SIZE: usize = 32 * 1024;

pub type PoolRef = Rc<RefCell<Pool>>;

/// A stream's place in a pool: the connection's slot and generation (a
/// slot is reused once its connection is gone), and the stream id on it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UpRef {
    pub slot: usize,
    pub gen: u32,
    pub stream: u32,
}

/// One upstream connection.
pub(crate) struct UpConn {
    gen: u32,
    pub conn: ClientConn,
    /// Upstream stream → (inbox of its downstream connection, downstream
    /// stream). Removed by the downstream side when it is done with the
    /// stream, or when the connection fails.
    routes: AHashMap<u32, (usize, u32)>,
    /// The connection's task, parked until bytes arrive or there is output.
    waker: Option<Waker>,
    /// Failed or closed: takes no streams; the slot may be reused once
    /// its task is gone.
    dead: bool,
    /// The server sent GOAWAY, or the connection spent its reset budget:
    /// no new streams; closes once its streams end.
    draining: bool,
    /// Streams reset before their response head (see [`RESET_BUDGET`]).
    early_resets: u32,
    task_done: bool,
    /// Our cap on its streams (module docs).
    cap: u32,
    /// Bytes its task holds unwritten (the backend's socket is not taking
    /// them), as of the task's last turn, plus the request bytes given to
    /// its codec since.
    unwritten: usize,
    /// Request data was refused for `unwritten`: the task wakes the
    /// connection's streams once it falls below half the limit.
    backed_up: bool,
}

/// Why no upstream stream could be opened now.
pub(crate) enum Acquire {
    /// On this connection slot.
    Ready(usize),
    /// Every connection is full: a [`Delivered::Retry`] comes when one has
    /// room.
    Wait,
    /// The host is backing off after failed connects.
    Failed,
}

/// All connections of one shard to one host.
pub struct Pool {
    pub addr: SocketAddr,
    pub host: HostId,
    cluster: Arc<Cluster>,
    /// Where its connections deliver what they receive.
    inboxes: Rc<Inboxes>,
    /// The shard's counters (the host's, and those of its connections).
    stats: Arc<ShardStats>,
    conns: Vec<UpConn>,
    /// Streams waiting for room: (inbox, downstream stream).
    waiters: VecDeque<(usize, u32)>,
    retry_at: Option<Instant>,
    backoff: Duration,
    next_gen: u32,
    /// Streams of this shard on this host now: what least request compares.
    pub in_flight: u32,
    /// The host left the snapshot: no new streams; connections close once
    /// their streams are done.
    retired: bool,
}

impl Pool {
    pub(crate) fn new(
        addr: SocketAddr,
        host: HostId,
        cluster: Arc<Cluster>,
        inboxes: Rc<Inboxes>,
        stats: Arc<ShardStats>,
    ) -> PoolRef {
        Rc::new(RefCell::new(Self {
            addr,
            host,
            cluster,
            inboxes,
            stats,
            conns: Vec::new(),
            waiters: VecDeque::new(),
            retry_at: None,
            backoff: BACKOFF_BASE,
            next_gen: 0,
            in_flight: 0,
            retired: false,
        }))
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
        self.retired = true;
        for c in &mut self.conns {
            wake(&mut c.waker);
        }
    }

    /// The connection a stream was opened on, while its slot holds it
    /// (same generation), dead or not.
    fn opened_on(conns: &mut [UpConn], r: UpRef) -> Option<&mut UpConn> {
        conns.get_mut(r.slot).filter(|c| c.gen == r.gen)
    }

    /// The live connection a stream was opened on.
    pub(crate) fn conn(&mut self, r: UpRef) -> Option<&mut ClientConn> {
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
    pub(crate) fn conn_at(&mut self, slot: usize) -> Option<&mut ClientConn> {
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
        let c = &mut self.conns[slot];
        c.routes.insert(stream, (inbox, down));
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
            c.routes.remove(&r.stream);
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
        self.waiters.retain(|&w| w != (inbox, down));
    }

    fn kick_waiter(&mut self) {
        while let Some((inbox, down)) = self.waiters.pop_front() {
            if self.inboxes.deliver(inbox, down, Delivered::Retry).is_ok() {
                return;
            }
        }
    }

    fn room(c: &UpConn) -> bool {
        !c.dead && !c.draining && (c.conn.open_streams() as u32) < c.cap && c.conn.can_open_stream()
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
        let live = p.conns.iter().filter(|c| !c.dead).count();
        if live >= MAX_CONNS_PER_HOST || p.retired {
            p.waiters.push_back((inbox, down));
            return Acquire::Wait;
        }
        let (slot, gen) = p.open();
        drop(p);
        // Spawned with no borrow held: glommio may poll it at once.
        glommio::spawn_local(drive(Rc::clone(pool), slot, gen)).detach();
        Acquire::Ready(slot)
    }

    /// A new connection in a free slot (its task is the caller's to
    /// spawn): the slot and its generation.
    fn open(&mut self) -> (usize, u32) {
        let h = &self.cluster.http2;
        let window_cap =
            (h.initial_connection_window_size / h.initial_stream_window_size.max(1)).max(1);
        let cap = h.max_concurrent_streams.min(window_cap).max(1);
        // The cap keeps the connection window larger than the streams'
        // windows at their largest, so one stream's unread response never
        // holds back another's.
        let conn = ClientConn::new(ClientConfig {
            initial_stream_window: self.stream_windows().0,
            connection_window: h.initial_connection_window_size,
            ..ClientConfig::default()
        });
        self.next_gen = self.next_gen.wrapping_add(1);
        let up = UpConn {
            gen: self.next_gen,
            conn,
            routes: AHashMap::default(),
            waker: None,
            dead: false,
            draining: false,
            early_resets: 0,
            task_done: false,
            cap,
            unwritten: 0,
            backed_up: false,
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

/// How a wait on a socket ended.
pub(crate) enum Woken {
    /// `n` bytes were read; 0: the peer closed or the read failed.
    Read(usize),
    /// Another task has work for this one.
    Nudged,
}

/// Drives connection `slot` (generation `gen`) of `pool`: connects, then
/// writes what the downstream tasks gave it, reads, and routes events to
/// the downstream connections owning their streams.
async fn drive(pool: PoolRef, slot: usize, gen: u32) {
    let (addr, host, timeout, shard_stats) = {
        let p = pool.borrow();
        (
            p.addr,
            p.host,
            p.cluster.connect_timeout,
            Arc::clone(&p.stats),
        )
    };
    let stats = shard_stats.hosts.host(host);
    let mut tcp = match io::connect(addr, timeout).await {
        Ok(t) => t,
        Err(e) => {
            tracing::debug!(%addr, "upstream connect failed: {e}");
            stats.cx_connect_fail.inc();
            let mut p = pool.borrow_mut();
            let b = p.backoff;
            p.retry_at = Some(Instant::now() + b);
            p.backoff = (b * 2).min(BACKOFF_MAX);
            drop(p);
            fail(&pool, slot, gen, true);
            finish_task(&pool, slot, gen);
            return;
        }
    };
    let _ = tcp.set_nodelay(true);
    {
        let mut p = pool.borrow_mut();
        p.retry_at = None;
        p.backoff = BACKOFF_BASE;
    }
    stats.cx_total.inc();
    stats.cx_active.inc();
    let mut rb = ReadBuf::default();
    run(&pool, slot, gen, &mut tcp, &mut rb).await;
    stats.cx_active.dec();
    fail(&pool, slot, gen, false);
    finish_task(&pool, slot, gen);
}

/// The connection's loop; returns when it is over.
///
/// Output is written without waiting on the socket ([`OutBuf`]): a
/// backend whose socket stops draining (its windows open, its reads
/// stalled) leaves the request bytes here, while the responses it still
/// sends for the connection's other streams are read and delivered. The
/// output stays bounded by the backend's flow-control windows, which
/// every DATA frame the codec makes is within.
async fn run(
    pool: &PoolRef,
    slot: usize,
    gen: u32,
    tcp: &mut glommio::net::TcpStream,
    rb: &mut ReadBuf,
) {
    let mut out = OutBuf::new(u32::MAX);
    loop {
        let closing = {
            let mut p = pool.borrow_mut();
            let retired = p.retired;
            let c = &mut p.conns[slot];
            if c.gen != gen {
                return;
            }
            out.take(|| c.conn.poll_output());
            c.unwritten = out.bytes();
            // Retired (host left) or failed, and nothing left on it: close.
            (retired || c.dead || c.draining) && c.routes.is_empty()
        };
        if closing {
            out.flush_within(&mut *tcp, CLOSE_FLUSH).await;
            return;
        }
        let room = rb.room(READ_SIZE);
        let woken = poll_fn(|cx| {
            if let Poll::Ready(Err(_)) = out.poll_write(&mut *tcp, cx) {
                return Poll::Ready(Woken::Read(0));
            }
            match Pin::new(&mut *tcp).poll_read(cx, room) {
                Poll::Ready(r) => Poll::Ready(Woken::Read(r.unwrap_or(0))),
                Poll::Pending => {
                    let mut p = pool.borrow_mut();
                    let p = &mut *p;
                    let retired = p.retired;
                    let limit = p.cluster.per_connection_buffer_limit_bytes as usize;
                    let c = &mut p.conns[slot];
                    c.unwritten = out.bytes();
                    if c.backed_up && c.unwritten < limit / 2 {
                        c.backed_up = false;
                        p.inboxes
                            .wake_each(c.routes.values().map(|&(inbox, _)| inbox));
                    }
                    if c.conn.has_output()
                        || ((retired || c.dead || c.draining) && c.routes.is_empty())
                    {
                        return Poll::Ready(Woken::Nudged);
                    }
                    park(&mut c.waker, cx);
                    Poll::Pending
                }
            }
        })
        .await;
        let n = match woken {
            Woken::Read(0) => return,
            Woken::Read(n) => n,
            Woken::Nudged => 0,
        };
        rb.filled(n);
        if n == 0 {
            continue;
        }
        let broken = {
            let mut p = pool.borrow_mut();
            let p = &mut *p;
            let c = &mut p.conns[slot];
            let broken = c.conn.recv(&mut rb.buf).is_err();
            let mut limit_changed = false;
            while let Some(ev) = c.conn.poll_event() {
                match ev {
                    ClientEvent::StreamLimit { .. } => limit_changed = true,
                    // No new streams here; those open go on to their end.
                    ClientEvent::GoAway { .. } => c.draining = true,
                    _ => {}
                }
                route_event(&p.inboxes, c, ev);
            }
            if broken {
                out.take(|| c.conn.poll_output());
            }
            if limit_changed {
                p.kick_waiter();
            }
            broken
        };
        if broken {
            // A connection error: GOAWAY is queued; write it, then close.
            out.flush_within(&mut *tcp, CLOSE_FLUSH).await;
            return;
        }
    }
}

/// Hands an event to the downstream stream it belongs to; the connection
/// window opening goes to every stream on the connection.
fn route_event(inboxes: &Inboxes, c: &mut UpConn, ev: ClientEvent) {
    let Some(stream) = ev.stream() else {
        return;
    };
    if stream == 0 {
        inboxes.wake_each(c.routes.values().map(|&(inbox, _)| inbox));
        return;
    }
    let Some(&(inbox, down)) = c.routes.get(&stream) else {
        give_back(&mut c.conn, ev);
        return;
    };
    if let Err(Delivered::Event(ev)) = inboxes.deliver(inbox, down, Delivered::Event(ev)) {
        c.routes.remove(&stream);
        give_back(&mut c.conn, ev);
    }
}

/// An event nobody takes: its window is released, its header list reused.
fn give_back(conn: &mut ClientConn, ev: ClientEvent) {
    match ev {
        ClientEvent::Data { stream, data, .. } => conn.release(stream, data.len() as u32),
        ClientEvent::Response { head, .. } => conn.recycle(head),
        ClientEvent::Trailers { fields, .. } => conn.recycle(fields),
        _ => {}
    }
}

/// The connection is over: its streams learn it (a connect failure, or a
/// reset as if the server had sent CONNECT_ERROR), and it takes no more.
fn fail(pool: &PoolRef, slot: usize, gen: u32, connect: bool) {
    let mut p = pool.borrow_mut();
    let p = &mut *p;
    let c = &mut p.conns[slot];
    if c.gen != gen {
        return;
    }
    c.dead = true;
    for (_, (inbox, down)) in c.routes.drain() {
        let what = if connect {
            Delivered::ConnectFailed
        } else {
            Delivered::ConnectionLost
        };
        let _ = p.inboxes.deliver(inbox, down, what);
    }
    p.kick_waiter();
}

fn finish_task(pool: &PoolRef, slot: usize, gen: u32) {
    let mut p = pool.borrow_mut();
    if let Some(c) = p.conns.get_mut(slot).filter(|c| c.gen == gen) {
        c.task_done = true;
        c.dead = true;
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
            http2: engine::UpstreamHttp2 {
                initial_stream_window_size: stream_window,
                ..Default::default()
            },
            outlier_detection: None,
            common_lb: Default::default(),
            per_connection_buffer_limit_bytes: buffer_limit,
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
