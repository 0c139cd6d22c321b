//! The external authorisation filter's config (`envoy.extensions.filters.http.ext_authz.v3.ExtAuthz`, and `ExtAuthzPerRoute`): which service is asked (HTTP or gRPC `envoy.service.auth.v3`), what of the request goes to it, what of its answer goes on, and what happens when it cannot answer.

use std::time::Duration;

use super::route::Fraction;
use crate::matcher::HeaderMatchKind;

/// The service asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthzService {
    /// `grpc_service` (`envoy_grpc`): `Authorization/Check`.
    Grpc(GrpcAuthz),
    /// `http_service`: the request's head, more or less, as an HTTP
    /// request of its own.
    Http(HttpAuthz),
}

impl AuthzService {
    /// The cluster the checks go to.
    pub fn cluster(&self) -> &str {
        match self {
            Self::Grpc(g) => &g.cluster,
            Self::Http(h) => &h.cluster,
        }
    }

    /// How long a check may take.
    pub fn timeout(&self) -> Duration {
        match self {
            Self::Grpc(g) => g.timeout,
            Self::Http(h) => h.timeout,
        }
    }
}

/// `grpc_service.envoy_grpc`, with the service's `timeout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcAuthz {
    pub cluster: String,
    /// `authority` (empty: the cluster's name, as Envoy sends).
    pub authority: String,
    /// `skip_envoy_headers`: the call carries no `x-envoy-*` headers.
    pub skip_envoy_headers: bool,
    /// `timeout` (Envoy's default for a gRPC service: 200 ms here too).
    pub timeout: Duration,
}

/// `http_service`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpAuthz {
    /// `server_uri.cluster`.
    pub cluster: String,
    /// `server_uri.uri`'s host, the check's `:authority`... unless the
    /// request's own goes (see the filter).
    pub uri_authority: String,
    /// `server_uri.timeout`.
    pub timeout: Duration,
    /// `path_prefix`: put before the request's path.
    pub path_prefix: String,
    /// `authorization_request.headers_to_add`.
    pub headers_to_add: Vec<(String, String)>,
    /// `authorization_response.allowed_upstream_headers`: an allowed
    /// answer's headers that replace the request's.
    pub allowed_upstream_headers: Vec<HeaderMatchKind>,
    /// `authorization_response.allowed_upstream_headers_to_append`.
    pub allowed_upstream_headers_to_append: Vec<HeaderMatchKind>,
    /// `authorization_response.allowed_client_headers`: a denial's
    /// headers the client gets (empty: all but a few, as Envoy).
    pub allowed_client_headers: Vec<HeaderMatchKind>,
    /// `authorization_response.allowed_client_headers_on_success`: an
    /// allowed answer's headers added to the response.
    pub allowed_client_headers_on_success: Vec<HeaderMatchKind>,
}

/// `with_request_body`: the request's body goes to the service, up to
/// `max_request_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferSettings {
    pub max_request_bytes: u32,
    /// `allow_partial_message`: a longer body is cut (else 413).
    pub allow_partial_message: bool,
    /// `pack_as_bytes`: gRPC's `raw_body` rather than `body`.
    pub pack_as_bytes: bool,
}

/// `envoy.filters.http.ext_authz`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtAuthz {
    pub service: AuthzService,
    /// `failure_mode_allow`: a check that fails lets the request through.
    pub failure_mode_allow: bool,
    /// `failure_mode_allow_header_add`: such a request carries
    /// `x-envoy-auth-failure-mode-allowed: true`.
    pub failure_mode_allow_header_add: bool,
    pub with_request_body: Option<BufferSettings>,
    /// `status_on_error` (default 403): a failed check's answer.
    pub status_on_error: u16,
    /// `filter_enabled`: the share of requests checked (unset: all).
    pub filter_enabled: Option<Fraction>,
    /// `deny_at_disable`: a request the filter is not enabled for is
    /// denied (403) instead of let through.
    pub deny_at_disable: bool,
    /// `allowed_headers`: the request headers sent (unset: all).
    pub allowed_headers: Option<Vec<HeaderMatchKind>>,
    /// `disallowed_headers`: request headers never sent.
    pub disallowed_headers: Vec<HeaderMatchKind>,
    /// `include_tls_session`: a gRPC check carries the TLS server name.
    pub include_tls_session: bool,
    /// `encode_raw_headers`: a gRPC check's headers as raw bytes
    /// (`header_map`) rather than a string map.
    pub encode_raw_headers: bool,
    /// `stat_prefix`.
    pub stat_prefix: String,
    /// `max_denied_response_body_bytes` (0: no bound of its own).
    pub max_denied_response_body_bytes: u32,
}

/// `ExtAuthzPerRoute.check_settings`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckSettings {
    /// `context_extensions`: sent with a gRPC check.
    pub context_extensions: Vec<(String, String)>,
    /// `disable_request_body_buffering`: no body goes to the service for
    /// this route.
    pub disable_request_body_buffering: bool,
    /// `with_request_body`: replaces the filter's.
    pub with_request_body: Option<BufferSettings>,
}
