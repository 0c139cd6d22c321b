//! A downstream connection's task: it opens the connection (`opening`), then turns read → decode → dispatch → write until the lifecycle closes it, and closes it within a bounded time.
//!
//! Each turn: the lifecycle says what the connection must do (serve on,
//! GOAWAY, close) and which timer to arm; the task waits for the first of
//! its socket (writes first, never waiting inside one), its drain signals,
//! its timer and its inbox; it feeds what it read to the codec, hands the
//! codec's events and the inbox's deliveries to the connection's streams
//! (`streams`), and takes the codec's output for the next write.

use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_lite::AsyncRead;
use glommio::net::TcpStream;
use glommio::timer::Timer;
use h2wire::message::HeaderList;
use h2wire::ErrorCode;

use super::accept::GateGuard;
use super::chain_drains::ChainDrains;
use super::dstream::DStream;
use super::h2_stream::H2Stream;
use super::inbox::Deliveries;
use super::lifecycle::{
    Arm, ConnState, Fired, GoAway, Lifecycle, Limits, Next, Open, HARD_CLOSE_AFTER,
};
use super::opening::{open, Opened, Serving};
use super::pool::Woken;
use super::readbuf::{Landing, IDLE_READ_SIZE};
use super::streams::{ConnCx, Streams};
use super::tcp_proxy;
use super::tls::Transport;
use super::tunnel;
use super::upgrade::Upgraded;
use super::{ReadBuf, WireShard};
use crate::shard::Shard;
use crate::signal::Subscription;
use crate::stats::envoy::{ListenerStats, OpenConnection};
use crate::stats::{DownstreamStats, ShardStats};

/// Bytes asked of a client socket per read while streams are open.
const READ_SIZE: usize = 8 * 1024;
// Such a read into an empty buffer goes through the thread's scratch.
const _: () = assert!(READ_SIZE <= super::readbuf::SCRATCH_SIZE);
/// Turns a connection's task may take in a row without waiting (its
/// client's bytes keep coming) before it yields to the shard's other
/// tasks.
const EAGER_TURNS: u32 = 16;

/// What woke the connection's task.
enum Wake {
    Io(Woken),
    /// The output fell below half its cap after a pause: forward what
    /// waited.
    Writable,
    WriteFailed,
    Drain,
    Timer,
}

/// How the connection's loop ended.
enum End {
    /// Flush what is left (within [`HARD_CLOSE_AFTER`]), then close.
    Flush,
    /// Close at once: the client reads nothing, or its socket failed.
    Abort,
    /// A stream is routed to upgrade (WebSocket): the connection becomes
    /// its tunnel, or carries its refusal (`upgrade`).
    Upgrade,
}

/// The drains a connection listens to.
struct Drains {
    /// Its filter chain's: an update removed or changed the chain, or the
    /// listener went.
    chain: Subscription,
    /// The gateway's shutdown.
    shutdown: Subscription,
    /// `drain_type: DEFAULT`: it drains while the health check fails too.
    health: Option<Subscription>,
}

impl Drains {
    fn any_fired(&self) -> bool {
        self.chain.is_fired()
            || self.shutdown.is_fired()
            || self.health.as_ref().is_some_and(Subscription::is_fired)
    }
}

/// One open downstream connection, owned by its task.
struct Connection {
    wire: Rc<WireShard>,
    tcp: Transport,
    rb: ReadBuf,
    streams: Streams,
    lifecycle: Lifecycle,
    drains: Drains,
    timer: Option<Pin<Box<Timer>>>,
    /// Bytes received so far (whether the handshake came).
    received: usize,
    /// Bytes in `rb` the codec has not seen yet (what `opening` read to
    /// tell the protocol).
    unseen: usize,
    /// Inbox deliveries of a turn; keeps its allocation.
    batch: Deliveries,
    eager_turns: u32,
    /// The client closed its side or its socket failed (Envoy's
    /// `downstream_cx_destroy_remote`), rather than the gateway closing.
    closed_by_peer: bool,
}

