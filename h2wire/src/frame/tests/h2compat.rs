//! Wire compatibility with the `h2` crate: frames h2 writes parse with ours
//! to the same values, and ours load with h2's parsers where it exposes
//! them. h2 keeps DATA's loader and encoder crate-private, so DATA is
//! checked through h2's frame header alone.

use bytes::BufMut;
use h2::frame::{
    self as h2f, GoAway, Head, Headers, Kind, Ping, Pseudo, PushPromise, Reason, Reset,
    StreamDependency, StreamId, WindowUpdate,
};
use http::{HeaderMap, HeaderValue, StatusCode};

use super::*;
use crate::frame::{
    begin_headers, encode_data, encode_goaway, encode_ping, encode_rst_stream, encode_settings,
    encode_settings_ack, encode_window_update, finish_headers, flags, kind, Priority, Settings,
    HEADER_LEN,
};

/// Splits our encoding of one frame into h2's view of its header and the
/// payload.
fn h2_view(buf: &BytesMut) -> (Head, &[u8]) {
    assert!(buf.len() >= HEADER_LEN);
    (Head::parse(&buf[..HEADER_LEN]), &buf[HEADER_LEN..])
}

fn all_settings() -> Settings {
    Settings {
        header_table_size: Some(8192),
        enable_push: Some(false),
        max_concurrent_streams: Some(250),
        initial_window_size: Some(1 << 20),
        max_frame_size: Some(1 << 20),
        max_header_list_size: Some(16 << 10),
        enable_connect_protocol: Some(true),
    }
}

#[test]
fn h2_settings_parse_with_ours() {
    let mut theirs = h2f::Settings::default();
    theirs.set_header_table_size(Some(8192));
    theirs.set_enable_push(false);
    theirs.set_max_concurrent_streams(Some(250));
    theirs.set_initial_window_size(Some(1 << 20));
    theirs.set_max_frame_size(Some(1 << 20));
    theirs.set_max_header_list_size(Some(16 << 10));
    theirs.set_enable_connect_protocol(Some(1));
    let mut buf = BytesMut::new();
    theirs.encode(&mut buf);
    assert_eq!(parse_one(buf).unwrap(), Frame::Settings(all_settings()));

    let mut buf = BytesMut::new();
    h2f::Settings::ack().encode(&mut buf);
    assert_eq!(parse_one(buf).unwrap(), Frame::SettingsAck);
}

#[test]
fn our_settings_load_with_h2() {
    let mut buf = BytesMut::new();
    encode_settings(&mut buf, &all_settings());
    let (head, payload) = h2_view(&buf);
    assert_eq!(head.kind(), Kind::Settings);
    let s = h2f::Settings::load(head, payload).unwrap();
    assert!(!s.is_ack());
    assert_eq!(s.header_table_size(), Some(8192));
    assert_eq!(s.is_push_enabled(), Some(false));
    assert_eq!(s.max_concurrent_streams(), Some(250));
    assert_eq!(s.initial_window_size(), Some(1 << 20));
    assert_eq!(s.max_frame_size(), Some(1 << 20));
    assert_eq!(s.max_header_list_size(), Some(16 << 10));
    assert_eq!(s.is_extended_connect_protocol_enabled(), Some(true));

    // And byte for byte what h2 writes for the same values.
    let mut theirs = BytesMut::new();
    s.encode(&mut theirs);
    assert_eq!(buf, theirs);

    let mut buf = BytesMut::new();
    encode_settings_ack(&mut buf);
    let (head, payload) = h2_view(&buf);
    assert!(h2f::Settings::load(head, payload).unwrap().is_ack());
}

#[test]
fn ping_is_compatible_both_ways() {
    for ack in [false, true] {
        let payload = Ping::USER;
        let theirs = if ack {
            Ping::pong(payload)
        } else {
            Ping::new(payload)
        };
        let mut buf = BytesMut::new();
        theirs.encode(&mut buf);
        assert_eq!(parse_one(buf).unwrap(), Frame::Ping { ack, payload });

        let mut buf = BytesMut::new();
        encode_ping(&mut buf, ack, payload);
        let (head, bytes) = h2_view(&buf);
        assert_eq!(head.kind(), Kind::Ping);
        assert_eq!(Ping::load(head, bytes).unwrap(), theirs);
    }
}

#[test]
fn goaway_is_compatible_both_ways() {
    for debug in [&b""[..], b"shutting down"] {
        let theirs = GoAway::with_debug_data(
            StreamId::from(41),
            Reason::ENHANCE_YOUR_CALM,
            Bytes::copy_from_slice(debug),
        );
        let mut buf = BytesMut::new();
        theirs.encode(&mut buf);
        assert_eq!(
            parse_one(buf).unwrap(),
            Frame::GoAway {
                last_stream: 41,
                code: ErrorCode::ENHANCE_YOUR_CALM,
                debug: Bytes::copy_from_slice(debug),
            }
        );

        let mut buf = BytesMut::new();
        encode_goaway(&mut buf, 41, ErrorCode::ENHANCE_YOUR_CALM, debug);
        let (head, bytes) = h2_view(&buf);
        assert_eq!(head.kind(), Kind::GoAway);
        let loaded = GoAway::load(head, bytes).unwrap();
        assert_eq!(loaded.last_stream_id(), StreamId::from(41));
        assert_eq!(loaded.reason(), Reason::ENHANCE_YOUR_CALM);
        assert_eq!(&loaded.debug_data()[..], debug);
    }
}

