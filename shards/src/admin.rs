//! The admin server (HTTP/1.1 on `admin.address`), run by the control shard:
//! `/ready`, `/stats` (Prometheus text, summed over shards), `/config_dump`,
//! `/clusters`, `/listeners`.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use engine::{
    Bootstrap, ClusterTarget, DomainMatcher, HeaderMatchKind, LbPolicy, PathMatch, Snapshot,
};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};
use glommio::Task;
use serde_json::{json, Value};

use crate::stats::{Counter, ShardStats, StatusClasses};

const MAX_REQUEST: usize = 16 * 1024;

struct Inner {
    shards: Vec<Arc<ShardStats>>,
    snapshot: Arc<Snapshot>,
    bootstrap: Bootstrap,
    accept: Option<Task<()>>,
}

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
            accept: None,
        })))
    }

    pub fn set_config(&self, snapshot: Arc<Snapshot>, bootstrap: Bootstrap) {
        let mut i = self.0.borrow_mut();
        i.snapshot = snapshot;
        i.bootstrap = bootstrap;
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
    if method != "GET" && method != "HEAD" {
        return (405, "text/plain", "only GET\n".into());
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let inner = state.0.borrow();
    match path {
        "/ready" => {
            let serving = inner.shards.iter().all(|s| s.serving.get() == 1);
            if serving {
                (200, "text/plain", "LIVE\n".into())
            } else {
                (503, "text/plain", "NOT READY\n".into())
            }
        }
        "/stats" | "/stats/prometheus" => (200, "text/plain; version=0.0.4", prometheus(&inner)),
        "/config_dump" => (200, "application/json", pretty(config_dump(&inner))),
        "/clusters" if query.contains("format=json") => {
            (200, "application/json", pretty(clusters_json(&inner)))
        }
        "/clusters" => (200, "text/plain", clusters_text(&inner)),
        "/listeners" => {
            let l: Vec<Value> = inner
                .snapshot
                .listeners
                .iter()
                .map(|l| json!({"name": l.name, "address": l.address.to_string()}))
                .collect();
            (200, "application/json", pretty(json!({ "listeners": l })))
        }
        "/" => (
            200,
            "text/plain",
            "admin endpoints: /ready /stats /config_dump /clusters /clusters?format=json /listeners\n".into(),
        ),
        _ => (404, "text/plain", "not found; see /\n".into()),
    }
}

fn pretty(v: Value) -> String {
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}

fn sum(shards: &[Arc<ShardStats>], f: impl Fn(&ShardStats) -> &Counter) -> u64 {
    shards.iter().map(|s| f(s).get()).sum()
}

fn metric(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn prometheus(inner: &Inner) -> String {
    let sh = &inner.shards;
    let mut out = String::with_capacity(4096);
    type ShardCounter = fn(&ShardStats) -> &Counter;
    let simple: [(&str, &str, &str, ShardCounter); 12] = [
        (
            "gateway_downstream_cx_total",
            "counter",
            "Downstream connections accepted.",
            |s| &s.downstream.cx_total,
        ),
        (
            "gateway_downstream_cx_active",
            "gauge",
            "Open downstream connections.",
            |s| &s.downstream.cx_active,
        ),
        (
            "gateway_downstream_cx_protocol_error",
            "counter",
            "Downstream connections closed on a protocol error or failed handshake.",
            |s| &s.downstream.cx_protocol_error,
        ),
        (
            "gateway_downstream_cx_reset_flood",
            "counter",
            "Downstream connections cut off (GOAWAY) for flooding stream resets.",
            |s| &s.downstream.cx_reset_flood,
        ),
        (
            "gateway_downstream_cx_idle_timeout",
            "counter",
            "Downstream connections closed by the idle timeout.",
            |s| &s.downstream.cx_idle_timeout,
        ),
        (
            "gateway_downstream_rq_total",
            "counter",
            "Downstream requests (streams).",
            |s| &s.downstream.rq_total,
        ),
        (
            "gateway_downstream_rq_active",
            "gauge",
            "Downstream requests in flight.",
            |s| &s.downstream.rq_active,
        ),
        (
            "gateway_downstream_rq_reset_by_client",
            "counter",
            "Streams the client reset before completion.",
            |s| &s.downstream.rq_reset_by_client,
        ),
        (
            "gateway_downstream_rq_no_route",
            "counter",
            "Requests answered 404 for want of a route.",
            |s| &s.downstream.rq_no_route,
        ),
        (
            "gateway_downstream_rq_timeout",
            "counter",
            "Requests that hit the route timeout.",
            |s| &s.downstream.rq_timeout,
        ),
        (
            "gateway_upstream_rq_no_healthy_upstream",
            "counter",
            "Requests answered 503: no routable host.",
            |s| &s.rq_no_healthy_upstream,
        ),
        (
            "gateway_downstream_rq_idle_timeout",
            "counter",
            "Streams ended by stream_idle_timeout.",
            |s| &s.downstream.rq_idle_timeout,
        ),
    ];
    for (name, kind, help, f) in simple {
        metric(&mut out, name, kind, help);
        let _ = writeln!(out, "{name} {}", sum(sh, f));
    }
    metric(
        &mut out,
        "gateway_upstream_rq_unknown_cluster",
        "counter",
        "Requests answered 503: cluster not found.",
    );
    let _ = writeln!(
        out,
        "gateway_upstream_rq_unknown_cluster {}",
        sum(sh, |s| &s.rq_unknown_cluster)
    );
    metric(
        &mut out,
        "gateway_downstream_rq_xx",
        "counter",
        "Downstream responses by status class.",
    );
    for (i, class) in StatusClasses::NAMES.iter().enumerate() {
        let v: u64 = sh
            .iter()
            .map(|s| s.downstream.responses.classes()[i].1)
            .sum();
        let _ = writeln!(
            out,
            "gateway_downstream_rq_xx{{response_code_class=\"{class}\"}} {v}"
        );
    }
    metric(
        &mut out,
        "gateway_config_version",
        "gauge",
        "Snapshot version served by the shards (minimum).",
    );
    let _ = writeln!(
        out,
        "gateway_config_version {}",
        sh.iter()
            .map(|s| s.snapshot_version.get())
            .min()
            .unwrap_or(0)
    );
    metric(
        &mut out,
        "gateway_shards_serving",
        "gauge",
        "Data shards serving.",
    );
    let _ = writeln!(out, "gateway_shards_serving {}", sum(sh, |s| &s.serving));

    type HostCounter = fn(&crate::stats::HostStats) -> &Counter;
    let per_host: [(&str, &str, &str, HostCounter); 9] = [
        (
            "gateway_upstream_rq_total",
            "counter",
            "Upstream requests per host.",
            |h| &h.rq_total,
        ),
        (
            "gateway_upstream_rq_active",
            "gauge",
            "Upstream requests in flight per host.",
            |h| &h.rq_active,
        ),
        (
            "gateway_upstream_rq_timeout",
            "counter",
            "Upstream requests that timed out.",
            |h| &h.rq_timeout,
        ),
        (
            "gateway_upstream_rq_reset",
            "counter",
            "Upstream streams reset or failed after connect.",
            |h| &h.rq_reset,
        ),
        (
            "gateway_upstream_rq_retry_refused",
            "counter",
            "Requests resent after an upstream refused the stream (GOAWAY/REFUSED_STREAM).",
            |h| &h.rq_retry_refused,
        ),
        (
            "gateway_upstream_cx_total",
            "counter",
            "Upstream connections opened.",
            |h| &h.cx_total,
        ),
        (
            "gateway_upstream_cx_active",
            "gauge",
            "Open upstream connections.",
            |h| &h.cx_active,
        ),
        (
            "gateway_upstream_cx_connect_fail",
            "counter",
            "Upstream connect or handshake failures.",
            |h| &h.cx_connect_fail,
        ),
        (
            "gateway_upstream_rq_xx",
            "counter",
            "Upstream responses by status class.",
            |h| &h.rq_total,
        ),
    ];
    let mut hosts: Vec<(&str, &engine::snapshot::Host)> = inner
        .snapshot
        .clusters
        .iter()
        .flat_map(|(name, c)| c.hosts.iter().map(move |h| (name.as_str(), h)))
        .collect();
    hosts.sort_by(|a, b| (a.0, a.1.address).cmp(&(b.0, b.1.address)));
    for (name, kind, help, f) in per_host {
        metric(&mut out, name, kind, help);
        for (cluster, h) in &hosts {
            let labels = format!("cluster=\"{cluster}\",host=\"{}\"", h.address);
            if name == "gateway_upstream_rq_xx" {
                for (i, class) in StatusClasses::NAMES.iter().enumerate() {
                    let v: u64 = sh
                        .iter()
                        .filter_map(|s| s.hosts.get(h.id))
                        .map(|hs| hs.responses.classes()[i].1)
                        .sum();
                    let _ = writeln!(
                        out,
                        "{name}{{{labels},response_code_class=\"{class}\"}} {v}"
                    );
                }
                continue;
            }
            let v: u64 = sh
                .iter()
                .filter_map(|s| s.hosts.get(h.id))
                .map(|hs| f(hs).get())
                .sum();
            let _ = writeln!(out, "{name}{{{labels}}} {v}");
        }
    }
    out
}

fn host_sum(inner: &Inner, id: engine::HostId, f: fn(&crate::stats::HostStats) -> &Counter) -> u64 {
    inner
        .shards
        .iter()
        .filter_map(|s| s.hosts.get(id))
        .map(|h| f(h).get())
        .sum()
}

fn clusters_text(inner: &Inner) -> String {
    // Envoy's `cluster::host::stat::value` lines, so existing scripts parse it.
    let mut out = String::new();
    let mut names: Vec<&String> = inner.snapshot.clusters.keys().collect();
    names.sort();
    for name in names {
        let c = &inner.snapshot.clusters[name];
        for h in &c.hosts {
            let a = h.address;
            let _ = writeln!(out, "{name}::{a}::health_flags::{}", h.health.as_str());
            let _ = writeln!(out, "{name}::{a}::weight::{}", h.weight);
            let _ = writeln!(
                out,
                "{name}::{a}::rq_active::{}",
                host_sum(inner, h.id, |s| &s.rq_active)
            );
            let _ = writeln!(
                out,
                "{name}::{a}::rq_total::{}",
                host_sum(inner, h.id, |s| &s.rq_total)
            );
            let _ = writeln!(
                out,
                "{name}::{a}::cx_active::{}",
                host_sum(inner, h.id, |s| &s.cx_active)
            );
            let _ = writeln!(
                out,
                "{name}::{a}::cx_connect_fail::{}",
                host_sum(inner, h.id, |s| &s.cx_connect_fail)
            );
        }
    }
    out
}

fn clusters_json(inner: &Inner) -> Value {
    let mut names: Vec<&String> = inner.snapshot.clusters.keys().collect();
    names.sort();
    let clusters: Vec<Value> = names
        .into_iter()
        .map(|name| {
            let c = &inner.snapshot.clusters[name];
            let hosts: Vec<Value> = c
                .hosts
                .iter()
                .map(|h| {
                    json!({
                        "address": h.address.to_string(),
                        "health_status": h.health.as_str(),
                        "weight": h.weight,
                        "rq_active": host_sum(inner, h.id, |s| &s.rq_active),
                        "rq_total": host_sum(inner, h.id, |s| &s.rq_total),
                        "cx_active": host_sum(inner, h.id, |s| &s.cx_active),
                        "cx_connect_fail": host_sum(inner, h.id, |s| &s.cx_connect_fail),
                    })
                })
                .collect();
            json!({ "name": name, "hosts": hosts })
        })
        .collect();
    json!({ "cluster_statuses": clusters })
}

fn config_dump(inner: &Inner) -> Value {
    let b = &inner.bootstrap;
    let listeners: Vec<Value> = b
        .listeners
        .iter()
        .map(|l| {
            let h = &l.http;
            let vhosts: Vec<Value> = h
                .route_config
                .virtual_hosts
                .iter()
                .map(|vh| {
                    let domains: Vec<String> = vh
                        .domains
                        .iter()
                        .map(|d| match d {
                            DomainMatcher::Exact(e) => e.clone(),
                            DomainMatcher::Suffix(s) => format!("*{s}"),
                            DomainMatcher::Prefix(p) => format!("{p}*"),
                            DomainMatcher::Any => "*".into(),
                        })
                        .collect();
                    let routes: Vec<Value> = vh
                        .routes
                        .iter()
                        .map(|r| {
                            let m = match &r.matcher.path {
                                PathMatch::Prefix(p) => json!({ "prefix": p }),
                                PathMatch::Path(p) => json!({ "path": p }),
                                PathMatch::Regex(re) => json!({ "safe_regex": re.as_str() }),
                            };
                            let headers: Vec<Value> = r
                                .matcher
                                .headers
                                .iter()
                                .map(|hm| {
                                    let kind = match &hm.kind {
                                        HeaderMatchKind::Exact(v) => json!({ "exact": v }),
                                        HeaderMatchKind::Prefix(v) => json!({ "prefix": v }),
                                        HeaderMatchKind::Suffix(v) => json!({ "suffix": v }),
                                        HeaderMatchKind::Contains(v) => json!({ "contains": v }),
                                        HeaderMatchKind::Regex(re) => json!({ "safe_regex": re.as_str() }),
                                        HeaderMatchKind::Present(p) => json!({ "present_match": p }),
                                        HeaderMatchKind::Range { start, end } => {
                                            json!({ "range_match": { "start": start, "end": end } })
                                        }
                                    };
                                    json!({ "name": hm.name, "match": kind, "invert_match": hm.invert })
                                })
                                .collect();
                            let target = match &r.action.target {
                                ClusterTarget::Cluster(c) => json!({ "cluster": c }),
                                ClusterTarget::Weighted(w) => {
                                    let mut prev = 0;
                                    let cs: Vec<Value> = w
                                        .clusters
                                        .iter()
                                        .map(|(n, bound)| {
                                            let weight = bound - prev;
                                            prev = *bound;
                                            json!({ "name": n, "weight": weight })
                                        })
                                        .collect();
                                    json!({ "weighted_clusters": { "clusters": cs } })
                                }
                            };
                            json!({
                                "name": r.name,
                                "match": m,
                                "case_sensitive": r.matcher.case_sensitive,
                                "headers": headers,
                                "route": target,
                                "timeout": r.action.timeout.map(|t| format!("{}s", t.as_secs_f64())),
                                "prefix_rewrite": r.action.prefix_rewrite,
                                "host_rewrite_literal": r.action.host_rewrite_literal,
                            })
                        })
                        .collect();
                    json!({ "name": vh.name, "domains": domains, "routes": routes })
                })
                .collect();
            json!({
                "name": l.name,
                "address": l.address.to_string(),
                "http_connection_manager": {
                    "stat_prefix": h.stat_prefix,
                    "max_concurrent_streams": h.max_concurrent_streams,
                    "max_header_list_size": h.max_header_list_size,
                    "initial_stream_window_size": h.initial_stream_window_size,
                    "initial_connection_window_size": h.initial_connection_window_size,
                    "idle_timeout": h.idle_timeout.map(|t| format!("{}s", t.as_secs_f64())),
                    "stream_idle_timeout": h.stream_idle_timeout.map(|t| format!("{}s", t.as_secs_f64())),
                    "drain_timeout": format!("{}s", h.drain_timeout.as_secs_f64()),
                    "route_config": { "name": h.route_config.name, "virtual_hosts": vhosts },
                },
            })
        })
        .collect();
    let clusters: Vec<Value> = b
        .clusters
        .iter()
        .map(|c| {
            let endpoints: Vec<Value> = c
                .endpoints
                .iter()
                .map(|e| {
                    json!({
                        "address": e.address.to_string(),
                        "load_balancing_weight": e.weight,
                        "health_status": e.health.as_str(),
                    })
                })
                .collect();
            json!({
                "name": c.name,
                "type": "STATIC",
                "lb_policy": match c.lb_policy { LbPolicy::RoundRobin => "ROUND_ROBIN" },
                "connect_timeout": format!("{}s", c.connect_timeout.as_secs_f64()),
                "http2": {
                    "max_concurrent_streams": c.http2.max_concurrent_streams,
                    "initial_stream_window_size": c.http2.initial_stream_window_size,
                    "initial_connection_window_size": c.http2.initial_connection_window_size,
                },
                "endpoints": endpoints,
            })
        })
        .collect();
    json!({
        "version": inner.snapshot.version,
        "node": { "id": b.node.id, "cluster": b.node.cluster },
        "admin": b.admin.map(|a| a.to_string()),
        "static_resources": { "listeners": listeners, "clusters": clusters },
    })
}
