//! Envoy's abuse limits on a server connection: `max_headers_count`, the underscore action, and the inbound and outbound flood limits.

use super::*;
use crate::conn::{Flood, FloodLimits, ServerCounts, UnderscoreAction};
use crate::frame::{encode_ping, kind};

fn with_count(max: u32) -> ServerConfig {
    ServerConfig {
        max_headers_count: Some(max),
        ..ServerConfig::default()
    }
}

fn with_underscores(action: UnderscoreAction) -> ServerConfig {
    ServerConfig {
        headers_with_underscores: action,
        ..ServerConfig::default()
    }
}

fn with_flood(flood: FloodLimits) -> ServerConfig {
    ServerConfig {
        flood,
        ..ServerConfig::default()
    }
}

/// `request("GET", "/")` (4 pseudo-header fields) and `n` more fields.
fn get_with(n: usize) -> Vec<(String, String)> {
    let mut f = owned(&request("GET", "/"));
    f.extend((0..n).map(|i| (format!("x-h{i}"), "v".to_string())));
    f
}

fn send(p: &mut Peer, stream: u32, f: &[(String, String)], end: bool) {
    let pairs: Vec<(&str, &str)> = f.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    p.headers(stream, &pairs, end);
}

#[test]
fn max_headers_count_counts_pseudo_headers_and_resets_past_it() {
    let mut p = Peer::connected(with_count(6));
    // 4 pseudo-header fields + 2: at the limit, served.
    send(&mut p, 1, &get_with(2), true);
    // 4 + 3: one over.
    send(&mut p, 3, &get_with(3), true);
    p.flush().unwrap();
    let (stream, head, _) = expect_request(p.conn.poll_event());
    assert_eq!((stream, head.len()), (1, 6));
    assert!(
        p.conn.poll_event().is_none(),
        "no event for the refused one"
    );
    assert_eq!(p.read(), [rst(3, ErrorCode::INTERNAL_ERROR)]);
    assert_eq!(
        p.conn.take_counts(),
        ServerCounts {
            header_overflow: 1,
            ..ServerCounts::default()
        }
    );
    assert!(p.conn.take_counts().is_zero(), "taken");
    // The connection goes on.
    p.get(5);
    p.flush().unwrap();
    assert_eq!(expect_request(p.conn.poll_event()).0, 5);
}

/// Envoy 1.40 counts each crumb: 8 fields pass `max_headers_count: 8`,
/// one more `cookie` field is reset (checked with nghttp against it).
#[test]
fn cookie_crumbs_count_toward_max_headers_count_as_in_envoy() {
    let mut p = Peer::connected(with_count(6));
    // 4 pseudo-header fields, one regular field and one crumb: at the limit.
    let mut f = get_with(1);
    f.push(("cookie".to_string(), "c0=1".to_string()));
    send(&mut p, 1, &f, true);
    p.flush().unwrap();
    assert_eq!(expect_request(p.conn.poll_event()).1.len(), 6);
    // A second crumb is one field too many.
    f.push(("cookie".to_string(), "c1=1".to_string()));
    send(&mut p, 3, &f, true);
    p.flush().unwrap();
    assert!(
        p.conn.poll_event().is_none(),
        "no event for the refused one"
    );
    assert_eq!(p.read(), [rst(3, ErrorCode::INTERNAL_ERROR)]);
    assert_eq!(p.conn.take_counts().header_overflow, 1);
}

#[test]
fn trailers_over_max_headers_count_reset_the_stream() {
    let mut p = Peer::connected(with_count(5));
    let post = request("POST", "/");
    p.headers(1, &post, false);
    let trailers: Vec<(String, String)> = (0..6).map(|i| (format!("t{i}"), "v".into())).collect();
    send(&mut p, 1, &trailers, true);
    p.flush().unwrap();
    expect_request(p.conn.poll_event());
    expect_reset(p.conn.poll_event(), 1, ErrorCode::INTERNAL_ERROR);
    assert_eq!(p.conn.take_counts().header_overflow, 1);
}

