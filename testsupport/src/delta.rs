//! In-process Delta (incremental) ADS server for integration tests:
//! `DeltaAggregatedResources` over h2c on its own glommio thread, the
//! counterpart of [`crate::AdsServer`] (same transport, same stop and
//! restart behaviour), with every `DeltaDiscoveryRequest` recorded.
//!
//! Behaviour, per stream and per type URL `T`:
//! * the first request for `T` opens the subscription: its
//!   `resource_names_subscribe` (empty for Listener/Cluster, or `*`, is a
//!   wildcard) and `initial_resource_versions` (what the client already
//!   holds: not resent at the same version, and removed if the server has
//!   no such resource); if [`DeltaServer::set`] was called for `T`, the
//!   answer goes out at once, even an empty one for a wildcard (a client
//!   waits for its first wildcard response before it is initialized);
//! * later requests change the subscription by their subscribe and
//!   unsubscribe lists (new names are sent if held), or are ACKs / NACKs
//!   (`response_nonce`, `error_detail`), which are only recorded: as in
//!   go-control-plane, what was sent counts as held even when NACKed, so
//!   a resource is resent only once its body changes;
//! * [`DeltaServer::set`] computes, for every subscribed stream, the delta
//!   against what that stream was sent: resources whose version changed
//!   and removals of names it was sent that are gone;
//! * every response carries a nonce unique in the process and the type's
//!   `system_version_info`, and is recorded too ([`DeltaServer::responses`]).
//!
//! Responses are computed under the lock by the calling thread and queued
//! per stream, so `flood` really sends `n` responses back to back, and a
//! nonce is known ([`DeltaServer::last_nonce`]) as soon as `set` returns.

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
use http::{HeaderMap, Method, Request, Response};
use prost::Message;
use prost_types::Any;
use xds::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, Resource,
};

use crate::ads::type_url;
use crate::h2c::{Stopping, POLL};

const DELTA_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";
/// Larger length prefixes reset the stream instead of being buffered.
const MAX_MESSAGE: usize = 16 << 20;
/// A just-stopped listener may linger a moment (glommio tears its ring
/// down asynchronously): `start_on` retries `EADDRINUSE` this long.
const BIND_RETRY: Duration = Duration::from_secs(3);
const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
const APPLICATION_GRPC: HeaderValue = HeaderValue::from_static("application/grpc");

/// Nonces are unique in the process (and `d`-prefixed, apart from the SotW
/// server's), so a client reconnecting to a restarted server never sees
/// one twice.
static NEXT_NONCE: AtomicU64 = AtomicU64::new(1);

fn next_nonce() -> String {
    format!("d{}", NEXT_NONCE.fetch_add(1, Ordering::Relaxed))
}

/// One `DeltaDiscoveryRequest` as received, in arrival order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeltaRequest {
    /// Id of the stream (1, 2, … in opening order; a reconnect is a new id).
    pub stream: u64,
    pub type_url: String,
    pub resource_names_subscribe: Vec<String>,
    pub resource_names_unsubscribe: Vec<String>,
    /// Sorted for stable assertions (a map on the wire).
    pub initial_resource_versions: BTreeMap<String, String>,
    /// The nonce ACKed or NACKed (empty on a subscription change).
    pub response_nonce: String,
    /// `(code, message)` on a NACK.
    pub error_detail: Option<(i32, String)>,
    pub node_id: Option<String>,
}

impl DeltaRequest {
    fn new(stream: u64, r: &DeltaDiscoveryRequest) -> DeltaRequest {
        DeltaRequest {
            stream,
            type_url: r.type_url.clone(),
            resource_names_subscribe: r.resource_names_subscribe.clone(),
            resource_names_unsubscribe: r.resource_names_unsubscribe.clone(),
            initial_resource_versions: r.initial_resource_versions.clone().into_iter().collect(),
            response_nonce: r.response_nonce.clone(),
            error_detail: r.error_detail.as_ref().map(|s| (s.code, s.message.clone())),
            node_id: r.node.as_ref().map(|n| n.id.clone()),
        }
    }

    pub fn is_ack_of(&self, nonce: &str) -> bool {
        self.response_nonce == nonce && self.error_detail.is_none()
    }

    pub fn is_nack_of(&self, nonce: &str) -> bool {
        self.response_nonce == nonce && self.error_detail.is_some()
    }
}

