//! Cutting complete frames off the front of a receive buffer.

use bytes::{Buf, BytesMut};

use super::consts::HEADER_LEN;
use super::head::FrameHeader;
use super::parse::Frame;
use super::rules::bad_size;
use crate::FrameError;

/// Splits one complete frame off the front of `buf` if it holds one
/// (zero-copy: the payload is `split_to(..).freeze()` of `buf`), `Ok(None)`
/// if more bytes are needed. A declared length above `max_frame_size` (the
/// one we advertised) is a connection FRAME_SIZE_ERROR, reported as soon
/// as the 9 header bytes are there rather than after buffering the payload.
///
/// A frame that fails to parse has still been consumed, so after a stream
/// error the caller resets that stream and carries on with `buf`.
pub fn decode_frame(buf: &mut BytesMut, max_frame_size: u32) -> Result<Option<Frame>, FrameError> {
    let Some(raw) = buf.first_chunk::<HEADER_LEN>() else {
        return Ok(None);
    };
    let head = FrameHeader::parse(raw);
    // Always a connection error, though §4.2 allows a stream error for
    // some frame types: skipping the payload would mean buffering or
    // discarding up to 16 MB for a peer that ignores our settings.
    if head.len > max_frame_size {
        return Err(bad_size("frame longer than our MAX_FRAME_SIZE"));
    }
    let len = head.len as usize;
    if buf.len() < HEADER_LEN + len {
        return Ok(None);
    }
    buf.advance(HEADER_LEN);
    let payload = buf.split_to(len).freeze();
    Frame::parse(head, payload).map(Some)
}
