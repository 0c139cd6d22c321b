//! `Cluster`: a set of upstream endpoints and how they are reached and
//! picked.

use std::net::SocketAddr;
use std::time::Duration;

use super::health::HealthStatus;
use super::lb::{CommonLb, LbPolicy};
use super::outlier::OutlierDetection;
use super::upstream::{UpstreamHttp2, UpstreamOptions};

/// Envoy's default `Cluster.connect_timeout`.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A `STATIC` or `EDS` cluster.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub name: String,
    pub connect_timeout: Duration,
    pub lb_policy: LbPolicy,
    /// `load_assignment` endpoints, or for EDS the last assignment received.
    pub endpoints: Vec<Endpoint>,
    /// `Some` for `type: EDS`.
    pub eds: Option<Eds>,
    /// `http2_protocol_options`, used when the upstream speaks HTTP/2.
    pub http2: UpstreamHttp2,
    /// The upstream's protocol and transport.
    pub upstream: UpstreamOptions,
    /// `outlier_detection`; `None`: no passive ejection (as in Envoy).
    pub outlier_detection: Option<OutlierDetection>,
    /// `common_lb_config` with Envoy's defaults.
    pub common_lb: CommonLb,
    /// `per_connection_buffer_limit_bytes` (Envoy default 1 MiB): what one
    /// upstream connection may buffer.
    pub per_connection_buffer_limit_bytes: u32,
}

impl Cluster {
    /// Whether connections to its hosts made under `other` would be the
    /// same: what a pool of upstream connections is built from. Snapshot
    /// reuse and pool reuse both ask it, so a new connection setting is
    /// added here once.
    pub fn same_connections(&self, other: &Cluster) -> bool {
        self.connect_timeout == other.connect_timeout
            && self.http2 == other.http2
            && self.upstream == other.upstream
            && self.per_connection_buffer_limit_bytes == other.per_connection_buffer_limit_bytes
    }
}

/// `type: EDS` with `eds_cluster_config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eds {
    /// `service_name`, or the cluster name when empty (as Envoy).
    pub service_name: String,
    /// `eds_config.initial_fetch_timeout`.
    pub initial_fetch_timeout: Option<Duration>,
}

/// One `lb_endpoints` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub address: SocketAddr,
    /// `load_balancing_weight` (default 1).
    pub weight: u32,
    pub health: HealthStatus,
}
