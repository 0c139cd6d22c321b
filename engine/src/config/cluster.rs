//! `Cluster`: a set of upstream endpoints and how they are reached and
//! picked.

use std::net::SocketAddr;
use std::time::Duration;

use super::circuit_breakers::CircuitBreakers;
use super::health::HealthStatus;
use super::health_check::{EndpointCheck, HealthCheck};
use super::lb::{CommonLb, LbPolicy};
use super::outlier::OutlierDetection;
use super::upstream::{UpstreamHttp2, UpstreamOptions};

/// Envoy's default `Cluster.connect_timeout`.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A `STATIC`, `EDS`, `STRICT_DNS` or `LOGICAL_DNS` cluster.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub name: String,
    pub connect_timeout: Duration,
    pub lb_policy: LbPolicy,
    /// `load_assignment` endpoints; for EDS the last assignment received,
    /// for a DNS cluster the addresses its names last resolved to.
    pub endpoints: Vec<Endpoint>,
    /// `Some` for `type: EDS`.
    pub eds: Option<Eds>,
    /// `Some` for `type: STRICT_DNS` or `LOGICAL_DNS`.
    pub dns: Option<std::sync::Arc<Dns>>,
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
    /// `health_checks` (Envoy allows one): hosts are checked by the control
    /// shard and leave rotation when they fail.
    pub health_check: Option<std::sync::Arc<HealthCheck>>,
    /// `circuit_breakers` (Envoy's defaults when absent).
    pub circuit_breakers: CircuitBreakers,
    /// `track_cluster_stats.per_endpoint_stats`: the admin writes each
    /// host's series (Envoy's `cluster.<name>.endpoint.<address>.*`).
    pub per_endpoint_stats: bool,
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

/// A `ClusterLoadAssignment`: the endpoints and the `policy` that comes
/// with them (an EDS update replaces both at once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadAssignment {
    pub endpoints: Vec<Endpoint>,
    /// `policy.overprovisioning_factor` in percent (default
    /// [`DEFAULT_OVERPROVISIONING_FACTOR`]).
    pub overprovisioning_factor: u32,
}

/// Envoy's default `overprovisioning_factor` (percent): a priority or a
/// locality at 1/1.4 ≈ 72 % healthy hosts still counts as fully available.
pub const DEFAULT_OVERPROVISIONING_FACTOR: u32 = 140;

/// One `lb_endpoints` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub address: SocketAddr,
    /// `load_balancing_weight` (default 1).
    pub weight: u32,
    pub health: HealthStatus,
    /// `hostname`: the endpoint's name (a DNS cluster's hosts are named by
    /// the name they were found by).
    pub hostname: String,
    /// `health_check_config`.
    pub check: EndpointCheck,
    /// Its `LocalityLbEndpoints` entry: priority and locality.
    pub placement: Placement,
}

/// Where an endpoint sits in its cluster: its `LocalityLbEndpoints` entry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Placement {
    /// `priority` (0, the default, is the highest): lower priorities take
    /// traffic as higher ones lose health.
    pub priority: u32,
    /// The entry's index in `load_assignment.endpoints`: its locality.
    pub locality: u32,
    /// The entry's `load_balancing_weight` (0 when unset), used with
    /// `locality_weighted_lb_config`.
    pub locality_weight: u32,
}

/// Envoy's default `dns_refresh_rate`.
pub const DEFAULT_DNS_REFRESH_RATE: Duration = Duration::from_secs(5);

/// `type: STRICT_DNS` or `LOGICAL_DNS`: the names a cluster's hosts are
/// found by, and how often and through whom they are looked up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dns {
    pub kind: DnsKind,
    /// `load_assignment`'s endpoints, each a name and a port.
    pub targets: Vec<DnsTarget>,
    /// `dns_refresh_rate` (5 s).
    pub refresh_rate: Duration,
    /// `dns_failure_refresh_rate`: after a failed lookup, the next comes
    /// after a backoff from `base` to `max`; `None`: at `refresh_rate`.
    pub failure_refresh: Option<(Duration, Duration)>,
    /// `respect_dns_ttl`: the next lookup comes at the answer's lowest TTL
    /// instead of `refresh_rate`.
    pub respect_ttl: bool,
    pub family: DnsFamily,
    /// `typed_dns_resolver_config` (c-ares) `resolvers`, or the deprecated
    /// `dns_resolvers`; empty: the system's (`/etc/resolv.conf`).
    pub resolvers: Vec<SocketAddr>,
    /// c-ares' `query_timeout_seconds`: how long a server is given to
    /// answer one try (Envoy's default 5 s).
    pub query_timeout: Duration,
    /// c-ares' `query_tries`: tries of one lookup, each at the next server
    /// (Envoy's default 4).
    pub query_tries: u32,
    /// `use_tcp_for_dns_lookups`: ask over TCP, not UDP.
    pub tcp: bool,
}

/// Which hosts a DNS cluster has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DnsKind {
    /// `STRICT_DNS`: every address each name resolves to.
    Strict,
    /// `LOGICAL_DNS`: the first address of its one name.
    Logical,
}

/// `dns_lookup_family`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DnsFamily {
    /// `AUTO`: IPv6, else IPv4 when a name has no IPv6 address.
    #[default]
    Auto,
    V4Only,
    V6Only,
    /// `V4_PREFERRED`: IPv4, else IPv6.
    V4Preferred,
    /// `ALL`: both.
    All,
}

/// One name of a DNS cluster, with what its addresses inherit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsTarget {
    pub host: String,
    pub port: u16,
    pub weight: u32,
    pub health: HealthStatus,
    /// `hostname`; empty: the addresses are named by `host`.
    pub hostname: String,
    /// `health_check_config`, inherited by every address.
    pub check: EndpointCheck,
    /// Its `LocalityLbEndpoints` entry, inherited by every address.
    pub placement: Placement,
}
