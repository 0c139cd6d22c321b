//! The request phases of one proxied stream, in order, and where the HTTP filters run in them: this file reads top to bottom as a stream lives.
//!
//! ```text
//!  1. request headers   on_request: the connection manager's edits (path, host,
//!                       client, x-request-id, via: streams/stamp.rs), the route
//!                       (virtual host by :authority, first matching route:
//!                       streams/setup.rs), then every filter's on_request_headers in
//!                       order, the router last (cluster, host, the route's request
//!                       header edits, or a redirect / direct response: http_filter::router);
//!                       a filter may answer (→ local reply) or pause (→ resume);
//!                       the overload manager may refuse it (streams/overload.rs)
//!  2. open upstream     open_deferred, at the end of the read: a stream on the host's
//!                       pool (streams/upstream.rs); a refused one is resent
//!  3. request body      on_request_data, on_request_trailers: filters in order,
//!                       then queued upstream
//!  4. response headers  on_response_head: the route's header edits, filters in
//!                       reverse, the connection manager's (server, via,
//!                       x-request-id), then downstream
//!  5. response body     on_response_data, on_response_trailers: filters in reverse,
//!                       then queued downstream; bodies cross in streams/forward.rs
//!  6. finish            every filter's on_log, the stats, the outcome for outlier
//!                       detection, the access log lines
//!  local replies        reply (streams/local_reply.rs): local_reply_config, then the
//!                       route's header edits and the response filters run on them
//!                       as on any response
//! ```
//!
//! A stream is a record in its connection's table, not a task. A body
//! chunk is released on the side it came from only once the other side's
//! windows took it, so a client that stops reading stops its own upstream
//! stream and nothing else.

use std::collections::hash_map::Entry;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use engine::headers::is_grpc_content_type;
use engine::outlier::CallResult;
use engine::retry::AttemptEnd;
use h2wire::conn::ClientEvent;
use h2wire::message::HeaderList;
use h2wire::ErrorCode;

mod hold;

use super::local_reply::host_result;
use super::reply::{grpc_status, status_of};
use super::upgrade::keep_to_http;
use super::upstream::idempotent;
use super::{enqueue, reply, upstream, ConnCx, Streams};
use crate::http_filter::chain::{self, Reached};
use crate::http_filter::{HeaderEdits, Reply, RequestHead, ResponseHead, Trailers};
use crate::local_reply::LocalReply;
use crate::stats::HostCounter;
use crate::wire::body::{owned, queued, Item};
use crate::wire::codec::DownCodec;
use crate::wire::dstream::{DStream, Target};
use crate::wire::pool::PoolRef;

/// Attempts per request when upstreams refuse streams before processing
/// them.
const MAX_ATTEMPTS: u8 = 3;

