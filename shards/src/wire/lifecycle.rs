//! A downstream connection's lifecycle, apart from its I/O: its deadlines (handshake, idle, request headers, max duration, drain, close) and drain state as one state machine over the clock, and the gauge of open connections as a drop guard.
//!
//! The connection's task asks it, at the top of each turn, what the
//! connection must do ([`Lifecycle::next`]: serve on, send a GOAWAY, close),
//! then which single timer to arm ([`Lifecycle::arm`]); when that timer
//! fires, [`Lifecycle::on_timer`] says why. The task keeps the `Timer`
//! itself and does the I/O, so every rule here is plain code of `Instant`s
//! with deterministic tests.
//!
//! One timer per connection, re-armed when it fires rather than each time
//! the stream count touches zero (under load that is every few requests):
//! while streams are open it fires every [`DEADLINE_SCAN`] to look for
//! expired stream deadlines; one quiet scan switches it to the idle-side
//! deadline (handshake, idle timeout, a head that trickles in, the
//! connection's lifetime, its drain step or its close), and the first
//! stream after that back to scanning.

use std::time::{Duration, Instant};

use engine::HttpConnectionManager;

use crate::drain::{Drain, DrainOptions, Step};
use crate::stats::Counter;

/// A client must send the connection preface and its SETTINGS (or a first
/// HTTP/1.1 request head) within this time.
pub(super) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a connection with streams looks for expired deadlines: the
/// precision of the route timeout on this path.
pub(super) const DEADLINE_SCAN: Duration = Duration::from_millis(50);
/// How long a connection we close may take to flush its last bytes (a
/// GOAWAY, the last responses) to a client that may not read them. (How
/// long an HTTP/1.1 connection then reads and drops what its client still
/// sends is the connection manager's `delayed_close_timeout`.)
pub(super) const HARD_CLOSE_AFTER: Duration = Duration::from_secs(1);

/// What the connection is at the top of a turn, as the lifecycle needs it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ConnState {
    /// Streams are open.
    pub busy: bool,
    /// Requests taken so far.
    pub requests: u32,
    /// The codec is HTTP/1.1.
    pub is_h1: bool,
    /// The client reset streams past the flood cut-off.
    pub flooded: bool,
    /// The codec is done (both sides closed, or a connection error sent).
    pub closed: bool,
    /// The preface and SETTINGS (HTTP/2) or a first head (HTTP/1.1) came.
    pub handshaken: bool,
    /// The overload manager's `disable_http_keepalive` took a request: the
    /// connection ends after it, as when `max_requests_per_connection` is
    /// reached.
    pub overload_close: bool,
    /// The idle timeout the overload manager's `reduce_timeouts` leaves,
    /// while it acts (else the connection manager's).
    pub idle_timeout: Option<Duration>,
}

/// Why the connection sends its GOAWAY (HTTP/1.1: `Connection: close`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GoAway {
    /// Reset flood: `ENHANCE_YOUR_CALM`, closed [`HARD_CLOSE_AFTER`] later.
    Flood,
    /// `max_connection_duration` reached; then `drain_timeout`.
    LivedOut,
    /// `max_requests_per_connection` reached; then `drain_timeout`.
    ServedOut,
    /// A drain's notice on HTTP/1.1, or its final GOAWAY.
    Drain,
}

/// What the connection does now ([`Lifecycle::next`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Next {
    /// Send a GOAWAY, then look again.
    GoAway(GoAway),
    /// HTTP/2's first drain notice (GOAWAY with the last stream 2^31−1),
    /// then look again.
    Notice,
    /// Close, after a final GOAWAY (`true`) or without one.
    Close { go_away: bool },
    /// Go on serving: arm the timer and wait.
    Serve,
}

/// What to do with the connection's timer ([`Lifecycle::arm`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Arm {
    /// The armed timer stands.
    Keep,
    /// Arm a timer for this long from now.
    Set(Duration),
    /// No timer: nothing is due.
    Clear,
}

/// Why the timer fired ([`Lifecycle::on_timer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fired {
    /// A deadline scan with streams open: end the streams whose deadlines
    /// passed.
    Scan,
    /// A whole scan without a stream: give back what a burst left (read
    /// room, codec capacity); the timer now waits for the idle side.
    Quiet,
    /// A request head that trickled in past `request_headers_timeout`
    /// (slowloris): 408, then the connection closes.
    HeadTimeout,
    /// No preface and SETTINGS in time: not a client of ours, or a slow
    /// one holding a connection. Close.
    HandshakeTimeout,
    /// The idle timeout: the GOAWAY ([`Next::GoAway`] is not asked again).
    Idle,
    /// Something else came due (the lifetime's end, a drain step, the
    /// handshake's timer after the handshake): look again.
    Recheck,
}

/// Which timer is armed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Armed {
    No,
    /// The deadline scan, while streams are open.
    Scan,
    /// The idle side's earliest deadline.
    Idle,
}

