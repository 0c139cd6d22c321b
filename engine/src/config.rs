//! The validated configuration model: what an Envoy v3 bootstrap (or, later,
//! xDS resources) turns into once the `xds` crate has decoded and checked it.
//!
//! Every value here is already valid: the data path never re-checks config.
//! Field names follow Envoy's so `docs/configuration.md` maps one to one.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use regex::Regex;

use crate::listener::Listener;

/// Envoy's default route timeout (`RouteAction.timeout`).
pub const DEFAULT_ROUTE_TIMEOUT: Duration = Duration::from_secs(15);
/// Envoy's default `Cluster.connect_timeout`.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Envoy's edge guidance for `http2_protocol_options.max_concurrent_streams`.
pub const DEFAULT_DOWNSTREAM_MAX_CONCURRENT_STREAMS: u32 = 100;
/// Envoy's default `per_connection_buffer_limit_bytes` (1 MiB), for
/// listeners and clusters.
pub const DEFAULT_PER_CONNECTION_BUFFER_LIMIT: u32 = 1024 * 1024;
/// Envoy's default `max_request_headers_kb` (60 KiB).
pub const DEFAULT_MAX_HEADER_LIST_SIZE: u32 = 60 * 1024;
/// Envoy's default `common_http_protocol_options.max_headers_count`.
pub const DEFAULT_MAX_HEADERS_COUNT: u32 = 100;

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
    /// `layered_runtime`: the runtime keys we implement, from its static
    /// layers.
    pub runtime: Runtime,
}

/// The runtime keys we implement, as the bootstrap's `layered_runtime`
/// static layers set them (later layers override earlier ones, as in
/// Envoy). Applies to every listener by name, static or from LDS.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Runtime {
    /// `envoy.resource_limits.listener.<name>.connection_limit` by listener
    /// name: the listener's open connections for the whole process (each
    /// of N data shards takes `ceil(limit / N)`).
    pub listener_connection_limits: std::collections::BTreeMap<String, u64>,
}

impl Runtime {
    /// `envoy.resource_limits.listener.<listener>.connection_limit`.
    pub fn connection_limit(&self, listener: &str) -> Option<u64> {
        self.listener_connection_limits.get(listener).copied()
    }
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

/// `envoy.filters.network.http_connection_manager`, the parts we implement.
#[derive(Debug, Clone)]
pub struct HttpConnectionManager {
    pub stat_prefix: String,
    /// `codec_type`: which protocols the listener speaks downstream.
    pub codec_type: CodecType,
    /// `http_protocol_options`: HTTP/1.1 downstream settings.
    pub http1: Http1Options,
    /// `access_log`: where each finished request is logged, and how.
    pub access_log: Vec<AccessLog>,
    /// The route table: inline, or the last one RDS delivered for `rds`.
    pub route_config: Arc<RouteConfig>,
    /// `rds`: the route table comes from RDS under this name (until it
    /// arrives `route_config` is an empty table of that name).
    pub rds: Option<Rds>,
    /// `http2_protocol_options.max_concurrent_streams` (per downstream connection).
    pub max_concurrent_streams: u32,
    /// `max_request_headers_kb` in bytes.
    pub max_header_list_size: u32,
    /// `common_http_protocol_options.max_headers_count` (Envoy default 100):
    /// a request (or trailer section) with more fields, pseudo-headers and
    /// each `cookie` crumb included, is reset.
    pub max_headers_count: u32,
    /// `common_http_protocol_options.headers_with_underscores_action`.
    pub headers_with_underscores_action: HeadersWithUnderscoresAction,
    /// The flood limits of `http2_protocol_options`.
    pub http2_flood: Http2FloodLimits,
    /// `http2_protocol_options.initial_stream_window_size`.
    pub initial_stream_window_size: u32,
    /// `http2_protocol_options.initial_connection_window_size`.
    pub initial_connection_window_size: u32,
    /// `common_http_protocol_options.idle_timeout` (Envoy default 1 h; `None` disables).
    pub idle_timeout: Option<Duration>,
    /// `stream_idle_timeout` (Envoy default 5 min; `None` disables).
    pub stream_idle_timeout: Option<Duration>,
    /// `common_http_protocol_options.max_stream_duration`: a stream's whole
    /// life, whatever it does (unset or 0: `None`, no limit).
    pub max_stream_duration: Option<Duration>,
    /// `request_headers_timeout` (Envoy default: none): an HTTP/1.1 head
    /// must be complete this long after its first byte, else 408 and the
    /// connection closes.
    pub request_headers_timeout: Option<Duration>,
    /// `common_http_protocol_options.max_connection_duration`: at it the
    /// connection drains (GOAWAY, then `drain_timeout`), so that clients
    /// reconnect and spread over the gateways behind an ECMP group (unset
    /// or 0: `None`, no limit).
    pub max_connection_duration: Option<Duration>,
    /// `common_http_protocol_options.max_requests_per_connection`: the
    /// connection drains once it has taken this many requests (unset or 0:
    /// `None`, no limit; approximate for HTTP/2, as in Envoy: streams the
    /// client opened before the GOAWAY reached it are still served).
    pub max_requests_per_connection: Option<u32>,
    /// `drain_timeout` for GOAWAY on reload/shutdown (Envoy default 5 s).
    pub drain_timeout: Duration,
    /// Append the downstream peer to `x-forwarded-for`: Envoy's
    /// `use_remote_address: true` without `skip_xff_append` (Envoy's default
    /// is false; edge deployments set it).
    pub append_x_forwarded_for: bool,
    /// The `envoy.filters.http.stateful_session` filter in `http_filters`
    /// (gRFC A55), as configured on the listener; virtual hosts and routes
    /// may disable or replace it (`typed_per_filter_config`).
    pub stateful_session: Option<StatefulSession>,
}

/// One `access_log` entry of a connection manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessLog {
    pub sink: LogSink,
    pub format: Arc<crate::access_log::LogFormat>,
}

