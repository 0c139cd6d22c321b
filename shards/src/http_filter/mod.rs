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
//!  response: on_response_headers ─▶ on_response_body* ─▶ on_response_trailers? … 1, 0 (local replies too)
//!  end:      on_log                                                            every filter, once
//! ```
//!
//! - **Continue** passes the stream to the next filter.
//! - **Reply** answers locally: the stream goes no further in, and the
//!   response filters run on the reply as on any response (a local reply
//!   still gets, say, its CORS or session headers). Once a response head
//!   went out, a reply can only reset the stream.
//! - **Pause** (request headers only) holds the stream where it is, for a
//!   filter that waits on something (an authorisation call, a delay): it
//!   keeps the [`Resume`] that [`FilterCx::pause`] gave it and calls it
//!   when done; the chain goes on with the next filter. Body bytes that
//!   arrive meanwhile wait, under the stream's flow-control window.
//!
//! Bodies stream: a body hook sees each chunk as it moves and may change it
//! in place (compression); flow control still counts the bytes that came.
//! Filters are built from the snapshot's config once per snapshot, not per
//! request; a route's per-filter configs are resolved when its table is
//! validated ([`engine::PerFilterConfig`]), so a hook reads one field.
//!
//! A filter is one module with an `impl HttpFilter`: the stateful session
//! filter ([`stateful_session`]) and the router ([`router`]) are the first
//! two. A program that embeds the gateway can add its own ([`Native`]).

pub mod chain;
pub mod edits;
pub mod router;
pub mod stateful_session;

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use engine::snapshot::Host;
use engine::{ClusterSnapshot, HostId, HttpFilterConfig, NativeFilter, Route, Snapshot};
use h2wire::message::HeaderList;

use crate::local_reply::LocalReply;
use crate::shard::{OverrideHost, Shard};
pub use edits::HeaderEdits;

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
    /// Hold the stream until the [`Resume`] from [`FilterCx::pause`] is
    /// called.
    Pause,
}

/// A response a filter makes itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    /// Fields of the reply (`content-length` and, for a body, a
    /// `content-type: text/plain` are added unless given).
    pub fields: HeaderEdits,
    pub body: Bytes,
    /// The access log's response flag for it (Envoy's, e.g. `RL`, `UAEX`).
    pub flag: &'static str,
}

impl Reply {
    /// A reply with a plain-text body (may be empty).
    pub fn new(status: u16, body: &'static str, flag: &'static str) -> Self {
        Self {
            status,
            fields: HeaderEdits::default(),
            body: Bytes::from_static(body.as_bytes()),
            flag,
        }
    }
}

impl From<LocalReply> for Reply {
    /// The gateway's own replies, shaped as Envoy shapes them.
    fn from(r: LocalReply) -> Self {
        Self::new(r.status().as_u16(), r.body(), r.flag())
    }
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

/// The connection a stream came on.
#[derive(Debug, Clone, Copy)]
pub struct ConnInfo<'a> {
    pub peer: SocketAddr,
    /// The TLS server name the client asked for.
    pub sni: Option<&'a str>,
    /// `HTTP/1.1` or `HTTP/2`.
    pub protocol: &'static str,
}

/// What the router chose for a request: the cluster and its host.
#[derive(Debug, Clone, Copy)]
pub struct Pick<'a> {
    pub cluster: &'a ClusterSnapshot,
    pub host: &'a Host,
}

/// What a filter sees of its stream and may change, in every hook.
pub struct FilterCx<'a> {
    /// The shard's routing context: its stats, randomness, ejected hosts.
    pub shard: &'a Shard,
    /// The snapshot the stream started with.
    pub snapshot: &'a Snapshot,
    /// The route the request matched (`None`: no route; the router
    /// answers 404).
    pub route: Option<&'a Route>,
    pub conn: ConnInfo<'a>,
    /// The downstream stream's id.
    pub stream: u32,
    /// A gRPC request (`content-type: application/grpc…`).
    pub grpc: bool,
    /// The connection's clock at this turn.
    pub now: Instant,
    /// The host the stream asks for ahead of the cluster's policy, which
    /// a filter before the router may set (the stateful session filter's).
    pub override_host: &'a mut Option<OverrideHost>,
    /// The host serving the stream, once the router chose it.
    pub served: Option<SocketAddr>,
    /// Streams in flight per host on this shard (least request).
    pub(crate) in_flight: &'a dyn Fn(HostId) -> u32,
    /// What the router chose, for the phases to open upstream.
    pub(crate) pick: Option<Pick<'a>>,
    /// Where a paused stream's resume goes: the connection's inbox.
    pub(crate) resumer: &'a Rc<dyn ResumeSink>,
    pub(crate) inbox: usize,
}