/// The connection manager's limits a lifecycle runs by.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub idle_timeout: Option<Duration>,
    pub drain_timeout: Duration,
    pub headers_timeout: Option<Duration>,
    pub max_connection_duration: Option<Duration>,
    pub max_requests: Option<u32>,
    /// `delayed_close_timeout`: an HTTP/1.1 connection we close reads and
    /// drops the client's bytes this long after its last reply.
    pub delayed_close: Duration,
}

impl Limits {
    pub fn of(hcm: &HttpConnectionManager) -> Self {
        Self {
            idle_timeout: hcm.idle_timeout,
            drain_timeout: hcm.drain_timeout,
            headers_timeout: hcm.request_headers_timeout,
            max_connection_duration: hcm.max_connection_duration,
            max_requests: hcm.max_requests_per_connection,
            delayed_close: hcm.delayed_close_timeout,
        }
    }
}

/// One downstream connection's deadlines and drain state.
#[derive(Debug)]
pub(super) struct Lifecycle {
    limits: Limits,
    /// `max_connection_duration` from the connection's start: past it the
    /// connection drains like one whose listener went away.
    lives_until: Option<Instant>,
    armed: Armed,
    /// The idle-side timer is the handshake's.
    handshake_timer: bool,
    /// When the HTTP/1.1 head now being read began (`None`: none in
    /// progress), for `request_headers_timeout`.
    head_since: Option<Instant>,
    /// Set once the final GOAWAY went: the time it closes by, if its
    /// streams have not ended before.
    close_at: Option<Instant>,
    /// Its listener, chain, health check or the gateway drains: its way
    /// through the drain time.
    drain: Option<Drain>,
    /// Since when it has had no stream (a drain closes it once idle).
    quiet_since: Option<Instant>,
    /// Opened into a drain: answered once and told, not closed as idle.
    born_draining: bool,
}

impl Lifecycle {
    /// `delayed_close_timeout`: how long a closing HTTP/1.1 connection
    /// reads on.
    pub fn delayed_close(&self) -> Duration {
        self.limits.delayed_close
    }

    /// A connection opened at `now`; `born_draining` when a drain it
    /// belongs to had already begun.
    pub fn new(limits: Limits, now: Instant, born_draining: bool) -> Self {
        Self {
            limits,
            lives_until: limits.max_connection_duration.map(|d| now + d),
            armed: Armed::No,
            handshake_timer: false,
            head_since: None,
            close_at: None,
            drain: None,
            quiet_since: Some(now),
            born_draining,
        }
    }

    /// What the connection does at the top of a turn. A GOAWAY or a notice
    /// is to be sent and the question asked again; after a notice, with
    /// `drain_step` false, so the final GOAWAY waits for a later turn even
    /// when `drain_timeout` is zero (the client sees the notice first).
    pub fn next(&mut self, now: Instant, c: &ConnState, drain_step: bool) -> Next {
        if c.flooded && self.close_at.is_none() {
            self.close_at = Some(now + HARD_CLOSE_AFTER);
            return Next::GoAway(GoAway::Flood);
        }
        if let (Some(d), None, true) = (self.drain.as_mut(), self.close_at, drain_step) {
            match d.step(now, c.busy, c.requests > 0, self.quiet_since) {
                Step::Wait => {}
                Step::Notice if c.is_h1 => {
                    // `Connection: close` on the response in flight.
                    self.close_at = Some(d.deadline());
                    return Next::GoAway(GoAway::Drain);
                }
                Step::Notice => return Next::Notice,
                Step::Final => {
                    self.close_at = Some(d.deadline());
                    self.armed = Armed::No;
                    return Next::GoAway(GoAway::Drain);
                }
                Step::Close => return Next::Close { go_away: true },
            }
        }
        if self.close_at.is_none() {
            let lived_out = self.lives_until.is_some_and(|t| now >= t);
            let served_out =
                self.limits.max_requests.is_some_and(|n| c.requests >= n) || c.overload_close;
            if lived_out || served_out {
                self.close_at = Some(now + self.limits.drain_timeout);
                self.armed = Armed::No;
                return Next::GoAway(if lived_out {
                    GoAway::LivedOut
                } else {
                    GoAway::ServedOut
                });
            }
        }
        if self.close_at.is_some_and(|t| !c.busy || now >= t) || c.closed {
            return Next::Close { go_away: false };
        }
        Next::Serve
    }

    /// Which timer the connection waits with this turn.
    pub fn arm(&mut self, now: Instant, c: &ConnState) -> Arm {
        if c.busy {
            self.quiet_since = None;
        } else if self.quiet_since.is_none() {
            self.quiet_since = Some(now);
        }
        if c.busy && self.armed != Armed::Scan {
            self.armed = Armed::Scan;
            return Arm::Set(DEADLINE_SCAN);
        }
        if c.busy || self.armed != Armed::No {
            return Arm::Keep;
        }
        self.handshake_timer = self.close_at.is_none() && !c.handshaken;
        match self.idle_wait(now, c) {
            Some(wait) => {
                self.armed = Armed::Idle;
                Arm::Set(wait)
            }
            None => Arm::Clear,
        }
    }