impl Streams {
    /// Phase 1, a new request: its record, its route, then its filters
    /// (the router last). Local replies go out at once; a stream that
    /// reached the router is opened upstream at the end of this read
    /// (`open_deferred`), so one the client resets in the same read never
    /// goes upstream and a rapid-reset flood reaches no backend.
    pub(super) fn on_request(&mut self, stream: u32, head: HeaderList, end_stream: bool) {
        let now = self.now;
        let stats = &self.cx.wire.shard.stats.downstream;
        stats.rq_total.inc();
        if self.conn.is_h1() {
            stats.rq_http1_total.inc();
        }
        stats.rq_active.inc();
        if let Some(h) = &self.cx.http {
            let h = &h.stats;
            h.downstream_rq_total.inc();
            h.downstream_rq_active.inc();
            match self.conn.is_h1() {
                true => h.downstream_rq_http1_total.inc(),
                false => h.downstream_rq_http2_total.inc(),
            }
        }
        self.requests = self.requests.saturating_add(1);
        let snap = self.cx.wire.shard.snapshot();
        let grpc = head.get(b"content-type").is_some_and(is_grpc_content_type);
        // Built where it stays: a stream's record is large, and moving it
        // per request shows in the profile.
        let s = match self.table.entry(stream) {
            Entry::Vacant(v) => v.insert(DStream::new(snap, grpc, end_stream, now)),
            // The codecs never repeat a stream id.
            Entry::Occupied(_) => {
                stats.rq_active.dec();
                if let Some(h) = &self.cx.http {
                    h.stats.downstream_rq_active.dec();
                }
                return self.conn.recycle(head);
            }
        };
        let mut head = head;
        // The connection manager's edits and the route (`streams/setup.rs`).
        // An HTTP/2 request with `upgrade` is an extended CONNECT (the
        // codec made it one): its tunnel is the stream's body.
        let in_stream = match self.conn.is_h1() {
            // `:method` first (it leads the list): only a GET may be an
            // extended CONNECT the codec rewrote.
            false => match head.pseudo(b":method") {
                Some(b"CONNECT") => Some(Box::from(&b"CONNECT"[..])),
                Some(b"GET") => head.pseudo(b":protocol").map(Box::<[u8]>::from),
                _ => None,
            },
            true => None,
        };
        let upgrade = self.conn.upgrade_asked().or(in_stream.as_deref());
        let asked = upgrade.is_some();
        let ask = (grpc, upgrade, in_stream.is_some());
        let refused = self.cx.set_up(s, &mut head, ask, now).err();
        if asked && !s.upgrade {
            keep_to_http(&mut self.conn);
        }
        s.head = Some(head);
        if let Some(reply) = refused {
            return self.fail_with(stream, *reply, None);
        }
        if let Some(reply) = self.overloaded() {
            return self.fail_with(stream, reply, None);
        }
        self.admit(stream, 0, true, None);
    }

