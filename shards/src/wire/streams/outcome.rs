//! What a finished stream leaves behind: its access log lines, and its outcome for outlier detection.

use engine::outlier::CallResult;

use super::ConnCx;
use crate::wire::logging::LogState;
use crate::wire::pool::PoolRef;

impl ConnCx {
    /// Queues the stream's access log lines.
    pub(super) fn log(&self, l: &LogState, upstream: Option<(std::net::SocketAddr, &str)>) {
        let cx = self;
        l.emit(
            &cx.logs,
            &cx.wire,
            cx.protocol,
            upstream,
            cx.peer,
            cx.sni.as_deref(),
        );
    }

    /// Counts the stream's outcome for outlier detection, when the host's
    /// cluster in the current snapshot has it.
    pub(super) fn record_outlier(&self, pool: &PoolRef, result: CallResult) {
        let shard = &self.wire.shard;
        let snap = shard.snapshot();
        let p = pool.borrow();
        let Some(cluster) = snap.cluster(p.cluster_name()) else {
            return;
        };
        if !cluster
            .config
            .outlier_detection
            .as_ref()
            .is_some_and(|o| o.has_detector())
        {
            return;
        }
        if let Some(host) = cluster.host_by_addr(&p.addr) {
            shard.record_outlier(cluster, host, result);
        }
    }
}
