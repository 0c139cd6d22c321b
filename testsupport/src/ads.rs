//! In-process ADS (Aggregated Discovery Service) State-of-the-World server
//! for integration tests: h2c gRPC on its own glommio thread, resources set
//! by the test, every received `DiscoveryRequest` recorded.
//!
//! Behaviour, per stream and per type URL `T`:
//! * a request for `T` is recorded; if it is the first for `T` on the stream
//!   or its `resource_names` (as a set) differ from the previous one, the
//!   server answers at once, provided [`AdsServer::set`] was called for `T`;
//!   otherwise (an ACK or a NACK) it sends nothing;
//! * [`AdsServer::set`] pushes the new version to every stream that has sent
//!   at least one request for `T` (streams notice within a few ms);
//! * Listener and Cluster are wildcard types (every resource is sent, names
//!   are ignored); other types (RouteConfiguration, ClusterLoadAssignment)
//!   send only the subscribed names, and nothing at all while the subscribed
//!   set is empty;
//! * each response carries the type's current version and a nonce unique in
//!   the process (so a client that reconnects to a restarted server never
//!   sees a nonce twice).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, IntoRawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures_lite::future::or;
use glommio::net::TcpListener;
use glommio::timer::sleep;
use glommio::{ExecutorJoinHandle, LocalExecutorBuilder, Placement};
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use prost::Message;
use xds::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};

use crate::h2c::{Stopping, POLL};

/// Type URLs of the four resource types the gateway subscribes to.
pub mod type_url {
    /// `envoy.config.listener.v3.Listener` (LDS, wildcard).
    pub const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
    /// `envoy.config.cluster.v3.Cluster` (CDS, wildcard).
    pub const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
    /// `envoy.config.route.v3.RouteConfiguration` (RDS, by name).
    pub const ROUTE: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
    /// `envoy.config.endpoint.v3.ClusterLoadAssignment` (EDS, by name).
    pub const ENDPOINT: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
    /// `envoy.extensions.transport_sockets.tls.v3.Secret` (SDS, by name).
    pub const SECRET: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";
}

/// gRPC path of the only method served.
const ADS_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";

/// Largest gRPC message accepted from a client; a bigger length prefix
/// resets the stream instead of buffering it.
const MAX_MESSAGE: usize = 16 << 20;

/// How long `start_on` retries a bind that fails with `EADDRINUSE`: after a
/// stop the old listener can linger a moment (glommio's ring is torn down
/// asynchronously by the kernel).
const BIND_RETRY: Duration = Duration::from_secs(3);

const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
const APPLICATION_GRPC: HeaderValue = HeaderValue::from_static("application/grpc");

/// gRPC status codes used here.
const OK: u32 = 0;
const UNIMPLEMENTED: u32 = 12;
const INTERNAL: u32 = 13;
const UNAVAILABLE: u32 = 14;

/// Nonces are unique in the whole process, across servers and restarts.
static NEXT_NONCE: AtomicU64 = AtomicU64::new(1);

/// One `DiscoveryRequest` as received, in arrival order (see
/// [`AdsServer::requests`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// Id of the ADS stream it came on (1, 2, … in the order streams opened;
    /// a reconnecting client gets a new id).
    pub stream: u64,
    /// `type_url` of the request.
    pub type_url: String,
    /// `version_info`: the last version the client accepted.
    pub version_info: String,
    /// `response_nonce`: the nonce being ACKed or NACKed (empty at first).
    pub response_nonce: String,
    /// `resource_names`, as sent.
    pub resource_names: Vec<String>,
    /// `error_detail` as `(code, message)`: present on a NACK.
    pub error_detail: Option<(i32, String)>,
    /// Whether the request carried a `node`.
    pub has_node: bool,
    /// `node.id` (empty without a node).
    pub node_id: String,
}

impl RecordedRequest {
    fn new(stream: u64, req: &DiscoveryRequest) -> RecordedRequest {
        RecordedRequest {
            stream,
            type_url: req.type_url.clone(),
            version_info: req.version_info.clone(),
            response_nonce: req.response_nonce.clone(),
            resource_names: req.resource_names.clone(),
            error_detail: req
                .error_detail
                .as_ref()
                .map(|s| (s.code, s.message.clone())),
            has_node: req.node.is_some(),
            node_id: req.node.as_ref().map(|n| n.id.clone()).unwrap_or_default(),
        }
    }