/// Serves one accepted client connection until it closes, counted open
/// in its listener's gate (`gate`) until then.
///
/// An async block, not an `async fn`, for the same reason as
/// [`run_tunnel`]'s: an `async fn`'s future keeps the socket it was
/// passed (120 B) after moving it on to the opening.
#[allow(clippy::manual_async_fn)] // the lint's `async fn` is what this avoids
pub(crate) fn serve(
    wire: Rc<WireShard>,
    tcp: TcpStream,
    listener: Rc<str>,
    drains: Rc<ChainDrains>,
    gate: GateGuard,
) -> impl Future<Output = ()> {
    async move {
        let _gate = gate;
        let stats = &wire.shard.stats.downstream;
        stats.cx_total.inc();
        let _open = Open::new(&stats.cx_active);
        // The overload manager's global count (its connections monitor).
        let _counted = wire.shard.overload.connection_opened();
        // Envoy's per-listener series; a tunnel takes it along.
        let mut counted = OpenConnection::new(
            wire.shard.stats.envoy.listeners.get(&listener),
            Instant::now(),
        );
        // The task's future is as large as its largest state, and it is held
        // for as long as the connection is open, idle ones included (most of
        // them at the edge). So every phase but `run`, where a connection
        // waits, is boxed: the opening (a TLS handshake), an upgrade, the
        // close and a TCP proxy's bytes take their memory only while they
        // run, and the connection itself is one allocation that the states
        // share (an async fn keeps a value moved out of an enum twice).
        // Idle h2c, handshake only: a task of 9,864 B before, 456 B now.
        let opening = Box::pin(Connection::open(
            &wire,
            tcp,
            &listener,
            &drains,
            &mut counted,
        ))
        .await;
        match opening {
            None => {}
            Some(Opening::Http(mut conn)) => {
                let end = match conn.run().await {
                    End::Upgrade => match Box::pin(conn.upgrade()).await {
                        // Its own task: the connection's goes, and with it
                        // everything HTTP.
                        Ok(tunnel) => return conn.tunnel(tunnel, counted),
                        Err(end) => end,
                    },
                    end => end,
                };
                Box::pin(conn.close(end)).await;
            }
            Some(Opening::Tcp(t)) => {
                let drains = [&t.chain_drain, &t.shutdown];
                let client = (&t.addresses, t.sni.as_deref());
                Box::pin(tcp_proxy::serve(&wire, t.tcp, &t.proxy, client, &drains)).await;
            }
        }
    }
}

/// A connection opened: served as HTTP, or proxied as bytes. Boxed, so
/// that the connection's task holds a pointer (`serve`).
enum Opening {
    Http(Box<Connection>),
    Tcp(Box<TcpOpening>),
}

/// What a `tcp_proxy` connection is served with.
struct TcpOpening {
    tcp: Transport,
    proxy: Arc<engine::TcpProxy>,
    addresses: super::opening::Addresses,
    sni: Option<Box<str>>,
    /// Its chain's drain (an update removed or changed the chain, or the
    /// listener went): the tunnel has the drain time left.
    chain_drain: Subscription,
    shutdown: Subscription,
}

