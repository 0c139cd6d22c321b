//! What the connection layer hands the application: the events read from
//! the peer's frames, one enum per side.

use bytes::Bytes;

use crate::message::HeaderList;
use crate::ErrorCode;

/// What happened on the connection, in the order the peer's frames said it.
#[derive(Debug)]
pub enum Event {
    /// A new request. `head` already passed
    /// [`check_request`](crate::message::check_request); give it back with
    /// [`ServerConn::recycle`](super::ServerConn::recycle) when done with it.
    Request {
        stream: u32,
        head: HeaderList,
        end_stream: bool,
    },
    /// Request body bytes: a zero-copy slice of the buffer given to `recv`.
    /// Hand the byte count to [`ServerConn::release`](super::ServerConn::release) once consumed.
    Data {
        stream: u32,
        data: Bytes,
        end_stream: bool,
    },
    /// The request's trailer section (it ends the request body).
    Trailers { stream: u32, fields: HeaderList },
    /// The stream is gone: the peer reset it, or we did because it broke a
    /// stream rule (`code` is then what we sent). Drop the stream.
    Reset { stream: u32, code: ErrorCode },
    /// Send capacity appeared on `stream`; stream 0 means the connection
    /// window, i.e. every stream that was blocked on it.
    WindowOpen { stream: u32 },
    /// The peer is going away; streams above `last_stream` were not
    /// processed by it (for a client: it opens no new streams).
    GoAway { last_stream: u32, code: ErrorCode },
}

/// What happened on a client connection, in the order the server's frames
/// said it.
#[derive(Debug)]
pub enum ClientEvent {
    /// A response head, passed
    /// [`check_response`](crate::message::check_response). `informational`
    /// (1xx, never 101): the final head is still to come. Give `head` back
    /// with [`ClientConn::recycle`](super::ClientConn::recycle) when done with it.
    Response {
        stream: u32,
        head: HeaderList,
        informational: bool,
        end_stream: bool,
    },
    /// Response body bytes, zero-copy; hand the count to
    /// [`ClientConn::release`](super::ClientConn::release) once consumed.
    Data {
        stream: u32,
        data: Bytes,
        end_stream: bool,
    },
    /// The response's trailer section (it ends the response).
    Trailers { stream: u32, fields: HeaderList },
    /// The server reset the stream. REFUSED_STREAM means the server did
    /// not process the request: safe to retry elsewhere. Streams a GOAWAY
    /// left out come as REFUSED_STREAM too. NO_ERROR after a complete
    /// response only stops the request body (§8.1).
    Reset { stream: u32, code: ErrorCode },
    /// We reset the stream: the server broke a stream rule (a malformed
    /// response, its flow control overrun); `code` is what we sent. A
    /// proxy answers 502 (a protocol error, not the server's reset).
    Broken { stream: u32, code: ErrorCode },
    /// The response head or trailers were over
    /// [`ClientConfig::max_header_list_size`]: we reset the stream (CANCEL).
    /// The request may have been processed; a proxy answers 502.
    ///
    /// [`ClientConfig::max_header_list_size`]: super::ClientConfig::max_header_list_size
    TooLarge { stream: u32 },
    /// Send capacity appeared on `stream`; stream 0: the connection window.
    WindowOpen { stream: u32 },
    /// The server's SETTINGS changed how many streams we may have open at
    /// once ([`ClientConn::can_open_stream`](super::ClientConn::can_open_stream)).
    StreamLimit { max: u32 },
    /// The server is going away: no new streams on this connection. Streams
    /// above `last_stream` were not processed and each got a
    /// [`ClientEvent::Reset`] with REFUSED_STREAM just before this event.
    GoAway { last_stream: u32, code: ErrorCode },
}

impl ClientEvent {
    /// The stream the event is about (0 for `WindowOpen`: the connection
    /// window); `None` for events about the whole connection.
    pub fn stream(&self) -> Option<u32> {
        match self {
            Self::Response { stream, .. }
            | Self::Data { stream, .. }
            | Self::Trailers { stream, .. }
            | Self::Reset { stream, .. }
            | Self::Broken { stream, .. }
            | Self::TooLarge { stream }
            | Self::WindowOpen { stream } => Some(*stream),
            Self::StreamLimit { .. } | Self::GoAway { .. } => None,
        }
    }
}
