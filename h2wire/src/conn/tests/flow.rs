//! Flow control both ways (RFC 9113 §6.9): blocked sends, window changes by SETTINGS, violations, and zero-copy DATA.

use super::*;
use crate::frame::{encode_window_update, MAX_WINDOW};

/// A connected peer with stream 1 open and its response head sent.
fn answering(s: &Settings) -> Peer {
    let mut p = Peer::with_settings(ServerConfig::default(), s);
    p.get(1);
    p.flush().unwrap();
    let (_, head, _) = expect_request(p.conn.poll_event());
    p.conn.recycle(head);
    p.conn.send_headers(1, 200, [], false).unwrap();
    p.read();
    p
}

fn window_open(e: Option<Event>, stream: u32) {
    match e {
        Some(Event::WindowOpen { stream: s }) if s == stream => {}
        other => panic!("expected WindowOpen on {stream}, got {other:?}"),
    }
}

#[test]
fn send_waits_for_the_stream_window_then_goes_on() {
    let mut p = answering(&Settings {
        initial_window_size: Some(10),
        ..Settings::default()
    });
    let mut body = Bytes::from(vec![5u8; 100]);
    assert_eq!(p.conn.send_data(1, &mut body, true), Ok(10));
    assert_eq!(p.conn.send_data(1, &mut body, true), Ok(0));
    assert_eq!(body.len(), 90);
    assert_eq!(p.conn.send_capacity(1), 0);
    encode_window_update(&mut p.wire, 1, 50);
    p.flush().unwrap();
    window_open(p.conn.poll_event(), 1);
    assert_eq!(p.conn.send_capacity(1), 50);
    assert_eq!(p.conn.send_data(1, &mut body, true), Ok(50));
    encode_window_update(&mut p.wire, 1, 1000);
    p.flush().unwrap();
    assert_eq!(p.conn.send_data(1, &mut body, true), Ok(40));
    assert_eq!(p.conn.open_streams(), 0);
    let ends: Vec<_> = p
        .read()
        .into_iter()
        .map(|g| match g {
            Got::Data {
                data, end_stream, ..
            } => (data.len(), end_stream),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(ends, [(10, false), (50, false), (40, true)]);
}

#[test]
fn send_waits_for_the_connection_window() {
    let mut p = answering(&Settings {
        initial_window_size: Some(1 << 20),
        ..Settings::default()
    });
    let mut body = Bytes::from(vec![1u8; 70_000]);
    assert_eq!(p.conn.send_data(1, &mut body, false), Ok(65_535));
    let sizes: Vec<_> = p
        .read()
        .iter()
        .map(|g| match g {
            Got::Data { data, .. } => data.len(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    // Frames never exceed the peer's MAX_FRAME_SIZE.
    assert_eq!(sizes, [16_384, 16_384, 16_384, 16_383]);
    assert_eq!(p.conn.send_data(1, &mut body, false), Ok(0));
    encode_window_update(&mut p.wire, 0, 10_000);
    p.flush().unwrap();
    window_open(p.conn.poll_event(), 0);
    assert_eq!(p.conn.send_capacity(1), 10_000);
    assert_eq!(p.conn.send_data(1, &mut body, false), Ok(4_465));
    assert!(body.is_empty());
}

#[test]
fn initial_window_change_mid_stream_can_go_negative() {
    let mut p = answering(&Settings::default());
    let mut body = Bytes::from(vec![1u8; 60_000]);
    assert_eq!(p.conn.send_data(1, &mut body, false), Ok(60_000));
    p.read();
    p.settings(&Settings {
        initial_window_size: Some(16_384),
        ..Settings::default()
    });
    p.flush().unwrap();
    assert_eq!(p.read(), [Got::Other(Frame::SettingsAck)]);
    // 16 384 - 60 000: nothing may go until the window is back above 0.
    assert_eq!(p.conn.send_capacity(1), 0);
    encode_window_update(&mut p.wire, 1, 60_000 - 16_384);
    p.flush().unwrap();
    assert_eq!(p.conn.send_capacity(1), 0);
    encode_window_update(&mut p.wire, 1, 100);
    p.flush().unwrap();
    assert_eq!(p.conn.send_capacity(1), 100);
    p.events();
    // Raising it opens the window and says so.
    p.settings(&Settings {
        initial_window_size: Some(20_000),
        ..Settings::default()
    });
    p.flush().unwrap();
    window_open(p.conn.poll_event(), 1);
    assert_eq!(p.conn.send_capacity(1), 3_716);
}

#[test]
fn initial_window_change_past_the_maximum_is_a_connection_error() {
    let mut p = answering(&Settings::default());
    encode_window_update(&mut p.wire, 1, MAX_WINDOW - 65_535);
    p.flush().unwrap();
    p.settings(&Settings {
        initial_window_size: Some(65_536),
        ..Settings::default()
    });
    assert_conn_error(p.flush(), ErrorCode::FLOW_CONTROL_ERROR);
}

#[test]
fn window_update_overflow_is_a_stream_or_connection_error() {
    let mut p = answering(&Settings::default());
    encode_window_update(&mut p.wire, 1, MAX_WINDOW);
    p.flush().unwrap();
    expect_reset(p.conn.poll_event(), 1, ErrorCode::FLOW_CONTROL_ERROR);
    assert_eq!(p.read(), [rst(1, ErrorCode::FLOW_CONTROL_ERROR)]);
    encode_window_update(&mut p.wire, 0, MAX_WINDOW);
    assert_conn_error(p.flush(), ErrorCode::FLOW_CONTROL_ERROR);
}

#[test]
fn data_past_the_stream_window_resets_the_stream() {
    let mut p = Peer::connected(ServerConfig::default());
    p.headers(1, &request("POST", "/"), false);
    for _ in 0..4 {
        p.data(1, &[0; 16_384], false);
    }
    p.get(3);
    p.flush().unwrap();
    expect_request(p.conn.poll_event());
    for _ in 0..3 {
        expect_data(p.conn.poll_event(), 1, 16_384, false);
    }
    expect_reset(p.conn.poll_event(), 1, ErrorCode::FLOW_CONTROL_ERROR);
    let (stream, _, _) = expect_request(p.conn.poll_event());
    assert_eq!(stream, 3);
    assert_eq!(p.read(), [rst(1, ErrorCode::FLOW_CONTROL_ERROR)]);
}

#[test]
fn data_past_the_connection_window_ends_the_connection() {
    let mut p = Peer::connected(ServerConfig {
        connection_window: 65_535,
        initial_stream_window: 1 << 20,
        ..ServerConfig::default()
    });
    p.headers(1, &request("POST", "/"), false);
    for _ in 0..4 {
        p.data(1, &[0; 16_384], false);
    }
    assert_conn_error(p.flush(), ErrorCode::FLOW_CONTROL_ERROR);
    assert_eq!(goaway(&p.read()), Some((1, ErrorCode::FLOW_CONTROL_ERROR)));
}

#[test]
fn data_goes_out_as_the_callers_bytes() {
    let mut p = answering(&Settings::default());
    let body = Bytes::from(vec![3u8; 40_000]);
    let base = body.as_ptr() as usize;
    let mut rest = body.clone();
    assert_eq!(p.conn.send_data(1, &mut rest, true), Ok(40_000));
    let mut offsets = Vec::new();
    while let Some(chunk) = p.conn.poll_output() {
        let at = chunk.as_ptr() as usize;
        if (base..base + body.len()).contains(&at) {
            offsets.push((at - base, chunk.len()));
        } else {
            assert_eq!(chunk.len(), 9, "a DATA frame header between payloads");
        }
    }
    assert_eq!(offsets, [(0, 16_384), (16_384, 16_384), (32_768, 7_232)]);
}

#[test]
fn a_peer_frame_size_above_the_default_makes_bigger_frames() {
    let mut p = answering(&Settings {
        max_frame_size: Some(32_768),
        ..Settings::default()
    });
    let mut body = Bytes::from(vec![3u8; 40_000]);
    assert_eq!(p.conn.send_data(1, &mut body, true), Ok(40_000));
    let sizes: Vec<_> = p
        .read()
        .iter()
        .map(|g| match g {
            Got::Data { data, .. } => data.len(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(sizes, [32_768, 7_232]);
}
