//! The fault injection filter's config (`envoy.extensions.filters.http.fault.v3.HTTPFault`): delays and aborts for a share of the requests it matches, fixed or asked for by request headers, bounded by `max_active_faults`.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use super::route::{Fraction, HeaderMatcher};

/// What delays a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelayKind {
    /// `fixed_delay`.
    Fixed(Duration),
    /// `header_delay`: `x-envoy-fault-delay-request` (milliseconds).
    Header,
}

/// `delay`: what, and for what share of requests (`percentage`, unset:
/// none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultDelay {
    pub kind: DelayKind,
    pub percentage: Fraction,
}

/// What an abort answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbortKind {
    /// `http_status` (200..=599).
    Http(u16),
    /// `grpc_status`: a gRPC request gets it; another gets a 200.
    Grpc(u32),
    /// `header_abort`: `x-envoy-fault-abort-request` /
    /// `x-envoy-fault-abort-grpc-request`.
    Header,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultAbort {
    pub kind: AbortKind,
    pub percentage: Fraction,
}

/// `envoy.filters.http.fault`, as the filter's config or a route's.
#[derive(Debug, Clone)]
pub struct Fault {
    pub delay: Option<FaultDelay>,
    pub abort: Option<FaultAbort>,
    /// `upstream_cluster`: only requests routed to this cluster.
    pub upstream_cluster: Option<String>,
    /// `headers`: only requests these match.
    pub headers: Vec<HeaderMatcher>,
    /// `downstream_nodes`: only requests whose
    /// `x-envoy-downstream-service-node` is one of these.
    pub downstream_nodes: Vec<String>,
    /// `max_active_faults`: past it, requests pass untouched.
    pub max_active_faults: Option<u32>,
    /// Faults in flight under this filter, on every shard (a route's
    /// config counts against its filter's): touched only when a fault is
    /// injected and when it ends.
    pub active: Arc<AtomicU64>,
}

impl PartialEq for Fault {
    fn eq(&self, other: &Self) -> bool {
        self.delay == other.delay
            && self.abort == other.abort
            && self.upstream_cluster == other.upstream_cluster
            && self.headers == other.headers
            && self.downstream_nodes == other.downstream_nodes
            && self.max_active_faults == other.max_active_faults
    }
}

impl Eq for Fault {}