/// Where an access log's lines go.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LogSink {
    /// `envoy.access_loggers.file`: appended; reopened on SIGUSR1.
    File(std::path::PathBuf),
    Stdout,
    Stderr,
}

/// `codec_type`: the downstream protocol of a connection manager.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CodecType {
    /// HTTP/2 when the connection starts with its preface, else HTTP/1.1
    /// (Envoy's default).
    #[default]
    Auto,
    Http1,
    Http2,
}

/// `http_protocol_options` of a connection manager: how HTTP/1.x
/// requests are taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Http1Options {
    /// `accept_http_10`: serve HTTP/1.0 (Envoy's default: answer 426).
    pub accept_http_10: bool,
    /// `default_host_for_http_10`: the authority of an HTTP/1.0 request
    /// without `Host`.
    pub default_host_for_http_10: Option<String>,
    /// `allow_absolute_url` (default true): take `GET http://host/path`
    /// (a client using us as its HTTP proxy); else such requests get 400.
    pub allow_absolute_url: bool,
    /// `enable_trailers` (default false): forward trailers to and from
    /// HTTP/1.1 clients; else they are dropped, as Envoy does.
    pub enable_trailers: bool,
}

impl Default for Http1Options {
    fn default() -> Self {
        Self {
            accept_http_10: false,
            default_host_for_http_10: None,
            allow_absolute_url: true,
            enable_trailers: false,
        }
    }
}

/// `common_http_protocol_options.headers_with_underscores_action`: what
/// to do with request header fields whose name holds an underscore.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HeadersWithUnderscoresAction {
    /// Pass them on (Envoy's default).
    #[default]
    Allow,
    /// Reset the stream (HTTP/2: RST_STREAM, as Envoy).
    RejectRequest,
    /// Drop the field, keep the request.
    DropHeader,
}

impl HeadersWithUnderscoresAction {
    /// Envoy's enum name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Allow => "ALLOW",
            Self::RejectRequest => "REJECT_REQUEST",
            Self::DropHeader => "DROP_HEADER",
        }
    }
}

/// The flood limits of a listener's `http2_protocol_options`, with
/// Envoy's defaults. Each ends the connection when passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Http2FloodLimits {
    /// `max_outbound_frames` (10000): frames queued and not yet written to
    /// the socket.
    pub max_outbound_frames: u32,
    /// `max_outbound_control_frames` (1000): of those, PING and SETTINGS
    /// acknowledgements and RST_STREAM.
    pub max_outbound_control_frames: u32,
    /// `max_consecutive_inbound_frames_with_empty_payload` (1): HEADERS,
    /// CONTINUATION and DATA frames in a row without payload or END_STREAM.
    pub max_consecutive_inbound_frames_with_empty_payload: u32,
    /// `max_inbound_priority_frames_per_stream` (100): PRIORITY frames
    /// over the connection's life may be this times (1 + streams opened).
    pub max_inbound_priority_frames_per_stream: u32,
    /// `max_inbound_window_update_frames_per_data_frame_sent` (10):
    /// WINDOW_UPDATE frames may be `5 + 2 * (streams opened + this * DATA
    /// frames sent)`.
    pub max_inbound_window_update_frames_per_data_frame_sent: u32,
}

