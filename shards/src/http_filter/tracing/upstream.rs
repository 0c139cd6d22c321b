//! Upstream spans (`spawn_upstream_span`, or the router's `start_child_span`): each attempt of a traced request (its first, a retry, a hedge, a resend) is a client span of its own, a child of the request's span, whose id is the parent the host sees; the wire layer tells the record when an attempt starts, what it heard and when it is left, and the spans go out with the request's at its end.
//!
//! The record lives in the stream's record (`DStream::upstream_spans`),
//! made by the tracing filter for a sampled request only: an unsampled
//! one hands on the request's own context, as without child spans, and
//! costs nothing per attempt.

use std::net::SocketAddr;
use std::time::Instant;

use engine::tracing::span::{self, UpstreamTags};
use engine::tracing::{self as trace, AttrValue, Propagation, SpanKind, SpanRecord, TraceContext};
use smallvec::SmallVec;

use crate::http_filter::HeaderEdits;

/// Attempts a stream may record, at most (a route allows at most 10
/// retries, and resends are bounded too): past it, attempts go on
/// untraced.
const MAX_SPANS: usize = 32;

/// A traced stream's upstream spans.
pub(crate) struct UpstreamSpans {
    propagation: Propagation,
    trace_id_128bit: bool,
    /// The request's span: every attempt's parent.
    parent: TraceContext,
    /// The request's custom tags, which each attempt's span ends with.
    custom: Vec<(Box<str>, AttrValue)>,
    /// The request span's start, on both clocks: an attempt's start in
    /// unix time is this plus the monotonic time since.
    base_unix_nanos: u64,
    base: Instant,
    open: SmallVec<[Attempt; 1]>,
    done: Vec<SpanRecord>,
    /// Attempts begun: the next one's number is one more.
    begun: u32,
}

/// An attempt in flight, keyed as its answer is (the stream's id, or an
/// alias for one a hedge made).
struct Attempt {
    key: u32,
    record: SpanRecord,
    started: Instant,
    cluster: Box<str>,
    upstream: SocketAddr,
    protocol: &'static str,
    /// Its response's status, once its head came.
    status: Option<u16>,
    /// Its response came whole: leaving it then is no cancel.
    complete: bool,
    /// Why it failed, in Envoy's words for a reset, once it did.
    reset: Option<&'static str>,
    /// Envoy's response flag for it (`UT`: its per-try timeout passed).
    flag: &'static str,
}

/// How the wire saw an attempt fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttemptFailure {
    ConnectFailure,
    /// The cluster's circuit breakers left it no connection.
    Overflow,
    ConnectionTermination,
    RemoteReset,
    RemoteRefusedStream,
    ProtocolError,
}

impl AttemptFailure {
    /// Envoy's `resetReasonToString`, which its `error.reason` tag says.
    fn reason(self) -> &'static str {
        match self {
            Self::ConnectFailure => "remote connection failure",
            Self::Overflow => "overflow",
            Self::ConnectionTermination => "connection termination",
            Self::RemoteReset => "remote reset",
            Self::RemoteRefusedStream => "remote refused stream reset",
            Self::ProtocolError => "protocol error",
        }
    }

    /// Envoy's response flag for the attempt.
    fn flag(self) -> &'static str {
        match self {
            Self::ConnectFailure => "UF",
            Self::Overflow => "UO",
            Self::ConnectionTermination => "UC",
            Self::RemoteReset | Self::RemoteRefusedStream => "UR",
            Self::ProtocolError => "UPE",
        }
    }
}

impl UpstreamSpans {
    pub(crate) fn new(
        propagation: Propagation,
        trace_id_128bit: bool,
        parent: TraceContext,
        custom: Vec<(Box<str>, AttrValue)>,
        base_unix_nanos: u64,
        base: Instant,
    ) -> Self {
        Self {
            propagation,
            trace_id_128bit,
            parent,
            custom,
            base_unix_nanos,
            base,
            open: SmallVec::new(),
            done: Vec::new(),
            begun: 0,
        }
    }

