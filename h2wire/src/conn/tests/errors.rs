//! Connection errors: stream ids, idle streams, header block abuse, and arbitrary bytes.

use super::*;
use crate::frame::encode_rst_stream;
use crate::testing::StarRng as Rng;

#[test]
fn even_stream_ids_end_the_connection() {
    let mut p = Peer::connected(ServerConfig::default());
    p.get(2);
    assert_conn_error(p.flush(), ErrorCode::PROTOCOL_ERROR);
    assert_eq!(goaway(&p.read()), Some((0, ErrorCode::PROTOCOL_ERROR)));
}

#[test]
fn decreasing_stream_ids_end_the_connection() {
    let mut p = Peer::connected(ServerConfig::default());
    p.get(5);
    p.get(3);
    assert_conn_error(p.flush(), ErrorCode::PROTOCOL_ERROR);
    assert_eq!(goaway(&p.read()), Some((5, ErrorCode::PROTOCOL_ERROR)));
    expect_request(p.conn.poll_event());
}

#[test]
fn reset_of_an_idle_stream_ends_the_connection() {
    let mut p = Peer::connected(ServerConfig::default());
    encode_rst_stream(&mut p.wire, 9, ErrorCode::CANCEL);
    assert_conn_error(p.flush(), ErrorCode::PROTOCOL_ERROR);
}

#[test]
fn continuation_floods_and_interleaving_end_the_connection() {
    let cfg = ServerConfig {
        max_continuations: 4,
        ..ServerConfig::default()
    };
    let pad = "p".repeat(200);
    let long = [request("GET", "/"), vec![("x-pad", pad.as_str())]].concat();
    // Split into 10-byte frames: far more than 4 CONTINUATIONs.
    let mut p = Peer::connected(cfg.clone());
    p.headers_split(1, &long, true, 10);
    assert_conn_error(p.flush(), ErrorCode::ENHANCE_YOUR_CALM);
    assert_eq!(goaway(&p.read()), Some((0, ErrorCode::ENHANCE_YOUR_CALM)));
    // Within the bound it is fine.
    let mut p = Peer::connected(cfg.clone());
    p.headers_split(1, &long, true, 100);
    p.flush().unwrap();
    let (_, head, _) = expect_request(p.conn.poll_event());
    assert_eq!(fields(&head), owned(&long));
    // Any other frame inside a block, even an unknown one.
    let mut p = Peer::connected(cfg.clone());
    p.headers_split(1, &long, true, 100);
    // After the HEADERS frame, the first of the block.
    let tail = p.wire.split_off(9 + 100);
    p.raw(0xee, 0, 0, b"");
    p.wire.extend_from_slice(&tail);
    assert_conn_error(p.flush(), ErrorCode::PROTOCOL_ERROR);
    // A CONTINUATION for another stream.
    let mut p = Peer::connected(cfg);
    p.headers_split(1, &request("GET", "/"), true, 4);
    p.wire[9 + 4 + 8] = 3;
    assert_conn_error(p.flush(), ErrorCode::PROTOCOL_ERROR);
}

#[test]
fn frames_on_idle_or_unknown_streams() {
    // WINDOW_UPDATE on a stream that never was (§5.1, idle): the
    // connection ends (h2spec 5.1 #3).
    let mut p = Peer::connected(ServerConfig::default());
    crate::frame::encode_window_update(&mut p.wire, 41, 10);
    assert_conn_error(p.flush(), ErrorCode::PROTOCOL_ERROR);
    // On a stream that ended: ignored (it may cross our END_STREAM).
    let mut p = Peer::connected(ServerConfig::default());
    p.get(1);
    p.flush().unwrap();
    expect_request(p.conn.poll_event());
    p.conn.send_headers(1, 204, [], true).unwrap();
    crate::frame::encode_window_update(&mut p.wire, 1, 10);
    p.flush().unwrap();
    assert!(!p
        .read()
        .iter()
        .any(|g| matches!(g, Got::Other(Frame::RstStream { .. }))));
    // DATA on an idle stream: the connection ends.
    let mut p = Peer::connected(ServerConfig::default());
    p.data(3, b"x", false);
    assert_conn_error(p.flush(), ErrorCode::PROTOCOL_ERROR);
}

/// §5.1: frames on a stream the client closed itself are STREAM_CLOSED
/// (h2spec 5.1 #6, #8, #11); DATA crossing our own reset is not.
#[test]
fn frames_after_the_client_closed_a_stream_are_stream_closed() {
    // HEADERS on a half-closed (remote) stream.
    let mut p = Peer::connected(ServerConfig::default());
    p.get(1);
    p.get(1);
    p.flush().unwrap();
    expect_request(p.conn.poll_event());
    expect_reset(p.conn.poll_event(), 1, ErrorCode::STREAM_CLOSED);
    assert!(p.read().contains(&rst(1, ErrorCode::STREAM_CLOSED)));

    // DATA after the client's own RST_STREAM.
    let mut p = Peer::connected(ServerConfig::default());
    p.headers(1, &request("POST", "/"), false);
    encode_rst_stream(&mut p.wire, 1, ErrorCode::CANCEL);
    p.data(1, b"late", true);
    p.flush().unwrap();
    assert!(p.read().contains(&rst(1, ErrorCode::STREAM_CLOSED)));

    // DATA on a stream closed by END_STREAM both ways.
    let mut p = Peer::connected(ServerConfig::default());
    p.get(1);
    p.flush().unwrap();
    expect_request(p.conn.poll_event());
    p.conn.send_headers(1, 204, [], true).unwrap();
    p.data(1, b"late", true);
    p.flush().unwrap();
    assert!(p.read().contains(&rst(1, ErrorCode::STREAM_CLOSED)));

    // DATA crossing our reset: ignored, and its bytes go back to the
    // connection window.
    let mut p = Peer::connected(ServerConfig::default());
    p.headers(1, &request("POST", "/"), false);
    p.flush().unwrap();
    expect_request(p.conn.poll_event());
    p.conn.reset(1, ErrorCode::CANCEL);
    p.read();
    p.data(1, b"late", false);
    p.flush().unwrap();
    assert!(!p
        .read()
        .iter()
        .any(|g| matches!(g, Got::Other(Frame::RstStream { .. }))));
}

