//! The request phases of one proxied stream, run by its downstream connection's task as events arrive: route and pick ([`super::route`]), open upstream, forward ([`super::forward`]), finish.
//!
//! The phases (route by `:authority` and path;
//! cluster, weighted pick and host; upstream stream from the host's pool
//! with hop-by-hop headers stripped and `x-forwarded-for` appended; bodies
//! forwarded under both sides' flow control; local replies as Envoy makes
//! them), but a stream is a record in its connection's table, not a task.
//! A body chunk is released on the side it came from only once the other
//! side's windows took it, so a client that stops reading stops its own
//! upstream stream and nothing else.

use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use engine::headers::{
    append_forwarded_for, http_to_grpc_status, is_grpc_content_type, is_hop_by_hop, keep_te,
};
use engine::outlier::{grpc_to_http, CallResult};
use engine::route::{rewrite_path, RequestView};
use engine::HostId;
use h2wire::conn::ClientEvent;
use h2wire::message::HeaderList;
use h2wire::ErrorCode;
use http::header::{HeaderName, HeaderValue};

use super::enqueue;
use super::Streams;
use crate::local_reply::LocalReply;
use crate::stats::HostCounter;
use crate::wire::body::{owned, queued, Item, ItemQueue};
use crate::wire::dstream::DStream;
use crate::wire::inbox::Delivered;
use crate::wire::logging::{flag_of, LogState};
use crate::wire::pool::{Acquire, Pool, PoolRef, UpRef};
use crate::wire::route::{self, text, HeadView, Picked};

/// Attempts per request when upstreams refuse streams before processing
/// them.
const MAX_ATTEMPTS: u8 = 3;

/// Whether a request field goes upstream as it is: not a pseudo-header
/// (rebuilt), `host` (it is `:authority`), hop-by-hop, a `te` other than
/// `trailers`, or an `x-forwarded-for` we replace.
fn forwarded(name: &[u8], value: &[u8], replace_xff: bool) -> bool {
    if name.first() == Some(&b':') || name == b"host" {
        return false;
    }
    if name == b"te" {
        return keep_te(value);
    }
    if replace_xff && name == b"x-forwarded-for" {
        return false;
    }
    !is_hop_by_hop(name)
}

/// Methods RFC 9110 §9.2.2 calls idempotent: safe to send again when the
/// connection died before an answer.
fn idempotent(method: Option<&[u8]>) -> bool {
    matches!(
        method,
        Some(b"GET" | b"HEAD" | b"OPTIONS" | b"TRACE" | b"PUT" | b"DELETE")
    )
}

fn is_head(head: &HeaderList) -> bool {
    head.get(b":method") == Some(b"HEAD")
}

/// Regular response fields that go downstream (hop-by-hop stripped).
fn response_fields(head: &HeaderList) -> impl Iterator<Item = (&[u8], &[u8])> {
    head.iter()
        .filter(|(n, _, _)| n.first() != Some(&b':') && !is_hop_by_hop(n))
        .map(|(n, v, _)| (n, v))
}

/// Gives a header list back to the upstream connection it came from.
fn recycle_up(pool: &PoolRef, up: Option<UpRef>, list: HeaderList) {
    let Some(up) = up else { return };
    if let Some(conn) = pool.borrow_mut().conn(up) {
        conn.recycle(list);
    }
}

/// Response fields with the session header added: a `set-cookie` joins
/// the upstream's own cookies; a session header replaces any value the
/// upstream sent (Envoy's `setCopy`), so a client never reads a stale one.
fn with_session<'a>(
    fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    extra: Option<&'a (HeaderName, HeaderValue)>,
) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
    let extra = extra.map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()));
    let replace = extra.filter(|(n, _)| *n != b"set-cookie").map(|(n, _)| n);
    fields
        .filter(move |(n, _)| Some(*n) != replace)
        .chain(extra)
}

/// A numeric `grpc-status` field.
fn grpc_status(list: &HeaderList) -> Option<u32> {
    text(list.get(b"grpc-status"))?.trim().parse().ok()
}

