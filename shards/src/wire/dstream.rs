//! One proxied stream's record in its downstream connection's table.
//!
//! A stream is data, not a task: the phases that act on it are methods of
//! the connection's streams (`streams`), and what its filters keep between
//! hooks lives here too.

use super::streams::ClientClass;
use std::time::{Duration, Instant};

use engine::outlier::CallResult;
use engine::route::RouteAt;
use engine::HostId;
use h2wire::message::HeaderList;

use super::body::ItemQueue;
use super::pool::{PoolRef, UpRef};
use crate::http_filter::{FilterStates, HeaderEdits, UpstreamSpans};
use crate::shard::{OverrideHost, SnapshotRef};

/// The host the router chose for a stream, and its pool on this shard
/// (where the stream counts as in flight).
pub(crate) struct Target {
    pub host: HostId,
    pub pool: PoolRef,
}

/// Keys with this bit name an attempt of a stream other than by the
/// stream's id, where attempts are keyed (its pool's routes, its
/// connection's inbox): a hedged stream has several in flight, each
/// keyed by an alias (`Streams::aliases`). Downstream ids stay below it
/// (HTTP/2's; h1wire's wrap there).
pub(crate) const ALIAS_BIT: u32 = 1 << 31;

/// An attempt a hedge left in flight beside the stream's newer one
/// (`hedge_on_per_try_timeout`): its key, its host and pool, its upstream
/// stream.
pub(crate) struct Earlier {
    pub key: u32,
    /// Which attempt it is (1: the first).
    pub nth: u32,
    pub target: Target,
    pub up: UpRef,
}

