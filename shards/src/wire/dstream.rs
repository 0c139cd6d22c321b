//! One proxied stream's record in its downstream connection's table.
//!
//! A stream is data, not a task: the phases that act on it are methods of
//! the connection that owns it (`stream`, `forward`).

use std::time::{Duration, Instant};

use engine::outlier::CallResult;
use engine::HostId;
use h2wire::message::HeaderList;
use http::header::{HeaderName, HeaderValue};

use super::body::ItemQueue;
use super::pool::{PoolRef, UpRef};

/// One proxied stream, keyed by its downstream stream id.
pub(crate) struct DStream {
    pub(super) grpc: bool,
    /// The request head, kept until the response head arrives or the
    /// first body byte goes upstream: a refused stream (REFUSED_STREAM, or
    /// above an upstream GOAWAY's last stream) is resent from it.
    pub(super) head: Option<HeaderList>,
    /// `:path` and `:authority` after the route's rewrites, and the new
    /// `x-forwarded-for`, when they differ from the head's.
    pub(super) path: Option<Vec<u8>>,
    pub(super) authority: Option<Vec<u8>>,
    pub(super) xff: Option<Vec<u8>>,
    /// The request came without a body (END_STREAM on its head).
    pub(super) bodyless: bool,
    /// Retried once already after its upstream connection died.
    pub(super) retried_lost: bool,
    /// The chosen host and its pool.
    pub(super) host: HostId,
    pub(super) pool: PoolRef,
    /// The upstream stream, once opened.
    pub(super) up: Option<UpRef>,
    /// Waiting for room in the pool.
    pub(super) waiting: bool,
    /// Request body (and trailers) on their way upstream.
    pub(super) req: ItemQueue,
    /// Response body (and trailers) on their way downstream.
    pub(super) resp: ItemQueue,
    /// Response window granted on the upstream stream beyond the initial
    /// one (`DownConn::forward`); counted in the connection's `granted`.
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
    /// When something last moved, to the connection loop's clock.
    pub(super) active_at: Instant,
    /// The upstream's status and `grpc-status` (trailers-only or
    /// trailers), once its head arrived: what outlier detection counts.
    pub(super) served: Option<(u16, Option<u32>)>,
    /// How the stream failed, if it did (set just before `finish`).
    pub(super) failed: Option<CallResult>,
    /// The header that (re)binds the client's session to this host, for
    /// the response head (boxed: rare, and streams stay small).
    pub(super) session_header: Option<Box<(HeaderName, HeaderValue)>>,
    /// What its access log lines need, when the listener logs.
    pub(super) log: Option<Box<super::logging::LogState>>,
}

impl DStream {
    /// No upstream stream was ever opened for it, nor is it waiting for
    /// one: its request reached no backend.
    pub(super) fn never_sent(&self) -> bool {
        self.up.is_none() && !self.waiting && self.attempts == 0
    }
}
