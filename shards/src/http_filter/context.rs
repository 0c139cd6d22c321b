//! What a filter sees of its stream in every hook (`FilterCx`): the shard, the snapshot, the route, the connection, the stream's override host and serving host, its own per-stream state; and how a paused stream is resumed.

use std::any::Any;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Instant;

use engine::snapshot::Host;
use engine::{ClusterSnapshot, HostId, Route, Snapshot};
use h2wire::message::HeaderList;

use super::call::{CallFailure, CallId, CallRequest, Calls, OnAnswer};
use super::edits::HeaderEdits;
use super::reply::Reply;
use crate::shard::{OverrideHost, Shard};
use crate::stats::filters::{Both, FilterCounters, OwnedBoth};

/// The connection a stream came on.
#[derive(Debug, Clone, Copy)]
pub struct ConnInfo<'a> {
    /// The client: a PROXY header's source, else the socket's peer.
    pub peer: SocketAddr,
    /// The socket's peer (the proxy that sent a PROXY header, if any).
    pub direct_peer: SocketAddr,
    /// The address the client connected to.
    pub local: SocketAddr,
    /// The TLS server name the client asked for.
    pub sni: Option<&'a str>,
    /// Who the client's certificate names (mTLS), if it presented one.
    pub peer_identity: Option<&'a engine::rbac::PeerIdentity>,
    /// `HTTP/1.1` or `HTTP/2`.
    pub protocol: &'static str,
    /// `https` over TLS, else `http`.
    pub scheme: &'static [u8],
    /// The `x-forwarded-proto` the request goes upstream with when the
    /// gateway sets it (the connection manager's choice); `None` when the
    /// client's is kept.
    pub forwarded_proto: Option<&'static [u8]>,
}

/// What the router chose for a request: the cluster and its host.
#[derive(Debug, Clone, Copy)]
pub struct Pick<'a> {
    pub cluster: &'a ClusterSnapshot,
    pub host: &'a Host,
}

/// The filters' per-stream state, by their position in the chain: made
/// on the first state a filter keeps, so streams whose filters keep none
/// allocate nothing.
pub type FilterStates = Vec<Option<Box<dyn Any>>>;

/// What a filter sees of its stream and may change, in every hook.
pub struct FilterCx<'a> {
    /// The shard's routing context: its stats, randomness, ejected hosts.
    pub shard: &'a Shard,
    /// The snapshot the stream started with.
    pub snapshot: &'a Snapshot,
    /// The route the request matched (`None`: no route; the router
    /// answers 404).
    pub route: Option<&'a Route>,
    /// The request's head as it came, past the request headers (whose
    /// hooks have it as their [`RequestHead`](super::RequestHead)).
    pub request: Option<&'a HeaderList>,
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
    /// Where a filter's own requests go: the shard's side requests.
    pub(crate) calls: &'a dyn Calls,
    /// The stream's filter states.
    pub(crate) states: &'a mut Option<Box<FilterStates>>,
    /// The position of the filter whose hook runs.
    pub(crate) at: usize,
    /// The ticket of the pause this hook asked for.
    pub(crate) paused: Option<u64>,
    /// The body bytes the pause waits for ([`Self::pause_for_body`]).
    pub(crate) gather: Option<u32>,
    /// A response headers hook asked to hold the response.
    pub(crate) hold: bool,
    /// A request headers hook asked for the stream's body sizes at its
    /// end ([`Self::count_sizes`]).
    pub(crate) count_sizes: bool,
    /// The response held, in the hooks that follow.
    pub(crate) held: Option<&'a mut super::HeldResponse>,
    /// Body bytes a trailers hook sends ahead of the trailers (an
    /// encoder's last bytes).
    pub(crate) before_trailers: Option<bytes::Bytes>,
    /// The stream's response flag for the access log.
    pub(crate) flag: &'a mut &'static str,
    /// The stream is a health check (the health check filter says so):
    /// its answer stays out of the connection manager's answer counts.
    pub(crate) health_check: &'a mut bool,
    /// The connection's filter blocks, by position (`at` is the running
    /// filter's).
    pub(crate) filter_blocks: &'a [crate::stats::filters::FilterBlock],
    /// The stream's upstream spans, which the tracing filter starts.
    pub(crate) upstream_spans: &'a mut Option<Box<super::UpstreamSpans>>,
    /// The filters' per-connection states.
    pub(crate) conn_states: &'a std::cell::RefCell<FilterStates>,
}

