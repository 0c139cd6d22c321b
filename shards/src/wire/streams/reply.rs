//! Responses on the wire: the fields of an upstream's head that go downstream, and local replies as Envoy shapes them (gRPC requests get a trailers-only answer, HEAD requests the head alone).

use bytes::Bytes;
use engine::headers::{http_to_grpc_status, is_hop_by_hop};
use h2wire::message::HeaderList;

use crate::http_filter::router::text;
use crate::http_filter::{HeaderEdits, Reply};
use crate::wire::codec::DownCodec;

pub(super) fn is_head(head: &HeaderList) -> bool {
    head.get(b":method") == Some(b"HEAD")
}

/// Regular response fields that go downstream (hop-by-hop stripped).
pub(super) fn response_fields(head: &HeaderList) -> impl Iterator<Item = (&[u8], &[u8])> {
    head.iter()
        .filter(|(n, _, _)| n.first() != Some(&b':') && !is_hop_by_hop(n))
        .map(|(n, v, _)| (n, v))
}

/// Sends `reply` on `stream`, with the reply's own fields and then the
/// filters' `edits` over them; the status that went (for the stats). For
/// gRPC requests a trailers-only response (200 + `grpc-status`), so gRPC
/// clients see a status. A HEAD request gets the head of the reply,
/// without its body.
pub(super) fn send(
    conn: &mut DownCodec,
    stream: u32,
    reply: &Reply,
    edits: &HeaderEdits,
    grpc: bool,
    head_only: bool,
) -> u16 {
    if grpc {
        let code = reply
            .grpc_status
            .unwrap_or_else(|| http_to_grpc_status(reply.status))
            .to_string();
        let message = engine::headers::grpc_message(&reply.body, false);
        let message = (!message.is_empty()).then_some(&message[..]);
        let fields = [
            (&b"content-type"[..], &b"application/grpc"[..]),
            (b"grpc-status", code.as_bytes()),
        ]
        .into_iter()
        .chain(message.map(|m| (&b"grpc-message"[..], m)))
        // A body format's content type is the message's, not the reply's.
        .chain(reply.fields.added().filter(|(n, _)| *n != b"content-type"));
        let _ = conn.send_headers(stream, 200, edits.apply(fields), true);
        return 200;
    }
    if reply.body.is_empty() {
        let _ = conn.send_headers(
            stream,
            reply.status,
            edits.apply(reply.fields.added()),
            true,
        );
        return reply.status;
    }
    let len = reply.body.len().to_string();
    let typed = reply.fields.get(b"content-type", None).is_some();
    let fields = (!typed)
        .then_some((&b"content-type"[..], &b"text/plain"[..]))
        .into_iter()
        .chain([(&b"content-length"[..], len.as_bytes())])
        .chain(reply.fields.added());
    let sent = conn.send_headers(stream, reply.status, edits.apply(fields), head_only);
    if sent.is_ok() && !head_only {
        let mut data: Bytes = reply.body.clone();
        let _ = conn.send_data(stream, &mut data, true);
    }
    reply.status
}

/// A numeric `grpc-status` field.
pub(super) fn grpc_status(list: &HeaderList) -> Option<u32> {
    text(list.get(b"grpc-status"))?.trim().parse().ok()
}

pub(crate) fn status_of(head: &HeaderList) -> u16 {
    text(head.get(b":status"))
        .and_then(|s| s.parse().ok())
        .unwrap_or(502)
}
