//! HTTP filters: the hooks a filter has on a stream's way through the request phases, what each hook may answer, and what a filter sees of its stream.
//!
//! A connection manager's `http_filters` run in their order on the way in
//! (request headers, body, trailers) and in the reverse order on the way
//! out (response headers, body, trailers), as Envoy's decoder and encoder
//! filters do; the router is the last filter, the one that sends the
//! request upstream. Every hook has a default that does nothing, so a
//! filter implements only the hooks it needs:
//!
//! ```text
//!  request:  on_request_headers ─▶ on_request_body* ─▶ on_request_trailers?   filters 0, 1, …, router
//!            (on_request_body_gathered: after a pause for the body)
//!  response: on_response_headers ─▶ on_response_body* ─▶ on_response_trailers? … 1, 0 (local replies too)
//!  end:      on_log                                                            every filter, once
//! ```
//!
//! - **Continue** passes the stream to the next filter.
//! - **Reply** answers locally: the stream goes no further in, and the
//!   response filters run on the reply as on any response (a local reply
//!   still gets, say, its CORS or session headers; a reply to a local
//!   reply is not asked for). A response filter's reply to the upstream's
//!   head replaces that head, which never goes out; once a head went out,
//!   a reply can only reset the stream.
//! - **Pause** (request headers only) holds the stream where it is, for a
//!   filter that waits on something (an authorisation call, a rate-limit
//!   service, a fault's delay): it takes the [`Resume`] that
//!   [`FilterCx::pause`] gives, and ends the pause from a task on the shard
//!   with [`Resume::resume`] (the chain goes on with the next filter),
//!   [`Resume::resume_with`] (with edits to the request head) or
//!   [`Resume::reply`] (a denial). Each pause has a ticket, so a resume
//!   that comes late or twice finds nothing. Body bytes that arrive
//!   meanwhile wait under the stream's flow-control window and go through
//!   the body hooks once the chain passed the router; the stream's idle
//!   timeout still runs. A filter that needs the body first (an
//!   authorisation service that reads it) pauses with
//!   [`FilterCx::pause_for_body`] instead, and gets the body's start in
//!   [`HttpFilter::on_request_body_gathered`], which answers as the
//!   request headers hook does.
//!
//! Bodies stream: a body hook sees each chunk as it moves and may change it
//! in place (compression); flow control still counts the bytes that came.
//! What a filter keeps per stream (an encoder, a call's outcome) is its
//! state in the stream ([`FilterCx::set_state`]), made on first use.
//! Filters are built from the snapshot's config once per snapshot, not per
//! request; a route's per-filter configs are resolved when its table is
//! validated ([`engine::PerFilterConfig`]), so a hook reads one field. The
//! route is chosen before the first filter runs, from the head as it came:
//! a filter's edits do not choose another route. Edits cover regular
//! fields only ([`HeaderEdits`]); pseudo-headers, `host` and hop-by-hop
//! fields are the gateway's. Filters after the router never run.
//!
//! A filter is one module with an `impl HttpFilter`: the stateful session
//! filter ([`stateful_session`]) and the router ([`router`]) are the first
//! two. A program that embeds the gateway can add its own ([`Native`]).

pub mod call;
pub mod chain;
pub mod compressor;
mod context;
pub mod cors;
pub mod csrf;
mod edits;
pub mod ext_authz;
pub mod fault;
pub mod grpc_bridge;
pub mod grpc_web;
mod head;
pub(crate) mod header_mutation;
pub mod health_check;
mod hold;
pub mod local_rate_limit;
pub mod rbac;
mod reply;
pub mod router;
pub mod stateful_session;
pub mod tracing;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use engine::{HttpFilterConfig, NativeFilter};

pub use context::{ConnInfo, FilterCx, FilterStates, Pick, Resume, ResumeSink, Resumed};
pub use edits::{EditError, HeaderEdits};
pub use head::{RequestHead, ResponseHead};
pub use hold::HeldResponse;
pub use reply::Reply;
pub(crate) use tracing::{AttemptFailure, UpstreamSpans};

/// Trailers as they wait to cross: (name, value) pairs.
pub type Trailers = Vec<(Vec<u8>, Vec<u8>)>;

