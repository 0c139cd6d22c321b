//! The request path of one downstream stream, in phases:
//!
//! 1. **route**: virtual host by `:authority`, first matching route;
//! 2. **cluster**: the route's cluster (or a weighted pick), then a host:
//!    the session's override host when the stateful session filter applies
//!    and the host may serve, else the cluster's policy;
//! 3. **upstream**: a stream slot from the host's pool, request headers
//!    rewritten (hop-by-hop stripped, `x-forwarded-for` appended);
//! 4. **forward**: bodies stream both ways under h2 flow control (a chunk is
//!    read only once the other side has window for it, so nothing is
//!    buffered whole), trailers pass through;
//! 5. **finish**: stats, the outcome for outlier detection, and on failure a
//!    local reply as Envoy makes it. Responses from a host other than the
//!    session's carry the new session (`set-cookie` or the session header).
//!
//! The route timeout bounds phases 3–4; the downstream client resetting its
//! stream aborts the upstream stream at any phase.

use std::cell::Cell;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use engine::headers::{
    append_forwarded_for, is_grpc_content_type, is_hop_by_hop, keep_te, HOP_BY_HOP,
};
use engine::outlier::{grpc_to_http, CallResult};
use engine::route::{rewrite_path, route_request_in, RequestView};
use engine::{Listener, Route};
use futures_lite::future;
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use http::header::{HeaderName, HeaderValue};
use http::request::Parts;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderMap, Method, Request, Response, Uri};

use crate::body::{pump, Activity, PumpError};
use crate::downstream::ConnState;
use crate::local_reply::LocalReply;
use crate::pool::{Lease, PoolError, MAX_CONNS_PER_HOST};
use crate::session::RequestSession;
use crate::shard::Shard;
use crate::stats::{DownstreamStats, HostStats};
use crate::tick::{Ticker, TICK};

/// Attempts per request when upstreams refuse streams before processing them.
const MAX_ATTEMPTS: u32 = 3;

static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// Lets the engine's matcher read an h2 request without copying it.
struct PartsView<'a>(&'a Parts);

impl RequestView for PartsView<'_> {
    fn authority(&self) -> &str {
        self.0
            .uri
            .authority()
            .map(Authority::as_str)
            .or_else(|| self.0.headers.get("host").and_then(|v| v.to_str().ok()))
            .unwrap_or("")
    }
    fn path(&self) -> &str {
        self.0
            .uri
            .path_and_query()
            .map_or("/", PathAndQuery::as_str)
    }
    fn method(&self) -> &str {
        self.0.method.as_str()
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.0.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Decrements a gauge when the stream ends, however it ends.
struct Gauge<'a>(&'a crate::stats::Counter);

impl<'a> Gauge<'a> {
    fn enter(c: &'a crate::stats::Counter) -> Self {
        c.inc();
        Self(c)
    }
}