#[test]
fn no_count_limit_by_default() {
    let mut p = Peer::connected(ServerConfig::default());
    send(&mut p, 1, &get_with(500), true);
    p.flush().unwrap();
    assert_eq!(expect_request(p.conn.poll_event()).1.len(), 504);
}

#[test]
fn underscores_rejected_reset_the_stream() {
    let mut p = Peer::connected(with_underscores(UnderscoreAction::Reject));
    let mut f = get_with(0);
    f.push(("x_foo".into(), "1".into()));
    send(&mut p, 1, &f, true);
    p.get(3);
    p.flush().unwrap();
    assert_eq!(expect_request(p.conn.poll_event()).0, 3);
    assert!(p.conn.poll_event().is_none());
    assert_eq!(p.read(), [rst(1, ErrorCode::INTERNAL_ERROR)]);
    assert_eq!(
        p.conn.take_counts(),
        ServerCounts {
            rejected_with_underscores: 1,
            ..ServerCounts::default()
        }
    );
}

#[test]
fn underscores_dropped_leave_the_rest_of_the_request() {
    let mut p = Peer::connected(with_underscores(UnderscoreAction::Drop));
    let mut f = get_with(1);
    f.push(("x_foo".into(), "1".into()));
    f.push(("x_bar".into(), "2".into()));
    send(&mut p, 1, &f, true);
    p.flush().unwrap();
    let (_, head, _) = expect_request(p.conn.poll_event());
    assert_eq!(fields(&head), get_with(1));
    assert_eq!(p.conn.take_counts().dropped_headers_with_underscores, 2);
}

#[test]
fn dropped_fields_do_not_count_toward_max_headers_count() {
    let cfg = ServerConfig {
        max_headers_count: Some(5),
        headers_with_underscores: UnderscoreAction::Drop,
        ..ServerConfig::default()
    };
    let mut p = Peer::connected(cfg);
    let mut f = get_with(1);
    f.extend((0..5).map(|i| (format!("x_{i}"), "v".to_string())));
    send(&mut p, 1, &f, true);
    p.flush().unwrap();
    assert_eq!(expect_request(p.conn.poll_event()).1.len(), 5);
}

#[test]
fn underscores_allowed_by_default() {
    let mut p = Peer::connected(ServerConfig::default());
    let mut f = get_with(0);
    f.push(("x_foo".into(), "1".into()));
    send(&mut p, 1, &f, true);
    p.flush().unwrap();
    assert_eq!(fields(&expect_request(p.conn.poll_event()).1), f);
}

fn priority(p: &mut Peer, stream: u32) {
    // Depends on stream 0, weight 16, not exclusive.
    p.raw(kind::PRIORITY, 0, stream, &[0, 0, 0, 0, 15]);
}

#[test]
fn priority_frames_past_the_allowance_per_stream_end_the_connection() {
    let mut p = Peer::connected(with_flood(FloodLimits {
        max_inbound_priority_frames_per_stream: Some(2),
        ..FloodLimits::default()
    }));
    // 2 × (1 + 0 streams).
    priority(&mut p, 1);
    priority(&mut p, 3);
    p.flush().unwrap();
    // One stream opened: 2 × (1 + 1) = 4 in all.
    p.get(1);
    priority(&mut p, 5);
    priority(&mut p, 7);
    p.flush().unwrap();
    p.events();
    assert_eq!(p.conn.flood(), None);
    priority(&mut p, 9);
    assert_conn_error(p.flush(), ErrorCode::ENHANCE_YOUR_CALM);
    assert_eq!(p.conn.flood(), Some(Flood::InboundPriorityFrames));
    assert_eq!(goaway(&p.read()), Some((1, ErrorCode::ENHANCE_YOUR_CALM)));
}

