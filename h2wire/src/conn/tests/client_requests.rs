//! Client connection: its opening, requests out and responses in (heads, bodies, trailers, 1xx, bodiless responses).

use super::client_peer::*;
use super::{fields, owned, window_update, Got};
use crate::conn::{ClientConfig, ClientEvent, SendError};
use crate::frame::{Frame, Settings};
use crate::ErrorCode;

#[test]
fn opening_sends_preface_settings_and_window_then_acks() {
    let mut p = Server::new(ClientConfig::default());
    let got = p.read();
    assert_eq!(
        got,
        [
            Got::Other(Frame::Settings(Settings {
                enable_push: Some(false),
                max_concurrent_streams: Some(0),
                max_header_list_size: Some(60 << 10),
                ..Settings::default()
            })),
            window_update(0, (1 << 20) - 65_535),
        ]
    );
    p.settings(&Settings {
        max_concurrent_streams: Some(50),
        enable_push: Some(false),
        ..Settings::default()
    });
    p.flush().unwrap();
    assert_eq!(p.read(), [Got::Other(Frame::SettingsAck)]);
    assert!(matches!(
        p.events()[..],
        [ClientEvent::StreamLimit { max: 50 }]
    ));
    // PING is echoed as on the server side.
    p.ping();
    p.flush().unwrap();
    assert_eq!(
        p.read(),
        [Got::Other(Frame::Ping {
            ack: true,
            payload: *b"12345678"
        })]
    );
}

#[test]
fn requests_may_go_before_the_servers_settings_up_to_100() {
    let mut p = Server::new(ClientConfig::default());
    for _ in 0..100 {
        p.get("/");
    }
    assert!(!p.conn.can_open_stream());
    let none: [(&[u8], &[u8], bool); 0] = [];
    assert_eq!(
        p.conn
            .send_request(b"GET", b"https", b"a", b"/", none, true),
        Err(SendError::TooManyStreams)
    );
    // A first SETTINGS without a limit lifts it (the RFC's "unlimited").
    p.settings(&Settings::default());
    p.flush().unwrap();
    assert!(matches!(
        p.events()[..],
        [ClientEvent::StreamLimit { max: u32::MAX }]
    ));
    assert!(p.conn.can_open_stream());
}

#[test]
fn get_gets_its_response_head_and_body() {
    let mut p = Server::plain();
    let s = p.get("/index.html");
    assert_eq!(s, 1);
    assert_eq!(
        p.read(),
        [Got::Headers {
            stream: 1,
            end_stream: true,
            fields: owned(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":authority", "example.com"),
                (":path", "/index.html"),
                ("accept", "*/*"),
            ]),
        }]
    );
    let head = [status("200"), vec![("content-length", "5")]].concat();
    p.headers(1, &head, false);
    p.data(1, b"hel", false);
    p.data(1, b"lo", true);
    p.flush().unwrap();
    let (stream, list, informational, end) = expect_response(p.conn.poll_event());
    assert_eq!((stream, informational, end), (1, false, false));
    assert_eq!(fields(&list), owned(&head));
    p.conn.recycle(list);
    expect_data(p.conn.poll_event(), 1, 3, false);
    expect_data(p.conn.poll_event(), 1, 2, true);
    assert!(p.conn.poll_event().is_none());
    assert_eq!(p.conn.open_streams(), 0);
    p.conn.release(1, 5);
    // The next request gets the next odd id.
    assert_eq!(p.get("/"), 3);
}

#[test]
fn response_trailers_end_the_stream() {
    let mut p = Server::plain();
    let s = p.request("POST", "/rpc", false);
    let te: (&[u8], &[u8]) = (b"x-checksum", b"1");
    let mut body = bytes::Bytes::from_static(b"req");
    assert_eq!(p.conn.send_data(s, &mut body, false), Ok(3));
    p.conn.send_trailers(s, [te]).unwrap();
    let got = p.read();
    assert_eq!(
        got[2],
        Got::Headers {
            stream: s,
            end_stream: true,
            fields: owned(&[("x-checksum", "1")]),
        }
    );
    p.headers(s, &status("200"), false);
    p.data(s, b"ok", false);
    p.headers(s, &[("grpc-status", "0")], true);
    p.flush().unwrap();
    expect_response(p.conn.poll_event());
    expect_data(p.conn.poll_event(), s, 2, false);
    match p.conn.poll_event() {
        Some(ClientEvent::Trailers { stream, fields: f }) => {
            assert_eq!(stream, s);
            assert_eq!(fields(&f), owned(&[("grpc-status", "0")]));
        }
        other => panic!("expected trailers, got {other:?}"),
    }
    assert_eq!(p.conn.open_streams(), 0);
}

