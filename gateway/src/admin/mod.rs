//! The admin server (HTTP/1.1 on `admin.address`), run by the control shard:
//! `/ready`, `/stats` (Prometheus text, summed over shards), `/stats/prometheus`
//! (Envoy's series and names), `/config_dump`,
//! `/clusters`, `/listeners`; `POST` `/healthcheck/fail`, `/healthcheck/ok`,
//! `/drain_listeners`.

mod actions;
mod clusters;
mod config_dump;
mod dashboard;
mod envoy_stats;
mod exposition;
mod filter_stats;
mod prometheus;
mod server;
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
use serde_json::{json, Value};

use crate::outlier::OutlierView;
use shards::stats::ShardStats;
use state::{Inner, PushStats, ServerState};

/// What the admin server reports from. The control shard owns it and
/// changes it through the setters; [`AdminState::publish`] (once per
/// event, so a page never shows half of one) hands the admin server's own
/// thread an immutable copy (pointers: the large parts are `Arc`s), which
/// it renders from, so a scrape never holds the control shard (and so
/// xDS).
#[derive(Clone)]
pub struct AdminState {
    inner: Rc<RefCell<Inner>>,
    /// Changed since the last publish.
    dirty: Rc<std::cell::Cell<bool>>,
    shared: Arc<server::Shared>,
}

impl AdminState {
    pub fn new(
        shards: Vec<Arc<ShardStats>>,
        snapshot: Arc<Snapshot>,
        bootstrap: Bootstrap,
        overload: Arc<shards::overload::OverloadState>,
    ) -> Self {
        let dynamic = bootstrap.dynamic.is_some();
        let inner = Inner {
            shards,
            snapshot,
            bootstrap: Arc::new(bootstrap),
            // With xDS, not ready until its first fetch says so.
            xds: dynamic.then(|| Arc::new(XdsView::default())),
            pushes: PushStats::default(),
            tls_reloads: (0, 0),
            outlier: Arc::default(),
            epoch: (Instant::now(), SystemTime::now()),
            flags: Arc::default(),
            not_serving: Arc::default(),
            dns: Arc::default(),
            health: Arc::default(),
            overload,
        };
        let shared = Arc::new(server::Shared::new(inner.clone()));
        Self {
            inner: Rc::new(RefCell::new(inner)),
            dirty: Rc::default(),
            shared,
        }
    }

    /// Changes the state; the admin server sees it at the next publish.
    fn change(&self, f: impl FnOnce(&mut Inner)) {
        f(&mut self.inner.borrow_mut());
        self.dirty.set(true);
    }

    /// Hands the admin server what changed: called by the control loop
    /// once per event (so a page shows no half of one).
    pub fn publish(&self) {
        if self.dirty.replace(false) {
            self.shared.publish(self.inner.borrow().clone());
        }
    }

    pub fn set_config(&self, snapshot: Arc<Snapshot>, bootstrap: Bootstrap) {
        self.change(|i| {
            i.snapshot = snapshot;
            i.bootstrap = Arc::new(bootstrap);
        });
    }

    /// Counts certificate reloads of the listeners' TLS contexts.
    pub fn record_tls_reloads(&self, ok: u32, failed: u32) {
        if ok + failed > 0 {
            self.change(|i| {
                i.tls_reloads.0 += u64::from(ok);
                i.tls_reloads.1 += u64::from(failed);
            });
        }
    }

    /// Records how long one snapshot took from build to every shard's ack.
    pub fn record_push(&self, took: Duration) {
        self.change(|i| {
            let p = &mut i.pushes;
            p.count += 1;
            p.total += took;
            p.last = took;
            p.max = p.max.max(took);
        });
    }

    /// The control shard's outlier detectors changed (a sweep or a new
    /// snapshot); `epoch` maps their instants to wall-clock time.
    pub fn set_outlier(&self, view: OutlierView, epoch: (Instant, SystemTime)) {
        self.change(|i| {
            i.outlier = Arc::new(view);
            i.epoch = epoch;
        });
    }

    pub fn set_xds(&self, view: XdsView) {
        self.change(|i| i.xds = Some(Arc::new(view)));
    }

    /// The listeners that could not bind at the last update.
    pub fn set_not_serving(&self, not_serving: Vec<crate::ports::NotServing>) {
        self.change(|i| i.not_serving = Arc::new(not_serving));
    }