    /// ACK of nonce `nonce`: it names that nonce and carries no error.
    pub fn is_ack_of(&self, nonce: &str) -> bool {
        self.response_nonce == nonce && self.error_detail.is_none()
    }

    /// NACK of nonce `nonce`: it names that nonce and carries `error_detail`.
    pub fn is_nack_of(&self, nonce: &str) -> bool {
        self.response_nonce == nonce && self.error_detail.is_some()
    }
}

/// Packs a prost message as `Any` with type URL
/// `type.googleapis.com/<full name>` (prost's own `Name::type_url` has no
/// domain, which xDS clients reject).
pub fn any<M: prost::Message + prost::Name>(m: &M) -> prost_types::Any {
    prost_types::Any {
        type_url: format!("type.googleapis.com/{}", M::full_name()),
        value: m.encode_to_vec(),
    }
}

/// Listener and Cluster are requested by wildcard: names do not filter them.
fn is_wildcard(type_url: &str) -> bool {
    type_url == type_url::LISTENER || type_url == type_url::CLUSTER
}

/// Resources of one type, as last `set`.
struct TypeState {
    version: String,
    resources: Vec<(String, prost_types::Any)>,
    /// Bumped on every `set` (unique across types): a stream whose
    /// subscription has sent an older generation owes the client a push.
    generation: u64,
}

/// What one stream has asked for and been sent, for one type.
#[derive(Default)]
struct Subscription {
    /// Names of the last request, as a set: order and duplicates do not make
    /// a new subscription.
    names: BTreeSet<String>,
    /// Generation of the resources last considered for this stream (0:
    /// none yet), whether or not a response went out.
    generation: u64,
    /// Nonce and version of the last response sent (for diagnostics).
    last_nonce: Option<String>,
    last_version: Option<String>,
}

/// Everything the test thread and the server thread share.
#[derive(Default)]
struct State {
    types: HashMap<String, TypeState>,
    next_generation: u64,
    requests: Vec<RecordedRequest>,
    /// Open ADS streams by id, each with its subscriptions by type URL.
    streams: BTreeMap<u64, HashMap<String, Subscription>>,
    next_stream: u64,
    /// Nonce of the last response sent for each type, on any stream.
    last_nonce: HashMap<String, String>,
}

impl State {
    /// Records `req` from `stream` and returns the response it calls for, if
    /// any (first request for the type, or a changed set of names).
    fn on_request(&mut self, stream: u64, req: &DiscoveryRequest) -> Option<DiscoveryResponse> {
        self.requests.push(RecordedRequest::new(stream, req));
        let names: BTreeSet<String> = req.resource_names.iter().cloned().collect();
        let subs = self.streams.get_mut(&stream)?;
        let changed = match subs.get_mut(&req.type_url) {
            None => {
                subs.insert(
                    req.type_url.clone(),
                    Subscription {
                        names,
                        ..Subscription::default()
                    },
                );
                true
            }
            Some(sub) if sub.names != names => {
                sub.names = names;
                true
            }
            // Same names: an ACK or a NACK, nothing to send.
            Some(_) => false,
        };
        if changed {
            self.response_for(stream, &req.type_url)
        } else {
            None
        }
    }

    /// Responses owed to `stream` because `set` changed a type it subscribed to.
    fn pushes_for(&mut self, stream: u64) -> Vec<DiscoveryResponse> {
        let Some(subs) = self.streams.get(&stream) else {
            return Vec::new();
        };
        let stale: Vec<String> = subs
            .iter()
            .filter(|(t, sub)| {
                self.types
                    .get(t.as_str())
                    .is_some_and(|ty| ty.generation != sub.generation)
            })
            .map(|(t, _)| t.clone())
            .collect();
        stale
            .iter()
            .filter_map(|t| self.response_for(stream, t))
            .collect()
    }

