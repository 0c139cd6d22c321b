//! One connection's way through a drain (Envoy's drain manager, per connection): idle (no stream for [`QUIET`]) it closes at once; in use it waits for its place in the spread over `--drain-time-s`, is told (HTTP/2: GOAWAY with the last stream id 2^31−1; HTTP/1.1: `Connection: close`), gets the final GOAWAY `drain_timeout` later, closes once its streams are done, and whatever is left closes at the end of the drain time.
//!
//! Why a spread: a reload or a stop drains thousands of connections at
//! once; told together, their clients would all reconnect in the same
//! second. Envoy's gradual strategy has each response drain-close with a
//! probability that grows with the time spent; here each connection draws
//! its place once, uniformly over the drain time less its own
//! `drain_timeout` (so its streams have that long after the notice), which
//! spreads the reconnects evenly and keeps the connection's timer single.

use std::time::{Duration, Instant};

/// A connection without a stream for this long is idle: in a drain it
/// closes at once. A shorter gap is a client in use between two requests
/// (at load, nearly every HTTP/2 connection has no stream open at some
/// instants); closing it then would reconnect every client at once, which
/// the spread is there to avoid.
pub const QUIET: Duration = Duration::from_secs(1);

/// `--drain-strategy`: Envoy's two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DrainStrategy {
    /// Spread over the drain time.
    #[default]
    Gradual,
    /// Every connection is told at once.
    Immediate,
}

/// How this gateway drains (`--drain-time-s`, `--drain-strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainOptions {
    pub time: Duration,
    pub strategy: DrainStrategy,
}

impl Default for DrainOptions {
    /// Envoy's: 600 s, gradual.
    fn default() -> Self {
        Self {
            time: Duration::from_secs(600),
            strategy: DrainStrategy::Gradual,
        }
    }
}

/// What a draining connection does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Nothing yet. A busy connection looks again at its next deadline
    /// scan (50 ms), which is precise enough for a drain.
    Wait,
    /// The first notice: HTTP/2's GOAWAY (2^31−1), HTTP/1.1's
    /// `Connection: close` on the response in flight.
    Notice,
    /// The final GOAWAY (the last stream processed); then close once the
    /// streams are done, by [`Drain::deadline`] at the latest.
    Final,
    /// Close now (idle, or the drain time is over).
    Close,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Waiting,
    Noticed,
    Final,
}

/// One connection's drain.
#[derive(Debug, Clone)]
pub(crate) struct Drain {
    notice_at: Instant,
    final_at: Instant,
    deadline: Instant,
    phase: Phase,
    /// Opened while its listener already drained: it waits for its first
    /// request instead of counting as idle.
    fresh: bool,
}

impl Drain {
    /// A drain that began at `now`; `place` in `[0, 1)` is the
    /// connection's draw within the spread (0: told at once). `fresh`: the
    /// connection opened into the drain (see [`Self::step`]).
    pub fn new(
        now: Instant,
        opts: DrainOptions,
        drain_timeout: Duration,
        place: f64,
        fresh: bool,
    ) -> Self {
        let spread = match opts.strategy {
            DrainStrategy::Gradual => opts.time.saturating_sub(drain_timeout),
            DrainStrategy::Immediate => Duration::ZERO,
        };
        let notice_at = now + spread.mul_f64(place.clamp(0.0, 1.0));
        let deadline = now + opts.time;
        Self {
            notice_at,
            final_at: (notice_at + drain_timeout).min(deadline),
            deadline,
            phase: Phase::Waiting,
            fresh,
        }
    }

