//! The external authorisation filter (Envoy's `envoy.filters.http.ext_authz`): each request is paused while an authorisation service (HTTP, or gRPC `envoy.service.auth.v3.Authorization/Check`) is asked about it over the service cluster's pools; its answer lets the request go on (with the headers it adds), or answers the client (a denial), and a service that cannot answer fails the request closed (`status_on_error`) or open (`failure_mode_allow`).
//!
//! The call is a side request of the shard (`http_filter::call`): it
//! never blocks the shard, and its cluster has the pools, circuit
//! breakers and outlier detection of any cluster. Outcomes, as Envoy
//! 1.40 answers them (recorded side by side; see `docs/http-filters.md`):
//! - **ok**: HTTP 200, or a `CheckResponse` whose status is OK;
//! - **denied**: any other HTTP status below 500, or any other gRPC
//!   check status: the service's answer (or 403) goes to the client,
//!   flagged `UAEX`;
//! - **error**: no answer in time, a broken call, an HTTP 5xx, a gRPC
//!   call that failed or answered garbage: `status_on_error` (403) with
//!   `UAEX`, or the request goes on under `failure_mode_allow`.

mod grpc;
mod http;
pub mod proto;

use std::sync::Arc;

use bytes::Bytes;
use engine::{AuthzService, BufferSettings, CheckSettings, ExtAuthz, PerRoute};

use super::call::{CallId, CallOutcome};
use super::{FilterCx, HeaderEdits, HttpFilter, Reply, RequestFlow, RequestHead, ResponseHead};
use crate::stats::filters::Both;
use crate::stats::ExtAuthzStats;

/// How much of an answer a check keeps: an allowed answer's headers and
/// a denial's body (`max_denied_response_body_bytes` cuts it further).
const MAX_ANSWER_BYTES: usize = 1 << 20;

/// What the service said, read from its answer.
#[derive(Debug)]
enum Verdict {
    /// Go on, with these edits to the request and these fields for the
    /// response.
    Allow {
        upstream: HeaderEdits,
        response: Vec<ResponseField>,
    },
    /// Answer the client with this.
    Deny(Reply),
    /// The service did not answer usably; `Some`: the reply it asked for
    /// in that case (gRPC `error_response`).
    Error(Option<Reply>),
    /// Allowed, with changes the gateway does not make (a new path or
    /// query, a new host, a field value no HTTP allows).
    Invalid,
}

/// A field an allowed answer adds to the response.
#[derive(Debug, Clone)]
struct ResponseField {
    name: Box<[u8]>,
    value: Box<[u8]>,
    /// Another line (else it replaces the upstream's).
    append: bool,
}

/// The filter's state in a stream.
enum Check {
    /// The call in flight (cancelled if the stream ends first).
    Pending(CallId),
    /// Allowed, with these fields for the response.
    Allowed(Vec<ResponseField>),
}

/// The body to send along, once gathered, if any (`with_request_body`).
#[derive(Debug, Default)]
pub(crate) struct CheckBody {
    pub data: Bytes,
    /// The request's body was longer: this is its start.
    pub partial: bool,
    /// The request has a body (a check without one carries no
    /// `x-envoy-auth-partial-body`).
    pub present: bool,
    /// A gRPC check carries it as `raw_body` (`pack_as_bytes`).
    pub pack_as_bytes: bool,
}

impl HttpFilter for Arc<ExtAuthz> {
    fn on_request_headers(&self, cx: &mut FilterCx<'_>, head: &mut RequestHead<'_>) -> RequestFlow {
        if matches!(per_route(cx), Some(PerRoute::Disabled)) {
            // Envoy counts nothing for a route that disables the filter.
            return RequestFlow::Continue;
        }
        if let Some(enabled) = &self.filter_enabled {
            if !enabled.includes(cx.shard.random_u64()) {
                cx.counters::<ExtAuthzStats>().inc(|s| &s.disabled);
                if self.deny_at_disable {
                    return RequestFlow::Reply(Reply::new(self.status_on_error, "", "UAEX"));
                }
                return RequestFlow::Continue;
            }
        }
        // A tunnel's bytes are no body to wait for.
        let tunnel = head.get(b":method") == Some(b"CONNECT") || head.get(b"upgrade").is_some();
        match self.buffer(cx).filter(|_| !head.end_stream() && !tunnel) {
            Some(b) => {
                let length = head
                    .get(b"content-length")
                    .and_then(|v| std::str::from_utf8(v).ok()?.parse::<u64>().ok());
                if !b.allow_partial_message
                    && length.is_some_and(|l| l > b.max_request_bytes as u64)
                {
                    return RequestFlow::Reply(too_large());
                }
                // The check waits for the body's start: the data path
                // gathers it and comes back to `on_request_body_gathered`.
                cx.pause_for_body(b.max_request_bytes);
                RequestFlow::Pause
            }
            None => self.check(cx, head, CheckBody::default()),
        }
    }

    fn on_request_body_gathered(
        &self,
        cx: &mut FilterCx<'_>,
        head: &mut RequestHead<'_>,
        body: Bytes,
        whole: bool,
    ) -> RequestFlow {
        let settings = self.buffer(cx);
        if !whole && !settings.is_some_and(|b| b.allow_partial_message) {
            return RequestFlow::Reply(too_large());
        }
        let body = CheckBody {
            // A request whose body turned out empty has none to send.
            present: !body.is_empty(),
            data: body,
            partial: !whole,
            pack_as_bytes: settings.is_some_and(|b| b.pack_as_bytes),
        };
        self.check(cx, head, body)
    }

