//! The main task of a data shard's executor: apply snapshots as they arrive,
//! acknowledge them, and drain on shutdown.
//!
//! It builds the shard's routing context ([`Shard`]) and its runtime
//! ([`ShardRuntime`]) around it: snapshots and shutdown go to the runtime,
//! ejections and outlier collection straight to the routing context they
//! concern.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::session::CookieFormat;
use engine::Snapshot;
use glommio::channels::shared_channel::{SharedReceiver, SharedSender};

use crate::drain::DrainOptions;
use crate::messages::{ShardMsg, ShardReply};
use crate::pacing::Pacing;
use crate::shard::Shard;
use crate::stats::ShardStats;
use crate::wire::runtime::ShardRuntime;

/// How a data shard runs, fixed for the gateway's life.
#[derive(Clone)]
pub struct ShardConfig {
    /// How new session cookies are written.
    pub cookie_format: CookieFormat,
    pub pacing: Pacing,
    /// How many data shards run (listener connection limits are shared
    /// among them).
    pub data_shards: usize,
    /// Where access log lines go.
    pub logs: Arc<crate::access_log::LogWriter>,
    /// `--drain-time-s`, `--drain-strategy`.
    pub drain: DrainOptions,
    /// The process's listening sockets (hot restart).
    pub sockets: Arc<crate::wire::sockets::ListenSockets>,
    /// The overload manager's state.
    pub overload: Arc<crate::overload::OverloadState>,
}

pub async fn run(
    id: usize,
    stats: Arc<ShardStats>,
    first: Arc<Snapshot>,
    ShardConfig {
        cookie_format,
        pacing,
        data_shards,
        logs,
        drain,
        sockets,
        overload,
    }: ShardConfig,
    inbox: SharedReceiver<ShardMsg>,
    acks: SharedSender<ShardReply>,
) {
    pacing.install(Arc::clone(&stats));
    let inbox = inbox.connect().await;
    let acks = acks.connect().await;
    let shard = Shard::new(
        id,
        data_shards,
        Arc::clone(&stats),
        Arc::clone(&first),
        cookie_format,
        drain,
        overload,
    );
    if let Some(load) = sockets.shard_load(id) {
        // Detached: it ends with the executor.
        glommio::spawn_local(crate::steering::forget_pending(load)).detach();
    }
    let mut runtime = ShardRuntime::new(Rc::clone(&shard), logs, sockets);
    let version = first.version;
    let result = runtime
        .apply(first)
        .map(|_| version)
        .map_err(|e| e.to_string());
    if result.is_ok() {
        stats.serving.set(1);
    }
    let _ = acks.send(ShardReply::Applied(result)).await;

    while let Some(msg) = inbox.recv().await {
        match msg {
            ShardMsg::Apply(snap) => {
                let v = snap.version;
                let r = runtime.apply(snap).map(|_| v).map_err(|e| e.to_string());
                if r.is_ok() {
                    stats.serving.set(1);
                }
                let _ = acks.send(ShardReply::Applied(r)).await;
            }
            ShardMsg::Ejections(set) => shard.set_ejected(set),
            ShardMsg::HealthCheckFailed(failed) => runtime.set_health_failed(failed),
            ShardMsg::DrainListeners { graceful } => runtime.drain_listeners(graceful),
            ShardMsg::CollectOutlier(clusters) => {
                let report = shard.collect_outlier(&clusters);
                let _ = acks.send(ShardReply::Outlier(report)).await;
            }
            ShardMsg::Shutdown => {
                stats.serving.set(0);
                runtime.begin_shutdown();
                // Connections close by the end of the drain time (then
                // write what is left for at most a second).
                let until = Instant::now() + drain.time + Duration::from_millis(1100);
                // A connection accepted just before the accept loops
                // stopped has a task that has not run yet, so it is not
                // counted open: let it run first (else the shard would end
                // with it, and its client would be reset unanswered).
                loop {
                    glommio::timer::sleep(Duration::from_millis(10)).await;
                    if stats.downstream.cx_active.get() == 0 || Instant::now() >= until {
                        break;
                    }
                }
                runtime.stop();
                return;
            }
        }
    }
}
