//! The client connection's exchanges, from RFC 9112's rules: requests as written, response framing (§6.3), keep-alive and close (§9), the body window, and bytes that must fail.

use super::*;
use crate::{parse_request_head, trailer_fields, BodyEvent, Version};

fn conn() -> ClientConn {
    ClientConn::new(ClientConfig::default())
}

fn out(c: &mut ClientConn) -> String {
    let mut s = String::new();
    while let Some(b) = c.poll_output() {
        s.push_str(std::str::from_utf8(&b).expect("ascii"));
    }
    s
}

/// An event as plain values, to compare.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Head {
        status: u16,
        informational: bool,
        end_stream: bool,
    },
    Data(String, bool),
    Trailers(String),
}

fn events(c: &mut ClientConn) -> Vec<Ev> {
    let mut v = Vec::new();
    while let Some(ev) = c.poll_event() {
        v.push(match ev {
            ClientEvent::Response {
                head,
                informational,
                end_stream,
            } => Ev::Head {
                status: head.status(),
                informational,
                end_stream,
            },
            ClientEvent::Data { data, end_stream } => {
                Ev::Data(String::from_utf8(data.to_vec()).unwrap(), end_stream)
            }
            ClientEvent::Trailers { raw } => Ev::Trailers(String::from_utf8(raw.to_vec()).unwrap()),
        });
    }
    v
}

fn head(status: u16, end_stream: bool) -> Ev {
    Ev::Head {
        status,
        informational: false,
        end_stream,
    }
}

fn data(s: &str, end: bool) -> Ev {
    Ev::Data(s.into(), end)
}

/// Sends a GET without body, then feeds `wire` at once.
fn get(c: &mut ClientConn, wire: &[u8]) -> Result<Vec<Ev>, Error> {
    c.send_request(b"GET", b"/", b"a", [], true).unwrap();
    out(c);
    let mut buf = BytesMut::from(wire);
    c.recv(&mut buf)?;
    Ok(events(c))
}

fn first_head(c: &mut ClientConn) -> ResponseHead {
    match c.poll_event() {
        Some(ClientEvent::Response { head, .. }) => head,
        other => panic!("expected a head, got {other:?}"),
    }
}