    /// Each DNS cluster's lookups so far.
    pub(crate) fn set_dns(&self, dns: std::collections::BTreeMap<String, crate::dns::Counts>) {
        self.change(|i| i.dns = Arc::new(dns));
    }

    /// Each actively checked cluster's checks.
    pub(crate) fn set_health(
        &self,
        health: std::collections::BTreeMap<String, crate::health::Counts>,
    ) {
        self.change(|i| i.health = Arc::new(health));
    }

    /// Closes the admin listener; its thread ends.
    pub fn stop(&self) {
        self.shared.stop();
    }
}

/// Binds the admin listener and serves it on a thread of its own;
/// `actions`: where its `POST` endpoints send their actions.
pub(crate) fn start(
    addr: SocketAddr,
    state: &AdminState,
    actions: crate::events::CommandSender,
    sockets: Arc<shards::wire::sockets::ListenSockets>,
) -> std::io::Result<SocketAddr> {
    server::start(addr, Arc::clone(&state.shared), actions, sockets)
}

/// The answer to one request: the actions first, then what is read from
/// the state as last published.
fn route(method: &str, target: &str, shared: &server::Shared) -> (u16, &'static str, String) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if let Some(answer) = actions::answer(method, path, query, shared) {
        return answer;
    }
    if method != "GET" && method != "HEAD" {
        return (405, "text/plain", "only GET\n".into());
    }
    let view = shared.view();
    let inner = &*view;
    match path {
        "/ready" => match inner.server_state() {
            // As Envoy: an L4 balancer's health check takes the instance
            // out before its connections drain.
            ServerState::Draining => (503, "text/plain", "DRAINING\n".into()),
            ServerState::Live => (200, "text/plain", "LIVE\n".into()),
            ServerState::Initializing => (503, "text/plain", "NOT READY\n".into()),
        },
        "/server_info" => (200, "application/json", pretty(server_info(inner))),
        // Today's page, unless Envoy's forms are asked for.
        "/stats" if query.is_empty() => {
            let mut page = prometheus::render(inner);
            server::write_series(&mut page, shared);
            (200, "text/plain; version=0.0.4", page)
        }
        "/stats" => match envoy_stats::Query::parse(query) {
            Ok(q) => match q.format {
                envoy_stats::Format::Json => (
                    200,
                    "application/json",
                    pretty(envoy_stats::render_json(inner, &q)),
                ),
                envoy_stats::Format::Prometheus => (
                    200,
                    "text/plain; version=0.0.4",
                    envoy_stats::render(inner, &q),
                ),
                envoy_stats::Format::Text => (
                    200,
                    "text/plain",
                    envoy_stats::render_text(inner, &q),
                ),
            },
            Err(e) => (400, "text/plain", format!("{e}\n")),
        },
        // Envoy's names, for what is built on Envoy's.
        "/stats/prometheus" => match envoy_stats::Query::parse(query) {
            Ok(q) => (
                200,
                "text/plain; version=0.0.4",
                envoy_stats::render(inner, &q),
            ),
            Err(e) => (400, "text/plain", format!("{e}\n")),
        },
        "/config_dump" => (200, "application/json", pretty(config_dump::render(inner))),
        "/clusters" if query.contains("format=json") => {
            (200, "application/json", pretty(clusters::json(inner)))
        }
        "/clusters" => (200, "text/plain", clusters::text(inner)),
        "/listeners" => {
            let state = if inner.flags.listeners_drained() {
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
        // The live dashboard, and what it polls.
        "/" => (200, "text/html; charset=utf-8", dashboard::PAGE.into()),
        "/dashboard.json" => (200, "application/json", pretty(dashboard::json(inner))),
        "/help" => (
            200,
            "text/plain",
            "admin endpoints: / (dashboard) /dashboard.json /ready /server_info /stats /stats?format=json|text&filter=&usedonly /stats/prometheus[?filter=&usedonly] /config_dump /clusters /clusters?format=json /listeners; \
             POST /healthcheck/fail /healthcheck/ok /drain_listeners[?graceful]\n"
                .into(),
        ),
        _ => (404, "text/plain", "not found; see /help\n".into()),
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
