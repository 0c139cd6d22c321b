//! Requests in, responses out: header blocks, request bodies, trailers, and the stream errors they can cause.

use super::*;
use crate::frame::{encode_rst_stream, flags, kind};

#[test]
fn get_request_gets_its_response() {
    let mut p = Peer::connected(ServerConfig::default());
    let req = [request("GET", "/index.html"), vec![("accept", "*/*")]].concat();
    p.headers(1, &req, true);
    p.flush().unwrap();
    let (stream, head, end) = expect_request(p.conn.poll_event());
    assert_eq!((stream, end), (1, true));
    assert_eq!(fields(&head), owned(&req));
    p.conn.recycle(head);
    assert!(p.conn.poll_event().is_none());

    let ct: (&[u8], &[u8]) = (b"content-type", b"text/plain");
    p.conn.send_headers(1, 200, [ct], false).unwrap();
    let mut body = Bytes::from_static(b"hello");
    assert_eq!(p.conn.send_data(1, &mut body, true), Ok(5));
    assert!(body.is_empty());
    assert_eq!(p.conn.open_streams(), 0);
    assert_eq!(
        p.read(),
        [
            Got::Headers {
                stream: 1,
                end_stream: false,
                fields: owned(&[(":status", "200"), ("content-type", "text/plain")]),
            },
            Got::Data {
                stream: 1,
                data: Bytes::from_static(b"hello"),
                end_stream: true
            },
        ]
    );
    // The stream is gone: further commands are refused.
    let mut more = Bytes::from_static(b"x");
    assert_eq!(
        p.conn.send_data(1, &mut more, true),
        Err(super::super::SendError::UnknownStream)
    );
}

#[test]
fn response_trailers_end_the_stream() {
    let mut p = Peer::connected(ServerConfig::default());
    p.get(1);
    p.flush().unwrap();
    p.events();
    let te: (&[u8], &[u8]) = (b"grpc-status", b"0");
    assert_eq!(
        p.conn.send_trailers(1, [te]),
        Err(super::super::SendError::NoHeaders)
    );
    p.conn.send_headers(1, 200, [], false).unwrap();
    assert_eq!(
        p.conn.send_headers(1, 200, [], false),
        Err(super::super::SendError::HeadersSent)
    );
    p.conn.send_trailers(1, [te]).unwrap();
    assert_eq!(p.conn.open_streams(), 0);
    let got = p.read();
    assert_eq!(
        got[1],
        Got::Headers {
            stream: 1,
            end_stream: true,
            fields: owned(&[("grpc-status", "0")]),
        }
    );
}

#[test]
fn post_body_in_three_frames_gives_window_back_at_half() {
    let mut p = Peer::connected(ServerConfig {
        connection_window: 65_535,
        ..ServerConfig::default()
    });
    p.headers(1, &request("POST", "/upload"), false);
    let chunk = [7u8; 16_000];
    for _ in 0..3 {
        p.data(1, &chunk, false);
    }
    p.data(1, b"", true);
    p.flush().unwrap();
    let (_, head, end) = expect_request(p.conn.poll_event());
    assert!(!end);
    p.conn.recycle(head);
    for _ in 0..3 {
        let d = expect_data(p.conn.poll_event(), 1, 16_000, false);
        assert_eq!(&d[..], &chunk[..]);
    }
    expect_data(p.conn.poll_event(), 1, 0, true);
    // 16 000 and 32 000 are under half of 65 535: nothing yet.
    p.conn.release(1, 16_000);
    p.conn.release(1, 16_000);
    assert_eq!(p.read(), []);
    p.conn.release(1, 16_000);
    // The peer ended the stream, so only the connection needs it.
    assert_eq!(p.read(), [window_update(0, 48_000)]);
}

#[test]
fn stream_window_updates_while_the_body_is_still_coming() {
    let mut p = Peer::connected(ServerConfig {
        connection_window: 65_535,
        ..ServerConfig::default()
    });
    p.headers(1, &request("POST", "/"), false);
    for _ in 0..3 {
        p.data(1, &[1; 16_000], false);
    }
    p.flush().unwrap();
    p.events();
    for _ in 0..3 {
        p.conn.release(1, 16_000);
    }
    assert_eq!(
        p.read(),
        [window_update(0, 48_000), window_update(1, 48_000)]
    );
    // The peer may now send a full window again.
    for _ in 0..4 {
        p.data(1, &[1; 16_000], false);
    }
    p.flush().unwrap();
    assert_eq!(p.events().len(), 4);
}