impl Drop for Gauge<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Serves one downstream stream to completion.
pub async fn serve_stream(
    shard: Rc<Shard>,
    conn: Rc<ConnState>,
    listener: Rc<Arc<Listener>>,
    peer: SocketAddr,
    req: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
) {
    let stats = &shard.stats.downstream;
    stats.rq_total.inc();
    let _active = Gauge::enter(&stats.rq_active);
    let snap = shard.snapshot();
    let (parts, body) = req.into_parts();
    let grpc = parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| is_grpc_content_type(v.as_bytes()));

    // Phase 1: route, by the listener's current config (route changes apply
    // to open connections at once), or by the config the connection was
    // accepted under if a reload removed the listener while it drains.
    let hcm = match snap.listener(&listener.name) {
        Some(l) => &l.http,
        None => &listener.http,
    };
    let Some((vhost, route)) = route_request_in(&hcm.route_config, &PartsView(&parts)) else {
        stats.rq_no_route.inc();
        let status = LocalReply::NoRoute.send(&mut respond, grpc);
        stats.responses.record(status);
        return;
    };
    let sess_stats = &shard.stats.session;
    let session = RequestSession::for_route(hcm, vhost, route, &parts, sess_stats);

    // Phase 2: cluster and host.
    let cluster_name = shard.choose_cluster(route, session.as_ref(), &snap);
    let Some(cluster) = snap.cluster(cluster_name) else {
        shard.stats.rq_unknown_cluster.inc();
        stats
            .responses
            .record(LocalReply::UnknownCluster.send(&mut respond, grpc));
        return;
    };
    let host = match shard.choose_host(cluster, session.as_ref()) {
        Ok(h) => h,
        Err(reply) => {
            stats.responses.record(reply.send(&mut respond, grpc));
            return;
        }
    };
    let host_stats = shard.stats.hosts.host(host.id);
    host_stats.rq_total.inc();
    let _host_active = Gauge::enter(&host_stats.rq_active);
    let pool = shard.pool(host, cluster);
    // In flight on this shard until the stream ends, whatever the outcome:
    // what least request compares (A48).
    let _in_flight = pool.enter();
    let session_header = session
        .as_ref()
        .and_then(|s| s.response_header(host.address, shard.cookie_format));

    // Phase 3 and 4 under the route timeout.
    let upstream_req =
        UpstreamRequest::new(parts, route, hcm.append_x_forwarded_for.then_some(peer));
    let headers_sent = Cell::new(false);
    let served = Cell::new(None);
    // Read once: every call on an h2 handle takes the connection's lock.
    let req_eos = body.is_end_stream();
    let clock = Rc::new(StreamClock::new(req_eos));
    let ctx = ForwardCtx {
        pool: &pool,
        headers_sent: &headers_sent,
        served: &served,
        host_stats,
        down_stats: stats,
        clock: &clock,
        session_header: session_header.as_ref(),
    };
    let work = forward(&ctx, upstream_req, (body, req_eos), &mut respond);
    let outcome = future::or(work, async {
        let limits = (route.action.timeout, hcm.stream_idle_timeout);
        Err(watchdog(limits, &clock, &shard.ticker).await)
    })
    .await;

    // Phase 5: finish. The session header went out with any response
    // headers: the upstream's, or the local reply below.
    if session_header.is_some() && (headers_sent.get() || matches!(outcome, Err(Failure::Local(_))))
    {
        sess_stats.session_set.inc();
    }
    let mut failure = match outcome {
        Ok(()) => {
            if let Some(s) = served.get() {
                shard.record_outlier(cluster, host, s.call_result(grpc));
            }
            return;
        }
        Err(f) => f,
    };
    // The client's request body broke off and we cancelled the upstream
    // stream: the upstream's error is our doing, not the host's.
    if clock.client_body_broke.get() && matches!(failure, Failure::Local(LocalReply::UpstreamReset))
    {
        failure = Failure::ClientGone;
    }
    match failure {
        Failure::ClientGone => {
            // Not the host's fault; but response headers that arrived
            // count, as Envoy counts the status when headers arrive.
            if let Some(s) = served.get() {
                shard.record_outlier(cluster, host, s.call_result(grpc));
            }
            stats.rq_reset_by_client.inc();
            conn.client_reset();
        }
        Failure::Local(reply) => {
            let result = match reply {
                LocalReply::UpstreamTimeout => {
                    stats.rq_timeout.inc();
                    host_stats.rq_timeout.inc();
                    Some(CallResult::Timeout)
                }
                LocalReply::StreamIdleTimeout => {
                    stats.rq_idle_timeout.inc();
                    None
                }
                LocalReply::UpstreamReset => {
                    host_stats.rq_reset.inc();
                    Some(CallResult::Reset)
                }
                LocalReply::ConnectFailure => Some(CallResult::ConnectFailure),
                _ => None,
            };
            if let Some(result) = result {
                shard.record_outlier(cluster, host, result);
            }
            if headers_sent.get() {
                // Headers already went out: the only honest signal left is a
                // reset.
                respond.send_reset(Reason::INTERNAL_ERROR);
            } else {
                // A host was chosen, so the session still moves to it
                // (Envoy sets the cookie on error replies too).
                let status = reply.send_with(&mut respond, grpc, session_header.as_ref());
                stats.responses.record(status);
                host_stats.responses.record(reply.status().as_u16());
            }
        }
    }
}

/// What the upstream answered, for outlier detection.
#[derive(Debug, Clone, Copy)]
struct Served {
    status: u16,
    /// `grpc-status` from a trailers-only response or the trailers.
    grpc_status: Option<u32>,
}

impl Served {
    /// For gRPC requests a `grpc-status` counts as the HTTP status Envoy
    /// maps it to; other requests are judged by their HTTP status.
    fn call_result(&self, grpc: bool) -> CallResult {
        match self.grpc_status.filter(|_| grpc) {
            Some(g) => CallResult::Status(grpc_to_http(g)),
            None => CallResult::Status(self.status),
        }
    }
}

