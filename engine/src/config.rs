//! The validated configuration model: what an Envoy v3 bootstrap (or, later,
//! xDS resources) turns into once the `xds` crate has decoded and checked it.
//!
//! Every value here is already valid: the data path never re-checks config.
//! Field names follow Envoy's so `docs/configuration.md` maps one to one.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use regex::Regex;

/// Envoy's default route timeout (`RouteAction.timeout`).
pub const DEFAULT_ROUTE_TIMEOUT: Duration = Duration::from_secs(15);
/// Envoy's default `Cluster.connect_timeout`.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Envoy's edge guidance for `http2_protocol_options.max_concurrent_streams`.
pub const DEFAULT_DOWNSTREAM_MAX_CONCURRENT_STREAMS: u32 = 100;
/// Envoy's default `max_request_headers_kb` (60 KiB).
pub const DEFAULT_MAX_HEADER_LIST_SIZE: u32 = 60 * 1024;

/// The whole static configuration of one gateway process.
#[derive(Debug, Clone)]
pub struct Bootstrap {
    pub node: Node,
    /// `admin.address`; no admin server when absent.
    pub admin: Option<SocketAddr>,
    pub listeners: Vec<Arc<Listener>>,
    pub clusters: Vec<Arc<Cluster>>,
    /// `dynamic_resources`: listeners and clusters from xDS or files, on
    /// top of the static ones above.
    pub dynamic: Option<DynamicResources>,
}

/// `dynamic_resources`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DynamicResources {
    /// `ads_config`: the ADS server, needed by any `ads: {}` source.
    pub ads: Option<AdsConfig>,
    /// `lds_config`; `None`: no dynamic listeners.
    pub lds: Option<ConfigSource>,
    /// `cds_config`; `None`: no dynamic clusters.
    pub cds: Option<ConfigSource>,
}

/// `ads_config` (`api_type: GRPC`, V3, one `envoy_grpc` service).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdsConfig {
    /// `grpc_services[0].envoy_grpc.cluster_name`: a static cluster.
    pub cluster: String,
    /// `grpc_services[0].envoy_grpc.authority` (default: the cluster name).
    pub authority: String,
    pub set_node_on_first_message_only: bool,
}

/// Where one resource type comes from (`ConfigSource`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// `ads: {}` with its `initial_fetch_timeout` (Envoy's default 15 s;
    /// `None` when set to 0: wait forever).
    Ads {
        initial_fetch_timeout: Option<Duration>,
    },
    /// `path_config_source.path` (or the older `path`): a file holding a
    /// `DiscoveryResponse`, re-read when it changes.
    Path(std::path::PathBuf),
}

/// Envoy's default `initial_fetch_timeout`.
pub const DEFAULT_INITIAL_FETCH_TIMEOUT: Duration = Duration::from_secs(15);

/// `node`: who we are to a control plane.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    pub id: String,
    pub cluster: String,
    /// The bootstrap's `node` as protobuf bytes (`envoy.config.core.v3.Node`
    /// with our user agent filled in), sent as-is to control planes; the
    /// engine does not interpret it.
    pub proto: Vec<u8>,
}

/// A listener with exactly one HTTP connection manager filter chain.
#[derive(Debug, Clone)]
pub struct Listener {
    pub name: String,
    pub address: SocketAddr,
    pub http: HttpConnectionManager,
}