#[test]
fn padding_is_given_back_on_arrival() {
    let mut p = Peer::connected(ServerConfig {
        connection_window: 65_535,
        ..ServerConfig::default()
    });
    p.headers(1, &request("POST", "/"), false);
    let mut padded = vec![250u8];
    padded.extend_from_slice(&[9; 10]);
    padded.extend_from_slice(&[0; 250]);
    for _ in 0..140 {
        p.raw(kind::DATA, flags::PADDED, 1, &padded);
    }
    p.flush().unwrap();
    // Padding (251 bytes with the pad length) of 131 frames passes half
    // the windows on its own.
    let got = p.read();
    assert!(got.contains(&window_update(0, 131 * 251)), "{got:?}");
    assert!(got.contains(&window_update(1, 131 * 251)), "{got:?}");
    expect_request(p.conn.poll_event());
    expect_data(p.conn.poll_event(), 1, 10, false);
}

#[test]
fn request_trailers_are_an_event() {
    let mut p = Peer::connected(ServerConfig::default());
    p.headers(1, &request("POST", "/"), false);
    p.data(1, b"abc", false);
    p.headers(1, &[("x-checksum", "abc")], true);
    p.flush().unwrap();
    expect_request(p.conn.poll_event());
    expect_data(p.conn.poll_event(), 1, 3, false);
    match p.conn.poll_event() {
        Some(Event::Trailers {
            stream: 1,
            fields: f,
        }) => {
            assert_eq!(fields(&f), owned(&[("x-checksum", "abc")]));
        }
        other => panic!("expected trailers, got {other:?}"),
    }
    // Half-closed (remote): the response can still go out.
    assert_eq!(p.conn.open_streams(), 1);
    p.conn.send_headers(1, 204, [], true).unwrap();
    assert_eq!(p.conn.open_streams(), 0);
}

#[test]
fn trailers_without_end_stream_reset_the_stream() {
    let mut p = Peer::connected(ServerConfig::default());
    p.headers(1, &request("POST", "/"), false);
    p.headers(1, &[("x-checksum", "abc")], false);
    p.flush().unwrap();
    expect_request(p.conn.poll_event());
    expect_reset(p.conn.poll_event(), 1, ErrorCode::PROTOCOL_ERROR);
    assert_eq!(p.read(), [rst(1, ErrorCode::PROTOCOL_ERROR)]);
    assert_eq!(p.conn.open_streams(), 0);
}

#[test]
fn malformed_request_is_reset_without_an_event() {
    let mut p = Peer::connected(ServerConfig::default());
    // No :path.
    p.headers(1, &request("GET", "/")[..3], true);
    // Uppercase name.
    p.headers(
        3,
        &[request("GET", "/"), vec![("X-Up", "1")]].concat(),
        true,
    );
    // Extended CONNECT, which we never enabled.
    let connect = [
        request("CONNECT", "/chat"),
        vec![(":protocol", "websocket")],
    ];
    p.headers(5, &connect.concat(), true);
    p.get(7);
    p.flush().unwrap();
    let (stream, _, _) = expect_request(p.conn.poll_event());
    assert_eq!(stream, 7);
    assert!(p.conn.poll_event().is_none());
    assert_eq!(
        p.read(),
        [
            rst(1, ErrorCode::PROTOCOL_ERROR),
            rst(3, ErrorCode::PROTOCOL_ERROR),
            rst(5, ErrorCode::PROTOCOL_ERROR),
        ]
    );
}

#[test]
fn extended_connect_is_a_request_once_enabled() {
    let cfg = ServerConfig {
        enable_connect_protocol: true,
        ..ServerConfig::default()
    };
    let mut p = Peer::new(cfg.clone());
    let got = p.read();
    let Some(Got::Other(Frame::Settings(s))) = got.first() else {
        panic!("expected SETTINGS first, got {got:?}");
    };
    assert_eq!(s.enable_connect_protocol, Some(true));
    let mut p = Peer::connected(cfg);
    let connect = [
        request("CONNECT", "/chat"),
        vec![(":protocol", "websocket")],
    ];
    p.headers(1, &connect.concat(), false);
    // `:protocol` stays malformed on any other method (RFC 8441 §4).
    p.headers(
        3,
        &[request("GET", "/"), vec![(":protocol", "websocket")]].concat(),
        true,
    );
    p.flush().unwrap();
    let (stream, head, end) = expect_request(p.conn.poll_event());
    assert_eq!((stream, end), (1, false));
    assert_eq!(head.get(b":protocol"), Some(&b"websocket"[..]));
    assert_eq!(p.read(), [rst(3, ErrorCode::PROTOCOL_ERROR)]);
}