#[test]
fn priority_frames_on_self_count_too() {
    let mut p = Peer::connected(with_flood(FloodLimits {
        max_inbound_priority_frames_per_stream: Some(1),
        ..FloodLimits::default()
    }));
    // Stream 1 depending on itself: a stream error, still a PRIORITY frame.
    p.raw(kind::PRIORITY, 0, 1, &[0, 0, 0, 1, 15]);
    p.flush().unwrap();
    p.raw(kind::PRIORITY, 0, 3, &[0, 0, 0, 3, 15]);
    assert_conn_error(p.flush(), ErrorCode::ENHANCE_YOUR_CALM);
    assert_eq!(p.conn.flood(), Some(Flood::InboundPriorityFrames));
}

#[test]
fn priority_frames_are_unlimited_by_default() {
    let mut p = Peer::connected(ServerConfig::default());
    for i in 0..1000 {
        priority(&mut p, 2 * i + 1);
    }
    p.flush().unwrap();
}

#[test]
fn consecutive_empty_frames_end_the_connection() {
    let mut p = Peer::connected(with_flood(FloodLimits {
        max_consecutive_inbound_frames_with_empty_payload: Some(1),
        ..FloodLimits::default()
    }));
    p.headers(1, &request("POST", "/"), false);
    // Empty, non-empty, empty: never two in a row.
    p.data(1, b"", false);
    p.data(1, b"x", false);
    p.data(1, b"", false);
    // Other frames do not break a run.
    p.raw(kind::PING, 0, 0, &[0; 8]);
    p.flush().unwrap();
    p.events();
    p.data(1, b"", false);
    assert_conn_error(p.flush(), ErrorCode::ENHANCE_YOUR_CALM);
    assert_eq!(p.conn.flood(), Some(Flood::InboundEmptyFrames));
}

#[test]
fn an_empty_frame_with_end_stream_is_not_empty() {
    let mut p = Peer::connected(with_flood(FloodLimits {
        max_consecutive_inbound_frames_with_empty_payload: Some(0),
        ..FloodLimits::default()
    }));
    p.headers(1, &request("POST", "/"), false);
    p.data(1, b"", true);
    p.flush().unwrap();
    p.headers(3, &request("POST", "/"), false);
    p.data(3, b"", false);
    assert_conn_error(p.flush(), ErrorCode::ENHANCE_YOUR_CALM);
}

fn window_update_frame(p: &mut Peer) {
    p.raw(kind::WINDOW_UPDATE, 0, 0, &1u32.to_be_bytes());
}

#[test]
fn window_updates_past_the_allowance_end_the_connection() {
    let mut p = Peer::connected(with_flood(FloodLimits {
        max_inbound_window_update_frames_per_data_frame_sent: Some(1),
        ..FloodLimits::default()
    }));
    // 5 + 2 × (0 streams + 1 × 0 DATA frames).
    for _ in 0..5 {
        window_update_frame(&mut p);
    }
    p.flush().unwrap();
    // A stream and a DATA frame sent: 5 + 2 × (1 + 1) = 9.
    p.headers(1, &request("POST", "/"), false);
    p.flush().unwrap();
    p.events();
    p.conn.send_headers(1, 200, [], false).unwrap();
    let mut body = Bytes::from_static(b"hello");
    p.conn.send_data(1, &mut body, false).unwrap();
    for _ in 0..4 {
        window_update_frame(&mut p);
    }
    p.flush().unwrap();
    window_update_frame(&mut p);
    assert_conn_error(p.flush(), ErrorCode::ENHANCE_YOUR_CALM);
    assert_eq!(p.conn.flood(), Some(Flood::InboundWindowUpdateFrames));
}

#[test]
fn envoy_limits_let_ordinary_traffic_through() {
    let mut p = Peer::connected(with_flood(FloodLimits::ENVOY));
    for i in 0..50 {
        let stream = 2 * i + 1;
        p.headers(stream, &request("POST", "/"), false);
        p.data(stream, b"body", true);
        p.flush().unwrap();
        p.events();
        p.conn.send_headers(stream, 200, [], false).unwrap();
        let mut body = Bytes::from_static(b"hello");
        p.conn.send_data(stream, &mut body, true).unwrap();
        window_update_frame(&mut p);
        p.read();
        p.conn.check_outbound(0).unwrap();
    }
    assert_eq!(p.conn.flood(), None);
    assert_eq!(p.conn.outbound_frames(), Some((0, 0)));
}

