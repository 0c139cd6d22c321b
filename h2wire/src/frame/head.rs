//! The 9-byte frame header (§4.1).

use bytes::BytesMut;

use super::consts::{HEADER_LEN, MAX_MAX_FRAME_SIZE, R_BIT};

/// A frame header as on the wire. `stream` never carries the reserved bit:
/// §4.1 says it must be ignored on receipt, so it is dropped on parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload length, not counting these 9 bytes (24 bits).
    pub len: u32,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

impl FrameHeader {
    pub fn parse(b: &[u8; HEADER_LEN]) -> Self {
        let [l0, l1, l2, kind, flags, s0, s1, s2, s3] = *b;
        Self {
            len: u32::from_be_bytes([0, l0, l1, l2]),
            kind,
            flags,
            stream: u32::from_be_bytes([s0, s1, s2, s3]) & !R_BIT,
        }
    }

    /// The header's wire bytes; callers that patch a reserved header in
    /// place (header blocks) copy these over it.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        debug_assert!(self.len <= MAX_MAX_FRAME_SIZE, "frame length over 24 bits");
        let [_, l0, l1, l2] = self.len.to_be_bytes();
        let [s0, s1, s2, s3] = (self.stream & !R_BIT).to_be_bytes();
        [l0, l1, l2, self.kind, self.flags, s0, s1, s2, s3]
    }

    pub fn encode(&self, dst: &mut BytesMut) {
        dst.extend_from_slice(&self.to_bytes());
    }
}