#[test]
fn rst_stream_is_compatible_both_ways() {
    for code in [0x8, 0x1_0000] {
        let theirs = Reset::new(StreamId::from(9), Reason::from(code));
        let mut buf = BytesMut::new();
        theirs.encode(&mut buf);
        assert_eq!(
            parse_one(buf).unwrap(),
            Frame::RstStream {
                stream: 9,
                code: ErrorCode(code),
            }
        );

        let mut buf = BytesMut::new();
        encode_rst_stream(&mut buf, 9, ErrorCode(code));
        let (head, bytes) = h2_view(&buf);
        assert_eq!(head.kind(), Kind::Reset);
        assert_eq!(Reset::load(head, bytes).unwrap(), theirs);
    }
}

#[test]
fn window_update_is_compatible_both_ways() {
    for (stream, increment) in [(0, 1), (0, (1 << 31) - 1), (3, 65_535)] {
        let theirs = WindowUpdate::new(StreamId::from(stream), increment);
        let mut buf = BytesMut::new();
        theirs.encode(&mut buf);
        assert_eq!(
            parse_one(buf).unwrap(),
            Frame::WindowUpdate { stream, increment }
        );

        let mut buf = BytesMut::new();
        encode_window_update(&mut buf, stream, increment);
        let (head, bytes) = h2_view(&buf);
        assert_eq!(head.kind(), Kind::WindowUpdate);
        assert_eq!(WindowUpdate::load(head, bytes).unwrap(), theirs);
    }
}

#[test]
fn data_headers_are_compatible_both_ways() {
    for end_stream in [false, true] {
        let flag = if end_stream { flags::END_STREAM } else { 0 };
        let mut buf = BytesMut::new();
        Head::new(Kind::Data, flag, StreamId::from(5)).encode(4, &mut buf);
        buf.put_slice(b"body");
        assert_eq!(
            parse_one(buf).unwrap(),
            Frame::Data {
                stream: 5,
                end_stream,
                payload: b(b"body"),
                flow_len: 4,
            }
        );

        let mut buf = BytesMut::new();
        encode_data(&mut buf, 5, b"body", end_stream);
        let (head, payload) = h2_view(&buf);
        assert_eq!(head, Head::new(Kind::Data, flag, StreamId::from(5)));
        assert_eq!(payload, b"body");
    }
}

/// A response whose header block is `size`-ish bytes, so it can be forced
/// over a frame.
fn response_headers(size: usize) -> HeaderMap {
    let mut fields = HeaderMap::new();
    for i in 0..size / 1000 + 1 {
        // Varied text so HPACK's Huffman code cannot shrink it much.
        let value: String = (0..1000)
            .map(|j| (b'!' + ((i * 7 + j * 13) % 90) as u8) as char)
            .collect();
        fields.append(
            http::header::HeaderName::from_bytes(format!("x-filler-{i}").as_bytes()).unwrap(),
            HeaderValue::from_str(&value).unwrap(),
        );
    }
    fields
}

/// h2's encoding of a HEADERS frame and its CONTINUATIONs, as its codec
/// writes them (each frame limited to `max` payload bytes).
fn h2_headers(fields: HeaderMap, end_stream: bool, max: usize) -> BytesMut {
    let mut encoder = h2::hpack::Encoder::new(4096, 0);
    let mut headers = Headers::new(StreamId::from(1), Pseudo::response(StatusCode::OK), fields);
    headers.set_end_headers();
    if end_stream {
        headers.set_end_stream();
    }
    let mut buf = BytesMut::new();
    let mut next = headers.encode(&mut encoder, &mut (&mut buf).limit(max + HEADER_LEN));
    while let Some(continuation) = next {
        let mut chunk = BytesMut::new();
        next = continuation.encode(&mut (&mut chunk).limit(max + HEADER_LEN));
        buf.unsplit(chunk);
    }
    buf
}

#[test]
fn h2_header_blocks_parse_with_ours_and_split_the_same_way() {
    for (size, end_stream) in [(100, true), (40_000, false), (40_000, true)] {
        let wire = h2_headers(response_headers(size), end_stream, 16_384);
        let mut rest = wire.clone();
        let mut block = Vec::new();
        let mut frames = 0;
        while let Some(frame) = decode_frame(&mut rest, 16_384).unwrap() {
            let (fragment, end_headers) = match frame {
                Frame::Headers {
                    stream: 1,
                    end_stream: es,
                    end_headers,
                    priority: None,
                    fragment,
                } if frames == 0 => {
                    assert_eq!(es, end_stream);
                    (fragment, end_headers)
                }
                Frame::Continuation {
                    stream: 1,
                    end_headers,
                    fragment,
                } if frames > 0 => (fragment, end_headers),
                other => panic!("frame {frames}: {other:?}"),
            };
            frames += 1;
            block.extend_from_slice(&fragment);
            assert_eq!(end_headers, rest.is_empty());
        }
        assert!(rest.is_empty());
        assert_eq!(frames, if size > 16_384 { 3 } else { 1 });

        // The same block through begin/finish_headers: the same bytes.
        let mut ours = BytesMut::new();
        let mark = begin_headers(&mut ours);
        ours.extend_from_slice(&block);
        finish_headers(&mut ours, mark, 1, end_stream, 16_384);
        assert_eq!(ours, wire);
    }
}