/// When a stream last moved, and when its request finished: the inputs of
/// the route timeout and the stream idle timeout.
struct StreamClock {
    activity: Cell<Instant>,
    request_done: Cell<Option<Instant>>,
    /// The client's request body broke off (we cancelled the upstream).
    client_body_broke: Cell<bool>,
    /// The watchdog, waiting for the request to finish (which starts the
    /// route timeout).
    watchdog: Cell<Option<std::task::Waker>>,
}

impl Activity for StreamClock {
    fn touch(&self) {
        self.activity.set(Instant::now());
    }
}

impl StreamClock {
    fn new(request_done: bool) -> Self {
        let now = Instant::now();
        Self {
            activity: Cell::new(now),
            request_done: Cell::new(request_done.then_some(now)),
            client_body_broke: Cell::new(false),
            watchdog: Cell::new(None),
        }
    }

    fn finish_request(&self) {
        let now = Instant::now();
        self.activity.set(now);
        self.request_done.set(Some(now));
        if let Some(w) = self.watchdog.take() {
            w.wake();
        }
    }
}

/// Resolves when the stream must end: the route timeout (counted, as in
/// Envoy, from the end of the downstream request) or the stream idle
/// timeout (no byte moved either way). Never resolves if neither is set.
async fn watchdog(
    (route, idle): (Option<Duration>, Option<Duration>),
    clock: &StreamClock,
    ticker: &Ticker,
) -> Failure {
    let Some(shortest) = [route, idle].into_iter().flatten().min() else {
        return std::future::pending().await;
    };
    // Almost every stream ends within a couple of ticks: wait those out on
    // the shard's shared ticker and arm a precise timer only after that.
    if shortest > 3 * TICK {
        ticker.next().await;
        ticker.next().await;
    }
    loop {
        let now = Instant::now();
        let route_at = route
            .zip(clock.request_done.get())
            .map(|(t, done)| done + t);
        let idle_at = idle.map(|d| clock.activity.get() + d);
        if route_at.is_some_and(|at| now >= at) {
            return Failure::Local(LocalReply::UpstreamTimeout);
        }
        if idle_at.is_some_and(|at| now >= at) {
            return Failure::Local(LocalReply::StreamIdleTimeout);
        }
        let Some(next) = [route_at, idle_at].into_iter().flatten().min() else {
            // Only a route timeout, and the request is still arriving.
            request_finished(clock).await;
            continue;
        };
        let sleep = glommio::timer::sleep(next.saturating_duration_since(now));
        if route.is_some() && route_at.is_none() {
            // The request finishing starts the route timer: look again then.
            future::or(sleep, request_finished(clock)).await;
        } else {
            sleep.await;
        }
    }
}

/// Resolves once the request body has been sent upstream in full.
async fn request_finished(clock: &StreamClock) {
    poll_fn(|cx| {
        if clock.request_done.get().is_some() {
            Poll::Ready(())
        } else {
            clock.watchdog.set(Some(cx.waker().clone()));
            Poll::Pending
        }
    })
    .await
}

#[derive(Debug)]
enum Failure {
    /// The downstream client reset the stream or went away.
    ClientGone,
    /// Answer (or reset, if headers went out) as this local reply says.
    Local(LocalReply),
}

/// The request as it will be sent upstream; rebuilt for retries.
struct UpstreamRequest {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
}

impl UpstreamRequest {
    /// `peer` is appended to `x-forwarded-for` when given
    /// (`use_remote_address: true`).
    fn new(parts: Parts, route: &Route, peer: Option<SocketAddr>) -> Self {
        let Parts {
            method,
            uri,
            mut headers,
            ..
        } = parts;
        strip_hop_by_hop(&mut headers);
        never_index_cookies(&mut headers);
        if let Some(peer) = peer {
            let xff = append_forwarded_for(
                headers.get(&X_FORWARDED_FOR).and_then(|v| v.to_str().ok()),
                peer.ip(),
            );
            if let Ok(v) = HeaderValue::try_from(xff) {
                headers.insert(X_FORWARDED_FOR.clone(), v);
            }
        }
        let unchanged = route.action.host_rewrite_literal.is_none()
            && route.action.prefix_rewrite.is_none()
            && uri.scheme() == Some(&Scheme::HTTP)
            && uri.authority().is_some()
            && uri.path_and_query().is_some();
        if unchanged {
            // The common case: nothing to rewrite, so skip taking the URI
            // apart and re-validating it.
            return Self {
                method,
                uri,
                headers,
            };
        }
        let mut uri_parts = uri.into_parts();
        if let Some(host) = &route.action.host_rewrite_literal {
            if let Ok(a) = Authority::try_from(host.as_str()) {
                uri_parts.authority = Some(a);
            }
        }
        if route.action.prefix_rewrite.is_some() {
            let old = uri_parts
                .path_and_query
                .as_ref()
                .map_or("/", PathAndQuery::as_str);
            if let Some(p) = rewrite_path(route, old).and_then(|p| PathAndQuery::try_from(p).ok()) {
                uri_parts.path_and_query = Some(p);
            }
        }
        uri_parts.scheme = Some(Scheme::HTTP);
        if uri_parts.path_and_query.is_none() {
            uri_parts.path_and_query = Some(PathAndQuery::from_static("/"));
        }
        if uri_parts.authority.is_none() {
            uri_parts.authority = Some(Authority::from_static("upstream"));
        }
        let uri =
            Uri::from_parts(uri_parts).unwrap_or_else(|_| Uri::from_static("http://upstream/"));
        Self {
            method,
            uri,
            headers,
        }
    }

