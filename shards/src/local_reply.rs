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
    /// The host reset the stream before its answer's head.
    UpstreamReset,
    /// The host refused the stream (REFUSED_STREAM, or past its GOAWAY)
    /// once more than it may be sent again.
    UpstreamRefusedStream,
    /// The host's connection closed before the answer's head.
    UpstreamConnectionTermination,
    /// The host's answer was malformed (or its head too large).
    UpstreamProtocolError,
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
    /// The overload manager's `stop_accepting_requests`.
    Overloaded,
}

impl LocalReply {
    pub fn status(self) -> StatusCode {
        match self {
            Self::NoRoute => StatusCode::NOT_FOUND,
            Self::UnknownCluster
            | Self::NoHealthyUpstream
            | Self::ConnectFailure
            | Self::UpstreamReset
            | Self::UpstreamRefusedStream
            | Self::UpstreamConnectionTermination
            | Self::Overflow
            | Self::Overloaded => StatusCode::SERVICE_UNAVAILABLE,
            // Envoy's router: a protocol error is the one reset it answers
            // 502.
            Self::UpstreamProtocolError => StatusCode::BAD_GATEWAY,
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
            Self::UpstreamRefusedStream => {
                "upstream connect error or disconnect/reset before headers. reset reason: remote refused stream reset"
            }
            Self::UpstreamConnectionTermination => {
                "upstream connect error or disconnect/reset before headers. reset reason: connection termination"
            }
            Self::UpstreamProtocolError => {
                "upstream connect error or disconnect/reset before headers. reset reason: protocol error"
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
            Self::Overloaded => "envoy overloaded",
        }
    }

    /// Its flag after the route's retries ran out (Envoy writes `URX`
    /// first); the flag alone for replies retries do not make.
    pub fn flag_after_retries(self) -> &'static str {
        match self {
            Self::ConnectFailure => "URX,UF",
            Self::UpstreamReset | Self::UpstreamRefusedStream => "URX,UR",
            Self::UpstreamConnectionTermination => "URX,UC",
            Self::UpstreamProtocolError => "URX,UPE",
            other => other.flag(),
        }
    }

    /// Envoy's response flag for it, in access logs.
    pub fn flag(self) -> &'static str {
        match self {
            Self::NoRoute => "NR",
            Self::UnknownCluster => "NC",
            Self::NoHealthyUpstream | Self::SessionHostUnavailable(_) => "UH",
            Self::ConnectFailure => "UF",
            Self::UpstreamReset | Self::UpstreamRefusedStream => "UR",
            Self::UpstreamConnectionTermination => "UC",
            Self::UpstreamProtocolError => "UPE",
            Self::UpstreamTimeout => "UT",
            Self::Overflow => "UO",
            Self::StreamIdleTimeout => "SI",
            Self::MaxDurationTimeout => "DT",
            // Envoy 1.40 sets no flag for these.
            Self::RequestTimeout | Self::RetryBufferExceeded => "",
            Self::BadRequest => "DPE",
            // Envoy's `OverloadManager` flag.
            Self::Overloaded => "OM",
        }
    }
}
