//! The downstream codec's HTTP/1.1 side: heads into header lists, refusals, upgrades and CONNECT, underscores.

use super::*;

#[test]
fn auto_picks_http2_on_its_preface_and_http1_on_anything_else() {
    assert_eq!(
        choose(CodecType::Auto, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
        Some(Proto::H2)
    );
    assert_eq!(choose(CodecType::Auto, b"PRI * HT"), None, "wait for more");
    assert_eq!(choose(CodecType::Auto, b""), None);
    assert_eq!(
        choose(CodecType::Auto, b"GET / HTTP/1.1\r\n"),
        Some(Proto::H1)
    );
    assert_eq!(choose(CodecType::Auto, b"PRX"), Some(Proto::H1));
    assert_eq!(choose(CodecType::Http2, b"GET /"), Some(Proto::H2));
    assert_eq!(choose(CodecType::Http1, b"PRI * HTTP/2.0"), Some(Proto::H1));
}

#[test]
fn request_targets() {
    assert_eq!(split_target(b"/a?b"), Target::Origin);
    assert_eq!(split_target(b"*"), Target::Asterisk);
    assert_eq!(
        split_target(b"http://example.com:8080/p?q"),
        Target::Absolute {
            authority: b"example.com:8080",
            path: b"/p?q"
        }
    );
    assert_eq!(
        split_target(b"HTTP://a"),
        Target::Absolute {
            authority: b"a",
            path: b"/"
        }
    );
    assert_eq!(split_target(b"http://"), Target::Invalid);
    assert_eq!(split_target(b"http://user@a/"), Target::Invalid);
    assert_eq!(split_target(b"example.com:443"), Target::Invalid);
}

/// The connection manager settings the codec reads.
struct Settings {
    opts: Http1Options,
    underscores: HeadersWithUnderscoresAction,
}

fn hcm() -> Settings {
    Settings {
        opts: Http1Options::default(),
        underscores: HeadersWithUnderscoresAction::Allow,
    }
}

fn h1(m: &Settings, bytes: &[u8]) -> (DownCodec, Option<Event>) {
    let mut c = DownCodec::h1_with(&m.opts, m.underscores, h1wire::Limits::default(), 1 << 16);
    let mut buf = BytesMut::from(bytes);
    let _ = c.recv(&mut buf, bytes.len());
    let ev = c.poll_event();
    (c, ev)
}

fn counted(c: &mut DownCodec) -> DownstreamStats {
    let stats = DownstreamStats::default();
    c.count(&stats);
    stats
}

#[test]
fn an_http1_head_becomes_pseudo_headers_and_lowercase_fields() {
    let (_, ev) = h1(
        &hcm(),
        b"GET /x HTTP/1.1\r\nHost: a.example\r\nX-Thing: 1\r\nExpect: 100-continue\r\nConnection: keep-alive\r\n\r\n",
    );
    let Some(Event::Request {
        head, end_stream, ..
    }) = ev
    else {
        panic!("a request");
    };
    assert!(end_stream);
    let fields: Vec<(&[u8], &[u8])> = head.iter().map(|(n, v, _)| (n, v)).collect();
    assert_eq!(
        fields,
        vec![
            (&b":method"[..], &b"GET"[..]),
            (b":scheme", b"http"),
            (b":authority", b"a.example"),
            (b":path", b"/x"),
            (b"x-thing", b"1"),
            // Hop-by-hop fields are dropped on the way upstream, for
            // both protocols (`stream::forwarded`).
            (b"connection", b"keep-alive"),
        ]
    );
}

#[test]
fn fields_named_in_connection_stay_on_this_hop() {
    let (_, ev) = h1(
        &hcm(),
        b"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\nX-Other: 2\r\n\r\n",
    );
    let Some(Event::Request { head, .. }) = ev else {
        panic!("a request");
    };
    assert!(head.get(b"x-secret").is_none());
    assert_eq!(head.get(b"x-other"), Some(&b"2"[..]));
}

#[test]
fn an_absolute_target_gives_the_authority() {
    let (_, ev) = h1(
        &hcm(),
        b"GET http://b.example/p HTTP/1.1\r\nHost: a\r\n\r\n",
    );
    let Some(Event::Request { head, .. }) = ev else {
        panic!("a request");
    };
    assert_eq!(head.get(b":authority"), Some(&b"b.example"[..]));
    assert_eq!(head.get(b":path"), Some(&b"/p"[..]));
}

#[test]
fn upgrades_and_connect_reach_the_route_and_h2c_is_ignored() {
    let (mut c, ev) = h1(
        &hcm(),
        b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
    );
    // The route decides (`upgrade_configs`): its `Upgrade` field is
    // kept, `Connection` is not the upstream's.
    let Some(Event::Request { head, .. }) = ev else {
        panic!("an upgrade is a request");
    };
    assert_eq!(head.get(b"upgrade"), Some(&b"websocket"[..]));
    assert!(!c.is_closed());
    // Its 101 says the upgrade back, and the connection is a tunnel.
    let none: [(&[u8], &[u8]); 0] = [];
    c.send_headers(1, 101, none, false).unwrap();
    let out = c.poll_output().expect("the 101");
    assert!(out.starts_with(b"HTTP/1.1 101 Switching Protocols\r\n"));
    assert!(out.ends_with(b"connection: upgrade\r\nupgrade: websocket\r\n\r\n"));
    assert!(c.is_upgraded());

    // A CONNECT too: its target is the authority, it has no path, and
    // a 2xx (not a 101) makes the tunnel.
    let (mut c, ev) = h1(&hcm(), b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n");
    let Some(Event::Request { head, .. }) = ev else {
        panic!("a CONNECT is a request");
    };
    assert_eq!(head.get(b":method"), Some(&b"CONNECT"[..]));
    assert_eq!(head.get(b":authority"), Some(&b"a:443"[..]));
    assert!(head.get(b":path").is_none());
    assert_eq!(c.upgrade_asked(), Some(&b"CONNECT"[..]));
    assert!(c.send_headers(1, 101, none, false).is_err());
    c.send_headers(1, 200, none, false).unwrap();
    let out = c.poll_output().expect("the 200");
    assert_eq!(&out[..], b"HTTP/1.1 200 OK\r\n\r\n");
    assert!(c.is_upgraded());
    // Not the authority-form: 400, as Envoy answers.
    let (c, ev) = h1(&hcm(), b"CONNECT / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(ev.is_none() && c.is_closed());
    assert_eq!(c.pending_refusal(), Some(400));

    let (mut c, ev) = h1(
        &hcm(),
        b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\nConnection: Upgrade, HTTP2-Settings\r\n\r\n",
    );
    let Some(Event::Request { head, .. }) = ev else {
        panic!("served as HTTP/1.1");
    };
    assert!(head.get(b"http2-settings").is_none());
    assert!(head.get(b"upgrade").is_none());
    // No upgrade asked: a 101 cannot be sent.
    assert!(c.send_headers(1, 101, none, false).is_err());
}

#[test]
fn underscores_follow_the_connection_manager() {
    let mut m = hcm();
    m.underscores = HeadersWithUnderscoresAction::DropHeader;
    let (mut c, ev) = h1(&m, b"GET / HTTP/1.1\r\nHost: a\r\nx_y: 1\r\n\r\n");
    let Some(Event::Request { head, .. }) = ev else {
        panic!("a request");
    };
    assert!(head.get(b"x_y").is_none());
    assert_eq!(counted(&mut c).dropped_headers_with_underscores.get(), 1);

    m.underscores = HeadersWithUnderscoresAction::RejectRequest;
    let (mut c, ev) = h1(&m, b"GET / HTTP/1.1\r\nHost: a\r\nx_y: 1\r\n\r\n");
    assert!(ev.is_none());
    assert_eq!(c.pending_refusal(), Some(400));
    assert_eq!(
        counted(&mut c)
            .rq_rejected_with_underscores_in_headers
            .get(),
        1
    );
}

#[test]
fn what_never_becomes_a_tunnel() {
    let none: [(&[u8], &[u8]); 0] = [];
    // A CONNECT with a body: its bytes would be read as the body, not the
    // tunnel's (Envoy answers 400).
    for bytes in [
        &b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\nContent-Length: 3\r\n\r\nabc"[..],
        b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ] {
        let (c, ev) = h1(&hcm(), bytes);
        assert!(!matches!(ev, Some(Event::Request { .. })) && c.is_closed());
        assert_eq!(c.pending_refusal(), Some(400));
    }
    // HTTP/1.0 cannot upgrade (RFC 9110 §7.8): an ordinary request.
    let mut m = hcm();
    m.opts.accept_http_10 = true;
    let (c, ev) = h1(
        &m,
        b"GET / HTTP/1.0\r\nHost: a\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
    );
    assert!(matches!(ev, Some(Event::Request { .. })));
    assert_eq!(c.upgrade_asked(), None);
    // An upgrade answered otherwise: its 2xx or 101 switches nothing.
    let (mut c, _) = h1(
        &hcm(),
        b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
    );
    c.forget_upgrade();
    assert!(c.send_headers(1, 101, none, false).is_err());
    let (mut c, _) = h1(&hcm(), b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n");
    c.forget_upgrade();
    c.send_headers(1, 200, none, true).unwrap();
    assert!(!c.is_upgraded());
}