    fn build(&self) -> Request<()> {
        let mut req = Request::new(());
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = self.headers.clone();
        req
    }

    /// GET/HEAD/OPTIONS without a body may be retried whatever the refusal.
    fn idempotent(&self) -> bool {
        matches!(self.method, Method::GET | Method::HEAD | Method::OPTIONS)
    }
}

/// Cookies go upstream as HPACK "never indexed" literals. Session and
/// login cookies differ per client, and one upstream connection carries many
/// clients, so indexing them only churns the connection's 4 KiB dynamic
/// table (an insert and an eviction per request) for entries that are
/// evicted before they are reused; it would also let one client's cookie
/// sit in a table shared with others (RFC 7541 §7.1.3).
fn never_index_cookies(headers: &mut HeaderMap) {
    // `entry` may grow the map even when the name is absent: look first.
    if !headers.contains_key(http::header::COOKIE) {
        return;
    }
    if let http::header::Entry::Occupied(mut e) = headers.entry(http::header::COOKIE) {
        for v in e.iter_mut() {
            v.set_sensitive(true);
        }
    }
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // One pass over the (few) headers is cheaper than a hash lookup per
    // hop-by-hop name, and almost no request carries any.
    let any = headers
        .keys()
        .any(|k| k == http::header::TE || is_hop_by_hop(k.as_str().as_bytes()));
    if !any {
        return;
    }
    for name in HOP_BY_HOP {
        if headers.contains_key(name) {
            headers.remove(name);
        }
    }
    if let Some(te) = headers.get(http::header::TE) {
        if !keep_te(te.as_bytes()) {
            headers.remove(http::header::TE);
        }
    }
}

/// Whether a stream that failed before any response header may be resent on
/// another connection.
fn refused(e: &h2::Error, idempotent: bool) -> bool {
    resendable(e.reason(), e.is_go_away(), e.is_io(), idempotent)
}

fn resendable(reason: Option<Reason>, go_away: bool, io: bool, idempotent: bool) -> bool {
    // RST_STREAM(REFUSED_STREAM), and streams above a graceful GOAWAY's
    // last-stream-id, never reached the backend's application.
    if reason == Some(Reason::REFUSED_STREAM) || (go_away && reason == Some(Reason::NO_ERROR)) {
        return true;
    }
    // The connection died under the stream (an abrupt GOAWAY, a broken pipe:
    // e.g. the backend cut the connection for someone else's reset flood).
    // We cannot tell whether the backend processed it, so only requests that
    // are safe to repeat are resent.
    idempotent && (go_away || io)
}

/// What phases 3–4 of one stream share with the caller.
struct ForwardCtx<'a> {
    pool: &'a Rc<crate::pool::HostPool>,
    /// Set once response headers went downstream: failures after that can
    /// only reset the stream.
    headers_sent: &'a Cell<bool>,
    /// The upstream's status (and `grpc-status`), once its headers arrived.
    served: &'a Cell<Option<Served>>,
    host_stats: &'a HostStats,
    down_stats: &'a DownstreamStats,
    clock: &'a Rc<StreamClock>,
    /// The session (re)binding header for the response, if any.
    session_header: Option<&'a (HeaderName, HeaderValue)>,
}