/// One proxied stream, keyed by its downstream stream id.
pub(crate) struct DStream {
    /// The snapshot the stream started with, kept while its filters may
    /// still run (their configs and its route stay those of that snapshot,
    /// whatever an update does meanwhile); a stream that runs only the
    /// router lets go of it once routed, so a long stream pins no
    /// superseded config.
    pub(super) snap: Option<SnapshotRef>,
    /// Where its route is in its connection manager's table.
    pub(super) route: Option<RouteAt>,
    /// Its connection manager runs filters besides the router.
    pub(super) filtered: bool,
    /// Its route edits response heads (`response_headers_to_add` …): the
    /// stream keeps the config for them.
    pub(super) route_edits: bool,
    pub(super) grpc: bool,
    /// The request head, kept until the response head arrives or the
    /// first body byte goes upstream: a refused stream (REFUSED_STREAM, or
    /// above an upstream GOAWAY's last stream) is resent from it.
    pub(super) head: Option<HeaderList>,
    /// What the filters changed in the head, applied as it goes upstream
    /// (boxed: rare, and a stream's record is moved into its table).
    pub(super) edits: Option<Box<HeaderEdits>>,
    /// The host the filters asked for ahead of the cluster's policy.
    pub(super) override_host: Option<OverrideHost>,
    /// A filter paused the stream: the position of that filter and the
    /// pause's ticket.
    pub(super) paused: Option<(u32, u64)>,
    /// The body the paused filter waits for (`pause_for_body`), as it
    /// comes.
    pub(super) gather: Option<Box<Gather>>,
    /// The response a filter holds until its end (`hold_response`).
    pub(super) held: Option<Box<crate::http_filter::HeldResponse>>,
    /// What its filters keep for it.
    pub(super) states: Option<Box<FilterStates>>,
    /// `:path` and `:authority` after the route's rewrites, and the new
    /// `x-forwarded-for`, when they differ from the head's.
    pub(super) path: Option<Box<[u8]>>,
    pub(super) authority: Option<Box<[u8]>>,
    /// `auto_host_rewrite`: the host's name becomes `:authority`.
    pub(super) auto_host: bool,
    /// `append_x_forwarded_host`: a rewritten host's original goes in
    /// `x-forwarded-host`.
    pub(super) forwarded_host: bool,
    pub(super) xff: Option<Box<[u8]>>,
    /// The `x-forwarded-proto` we set (the connection's scheme), when we
    /// set one: the client's, if any, then stays out.
    pub(super) xfp: Option<&'static [u8]>,
    /// Who the client is: which of Envoy's `x-envoy-*` fields of its
    /// go upstream, and whether ours say internal.
    pub(super) class: ClientClass,
    /// An edge request's client address, for `x-envoy-external-address`.
    pub(super) external: Option<std::net::IpAddr>,
    /// The client address the connection manager settled on, when it is
    /// not the peer (a trusted `x-forwarded-for` entry): what
    /// `%DOWNSTREAM_REMOTE_ADDRESS%` says.
    pub(super) remote: Option<std::net::SocketAddr>,
    /// When its head came.
    pub(super) started: Instant,
    /// When the request's end came (a bodyless one's: when it was
    /// routed): Envoy's `upstream_rq_time` runs from there.
    pub(super) req_end: Option<Instant>,
    /// When the upstream's kept answer ended (its last byte, or its
    /// trailers): where Envoy's `upstream_rq_time` ends.
    pub(super) resp_end: Option<Instant>,
    /// Its `x-request-id`, kept for the response when the listener says
    /// `always_set_request_id_in_response`.
    pub(super) request_id: Option<Box<[u8]>>,
    /// Requests carry the router's `x-envoy-expected-rq-timeout-ms`.
    pub(super) envoy_headers: bool,
    /// The request came without a body (END_STREAM on its head).
    pub(super) bodyless: bool,
    /// Its route forwards its `Upgrade` (WebSocket): it goes upstream on
    /// a connection of its own, which becomes a tunnel on a 101.
    pub(super) upgrade: bool,
    /// A CONNECT its route terminates (`connect_config`): the gateway
    /// answers it and tunnels its bytes alone; else the CONNECT itself
    /// goes to the host.
    pub(super) terminate: bool,
    /// Its connection manager shapes local replies (`local_reply_config`),
    /// which read the request's fields: the head stays to the end.
    pub(super) reply_needs_head: bool,
    /// Its body went upstream unkept: the head that stays (for a local
    /// reply) cannot be sent again.
    pub(super) body_gone: bool,
    /// Retried once already after its upstream connection died.
    pub(super) retried_lost: bool,
    /// The health check filter took it for a health check: its answer is
    /// left out of the connection manager's `downstream_rq_completed` and
    /// `_<n>xx`, as Envoy leaves health checks out.
    pub(super) health_check: bool,
    /// Holds one of the cluster's `max_retries` (from its first resend to
    /// its end).
    pub(super) retry_slot: bool,
    /// Its route has a `retry_policy`: the stream keeps the config for it.
    pub(super) retry_policy: bool,
    /// That policy lists `retriable_status_codes` (any status may then be
    /// retried; otherwise only 5xx, 409 and gRPC statuses can be).
    pub(super) retry_any_status: bool,
    /// The retry policy an internal client's `x-envoy-retry-on` and
    /// related headers make, over its route's.
    pub(super) header_policy: Option<Box<engine::RetryPolicy>>,
    /// Its virtual host's `include_request_attempt_count` and
    /// `include_attempt_count_in_response`.
    pub(super) count_attempts: (bool, bool),
    /// Its route's `per_try_timeout`, and when the attempt in flight
    /// passes it (until its response head).
    pub(super) per_try: Option<Duration>,
    pub(super) try_ends: Option<Instant>,
    /// Its policy's `per_try_idle_timeout`, and when the attempt in flight
    /// passes it (armed once the request went whole, pushed on by each of
    /// the answer's events).
    pub(super) try_idle: Option<Duration>,
    pub(super) try_idle_at: Option<Instant>,
    /// A per-try timeout sends another attempt beside the one in flight
    /// (`hedge_on_per_try_timeout`) rather than leaving it.
    pub(super) hedging: bool,
    /// The attempts hedges left in flight, each still waiting for its
    /// answer's head; the first to answer well is the answer.
    pub(super) earlier: Vec<Earlier>,
    /// The current attempt's key when it is not the stream's id (an
    /// [`ALIAS_BIT`] key); 0 otherwise.
    pub(super) alias: u32,
    /// Its retries so far, once it made one (boxed: rare).
    pub(super) retries: Option<Box<Retries>>,
    /// The chosen host and its pool, once the router chose.
    pub(super) target: Option<Target>,
    /// The upstream stream, once opened.
    pub(super) up: Option<UpRef>,
    /// Waiting for room in the pool.
    pub(super) waiting: bool,
    /// Request body (and trailers) on their way upstream.
    pub(super) req: ItemQueue,
    /// Its body as it went, kept for a retry (boxed: rare).
    pub(super) replay: Option<Box<super::streams::Replay>>,
    /// Its route mirrors it (`request_mirror_policies`).
    pub(super) mirrored: bool,
    /// Its route's mirror copies, while the request body passes (boxed:
    /// rare).
    pub(super) mirror: Option<Box<super::streams::MirrorTap>>,
    /// Response body (and trailers) on their way downstream.
    pub(super) resp: ItemQueue,
    /// The memory class its buffered body bytes put it in, for the
    /// overload manager (`accounts`; `UNTRACKED` when in none).
    pub(super) account: u8,
    /// Response window granted on the upstream stream beyond the initial
    /// one (`Streams::forward`); counted in the connection's `granted`.
    pub(super) granted: u32,
    /// In the connection's `queued` list (`req` or `resp` had items).
    pub(super) queued: bool,
    /// The response head went downstream: failures can only reset now.
    pub(super) resp_started: bool,
    pub(super) attempts: u8,
    /// The route timeout, counted from the end of the request (Envoy).
    pub(super) timeout: Option<Duration>,
    pub(super) deadline: Option<Instant>,
    /// `stream_idle_timeout`: nothing moved either way for this long ends
    /// the stream (408 before the response head).
    pub(super) idle: Option<Duration>,
    /// `max_stream_duration`: when the stream ends, whatever it is doing
    /// (408 before the response head, a reset after).
    pub(super) ends_at: Option<Instant>,
    /// `request_timeout`: when the request must be in whole (cleared once
    /// it is, or once the response starts).
    pub(super) request_ends: Option<Instant>,
    /// When something last moved, to the connection loop's clock.
    pub(super) active_at: Instant,
    /// The status that went downstream, and the upstream's `grpc-status`
    /// (trailers-only or trailers), once its head arrived: what outlier
    /// detection counts.
    pub(super) served: Option<(u16, Option<u32>)>,
    /// The status that went downstream, once a response head did.
    pub(super) status: Option<u16>,
    /// How the stream failed, if it did (set just before `finish`), and
    /// Envoy's response flag for it.
    pub(super) failed: Option<CallResult>,
    pub(super) flag: &'static str,
    /// What its access log lines need, when the listener logs.
    pub(super) log: Option<Box<super::logging::LogState>>,
    /// A span per attempt, for a traced request whose connection manager
    /// spawns upstream spans (boxed: rare).
    pub(super) upstream_spans: Option<Box<UpstreamSpans>>,
}

