//! Why a request was refused, and the status to refuse it with.

/// A request the gateway refuses. The status is what Envoy and HAProxy
/// answer for the same input; the connection closes after the answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("request head larger than {limit} bytes")]
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
}

impl Error {
    /// The status code to answer with before closing.
    pub fn status(&self) -> u16 {
        match self {
            Error::HeadTooLarge { .. } | Error::TooManyHeaders { .. } => 431,
            Error::UnsupportedVersion => 505,
            Error::Http10NotAccepted => 426,
            Error::UnsupportedTransferCoding => 501,
            Error::Malformed(_) | Error::BadFraming(_) | Error::BadChunk(_) => 400,
        }
    }
}
