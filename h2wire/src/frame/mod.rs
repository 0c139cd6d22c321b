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

mod encode;
mod head;
mod parse;
mod reader;
mod rules;
mod settings;

#[cfg(test)]
mod tests;

pub use encode::{
    begin_headers, encode_data, encode_data_head, encode_goaway, encode_ping, encode_rst_stream,
    encode_window_update, finish_headers, HeadersMark,
};
pub use head::FrameHeader;
pub use parse::{Frame, Priority};
pub use reader::decode_frame;
pub use settings::{encode_settings, encode_settings_ack, Settings};

/// What a client sends before its first frame (§3.4).
pub const CLIENT_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Length of the fixed frame header (§4.1).
pub const HEADER_LEN: usize = 9;
/// SETTINGS_MAX_FRAME_SIZE until the peer says otherwise, and its lowest
/// legal value (§6.5.2).
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;
/// The highest legal SETTINGS_MAX_FRAME_SIZE: the 24-bit length field's limit.
pub const MAX_MAX_FRAME_SIZE: u32 = (1 << 24) - 1;
/// The largest flow-control window and window increment (§6.9.1).
pub const MAX_WINDOW: u32 = (1 << 31) - 1;

/// Frame type codes (§6). Anything else is an extension frame, to be ignored.
pub mod kind {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const PRIORITY: u8 = 0x2;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PUSH_PROMISE: u8 = 0x5;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags (§6). Their meaning depends on the frame type: `ACK` and
/// `END_STREAM` share a bit.
pub mod flags {
    /// DATA, HEADERS: the sender's last frame on the stream.
    pub const END_STREAM: u8 = 0x1;
    /// SETTINGS, PING: a reply.
    pub const ACK: u8 = 0x1;
    /// HEADERS, PUSH_PROMISE, CONTINUATION: the header block is complete.
    pub const END_HEADERS: u8 = 0x4;
    /// DATA, HEADERS, PUSH_PROMISE: a pad length byte leads the payload.
    pub const PADDED: u8 = 0x8;
    /// HEADERS: the 5 bytes of §5.3 priority follow the pad length.
    pub const PRIORITY: u8 = 0x20;
}

/// The stream identifier's reserved top bit (§4.1), also the exclusive bit
/// of a priority dependency and the reserved bit of a window increment.
const R_BIT: u32 = 1 << 31;