impl Default for Http2FloodLimits {
    fn default() -> Self {
        Self {
            max_outbound_frames: 10_000,
            max_outbound_control_frames: 1_000,
            max_consecutive_inbound_frames_with_empty_payload: 1,
            max_inbound_priority_frames_per_stream: 100,
            max_inbound_window_update_frames_per_data_frame_sent: 10,
        }
    }
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
    /// `typed_per_filter_config["envoy.filters.http.stateful_session"]`.
    pub stateful_session: Option<StatefulSessionPerRoute>,
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
    /// `typed_per_filter_config["envoy.filters.http.stateful_session"]`.
    pub stateful_session: Option<StatefulSessionPerRoute>,
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

impl HeaderMatchKind {
    /// Whether a present value matches (`Present(want)`: whether `want`).
    pub fn matches(&self, v: &str) -> bool {
        match self {
            HeaderMatchKind::Present(want) => *want,
            HeaderMatchKind::Exact(e) => v == e,
            HeaderMatchKind::Prefix(p) => v.starts_with(p.as_str()),
            HeaderMatchKind::Suffix(s) => v.ends_with(s.as_str()),
            HeaderMatchKind::Contains(c) => v.contains(c.as_str()),
            HeaderMatchKind::Regex(re) => re.is_match(v),
            HeaderMatchKind::Range { start, end } => {
                v.parse::<i64>().is_ok_and(|n| *start <= n && n < *end)
            }
        }
    }
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

/// How a cluster's policy picks hosts: `Cluster.lb_policy` (with
/// `least_request_lb_config`) or the first supported entry of
/// `Cluster.load_balancing_policy`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LbPolicy {
    /// Smooth weighted round robin (Envoy's EDF scheduler when weights differ).
    RoundRobin,
    /// Uniformly random over the usable hosts (weights ignored, as Envoy).
    Random,
    /// gRFC A48 / Envoy least request.
    LeastRequest(LeastRequest),
}

impl LbPolicy {
    /// The name used in stats and `/config_dump`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::RoundRobin => "ROUND_ROBIN",
            Self::Random => "RANDOM",
            Self::LeastRequest(_) => "LEAST_REQUEST",
        }
    }
}

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

/// Envoy's default `OutlierDetection.interval`.
pub const DEFAULT_OUTLIER_INTERVAL: Duration = Duration::from_secs(10);
/// Envoy's default `OutlierDetection.base_ejection_time`.
pub const DEFAULT_BASE_EJECTION_TIME: Duration = Duration::from_secs(30);
/// Envoy's default `OutlierDetection.max_ejection_time` (or
/// `base_ejection_time` when that is larger).
pub const DEFAULT_MAX_EJECTION_TIME: Duration = Duration::from_secs(300);

/// `Cluster.outlier_detection` (gRFC A50, Envoy's field semantics), with
/// Envoy's defaults applied. A host ejected `n` times stays out for
/// `min(base_ejection_time * n, max_ejection_time)`; at most
/// `max_ejection_percent` of the cluster is ejected at once.
///
/// A detector whose `enforcing_*` percentage is 0 never ejects, so it is
/// `None` here (A50 does the same for success rate and failure percentage).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutlierDetection {
    /// Time between ejection sweeps (default 10 s; greater than 0).
    pub interval: Duration,
    /// Ejection time per ejection so far (default 30 s; greater than 0).
    pub base_ejection_time: Duration,
    /// Cap on the ejection time: as configured (never below
    /// `base_ejection_time`), else `max(300 s, base_ejection_time)`.
    pub max_ejection_time: Duration,
    /// `0..=100`, default 10.
    pub max_ejection_percent: u32,
    /// `consecutive_5xx` (default 5) with `enforcing_consecutive_5xx`
    /// (default 100).
    pub consecutive_5xx: Option<ConsecutiveErrors>,
    /// `consecutive_gateway_failure` (502, 503, 504; default 5) with
    /// `enforcing_consecutive_gateway_failure` (default 0: off).
    pub consecutive_gateway_failure: Option<ConsecutiveErrors>,
    /// The `success_rate_*` fields, unless `enforcing_success_rate` is 0
    /// (default 100).
    pub success_rate: Option<SuccessRateEjection>,
    /// The `failure_percentage_*` fields, when `enforcing_failure_percentage`
    /// is above 0 (default 0: off).
    pub failure_percentage: Option<FailurePercentageEjection>,
}

impl OutlierDetection {
    /// Whether any detector is on: without one nothing is counted or swept
    /// (A50 skips the timer when both of its algorithms are unset).
    pub fn has_detector(&self) -> bool {
        self.consecutive_5xx.is_some()
            || self.consecutive_gateway_failure.is_some()
            || self.success_rate.is_some()
            || self.failure_percentage.is_some()
    }
}