async fn forward(
    ctx: &ForwardCtx<'_>,
    request: UpstreamRequest,
    (body, req_eos): (RecvStream, bool),
    respond: &mut SendResponse<Bytes>,
) -> Result<(), Failure> {
    let ForwardCtx {
        pool,
        headers_sent,
        served,
        host_stats,
        down_stats,
        clock,
        session_header,
    } = *ctx;
    let mut body = Some(body);
    let retryable = req_eos;
    // `attempt` counts requests that went out; connections found dead
    // before anything was sent are skipped (each is retired, so this ends).
    let mut attempt = 0;
    let mut dead_conns = 0;
    let (response, _lease, _pump) = loop {
        attempt += 1;
        let lease: Lease = wait_or_client_reset(pool.acquire(), respond)
            .await?
            .map_err(|PoolError::ConnectFailure(_)| Failure::Local(LocalReply::ConnectFailure))?;
        // A connection that fails before the request went out (closed,
        // GOAWAY) sent nothing: resending elsewhere is always safe.
        let sent = match wait_or_client_reset(lease.conn.sender().ready(), respond).await? {
            Ok(mut sender) => sender.send_request(request.build(), req_eos).ok(),
            Err(_) => None,
        };
        let Some((resp_fut, up_send)) = sent else {
            lease.conn.retire();
            attempt -= 1;
            dead_conns += 1;
            if dead_conns <= MAX_CONNS_PER_HOST {
                host_stats.rq_retry_refused.inc();
                continue;
            }
            return Err(Failure::Local(LocalReply::UpstreamReset));
        };
        // The request body streams in its own task so it can flow while we
        // wait for (and forward) the response.
        // (Only bodyless requests are retried, so the body is taken once.)
        let pump = if req_eos {
            None
        } else {
            body.take()
                .map(|b| glommio::spawn_local(pump_request(b, up_send, Rc::clone(clock))))
        };
        match wait_or_client_reset(resp_fut, respond).await? {
            Ok(resp) => break (resp, lease, pump),
            Err(e) => {
                if e.is_go_away() || e.is_io() {
                    lease.conn.retire();
                }
                if retryable && attempt < MAX_ATTEMPTS && refused(&e, request.idempotent()) {
                    host_stats.rq_retry_refused.inc();
                    continue;
                }
                return Err(Failure::Local(LocalReply::UpstreamReset));
            }
        }
    };

    let (mut parts, up_body) = response.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    if let Some((name, value)) = session_header {
        // The session cookie joins the upstream's own cookies; the session
        // header replaces any value the upstream sent (Envoy's `setCopy`),
        // so a client never reads a stale one first.
        if name == http::header::SET_COOKIE {
            parts.headers.append(name.clone(), value.clone());
        } else {
            parts.headers.insert(name.clone(), value.clone());
        }
    }
    let status = parts.status.as_u16();
    let grpc_status = crate::body::grpc_status(&parts.headers);
    served.set(Some(Served {
        status,
        grpc_status,
    }));
    let eos = up_body.is_end_stream();
    let mut down_send = respond
        .send_response(Response::from_parts(parts, ()), eos)
        .map_err(|_| Failure::ClientGone)?;
    headers_sent.set(true);
    host_stats.responses.record(status);
    down_stats.responses.record(status);
    if eos {
        return Ok(());
    }
    clock.touch();
    let mut up_body = up_body;
    match pump(&mut up_body, &mut down_send, &**clock).await {
        Ok(trailer_status) => {
            if let Some(t) = trailer_status {
                served.set(Some(Served {
                    status,
                    grpc_status: Some(t),
                }));
            }
            Ok(())
        }
        Err(PumpError::To) => Err(Failure::ClientGone),
        Err(PumpError::From) => Err(Failure::Local(LocalReply::UpstreamReset)),
    }
}

/// Awaits `fut` unless the downstream client resets its stream first.
async fn wait_or_client_reset<F: std::future::Future>(
    fut: F,
    respond: &mut SendResponse<Bytes>,
) -> Result<F::Output, Failure> {
    future::or(async { Ok(fut.await) }, async {
        let _ = poll_fn(|cx| respond.poll_reset(cx)).await;
        Err(Failure::ClientGone)
    })
    .await
}