    /// The response for `type_url` on `stream` with the current resources,
    /// or None when there is nothing to send (type never `set`, or a named
    /// type with no names subscribed). Marks the current generation as
    /// handled for this stream either way.
    fn response_for(&mut self, stream: u64, type_url: &str) -> Option<DiscoveryResponse> {
        let sub = self.streams.get_mut(&stream)?.get_mut(type_url)?;
        let ty = self.types.get(type_url)?;
        sub.generation = ty.generation;
        let resources: Vec<prost_types::Any> = if is_wildcard(type_url) {
            ty.resources.iter().map(|(_, r)| r.clone()).collect()
        } else if sub.names.is_empty() {
            return None;
        } else {
            ty.resources
                .iter()
                .filter(|(name, _)| sub.names.contains(name))
                .map(|(_, r)| r.clone())
                .collect()
        };
        let nonce = NEXT_NONCE.fetch_add(1, Ordering::Relaxed).to_string();
        sub.last_nonce = Some(nonce.clone());
        sub.last_version = Some(ty.version.clone());
        self.last_nonce.insert(type_url.to_owned(), nonce.clone());
        Some(DiscoveryResponse {
            version_info: ty.version.clone(),
            resources,
            type_url: type_url.to_owned(),
            nonce,
            ..DiscoveryResponse::default()
        })
    }

    /// Human-readable dump for `wait_for`'s panic message.
    fn describe(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "recorded requests ({}):", self.requests.len());
        for r in &self.requests {
            let _ = writeln!(out, "  {r:?}");
        }
        let _ = writeln!(out, "open streams ({}):", self.streams.len());
        for (id, subs) in &self.streams {
            for (t, sub) in subs {
                let _ = writeln!(
                    out,
                    "  stream {id} {t}: names {:?}, last sent version {:?} nonce {:?}",
                    sub.names, sub.last_version, sub.last_nonce
                );
            }
        }
        out
    }
}

struct Shared {
    state: Mutex<State>,
    stop: AtomicBool,
}

impl Shared {
    /// Locks the state; a panic elsewhere (a failed test assertion while
    /// holding the lock) must not turn every later call into a second panic.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Stopping for Shared {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
}

/// An ADS server on its own thread; dropping it (or [`AdsServer::stop`])
/// stops it and joins the thread.
pub struct AdsServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    join: Option<ExecutorJoinHandle<()>>,
}

impl AdsServer {
    /// Starts a server on `127.0.0.1:0`. Panics if it cannot.
    pub fn start() -> AdsServer {
        AdsServer::start_on(SocketAddr::from(([127, 0, 0, 1], 0))).expect("ADS server starts")
    }

