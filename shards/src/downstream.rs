//! Downstream connections: the accept loop of both data paths, and on the
//! `h2` path: h2 server settings and limits, per-stream tasks, idle
//! timeout, drain (GOAWAY) and the reset-flood cut-off.

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use engine::Listener;

use bytes::Bytes;
use glommio::net::{TcpListener, TcpStream};
use glommio::timer::Timer;
use h2::server::SendResponse;
use h2::{Reason, RecvStream};
use http::Request;

use crate::io;
use crate::proxy;
use crate::shard::Shard;
use crate::signal::Signal;
use crate::wire::{self, DataPath};

/// A client must send the HTTP/2 connection preface within this time.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an abruptly shut down connection may take to flush its GOAWAY.
const HARD_CLOSE_AFTER: Duration = Duration::from_secs(1);
/// Reset-flood window and thresholds: a connection is cut off when, within
/// one window, it reset at least `FLOOD_MIN_RESETS` streams and those were at
/// least half of the streams it opened. Ordinary cancellation (deadlines) is
/// far below that ratio; a rapid-reset attack is at 100 %.
pub(crate) const FLOOD_WINDOW: Duration = Duration::from_secs(10);
pub(crate) const FLOOD_MIN_RESETS: u32 = 100;
/// Envoy's default limit of buffered outbound data per stream (bytes).
const MAX_SEND_BUFFER: usize = 64 * 1024;

/// Shared by a connection's task and its stream tasks.
pub struct ConnState {
    window_start: Cell<Instant>,
    streams_in_window: Cell<u32>,
    resets_in_window: Cell<u32>,
    flood: Cell<bool>,
    active_streams: Cell<u32>,
    last_active: Cell<Instant>,
    waker: Cell<Option<Waker>>,
}

impl ConnState {
    fn new() -> Self {
        let now = Instant::now();
        Self {
            window_start: Cell::new(now),
            streams_in_window: Cell::new(0),
            resets_in_window: Cell::new(0),
            flood: Cell::new(false),
            active_streams: Cell::new(0),
            last_active: Cell::new(now),
            waker: Cell::new(None),
        }
    }

    fn roll_window(&self, now: Instant) {
        if now.duration_since(self.window_start.get()) >= FLOOD_WINDOW {
            self.window_start.set(now);
            self.streams_in_window.set(0);
            self.resets_in_window.set(0);
        }
    }

    fn stream_started(&self) {
        let now = Instant::now();
        self.roll_window(now);
        self.streams_in_window.set(self.streams_in_window.get() + 1);
        self.active_streams.set(self.active_streams.get() + 1);
        self.last_active.set(now);
    }

    fn stream_ended(&self) {
        self.active_streams
            .set(self.active_streams.get().saturating_sub(1));
        self.last_active.set(Instant::now());
    }

    /// Called when the client reset a stream before it completed.
    pub fn client_reset(&self) {
        self.roll_window(Instant::now());
        let resets = self.resets_in_window.get() + 1;
        self.resets_in_window.set(resets);
        if resets >= FLOOD_MIN_RESETS
            && resets * 2 >= self.streams_in_window.get()
            && !self.flood.get()
        {
            self.flood.set(true);
            if let Some(w) = self.waker.take() {
                w.wake();
            }
        }
    }
}

