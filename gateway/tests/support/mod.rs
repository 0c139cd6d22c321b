//! Test support: bootstraps built in code, gateways on port 0, demo
//! backends, and a small h2 client running on its own glommio executor.
#![allow(dead_code)]

pub mod grpc_echo;
pub mod h1_backend;
pub mod h1_client;
pub mod h2c_server;
pub mod health_server;
pub mod netns;
pub mod one_shot;
pub mod otlp;
pub mod process;
pub mod raw;
pub mod tls_client;
pub mod tunnel_backend;
pub mod yaml;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use demo_backend::{self, BackendHandle, BackendOptions};
use engine::*;
use glommio::net::TcpStream;
use glommio::{LocalExecutorBuilder, Placement};
use h2::client::SendRequest;
use http::{HeaderMap, Request, StatusCode};
use tokio_util::compat::FuturesAsyncReadCompatExt;

pub fn backend(name: &str) -> BackendHandle {
    backend_with(BackendOptions::new(name))
}

pub fn backend_with(opts: BackendOptions) -> BackendHandle {
    demo_backend::spawn_thread(SocketAddr::from(([127, 0, 0, 1], 0)), opts, None).expect("backend")
}

pub fn cluster(name: &str, addrs: &[SocketAddr]) -> Arc<Cluster> {
    Arc::new(Cluster {
        name: name.into(),
        connect_timeout: Duration::from_millis(500),
        lb_policy: LbPolicy::RoundRobin,
        endpoints: addrs
            .iter()
            .map(|a| Endpoint {
                address: *a,
                weight: 1,
                health: HealthStatus::Unknown,
                hostname: String::new(),
                check: Default::default(),
                placement: Default::default(),
            })
            .collect(),
        eds: None,
        dns: None,
        http2: UpstreamHttp2::default(),
        upstream: Default::default(),
        outlier_detection: None,
        per_connection_buffer_limit_bytes: engine::DEFAULT_PER_CONNECTION_BUFFER_LIMIT,
        common_lb: Default::default(),
        health_check: None,
        circuit_breakers: Default::default(),
        per_endpoint_stats: false,
    })
}

pub fn prefix_route(prefix: &str, cluster: &str, timeout: Option<Duration>) -> Route {
    Route {
        name: format!("{prefix}->{cluster}"),
        matcher: RouteMatch::new(PathMatch::Prefix(prefix.into())),
        action: RouteAction::Forward(ForwardAction {
            target: ClusterTarget::Cluster(cluster.into()),
            timeout,
            prefix_rewrite: None,
            regex_rewrite: None,
            host_rewrite: None,
            append_x_forwarded_host: false,
            cluster_not_found_status: 503,
            hash_policy: Vec::new(),
            retry_policy: None,
            hedge_on_per_try_timeout: false,
            attempt_count: (false, false),
            upgrades: Vec::new(),
            mirrors: Vec::new(),
            per_request_buffer_limit: None,
            max_grpc_timeout: None,
            grpc_timeout_offset: None,
        }),
        headers: Default::default(),
        decorator: None,
        per_filter: Default::default(),
    }
}

pub fn listener(routes: Vec<Route>) -> Arc<Listener> {
    Arc::new(Listener::single(
        "ingress",
        SocketAddr::from(([127, 0, 0, 1], 0)),
        engine::DEFAULT_PER_CONNECTION_BUFFER_LIMIT,
        None,
        HttpConnectionManager {
            stat_prefix: "ingress".into(),
            codec_type: Default::default(),
            http1: Default::default(),
            access_log: Vec::new(),
            route_config: Arc::new(RouteConfig {
                name: "rc".into(),
                virtual_hosts: vec![VirtualHost {
                    name: "all".into(),
                    domains: vec![DomainMatcher::Any],
                    routes,
                    per_filter: Default::default(),
                }],
            }),
            rds: None,
            max_concurrent_streams: DEFAULT_DOWNSTREAM_MAX_CONCURRENT_STREAMS,
            max_header_list_size: DEFAULT_MAX_HEADER_LIST_SIZE,
            max_headers_count: engine::DEFAULT_MAX_HEADERS_COUNT,
            headers_with_underscores_action: Default::default(),
            http2_flood: Default::default(),
            initial_stream_window_size: 1 << 20,
            initial_connection_window_size: 16 << 20,
            allow_connect: false,
            local_reply: None,
            idle_timeout: Some(Duration::from_secs(3600)),
            stream_idle_timeout: Some(Duration::from_secs(300)),
            max_stream_duration: None,
            request_headers_timeout: None,
            delayed_close_timeout: Duration::from_secs(1),
            request_timeout: None,
            max_connection_duration: None,
            max_requests_per_connection: None,
            drain_timeout: Duration::from_secs(1),
            // An edge listener (`use_remote_address: true`), with Envoy's
            // other defaults.
            trust: engine::ClientTrust {
                use_remote_address: true,
                ..Default::default()
            },
            request_id: Default::default(),
            add_user_agent: false,
            via: None,
            server_header: Default::default(),
            path_normalization: Default::default(),
            strip_host_port: Default::default(),
            strip_trailing_host_dot: false,
            append_x_forwarded_port: false,
            envoy_headers: true,
            http_filters: vec![engine::HttpFilter::router()],
            upgrades: Vec::new(),
        },
    ))
}

