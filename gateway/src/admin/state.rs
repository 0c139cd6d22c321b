//! What the admin server reports from: the control shard's view of the
//! shards, the config, xDS, pushes and outlier detection, and the state
//! that the action endpoints change.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use engine::{Bootstrap, Snapshot};

use super::xds::XdsView;
use crate::outlier::OutlierView;
use shards::stats::{HostCounter, ShardStats};

/// The admin's state: what the endpoints report. The control shard keeps
/// one and publishes a copy of it on each change (cheap: the large parts
/// are shared), which the admin thread renders from.
#[derive(Clone)]
pub(super) struct Inner {
    pub(super) shards: Vec<Arc<ShardStats>>,
    pub(super) snapshot: Arc<Snapshot>,
    pub(super) bootstrap: Arc<Bootstrap>,
    /// `None` without `dynamic_resources`.
    pub(super) xds: Option<Arc<XdsView>>,
    pub(super) pushes: PushStats,
    /// TLS certificate reloads: (done, failed).
    pub(super) tls_reloads: (u64, u64),
    /// Outlier detection as of the last sweep or snapshot.
    pub(super) outlier: Arc<OutlierView>,
    /// Monotonic → wall clock, for ejection times.
    pub(super) epoch: (Instant, SystemTime),
    /// What the action endpoints set, at once (shared by every copy).
    pub(super) flags: Arc<Flags>,
    /// Listeners that could not bind (retried by the control shard).
    pub(super) not_serving: Arc<Vec<crate::ports::NotServing>>,
    /// Each DNS cluster's lookups.
    pub(super) dns: Arc<std::collections::BTreeMap<String, crate::dns::Counts>>,
    /// Each actively checked cluster's checks.
    pub(super) health: Arc<std::collections::BTreeMap<String, crate::health::Counts>>,
    /// The overload manager's levels and pressures, live.
    pub(super) overload: Arc<shards::overload::OverloadState>,
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
        } else if self.flags.health_failed() {
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

/// What the action endpoints change, which `/ready`, `/listeners` and the
/// stats say from the moment they are answered.
#[derive(Debug, Default)]
pub(super) struct Flags {
    /// `POST /healthcheck/fail` (until `/healthcheck/ok`): `/ready`
    /// answers 503.
    health_failed: AtomicBool,
    /// `POST /drain_listeners` was called.
    listeners_drained: AtomicBool,
}

impl Flags {
    pub(super) fn health_failed(&self) -> bool {
        self.health_failed.load(Relaxed)
    }

    pub(super) fn listeners_drained(&self) -> bool {
        self.listeners_drained.load(Relaxed)
    }

    pub(super) fn set_health_failed(&self, failed: bool) {
        self.health_failed.store(failed, Relaxed);
    }

    pub(super) fn set_listeners_drained(&self) {
        self.listeners_drained.store(true, Relaxed);
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