    /// The request filters from `from` on, the router last, then what
    /// they decided: upstream (now, or deferred to the end of the read),
    /// a local reply, or a pause. With `gathered` (the body's start, and
    /// whether it is whole), filter `from` paused for it and gets it
    /// first.
    pub(super) fn admit(
        &mut self,
        stream: u32,
        from: usize,
        defer: bool,
        gathered: Option<(Bytes, bool)>,
    ) {
        let now = self.now;
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        let Some(head) = s.head.take() else {
            return self.fail(stream, LocalReply::BadRequest);
        };
        let mut edits = s.edits.take().map_or_else(HeaderEdits::default, |e| *e);
        let mut target = None;
        let mut ticket = None;
        let mut gather = None;
        let mut overflow = false;
        let mut count_sizes = false;
        let wire = &self.cx.wire;
        let end_stream = s.bodyless;
        let reached = self.cx.filters(s, stream, now, true, |filters, cx| {
            let mut rh = RequestHead {
                list: &head,
                edits: &mut edits,
                end_stream,
            };
            let reached = match gathered {
                Some((body, whole)) => {
                    chain::request_body_gathered(filters, from, cx, &mut rh, body, whole)
                }
                None => chain::request_headers(filters, from, cx, &mut rh),
            };
            ticket = cx.paused;
            gather = cx.gather;
            count_sizes = cx.count_sizes;
            if let (Reached::Router, Some(pick)) = (&reached, cx.pick) {
                // Counted in flight at once: the next pick (least request)
                // sees it. Within the cluster's circuit breakers
                // (`max_connection_pools`, `max_requests`).
                let client = (self.cx.peer, self.cx.local, &*self.cx.tlvs);
                match wire.pool_for(pick.host, pick.cluster, client) {
                    Some(pool) if pool.borrow().budget.try_request() => {
                        pool.borrow_mut().in_flight += 1;
                        target = Some(Target {
                            host: pick.host.id,
                            pool,
                        });
                    }
                    pool => {
                        let h = wire.shard.stats.hosts.host(pick.host.id);
                        h.rq_pending_overflow.inc();
                        if let Some(pool) = pool {
                            let p = pool.borrow();
                            p.cluster_stats.upstream_rq_pending_overflow.inc();
                        }
                        overflow = true;
                    }
                }
            }
            reached
        });
        s.head = Some(head);
        s.edits = (!edits.is_empty()).then(|| Box::new(edits));
        if count_sizes && s.log.is_none() {
            // Counted where an access log's are.
            s.log = Some(crate::wire::logging::LogState::counting(now));
        }
        // A filter that kept state (the router's generated hash cookie)
        // has a response hook to run, even in a router-only chain.
        s.filtered |= s.states.is_some();
        // No chain (the connection's is gone from every config): as
        // Envoy, a request it can no longer route gets 404.
        let reached = reached.unwrap_or(Reached::Reply(Reply::from(LocalReply::NoRoute)));
        let reply = match (reached, target, ticket) {
            (Reached::Router, Some(t), _) => {
                s.target = Some(t);
                // The route timeout runs from the end of the request as
                // the router sees it (Envoy's): a filter's pause before
                // it does not count.
                // (An upgrade has none, as in Envoy.)
                let (upgrade, mirrored) = (s.upgrade, s.mirrored);
                let retry_policy = s.retry_policy && !s.req.is_empty();
                if s.bodyless && !upgrade {
                    s.req_end = Some(now);
                    s.deadline = s.timeout.map(|t| now + t);
                }
                if !s.req.is_empty()
                    && (s.filtered || s.route_edits || s.retry_policy)
                    && self.filter_held_body(stream).is_err()
                {
                    return;
                }
                if mirrored {
                    // Its copies start from the head as it goes upstream.
                    self.tap_mirrors(stream);
                }
                if retry_policy {
                    self.keep_held_for_retry(stream);
                }
                let Some(s) = self.table.get_mut(&stream) else {
                    return;
                };
                if !s.filtered && !s.route_edits && !s.retry_policy {
                    // Only the router ran: nothing needs the config again.
                    s.snap = None;
                }
                if upgrade && self.conn.is_h1() {
                    // On a connection of its own, which the connection's
                    // task makes (`wire::upgrade`). An HTTP/2 stream's
                    // upgrade is a stream on the pool's connection, which
                    // then closes with it (`UpCodec::send_upgrade_stream`).
                    self.upgrading = Some(stream);
                } else if defer {
                    self.to_open.push(stream);
                } else {
                    self.open_upstream(stream);
                }
                return;
            }
            (Reached::Pause { at }, _, Some(ticket)) => {
                s.paused = u32::try_from(at).ok().map(|at| (at, ticket));
                if let Some(limit) = gather {
                    self.start_gather(stream, limit);
                }
                return;
            }
            // A filter that pauses must ask for the handle that resumes:
            // without it the stream would hang.
            (Reached::Pause { .. }, _, None) => Reply::new(500, "", "DPE"),
            (Reached::Router, None, _) if overflow => Reply::from(LocalReply::Overflow),
            (Reached::Router, None, _) => Reply::from(LocalReply::NoRoute),
            (Reached::Reply(r), _, _) => r,
        };
        if let Some(s) = self.table.remove(&stream) {
            if s.upgrade {
                // A filter answered an upgrade.
                keep_to_http(&mut self.conn);
            }
            self.reply_new(stream, s, reply);
        }
    }

    /// Phase 2: opens the upstream streams of this read's new requests
    /// that are still there (not reset by the client meanwhile).
    pub(super) fn open_deferred(&mut self) {
        if self.to_open.is_empty() {
            return;
        }
        let mut ids = std::mem::take(&mut self.to_open);
        for id in ids.drain(..) {
            self.open_upstream(id);
        }
        // Back in place, keeping its allocation.
        self.to_open = ids;
    }

    /// Phase 2, on the host's pool; a connection that cannot be had fails
    /// the stream.
    pub(super) fn open_upstream(&mut self, stream: u32) {
        if let Err(reply) = self.try_open(stream) {
            self.fail(stream, reply);
        }
    }

