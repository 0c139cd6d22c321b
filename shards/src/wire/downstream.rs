//! Downstream connections on `h2wire::conn::ServerConn`: the connection's task, its codec limits, its writes and timers (idle, drain), the reset-flood cut-off.

use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use ahash::AHashMap;
use engine::Listener;
use futures_lite::AsyncRead;
use glommio::net::TcpStream;
use glommio::timer::Timer;
use h2wire::conn::Event;

use h2wire::message::HeaderList;
use h2wire::ErrorCode;

use super::codec::DownCodec;
use crate::drain::{Drain, Step};
use super::dstream::DStream;
use super::inbox::Deliveries;
use super::logging::LogTargets;
use super::opening::{open, Opened};
use super::outbuf::OutBuf;
use super::pool::{PoolRef, UpRef, Woken};
use super::chain_drains::ChainDrains;
use super::tls::Transport;
use super::{ReadBuf, WireShard};
use crate::shard::Shard;

/// Bytes asked of a client socket per read.
const READ_SIZE: usize = 8 * 1024;
/// Bytes asked per read while the connection is quiet.
pub(super) const IDLE_READ_SIZE: usize = 512;
/// How often a connection with streams looks for expired deadlines: the
/// precision of the route timeout on this path.
const DEADLINE_SCAN: Duration = Duration::from_millis(50);
/// A client must send the connection preface and its SETTINGS within this
/// time.
pub(super) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an abruptly closed connection may take to flush its GOAWAY,
/// and how long an HTTP/1.1 connection we close keeps reading (and
/// dropping) what its client still sends, so that the kernel does not
/// answer those bytes with a reset that destroys our last response in
/// the client's buffer (Envoy's `delayed_close_timeout`, also 1 s).
const HARD_CLOSE_AFTER: Duration = Duration::from_secs(1);
/// Turns a connection's task may take in a row without waiting (its
/// client's bytes keep coming) before it yields to the shard's other
/// tasks.
const EAGER_TURNS: u32 = 16;

/// Reset-flood window and thresholds: a connection is cut off when, within
/// one window, it reset at least `FLOOD_MIN_RESETS` streams and those were at
/// least half of the streams it opened. Ordinary cancellation (deadlines) is
/// far below that ratio; a rapid-reset attack is at 100 %.
const FLOOD_WINDOW: Duration = Duration::from_secs(10);
const FLOOD_MIN_RESETS: u32 = 100;

/// Client resets per window, for the flood cut-off.
struct FloodCount {
    window_start: Instant,
    streams: u32,
    resets: u32,
}

impl FloodCount {
    fn roll(&mut self, now: Instant) {
        if now.duration_since(self.window_start) >= FLOOD_WINDOW {
            *self = Self {
                window_start: now,
                streams: 0,
                resets: 0,
            };
        }
    }
}

/// One downstream connection's proxy state, owned by its task.
pub(crate) struct DownConn {
    /// The routing context (`wire.shard`), inboxes and pools this
    /// connection shares with the shard's other tasks.
    pub wire: Rc<WireShard>,
    /// This connection's inbox.
    pub inbox: usize,
    pub conn: DownCodec,
    pub streams: AHashMap<u32, DStream>,
    pub peer: SocketAddr,
    /// The config the connection was accepted under: streams fall back to
    /// it when a reload removed the listener while the connection drains.
    pub listener: Arc<Listener>,
    /// The id of the filter chain serving it (in `listener`, and in later
    /// snapshots of the listener while the chain is unchanged).
    pub chain: u64,
    /// Where that chain was among the listener's chains.
    pub chain_hint: usize,
    /// Upstream connections given output this turn: (pool, slot).
    pub touched: Vec<(PoolRef, usize)>,
    /// Streams finished this turn whose upstream events may still sit in
    /// the inbox: their windows must still be released.
    pub graveyard: Vec<(u32, PoolRef, UpRef)>,
    /// Streams with body items queued either way, for `forward`.
    pub queued: Vec<u32>,
    /// New requests of this read, opened upstream once its events are
    /// all in (`open_deferred`).
    pub to_open: Vec<u32>,
    flood: FloodCount,
    pub flooded: bool,
    /// Output not yet written, and its cap.
    pub out: OutBuf,
    /// Response window granted upstream beyond the initial windows, over
    /// this connection's streams: at most `out`'s limit.
    pub granted: u32,
    /// The loop's clock, read once per turn: what stream activity and
    /// deadlines are measured with.
    pub now: Instant,
    /// Requests the connection has taken (for `max_requests_per_connection`).
    pub requests: u32,
    /// The listener's access logs (empty: nothing is logged).
    pub logs: LogTargets,
    /// The TLS server name the client asked for.
    pub sni: Option<Box<str>>,
}

