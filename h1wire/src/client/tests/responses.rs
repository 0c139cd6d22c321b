//! Responses as RFC 9112 frames them (§6.3), keep-alive and close (§9.3), and the responses and ends that must fail.

use super::*;

#[test]
fn a_chunked_response_with_trailers() {
    let mut c = conn();
    let wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\ngrpc-status: 0\r\n\r\n";
    let ev = get(&mut c, wire).unwrap();
    assert_eq!(
        ev,
        [
            head(200, false),
            data("hello", false),
            Ev::Trailers("grpc-status: 0\r\n".into())
        ]
    );
    let fields = trailer_fields(b"grpc-status: 0\r\n");
    assert_eq!(fields, [(&b"grpc-status"[..], &b"0"[..])]);
    assert!(c.is_idle());
    // Without trailers, the last data piece ends it.
    let ev = get(
        &mut c,
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n",
    );
    assert_eq!(ev.unwrap(), [head(200, false), data("ab", true)]);
    assert!(c.is_idle());
}

#[test]
fn a_close_delimited_response_ends_at_eof() {
    let mut c = conn();
    let ev = get(&mut c, b"HTTP/1.1 200 OK\r\n\r\nabc").unwrap();
    assert_eq!(ev, [head(200, false), data("abc", false)]);
    assert!(c.is_closing() && !c.response_done() && c.wants_input());
    let mut buf = BytesMut::from(&b"def"[..]);
    c.recv(&mut buf).unwrap();
    assert_eq!(events(&mut c), [data("def", false)]);
    c.recv_eof().unwrap();
    assert_eq!(events(&mut c), [data("", true)]);
    assert!(!c.is_idle() && !c.wants_input());
    // A transfer coding without a final chunked runs to the close too.
    let mut c = conn();
    let ev = get(
        &mut c,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzz",
    )
    .unwrap();
    assert_eq!(ev, [head(200, false), data("zz", false)]);
    assert!(c.is_closing());
    c.recv_eof().unwrap();
    assert_eq!(events(&mut c), [data("", true)]);
}

