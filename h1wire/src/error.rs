//! Why a message was refused, and the status to refuse it with; and why a
//! client connection refused a request command.

/// A message the gateway refuses: a request from downstream (the status
/// is what Envoy and HAProxy answer for the same input; the connection
/// closes after the answer) or a response from upstream
/// ([`crate::client::ClientConn`]: whatever the variant, the exchange has
/// failed, the downstream request is answered 502 (RFC 9110 §15.6.3) and
/// the upstream connection closes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("message head larger than {limit} bytes")]
    HeadTooLarge { limit: usize },
    #[error("more than {limit} header fields")]
    TooManyHeaders { limit: usize },
    #[error("malformed request: {0}")]
    Malformed(&'static str),
    #[error("HTTP version not supported")]
    UnsupportedVersion,
    #[error("transfer coding not supported: only chunked is")]
    UnsupportedTransferCoding,
    #[error("ambiguous message framing: {0}")]
    BadFraming(&'static str),
    #[error("malformed chunked body: {0}")]
    BadChunk(&'static str),
    /// An HTTP/1.0 request where only HTTP/1.1 is served (Envoy's
    /// default, without `accept_http_10`).
    #[error("HTTP/1.0 not accepted")]
    Http10NotAccepted,
    /// A response head that is not one (status line, fields), or one we
    /// never asked for (`101 Switching Protocols`).
    #[error("malformed response: {0}")]
    BadResponse(&'static str),
    /// Response bytes with no request waiting for them: after a complete
    /// response, or on an idle connection.
    #[error("response bytes without a request")]
    UnsolicitedResponse,
    /// The server closed the connection before its response was complete.
    #[error("connection closed before the response was complete")]
    ResponseTruncated,
}

impl Error {
    /// The status code to answer a downstream request with before closing
    /// (for errors in upstream responses: 502).
    pub fn status(&self) -> u16 {
        match self {
            Error::HeadTooLarge { .. } | Error::TooManyHeaders { .. } => 431,
            Error::UnsupportedVersion => 505,
            Error::Http10NotAccepted => 426,
            Error::UnsupportedTransferCoding => 501,
            Error::Malformed(_) | Error::BadFraming(_) | Error::BadChunk(_) => 400,
            Error::BadResponse(_) | Error::UnsolicitedResponse | Error::ResponseTruncated => 502,
        }
    }
}

/// A request command the connection's state does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// `send_request` while an exchange is in progress or the connection
    /// will close.
    #[error("an exchange is in progress or the connection is closing")]
    Busy,
    #[error("no request in progress")]
    NoRequest,
    #[error("request already complete")]
    RequestComplete,
    /// More body than the request's `Content-Length`, or an end short of
    /// it: the request cannot be completed and the connection closes.
    #[error("request body longer or shorter than its Content-Length")]
    LengthMismatch,
    /// A `content-length` given to `send_request` that is no decimal
    /// number, or two different ones; nothing was written.
    #[error("invalid request Content-Length")]
    InvalidContentLength,
    /// An empty `upgrade` given to `send_upgrade`, or one with CR, LF or
    /// NUL; nothing was written.
    #[error("invalid Upgrade value")]
    InvalidUpgrade,
    /// The exchange failed or was aborted (a response error, a length
    /// mismatch, [`ClientConn::abort`](crate::client::ClientConn::abort)):
    /// close the connection.
    #[error("connection failed")]
    Broken,
}
