//! h1wire's request side: arbitrary bytes parse without panicking, bounded by the limits, and the result does not depend on how the bytes arrive (one buffer, or pieces split where the first input byte says): two parsers that disagree are how requests get smuggled.
#![no_main]

use bytes::BytesMut;
use h1wire::{parse_request_head, BodyDecoder, BodyEvent, Limits};
use libfuzzer_sys::fuzz_target;

/// Small limits, so the fuzzer reaches them.
const LIMITS: Limits = Limits {
    max_head_bytes: 512,
    max_headers: 8,
};

/// What a connection sees: each request's head (method, target, framing,
/// keep-alive), body bytes and trailers, then the error that ends it, if
/// any.
#[derive(Debug, PartialEq)]
enum Seen {
    Head(Vec<u8>, Vec<u8>, String, bool),
    Body(Vec<u8>),
    Trailers(Vec<u8>),
    End,
    Error(u16),
}

fuzz_target!(|data: &[u8]| {
    let Some((&step, wire)) = data.split_first() else {
        return;
    };
    let whole = run(wire, wire.len().max(1));
    let pieces = run(wire, usize::from(step).max(1));
    assert_eq!(whole, pieces, "split every {step} bytes");
});

/// Parses requests out of `wire` fed `step` bytes at a time, as a
/// connection would, until the bytes run out or an error ends it.
fn run(wire: &[u8], step: usize) -> Vec<Seen> {
    let mut seen = Vec::new();
    let mut buf = BytesMut::new();
    let mut fed = 0;
    let mut body: Option<BodyDecoder> = None;
    let mut data = Vec::new();
    loop {
        assert!(buf.len() <= wire.len());
        let progress = match &mut body {
            None => match parse_request_head(&mut buf, &LIMITS) {
                Ok(Some(head)) => {
                    assert!(head.wire_len() <= LIMITS.max_head_bytes);
                    assert!(head.fields().count() <= LIMITS.max_headers);
                    seen.push(Seen::Head(
                        head.method().to_vec(),
                        head.target().to_vec(),
                        format!("{:?}", head.framing),
                        head.keep_alive,
                    ));
                    body = Some(BodyDecoder::new(head.framing));
                    true
                }
                Ok(None) => false,
                Err(e) => {
                    seen.push(Seen::Error(e.status()));
                    return seen;
                }
            },
            Some(dec) => match dec.decode(&mut buf, &LIMITS) {
                // Data arrives in pieces that depend on the split: compare
                // the bytes, not the pieces.
                Ok(Some(BodyEvent::Data(d))) => {
                    data.extend_from_slice(&d);
                    true
                }
                Ok(Some(BodyEvent::Trailers(t))) => {
                    seen.push(Seen::Body(std::mem::take(&mut data)));
                    seen.push(Seen::Trailers(t.to_vec()));
                    true
                }
                Ok(Some(BodyEvent::End)) => {
                    seen.push(Seen::Body(std::mem::take(&mut data)));
                    seen.push(Seen::End);
                    body = None;
                    true
                }
                Ok(None) => false,
                Err(e) => {
                    seen.push(Seen::Body(std::mem::take(&mut data)));
                    seen.push(Seen::Error(e.status()));
                    return seen;
                }
            },
        };
        if !progress {
            if fed == wire.len() {
                if !data.is_empty() {
                    seen.push(Seen::Body(std::mem::take(&mut data)));
                }
                return seen;
            }
            let next = (fed + step).min(wire.len());
            buf.extend_from_slice(&wire[fed..next]);
            fed = next;
        }
    }
}