    /// Starts a server on `addr`, e.g. the address of a stopped server to
    /// test client reconnection. A bind failing with `EADDRINUSE` is retried
    /// for a few seconds (std sets `SO_REUSEADDR` on Unix, so TIME_WAIT
    /// connections do not block it, but a just-closed listener may linger).
    pub fn start_on(addr: SocketAddr) -> io::Result<AdsServer> {
        let deadline = Instant::now() + BIND_RETRY;
        let listener = loop {
            match std::net::TcpListener::bind(addr) {
                Ok(l) => break l,
                Err(e) if e.kind() == io::ErrorKind::AddrInUse && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(e),
            }
        };
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            stop: AtomicBool::new(false),
        });
        let thread_shared = shared.clone();
        let join = LocalExecutorBuilder::new(Placement::Unbound)
            .name("ads-server")
            // The machine's memlock limit is small; glommio's default is larger.
            .io_memory(1 << 20)
            .spawn(move || async move {
                let fd = listener.into_raw_fd();
                // SAFETY: `fd` is a listening TCP socket we own; glommio takes it.
                let listener = unsafe { TcpListener::from_raw_fd(fd) };
                crate::h2c::serve(listener, fd, thread_shared, serve_stream).await;
            })
            .map_err(io::Error::from)?;
        Ok(AdsServer {
            addr,
            shared,
            join: Some(join),
        })
    }

    /// The bound address (the real port when started on port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sets the resources of `type_url` (replacing any previous ones) at
    /// `version`, and pushes them to every stream subscribed to the type.
    /// An empty list is a valid (empty) state of the world.
    pub fn set(&self, type_url: &str, version: &str, resources: Vec<(String, prost_types::Any)>) {
        let mut state = self.shared.lock();
        state.next_generation += 1;
        let generation = state.next_generation;
        state.types.insert(
            type_url.to_owned(),
            TypeState {
                version: version.to_owned(),
                resources,
                generation,
            },
        );
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// Waits (polling every few ms) until a recorded request satisfies
    /// `pred`, returning the first that does; panics with a helpful message
    /// listing the recorded requests after `timeout`.
    pub fn wait_for(
        &self,
        timeout: Duration,
        pred: impl Fn(&RecordedRequest) -> bool,
    ) -> RecordedRequest {
        let deadline = Instant::now() + timeout;
        loop {
            {
                let state = self.shared.lock();
                if let Some(r) = state.requests.iter().find(|r| pred(r)) {
                    return r.clone();
                }
                if Instant::now() >= deadline {
                    let dump = state.describe();
                    drop(state);
                    panic!("ADS server: no matching request within {timeout:?}\n{dump}");
                }
            }
            std::thread::sleep(POLL);
        }
    }

    /// Number of currently open ADS streams.
    pub fn streams(&self) -> usize {
        self.shared.lock().streams.len()
    }

    /// The nonce of the last response sent for `type_url` on any stream
    /// (None if none).
    pub fn last_nonce(&self, type_url: &str) -> Option<String> {
        self.shared.lock().last_nonce.get(type_url).cloned()
    }

    /// Stops listening and closes every stream (trailers `grpc-status: 14`,
    /// then the connection is closed); the thread exits. Also done on Drop.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(join) = self.join.take() {
            let _ = join.join();
        }
        // Stream tasks still alive when the executor exited were dropped
        // without running to their end: nothing is open any more.
        self.shared.lock().streams.clear();
    }
}

impl Drop for AdsServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Response headers of a gRPC response.
fn grpc_response() -> Response<()> {
    let mut resp = Response::new(());
    resp.headers_mut().insert(CONTENT_TYPE, APPLICATION_GRPC);
    resp
}

/// `grpc-status` (and `grpc-message`) headers.
fn grpc_status(code: u32, message: &str) -> HeaderMap {
    let mut h = HeaderMap::with_capacity(2);
    h.insert(GRPC_STATUS, HeaderValue::from(code));
    // Messages here are plain ASCII, so no percent-encoding is needed.
    if let Ok(v) = HeaderValue::from_str(message) {
        if !message.is_empty() {
            h.insert(GRPC_MESSAGE, v);
        }
    }
    h
}

/// Handles one HTTP/2 stream: the ADS method, or an error reply.
async fn serve_stream(
    req: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    shared: Arc<Shared>,
) {
    let (parts, mut body) = req.into_parts();
    let is_grpc = parts
        .headers
        .get(CONTENT_TYPE)
        .is_some_and(|ct| ct.as_bytes().starts_with(b"application/grpc"));
    if !is_grpc {
        // gRPC over HTTP/2: a non-gRPC content type gets 415.
        let mut resp = Response::new(());
        *resp.status_mut() = StatusCode::UNSUPPORTED_MEDIA_TYPE;
        let _ = respond.send_response(resp, true);
        return;
    }
    if parts.method != Method::POST || parts.uri.path() != ADS_PATH {
        // Trailers-only response: the status rides on the headers.
        let mut resp = grpc_response();
        resp.headers_mut().extend(grpc_status(
            UNIMPLEMENTED,
            "only StreamAggregatedResources is served",
        ));
        let _ = respond.send_response(resp, true);
        return;
    }
    let Ok(mut send) = respond.send_response(grpc_response(), false) else {
        return;
    };
    let id = {
        let mut state = shared.lock();
        state.next_stream += 1;
        let id = state.next_stream;
        state.streams.insert(id, HashMap::new());
        id
    };
    let end = run_stream(id, &mut body, &mut send, &shared).await;
    // Unregistered before the final frame goes out, so that a client that
    // has seen the end of its stream also sees it gone from `streams()`.
    shared.lock().streams.remove(&id);
    match end {
        End::Status(code, message) => {
            let _ = send.send_trailers(grpc_status(code, message));
        }
        End::Reset(reason) => send.send_reset(reason),
        End::Gone => {}
    }
}

