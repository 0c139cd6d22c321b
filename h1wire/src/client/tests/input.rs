//! How response bytes are taken: the body window, any split of the bytes, zero-copy data, and bytes no one wrote.

use super::*;

/// Feeds a response with a `window`-byte body window, releasing only
/// when nothing more comes; returns the data pieces.
fn windowed(wire: &[u8], window: u32) -> Vec<(usize, bool)> {
    let mut c = ClientConn::new(ClientConfig {
        body_window: window,
        ..Default::default()
    });
    c.send_request(b"GET", b"/", b"h", [], true).unwrap();
    let mut buf = BytesMut::from(wire);
    c.recv(&mut buf).unwrap();
    assert!(matches!(c.poll_event(), Some(ClientEvent::Response { .. })));
    let mut pieces = Vec::new();
    for _ in 0..100 {
        let mut held = 0;
        while let Some(ev) = c.poll_event() {
            let ClientEvent::Data { data, end_stream } = ev else {
                panic!("{ev:?}")
            };
            held += data.len();
            pieces.push((data.len(), end_stream));
        }
        assert!(held <= window as usize, "{held} bytes out at once");
        if pieces.last().is_some_and(|p| p.1) {
            assert!(c.response_done() && buf.is_empty());
            return pieces;
        }
        if held == window as usize {
            // The window is full: nothing more until a release.
            assert!(!c.wants_input() && !c.has_pending_input(&buf));
            c.recv(&mut buf).unwrap();
            assert!(c.poll_event().is_none());
        }
        c.release(held as u32);
        if buf.is_empty() {
            c.recv_eof().unwrap();
        } else {
            assert!(c.has_pending_input(&buf) && !c.wants_input());
            c.recv(&mut buf).unwrap();
        }
    }
    panic!("no end");
}

#[test]
fn the_body_window_holds_back_what_is_not_released() {
    let body = "abcdefghij".repeat(3);
    let cl = format!("HTTP/1.1 200 OK\r\ncontent-length: 30\r\n\r\n{body}");
    assert_eq!(
        windowed(cl.as_bytes(), 10),
        [(10, false), (10, false), (10, true)]
    );
    let chunked = format!(
        "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n7\r\n{}\r\n17\r\n{}\r\n0\r\n\r\n",
        &body[..7],
        &body[7..]
    );
    let pieces = windowed(chunked.as_bytes(), 10);
    assert_eq!(pieces.iter().map(|p| p.0).sum::<usize>(), 30);
    assert!(pieces.iter().all(|p| p.0 <= 10));
    let close = format!("HTTP/1.1 200 OK\r\n\r\n{body}");
    assert_eq!(
        windowed(close.as_bytes(), 10),
        [(10, false), (10, false), (10, false), (0, true)]
    );
}

#[test]
fn a_grant_widens_the_window_for_one_exchange() {
    let mut c = ClientConn::new(ClientConfig {
        body_window: 2,
        ..Default::default()
    });
    c.send_request(b"GET", b"/", b"h", [], true).unwrap();
    c.grant(3);
    let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello"[..]);
    c.recv(&mut buf).unwrap();
    assert_eq!(events(&mut c), [head(200, false), data("hello", true)]);
}

#[test]
fn each_exchange_has_a_window_of_its_own() {
    let mut c = ClientConn::new(ClientConfig {
        body_window: 4,
        ..Default::default()
    });
    for _ in 0..2 {
        // The last response's bytes are never released here: they belong
        // to the caller's reader, not to this exchange.
        let ev = get(&mut c, b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nabcd").unwrap();
        assert_eq!(ev, [head(200, false), data("abcd", true)]);
        assert!(c.is_idle());
    }
}

#[test]
fn body_data_is_split_from_the_callers_buffer() {
    let mut c = conn();
    c.send_request(b"GET", b"/", b"h", [], true).unwrap();
    let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nbody"[..]);
    let at = buf.as_ptr() as usize + buf.len() - 4;
    c.recv(&mut buf).unwrap();
    first_head(&mut c);
    let Some(ClientEvent::Data { data, .. }) = c.poll_event() else {
        panic!()
    };
    assert_eq!(data.as_ptr() as usize, at);
}

/// The events for `wire` (after a GET, or a HEAD when `head`), fed in
/// pieces of `step` bytes, with data pieces merged and the end noted.
fn transcript(wire: &[u8], step: usize, head: bool) -> Vec<Ev> {
    let mut c = conn();
    let method: &[u8] = if head { b"HEAD" } else { b"GET" };
    c.send_request(method, b"/", b"h", [], true).unwrap();
    let mut buf = BytesMut::new();
    let mut merged: Vec<Ev> = Vec::new();
    for piece in wire.chunks(step) {
        buf.extend_from_slice(piece);
        c.recv(&mut buf).unwrap();
        for ev in events(&mut c) {
            match (merged.last_mut(), ev) {
                (Some(Ev::Data(d, false)), Ev::Data(more, end)) => {
                    d.push_str(&more);
                    *merged.last_mut().unwrap() = Ev::Data(std::mem::take(d), end);
                }
                (_, ev) => merged.push(ev),
            }
        }
    }
    assert!(
        buf.is_empty() && c.is_idle(),
        "{:?}",
        std::str::from_utf8(wire)
    );
    merged
}

#[test]
fn any_split_of_the_bytes_gives_the_same_events() {
    let cases: [(&[u8], bool); 5] = [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello", false),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;e=1\r\nabc\r\n2\r\nde\r\n0\r\nT: 1\r\nU: 2\r\n\r\n", false),
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n", false),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n", true),
        (b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n", false),
    ];
    for (wire, head) in cases {
        let whole = transcript(wire, wire.len(), head);
        for step in [1, 2, 3, 7] {
            assert_eq!(transcript(wire, step, head), whole, "step {step}");
        }
    }
}

