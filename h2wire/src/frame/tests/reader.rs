//! `decode_frame` on partial and oversized input, zero-copy payloads, and
//! header blocks split over CONTINUATION frames by `finish_headers`.

use super::*;
use crate::frame::{
    begin_headers, encode_data, encode_ping, encode_settings, encode_window_update, finish_headers,
    flags, kind, Settings, CLIENT_PREFACE, DEFAULT_MAX_FRAME_SIZE, HEADER_LEN,
};

/// Decodes every whole frame in `buf`.
fn drain(buf: &mut BytesMut, max: u32) -> Vec<Frame> {
    let mut out = Vec::new();
    while let Some(f) = decode_frame(buf, max).unwrap() {
        out.push(f);
    }
    out
}

fn several_frames() -> BytesMut {
    let mut buf = BytesMut::new();
    encode_settings(
        &mut buf,
        &Settings {
            max_concurrent_streams: Some(10),
            ..Settings::default()
        },
    );
    let mark = begin_headers(&mut buf);
    buf.extend_from_slice(b"\x82\x86\x84");
    finish_headers(&mut buf, mark, 1, false, DEFAULT_MAX_FRAME_SIZE);
    encode_data(&mut buf, 1, b"", false);
    encode_data(&mut buf, 1, b"some body", true);
    encode_ping(&mut buf, false, [1; 8]);
    encode_window_update(&mut buf, 0, 100);
    buf.extend_from_slice(&raw(0x42, 0, 0, b"ext"));
    buf
}

#[test]
fn every_split_point_gives_the_same_frames() {
    let whole = several_frames();
    let expected = drain(&mut whole.clone(), DEFAULT_MAX_FRAME_SIZE);
    assert_eq!(expected.len(), 7);
    for split in 0..=whole.len() {
        let mut buf = BytesMut::from(&whole[..split]);
        let mut got = drain(&mut buf, DEFAULT_MAX_FRAME_SIZE);
        buf.extend_from_slice(&whole[split..]);
        got.extend(drain(&mut buf, DEFAULT_MAX_FRAME_SIZE));
        assert!(buf.is_empty(), "split {split}");
        assert_eq!(got, expected, "split {split}");
    }
}

#[test]
fn byte_at_a_time_gives_the_same_frames() {
    let whole = several_frames();
    let expected = drain(&mut whole.clone(), DEFAULT_MAX_FRAME_SIZE);
    let mut buf = BytesMut::new();
    let mut got = Vec::new();
    for &byte in whole.iter() {
        buf.extend_from_slice(&[byte]);
        got.extend(drain(&mut buf, DEFAULT_MAX_FRAME_SIZE));
    }
    assert_eq!(got, expected);
}

#[test]
fn oversized_length_is_rejected_from_the_header_alone() {
    // 16385 declared, only the 9 header bytes present.
    let mut buf = BytesMut::from(&[0x00, 0x40, 0x01, kind::DATA, 0, 0, 0, 0, 1][..]);
    assert_conn(
        decode_frame(&mut buf, DEFAULT_MAX_FRAME_SIZE).map(|f| f.expect("an error")),
        ErrorCode::FRAME_SIZE_ERROR,
    );
    // Eight bytes are not enough to know.
    let mut buf = BytesMut::from(&[0x00, 0x40, 0x01, kind::DATA, 0, 0, 0, 0][..]);
    assert_eq!(decode_frame(&mut buf, DEFAULT_MAX_FRAME_SIZE), Ok(None));
    // A client preface read as a frame header declares ~5 MB.
    let mut buf = BytesMut::from(&CLIENT_PREFACE[..]);
    assert!(decode_frame(&mut buf, DEFAULT_MAX_FRAME_SIZE).is_err());
}

#[test]
fn a_frame_of_exactly_max_frame_size_is_accepted() {
    let payload = vec![7; DEFAULT_MAX_FRAME_SIZE as usize];
    let mut buf = BytesMut::new();
    encode_data(&mut buf, 1, &payload, false);
    let mut partial = buf.split_to(buf.len() - 1);
    assert_eq!(decode_frame(&mut partial, DEFAULT_MAX_FRAME_SIZE), Ok(None));
    partial.unsplit(buf);
    let frames = drain(&mut partial, DEFAULT_MAX_FRAME_SIZE);
    assert!(matches!(&frames[..], [Frame::Data { payload: p, .. }] if p.len() == payload.len()));
}

#[test]
fn payloads_are_slices_of_the_receive_buffer() {
    let mut buf = BytesMut::with_capacity(4096);
    encode_ping(&mut buf, false, [0; 8]);
    encode_data(&mut buf, 1, &[9; 1000], false);
    buf.extend_from_slice(&raw(kind::DATA, flags::PADDED, 3, b"\x02padded\0\0"));
    let mark = begin_headers(&mut buf);
    buf.extend_from_slice(b"\x82\x86");
    finish_headers(&mut buf, mark, 5, true, DEFAULT_MAX_FRAME_SIZE);
    let start = buf.as_ptr() as usize;
    let end = start + buf.capacity();
    let frames = drain(&mut buf, DEFAULT_MAX_FRAME_SIZE);
    let mut seen = 0;
    for f in &frames {
        let bytes = match f {
            Frame::Data { payload, .. } => payload,
            Frame::Headers { fragment, .. } => fragment,
            _ => continue,
        };
        let p = bytes.as_ptr() as usize;
        assert!(start <= p && p + bytes.len() <= end, "copied: {f:?}");
        seen += 1;
    }
    assert_eq!(seen, 3);
}

