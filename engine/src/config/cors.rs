//! The CORS filter's policies (`envoy.extensions.filters.http.cors.v3.CorsPolicy`, or a virtual host's or route's legacy `cors`): which origins may read responses, and what a preflight is answered.

use std::sync::Arc;

use super::http_filter::PerRoute;
use super::route::Fraction;
use crate::matcher::HeaderMatchKind;

/// One level's CORS policy. Every field is optional: a route's policy
/// and its virtual host's are read together, the most specific level
/// that sets a field giving its value (Envoy's rule).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CorsPolicy {
    /// `allow_origin_string_match`: an origin any matcher takes may read
    /// responses; a matcher that takes the string `*` takes every origin.
    pub allow_origins: Vec<HeaderMatchKind>,
    pub allow_methods: Option<String>,
    pub allow_headers: Option<String>,
    pub expose_headers: Option<String>,
    /// `max_age`: seconds, as the header's value.
    pub max_age: Option<String>,
    pub allow_credentials: Option<bool>,
    pub allow_private_network_access: Option<bool>,
    /// `forward_not_matching_preflights` (Envoy's default: true).
    pub forward_not_matching_preflights: Option<bool>,
    /// `filter_enabled`: the share of requests the policy is enforced on
    /// (unset: all).
    pub filter_enabled: Option<Fraction>,
    /// `shadow_enabled`: the share of requests it is only evaluated on,
    /// for the stats (unset: none).
    pub shadow_enabled: Option<Fraction>,
}

/// A route's CORS policies, by level. Typed policies
/// (`typed_per_filter_config`) are read most specific first: the route's,
/// its virtual host's, its route table's; a level that disables the
/// filter hides the levels above it. The legacy `cors` fields (the
/// route action's, then the virtual host's) are read only where no level
/// has a typed policy (Envoy's rule).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CorsPolicies {
    pub route: Option<PerRoute<Arc<CorsPolicy>>>,
    pub virtual_host: Option<PerRoute<Arc<CorsPolicy>>>,
    pub route_config: Option<PerRoute<Arc<CorsPolicy>>>,
    pub legacy_route: Option<Arc<CorsPolicy>>,
    pub legacy_virtual_host: Option<Arc<CorsPolicy>>,
}

impl CorsPolicies {
    /// The policies that apply, most specific first (none: the filter
    /// does nothing for the route).
    pub fn levels(&self) -> impl Iterator<Item = &CorsPolicy> {
        let typed = [&self.route, &self.virtual_host, &self.route_config];
        let any_typed = typed.iter().any(|l| l.is_some());
        let legacy = [&self.legacy_route, &self.legacy_virtual_host];
        let typed = typed
            .into_iter()
            .filter(move |_| any_typed)
            .flatten()
            .map_while(|level| match level {
                PerRoute::Override(p) => Some(&**p),
                PerRoute::Disabled => None,
            });
        let legacy = legacy
            .into_iter()
            .filter(move |_| !any_typed)
            .flatten()
            .map(|p| &**p);
        typed.chain(legacy)
    }

    /// Each level this one leaves unset, from `less` (a less specific
    /// level's policies).
    pub fn or(self, less: &CorsPolicies) -> Self {
        Self {
            route: self.route.or_else(|| less.route.clone()),
            virtual_host: self.virtual_host.or_else(|| less.virtual_host.clone()),
            route_config: self.route_config.or_else(|| less.route_config.clone()),
            legacy_route: self.legacy_route.or_else(|| less.legacy_route.clone()),
            legacy_virtual_host: self
                .legacy_virtual_host
                .or_else(|| less.legacy_virtual_host.clone()),
        }
    }
}
