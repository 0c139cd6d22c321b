//! The stateful session HTTP filter's config (gRFC A55): where a
//! session's host is carried, and per-route overrides.

use std::time::Duration;

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
