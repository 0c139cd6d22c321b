//! Tests of the frame module: §6 validation, round trips, buffering, and
//! wire compatibility with the `h2` crate.

mod h2compat;
mod reader;
mod roundtrip;
mod validate;

use bytes::{Bytes, BytesMut};

use super::{decode_frame, Frame, FrameHeader, MAX_MAX_FRAME_SIZE};
use crate::{ErrorCode, FrameError};

/// A frame built byte by byte, for what our encoders never write.
fn raw(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> BytesMut {
    let mut b = BytesMut::new();
    FrameHeader {
        len: payload.len() as u32,
        kind,
        flags,
        stream,
    }
    .encode(&mut b);
    b.extend_from_slice(payload);
    b
}

/// Parses exactly one frame out of `bytes`, which must hold nothing else.
fn parse_one(mut bytes: BytesMut) -> Result<Frame, FrameError> {
    let frame = decode_frame(&mut bytes, MAX_MAX_FRAME_SIZE)?.expect("a whole frame");
    assert!(bytes.is_empty(), "bytes left over: {bytes:?}");
    Ok(frame)
}

fn parse_raw(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Result<Frame, FrameError> {
    parse_one(raw(kind, flags, stream, payload))
}

#[track_caller]
fn assert_conn(r: Result<Frame, FrameError>, code: ErrorCode) {
    match r {
        Err(FrameError::Connection { code: c, .. }) if c == code => {}
        other => panic!("expected connection error {code}, got {other:?}"),
    }
}

#[track_caller]
fn assert_stream(r: Result<Frame, FrameError>, stream: u32, code: ErrorCode) {
    match r {
        Err(FrameError::Stream {
            stream: s, code: c, ..
        }) if s == stream && c == code => {}
        other => panic!("expected stream {stream} error {code}, got {other:?}"),
    }
}

fn b(s: &'static [u8]) -> Bytes {
    Bytes::from_static(s)
}
