//! HTTP/1.1 clients on a listener with `codec_type: AUTO`, over plain sockets: keep-alive and pipelining, bodies both ways, `Expect: 100-continue`, the refusals (smuggling, HTTP/1.0, upgrades) with their close, sessions, and HTTP/2 still served on the same port.

mod support;

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use support::h1_client::*;
use support::*;

fn gateway() -> (
    gateway::GatewayHandle,
    SocketAddr,
    demo_backend::BackendHandle,
) {
    let b = backend("b1");
    let (gw, addr) = gateway_for(&[b.addr()], 1);
    (gw, addr, b)
}

#[test]
fn keep_alive_and_pipelined_requests_are_answered_in_order() {
    let (gw, addr, _b) = gateway();
    let (mut s, mut r) = open(addr);
    // Two requests in one write, then a third once they are answered.
    s.write_all(
        b"GET /one HTTP/1.1\r\nHost: a\r\nx-delay-ms: 100\r\n\r\nGET /two HTTP/1.1\r\nHost: a\r\n\r\n",
    )
    .unwrap();
    for _ in 0..2 {
        let resp = read_response(&mut r, false);
        assert_eq!(resp.status, 200);
        assert_eq!(resp.header("x-backend"), Some("b1"));
        assert_eq!(resp.body, b"hello from b1\n");
        assert_eq!(resp.header("connection"), None, "kept alive");
    }
    s.write_all(b"HEAD /three HTTP/1.1\r\nhost: a\r\n\r\n")
        .unwrap();
    let resp = read_response(&mut r, true);
    assert_eq!(resp.status, 200);
    let admin = gw.admin_addr.expect("admin");
    assert_eq!(metric(admin, "gateway_downstream_rq_http1_total"), 3.0);
    assert_eq!(metric(admin, "gateway_downstream_cx_http1_total"), 1.0);
}

#[test]
fn bodies_go_both_ways_with_either_framing() {
    let (_gw, addr, _b) = gateway();
    let (mut s, mut r) = open(addr);
    // Larger than the body window and the socket buffers: flow control
    // end to end, the echo streams back while the upload goes on.
    let body: Vec<u8> = (0..3 << 20).map(|i| (i % 251) as u8).collect();
    let head = format!(
        "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut writer = s.try_clone().unwrap();
    let upload = std::thread::spawn(move || {
        writer.write_all(head.as_bytes()).unwrap();
        writer.write_all(&body).unwrap();
        body
    });
    let resp = read_response(&mut r, false);
    let body = upload.join().unwrap();
    assert_eq!(resp.status, 200);
    assert!(resp.body == body, "the echo is the upload");

    // A chunked upload with trailers (dropped: no `enable_trailers`).
    s.write_all(
        b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\nx-sum: 1\r\n\r\n",
    )
    .unwrap();
    let resp = read_response(&mut r, false);
    assert_eq!(resp.status, 200);
    assert_eq!(
        resp.header("transfer-encoding"),
        Some("chunked"),
        "no length upstream: {:?}",
        resp.headers
    );
    assert_eq!(resp.body, b"hello world");
}

#[test]
fn expect_100_continue_is_answered_before_the_body() {
    let (_gw, addr, _b) = gateway();
    let (mut s, mut r) = open(addr);
    s.write_all(
        b"POST /echo HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n",
    )
    .unwrap();
    let interim = read_response(&mut r, false);
    assert_eq!(interim.status, 100);
    s.write_all(b"ping").unwrap();
    let resp = read_response(&mut r, false);
    assert_eq!((resp.status, &resp.body[..]), (200, &b"ping"[..]));
}

#[test]
fn refusals_are_answered_then_the_connection_closes() {
    let (gw, addr, b) = gateway();
    let admin = gw.admin_addr.expect("admin");
    let cases: [(&[u8], u16); 8] = [
        // Request smuggling: both framings.
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400,
        ),
        // More than one Content-Length value, even equal ones: 400 and a
        // close, as Envoy 1.40 answers (forwarded, `5, 5` reached the
        // HTTP/2 backend as an invalid field: 502).
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\nhello",
            400,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
            400,
        ),
        (b"GET / HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\n\r\n", 400),
        // HTTP/1.0 without `accept_http_10`: 426, as Envoy.
        (b"GET / HTTP/1.0\r\nHost: a\r\n\r\n", 426),
        // No `upgrade_configs`: 403, as Envoy.
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
            403,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            501,
        ),
    ];
    for (bytes, status) in cases {
        let (mut s, mut r) = open(addr);
        // Bytes after the request: the close must not lose the answer.
        s.write_all(bytes).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
        let resp = read_response(&mut r, false);
        assert_eq!(
            resp.status,
            status,
            "for {:?}",
            String::from_utf8_lossy(bytes)
        );
        assert_eq!(resp.header("connection"), Some("close"));
        assert!(closed(&mut r), "closed after {status}");
    }
    assert_eq!(b.requests(), 0, "none reached the backend");
    assert_eq!(metric(admin, "gateway_downstream_cx_protocol_error"), 7.0);
    assert_eq!(metric(admin, "gateway_downstream_rq_upgrade_refused"), 1.0);
}