/// One response as sent (bodies left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeltaSent {
    pub stream: u64,
    pub type_url: String,
    pub nonce: String,
    pub system_version_info: String,
    /// `(name, version)` of each resource sent.
    pub resources: Vec<(String, String)>,
    pub removed_resources: Vec<String>,
}

/// A type's resources: body and per-resource version, by name.
#[derive(Default)]
struct TypeState {
    version: String,
    resources: BTreeMap<String, (String, Any)>,
}

/// One stream's subscription to one type.
#[derive(Default)]
struct Sub {
    wildcard: bool,
    names: BTreeSet<String>,
    /// What the client holds as far as this stream knows: name → version.
    sent: BTreeMap<String, String>,
}

impl Sub {
    fn wants(&self, name: &str) -> bool {
        self.wildcard || self.names.contains(name)
    }
}

#[derive(Default)]
struct Stream {
    subs: HashMap<String, Sub>,
    /// Responses computed but not yet written by the stream's task.
    outbox: Vec<DeltaDiscoveryResponse>,
}

#[derive(Default)]
struct State {
    types: HashMap<String, TypeState>,
    streams: BTreeMap<u64, Stream>,
    next_stream: u64,
    requests: Vec<DeltaRequest>,
    responses: Vec<DeltaSent>,
}

impl State {
    /// Queues on `stream` the delta of `type_url` against what it was sent,
    /// plus `extra` removals (sent even if never held: the test of unknown
    /// removals); with `always`, even an empty one. Nothing without a `set`.
    fn push(&mut self, stream: u64, type_url: &str, extra: &[String], always: bool) {
        let (Some(ty), Some(st)) = (self.types.get(type_url), self.streams.get_mut(&stream)) else {
            return;
        };
        let Some(sub) = st.subs.get_mut(type_url) else {
            return;
        };
        let mut resources = Vec::new();
        for (name, (version, body)) in &ty.resources {
            if sub.wants(name) && sub.sent.get(name) != Some(version) {
                sub.sent.insert(name.clone(), version.clone());
                resources.push(Resource {
                    name: name.clone(),
                    version: version.clone(),
                    resource: Some(body.clone()),
                    ..Resource::default()
                });
            }
        }
        let gone = sub.sent.keys().filter(|n| !ty.resources.contains_key(*n));
        let mut removed: BTreeSet<String> = gone.cloned().collect();
        removed.extend(extra.iter().cloned());
        for n in &removed {
            sub.sent.remove(n);
        }
        if resources.is_empty() && removed.is_empty() && !always {
            return;
        }
        let resp = DeltaDiscoveryResponse {
            system_version_info: ty.version.clone(),
            resources,
            type_url: type_url.to_owned(),
            removed_resources: removed.into_iter().collect(),
            nonce: next_nonce(),
            ..DeltaDiscoveryResponse::default()
        };
        let names = resp.resources.iter();
        self.responses.push(DeltaSent {
            stream,
            type_url: type_url.to_owned(),
            nonce: resp.nonce.clone(),
            system_version_info: resp.system_version_info.clone(),
            resources: names.map(|r| (r.name.clone(), r.version.clone())).collect(),
            removed_resources: resp.removed_resources.clone(),
        });
        st.outbox.push(resp);
    }

    /// Pushes to every stream subscribed to `type_url`.
    fn push_all(&mut self, type_url: &str, extra: &[String]) {
        let ids: Vec<u64> = self.streams.keys().copied().collect();
        for id in ids {
            self.push(id, type_url, extra, false);
        }
    }

    fn on_request(&mut self, stream: u64, req: &DeltaDiscoveryRequest) {
        self.requests.push(DeltaRequest::new(stream, req));
        let Some(st) = self.streams.get_mut(&stream) else {
            return;
        };
        let t = req.type_url.as_str();
        let first = !st.subs.contains_key(t);
        let sub = st.subs.entry(t.to_owned()).or_default();
        if first {
            // Legacy wildcard: no names on the first request of a type that
            // has wildcard semantics.
            let legacy = t == type_url::LISTENER || t == type_url::CLUSTER;
            sub.wildcard = legacy && req.resource_names_subscribe.is_empty();
        }
        // `*` is the explicit wildcard; the client forgets what it
        // unsubscribes, so a later subscribe sends it again.
        let subscribe = req.resource_names_subscribe.iter();
        sub.wildcard |= subscribe.clone().any(|n| n == "*");
        sub.names.extend(subscribe.filter(|n| *n != "*").cloned());
        for n in &req.resource_names_unsubscribe {
            sub.wildcard &= n != "*";
            sub.names.remove(n);
            sub.sent.remove(n);
        }
        if first {
            // What the client says it holds counts as sent; `push` removes
            // what the server does not have.
            for (n, v) in &req.initial_resource_versions {
                if sub.wants(n) {
                    sub.sent.insert(n.clone(), v.clone());
                }
            }
        }
        let changed = !req.resource_names_subscribe.is_empty();
        if first || changed {
            let always = first && sub.wildcard;
            self.push(stream, t, &[], always);
        }
    }

