//! h1wire's server connection: arbitrary bytes, fed whole or in pieces, give the same requests, bodies and bytes written back (answers, 100-continues, refusals), never a panic; one exchange at a time, whatever the client pipelines.
#![no_main]

use bytes::{Bytes, BytesMut};
use h1wire::conn::{Event, ServerConfig, ServerConn};
use h1wire::Limits;
use libfuzzer_sys::fuzz_target;

/// Small limits, so the fuzzer reaches them.
const CONFIG: ServerConfig = ServerConfig {
    limits: Limits {
        max_head_bytes: 512,
        max_headers: 8,
    },
    body_window: 64,
    accept_http_10: true,
    caller_writes_refusals: false,
};

#[derive(Debug, PartialEq)]
enum Seen {
    Request(u32, Vec<u8>, Vec<u8>),
    Body(u32, Vec<u8>),
    Trailers(u32, Vec<u8>),
    Error(u16),
    Closed,
}

fuzz_target!(|data: &[u8]| {
    let Some((&step, wire)) = data.split_first() else {
        return;
    };
    let whole = run(wire, wire.len().max(1));
    let pieces = run(wire, usize::from(step).max(1));
    assert_eq!(whole, pieces, "split every {step} bytes");
});

/// Feeds `wire` `step` bytes at a time, answering each request once it is
/// complete (a bodyless head answers with a chunked body, others with a
/// length), releasing body bytes as they come. Returns what was seen and
/// everything written.
fn run(wire: &[u8], step: usize) -> (Vec<Seen>, Vec<u8>) {
    let mut c = ServerConn::new(CONFIG);
    let mut seen = Vec::new();
    let mut out = Vec::new();
    let mut buf = BytesMut::new();
    let mut body = Vec::new();
    let mut fed = 0;
    loop {
        // Events queued before an error come before it: a head whole in
        // the buffer is handed out even when its body turns out bad.
        let error = c.recv(&mut buf).err();
        let mut progress = false;
        while let Some(ev) = c.poll_event() {
            progress = true;
            let done = match ev {
                Event::Request {
                    stream,
                    head,
                    end_stream,
                } => {
                    assert!(head.wire_len() <= CONFIG.limits.max_head_bytes);
                    seen.push(Seen::Request(
                        stream,
                        head.method().to_vec(),
                        head.target().to_vec(),
                    ));
                    end_stream.then_some((stream, true))
                }
                Event::Data {
                    stream,
                    data,
                    end_stream,
                } => {
                    c.release(data.len() as u32);
                    body.extend_from_slice(&data);
                    if end_stream {
                        seen.push(Seen::Body(stream, std::mem::take(&mut body)));
                    }
                    end_stream.then_some((stream, false))
                }
                Event::Trailers { stream, raw } => {
                    seen.push(Seen::Body(stream, std::mem::take(&mut body)));
                    seen.push(Seen::Trailers(stream, raw.to_vec()));
                    Some((stream, false))
                }
            };
            if let Some((stream, chunked)) = done {
                answer(&mut c, stream, chunked);
            }
        }
        if let Some(e) = error {
            seen.push(Seen::Error(e.status()));
        }
        while let Some(b) = c.poll_output() {
            out.extend_from_slice(&b);
        }
        if c.is_closed() {
            seen.push(Seen::Closed);
            return (seen, out);
        }
        assert!(buf.len() <= wire.len());
        if fed < wire.len() && c.wants_input(buf.len()) {
            let n = step.min(wire.len() - fed);
            buf.extend_from_slice(&wire[fed..fed + n]);
            fed += n;
        } else if !progress {
            return (seen, out);
        }
    }
}

fn answer(c: &mut ServerConn, stream: u32, chunked: bool) {
    if chunked {
        c.send_headers(stream, 200, [(&b"x"[..], &b"1"[..])], false)
            .expect("head");
        c.send_data(stream, &mut Bytes::from_static(b"ab"), false)
            .expect("data");
        c.send_trailers(stream, [(&b"t"[..], &b"2"[..])])
            .expect("end");
    } else {
        c.send_headers(stream, 201, [(&b"content-length"[..], &b"2"[..])], false)
            .expect("head");
        c.send_data(stream, &mut Bytes::from_static(b"ok"), true)
            .expect("data");
    }
}