/// Accepts connections on one listener socket until cancelled (by dropping
/// the task, which also closes the socket), each served by the shard's
/// data path.
pub async fn accept_loop(shard: Rc<Shard>, sock: TcpListener, listener: Rc<str>, drain: Signal) {
    loop {
        match sock.accept().await {
            Ok(stream) => {
                let (sh, name, drain) = (Rc::clone(&shard), Rc::clone(&listener), drain.clone());
                // Detached: a connection outlives the listener's task while
                // it drains.
                match shard.data_path {
                    DataPath::H2 => {
                        glommio::spawn_local(serve_connection(sh, stream, name, drain)).detach();
                    }
                    DataPath::H2wire => {
                        glommio::spawn_local(wire::downstream::serve(sh, stream, name, drain))
                            .detach();
                    }
                }
            }
            Err(e) => {
                // Out of descriptors or similar: don't spin, don't die.
                tracing::warn!(shard = shard.id, listener = %listener, "accept failed: {e}");
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

// The big variant is moved once, straight into a spawned task; boxing it
// would cost an allocation per stream for nothing.
#[allow(clippy::large_enum_variant)]
enum Event {
    Stream(Request<RecvStream>, SendResponse<Bytes>),
    Drain,
    DrainTimeout,
    HardClose,
    IdleCheck,
    Flood,
    Closed,
}

async fn serve_connection(shard: Rc<Shard>, tcp: TcpStream, listener: Rc<str>, drain: Signal) {
    let stats = &shard.stats.downstream;
    stats.cx_total.inc();
    stats.cx_active.inc();
    let _active = scopeguard(|| shard.stats.downstream.cx_active.dec());
    let peer = tcp
        .peer_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));

    let snap = shard.snapshot();
    let Some(cfg) = snap.listener(&listener) else {
        return;
    };
    // The config this connection was accepted under: streams fall back to
    // it when a reload removed the listener while the connection drains.
    let accepted_under: Rc<Arc<Listener>> = Rc::new(Arc::clone(cfg));
    let hcm = &cfg.http;
    let idle_timeout = hcm.idle_timeout;
    let drain_timeout = hcm.drain_timeout;
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(hcm.max_concurrent_streams)
        .max_header_list_size(hcm.max_header_list_size)
        .initial_window_size(hcm.initial_stream_window_size)
        .initial_connection_window_size(hcm.initial_connection_window_size)
        .max_send_buffer_size(MAX_SEND_BUFFER)
        .max_concurrent_reset_streams(hcm.max_concurrent_streams as usize);
    drop(snap);

    // Boxed, so it is freed once done: the handshake future holds h2's codec
    // several times over (moved through the timeout wrapper), and whatever
    // this function's state machine holds stays allocated for the whole life
    // of the connection: unboxed, that was 5.8 KiB per idle connection.
    let handshake = Box::pin(glommio::timer::timeout(HANDSHAKE_TIMEOUT, async move {
        Ok(builder.handshake::<_, Bytes>(io::h2_io(tcp)).await)
    }));
    let mut conn = match handshake.await {
        Ok(Ok(c)) => c,
        _ => {
            stats.cx_protocol_error.inc();
            return;
        }
    };

    let state = Rc::new(ConnState::new());
    let drain_sub = drain.subscribe();
    let shutdown_sub = shard.shutdown.subscribe();
    let mut idle: Option<Pin<Box<Timer>>> = idle_timeout.map(|d| Box::pin(Timer::new(d)));
    let mut drain_deadline: Option<Pin<Box<Timer>>> = None;
    // After an abrupt shutdown the GOAWAY may never flush (a client that
    // stopped reading has a zero window): close regardless after this.
    let mut hard_close: Option<Pin<Box<Timer>>> = None;
    let mut draining = false;
    let mut closing = false;

    loop {
        let event = poll_fn(|cx| {
            if state.flood.get() && !closing {
                return Poll::Ready(Event::Flood);
            }
            if !draining
                && (drain_sub.poll_fired(cx).is_ready() || shutdown_sub.poll_fired(cx).is_ready())
            {
                return Poll::Ready(Event::Drain);
            }
            if let Some(t) = drain_deadline.as_mut() {
                if t.as_mut().poll(cx).is_ready() {
                    drain_deadline = None;
                    return Poll::Ready(Event::DrainTimeout);
                }
            }
            if let Some(t) = hard_close.as_mut() {
                if t.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Event::HardClose);
                }
            }
            if let Some(t) = idle.as_mut() {
                if t.as_mut().poll(cx).is_ready() {
                    idle = None;
                    return Poll::Ready(Event::IdleCheck);
                }
            }
            match conn.poll_accept(cx) {
                Poll::Ready(Some(Ok((req, respond)))) => Poll::Ready(Event::Stream(req, respond)),
                Poll::Ready(Some(Err(e))) => {
                    if e.is_library() && e.reason() == Some(Reason::ENHANCE_YOUR_CALM) {
                        // h2's own rapid-reset guard (streams reset before
                        // we accepted them) cut the client off.
                        shard.stats.downstream.cx_reset_flood.inc();
                    } else if !e.is_io() && !e.is_go_away() {
                        shard.stats.downstream.cx_protocol_error.inc();
                    }
                    Poll::Ready(Event::Closed)
                }
                Poll::Ready(None) => Poll::Ready(Event::Closed),
                Poll::Pending => {
                    state.waker.set(Some(cx.waker().clone()));
                    Poll::Pending
                }
            }
        })
        .await;

        match event {
            Event::Stream(req, respond) => {
                state.stream_started();
                let (shard, state, listener) = (
                    Rc::clone(&shard),
                    Rc::clone(&state),
                    Rc::clone(&accepted_under),
                );
                // The stream future is built inside the task, so its (large)
                // state is never moved after construction.
                glommio::spawn_local(async move {
                    proxy::serve_stream(shard, Rc::clone(&state), listener, peer, req, respond)
                        .await;
                    state.stream_ended();
                })
                .detach();
            }
            Event::Drain => {
                draining = true;
                conn.graceful_shutdown();
                drain_deadline = Some(Box::pin(Timer::new(drain_timeout)));
            }
            Event::DrainTimeout => {
                closing = true;
                conn.abrupt_shutdown(Reason::NO_ERROR);
                hard_close = Some(Box::pin(Timer::new(HARD_CLOSE_AFTER)));
            }
            Event::HardClose => break,
            Event::IdleCheck => {
                let Some(limit) = idle_timeout else { continue };
                if draining {
                    continue; // the drain deadline governs from here
                }
                let quiet = state.last_active.get().elapsed();
                if state.active_streams.get() > 0 {
                    // Busy: look again a whole idle period from now rather
                    // than spinning while long streams run.
                    idle = Some(Box::pin(Timer::new(limit)));
                } else if quiet >= limit {
                    shard.stats.downstream.cx_idle_timeout.inc();
                    draining = true;
                    conn.graceful_shutdown();
                    drain_deadline = Some(Box::pin(Timer::new(drain_timeout)));
                } else {
                    let left = limit.saturating_sub(quiet).max(Duration::from_millis(100));
                    idle = Some(Box::pin(Timer::new(left)));
                }
            }
            Event::Flood => {
                closing = true;
                shard.stats.downstream.cx_reset_flood.inc();
                conn.abrupt_shutdown(Reason::ENHANCE_YOUR_CALM);
                hard_close = Some(Box::pin(Timer::new(HARD_CLOSE_AFTER)));
            }
            Event::Closed => break,
        }
    }
}

/// Runs `f` on drop.
fn scopeguard<F: FnOnce()>(f: F) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}