/// How an ADS stream ends.
enum End {
    /// Trailers with this gRPC status and message.
    Status(u32, &'static str),
    /// RST_STREAM with this reason.
    Reset(Reason),
    /// The stream is already dead (reset by the client, connection lost).
    Gone,
}

/// Encodes `msg` as one gRPC message (uncompressed).
fn grpc_frame(msg: &impl Message) -> Bytes {
    let len = msg.encoded_len();
    let mut buf = BytesMut::with_capacity(5 + len);
    buf.put_u8(0);
    // Our responses are far below 4 GiB; saturate rather than wrap.
    buf.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    // Encoding into a buffer with enough capacity cannot fail.
    let _ = msg.encode(&mut buf);
    buf.freeze()
}

/// Takes the next complete gRPC message out of `buf`, if there is one.
/// Checks the prefix as soon as it is there, so an oversized message is
/// refused before any of it is buffered.
fn next_message(buf: &mut BytesMut) -> Result<Option<Bytes>, End> {
    if buf.len() < 5 {
        return Ok(None);
    }
    if buf[0] != 0 {
        // No `grpc-encoding` is negotiated, so a compressed message is a
        // protocol error.
        return Err(End::Status(
            INTERNAL,
            "compressed messages are not supported",
        ));
    }
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    if len > MAX_MESSAGE {
        return Err(End::Reset(Reason::ENHANCE_YOUR_CALM));
    }
    if buf.len() < 5 + len {
        return Ok(None);
    }
    buf.advance(5);
    Ok(Some(buf.split_to(len).freeze()))
}

/// Sends a response on the stream; false if the stream is gone.
fn send_response(send: &mut SendStream<Bytes>, resp: &DiscoveryResponse) -> bool {
    // Not waiting for flow-control capacity: h2 queues the (small) frames
    // and requests capacity itself, and waiting here would stop us reading
    // the client's requests. The queue is bounded by the test's `set` calls.
    send.send_data(grpc_frame(resp), false).is_ok()
}

/// Reads requests and sends responses until the client ends the stream,
/// the stream breaks, or the server stops.
async fn run_stream(
    id: u64,
    body: &mut RecvStream,
    send: &mut SendStream<Bytes>,
    shared: &Shared,
) -> End {
    // Holds at most one partial message (≤ MAX_MESSAGE, checked as soon as
    // its prefix arrives) plus the rest of one DATA frame.
    let mut buf = BytesMut::new();
    let mut next_check = Instant::now();
    loop {
        let wait = next_check.saturating_duration_since(Instant::now());
        // `data()` is cancel-safe: losing the race to the timer loses nothing.
        let next = or(async { Some(body.data().await) }, async {
            sleep(wait).await;
            None
        })
        .await;
        match next {
            Some(Some(Ok(chunk))) => {
                // The bytes are ours now (bounded as above): let the client
                // send more.
                let _ = body.flow_control().release_capacity(chunk.len());
                buf.extend_from_slice(&chunk);
                loop {
                    let msg = match next_message(&mut buf) {
                        Ok(Some(msg)) => msg,
                        Ok(None) => break,
                        Err(end) => return end,
                    };
                    let Ok(req) = DiscoveryRequest::decode(msg) else {
                        return End::Status(INTERNAL, "undecodable DiscoveryRequest");
                    };
                    let resp = shared.lock().on_request(id, &req);
                    if let Some(resp) = resp {
                        if !send_response(send, &resp) {
                            return End::Gone;
                        }
                    }
                }
            }
            Some(Some(Err(_))) => return End::Gone,
            // The client half-closed: a clean end of the call.
            Some(None) => return End::Status(OK, ""),
            None => {}
        }
        // Checked after every event, not only on timer wake-ups, so that a
        // client sending continuously cannot starve pushes or the stop.
        if Instant::now() >= next_check {
            if shared.stopping() {
                return End::Status(UNAVAILABLE, "ADS server stopping");
            }
            let pushes = shared.lock().pushes_for(id);
            for resp in &pushes {
                if !send_response(send, resp) {
                    return End::Gone;
                }
            }
            next_check = Instant::now() + POLL;
        }
    }
}
