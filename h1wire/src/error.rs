//! Why a message was refused, and the status to refuse it with.

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