    /// What to do at `now` for a connection with streams in flight
    /// (`busy`) or without since `quiet_since`, that has `served` requests
    /// before or not.
    ///
    /// - Busy: told at its place ([`Step::Notice`]), the final GOAWAY
    ///   `drain_timeout` later ([`Step::Final`]).
    /// - Without streams: closed when idle ([`QUIET`]), or once the final
    ///   GOAWAY is due or sent. A short gap between two requests (at its
    ///   place or not) is not a reason to close: the client may have the
    ///   next request on the wire, so it is told with the next response.
    /// - Fresh, nothing served yet (it opened while its listener drains
    ///   gracefully, or while the health check fails): it waits for its
    ///   first request, answered and told as Envoy answers it, instead of
    ///   closing under a client that just connected.
    pub fn step(
        &mut self,
        now: Instant,
        busy: bool,
        served: bool,
        quiet_since: Option<Instant>,
    ) -> Step {
        if now >= self.deadline {
            return Step::Close;
        }
        if !busy {
            if self.fresh && !served {
                return Step::Wait;
            }
            let idle = quiet_since.is_some_and(|q| now.saturating_duration_since(q) >= QUIET);
            let finished = match self.phase {
                Phase::Waiting => false,
                Phase::Noticed => now >= self.final_at,
                Phase::Final => true,
            };
            return if idle || finished {
                Step::Close
            } else {
                Step::Wait
            };
        }
        match self.phase {
            Phase::Waiting if now >= self.notice_at => {
                self.phase = Phase::Noticed;
                Step::Notice
            }
            Phase::Noticed if now >= self.final_at => {
                self.phase = Phase::Final;
                Step::Final
            }
            _ => Step::Wait,
        }
    }

    /// When [`Self::step`] may next have something to do for a connection
    /// without streams (one with streams looks at every deadline scan).
    pub fn next(&self, served: bool, quiet_since: Option<Instant>) -> Instant {
        if self.fresh && !served {
            return self.deadline;
        }
        let idle_at = quiet_since.map_or(self.deadline, |q| q + QUIET);
        let at = match self.phase {
            Phase::Waiting => idle_at,
            Phase::Noticed => idle_at.min(self.final_at),
            Phase::Final => self.deadline,
        };
        at.min(self.deadline)
    }