async fn pump_request(mut from: RecvStream, mut to: SendStream<Bytes>, clock: Rc<StreamClock>) {
    match pump(&mut from, &mut to, &*clock).await {
        Ok(_) => clock.finish_request(),
        // The client's body broke off: the upstream must not take a
        // truncated body for a whole one.
        Err(PumpError::From) => {
            clock.client_body_broke.set(true);
            to.send_reset(Reason::CANCEL);
        }
        // The upstream went away; the response side reports it.
        Err(PumpError::To) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::{ClusterTarget, PathMatch, RouteAction, RouteMatch};

    fn route(prefix: &str, rewrite: Option<&str>, host: Option<&str>) -> Route {
        Route {
            name: "r".into(),
            matcher: RouteMatch {
                path: PathMatch::Prefix(prefix.into()),
                case_sensitive: true,
                headers: vec![],
            },
            action: RouteAction {
                target: ClusterTarget::Cluster("c".into()),
                timeout: None,
                prefix_rewrite: rewrite.map(Into::into),
                host_rewrite_literal: host.map(Into::into),
            },
            stateful_session: None,
        }
    }

    fn parts(uri: &str, headers: &[(&str, &str)]) -> Parts {
        let mut b = Request::builder().uri(uri);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn upstream_request_strips_hop_by_hop_and_appends_xff() {
        let p = parts(
            "http://front.example/api/x?q=1",
            &[
                ("connection", "close"),
                ("keep-alive", "5"),
                ("transfer-encoding", "chunked"),
                ("upgrade", "h2c"),
                ("te", "gzip"),
                ("x-forwarded-for", "192.0.2.1"),
                ("x-keep", "yes"),
            ],
        );
        let peer: Option<SocketAddr> = Some("10.1.2.3:5555".parse().unwrap());
        let up = UpstreamRequest::new(
            p,
            &route("/api/", Some("/v2/"), Some("back.internal")),
            peer,
        );
        for h in [
            "connection",
            "keep-alive",
            "transfer-encoding",
            "upgrade",
            "te",
        ] {
            assert!(!up.headers.contains_key(h), "{h} must be stripped");
        }
        assert_eq!(up.headers["x-forwarded-for"], "192.0.2.1, 10.1.2.3");
        assert!(!up.headers["x-keep"].is_sensitive());
        assert_eq!(up.headers["x-keep"], "yes");
        assert_eq!(up.uri.to_string(), "http://back.internal/v2/x?q=1");
    }

    #[test]
    fn cookies_go_upstream_never_indexed() {
        let mut b = Request::builder().uri("http://a/");
        for c in ["sess=\"Cg4xMjcuMC4wLjE6ODA4MA==\"", "a=b"] {
            b = b.header("cookie", c);
        }
        let p = b.body(()).unwrap().into_parts().0;
        let up = UpstreamRequest::new(p, &route("/", None, None), None);
        let cookies: Vec<_> = up.headers.get_all("cookie").iter().collect();
        assert_eq!(cookies.len(), 2);
        assert!(cookies.iter().all(|v| v.is_sensitive()));
    }

    #[test]
    fn te_trailers_is_kept_for_grpc() {
        let p = parts("http://a/", &[("te", "trailers")]);
        let up = UpstreamRequest::new(
            p,
            &route("/", None, None),
            Some("127.0.0.1:1".parse().unwrap()),
        );
        assert_eq!(up.headers["te"], "trailers");
        assert_eq!(up.headers["x-forwarded-for"], "127.0.0.1");
        // use_remote_address: false (Envoy's default) leaves XFF alone.
        let p = parts("http://a/", &[("x-forwarded-for", "1.1.1.1")]);
        let up = UpstreamRequest::new(p, &route("/", None, None), None);
        assert_eq!(up.headers["x-forwarded-for"], "1.1.1.1");
        assert_eq!(up.uri.to_string(), "http://a/");
    }

    #[test]
    fn refusals_that_are_safe_to_resend() {
        let refused_stream = h2::Error::from(Reason::REFUSED_STREAM);
        assert!(refused(&refused_stream, false));
        let cancel = h2::Error::from(Reason::CANCEL);
        assert!(!refused(&cancel, true));
        // A broken connection: GETs are resent, POSTs may have been processed.
        assert!(resendable(None, false, true, true));
        assert!(!resendable(None, false, true, false));
        // Abrupt GOAWAY (e.g. ENHANCE_YOUR_CALM) vs graceful.
        assert!(!resendable(
            Some(Reason::ENHANCE_YOUR_CALM),
            true,
            false,
            false
        ));
        assert!(resendable(
            Some(Reason::ENHANCE_YOUR_CALM),
            true,
            false,
            true
        ));
        assert!(resendable(Some(Reason::NO_ERROR), true, false, false));
    }
}
