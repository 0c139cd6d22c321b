//! The admin server (HTTP/1.1 on `admin.address`), run by the control shard:
//! `/ready`, `/stats` (Prometheus text, summed over shards), `/stats/prometheus`
//! (Envoy's series and names), `/config_dump`,
//! `/clusters`, `/listeners`; `POST` `/healthcheck/fail`, `/healthcheck/ok`,
//! `/drain_listeners`.

mod actions;
mod clusters;
mod config_dump;
mod envoy_stats;
mod exposition;
mod filter_stats;
mod prometheus;
mod state;
mod xds;

pub use crate::events::AdminAction;
pub(crate) use state::started;
pub use xds::{XdsError, XdsTypeView, XdsView};

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use engine::{Bootstrap, Snapshot};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};
use serde_json::{json, Value};

use crate::outlier::OutlierView;
use shards::stats::ShardStats;
use state::{Inner, PushStats, ServerState};

const MAX_REQUEST: usize = 16 * 1024;
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What the admin server reports from; owned by the control shard.
#[derive(Clone)]
pub struct AdminState(Rc<RefCell<Inner>>);

impl AdminState {
    pub fn new(
        shards: Vec<Arc<ShardStats>>,
        snapshot: Arc<Snapshot>,
        bootstrap: Bootstrap,
    ) -> Self {
        Self(Rc::new(RefCell::new(Inner {
            shards,
            snapshot,
            bootstrap,
            xds: None,
            pushes: PushStats::default(),
            tls_reloads: (0, 0),
            outlier: OutlierView::default(),
            epoch: (Instant::now(), SystemTime::now()),
            accept: None,
            health_failed: false,
            listeners_drained: false,
            not_serving: Vec::new(),
            events: None,
            dns: Default::default(),
            health: Default::default(),
        })))
    }

    pub fn set_config(&self, snapshot: Arc<Snapshot>, bootstrap: Bootstrap) {
        let mut i = self.0.borrow_mut();
        i.snapshot = snapshot;
        i.bootstrap = bootstrap;
    }

    /// Records how long one snapshot took from build to every shard's ack.
    /// Counts certificate reloads of the listeners' TLS contexts.
    pub fn record_tls_reloads(&self, ok: u32, failed: u32) {
        if ok + failed > 0 {
            let mut i = self.0.borrow_mut();
            i.tls_reloads.0 += u64::from(ok);
            i.tls_reloads.1 += u64::from(failed);
        }
    }

    pub fn record_push(&self, took: Duration) {
        let p = &mut self.0.borrow_mut().pushes;
        p.count += 1;
        p.total += took;
        p.last = took;
        p.max = p.max.max(took);
    }

    /// The control shard's outlier detectors changed (a sweep or a new
    /// snapshot); `epoch` maps their instants to wall-clock time.
    pub fn set_outlier(&self, view: OutlierView, epoch: (Instant, SystemTime)) {
        let mut i = self.0.borrow_mut();
        i.outlier = view;
        i.epoch = epoch;
    }

    pub fn set_xds(&self, view: XdsView) {
        self.0.borrow_mut().xds = Some(view);
    }

    /// The listeners that could not bind at the last update.
    pub fn set_not_serving(&self, not_serving: Vec<crate::ports::NotServing>) {
        self.0.borrow_mut().not_serving = not_serving;
    }

    /// Each DNS cluster's lookups so far.
    pub(crate) fn set_dns(&self, dns: std::collections::BTreeMap<String, crate::dns::Counts>) {
        self.0.borrow_mut().dns = dns;
    }

    /// Each actively checked cluster's checks.
    pub(crate) fn set_health(
        &self,
        health: std::collections::BTreeMap<String, crate::health::Counts>,
    ) {
        self.0.borrow_mut().health = health;
    }

    /// Where admin actions go (the control loop's inbox).
    pub(crate) fn set_events(&self, events: crate::events::EventSender) {
        self.0.borrow_mut().events = Some(events);
    }

    /// Closes the admin listener.
    pub fn stop(&self) {
        self.0.borrow_mut().accept = None;
    }
}

/// Binds the admin listener and serves it on the current executor.
pub fn start(addr: SocketAddr, state: AdminState) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).map_err(std::io::Error::from)?;
    let bound = listener.local_addr().map_err(std::io::Error::from)?;
    let st = state.clone();
    let task = glommio::spawn_local(async move {
        loop {
            match listener.accept().await {
                Ok(stream) => {
                    glommio::spawn_local(serve(stream, st.clone())).detach();
                }
                Err(_) => glommio::timer::sleep(Duration::from_millis(10)).await,
            }
        }
    });
    state.0.borrow_mut().accept = Some(task);
    Ok(bound)
}