impl Connection {
    /// The connection's opening (`opening::open`), then its streams and
    /// lifecycle under the filter chain it was given (or its TCP proxy).
    async fn open(
        wire: &Rc<WireShard>,
        tcp: TcpStream,
        listener: &str,
        drains: &ChainDrains,
        counted: &mut OpenConnection<ListenerStats>,
    ) -> Option<Opening> {
        let shard = &wire.shard;
        let stats = &shard.stats.downstream;
        let peer = tcp
            .peer_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let cfg = shard.snapshot().listener(listener).map(Arc::clone)?;
        let shutdown = wire.shutdown.subscribe();
        let mut rb = ReadBuf::default();
        let opened = {
            // Only the shard's stop ends an opening (see `stopped`).
            let stop = wire.stopped.subscribe();
            let stats = (stats, &*counted.stats, &shard.stats.envoy);
            open(tcp, &cfg, peer, &mut rb, &stop, &stop, stats).await
        };
        let Opened {
            tcp,
            serving,
            sni,
            chain: position,
            addresses,
        } = opened?;
        let chain = cfg.chains().nth(position)?;
        // Counted open under its chain until it closes: how far a drain
        // of that chain has got.
        counted.tag(chain.id);
        let identity = tcp.peer_identity();
        if let Some(rbac) = &chain.rbac {
            // The chain's network RBAC filter: judged once, as the
            // connection opens (its addresses, server name and
            // certificate do not change after).
            let input = crate::http_filter::rbac::Connection {
                local: addresses.local,
                peer: addresses.peer,
                direct_peer: addresses.direct_peer,
                sni: tcp.server_name().or(sni.as_deref()),
                identity: identity.as_deref(),
            };
            let stats = &shard.stats.network_rbac;
            let stats = crate::stats::filters::Both {
                shard: stats,
                instance: None,
            };
            if !crate::http_filter::rbac::judge(&rbac.filter, &input, stats) {
                if let Some(delay) = rbac.delay_deny {
                    glommio::timer::sleep(delay).await;
                }
                return None;
            }
        }
        let conn = match serving {
            Serving::Http(conn) => conn,
            Serving::Tcp(proxy) => {
                return Some(Opening::Tcp(Box::new(TcpOpening {
                    tcp,
                    proxy,
                    addresses,
                    sni,
                    chain_drain: drains.chain(chain.id).subscribe(),
                    shutdown,
                })))
            }
        };
        let drains = Drains {
            chain: drains.chain(chain.id).subscribe(),
            shutdown,
            health: (cfg.drain_type == engine::DrainType::Default)
                .then(|| wire.health_drain.borrow().subscribe()),
        };
        // Opened into a drain (graceful drain_listeners, a failed health
        // check): it is answered once and told, not closed as idle.
        let lifecycle = Lifecycle::new(Limits::of(&chain.http), Instant::now(), drains.any_fired());
        let sni = tcp.server_name().map(Box::from);
        let streams = Streams::new(
            wire,
            conn,
            (
                addresses.peer,
                addresses.direct_peer,
                addresses.local,
                addresses.tlvs.into_boxed_slice(),
            ),
            &cfg,
            position,
            (sni, identity),
        );
        let unseen = rb.buf.len();
        Some(Opening::Http(Box::new(Self {
            wire: Rc::clone(wire),
            tcp,
            rb,
            streams,
            lifecycle,
            drains,
            timer: None,
            received: unseen,
            unseen,
            batch: Deliveries::new(),
            eager_turns: 0,
            closed_by_peer: false,
        })))
    }

    fn state(&self) -> ConnState {
        let s = &self.streams;
        ConnState {
            busy: s.is_busy(),
            requests: s.requests,
            is_h1: s.conn.is_h1(),
            flooded: s.flooded(),
            closed: s.conn.is_closed(),
            handshaken: s.conn.handshaken(self.received),
            overload_close: s.overload_close,
            idle_timeout: self.reduced_idle_timeout(),
        }
    }

    /// The connection manager's `idle_timeout` as the overload manager's
    /// `reduce_timeouts` leaves it, while that acts.
    fn reduced_idle_timeout(&self) -> Option<Duration> {
        let shard = &self.wire.shard;
        let level = shard.overload.level(crate::overload::Act::ReduceTimeouts);
        if level == 0.0 {
            return None;
        }
        let configured = self.lifecycle.idle_timeout()?;
        let snap = shard.snapshot();
        let timer = snap
            .overload
            .as_ref()?
            .scaled_timer(engine::overload::Timer::ConnectionIdle)?;
        Some(timer.scale(configured, level))
    }