/// `envoy.filters.network.http_connection_manager`, the parts we implement.
#[derive(Debug, Clone)]
pub struct HttpConnectionManager {
    pub stat_prefix: String,
    /// The route table: inline, or the last one RDS delivered for `rds`.
    pub route_config: Arc<RouteConfig>,
    /// `rds`: the route table comes from RDS under this name (until it
    /// arrives `route_config` is an empty table of that name).
    pub rds: Option<Rds>,
    /// `http2_protocol_options.max_concurrent_streams` (per downstream connection).
    pub max_concurrent_streams: u32,
    /// `max_request_headers_kb` in bytes.
    pub max_header_list_size: u32,
    /// `http2_protocol_options.initial_stream_window_size`.
    pub initial_stream_window_size: u32,
    /// `http2_protocol_options.initial_connection_window_size`.
    pub initial_connection_window_size: u32,
    /// `common_http_protocol_options.idle_timeout` (Envoy default 1 h; `None` disables).
    pub idle_timeout: Option<Duration>,
    /// `stream_idle_timeout` (Envoy default 5 min; `None` disables).
    pub stream_idle_timeout: Option<Duration>,
    /// `drain_timeout` for GOAWAY on reload/shutdown (Envoy default 5 s).
    pub drain_timeout: Duration,
    /// Append the downstream peer to `x-forwarded-for`: Envoy's
    /// `use_remote_address: true` without `skip_xff_append` (Envoy's default
    /// is false; edge deployments set it).
    pub append_x_forwarded_for: bool,
}

/// `route_config` (inline `RouteConfiguration`).
#[derive(Debug, Clone)]
pub struct RouteConfig {
    pub name: String,
    pub virtual_hosts: Vec<VirtualHost>,
}

#[derive(Debug, Clone)]
pub struct VirtualHost {
    pub name: String,
    pub domains: Vec<DomainMatcher>,
    pub routes: Vec<Route>,
}

/// One entry of `VirtualHost.domains`, classified as Envoy does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DomainMatcher {
    /// `example.com` (stored lowercase).
    Exact(String),
    /// `*.example.com` or `*-bar.foo.com`: stores the part after `*`.
    Suffix(String),
    /// `foo.*`: stores the part before `*`.
    Prefix(String),
    /// `*`.
    Any,
}

#[derive(Debug, Clone)]
pub struct Route {
    pub name: String,
    pub matcher: RouteMatch,
    pub action: RouteAction,
}

#[derive(Debug, Clone)]
pub struct RouteMatch {
    pub path: PathMatch,
    /// `case_sensitive` (default true) for `prefix` and `path`.
    pub case_sensitive: bool,
    pub headers: Vec<HeaderMatcher>,
}

#[derive(Debug, Clone)]
pub enum PathMatch {
    Prefix(String),
    Path(String),
    /// `safe_regex`: must match the whole path (query stripped), as in Envoy.
    Regex(Regex),
}

#[derive(Debug, Clone)]
pub struct HeaderMatcher {
    /// Lowercase header name; `:authority`, `:path`, `:method`, `:scheme` allowed.
    pub name: String,
    pub kind: HeaderMatchKind,
    pub invert: bool,
}

#[derive(Debug, Clone)]
pub enum HeaderMatchKind {
    Exact(String),
    Prefix(String),
    Suffix(String),
    Contains(String),
    Regex(Regex),
    /// `present_match: true|false`.
    Present(bool),
    /// `range_match`: `start <= value < end` for an integer value.
    Range {
        start: i64,
        end: i64,
    },
}

#[derive(Debug, Clone)]
pub struct RouteAction {
    pub target: ClusterTarget,
    /// `timeout`; `None` when configured as 0 (disabled).
    pub timeout: Option<Duration>,
    pub prefix_rewrite: Option<String>,
    pub host_rewrite_literal: Option<String>,
}

#[derive(Debug, Clone)]
pub enum ClusterTarget {
    Cluster(String),
    Weighted(WeightedClusters),
}

/// `weighted_clusters`: cumulative weights so a pick is one binary search.
#[derive(Debug, Clone)]
pub struct WeightedClusters {
    /// `(cluster name, cumulative upper bound)`, strictly increasing bounds.
    pub clusters: Vec<(String, u32)>,
    pub total_weight: u32,
}

impl WeightedClusters {
    /// Builds from `(name, weight)` pairs; zero weights are dropped.
    /// Returns `None` when the total is 0.
    pub fn new(entries: impl IntoIterator<Item = (String, u32)>) -> Option<Self> {
        let mut total: u32 = 0;
        let mut clusters = Vec::new();
        for (name, w) in entries {
            if w == 0 {
                continue;
            }
            total = total.checked_add(w)?;
            clusters.push((name, total));
        }
        (total > 0).then_some(Self {
            clusters,
            total_weight: total,
        })
    }