    /// Phase 3: a chunk of the request body, through the filters, queued
    /// upstream.
    pub(super) fn on_request_data(&mut self, stream: u32, mut data: Bytes, end_stream: bool) {
        let now = self.now;
        let Some(s) = self.table.get_mut(&stream) else {
            return self.conn.release(stream, data.len() as u32);
        };
        s.active_at = now;
        if end_stream {
            s.request_ends = None;
            s.req_end.get_or_insert(now);
        }
        let len = data.len();
        // The client's bytes as they came (a retry's replay is not more).
        if let Some(l) = s.log.as_mut() {
            l.bytes_received += len as u64;
        }
        // Before the router (a filter paused the stream) chunks wait as
        // they came; they go through the body hooks once the chain passes
        // the router (`filter_held_body`), after every head hook.
        if let Some(g) = s.gather.as_mut() {
            // A filter waits for the body: the client's window goes back
            // at once (the wait is bounded by the filter's limit).
            g.buf.extend_from_slice(&data);
            g.fin |= end_stream;
            self.cx.charge(stream, s);
            self.conn.release(stream, len as u32);
            return self.check_gathered(stream);
        }
        let answer = match s.target {
            Some(_) => self
                .cx
                .filters(s, stream, now, false, |f, cx| {
                    chain::request_body(f, cx, &mut data, end_stream)
                })
                .flatten(),
            None => None,
        };
        if let Some(r) = answer {
            self.conn.release(stream, len as u32);
            return self.fail_with(stream, r, None);
        }
        self.queue_request_data(stream, data, end_stream, len as u32);
    }

    /// A request body chunk past the filters, queued upstream (and to the
    /// mirrors, and kept for a retry); `credit`: the client's bytes it
    /// releases once sent.
    fn queue_request_data(&mut self, stream: u32, data: Bytes, end: bool, credit: u32) {
        let Some(s) = self.table.get(&stream) else {
            return self.conn.release(stream, credit);
        };
        if s.mirror.is_some() {
            self.mirror_data(stream, &data, end);
        }
        let item = Item::Data { data, end, credit };
        self.keep_for_retry(stream, &item);
        let Some(s) = self.table.get_mut(&stream) else {
            // Ended by it (a pending retry that can no longer be made).
            return self.conn.release(stream, credit);
        };
        s.req.push_back(item);
        enqueue(&mut self.queued, s, stream);
    }

    /// Phase 3: the request's trailers, through the filters, queued
    /// upstream.
    pub(super) fn on_request_trailers(&mut self, stream: u32, fields: HeaderList) {
        let now = self.now;
        if let Some(g) = self.table.get_mut(&stream).and_then(|s| s.gather.as_mut()) {
            // The body ended: the filter waiting for it goes first.
            g.trailers = true;
            self.check_gathered(stream);
        }
        if let Some(s) = self.table.get_mut(&stream) {
            s.request_ends = None;
            s.req_end.get_or_insert(now);
            let mut trailers = owned(&fields);
            let (answer, last) = match s.target {
                Some(_) => self
                    .cx
                    .filters(s, stream, now, false, |f, cx| {
                        let answer = chain::request_trailers(f, cx, &mut trailers);
                        (answer, cx.before_trailers.take())
                    })
                    .unwrap_or_default(),
                None => (None, None),
            };
            match answer {
                Some(r) => self.fail_with(stream, r, None),
                None => {
                    if let Some(data) = last {
                        self.queue_request_data(stream, data, false, 0);
                    }
                    let Some(s) = self.table.get_mut(&stream) else {
                        return self.conn.recycle(fields);
                    };
                    if s.mirror.is_some() {
                        self.mirror_trailers(stream, &trailers);
                    }
                    let item = Item::Trailers(trailers);
                    self.keep_for_retry(stream, &item);
                    if let Some(s) = self.table.get_mut(&stream) {
                        s.req.push_back(item);
                        enqueue(&mut self.queued, s, stream);
                    }
                }
            }
        }
        self.conn.recycle(fields);
    }

