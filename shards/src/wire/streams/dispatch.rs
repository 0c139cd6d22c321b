//! What reaches a connection's streams: the codec's events (a request, its body, a client reset) and the inbox's deliveries from upstream connections, handed to the phases; the streams' deadlines; the end of the connection.

use std::time::{Duration, Instant};

use engine::overload::Timer;
use h2wire::conn::Event;

use super::{Streams, FLOOD_MIN_RESETS};
use crate::local_reply::LocalReply;
use crate::stats::DownstreamStats;
use crate::wire::dstream::ALIAS_BIT;
use crate::wire::inbox::Delivered;
use crate::wire::inbox::Deliveries;

/// Which of a stream's timers ran out.
enum Expired {
    Duration,
    /// The request did not come in whole within `request_timeout`.
    Request,
    Route,
    Idle,
    /// A retry's back-off is over.
    BackOff,
    /// The attempt in flight passed its `per_try_timeout`.
    Try,
    /// The attempt in flight sent nothing for its `per_try_idle_timeout`.
    TryIdle,
}

impl Streams {
    /// One pass of a turn over what the codec decoded and what upstream
    /// connections delivered: the phases run for each, new requests go
    /// upstream once the read's events are all in, bodies move, and the
    /// upstream tasks given output and the access log writer are woken.
    pub fn dispatch(&mut self, batch: &mut Deliveries, stats: &DownstreamStats) {
        while let Some(ev) = self.conn.poll_event() {
            self.on_event(ev);
        }
        // After the events: an HTTP/1.1 head refused while it became a
        // request is counted too.
        self.conn.count(stats);
        self.answer_refusal();
        self.open_deferred();
        self.cx.wire.inboxes.swap_items(self.cx.inbox, batch);
        self.on_inbox(batch);
        for stream in self.forward() {
            self.finish(stream);
        }
        self.flush_upstreams();
        self.cx.wire.flush_logs();
    }

