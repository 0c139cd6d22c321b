//! The CSRF filter's policy (`envoy.extensions.filters.http.csrf.v3.CsrfPolicy`): a state-changing request's source origin must be its destination or one of the additional origins.

use super::route::Fraction;
use crate::matcher::HeaderMatchKind;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsrfPolicy {
    /// `filter_enabled` (required): the share of requests refused on a
    /// mismatch.
    pub filter_enabled: Fraction,
    /// `shadow_enabled`: the share checked and counted but let through
    /// (unset: none).
    pub shadow_enabled: Option<Fraction>,
    /// `additional_origins`: source origins taken besides the
    /// destination's own (matched against `host[:port]`).
    pub additional_origins: Vec<HeaderMatchKind>,
}