    /// What an upstream connection delivered for the stream: phases 4
    /// and 5, or the upstream side's turns (a refusal, a lost connection).
    pub(super) fn on_upstream(&mut self, stream: u32, ev: ClientEvent) {
        let now = self.now;
        // One lookup of the stream for all that follows: the phases below
        // take it apart from the connection's parts they use.
        let Streams {
            cx,
            conn,
            table,
            queued,
            head_edits,
            touched,
            ..
        } = self;
        let Some(s) = table.get_mut(&stream) else {
            return self.give_back(stream, ev);
        };
        s.active_at = now;
        // Its answer moved: the attempt's per-try idle timeout starts over,
        // or ends with the answer.
        if let (Some(_), Some(d)) = (s.try_idle_at, s.try_idle) {
            match &ev {
                ClientEvent::Response { end_stream, .. } | ClientEvent::Data { end_stream, .. } => {
                    s.try_idle_at = (!end_stream).then(|| now + d);
                }
                ClientEvent::Trailers { .. } => s.try_idle_at = None,
                _ => {}
            }
        }
        let mut p = Parts {
            cx,
            conn,
            queued,
            head_edits,
            touched,
            now,
        };
        // Header lists go back to the connection they came from: it
        // decodes the next response into one without allocating.
        let from = s.target.as_ref().map(|t| Rc::clone(&t.pool)).zip(s.up);
        let ends = matches!(
            ev,
            ClientEvent::Response {
                end_stream: true,
                ..
            } | ClientEvent::Data {
                end_stream: true,
                ..
            } | ClientEvent::Trailers { .. }
        );
        let then = match ev {
            ClientEvent::Response {
                head,
                informational,
                end_stream,
                ..
            } => {
                // 1xx heads are not forwarded (as Envoy by default).
                let then = match informational {
                    false => on_response_head(&mut p, s, stream, &head, end_stream),
                    true => Then::Go,
                };
                upstream::recycle(from, head);
                then
            }
            ClientEvent::Data {
                data, end_stream, ..
            } => on_response_data(&mut p, s, stream, data, end_stream),
            ClientEvent::Trailers { fields, .. } => {
                let then = on_response_trailers(&mut p, s, stream, &fields);
                upstream::recycle(from, fields);
                then
            }
            ClientEvent::Reset { code, .. } => {
                // Refused before processing (RST_STREAM REFUSED_STREAM, or
                // above an upstream GOAWAY's last stream): safe to resend
                // while no body byte went (the head is kept until then).
                let resend = !s.resp_started
                    && code == ErrorCode::REFUSED_STREAM
                    && s.can_resend()
                    && s.attempts < MAX_ATTEMPTS;
                // Resent as long as it may be; then a refusal the route's
                // retry policy names goes again on a newly picked host
                // (`fail`).
                let resent = resend.then_some::<HostCounter>(|h| &h.rq_retry_refused);
                let failed = match code {
                    ErrorCode::REFUSED_STREAM => LocalReply::UpstreamRefusedStream,
                    _ => LocalReply::UpstreamReset,
                };
                return self.resend_or_fail(stream, resent, failed);
            }
            ClientEvent::TooLarge { .. } | ClientEvent::Broken { .. } => {
                Then::Fail(LocalReply::UpstreamProtocolError)
            }
            ClientEvent::WindowOpen { .. }
            | ClientEvent::StreamLimit { .. }
            | ClientEvent::GoAway { .. } => Then::Go,
        };
        // The upstream's answer is whole (and kept, not retried): Envoy's
        // `upstream_rq_time` ends here, not when the client has read it.
        if ends && matches!(then, Then::Go | Then::Finish) {
            s.resp_end = Some(now);
        }
        // An answer went out: the attempt a hedge left is of no more use
        // (Envoy resets the other attempts then).
        if s.resp_started && !s.earlier.is_empty() {
            self.drop_all_earlier(stream);
        }
        match then {
            Then::Go => {}
            Then::Finish => self.finish(stream),
            Then::Fail(reply) => self.fail(stream, reply),
            Then::Refuse(reply) => self.fail_with(stream, reply, None),
            Then::Retry(pool, result) => self.leave_attempt(stream, &pool, result, true),
            Then::Yield(result) => {
                self.yield_to_earlier(stream, Some(result), true);
            }
        }
    }

