//! SETTINGS (§6.5): the parameters, their parsing and checks, their encoding.

use bytes::{BufMut, BytesMut};

use super::consts::{
    flags, kind, DEFAULT_MAX_FRAME_SIZE, HEADER_LEN, MAX_MAX_FRAME_SIZE, MAX_WINDOW,
};
use super::head::FrameHeader;
use super::rules::{bad_size, on_connection};
use crate::{ErrorCode, FrameError};

const HEADER_TABLE_SIZE: u16 = 0x1;
const ENABLE_PUSH: u16 = 0x2;
const MAX_CONCURRENT_STREAMS: u16 = 0x3;
const INITIAL_WINDOW_SIZE: u16 = 0x4;
const MAX_FRAME_SIZE: u16 = 0x5;
const MAX_HEADER_LIST_SIZE: u16 = 0x6;
/// RFC 8441 (extended CONNECT, for WebSockets over HTTP/2).
const ENABLE_CONNECT_PROTOCOL: u16 = 0x8;

/// The parameters one SETTINGS frame carries; `None`: not in the frame (the
/// value in force stays as it was).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    pub header_table_size: Option<u32>,
    pub enable_push: Option<bool>,
    pub max_concurrent_streams: Option<u32>,
    pub initial_window_size: Option<u32>,
    pub max_frame_size: Option<u32>,
    pub max_header_list_size: Option<u32>,
    pub enable_connect_protocol: Option<bool>,
}

impl Settings {
    /// The parameters in wire order, ready to write.
    fn pairs(&self) -> [(u16, Option<u32>); 7] {
        [
            (HEADER_TABLE_SIZE, self.header_table_size),
            (ENABLE_PUSH, self.enable_push.map(u32::from)),
            (MAX_CONCURRENT_STREAMS, self.max_concurrent_streams),
            (INITIAL_WINDOW_SIZE, self.initial_window_size),
            (MAX_FRAME_SIZE, self.max_frame_size),
            (MAX_HEADER_LIST_SIZE, self.max_header_list_size),
            (
                ENABLE_CONNECT_PROTOCOL,
                self.enable_connect_protocol.map(u32::from),
            ),
        ]
    }
}

/// Parses a SETTINGS frame's payload: the parameters it carries, or `None`
/// for an acknowledgement (ACK, no payload). [`Frame`](super::Frame) is
/// built from it by the caller, so that this file need not know the
/// other frame types.
// `is_multiple_of` is newer than the workspace's MSRV (1.80).
#[allow(clippy::manual_is_multiple_of)]
pub(super) fn parse(head: FrameHeader, payload: &[u8]) -> Result<Option<Settings>, FrameError> {
    on_connection(head, "SETTINGS on a stream")?;
    if head.flags & flags::ACK != 0 {
        if !payload.is_empty() {
            return Err(bad_size("SETTINGS ACK with a payload"));
        }
        return Ok(None);
    }
    if payload.len() % 6 != 0 {
        return Err(bad_size("SETTINGS length not a multiple of 6"));
    }
    let mut s = Settings::default();
    // A repeated identifier simply overwrites: §6.5.3 has the values
    // processed in order, so the last one is what ends up in force.
    let mut rest = payload;
    while let Some((&[i0, i1, v0, v1, v2, v3], tail)) = rest.split_first_chunk::<6>() {
        rest = tail;
        let value = u32::from_be_bytes([v0, v1, v2, v3]);
        match u16::from_be_bytes([i0, i1]) {
            HEADER_TABLE_SIZE => s.header_table_size = Some(value),
            ENABLE_PUSH => s.enable_push = Some(boolean(value, "ENABLE_PUSH not 0 or 1")?),
            MAX_CONCURRENT_STREAMS => s.max_concurrent_streams = Some(value),
            INITIAL_WINDOW_SIZE if value > MAX_WINDOW => {
                return Err(FrameError::conn(
                    ErrorCode::FLOW_CONTROL_ERROR,
                    "INITIAL_WINDOW_SIZE above 2^31-1",
                ));
            }
            INITIAL_WINDOW_SIZE => s.initial_window_size = Some(value),
            MAX_FRAME_SIZE if !(DEFAULT_MAX_FRAME_SIZE..=MAX_MAX_FRAME_SIZE).contains(&value) => {
                return Err(FrameError::conn(
                    ErrorCode::PROTOCOL_ERROR,
                    "MAX_FRAME_SIZE outside [2^14, 2^24-1]",
                ));
            }
            MAX_FRAME_SIZE => s.max_frame_size = Some(value),
            MAX_HEADER_LIST_SIZE => s.max_header_list_size = Some(value),
            ENABLE_CONNECT_PROTOCOL => {
                s.enable_connect_protocol =
                    Some(boolean(value, "ENABLE_CONNECT_PROTOCOL not 0 or 1")?)
            }
            // §6.5.2: unknown settings must be ignored.
            _ => {}
        }
    }
    Ok(Some(s))
}

fn boolean(value: u32, reason: &'static str) -> Result<bool, FrameError> {
    match value {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(FrameError::conn(ErrorCode::PROTOCOL_ERROR, reason)),
    }
}

/// Writes a SETTINGS frame holding the parameters that are `Some`.
pub fn encode_settings(dst: &mut BytesMut, s: &Settings) {
    let pairs = s.pairs();
    let count = pairs.iter().filter(|(_, v)| v.is_some()).count();
    let len = 6 * count as u32;
    dst.reserve(HEADER_LEN + len as usize);
    FrameHeader {
        len,
        kind: kind::SETTINGS,
        flags: 0,
        stream: 0,
    }
    .encode(dst);
    for (id, value) in pairs {
        if let Some(v) = value {
            dst.put_u16(id);
            dst.put_u32(v);
        }
    }
}

/// Writes the empty SETTINGS frame with ACK that acknowledges the peer's.
pub fn encode_settings_ack(dst: &mut BytesMut) {
    FrameHeader {
        len: 0,
        kind: kind::SETTINGS,
        flags: flags::ACK,
        stream: 0,
    }
    .encode(dst);
}
