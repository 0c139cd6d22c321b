//! The health check filter's config (`envoy.extensions.filters.http.health_check.v3.HealthCheck`): which requests are a load balancer's health checks, and whether the gateway answers them itself (by its own state and its clusters' health) or passes them on (with a cache).

use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::route::HeaderMatcher;

/// `envoy.filters.http.health_check`.
#[derive(Debug, Clone)]
pub struct HealthCheckFilter {
    /// `pass_through_mode`: health checks go upstream (and are answered
    /// with what the upstream says), else they are answered here.
    pub pass_through: bool,
    /// `cache_time` (pass-through only): one health check per period
    /// goes upstream; the others get its status.
    pub cache_time: Option<Duration>,
    /// `cluster_min_healthy_percentages`: answered 503 unless each
    /// cluster has at least this percentage of its hosts healthy.
    pub min_healthy: Vec<(String, f64)>,
    /// `headers`: a request all of these match is a health check.
    pub headers: Vec<HeaderMatcher>,
    /// The pass-through cache, shared by the shards.
    pub cache: Arc<HealthCheckCache>,
}

/// What a pass-through health check learned, for the rest of its period.
#[derive(Debug)]
pub struct HealthCheckCache {
    /// When the periods start (the config's load).
    pub born: Instant,
    /// The period (+1) whose first check went upstream; 0: none yet.
    pub period: AtomicU64,
    /// The status the last check that went upstream got (0: none yet).
    pub status: AtomicU32,
}

impl Default for HealthCheckCache {
    fn default() -> Self {
        Self {
            born: Instant::now(),
            period: AtomicU64::new(0),
            status: AtomicU32::new(0),
        }
    }
}

impl PartialEq for HealthCheckFilter {
    fn eq(&self, other: &Self) -> bool {
        self.pass_through == other.pass_through
            && self.cache_time == other.cache_time
            && self.min_healthy == other.min_healthy
            && self.headers == other.headers
    }
}