fn status_of(head: &HeaderList) -> u16 {
    text(head.get(b":status"))
        .and_then(|s| s.parse().ok())
        .unwrap_or(502)
}

/// Writes the request head of `s` on connection `slot` of `pool`: the
/// upstream stream id, or `None` if the connection could not take it.
fn send_request(s: &DStream, pool: &mut Pool, slot: usize) -> Option<u32> {
    let head = s.head.as_ref()?;
    let get = |n: &[u8]| head.get(n).unwrap_or(b"");
    let authority = s
        .authority
        .as_deref()
        .or_else(|| head.get(b":authority"))
        .or_else(|| head.get(b"host"))
        .unwrap_or(b"");
    let path = s.path.as_deref().unwrap_or_else(|| get(b":path"));
    let replace_xff = s.xff.is_some();
    // Cookies go out never indexed: they differ per client, and one
    // upstream connection carries many clients (RFC 7541 §7.1.3).
    let fields = head
        .iter()
        .filter(|(n, v, _)| forwarded(n, v, replace_xff))
        .map(|(n, v, never)| (n, v, never || n == b"cookie"))
        .chain(
            s.xff
                .as_deref()
                .map(|v| (&b"x-forwarded-for"[..], v, false)),
        );
    let scheme = pool.scheme();
    pool.conn_at(slot)?
        .send_request(get(b":method"), scheme, authority, path, fields, s.bodyless)
        .ok()
}

impl Streams {
    /// A new request: phase 1 (route) and 2 (pick, [`super::route`]), then
    /// its stream waits for phase 3 (open upstream) at the end of the read.
    pub(super) fn on_request(
        &mut self,
        stream: u32,
        head: HeaderList,
        end_stream: bool,
        now: Instant,
    ) {
        // Held apart from `self`, which local replies below borrow
        // mutably: one shard-local reference count per request.
        let wire = Rc::clone(&self.wire);
        let shard = &*wire.shard;
        let stats = &shard.stats.downstream;
        stats.rq_total.inc();
        if self.conn.is_h1() {
            stats.rq_http1_total.inc();
        }
        self.requests = self.requests.saturating_add(1);
        stats.rq_active.inc();
        let grpc = head.get(b"content-type").is_some_and(is_grpc_content_type);
        let snap = shard.snapshot();
        // The chain as the current snapshot has it (RDS may have changed
        // its routes), else as the connection opened under it.
        let hcm = match snap
            .listener(&self.listener.name)
            .and_then(|l| l.chain_at(self.chain_hint, self.chain))
            .or_else(|| self.listener.chain_at(self.chain_hint, self.chain))
        {
            Some(c) => &c.http,
            None => return self.reply_and_forget(stream, LocalReply::NoRoute, grpc, head, None),
        };
        let routed = match route::route(shard, hcm, &snap, &head) {
            Ok(r) => r,
            Err(reply) => return self.reply_and_forget(stream, reply, grpc, head, None),
        };
        let Picked {
            host,
            pool,
            session_header,
        } = match route::pick(&wire, &routed) {
            Ok(p) => p,
            Err(reply) => return self.reply_and_forget(stream, reply, grpc, head, None),
        };
        let route = routed.route;

        let path = route
            .action
            .prefix_rewrite
            .as_ref()
            .and_then(|_| rewrite_path(route, HeadView(&head).path()))
            .map(String::into_bytes);
        let authority = route
            .action
            .host_rewrite_literal
            .as_ref()
            .map(|h| h.as_bytes().to_vec());
        let xff = hcm.append_x_forwarded_for.then(|| {
            append_forwarded_for(text(head.get(b"x-forwarded-for")), self.peer.ip()).into_bytes()
        });
        let timeout = route.action.timeout;
        let idle = hcm.stream_idle_timeout;
        let log = (!self.logs.is_empty()).then(|| LogState::new(&self.logs, &head, now));
        let ends_at = hcm.max_stream_duration.map(|d| now + d);
        self.table.insert(
            stream,
            DStream {
                grpc,
                head: Some(head),
                path,
                authority,
                xff,
                bodyless: end_stream,
                retried_lost: false,
                host,
                pool,
                up: None,
                waiting: false,
                req: ItemQueue::default(),
                resp: ItemQueue::default(),
                queued: false,
                granted: 0,
                resp_started: false,
                attempts: 0,
                timeout,
                deadline: if end_stream {
                    timeout.map(|t| now + t)
                } else {
                    None
                },
                idle,
                ends_at,
                active_at: now,
                served: None,
                failed: None,
                session_header,
                log,
            },
        );
        // Opened at the end of this read's events (`open_deferred`): a
        // stream the client resets in the same read never goes upstream,
        // so a rapid-reset flood reaches no backend.
        self.to_open.push(stream);
    }