    /// The next attempt, keyed `key`, goes to `upstream` of `cluster` now:
    /// its span starts, and its context replaces the request's in `edits`
    /// (what goes upstream). `span_id`: a fresh nonzero id.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn begin(
        &mut self,
        key: u32,
        cluster: &str,
        upstream: SocketAddr,
        protocol: &'static str,
        span_id: u64,
        now: Instant,
        edits: &mut HeaderEdits,
    ) {
        // The same key again: the attempt before it was left unseen.
        self.end(key, now);
        self.begun = self.begun.saturating_add(1);
        let nth = self.begun;
        if self.open.len() + self.done.len() >= MAX_SPANS {
            // Untraced: the host's parent is the request's span, not an
            // attempt's that ended.
            trace::inject(
                self.propagation,
                &self.parent,
                self.trace_id_128bit,
                |name, value| {
                    edits.set_checked(name.as_bytes(), value.as_bytes());
                },
            );
            return;
        }
        let ctx = self.parent.child(span_id, true);
        trace::inject(
            self.propagation,
            &ctx,
            self.trace_id_128bit,
            |name, value| {
                // The tracer's own names and values: valid fields.
                edits.set_checked(name.as_bytes(), value.as_bytes());
            },
        );
        let start = self.unix_nanos(now);
        let name = span::upstream_operation_name(cluster);
        // A child span has no `node_id` or `zone` (Envoy's `spawnChild`).
        let mut record = SpanRecord::new(&ctx, &name, SpanKind::Client, start);
        if nth > 1 {
            record.set_attr(span::tags::RETRY_COUNT, (nth - 1).to_string());
        }
        self.open.push(Attempt {
            key,
            record,
            started: now,
            cluster: cluster.into(),
            upstream,
            protocol,
            status: None,
            complete: false,
            reset: None,
            flag: "",
        });
    }

    fn attempt(&mut self, key: u32) -> Option<&mut Attempt> {
        self.open.iter_mut().find(|a| a.key == key)
    }

    /// Attempt `key`'s response head came with `status`.
    pub(crate) fn answered(&mut self, key: u32, status: u16) {
        if let Some(a) = self.attempt(key) {
            a.status.get_or_insert(status);
        }
    }

    /// Attempt `key`'s answer ended (its last body byte or trailers).
    pub(crate) fn completed(&mut self, key: u32) {
        if let Some(a) = self.attempt(key) {
            a.complete = true;
        }
    }

    /// Attempt `key` failed as `failure` says.
    pub(crate) fn failed(&mut self, key: u32, failure: AttemptFailure) {
        if let Some(a) = self.attempt(key) {
            a.reset.get_or_insert(failure.reason());
            if a.flag.is_empty() {
                a.flag = failure.flag();
            }
            if matches!(
                failure,
                AttemptFailure::ConnectFailure | AttemptFailure::Overflow
            ) {
                // No connection carried it.
                a.protocol = "-";
            }
        }
    }

    /// Attempt `key` passed its `per_try_timeout` (`UT`) or its
    /// `per_try_idle_timeout` (`SI`).
    pub(crate) fn timed_out(&mut self, key: u32, idle: bool) {
        if let Some(a) = self.attempt(key) {
            a.flag = if idle { "SI" } else { "UT" };
        }
    }

    /// Attempt `key` is left: its span ends now.
    pub(crate) fn end(&mut self, key: u32, now: Instant) {
        let Some(at) = self.open.iter().position(|a| a.key == key) else {
            return;
        };
        let a = self.open.swap_remove(at);
        let end = self.unix_nanos(now.max(a.started));
        let mut record = a.record;
        let upstream = a.upstream.to_string();
        let tags = UpstreamTags {
            status: a.status,
            protocol: a.protocol,
            upstream_cluster: &a.cluster,
            upstream_address: &upstream,
            response_flags: if a.flag.is_empty() { "-" } else { a.flag },
            reset_reason: a.reset,
            // Left by the gateway before its answer ended.
            canceled: !a.complete && a.reset.is_none(),
        };
        span::tag_upstream(&mut record, &tags);
        for (key, value) in &self.custom {
            record.set_attr(key, value.clone());
        }
        record.finish(end);
        self.done.push(record);
    }

    /// The stream ended: every attempt still in flight ends now; its
    /// spans, in the order they ended.
    pub(crate) fn take(&mut self, now: Instant) -> Vec<SpanRecord> {
        while let Some(key) = self.open.first().map(|a| a.key) {
            self.end(key, now);
        }
        std::mem::take(&mut self.done)
    }

    fn unix_nanos(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.base);
        self.base_unix_nanos.saturating_add(since.as_nanos() as u64)
    }
}

#[cfg(test)]
mod tests;
