//! Arbitrary bytes through h2wire's frame reader never panic, and every frame that parses and has an encoder re-encodes to bytes that parse to the same frame.
#![no_main]

use bytes::BytesMut;
use h2wire::frame::{
    begin_headers, decode_frame, encode_data, encode_goaway, encode_ping, encode_rst_stream,
    encode_settings, encode_settings_ack, encode_window_update, finish_headers, Frame,
    FrameHeader, DEFAULT_MAX_FRAME_SIZE, HEADER_LEN, MAX_MAX_FRAME_SIZE,
};
use h2wire::FrameError;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    // The MAX_FRAME_SIZE we "advertised": the default, the largest, or
    // something in between, so the length check is crossed both ways.
    let max_frame_size = match mode & 3 {
        0 => DEFAULT_MAX_FRAME_SIZE,
        1 => MAX_MAX_FRAME_SIZE,
        2 => DEFAULT_MAX_FRAME_SIZE + u32::from(mode) * 997,
        _ => 64,
    };
    // Header blocks are re-split at this size: small ones force CONTINUATIONs.
    let split = match mode >> 2 {
        0 => DEFAULT_MAX_FRAME_SIZE,
        n => u32::from(n),
    };

    // Any 9 bytes are a frame header, which writes back as it came, less
    // the reserved bit.
    if let Some(raw) = rest.first_chunk::<HEADER_LEN>() {
        let head = FrameHeader::parse(raw);
        let mut again = *raw;
        again[5] &= 0x7f;
        assert_eq!(head.to_bytes(), again);
    }

    let mut buf = BytesMut::from(rest);
    loop {
        let before = buf.len();
        match decode_frame(&mut buf, max_frame_size) {
            Ok(None) => {
                // Incomplete: nothing consumed.
                assert_eq!(buf.len(), before);
                break;
            }
            Ok(Some(frame)) => {
                assert!(buf.len() < before, "a frame consumed nothing");
                check_round_trip(&frame, split);
            }
            // A stream error consumed its frame and the connection goes on;
            // a connection error ends it.
            Err(FrameError::Stream { stream, .. }) => {
                assert_ne!(stream, 0, "stream error on stream 0");
                assert!(buf.len() < before, "a refused frame consumed nothing");
            }
            Err(FrameError::Connection { .. }) => break,
        }
    }
});

/// Parses exactly the frames in `bytes`, which must hold nothing else.
fn parse_all(bytes: &mut BytesMut) -> Vec<Frame> {
    let mut frames = Vec::new();
    while !bytes.is_empty() {
        let f = decode_frame(bytes, MAX_MAX_FRAME_SIZE)
            .expect("our own encoding parses")
            .expect("our own encoding is whole");
        frames.push(f);
    }
    frames
}

fn parse_one(mut bytes: BytesMut) -> Frame {
    let mut frames = parse_all(&mut bytes);
    assert_eq!(frames.len(), 1, "{frames:?}");
    frames.pop().unwrap()
}

fn check_round_trip(frame: &Frame, split: u32) {
    let mut out = BytesMut::new();
    match frame {
        Frame::Data {
            stream,
            end_stream,
            payload,
            ..
        } => {
            encode_data(&mut out, *stream, payload, *end_stream);
            // Padding is not re-sent: flow control counts the payload only.
            let want = Frame::Data {
                stream: *stream,
                end_stream: *end_stream,
                payload: payload.clone(),
                flow_len: payload.len() as u32,
            };
            assert_eq!(parse_one(out), want);
        }
        Frame::Headers {
            stream,
            end_stream,
            fragment,
            ..
        } => {
            // Our writer sends whole blocks without priority or padding,
            // cut at `split` into HEADERS + CONTINUATIONs.
            let mark = begin_headers(&mut out);
            out.extend_from_slice(fragment);
            finish_headers(&mut out, mark, *stream, *end_stream, split);
            let frames = parse_all(&mut out);
            let mut joined = Vec::new();
            for (i, f) in frames.iter().enumerate() {
                let last = i + 1 == frames.len();
                match (i, f) {
                    (
                        0,
                        Frame::Headers {
                            stream: s,
                            end_stream: e,
                            end_headers,
                            priority: None,
                            fragment,
                        },
                    ) => {
                        assert_eq!((*s, *e, *end_headers), (*stream, *end_stream, last));
                        joined.extend_from_slice(fragment);
                    }
                    (
                        1..,
                        Frame::Continuation {
                            stream: s,
                            end_headers,
                            fragment,
                        },
                    ) => {
                        assert_eq!((*s, *end_headers), (*stream, last));
                        assert!(!fragment.is_empty(), "empty CONTINUATION");
                        joined.extend_from_slice(fragment);
                    }
                    _ => panic!("unexpected frame {i} of a header block: {f:?}"),
                }
                assert!(
                    frame_len(f) <= split as usize,
                    "a header block frame over {split}"
                );
            }
            assert_eq!(&joined[..], &fragment[..]);
        }
        Frame::RstStream { stream, code } => {
            encode_rst_stream(&mut out, *stream, *code);
            assert_eq!(&parse_one(out), frame);
        }
        Frame::Settings(s) => {
            encode_settings(&mut out, s);
            assert_eq!(&parse_one(out), frame);
        }
        Frame::SettingsAck => {
            encode_settings_ack(&mut out);
            assert_eq!(&parse_one(out), frame);
        }
        Frame::Ping { ack, payload } => {
            encode_ping(&mut out, *ack, *payload);
            assert_eq!(&parse_one(out), frame);
        }
        Frame::GoAway {
            last_stream,
            code,
            debug,
        } => {
            encode_goaway(&mut out, *last_stream, *code, debug);
            assert_eq!(&parse_one(out), frame);
        }
        Frame::WindowUpdate { stream, increment } => {
            encode_window_update(&mut out, *stream, *increment);
            assert_eq!(&parse_one(out), frame);
        }
        // No encoder: we never send these.
        Frame::Priority { .. }
        | Frame::PushPromise { .. }
        | Frame::Continuation { .. }
        | Frame::Unknown { .. } => {}
    }
}

/// The payload length a parsed header block frame had on the wire (no
/// padding or priority: ours never carry any).
fn frame_len(f: &Frame) -> usize {
    match f {
        Frame::Headers { fragment, .. } | Frame::Continuation { fragment, .. } => fragment.len(),
        _ => 0,
    }
}