#[test]
fn connection_close_is_honoured_after_the_response() {
    let (_gw, addr, _b) = gateway();
    let (mut s, mut r) = open(addr);
    s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    let resp = read_response(&mut r, false);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("connection"), Some("close"));
    assert!(closed(&mut r));
}

#[test]
fn a_local_reply_keeps_the_connection_and_the_next_request_is_served() {
    let b = backend("b1");
    // Only /known routes: the rest is a 404 from the gateway itself.
    let gw = start(
        bootstrap(
            listener(vec![prefix_route("/known", "c", None)]),
            vec![cluster("c", &[b.addr()])],
        ),
        1,
    );
    let addr = gw.listener("ingress").expect("listener");
    let (mut s, mut r) = open(addr);
    s.write_all(b"GET /nowhere HTTP/1.1\r\nHost: a\r\n\r\nGET /known HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut r, false).status, 404);
    assert_eq!(read_response(&mut r, false).status, 200);
}

#[test]
fn sessions_stick_over_http1() {
    let b1 = backend("b1");
    let b2 = backend("b2");
    let gw = start(
        session_bootstrap(
            cluster("c", &[b1.addr(), b2.addr()]),
            Some(cookie_session("sess", Some("/"), false)),
        ),
        1,
    );
    let addr = gw.listener("ingress").expect("listener");
    let (mut s, mut r) = open(addr);
    s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    let first = read_response(&mut r, false);
    let set_cookie = first
        .header("set-cookie")
        .expect("a session cookie")
        .to_string();
    let pair = cookie_pair(&set_cookie);
    let backend = first.header("x-backend").expect("a backend").to_string();
    for _ in 0..6 {
        s.write_all(format!("GET / HTTP/1.1\r\nHost: a\r\nCookie: {pair}\r\n\r\n").as_bytes())
            .unwrap();
        let resp = read_response(&mut r, false);
        assert_eq!(resp.header("x-backend"), Some(backend.as_str()));
    }
}

#[test]
fn http2_clients_share_the_port() {
    let (_gw, addr, _b) = gateway();
    let replies = get_n(addr, "/", 3);
    assert!(replies.iter().all(|(status, _)| *status == 200));
    let (mut s, mut r) = open(addr);
    s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut r, false).status, 200);
}

#[test]
fn a_slow_first_head_is_closed_at_the_handshake_deadline_and_hurts_no_one() {
    let b = backend("b1");
    let mut l = (*listener(vec![prefix_route("/", "c", None)])).clone();
    l.filter_chains[0].http.idle_timeout = Some(Duration::from_millis(300));
    let gw = start(
        bootstrap(std::sync::Arc::new(l), vec![cluster("c", &[b.addr()])]),
        1,
    );
    let addr = gw.listener("ingress").expect("listener");
    let t0 = std::time::Instant::now();
    // A slowloris: part of a head, then nothing.
    let (mut slow, mut slow_r) = open(addr);
    slow.write_all(b"GET / HTTP/1.1\r\nHost: a\r\nX-A: ")
        .unwrap();
    let (mut s, mut r) = open(addr);
    for _ in 0..3 {
        s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
        assert_eq!(
            read_response(&mut r, false).status,
            200,
            "the victim is served"
        );
    }
    assert!(closed(&mut slow_r), "the slow client is cut off");
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(3),
        "closed after {waited:?}"
    );
    let admin = gw.admin_addr.expect("admin");
    wait_until(Duration::from_secs(2), "protocol error counted", || {
        metric(admin, "gateway_downstream_cx_protocol_error") >= 1.0
    });
}