impl DownConn {
    /// Notes that `slot` of `pool` has output to write.
    pub fn touch(&mut self, pool: &PoolRef, slot: usize) {
        if !self
            .touched
            .iter()
            .any(|(p, s)| *s == slot && Rc::ptr_eq(p, pool))
        {
            self.touched.push((Rc::clone(pool), slot));
        }
    }

    /// Wakes the upstream tasks that were given output.
    fn flush_upstreams(&mut self) {
        for (pool, slot) in self.touched.drain(..) {
            pool.borrow_mut().flush(slot);
        }
    }

    fn on_event(&mut self, ev: Event) {
        match ev {
            Event::Request {
                stream,
                head,
                end_stream,
            } => {
                let now = self.now;
                self.flood.roll(now);
                self.flood.streams += 1;
                self.on_request(stream, head, end_stream, now);
            }
            Event::Data {
                stream,
                data,
                end_stream,
            } => self.on_request_data(stream, data, end_stream),
            Event::Trailers { stream, fields } => self.on_request_trailers(stream, fields),
            Event::Reset { stream, .. } => {
                if let Some(s) = self.streams.get_mut(&stream) {
                    if let Some(l) = s.log.as_mut() {
                        l.flags = "DC";
                    }
                    let stats = &self.wire.shard.stats.downstream;
                    stats.rq_reset_by_client.inc();
                    if s.never_sent() {
                        stats.rq_reset_before_upstream.inc();
                    }
                    self.client_reset();
                    self.finish(stream);
                }
            }
            Event::WindowOpen { .. } | Event::GoAway { .. } => {}
        }
    }

    fn client_reset(&mut self) {
        self.flood.roll(Instant::now());
        self.flood.resets += 1;
        if self.flood.resets >= FLOOD_MIN_RESETS && self.flood.resets * 2 >= self.flood.streams {
            self.flooded = true;
        }
    }

    /// Processes what the upstream tasks delivered.
    fn on_inbox(&mut self, items: &mut Deliveries) {
        for (stream, what) in items.drain(..) {
            self.on_delivery(stream, what);
        }
        self.bury();
    }

    /// Forgets the streams finished before this turn's deliveries.
    fn bury(&mut self) {
        self.graveyard.clear();
    }

    /// Ends every stream (the connection is over) and leaves the shard's
    /// inbox, giving back what was still in it.
    fn close(&mut self) {
        let ids: Vec<u32> = self.streams.keys().copied().collect();
        for id in ids {
            self.finish(id);
        }
        if let Some(mut left) = self.wire.inboxes.close(self.inbox) {
            self.on_inbox(&mut left);
        }
        self.bury();
        self.flush_upstreams();
    }

    /// Ends streams whose route timeout, stream idle timeout or
    /// `max_stream_duration` passed.
    fn expire(&mut self, now: Instant) {
        let due: Vec<(u32, Expired)> = self
            .streams
            .iter()
            .filter_map(|(&id, s)| {
                if s.ends_at.is_some_and(|t| now >= t) {
                    Some((id, Expired::Duration))
                } else if s.deadline.is_some_and(|d| now >= d) {
                    Some((id, Expired::Route))
                } else if s.idle.is_some_and(|d| now >= s.active_at + d) {
                    Some((id, Expired::Idle))
                } else {
                    None
                }
            })
            .collect();
        for (id, why) in due {
            match why {
                Expired::Duration => self.lived_out(id),
                Expired::Route => self.timed_out(id),
                Expired::Idle => self.idled_out(id),
            }
        }
    }
}