/// §5.3.1: a PRIORITY frame making a stream depend on itself is a stream
/// error, answered even on an idle stream (h2spec 5.3.1 #2); the
/// connection goes on.
#[test]
fn priority_on_itself_resets_that_stream() {
    let mut p = Peer::connected(ServerConfig::default());
    p.raw(0x2, 0, 3, &[0, 0, 0, 3, 15]);
    p.flush().unwrap();
    assert!(p.read().contains(&rst(3, ErrorCode::PROTOCOL_ERROR)));
    p.get(5);
    p.flush().unwrap();
    expect_request(p.conn.poll_event());
}

#[test]
fn arbitrary_frames_never_panic() {
    let mut steps = 0;
    for seed in 1..300u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut p = Peer::connected(ServerConfig {
            max_concurrent_streams: 4,
            initial_stream_window: 1000,
            connection_window: 100_000,
            ..ServerConfig::default()
        });
        p.headers(1, &request("POST", "/"), false);
        let mut next = 3;
        for _ in 0..200 {
            // Mostly plausible frames, so that the run gets deep into the
            // connection's state rather than fail on the first one.
            let old = (rng.below(u64::from(next / 2)) as u32) * 2 + 1;
            match rng.below(20) {
                0 | 1 => {
                    p.get(next);
                    next += 2;
                }
                2 | 3 => {
                    p.headers(next, &request("POST", "/"), false);
                    next += 2;
                }
                4..=7 => {
                    let len = rng.below(1500) as usize;
                    p.data(old, &vec![1; len], rng.below(4) == 0);
                }
                8 => encode_rst_stream(&mut p.wire, old, ErrorCode(rng.below(14) as u32)),
                9 | 10 => {
                    let id = if rng.below(2) == 0 { 0 } else { old };
                    let inc = 1 + rng.below(100_000) as u32;
                    crate::frame::encode_window_update(&mut p.wire, id, inc);
                }
                11 => crate::frame::encode_ping(&mut p.wire, false, [7; 8]),
                12 => p.settings(&Settings {
                    initial_window_size: Some(rng.below(100_000) as u32),
                    max_frame_size: Some(16_384 + rng.below(100_000) as u32),
                    header_table_size: Some(rng.below(8192) as u32),
                    ..Settings::default()
                }),
                // Trailers on a closed stream end the connection: mostly
                // send them where they are legal.
                13 if p.conn.streams.contains(old) || rng.below(10) == 0 => {
                    p.headers(old, &[("x-trailer", "1")], rng.below(4) != 0);
                }
                14 => p.raw(crate::frame::kind::PRIORITY, 0, old, &[0, 0, 0, 0, 9]),
                _ if rng.below(30) != 0 => {}
                _ => {
                    let len = rng.below(40) as usize;
                    let payload: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                    let (kind, flags) = (rng.below(12) as u8, rng.next() as u8);
                    p.raw(kind, flags, rng.below(8) as u32, &payload);
                }
            }
            if p.flush().is_err() {
                break;
            }
            steps += 1;
            // The application side, also at random.
            for e in p.events() {
                match e {
                    Event::Request { stream, head, .. } => {
                        p.conn.recycle(head);
                        if rng.below(3) == 0 {
                            p.conn.reset(stream, ErrorCode::CANCEL);
                        } else {
                            let _ = p.conn.send_headers(stream, 200, [], false);
                            let mut body = Bytes::from(vec![0; rng.below(3000) as usize]);
                            let _ = p.conn.send_data(stream, &mut body, rng.below(2) == 0);
                        }
                    }
                    Event::Data { stream, data, .. } => {
                        p.conn.release(stream, data.len() as u32);
                    }
                    Event::Trailers { fields, .. } => p.conn.recycle(fields),
                    _ => {}
                }
            }
            // The client reads it all: it must parse.
            p.read();
        }
    }
    // Most runs went deep.
    assert!(steps > 300 * 60, "only {steps} steps");
}

#[test]
fn a_reset_stream_is_remembered_for_late_trailers_only() {
    let mut p = Peer::connected(ServerConfig::default());
    p.headers(1, &request("POST", "/"), false);
    p.flush().unwrap();
    p.events();
    encode_rst_stream(&mut p.wire, 1, ErrorCode::CANCEL);
    p.flush().unwrap();
    expect_reset(p.conn.poll_event(), 1, ErrorCode::CANCEL);
    // The peer reset it, so no HEADERS may follow: a reused id.
    p.headers(1, &[("x-late", "1")], true);
    assert_conn_error(p.flush(), ErrorCode::PROTOCOL_ERROR);
}