pub fn bootstrap(listener: Arc<Listener>, clusters: Vec<Arc<Cluster>>) -> Bootstrap {
    Bootstrap {
        node: Node::default(),
        admin: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        listeners: vec![listener],
        clusters,
        dynamic: None,
        runtime: Default::default(),
        overload: None,
        secrets: Default::default(),
    }
}

/// The drain of test gateways.
pub const DRAIN: shards::drain::DrainOptions = shards::drain::DrainOptions {
    time: Duration::from_secs(5),
    strategy: shards::drain::DrainStrategy::Immediate,
};

pub fn start(b: Bootstrap, shards: usize) -> gateway::GatewayHandle {
    gateway::start(
        b,
        gateway::Options {
            shards: Some(shards),
            cpus: None,
            // Every connection told at once, closed by 5 s: tests see a
            // drain's steps without waiting for a spread.
            drain: DRAIN,
            ..Default::default()
        },
    )
    .expect("gateway starts")
}

/// A gateway with one listener that sends everything to cluster `c` made of
/// `backends`; returns it with the listener's address.
pub fn gateway_for(backends: &[SocketAddr], shards: usize) -> (gateway::GatewayHandle, SocketAddr) {
    let gw = start(
        bootstrap(
            listener(vec![prefix_route("/", "c", None)]),
            vec![cluster("c", backends)],
        ),
        shards,
    );
    let addr = gw.listener("ingress").expect("listener bound");
    (gw, addr)
}

/// Runs an async client body on a fresh glommio executor thread.
pub fn client<F, Fut, T>(f: F) -> T
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T> + 'static,
    T: Send + 'static,
{
    LocalExecutorBuilder::new(Placement::Unbound)
        .io_memory(1 << 20)
        .spawn(f)
        .expect("client executor")
        .join()
        .expect("client thread")
}

pub async fn connect(addr: SocketAddr) -> SendRequest<Bytes> {
    connect_with(addr, 1 << 20).await
}

pub async fn connect_with(addr: SocketAddr, window: u32) -> SendRequest<Bytes> {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    tcp.set_nodelay(true).ok();
    let (send, conn) = h2::client::Builder::new()
        .initial_max_send_streams(100)
        .initial_window_size(window)
        .initial_connection_window_size(window.max(1 << 20))
        .handshake::<_, Bytes>(tcp.compat())
        .await
        .expect("handshake");
    glommio::spawn_local(async move {
        let _ = conn.await;
    })
    .detach();
    send
}

#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub trailers: Option<HeaderMap>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    pub fn grpc_status(&self) -> Option<&str> {
        self.header("grpc-status").or_else(|| {
            self.trailers
                .as_ref()
                .and_then(|t| t.get("grpc-status"))
                .and_then(|v| v.to_str().ok())
        })
    }
}

