//! `envoy.filters.network.tcp_proxy`: a filter chain that moves a connection's bytes to an upstream host and back, unread (TLS passthrough chosen by SNI, plain TCP services).

use std::time::Duration;

use super::access_log::AccessLog;
use super::route::WeightedClusters;

/// Envoy's default `idle_timeout` of a TCP proxy: one hour.
pub const DEFAULT_TCP_IDLE_TIMEOUT: Duration = Duration::from_secs(3600);

/// A filter chain's `tcp_proxy`, the parts we implement.
#[derive(Debug, Clone)]
pub struct TcpProxy {
    pub stat_prefix: String,
    /// `cluster` or `weighted_clusters`. The cluster is looked up when a
    /// connection opens, as Envoy does: one the snapshot lacks (CDS has
    /// not sent it yet) closes that connection, counted as no route.
    pub target: TcpTarget,
    /// `idle_timeout`: no byte either way for this long closes both sides
    /// (default one hour; `0s` disables it).
    pub idle_timeout: Option<Duration>,
    /// `max_connect_attempts` (default 1): connects tried, each to a host
    /// picked afresh, before the client's connection is closed.
    pub max_connect_attempts: u32,
    /// `max_downstream_connection_duration`: a connection lives at most
    /// this long (none: no limit).
    pub max_downstream_connection_duration: Option<Duration>,
    pub access_log: Vec<AccessLog>,
}

/// Where a TCP proxy's connections go.
#[derive(Debug, Clone)]
pub enum TcpTarget {
    Cluster(String),
    /// `weighted_clusters`: one cluster per connection, drawn by weight.
    Weighted(WeightedClusters),
}

impl TcpTarget {
    /// The cluster of a new connection; `random` draws among weighted ones.
    pub fn pick(&self, random: u32) -> &str {
        match self {
            TcpTarget::Cluster(c) => c,
            TcpTarget::Weighted(w) => w.pick(random),
        }
    }
}
