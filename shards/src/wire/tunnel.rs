//! A tunnel: a client's bytes and a backend's moved both ways unread, through bounded buffers, half-closes passed on, until both directions end, either side fails, the idle timeout passes or the tunnel's deadline comes (`tcp_proxy` chains; upgraded HTTP/1.1 connections).
//!
//! Each direction is a [`Half`]: read from one side, write to the other
//! (and, over TLS, flush), and only read again once what was read went
//! out, so a side that stops reading stops the other side's reads (its
//! bytes wait in its socket): a tunnel holds at most two buffers of
//! 16 KiB however fast one side sends. A direction reads into the shard's
//! shared buffer and writes on at once; only bytes the other side does not
//! take then get a buffer of the direction's own, which it gives back
//! after a second of quiet. Bytes that go straight through (an echo, a
//! chat) and an idle WebSocket hold no buffer: its two sockets and its
//! task are all it costs. One wake-up moves at most [`TURN_BYTES`], half
//! each way, the directions taking turns to go first, before it lets the
//! shard's other tasks run; drains and the deadline are looked at on every
//! wake-up, busy or not.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_lite::{AsyncRead, AsyncWrite};
use glommio::timer::Timer;

use super::tls::Transport;
use crate::signal::Subscription;
use crate::stats::TunnelStats;

/// The first read's size; each read that fills the buffer doubles it, up
/// to [`MAX_BUFFER`].
const FIRST_BUFFER: usize = 1024;
/// The most one direction holds.
const MAX_BUFFER: usize = 16 * 1024;
/// Bytes moved in one wake-up before the tunnel yields to other tasks.
const TURN_BYTES: usize = 256 * 1024;
/// Quiet this long, a tunnel gives back its empty buffers.
const QUIET: Duration = Duration::from_secs(1);

/// What bounds a tunnel's life.
pub(super) struct TunnelLimits {
    /// No byte either way for this long ends it.
    pub idle: Option<Duration>,
    /// It ends here whatever moves (`max_downstream_connection_duration`).
    pub deadline: Option<Instant>,
    /// After a drain signal, it has this long left (the gateway's drain
    /// time, as Envoy closes a drained listener's connections after it).
    pub drain_time: Duration,
}

/// How a tunnel ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// Both sides closed their halves, and everything went.
    Closed,
    /// A side's socket failed (reset, or a TLS error).
    Failed,
    /// Nothing moved within the idle timeout.
    Idle,
    /// The tunnel's deadline came.
    Deadline,
    /// A drain's time ran out.
    Drained,
}

/// Bytes moved each way.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Moved {
    /// From the client, to the backend.
    pub received: u64,
    /// From the backend, to the client.
    pub sent: u64,
}

/// Whether a direction has passed its end on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shut {
    Open,
    /// The destination's write side is shut (after a TLS `close_notify`).
    Done,
}

/// One direction of a tunnel.
struct Half {
    buf: Vec<u8>,
    /// Bytes `start..end` of `buf` wait to be written.
    start: usize,
    end: usize,
    /// Next read's size.
    size: usize,
    eof: bool,
    shut: Shut,
    moved: u64,
}

impl Half {
    /// A direction whose first bytes (already read from its source) are
    /// `first`.
    fn new(first: Vec<u8>) -> Self {
        let end = first.len();
        Self {
            buf: first,
            start: 0,
            end,
            size: FIRST_BUFFER,
            eof: false,
            shut: Shut::Open,
            moved: 0,
        }
    }

    fn done(&self) -> bool {
        self.shut == Shut::Done
    }

    /// Holds a buffer it could give back: nothing in it waits to be
    /// written (a blocked write has its own wake-up).
    fn holds_spare(&self) -> bool {
        !self.buf.is_empty() && self.start == self.end
    }

    /// Gives back the buffer of a quiet direction.
    fn release(&mut self) {
        if self.start == self.end {
            self.buf = Vec::new();
            self.start = 0;
            self.end = 0;
            self.size = FIRST_BUFFER;
        }
    }