    /// Read → decode → dispatch → write, until the lifecycle closes the
    /// connection.
    async fn run(&mut self) -> End {
        let stats = Arc::clone(&self.wire.shard.stats);
        let stats = &stats.downstream;
        // A drain notice went this turn: the next step waits for a wake-up.
        let mut noticed = false;
        loop {
            if self.streams.upgrading.is_some() {
                return End::Upgrade;
            }
            let s = &mut self.streams;
            s.out.take_from(&mut s.conn);
            if let Err(flood) = s.conn.check_outbound(s.out.bytes()) {
                // Frames pile up unwritten: the client reads nothing, so
                // close without flushing (as Envoy does).
                stats.conn_error(Some(flood));
                return End::Abort;
            }
            let now = Instant::now();
            match self.lifecycle.next(now, &self.state(), !noticed) {
                Next::GoAway(why) => {
                    self.go_away(why, stats);
                    continue;
                }
                Next::Notice => {
                    self.streams.conn.shutdown_notice();
                    noticed = true;
                    continue;
                }
                Next::Close { go_away } => {
                    if go_away {
                        self.streams.conn.go_away(ErrorCode::NO_ERROR);
                    }
                    return End::Flush;
                }
                Next::Serve => {}
            }
            noticed = false;
            match self.lifecycle.arm(Instant::now(), &self.state()) {
                Arm::Keep => {}
                Arm::Set(d) => self.timer = Some(Box::pin(Timer::new(d))),
                Arm::Clear => self.timer = None,
            }
            let woken = self.wait().await;
            self.count_written();
            let n = match woken {
                Wake::Io(Woken::Read(0)) => {
                    self.rb.filled(0);
                    self.closed_by_peer = true;
                    return End::Flush;
                }
                Wake::Io(Woken::Read(n)) => n,
                Wake::Io(Woken::Nudged) | Wake::Writable => 0,
                Wake::WriteFailed => {
                    self.closed_by_peer = true;
                    return End::Abort;
                }
                Wake::Drain => {
                    self.start_drain();
                    0
                }
                Wake::Timer => match self.on_timer(stats) {
                    Some(true) => 0,
                    Some(false) => continue,
                    None => return End::Flush,
                },
            };
            if self.take_input(n, stats).is_err() {
                return End::Flush;
            }
        }
    }

    /// Adds what the socket took since the last call to the connection
    /// manager's `downstream_cx_tx_bytes_total`.
    fn count_written(&mut self) {
        let n = self.streams.out.take_written();
        if let Some(h) = &self.streams.cx.http {
            h.stats.downstream_cx_tx_bytes_total.add(n);
        }
    }

    /// Sends the lifecycle's GOAWAY, counted by why.
    fn go_away(&mut self, why: GoAway, stats: &DownstreamStats) {
        let code = match why {
            GoAway::Flood => {
                stats.cx_reset_flood.inc();
                ErrorCode::ENHANCE_YOUR_CALM
            }
            GoAway::LivedOut => {
                stats.cx_max_duration_reached.inc();
                ErrorCode::NO_ERROR
            }
            GoAway::ServedOut => {
                stats.cx_max_requests_reached.inc();
                ErrorCode::NO_ERROR
            }
            GoAway::Drain => ErrorCode::NO_ERROR,
        };
        self.streams.conn.go_away(code);
    }

