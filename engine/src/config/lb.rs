//! A cluster's load-balancing settings: the policy and
//! `common_lb_config`.

use super::health::HealthStatusSet;

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
    /// Envoy's ketama ring of XXH64 hashes, keyed by the request's hash.
    RingHash(RingHash),
    /// Envoy's Maglev lookup table, keyed by the request's hash.
    Maglev(Maglev),
}

impl LbPolicy {
    /// The name used in stats and `/config_dump`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::RoundRobin => "ROUND_ROBIN",
            Self::Random => "RANDOM",
            Self::LeastRequest(_) => "LEAST_REQUEST",
            Self::RingHash(_) => "RING_HASH",
            Self::Maglev(_) => "MAGLEV",
        }
    }
}

/// Envoy's default `ring_hash_lb_config.minimum_ring_size`.
pub const DEFAULT_MIN_RING_SIZE: u64 = 1024;
/// Envoy's default (and largest) `maximum_ring_size`.
pub const DEFAULT_MAX_RING_SIZE: u64 = 8 * 1024 * 1024;
/// Envoy's default `maglev_lb_config.table_size` (a prime).
pub const DEFAULT_MAGLEV_TABLE_SIZE: u64 = 65537;

/// `lb_policy: RING_HASH` with `ring_hash_lb_config` (XX_HASH).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingHash {
    pub minimum_ring_size: u64,
    pub maximum_ring_size: u64,
}

impl Default for RingHash {
    fn default() -> Self {
        Self {
            minimum_ring_size: DEFAULT_MIN_RING_SIZE,
            maximum_ring_size: DEFAULT_MAX_RING_SIZE,
        }
    }
}

/// `lb_policy: MAGLEV` with `maglev_lb_config`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Maglev {
    /// A prime; each host takes about `table_size / hosts` entries.
    pub table_size: u64,
}

impl Default for Maglev {
    fn default() -> Self {
        Self {
            table_size: DEFAULT_MAGLEV_TABLE_SIZE,
        }
    }
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
    /// `locality_weighted_lb_config`: within a priority, a locality is
    /// drawn by its `load_balancing_weight` scaled by its health, then the
    /// policy picks among its hosts.
    pub locality_weighted: bool,
    /// The load assignment's `policy.overprovisioning_factor` (percent,
    /// default 140): how far a priority's or a locality's health is scaled
    /// up before it counts as less than fully available. Set from the
    /// cluster's `load_assignment`, or by each EDS assignment.
    pub overprovisioning_factor: u32,
    /// `ignore_new_hosts_until_first_hc`: a checked host is left out of
    /// balancing (and of its priority's health and panic mode) until its
    /// first check ended, rather than counted as unhealthy.
    pub ignore_new_hosts_until_first_hc: bool,
}

impl Default for CommonLb {
    fn default() -> Self {
        Self {
            healthy_panic_threshold: 50,
            override_host_status: HealthStatusSet::DEFAULT_OVERRIDE_HOST_STATUS,
            locality_weighted: false,
            overprovisioning_factor: super::DEFAULT_OVERPROVISIONING_FACTOR,
            ignore_new_hosts_until_first_hc: false,
        }
    }
}