    /// Moves what it can from `src` to `dst` within `budget` bytes:
    /// whether anything happened (bytes, an end).
    fn poll_move(
        &mut self,
        src: &mut (impl AsyncRead + Unpin),
        dst: &mut (impl AsyncWrite + Unpin),
        cx: &mut Context<'_>,
        budget: &mut usize,
    ) -> io::Result<bool> {
        let mut progress = false;
        loop {
            if self.start < self.end {
                match Pin::new(&mut *dst).poll_write(cx, &self.buf[self.start..self.end]) {
                    Poll::Ready(Ok(0)) => return Err(io::ErrorKind::WriteZero.into()),
                    Poll::Ready(Ok(n)) => {
                        self.start += n;
                        self.moved += n as u64;
                        *budget = budget.saturating_sub(n);
                        progress = true;
                        if self.start == self.end {
                            (self.start, self.end) = (0, 0);
                        }
                        continue;
                    }
                    Poll::Ready(Err(e)) => return Err(e),
                    Poll::Pending => return Ok(progress),
                }
            }
            // What TLS keeps of the written bytes goes out before more is
            // read (a plain socket holds nothing): a side's bytes in flight
            // stay within its one buffer.
            match Pin::new(&mut *dst).poll_flush(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => return Ok(progress),
            }
            if self.eof {
                if self.shut == Shut::Open {
                    // TLS: close_notify, written; then the socket's write
                    // side shut. The peer reads its end.
                    match Pin::new(&mut *dst).poll_close(cx) {
                        Poll::Ready(Ok(())) => {
                            self.shut = Shut::Done;
                            progress = true;
                        }
                        Poll::Ready(Err(e)) => return Err(e),
                        Poll::Pending => {}
                    }
                }
                return Ok(progress);
            }
            if *budget == 0 {
                return Ok(progress);
            }
            if self.buf.is_empty() {
                // No buffer of its own: through the shard's.
                match SHARED.with(|b| self.read_through(src, dst, cx, budget, &mut b.borrow_mut()))
                {
                    Poll::Ready(Ok(())) => {
                        progress = true;
                        continue;
                    }
                    Poll::Ready(Err(e)) => return Err(e),
                    Poll::Pending => return Ok(progress),
                }
            }
            if self.buf.len() < self.size {
                self.buf.resize(self.size, 0);
            }
            let want = self.size;
            match Pin::new(&mut *src).poll_read(cx, &mut self.buf[..want]) {
                Poll::Ready(Ok(0)) => {
                    self.eof = true;
                    progress = true;
                }
                Poll::Ready(Ok(n)) => {
                    self.end = n;
                    if n == want && self.size < MAX_BUFFER {
                        self.size *= 2;
                    }
                    progress = true;
                }
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => return Ok(progress),
            }
        }
    }
}

impl Half {
    /// A read into `shared` (the shard's buffer), written on at once:
    /// only what `dst` does not take now is kept, in a buffer of the
    /// direction's own. A tunnel whose bytes go straight through (and an
    /// idle one) then holds no buffer at all. `Pending`: nothing to read.
    fn read_through(
        &mut self,
        src: &mut (impl AsyncRead + Unpin),
        dst: &mut (impl AsyncWrite + Unpin),
        cx: &mut Context<'_>,
        budget: &mut usize,
        shared: &mut [u8],
    ) -> Poll<io::Result<()>> {
        let want = self.size.min(shared.len());
        let n = match Pin::new(&mut *src).poll_read(cx, &mut shared[..want]) {
            Poll::Ready(Ok(0)) => {
                self.eof = true;
                return Poll::Ready(Ok(()));
            }
            Poll::Ready(Ok(n)) => n,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        if n == want && self.size < MAX_BUFFER {
            self.size *= 2;
        }
        let mut at = 0;
        while at < n {
            match Pin::new(&mut *dst).poll_write(cx, &shared[at..n]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(w)) => {
                    at += w;
                    self.moved += w as u64;
                    *budget = budget.saturating_sub(w);
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => break,
            }
        }
        if at < n {
            self.buf = shared[at..n].to_vec();
            (self.start, self.end) = (0, n - at);
        }
        Poll::Ready(Ok(()))
    }
}

thread_local! {
    /// The buffer directions without one of their own read into, one per
    /// thread (a shard's tasks never run at once); nothing stays in it
    /// between reads.
    static SHARED: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; MAX_BUFFER]);
}

