//! Both sides of an HTTP/2 connection (RFC 9113), sans-I/O: bytes in, events out, commands in, bytes out.
//!
//! [`ServerConn`] (and its twin [`ClientConn`], for the gateway's
//! connections to backends, with [`ClientEvent`]s) is a plain struct owned
//! by the one task that drives a connection: it takes what the socket read ([`ServerConn::recv`]), turns
//! it into [`Event`]s for the application, takes the application's
//! commands (`send_headers`, `send_data`, `reset`, `release`, ...) and
//! hands out what to write ([`ServerConn::poll_output`]). No I/O, no
//! timers, no locks, no reference counting: the driver owns all of that.
//!
//! Flow control is explicit: received DATA counts against the windows until
//! the application calls [`ServerConn::release`] for it, so a slow consumer
//! slows its peer rather than growing buffers here. The application must
//! release every byte it was handed as [`Event::Data`], including on
//! streams that were reset since, or the connection window shrinks for
//! good.

mod client;
mod client_recv;
mod client_send;
mod config;
mod dispatch;
mod limits;
mod output;
mod recv;
mod send;
mod server;
mod shared;
mod streams;

#[cfg(test)]
mod tests;

use bytes::Bytes;

pub use client::ClientConn;
pub use config::{ClientConfig, FloodLimits, ServerConfig, UnderscoreAction};
pub use limits::{Flood, ServerCounts};
pub use server::ServerConn;

use crate::message::HeaderList;
use crate::ErrorCode;

/// What happened on the connection, in the order the peer's frames said it.
#[derive(Debug)]
pub enum Event {
    /// A new request. `head` already passed
    /// [`check_request`](crate::message::check_request); give it back with
    /// [`ServerConn::recycle`] when done with it.
    Request {
        stream: u32,
        head: HeaderList,
        end_stream: bool,
    },
    /// Request body bytes: a zero-copy slice of the buffer given to `recv`.
    /// Hand the byte count to [`ServerConn::release`] once consumed.
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
}

/// What happened on a client connection, in the order the server's frames
/// said it.
#[derive(Debug)]
pub enum ClientEvent {
    /// A response head, passed
    /// [`check_response`](crate::message::check_response). `informational`
    /// (1xx, never 101): the final head is still to come. Give `head` back
    /// with [`ClientConn::recycle`] when done with it.
    Response {
        stream: u32,
        head: HeaderList,
        informational: bool,
        end_stream: bool,
    },
    /// Response body bytes, zero-copy; hand the count to
    /// [`ClientConn::release`] once consumed.
    Data {
        stream: u32,
        data: Bytes,
        end_stream: bool,
    },
    /// The response's trailer section (it ends the response).
    Trailers { stream: u32, fields: HeaderList },
    /// The stream is gone: the server reset it, or we did because it broke
    /// a stream rule (`code` is then what we sent). REFUSED_STREAM means
    /// the server did not process the request: safe to retry elsewhere.
    /// Streams a GOAWAY left out come as REFUSED_STREAM too. NO_ERROR after
    /// a complete response only stops the request body (§8.1).
    Reset { stream: u32, code: ErrorCode },
    /// The response head or trailers were over
    /// [`ClientConfig::max_header_list_size`]: we reset the stream (CANCEL).
    /// The request may have been processed; a proxy answers 502.
    TooLarge { stream: u32 },
    /// Send capacity appeared on `stream`; stream 0: the connection window.
    WindowOpen { stream: u32 },
    /// The server's SETTINGS changed how many streams we may have open at
    /// once ([`ClientConn::can_open_stream`]).
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
            | Self::TooLarge { stream }
            | Self::WindowOpen { stream } => Some(*stream),
            Self::StreamLimit { .. } | Self::GoAway { .. } => None,
        }
    }
}
