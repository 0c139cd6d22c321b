//! What crosses between the control shard and a data shard: the messages to a data shard and its replies.

use std::sync::Arc;

use engine::outlier::HostReport;
use engine::{EjectedSet, HostId, Snapshot};

/// Messages from the control shard to a data shard.
#[derive(Clone)]
pub enum ShardMsg {
    /// Adopt this snapshot; answered with [`ShardReply::Applied`].
    Apply(Arc<Snapshot>),
    /// Outlier detection changed which hosts are ejected. Not answered.
    Ejections(Arc<EjectedSet>),
    /// Hand over (and restart) the outlier counters of these clusters' hosts;
    /// answered with [`ShardReply::Outlier`].
    CollectOutlier(Arc<[String]>),
    /// Stop accepting, drain every connection (`--drain-time-s`), stop.
    Shutdown,
    /// `POST /healthcheck/fail` (true) or `/healthcheck/ok` (false).
    HealthCheckFailed(bool),
    /// `POST /drain_listeners`: every connection drains; the listeners
    /// stop accepting now, or (`graceful`) at the end of the drain time.
    /// Not answered.
    DrainListeners { graceful: bool },
}

/// A data shard's answer to the control shard. The control loop has at most
/// one request outstanding per shard, so answers never interleave.
pub enum ShardReply {
    /// The version applied, or why the snapshot could not be.
    Applied(Result<u64, String>),
    /// This shard's counts since the last collection, per host with any.
    Outlier(Vec<(HostId, HostReport)>),
}