/// A stream's retries under its route's `retry_policy`.
#[derive(Default)]
pub(super) struct Retries {
    /// Retries made.
    pub done: u32,
    /// The hosts its attempts went to (for `previous_hosts`).
    pub tried: smallvec::SmallVec<[engine::HostId; 4]>,
    /// When the next attempt goes (its back-off); `None` once it went.
    pub at: Option<Instant>,
    /// A failure its policy names came with no retry left (Envoy's `URX`).
    pub spent: bool,
    /// The first attempt, which a hedge left in flight, is the one
    /// answering: no retry succeeded (Envoy's `upstream_rq_retry_success`).
    pub first_answers: bool,
    /// The pool of the attempt a hedge left last: the cluster a pending
    /// retry picks in, and the retry slot's budget, while the stream has no
    /// attempt of its own.
    pub hedged_from: Option<PoolRef>,
}

impl DStream {
    /// A stream that just came, under `snap`; its route and filters fill
    /// in the rest.
    pub(super) fn new(snap: SnapshotRef, grpc: bool, bodyless: bool, now: Instant) -> Self {
        Self {
            snap: Some(snap),
            route: None,
            filtered: false,
            route_edits: false,
            grpc,
            head: None,
            edits: None,
            override_host: None,
            paused: None,
            gather: None,
            held: None,
            states: None,
            path: None,
            authority: None,
            auto_host: false,
            forwarded_host: false,
            xff: None,
            xfp: None,
            class: ClientClass::External,
            external: None,
            remote: None,
            started: now,
            req_end: None,
            resp_end: None,
            request_id: None,
            envoy_headers: false,
            bodyless,
            upgrade: false,
            terminate: false,
            reply_needs_head: false,
            body_gone: false,
            retried_lost: false,
            health_check: false,
            retry_slot: false,
            retry_policy: false,
            retry_any_status: false,
            header_policy: None,
            retries: None,
            hedging: false,
            earlier: Vec::new(),
            alias: 0,
            per_try: None,
            count_attempts: (false, false),
            try_ends: None,
            try_idle: None,
            try_idle_at: None,
            target: None,
            up: None,
            waiting: false,
            req: ItemQueue::default(),
            replay: None,
            mirrored: false,
            mirror: None,
            resp: ItemQueue::default(),
            account: super::accounts::UNTRACKED,
            granted: 0,
            queued: false,
            resp_started: false,
            attempts: 0,
            timeout: None,
            deadline: None,
            idle: None,
            ends_at: None,
            request_ends: None,
            active_at: now,
            served: None,
            status: None,
            failed: None,
            flag: "",
            log: None,
            upstream_spans: None,
        }
    }

