//! What the admin server reports from: the control shard's view of the
//! shards, the config, xDS, pushes and outlier detection, and the state
//! that the action endpoints change.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use engine::{Bootstrap, Snapshot};
use glommio::Task;

use super::xds::XdsView;
use crate::outlier::OutlierView;
use shards::stats::{HostCounter, ShardStats};

/// The admin's state: what the endpoints report, and what the action
/// endpoints change.
pub(super) struct Inner {
    pub(super) shards: Vec<Arc<ShardStats>>,
    pub(super) snapshot: Arc<Snapshot>,
    pub(super) bootstrap: Bootstrap,
    /// `None` without `dynamic_resources`.
    pub(super) xds: Option<XdsView>,
    pub(super) pushes: PushStats,
    /// TLS certificate reloads: (done, failed).
    pub(super) tls_reloads: (u64, u64),
    /// Outlier detection as of the last sweep or snapshot.
    pub(super) outlier: OutlierView,
    /// Monotonic → wall clock, for ejection times.
    pub(super) epoch: (Instant, SystemTime),
    pub(super) accept: Option<Task<()>>,
    /// `POST /healthcheck/fail` (until `/healthcheck/ok`): `/ready`
    /// answers 503.
    pub(super) health_failed: bool,
    /// `POST /drain_listeners` was called.
    pub(super) listeners_drained: bool,
    /// Listeners that could not bind (retried by the control shard).
    pub(super) not_serving: Vec<crate::ports::NotServing>,
    /// Where admin actions go: the control loop's inbox.
    pub(super) events: Option<crate::events::EventSender>,
    /// Each DNS cluster's lookups.
    pub(super) dns: std::collections::BTreeMap<String, crate::dns::Counts>,
    /// Each actively checked cluster's checks.
    pub(super) health: std::collections::BTreeMap<String, crate::health::Counts>,
}

/// When the gateway started: the first call, made by `start` before
/// anything else (`/server_info`'s uptime).
pub(crate) fn started() -> Instant {
    static STARTED: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *STARTED.get_or_init(Instant::now)
}

/// Where the server stands, in Envoy's `server.state` words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ServerState {
    Live,
    /// `POST /healthcheck/fail`: being taken out of rotation.
    Draining,
    /// Shards not serving yet, or the first xDS fetch not done.
    Initializing,
}

impl Inner {
    /// `/ready` and `/server_info`'s state.
    pub(super) fn server_state(&self) -> ServerState {
        let serving = self.shards.iter().all(|s| s.serving.get() == 1);
        // As Envoy's init manager: not ready before the first LDS/CDS
        // fetch is done (or its initial_fetch_timeout passed).
        let xds_done = self.xds.as_ref().is_none_or(|x| x.initialized);
        // As Envoy: initializing first, whatever `/healthcheck/fail` says.
        if !(serving && xds_done) {
            ServerState::Initializing
        } else if self.health_failed {
            ServerState::Draining
        } else {
            ServerState::Live
        }
    }

    /// A host's counter summed over the shards that have touched it.
    pub(super) fn host_sum(&self, id: engine::HostId, f: HostCounter) -> u64 {
        self.shards
            .iter()
            .filter_map(|s| s.hosts.get(id))
            .map(|h| f(h).get())
            .sum()
    }
}

/// Snapshot pushes since start (config reloads and xDS updates).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct PushStats {
    pub(super) count: u64,
    pub(super) total: Duration,
    pub(super) last: Duration,
    pub(super) max: Duration,
}
