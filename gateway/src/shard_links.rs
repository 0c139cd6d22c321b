//! The data shards as the control shard sees them: how they are laid out, starting them with the first snapshot, waiting for their acks, stopping them.

use std::sync::Arc;

use engine::Snapshot;
use glommio::channels::shared_channel::{self, ConnectedReceiver, ConnectedSender};
use glommio::{LocalExecutorBuilder, Placement};
use shards::messages::{ShardMsg, ShardReply};
use shards::stats::ShardStats;

use crate::error::StartError;

/// How the data shards are laid out and configured.
pub(crate) struct Layout {
    pub shards: usize,
    pub cpus: Option<Vec<usize>>,
    pub cookie_format: engine::session::CookieFormat,
    pub pacing: shards::pacing::Pacing,
    pub logs: Arc<shards::access_log::LogWriter>,
    pub drain: shards::drain::DrainOptions,
    /// The process's listening sockets (hot restart).
    pub sockets: Arc<shards::wire::sockets::ListenSockets>,
    /// The overload manager's state.
    pub overload: Arc<shards::overload::OverloadState>,
    /// Set once the first configuration is complete (static, or the first
    /// xDS fetches done or timed out): what a hot restart waits for before
    /// it tells the previous process to drain.
    pub ready: Arc<std::sync::atomic::AtomicBool>,
}

/// One data shard: the channel to it, the channel of its replies, and its
/// thread (taken when it is joined).
pub(crate) struct ShardLink {
    pub tx: ConnectedSender<ShardMsg>,
    pub acks: ConnectedReceiver<ShardReply>,
    thread: Option<glommio::ExecutorJoinHandle<()>>,
}

/// Starts one data shard per entry of `shard_stats`, each serving `first`,
/// and waits until every one acknowledged it. The shards started so far
/// are in `links` whatever the outcome, so that a failure can stop them.
pub(crate) async fn start(
    links: &mut Vec<ShardLink>,
    layout: &Layout,
    shard_stats: &[Arc<ShardStats>],
    first: &Arc<Snapshot>,
) -> Result<(), StartError> {
    for (i, stats) in shard_stats.iter().enumerate() {
        let (tx, rx) = shared_channel::new_bounded::<ShardMsg>(4);
        let (ack_tx, ack_rx) = shared_channel::new_bounded::<ShardReply>(4);
        let placement = match &layout.cpus {
            Some(c) => Placement::Fixed(c[i % c.len()]),
            None => Placement::Unbound,
        };
        let stats = Arc::clone(stats);
        let first = Arc::clone(first);
        let logs = Arc::clone(&layout.logs);
        let (cookie_format, pacing, drain) = (layout.cookie_format, layout.pacing, layout.drain);
        let data_shards = layout.shards;
        let sockets = Arc::clone(&layout.sockets);
        let overload = Arc::clone(&layout.overload);
        let thread = LocalExecutorBuilder::new(placement)
            .io_memory(1 << 20)
            .name(&format!("shard-{i}"))
            .spawn(move || {
                let config = shards::data_shard::ShardConfig {
                    cookie_format,
                    pacing,
                    data_shards,
                    logs,
                    drain,
                    sockets,
                    overload,
                };
                shards::data_shard::run(i, stats, first, config, rx, ack_tx)
            })
            .map_err(|e| StartError::Shard(i, e.to_string()))?;
        links.push(ShardLink {
            tx: tx.connect().await,
            acks: ack_rx.connect().await,
            thread: Some(thread),
        });
    }
    // The first snapshot travels inside `run`; wait for every shard's ack.
    collect_acks(links).await.map_err(StartError::Bind)
}

/// Waits for one `Applied` reply from every shard; the first error wins.
pub(crate) async fn collect_acks(links: &[ShardLink]) -> Result<(), String> {
    let mut first_err = None;
    for (i, l) in links.iter().enumerate() {
        match l.acks.recv().await {
            Some(ShardReply::Applied(Ok(_))) => {}
            Some(ShardReply::Applied(Err(e))) => {
                first_err.get_or_insert(e);
            }
            Some(ShardReply::Outlier(_)) => {
                first_err.get_or_insert(format!("shard {i}: unexpected outlier report"));
            }
            None => {
                first_err.get_or_insert(format!("shard {i} stopped"));
            }
        }
    }
    first_err.map_or(Ok(()), Err)
}

/// Tells every shard to stop (they drain first) and waits for their threads.
pub(crate) async fn stop_shards(links: &mut [ShardLink]) {
    for l in links.iter() {
        let _ = l.tx.send(ShardMsg::Shutdown).await;
    }
    // Joined on a thread of their own: the admin server runs on this one
    // and answers (`/stats`, `/ready`) through the drain.
    let threads: Vec<_> = links.iter_mut().filter_map(|l| l.thread.take()).collect();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&done);
    let joiner = std::thread::spawn(move || {
        for t in threads {
            let _ = t.join();
        }
        flag.store(true, std::sync::atomic::Ordering::Release);
    });
    while !done.load(std::sync::atomic::Ordering::Acquire) {
        glommio::timer::sleep(std::time::Duration::from_millis(20)).await;
    }
    let _ = joiner.join();
}
