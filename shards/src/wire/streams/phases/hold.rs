//! Phases 4 and 5 for a response a filter holds (`FilterCx::hold_response`): its head kept, its body gathered (bounded, the upstream's window given back as it comes), then all of it sent at the answer's end with its length.

use bytes::BytesMut;
use h2wire::message::HeaderList;

use super::{Parts, Then};
use crate::http_filter::{HeaderEdits, HeldResponse, Reply};
use crate::wire::body::Item;
use crate::wire::dstream::DStream;
use crate::wire::streams::{enqueue, reply};

/// The most of a body a held response keeps (Envoy's default buffer
/// limit); past it the stream is answered 500, as Envoy answers a
/// response past its buffer limit.
pub(super) const MAX_HELD_BODY: usize = 1 << 20;

/// The head goes no further yet: kept with the edits the filters made.
pub(super) fn hold(s: &mut DStream, status: u16, head: &HeaderList, edits: &mut HeaderEdits) {
    s.held = Some(Box::new(HeldResponse {
        status,
        head: head.clone(),
        edits: std::mem::take(edits),
        body: BytesMut::new(),
    }));
}

/// A chunk of a held response's body, past the filters: kept, its bytes
/// released upstream at once; at its end, the response goes.
pub(super) fn held_data(
    p: &mut Parts<'_>,
    s: &mut DStream,
    stream: u32,
    data: &[u8],
    len: u32,
    end: bool,
) -> Then {
    if let (Some(t), Some(up)) = (&s.target, s.up) {
        if let Some(c) = t.pool.borrow_mut().conn(up) {
            c.release(up.stream, len);
        }
        // Its window update goes out this turn.
        crate::wire::streams::touch(p.touched, &t.pool, up.slot);
    }
    let Some(h) = s.held.as_mut() else {
        return Then::Go;
    };
    if h.body.len() + data.len() > MAX_HELD_BODY {
        return refuse(s, Reply::new(500, "", ""));
    }
    h.body.extend_from_slice(data);
    p.cx.charge(stream, s);
    match end {
        true => release(p, s, stream),
        false => Then::Go,
    }
}

/// A held response is answered locally instead: no byte of it went, so
/// the client gets a reply, not a reset.
pub(super) fn refuse(s: &mut DStream, reply: Reply) -> Then {
    s.held = None;
    s.resp_started = false;
    Then::Refuse(reply)
}

/// The held response goes downstream whole: its head as the filters
/// left it, with its length, then its body (its trailers are dropped).
pub(super) fn release(p: &mut Parts<'_>, s: &mut DStream, stream: u32) -> Then {
    let Some(h) = s.held.take() else {
        return Then::Go;
    };
    let HeldResponse {
        status,
        head,
        mut edits,
        body,
    } = *h;
    let len = body.len().to_string();
    let _ = edits.set(b"content-length", len.as_bytes());
    if let Some(l) = s.log.as_mut() {
        l.on_response(&p.cx.logs, status, Some(&head));
    }
    s.status = Some(status);
    p.cx.wire.shard.stats.downstream.responses.record(status);
    let end = body.is_empty();
    let fields = edits.apply(reply::response_fields(&head));
    let sent = p.conn.send_headers(stream, status, fields, end);
    if sent.is_err() || end {
        return Then::Finish;
    }
    s.resp.push_back(Item::Data {
        data: body.freeze(),
        end: true,
        credit: 0,
    });
    enqueue(p.queued, s, stream);
    Then::Go
}