    /// Waits for the first of: output written (writes never wait), the
    /// socket's bytes, a drain, the timer, the inbox.
    async fn wait(&mut self) -> Wake {
        // A quiet connection reads a little at a time, and a connection
        // with nothing buffered reads into the thread's scratch, copying
        // only what came (`Landing`): an idle client, or a stream that
        // waits, holds no read room.
        let reads = self.streams.conn.wants_input(self.rb.buf.len());
        let size = if self.lifecycle.scanning() {
            READ_SIZE
        } else {
            IDLE_READ_SIZE
        };
        let mut landing = Landing::new(&mut self.rb, size);
        let (tcp, out) = (&mut self.tcp, &mut self.streams.out);
        let (unseen, lifecycle, drains) = (self.unseen, &self.lifecycle, &self.drains);
        let (timer, wire, inbox) = (&mut self.timer, &self.wire, self.streams.cx.inbox);
        let mut parked = false;
        let woken = poll_fn(|cx| {
            // What `opening` read goes to the codec before any wait.
            if unseen > 0 {
                return Poll::Ready(Wake::Io(Woken::Nudged));
            }
            // Writes first, without waiting for them: a socket that does
            // not drain must not stop deliveries, timers or reads.
            if !out.is_empty() {
                if let Poll::Ready(Err(_)) = out.poll_write(tcp, cx) {
                    return Poll::Ready(Wake::WriteFailed);
                }
            }
            if out.resumed() {
                return Poll::Ready(Wake::Writable);
            }
            // Past the cap, the client's bytes wait in its socket: what it
            // sends (PINGs, SETTINGS, requests) makes output that it is not
            // reading, so reading on would grow `out` without bound.
            if out.takes_input() && reads {
                if let Poll::Ready(r) = landing.poll_read(Pin::new(&mut *tcp), cx) {
                    return Poll::Ready(Wake::Io(Woken::Read(r.unwrap_or(0))));
                }
            }
            if lifecycle.takes_drain()
                && (drains.chain.poll_fired(cx).is_ready()
                    || drains.shutdown.poll_fired(cx).is_ready()
                    || drains
                        .health
                        .as_ref()
                        .is_some_and(|s| s.poll_fired(cx).is_ready()))
            {
                return Poll::Ready(Wake::Drain);
            }
            if let Some(t) = timer.as_mut() {
                if t.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Wake::Timer);
                }
            }
            // An inbox gone reads as the peer having closed.
            let polled = wire.inboxes.poll(inbox, cx).map(|waiting| match waiting {
                true => Wake::Io(Woken::Nudged),
                false => Wake::Io(Woken::Read(0)),
            });
            parked = polled.is_pending();
            polled
        })
        .await;
        // A client whose socket always has more to read never lets this
        // task wait, and glommio runs other tasks (other clients, the
        // upstream connections) only when a task waits: after a run of
        // turns without waiting, give them theirs.
        self.eager_turns = if parked { 0 } else { self.eager_turns + 1 };
        if self.eager_turns >= EAGER_TURNS {
            self.eager_turns = 0;
            futures_lite::future::yield_now().await;
        }
        // A clock read per wake-up, not glommio's `loop_time`: deadlines set
        // from it (route timeout, max_stream_duration, stream idle) must
        // never run from before the bytes they time arrived, and the loop's
        // time can be a whole run of the task queues old.
        self.streams.now = Instant::now();
        woken
    }

    /// A drain signal fired: the connection's place in the spread (module
    /// `drain`); the top of the loop takes each step, an idle connection
    /// closing at once.
    fn start_drain(&mut self) {
        let health_only = !self.drains.chain.is_fired() && !self.drains.shutdown.is_fired();
        let shard = &self.wire.shard;
        let place = if self.lifecycle.spreads(health_only) {
            f64::from(shard.random()) / (f64::from(u32::MAX) + 1.0)
        } else {
            0.0
        };
        self.timer = None;
        self.lifecycle
            .start_drain(Instant::now(), shard.drain, place);
    }

    /// The timer fired: `Some(true)` to go on to the input (nothing read),
    /// `Some(false)` to look again from the top, `None` to close.
    fn on_timer(&mut self, stats: &DownstreamStats) -> Option<bool> {
        self.timer = None;
        let state = self.state();
        match self.lifecycle.on_timer(Instant::now(), &state) {
            Fired::Scan => {
                let now = self.streams.now;
                self.streams.expire(now);
                // Streams open, nothing buffered: the 8 KiB read room goes
                // back, and reads land in the scratch until bytes stay (a
                // slow body, a long poll, a stream waiting on its upstream
                // would each hold one for as long as it lasts). Once a
                // scan (50 ms) at most.
                self.rb.filled(0);
                self.rb.release_if_empty();
            }
            Fired::Quiet => {
                // Quiet for a whole scan: give back what a burst left, and
                // wait for the idle timeout instead.
                self.rb.filled(0);
                self.rb.release_if_empty();
                self.streams.shrink();
                self.batch.shrink_to_fit();
                trim_lists(&self.wire.shard);
                return Some(false);
            }
            Fired::HeadTimeout => {
                // A head that trickles in (slowloris): 408, as Envoy
                // answers, and the top of the loop closes.
                stats.rq_header_timeout.inc();
                self.streams.conn.refuse(408);
                self.streams.answer_refusal();
                self.rb.filled(0);
                return Some(false);
            }
            Fired::HandshakeTimeout => {
                stats.cx_protocol_error.inc();
                return None;
            }
            Fired::Recheck => {
                self.rb.filled(0);
                return Some(false);
            }
            Fired::Idle => {
                stats.cx_idle_timeout.inc();
                self.streams.conn.go_away(ErrorCode::NO_ERROR);
            }
        }
        Some(true)
    }

    /// Feeds `n` bytes just read (and what `opening` left) to the codec and
    /// dispatches what it and the inbox produced, for as long as the codec
    /// takes bytes waiting in `rb`. `Err`: a connection error, whose
    /// GOAWAY (HTTP/2) or answer (HTTP/1.1) is queued: the connection
    /// closes.
    fn take_input(&mut self, n: usize, stats: &DownstreamStats) -> Result<(), ()> {
        self.rb.filled(n);
        self.received = self.received.saturating_add(n);
        let mut fresh = n + std::mem::take(&mut self.unseen);
        let s = &mut self.streams;
        if let Some(h) = &s.cx.http {
            // Over TLS, after decryption, as Envoy's.
            h.stats.downstream_cx_rx_bytes_total.add(fresh as u64);
        }
        loop {
            let (before, could) = (self.rb.buf.len(), s.conn.can_take(self.rb.buf.len()));
            if let Err(flood) = s.conn.recv(&mut self.rb.buf, fresh) {
                s.conn.count(stats);
                s.answer_refusal();
                stats.conn_error(flood);
                return Err(());
            }
            let took = fresh > 0 || self.rb.buf.len() != before;
            fresh = 0;
            s.dispatch(&mut self.batch, stats);
            // An HTTP/1.1 client's pipelined request (or body held back by
            // its window) waits in `rb` for the exchange before it: taken
            // as soon as that ends (a local reply, released body bytes),
            // not at the client's next write. Each pass takes bytes or
            // follows a change that let the codec take them.
            // At `max_requests_per_connection` the top of the loop drains
            // the connection before another pipelined request is taken.
            if self.lifecycle.served_out(s.requests)
                || !(s.conn.can_take(self.rb.buf.len()) && (took || !could))
            {
                break;
            }
        }
        if self.lifecycle.times_heads() && s.conn.is_h1() {
            let partial = !s.is_busy() && !self.rb.buf.is_empty();
            self.lifecycle.on_input(Instant::now(), partial);
        }
        Ok(())
    }

    /// Runs the upgrade its streams hold (`wire::upgrade`) up to the
    /// client's answer: `Ok` when the connection is to become a tunnel,
    /// else how it ends (once the answer, a refusal or a failure, went;
    /// at once if the 101 went and the tunnel cannot be).
    async fn upgrade(&mut self) -> Result<Upgraded, End> {
        let (wire, tcp, rb, streams) = (&self.wire, &mut self.tcp, &mut self.rb, &mut self.streams);
        match super::upgrade::run(wire, tcp, rb, streams).await {
            Some(tunnel) => Ok(tunnel),
            None if self.streams.conn.is_upgraded() => Err(End::Abort),
            None => Err(End::Flush),
        }
    }

    /// Hands the connection to a task of its own that runs its tunnel;
    /// this task's state (codec, streams, buffers) goes with it.
    fn tunnel(mut self, t: Upgraded, listener: OpenConnection<ListenerStats>) {
        // What went out before the tunnel (the 101) is counted now.
        self.count_written();
        self.release_proxied();
        let Connection {
            wire,
            tcp,
            streams,
            drains,
            ..
        } = self;
        let Some((cx, s)) = streams.into_tunnel(t.stream) else {
            return;
        };
        // Open while its tunnel is: counted again before this task's
        // count ends.
        let open = OpenTunnel::new(Arc::clone(&wire.shard.stats), listener);
        glommio::spawn_local(run_tunnel(tcp, t, (cx, s), drains, open)).detach();
        trim_lists(&wire.shard);
    }

    /// Ends the connection: what is left (a GOAWAY, the last responses)
    /// gets a bounded time to go, so a client that reads nothing holds it
    /// no longer; an HTTP/1.1 connection then lingers; every stream ends.
    async fn close(mut self, end: End) {
        let active_rq = self.streams.is_busy();
        if let End::Flush = end {
            let s = &mut self.streams;
            s.out.take_from(&mut s.conn);
            s.out.flush_within(&mut self.tcp, HARD_CLOSE_AFTER).await;
            if s.conn.is_h1() {
                let within = self.lifecycle.delayed_close();
                linger(&mut self.tcp, &mut self.rb, within).await;
            }
        }
        self.count_written();
        if let Some(h) = &self.streams.cx.http {
            h.stats.destroys().count(self.closed_by_peer, active_rq);
        }
        self.streams.close();
        self.release_proxied();
        self.wire.flush_logs();
        trim_lists(&self.wire.shard);
    }

    /// The client's own upstream pools (clusters that send PROXY headers
    /// naming it) close with it.
    fn release_proxied(&self) {
        if self.wire.has_proxied() {
            let cx = &self.streams.cx;
            self.wire.release_proxied(cx.peer, cx.local);
        }
    }
}