/// A consecutive-errors detector of [`OutlierDetection`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsecutiveErrors {
    /// Errors in a row that make a host an outlier.
    pub threshold: u32,
    /// Chance in percent (`1..=100`) that an outlier is actually ejected.
    pub enforcement_percentage: u32,
}

/// gRFC A50 `SuccessRateEjection`: hosts whose success rate is below
/// `mean - stdev * stdev_factor / 1000` are outliers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SuccessRateEjection {
    /// `success_rate_stdev_factor`, in thousandths (default 1900 = 1.9).
    pub stdev_factor: u32,
    /// `enforcing_success_rate`: `1..=100`.
    pub enforcement_percentage: u32,
    /// `success_rate_minimum_hosts` (default 5).
    pub minimum_hosts: u32,
    /// `success_rate_request_volume` (default 100).
    pub request_volume: u32,
}

/// gRFC A50 `FailurePercentageEjection`: hosts failing at least
/// `threshold` percent of their requests are outliers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailurePercentageEjection {
    /// `failure_percentage_threshold`: `0..=100`, default 85.
    pub threshold: u32,
    /// `enforcing_failure_percentage`: `1..=100`.
    pub enforcement_percentage: u32,
    /// `failure_percentage_minimum_hosts` (default 5).
    pub minimum_hosts: u32,
    /// `failure_percentage_request_volume` (default 50).
    pub request_volume: u32,
}

/// The most hosts a least-request pick samples (gRFC A48 caps
/// `choice_count` here; larger configured values are lowered to it).
pub const MAX_LEAST_REQUEST_CHOICES: u32 = 10;

/// `lb_policy: LEAST_REQUEST` with `least_request_lb_config` (gRFC A48), or
/// the `envoy.extensions.load_balancing_policies.least_request.v3.LeastRequest`
/// policy: with equal weights each pick samples `choice_count` usable hosts
/// (without replacement) and takes the one with the fewest active requests;
/// with unequal weights Envoy's weighted variant schedules hosts by
/// `weight / (active + 1) ^ active_request_bias`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeastRequest {
    /// `2..=MAX_LEAST_REQUEST_CHOICES`; default 2.
    pub choice_count: u32,
    /// `active_request_bias.default_value` (`>= 0`, default 1.0); only used
    /// when weights differ.
    pub active_request_bias: f64,
}

impl Default for LeastRequest {
    fn default() -> Self {
        Self {
            choice_count: 2,
            active_request_bias: 1.0,
        }
    }
}

/// `Cluster.common_lb_config`: the parts we model, with Envoy's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommonLb {
    /// `healthy_panic_threshold` in whole percent (`0..=100`, rounded as
    /// Envoy does; default 50, 0 disables panic mode).
    pub healthy_panic_threshold: u32,
    /// `override_host_status`: the health states a host chosen by a host
    /// override (the stateful session filter) may be in. Default
    /// `[UNKNOWN, HEALTHY, DEGRADED]` as in Envoy; an explicitly empty set
    /// disables host overrides.
    pub override_host_status: HealthStatusSet,
}

impl Default for CommonLb {
    fn default() -> Self {
        Self {
            healthy_panic_threshold: 50,
            override_host_status: HealthStatusSet::DEFAULT_OVERRIDE_HOST_STATUS,
        }
    }
}

/// A set of [`HealthStatus`] values (`config.core.v3.HealthStatusSet`).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct HealthStatusSet(u8);

impl HealthStatusSet {
    pub const EMPTY: Self = Self(0);
    /// Envoy's default `override_host_status`: UNKNOWN, HEALTHY, DEGRADED.
    pub const DEFAULT_OVERRIDE_HOST_STATUS: Self = Self(
        1 << HealthStatus::Unknown as u8
            | 1 << HealthStatus::Healthy as u8
            | 1 << HealthStatus::Degraded as u8,
    );

    pub fn insert(&mut self, status: HealthStatus) {
        self.0 |= 1 << status as u8;
    }