#[test]
fn our_header_blocks_load_and_decode_with_h2() {
    let fields = response_headers(40_000);
    // h2's HPACK produces the block; we frame it, h2 loads the frames.
    let mut block = BytesMut::new();
    let mut encoder = h2::hpack::Encoder::new(4096, 0);
    encoder.encode(
        fields.iter().map(|(n, v)| h2::hpack::Header::Field {
            name: Some(n.clone()),
            value: v.clone(),
        }),
        &mut block,
    );
    let mut buf = BytesMut::new();
    let mark = begin_headers(&mut buf);
    buf.extend_from_slice(&block);
    finish_headers(&mut buf, mark, 7, true, 16_384);

    let head = Head::parse(&buf[..HEADER_LEN]);
    assert_eq!(head.kind(), Kind::Headers);
    let first = buf.split_to(HEADER_LEN + 16_384).split_off(HEADER_LEN);
    let (mut headers, mut joined) = Headers::load(head, first).unwrap();
    assert_eq!(headers.stream_id(), StreamId::from(7));
    assert!(headers.is_end_stream());
    assert!(!headers.is_end_headers());
    while !buf.is_empty() {
        let head = Head::parse(&buf[..HEADER_LEN]);
        assert_eq!(head.kind(), Kind::Continuation);
        assert_eq!(head.stream_id(), StreamId::from(7));
        let len = u32::from_be_bytes([0, buf[0], buf[1], buf[2]]) as usize;
        let frame = buf.split_to(HEADER_LEN + len);
        joined.extend_from_slice(&frame[HEADER_LEN..]);
    }
    let mut decoder = h2::hpack::Decoder::new(4096);
    headers
        .load_hpack(&mut joined, 1 << 20, &mut decoder)
        .unwrap();
    assert_eq!(headers.fields(), &fields);
}

#[test]
fn padded_and_prioritized_headers_load_the_same_in_h2() {
    let payload = b"\x03\x80\0\0\x01\xff\x82\x86\0\0\0";
    let buf = raw(
        kind::HEADERS,
        flags::PADDED | flags::PRIORITY | flags::END_HEADERS,
        3,
        payload,
    );
    let Frame::Headers {
        priority, fragment, ..
    } = parse_one(buf.clone()).unwrap()
    else {
        panic!("not HEADERS")
    };
    assert_eq!(
        priority,
        Some(Priority {
            dependency: 1,
            exclusive: true,
            weight: 255,
        })
    );

    let (head, bytes) = h2_view(&buf);
    let (headers, theirs) = Headers::load(head, BytesMut::from(bytes)).unwrap();
    assert_eq!(theirs, fragment);
    assert!(headers.is_end_headers());
    // h2 exposes the dependency only through Debug.
    let dep = format!("{:?}", StreamDependency::new(StreamId::from(1), 255, true));
    assert!(format!("{headers:?}").contains(&dep), "{headers:?}");
}

#[test]
fn padded_push_promise_loads_the_same_in_h2() {
    let buf = raw(
        kind::PUSH_PROMISE,
        flags::PADDED | flags::END_HEADERS,
        1,
        b"\x02\x80\0\0\x04\x82\x87\0\0",
    );
    assert_eq!(
        parse_one(buf.clone()).unwrap(),
        Frame::PushPromise {
            stream: 1,
            promised: 4,
            end_headers: true,
            fragment: b(b"\x82\x87"),
        }
    );
    let (head, bytes) = h2_view(&buf);
    let (pp, fragment) = PushPromise::load(head, BytesMut::from(bytes)).unwrap();
    assert_eq!(pp.promised_id(), StreamId::from(4));
    assert_eq!(&fragment[..], b"\x82\x87");
}

#[test]
fn priority_self_dependency_is_rejected_by_both() {
    let ok = raw(kind::PRIORITY, 0, 3, &[0, 0, 0, 1, 9]);
    let (head, bytes) = h2_view(&ok);
    assert!(h2f::Priority::load(head, bytes).is_ok());
    assert!(parse_one(ok.clone()).is_ok());

    let bad = raw(kind::PRIORITY, 0, 3, &[0, 0, 0, 3, 9]);
    let (head, bytes) = h2_view(&bad);
    assert!(h2f::Priority::load(head, bytes).is_err());
    assert_stream(parse_one(bad.clone()), 3, ErrorCode::PROTOCOL_ERROR);
}