/// An upgraded connection's own task: its tunnel, then its stream's end.
///
/// An async block, not an `async fn`: an `async fn` keeps its arguments
/// twice in its future (as passed, and moved into its body's locals),
/// about 1.4 KB more for every open tunnel. The block uses what it
/// captured in place.
#[allow(clippy::manual_async_fn)] // the lint's `async fn` is what this avoids
fn run_tunnel(
    mut tcp: Transport,
    mut t: Upgraded,
    end: (ConnCx, DStream),
    drains: Drains,
    open: OpenTunnel,
) -> impl Future<Output = ()> {
    async move {
        let subscriptions = [&drains.chain, &drains.shutdown];
        let early = std::mem::take(&mut t.early);
        // The client's bytes read before the tunnel were counted as read.
        let read_before = early.0.len() as u64;
        let h2 = t.h2.take();
        let scope = (&t.limits, &subscriptions[..]);
        let stats = &open.stats.tunnel;
        let moved = match h2 {
            Some(h2) => {
                let (codec, stream, input) = *h2;
                // Boxed: the task's future is as large as its largest
                // branch, and most tunnels take the other.
                let mut up = Box::new(H2Stream::new(&mut t.up.transport, codec, stream, input));
                tunnel::run(&mut tcp, &mut up, early, scope, stats).await
            }
            None => tunnel::run(&mut tcp, &mut t.up.transport, early, scope, stats).await,
        };
        end.0.tunnel_closed(t.stream, end.1, moved, read_before);
    }
}

