//! What our encoders write decodes to the same values; hand-built frames
//! with the features we never send (padding, priority) decode too.

use super::*;
use crate::frame::{
    begin_headers, encode_data, encode_data_head, encode_goaway, encode_ping, encode_rst_stream,
    encode_settings, encode_settings_ack, encode_window_update, finish_headers, flags, kind,
    Priority, Settings, DEFAULT_MAX_FRAME_SIZE, HEADER_LEN,
};

fn all_settings() -> Settings {
    Settings {
        header_table_size: Some(4096),
        enable_push: Some(false),
        max_concurrent_streams: Some(100),
        initial_window_size: Some((1 << 31) - 1),
        max_frame_size: Some((1 << 24) - 1),
        max_header_list_size: Some(64 << 10),
        enable_connect_protocol: Some(true),
    }
}

#[test]
fn data_round_trips_with_and_without_end_stream() {
    for end_stream in [false, true] {
        for payload in [&b""[..], b"hello", &[0xab; 1000]] {
            let mut buf = BytesMut::new();
            encode_data(&mut buf, 1, payload, end_stream);
            assert_eq!(buf.len(), HEADER_LEN + payload.len());
            let expected = Frame::Data {
                stream: 1,
                end_stream,
                payload: Bytes::copy_from_slice(payload),
                flow_len: payload.len() as u32,
            };
            assert_eq!(parse_one(buf).unwrap(), expected);

            // Head only, payload appended as a vectored write would send it.
            let mut buf = BytesMut::new();
            encode_data_head(&mut buf, 1, payload.len() as u32, end_stream);
            assert_eq!(buf.len(), HEADER_LEN);
            buf.extend_from_slice(payload);
            assert_eq!(parse_one(buf).unwrap(), expected);
        }
    }
}

#[test]
fn settings_round_trip() {
    let some = Settings {
        initial_window_size: Some(0),
        enable_push: Some(true),
        ..Settings::default()
    };
    for s in [Settings::default(), all_settings(), some] {
        let mut buf = BytesMut::new();
        encode_settings(&mut buf, &s);
        assert_eq!(parse_one(buf).unwrap(), Frame::Settings(s));
    }
    let mut buf = BytesMut::new();
    encode_settings_ack(&mut buf);
    assert_eq!(&buf[..], &[0, 0, 0, kind::SETTINGS, flags::ACK, 0, 0, 0, 0]);
    assert_eq!(parse_one(buf).unwrap(), Frame::SettingsAck);
}

#[test]
fn settings_are_written_in_id_order() {
    let mut buf = BytesMut::new();
    encode_settings(
        &mut buf,
        &Settings {
            enable_connect_protocol: Some(true),
            header_table_size: Some(0),
            ..Settings::default()
        },
    );
    assert_eq!(
        &buf[..],
        &[0, 0, 12, 4, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 8, 0, 0, 0, 1]
    );
}

#[test]
fn ping_round_trips_with_and_without_ack() {
    for ack in [false, true] {
        let mut buf = BytesMut::new();
        encode_ping(&mut buf, ack, *b"12345678");
        assert_eq!(
            parse_one(buf).unwrap(),
            Frame::Ping {
                ack,
                payload: *b"12345678",
            }
        );
    }
}

#[test]
fn goaway_round_trips_with_and_without_debug_data() {
    for debug in [&b""[..], b"too many streams"] {
        let mut buf = BytesMut::new();
        encode_goaway(&mut buf, (1 << 31) - 1, ErrorCode(0x1234), debug);
        assert_eq!(
            parse_one(buf).unwrap(),
            Frame::GoAway {
                last_stream: (1 << 31) - 1,
                code: ErrorCode(0x1234),
                debug: Bytes::copy_from_slice(debug),
            }
        );
    }
}

#[test]
fn rst_stream_round_trips() {
    for code in [
        ErrorCode::NO_ERROR,
        ErrorCode::CANCEL,
        ErrorCode(0xdead_beef),
    ] {
        let mut buf = BytesMut::new();
        encode_rst_stream(&mut buf, 11, code);
        assert_eq!(
            parse_one(buf).unwrap(),
            Frame::RstStream { stream: 11, code }
        );
    }
}

#[test]
fn window_update_round_trips_on_connection_and_stream() {
    for (stream, increment) in [(0, 1), (0, (1 << 31) - 1), (7, 65_535)] {
        let mut buf = BytesMut::new();
        encode_window_update(&mut buf, stream, increment);
        assert_eq!(
            parse_one(buf).unwrap(),
            Frame::WindowUpdate { stream, increment }
        );
    }
}