/// Bytes `poll_output` hands out.
fn take_output(p: &mut Peer) -> usize {
    let mut n = 0;
    while let Some(chunk) = p.conn.poll_output() {
        n += chunk.len();
    }
    n
}

#[test]
fn unwritten_control_frames_past_the_limit_end_the_connection() {
    let mut p = Peer::connected(with_flood(FloodLimits {
        max_outbound_control_frames: Some(3),
        ..FloodLimits::default()
    }));
    p.conn.check_outbound(0).unwrap();
    // Three PINGs answered, none written: at the limit.
    for _ in 0..3 {
        encode_ping(&mut p.wire, false, [1; 8]);
    }
    p.flush().unwrap();
    let held = take_output(&mut p);
    assert_eq!(held, 3 * 17);
    assert_eq!(p.conn.check_outbound(held), Ok(()));
    assert_eq!(p.conn.outbound_frames(), Some((3, 3)));
    // One and a bit written: the part-written frame still counts.
    assert_eq!(p.conn.check_outbound(held - 17 - 5), Ok(()));
    assert_eq!(p.conn.outbound_frames(), Some((2, 2)));
    // Three more: 5 unwritten.
    for _ in 0..3 {
        encode_ping(&mut p.wire, false, [1; 8]);
    }
    p.flush().unwrap();
    let held = 17 - 5 + take_output(&mut p);
    assert_eq!(
        p.conn.check_outbound(held),
        Err(Flood::OutboundControlFrames)
    );
    assert_eq!(p.conn.flood(), Some(Flood::OutboundControlFrames));
    // The connection is over.
    encode_ping(&mut p.wire, false, [1; 8]);
    assert_conn_error(p.flush(), ErrorCode::ENHANCE_YOUR_CALM);
}

#[test]
fn unwritten_frames_past_the_limit_end_the_connection() {
    let mut p = Peer::connected(with_flood(FloodLimits {
        max_outbound_frames: Some(4),
        ..FloodLimits::default()
    }));
    p.conn.check_outbound(0).unwrap();
    p.headers(1, &request("GET", "/"), true);
    p.flush().unwrap();
    p.events();
    // HEADERS and two DATA frames: a large payload goes out as a chunk of
    // its own, and its frame counts until that chunk is written.
    p.conn.send_headers(1, 200, [], false).unwrap();
    let mut body = Bytes::from(vec![7u8; 1000]);
    p.conn.send_data(1, &mut body, false).unwrap();
    let mut body = Bytes::from(vec![7u8; 1000]);
    p.conn.send_data(1, &mut body, false).unwrap();
    let held = take_output(&mut p);
    assert_eq!(p.conn.check_outbound(held), Ok(()));
    assert_eq!(p.conn.outbound_frames(), Some((3, 0)));
    // Everything but the last payload byte written: its frame still counts.
    assert_eq!(p.conn.check_outbound(1), Ok(()));
    assert_eq!(p.conn.outbound_frames(), Some((1, 0)));
    assert_eq!(p.conn.check_outbound(0), Ok(()));
    assert_eq!(p.conn.outbound_frames(), Some((0, 0)));
    // Five frames held: one over.
    for _ in 0..5 {
        let mut body = Bytes::from_static(b"x");
        p.conn.send_data(1, &mut body, false).unwrap();
    }
    let held = take_output(&mut p);
    assert_eq!(p.conn.check_outbound(held), Err(Flood::OutboundFrames));
}

#[test]
fn without_outbound_limits_nothing_is_counted() {
    let mut p = Peer::connected(ServerConfig::default());
    for _ in 0..5000 {
        encode_ping(&mut p.wire, false, [1; 8]);
    }
    p.flush().unwrap();
    let held = take_output(&mut p);
    assert_eq!(p.conn.check_outbound(held), Ok(()));
    assert_eq!(p.conn.outbound_frames(), None);
}
