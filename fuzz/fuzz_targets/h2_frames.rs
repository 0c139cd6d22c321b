//! Arbitrary bytes through h2wire's frame reader never panic, every frame that parses and has an encoder re-encodes to bytes that parse to the same frame, and h2's frame loaders accept and refuse the same frames (to the same values).
//!
//! The loaders of h2 check less than h2wire's parser in two places, where
//! h2 leaves the check to its connection code, and the target allows for
//! them: RST_STREAM and PRIORITY on stream 0 (a connection error, §6.4,
//! §6.3). And one more: h2 refuses a PUSH_PROMISE whose header block
//! fragment is empty, which §6.6 allows on the frame (h2 is stricter).
#![no_main]

use bytes::BytesMut;
use h2::frame as h2f;
use h2wire::frame::{
    begin_headers, decode_frame, encode_data, encode_goaway, encode_ping, encode_rst_stream,
    encode_settings, encode_settings_ack, encode_window_update, finish_headers, Frame, FrameHeader,
    Settings, DEFAULT_MAX_FRAME_SIZE, HEADER_LEN, MAX_MAX_FRAME_SIZE,
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
        // The whole frame as h2 would read it, if it is there.
        let raw = buf.first_chunk::<HEADER_LEN>().and_then(|h| {
            let len = FrameHeader::parse(h).len;
            let end = HEADER_LEN + len as usize;
            (len <= max_frame_size && buf.len() >= end).then(|| buf[..end].to_vec())
        });
        let result = decode_frame(&mut buf, max_frame_size);
        if let Some(raw) = &raw {
            same_as_h2(raw, &result);
        }
        match result {
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

/// h2's loader for the frame's type, where h2 exposes one, agrees with
/// what h2wire made of `raw`.
fn same_as_h2(raw: &[u8], ours: &Result<Option<Frame>, FrameError>) {
    let head = h2f::Head::parse(&raw[..HEADER_LEN]);
    let payload = &raw[HEADER_LEN..];
    let ours = match ours {
        Ok(Some(f)) => Ok(f),
        Ok(None) => panic!("a whole frame is there: {raw:?}"),
        Err(e) => Err(e),
    };
    let stream = u32::from(head.stream_id());
    match head.kind() {
        h2f::Kind::Settings => match (ours, h2f::Settings::load(head, payload)) {
            (Ok(Frame::SettingsAck), Ok(t)) => assert!(t.is_ack()),
            (Ok(Frame::Settings(s)), Ok(t)) => {
                assert!(!t.is_ack());
                let theirs = Settings {
                    header_table_size: t.header_table_size(),
                    enable_push: t.is_push_enabled(),
                    max_concurrent_streams: t.max_concurrent_streams(),
                    initial_window_size: t.initial_window_size(),
                    max_frame_size: t.max_frame_size(),
                    max_header_list_size: t.max_header_list_size(),
                    enable_connect_protocol: t.is_extended_connect_protocol_enabled(),
                };
                assert_eq!(s, &theirs);
            }
            (Err(_), Err(_)) => {}
            (o, t) => panic!("SETTINGS: h2wire {o:?}, h2 {t:?}"),
        },
        h2f::Kind::Ping => match (ours, h2f::Ping::load(head, payload)) {
            (Ok(Frame::Ping { ack, payload }), Ok(t)) => {
                assert_eq!((*ack, payload), (t.is_ack(), t.payload()));
            }
            (Err(_), Err(_)) => {}
            (o, t) => panic!("PING: h2wire {o:?}, h2 {t:?}"),
        },
        h2f::Kind::GoAway => match (ours, h2f::GoAway::load(head, payload)) {
            (
                Ok(Frame::GoAway {
                    last_stream,
                    code,
                    debug,
                }),
                Ok(t),
            ) => {
                assert_eq!(*last_stream, u32::from(t.last_stream_id()));
                assert_eq!(code.0, u32::from(t.reason()));
                assert_eq!(&debug[..], &t.debug_data()[..]);
            }
            (Err(_), Err(_)) => {}
            (o, t) => panic!("GOAWAY: h2wire {o:?}, h2 {t:?}"),
        },
        h2f::Kind::WindowUpdate => match (ours, h2f::WindowUpdate::load(head, payload)) {
            (Ok(Frame::WindowUpdate { increment, .. }), Ok(t)) => {
                assert_eq!(*increment, t.size_increment());
            }
            (Err(_), Err(_)) => {}
            (o, t) => panic!("WINDOW_UPDATE: h2wire {o:?}, h2 {t:?}"),
        },
        h2f::Kind::Reset => match (ours, h2f::Reset::load(head, payload)) {
            (Ok(Frame::RstStream { code, .. }), Ok(t)) => assert_eq!(code.0, u32::from(t.reason())),
            (Err(_), Err(_)) => {}
            // h2 leaves stream 0 to its connection code.
            (Err(_), Ok(_)) if stream == 0 => {}
            (o, t) => panic!("RST_STREAM: h2wire {o:?}, h2 {t:?}"),
        },
        h2f::Kind::Priority => match (ours, h2f::Priority::load(head, payload)) {
            (Ok(Frame::Priority { .. }), Ok(_)) | (Err(_), Err(_)) => {}
            (Err(_), Ok(_)) if stream == 0 => {}
            (o, t) => panic!("PRIORITY: h2wire {o:?}, h2 {t:?}"),
        },
        h2f::Kind::Headers => match (ours, h2f::Headers::load(head, BytesMut::from(payload))) {
            (Ok(Frame::Headers { fragment, .. }), Ok((_, theirs))) => {
                assert_eq!(&fragment[..], &theirs[..]);
            }
            (Err(_), Err(_)) => {}
            (o, t) => panic!("HEADERS: h2wire {o:?}, h2 {:?}", t.map(|(_, b)| b)),
        },
        h2f::Kind::PushPromise => {
            match (ours, h2f::PushPromise::load(head, BytesMut::from(payload))) {
                (
                    Ok(Frame::PushPromise {
                        promised, fragment, ..
                    }),
                    Ok((t, theirs)),
                ) => {
                    assert_eq!(*promised, u32::from(t.promised_id()));
                    assert_eq!(&fragment[..], &theirs[..]);
                }
                (Err(_), Err(_)) => {}
                // h2 wants at least one byte of header block.
                (Ok(Frame::PushPromise { fragment, .. }), Err(_)) if fragment.is_empty() => {}
                (o, t) => panic!("PUSH_PROMISE: h2wire {o:?}, h2 {:?}", t.map(|(_, b)| b)),
            }
        }
        _ => {}
    }
}

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
