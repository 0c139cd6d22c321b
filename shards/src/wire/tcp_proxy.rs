//! A `tcp_proxy` chain's connection: a cluster and a host picked, a connect (up to `max_connect_attempts`, each to a host picked afresh), then a tunnel to it, and one access log line at the end.
//!
//! Nothing of the client's bytes is read before the backend is connected:
//! they wait in the socket (a TLS client's ClientHello included, which
//! `tls_inspector` only peeked at), so a passthrough backend sees the
//! connection exactly as the client opened it.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use engine::access_log::LogRecord;
use engine::outlier::CallResult;
use engine::{HostId, TcpProxy};

use super::logging::takes;
use super::pool::Budget;
use super::tls::{connect_upstream, Transport};
use super::tunnel::{self, Moved, TunnelLimits};
use super::WireShard;
use crate::signal::Subscription;
use crate::stats::ShardStats;

/// An open connection to a backend, counted as one of its cluster's
/// connections (circuit breakers) and its host's while it lives.
pub(super) struct Upstream {
    pub transport: Transport,
    /// TLS's ALPN chose HTTP/2.
    pub h2: bool,
    addr: SocketAddr,
    host: HostId,
    budget: Rc<Budget>,
    stats: Arc<ShardStats>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.budget.end_connection();
        self.stats.hosts.host(self.host).cx_active.dec();
    }
}

/// Serves one connection of a `tcp_proxy` chain: `down` is the client's
/// transport (its TLS already terminated when the chain has a
/// `transport_socket`), `sni` the server name the client asked for.
pub(super) async fn serve(
    wire: &Rc<WireShard>,
    mut down: Transport,
    proxy: &TcpProxy,
    (addresses, sni): (&super::opening::Addresses, Option<&str>),
    drains: &[&Subscription],
) {
    let shard = &wire.shard;
    let stats = &shard.stats.tunnel;
    stats.tcp_cx_total.inc();
    let (start, started) = (SystemTime::now(), Instant::now());
    let cluster = proxy.target.pick(shard.random());
    let connected = connect(wire, cluster, proxy.max_connect_attempts, addresses).await;
    let (flags, upstream, moved) = match connected {
        Err((flag, tried)) => (flag, tried, Moved::default()),
        Ok(mut up) => {
            let limits = TunnelLimits {
                idle: proxy.idle_timeout,
                deadline: proxy
                    .max_downstream_connection_duration
                    .map(|d| started + d),
                drain_time: shard.drain.time,
            };
            let no_bytes = (Vec::new(), Vec::new());
            let moved = tunnel::run(
                &mut down,
                &mut up.transport,
                no_bytes,
                (&limits, drains),
                stats,
            )
            .await;
            ("", Some(up.addr), moved)
        }
    };
    let targets = wire.log_targets(&proxy.access_log);
    let took = started.elapsed();
    for (sink, format, rule) in &targets {
        let outcome = (None, took, flags, None);
        let none = |_: &str| -> Option<&'static str> { None };
        if rule
            .as_ref()
            .is_some_and(|r| !takes(r, outcome, &none, shard.random_u64()))
        {
            continue;
        }
        let record = LogRecord {
            start: Some(start),
            duration: Some(took),
            protocol: "",
            flags,
            bytes_received: moved.received,
            bytes_sent: moved.sent,
            upstream_host: upstream,
            upstream_cluster: Some(cluster),
            downstream: Some(addresses.peer),
            downstream_direct: Some(addresses.direct_peer),
            sni,
            ..LogRecord::default()
        };
        wire.log_line(*sink, |lines| format.render(&record, lines));
    }
    wire.flush_logs();
}

/// Connects to a host of `cluster`, trying up to `attempts` hosts; on
/// failure, Envoy's response flag for why (`NR`: no such cluster, `UH`: no
/// host to pick, `UO`: the circuit breakers' `max_connections`, `UF`:
/// every attempt failed) and the last host tried.
async fn connect(
    wire: &WireShard,
    cluster: &str,
    attempts: u32,
    down: &super::opening::Addresses,
) -> Result<Upstream, (&'static str, Option<SocketAddr>)> {
    let shard = &wire.shard;
    let stats = &shard.stats;
    let mut tried = None;
    for _ in 0..attempts {
        // A fresh look at the snapshot per attempt, held only while
        // picking: a connect never pins a superseded config.
        let (addr, host, timeout, tls, budget, header) = {
            let snap = shard.snapshot();
            let Some(c) = snap.cluster(cluster) else {
                stats.tunnel.tcp_no_route.inc();
                return Err(("NR", tried));
            };
            let Some(pick) = shard.pick_host(c, |h| wire.in_flight(h), None) else {
                stats.tunnel.tcp_no_healthy_upstream.inc();
                return Err(("UH", tried));
            };
            let budget = wire.budget(&c.config);
            let tls = c.config.upstream.tls.clone();
            // The cluster's PROXY header names this tunnel's client.
            let header = c
                .config
                .upstream
                .proxy_protocol
                .as_ref()
                .map(|p| super::tls::proxy_header(p, (down.peer, down.local), &down.tlvs));
            (
                pick.host.address,
                pick.host.id,
                c.config.connect_timeout,
                tls,
                budget,
                header,
            )
        };
        tried = Some(addr);
        let preface = header.as_deref().into();
        match connect_host(
            wire,
            budget,
            (addr, host),
            (timeout, tls.as_deref()),
            preface,
        )
        .await
        {
            Ok(up) => return Ok(up),
            Err(ConnectError::Overflow) => return Err(("UO", Some(addr))),
            Err(ConnectError::Failed(e)) => {
                tracing::debug!(%addr, "tcp_proxy connect failed: {e}");
                let snap = shard.snapshot();
                if let Some(c) = snap.cluster(cluster) {
                    let found = c.host_map.get(&addr).and_then(|&i| c.hosts.get(i as usize));
                    if let Some(h) = found.filter(|h| h.id == host) {
                        shard.record_outlier(c, h, CallResult::ConnectFailure);
                    }
                }
            }
        }
    }
    stats.tunnel.tcp_connect_attempts_exceeded.inc();
    Err(("UF", tried))
}

/// Why a connect to a host failed.
pub(super) enum ConnectError {
    /// The cluster's circuit breakers' `max_connections`.
    Overflow,
    Failed(std::io::Error),
}

/// Connects to `host` at `addr` within `timeout` (then TLS when the
/// cluster has it), within its cluster's `max_connections` (`budget`):
/// a connection of the cluster's and the host's while it lives. Errors
/// are counted on the host (`cx_overflow`, `cx_connect_fail`).
pub(super) async fn connect_host(
    wire: &WireShard,
    budget: Rc<Budget>,
    (addr, host): (SocketAddr, HostId),
    (timeout, tls): (std::time::Duration, Option<&engine::tls::UpstreamTls>),
    preface: super::tls::Preface<'_>,
) -> Result<Upstream, ConnectError> {
    let stats = &wire.shard.stats;
    let hs = stats.hosts.host(host);
    if !budget.try_connection() {
        hs.cx_overflow.inc();
        return Err(ConnectError::Overflow);
    }
    match connect_upstream(addr, timeout, tls, preface).await {
        Ok((transport, alpn)) => {
            hs.cx_total.inc();
            hs.cx_active.inc();
            Ok(Upstream {
                transport,
                h2: alpn == Some(super::codec::Proto::H2),
                addr,
                host,
                budget,
                stats: Arc::clone(stats),
            })
        }
        Err(e) => {
            budget.end_connection();
            hs.cx_connect_fail.inc();
            Err(ConnectError::Failed(e))
        }
    }
}
