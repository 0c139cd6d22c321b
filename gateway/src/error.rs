//! Why a gateway could not start, and what the control shard tells `start` once it serves (or why not).

use std::collections::BTreeMap;
use std::net::SocketAddr;

/// Why [`start`](crate::start) failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration (a file source read at start) is invalid.
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Bind(String),
    #[error("starting shard {0}: {1}")]
    Shard(usize, String),
    #[error("control shard: {0}")]
    Control(String),
}

/// What the control shard reports to `start`: the admin address and the
/// bound listeners, or why it could not serve.
pub(crate) type Started = Result<(Option<SocketAddr>, BTreeMap<String, SocketAddr>), StartError>;
