//! `Cluster.health_checks` (`config.core.v3.HealthCheck`) and an endpoint's
//! `health_check_config`: how the control shard actively checks hosts.

use std::net::SocketAddr;
use std::time::Duration;

/// Envoy's default `no_traffic_interval`.
pub const DEFAULT_NO_TRAFFIC_INTERVAL: Duration = Duration::from_secs(60);

/// One cluster's active health check, Envoy's defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    /// How long one check may take; a check that times out failed.
    pub timeout: Duration,
    /// Between checks of a host that has had traffic and is healthy.
    pub interval: Duration,
    /// The first check of a host comes after a random wait below this.
    pub initial_jitter: Duration,
    /// A random wait below this is added to every interval.
    pub interval_jitter: Duration,
    /// A random wait below this percentage of the interval is added too.
    pub interval_jitter_percent: u32,
    /// Failed checks in a row (timeouts, refused connections, retriable
    /// statuses) that make a healthy host unhealthy; a non-retriable answer
    /// makes it unhealthy at once.
    pub unhealthy_threshold: u32,
    /// Passed checks in a row that make an unhealthy host healthy (one
    /// suffices for a host's very first check).
    pub healthy_threshold: u32,
    /// `reuse_connection` (true): one connection per host across checks.
    pub reuse_connection: bool,
    /// While the cluster has never carried traffic (60 s).
    pub no_traffic_interval: Duration,
    /// While the cluster has never carried traffic and the host is healthy
    /// (`no_traffic_interval` when unset).
    pub no_traffic_healthy_interval: Duration,
    /// Between checks of an unhealthy host (`interval` when unset).
    pub unhealthy_interval: Duration,
    /// After a failed check that did not change the host's state yet
    /// (`unhealthy_interval` when unset).
    pub unhealthy_edge_interval: Duration,
    /// After a passed check that did not change the host's state yet
    /// (`interval` when unset).
    pub healthy_edge_interval: Duration,
    /// Log every failed check, not just the one that made a host unhealthy.
    pub always_log_failures: bool,
    /// Log every passed check.
    pub always_log_success: bool,
    /// `tls_options.alpn_protocols`: what a check offers in ALPN over the
    /// cluster's TLS instead of the cluster's own list (empty: the
    /// cluster's). Without TLS on the cluster, nothing.
    pub tls_alpn: Vec<Vec<u8>>,
    /// The cluster's `ignore_health_on_host_removal` (kept here: it only
    /// matters with a check). False, Envoy's default: a host that leaves
    /// an EDS or DNS cluster while passing its checks stays, flagged
    /// `PENDING_DYNAMIC_REMOVAL`, until a check fails; true: it leaves at
    /// once.
    pub ignore_health_on_host_removal: bool,
    /// The cluster's `close_connections_on_host_health_failure` (kept here
    /// too): a host that fails its checks loses its pooled connections on
    /// every data shard (they close once their streams end).
    pub close_connections_on_failure: bool,
    pub checker: Checker,
}

/// What one check does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checker {
    Http(HttpCheck),
    Tcp(TcpCheck),
    Grpc(GrpcCheck),
}

impl Checker {
    pub fn kind(&self) -> &'static str {
        match self {
            Checker::Http(_) => "HTTP",
            Checker::Tcp(_) => "TCP",
            Checker::Grpc(_) => "gRPC",
        }
    }
}

/// `http_health_check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpCheck {
    /// `host`: the request's Host / `:authority`; empty: the cluster name
    /// (an endpoint's `health_check_config.hostname` comes first).
    pub host: String,
    pub path: String,
    /// `method` (GET).
    pub method: String,
    /// `request_headers_to_add`, in order, after the removals.
    pub headers_to_add: Vec<AddedHeader>,
    /// `request_headers_to_remove`, lower case.
    pub headers_to_remove: Vec<String>,
    /// `expected_statuses` as half-open ranges (`[200, 201)` by default).
    pub expected: Vec<(u16, u16)>,
    /// `retriable_statuses`: not expected, but counted towards
    /// `unhealthy_threshold` instead of failing the host at once.
    pub retriable: Vec<(u16, u16)>,
    /// `codec_client_type: HTTP2` (prior knowledge); HTTP/1.1 otherwise.
    pub http2: bool,
    /// `receive`: each block must appear in the body, in order.
    pub receive: Vec<Vec<u8>>,
    /// `response_buffer_size` (1024): how much of the body is searched.
    pub response_buffer_size: usize,
}

impl HttpCheck {
    pub fn is_expected(&self, status: u16) -> bool {
        self.expected
            .iter()
            .any(|(a, b)| (*a..*b).contains(&status))
    }

    pub fn is_retriable(&self, status: u16) -> bool {
        self.retriable
            .iter()
            .any(|(a, b)| (*a..*b).contains(&status))
    }
}

/// One `request_headers_to_add` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddedHeader {
    /// Lower case.
    pub name: String,
    pub value: String,
    /// `append_action` OVERWRITE_IF_EXISTS_OR_ADD / `append: false`: the
    /// header replaces one of the same name; otherwise it is added.
    pub overwrite: bool,
}

/// `tcp_health_check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpCheck {
    /// Written once connected; empty: a connect-only check.
    pub send: Vec<u8>,
    /// Each block must arrive, in order (not necessarily contiguous).
    pub receive: Vec<Vec<u8>>,
}

/// `grpc_health_check` (`grpc.health.v1.Health/Check` over HTTP/2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcCheck {
    pub service_name: String,
    /// `:authority`; empty: as `HttpCheck::host`.
    pub authority: String,
    /// `initial_metadata`: request headers.
    pub initial_metadata: Vec<AddedHeader>,
}

/// An endpoint's `health_check_config`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct EndpointCheck {
    /// `port_value`: checks go to this port instead of the endpoint's.
    pub port: Option<u16>,
    /// `address`: checks go to this address instead.
    pub address: Option<SocketAddr>,
    /// `hostname`: the Host / `:authority` of this endpoint's checks.
    pub hostname: String,
    /// `disable_active_health_check`: the host is never checked and counts
    /// as passing.
    pub disabled: bool,
}

impl EndpointCheck {
    /// Where checks of a host at `addr` connect.
    pub fn target(&self, addr: SocketAddr) -> SocketAddr {
        let mut t = self.address.unwrap_or(addr);
        if let Some(p) = self.port {
            t.set_port(p);
        }
        t
    }
}
