//! Sans-I/O HTTP/2 wire format: frame parsing and encoding (RFC 9113 §4–6)
//! and HPACK header compression (RFC 7541).
//!
//! Why our own: the gateway spends about half its CPU inside the `h2` crate
//! (frames moved through slabs and deques, a mutex per handle call, an
//! allocation per header), and a proxy can do with much less. This crate is
//! the bottom layer of that replacement: no I/O, no executor, no locks.
//!
//! - [`frame`] reads frames out of bytes the caller received — DATA payloads
//!   stay zero-copy slices of the caller's buffer — and writes frames into a
//!   caller-owned `BytesMut`. Every rule of RFC 9113 §6 that can be checked
//!   on one frame is checked here, classified as a stream or a connection
//!   error as the RFC says.
//! - [`hpack`] decodes header blocks into borrowed `(name, value)` slices (no
//!   allocation per header) and encodes them, with a dynamic table packed in
//!   one byte buffer rather than one allocation per entry, so an idle
//!   connection's table costs what its entries weigh.
//!
//! - [`stream_state`] and [`window`] are the per-stream rules the connection
//!   layer applies: RFC 9113 §5.1's state machine and §6.9's flow-control
//!   arithmetic.
//! - [`header_block`] joins HEADERS and CONTINUATION fragments into one
//!   block (zero-copy when it came in one frame), with bounds on its size
//!   and on the number of CONTINUATIONs.
//! - [`message`] holds a decoded header list in a reused arena and checks it
//!   against RFC 9113 §8: field syntax, pseudo-headers, connection-specific
//!   fields, and what requests, responses and trailers require.
//! - [`conn`] is the connection built on these: [`conn::ServerConn`] and
//!   [`conn::ClientConn`], the two sides' state machines (streams, settings,
//!   flow control, what to write next), bytes in and events out, still
//!   without I/O. The glommio drivers that own the sockets will live in
//!   `shards`.

pub mod conn;
pub mod error;
pub mod frame;
pub mod header_block;
pub mod hpack;
pub mod message;
pub mod stream_state;
pub mod window;

#[cfg(test)]
mod testing;

pub use error::{ErrorCode, FrameError};