#[test]
fn a_head_that_trickles_in_gets_408_at_request_headers_timeout_and_hurts_no_one() {
    let b = backend("b1");
    let mut l = (*listener(vec![prefix_route("/", "c", None)])).clone();
    l.filter_chains[0].http.request_headers_timeout = Some(Duration::from_millis(400));
    let gw = start(
        bootstrap(std::sync::Arc::new(l), vec![cluster("c", &[b.addr()])]),
        1,
    );
    let addr = gw.listener("ingress").expect("listener");
    // A slowloris on a kept-alive connection: one request served, then a
    // head sent a byte every 100 ms (the idle timeout, 1 h, never fires).
    let (mut slow, mut slow_r) = open(addr);
    slow.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut slow_r, false).status, 200);
    let t0 = std::time::Instant::now();
    let trickle = std::thread::spawn(move || {
        for b in b"GET / HTTP/1.1\r\nHost: a\r\nX-Slow: 1234567890abcdef\r\n" {
            if slow.write_all(&[*b]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let (mut s, mut r) = open(addr);
    for _ in 0..3 {
        s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
        assert_eq!(
            read_response(&mut r, false).status,
            200,
            "the victim is served"
        );
    }
    let answer = read_response(&mut slow_r, false);
    let waited = t0.elapsed();
    assert_eq!(answer.status, 408);
    // Envoy 1.40's body for it.
    assert_eq!(&answer.body[..], b"request header timeout");
    assert!(closed(&mut slow_r), "then the connection closes");
    assert!(
        waited >= Duration::from_millis(350) && waited < Duration::from_secs(3),
        "answered after {waited:?}"
    );
    trickle.join().unwrap();
    let admin = gw.admin_addr.expect("admin");
    assert_eq!(metric(admin, "gateway_downstream_rq_header_timeout"), 1.0);
    // A head that comes whole in time is served as ever.
    s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    assert_eq!(read_response(&mut r, false).status, 200);
}

#[test]
fn http_1_0_is_served_when_accepted() {
    let b = backend("b1");
    let mut l = (*listener(vec![prefix_route("/", "c", None)])).clone();
    l.filter_chains[0].http.http1.accept_http_10 = true;
    l.filter_chains[0].http.http1.default_host_for_http_10 = Some("dflt.example".into());
    let gw = start(
        bootstrap(std::sync::Arc::new(l), vec![cluster("c", &[b.addr()])]),
        1,
    );
    let addr = gw.listener("ingress").expect("listener");
    // Keep-alive asked and a length known: kept.
    let (mut s, mut r) = open(addr);
    s.write_all(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .unwrap();
    let resp = read_response(&mut r, false);
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("connection"), Some("keep-alive"));
    // No length (an echo): the body ends with the connection.
    s.write_all(b"POST /echo HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi")
        .unwrap();
    let resp = read_response(&mut r, false);
    assert_eq!((resp.status, &resp.body[..]), (200, &b"hi"[..]));
    assert_eq!(resp.header("connection"), Some("close"));
}

#[test]
fn a_closing_reply_lingers_for_delayed_close_timeout() {
    let b = backend("b1");
    // Writes after the refusal's close: whether each went through (the
    // gateway still reading and dropping) or failed (it closed, the
    // kernel answered with a reset).
    let after_close = |delayed: Duration| {
        let mut l = (*listener(vec![prefix_route("/", "c", None)])).clone();
        l.filter_chains[0].http.delayed_close_timeout = delayed;
        let gw = start(
            bootstrap(std::sync::Arc::new(l), vec![cluster("c", &[b.addr()])]),
            1,
        );
        let addr = gw.listener("ingress").expect("listener");
        let (mut s, mut r) = open(addr);
        s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(read_response(&mut r, false).status, 400);
        assert!(closed(&mut r));
        let mut went = Vec::new();
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(100));
            went.push(s.write_all(b"more bytes").is_ok());
        }
        gw.shutdown();
        went
    };
    // Envoy's default, 1 s: the client's late bytes are read and dropped.
    assert_eq!(after_close(Duration::from_secs(1)), [true, true, true]);
    // 0: closed at once; the second write meets the reset.
    let none = after_close(Duration::ZERO);
    assert!(none[1..].iter().any(|w| !w), "{none:?}");
}