    fn on_event(&mut self, ev: Event) {
        match ev {
            Event::Request {
                stream,
                head,
                end_stream,
            } => {
                self.flood.roll(self.now);
                self.flood.streams += 1;
                self.on_request(stream, head, end_stream);
            }
            Event::Data {
                stream,
                data,
                end_stream,
            } => self.on_request_data(stream, data, end_stream),
            Event::Trailers { stream, fields } => self.on_request_trailers(stream, fields),
            Event::Reset { stream, .. } => {
                if let Some(s) = self.table.get_mut(&stream) {
                    if let Some(l) = s.log.as_mut() {
                        l.flags = "DC";
                    }
                    s.flag = "DC";
                    let stats = &self.cx.wire.shard.stats.downstream;
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

    /// What an upstream connection (or a paused filter) delivered for
    /// `key`: a stream's id, or the alias of one of its attempts.
    fn on_delivery(&mut self, key: u32, what: Delivered) {
        if let Delivered::Resume(resumed) = what {
            let (ticket, outcome) = *resumed;
            return self.resume(key, ticket, outcome);
        }
        if let Delivered::OverloadReset = what {
            // Keyed by the stream's own id, not an attempt's.
            return self.overload_reset(key);
        }
        let stream = match key & ALIAS_BIT {
            0 => key,
            _ => match self.aliases.get(&key) {
                Some(&stream) => stream,
                None => return self.stale(key, what),
            },
        };
        let Some(s) = self.table.get(&stream) else {
            return self.stale(key, what);
        };
        if s.key(stream) != key {
            // An attempt a hedge left in flight, or one already left.
            return match s.earlier.iter().any(|e| e.key == key) {
                true => {
                    if s.upstream_spans.is_some() {
                        self.span_heard(stream, key, &what);
                    }
                    self.on_earlier(stream, key, what)
                }
                false => self.stale(key, what),
            };
        }
        // A stream waiting out a retry's back-off left its last attempt:
        // what that attempt's upstream had already delivered is stale (its
        // body's window still goes back).
        if s.between_attempts() {
            return self.stale(key, what);
        }
        if s.upstream_spans.is_some() {
            self.span_heard(stream, key, &what);
        }
        let failed = match what {
            Delivered::Event(ev) => {
                self.on_upstream(stream, ev);
                None
            }
            Delivered::Retry => self.retry_open(stream).err(),
            Delivered::ConnectFailed => Some(LocalReply::ConnectFailure),
            Delivered::ConnectionLost => {
                self.connection_lost(stream);
                None
            }
            Delivered::Resume(_) | Delivered::OverloadReset => None,
        };
        if let Some(reply) = failed {
            self.fail(stream, reply);
        }
    }

    /// What came for an attempt already left: a body's window goes back.
    fn stale(&mut self, key: u32, what: Delivered) {
        if let Delivered::Event(ev) = what {
            self.give_back(key, ev);
        }
    }

    /// Forgets the streams finished before this turn's deliveries.
    fn bury(&mut self) {
        self.graveyard.clear();
    }

    /// Ends every stream (the connection is over) and leaves the shard's
    /// inbox, giving back what was still in it.
    pub fn close(&mut self) {
        let ids: Vec<u32> = self.table.keys().copied().collect();
        for id in ids {
            self.finish(id);
        }
        if let Some(mut left) = self.cx.wire.inboxes.close(self.cx.inbox) {
            self.on_inbox(&mut left);
        }
        self.bury();
        self.flush_upstreams();
    }

    /// Ends streams whose route timeout, stream idle timeout or
    /// `max_stream_duration` passed; retries those whose attempt passed
    /// its `per_try_timeout` or whose back-off is over.
    pub fn expire(&mut self, now: Instant) {
        // `stream_idle_timeout` as `reduce_timeouts` leaves it while it
        // acts (looked up once per scan): from the stream's last activity,
        // as Envoy's scaled timer runs from when it was armed.
        let scaled = self.cx.scaled_timer(Timer::StreamIdle);
        let idle = |d: Duration| scaled.map_or(d, |(t, level)| t.scale(d, level));
        let due: Vec<(u32, Expired)> = self
            .table
            .iter()
            .filter_map(|(&id, s)| {
                if s.ends_at.is_some_and(|t| now >= t) {
                    Some((id, Expired::Duration))
                } else if s.request_ends.is_some_and(|t| now >= t) {
                    Some((id, Expired::Request))
                } else if s.deadline.is_some_and(|d| now >= d) {
                    Some((id, Expired::Route))
                } else if s.try_ends.is_some_and(|t| now >= t) {
                    Some((id, Expired::Try))
                } else if s.try_idle_at.is_some_and(|t| now >= t) {
                    Some((id, Expired::TryIdle))
                } else if s
                    .retries
                    .as_ref()
                    .and_then(|r| r.at)
                    .is_some_and(|t| now >= t)
                {
                    Some((id, Expired::BackOff))
                } else if s.idle.is_some_and(|d| now >= s.active_at + idle(d)) {
                    Some((id, Expired::Idle))
                } else {
                    None
                }
            })
            .collect();
        for (id, why) in due {
            match why {
                Expired::Duration => self.lived_out(id),
                Expired::Request => self.request_timed_out(id),
                Expired::Route => self.timed_out(id),
                Expired::BackOff => self.retry_now(id),
                Expired::Try => self.try_timed_out(id),
                Expired::TryIdle => self.try_idled_out(id),
                Expired::Idle => self.idled_out(id),
            }
        }
    }

    /// The route timeout passed.
    pub(super) fn timed_out(&mut self, stream: u32) {
        let Some(s) = self.table.get(&stream) else {
            return;
        };
        let stats = &self.cx.wire.shard.stats;
        stats.downstream.rq_timeout.inc();
        // Between attempts, the last host's outcome is counted already.
        if let Some(t) = s.target.as_ref().filter(|_| !s.between_attempts()) {
            stats.hosts.host(t.host).rq_timeout.inc();
        }
        // The cluster's, once per request (Envoy's `upstream_rq_timeout`).
        let pool = s.target.as_ref().map(|t| &t.pool);
        let pool = pool.or_else(|| s.earlier.first().map(|e| &e.target.pool));
        if let Some(pool) = pool {
            pool.borrow().cluster_stats.upstream_rq_timeout.inc();
        }
        // So is each attempt a hedge left (as Envoy counts them).
        for e in &s.earlier {
            stats.hosts.host(e.target.host).rq_timeout.inc();
        }
        self.fail(stream, LocalReply::UpstreamTimeout);
    }

    /// The stream lived its `max_stream_duration`.
    pub(super) fn lived_out(&mut self, stream: u32) {
        let stats = &self.cx.wire.shard.stats.downstream;
        stats.rq_max_duration_reached.inc();
        self.fail(stream, LocalReply::MaxDurationTimeout);
    }

    /// The request was not in whole within `request_timeout`.
    pub(super) fn request_timed_out(&mut self, stream: u32) {
        let stats = &self.cx.wire.shard.stats.downstream;
        stats.rq_request_timeout.inc();
        self.fail(stream, LocalReply::RequestTimeout);
    }

    /// Nothing moved on the stream for its stream idle timeout.
    pub(super) fn idled_out(&mut self, stream: u32) {
        self.cx.wire.shard.stats.downstream.rq_idle_timeout.inc();
        self.fail(stream, LocalReply::StreamIdleTimeout);
    }
}