/// What a hook answers.
#[derive(Debug)]
pub enum Flow {
    /// On to the next filter.
    Continue,
    /// Answer the request locally (or, once the response head went out,
    /// reset the stream).
    Reply(Reply),
}

/// What [`HttpFilter::on_request_headers`] answers.
#[derive(Debug)]
pub enum RequestFlow {
    Continue,
    Reply(Reply),
    /// Hold the stream until the [`Resume`] from [`FilterCx::pause`]
    /// ends the pause (the hook must have called `pause`).
    Pause,
}

/// One HTTP filter. Hooks run on the stream's data shard, one stream at a
/// time; a filter shared by shards (`Send + Sync`) keeps per-stream state
/// in its stream ([`FilterCx`]) or in the shard, never behind a lock on
/// the request path.
pub trait HttpFilter: Send + Sync {
    /// A request head, before the router. May edit it, answer, or pause.
    fn on_request_headers(&self, cx: &mut FilterCx<'_>, head: &mut RequestHead<'_>) -> RequestFlow {
        let _ = (cx, head);
        RequestFlow::Continue
    }

    /// The request body's start (or all of it: `whole`) that this
    /// filter's request headers hook paused for
    /// ([`FilterCx::pause_for_body`]). Answers as that hook does; the
    /// chunks go through the body hooks later as any body does.
    fn on_request_body_gathered(
        &self,
        cx: &mut FilterCx<'_>,
        head: &mut RequestHead<'_>,
        body: Bytes,
        whole: bool,
    ) -> RequestFlow {
        let _ = (cx, head, body, whole);
        RequestFlow::Continue
    }

    /// A chunk of the request body (`end`: the last).
    fn on_request_body(&self, cx: &mut FilterCx<'_>, data: &mut Bytes, end: bool) -> Flow {
        let _ = (cx, data, end);
        Flow::Continue
    }

    /// The request's trailers.
    fn on_request_trailers(&self, cx: &mut FilterCx<'_>, trailers: &mut Trailers) -> Flow {
        let _ = (cx, trailers);
        Flow::Continue
    }

    /// A response head, the upstream's or a local reply's, before it goes
    /// downstream.
    fn on_response_headers(&self, cx: &mut FilterCx<'_>, head: &mut ResponseHead<'_>) -> Flow {
        let _ = (cx, head);
        Flow::Continue
    }

    /// A chunk of the response body (`end`: the last).
    fn on_response_body(&self, cx: &mut FilterCx<'_>, data: &mut Bytes, end: bool) -> Flow {
        let _ = (cx, data, end);
        Flow::Continue
    }

    /// The response's trailers.
    fn on_response_trailers(&self, cx: &mut FilterCx<'_>, trailers: &mut Trailers) -> Flow {
        let _ = (cx, trailers);
        Flow::Continue
    }

    /// The stream ended, however it ended: what it did.
    fn on_log(&self, cx: &FilterCx<'_>, summary: &StreamSummary) {
        let _ = (cx, summary);
    }
}

/// A filter compiled into a program that embeds the gateway, put in a
/// connection manager's `http_filters` as `engine::HttpFilterConfig::Native`
/// (see `docs/architecture.md`, "HTTP filters").
pub struct Native(pub Box<dyn HttpFilter>);

impl Native {
    /// The config entry that runs `filter`.
    pub fn config(filter: impl HttpFilter + 'static) -> HttpFilterConfig {
        HttpFilterConfig::Native(NativeFilter(Arc::new(Native(Box::new(filter)))))
    }
}

/// What a stream did, for [`HttpFilter::on_log`].
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamSummary<'a> {
    /// The status that went downstream, if a response head did.
    pub status: Option<u16>,
    /// The upstream host that served it, if any.
    pub upstream: Option<SocketAddr>,
    /// Envoy's response flag for how it failed (`""`: it did not).
    pub flag: &'static str,
    /// The client's body bytes, and the body bytes sent it (0 where the
    /// connection manager keeps no access log).
    pub bytes_received: u64,
    pub bytes_sent: u64,
    /// The spans of its upstream attempts, when its tracing spawns them.
    pub upstream_spans: &'a [engine::tracing::SpanRecord],
}
