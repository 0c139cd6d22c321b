//! The connection's opening and connection-level frames: preface, SETTINGS, PING, GOAWAY.

use super::*;
use crate::frame::{encode_ping, flags, kind};

#[test]
fn settings_go_out_at_once_and_the_peers_are_acknowledged() {
    let mut p = Peer::new(ServerConfig::default());
    let got = p.read();
    assert_eq!(
        got,
        [
            Got::Other(Frame::Settings(Settings {
                max_concurrent_streams: Some(100),
                max_header_list_size: Some(60 << 10),
                ..Settings::default()
            })),
            window_update(0, (1 << 20) - 65_535),
        ]
    );
    p.wire.extend_from_slice(CLIENT_PREFACE);
    p.settings(&Settings {
        max_frame_size: Some(32_768),
        ..Settings::default()
    });
    p.flush().unwrap();
    assert_eq!(p.read(), [Got::Other(Frame::SettingsAck)]);
    // Their ACK of ours needs no answer.
    encode_settings_ack(&mut p.wire);
    p.flush().unwrap();
    assert_eq!(p.read(), []);
    assert!(p.events().is_empty());
}

#[test]
fn non_default_settings_are_advertised() {
    let mut p = Peer::new(ServerConfig {
        initial_stream_window: 1 << 20,
        max_frame_size: 1 << 20,
        header_table_size: 0,
        connection_window: 65_535,
        ..ServerConfig::default()
    });
    let got = p.read();
    let [Got::Other(Frame::Settings(s))] = &got[..] else {
        panic!("expected SETTINGS alone, got {got:?}");
    };
    assert_eq!(s.initial_window_size, Some(1 << 20));
    assert_eq!(s.max_frame_size, Some(1 << 20));
    assert_eq!(s.header_table_size, Some(0));
}

#[test]
fn the_preface_may_come_in_pieces() {
    let mut p = Peer::new(ServerConfig::default());
    p.wire.extend_from_slice(&CLIENT_PREFACE[..10]);
    p.flush().unwrap();
    assert_eq!(p.wire.len(), 10, "nothing consumed before 24 bytes");
    p.wire.extend_from_slice(&CLIENT_PREFACE[10..]);
    p.settings(&Settings::default());
    p.flush().unwrap();
    assert!(p.wire.is_empty());
}

#[test]
fn a_bad_preface_ends_the_connection_at_its_first_wrong_byte() {
    let mut p = Peer::new(ServerConfig::default());
    p.read();
    p.wire.extend_from_slice(b"GET / HTTP/1.1\r\n");
    assert_conn_error(p.flush(), ErrorCode::PROTOCOL_ERROR);
    assert_eq!(goaway(&p.read()), Some((0, ErrorCode::PROTOCOL_ERROR)));
    // And stays ended.
    assert_conn_error(p.flush(), ErrorCode::PROTOCOL_ERROR);
    assert_eq!(p.read(), []);
}

#[test]
fn the_first_frame_must_be_settings() {
    let mut p = Peer::new(ServerConfig::default());
    p.read();
    p.wire.extend_from_slice(CLIENT_PREFACE);
    encode_ping(&mut p.wire, false, [0; 8]);
    assert_conn_error(p.flush(), ErrorCode::PROTOCOL_ERROR);
    assert_eq!(goaway(&p.read()), Some((0, ErrorCode::PROTOCOL_ERROR)));

    let mut p = Peer::new(ServerConfig::default());
    p.wire.extend_from_slice(CLIENT_PREFACE);
    encode_settings_ack(&mut p.wire);
    assert_conn_error(p.flush(), ErrorCode::PROTOCOL_ERROR);
}