/// A small deterministic generator (xorshift), for inputs no one wrote.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// What a caller sees of a response, pieces merged.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Head(u16, bool, bool),
    Body(Vec<u8>, bool),
    Trailers(Vec<u8>),
    Error,
    Eof(bool),
}

/// Runs `wire` through a connection as a caller would: in pieces of
/// `step` while it wants input, releasing what it took, then an EOF.
/// Whatever the bytes, errors are fine and panics are not.
fn outcome(wire: &[u8], step: usize, window: u32, head: bool) -> Vec<Seen> {
    let mut c = ClientConn::new(ClientConfig {
        body_window: window,
        limits: Limits {
            max_head_bytes: 256,
            max_headers: 8,
        },
    });
    let method: &[u8] = if head { b"HEAD" } else { b"POST" };
    c.send_request(method, b"/", b"h", [], true).unwrap();
    let (mut seen, mut body, mut fed) = (Vec::new(), Vec::new(), 0);
    let mut buf = BytesMut::new();
    loop {
        let error = c.recv(&mut buf).is_err();
        let mut progress = false;
        while let Some(ev) = c.poll_event() {
            progress = true;
            match ev {
                ClientEvent::Response {
                    head,
                    informational,
                    end_stream,
                } => seen.push(Seen::Head(head.status(), informational, end_stream)),
                ClientEvent::Data { data, end_stream } => {
                    assert!(data.len() <= window as usize);
                    body.extend_from_slice(&data);
                    c.release(data.len() as u32);
                    if end_stream {
                        seen.push(Seen::Body(std::mem::take(&mut body), true));
                    }
                }
                ClientEvent::Trailers { raw } => {
                    seen.push(Seen::Body(std::mem::take(&mut body), false));
                    seen.push(Seen::Trailers(raw.to_vec()));
                }
            }
        }
        if error {
            seen.push(Seen::Error);
            break;
        }
        if c.has_pending_input(&buf) {
            continue;
        }
        if fed < wire.len() && c.wants_input() {
            let n = step.min(wire.len() - fed);
            buf.extend_from_slice(&wire[fed..fed + n]);
            fed += n;
        } else if !progress {
            if !body.is_empty() {
                seen.push(Seen::Body(std::mem::take(&mut body), false));
            }
            seen.push(Seen::Eof(c.recv_eof().is_ok()));
            while let Some(ev) = c.poll_event() {
                assert!(
                    matches!(ev, ClientEvent::Data { data, end_stream: true } if data.is_empty())
                );
            }
            break;
        }
    }
    // Nothing sends on a connection in any of these states.
    assert!(c.send_data(&mut Bytes::from_static(b"x"), true).is_err());
    assert!(c.send_trailers([]).is_err());
    seen
}

/// `outcome` is the same whole and in pieces of `step`.
fn survive(wire: &[u8], step: usize, window: u32) {
    for head in [false, true] {
        let whole = outcome(wire, wire.len().max(1), window, head);
        let split = outcome(wire, step.max(1), window, head);
        assert_eq!(whole, split, "{wire:?} every {step}");
    }
}

#[test]
fn no_bytes_make_it_panic_or_depend_on_how_they_are_split() {
    let seeds: [&[u8]; 14] = [
        b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nabcHTTP/1.1 200 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 1\r\n\r\nab",
        b"HTTP/1.1 200 OK\r\n\r\nclose-delimited body",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nT: 1\r\n\r\nX",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nffffffffffffffff\r\nab",
        b"HTTP/1.1 200 \xff\xfe\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 18446744073709551615\r\n\r\nabc",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\nT: \x01\r\n\r\n",
        b"\r\n\r\n\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n",
        b"HTTP/1.1 200 OK\nContent-Length: 1\n\nxHTTP/1.1",
        b"HTTP/1.1 999 \r\n\r\n\0\0\0",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhelloXX",
    ];
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for seed in seeds {
        for step in [1, 5, 1000] {
            survive(seed, step, 3);
        }
        // Mutations of each: flipped, dropped and repeated bytes.
        for _ in 0..200 {
            let mut wire = seed.to_vec();
            for _ in 0..1 + xorshift(&mut rng) % 4 {
                let at = (xorshift(&mut rng) as usize) % wire.len().max(1);
                match xorshift(&mut rng) % 3 {
                    0 if !wire.is_empty() => wire[at] = xorshift(&mut rng) as u8,
                    1 if !wire.is_empty() => {
                        wire.remove(at);
                    }
                    _ => wire.insert(at, wire.get(at).copied().unwrap_or(b'\n')),
                }
            }
            let step = 1 + (xorshift(&mut rng) % 16) as usize;
            survive(&wire, step, 1 + (xorshift(&mut rng) % 8) as u32);
        }
    }
    // Pure noise.
    for _ in 0..200 {
        let len = (xorshift(&mut rng) % 300) as usize;
        let wire: Vec<u8> = (0..len).map(|_| xorshift(&mut rng) as u8).collect();
        survive(&wire, 1 + (xorshift(&mut rng) % 32) as usize, 4);
    }
}
