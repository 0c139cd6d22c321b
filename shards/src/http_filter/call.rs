//! A filter's own request to a cluster (an authorisation check, say): what it sends, what comes back, and the trait the data path implements to carry it on the cluster's pools.
//!
//! A call goes where any request to its cluster goes: a host the
//! cluster's policy picks, its pools, circuit breakers and outlier
//! detection. It never blocks the shard: [`FilterCx::call`] hands it over
//! and returns; the answer comes to the call's `done` closure, on the
//! shard, from the task that carries the shard's side requests. A filter
//! that waits on it pauses its stream ([`FilterCx::pause`]) and resumes it
//! from `done`.
//!
//! [`FilterCx::call`]: super::FilterCx::call
//! [`FilterCx::pause`]: super::FilterCx::pause

use std::time::Duration;

use bytes::Bytes;
use h2wire::message::HeaderList;

/// A field of a call's request: name (lowercase), value.
pub type CallField = (Box<[u8]>, Box<[u8]>);

/// A request a filter sends.
#[derive(Debug, Clone)]
pub struct CallRequest {
    pub cluster: Box<str>,
    pub method: Box<[u8]>,
    pub authority: Box<[u8]>,
    pub path: Box<[u8]>,
    /// Regular fields only: pseudo-headers are the fields above, and
    /// `content-length` is the body's.
    pub fields: Vec<CallField>,
    /// Its body (empty: none).
    pub body: Bytes,
    /// From the moment it is handed over to its answer's end.
    pub timeout: Duration,
    /// The most answer body kept; past it the call fails
    /// ([`CallFailure::TooLarge`]).
    pub max_answer_bytes: usize,
}

/// An answer that came whole.
#[derive(Debug)]
pub struct CallAnswer {
    pub status: u16,
    pub head: HeaderList,
    pub body: Bytes,
    pub trailers: Option<HeaderList>,
}

/// Why a call has no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallFailure {
    /// The snapshot has no such cluster.
    UnknownCluster,
    /// Its cluster has no host to send it to.
    NoHealthyHost,
    /// A bound refused it: the cluster's circuit breakers or the shard's
    /// cap on calls in flight.
    Overflow,
    /// No connection to the host could be made.
    ConnectFailure,
    /// The stream or its connection broke before the answer was whole.
    Reset,
    /// Past its timeout.
    Timeout,
    /// Its answer's body passed `max_answer_bytes`.
    TooLarge,
}

/// How a call ended.
pub type CallOutcome = Result<CallAnswer, CallFailure>;

/// What runs with a call's outcome, once, on the shard (not for a call
/// cancelled first).
pub type OnAnswer = Box<dyn FnOnce(CallOutcome)>;

/// A call in flight, to cancel it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallId(pub(crate) u32);

/// Where calls go: the shard's side requests (implemented by the data
/// path, which this module sits below).
pub trait Calls {
    /// Sends `req`; its outcome goes to `done`. `Err`: refused at once
    /// (`done` is dropped, never called).
    fn call(&self, req: CallRequest, done: OnAnswer) -> Result<CallId, CallFailure>;
    /// The caller no longer wants call `id`'s answer (its stream ended):
    /// the call's stream is cancelled and `done` dropped.
    fn cancel(&self, id: CallId);
    /// An owned handle to the same calls, for work of the shard's that
    /// outlives a hook (a span exporter's timer).
    fn handle(&self) -> std::rc::Rc<dyn Calls>;
}

/// `message` as one uncompressed gRPC message: a zero flag byte, its
/// length, then the message (what a gRPC call's body, or the bridge's
/// upgraded request, carries).
pub fn grpc_frame(message: &[u8]) -> Bytes {
    let mut framed = bytes::BytesMut::with_capacity(5 + message.len());
    bytes::BufMut::put_u8(&mut framed, 0);
    bytes::BufMut::put_u32(&mut framed, message.len() as u32);
    framed.extend_from_slice(message);
    framed.freeze()
}