#[test]
fn an_answer_to_head_has_no_body_whatever_its_length() {
    let mut c = conn();
    c.send_request(b"HEAD", b"/", b"h", [], true).unwrap();
    let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"[..]);
    c.recv(&mut buf).unwrap();
    let h = first_head(&mut c);
    assert_eq!(h.framing, ResponseFraming::NoBody);
    assert!(c.poll_event().is_none());
    assert!(c.is_idle());
    // The next exchange is a GET again, with a body.
    let ev = get(&mut c, b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nx").unwrap();
    assert_eq!(ev, [head(200, false), data("x", true)]);
}

#[test]
fn responses_204_and_304_have_no_body() {
    for wire in [
        &b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n"[..],
        b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
        b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
        // Not even looked at.
        b"HTTP/1.1 204 No Content\r\nContent-Length: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    ] {
        let mut c = conn();
        let status = if wire.starts_with(b"HTTP/1.1 200") {
            200
        } else {
            wire[9..12]
                .iter()
                .fold(0, |n, d| n * 10 + u16::from(d - b'0'))
        };
        assert_eq!(get(&mut c, wire).unwrap(), [head(status, true)]);
        assert!(c.is_idle());
    }
}

#[test]
fn informational_responses_come_before_the_final_one() {
    let mut c = conn();
    let fields = [
        (&b"content-length"[..], &b"2"[..]),
        (b"expect", b"100-continue"),
    ];
    c.send_request(b"POST", b"/", b"h", fields, false).unwrap();
    assert!(out(&mut c).contains("expect: 100-continue\r\n"));
    let mut buf = BytesMut::from(&b"HTTP/1.1 100 Continue\r\n\r\n"[..]);
    c.recv(&mut buf).unwrap();
    let info = Ev::Head {
        status: 100,
        informational: true,
        end_stream: false,
    };
    assert_eq!(events(&mut c), [info]);
    assert!(!c.is_closing());
    c.send_data(&mut Bytes::from_static(b"ok"), true).unwrap();
    let mut buf = BytesMut::from(
        &b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\ncontent-length: 0\r\n\r\n"[..],
    );
    c.recv(&mut buf).unwrap();
    let hint = Ev::Head {
        status: 103,
        informational: true,
        end_stream: false,
    };
    assert_eq!(events(&mut c), [hint, head(201, true)]);
    assert!(c.is_idle());
}

#[test]
fn switching_protocols_is_an_error() {
    let mut c = conn();
    let err = get(
        &mut c,
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
    )
    .unwrap_err();
    assert!(matches!(err, Error::BadResponse(_)), "{err}");
    assert_eq!(err.status(), 502);
    assert!(c.is_closing() && !c.is_idle() && !c.wants_input());
}

#[test]
fn framing_both_ways_is_refused_and_http_1_0_chunked_closes() {
    // RFC 9112 §6.3 item 3 would let Transfer-Encoding win; Envoy 1.40
    // refuses such a response (502), and so do we: it is how responses
    // are split.
    let mut c = conn();
    let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    c.send_request(b"GET", b"/", b"h", [], true).unwrap();
    assert!(c.recv(&mut BytesMut::from(&wire[..])).is_err());
    assert!(c.is_closing() && !c.is_idle());
    // A Transfer-Encoding in HTTP/1.0 is taken once, then the connection
    // closes (RFC 9112 §6.1).
    let mut c = conn();
    let wire = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n";
    assert_eq!(
        get(&mut c, wire).unwrap(),
        [head(200, false), data("a", true)]
    );
    assert!(c.is_closing());
}

#[test]
fn invalid_or_conflicting_lengths_are_errors() {
    for wire in [
        &b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"[..],
        b"HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\nabcd",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\nabc",
        b"HTTP/1.1 200 OK\r\nContent-Length: 0x3\r\n\r\nabc",
        b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
    ] {
        let mut c = conn();
        let err = get(&mut c, wire).expect_err(std::str::from_utf8(wire).unwrap());
        assert!(matches!(err, Error::BadFraming(_)), "{err}");
        assert!(!c.is_idle());
    }
    // Repeated but equal is one value (item 5).
    let mut c = conn();
    let ev = get(
        &mut c,
        b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n\r\nab",
    );
    assert_eq!(ev.unwrap(), [head(200, false), data("ab", true)]);
    assert!(c.is_idle());
}

#[test]
fn connection_close_ends_the_connection_after_the_response() {
    let mut c = conn();
    let wire = b"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Close\r\nContent-Length: 1\r\n\r\nx";
    assert_eq!(
        get(&mut c, wire).unwrap(),
        [head(200, false), data("x", true)]
    );
    assert!(c.response_done() && c.is_closing() && !c.is_idle());
    assert!(!c.wants_input());
    assert_eq!(
        c.send_request(b"GET", b"/", b"h", [], true),
        Err(SendError::Busy)
    );
}

#[test]
fn http_1_0_keeps_the_connection_only_when_it_says_so() {
    let mut c = conn();
    let ev = get(&mut c, b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx").unwrap();
    assert_eq!(ev, [head(200, false), data("x", true)]);
    assert!(c.is_closing());
    let mut c = conn();
    c.send_request(b"GET", b"/", b"h", [], true).unwrap();
    let wire = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx";
    c.recv(&mut BytesMut::from(&wire[..])).unwrap();
    assert_eq!(first_head(&mut c).version, Version::Http10);
    assert!(c.is_idle());
}

#[test]
fn a_kept_connection_carries_the_next_exchange() {
    let mut c = conn();
    for i in 0..3 {
        let target = format!("/{i}");
        c.send_request(b"GET", target.as_bytes(), b"h", [], true)
            .unwrap();
        assert!(out(&mut c).starts_with(&format!("GET /{i} HTTP/1.1\r\n")));
        let body = format!("r{i}");
        let wire = format!("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{body}");
        c.recv(&mut BytesMut::from(wire.as_bytes())).unwrap();
        assert_eq!(events(&mut c), [head(200, false), data(&body, true)]);
        assert!(c.is_idle() && c.wants_input());
    }
}

#[test]
fn a_second_request_waits_for_the_first_exchange() {
    let mut c = conn();
    c.send_request(b"GET", b"/", b"h", [], true).unwrap();
    assert_eq!(
        c.send_request(b"GET", b"/2", b"h", [], true),
        Err(SendError::Busy)
    );
    // Response done, request not: still busy.
    let mut c = conn();
    let cl = [(&b"content-length"[..], &b"2"[..])];
    c.send_request(b"POST", b"/", b"h", cl, false).unwrap();
    assert_eq!(
        c.send_request(b"GET", b"/2", b"h", [], true),
        Err(SendError::Busy)
    );
    assert_eq!(
        ClientConn::new(ClientConfig::default()).send_data(&mut Bytes::new(), true),
        Err(SendError::NoRequest)
    );
}

#[test]
fn bytes_nobody_asked_for_are_errors() {
    let mut c = conn();
    let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\n\r\n"[..]);
    assert_eq!(c.recv(&mut buf), Err(Error::UnsolicitedResponse));
    assert!(c.is_closing() && !c.is_idle());
    // After a response in the same read: the response stands, the
    // connection closes, and the bytes fail the next call.
    let mut c = conn();
    let wire = b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nxHTTP/1.1 200 OK\r\n";
    assert_eq!(
        get(&mut c, wire).unwrap(),
        [head(200, false), data("x", true)]
    );
    assert!(c.is_closing() && !c.is_idle());
    let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\n"[..]);
    assert_eq!(c.recv(&mut buf), Err(Error::UnsolicitedResponse));
    // On a connection the response closes, they cannot be mistaken for a
    // response: dropped, whenever they come.
    let mut c = conn();
    let wire = b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\nxyz";
    assert_eq!(get(&mut c, wire).unwrap(), [head(200, true)]);
    let mut buf = BytesMut::from(&b"more"[..]);
    assert_eq!(c.recv(&mut buf), Ok(()));
    assert!(buf.is_empty() && c.poll_event().is_none() && c.is_closing());
    assert_eq!(c.recv_eof(), Ok(()));
    // On an idle kept connection.
    let mut c = conn();
    get(&mut c, b"HTTP/1.1 204 No Content\r\n\r\n").unwrap();
    assert!(c.is_idle() && c.wants_input());
    let mut buf = BytesMut::from(&b"\r\n"[..]);
    assert_eq!(c.recv(&mut buf), Err(Error::UnsolicitedResponse));
    assert!(!c.is_idle());
}

#[test]
fn eof_before_the_response_is_complete_is_an_error() {
    for wire in [
        &b""[..],
        b"HTTP/1.1 200 OK\r\nContent-Le",
        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nabc",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\n",
    ] {
        let mut c = conn();
        get(&mut c, wire).unwrap();
        assert_eq!(c.recv_eof(), Err(Error::ResponseTruncated));
        assert!(!c.is_idle() && !c.wants_input());
    }
    // Idle: the server just closed a kept connection.
    let mut c = conn();
    get(&mut c, b"HTTP/1.1 204 No Content\r\n\r\n").unwrap();
    assert_eq!(c.recv_eof(), Ok(()));
    assert!(!c.is_idle() && c.is_closing());
}

#[test]
fn a_response_before_the_whole_request_closes_the_connection() {
    let mut c = conn();
    c.send_request(b"POST", b"/", b"h", [], false).unwrap();
    c.send_data(&mut Bytes::from_static(b"part"), false)
        .unwrap();
    let wire = b"HTTP/1.1 413 Content Too Large\r\ncontent-length: 0\r\n\r\n";
    c.recv(&mut BytesMut::from(&wire[..])).unwrap();
    assert_eq!(events(&mut c), [head(413, true)]);
    assert!(c.response_done() && !c.request_done() && c.is_closing());
    out(&mut c);
    // The rest of the body is not wanted: taken and dropped.
    let mut rest = Bytes::from_static(b"more");
    assert_eq!(c.send_data(&mut rest, false), Ok(4));
    assert!(rest.is_empty() && !c.has_output());
    c.send_data(&mut Bytes::new(), true).unwrap();
    assert!(c.request_done() && !c.is_idle() && !c.has_output());
}

#[test]
fn an_aborted_exchange_closes_the_connection() {
    let mut c = conn();
    c.send_request(b"POST", b"/", b"h", [], false).unwrap();
    c.abort();
    assert!(c.is_closing() && !c.is_idle() && !c.wants_input());
    assert_eq!(
        c.send_data(&mut Bytes::from_static(b"x"), true),
        Err(SendError::Broken)
    );
    assert_eq!(
        c.send_request(b"GET", b"/", b"h", [], true),
        Err(SendError::Busy)
    );
    let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\n\r\n"[..]);
    assert_eq!(c.recv(&mut buf), Ok(()));
    assert!(c.poll_event().is_none());
}

#[test]
fn limits_and_versions() {
    let small = ClientConfig {
        limits: Limits {
            max_head_bytes: 64,
            max_headers: 2,
        },
        ..Default::default()
    };
    let mut c = ClientConn::new(small);
    let mut long = b"HTTP/1.1 200 OK\r\nX-Long: ".to_vec();
    long.extend([b'x'; 64]);
    assert_eq!(get(&mut c, &long), Err(Error::HeadTooLarge { limit: 64 }));
    let mut c = ClientConn::new(small);
    let many = b"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    assert_eq!(get(&mut c, many), Err(Error::TooManyHeaders { limit: 2 }));
    for (wire, expect) in [
        (&b"HTTP/2.0 200 OK\r\n\r\n"[..], Error::UnsupportedVersion),
        (
            b"HTTP/1.1 20 OK\r\n\r\n",
            Error::BadResponse("invalid status code"),
        ),
        (
            b"HTTP/1.1 099 Low\r\n\r\n",
            Error::BadResponse("invalid status code"),
        ),
        (b"ICY 200 OK\r\n\r\n", Error::UnsupportedVersion),
    ] {
        let mut c = conn();
        assert_eq!(
            get(&mut c, wire),
            Err(expect),
            "{:?}",
            std::str::from_utf8(wire)
        );
    }
}
