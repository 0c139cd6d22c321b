//! Test support: bootstraps built in code, gateways on port 0, demo
//! backends, and a small h2 client running on its own glommio executor.
#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use engine::*;
use glommio::net::TcpStream;
use glommio::{LocalExecutorBuilder, Placement};
use h2::client::SendRequest;
use http::{HeaderMap, Request, StatusCode};
use shards::demo_backend::{self, BackendHandle, BackendOptions};
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
            })
            .collect(),
        eds: None,
        http2: UpstreamHttp2::default(),
        outlier_detection: None,
        common_lb: Default::default(),
    })
}

pub fn prefix_route(prefix: &str, cluster: &str, timeout: Option<Duration>) -> Route {
    Route {
        name: format!("{prefix}->{cluster}"),
        matcher: RouteMatch {
            path: PathMatch::Prefix(prefix.into()),
            case_sensitive: true,
            headers: vec![],
        },
        action: RouteAction {
            target: ClusterTarget::Cluster(cluster.into()),
            timeout,
            prefix_rewrite: None,
            host_rewrite_literal: None,
        },
        stateful_session: None,
    }
}

pub fn listener(routes: Vec<Route>) -> Arc<Listener> {
    Arc::new(Listener {
        name: "ingress".into(),
        address: SocketAddr::from(([127, 0, 0, 1], 0)),
        http: HttpConnectionManager {
            stat_prefix: "ingress".into(),
            route_config: Arc::new(RouteConfig {
                name: "rc".into(),
                virtual_hosts: vec![VirtualHost {
                    name: "all".into(),
                    domains: vec![DomainMatcher::Any],
                    routes,
                    stateful_session: None,
                }],
            }),
            rds: None,
            max_concurrent_streams: DEFAULT_DOWNSTREAM_MAX_CONCURRENT_STREAMS,
            max_header_list_size: DEFAULT_MAX_HEADER_LIST_SIZE,
            initial_stream_window_size: 1 << 20,
            initial_connection_window_size: 16 << 20,
            idle_timeout: Some(Duration::from_secs(3600)),
            stream_idle_timeout: Some(Duration::from_secs(300)),
            drain_timeout: Duration::from_secs(1),
            append_x_forwarded_for: true,
            stateful_session: None,
        },
    })
}

pub fn bootstrap(listener: Arc<Listener>, clusters: Vec<Arc<Cluster>>) -> Bootstrap {
    Bootstrap {
        node: Node::default(),
        admin: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        listeners: vec![listener],
        clusters,
        dynamic: None,
    }
}

pub fn start(b: Bootstrap, shards: usize) -> shards::GatewayHandle {
    shards::start(
        b,
        shards::Options {
            shards: Some(shards),
            cpus: None,
        },
    )
    .expect("gateway starts")
}

/// A gateway with one listener that sends everything to cluster `c` made of
/// `backends`; returns it with the listener's address.
pub fn gateway_for(backends: &[SocketAddr], shards: usize) -> (shards::GatewayHandle, SocketAddr) {
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
pub fn admin_get(addr: SocketAddr, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("admin connect");
    write!(s, "GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
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