/// Sends a request (optional body and trailers) and reads the whole reply.
pub async fn request(
    client: &SendRequest<Bytes>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Bytes>,
    trailers: Option<HeaderMap>,
) -> Result<Reply, h2::Error> {
    let mut req = Request::builder()
        .method(method)
        .uri(format!("http://test.local{path}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(()).unwrap();
    let eos = body.is_none() && trailers.is_none();
    let mut sender = client.clone().ready().await?;
    let (resp, mut send) = sender.send_request(req, eos)?;
    // Send the body in its own task: an echoing upstream answers while we
    // still send, so reading and writing must overlap.
    let sending = glommio::spawn_local(async move {
        if let Some(mut b) = body {
            let last = trailers.is_none();
            while !b.is_empty() {
                send.reserve_capacity(b.len().min(1 << 20));
                let cap = match std::future::poll_fn(|cx| send.poll_capacity(cx)).await {
                    Some(Ok(c)) => c,
                    Some(Err(e)) => return Err(e),
                    None => return Ok(()),
                };
                let part = b.split_to(cap.min(b.len()));
                send.send_data(part, last && b.is_empty())?;
            }
        }
        if let Some(t) = trailers {
            send.send_trailers(t)?;
        }
        Ok::<(), h2::Error>(())
    });
    let resp = resp.await?;
    let (parts, mut body) = resp.into_parts();
    let mut buf = BytesMut::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
        buf.extend_from_slice(&chunk);
    }
    let trailers = body.trailers().await?;
    sending.await?;
    Ok(Reply {
        status: parts.status,
        headers: parts.headers,
        body: buf.freeze(),
        trailers,
    })
}

pub async fn get(
    client: &SendRequest<Bytes>,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<Reply, h2::Error> {
    request(client, "GET", path, headers, None, None).await
}

/// Fetches an admin page over plain HTTP/1.1.
/// A gateway (one shard) routing every path to one HTTP/1.1 cluster,
/// `backend`, at `addr`: the handle, its listener and its admin.
pub fn one_backend_gateway(addr: SocketAddr) -> (gateway::GatewayHandle, SocketAddr, SocketAddr) {
    let bootstrap = yaml::filters_bootstrap(
        "",
        "",
        &yaml::one_route("backend", ""),
        &yaml::h1_cluster("backend", addr),
    )
    .expect("bootstrap");
    let gw = start(bootstrap, 1);
    let listener = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    (gw, listener, admin)
}

pub fn admin_get(addr: SocketAddr, path: &str) -> (u16, String) {
    admin_request(addr, "GET", path)
}

pub fn admin_post(addr: SocketAddr, path: &str) -> (u16, String) {
    admin_request(addr, "POST", path)
}

pub fn admin_request(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("admin connect");
    // A wedged admin fails the test rather than hanging it.
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "{method} {path} HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).expect("the admin's answer");
    assert!(out.len() >= 12, "no status line from the admin: {out:?}");
    let status = out[9..12].parse().unwrap();
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// Requests from a client thread: (status, x-backend) of each.
pub fn get_n(addr: SocketAddr, path: &'static str, n: usize) -> Vec<(u16, String)> {
    client(move || async move {
        let c = connect(addr).await;
        let mut out = Vec::new();
        for _ in 0..n {
            match get(&c, path, &[]).await {
                Ok(r) => out.push((
                    r.status.as_u16(),
                    r.header("x-backend").unwrap_or("").to_string(),
                )),
                Err(e) => out.push((0, e.to_string())),
            }
        }
        out
    })
}

pub mod control_plane;

// ---------------------------------------------------------------------------
// Stateful sessions, load and admin helpers (sessions.rs, balancing.rs).
// ---------------------------------------------------------------------------

/// Cookie-based session state (`ttl` 120 s) named `name`, on `path`.
pub fn cookie_session(name: &str, path: Option<&str>, strict: bool) -> StatefulSession {
    StatefulSession {
        session_state: Some(SessionState::Cookie(SessionCookie {
            name: name.into(),
            ttl: Duration::from_secs(120),
            path: path.map(Into::into),
        })),
        strict,
        strict_not_found_status: 503,
    }
}

/// Header-based session state carried in `name`.
pub fn header_session(name: &str) -> StatefulSession {
    StatefulSession {
        session_state: Some(SessionState::Header(SessionHeader { name: name.into() })),
        strict: false,
        strict_not_found_status: 503,
    }
}

/// `l` with the stateful session filter configured on it.
pub fn with_session(l: Arc<Listener>, session: StatefulSession) -> Arc<Listener> {
    let mut l = (*l).clone();
    l.filter_chains[0].http.http_filters.insert(
        0,
        engine::HttpFilter {
            name: "envoy.filters.http.stateful_session".into(),
            config: engine::HttpFilterConfig::StatefulSession(session),
        },
    );
    Arc::new(l)
}

/// The bootstrap of [`gateway_for`] with a stateful session filter and the
/// cluster as given (so tests can set its policy, outlier detection, …).
pub fn session_bootstrap(cluster: Arc<Cluster>, session: Option<StatefulSession>) -> Bootstrap {
    let name = cluster.name.clone();
    let mut l = listener(vec![prefix_route("/", &name, None)]);
    if let Some(s) = session {
        l = with_session(l, s);
    }
    bootstrap(l, vec![cluster])
}

/// `cluster(name, addrs)` with changes applied.
pub fn cluster_with(
    name: &str,
    addrs: &[SocketAddr],
    f: impl FnOnce(&mut Cluster),
) -> Arc<Cluster> {
    let mut c = (*cluster(name, addrs)).clone();
    f(&mut c);
    Arc::new(c)
}

impl Reply {
    /// `x-backend` ("" for a reply the gateway made itself).
    pub fn backend(&self) -> &str {
        self.header("x-backend").unwrap_or("")
    }

    /// Every `set-cookie` field.
    pub fn set_cookies(&self) -> Vec<&str> {
        self.headers
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect()
    }

    /// The only `set-cookie` field, if any (panics on several).
    pub fn set_cookie(&self) -> Option<&str> {
        let all = self.set_cookies();
        assert!(all.len() <= 1, "several set-cookie fields: {all:?}");
        all.first().copied()
    }
}

/// What a client sends back for a `set-cookie`: the `NAME=VALUE` pair
/// before the attributes (the value keeps its quotes, as browsers do).
pub fn cookie_pair(set_cookie: &str) -> String {
    set_cookie
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_string()
}

/// The host a session cookie pair (`NAME=VALUE`) or bare value names.
pub fn cookie_host(pair: &str) -> SocketAddr {
    let value = pair.split_once('=').map_or(pair, |(_, v)| v);
    match engine::session::decode_cookie_value(value.as_bytes(), unix_now()) {
        engine::session::SessionValue::Valid { address, .. } => address,
        other => panic!("session cookie {pair:?} does not decode: {other:?}"),
    }
}

/// A `NAME="VALUE"` cookie pair naming `host`, as the gateway writes it.
pub fn cookie_for(name: &str, host: SocketAddr) -> String {
    let cookie = SessionCookie {
        name: name.into(),
        ttl: Duration::from_secs(120),
        path: None,
    };
    cookie_pair(&engine::session::set_cookie(
        &cookie,
        host,
        unix_now(),
        engine::session::CookieFormat::Envoy,
    ))
}

pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// One sample of the Prometheus text at `/stats`, by its exact series
/// (`name` or `name{labels}`); panics when absent.
pub fn metric(admin: SocketAddr, series: &str) -> f64 {
    page_value(admin, "/stats", series)
}

/// A series' value on `/stats/prometheus` (Envoy's names), by its whole
/// `name{labels}`.
pub fn envoy_metric(admin: SocketAddr, series: &str) -> f64 {
    page_value(admin, "/stats/prometheus", series)
}

/// The value of the line `series <value>` on the admin's page `path`.
fn page_value(admin: SocketAddr, path: &str, series: &str) -> f64 {
    let (_, text) = admin_get(admin, path);
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in {path}:\n{text}"))
}

/// Envoy's counter `name` (`/stats`' text form, e.g. `proxy_proto.versions.v1.found`).
pub fn envoy_counter(gw: &gateway::GatewayHandle, name: &str) -> u64 {
    let s = admin_get(gw.admin_addr.expect("admin"), "/stats?format=text").1;
    s.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("no {name} in /stats:\n{s}"))
        .parse()
        .expect("a number")
}

/// The `/clusters?format=json` entry of `host` in `cluster`.
pub fn host_status(admin: SocketAddr, cluster: &str, host: SocketAddr) -> serde_json::Value {
    let (_, body) = admin_get(admin, "/clusters?format=json");
    let v: serde_json::Value = serde_json::from_str(&body).expect("clusters JSON");
    let addr = host.to_string();
    v["cluster_statuses"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == cluster))
        .and_then(|c| c["hosts"].as_array())
        .and_then(|hs| hs.iter().find(|h| h["address"] == addr.as_str()))
        .cloned()
        .unwrap_or_else(|| panic!("no host {addr} in cluster {cluster}: {body}"))
}

/// Polls `cond` every 10 ms until it holds; returns how long that took, or
/// panics with `what` after `timeout`.
pub fn wait_until(timeout: Duration, what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    loop {
        if cond() {
            return start.elapsed();
        }
        assert!(start.elapsed() < timeout, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Closed-loop load from its own thread: `concurrency` workers, each on its
/// own connection (so that with several shards they spread over them),
/// sending `GET path` with `headers` again as soon as its previous reply is
/// in. Replies are counted by `x-backend`, suffixed with the status when it
/// is not 200 (`"b1 503"`; a gateway reply is `"gateway 503"`; a failed
/// stream `"error …"`).
pub struct Load {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<BTreeMap<String, u64>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Load {
    pub fn start(
        addr: SocketAddr,
        concurrency: usize,
        path: &'static str,
        headers: &[(&'static str, &'static str)],
    ) -> Load {
        Load::start_with(addr, concurrency, "GET", path, headers)
    }

    /// [`Load::start`] with another method (e.g. POST for gRPC).
    pub fn start_with(
        addr: SocketAddr,
        concurrency: usize,
        method: &'static str,
        path: &'static str,
        headers: &[(&'static str, &'static str)],
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(BTreeMap::new()));
        let (s, m, headers) = (Arc::clone(&stop), Arc::clone(&seen), headers.to_vec());
        let thread = std::thread::spawn(move || {
            client(move || async move {
                let workers: Vec<_> = (0..concurrency)
                    .map(|_| {
                        let (s, m, h) = (s.clone(), m.clone(), headers.clone());
                        glommio::spawn_local(async move {
                            let c = connect(addr).await;
                            while !s.load(Ordering::Relaxed) {
                                let key = match request(&c, method, path, &h, None, None).await {
                                    Ok(r) => {
                                        let b = match r.backend() {
                                            "" => "gateway",
                                            b => b,
                                        };
                                        if r.status == StatusCode::OK {
                                            b.to_string()
                                        } else {
                                            format!("{b} {}", r.status.as_u16())
                                        }
                                    }
                                    Err(e) => format!("error {e}"),
                                };
                                *m.lock().unwrap().entry(key).or_default() += 1;
                            }
                        })
                    })
                    .collect();
                for w in workers {
                    w.await;
                }
            })
        });
        Load {
            stop,
            seen,
            thread: Some(thread),
        }
    }

    /// Replies so far, by key.
    pub fn counts(&self) -> BTreeMap<String, u64> {
        self.seen.lock().unwrap().clone()
    }

    /// Replies so far with this key.
    pub fn count(&self, key: &str) -> u64 {
        self.counts().get(key).copied().unwrap_or(0)
    }

    /// Stops, waits for the requests in flight, and returns the counts.
    pub fn stop(mut self) -> BTreeMap<String, u64> {
        self.halt();
        self.counts()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.halt();
    }
}

/// `n` requests `method path` with `headers`, one after the other on one
/// new connection, from a client thread; panics on a failed stream.
pub fn send_n(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    n: usize,
) -> Vec<Reply> {
    let method = method.to_string();
    let path = path.to_string();
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    client(move || async move {
        let c = connect(addr).await;
        let h: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let r = request(&c, &method, &path, &h, None, None)
                .await
                .unwrap_or_else(|e| panic!("{method} {path} #{i}: {e}"));
            out.push(r);
        }
        out
    })
}

/// `n` GETs of `path` with `headers` on one connection (see [`send_n`]).
pub fn get_replies(addr: SocketAddr, path: &str, headers: &[(&str, &str)], n: usize) -> Vec<Reply> {
    send_n(addr, "GET", path, headers, n)
}

/// The backends that answered `n` GETs of `/` at `addr` (a status other
/// than 200 by its number), sorted and deduplicated.
pub fn answering(addr: SocketAddr, n: usize) -> Vec<String> {
    let mut seen: Vec<String> = get_n(addr, "/", n)
        .into_iter()
        .map(|(status, body)| {
            if status == 200 {
                body
            } else {
                status.to_string()
            }
        })
        .collect();
    seen.sort();
    seen.dedup();
    seen
}

/// Waits (10 s at most) until only `want` answer at `addr`.
pub fn wait_answering(addr: SocketAddr, want: &[&str]) {
    wait_until(
        Duration::from_secs(10),
        &format!("only {want:?} answering"),
        || answering(addr, 8) == want,
    );
}

/// The admin's `/stats` of `gw`.
pub fn stats(gw: &gateway::GatewayHandle) -> String {
    admin_get(gw.admin_addr.expect("admin"), "/stats").1
}

/// Waits (up to 5 s) for the `/stats` line `line` (counters are read from
/// the shards, which count as they go).
pub fn wait_stat(gw: &gateway::GatewayHandle, line: &str) {
    let until = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let s = stats(gw);
        if s.lines().any(|l| l == line) {
            return;
        }
        assert!(
            std::time::Instant::now() < until,
            "no `{line}` in /stats:\n{s}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The text of the file at `path` once it has `lines` lines (an access
/// log the shards write as requests end), or what it has after 5 s.
pub fn wait_lines(path: &std::path::Path, lines: usize) -> String {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.lines().count() >= lines || Instant::now() > until {
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
