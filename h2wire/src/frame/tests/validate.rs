//! Every single-frame rule of RFC 9113 §6, with the error it must give.

use super::*;
use crate::frame::{flags, kind, Priority, Settings};

const PROTOCOL: ErrorCode = ErrorCode::PROTOCOL_ERROR;
const FRAME_SIZE: ErrorCode = ErrorCode::FRAME_SIZE_ERROR;

#[test]
fn stream_frames_on_stream_zero_are_connection_protocol_errors() {
    let cases: [(u8, &[u8]); 6] = [
        (kind::DATA, b"x"),
        (kind::HEADERS, b"x"),
        (kind::PRIORITY, &[0, 0, 0, 1, 16]),
        (kind::RST_STREAM, &[0, 0, 0, 8]),
        (kind::PUSH_PROMISE, &[0, 0, 0, 2]),
        (kind::CONTINUATION, b"x"),
    ];
    for (kind, payload) in cases {
        assert_conn(parse_raw(kind, 0, 0, payload), PROTOCOL);
        assert!(parse_raw(kind, 0, 3, payload).is_ok(), "kind {kind}");
    }
}

#[test]
fn connection_frames_on_a_stream_are_connection_protocol_errors() {
    let cases: [(u8, &[u8]); 3] = [
        (kind::SETTINGS, &[]),
        (kind::PING, &[0; 8]),
        (kind::GOAWAY, &[0; 8]),
    ];
    for (kind, payload) in cases {
        assert_conn(parse_raw(kind, 0, 1, payload), PROTOCOL);
        assert!(parse_raw(kind, 0, 0, payload).is_ok(), "kind {kind}");
    }
    // The ACK form is checked the same way.
    assert_conn(parse_raw(kind::SETTINGS, flags::ACK, 1, &[]), PROTOCOL);
}

#[test]
fn padded_flag_without_pad_length_is_a_frame_size_error() {
    for kind in [kind::DATA, kind::HEADERS, kind::PUSH_PROMISE] {
        assert_conn(parse_raw(kind, flags::PADDED, 1, &[]), FRAME_SIZE);
    }
}

#[test]
fn headers_too_short_for_priority_is_a_frame_size_error() {
    assert_conn(
        parse_raw(kind::HEADERS, flags::PRIORITY, 1, &[0, 0, 0, 3]),
        FRAME_SIZE,
    );
    // Pad length plus 4 bytes: the priority is still one byte short.
    assert_conn(
        parse_raw(
            kind::HEADERS,
            flags::PRIORITY | flags::PADDED,
            1,
            &[0, 0, 0, 0, 3],
        ),
        FRAME_SIZE,
    );
    // Exactly the priority, no fragment: legal.
    assert!(parse_raw(kind::HEADERS, flags::PRIORITY, 1, &[0, 0, 0, 3, 15]).is_ok());
}

#[test]
fn push_promise_too_short_for_promised_stream_is_a_frame_size_error() {
    assert_conn(parse_raw(kind::PUSH_PROMISE, 0, 1, &[0, 0, 2]), FRAME_SIZE);
    assert_conn(
        parse_raw(kind::PUSH_PROMISE, flags::PADDED, 1, &[0, 0, 0, 2]),
        FRAME_SIZE,
    );
}

#[test]
fn data_padding_may_fill_the_payload_but_not_exceed_it() {
    // Pad length 3 and 3 bytes of padding: no data, all of it flow-controlled.
    let frame = parse_raw(kind::DATA, flags::PADDED, 1, &[3, 0, 0, 0]).unwrap();
    assert_eq!(
        frame,
        Frame::Data {
            stream: 1,
            end_stream: false,
            payload: Bytes::new(),
            flow_len: 4,
        }
    );
    // §6.1: padding as long as the frame payload (pad length byte included).
    assert_conn(
        parse_raw(kind::DATA, flags::PADDED, 1, &[4, 0, 0, 0]),
        PROTOCOL,
    );
    assert_conn(parse_raw(kind::DATA, flags::PADDED, 1, &[255]), PROTOCOL);
}

#[test]
fn headers_padding_cannot_reach_into_the_priority() {
    // pad length, 5 priority bytes, 2 fragment bytes, 2 padding bytes
    let ok = [2, 0, 0, 0, 0, 7, b'a', b'b', 0, 0];
    let frame = parse_raw(kind::HEADERS, flags::PADDED | flags::PRIORITY, 1, &ok).unwrap();
    let Frame::Headers { fragment, .. } = frame else {
        panic!("{frame:?}")
    };
    assert_eq!(fragment, b(b"ab"));
    // Padding of 4 fits in what follows the pad length (9 bytes) but not in
    // what follows the priority (4 bytes): the priority counts.
    let mut bad = ok;
    bad[0] = 5;
    assert_conn(
        parse_raw(kind::HEADERS, flags::PADDED | flags::PRIORITY, 1, &bad),
        PROTOCOL,
    );
    // Without PRIORITY the same rule applies to the pad length alone.
    assert_conn(
        parse_raw(kind::HEADERS, flags::PADDED, 1, &[3, b'a', 0]),
        PROTOCOL,
    );
}