#[test]
fn headers_round_trip_with_and_without_end_stream() {
    for end_stream in [false, true] {
        for block in [&b""[..], b"\x82\x86\x84"] {
            let mut buf = BytesMut::new();
            let mark = begin_headers(&mut buf);
            buf.extend_from_slice(block);
            finish_headers(&mut buf, mark, 3, end_stream, DEFAULT_MAX_FRAME_SIZE);
            assert_eq!(
                parse_one(buf).unwrap(),
                Frame::Headers {
                    stream: 3,
                    end_stream,
                    end_headers: true,
                    priority: None,
                    fragment: Bytes::copy_from_slice(block),
                }
            );
        }
    }
}

#[test]
fn padded_data_decodes_to_its_payload_and_counts_the_padding() {
    let frame = parse_raw(
        kind::DATA,
        flags::PADDED | flags::END_STREAM,
        1,
        b"\x04body\0\0\0\0",
    )
    .unwrap();
    assert_eq!(
        frame,
        Frame::Data {
            stream: 1,
            end_stream: true,
            payload: b(b"body"),
            flow_len: 9,
        }
    );
    // Padding of zero: just the pad length byte, still flow-controlled.
    let frame = parse_raw(kind::DATA, flags::PADDED, 1, b"\x00body").unwrap();
    assert_eq!(
        frame,
        Frame::Data {
            stream: 1,
            end_stream: false,
            payload: b(b"body"),
            flow_len: 5,
        }
    );
}

#[test]
fn padded_headers_decode_with_and_without_priority() {
    let frame = parse_raw(
        kind::HEADERS,
        flags::PADDED | flags::END_HEADERS,
        1,
        b"\x02\x82\x86\0\0",
    )
    .unwrap();
    assert_eq!(
        frame,
        Frame::Headers {
            stream: 1,
            end_stream: false,
            end_headers: true,
            priority: None,
            fragment: b(b"\x82\x86"),
        }
    );
    let frame = parse_raw(
        kind::HEADERS,
        flags::PADDED | flags::PRIORITY | flags::END_STREAM,
        3,
        b"\x03\x80\0\0\x01\xff\x82\0\0\0",
    )
    .unwrap();
    assert_eq!(
        frame,
        Frame::Headers {
            stream: 3,
            end_stream: true,
            end_headers: false,
            priority: Some(Priority {
                dependency: 1,
                exclusive: true,
                weight: 255,
            }),
            fragment: b(b"\x82"),
        }
    );
}

#[test]
fn headers_with_priority_decode() {
    let frame = parse_raw(
        kind::HEADERS,
        flags::PRIORITY | flags::END_HEADERS,
        5,
        b"\0\0\0\x03\x0f\x82",
    )
    .unwrap();
    assert_eq!(
        frame,
        Frame::Headers {
            stream: 5,
            end_stream: false,
            end_headers: true,
            priority: Some(Priority {
                dependency: 3,
                exclusive: false,
                weight: 15,
            }),
            fragment: b(b"\x82"),
        }
    );
}

#[test]
fn push_promise_and_continuation_decode() {
    let frame = parse_raw(
        kind::PUSH_PROMISE,
        flags::END_HEADERS,
        1,
        b"\x80\0\0\x02\x82",
    )
    .unwrap();
    assert_eq!(
        frame,
        Frame::PushPromise {
            stream: 1,
            promised: 2,
            end_headers: true,
            fragment: b(b"\x82"),
        }
    );
    let frame = parse_raw(kind::CONTINUATION, flags::END_HEADERS, 1, b"\x86").unwrap();
    assert_eq!(
        frame,
        Frame::Continuation {
            stream: 1,
            end_headers: true,
            fragment: b(b"\x86"),
        }
    );
}

#[test]
fn reserved_stream_bit_is_masked_on_parse_and_never_written() {
    let wire = [0, 0, 1, kind::DATA, 0, 0x80, 0, 0, 5];
    let head = FrameHeader::parse(&wire);
    assert_eq!(
        head,
        FrameHeader {
            len: 1,
            kind: kind::DATA,
            flags: 0,
            stream: 5,
        }
    );
    let mut buf = BytesMut::from(&wire[..]);
    buf.extend_from_slice(b"x");
    assert_eq!(
        parse_one(buf).unwrap(),
        Frame::Data {
            stream: 5,
            end_stream: false,
            payload: b(b"x"),
            flow_len: 1,
        }
    );

    let mut out = BytesMut::new();
    FrameHeader {
        stream: 0x8000_0005,
        ..head
    }
    .encode(&mut out);
    assert_eq!(&out[..], &[0, 0, 1, kind::DATA, 0, 0, 0, 0, 5]);
}

#[test]
fn frame_header_round_trips_all_fields() {
    let head = FrameHeader {
        len: MAX_MAX_FRAME_SIZE,
        kind: 0xfe,
        flags: 0xa5,
        stream: (1 << 31) - 1,
    };
    let bytes = head.to_bytes();
    assert_eq!(
        bytes,
        [0xff, 0xff, 0xff, 0xfe, 0xa5, 0x7f, 0xff, 0xff, 0xff]
    );
    assert_eq!(FrameHeader::parse(&bytes), head);
}