/// Moves bytes between `down` (the client) and `up` (the backend: its
/// connection, or a stream of an HTTP/2 connection, `H2Stream`) until
/// the tunnel ends; `to_up` and `to_down` are bytes already read from one
/// side for the other (what followed an upgrade request or its 101).
/// Counted in `stats` (open tunnels, bytes, why it ended); returns what
/// moved. The transports are left as they are (the caller drops them,
/// closing the sockets).
pub(super) async fn run(
    down: &mut Transport,
    up: &mut (impl AsyncRead + AsyncWrite + Unpin),
    early: (Vec<u8>, Vec<u8>),
    (limits, drains): (&TunnelLimits, &[&Subscription]),
    stats: &TunnelStats,
) -> Moved {
    let _open = crate::wire::lifecycle::Open::new(&stats.active);
    let (ended, moved) = pump(down, up, early, limits, drains).await;
    stats.rx_bytes.add(moved.received);
    stats.tx_bytes.add(moved.sent);
    match ended {
        Ended::Idle => stats.idle_timeout.inc(),
        Ended::Deadline => stats.max_duration_reached.inc(),
        Ended::Closed | Ended::Failed | Ended::Drained => {}
    }
    moved
}

/// The tunnel itself: how it ended, and what moved.
async fn pump(
    down: &mut Transport,
    up: &mut (impl AsyncRead + AsyncWrite + Unpin),
    (to_up, to_down): (Vec<u8>, Vec<u8>),
    limits: &TunnelLimits,
    drains: &[&Subscription],
) -> (Ended, Moved) {
    let mut upward = Half::new(to_up);
    let mut downward = Half::new(to_down);
    let mut deadline = limits.deadline;
    let mut drained = false;
    let mut last = Instant::now();
    // The timer and when it fires.
    let mut timer: Option<(Instant, Pin<Box<Timer>>)> = None;
    // Which direction goes first this wake-up: they take turns, so one
    // that always has bytes (an upload) does not starve the other.
    let mut upward_first = true;
    let ended = poll_fn(|cx| loop {
        // Each direction its half of the turn's bytes.
        let (mut up_budget, mut down_budget) = (TURN_BYTES / 2, TURN_BYTES / 2);
        let mut turn = |first: bool| {
            if first {
                upward.poll_move(down, up, cx, &mut up_budget)
            } else {
                downward.poll_move(up, down, cx, &mut down_budget)
            }
        };
        let moved = turn(upward_first).and_then(|a| Ok(turn(!upward_first)? || a));
        upward_first = !upward_first;
        // One clock read a wake-up: what moved and every limit use it.
        let now = Instant::now();
        match moved {
            Err(e) => {
                tracing::debug!("tunnel failed: {e}");
                return Poll::Ready(Ended::Failed);
            }
            Ok(true) => last = now,
            Ok(false) => {}
        }
        if upward.done() && downward.done() {
            return Poll::Ready(Ended::Closed);
        }
        // Drains and the deadline hold for a busy tunnel too.
        if !drained && drains.iter().any(|d| d.poll_fired(cx).is_ready()) {
            drained = true;
            let by = now + limits.drain_time;
            deadline = Some(deadline.map_or(by, |d| d.min(by)));
            timer = None;
        }
        if deadline.is_some_and(|d| d <= now) {
            return Poll::Ready(if drained {
                Ended::Drained
            } else {
                Ended::Deadline
            });
        }
        if up_budget == 0 || down_budget == 0 {
            // More is ready: let the shard's other tasks run first.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if limits.idle.is_some_and(|idle| now >= last + idle) {
            return Poll::Ready(Ended::Idle);
        }
        if now >= last + QUIET {
            upward.release();
            downward.release();
        }
        // One timer for the earliest of: the deadline, the idle timeout,
        // the quiet release of a spare buffer. A timer that fired early
        // (bytes moved since it was set) is set again from here.
        let spare = upward.holds_spare() || downward.holds_spare();
        let next = [
            deadline,
            limits.idle.map(|i| last + i),
            spare.then_some(last + QUIET),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else {
            return Poll::Pending;
        };
        if timer.as_ref().is_none_or(|(at, _)| next < *at) {
            let t = Timer::new(next.saturating_duration_since(now));
            timer = Some((next, Box::pin(t)));
        }
        let Some((_, t)) = timer.as_mut() else {
            return Poll::Pending;
        };
        match t.as_mut().poll(cx) {
            Poll::Ready(_) => timer = None,
            Poll::Pending => return Poll::Pending,
        }
    })
    .await;
    let moved = Moved {
        received: upward.moved,
        sent: downward.moved,
    };
    (ended, moved)
}