#[test]
fn a_response_head_in_continuations_is_joined() {
    let mut p = Server::plain();
    let s = p.get("/");
    let head = [status("200"), vec![("server", "a-fairly-long-server-name")]].concat();
    p.headers_split(s, &head, true, 8);
    p.flush().unwrap();
    let (_, list, _, end) = expect_response(p.conn.poll_event());
    assert!(end);
    assert_eq!(fields(&list), owned(&head));
    // A frame between HEADERS and its CONTINUATION ends the connection.
    let s = p.get("/");
    let other = [status("200"), vec![("server", "another-long-server-name")]].concat();
    p.headers_split(s, &other, true, 8);
    let mut wire = p.wire.split_to(9 + 8);
    let rest = p.wire.split();
    p.ping();
    wire.extend_from_slice(&p.wire.split());
    wire.extend_from_slice(&rest);
    p.wire = wire;
    super::assert_conn_error(p.flush(), ErrorCode::PROTOCOL_ERROR);
}

#[test]
fn informational_heads_come_before_the_final_one() {
    let mut p = Server::plain();
    let s = p.get("/");
    p.headers(s, &status("100"), false);
    p.headers(s, &[(":status", "103"), ("link", "</a.css>")], false);
    p.headers(s, &status("204"), true);
    p.flush().unwrap();
    for code in ["100", "103"] {
        let (_, head, informational, end) = expect_response(p.conn.poll_event());
        assert!(informational && !end);
        assert_eq!(head.get(b":status"), Some(code.as_bytes()));
    }
    let (_, head, informational, end) = expect_response(p.conn.poll_event());
    assert!(!informational && end);
    assert_eq!(head.get(b":status"), Some(&b"204"[..]));
    assert_eq!(p.conn.open_streams(), 0);
}

#[test]
fn head_and_304_responses_have_no_body_whatever_content_length_says() {
    let mut p = Server::plain();
    let head_req = p.request("HEAD", "/big", true);
    let cond = p.get("/cached");
    let with_length = |code| [status(code), vec![("content-length", "1000")]].concat();
    p.headers(head_req, &with_length("200"), true);
    p.headers(cond, &with_length("304"), true);
    p.flush().unwrap();
    for s in [head_req, cond] {
        let (stream, _, _, end) = expect_response(p.conn.poll_event());
        assert_eq!((stream, end), (s, true));
    }
    assert!(p.conn.poll_event().is_none());
    // A body on a HEAD response is malformed.
    let s = p.request("HEAD", "/big", true);
    p.headers(s, &with_length("200"), false);
    p.data(s, b"x", true);
    p.flush().unwrap();
    expect_response(p.conn.poll_event());
    expect_broken(p.conn.poll_event(), s, ErrorCode::PROTOCOL_ERROR);
}

#[test]
fn memory_goes_back_near_idle_after_100_streams() {
    let mut p = Server::plain();
    let burst = |p: &mut Server, count: usize| {
        let ids: Vec<u32> = (0..count).map(|_| p.get("/items")).collect();
        p.read();
        let peak = p.conn.memory_bytes();
        for &s in &ids {
            let head = [status("200"), vec![("content-type", "application/json")]].concat();
            p.headers(s, &head, false);
            p.data(s, b"{}", true);
        }
        p.flush().unwrap();
        for e in p.events() {
            match e {
                ClientEvent::Response { head, .. } => p.conn.recycle(head),
                ClientEvent::Data { stream, data, .. } => p.conn.release(stream, data.len() as u32),
                other => panic!("unexpected {other:?}"),
            }
        }
        p.read();
        assert_eq!(p.conn.open_streams(), 0);
        peak
    };
    burst(&mut p, 1);
    let idle = p.conn.memory_bytes();
    let peak = burst(&mut p, 100);
    let after = p.conn.memory_bytes();
    assert!(peak > idle + 5000, "100 streams held only {peak} vs {idle}");
    assert!(
        after <= idle + crate::conn::output::BUF_KEEP + 512,
        "idle {idle} bytes, {after} after 100 streams (peak {peak})"
    );
    burst(&mut p, 100);
    assert!(p.conn.memory_bytes() <= after + 256);
    p.conn.shrink();
    assert!(p.conn.memory_bytes() <= idle, "{}", p.conn.memory_bytes());
}
