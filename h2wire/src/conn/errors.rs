//! How a connection ends and how a command can be refused.

use crate::ErrorCode;

/// The connection is over: GOAWAY is already queued in the output, which
/// the driver should write out before closing the socket.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("HTTP/2 connection error {code}: {reason}")]
pub struct ConnError {
    pub code: ErrorCode,
    pub reason: &'static str,
}

/// A command the stream's state does not allow. Nothing was queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// No such stream: never opened, or closed or reset since.
    #[error("stream is not open")]
    UnknownStream,
    /// We already sent END_STREAM on it.
    #[error("stream already ended on our side")]
    Ended,
    /// The response head was already sent (send trailers or data instead).
    #[error("response headers already sent")]
    HeadersSent,
    /// DATA or trailers before the response head.
    #[error("response headers not sent yet")]
    NoHeaders,
    /// `:status` outside 100..=999, or a 1xx with END_STREAM.
    #[error("invalid status code")]
    BadStatus,
    /// Client: the server's SETTINGS_MAX_CONCURRENT_STREAMS is reached;
    /// queue the request or use another connection.
    #[error("stream limit reached")]
    TooManyStreams,
    /// Client: a GOAWAY was received or sent, or the connection failed; no
    /// new streams on this connection.
    #[error("connection is going away")]
    GoingAway,
    /// Client: all 2^30 stream ids of the connection are used.
    #[error("stream ids exhausted")]
    IdsExhausted,
    /// Client: an extended CONNECT (`:protocol`) to a server whose
    /// SETTINGS did not enable it (RFC 8441 §3).
    #[error("the server does not take extended CONNECT")]
    NoExtendedConnect,
}
