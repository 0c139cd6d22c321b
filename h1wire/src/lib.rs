//! Sans-I/O HTTP/1.1 message framing (RFC 9112) for both sides of the
//! gateway: downstream, a server connection ([`conn::ServerConn`]: request
//! heads and body pieces in, responses encoded out); upstream, a client
//! connection ([`client::ClientConn`]: requests encoded out, response
//! heads and body pieces in, one exchange at a time).
//!
//! Like `h2wire`, it does no I/O and owns no socket: the caller reads
//! into a `BytesMut`, hands it to the connection (or to
//! [`parse_request_head`] and a [`BodyDecoder`]), and writes what it
//! produces ([`encode`]). Heads are parsed with `httparse`; what this
//! crate adds is everything a proxy must decide on top of the syntax,
//! where parsers and proxies that disagree open the door to request
//! smuggling and response splitting (RFC 9112 §6.3, §11.2):
//!
//! - one framing per request: `Transfer-Encoding` and `Content-Length`
//!   together, a `Content-Length` that is invalid, a list or given twice
//!   (even with equal values, as Envoy refuses it), a transfer coding
//!   other than a final `chunked`, or
//!   any `Transfer-Encoding` in an HTTP/1.0 request is a 400 and the
//!   connection closes;
//! - responses are framed by RFC 9112 §6.3's rules in order (no body for
//!   HEAD, 1xx, 204, 304; `Transfer-Encoding` over `Content-Length`, then
//!   the close), and any response whose framing another reader could have
//!   taken differently, or that is followed by bytes nobody asked for,
//!   ends the upstream connection after it;
//! - chunk-size lines are parsed strictly (1 to 16 hex digits, extensions
//!   without control characters, CRLF), and chunk data must end in CRLF;
//! - `Host` is required once in HTTP/1.1 requests;
//! - every buffer is bounded: the head (431 beyond it), the number of
//!   fields (431), a chunk-size line, the trailer section, and body bytes
//!   not yet taken by the caller (a window, both ways).
//!
//! Every [`Error`] carries the status to answer a downstream request with
//! (502 for an upstream response's); after any of them the connection
//! cannot be trusted to be in sync and must close.

mod body;
pub mod client;
pub mod conn;
pub mod encode;
mod error;
mod head;

pub use body::{trailer_fields, BodyDecoder, BodyEvent};
pub use conn::MAX_BUFFERED_INPUT;
pub use error::Error;
pub use head::{parse_request_head, BodyFraming, Limits, RequestHead, Version};