#[test]
fn push_promise_padding_cannot_reach_into_the_promised_stream() {
    let frame = parse_raw(kind::PUSH_PROMISE, flags::PADDED, 1, &[1, 0, 0, 0, 2, 0]).unwrap();
    assert_eq!(
        frame,
        Frame::PushPromise {
            stream: 1,
            promised: 2,
            end_headers: false,
            fragment: Bytes::new(),
        }
    );
    assert_conn(
        parse_raw(kind::PUSH_PROMISE, flags::PADDED, 1, &[2, 0, 0, 0, 2, 0]),
        PROTOCOL,
    );
}

#[test]
fn depending_on_itself_is_a_stream_protocol_error() {
    assert_stream(
        parse_raw(kind::HEADERS, flags::PRIORITY, 5, &[0, 0, 0, 5, 15, b'x']),
        5,
        PROTOCOL,
    );
    assert_stream(
        parse_raw(kind::PRIORITY, 0, 7, &[0, 0, 0, 7, 15]),
        7,
        PROTOCOL,
    );
    // The exclusive bit is not part of the stream id.
    assert_stream(
        parse_raw(kind::PRIORITY, 0, 7, &[0x80, 0, 0, 7, 15]),
        7,
        PROTOCOL,
    );
    assert_eq!(
        parse_raw(kind::PRIORITY, 0, 7, &[0x80, 0, 0, 5, 15]).unwrap(),
        Frame::Priority {
            stream: 7,
            priority: Priority {
                dependency: 5,
                exclusive: true,
                weight: 15,
            },
        }
    );
}

#[test]
fn priority_of_wrong_length_is_a_stream_frame_size_error() {
    for len in [0, 4, 6] {
        assert_stream(
            parse_raw(kind::PRIORITY, 0, 9, &[0; 6][..len]),
            9,
            FRAME_SIZE,
        );
    }
}

#[test]
fn fixed_size_frames_of_wrong_length_are_connection_frame_size_errors() {
    for (kind, stream, good) in [
        (kind::RST_STREAM, 1, 4),
        (kind::PING, 0, 8),
        (kind::WINDOW_UPDATE, 0, 4),
        (kind::WINDOW_UPDATE, 1, 4),
    ] {
        for len in [0, good - 1, good + 1] {
            let payload = vec![1; len];
            assert_conn(parse_raw(kind, 0, stream, &payload), FRAME_SIZE);
        }
        assert!(parse_raw(kind, 0, stream, &vec![1; good]).is_ok());
    }
}

#[test]
fn goaway_shorter_than_8_is_a_frame_size_error() {
    assert_conn(parse_raw(kind::GOAWAY, 0, 0, &[0; 7]), FRAME_SIZE);
    assert_eq!(
        parse_raw(kind::GOAWAY, 0, 0, &[0x80, 0, 0, 3, 0, 0, 0, 0xb]).unwrap(),
        Frame::GoAway {
            last_stream: 3,
            code: ErrorCode::ENHANCE_YOUR_CALM,
            debug: Bytes::new(),
        }
    );
}

#[test]
fn settings_ack_with_payload_is_a_frame_size_error() {
    assert_conn(
        parse_raw(kind::SETTINGS, flags::ACK, 0, &[0, 1, 0, 0, 0, 0]),
        FRAME_SIZE,
    );
    assert_eq!(
        parse_raw(kind::SETTINGS, flags::ACK, 0, &[]).unwrap(),
        Frame::SettingsAck
    );
}

#[test]
fn settings_length_not_a_multiple_of_6_is_a_frame_size_error() {
    for len in [1, 5, 7, 11] {
        assert_conn(parse_raw(kind::SETTINGS, 0, 0, &[0; 12][..len]), FRAME_SIZE);
    }
}

fn setting(id: u16, value: u32) -> Result<Frame, FrameError> {
    let mut p = id.to_be_bytes().to_vec();
    p.extend_from_slice(&value.to_be_bytes());
    parse_raw(kind::SETTINGS, 0, 0, &p)
}

fn settings_ok(id: u16, value: u32) -> Settings {
    match setting(id, value) {
        Ok(Frame::Settings(s)) => s,
        other => panic!("setting {id}={value}: {other:?}"),
    }
}

