//! What crosses between threads: commands to the control shard, messages to the data shards and their replies.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use engine::outlier::HostReport;
use engine::{Bootstrap, EjectedSet, HostId, Snapshot};

/// Messages from the control shard to a data shard.
pub enum ShardMsg {
    /// Adopt this snapshot; answered with [`ShardReply::Applied`].
    Apply(Arc<Snapshot>),
    /// Outlier detection changed which hosts are ejected. Not answered.
    Ejections(Arc<EjectedSet>),
    /// Hand over (and restart) the outlier counters of these clusters' hosts;
    /// answered with [`ShardReply::Outlier`].
    CollectOutlier(Arc<[String]>),
    Shutdown {
        drain: Duration,
    },
}

/// A data shard's answer to the control shard. The control loop has at most
/// one request outstanding per shard, so answers never interleave.
pub enum ShardReply {
    /// The version applied, or why the snapshot could not be.
    Applied(Result<u64, String>),
    /// This shard's counts since the last collection, per host with any.
    Outlier(Vec<(HostId, HostReport)>),
}

/// From a [`GatewayHandle`](crate::GatewayHandle) (CLI, SIGHUP, tests) to
/// the control shard.
pub(crate) enum Command {
    Reload(Box<Bootstrap>, mpsc::Sender<Result<u64, String>>),
    Shutdown,
}