    /// Between two attempts (waiting its back-off): the last attempt was
    /// left and counted; nothing that comes or fails now is its host's.
    pub(super) fn between_attempts(&self) -> bool {
        self.retries.as_ref().is_some_and(|r| r.at.is_some())
    }

    /// What outlier detection counts for an answer of `status` (and
    /// `grpc-status`, read for a gRPC request).
    pub(super) fn answered(&self, status: u16, grpc_status: Option<u32>) -> CallResult {
        match grpc_status.filter(|_| self.grpc) {
            Some(g) => CallResult::Status(engine::outlier::grpc_to_http(g)),
            None => CallResult::Status(status),
        }
    }

    /// Which attempt of the request this is (1 before any retry).
    pub(super) fn attempt(&self) -> u32 {
        1 + self.retries.as_ref().map_or(0, |r| r.done)
    }

    /// No upstream stream was ever opened for it, nor is it waiting for
    /// one: its request reached no backend.
    pub(super) fn never_sent(&self) -> bool {
        self.up.is_none() && !self.waiting && self.attempts == 0
    }

    /// What `x-envoy-expected-rq-timeout-ms` tells the host, as Envoy's
    /// router computes it: the attempt's `per_try_timeout` unless the
    /// stream hedges, else the route timeout; never past what is left of
    /// the route timeout (a retry's share; at least a millisecond).
    pub(super) fn expected_timeout(&self) -> Option<Duration> {
        let per_try = self.per_try.filter(|_| !self.hedging);
        let expected = per_try.or(self.timeout)?;
        let left = match self.deadline.filter(|_| self.attempts > 1) {
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                Some(left.max(Duration::from_millis(1)))
            }
            None => self.timeout,
        };
        Some(left.map_or(expected, |left| expected.min(left)))
    }

    /// The current attempt's key in its pool's routes and the inbox.
    pub(super) fn key(&self, stream: u32) -> u32 {
        match self.alias {
            0 => stream,
            alias => alias,
        }
    }

    /// Its host's address, once the router chose one.
    pub(super) fn served_by(&self) -> Option<std::net::SocketAddr> {
        self.target.as_ref().map(|t| t.pool.borrow().addr)
    }

    /// The body bytes the gateway holds for it, both ways: what the
    /// overload manager charges it (`accounts`).
    pub(super) fn buffered(&self) -> u64 {
        let gathered = self.gather.as_ref().map_or(0, |g| g.buf.len());
        let held = self.held.as_ref().map_or(0, |h| h.body.len());
        u64::from(super::body::queued(&self.req))
            + u64::from(super::body::queued(&self.resp))
            + (gathered + held) as u64
    }
}

/// A request body gathered for a filter that paused for it: the bytes in
/// one buffer (however small the chunks they came in), whose window went
/// back to the client as they came.
#[derive(Default)]
pub(crate) struct Gather {
    /// The filter's limit: gathering ends past it, or at the body's end.
    pub limit: u32,
    pub buf: bytes::BytesMut,
    /// END_STREAM came with the data.
    pub fin: bool,
    /// The request's trailers came (they wait in the stream's queue).
    pub trailers: bool,
}
