//! Shard-local pools of upstream connections (HTTP/2 or HTTP/1.1, cleartext or TLS), one pool per host, each connection driven by its own task.
//!
//! Isolation rules: an HTTP/2 connection carries at most `connection window ÷ stream window` streams
//! (stalled streams can never use up the window others need); when every
//! connection is full another is opened, up to [`MAX_CONNS_PER_HOST`];
//! failed connects back off exponentially. A client connection's streams
//! go to the same upstream connection while it has room (batching), else
//! to the least loaded one. Requests are written into a
//! new connection's `ClientConn` at once and go out when the TCP connect
//! completes, so the first requests to a host do not wait for a
//! round of the pool.
//!
//! An HTTP/1.1 connection carries one stream at a time and is reused once
//! it is done; a pool opens up to [`MAX_H1_CONNS_PER_HOST`] of them. With
//! `auto_config` the protocol is what the server's ALPN chose: the pool's
//! first connection takes no stream until its handshake said which, and
//! later ones assume the same (one that finds otherwise fails as a lost
//! connection, and the pool learns the new answer).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use ahash::AHashMap;
use engine::UpstreamProtocol;
use engine::{Cluster, HostId};
use futures_lite::AsyncRead;
use glommio::timer::Timer;
use h2wire::conn::{ClientConfig, ClientEvent};
use h2wire::ErrorCode;

use super::codec::Proto;
use super::inbox::{park, wake, Delivered, Inboxes};
use super::outbuf::OutBuf;
use super::readbuf::ReadBuf;
use super::tls::Transport;
use super::upcodec::UpCodec;
use crate::io;
use crate::stats::ShardStats;

/// Upper bound of HTTP/2 connections per host on one shard.
pub const MAX_CONNS_PER_HOST: usize = 32;
/// Upper bound of HTTP/1.1 connections per host on one shard: one per
/// request in flight. Envoy's default `max_connections` circuit breaker.
pub const MAX_H1_CONNS_PER_HOST: usize = 1024;
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
    pub conn: UpCodec,
    /// Opened in a pool whose `auto_config` protocol is not known yet: it
    /// takes no stream until its handshake chose one.
    alpn_pending: bool,
    /// Streams opened on it, for `max_requests_per_connection`.
    requests: u32,
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
    /// When its last stream left it (none routed since): the cluster's
    /// `idle_timeout` runs from here. Stamped where a route is removed,
    /// not by the task, which may sleep through it.
    idle_since: Option<Instant>,
}

impl UpConn {
    /// Nothing more will happen on it: it takes no new stream (its pool
    /// is retired, it failed, drains, or its codec closes) and carries
    /// none.
    fn is_over(&self, retired: bool) -> bool {
        (retired || self.dead || self.draining || self.conn.is_closing()) && self.routes.is_empty()
    }