impl<'a> FilterCx<'a> {
    /// The running filter's counters: the shard's and its instance's (not
    /// borrowed from the context, which the hook goes on using).
    pub(crate) fn counters<T: FilterCounters>(&self) -> Both<'a, T> {
        let shard: &'a Shard = self.shard;
        Both {
            shard: T::shard(&shard.stats),
            instance: self.instance().map(|b| &**b),
        }
    }

    /// [`Self::counters`] to keep past the hook (a count made later).
    pub(crate) fn owned_counters<T: FilterCounters>(&self) -> OwnedBoth<T> {
        OwnedBoth {
            shard: std::sync::Arc::clone(&self.shard.stats),
            instance: self.instance().cloned(),
        }
    }

    fn instance<T: FilterCounters>(&self) -> Option<&'a std::sync::Arc<T>> {
        let blocks: &'a [crate::stats::filters::FilterBlock] = self.filter_blocks;
        T::instance(blocks.get(self.at)?)
    }
}

impl FilterCx<'_> {
    /// This filter's state for this stream, if it kept one of type `T`.
    pub fn state<T: Any>(&mut self) -> Option<&mut T> {
        self.states
            .as_mut()?
            .get_mut(self.at)?
            .as_mut()?
            .downcast_mut()
    }

    /// This filter's state for this stream, read only (from `on_log`).
    pub fn state_ref<T: Any>(&self) -> Option<&T> {
        self.states.as_ref()?.get(self.at)?.as_ref()?.downcast_ref()
    }

    /// Keeps `value` as this filter's state for this stream (it lives
    /// until the stream ends; its hooks find it with [`Self::state`]).
    pub fn set_state<T: Any>(&mut self, value: T) {
        let states = self.states.get_or_insert_with(Default::default);
        if states.len() <= self.at {
            states.resize_with(self.at + 1, || None);
        }
        states[self.at] = Some(Box::new(value));
    }

    /// This filter's state for this connection (made with `T::default()`
    /// on first use, gone with the connection): what a filter keeps per
    /// client connection, such as its own rate limit buckets.
    pub fn with_conn_state<T: Any + Default, R>(&mut self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut states = self.conn_states.borrow_mut();
        if states.len() <= self.at {
            states.resize_with(self.at + 1, || None);
        }
        let slot = &mut states[self.at];
        if !slot.as_ref().is_some_and(|s| s.is::<T>()) {
            *slot = Some(Box::new(T::default()));
        }
        match slot.as_mut().and_then(|s| s.downcast_mut::<T>()) {
            Some(state) => f(state),
            // Put there just above.
            None => f(&mut T::default()),
        }
    }

    /// Marks the stream with an access log response flag (Envoy's, e.g.
    /// `DI` for a delay a fault injected), for a stream that goes on; a
    /// reply carries its own.
    pub fn set_flag(&mut self, flag: &'static str) {
        *self.flag = flag;
    }

    /// From a trailers hook: `data` goes on as the body's last chunk,
    /// ahead of the trailers (a compressor ends its stream this way). It
    /// adds to what earlier filters sent; later filters' body hooks see
    /// it as a chunk before their trailers hooks run.
    pub fn send_before_trailers(&mut self, data: bytes::Bytes) {
        match &mut self.before_trailers {
            Some(prev) => {
                let mut joined = bytes::BytesMut::from(&prev[..]);
                joined.extend_from_slice(&data);
                *prev = joined.freeze();
            }
            None => self.before_trailers = Some(data),
        }
    }

    /// Sends a request of the filter's own to a cluster (see
    /// [`super::call`]); its outcome goes to `done`. `Err`: refused at
    /// once, and `done` never runs.
    pub fn call(&self, req: CallRequest, done: OnAnswer) -> Result<CallId, CallFailure> {
        self.calls.call(req, done)
    }

    /// Cancels call `id` (its answer is no longer wanted: `done` is
    /// dropped). A call already ended is left as it is.
    pub fn cancel_call(&self, id: CallId) {
        self.calls.cancel(id);
    }

    /// Pauses the stream (return [`super::RequestFlow::Pause`]): the handle
    /// that resumes it, from a task on this shard, once the filter's work
    /// is done. A stream paused and never resumed ends at its stream idle
    /// timeout.
    pub fn pause(&mut self) -> Resume {
        let ticket = self.resumer.ticket();
        self.paused = Some(ticket);
        Resume {
            sink: Rc::clone(self.resumer),
            inbox: self.inbox,
            stream: self.stream,
            ticket,
        }
    }
}