async fn serve(mut stream: TcpStream, state: AdminState) {
    // A client that connects and never sends a request must not hold a task
    // and a buffer for ever.
    let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
    let mut buf = vec![0u8; MAX_REQUEST];
    let mut len = 0;
    let (method, path) = loop {
        let n = match stream.read(&mut buf[len..]).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        len += n;
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf[..len]) {
            Ok(httparse::Status::Complete(_)) => {
                break (
                    req.method.unwrap_or("GET").to_string(),
                    req.path.unwrap_or("/").to_string(),
                );
            }
            Ok(httparse::Status::Partial) if len < MAX_REQUEST => continue,
            _ => {
                let _ = respond(&mut stream, 400, "text/plain", "bad request\n").await;
                return;
            }
        }
    };
    let (status, ctype, body) = route(&method, &path, &state);
    let _ = respond(&mut stream, status, ctype, &body).await;
}

async fn respond(
    stream: &mut TcpStream,
    status: u16,
    ctype: &str,
    body: &str,
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.flush().await?;
    stream.close().await
}

fn route(method: &str, target: &str, state: &AdminState) -> (u16, &'static str, String) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if let Some(answer) = actions::answer(method, path, query, &state.0) {
        return answer;
    }
    if method != "GET" && method != "HEAD" {
        return (405, "text/plain", "only GET\n".into());
    }
    let inner = state.0.borrow();
    match path {
        "/ready" => match inner.server_state() {
            // As Envoy: an L4 balancer's health check takes the instance
            // out before its connections drain.
            ServerState::Draining => (503, "text/plain", "DRAINING\n".into()),
            ServerState::Live => (200, "text/plain", "LIVE\n".into()),
            ServerState::Initializing => (503, "text/plain", "NOT READY\n".into()),
        },
        "/server_info" => (200, "application/json", pretty(server_info(&inner))),
        // Today's page, unless Envoy's forms are asked for.
        "/stats" if query.is_empty() => (
            200,
            "text/plain; version=0.0.4",
            prometheus::render(&inner),
        ),
        "/stats" => match envoy_stats::Query::parse(query) {
            Ok(q) => match q.format {
                envoy_stats::Format::Json => (
                    200,
                    "application/json",
                    pretty(envoy_stats::render_json(&inner, &q)),
                ),
                envoy_stats::Format::Prometheus => (
                    200,
                    "text/plain; version=0.0.4",
                    envoy_stats::render(&inner, &q),
                ),
                envoy_stats::Format::Text => (
                    200,
                    "text/plain",
                    envoy_stats::render_text(&inner, &q),
                ),
            },
            Err(e) => (400, "text/plain", format!("{e}\n")),
        },
        // Envoy's names, for what is built on Envoy's.
        "/stats/prometheus" => match envoy_stats::Query::parse(query) {
            Ok(q) => (
                200,
                "text/plain; version=0.0.4",
                envoy_stats::render(&inner, &q),
            ),
            Err(e) => (400, "text/plain", format!("{e}\n")),
        },
        "/config_dump" => (200, "application/json", pretty(config_dump::render(&inner))),
        "/clusters" if query.contains("format=json") => {
            (200, "application/json", pretty(clusters::json(&inner)))
        }
        "/clusters" => (200, "text/plain", clusters::text(&inner)),
        "/listeners" => {
            let state = if inner.listeners_drained {
                "draining (drain_listeners)"
            } else {
                "serving"
            };
            let serving = inner.snapshot.listeners.iter().map(|l| {
                json!({"name": l.name, "address": l.address.to_string(), "state": state})
            });
            let not_serving = inner.not_serving.iter().map(|n| {
                json!({
                    "name": n.name,
                    "address": n.address.to_string(),
                    "state": "not serving",
                    "error": n.error,
                })
            });
            let l: Vec<Value> = serving.chain(not_serving).collect();
            (200, "application/json", pretty(json!({ "listeners": l })))
        }
        "/" => (
            200,
            "text/plain",
            "admin endpoints: /ready /server_info /stats /stats?format=json|text&filter=&usedonly /stats/prometheus[?filter=&usedonly] /config_dump /clusters /clusters?format=json /listeners; \
             POST /healthcheck/fail /healthcheck/ok /drain_listeners[?graceful]\n"
                .into(),
        ),
        _ => (404, "text/plain", "not found; see /\n".into()),
    }
}

/// Envoy's `/server_info` fields that mean something here: version,
/// state, uptime, node and the shard count (`concurrency`).
fn server_info(inner: &Inner) -> Value {
    let state = match inner.server_state() {
        ServerState::Live => "LIVE",
        ServerState::Draining => "DRAINING",
        ServerState::Initializing => "INITIALIZING",
    };
    let uptime = format!("{}s", state::started().elapsed().as_secs());
    json!({
        "version": concat!("gateway/", env!("CARGO_PKG_VERSION")),
        "state": state,
        "hot_restart_version": "disabled",
        "command_line_options": {
            "concurrency": inner.shards.len(),
        },
        "node": {
            "id": inner.bootstrap.node.id,
            "cluster": inner.bootstrap.node.cluster,
        },
        "uptime_current_epoch": uptime,
        "uptime_all_epochs": uptime,
    })
}

fn pretty(v: Value) -> String {
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}