#[test]
fn settings_values_are_range_checked() {
    assert_conn(setting(0x2, 2), PROTOCOL);
    assert_eq!(settings_ok(0x2, 0).enable_push, Some(false));
    assert_eq!(settings_ok(0x2, 1).enable_push, Some(true));

    assert_conn(setting(0x4, 1 << 31), ErrorCode::FLOW_CONTROL_ERROR);
    assert_conn(setting(0x4, u32::MAX), ErrorCode::FLOW_CONTROL_ERROR);
    assert_eq!(
        settings_ok(0x4, (1 << 31) - 1).initial_window_size,
        Some((1 << 31) - 1)
    );

    assert_conn(setting(0x5, 16_383), PROTOCOL);
    assert_conn(setting(0x5, 1 << 24), PROTOCOL);
    assert_eq!(settings_ok(0x5, 16_384).max_frame_size, Some(16_384));
    assert_eq!(
        settings_ok(0x5, (1 << 24) - 1).max_frame_size,
        Some((1 << 24) - 1)
    );

    assert_conn(setting(0x8, 2), PROTOCOL);
    assert_eq!(settings_ok(0x8, 1).enable_connect_protocol, Some(true));
    assert_eq!(settings_ok(0x8, 0).enable_connect_protocol, Some(false));

    // No limits on the others.
    assert_eq!(settings_ok(0x1, u32::MAX).header_table_size, Some(u32::MAX));
    assert_eq!(settings_ok(0x3, 0).max_concurrent_streams, Some(0));
    assert_eq!(
        settings_ok(0x6, u32::MAX).max_header_list_size,
        Some(u32::MAX)
    );
}

#[test]
fn settings_ignore_unknown_ids_and_keep_the_last_repeated_value() {
    let payload = [
        0x00, 0x03, 0, 0, 0, 10, // MAX_CONCURRENT_STREAMS 10
        0x00, 0x07, 0xff, 0xff, 0xff, 0xff, // unknown 7 (was never defined)
        0x12, 0x34, 0, 0, 0, 1, // unknown
        0x00, 0x03, 0, 0, 0, 20, // MAX_CONCURRENT_STREAMS again: wins
        0x00, 0x00, 0, 0, 0, 9, // id 0 is not a setting either
    ];
    assert_eq!(
        parse_raw(kind::SETTINGS, 0, 0, &payload).unwrap(),
        Frame::Settings(Settings {
            max_concurrent_streams: Some(20),
            ..Settings::default()
        })
    );
}

#[test]
fn zero_window_increment_is_a_stream_or_connection_error_by_stream() {
    assert_stream(
        parse_raw(kind::WINDOW_UPDATE, 0, 5, &[0, 0, 0, 0]),
        5,
        PROTOCOL,
    );
    assert_conn(
        parse_raw(kind::WINDOW_UPDATE, 0, 0, &[0, 0, 0, 0]),
        PROTOCOL,
    );
}

#[test]
fn window_increment_reserved_bit_is_ignored() {
    // Only the reserved bit set: the increment is still zero.
    assert_stream(
        parse_raw(kind::WINDOW_UPDATE, 0, 5, &[0x80, 0, 0, 0]),
        5,
        PROTOCOL,
    );
    assert_eq!(
        parse_raw(kind::WINDOW_UPDATE, 0, 5, &[0xff, 0xff, 0xff, 0xff]).unwrap(),
        Frame::WindowUpdate {
            stream: 5,
            increment: (1 << 31) - 1,
        }
    );
}

#[test]
fn unknown_frame_types_are_returned_not_rejected() {
    for kind in [0xa, 0x10, 0xff] {
        // Whatever the flags, stream or payload.
        assert_eq!(
            parse_raw(kind, 0xff, 0, b"anything").unwrap(),
            Frame::Unknown { kind, stream: 0 }
        );
        assert_eq!(
            parse_raw(kind, 0, 3, &[]).unwrap(),
            Frame::Unknown { kind, stream: 3 }
        );
    }
}

#[test]
fn unknown_flags_are_ignored() {
    // Every bit but END_STREAM and PADDED on DATA.
    assert_eq!(
        parse_raw(kind::DATA, !(flags::END_STREAM | flags::PADDED), 1, b"hi").unwrap(),
        Frame::Data {
            stream: 1,
            end_stream: false,
            payload: b(b"hi"),
            flow_len: 2,
        }
    );
    assert_eq!(
        parse_raw(kind::PING, !flags::ACK, 0, &[7; 8]).unwrap(),
        Frame::Ping {
            ack: false,
            payload: [7; 8],
        }
    );
    assert_eq!(
        parse_raw(kind::SETTINGS, !flags::ACK, 0, &[]).unwrap(),
        Frame::Settings(Settings::default())
    );
    assert_eq!(
        parse_raw(kind::CONTINUATION, !flags::END_HEADERS, 1, b"x").unwrap(),
        Frame::Continuation {
            stream: 1,
            end_headers: false,
            fragment: b(b"x"),
        }
    );
}