/// Which of a stream's timers ran out.
enum Expired {
    Duration,
    Route,
    Idle,
}

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

/// Serves one accepted client connection until it closes.
pub(crate) async fn serve(
    wire: Rc<WireShard>,
    tcp: TcpStream,
    listener: Rc<str>,
    drains: Rc<ChainDrains>,
) {
    let shard = &wire.shard;
    let stats = &shard.stats.downstream;
    stats.cx_total.inc();
    stats.cx_active.inc();
    let peer = tcp
        .peer_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let Some(cfg) = shard.snapshot().listener(&listener).map(Arc::clone) else {
        stats.cx_active.dec();
        return;
    };
    let shutdown_sub = wire.shutdown.subscribe();
    let mut rb = ReadBuf::default();
    let opened = {
        let listener_sub = drains.listener().subscribe();
        open(
            tcp,
            &cfg,
            peer,
            &mut rb,
            &listener_sub,
            &shutdown_sub,
            stats,
        )
        .await
    };
    let Some(Opened {
        mut tcp,
        conn,
        chain: position,
    }) = opened
    else {
        stats.cx_active.dec();
        return;
    };
    let Some(chain) = cfg.chains().nth(position) else {
        stats.cx_active.dec();
        return;
    };
    let chain_id = chain.id;
    // The chain's own drain: fired when an update removes or changes the
    // chain, or the listener goes.
    let drain_sub = drains.chain(chain_id).subscribe();
    // `drain_type: DEFAULT`: it drains while the health check fails too.
    let health_sub = (cfg.drain_type == engine::DrainType::Default)
        .then(|| wire.health_drain.borrow().subscribe());
    // Opened into a drain (graceful drain_listeners, a failed health
    // check): it is answered once and told, not closed as idle.
    let born_draining = drain_sub.is_fired()
        || health_sub.as_ref().is_some_and(|s| s.is_fired())
        || shutdown_sub.is_fired();
    let hcm = &chain.http;
    let (idle_timeout, drain_timeout) = (hcm.idle_timeout, hcm.drain_timeout);
    let headers_timeout = hcm.request_headers_timeout;
    // Envoy's connection lifetime limits: past either, the connection
    // drains like one whose listener went away.
    let max_requests = hcm.max_requests_per_connection;
    let lives_until = hcm.max_connection_duration.map(|d| Instant::now() + d);
    let buffer_limit = cfg.per_connection_buffer_limit_bytes;
    let logs = wire.log_targets(hcm);
    let accepted_under = Arc::clone(&cfg);
    let inbox = wire.inboxes.open();
    let mut dc = DownConn {
        wire: Rc::clone(&wire),
        inbox,
        conn,
        streams: AHashMap::default(),
        peer,
        listener: accepted_under,
        chain: chain_id,
        chain_hint: position,
        touched: Vec::new(),
        graveyard: Vec::new(),
        queued: Vec::new(),
        to_open: Vec::new(),
        flood: FloodCount {
            window_start: Instant::now(),
            streams: 0,
            resets: 0,
        },
        flooded: false,
        out: OutBuf::new(buffer_limit),
        granted: 0,
        now: Instant::now(),
        requests: 0,
        logs,
        sni: tcp.server_name().map(Box::from),
    };
    let mut batch = Deliveries::new();
    // Armed while streams are open (deadline scan) or, on an idle
    // connection, for the idle timeout; `scanning` says which.
    let mut timer: Option<Pin<Box<Timer>>> = None;
    let mut scanning = false;
    // Bytes received so far, and whether the idle-mode timer is the
    // handshake's (the preface and SETTINGS, or a first HTTP/1.1 request
    // head, must come within HANDSHAKE_TIMEOUT).
    let mut received = rb.buf.len();
    // Bytes in `rb` the codec has not seen yet (what `first_bytes` read).
    let mut unseen = rb.buf.len();
    let mut handshake_timer = false;
    // When the HTTP/1.1 head now in `rb` began (none in progress: `None`),
    // for `request_headers_timeout`.
    let mut head_since: Option<Instant> = None;
    // Set when the connection starts draining (GOAWAY sent): the time it
    // closes by, if its streams have not ended before.
    let mut close_at: Option<Instant> = None;
    // Its listener or chain drains: its way through the drain time.
    let mut drain: Option<Drain> = None;
    // Since when it has had no stream (a drain closes it once idle).
    let mut quiet_since: Option<Instant> = Some(Instant::now());
    let mut eager_turns = 0u32;

    'serve: loop {
        dc.out.take_from(&mut dc.conn);
        if let Err(flood) = dc.conn.check_outbound(dc.out.bytes()) {
            // Frames pile up unwritten: the client reads nothing, so
            // close without flushing (as Envoy does).
            stats.conn_error(Some(flood));
            dc.close();
            wire.flush_logs();
            stats.cx_active.dec();
            return;
        }
        if dc.flooded && close_at.is_none() {
            stats.cx_reset_flood.inc();
            dc.conn.go_away(ErrorCode::ENHANCE_YOUR_CALM);
            close_at = Some(Instant::now() + HARD_CLOSE_AFTER);
            continue;
        }
        if let (Some(d), None) = (drain.as_mut(), close_at) {
            let busy = !dc.streams.is_empty();
            match d.step(Instant::now(), busy, dc.requests > 0, quiet_since) {
                Step::Wait => {}
                Step::Notice if dc.conn.is_h1() => {
                    // `Connection: close` on the response in flight.
                    dc.conn.go_away(ErrorCode::NO_ERROR);
                    close_at = Some(d.deadline());
                }
                Step::Notice => dc.conn.shutdown_notice(),
                Step::Final => {
                    dc.conn.go_away(ErrorCode::NO_ERROR);
                    close_at = Some(d.deadline());
                    timer = None;
                }
                Step::Close => {
                    dc.conn.go_away(ErrorCode::NO_ERROR);
                    break;
                }
            }
        }
        if close_at.is_none() {
            let lived_out = lives_until.is_some_and(|t| dc.now >= t);
            let served_out = max_requests.is_some_and(|n| dc.requests >= n);
            if lived_out || served_out {
                if lived_out {
                    stats.cx_max_duration_reached.inc();
                } else {
                    stats.cx_max_requests_reached.inc();
                }
                dc.conn.go_away(ErrorCode::NO_ERROR);
                close_at = Some(Instant::now() + drain_timeout);
                timer = None;
                continue;
            }
        }
        if close_at.is_some_and(|t| dc.streams.is_empty() || Instant::now() >= t)
            || dc.conn.is_closed()
        {
            break;
        }
        // The timer is re-armed when it fires, not each time the stream
        // count touches zero (under load that is every few requests):
        // scanning, it fires every DEADLINE_SCAN while streams are open;
        // one quiet scan switches it to the idle timeout (or the drain
        // deadline), and the first stream after that back to scanning.
        let busy = !dc.streams.is_empty();
        if busy {
            quiet_since = None;
        } else if quiet_since.is_none() {
            quiet_since = Some(dc.now);
        }
        if busy && (!scanning || timer.is_none()) {
            timer = Some(Box::pin(Timer::new(DEADLINE_SCAN)));
            scanning = true;
        } else if timer.is_none() && !busy {
            handshake_timer = close_at.is_none() && !dc.conn.handshaken(received);
            let wait = if let Some(t) = close_at {
                Some(t.saturating_duration_since(Instant::now()))
            } else if handshake_timer {
                Some(idle_timeout.map_or(HANDSHAKE_TIMEOUT, |t| t.min(HANDSHAKE_TIMEOUT)))
            } else {
                idle_timeout
            };
            // An idle connection wakes at its lifetime's end too (a
            // draining one has its close time already).
            let left = lives_until
                .filter(|_| close_at.is_none())
                .map(|t| t.saturating_duration_since(Instant::now()));
            let head_left = head_since
                .zip(headers_timeout)
                .map(|(since, t)| (since + t).saturating_duration_since(Instant::now()));
            // A new connection waiting in a drain for its first request
            // closes at the drain's end all the same.
            let drain_left = drain.as_ref().map(|d| {
                d.next(dc.requests > 0, quiet_since)
                    .saturating_duration_since(Instant::now())
            });
            let wait = [wait, left, head_left, drain_left]
                .into_iter()
                .flatten()
                .min();
            timer = wait.map(|d| Box::pin(Timer::new(d)));
            scanning = false;
        }
        // A quiet connection reads into a small buffer: an idle client
        // holds no 8 KiB of read room.
        let reads = dc.conn.wants_input(rb.buf.len());
        let room = rb.room(if scanning { READ_SIZE } else { IDLE_READ_SIZE });
        let out = &mut dc.out;
        let mut parked = false;
        let woken = poll_fn(|cx| {
            // What `first_bytes` read goes to the codec before any wait.
            if unseen > 0 {
                return Poll::Ready(Wake::Io(Woken::Nudged));
            }
            // Writes first, without waiting for them: a socket that does
            // not drain must not stop deliveries, timers or reads.
            if !out.is_empty() {
                if let Poll::Ready(Err(_)) = out.poll_write(&mut tcp, cx) {
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
                if let Poll::Ready(r) = Pin::new(&mut tcp).poll_read(cx, room) {
                    return Poll::Ready(Wake::Io(Woken::Read(r.unwrap_or(0))));
                }
            }
            if close_at.is_none()
                && drain.is_none()
                && (drain_sub.poll_fired(cx).is_ready()
                    || shutdown_sub.poll_fired(cx).is_ready()
                    || health_sub
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
        eager_turns = if parked { 0 } else { eager_turns + 1 };
        if eager_turns >= EAGER_TURNS {
            eager_turns = 0;
            futures_lite::future::yield_now().await;
        }
        // A clock read per wake-up, not glommio's `loop_time`: deadlines set
        // from it (route timeout, max_stream_duration, stream idle) must
        // never run from before the bytes they time arrived, and the loop's
        // time can be a whole run of the task queues old.
        dc.now = Instant::now();
        let n = match woken {
            Wake::Io(Woken::Read(0)) => {
                rb.filled(0);
                break;
            }
            Wake::Io(Woken::Read(n)) => n,
            Wake::Io(Woken::Nudged) | Wake::Writable => 0,
            Wake::WriteFailed => {
                dc.close();
                wire.flush_logs();
                stats.cx_active.dec();
                return;
            }
            Wake::Drain => {
                // Its place in the spread (module `drain`); the top of the
                // loop takes each step, an idle connection closing at once.
                // A failed health check drains at once, as Envoy's
                // drainClose() does; so does a connection opened into a
                // drain.
                let health_only = !drain_sub.is_fired() && !shutdown_sub.is_fired();
                let place = if born_draining || health_only {
                    0.0
                } else {
                    f64::from(shard.random()) / (f64::from(u32::MAX) + 1.0)
                };
                drain = Some(Drain::new(
                    Instant::now(),
                    shard.drain,
                    drain_timeout,
                    place,
                    born_draining,
                ));
                timer = None;
                0
            }
            Wake::Timer => {
                timer = None;
                if scanning {
                    if busy {
                        dc.expire(dc.now);
                    } else {
                        // Quiet for a whole scan: give back what a burst
                        // left, and wait for the idle timeout instead.
                        scanning = false;
                        rb.filled(0);
                        rb.release_if_empty();
                        dc.conn.shrink();
                        trim_lists(shard);
                        continue;
                    }
                } else if head_since
                    .zip(headers_timeout)
                    .is_some_and(|(since, t)| Instant::now() >= since + t)
                {
                    // A head that trickles in (slowloris): 408, as Envoy
                    // answers, and the top of the loop closes.
                    stats.rq_header_timeout.inc();
                    dc.conn.refuse(408);
                    rb.filled(0);
                    continue;
                } else if lives_until.is_some_and(|t| dc.now >= t) {
                    // The lifetime's end, not the idle or handshake
                    // timeout: the top of the loop drains the connection.
                    rb.filled(0);
                    continue;
                } else if drain.is_some() {
                    // A drain's step is due (an idle connection closes
                    // there, before its idle or handshake timeout).
                    rb.filled(0);
                    continue;
                } else if handshake_timer && !dc.conn.handshaken(received) {
                    // No preface and SETTINGS in time: not an HTTP/2
                    // client, or a slow one holding a connection.
                    stats.cx_protocol_error.inc();
                    break;
                } else if handshake_timer {
                    // The handshake came; the idle timeout governs now.
                    rb.filled(0);
                    continue;
                } else if close_at.is_none() {
                    stats.cx_idle_timeout.inc();
                    dc.conn.go_away(ErrorCode::NO_ERROR);
                    close_at = Some(Instant::now() + drain_timeout);
                }
                0
            }
        };
        rb.filled(n);
        received = received.saturating_add(n);
        let mut fresh = n + std::mem::take(&mut unseen);
        loop {
            let (before, could) = (rb.buf.len(), dc.conn.can_take(rb.buf.len()));
            if let Err(flood) = dc.conn.recv(&mut rb.buf, fresh) {
                // A connection error: GOAWAY (HTTP/2) or the error's answer
                // (HTTP/1.1) is queued; flushed below.
                dc.conn.count(stats);
                stats.conn_error(flood);
                break 'serve;
            }
            let took = fresh > 0 || rb.buf.len() != before;
            fresh = 0;
            while let Some(ev) = dc.conn.poll_event() {
                dc.on_event(ev);
            }
            // After the events: an HTTP/1.1 head refused while it became
            // a request is counted too.
            dc.conn.count(stats);
            dc.open_deferred();
            wire.inboxes.swap_items(inbox, &mut batch);
            dc.on_inbox(&mut batch);
            dc.forward();
            dc.flush_upstreams();
            wire.flush_logs();
            // An HTTP/1.1 client's pipelined request (or body held back by
            // its window) waits in `rb` for the exchange before it: taken
            // as soon as that ends (a local reply, released body bytes),
            // not at the client's next write. Each pass takes bytes or
            // follows a change that let the codec take them.
            // At `max_requests_per_connection` the top of the loop drains
            // the connection before another pipelined request is taken.
            let served_out = max_requests.is_some_and(|n| dc.requests >= n);
            if served_out || !(dc.conn.can_take(rb.buf.len()) && (took || !could)) {
                break;
            }
        }
        // An HTTP/1.1 head begun and not complete, with no exchange in
        // progress: its deadline runs from now, and an idle timer set
        // before it came is set again to include it.
        if headers_timeout.is_some() && dc.conn.is_h1() {
            let partial = dc.streams.is_empty() && !rb.buf.is_empty();
            if partial && head_since.is_none() {
                head_since = Some(Instant::now());
                if !scanning {
                    timer = None;
                }
            } else if !partial {
                head_since = None;
            }
        }
    }
    // What is left (a GOAWAY, the last responses) gets a bounded time to
    // go: a client that reads nothing holds the connection no longer.
    dc.out.take_from(&mut dc.conn);
    dc.out.flush_within(&mut tcp, HARD_CLOSE_AFTER).await;
    if dc.conn.is_h1() {
        linger(&mut tcp, &mut rb).await;
    }
    dc.close();
    wire.flush_logs();
    stats.cx_active.dec();
    trim_lists(shard);
}

/// An HTTP/1.1 connection we close: stop sending, then read and drop what
/// the client still sends until it closes or `HARD_CLOSE_AFTER` passes.
/// Closing with unread bytes makes the kernel send a reset, and a client
/// that receives it may drop the response it has not read yet (the 400
/// that explains the close).
async fn linger(tcp: &mut Transport, rb: &mut ReadBuf) {
    let mut timer = Box::pin(Timer::new(HARD_CLOSE_AFTER));
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