    /// The upstream connection died under the stream. An idempotent
    /// bodiless request that has no response yet is retried once on
    /// another connection (Envoy's `reset` retry, without a policy), as
    /// is a tunnel not yet answered (its bytes wait for the answer: none
    /// went; a kept-alive connection the host closed as the upgrade was
    /// written loses nothing); anything else fails (Envoy's connection
    /// termination).
    pub(super) fn connection_lost(&mut self, stream: u32) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        let retry = !s.resp_started
            && !s.retried_lost
            && s.head
                .as_ref()
                .is_some_and(|h| s.upgrade || (s.bodyless && idempotent(h.get(b":method"))));
        s.retried_lost |= retry;
        let resent = retry.then_some::<HostCounter>(|h| &h.rq_retry_conn_lost);
        self.resend_or_fail(stream, resent, LocalReply::UpstreamConnectionTermination);
    }

    /// Sends the stream again on a new upstream stream, counted by
    /// `resent`'s counter, or (`None`) fails it with `failed`.
    fn resend_or_fail(&mut self, stream: u32, mut resent: Option<HostCounter>, failed: LocalReply) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        let Some(host) = s.target.as_ref() else {
            return;
        };
        let host_stats = self.cx.wire.shard.stats.hosts.host(host.host);
        // A retry within the cluster's `max_retries` (one held per stream
        // from its first resend on).
        if resent.is_some() && !s.retry_slot {
            s.retry_slot = host.pool.borrow().budget.try_retry();
            if !s.retry_slot {
                host_stats.rq_retry_overflow.inc();
                let p = host.pool.borrow();
                p.cluster_stats.upstream_rq_retry_overflow.inc();
                resent = None;
            }
        }
        match resent {
            Some(counter) => {
                counter(host_stats).inc();
                self.detach_upstream(stream);
                self.open_upstream(stream);
            }
            None => {
                host_stats.rq_reset.inc();
                self.fail(stream, failed);
            }
        }
    }

    /// Ends a stream that failed in the gateway's own way.
    pub(super) fn fail(&mut self, stream: u32, reply: LocalReply) {
        // An attempt the route's retry policy takes again.
        let end = match reply {
            LocalReply::ConnectFailure => Some(AttemptEnd::ConnectFailure),
            LocalReply::UpstreamReset
            | LocalReply::UpstreamConnectionTermination
            | LocalReply::UpstreamProtocolError => Some(AttemptEnd::Reset),
            LocalReply::UpstreamRefusedStream => Some(AttemptEnd::RefusedStream),
            _ => None,
        };
        if let Some(end) = end {
            // Another attempt, else the one a hedge left answers.
            if self.retry_after(stream, end, self.now)
                || self.yield_to_earlier(stream, host_result(reply), false)
            {
                return;
            }
        } else if reply == LocalReply::Overflow && self.yield_to_earlier(stream, None, false) {
            // No room for the hedge: the attempts in flight answer.
            return;
        }
        let retries = self.table.get(&stream).and_then(|s| s.retries.as_deref());
        let (retried, spent) = retries.map_or((false, false), |r| (r.done > 0, r.spent));
        let retried = retried && end.is_some();
        let failure = super::local_reply::after_retries(reply, retried, spent && retried);
        self.fail_with(stream, failure, host_result(reply));
    }

    /// Phase 6: the stream is done on both connections.
    pub(super) fn finish(&mut self, stream: u32) {
        self.detach_upstream(stream);
        if let Some(s) = self.table.remove(&stream) {
            self.forget(stream, s);
        }
    }

    /// Phase 6 for a stream out of the table: its filters' `on_log`, what
    /// it held given back, the stats, the access log, the outcome for
    /// outlier detection.
    pub(super) fn forget(&mut self, stream: u32, mut s: DStream) {
        self.let_go_attempts(&mut s);
        let conn = &mut self.conn;
        self.cx.settle(stream, s, self.now, |s| {
            conn.release(stream, queued(&s.req));
            if let Some(head) = s.head.take() {
                conn.recycle(head);
            }
        });
    }
}