/// An upgraded connection counted open (`cx_active`, and its listener's
/// series) while its task runs.
struct OpenTunnel {
    stats: Arc<ShardStats>,
    _listener: OpenConnection<ListenerStats>,
}

impl OpenTunnel {
    fn new(stats: Arc<ShardStats>, listener: OpenConnection<ListenerStats>) -> Self {
        stats.downstream.cx_active.inc();
        Self {
            stats,
            _listener: listener,
        }
    }
}

impl Drop for OpenTunnel {
    fn drop(&mut self) {
        self.stats.downstream.cx_active.dec();
    }
}

/// An HTTP/1.1 connection we close: stop sending, then read and drop what
/// the client still sends until it closes or `within` passes (the
/// connection manager's `delayed_close_timeout`; 0: close at once).
/// Closing with unread bytes makes the kernel send a reset, and a client
/// that receives it may drop the response it has not read yet (the 400
/// that explains the close).
async fn linger(tcp: &mut Transport, rb: &mut ReadBuf, within: Duration) {
    if within.is_zero() {
        return;
    }
    let mut timer = Box::pin(Timer::new(within));
    // Over TLS the close_notify must be written first: a client that
    // reads nothing must not hold the connection in that write either.
    let closed = futures_lite::future::or(async { tcp.close_write().await.is_ok() }, async {
        timer.as_mut().await;
        false
    });
    if !closed.await {
        return;
    }
    loop {
        rb.buf.clear();
        let room = rb.room(IDLE_READ_SIZE);
        let read = poll_fn(|cx| {
            if let Poll::Ready(r) = Pin::new(&mut *tcp).poll_read(cx, room) {
                return Poll::Ready(r.unwrap_or(0));
            }
            timer.as_mut().poll(cx).map(|_| 0)
        })
        .await;
        rb.filled(read);
        if read == 0 {
            return;
        }
    }
}

/// Gives back the shard's pooled header lists beyond what its streams in
/// flight may soon return (`HeaderList::trim_pool`): a burst grows the
/// pool, a connection going quiet or away shrinks it.
fn trim_lists(shard: &Shard) {
    let in_flight = shard.stats.downstream.rq_active.get();
    HeaderList::trim_pool(usize::try_from(in_flight).unwrap_or(usize::MAX));
}