    fn describe(&self) -> String {
        let mut out = format!("recorded requests ({}):\n", self.requests.len());
        for r in &self.requests {
            let _ = writeln!(out, "  {r:?}");
        }
        let _ = writeln!(out, "responses sent ({}):", self.responses.len());
        for r in self.responses.iter().rev().take(20).rev() {
            let _ = writeln!(out, "  {r:?}");
        }
        out
    }
}

struct Shared {
    state: Mutex<State>,
    stop: AtomicBool,
}

impl Shared {
    /// A failed assertion elsewhere must not poison every later call.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Stopping for Shared {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
}

/// A Delta ADS server on its own thread; dropping it stops it.
pub struct DeltaServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    join: Option<ExecutorJoinHandle<()>>,
}

impl DeltaServer {
    /// Starts a server on `127.0.0.1:0`. Panics if it cannot.
    pub fn start() -> DeltaServer {
        DeltaServer::start_on(SocketAddr::from(([127, 0, 0, 1], 0))).expect("delta server starts")
    }

    /// Starts a server on `addr` (e.g. a stopped server's, to test
    /// reconnection), retrying `EADDRINUSE` for a few seconds.
    pub fn start_on(addr: SocketAddr) -> io::Result<DeltaServer> {
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
            .name("delta-server")
            // The machine's memlock limit is small; glommio's default is larger.
            .io_memory(1 << 20)
            .spawn(move || async move {
                let fd = listener.into_raw_fd();
                // SAFETY: `fd` is a listening TCP socket we own; glommio takes it.
                let listener = unsafe { TcpListener::from_raw_fd(fd) };
                crate::h2c::serve(listener, fd, thread_shared, serve_stream).await;
            })
            .map_err(io::Error::from)?;
        Ok(DeltaServer {
            addr,
            shared,
            join: Some(join),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Makes `resources` the whole state of `type_url` at `version` and
    /// sends each subscribed stream its delta: resources whose body changed
    /// (they get `version` as their resource version; unchanged ones keep
    /// theirs) and removals of names it was sent that are gone.
    pub fn set(&self, type_url: &str, version: &str, resources: Vec<(String, Any)>) {
        let mut state = self.shared.lock();
        let ty = state.types.entry(type_url.to_owned()).or_default();
        let next = resources
            .into_iter()
            .map(|(name, body)| {
                let v = match ty.resources.get(&name) {
                    Some((v, old)) if *old == body => v.clone(),
                    _ => version.to_owned(),
                };
                (name, (v, body))
            })
            .collect();
        ty.version = version.to_owned();
        ty.resources = next;
        state.push_all(type_url, &[]);
    }

    /// Removes `names` from `type_url` and sends every subscribed stream a
    /// response naming all of them in `removed_resources`, whether or not
    /// the server has (or ever sent) them. The type's version is unchanged.
    pub fn remove(&self, type_url: &str, names: &[&str]) {
        let mut state = self.shared.lock();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let ty = state.types.entry(type_url.to_owned()).or_default();
        for n in &names {
            ty.resources.remove(n);
        }
        state.push_all(type_url, &names);
    }

    /// `n` responses back to back for `type_url` on every subscribed
    /// stream: each re-versions every resource (bodies unchanged) at
    /// `"<version>.f<i>"`, which becomes the type's version. Returns the
    /// last one.
    pub fn flood(&self, type_url: &str, n: usize) -> String {
        let mut state = self.shared.lock();
        let base = state.types.get(type_url).map(|t| t.version.clone());
        let base = base.unwrap_or_default();
        let mut last = base.clone();
        for i in 1..=n {
            last = format!("{base}.f{i}");
            let ty = state.types.entry(type_url.to_owned()).or_default();
            ty.version = last.clone();
            for (v, _) in ty.resources.values_mut() {
                *v = last.clone();
            }
            state.push_all(type_url, &[]);
        }
        last
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<DeltaRequest> {
        self.shared.lock().requests.clone()
    }

    /// Every response queued so far, in order.
    pub fn responses(&self) -> Vec<DeltaSent> {
        self.shared.lock().responses.clone()
    }

    /// The nonce of the last response for `type_url`, on any stream.
    pub fn last_nonce(&self, type_url: &str) -> Option<String> {
        let state = self.shared.lock();
        let last = state
            .responses
            .iter()
            .rev()
            .find(|r| r.type_url == type_url);
        last.map(|r| r.nonce.clone())
    }

    /// Waits (polling) until a recorded request satisfies `pred` and
    /// returns the first that does; panics after `timeout` with a dump of
    /// what was received and sent.
    pub fn wait_for(
        &self,
        timeout: Duration,
        pred: impl Fn(&DeltaRequest) -> bool,
    ) -> DeltaRequest {
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
                    panic!("delta server: no matching request within {timeout:?}\n{dump}");
                }
            }
            std::thread::sleep(POLL);
        }
    }

    /// Stops listening and ends every stream (`grpc-status: 14`). Also on Drop.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(join) = self.join.take() {
            let _ = join.join();
        }
        self.shared.lock().streams.clear();
    }
}