/// What the connection's streams lend a phase that works on one stream
/// taken apart from their table.
struct Parts<'a> {
    cx: &'a ConnCx,
    conn: &'a mut DownCodec,
    queued: &'a mut Vec<u32>,
    /// The connection's edits of response heads, emptied for each (their
    /// buffers kept: no allocation per response).
    head_edits: &'a mut HeaderEdits,
    /// Upstream connections given output this turn (a held body's
    /// window updates).
    touched: &'a mut Vec<(PoolRef, usize)>,
    now: Instant,
}

/// What a stream's phase leaves to do once the stream is given back.
enum Then {
    Go,
    Finish,
    Fail(LocalReply),
    /// A response filter answered: a local reply if no head went out
    /// yet, else a reset; not the host's fault.
    Refuse(Reply),
    /// The route's retry policy takes the attempt again: it is left (its
    /// host's outlier detection counts the result) and the stream waits.
    Retry(PoolRef, CallResult),
    /// An answer the policy would retry, with no retry left: it is
    /// dropped for the attempt a hedge left in flight.
    Yield(CallResult),
}

/// Phase 4: the upstream's response head, through the filters in reverse,
/// downstream.
fn on_response_head(
    p: &mut Parts<'_>,
    s: &mut DStream,
    stream: u32,
    head: &HeaderList,
    end_stream: bool,
) -> Then {
    let shard = &p.cx.wire.shard;
    let status = status_of(head);
    // The host answered, whatever the filters make of it: its status is
    // what outlier detection and its counters see.
    s.served = Some((status, grpc_status(head)));
    s.try_ends = None;
    if let Some(t) = &s.target {
        let host = shard.stats.hosts.host(t.host);
        host.responses.record(status);
        if head.get(b"x-envoy-immediate-health-check-fail").is_some() {
            // The control shard's checker takes it from here.
            host.rq_immediate_hc_fail.inc();
            shard.stats.immediate_hc_fail.inc();
        }
    }
    let grpc_status = s.served.and_then(|(_, g)| g);
    // Most answers cannot be retried whatever the policy: no config
    // lookup for them.
    let retriable = status >= 500 || status == 409 || grpc_status.is_some() || s.retry_any_status;
    if s.retry_policy && (retriable || s.retries.is_some()) {
        let end = p.cx.answer_end(s, head, status, grpc_status);
        if let Some((pool, result)) = p.cx.retry_decision(s, Some(end), p.now) {
            return Then::Retry(pool, result);
        }
        if !s.earlier.is_empty() && p.cx.retry_policy(s).is_some_and(|r| r.retries(end)) {
            // The attempt a hedge left may still answer well (Envoy's).
            return Then::Yield(s.answered(status, grpc_status));
        }
        let retried = s.retries.as_ref().is_some_and(|r| !r.first_answers);
        if retried && p.cx.retry_policy(s).is_some_and(|r| !r.retries(end)) {
            shard.stats.rq_retry_success.inc();
            if let Some(t) = &s.target {
                t.pool
                    .borrow()
                    .cluster_stats
                    .upstream_rq_retry_success
                    .inc();
            }
        }
        if s.retries.as_ref().is_some_and(|r| r.spent) {
            // The answer passed on is one retries ran out on (Envoy's URX).
            s.flag = "URX";
            if let Some(l) = s.log.as_mut() {
                l.flags = s.flag;
            }
        }
    }
    let edits = &mut *p.head_edits;
    edits.clear();
    if s.count_attempts.1 {
        let mut digits = [0u8; 40];
        let n = upstream::decimal(s.attempt().into(), &mut digits);
        let _ = edits.set(upstream::ATTEMPT_COUNT, n);
    }
    p.cx.route_response_edits(s, Some(head), status, edits);
    let (answer, held) =
        p.cx.filters(s, stream, p.now, false, |f, cx| {
            let mut rh = ResponseHead {
                status,
                list: Some(head),
                edits: &mut *edits,
                end_stream,
                local_body: None,
            };
            (chain::response_headers(f, cx, &mut rh), cx.hold)
        })
        .unwrap_or_default();
    if let Some(reply) = answer {
        // No byte of the head went out: the client gets the filter's reply.
        return Then::Refuse(reply);
    }
    p.cx.stamp
        .response(Some(head), edits, s.request_id.as_deref());
    s.resp_started = true;
    // No attempt follows an answer that began: its body need not be kept.
    s.replay = None;
    s.request_ends = None;
    if held && !end_stream {
        // A filter holds it to its end (`hold.rs`).
        hold::hold(s, status, head, edits);
        return Then::Go;
    }
    if let Some(l) = s.log.as_mut() {
        l.on_response(&p.cx.logs, status, Some(head));
    }
    s.status = Some(status);
    shard.stats.downstream.responses.record(status);
    if let Some(h) = s.head.take() {
        p.conn.recycle(h);
    }
    let fields = edits.apply(reply::response_fields(head));
    let sent = p.conn.send_headers(stream, status, fields, end_stream);
    if sent.is_err() || end_stream {
        return Then::Finish;
    }
    Then::Go
}