    /// The earliest idle-side deadline from `now`.
    fn idle_wait(&self, now: Instant, c: &ConnState) -> Option<Duration> {
        let until = |t: Instant| t.saturating_duration_since(now);
        let limits = &self.limits;
        let wait = if let Some(t) = self.close_at {
            Some(until(t))
        } else if self.handshake_timer {
            Some(
                limits
                    .idle_timeout
                    .map_or(HANDSHAKE_TIMEOUT, |t| t.min(HANDSHAKE_TIMEOUT)),
            )
        } else {
            c.idle_timeout.or(limits.idle_timeout)
        };
        // An idle connection wakes at its lifetime's end too (a draining
        // one has its close time already).
        let lifetime = self.lives_until.filter(|_| self.close_at.is_none());
        let head = self
            .head_since
            .zip(limits.headers_timeout)
            .map(|(since, t)| since + t);
        // A new connection waiting in a drain for its first request closes
        // at the drain's end all the same.
        let drain = self
            .drain
            .as_ref()
            .map(|d| d.next(c.requests > 0, self.quiet_since));
        [wait, lifetime.map(until), head.map(until), drain.map(until)]
            .into_iter()
            .flatten()
            .min()
    }

    /// The armed timer fired at `now`.
    pub fn on_timer(&mut self, now: Instant, c: &ConnState) -> Fired {
        let was = std::mem::replace(&mut self.armed, Armed::No);
        if was == Armed::Scan {
            return if c.busy { Fired::Scan } else { Fired::Quiet };
        }
        let limits = &self.limits;
        if self
            .head_since
            .zip(limits.headers_timeout)
            .is_some_and(|(since, t)| now >= since + t)
        {
            return Fired::HeadTimeout;
        }
        let lived_out = self.lives_until.is_some_and(|t| now >= t);
        if lived_out || self.drain.is_some() {
            // The top of the turn drains (or closes) the connection.
            return Fired::Recheck;
        }
        if self.handshake_timer {
            return if c.handshaken {
                Fired::Recheck
            } else {
                Fired::HandshakeTimeout
            };
        }
        if self.close_at.is_none() {
            self.close_at = Some(now + limits.drain_timeout);
            return Fired::Idle;
        }
        Fired::Recheck
    }

    /// The connection manager's `idle_timeout`.
    pub fn idle_timeout(&self) -> Option<Duration> {
        self.limits.idle_timeout
    }

    /// Whether a drain signal can still start a drain: not once one runs,
    /// nor once the connection closes anyway.
    pub fn takes_drain(&self) -> bool {
        self.close_at.is_none() && self.drain.is_none()
    }

    /// Whether the place in a drain's spread is drawn: not for a
    /// connection opened into the drain, nor for a failed health check
    /// (`health_only`), which drain at once as Envoy's `drainClose()`.
    pub fn spreads(&self, health_only: bool) -> bool {
        !(self.born_draining || health_only)
    }

    /// A drain begins at `now`; `place` in `[0, 1)` is the connection's
    /// draw in the spread (module `drain`).
    pub fn start_drain(&mut self, now: Instant, opts: DrainOptions, place: f64) {
        self.drain = Some(Drain::new(
            now,
            opts,
            self.limits.drain_timeout,
            place,
            self.born_draining,
        ));
        self.armed = Armed::No;
    }

    /// After a read: an HTTP/1.1 head begun and not complete (`partial`:
    /// bytes wait and no exchange is in progress) has its deadline from
    /// now; an idle timer armed before it came is armed again to include
    /// it.
    pub fn on_input(&mut self, now: Instant, partial: bool) {
        if self.limits.headers_timeout.is_none() {
            return;
        }
        if partial && self.head_since.is_none() {
            self.head_since = Some(now);
            if self.armed != Armed::Scan {
                self.armed = Armed::No;
            }
        } else if !partial {
            self.head_since = None;
        }
    }

    /// Whether the connection reads in full-size chunks: while streams are
    /// open (scanning). A quiet connection reads into a small buffer, so
    /// an idle client holds no 8 KiB of read room.
    pub fn scanning(&self) -> bool {
        self.armed == Armed::Scan
    }

    /// Whether `requests` reached `max_requests_per_connection`: no further
    /// pipelined request is taken before the connection drains.
    pub fn served_out(&self, requests: u32) -> bool {
        self.limits.max_requests.is_some_and(|n| requests >= n)
    }

    /// Whether the connection takes `request_headers_timeout` (HTTP/1.1
    /// heads are tracked only when it is set).
    pub fn times_heads(&self) -> bool {
        self.limits.headers_timeout.is_some()
    }
}

/// One open connection in a gauge (`cx_active`): counted when made,
/// uncounted when dropped, whichever way the connection's task ends.
pub(super) struct Open<'a>(&'a Counter);

impl<'a> Open<'a> {
    pub fn new(gauge: &'a Counter) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
#[path = "lifecycle_tests.rs"]
mod tests;