impl Drop for DeltaServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn grpc_status(code: u32) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(GRPC_STATUS, HeaderValue::from(code));
    h
}

async fn serve_stream(
    req: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    shared: Arc<Shared>,
) {
    let (parts, mut body) = req.into_parts();
    let mut resp = Response::new(());
    resp.headers_mut().insert(CONTENT_TYPE, APPLICATION_GRPC);
    if parts.method != Method::POST || parts.uri.path() != DELTA_PATH {
        // Trailers-only UNIMPLEMENTED (12): a SotW client is told plainly.
        resp.headers_mut().extend(grpc_status(12));
        let _ = respond.send_response(resp, true);
        return;
    }
    let Ok(mut send) = respond.send_response(resp, false) else {
        return;
    };
    let id = {
        let mut state = shared.lock();
        state.next_stream += 1;
        let id = state.next_stream;
        state.streams.insert(id, Stream::default());
        id
    };
    let end = run_stream(id, &mut body, &mut send, &shared).await;
    shared.lock().streams.remove(&id);
    match end {
        Some(code) => {
            let _ = send.send_trailers(grpc_status(code));
        }
        None => send.send_reset(Reason::CANCEL),
    }
}

fn frame(msg: &impl Message) -> Bytes {
    let mut buf = BytesMut::with_capacity(5 + msg.encoded_len());
    buf.put_u8(0);
    buf.put_u32(u32::try_from(msg.encoded_len()).unwrap_or(u32::MAX));
    let _ = msg.encode(&mut buf);
    buf.freeze()
}

/// Reads requests and writes queued responses until the client ends the
/// stream (Some(0)), the server stops (Some(14)) or the stream breaks (None).
async fn run_stream(
    id: u64,
    body: &mut RecvStream,
    send: &mut SendStream<Bytes>,
    shared: &Shared,
) -> Option<u32> {
    let mut buf = BytesMut::new();
    loop {
        // `data()` is cancel-safe: losing the race to the timer loses nothing.
        let next = or(async { Some(body.data().await) }, async {
            sleep(POLL).await;
            None
        })
        .await;
        match next {
            Some(Some(Ok(chunk))) => {
                let _ = body.flow_control().release_capacity(chunk.len());
                buf.extend_from_slice(&chunk);
                while buf.len() >= 5 {
                    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
                    // Compressed (flag 1) was never negotiated.
                    if buf[0] != 0 || len > MAX_MESSAGE {
                        return None;
                    }
                    if buf.len() < 5 + len {
                        break;
                    }
                    buf.advance(5);
                    let req = DeltaDiscoveryRequest::decode(buf.split_to(len)).ok()?;
                    shared.lock().on_request(id, &req);
                }
            }
            Some(Some(Err(_))) => return None,
            Some(None) => return Some(0),
            None => {}
        }
        if shared.stopping() {
            return Some(14);
        }
        let out = std::mem::take(&mut shared.lock().streams.get_mut(&id)?.outbox);
        for resp in &out {
            // Not waiting for capacity: h2 queues the frames (bounded by the
            // test's calls), and waiting would stop us reading requests.
            send.send_data(frame(resp), false).ok()?;
        }
    }
}
