//! The RBAC filters' configs: the HTTP filter (`envoy.extensions.filters.http.rbac.v3.RBAC`, and per route `RBACPerRoute`) and the network filter of a filter chain (`envoy.extensions.filters.network.rbac.v3.RBAC`).

use std::time::Duration;

use crate::rbac::Rbac;

/// Enforced rules and shadow rules (judged and counted only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RbacFilter {
    /// `rules` (none: every request is allowed).
    pub rules: Option<Rbac>,
    /// `shadow_rules`.
    pub shadow: Option<Rbac>,
    /// The HTTP filter's `rules_stat_prefix` and `shadow_rules_stat_prefix`:
    /// its counters' names (`rbac.<prefix>.allowed`), empty for none.
    pub rules_stat_prefix: String,
    pub shadow_rules_stat_prefix: String,
}

/// A filter chain's `envoy.filters.network.rbac`, ahead of its
/// connection manager or TCP proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkRbac {
    pub stat_prefix: String,
    pub filter: RbacFilter,
    /// `delay_deny`: a denied connection is closed this much later.
    pub delay_deny: Option<Duration>,
}