/// Phase 5: a chunk of the response body, through the filters in reverse,
/// queued downstream.
fn on_response_data(
    p: &mut Parts<'_>,
    s: &mut DStream,
    stream: u32,
    mut data: Bytes,
    end_stream: bool,
) -> Then {
    let len = data.len() as u32;
    let answer =
        p.cx.filters(s, stream, p.now, false, |f, cx| {
            chain::response_body(f, cx, &mut data, end_stream)
        })
        .flatten();
    if let Some(reply) = answer {
        // The chunk goes no further: its bytes are released upstream here,
        // or the upstream connection's window would shrink for good.
        if let (Some(t), Some(up)) = (&s.target, s.up) {
            if let Some(c) = t.pool.borrow_mut().conn(up) {
                c.release(up.stream, len);
            }
        }
        if s.held.is_some() {
            return hold::refuse(s, reply);
        }
        return Then::Refuse(reply);
    }
    if s.held.is_some() {
        return hold::held_data(p, s, stream, &data, len, end_stream);
    }
    s.resp.push_back(Item::Data {
        data,
        end: end_stream,
        credit: len,
    });
    enqueue(p.queued, s, stream);
    Then::Go
}

/// Phase 5: the response's trailers, through the filters in reverse,
/// queued downstream.
fn on_response_trailers(
    p: &mut Parts<'_>,
    s: &mut DStream,
    stream: u32,
    fields: &HeaderList,
) -> Then {
    if let (Some(served), Some(g)) = (s.served.as_mut(), grpc_status(fields)) {
        served.1 = Some(g);
    }
    let mut trailers: Trailers = owned(fields);
    let (answer, last) =
        p.cx.filters(s, stream, p.now, false, |f, cx| {
            let answer = chain::response_trailers(f, cx, &mut trailers);
            (answer, cx.before_trailers.take())
        })
        .unwrap_or_default();
    if let Some(reply) = answer {
        if s.held.is_some() {
            return hold::refuse(s, reply);
        }
        return Then::Refuse(reply);
    }
    if s.held.is_some() {
        if let Some(data) = last {
            return hold::held_data(p, s, stream, &data, 0, true);
        }
        return hold::release(p, s, stream);
    }
    if let Some(data) = last {
        s.resp.push_back(Item::Data {
            data,
            end: false,
            credit: 0,
        });
    }
    s.resp.push_back(Item::Trailers(trailers));
    enqueue(p.queued, s, stream);
    Then::Go
}
