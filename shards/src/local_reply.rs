//! Responses the gateway makes itself (no route, no upstream, timeouts),
//! shaped as Envoy shapes them, including gRPC trailers-only replies.

use http::StatusCode;

/// Why the gateway answered on its own; decides status and body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalReply {
    NoRoute,
    UnknownCluster,
    NoHealthyUpstream,
    ConnectFailure,
    UpstreamReset,
    UpstreamTimeout,
    /// `stream_idle_timeout`: nothing moved either way for too long.
    StreamIdleTimeout,
    /// `max_stream_duration`: the stream lived as long as it may.
    MaxDurationTimeout,
    /// `request_timeout`: the request did not come in whole in time.
    RequestTimeout,
    BadRequest,
    /// A circuit breaker of the cluster is open (`max_requests`,
    /// `max_pending_requests`, `max_connections`, `max_connection_pools`):
    /// 503 with `x-envoy-overloaded: true`, as Envoy answers.
    Overflow,
    /// A `strict` stateful session whose host is unavailable, answered with
    /// `status_on_strict_destination_not_found` (503 by default).
    SessionHostUnavailable(u16),
    /// A retry is due but the request's body passed the retry buffer: no
    /// whole request is left to send (Envoy's 507).
    RetryBufferExceeded,
}

impl LocalReply {
    pub fn status(self) -> StatusCode {
        match self {
            Self::NoRoute => StatusCode::NOT_FOUND,
            Self::UnknownCluster
            | Self::NoHealthyUpstream
            | Self::ConnectFailure
            | Self::Overflow => StatusCode::SERVICE_UNAVAILABLE,
            Self::UpstreamReset => StatusCode::BAD_GATEWAY,
            Self::UpstreamTimeout => StatusCode::GATEWAY_TIMEOUT,
            Self::StreamIdleTimeout | Self::MaxDurationTimeout | Self::RequestTimeout => {
                StatusCode::REQUEST_TIMEOUT
            }
            Self::BadRequest => StatusCode::BAD_REQUEST,
            Self::RetryBufferExceeded => StatusCode::INSUFFICIENT_STORAGE,
            Self::SessionHostUnavailable(code) => {
                StatusCode::from_u16(code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
            }
        }
    }

    /// Envoy's wording, so operators' log searches keep working.
    pub fn body(self) -> &'static str {
        match self {
            Self::NoRoute => "",
            // Envoy 1.40 answers an unknown cluster with no body.
            Self::UnknownCluster => "",
            Self::NoHealthyUpstream => "no healthy upstream",
            // A refused connect's, in Envoy 1.40 (its connect timeout
            // says "connection timeout" instead).
            Self::ConnectFailure => {
                "upstream connect error or disconnect/reset before headers. reset reason: remote connection failure"
            }
            Self::UpstreamReset => {
                "upstream connect error or disconnect/reset before headers. reset reason: remote reset"
            }
            Self::UpstreamTimeout => "upstream request timeout",
            Self::Overflow => {
                "upstream connect error or disconnect/reset before headers. reset reason: overflow"
            }
            Self::StreamIdleTimeout => "stream timeout",
            Self::MaxDurationTimeout => "downstream duration timeout",
            Self::RequestTimeout => "request timeout",
            Self::BadRequest => "bad request",
            Self::RetryBufferExceeded => "exceeded request buffer limit while retrying upstream",
            Self::SessionHostUnavailable(_) => "no healthy upstream",
        }
    }

    /// Envoy's response flag for it, in access logs.
    pub fn flag(self) -> &'static str {
        match self {
            Self::NoRoute => "NR",
            Self::UnknownCluster => "NC",
            Self::NoHealthyUpstream | Self::SessionHostUnavailable(_) => "UH",
            Self::ConnectFailure => "UF",
            Self::UpstreamReset => "UR",
            Self::UpstreamTimeout => "UT",
            Self::Overflow => "UO",
            Self::StreamIdleTimeout => "SI",
            Self::MaxDurationTimeout => "DT",
            // Envoy 1.40 sets no flag for these.
            Self::RequestTimeout | Self::RetryBufferExceeded => "",
            Self::BadRequest => "DPE",
        }
    }
}