    /// The stream no longer routes here; its last one leaving starts the
    /// idle time.
    fn forget(&mut self, stream: u32) {
        if self.routes.remove(&stream).is_some() && self.routes.is_empty() {
            self.idle_since = Some(Instant::now());
        }
    }
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
    /// With `auto_config`: what ALPN chose on the last handshake.
    auto: Option<Proto>,
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
            auto: None,
            retired: false,
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
        // Nothing here will take them any more: they try again, and fail
        // (see `acquire`) rather than wait for a pool that is going.
        self.kick_all_waiters();
    }

    /// The connection a stream was opened on, while its slot holds it
    /// (same generation), dead or not.
    fn opened_on(conns: &mut [UpConn], r: UpRef) -> Option<&mut UpConn> {
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
        if max.is_some_and(|max| c.requests >= max) && !c.draining {
            // Its streams go on to their end; new ones go elsewhere.
            c.draining = true;
            self.stats.hosts.host(self.host).cx_max_requests.inc();
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
        self.waiters.retain(|&w| w != (inbox, down));
    }

    fn kick_waiter(&mut self) {
        while let Some((inbox, down)) = self.waiters.pop_front() {
            if self.inboxes.deliver(inbox, down, Delivered::Retry).is_ok() {
                return;
            }
        }
    }

    /// Every waiter tries again: a connection's protocol became known, and
    /// an HTTP/2 one may take them all.
    fn kick_all_waiters(&mut self) {
        for (inbox, down) in std::mem::take(&mut self.waiters) {
            let _ = self.inboxes.deliver(inbox, down, Delivered::Retry);
        }
    }

    fn room(c: &UpConn) -> bool {
        !c.dead
            && !c.draining
            && !c.alpn_pending
            && (c.conn.open_streams() as u32) < c.cap
            && c.conn.can_open_stream()
    }

    /// The protocol a new connection starts with; `None`: not known until
    /// its handshake (`auto_config`, no handshake yet).
    fn protocol(&self) -> Option<Proto> {
        match self.cluster.upstream.protocol {
            UpstreamProtocol::Http2 => Some(Proto::H2),
            UpstreamProtocol::Http1 => Some(Proto::H1),
            UpstreamProtocol::Auto => self.auto,
        }
    }

    fn max_conns(&self) -> usize {
        match self.protocol() {
            Some(Proto::H1) => MAX_H1_CONNS_PER_HOST,
            _ => MAX_CONNS_PER_HOST,
        }
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
            p.waiters.push_back((inbox, down));
            return Acquire::Wait;
        }
        let (slot, gen) = p.open();
        let pending = p.conns[slot].alpn_pending;
        if pending {
            p.waiters.push_back((inbox, down));
        }
        drop(p);
        // Spawned with no borrow held: glommio may poll it at once.
        glommio::spawn_local(drive(Rc::clone(pool), slot, gen)).detach();
        if pending {
            Acquire::Wait
        } else {
            Acquire::Ready(slot)
        }
    }

    /// A codec for a new connection speaking `proto` (HTTP/2 when not
    /// known yet: replaced before any stream is opened on it), and its cap
    /// on streams.
    fn codec(&self, proto: Option<Proto>) -> (UpCodec, u32) {
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
    fn open(&mut self) -> (usize, u32) {
        let proto = self.protocol();
        let (conn, cap) = self.codec(proto);
        self.next_gen = self.next_gen.wrapping_add(1);
        let up = UpConn {
            gen: self.next_gen,
            conn,
            alpn_pending: proto.is_none(),
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

/// How a wait on a socket ended.
pub(crate) enum Woken {
    /// `n` bytes were read; 0: the peer closed or the read failed.
    Read(usize),
    /// Another task has work for this one.
    Nudged,
}

/// Drives connection `slot` (generation `gen`) of `pool`: connects (TCP,
/// then TLS when the cluster has it), then writes what the downstream
/// tasks gave it, reads, and routes events to the downstream connections
/// owning their streams.
async fn drive(pool: PoolRef, slot: usize, gen: u32) {
    let (addr, host, timeout, shard_stats, tls) = {
        let p = pool.borrow();
        (
            p.addr,
            p.host,
            p.cluster.connect_timeout,
            Arc::clone(&p.stats),
            p.cluster.upstream.tls.clone(),
        )
    };
    let stats = shard_stats.hosts.host(host);
    let (mut transport, alpn) = match connect(addr, timeout, tls.as_deref()).await {
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
    {
        let mut p = pool.borrow_mut();
        p.retry_at = None;
        p.backoff = BACKOFF_BASE;
    }
    stats.cx_total.inc();
    stats.cx_active.inc();
    if adopt_protocol(&pool, slot, gen, alpn) {
        let mut rb = ReadBuf::default();
        run(&pool, slot, gen, &mut transport, &mut rb).await;
    } else {
        tracing::debug!(%addr, "upstream ALPN changed protocol: connection dropped");
    }
    stats.cx_active.dec();
    fail(&pool, slot, gen, false);
    finish_task(&pool, slot, gen);
}

/// TCP within the connect timeout, then TLS within what is left of it
/// (Envoy counts a TLS connection as connected once its handshake is
/// done): the transport and the protocol ALPN chose.
async fn connect(
    addr: SocketAddr,
    timeout: Duration,
    tls: Option<&engine::tls::UpstreamTls>,
) -> std::io::Result<(Transport, Option<Proto>)> {
    let started = Instant::now();
    let tcp = io::connect(addr, timeout).await?;
    let _ = tcp.set_nodelay(true);
    match tls {
        None => Ok((Transport::Plain(tcp), None)),
        Some(t) => {
            let left = timeout.saturating_sub(started.elapsed());
            super::tls::connect(tcp, t, addr, left).await
        }
    }
}

/// With `auto_config`, takes the protocol the handshake chose (no ALPN:
/// HTTP/1.1, as in Envoy): a connection that waited for it gets its codec
/// and the pool's waiters try again. False: a connection opened on the
/// pool's last answer found another; it is dropped (its streams learn it
/// as a lost connection) and the pool keeps the new answer.
fn adopt_protocol(pool: &PoolRef, slot: usize, gen: u32, alpn: Option<Proto>) -> bool {
    let mut p = pool.borrow_mut();
    if p.cluster.upstream.protocol != UpstreamProtocol::Auto || p.conns[slot].gen != gen {
        return true;
    }
    let chosen = alpn.unwrap_or(Proto::H1);
    let before = p.auto.replace(chosen);
    if !p.conns[slot].alpn_pending {
        return before == Some(chosen);
    }
    let (codec, cap) = p.codec(Some(chosen));
    let c = &mut p.conns[slot];
    c.conn = codec;
    c.cap = cap;
    c.alpn_pending = false;
    p.kick_all_waiters();
    true
}

/// How a wait on the connection ended.
enum UpWoken {
    /// `n` bytes were read; 0: the server closed its side.
    Read(usize),
    /// The socket failed.
    Failed,
    /// Another task has work for this one.
    Nudged,
    /// The idle timer fired: the connection may have had no stream for
    /// the cluster's `idle_timeout`.
    IdleCheck,
}

/// The connection's loop; returns when it is over.
///
/// Output is written without waiting on the socket ([`OutBuf`]): a
/// backend whose socket stops draining (its windows open, its reads
/// stalled) leaves the request bytes here, while the responses it still
/// sends for the connection's other streams are read and delivered. The
/// output stays bounded by the backend's flow-control windows, which
/// every DATA frame the codec makes is within (HTTP/1.1: by the
/// downstream side's `takes_request_data`).
///
/// An HTTP/1.1 response past its window is not read: its bytes wait in
/// the socket, and those already read wait in `rb` until a release opens
/// the window and nudges the task.
///
/// The idle timer stays armed while the connection lives and is re-armed
/// when it fires (for what is left of the idle time, or all of it when
/// streams are open): arming it whenever the last stream leaves would
/// cost a timer per request on HTTP/1.1.
async fn run(pool: &PoolRef, slot: usize, gen: u32, tcp: &mut Transport, rb: &mut ReadBuf) {
    let mut out = OutBuf::new(u32::MAX);
    let idle_timeout = pool.borrow().cluster.upstream.idle_timeout;
    let mut idle_timer: Option<Pin<Box<Timer>>> = None;
    loop {
        let (closing, pending) = {
            let mut p = pool.borrow_mut();
            let retired = p.retired;
            let c = &mut p.conns[slot];
            if c.gen != gen {
                return;
            }
            out.take(|| c.conn.poll_output());
            c.unwritten = out.bytes();
            if let (None, Some(t)) = (&idle_timer, idle_timeout) {
                let left = c.idle_since.map_or(t, |since| {
                    (since + t).saturating_duration_since(Instant::now())
                });
                idle_timer = Some(Box::pin(Timer::new(left)));
            }
            // Retired (host left), failed or closing, and nothing left on
            // it: close.
            let closing = c.is_over(retired);
            (closing, c.conn.has_pending_input(&rb.buf))
        };
        if closing {
            out.flush_within(&mut *tcp, CLOSE_FLUSH).await;
            return;
        }
        if pending {
            if take_input(pool, slot, rb, &mut out) {
                out.flush_within(&mut *tcp, CLOSE_FLUSH).await;
                return;
            }
            continue;
        }
        let wants = pool.borrow().conns[slot].conn.wants_input();
        // Reading: room at the buffer's tail. Not reading: the bytes that
        // wait for the window, to see when they can be taken.
        let (mut room, waiting) = if wants {
            (Some(rb.room(READ_SIZE)), None)
        } else {
            (None, Some(&rb.buf))
        };
        let woken = poll_fn(|cx| {
            if let Poll::Ready(Err(_)) = out.poll_write(&mut *tcp, cx) {
                return Poll::Ready(UpWoken::Failed);
            }
            if let Some(timer) = idle_timer.as_mut() {
                if timer.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(UpWoken::IdleCheck);
                }
            }
            if let Some(room) = room.as_deref_mut() {
                if let Poll::Ready(r) = Pin::new(&mut *tcp).poll_read(cx, room) {
                    return Poll::Ready(match r {
                        Ok(n) => UpWoken::Read(n),
                        // A TLS server that closed without close_notify
                        // (rustls says UnexpectedEof): still the end of a
                        // body that runs to the close, as Envoy takes it;
                        // a framed one cut short is caught as truncated.
                        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => UpWoken::Read(0),
                        Err(_) => UpWoken::Failed,
                    });
                }
            }
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
                || c.conn.wants_input() != wants
                || waiting.is_some_and(|buf| c.conn.has_pending_input(buf))
                || c.is_over(retired)
            {
                return Poll::Ready(UpWoken::Nudged);
            }
            park(&mut c.waker, cx);
            Poll::Pending
        })
        .await;
        let n = match woken {
            UpWoken::Failed => return,
            UpWoken::Read(0) => {
                // The server closed: an HTTP/1.1 body that runs to the
                // close ends here; streams cut short learn it below.
                let mut p = pool.borrow_mut();
                let p = &mut *p;
                let c = &mut p.conns[slot];
                if c.conn.recv_eof().is_ok() {
                    while let Some(ev) = c.conn.poll_event() {
                        route_event(&p.inboxes, c, ev);
                    }
                }
                return;
            }
            UpWoken::Read(n) => n,
            UpWoken::Nudged => 0,
            UpWoken::IdleCheck => {
                idle_timer = None;
                close_if_idle(pool, slot, idle_timeout);
                0
            }
        };
        if wants {
            // Gives back the room the read did not fill (only then was
            // there any).
            rb.filled(n);
        }
        if n > 0 && take_input(pool, slot, rb, &mut out) {
            // A connection error: GOAWAY is queued; write it, then close.
            out.flush_within(&mut *tcp, CLOSE_FLUSH).await;
            return;
        }
    }
}

/// A connection without a stream for the cluster's `idle_timeout` takes
/// no more; the loop then closes it (Envoy's `upstream_cx_idle_timeout`).
fn close_if_idle(pool: &PoolRef, slot: usize, idle_timeout: Option<Duration>) {
    let mut p = pool.borrow_mut();
    let p = &mut *p;
    let c = &mut p.conns[slot];
    let idle_for = c.idle_since.map(|since| since.elapsed());
    if idle_for
        .zip(idle_timeout)
        .is_some_and(|(idle, t)| idle >= t)
        && !c.draining
    {
        c.draining = true;
        p.stats.hosts.host(p.host).cx_idle_timeout.inc();
    }
}

/// Hands what `rb` holds to the codec and routes its events; true when
/// the connection broke (its last output is in `out`).
fn take_input(pool: &PoolRef, slot: usize, rb: &mut ReadBuf, out: &mut OutBuf) -> bool {
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
    // The last event of a stream's response: the stream is no longer the
    // connection's to answer for, so a close that follows (an HTTP/1.1
    // server's, after a body that ran to it) is not a loss for it.
    let ends = match &ev {
        ClientEvent::Response {
            informational,
            end_stream,
            ..
        } => *end_stream && !informational,
        ClientEvent::Data { end_stream, .. } => *end_stream,
        ClientEvent::Trailers { .. } | ClientEvent::Reset { .. } | ClientEvent::TooLarge { .. } => {
            true
        }
        _ => false,
    };
    match inboxes.deliver(inbox, down, Delivered::Event(ev)) {
        Ok(()) if ends => c.forget(stream),
        Ok(()) => {}
        Err(Delivered::Event(ev)) => {
            c.forget(stream);
            give_back(&mut c.conn, ev);
        }
        Err(_) => c.forget(stream),
    }
}

/// An event nobody takes: its window is released, its header list reused.
fn give_back(conn: &mut UpCodec, ev: ClientEvent) {
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
    // Waiters for the protocol this connection was to learn wait no more.
    let learning = std::mem::take(&mut c.alpn_pending);
    for (_, (inbox, down)) in c.routes.drain() {
        let what = if connect {
            Delivered::ConnectFailed
        } else {
            Delivered::ConnectionLost
        };
        let _ = p.inboxes.deliver(inbox, down, what);
    }
    if learning {
        p.kick_all_waiters();
    } else {
        p.kick_waiter();
    }
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
            upstream: Default::default(),
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