impl FilterCx<'_> {
    /// From a response headers hook: the response is held until the
    /// upstream's answer ends (its body bounded at 1 MiB, past that 500;
    /// its trailers dropped), so that the trailers hooks can still change
    /// its head and body through [`Self::held_response`]; it then goes
    /// downstream whole, with its `content-length`. Filters before the
    /// holder in the response order see the head and chunks as they come
    /// (unlike Envoy's, whose chain stops at the holder). The gRPC
    /// HTTP/1.1 bridge holds an answer this way to put its trailers in
    /// its head.
    pub fn hold_response(&mut self) {
        self.hold = true;
    }

    /// From a request headers hook: the stream counts its body bytes each
    /// way for [`super::StreamSummary`] (which the connection manager
    /// does anyway when it keeps an access log); else they are 0.
    pub fn count_sizes(&mut self) {
        self.count_sizes = true;
    }

    /// The held response, in the hooks after [`Self::hold_response`].
    pub fn held_response(&mut self) -> Option<&mut super::HeldResponse> {
        self.held.as_deref_mut()
    }

    /// Pauses the stream (return [`super::RequestFlow::Pause`]) until the
    /// request body's first `limit` bytes, or all of it if shorter, have
    /// come: the filter's [`super::HttpFilter::on_request_body_gathered`]
    /// then gets them. Meanwhile the client's window is given back as
    /// its bytes come, so it can send `limit` bytes whatever its window.
    pub fn pause_for_body(&mut self, limit: u32) {
        let _ = self.pause();
        self.gather = Some(limit);
    }
}

/// How a paused filter ends its pause.
pub enum Resumed {
    /// The chain goes on with the next filter, with these edits to the
    /// request head, and the paused filter's state for the stream
    /// replaced by `state` when one is given (what its response hooks
    /// need of the outcome).
    Continue {
        edits: HeaderEdits,
        state: Option<Box<dyn Any>>,
    },
    /// The filter answers the request (a denial, say).
    Reply(Box<Reply>),
}

/// Where resumes go: the connection's inbox (implemented by the data
/// path, which this module sits below).
pub trait ResumeSink {
    /// A ticket no other pause on this shard has: a resume names the pause
    /// it ends, so a late or repeated one finds nothing to resume.
    fn ticket(&self) -> u64;
    /// Delivers `outcome` to stream `stream` of the connection whose inbox
    /// is `inbox` (nothing if it is gone).
    fn resume(&self, inbox: usize, stream: u32, ticket: u64, outcome: Resumed);
}

/// Ends a stream's pause; shard-local, used once.
pub struct Resume {
    sink: Rc<dyn ResumeSink>,
    inbox: usize,
    stream: u32,
    ticket: u64,
}

impl Resume {
    /// The paused filter is done: the chain goes on with the next one.
    pub fn resume(self) {
        self.resume_with(HeaderEdits::default());
    }

    /// As [`Self::resume`], with edits to the request head (headers an
    /// authorisation service returned, say).
    pub fn resume_with(self, edits: HeaderEdits) {
        let outcome = Resumed::Continue { edits, state: None };
        self.sink
            .resume(self.inbox, self.stream, self.ticket, outcome);
    }

    /// As [`Self::resume_with`], keeping `state` as the filter's state
    /// for the stream (its hooks find it with [`FilterCx::state`]).
    pub fn resume_keeping<T: Any>(self, edits: HeaderEdits, state: T) {
        let outcome = Resumed::Continue {
            edits,
            state: Some(Box::new(state)),
        };
        self.sink
            .resume(self.inbox, self.stream, self.ticket, outcome);
    }

    /// The paused filter answers the request itself.
    pub fn reply(self, reply: Reply) {
        let outcome = Resumed::Reply(Box::new(reply));
        self.sink
            .resume(self.inbox, self.stream, self.ticket, outcome);
    }
}
