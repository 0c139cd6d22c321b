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
mod errors;
mod events;
mod limits;
mod output;
mod recv;
mod send;
mod server;
mod shared;
mod streams;

#[cfg(test)]
mod tests;

pub use client::ClientConn;
pub use config::{ClientConfig, FloodLimits, ServerConfig, UnderscoreAction};
pub use errors::{ConnError, SendError};
pub use events::{ClientEvent, Event};
pub use limits::{Flood, ServerCounts};
pub use server::ServerConn;