#[test]
fn a_get_has_no_body_and_no_framing_fields() {
    let mut c = conn();
    assert!(c.is_idle() && c.wants_input());
    let fields = [(&b"accept"[..], &b"*/*"[..])];
    c.send_request(b"GET", b"/a?b", b"example.com", fields, true)
        .unwrap();
    assert_eq!(
        out(&mut c),
        "GET /a?b HTTP/1.1\r\nhost: example.com\r\naccept: */*\r\n\r\n"
    );
    assert!(c.request_done() && !c.response_done() && !c.is_idle());
    let mut buf =
        BytesMut::from(&b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A:  b \r\n\r\nhi"[..]);
    c.recv(&mut buf).unwrap();
    let h = first_head(&mut c);
    assert_eq!(
        (h.status(), h.reason(), h.version),
        (200, &b"OK"[..], Version::Http11)
    );
    assert_eq!(h.framing, ResponseFraming::Length(2));
    assert!(h.keep_alive);
    let fields: Vec<_> = h.fields().collect();
    assert_eq!(
        fields,
        [(&b"Content-Length"[..], &b"2"[..]), (b"X-A", b"b")]
    );
    assert_eq!(h.wire_len(), 48);
    assert_eq!(events(&mut c), [data("hi", true)]);
    assert!(buf.is_empty() && c.is_idle() && !c.is_closing());
}

#[test]
fn an_empty_host_is_left_out() {
    let mut c = conn();
    c.send_request(b"GET", b"/", b"", [], true).unwrap();
    assert_eq!(out(&mut c), "GET / HTTP/1.1\r\n\r\n");
}

#[test]
fn a_content_length_body_in_two_pieces() {
    let mut c = conn();
    let fields = [(&b"content-length"[..], &b"5"[..])];
    c.send_request(b"POST", b"/up", b"h", fields, false)
        .unwrap();
    let mut piece = Bytes::from_static(b"he");
    assert_eq!(c.send_data(&mut piece, false), Ok(2));
    assert!(piece.is_empty(), "all of it taken");
    assert!(!c.request_done());
    assert_eq!(c.send_data(&mut Bytes::from_static(b"llo"), true), Ok(3));
    assert!(c.request_done());
    assert_eq!(
        out(&mut c),
        "POST /up HTTP/1.1\r\nhost: h\r\ncontent-length: 5\r\n\r\nhello"
    );
    assert_eq!(
        c.send_data(&mut Bytes::from_static(b"x"), true),
        Err(SendError::RequestComplete)
    );
}

#[test]
fn large_body_pieces_are_written_without_a_copy() {
    let mut c = conn();
    c.send_request(b"PUT", b"/", b"h", [], false).unwrap();
    let big = Bytes::from(vec![b'x'; 4096]);
    let ptr = big.as_ptr();
    c.send_data(&mut big.clone(), true).unwrap();
    let pieces: Vec<Bytes> = std::iter::from_fn(|| c.poll_output()).collect();
    assert!(pieces.iter().any(|p| p.as_ptr() == ptr && p.len() == 4096));
    let wire: Vec<u8> = pieces.concat();
    assert!(wire.windows(10).any(|w| w == b"\r\n\r\n1000\r\n"));
    assert!(wire.ends_with(b"x\r\n0\r\n\r\n"));
}

/// What the server side of this crate reads from `wire`: the request's
/// target, body and trailers (it checks framing as strictly as anyone).
fn parse_back(wire: &str) -> (String, Vec<u8>, Vec<u8>) {
    let limits = Limits::default();
    let mut buf = BytesMut::from(wire.as_bytes());
    let head = parse_request_head(&mut buf, &limits).unwrap().unwrap();
    let mut dec = BodyDecoder::new(head.framing);
    let (mut body, mut trailers) = (Vec::new(), Vec::new());
    loop {
        match dec.decode(&mut buf, &limits).unwrap() {
            Some(BodyEvent::Data(d)) => body.extend_from_slice(&d),
            Some(BodyEvent::Trailers(t)) => trailers.extend_from_slice(&t),
            Some(BodyEvent::End) => break,
            None => panic!("incomplete request: {wire:?}"),
        }
    }
    assert!(buf.is_empty(), "nothing after the request");
    let target = String::from_utf8(head.target().to_vec()).unwrap();
    (target, body, trailers)
}

#[test]
fn a_chunked_body_with_trailers() {
    let mut c = conn();
    c.send_request(b"POST", b"/rpc", b"h", [], false).unwrap();
    c.send_data(&mut Bytes::from_static(b"abc"), false).unwrap();
    // An empty piece writes nothing: a zero-size chunk would end the body.
    assert_eq!(c.send_data(&mut Bytes::new(), false), Ok(0));
    c.send_data(&mut Bytes::from(vec![b'y'; 2000]), false)
        .unwrap();
    let trailers = [
        (&b"grpc-status"[..], &b"0"[..]),
        // Framing fields have no place in a trailer section.
        (b"content-length", b"3"),
        (b"transfer-encoding", b"chunked"),
    ];
    c.send_trailers(trailers).unwrap();
    assert!(c.request_done());
    let wire = out(&mut c);
    assert!(wire.starts_with(
        "POST /rpc HTTP/1.1\r\nhost: h\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n7d0\r\n"
    ));
    assert!(
        wire.ends_with("\r\n0\r\ngrpc-status: 0\r\n\r\n"),
        "{wire:?}"
    );
    let (target, body, trailers) = parse_back(&wire);
    assert_eq!(target, "/rpc");
    assert_eq!(body.len(), 2003);
    assert_eq!(trailers, b"grpc-status: 0\r\n");
    assert_eq!(c.send_trailers([]), Err(SendError::RequestComplete));
}

#[test]
fn a_chunked_body_ends_with_the_last_chunk_alone() {
    let mut c = conn();
    c.send_request(b"POST", b"/", b"h", [], false).unwrap();
    c.send_data(&mut Bytes::from_static(b"ab"), false).unwrap();
    c.send_data(&mut Bytes::new(), true).unwrap();
    let wire = out(&mut c);
    assert!(wire.ends_with("\r\n\r\n2\r\nab\r\n0\r\n\r\n"), "{wire:?}");
    assert_eq!(parse_back(&wire).1, b"ab");
}

#[test]
fn an_empty_post_says_content_length_0_and_a_get_does_not() {
    for (method, expect) in [
        (&b"POST"[..], true),
        (b"PUT", true),
        (b"PATCH", true),
        (b"GET", false),
        (b"DELETE", false),
        (b"OPTIONS", false),
    ] {
        let mut c = conn();
        c.send_request(method, b"/", b"h", [], true).unwrap();
        let wire = out(&mut c);
        assert_eq!(wire.contains("content-length: 0\r\n"), expect, "{wire}");
        assert!(!wire.contains("transfer-encoding"));
        assert!(c.request_done());
    }
    // One given is not doubled.
    let mut c = conn();
    let fields = [(&b"content-length"[..], &b"0"[..])];
    c.send_request(b"POST", b"/", b"h", fields, true).unwrap();
    assert_eq!(out(&mut c).matches("content-length").count(), 1);
}

#[test]
fn hop_by_hop_and_own_fields_from_the_caller_are_dropped() {
    let mut c = conn();
    let fields = [
        (&b"host"[..], &b"evil"[..]),
        (b"Connection", b"keep-alive, x-a"),
        (b"keep-alive", b"timeout=5"),
        (b"proxy-connection", b"keep-alive"),
        (b"transfer-encoding", b"gzip"),
        (b"upgrade", b"websocket"),
        (b"te", b"trailers"),
        (b"trailer", b"grpc-status"),
        (b"x-a", b"1"),
        (b"content-length", b"2"),
    ];
    c.send_request(b"POST", b"/", b"good", fields, false)
        .unwrap();
    c.send_data(&mut Bytes::from_static(b"ok"), true).unwrap();
    assert_eq!(
        out(&mut c),
        "POST / HTTP/1.1\r\nhost: good\r\nx-a: 1\r\ncontent-length: 2\r\n\r\nok"
    );
}

#[test]
fn a_body_longer_or_shorter_than_its_length_breaks_the_connection() {
    let cl = [(&b"content-length"[..], &b"3"[..])];
    let mut c = conn();
    c.send_request(b"POST", b"/", b"h", cl, false).unwrap();
    let mut long = Bytes::from_static(b"abcd");
    assert_eq!(
        c.send_data(&mut long, false),
        Err(SendError::LengthMismatch)
    );
    assert_eq!(long.len(), 4, "refused bytes stay with the caller");
    assert!(c.is_closing() && !c.wants_input());
    assert_eq!(c.send_data(&mut Bytes::new(), true), Err(SendError::Broken));

    let mut c = conn();
    c.send_request(b"POST", b"/", b"h", cl, false).unwrap();
    c.send_data(&mut Bytes::from_static(b"ab"), false).unwrap();
    assert_eq!(
        c.send_data(&mut Bytes::new(), true),
        Err(SendError::LengthMismatch)
    );
    // Even a whole response does not make it reusable.
    let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"[..]);
    c.recv(&mut buf).unwrap();
    assert!(!c.is_idle() && c.is_closing());
    assert_eq!(
        c.send_request(b"GET", b"/", b"h", [], true),
        Err(SendError::Busy)
    );

    // Trailers end a length-framed body: only with all its bytes.
    let mut c = conn();
    c.send_request(b"POST", b"/", b"h", cl, false).unwrap();
    assert_eq!(c.send_trailers([]), Err(SendError::LengthMismatch));
    assert!(c.is_closing());
}

#[test]
fn trailers_after_a_length_framed_body_are_dropped() {
    let mut c = conn();
    let cl = [(&b"content-length"[..], &b"2"[..])];
    c.send_request(b"POST", b"/", b"h", cl, false).unwrap();
    c.send_data(&mut Bytes::from_static(b"ok"), false).unwrap();
    c.send_trailers([(&b"x-t"[..], &b"1"[..])]).unwrap();
    assert!(c.request_done());
    let wire = out(&mut c);
    assert!(wire.ends_with("\r\n\r\nok"), "{wire:?}");
    let mut buf = BytesMut::from(&b"HTTP/1.1 204 No Content\r\n\r\n"[..]);
    c.recv(&mut buf).unwrap();
    assert!(c.is_idle());
}

#[test]
fn a_request_that_cannot_be_framed_writes_nothing() {
    let mut c = conn();
    for (fields, err) in [
        (
            vec![(&b"content-length"[..], &b"5"[..])],
            SendError::LengthMismatch,
        ),
        (
            vec![(&b"content-length"[..], &b"x"[..])],
            SendError::InvalidContentLength,
        ),
        (
            vec![
                (&b"content-length"[..], &b"1"[..]),
                (b"content-length", b"2"),
            ],
            SendError::InvalidContentLength,
        ),
    ] {
        assert_eq!(c.send_request(b"POST", b"/", b"h", fields, true), Err(err));
        assert!(!c.has_output() && c.is_idle());
    }
}

#[test]
fn an_upgrade_request_and_its_101_leave_the_rest_to_the_caller() {
    let mut c = conn();
    c.send_upgrade(
        b"GET",
        b"/chat",
        b"a",
        [
            (&b"sec-websocket-key"[..], &b"k"[..]),
            (b"connection", b"x"),
        ],
        b"websocket",
    )
    .unwrap();
    // The caller's own hop-by-hop fields are dropped; the upgrade's go last.
    assert_eq!(
        out(&mut c),
        "GET /chat HTTP/1.1\r\nhost: a\r\nsec-websocket-key: k\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n"
    );
    let mut buf = BytesMut::from(
        &b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x02hi"[..],
    );
    c.recv(&mut buf).unwrap();
    assert_eq!(events(&mut c), vec![head(101, false)]);
    assert!(c.is_upgraded());
    // The bytes after the head are the tunnel's, untouched; no more is
    // taken, nor read for.
    assert_eq!(&buf[..], b"\x81\x02hi");
    c.recv(&mut buf).unwrap();
    assert_eq!(&buf[..], b"\x81\x02hi");
    assert!(!c.wants_input());
}

#[test]
fn a_tunnel_upgrade_carries_its_bytes_as_the_exchange_body() {
    let mut c = ClientConn::new(ClientConfig {
        body_window: 4,
        ..ClientConfig::default()
    });
    c.send_upgrade_tunnel(b"GET", b"/chat", b"a", [], b"websocket")
        .unwrap();
    // Bytes before the 101 would be read as HTTP: dropped.
    c.send_data(
        &mut Bytes::from_static(b"GET /admin HTTP/1.1\r\n\r\n"),
        false,
    )
    .unwrap();
    assert_eq!(
        out(&mut c),
        "GET /chat HTTP/1.1\r\nhost: a\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n"
    );
    let mut buf =
        BytesMut::from(&b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\nhello"[..]);
    c.recv(&mut buf).unwrap();
    // The server's bytes are data within the window (4 bytes).
    assert_eq!(events(&mut c), vec![head(101, false), data("hell", false)]);
    assert!(!c.wants_input() && !c.has_pending_input(&buf));
    c.release(4);
    assert!(c.has_pending_input(&buf));
    c.recv(&mut buf).unwrap();
    assert_eq!(events(&mut c), vec![data("o", false)]);
    assert!(c.wants_input());
    // Into the tunnel: unframed.
    c.send_data(&mut Bytes::from_static(b"frames"), false)
        .unwrap();
    assert_eq!(out(&mut c), "frames");
    // The client's end: its last bytes, then the write side is to shut.
    c.send_data(&mut Bytes::from_static(b"bye"), true).unwrap();
    assert!(!c.wants_write_shut(), "not before its bytes are out");
    assert_eq!(out(&mut c), "bye");
    assert!(c.wants_write_shut());
    // The server's close ends its direction.
    c.recv_eof().unwrap();
    assert_eq!(events(&mut c), vec![data("", true)]);
    assert!(c.is_closing() && !c.is_idle());
}

#[test]
fn a_connect_is_answered_by_a_2xx_and_the_rest_is_the_tunnel() {
    let mut c = conn();
    c.send_connect(b"db.internal:5432", [(&b"x-a"[..], &b"1"[..])], false)
        .unwrap();
    assert_eq!(
        out(&mut c),
        "CONNECT db.internal:5432 HTTP/1.1\r\nhost: db.internal:5432\r\nx-a: 1\r\n\r\n"
    );
    // Whatever framing a 2xx claims, what follows it is the tunnel's.
    let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nbytes"[..]);
    c.recv(&mut buf).unwrap();
    assert_eq!(events(&mut c), vec![head(200, false)]);
    assert!(c.is_upgraded());
    assert_eq!(&buf[..], b"bytes");
    // Carried as the exchange's body.
    let mut c = conn();
    c.send_connect(b"db.internal:5432", [], true).unwrap();
    out(&mut c);
    let mut buf = BytesMut::from(&b"HTTP/1.1 200 Connection established\r\n\r\nhi"[..]);
    c.recv(&mut buf).unwrap();
    assert_eq!(events(&mut c), vec![head(200, false), data("hi", false)]);
    c.send_data(&mut Bytes::from_static(b"up"), false).unwrap();
    assert_eq!(out(&mut c), "up");
    // A refusal is an ordinary response.
    let mut c = conn();
    c.send_connect(b"db.internal:5432", [], true).unwrap();
    out(&mut c);
    let mut buf = BytesMut::from(&b"HTTP/1.1 403 Forbidden\r\ncontent-length: 2\r\n\r\nno"[..]);
    c.recv(&mut buf).unwrap();
    assert_eq!(events(&mut c), vec![head(403, false), data("no", true)]);
    assert!(c.is_closing());
}

#[test]
fn an_upgrade_refused_is_an_ordinary_response_and_the_connection_closes() {
    let mut c = conn();
    c.send_upgrade(b"GET", b"/", b"a", [], b"websocket")
        .unwrap();
    out(&mut c);
    let mut buf = BytesMut::from(&b"HTTP/1.1 403 Forbidden\r\ncontent-length: 2\r\n\r\nno"[..]);
    c.recv(&mut buf).unwrap();
    assert_eq!(events(&mut c), vec![head(403, false), data("no", true)]);
    assert!(!c.is_upgraded());
    assert!(c.is_closing());
    // A tunnel's bytes after a refusal are dropped too.
    let mut c = conn();
    c.send_upgrade_tunnel(b"GET", b"/", b"a", [], b"websocket")
        .unwrap();
    out(&mut c);
    let mut buf = BytesMut::from(&b"HTTP/1.1 403 Forbidden\r\ncontent-length: 2\r\n\r\nno"[..]);
    c.recv(&mut buf).unwrap();
    assert_eq!(events(&mut c), vec![head(403, false), data("no", true)]);
    c.send_data(&mut Bytes::from_static(b"GET /x HTTP/1.1\r\n\r\n"), false)
        .unwrap();
    assert_eq!(out(&mut c), "");
    // Also after a refusal whose body runs to the close.
    let mut c = conn();
    c.send_upgrade_tunnel(b"GET", b"/", b"a", [], b"websocket")
        .unwrap();
    out(&mut c);
    let mut buf = BytesMut::from(&b"HTTP/1.1 403 Forbidden\r\n\r\nno"[..]);
    c.recv(&mut buf).unwrap();
    assert_eq!(events(&mut c), vec![head(403, false), data("no", false)]);
    c.send_data(&mut Bytes::from_static(b"GET /x HTTP/1.1\r\n\r\n"), false)
        .unwrap();
    assert_eq!(out(&mut c), "");
    // A bad upgrade value writes nothing.
    let mut c = conn();
    assert_eq!(
        c.send_upgrade(b"GET", b"/", b"a", [], b"web\r\nx: y"),
        Err(SendError::InvalidUpgrade)
    );
    assert_eq!(out(&mut c), "");
    assert!(c.is_idle());
    // A 101 not asked for still fails.
    let mut c = conn();
    c.send_request(b"GET", b"/", b"a", [], true).unwrap();
    let mut buf = BytesMut::from(&b"HTTP/1.1 101 Switching Protocols\r\n\r\n"[..]);
    assert!(c.recv(&mut buf).is_err());
}

mod input;
mod responses;
