//! The numbers every part of the frame layer shares: the preface, the
//! frame header's length, size and window limits, frame type codes and
//! flags.

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
pub(super) const R_BIT: u32 = 1 << 31;
