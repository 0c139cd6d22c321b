//! The connection's exchanges, from RFC 9112's rules: order, framing both ways, keep-alive and close, limits.

use super::*;

fn conn() -> ServerConn {
    ServerConn::new(ServerConfig::default())
}

fn out(c: &mut ServerConn) -> String {
    let mut s = String::new();
    while let Some(b) = c.poll_output() {
        s.push_str(std::str::from_utf8(&b).expect("ascii"));
    }
    s
}

fn request(c: &mut ServerConn) -> (u32, RequestHead, bool) {
    match c.poll_event() {
        Some(Event::Request {
            stream,
            head,
            end_stream,
        }) => (stream, head, end_stream),
        other => panic!("expected a request, got {other:?}"),
    }
}

fn data(c: &mut ServerConn) -> (Bytes, bool) {
    match c.poll_event() {
        Some(Event::Data {
            data, end_stream, ..
        }) => (data, end_stream),
        other => panic!("expected data, got {other:?}"),
    }
}

fn respond(c: &mut ServerConn, stream: u32, body: &str) {
    let len = body.len().to_string();
    c.send_headers(
        stream,
        200,
        [(&b"content-length"[..], len.as_bytes())],
        body.is_empty(),
    )
    .expect("head");
    if !body.is_empty() {
        let mut b = Bytes::copy_from_slice(body.as_bytes());
        assert_eq!(c.send_data(stream, &mut b, true), Ok(body.len()));
        assert!(b.is_empty(), "all of it taken");
    }
}

#[test]
fn pipelined_requests_are_taken_one_exchange_at_a_time() {
    let mut c = conn();
    let mut buf = BytesMut::from(
        &b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n"[..],
    );
    c.recv(&mut buf).unwrap();
    let (s1, head, end) = request(&mut c);
    assert_eq!((s1, head.target(), end), (1, &b"/1"[..], true));
    assert!(
        c.poll_event().is_none(),
        "the second waits for the first's response"
    );
    assert!(!buf.is_empty(), "and stays in the buffer");
    c.recv(&mut buf).unwrap();
    assert!(c.poll_event().is_none());
    respond(&mut c, s1, "one");
    assert_eq!(
        out(&mut c),
        "HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\none"
    );
    c.recv(&mut buf).unwrap();
    let (s2, head, _) = request(&mut c);
    assert_eq!((s2, head.target()), (3, &b"/2"[..]));
    assert!(buf.is_empty());
    respond(&mut c, s2, "two");
    assert!(out(&mut c).ends_with("two"));
    assert!(!c.is_closed());
    assert_eq!(c.requests(), 2);
}

#[test]
fn a_response_to_another_stream_or_out_of_order_is_refused() {
    let mut c = conn();
    let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"[..]);
    c.recv(&mut buf).unwrap();
    let (s, _, _) = request(&mut c);
    let none: [(&[u8], &[u8]); 0] = [];
    assert_eq!(
        c.send_headers(s + 2, 200, none, true),
        Err(SendError::UnknownStream)
    );
    assert_eq!(
        c.send_data(s, &mut Bytes::new(), true),
        Err(SendError::NoHeaders)
    );
    c.send_headers(s, 204, none, true).unwrap();
    assert_eq!(
        c.send_headers(s, 200, none, true),
        Err(SendError::UnknownStream)
    );
    assert_eq!(out(&mut c), "HTTP/1.1 204 No Content\r\n\r\n");
}