    /// Opens the upstream streams of this read's new requests that are
    /// still there (not reset by the client meanwhile).
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

    /// Opens the upstream stream from the kept head, or waits for room.
    fn open_upstream(&mut self, stream: u32) {
        let Some(pool) = self.table.get(&stream).map(|s| Rc::clone(&s.pool)) else {
            return;
        };
        let slot = match Pool::acquire(&pool, self.inbox, stream) {
            Acquire::Ready(slot) => slot,
            Acquire::Wait => {
                if let Some(s) = self.table.get_mut(&stream) {
                    s.waiting = true;
                }
                return;
            }
            Acquire::Failed => return self.fail(stream, LocalReply::ConnectFailure),
        };
        let sent = match self.table.get_mut(&stream) {
            Some(s) => {
                s.attempts += 1;
                send_request(s, &mut pool.borrow_mut(), slot)
            }
            None => return,
        };
        let Some(up_stream) = sent else {
            return self.fail(stream, LocalReply::ConnectFailure);
        };
        let up = pool.borrow_mut().route(slot, up_stream, self.inbox, stream);
        if let Some(s) = self.table.get_mut(&stream) {
            s.up = Some(up);
        }
        self.touch(&pool, slot);
    }

    pub(super) fn on_request_data(&mut self, stream: u32, data: Bytes, end_stream: bool) {
        match self.table.get_mut(&stream) {
            Some(s) => {
                s.active_at = self.now;
                s.req.push_back(Item::Data(data, end_stream));
                enqueue(&mut self.queued, s, stream);
            }
            None => self.conn.release(stream, data.len() as u32),
        }
    }

    pub(super) fn on_request_trailers(&mut self, stream: u32, fields: HeaderList) {
        if let Some(s) = self.table.get_mut(&stream) {
            s.req.push_back(Item::Trailers(owned(&fields)));
            enqueue(&mut self.queued, s, stream);
        }
        self.conn.recycle(fields);
    }

    /// What an upstream connection delivered for `stream`.
    pub(super) fn on_delivery(&mut self, stream: u32, what: Delivered) {
        // Each arm looks the stream up once (a finished stream's events
        // are given back by `on_upstream`; the others then do nothing).
        match what {
            Delivered::Event(ev) => self.on_upstream(stream, ev),
            Delivered::Retry => {
                if let Some(s) = self.table.get_mut(&stream) {
                    if s.waiting {
                        s.waiting = false;
                        self.open_upstream(stream);
                    }
                }
            }
            Delivered::ConnectFailed => self.fail(stream, LocalReply::ConnectFailure),
            Delivered::ConnectionLost => self.connection_lost(stream),
        }
    }