impl FilterCx<'_> {
    /// The handle that resumes this stream after
    /// [`RequestFlow::Pause`]: call [`Resume::resume`] from the task that
    /// waited (on this shard).
    pub fn pause(&self) -> Resume {
        Resume {
            sink: Rc::clone(self.resumer),
            inbox: self.inbox,
            stream: self.stream,
        }
    }
}

/// Where resumes go: the connection's inbox (implemented by the data
/// path, which this module sits below).
pub trait ResumeSink {
    /// Delivers "resume" to stream `stream` of the connection whose inbox
    /// is `inbox` (nothing if it is gone).
    fn resume(&self, inbox: usize, stream: u32);
}

/// Resumes a paused stream; shard-local.
#[derive(Clone)]
pub struct Resume {
    sink: Rc<dyn ResumeSink>,
    inbox: usize,
    stream: u32,
}

impl Resume {
    /// The paused filter is done: the chain goes on with the next one.
    pub fn resume(&self) {
        self.sink.resume(self.inbox, self.stream);
    }
}

/// A request head as filters see it: the decoded head, with their edits
/// applied over it when it goes upstream.
pub struct RequestHead<'a> {
    pub(crate) list: &'a HeaderList,
    pub(crate) edits: &'a mut HeaderEdits,
}

impl RequestHead<'_> {
    /// The first value of field `name` (lowercase; pseudo-headers too),
    /// edits applied.
    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.edits.get(name, self.list.get(name))
    }

    /// Every value of `name` as decoded (edits not applied): `cookie`
    /// crumbs, repeated fields.
    pub fn get_all<'s>(&'s self, name: &'s [u8]) -> impl Iterator<Item = &'s [u8]> + 's {
        self.list.get_all(name)
    }

    pub fn append(&mut self, name: &[u8], value: &[u8]) {
        self.edits.append(name, value);
    }

    pub fn set(&mut self, name: &[u8], value: &[u8]) {
        self.edits.set(name, value);
    }

    /// Removes a regular field (pseudo-headers stay).
    pub fn remove(&mut self, name: &[u8]) {
        self.edits.remove(name);
    }
}

/// A response head as filters see it: the upstream's (or a local reply's)
/// fields, with their edits applied over them when it goes downstream.
pub struct ResponseHead<'a> {
    pub(crate) status: u16,
    pub(crate) list: Option<&'a HeaderList>,
    pub(crate) edits: &'a mut HeaderEdits,
}

impl ResponseHead<'_> {
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The gateway made this response (a local reply), not the upstream.
    pub fn is_local(&self) -> bool {
        self.list.is_none()
    }

    /// The first value of field `name` (lowercase), edits applied.
    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.edits.get(name, self.list.and_then(|l| l.get(name)))
    }

    pub fn append(&mut self, name: &[u8], value: &[u8]) {
        self.edits.append(name, value);
    }

    pub fn set(&mut self, name: &[u8], value: &[u8]) {
        self.edits.set(name, value);
    }

    pub fn remove(&mut self, name: &[u8]) {
        self.edits.remove(name);
    }
}

/// What a stream did, for [`HttpFilter::on_log`].
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamSummary {
    /// The status that went downstream, if a response head did.
    pub status: Option<u16>,
    /// The upstream host that served it, if any.
    pub upstream: Option<SocketAddr>,
    /// Envoy's response flag for how it failed (`""`: it did not).
    pub flag: &'static str,
}