#[test]
fn a_content_length_body_ends_with_its_last_bytes() {
    let mut c = conn();
    let mut buf =
        BytesMut::from(&b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nhello"[..]);
    c.recv(&mut buf).unwrap();
    let (s, _, end) = request(&mut c);
    assert!(!end);
    assert_eq!(data(&mut c), (Bytes::from_static(b"hello"), false));
    buf.extend_from_slice(b"world");
    c.recv(&mut buf).unwrap();
    assert_eq!(data(&mut c), (Bytes::from_static(b"world"), true));
    assert!(c.poll_event().is_none(), "no empty piece after the last");
    c.release(10);
    respond(&mut c, s, "");
    assert!(!c.is_closed());
}

#[test]
fn a_chunked_body_with_trailers_ends_with_the_trailers() {
    let mut c = conn();
    let mut buf = BytesMut::from(
        &b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nx-sum: 1\r\n\r\n"[..],
    );
    c.recv(&mut buf).unwrap();
    request(&mut c);
    assert_eq!(data(&mut c), (Bytes::from_static(b"hello"), false));
    match c.poll_event() {
        Some(Event::Trailers { raw, .. }) => {
            assert_eq!(
                crate::trailer_fields(&raw),
                vec![(&b"x-sum"[..], &b"1"[..])]
            );
        }
        other => panic!("expected trailers, got {other:?}"),
    }
    assert!(c.poll_event().is_none(), "trailers end the request");
}

#[test]
fn a_chunked_body_without_trailers_ends_with_an_empty_piece() {
    let mut c = conn();
    let mut buf = BytesMut::from(
        &b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"[..],
    );
    c.recv(&mut buf).unwrap();
    request(&mut c);
    assert_eq!(data(&mut c), (Bytes::from_static(b"hello"), false));
    buf.extend_from_slice(b"0\r\n\r\n");
    c.recv(&mut buf).unwrap();
    assert_eq!(data(&mut c), (Bytes::new(), true));
}

#[test]
fn body_bytes_wait_for_release_beyond_the_window() {
    let mut c = ServerConn::new(ServerConfig {
        body_window: 8,
        ..ServerConfig::default()
    });
    let mut buf =
        BytesMut::from(&b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 20\r\n\r\n0123456789"[..]);
    c.recv(&mut buf).unwrap();
    request(&mut c);
    assert_eq!(data(&mut c).0.len(), 10);
    buf.extend_from_slice(b"abcdefghij");
    c.recv(&mut buf).unwrap();
    assert!(c.poll_event().is_none(), "10 unreleased ≥ window 8");
    assert_eq!(buf.len(), 10);
    assert!(c.wants_input(buf.len()), "a small buffer may still fill");
    assert!(
        !c.wants_input(crate::MAX_BUFFERED_INPUT),
        "a full one may not"
    );
    c.release(5);
    c.recv(&mut buf).unwrap();
    assert_eq!(data(&mut c), (Bytes::from_static(b"abcdefghij"), true));
}

#[test]
fn expect_100_continue_is_answered_before_the_body_is_read() {
    let mut c = conn();
    let mut buf = BytesMut::from(
        &b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"[..],
    );
    c.recv(&mut buf).unwrap();
    request(&mut c);
    assert_eq!(out(&mut c), "HTTP/1.1 100 Continue\r\n\r\n");
    // Not for a request without a body: there is nothing to wait for.
    let mut c = conn();
    let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n\r\n"[..]);
    c.recv(&mut buf).unwrap();
    request(&mut c);
    assert_eq!(out(&mut c), "");
}

#[test]
fn http_1_0_is_refused_with_426_unless_accepted() {
    let mut c = conn();
    let mut buf = BytesMut::from(&b"GET / HTTP/1.0\r\n\r\n"[..]);
    assert_eq!(c.recv(&mut buf), Err(Error::Http10NotAccepted));
    assert!(out(&mut c).starts_with("HTTP/1.1 426 Upgrade Required\r\n"));
    assert!(c.is_closed());

    let mut c = ServerConn::new(ServerConfig {
        accept_http_10: true,
        ..ServerConfig::default()
    });
    let mut buf = BytesMut::from(&b"GET / HTTP/1.0\r\n\r\n"[..]);
    c.recv(&mut buf).unwrap();
    let (s, _, _) = request(&mut c);
    // No length known: the body ends with the connection.
    let none: [(&[u8], &[u8]); 0] = [];
    c.send_headers(s, 200, none, false).unwrap();
    c.send_data(s, &mut Bytes::from_static(b"x"), true).unwrap();
    assert_eq!(out(&mut c), "HTTP/1.0 200 OK\r\nconnection: close\r\n\r\nx");
    assert!(c.is_closed());
}

#[test]
fn http_1_0_keep_alive_is_kept_when_the_length_is_known() {
    let mut c = ServerConn::new(ServerConfig {
        accept_http_10: true,
        ..ServerConfig::default()
    });
    let mut buf = BytesMut::from(&b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"[..]);
    c.recv(&mut buf).unwrap();
    let (s, _, _) = request(&mut c);
    respond(&mut c, s, "ok");
    assert_eq!(
        out(&mut c),
        "HTTP/1.0 200 OK\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\nok"
    );
    assert!(!c.is_closed());
}

#[test]
fn connection_close_is_answered_in_kind_and_ends_the_connection() {
    let mut c = conn();
    let mut buf = BytesMut::from(
        &b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"
            [..],
    );
    c.recv(&mut buf).unwrap();
    let (s, _, _) = request(&mut c);
    respond(&mut c, s, "");
    assert_eq!(
        out(&mut c),
        "HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    );
    assert!(c.is_closed());
    c.recv(&mut buf).unwrap();
    assert!(c.poll_event().is_none(), "nothing after close");
    assert!(!c.wants_input(0));
}

#[test]
fn a_response_without_a_length_is_chunked_and_carries_trailers() {
    let mut c = conn();
    let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"[..]);
    c.recv(&mut buf).unwrap();
    let (s, _, _) = request(&mut c);
    c.send_headers(
        s,
        200,
        [
            (&b"content-type"[..], &b"application/grpc"[..]),
            (b"transfer-encoding", b"gzip"),
            (b"connection", b"x"),
        ],
        false,
    )
    .unwrap();
    c.send_data(s, &mut Bytes::from_static(b"abc"), false)
        .unwrap();
    c.send_trailers(s, [(&b"grpc-status"[..], &b"0"[..])])
        .unwrap();
    assert_eq!(
        out(&mut c),
        "HTTP/1.1 200 OK\r\ncontent-type: application/grpc\r\ntransfer-encoding: chunked\r\n\r\n\
         3\r\nabc\r\n0\r\ngrpc-status: 0\r\n\r\n"
    );
    assert!(!c.is_closed());
}

#[test]
fn head_and_304_keep_the_length_and_send_no_body() {
    let mut c = conn();
    let mut buf = BytesMut::from(&b"HEAD / HTTP/1.1\r\nHost: a\r\n\r\n"[..]);
    c.recv(&mut buf).unwrap();
    let (s, _, _) = request(&mut c);
    c.send_headers(s, 200, [(&b"content-length"[..], &b"42"[..])], false)
        .unwrap();
    c.send_data(s, &mut Bytes::from_static(b"ignored"), true)
        .unwrap();
    assert_eq!(out(&mut c), "HTTP/1.1 200 OK\r\ncontent-length: 42\r\n\r\n");
    assert!(!c.is_closed());
}

#[test]
fn a_smuggling_attempt_is_answered_400_and_closes() {
    let mut c = conn();
    let mut buf = BytesMut::from(
        &b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"[..],
    );
    assert!(matches!(c.recv(&mut buf), Err(Error::BadFraming(_))));
    assert_eq!(
        out(&mut c),
        "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\ncontent-length: 11\r\nconnection: close\r\n\r\nBad Request"
    );
    assert!(c.is_closed());
    assert!(c.poll_event().is_none());
}

#[test]
fn a_bad_chunk_after_the_response_began_just_closes() {
    let mut c = conn();
    let mut buf =
        BytesMut::from(&b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"[..]);
    c.recv(&mut buf).unwrap();
    let (s, _, _) = request(&mut c);
    let none: [(&[u8], &[u8]); 0] = [];
    c.send_headers(s, 200, none, false).unwrap();
    out(&mut c);
    buf.extend_from_slice(b"zz\r\n");
    assert!(c.recv(&mut buf).is_err());
    assert_eq!(out(&mut c), "", "no second status line inside a body");
    assert!(c.is_closed());
}

#[test]
fn going_away_closes_an_idle_connection_and_ends_a_busy_one_after_its_response() {
    let mut c = conn();
    c.go_away();
    assert!(c.is_closed());

    let mut c = conn();
    let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"[..]);
    c.recv(&mut buf).unwrap();
    let (s, _, _) = request(&mut c);
    c.go_away();
    assert!(!c.is_closed(), "its request is still answered");
    respond(&mut c, s, "");
    assert!(out(&mut c).contains("connection: close\r\n"));
    assert!(c.is_closed());
}

#[test]
fn an_answer_before_the_whole_request_closes_the_connection() {
    let mut c = conn();
    let mut buf =
        BytesMut::from(&b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nab"[..]);
    c.recv(&mut buf).unwrap();
    let (s, _, _) = request(&mut c);
    data(&mut c);
    respond(&mut c, s, "");
    assert!(
        out(&mut c).contains("connection: close\r\n"),
        "said while it could be"
    );
    assert!(c.is_closed(), "the rest of the body is not a request");
}

#[test]
fn a_reset_response_closes_the_connection() {
    let mut c = conn();
    let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"[..]);
    c.recv(&mut buf).unwrap();
    let (s, _, _) = request(&mut c);
    let none: [(&[u8], &[u8]); 0] = [];
    c.send_headers(s, 200, none, false).unwrap();
    c.reset(s);
    assert!(c.is_closed());
}

#[test]
fn a_reject_answers_the_current_request_and_closes() {
    let mut c = conn();
    let mut buf = BytesMut::from(
        &b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n"[..],
    );
    c.recv(&mut buf).unwrap();
    let (_, head, _) = request(&mut c);
    assert!(head.upgrade);
    c.reject(403);
    assert!(out(&mut c).starts_with("HTTP/1.1 403 Forbidden\r\n"));
    assert!(c.is_closed());
}

#[test]
fn trailers_end_the_request_even_when_the_window_is_full() {
    let mut c = ServerConn::new(ServerConfig {
        body_window: 1,
        ..ServerConfig::default()
    });
    let mut buf = BytesMut::from(
        &b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nx: 1\r\n\r\n"[..],
    );
    c.recv(&mut buf).unwrap();
    let (s, _, _) = request(&mut c);
    data(&mut c);
    assert!(matches!(c.poll_event(), Some(Event::Trailers { .. })));
    c.recv(&mut buf).unwrap();
    assert!(
        c.poll_event().is_none(),
        "no empty piece after the trailers"
    );
    respond(&mut c, s, "");
    assert!(!c.is_closed(), "the request was complete");
}

#[test]
fn a_head_limit_above_the_buffer_bound_is_still_reached() {
    let mut c = ServerConn::new(ServerConfig {
        limits: Limits {
            max_head_bytes: 96 * 1024,
            max_headers: 100,
        },
        ..ServerConfig::default()
    });
    let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\nHost: a\r\nX-Big: "[..]);
    buf.extend_from_slice(&vec![b'a'; 80 * 1024]);
    c.recv(&mut buf).unwrap();
    assert!(
        c.wants_input(buf.len()),
        "an 80 KiB head under a 96 KiB limit reads on"
    );
    buf.extend_from_slice(&vec![b'a'; 20 * 1024]);
    assert!(matches!(c.recv(&mut buf), Err(Error::HeadTooLarge { .. })));
    assert_eq!(c.take_refusal(), Some(431));
    assert_eq!(c.take_refusal(), None);
}

#[test]
fn a_refusal_after_the_response_began_is_not_reported_as_answered() {
    let mut c = conn();
    let mut buf =
        BytesMut::from(&b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"[..]);
    c.recv(&mut buf).unwrap();
    let (s, _, _) = request(&mut c);
    let none: [(&[u8], &[u8]); 0] = [];
    c.send_headers(s, 200, none, false).unwrap();
    buf.extend_from_slice(b"zz\r\n");
    assert!(c.recv(&mut buf).is_err());
    assert_eq!(c.take_refusal(), None);
}

#[test]
fn a_101_hands_the_connection_over_with_the_bytes_after_the_head() {
    let mut c = conn();
    let mut buf = BytesMut::from(
        &b"GET /chat HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n\x81\x02hi"[..],
    );
    c.recv(&mut buf).unwrap();
    let (s, head, end) = request(&mut c);
    assert!(head.upgrade && end);
    // What the client sent after its head is not a request: it waits.
    assert_eq!(&buf[..], b"\x81\x02hi");
    assert!(!c.can_take());
    c.send_switching(
        s,
        101,
        [
            (&b"sec-websocket-accept"[..], &b"x"[..]),
            (b"upgrade", b"h2c"),
        ],
        Some(b"websocket"),
    )
    .unwrap();
    assert_eq!(
        out(&mut c),
        "HTTP/1.1 101 Switching Protocols\r\nsec-websocket-accept: x\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n"
    );
    assert!(c.is_upgraded() && c.is_closed());
    assert!(!c.wants_input(buf.len()));
    let none: [(&[u8], &[u8]); 0] = [];
    assert!(c.send_headers(s, 200, none, true).is_err());
}

#[test]
fn a_connect_answered_2xx_becomes_a_tunnel_without_framing() {
    let mut c = conn();
    let mut buf = BytesMut::from(&b"CONNECT db:5432 HTTP/1.1\r\nHost: db:5432\r\n\r\nstartup"[..]);
    c.recv(&mut buf).unwrap();
    let (s, head, end) = request(&mut c);
    assert!(end);
    assert_eq!(head.target(), b"db:5432");
    assert_eq!(&buf[..], b"startup");
    c.send_switching(s, 200, [(&b"server"[..], &b"envoy"[..])], None)
        .unwrap();
    assert_eq!(out(&mut c), "HTTP/1.1 200 OK\r\nserver: envoy\r\n\r\n");
    assert!(c.is_upgraded());
}

#[test]
fn exchange_ids_are_odd_and_stay_below_2_pow_31() {
    use super::next_stream_id;
    assert_eq!(next_stream_id(0), 1);
    assert_eq!(next_stream_id(1), 3);
    assert_eq!(next_stream_id((1 << 31) - 3), (1 << 31) - 1);
    assert_eq!(next_stream_id((1 << 31) - 1), 1);
}
