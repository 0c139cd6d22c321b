//! Demo h2c backend: hello / echo / gRPC echo server with test control headers.
//!
//! Used by the README demo, by the gateway's integration tests and as the
//! upstream for benchmarks, so the hot path avoids allocations of its own:
//! response header values and the hello body are built once per executor and
//! cloned (reference counted) per request.
//!
//! Behaviour, for any method and path:
//! * `x-backend: NAME` on every response;
//! * a request body is streamed back chunk by chunk (with flow-control
//!   backpressure: received capacity is released only once the chunk has been
//!   handed to the response stream), request trailers are echoed as trailers;
//! * no body: `hello from NAME\n` as `text/plain`;
//! * control headers: `x-delay-ms`, `x-status`, `x-response-size`, `x-reset`;
//! * `x-echo-peer` (any value): the response names the connection it came
//!   over in `x-peer` (the client's address), so tests can see which
//!   upstream connection a proxy used;
//! * gRPC (`content-type: application/grpc*`): echo the framed messages, then
//!   trailers `grpc-status` (0 or `x-grpc-status`) and `grpc-message`
//!   (`x-grpc-message`, if given); `grpc.health.v1.Health/Check` answers
//!   SERVING;
//! * per-backend options ([`BackendOptions`]): a fixed `delay` before
//!   answering, a fixed HTTP `status` for every request, a trailers-only
//!   `grpc_status` for every gRPC request, extra `response_headers` (none
//!   of them set by default).

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, RawFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use bytes::Bytes;
use glommio::net::{TcpListener, TcpStream};
use glommio::sync::Semaphore;
use glommio::{ExecutorJoinHandle, LocalExecutorBuilder, Placement};
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderMap, Request, Response, StatusCode};
use tokio_util::compat::FuturesAsyncReadCompatExt;

/// Size of the chunks sent for `x-response-size`.
pub const RESPONSE_CHUNK: usize = 16 * 1024;

const X_BACKEND: HeaderName = HeaderName::from_static("x-backend");
const X_DELAY_MS: HeaderName = HeaderName::from_static("x-delay-ms");
const X_STATUS: HeaderName = HeaderName::from_static("x-status");
const X_RESPONSE_SIZE: HeaderName = HeaderName::from_static("x-response-size");
const X_RESET: HeaderName = HeaderName::from_static("x-reset");
const X_GRPC_STATUS: HeaderName = HeaderName::from_static("x-grpc-status");
const X_GRPC_MESSAGE: HeaderName = HeaderName::from_static("x-grpc-message");
const X_ECHO_PEER: HeaderName = HeaderName::from_static("x-echo-peer");
const X_PEER: HeaderName = HeaderName::from_static("x-peer");
const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");

const TEXT_PLAIN: HeaderValue = HeaderValue::from_static("text/plain");
const OCTET_STREAM: HeaderValue = HeaderValue::from_static("application/octet-stream");
const APPLICATION_GRPC: HeaderValue = HeaderValue::from_static("application/grpc");
const GRPC_OK: HeaderValue = HeaderValue::from_static("0");
/// The standard gRPC health service's one unary method.
const GRPC_HEALTH_CHECK: &str = "/grpc.health.v1.Health/Check";

/// Zeros backing `x-response-size` bodies: `Bytes::from_static` slices of it
/// cost no allocation and no copy.
static ZEROS: [u8; RESPONSE_CHUNK] = [0; RESPONSE_CHUNK];