#[test]
fn a_stream_error_consumes_its_frame_and_the_next_one_decodes() {
    let mut buf = raw(kind::PRIORITY, 0, 3, &[0, 0, 0, 3, 0]);
    encode_ping(&mut buf, true, [2; 8]);
    assert_stream(
        decode_frame(&mut buf, DEFAULT_MAX_FRAME_SIZE).map(|f| f.expect("an error")),
        3,
        ErrorCode::PROTOCOL_ERROR,
    );
    assert_eq!(
        drain(&mut buf, DEFAULT_MAX_FRAME_SIZE),
        [Frame::Ping {
            ack: true,
            payload: [2; 8],
        }]
    );
}

fn block(len: usize) -> Vec<u8> {
    // Not a repeating pattern of the frame size, so a misplaced chunk shows.
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// Encodes `block` as a header block after `before` (bytes already in the
/// buffer), then decodes the frames back.
fn split_block(before: &[u8], block: &[u8], end_stream: bool, max: u32) -> Vec<Frame> {
    let mut buf = BytesMut::from(before);
    let mark = begin_headers(&mut buf);
    buf.extend_from_slice(block);
    finish_headers(&mut buf, mark, 5, end_stream, max);
    assert_eq!(&buf[..before.len()], before, "bytes before the mark moved");
    let mut rest = buf.split_off(before.len());
    drain(&mut rest, max)
}

/// Joins HEADERS + CONTINUATION fragments, checking the flags on the way.
fn reassemble(frames: &[Frame], end_stream: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let last = frames.len() - 1;
    for (i, f) in frames.iter().enumerate() {
        let (fragment, end_headers) = match (i, f) {
            (
                0,
                Frame::Headers {
                    stream: 5,
                    end_stream: es,
                    end_headers,
                    priority: None,
                    fragment,
                },
            ) => {
                assert_eq!(*es, end_stream);
                (fragment, *end_headers)
            }
            (
                1..,
                Frame::Continuation {
                    stream: 5,
                    end_headers,
                    fragment,
                },
            ) => (fragment, *end_headers),
            _ => panic!("frame {i}: {f:?}"),
        };
        assert_eq!(end_headers, i == last, "END_HEADERS on frame {i}");
        out.extend_from_slice(fragment);
    }
    out
}

#[test]
fn a_40k_header_block_splits_into_headers_and_two_continuations() {
    let block = block(40 * 1024);
    for end_stream in [false, true] {
        let frames = split_block(b"", &block, end_stream, 16_384);
        assert_eq!(frames.len(), 3);
        let lens: Vec<usize> = frames
            .iter()
            .map(|f| match f {
                Frame::Headers { fragment, .. } | Frame::Continuation { fragment, .. } => {
                    fragment.len()
                }
                _ => 0,
            })
            .collect();
        assert_eq!(lens, [16_384, 16_384, 40 * 1024 - 2 * 16_384]);
        assert_eq!(reassemble(&frames, end_stream), block);
    }
}

#[test]
fn a_split_block_after_other_frames_leaves_them_alone() {
    let mut before = BytesMut::new();
    encode_ping(&mut before, false, [3; 8]);
    encode_data(&mut before, 1, b"earlier", false);
    let block = block(50_000);
    let frames = split_block(&before, &block, true, 16_384);
    assert_eq!(frames.len(), 4);
    assert_eq!(reassemble(&frames, true), block);
}

#[test]
fn a_block_of_exactly_max_frame_size_is_not_split() {
    let block = block(16_384);
    let frames = split_block(b"", &block, true, 16_384);
    assert_eq!(frames.len(), 1);
    assert_eq!(reassemble(&frames, true), block);
}

#[test]
fn split_block_sizes_at_the_edges() {
    // One byte over: a one-byte CONTINUATION. A multiple of the size: no
    // empty CONTINUATION at the end.
    for (len, frames) in [(16_385, 2), (32_768, 2), (32_769, 3), (0, 1)] {
        let block = block(len);
        let got = split_block(b"", &block, false, 16_384);
        assert_eq!(got.len(), frames, "block of {len}");
        assert_eq!(reassemble(&got, false), block);
    }
    // A larger peer MAX_FRAME_SIZE keeps a 40 KB block in one frame.
    let block = block(40 * 1024);
    assert_eq!(split_block(b"", &block, false, 65_536).len(), 1);
}

#[test]
fn split_headers_carry_the_right_flags_on_the_wire() {
    let mut buf = BytesMut::new();
    let mark = begin_headers(&mut buf);
    buf.extend_from_slice(&block(16_385));
    finish_headers(&mut buf, mark, 5, true, 16_384);
    assert_eq!(
        &buf[..HEADER_LEN],
        &[0, 0x40, 0, kind::HEADERS, flags::END_STREAM, 0, 0, 0, 5]
    );
    let second = HEADER_LEN + 16_384;
    assert_eq!(
        &buf[second..second + HEADER_LEN],
        &[0, 0, 1, kind::CONTINUATION, flags::END_HEADERS, 0, 0, 0, 5]
    );
    assert_eq!(buf.len(), 2 * HEADER_LEN + 16_385);
}
