//! Writing frames into a caller-owned buffer, header blocks split in place.

use bytes::{BufMut, BytesMut};

use super::consts::{flags, kind, HEADER_LEN, MAX_MAX_FRAME_SIZE, MAX_WINDOW, R_BIT};
use super::head::FrameHeader;
use crate::ErrorCode;

/// Writes only the header of a DATA frame of `len` bytes: the caller sends
/// the payload `Bytes` right after it (vectored write), so it is never
/// copied into `dst`.
pub fn encode_data_head(dst: &mut BytesMut, stream: u32, len: u32, end_stream: bool) {
    debug_assert!(stream != 0, "DATA on stream 0");
    FrameHeader {
        len,
        kind: kind::DATA,
        flags: if end_stream { flags::END_STREAM } else { 0 },
        stream,
    }
    .encode(dst);
}

/// Writes a whole DATA frame, copying the payload: for payloads small
/// enough that a copy costs less than another iovec.
pub fn encode_data(dst: &mut BytesMut, stream: u32, payload: &[u8], end_stream: bool) {
    dst.reserve(HEADER_LEN + payload.len());
    encode_data_head(dst, stream, wire_len(payload.len()), end_stream);
    dst.extend_from_slice(payload);
}

pub fn encode_ping(dst: &mut BytesMut, ack: bool, payload: [u8; 8]) {
    dst.reserve(HEADER_LEN + 8);
    FrameHeader {
        len: 8,
        kind: kind::PING,
        flags: if ack { flags::ACK } else { 0 },
        stream: 0,
    }
    .encode(dst);
    dst.extend_from_slice(&payload);
}

pub fn encode_goaway(dst: &mut BytesMut, last_stream: u32, code: ErrorCode, debug: &[u8]) {
    dst.reserve(HEADER_LEN + 8 + debug.len());
    FrameHeader {
        len: wire_len(8 + debug.len()),
        kind: kind::GOAWAY,
        flags: 0,
        stream: 0,
    }
    .encode(dst);
    dst.put_u32(last_stream & !R_BIT);
    dst.put_u32(code.0);
    dst.extend_from_slice(debug);
}

pub fn encode_rst_stream(dst: &mut BytesMut, stream: u32, code: ErrorCode) {
    debug_assert!(stream != 0, "RST_STREAM on stream 0");
    dst.reserve(HEADER_LEN + 4);
    FrameHeader {
        len: 4,
        kind: kind::RST_STREAM,
        flags: 0,
        stream,
    }
    .encode(dst);
    dst.put_u32(code.0);
}

/// `stream` 0 widens the connection window. `increment` must be in
/// 1..=2^31-1: zero is a protocol error at the peer.
pub fn encode_window_update(dst: &mut BytesMut, stream: u32, increment: u32) {
    debug_assert!(
        (1..=MAX_WINDOW).contains(&increment),
        "bad window increment"
    );
    dst.reserve(HEADER_LEN + 4);
    FrameHeader {
        len: 4,
        kind: kind::WINDOW_UPDATE,
        flags: 0,
        stream,
    }
    .encode(dst);
    dst.put_u32(increment & !R_BIT);
}

/// Where [`begin_headers`] reserved a frame header in the buffer.
#[derive(Debug)]
#[must_use = "the reserved header is garbage until finish_headers fills it in"]
pub struct HeadersMark(usize);

/// Reserves a HEADERS frame header at the end of `dst`; the caller then
/// HPACK-encodes the header block straight after it and calls
/// [`finish_headers`]. The mark is an offset into `dst`: in between,
/// nothing may be written to `dst` but the block, nor split off its front.
pub fn begin_headers(dst: &mut BytesMut) -> HeadersMark {
    let mark = HeadersMark(dst.len());
    dst.extend_from_slice(&[0; HEADER_LEN]);
    mark
}

/// Fills in the header reserved by [`begin_headers`] for the block written
/// since. A block longer than `max_frame_size` (the peer's) is cut in place
/// into HEADERS + CONTINUATION frames: END_STREAM goes on the HEADERS frame
/// (§8.1), END_HEADERS on the last frame only.
pub fn finish_headers(
    dst: &mut BytesMut,
    mark: HeadersMark,
    stream: u32,
    end_stream: bool,
    max_frame_size: u32,
) {
    debug_assert!(stream != 0, "HEADERS on stream 0");
    debug_assert!(max_frame_size > 0 && max_frame_size <= MAX_MAX_FRAME_SIZE);
    let HeadersMark(at) = mark;
    let start = at + HEADER_LEN;
    debug_assert!(start <= dst.len(), "mark is not from this buffer");
    let block = dst.len() - start;
    let max = max_frame_size.max(1) as usize;
    let end_stream = if end_stream { flags::END_STREAM } else { 0 };

    if block <= max {
        let head = FrameHeader {
            len: wire_len(block),
            kind: kind::HEADERS,
            flags: end_stream | flags::END_HEADERS,
            stream,
        };
        dst[at..start].copy_from_slice(&head.to_bytes());
        return;
    }

    // Chunk i of the block moves i headers further: grow the buffer by the
    // CONTINUATION headers, then move chunks last to first so that none is
    // overwritten before it has moved. One memmove per CONTINUATION costs
    // less than HPACK-encoding into a scratch buffer and copying all of it.
    let frames = block.div_ceil(max);
    dst.resize(dst.len() + (frames - 1) * HEADER_LEN, 0);
    for i in (0..frames).rev() {
        let from = start + i * max;
        let len = max.min(block - i * max);
        let to = from + i * HEADER_LEN;
        if i > 0 {
            dst.copy_within(from..from + len, to);
        }
        let (kind, mut bits) = match i {
            0 => (kind::HEADERS, end_stream),
            _ => (kind::CONTINUATION, 0),
        };
        if i + 1 == frames {
            bits |= flags::END_HEADERS;
        }
        let head = FrameHeader {
            len: wire_len(len),
            kind,
            flags: bits,
            stream,
        };
        dst[to - HEADER_LEN..to].copy_from_slice(&head.to_bytes());
    }
}

/// A payload length as the 24-bit field holds it. Callers keep frames
/// within the peer's MAX_FRAME_SIZE, so a longer one is a bug here.
fn wire_len(len: usize) -> u32 {
    debug_assert!(
        len <= MAX_MAX_FRAME_SIZE as usize,
        "frame over 2^24-1 bytes"
    );
    len as u32
}