/// Configuration of one backend (one listener).
#[derive(Debug, Clone)]
pub struct BackendOptions {
    /// Sent as `x-backend` and in the hello body.
    pub name: String,
    /// HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS advertised to clients.
    pub max_concurrent_streams: u32,
    /// Per-stream receive window (bytes).
    pub initial_window_size: u32,
    /// Per-connection receive window (bytes).
    pub initial_connection_window_size: u32,
    /// Requests served so far (incremented when a request's headers arrive).
    /// Atomic so that the thread that started the backend can read it.
    pub requests: Arc<AtomicU64>,
    /// Added before answering every request (on top of `x-delay-ms`), e.g.
    /// to make one backend of a cluster slow. Default: none.
    pub delay: Duration,
    /// Answer every request (gRPC ones too) with this HTTP status, headers
    /// only, without reading the request body, e.g. to make one backend of
    /// a cluster fail. Default: `None` (normal behaviour).
    pub status: Option<u16>,
    /// Answer every gRPC request trailers-only (HTTP 200, `grpc-status` in
    /// the response headers, END_STREAM) with this gRPC status, without
    /// reading the request body. Default: `None` (echo as usual).
    pub grpc_status: Option<u32>,
    /// Extra `(name, value)` headers on every response (invalid ones are
    /// skipped). Default: none.
    pub response_headers: Vec<(String, String)>,
    /// A `set-cookie` value sent on responses to requests that carry no
    /// `cookie` header (benchmarks: clients carrying session-sized cookies
    /// without the gateway's session filter).
    pub set_cookie_once: Option<String>,
    /// Connections this backend cut off with GOAWAY(ENHANCE_YOUR_CALM):
    /// the `h2` crate's own rapid-reset defence (more than 20 streams
    /// reset before it accepted them) tripped. Tests read it to check the
    /// gateway never forwards a flood.
    pub calm_goaways: Arc<AtomicU64>,
}

