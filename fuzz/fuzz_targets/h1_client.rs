//! h1wire's client connection: arbitrary response bytes, fed whole or in pieces, give the same heads, body, trailers and end, never a panic; the body never runs more than one piece past its window.
#![no_main]

use bytes::BytesMut;
use h1wire::client::{ClientConfig, ClientConn, ClientEvent};
use h1wire::Limits;
use libfuzzer_sys::fuzz_target;

/// Small limits, so the fuzzer reaches them.
const CONFIG: ClientConfig = ClientConfig {
    limits: Limits {
        max_head_bytes: 512,
        max_headers: 8,
    },
    body_window: 64,
};

#[derive(Debug, PartialEq)]
enum Seen {
    Head(u16, bool, bool),
    Body(Vec<u8>, bool),
    Trailers(Vec<u8>),
    Error,
    Eof(bool),
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, wire)) = data.split_first() else {
        return;
    };
    // The low bits choose the split; bit 7 makes the request a HEAD.
    let step = usize::from(flags & 0x7f).max(1);
    let head = flags & 0x80 != 0;
    let whole = run(wire, wire.len().max(1), head);
    let pieces = run(wire, step, head);
    assert_eq!(whole, pieces, "split every {step} bytes");
});

/// Sends one request, then feeds `wire` `step` bytes at a time while the
/// connection wants input, releasing body bytes as a caller would (one
/// piece behind), then signals the end of the stream.
fn run(wire: &[u8], step: usize, head: bool) -> Vec<Seen> {
    let mut c = ClientConn::new(CONFIG);
    let method: &[u8] = if head { b"HEAD" } else { b"GET" };
    c.send_request(method, b"/", b"h", [], true).expect("idle");
    let mut seen = Vec::new();
    let mut body = Vec::new();
    let mut held = 0u32;
    let mut buf = BytesMut::new();
    let mut fed = 0;
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
                } => {
                    assert!(head.wire_len() <= CONFIG.limits.max_head_bytes);
                    seen.push(Seen::Head(head.status(), informational, end_stream));
                }
                ClientEvent::Data { data, end_stream } => {
                    held += data.len() as u32;
                    body.extend_from_slice(&data);
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
            return seen;
        }
        // Releasing what was taken lets the next piece decode.
        if held > 0 {
            c.release(held);
            held = 0;
            progress = true;
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
            let ok = c.recv_eof().is_ok();
            while let Some(ev) = c.poll_event() {
                if let ClientEvent::Data { data, .. } = ev {
                    assert!(data.is_empty());
                }
            }
            seen.push(Seen::Eof(ok));
            return seen;
        }
    }
}