    fn on_response_headers(
        &self,
        cx: &mut FilterCx<'_>,
        head: &mut ResponseHead<'_>,
    ) -> super::Flow {
        if let Some(Check::Allowed(fields)) = cx.state::<Check>() {
            for f in fields.iter() {
                // Checked when the answer was read.
                let _ = match f.append {
                    true => head.append(&f.name, &f.value),
                    false => head.set(&f.name, &f.value),
                };
            }
        }
        super::Flow::Continue
    }

    fn on_log(&self, cx: &FilterCx<'_>, _summary: &super::StreamSummary) {
        if let Some(Check::Pending(id)) = cx.state_ref::<Check>() {
            cx.cancel_call(*id);
        }
    }
}

/// The route's `ExtAuthzPerRoute`, if it gives one.
fn per_route<'a>(cx: &FilterCx<'a>) -> Option<&'a PerRoute<Arc<CheckSettings>>> {
    cx.route.and_then(|r| r.per_filter.ext_authz.as_ref())
}

/// Envoy's answer to a body past `max_request_bytes` (no check is made).
fn too_large() -> Reply {
    Reply::new(413, "Payload Too Large", "")
}

trait Checks {
    /// The body settings for this request: the route's, else the
    /// filter's.
    fn buffer(&self, cx: &FilterCx<'_>) -> Option<BufferSettings>;
    /// Asks the service about the request whose head is `head`, with
    /// `body`: the stream pauses until the answer.
    fn check(
        &self,
        cx: &mut FilterCx<'_>,
        head: &mut RequestHead<'_>,
        body: CheckBody,
    ) -> RequestFlow;
}

impl Checks for Arc<ExtAuthz> {
    fn buffer(&self, cx: &FilterCx<'_>) -> Option<BufferSettings> {
        match per_route(cx) {
            Some(PerRoute::Override(s)) if s.disable_request_body_buffering => None,
            Some(PerRoute::Override(s)) => s.with_request_body.or(self.with_request_body),
            _ => self.with_request_body,
        }
    }

    fn check(
        &self,
        cx: &mut FilterCx<'_>,
        head: &mut RequestHead<'_>,
        body: CheckBody,
    ) -> RequestFlow {
        let settings = match per_route(cx) {
            Some(PerRoute::Override(s)) => Some(&**s),
            _ => None,
        };
        let req = match &self.service {
            AuthzService::Grpc(g) => grpc::request(self, g, cx, head, body, settings),
            AuthzService::Http(h) => http::request(self, h, head, body),
        };
        let config = Arc::clone(self);
        let stats = cx.owned_counters::<ExtAuthzStats>();
        let resume = cx.pause();
        let done = Box::new(move |outcome: CallOutcome| {
            let verdict = match &config.service {
                AuthzService::Grpc(_) => grpc::verdict(&config, outcome),
                AuthzService::Http(h) => http::verdict(&config, h, outcome),
            };
            match decide(&config, verdict, stats.get()) {
                Decided::Go(edits, fields) => resume.resume_keeping(edits, Check::Allowed(fields)),
                Decided::Answer(reply) => resume.reply(reply),
            }
        });
        match cx.call(req, done) {
            Ok(id) => {
                cx.set_state(Check::Pending(id));
                RequestFlow::Pause
            }
            Err(_) => {
                // Refused at once (the shard's bound on calls): an error,
                // decided here; the pause asked for above is dropped.
                cx.paused = None;
                match decide(self, Verdict::Error(None), cx.counters()) {
                    Decided::Go(edits, _) => {
                        for (name, value) in edits.added() {
                            let _ = head.set(name, value);
                        }
                        RequestFlow::Continue
                    }
                    Decided::Answer(reply) => RequestFlow::Reply(reply),
                }
            }
        }
    }
}

/// Whether a field name (lowercase) is one of `list`'s.
fn matches_any(list: &[engine::HeaderMatchKind], name: &[u8]) -> bool {
    let Ok(name) = std::str::from_utf8(name) else {
        return false;
    };
    list.iter().any(|m| m.matches(name))
}

/// What the stream does with a verdict.
enum Decided {
    Go(HeaderEdits, Vec<ResponseField>),
    Answer(Reply),
}

/// A verdict, counted, as the stream takes it.
fn decide(config: &ExtAuthz, verdict: Verdict, stats: Both<'_, ExtAuthzStats>) -> Decided {
    match verdict {
        Verdict::Allow { upstream, response } => {
            stats.inc(|s| &s.ok);
            Decided::Go(upstream, response)
        }
        Verdict::Deny(reply) => {
            stats.inc(|s| &s.denied);
            Decided::Answer(reply)
        }
        Verdict::Invalid => {
            stats.inc(|s| &s.invalid);
            Decided::Answer(Reply::new(500, "", "UAEX"))
        }
        Verdict::Error(reply) => {
            stats.inc(|s| &s.error);
            if config.failure_mode_allow {
                stats.inc(|s| &s.failure_mode_allowed);
                let mut edits = HeaderEdits::default();
                if config.failure_mode_allow_header_add {
                    let _ = edits.set(b"x-envoy-auth-failure-mode-allowed", b"true");
                }
                return Decided::Go(edits, Vec::new());
            }
            Decided::Answer(reply.unwrap_or_else(|| Reply::new(config.status_on_error, "", "UAEX")))
        }
    }
}