impl BackendOptions {
    /// Defaults: 1024 concurrent streams, 1 MiB stream / 16 MiB connection windows.
    pub fn new(name: impl Into<String>) -> Self {
        BackendOptions {
            name: name.into(),
            max_concurrent_streams: 1024,
            initial_window_size: 1 << 20,
            initial_connection_window_size: 16 << 20,
            requests: Arc::new(AtomicU64::new(0)),
            delay: Duration::ZERO,
            status: None,
            grpc_status: None,
            response_headers: Vec::new(),
            set_cookie_once: None,
            calm_goaways: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl Default for BackendOptions {
    fn default() -> Self {
        BackendOptions::new("backend")
    }
}

/// Per-executor state shared by all connections of one listener, built once
/// so that requests only clone reference-counted values.
struct Ctx {
    opts: Rc<BackendOptions>,
    name: HeaderValue,
    /// `opts.response_headers`, parsed.
    extra_headers: Vec<(HeaderName, HeaderValue)>,
    /// `opts.set_cookie_once`, parsed.
    set_cookie_once: Option<HeaderValue>,
    hello: Bytes,
    hello_len: HeaderValue,
    builder: h2::server::Builder,
}

impl Ctx {
    fn new(opts: Rc<BackendOptions>) -> Ctx {
        let name = HeaderValue::from_str(&opts.name).unwrap_or(HeaderValue::from_static("backend"));
        let hello = Bytes::from(format!("hello from {}\n", opts.name));
        let hello_len = HeaderValue::from(hello.len());
        let extra_headers = opts
            .response_headers
            .iter()
            .filter_map(|(k, v)| {
                Some((
                    HeaderName::try_from(k).ok()?,
                    HeaderValue::try_from(v).ok()?,
                ))
            })
            .collect();
        let set_cookie_once = opts
            .set_cookie_once
            .as_deref()
            .and_then(|v| HeaderValue::try_from(v).ok());
        let mut builder = h2::server::Builder::new();
        builder
            .max_concurrent_streams(opts.max_concurrent_streams)
            .initial_window_size(opts.initial_window_size)
            .initial_connection_window_size(opts.initial_connection_window_size);
        Ctx {
            opts,
            name,
            extra_headers,
            set_cookie_once,
            hello,
            hello_len,
            builder,
        }
    }
}

/// Serves h2c on `listener`, on the current glommio executor, forever.
pub async fn serve(listener: TcpListener, opts: Rc<BackendOptions>) {
    serve_until(listener, opts, std::future::pending()).await
}

/// Serves h2c on `listener` until `shutdown` resolves; then stops accepting
/// and closes every connection it opened (in-flight streams are dropped).
pub async fn serve_until(
    listener: TcpListener,
    opts: Rc<BackendOptions>,
    shutdown: impl Future<Output = ()>,
) {
    serve_inner(listener, None, opts, shutdown).await
}

/// `listener_fd`, when known, is shut down on stop: glommio keeps an
/// io_uring accept in flight on the listener, and that reference keeps the
/// socket listening after `close` until the ring is torn down (asynchronously
/// in the kernel), so a stopped backend could still complete handshakes.
async fn serve_inner(
    listener: TcpListener,
    listener_fd: Option<RawFd>,
    opts: Rc<BackendOptions>,
    shutdown: impl Future<Output = ()>,
) {
    let ctx = Rc::new(Ctx::new(opts));
    // A semaphore with no permits is a cheap local broadcast: closing it
    // fails every pending `acquire`, which ends each connection task.
    let stop = Rc::new(Semaphore::new(0));
    let accept_loop = async {
        loop {
            match listener.accept().await {
                Ok(stream) => {
                    let ctx = ctx.clone();
                    let stop = stop.clone();
                    let fd = stream.as_raw_fd();
                    glommio::spawn_local(async move {
                        futures_lite::future::or(serve_conn(stream, ctx), async {
                            let _ = stop.acquire(1).await;
                            // Same reason as for the listener: make the peer
                            // see the close now. `serve_conn`, which owns the
                            // fd, is still alive here, so the fd is valid.
                            // SAFETY: plain syscall on a valid fd.
                            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
                        })
                        .await
                    })
                    .detach();
                }
                Err(e) => {
                    // Typically EMFILE: back off instead of spinning.
                    tracing::warn!(error = %e, "demo backend: accept failed");
                    glommio::timer::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    };
    futures_lite::future::or(accept_loop, shutdown).await;
    if let Some(fd) = listener_fd {
        // SAFETY: `listener` owns this fd and is still alive.
        unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
    }
    drop(listener);
    stop.close();
    // Let the connection tasks observe the close before our caller (maybe an
    // executor about to exit) moves on.
    futures_lite::future::yield_now().await;
}

async fn serve_conn(stream: TcpStream, ctx: Rc<Ctx>) {
    // Responses are small frames that must not wait for Nagle.
    let _ = stream.set_nodelay(true);
    let peer = stream
        .peer_addr()
        .ok()
        .and_then(|a| HeaderValue::from_str(&a.to_string()).ok());
    let mut conn = match ctx.builder.handshake::<_, Bytes>(stream.compat()).await {
        Ok(conn) => conn,
        Err(e) => {
            tracing::debug!(error = %e, "demo backend: handshake failed");
            return;
        }
    };
    // `accept` also drives the connection (I/O for every stream), so keep
    // calling it; streams run in their own tasks.
    while let Some(next) = conn.accept().await {
        match next {
            Ok((req, respond)) => {
                let (ctx, peer) = (ctx.clone(), peer.clone());
                glommio::spawn_local(async move {
                    if let Err(e) = handle(req, respond, &ctx, peer).await {
                        tracing::debug!(error = %e, "demo backend: stream error");
                    }
                })
                .detach();
            }
            Err(e) => {
                if e.is_library() && e.reason() == Some(h2::Reason::ENHANCE_YOUR_CALM) {
                    ctx.opts.calm_goaways.fetch_add(1, Ordering::Relaxed);
                }
                tracing::debug!(error = %e, "demo backend: connection error");
                break;
            }
        }
    }
}

fn header_u64(headers: &HeaderMap, name: &HeaderName) -> Option<u64> {
    headers.get(name)?.to_str().ok()?.trim().parse().ok()
}

async fn handle(
    req: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    ctx: &Ctx,
    peer: Option<HeaderValue>,
) -> Result<(), h2::Error> {
    ctx.opts.requests.fetch_add(1, Ordering::Relaxed);
    let (parts, mut body) = req.into_parts();
    let headers = &parts.headers;

    if header_u64(headers, &X_RESET) == Some(1) {
        respond.send_reset(Reason::INTERNAL_ERROR);
        return Ok(());
    }
    if !ctx.opts.delay.is_zero() {
        glommio::timer::sleep(ctx.opts.delay).await;
    }
    if let Some(ms) = header_u64(headers, &X_DELAY_MS) {
        glommio::timer::sleep(Duration::from_millis(ms)).await;
    }
    if let Some(status) = ctx.opts.status {
        let mut resp = Response::new(());
        *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
        resp.headers_mut().insert(X_BACKEND, ctx.name.clone());
        for (k, v) in &ctx.extra_headers {
            resp.headers_mut().append(k.clone(), v.clone());
        }
        respond.send_response(resp, true)?;
        return Ok(());
    }

    let status = header_u64(headers, &X_STATUS)
        .and_then(|s| u16::try_from(s).ok())
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::OK);
    let mut resp = Response::new(());
    *resp.status_mut() = status;
    resp.headers_mut().insert(X_BACKEND, ctx.name.clone());
    if let Some(peer) = peer.filter(|_| headers.contains_key(X_ECHO_PEER)) {
        resp.headers_mut().insert(X_PEER, peer);
    }
    for (k, v) in &ctx.extra_headers {
        resp.headers_mut().append(k.clone(), v.clone());
    }
    if let Some(c) = &ctx.set_cookie_once {
        if !headers.contains_key(http::header::COOKIE) {
            resp.headers_mut()
                .append(http::header::SET_COOKIE, c.clone());
        }
    }

    // HEAD gets the head a GET would, without its body (RFC 9110 §9.3.2).
    let head_only = parts.method == http::Method::HEAD;
    let is_grpc = headers
        .get(CONTENT_TYPE)
        .is_some_and(|ct| ct.as_bytes().starts_with(b"application/grpc"));

    if is_grpc {
        *resp.status_mut() = StatusCode::OK;
        resp.headers_mut().insert(CONTENT_TYPE, APPLICATION_GRPC);
        if let Some(code) = ctx.opts.grpc_status {
            // Trailers-only: the status rides on the response headers.
            resp.headers_mut()
                .insert(GRPC_STATUS, HeaderValue::from(code));
            respond.send_response(resp, true)?;
            return Ok(());
        }
        let mut send = respond.send_response(resp, false)?;
        if parts.uri.path() == GRPC_HEALTH_CHECK {
            // grpc.health.v1: every service SERVING (a HealthCheckResponse
            // with status 1), so gateways can check this backend.
            drain(&mut body).await?;
            send.send_data(Bytes::from_static(&[0, 0, 0, 0, 2, 0x08, 0x01]), false)?;
        } else if !body.is_end_stream() {
            // The request messages are already length-prefixed frames, so
            // echoing the bytes echoes the messages.
            pump(&mut body, &mut send, false).await?;
        }
        let mut trailers = HeaderMap::with_capacity(2);
        let grpc_status = headers.get(X_GRPC_STATUS).cloned().unwrap_or(GRPC_OK);
        trailers.insert(GRPC_STATUS, grpc_status);
        if let Some(msg) = headers.get(X_GRPC_MESSAGE) {
            trailers.insert(GRPC_MESSAGE, msg.clone());
        }
        send.send_trailers(trailers)?;
    } else if let Some(size) = header_u64(headers, &X_RESPONSE_SIZE) {
        // The request body (if any) is not echoed here: consume it so the
        // client's flow-control window does not stall.
        drain(&mut body).await?;
        resp.headers_mut().insert(CONTENT_TYPE, OCTET_STREAM);
        resp.headers_mut()
            .insert(CONTENT_LENGTH, HeaderValue::from(size));
        if size == 0 || head_only {
            respond.send_response(resp, true)?;
        } else {
            let mut send = respond.send_response(resp, false)?;
            let mut left = size as usize;
            while left > 0 {
                let n = left.min(RESPONSE_CHUNK);
                left -= n;
                let chunk = Bytes::from_static(&ZEROS[..n]);
                send_all(&mut send, chunk, left == 0).await?;
            }
        }
    } else if !body.is_end_stream() {
        let ct = headers.get(CONTENT_TYPE).cloned().unwrap_or(OCTET_STREAM);
        resp.headers_mut().insert(CONTENT_TYPE, ct);
        if let Some(len) = headers.get(CONTENT_LENGTH) {
            resp.headers_mut().insert(CONTENT_LENGTH, len.clone());
        }
        let mut send = respond.send_response(resp, false)?;
        if let Some(trailers) = pump(&mut body, &mut send, true).await? {
            send.send_trailers(trailers)?;
        }
    } else {
        resp.headers_mut().insert(CONTENT_TYPE, TEXT_PLAIN);
        resp.headers_mut()
            .insert(CONTENT_LENGTH, ctx.hello_len.clone());
        if head_only {
            respond.send_response(resp, true)?;
            return Ok(());
        }
        let mut send = respond.send_response(resp, false)?;
        // Small: no need to wait for capacity, h2 buffers it.
        send.send_data(ctx.hello.clone(), true)?;
    }
    Ok(())
}

/// Streams the request body into `send`. With `may_end`, END_STREAM goes on
/// the last DATA frame (h2 ≥ 0.4.16 penalises empty trailing frames under
/// load) unless the request ends with trailers, which are returned so the
/// caller can echo them; without `may_end` the stream is left open.
async fn pump(
    body: &mut RecvStream,
    send: &mut SendStream<Bytes>,
    may_end: bool,
) -> Result<Option<HeaderMap>, h2::Error> {
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let n = chunk.len();
        let last = may_end && body.is_end_stream();
        send_all(send, chunk, last).await?;
        // Released only after the chunk was accepted by the response stream:
        // this is what propagates the client's backpressure to the sender.
        body.flow_control().release_capacity(n)?;
        if last {
            return Ok(None);
        }
    }
    let trailers = body.trailers().await?;
    if trailers.is_none() && may_end {
        send.send_data(Bytes::new(), true)?;
    }
    Ok(trailers)
}

/// Sends `data`, waiting for peer flow-control capacity so that at most a
/// window's worth is buffered in h2.
async fn send_all(
    send: &mut SendStream<Bytes>,
    mut data: Bytes,
    end: bool,
) -> Result<(), h2::Error> {
    if data.is_empty() {
        if end {
            send.send_data(data, true)?;
        }
        return Ok(());
    }
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        let mut cap = send.capacity();
        while cap == 0 {
            cap = match poll_fn(|cx| send.poll_capacity(cx)).await {
                Some(r) => r?,
                None => return Err(h2::Error::from(Reason::CANCEL)),
            };
        }
        let part = data.split_to(cap.min(data.len()));
        send.send_data(part, end && data.is_empty())?;
    }
    Ok(())
}

/// Reads and discards a request body, releasing its capacity.
async fn drain(body: &mut RecvStream) -> Result<(), h2::Error> {
    while let Some(chunk) = body.data().await {
        let n = chunk?.len();
        body.flow_control().release_capacity(n)?;
    }
    Ok(())
}

/// A backend served on a dedicated thread (see [`spawn_thread`]); dropping it
/// (or [`BackendHandle::stop`]) stops the server and joins the thread.
pub struct BackendHandle {
    addr: SocketAddr,
    requests: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    join: Option<ExecutorJoinHandle<()>>,
}

impl BackendHandle {
    /// The bound address (the real port when bound to port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests received so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Shared counter, for callers that outlive the handle.
    pub fn requests_counter(&self) -> Arc<AtomicU64> {
        self.requests.clone()
    }

    /// Stops accepting, closes all connections and joins the thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(join) = self.join.take() {
            let _ = join.join();
        }
    }
}

impl Drop for BackendHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// How often the backend thread checks its stop flag: stop latency vs
/// wake-ups of an otherwise idle benchmark backend.
const STOP_POLL: Duration = Duration::from_millis(10);

/// Starts a backend on its own thread and glommio executor (optionally pinned
/// to `pin_cpu`), bound to `addr` (port 0 picks a free port).
pub fn spawn_thread(
    addr: SocketAddr,
    opts: BackendOptions,
    pin_cpu: Option<usize>,
) -> io::Result<BackendHandle> {
    let (tx, rx) = mpsc::channel::<io::Result<SocketAddr>>();
    let stop = Arc::new(AtomicBool::new(false));
    let requests = opts.requests.clone();
    let placement = pin_cpu.map_or(Placement::Unbound, Placement::Fixed);
    let thread_stop = stop.clone();
    let join = LocalExecutorBuilder::new(placement)
        .name(&format!("backend-{}", opts.name))
        // The machine's memlock limit is small; glommio's default is larger.
        .io_memory(1 << 20)
        .spawn(move || async move {
            // Bound with std so that we know the fd (see `serve_inner`).
            let std_listener = match std::net::TcpListener::bind(addr) {
                Ok(l) => l,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            let fd = std_listener.into_raw_fd();
            // SAFETY: `fd` is a listening TCP socket we own; glommio takes it.
            let listener = unsafe { TcpListener::from_raw_fd(fd) };
            match listener.local_addr() {
                Ok(a) => {
                    let _ = tx.send(Ok(a));
                }
                Err(e) => {
                    let _ = tx.send(Err(e.into()));
                    return;
                }
            }
            let shutdown = async move {
                while !thread_stop.load(Ordering::Relaxed) {
                    glommio::timer::sleep(STOP_POLL).await;
                }
            };
            serve_inner(listener, Some(fd), Rc::new(opts), shutdown).await;
        })
        .map_err(io::Error::from)?;
    let addr = match rx.recv() {
        Ok(Ok(addr)) => addr,
        Ok(Err(e)) => {
            let _ = join.join();
            return Err(e);
        }
        Err(_) => {
            let _ = join.join();
            return Err(io::Error::other("backend thread exited before binding"));
        }
    };
    Ok(BackendHandle {
        addr,
        requests,
        stop,
        join: Some(join),
    })
}

/// A backend spawned on the current executor (see [`spawn_local`]); dropping
/// it cancels the server task.
pub struct LocalBackend {
    addr: SocketAddr,
    requests: Arc<AtomicU64>,
    stop: Rc<Cell<bool>>,
    task: Option<glommio::Task<()>>,
}

impl LocalBackend {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests received so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Stops the server and closes its connections.
    pub async fn stop(mut self) {
        self.stop.set(true);
        if let Some(task) = self.task.take() {
            task.await;
        }
    }
}

impl Drop for LocalBackend {
    fn drop(&mut self) {
        // Dropping a glommio task would cancel it before `serve_until` closes
        // its connections; detach it instead so it sees the flag and cleans up.
        self.stop.set(true);
        if let Some(task) = self.task.take() {
            task.detach();
        }
    }
}

/// Spawns [`serve_until`] on the current glommio executor.
pub fn spawn_local(listener: TcpListener, opts: BackendOptions) -> io::Result<LocalBackend> {
    let addr = listener.local_addr()?;
    let requests = opts.requests.clone();
    let stop = Rc::new(Cell::new(false));
    let flag = stop.clone();
    let task = glommio::spawn_local(async move {
        let shutdown = async move {
            while !flag.get() {
                glommio::timer::sleep(STOP_POLL).await;
            }
        };
        serve_until(listener, Rc::new(opts), shutdown).await;
    });
    Ok(LocalBackend {
        addr,
        requests,
        stop,
        task: Some(task),
    })
}