    /// The end of the drain time: the connection closes by then.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    fn opts(secs: u64, strategy: DrainStrategy) -> DrainOptions {
        DrainOptions {
            time: S(secs),
            strategy,
        }
    }

    #[test]
    fn an_idle_connection_closes_at_once() {
        let t0 = Instant::now() + S(10);
        let mut d = Drain::new(t0, opts(600, DrainStrategy::Gradual), S(5), 0.9, false);
        assert_eq!(d.step(t0, false, true, Some(t0 - S(2))), Step::Close);
    }

    /// The herd this avoids: at load a connection often has no stream for
    /// a moment. It keeps its place; quiet for a second, it is idle.
    #[test]
    fn a_connection_between_two_requests_is_not_idle() {
        let t0 = Instant::now();
        let mut d = Drain::new(t0, opts(600, DrainStrategy::Gradual), S(5), 0.9, false);
        let gap = Some(t0 - Duration::from_millis(10));
        assert_eq!(d.step(t0, false, true, gap), Step::Wait);
        assert_eq!(d.next(true, gap), t0 + Duration::from_millis(990));
        assert_eq!(d.step(t0 + S(1), false, true, gap), Step::Close);
        // In a gap at its place it is not cut (the next request may be on
        // the wire): the next request is answered and told.
        let mut d = Drain::new(t0, opts(600, DrainStrategy::Gradual), S(5), 0.5, false);
        let at = t0 + Duration::from_millis(297_500);
        let gap = Some(at - Duration::from_millis(5));
        assert_eq!(d.step(at, false, true, gap), Step::Wait);
        assert_eq!(
            d.step(at + Duration::from_millis(1), true, true, None),
            Step::Notice
        );
    }

    /// Told, without streams: closed only once the final GOAWAY is due
    /// (streams sent before the client saw the notice are still taken).
    #[test]
    fn told_it_waits_for_drain_timeout_before_closing() {
        let t0 = Instant::now();
        let mut d = Drain::new(t0, opts(600, DrainStrategy::Immediate), S(5), 0.0, false);
        assert_eq!(d.step(t0, true, true, None), Step::Notice);
        let quiet = Some(t0 + Duration::from_millis(100));
        assert_eq!(
            d.step(t0 + Duration::from_millis(1100), false, true, quiet),
            Step::Close,
            "idle"
        );
        let mut d = Drain::new(t0, opts(600, DrainStrategy::Immediate), S(5), 0.0, false);
        assert_eq!(d.step(t0, true, true, None), Step::Notice);
        let quiet = Some(t0 + Duration::from_millis(800));
        assert_eq!(d.step(t0 + S(1), false, true, quiet), Step::Wait);
        assert_eq!(d.next(true, quiet), t0 + Duration::from_millis(1800));
        assert_eq!(
            d.step(
                t0 + S(5),
                false,
                true,
                Some(t0 + Duration::from_millis(4500))
            ),
            Step::Close
        );
    }

    #[test]
    fn a_busy_one_is_told_at_its_place_then_finally_then_closed_at_the_end() {
        let t0 = Instant::now();
        // 600 s less the 5 s drain_timeout: place 0.5 is 297.5 s in.
        let mut d = Drain::new(t0, opts(600, DrainStrategy::Gradual), S(5), 0.5, false);
        let notice = t0 + Duration::from_millis(297_500);
        assert_eq!(d.step(notice - S(1), true, true, None), Step::Wait);
        assert_eq!(d.step(notice, true, true, None), Step::Notice);
        assert_eq!(d.step(notice + S(1), true, true, None), Step::Wait);
        assert_eq!(d.step(notice + S(5), true, true, None), Step::Final);
        assert_eq!(d.step(t0 + S(599), true, true, None), Step::Wait);
        assert_eq!(d.step(t0 + S(600), true, true, None), Step::Close);
        // Its streams done before: closed then.
        assert_eq!(d.step(notice + S(6), false, true, None), Step::Close);
    }

    #[test]
    fn places_spread_the_notices_over_the_drain_time_less_drain_timeout() {
        let t0 = Instant::now();
        let mut last = Drain::new(t0, opts(60, DrainStrategy::Gradual), S(5), 0.999_999, false);
        assert_eq!(last.step(t0 + S(54), true, true, None), Step::Wait);
        assert_eq!(last.step(t0 + S(55), true, true, None), Step::Notice);
        // The final GOAWAY never comes after the end of the drain time.
        let mut short = Drain::new(t0, opts(3, DrainStrategy::Gradual), S(5), 0.7, false);
        assert_eq!(short.step(t0, true, true, None), Step::Notice);
        assert_eq!(
            short.step(t0 + Duration::from_millis(2999), true, true, None),
            Step::Wait
        );
        assert_eq!(short.step(t0 + S(3), true, true, None), Step::Close);
    }

    #[test]
    fn a_new_connection_waits_for_its_first_request() {
        let t0 = Instant::now();
        let mut d = Drain::new(t0, opts(60, DrainStrategy::Immediate), S(5), 0.0, true);
        let opened = Some(t0);
        assert_eq!(d.step(t0 + S(2), false, false, opened), Step::Wait);
        // Its timer waits for the drain's end, not a second: no spinning.
        assert_eq!(d.next(false, opened), t0 + S(60));
        assert_eq!(d.step(t0 + S(3), true, false, None), Step::Notice);
        // One that opened before the drain and never asked is idle.
        let mut old = Drain::new(t0, opts(60, DrainStrategy::Immediate), S(5), 0.0, false);
        let long_ago = Some(t0 - S(30));
        assert_eq!(old.step(t0, false, false, long_ago), Step::Close);
        // Never past the drain time, request or not.
        let mut quiet = Drain::new(t0, opts(60, DrainStrategy::Immediate), S(5), 0.0, true);
        assert_eq!(quiet.step(t0 + S(60), false, false, None), Step::Close);
    }

    #[test]
    fn immediate_tells_every_connection_at_once() {
        let t0 = Instant::now();
        let mut d = Drain::new(t0, opts(600, DrainStrategy::Immediate), S(5), 0.99, false);
        assert_eq!(d.step(t0, true, true, None), Step::Notice);
        assert_eq!(d.step(t0 + S(5), true, true, None), Step::Final);
        assert_eq!(d.deadline(), t0 + S(600));
    }
}
