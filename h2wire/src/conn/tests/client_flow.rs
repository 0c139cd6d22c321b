//! Client connection: flow control both ways and the server's stream limit.

use bytes::Bytes;

use super::client_peer::*;
use super::{window_update, Got};
use crate::conn::{ClientConfig, ClientEvent, SendError};
use crate::frame::Settings;

#[test]
fn post_body_blocked_by_the_window_goes_on_after_window_update() {
    let mut p = Server::connected(
        ClientConfig::default(),
        &Settings {
            initial_window_size: Some(10),
            max_concurrent_streams: Some(10),
            ..Settings::default()
        },
    );
    let s = p.request("POST", "/upload", false);
    let mut body = Bytes::from(vec![7u8; 25]);
    assert_eq!(p.conn.send_capacity(s), 10);
    assert_eq!(p.conn.send_data(s, &mut body, true), Ok(10));
    assert_eq!(body.len(), 15);
    assert_eq!(p.conn.send_data(s, &mut body, true), Ok(0));
    let got = p.read();
    assert_eq!(got.len(), 2);
    assert!(matches!(got[1], Got::Data { ref data, end_stream: false, .. } if data.len() == 10));

    p.window_update(s, 20);
    p.flush().unwrap();
    assert!(matches!(
        p.events()[..],
        [ClientEvent::WindowOpen { stream }] if stream == s
    ));
    assert_eq!(p.conn.send_data(s, &mut body, true), Ok(15));
    assert!(body.is_empty());
    assert!(matches!(
        p.read()[..],
        [Got::Data { ref data, end_stream: true, .. }] if data.len() == 15
    ));
    // Half-closed on our side: no more sending.
    let mut more = Bytes::from_static(b"x");
    assert_eq!(p.conn.send_data(s, &mut more, false), Err(SendError::Ended));
}

#[test]
fn initial_window_raise_opens_blocked_streams() {
    let mut p = Server::connected(
        ClientConfig::default(),
        &Settings {
            initial_window_size: Some(0),
            max_concurrent_streams: Some(10),
            ..Settings::default()
        },
    );
    let s = p.request("POST", "/", false);
    assert_eq!(p.conn.send_capacity(s), 0);
    p.settings(&Settings {
        initial_window_size: Some(100),
        ..Settings::default()
    });
    p.flush().unwrap();
    assert!(matches!(
        p.events()[..],
        [ClientEvent::WindowOpen { stream }] if stream == s
    ));
    assert_eq!(p.conn.send_capacity(s), 100);
}

#[test]
fn response_body_counts_until_released() {
    let mut p = Server::connected(
        ClientConfig {
            initial_stream_window: 100,
            connection_window: 65_535,
            ..ClientConfig::default()
        },
        &Settings::default(),
    );
    let s = p.get("/");
    p.read();
    p.headers(s, &status("200"), false);
    p.data(s, &[1; 60], false);
    p.flush().unwrap();
    expect_response(p.conn.poll_event());
    expect_data(p.conn.poll_event(), s, 60, false);
    // Nothing released yet: 40 more fit, 41 do not.
    p.data(s, &[1; 41], false);
    p.flush().unwrap();
    expect_broken(p.conn.poll_event(), s, crate::ErrorCode::FLOW_CONTROL_ERROR);
    let s = p.get("/");
    p.read();
    p.headers(s, &status("200"), false);
    p.data(s, &[1; 60], false);
    p.flush().unwrap();
    p.events();
    p.conn.release(s, 60);
    // Over half the stream window back: it is announced.
    assert_eq!(p.read(), [window_update(s, 60)]);
}

#[test]
fn server_stream_limit_refuses_the_third_request_until_one_ends() {
    let mut p = Server::connected(
        ClientConfig::default(),
        &Settings {
            max_concurrent_streams: Some(2),
            ..Settings::default()
        },
    );
    let a = p.get("/a");
    let _b = p.get("/b");
    assert!(!p.conn.can_open_stream());
    let none: [(&[u8], &[u8], bool); 0] = [];
    assert_eq!(
        p.conn
            .send_request(b"GET", b"https", b"example.com", b"/c", none, true),
        Err(SendError::TooManyStreams)
    );
    p.headers(a, &status("204"), true);
    p.flush().unwrap();
    expect_response(p.conn.poll_event());
    assert!(p.conn.can_open_stream());
    assert_eq!(p.get("/c"), 5);
    // The server lowers it further: the pool hears of it.
    p.settings(&Settings {
        max_concurrent_streams: Some(1),
        ..Settings::default()
    });
    p.flush().unwrap();
    assert!(matches!(
        p.events()[..],
        [ClientEvent::StreamLimit { max: 1 }]
    ));
    assert!(!p.conn.can_open_stream());
}

#[test]
fn stream_ids_run_out_at_2_pow_31() {
    let mut p = Server::plain();
    p.conn.next_id = (1 << 31) - 1;
    assert_eq!(p.get("/last"), (1 << 31) - 1);
    assert!(!p.conn.can_open_stream());
    let none: [(&[u8], &[u8], bool); 0] = [];
    assert_eq!(
        p.conn
            .send_request(b"GET", b"https", b"a", b"/", none, true),
        Err(SendError::IdsExhausted)
    );
}

#[test]
fn grant_grows_one_stream_s_window_past_the_initial_one() {
    let mut p = Server::connected(
        ClientConfig {
            initial_stream_window: 100,
            connection_window: 65_535,
            ..ClientConfig::default()
        },
        &Settings::default(),
    );
    let s = p.get("/");
    let other = p.get("/other");
    p.read();
    p.headers(s, &status("200"), false);
    p.headers(other, &status("200"), false);
    p.flush().unwrap();
    p.events();
    assert!(p.conn.grant(s, 400));
    assert_eq!(p.read(), [window_update(s, 400)]);
    // 500 now fit on the granted stream; the other keeps its 100.
    p.data(s, &[1; 500], false);
    p.data(other, &[1; 101], false);
    p.flush().unwrap();
    expect_data(p.conn.poll_event(), s, 500, false);
    expect_broken(
        p.conn.poll_event(),
        other,
        crate::ErrorCode::FLOW_CONTROL_ERROR,
    );
    // Once the response ended there is nothing to grant.
    p.data(s, &[], true);
    p.flush().unwrap();
    p.events();
    assert!(!p.conn.grant(s, 10));
    assert!(!p.conn.grant(99, 10));
}