    pub fn contains(self, status: HealthStatus) -> bool {
        self.0 & (1 << status as u8) != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The members in Envoy's numeric order.
    pub fn iter(self) -> impl Iterator<Item = HealthStatus> {
        (0..6)
            .filter_map(HealthStatus::from_i32)
            .filter(move |s| self.contains(*s))
    }
}

impl FromIterator<HealthStatus> for HealthStatusSet {
    fn from_iter<I: IntoIterator<Item = HealthStatus>>(iter: I) -> Self {
        let mut set = Self::EMPTY;
        for s in iter {
            set.insert(s);
        }
        set
    }
}

impl std::fmt::Debug for HealthStatusSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// The stateful session HTTP filter
/// (`envoy.extensions.filters.http.stateful_session.v3.StatefulSession`,
/// gRFC A55): requests carrying a session's upstream address go back to that
/// host if it is in the cluster's `override_host_status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatefulSession {
    /// `session_state`; `None`: the filter does nothing (as in Envoy).
    pub session_state: Option<SessionState>,
    /// `strict`: fail the request instead of load balancing when the
    /// session's host is not available.
    pub strict: bool,
    /// `status_on_strict_destination_not_found` (503 when unset or 0).
    pub strict_not_found_status: u16,
}

/// Where a session's upstream address (base64 of `IP:port`) is carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionState {
    /// `envoy.http.stateful_session.cookie` (`CookieBasedSessionState`).
    Cookie(SessionCookie),
    /// `envoy.http.stateful_session.header` (`HeaderBasedSessionState`).
    Header(SessionHeader),
}

/// `CookieBasedSessionState.cookie` (`envoy.type.http.v3.Cookie`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCookie {
    /// A valid cookie name (an RFC 7230 token).
    pub name: String,
    /// `ttl`; zero (the default) makes a session cookie (no `Max-Age`).
    pub ttl: Duration,
    /// `path`, starting with `/`; `None`: the cookie gets no `Path`
    /// attribute and applies to every request path (gRFC A55's default `/`).
    pub path: Option<String>,
}

/// `HeaderBasedSessionState`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionHeader {
    /// A valid header name, lowercased.
    pub name: String,
}

/// `StatefulSessionPerRoute` (a route's or virtual host's override).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatefulSessionPerRoute {
    /// `disabled: true`.
    Disabled,
    /// `stateful_session`: replaces the listener's configuration.
    Override(StatefulSession),
}

/// Which protocol a cluster's connections speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamProtocol {
    /// `explicit_http_config.http_protocol_options`, or no protocol
    /// options at all (Envoy's default).
    Http1,
    /// `explicit_http_config.http2_protocol_options` (or the deprecated
    /// `http2_protocol_options` field).
    Http2,
    /// `auto_config`: HTTP/2 when the server's ALPN says `h2`, else
    /// HTTP/1.1; only over TLS.
    Auto,
}

impl UpstreamProtocol {
    /// The name shown in `/config_dump`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http1 => "HTTP1",
            Self::Http2 => "HTTP2",
            Self::Auto => "AUTO",
        }
    }
}

/// How a cluster reaches its hosts beyond the address: protocol, TLS,
/// connection reuse.
///
/// `Default` is HTTP/2 over cleartext, what hand-built test clusters
/// speak; a cluster from xDS with no protocol options is HTTP/1.1, as in
/// Envoy.
#[derive(Debug, Clone)]
pub struct UpstreamOptions {
    pub protocol: UpstreamProtocol,
    /// `transport_socket` with an `UpstreamTlsContext`.
    pub tls: Option<std::sync::Arc<crate::tls::UpstreamTls>>,
    /// `common_http_protocol_options.max_requests_per_connection` (or the
    /// cluster's deprecated field): requests one connection carries before
    /// it is closed and replaced; `None`: no limit.
    pub max_requests_per_connection: Option<u32>,
    /// HTTP/1.1 `enable_trailers`: request trailers go out (in a chunked
    /// body) and response trailers come back; Envoy drops both without it.
    pub http1_trailers: bool,
    /// `common_http_protocol_options.idle_timeout`: a connection with no
    /// stream for this long is closed (Envoy's default 1 h; `0s`: `None`,
    /// never).
    pub idle_timeout: Option<std::time::Duration>,
}

/// Envoy's default for an upstream connection's `idle_timeout`.
pub const UPSTREAM_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);

impl PartialEq for UpstreamOptions {
    /// Whether connections made under either would be the same: TLS
    /// contexts compare by what they were built from.
    fn eq(&self, other: &Self) -> bool {
        self.protocol == other.protocol
            && self.max_requests_per_connection == other.max_requests_per_connection
            && self.http1_trailers == other.http1_trailers
            && self.idle_timeout == other.idle_timeout
            && match (&self.tls, &other.tls) {
                (None, None) => true,
                (Some(a), Some(b)) => a == b,
                _ => false,
            }
    }
}

impl Default for UpstreamOptions {
    fn default() -> Self {
        Self {
            protocol: UpstreamProtocol::Http2,
            tls: None,
            max_requests_per_connection: None,
            http1_trailers: false,
            idle_timeout: Some(UPSTREAM_IDLE_TIMEOUT),
        }
    }
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
