//! A connection manager's `http_filters`, in their order (the router last), and the per-route configs a route gives them (`typed_per_filter_config`), resolved once per route table.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use super::compressor::{Compressor, CompressorOverrides, Decompressor};
use super::cors::CorsPolicies;

use super::csrf::CsrfPolicy;
use super::ext_authz::{CheckSettings, ExtAuthz};
use super::fault::Fault;
use super::health_check_filter::HealthCheckFilter;
use super::local_rate_limit::{LocalRateLimit, RouteRateLimits};
use super::rbac_filter::RbacFilter;
use super::session::{StatefulSession, StatefulSessionPerRoute};

/// One entry of `http_filters`.
#[derive(Debug, Clone)]
pub struct HttpFilter {
    /// `name`: what logs and errors call the filter.
    pub name: String,
    pub config: HttpFilterConfig,
}

impl HttpFilter {
    /// The router, named as Envoy's examples name it.
    pub fn router() -> Self {
        Self {
            name: "envoy.filters.http.router".into(),
            config: HttpFilterConfig::Router,
        }
    }
}

/// What a filter is, with its listener-level config.
#[derive(Debug, Clone)]
pub enum HttpFilterConfig {
    /// `envoy.filters.http.stateful_session` (gRFC A55).
    StatefulSession(StatefulSession),
    /// `envoy.filters.http.cors`: its policies are the routes' and
    /// virtual hosts' ([`PerFilterConfig::cors`]).
    Cors,
    /// `envoy.filters.http.csrf`, with the policy of routes that give none.
    Csrf(Arc<CsrfPolicy>),
    /// `envoy.filters.http.health_check`.
    HealthCheck(Arc<HealthCheckFilter>),
    /// `envoy.filters.http.fault`.
    Fault(Arc<Fault>),
    /// `envoy.filters.http.local_ratelimit`.
    LocalRateLimit(Arc<LocalRateLimit>),
    /// `envoy.filters.http.rbac`.
    Rbac(Arc<RbacFilter>),
    /// `envoy.filters.http.ext_authz`.
    ExtAuthz(Arc<ExtAuthz>),
    /// `envoy.filters.http.grpc_web` (no config).
    GrpcWeb,
    /// `envoy.filters.http.grpc_http1_bridge`: `upgrade_protobuf_to_grpc`.
    GrpcHttp1Bridge { upgrade_protobuf_to_grpc: bool },
    /// The connection manager's `tracing`, run as its chain's first
    /// filter (not one of Envoy's filters: its place in the chain is
    /// the connection manager's own).
    Tracing(Arc<super::tracing::Tracing>),
    /// `envoy.filters.http.compressor`.
    Compressor(Arc<Compressor>),
    /// `envoy.filters.http.decompressor`.
    Decompressor(Arc<Decompressor>),
    /// A filter compiled in by a program that embeds the gateway
    /// (`shards::http_filter::Native`): not expressible in Envoy's config,
    /// so never from xDS or a bootstrap file.
    Native(NativeFilter),
    /// `envoy.filters.http.router`: the last filter, which sends the
    /// request upstream.
    Router,
}

/// An embedder's filter: opaque to the config model, which is below the
/// data plane that defines the filter interface; the data plane
/// downcasts it.
#[derive(Clone)]
pub struct NativeFilter(pub Arc<dyn Any + Send + Sync>);

impl fmt::Debug for NativeFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NativeFilter")
    }
}

/// The per-route configs one route gives its connection manager's filters,
/// by filter type: the route's own `typed_per_filter_config` entry for a
/// filter type, else its virtual host's (resolved when the route table is
/// validated, so a request reads one field, not three levels). Each
/// filter that takes per-route config adds its field here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerFilterConfig {
    /// `StatefulSessionPerRoute`: disables or replaces the stateful
    /// session filter's config.
    pub stateful_session: Option<StatefulSessionPerRoute>,
    /// `CorsPolicy` (or the legacy `cors` field): the route's and its
    /// virtual host's, read together.
    pub cors: CorsPolicies,
    /// `CsrfPolicy`: replaces the filter's.
    pub csrf: Option<PerRoute<Arc<CsrfPolicy>>>,
    /// `CompressorPerRoute`: disables or adjusts the compressors.
    pub compressor: Option<PerRoute<Arc<CompressorOverrides>>>,
    /// `HTTPFault`: replaces the filter's (its active faults still count
    /// against the filter's `max_active_faults` gauge).
    pub fault: Option<PerRoute<Arc<Fault>>>,
    /// `LocalRateLimit`: replaces the filter's, with buckets of its own.
    pub local_rate_limit: Option<PerRoute<Arc<LocalRateLimit>>>,
    /// The route's and virtual host's `rate_limits` (the descriptors a
    /// rate limit filter asks about).
    pub rate_limits: Option<Arc<RouteRateLimits>>,
    /// `RBACPerRoute`: replaces the filter's rules (none: all allowed).
    pub rbac: Option<PerRoute<Arc<RbacFilter>>>,
    /// `ExtAuthzPerRoute`: no check for the route, or its check settings.
    pub ext_authz: Option<PerRoute<Arc<CheckSettings>>>,
}

impl PerFilterConfig {
    /// A route's own configs, each filling in from its virtual host's
    /// where the route has none.
    pub fn or(self, vhost: &PerFilterConfig) -> Self {
        Self {
            stateful_session: self
                .stateful_session
                .or_else(|| vhost.stateful_session.clone()),
            cors: self.cors.or(&vhost.cors),
            csrf: self.csrf.or_else(|| vhost.csrf.clone()),
            compressor: self.compressor.or_else(|| vhost.compressor.clone()),
            fault: self.fault.or_else(|| vhost.fault.clone()),
            local_rate_limit: self
                .local_rate_limit
                .or_else(|| vhost.local_rate_limit.clone()),
            rate_limits: self.rate_limits.or_else(|| vhost.rate_limits.clone()),
            rbac: self.rbac.or_else(|| vhost.rbac.clone()),
            ext_authz: self.ext_authz.or_else(|| vhost.ext_authz.clone()),
        }
    }
}

/// A filter's per-route entry: a `FilterConfig` with `disabled: true`
/// (the filter does not run for the route), or the filter's per-route
/// config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PerRoute<T> {
    Disabled,
    Override(T),
}

impl<T> PerRoute<T> {
    /// The config, unless disabled.
    pub fn config(&self) -> Option<&T> {
        match self {
            Self::Disabled => None,
            Self::Override(c) => Some(c),
        }
    }
}