    /// Picks the cluster for a random value in `0..total_weight`.
    pub fn pick(&self, random: u32) -> &str {
        let r = random % self.total_weight;
        let i = self.clusters.partition_point(|(_, bound)| *bound <= r);
        &self.clusters[i].0
    }
}

/// `rds` of an HTTP connection manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rds {
    pub route_config_name: String,
    /// `config_source.initial_fetch_timeout`.
    pub initial_fetch_timeout: Option<Duration>,
}

/// `type: EDS` with `eds_cluster_config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eds {
    /// `service_name`, or the cluster name when empty (as Envoy).
    pub service_name: String,
    /// `eds_config.initial_fetch_timeout`.
    pub initial_fetch_timeout: Option<Duration>,
}

/// `Cluster.lb_policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LbPolicy {
    RoundRobin,
}

/// A `STATIC` or `EDS` cluster with an HTTP/2 upstream.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub name: String,
    pub connect_timeout: Duration,
    pub lb_policy: LbPolicy,
    /// `load_assignment` endpoints, or for EDS the last assignment received.
    pub endpoints: Vec<Endpoint>,
    /// `Some` for `type: EDS`.
    pub eds: Option<Eds>,
    pub http2: UpstreamHttp2,
}

/// `HttpProtocolOptions.explicit_http_config.http2_protocol_options`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamHttp2 {
    /// Our own cap on streams per upstream connection; the peer's
    /// SETTINGS_MAX_CONCURRENT_STREAMS can lower it further.
    pub max_concurrent_streams: u32,
    pub initial_stream_window_size: u32,
    pub initial_connection_window_size: u32,
}

impl Default for UpstreamHttp2 {
    fn default() -> Self {
        Self {
            max_concurrent_streams: 1024,
            initial_stream_window_size: 256 * 1024,
            // Envoy's default. A connection carries at most
            // `connection window / stream window` streams (1024 here), so
            // streams whose readers stall never starve the others; the
            // window costs memory only for data actually in flight.
            initial_connection_window_size: 256 * 1024 * 1024,
        }
    }
}

/// One `lb_endpoints` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub address: SocketAddr,
    /// `load_balancing_weight` (default 1).
    pub weight: u32,
    pub health: HealthStatus,
}

/// `config.core.v3.HealthStatus`; numeric values are Envoy's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum HealthStatus {
    Unknown = 0,
    Healthy = 1,
    Unhealthy = 2,
    Draining = 3,
    Timeout = 4,
    Degraded = 5,
}

impl HealthStatus {
    pub fn from_i32(v: i32) -> Option<Self> {
        Some(match v {
            0 => Self::Unknown,
            1 => Self::Healthy,
            2 => Self::Unhealthy,
            3 => Self::Draining,
            4 => Self::Timeout,
            5 => Self::Degraded,
            _ => return None,
        })
    }

    /// Whether a load-balancing policy may choose a host in this state
    /// (Envoy: UNKNOWN and HEALTHY are healthy, DEGRADED is degraded).
    pub fn is_routable(self) -> bool {
        matches!(self, Self::Unknown | Self::Healthy | Self::Degraded)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "UNKNOWN",
            Self::Healthy => "HEALTHY",
            Self::Unhealthy => "UNHEALTHY",
            Self::Draining => "DRAINING",
            Self::Timeout => "TIMEOUT",
            Self::Degraded => "DEGRADED",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_pick_follows_cumulative_bounds() {
        let w = WeightedClusters::new([("a".into(), 1), ("z".into(), 0), ("b".into(), 3)]).unwrap();
        assert_eq!(w.total_weight, 4);
        assert_eq!(w.pick(0), "a");
        assert_eq!(w.pick(1), "b");
        assert_eq!(w.pick(3), "b");
        assert_eq!(w.pick(4), "a");
        assert!(WeightedClusters::new([("a".into(), 0)]).is_none());
    }
}