#[test]
fn ping_is_echoed_and_its_ack_is_not() {
    let mut p = Peer::connected(ServerConfig::default());
    encode_ping(&mut p.wire, false, *b"12345678");
    encode_ping(&mut p.wire, true, *b"abcdefgh");
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
fn push_promise_from_a_client_is_a_protocol_error() {
    let mut p = Peer::connected(ServerConfig::default());
    p.raw(kind::PUSH_PROMISE, flags::END_HEADERS, 1, &[0, 0, 0, 2]);
    assert_conn_error(p.flush(), ErrorCode::PROTOCOL_ERROR);
}

#[test]
fn unknown_frames_and_priority_are_ignored() {
    let mut p = Peer::connected(ServerConfig::default());
    p.raw(0xee, 0, 0, b"whatever");
    p.raw(kind::PRIORITY, 0, 7, &[0, 0, 0, 3, 15]);
    p.get(1);
    p.flush().unwrap();
    let (stream, head, _) = expect_request(p.conn.poll_event());
    assert_eq!(stream, 1);
    p.conn.recycle(head);
    assert_eq!(p.read(), []);
}

#[test]
fn peer_goaway_is_an_event() {
    let mut p = Peer::connected(ServerConfig::default());
    crate::frame::encode_goaway(&mut p.wire, 0, ErrorCode::ENHANCE_YOUR_CALM, b"bye");
    p.flush().unwrap();
    match p.conn.poll_event() {
        Some(Event::GoAway {
            last_stream: 0,
            code: ErrorCode::ENHANCE_YOUR_CALM,
        }) => {}
        other => panic!("expected GoAway, got {other:?}"),
    }
}

#[test]
fn graceful_goaway_ignores_later_streams_but_finishes_earlier_ones() {
    let mut p = Peer::connected(ServerConfig::default());
    p.headers(1, &request("POST", "/"), false);
    p.flush().unwrap();
    let (_, head, _) = expect_request(p.conn.poll_event());
    p.conn.recycle(head);
    p.conn.go_away(ErrorCode::NO_ERROR);
    assert_eq!(goaway(&p.read()), Some((1, ErrorCode::NO_ERROR)));
    // Stream 3 crossed our GOAWAY: dropped, but its block still decoded,
    // as stream 5's indexed fields show.
    let fields = [request("GET", "/x"), vec![("x-tag", "one")]].concat();
    p.headers(3, &fields, true);
    p.data(1, b"body", true);
    p.flush().unwrap();
    expect_data(p.conn.poll_event(), 1, 4, true);
    assert!(p.conn.poll_event().is_none());
    assert_eq!(p.read(), []);
    p.conn.send_headers(1, 200, [], true).unwrap();
    assert_eq!(p.conn.open_streams(), 0);
    // A second GOAWAY never names a later stream.
    p.conn.go_away(ErrorCode::NO_ERROR);
    let got = p.read();
    assert_eq!(goaway(&got), Some((1, ErrorCode::NO_ERROR)));
    p.headers(5, &fields, true);
    p.flush().unwrap();
    assert!(p.conn.poll_event().is_none());
}

/// The two-phase shutdown: after the notice (2^31−1) streams that were on
/// their way are still taken; the final GOAWAY names the last of them.
#[test]
fn shutdown_notice_takes_streams_until_the_final_goaway() {
    let mut p = Peer::connected(ServerConfig::default());
    p.get(1);
    p.flush().unwrap();
    let (_, head, _) = expect_request(p.conn.poll_event());
    p.conn.recycle(head);
    p.conn.shutdown_notice();
    assert_eq!(
        goaway(&p.read()),
        Some(((1 << 31) - 1, ErrorCode::NO_ERROR))
    );
    p.get(3);
    p.flush().unwrap();
    let (stream, head, _) = expect_request(p.conn.poll_event());
    assert_eq!(
        stream, 3,
        "a stream sent before the client saw the notice is served"
    );
    p.conn.recycle(head);
    p.conn.go_away(ErrorCode::NO_ERROR);
    assert_eq!(goaway(&p.read()), Some((3, ErrorCode::NO_ERROR)));
    p.get(5);
    p.flush().unwrap();
    assert!(p.conn.poll_event().is_none());
}

#[test]
fn peer_header_table_size_reaches_our_encoder() {
    let mut p = Peer::connected(ServerConfig::default());
    p.settings(&Settings {
        header_table_size: Some(0),
        ..Settings::default()
    });
    p.get(1);
    p.flush().unwrap();
    p.events();
    let f: (&[u8], &[u8]) = (b"x-custom", b"v");
    p.conn.send_headers(1, 200, [f], true).unwrap();
    let got = p.read();
    assert_eq!(got[0], Got::Other(Frame::SettingsAck));
    // The block opens with a table size update to 0 and indexes nothing.
    assert_eq!(p.dec.table().max_size(), 0);
    assert!(p.dec.table().is_empty());
}
