//! Responses the gateway makes itself (no route, no upstream, timeouts),
//! shaped as Envoy shapes them, including gRPC trailers-only replies.

use bytes::Bytes;
use engine::headers::http_to_grpc_status;
use h2::server::SendResponse;
use http::header::HeaderName;
use http::{HeaderValue, Response, StatusCode};

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
    BadRequest,
    /// A `strict` stateful session whose host is unavailable, answered with
    /// `status_on_strict_destination_not_found` (503 by default).
    SessionHostUnavailable(u16),
}

impl LocalReply {
    pub fn status(self) -> StatusCode {
        match self {
            Self::NoRoute => StatusCode::NOT_FOUND,
            Self::UnknownCluster | Self::NoHealthyUpstream | Self::ConnectFailure => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::UpstreamReset => StatusCode::BAD_GATEWAY,
            Self::UpstreamTimeout => StatusCode::GATEWAY_TIMEOUT,
            Self::StreamIdleTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::BadRequest => StatusCode::BAD_REQUEST,
            Self::SessionHostUnavailable(code) => {
                StatusCode::from_u16(code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
            }
        }
    }

    /// Envoy's wording, so operators' log searches keep working.
    pub fn body(self) -> &'static str {
        match self {
            Self::NoRoute => "",
            Self::UnknownCluster => "cluster not found",
            Self::NoHealthyUpstream => "no healthy upstream",
            Self::ConnectFailure => {
                "upstream connect error or disconnect/reset before headers. reset reason: connection failure"
            }
            Self::UpstreamReset => {
                "upstream connect error or disconnect/reset before headers. reset reason: remote reset"
            }
            Self::UpstreamTimeout => "upstream request timeout",
            Self::StreamIdleTimeout => "stream timeout",
            Self::BadRequest => "bad request",
            Self::SessionHostUnavailable(_) => "no healthy upstream",
        }
    }

    /// Sends the reply on `respond`. For gRPC requests this is a
    /// trailers-only response (HTTP 200 + `grpc-status` in one HEADERS frame
    /// with END_STREAM), so gRPC clients see a proper status.
    /// Returns the HTTP status recorded in stats.
    pub fn send(self, respond: &mut SendResponse<Bytes>, grpc: bool) -> u16 {
        self.send_with(respond, grpc, None)
    }

    /// [`send`](Self::send) with one extra response header (a session's
    /// `set-cookie`).
    pub fn send_with(
        self,
        respond: &mut SendResponse<Bytes>,
        grpc: bool,
        extra: Option<&(HeaderName, HeaderValue)>,
    ) -> u16 {
        let status = self.status();
        if grpc {
            let mut resp = Response::new(());
            *resp.status_mut() = StatusCode::OK;
            let h = resp.headers_mut();
            h.insert("content-type", HeaderValue::from_static("application/grpc"));
            h.insert(
                "grpc-status",
                HeaderValue::from(http_to_grpc_status(status.as_u16())),
            );
            if !self.body().is_empty() {
                h.insert("grpc-message", HeaderValue::from_static(self.body()));
            }
            if let Some((name, value)) = extra {
                h.append(name.clone(), value.clone());
            }
            let _ = respond.send_response(resp, true);
            return 200;
        }
        let mut resp = Response::new(());
        *resp.status_mut() = status;
        if let Some((name, value)) = extra {
            resp.headers_mut().append(name.clone(), value.clone());
        }
        let body = self.body();
        if body.is_empty() {
            let _ = respond.send_response(resp, true);
        } else {
            let h = resp.headers_mut();
            h.insert("content-type", HeaderValue::from_static("text/plain"));
            h.insert("content-length", HeaderValue::from(body.len()));
            if let Ok(mut send) = respond.send_response(resp, false) {
                let _ = send.send_data(Bytes::from_static(body.as_bytes()), true);
            }
        }
        status.as_u16()
    }
}
