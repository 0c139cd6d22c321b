//! HTTP/2 frames (RFC 9113 §4 and §6): parsed from received bytes, written into a caller-owned buffer.
//!
//! Reading: [`decode_frame`] splits one frame off the front of the caller's
//! receive buffer and [`Frame::parse`] checks it against every rule of §6
//! that needs no connection state. Payloads are `Bytes` slices of that
//! buffer, never copies.
//!
//! Writing: the `encode_*` functions append whole frames to a `BytesMut`
//! the caller owns (and reuses), so sending allocates nothing of its own.
//! DATA can be written header-only so the payload goes out by a vectored
//! write, and header blocks are HPACK-encoded in place between
//! [`begin_headers`] and [`finish_headers`].

mod consts;
mod encode;
mod head;
mod parse;
mod reader;
mod rules;
mod settings;

#[cfg(test)]
mod tests;

pub use consts::{
    flags, kind, CLIENT_PREFACE, DEFAULT_MAX_FRAME_SIZE, HEADER_LEN, MAX_MAX_FRAME_SIZE, MAX_WINDOW,
};
pub use encode::{
    begin_headers, encode_data, encode_data_head, encode_goaway, encode_ping, encode_rst_stream,
    encode_window_update, finish_headers, HeadersMark,
};
pub use head::FrameHeader;
pub use parse::{Frame, Priority};
pub use reader::decode_frame;
pub use settings::{encode_settings, encode_settings_ack, Settings};