    /// The upstream connection died under the stream. An idempotent
    /// bodiless request that has no response yet is retried once on
    /// another connection (Envoy's `reset` retry, without a policy);
    /// anything else fails as an upstream reset.
    fn connection_lost(&mut self, stream: u32) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        let retry = !s.resp_started
            && s.bodyless
            && !s.retried_lost
            && s.head
                .as_ref()
                .is_some_and(|h| idempotent(h.get(b":method")));
        s.retried_lost |= retry;
        let host = s.host;
        self.resend_or_fail(stream, host, retry.then_some(|h| &h.rq_retry_conn_lost));
    }

    /// Sends the stream again on a new upstream stream, counted by
    /// `resent`'s counter, or (`None`) fails it as an upstream reset.
    fn resend_or_fail(&mut self, stream: u32, host: HostId, resent: Option<HostCounter>) {
        let host_stats = self.wire.shard.stats.hosts.host(host);
        match resent {
            Some(counter) => {
                counter(host_stats).inc();
                self.detach_upstream(stream);
                self.open_upstream(stream);
            }
            None => {
                host_stats.rq_reset.inc();
                self.fail(stream, LocalReply::UpstreamReset);
            }
        }
    }

    fn on_upstream(&mut self, stream: u32, ev: ClientEvent) {
        let shard = Rc::clone(&self.wire.shard);
        let Some(s) = self.table.get_mut(&stream) else {
            return self.give_back(stream, Delivered::Event(ev));
        };
        s.active_at = self.now;
        // Header lists go back to the connection they came from: it
        // decodes the next response into one without allocating.
        let (pool, up) = (Rc::clone(&s.pool), s.up);
        match ev {
            ClientEvent::Response {
                head,
                informational,
                end_stream,
                ..
            } => {
                // 1xx heads are not forwarded (as Envoy by default).
                if !informational {
                    let status = status_of(&head);
                    if let Some(l) = s.log.as_mut() {
                        l.on_response(&self.logs, status, Some(&head));
                    }
                    s.resp_started = true;
                    s.served = Some((status, grpc_status(&head)));
                    let host_stats = shard.stats.hosts.host(s.host);
                    host_stats.responses.record(status);
                    shard.stats.downstream.responses.record(status);
                    if let Some(h) = s.head.take() {
                        self.conn.recycle(h);
                    }
                    let extra = s.session_header.take();
                    if extra.is_some() {
                        shard.stats.session.session_set.inc();
                    }
                    let sent = self.conn.send_headers(
                        stream,
                        status,
                        with_session(response_fields(&head), extra.as_deref()),
                        end_stream,
                    );
                    if sent.is_err() || end_stream {
                        self.finish(stream);
                    }
                }
                recycle_up(&pool, up, head);
            }
            ClientEvent::Data {
                data, end_stream, ..
            } => {
                s.resp.push_back(Item::Data(data, end_stream));
                enqueue(&mut self.queued, s, stream);
            }
            ClientEvent::Trailers { fields, .. } => {
                if let (Some(served), Some(g)) = (s.served.as_mut(), grpc_status(&fields)) {
                    served.1 = Some(g);
                }
                s.resp.push_back(Item::Trailers(owned(&fields)));
                enqueue(&mut self.queued, s, stream);
                recycle_up(&pool, up, fields);
            }
            ClientEvent::Reset { code, .. } => {
                // Refused before processing (RST_STREAM REFUSED_STREAM, or
                // above an upstream GOAWAY's last stream): safe to resend
                // while no body byte went (the head is kept until then).
                let resend = !s.resp_started
                    && code == ErrorCode::REFUSED_STREAM
                    && s.head.is_some()
                    && s.attempts < MAX_ATTEMPTS;
                let host = s.host;
                self.resend_or_fail(stream, host, resend.then_some(|h| &h.rq_retry_refused));
            }
            ClientEvent::TooLarge { .. } => self.fail(stream, LocalReply::UpstreamReset),
            ClientEvent::WindowOpen { .. }
            | ClientEvent::StreamLimit { .. }
            | ClientEvent::GoAway { .. } => {}
        }
    }

    /// The route timeout passed.
    pub(super) fn timed_out(&mut self, stream: u32) {
        let Some(s) = self.table.get(&stream) else {
            return;
        };
        self.wire.shard.stats.downstream.rq_timeout.inc();
        self.wire.shard.stats.hosts.host(s.host).rq_timeout.inc();
        self.fail(stream, LocalReply::UpstreamTimeout);
    }

    /// The stream lived its `max_stream_duration`.
    pub(super) fn lived_out(&mut self, stream: u32) {
        self.wire
            .shard
            .stats
            .downstream
            .rq_max_duration_reached
            .inc();
        self.fail(stream, LocalReply::MaxDurationTimeout);
    }

    /// Nothing moved on the stream for its stream idle timeout.
    pub(super) fn idled_out(&mut self, stream: u32) {
        self.wire.shard.stats.downstream.rq_idle_timeout.inc();
        self.fail(stream, LocalReply::StreamIdleTimeout);
    }

    /// Ends a stream that failed: a local reply if no response head went
    /// out yet, else a reset.
    fn fail(&mut self, stream: u32, reply: LocalReply) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        if let Some(l) = s.log.as_mut() {
            l.flags = flag_of(reply);
            if !s.resp_started {
                let status = if s.grpc { 200 } else { reply.status().as_u16() };
                l.on_response(&self.logs, status, None);
                if !s.grpc {
                    l.bytes_sent += reply.body().len() as u64;
                }
            }
        }
        s.failed = match reply {
            LocalReply::UpstreamTimeout => Some(CallResult::Timeout),
            LocalReply::UpstreamReset => Some(CallResult::Reset),
            LocalReply::ConnectFailure => Some(CallResult::ConnectFailure),
            _ => None,
        };
        if s.resp_started {
            self.conn.reset(stream, ErrorCode::INTERNAL_ERROR);
        } else {
            let grpc = s.grpc;
            let head_only = s.head.as_ref().is_some_and(is_head);
            let extra = s.session_header.take();
            self.wire
                .shard
                .stats
                .hosts
                .host(s.host)
                .responses
                .record(reply.status().as_u16());
            if extra.is_some() {
                self.wire.shard.stats.session.session_set.inc();
            }
            self.local_reply(stream, reply, grpc, extra.as_deref(), head_only);
        }
        self.finish(stream);
    }

    /// A local reply for a stream that never reached a host.
    fn reply_and_forget(
        &mut self,
        stream: u32,
        reply: LocalReply,
        grpc: bool,
        head: HeaderList,
        extra: Option<&(HeaderName, HeaderValue)>,
    ) {
        let head_only = is_head(&head);
        if !self.logs.is_empty() {
            let mut l = LogState::new(&self.logs, &head, self.now);
            l.flags = flag_of(reply);
            let status = if grpc { 200 } else { reply.status().as_u16() };
            l.on_response(&self.logs, status, None);
            if !grpc && !head_only {
                l.bytes_sent += reply.body().len() as u64;
            }
            self.log(&l, None);
        }
        self.conn.recycle(head);
        self.local_reply(stream, reply, grpc, extra, head_only);
        self.wire.shard.stats.downstream.rq_active.dec();
    }

    /// Answers `stream` ourselves. For gRPC requests a trailers-only
    /// response (200 + `grpc-status`), so gRPC clients see a status. A
    /// HEAD request gets the head of the reply, without its body.
    fn local_reply(
        &mut self,
        stream: u32,
        reply: LocalReply,
        grpc: bool,
        extra: Option<&(HeaderName, HeaderValue)>,
        head_only: bool,
    ) {
        let extra = extra.map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()));
        let status = reply.status().as_u16();
        let body = reply.body();
        let stats = &self.wire.shard.stats.downstream;
        if grpc {
            let code = http_to_grpc_status(status).to_string();
            let mut fields = vec![
                (&b"content-type"[..], &b"application/grpc"[..]),
                (b"grpc-status", code.as_bytes()),
            ];
            if !body.is_empty() {
                fields.push((b"grpc-message", body.as_bytes()));
            }
            fields.extend(extra);
            let _ = self.conn.send_headers(stream, 200, fields, true);
            stats.responses.record(200);
            return;
        }
        stats.responses.record(status);
        if body.is_empty() {
            let _ = self.conn.send_headers(stream, status, extra, true);
            return;
        }
        let len = body.len().to_string();
        let fields = [
            (&b"content-type"[..], &b"text/plain"[..]),
            (b"content-length", len.as_bytes()),
        ]
        .into_iter()
        .chain(extra);
        if self
            .conn
            .send_headers(stream, status, fields, head_only)
            .is_ok()
            && !head_only
        {
            let mut data = Bytes::from_static(body.as_bytes());
            let _ = self.conn.send_data(stream, &mut data, true);
        }
    }

    /// Leaves the upstream stream (cancelling it if still open) and gives
    /// back what was held for it; the stream may open another.
    fn detach_upstream(&mut self, stream: u32) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        let pool = Rc::clone(&s.pool);
        if s.waiting {
            pool.borrow_mut().cancel_wait(self.inbox, stream);
            s.waiting = false;
        }
        let Some(up) = s.up.take() else {
            return;
        };
        self.granted -= std::mem::take(&mut s.granted);
        let resp_held = queued(&s.resp);
        s.resp.clear();
        let mut p = pool.borrow_mut();
        p.cancel(up, s.resp_started, resp_held);
        p.unroute(up);
        drop(p);
        self.touch(&pool, up.slot);
        self.graveyard.push((stream, pool, up));
    }

    /// The stream is done on both connections.
    pub(super) fn finish(&mut self, stream: u32) {
        self.detach_upstream(stream);
        let Some(s) = self.table.remove(&stream) else {
            return;
        };
        self.conn.release(stream, queued(&s.req));
        if let Some(head) = s.head {
            self.conn.recycle(head);
        }
        {
            let mut p = s.pool.borrow_mut();
            p.in_flight = p.in_flight.saturating_sub(1);
        }
        self.wire.shard.stats.downstream.rq_active.dec();
        self.wire.shard.stats.hosts.host(s.host).rq_active.dec();
        if let Some(l) = &s.log {
            let p = s.pool.borrow();
            self.log(l, Some((p.addr, p.cluster_name())));
        }
        // A client that went away is not the host's fault; the status it
        // had answered by then still counts (as Envoy counts it).
        let result = s.failed.or_else(|| {
            s.served.map(
                |(status, grpc_status)| match grpc_status.filter(|_| s.grpc) {
                    Some(g) => CallResult::Status(grpc_to_http(g)),
                    None => CallResult::Status(status),
                },
            )
        });
        if let Some(result) = result {
            self.record_outlier(&s.pool, result);
        }
    }

    /// Queues the stream's access log lines.
    fn log(&self, l: &LogState, upstream: Option<(std::net::SocketAddr, &str)>) {
        l.emit(
            &self.logs,
            &self.wire,
            self.conn.protocol(),
            upstream,
            self.peer,
            self.sni.as_deref(),
        );
    }

    /// Counts the stream's outcome for outlier detection, when the host's
    /// cluster in the current snapshot has it.
    fn record_outlier(&self, pool: &PoolRef, result: CallResult) {
        let snap = self.wire.shard.snapshot();
        let p = pool.borrow();
        let Some(cluster) = snap.cluster(p.cluster_name()) else {
            return;
        };
        if !cluster
            .config
            .outlier_detection
            .as_ref()
            .is_some_and(|o| o.has_detector())
        {
            return;
        }
        if let Some(host) = cluster.host_by_addr(&p.addr) {
            self.wire.shard.record_outlier(cluster, host, result);
        }
    }

    /// A delivery for a stream already finished: its window is released on
    /// the upstream connection, its header list dropped.
    fn give_back(&mut self, stream: u32, what: Delivered) {
        let Delivered::Event(ClientEvent::Data { data, .. }) = what else {
            return;
        };
        let Some((_, pool, up)) = self.graveyard.iter().find(|(s, _, _)| *s == stream) else {
            return;
        };
        let (pool, up) = (Rc::clone(pool), *up);
        if let Some(conn) = pool.borrow_mut().conn(up) {
            conn.release(up.stream, data.len() as u32);
        }
        self.touch(&pool, up.slot);
    }
}
