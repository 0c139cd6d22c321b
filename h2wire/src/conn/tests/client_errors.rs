//! Client connection: what a server can get wrong, and resets and GOAWAY from it.

use super::client_peer::*;
use super::{assert_conn_error, goaway, rst};
use crate::conn::{ClientConfig, ClientEvent, SendError};
use crate::frame::{flags, kind, Settings};
use crate::ErrorCode;

#[test]
fn first_frame_must_be_settings() {
    let mut p = Server::new(ClientConfig::default());
    p.read();
    p.ping();
    assert_conn_error(p.flush(), ErrorCode::PROTOCOL_ERROR);
    assert_eq!(goaway(&p.read()), Some((0, ErrorCode::PROTOCOL_ERROR)));
    assert!(!p.conn.can_open_stream());
}

#[test]
fn push_is_a_protocol_error() {
    let mut p = Server::new(ClientConfig::default());
    p.settings(&Settings {
        enable_push: Some(true),
        ..Settings::default()
    });
    assert_conn_error(p.flush(), ErrorCode::PROTOCOL_ERROR);

    let mut p = Server::plain();
    let s = p.get("/");
    p.raw(
        kind::PUSH_PROMISE,
        flags::END_HEADERS,
        s,
        &[0, 0, 0, 2, 0x82, 0x87, 0x84],
    );
    assert_conn_error(p.flush(), ErrorCode::PROTOCOL_ERROR);
}

#[test]
fn data_before_the_response_head_resets_the_stream() {
    let mut p = Server::plain();
    let s = p.get("/");
    p.read();
    p.data(s, b"early", false);
    p.flush().unwrap();
    expect_broken(p.conn.poll_event(), s, ErrorCode::PROTOCOL_ERROR);
    assert_eq!(p.read(), [rst(s, ErrorCode::PROTOCOL_ERROR)]);
    assert_eq!(p.conn.open_streams(), 0);
}

#[test]
fn headers_on_a_stream_we_never_opened_end_the_connection() {
    for stream in [2, 5] {
        let mut p = Server::plain();
        p.get("/");
        p.headers(stream, &status("200"), true);
        assert_conn_error(p.flush(), ErrorCode::PROTOCOL_ERROR);
    }
    let mut p = Server::plain();
    p.data(3, b"x", true);
    assert_conn_error(p.flush(), ErrorCode::PROTOCOL_ERROR);
}

#[test]
fn malformed_responses_reset_their_stream() {
    let cases: [&[(&str, &str)]; 4] = [
        &[("content-type", "text/plain")], // no :status
        &[(":status", "200"), ("Upper", "x")],
        &[(":status", "101")],
        &[(":status", "200"), (":path", "/")],
    ];
    let mut p = Server::plain();
    for head in cases {
        let s = p.get("/");
        p.headers(s, head, false);
        p.flush().unwrap();
        expect_broken(p.conn.poll_event(), s, ErrorCode::PROTOCOL_ERROR);
        assert_eq!(p.read().last(), Some(&rst(s, ErrorCode::PROTOCOL_ERROR)));
    }
    // A 1xx must not end the stream.
    let s = p.get("/");
    p.headers(s, &status("100"), true);
    p.flush().unwrap();
    expect_broken(p.conn.poll_event(), s, ErrorCode::PROTOCOL_ERROR);
    // The connection lives on.
    let s = p.get("/");
    p.headers(s, &status("200"), true);
    p.flush().unwrap();
    expect_response(p.conn.poll_event());
}

#[test]
fn response_content_length_must_match_the_body() {
    let mut p = Server::plain();
    let length = [status("200"), vec![("content-length", "4")]].concat();
    // Too much.
    let s = p.get("/");
    p.headers(s, &length, false);
    p.data(s, b"12345", true);
    // Too little.
    let t = p.get("/");
    p.headers(t, &length, false);
    p.data(t, b"123", true);
    // None at all, with END_STREAM on the head.
    let u = p.get("/");
    p.headers(u, &length, true);
    p.flush().unwrap();
    expect_response(p.conn.poll_event());
    expect_broken(p.conn.poll_event(), s, ErrorCode::PROTOCOL_ERROR);
    expect_response(p.conn.poll_event());
    expect_broken(p.conn.poll_event(), t, ErrorCode::PROTOCOL_ERROR);
    expect_broken(p.conn.poll_event(), u, ErrorCode::PROTOCOL_ERROR);
    assert!(p.conn.poll_event().is_none());
}

#[test]
fn oversized_response_head_resets_the_stream_and_keeps_hpack_in_step() {
    let mut p = Server::connected(
        ClientConfig {
            max_header_list_size: 200,
            ..ClientConfig::default()
        },
        &Settings::default(),
    );
    let s = p.get("/");
    let big = "v".repeat(300);
    p.headers(s, &[(":status", "200"), ("x-big", &big)], true);
    p.flush().unwrap();
    assert!(matches!(p.events()[..], [ClientEvent::TooLarge { stream }] if stream == s));
    assert_eq!(p.read().last(), Some(&rst(s, ErrorCode::CANCEL)));
    let t = p.get("/");
    p.headers(t, &[(":status", "200"), ("x-small", "1")], true);
    p.flush().unwrap();
    expect_response(p.conn.poll_event());
}

#[test]
fn refused_stream_is_surfaced_for_a_retry() {
    let mut p = Server::plain();
    let s = p.get("/");
    p.rst(s, ErrorCode::REFUSED_STREAM);
    p.flush().unwrap();
    expect_reset(p.conn.poll_event(), s, ErrorCode::REFUSED_STREAM);
    assert_eq!(p.conn.open_streams(), 0);
    // Late frames on it are dropped, the connection window given back.
    p.data(s, &[0; 16_000], false);
    p.flush().unwrap();
    assert!(p.events().is_empty());
}

#[test]
fn goaway_refuses_the_streams_above_last_and_new_ones() {
    let mut p = Server::plain();
    let ids: Vec<u32> = (0..3).map(|_| p.get("/")).collect();
    p.goaway(ids[0], ErrorCode::NO_ERROR);
    p.flush().unwrap();
    expect_reset(p.conn.poll_event(), ids[1], ErrorCode::REFUSED_STREAM);
    expect_reset(p.conn.poll_event(), ids[2], ErrorCode::REFUSED_STREAM);
    assert!(matches!(
        p.conn.poll_event(),
        Some(ClientEvent::GoAway { last_stream, code: ErrorCode::NO_ERROR }) if last_stream == ids[0]
    ));
    assert!(!p.conn.can_open_stream());
    let none: [(&[u8], &[u8], bool); 0] = [];
    assert_eq!(
        p.conn
            .send_request(b"GET", b"https", b"a", b"/", none, true),
        Err(SendError::GoingAway)
    );
    // The stream below it still completes.
    p.headers(ids[0], &status("200"), true);
    p.flush().unwrap();
    expect_response(p.conn.poll_event());
    assert_eq!(p.conn.open_streams(), 0);
}

#[test]
fn our_reset_and_goaway() {
    let mut p = Server::plain();
    let s = p.get("/");
    p.read();
    p.conn.reset(s, ErrorCode::CANCEL);
    assert_eq!(p.read(), [rst(s, ErrorCode::CANCEL)]);
    // Its response crossing the reset is decoded and dropped.
    p.headers(s, &status("200"), false);
    p.flush().unwrap();
    assert!(p.events().is_empty());
    p.conn.go_away(ErrorCode::NO_ERROR);
    assert_eq!(goaway(&p.read()), Some((0, ErrorCode::NO_ERROR)));
    assert!(!p.conn.can_open_stream());
}