#[test]
fn content_length_must_match_the_body() {
    let mut p = Peer::connected(ServerConfig::default());
    let with_length = |n| [request("POST", "/"), vec![("content-length", n)]].concat();
    // Less body than declared.
    p.headers(1, &with_length("10"), false);
    p.data(1, b"12345", true);
    // More.
    p.headers(3, &with_length("2"), false);
    p.data(3, b"123", false);
    // None at all, with END_STREAM on the headers.
    p.headers(5, &with_length("4"), true);
    // Exactly.
    p.headers(7, &with_length("3"), false);
    p.data(7, b"123", true);
    p.flush().unwrap();
    expect_request(p.conn.poll_event());
    expect_reset(p.conn.poll_event(), 1, ErrorCode::PROTOCOL_ERROR);
    expect_request(p.conn.poll_event());
    expect_reset(p.conn.poll_event(), 3, ErrorCode::PROTOCOL_ERROR);
    let (stream, _, _) = expect_request(p.conn.poll_event());
    assert_eq!(stream, 7);
    expect_data(p.conn.poll_event(), 7, 3, true);
    assert_eq!(
        p.read(),
        [
            rst(1, ErrorCode::PROTOCOL_ERROR),
            rst(3, ErrorCode::PROTOCOL_ERROR),
            rst(5, ErrorCode::PROTOCOL_ERROR),
        ]
    );
}

#[test]
fn streams_past_the_limit_are_refused_and_hpack_stays_in_step() {
    let mut p = Peer::connected(ServerConfig {
        max_concurrent_streams: 2,
        ..ServerConfig::default()
    });
    let tagged = [request("POST", "/t"), vec![("x-tag", "fresh")]].concat();
    p.headers(1, &request("POST", "/"), false);
    p.headers(3, &request("POST", "/"), false);
    // Adds `x-tag: fresh` and `:path /t` to the tables.
    p.headers(5, &tagged, false);
    p.flush().unwrap();
    assert_eq!(p.events().len(), 2);
    assert_eq!(p.read(), [rst(5, ErrorCode::REFUSED_STREAM)]);
    // A late DATA on the refused stream is dropped quietly.
    p.data(5, b"late", true);
    p.data(1, b"", true);
    p.flush().unwrap();
    expect_data(p.conn.poll_event(), 1, 0, true);
    p.conn.send_headers(1, 200, [], true).unwrap();
    assert_eq!(p.conn.open_streams(), 1);
    // Sent as indexes into the table entries that stream 5 created.
    p.headers(7, &tagged, true);
    p.flush().unwrap();
    let (stream, head, _) = expect_request(p.conn.poll_event());
    assert_eq!(stream, 7);
    assert_eq!(fields(&head), owned(&tagged));
}

#[test]
fn oversized_header_list_gets_431_and_the_connection_lives_on() {
    let mut p = Peer::connected(ServerConfig::default());
    let big = "b".repeat(61 << 10);
    let req = [request("GET", "/"), vec![("x-big", big.as_str())]].concat();
    p.headers(1, &req, true);
    p.headers(3, &req, false);
    p.get(5);
    p.flush().unwrap();
    let (stream, _, _) = expect_request(p.conn.poll_event());
    assert_eq!(stream, 5);
    assert!(p.conn.poll_event().is_none());
    let status_431 = |stream| Got::Headers {
        stream,
        end_stream: true,
        fields: owned(&[(":status", "431")]),
    };
    assert_eq!(
        p.read(),
        [status_431(1), status_431(3), rst(3, ErrorCode::NO_ERROR)]
    );
}

#[test]
fn peer_reset_is_an_event() {
    let mut p = Peer::connected(ServerConfig::default());
    p.headers(1, &request("POST", "/"), false);
    encode_rst_stream(&mut p.wire, 1, ErrorCode::CANCEL);
    p.flush().unwrap();
    expect_request(p.conn.poll_event());
    expect_reset(p.conn.poll_event(), 1, ErrorCode::CANCEL);
    assert_eq!(p.conn.open_streams(), 0);
    assert_eq!(
        p.conn.send_headers(1, 200, [], true),
        Err(super::super::SendError::UnknownStream)
    );
    // A reset crossing ours or a late one: ignored.
    encode_rst_stream(&mut p.wire, 1, ErrorCode::CANCEL);
    p.flush().unwrap();
    assert!(p.conn.poll_event().is_none());
    assert_eq!(p.read(), []);
}

#[test]
fn data_after_our_reset_is_dropped_but_its_window_comes_back() {
    let mut p = Peer::connected(ServerConfig {
        connection_window: 65_535,
        ..ServerConfig::default()
    });
    p.headers(1, &request("POST", "/"), false);
    p.flush().unwrap();
    expect_request(p.conn.poll_event());
    p.conn.reset(1, ErrorCode::CANCEL);
    assert_eq!(p.read(), [rst(1, ErrorCode::CANCEL)]);
    p.data(1, &[0; 16_000], false);
    p.data(1, &[0; 16_000], false);
    p.flush().unwrap();
    assert_eq!(p.read(), []);
    p.data(1, &[0; 16_000], false);
    // Trailers crossing our reset: decoded and dropped.
    p.headers(1, &[("x-after", "reset")], true);
    p.flush().unwrap();
    assert!(p.conn.poll_event().is_none());
    assert_eq!(p.read(), [window_update(0, 48_000)]);
}
