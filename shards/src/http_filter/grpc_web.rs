//! The gRPC-Web filter (Envoy's `envoy.filters.http.grpc_web`): a browser's gRPC-Web request (binary or base64 text) goes upstream as gRPC, and the gRPC answer comes back as gRPC-Web, its trailers a frame at the end of the body; an answer that is not gRPC (an HTTP error, a local reply) keeps its status and carries `grpc-status` / `grpc-message` in its head.
//!
//! As Envoy 1.40 does it (recorded side by side; `docs/http-filters.md`):
//! - only `content-type` exactly `application/grpc-web`,
//!   `application/grpc-web+proto`, `application/grpc-web-text` or
//!   `application/grpc-web-text+proto` is converted; every other request
//!   passes untouched;
//! - upstream, `content-type: application/grpc`, `te: trailers`,
//!   `grpc-accept-encoding: identity` unless the client gave one, no
//!   `content-length`; a text body is decoded (4-symbol groups, padding
//!   only at a chunk's end, standard alphabet; anything else is 400 with
//!   `grpc-status: 13`);
//! - the answer is text (`application/grpc-web-text+proto`, each whole
//!   frame base64 on its own) only when `accept` is exactly one of the
//!   two text types, else `application/grpc-web+proto`;
//! - a trailers-only answer keeps its `grpc-status` in its head.

use bytes::{BufMut, Bytes, BytesMut};
use engine::headers::{grpc_message, http_to_grpc_status, is_grpc_content_type};

use super::{FilterCx, Flow, HttpFilter, Reply, RequestFlow, RequestHead, ResponseHead, Trailers};

/// The filter (its config has no fields).
pub struct GrpcWeb;

const BINARY: &[u8] = b"application/grpc-web+proto";
const TEXT: &[u8] = b"application/grpc-web-text+proto";
/// Envoy cuts a `grpc-message` made of a body there.
const MAX_MESSAGE: usize = 16 * 1024;
/// Text answers: the most of a frame held until it is whole; past it,
/// what is held goes out as base64 of whole 3-byte groups (a client
/// decodes the concatenation all the same).
const MAX_PENDING_OUT: usize = 1 << 20;

/// A gRPC-Web stream's conversion.
#[derive(Default)]
struct WebStream {
    text_request: bool,
    text_response: bool,
    /// Base64 symbols of a group the next chunk completes (at most 3).
    pending_in: Vec<u8>,
    /// The answer is gRPC: its trailers become a frame.
    grpc_answer: bool,
    /// The answer is not gRPC: its body is dropped (its status is in the
    /// head).
    drop_body: bool,
    /// Text answers: bytes of a frame not yet whole.
    pending_out: BytesMut,
    /// This filter answered the request itself (bad base64).
    answered: bool,
}

fn web_content_type(ct: &[u8]) -> Option<bool> {
    match ct {
        b"application/grpc-web" | b"application/grpc-web+proto" => Some(false),
        b"application/grpc-web-text" | b"application/grpc-web-text+proto" => Some(true),
        _ => None,
    }
}

impl HttpFilter for GrpcWeb {
    fn on_request_headers(&self, cx: &mut FilterCx<'_>, head: &mut RequestHead<'_>) -> RequestFlow {
        if head.get(b":path").is_none() {
            return RequestFlow::Continue;
        }
        let Some(text_request) = head.get(b"content-type").and_then(web_content_type) else {
            return RequestFlow::Continue;
        };
        let text_response = head.get(b"accept").and_then(web_content_type) == Some(true);
        // Names and values are ours: none of these edits can fail.
        let _ = head.set(b"content-type", b"application/grpc");
        let _ = head.remove(b"content-length");
        let _ = head.set(b"te", b"trailers");
        if head.get(b"grpc-accept-encoding").is_none() {
            let _ = head.set(b"grpc-accept-encoding", b"identity");
        }
        cx.shard.stats.grpc_web.converted.inc();
        cx.set_state(WebStream {
            text_request,
            text_response,
            ..WebStream::default()
        });
        RequestFlow::Continue
    }

    fn on_request_body(&self, cx: &mut FilterCx<'_>, data: &mut Bytes, end: bool) -> Flow {
        let Some(w) = cx.state::<WebStream>().filter(|w| w.text_request) else {
            return Flow::Continue;
        };
        match decode_text(&mut w.pending_in, data, end) {
            Some(decoded) => {
                *data = decoded;
                Flow::Continue
            }
            None => {
                w.answered = true;
                let reply = bad_base64(w.text_response);
                cx.shard.stats.grpc_web.bad_request.inc();
                Flow::Reply(reply)
            }
        }
    }

    fn on_response_headers(&self, cx: &mut FilterCx<'_>, head: &mut ResponseHead<'_>) -> Flow {
        let Some(w) = cx.state::<WebStream>().filter(|w| !w.answered) else {
            return Flow::Continue;
        };
        let ct = if w.text_response { TEXT } else { BINARY };
        let upstream_ct = head.get(b"content-type").filter(|_| !head.is_local());
        if upstream_ct.and_then(web_content_type) == Some(false) {
            // The backend speaks gRPC-Web itself: its answer passes.
            return Flow::Continue;
        }
        let grpc = upstream_ct.is_some_and(is_grpc_content_type);
        let _ = head.set(b"content-type", ct);
        let _ = head.remove(b"content-length");
        if grpc {
            // A trailers-only answer keeps its status in its head.
            w.grpc_answer = !head.end_stream();
            return Flow::Continue;
        }
        // Not gRPC: its status says what went wrong, for a gRPC-Web
        // client that reads only gRPC's.
        if head.get(b"grpc-status").is_none() {
            let code = http_to_grpc_status(head.status()).to_string();
            let _ = head.set(b"grpc-status", code.as_bytes());
        }
        if let Some(body) = head.local_body() {
            // A local reply's body is its message (an upstream's goes by
            // before its end could be read into the head: dropped).
            let cut = &body[..body.len().min(MAX_MESSAGE)];
            let message = grpc_message(cut, true).into_owned();
            *body = Bytes::new();
            if !message.is_empty() {
                let _ = head.set(b"grpc-message", &message);
            }
        }
        w.drop_body = true;
        Flow::Continue
    }

    fn on_response_body(&self, cx: &mut FilterCx<'_>, data: &mut Bytes, end: bool) -> Flow {
        let Some(w) = cx.state::<WebStream>() else {
            return Flow::Continue;
        };
        if w.drop_body {
            *data = Bytes::new();
        } else if w.grpc_answer && w.text_response {
            w.pending_out.extend_from_slice(data);
            let mut text = encode_whole_frames(&mut w.pending_out);
            if end || w.pending_out.len() > MAX_PENDING_OUT {
                // The answer ends without trailers, or a frame is longer
                // than what is held of it: what is held goes (whole
                // 3-byte groups while more follows).
                let take = match end {
                    true => w.pending_out.len(),
                    false => w.pending_out.len() / 3 * 3,
                };
                let held = w.pending_out.split_to(take);
                let mut more = String::from_utf8(text.to_vec()).unwrap_or_default();
                engine::base64::base64_encode(&held, &mut more);
                text = Bytes::from(more);
            }
            *data = text;
        }
        Flow::Continue
    }

    fn on_request_trailers(&self, cx: &mut FilterCx<'_>, _trailers: &mut Trailers) -> Flow {
        // A text body's last group must be whole by its end.
        match cx.state::<WebStream>() {
            Some(w) if w.text_request && !w.pending_in.is_empty() => {
                w.answered = true;
                let reply = bad_base64(w.text_response);
                cx.shard.stats.grpc_web.bad_request.inc();
                Flow::Reply(reply)
            }
            _ => Flow::Continue,
        }
    }

    fn on_response_trailers(&self, cx: &mut FilterCx<'_>, trailers: &mut Trailers) -> Flow {
        if cx.state::<WebStream>().is_some_and(|w| w.drop_body) {
            // Not gRPC: its status is in the head (as Envoy drops them).
            trailers.clear();
            return Flow::Continue;
        }
        let Some(w) = cx.state::<WebStream>().filter(|w| w.grpc_answer) else {
            return Flow::Continue;
        };
        let frame = trailer_frame(trailers);
        trailers.clear();
        let out = match w.text_response {
            true => {
                // What is left of a frame goes first, then the trailers',
                // each base64 on its own.
                let mut text = String::new();
                engine::base64::base64_encode(&w.pending_out, &mut text);
                w.pending_out.clear();
                engine::base64::base64_encode(&frame, &mut text);
                Bytes::from(text)
            }
            false => frame,
        };
        cx.send_before_trailers(out);
        Flow::Continue
    }
}

/// Envoy's answer to a text body that is not base64.
fn bad_base64(text_response: bool) -> Reply {
    let ct = if text_response { TEXT } else { BINARY };
    let mut reply = Reply::new(400, "", "");
    let _ = reply.fields.set(b"content-type", ct);
    let _ = reply.fields.set(b"grpc-status", b"13");
    let message = b"Bad gRPC-web request, invalid base64 data.";
    let _ = reply.fields.set(b"grpc-message", message);
    reply
}

/// The trailers as gRPC-Web's trailer frame: `0x80`, the length, then
/// `name:value\r\n` each, in order.
fn trailer_frame(trailers: &Trailers) -> Bytes {
    let len: usize = trailers.iter().map(|(n, v)| n.len() + v.len() + 3).sum();
    let mut frame = BytesMut::with_capacity(5 + len);
    frame.put_u8(0x80);
    frame.put_u32(len as u32);
    for (name, value) in trailers {
        frame.extend_from_slice(name);
        frame.put_u8(b':');
        frame.extend_from_slice(value);
        frame.extend_from_slice(b"\r\n");
    }
    frame.freeze()
}

/// The whole gRPC frames at the front of `pending`, each base64 on its
/// own; a partial frame stays.
fn encode_whole_frames(pending: &mut BytesMut) -> Bytes {
    let mut text = String::new();
    while let Some(len) = pending.get(1..5) {
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let whole = 5 + len;
        if pending.len() < whole {
            break;
        }
        let frame = pending.split_to(whole);
        engine::base64::base64_encode(&frame, &mut text);
    }
    Bytes::from(text)
}

/// A text request body chunk decoded: the 4-symbol groups it completes
/// (with what `pending` held), the rest kept for the next chunk. `None`:
/// not base64 as gRPC-Web sends it (another alphabet, padding before the
/// chunk's end, a body whose length is no multiple of 4).
fn decode_text(pending: &mut Vec<u8>, data: &[u8], end: bool) -> Option<Bytes> {
    let standard = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=');
    if !data.iter().all(standard) {
        return None;
    }
    let mut symbols = std::mem::take(pending);
    symbols.extend_from_slice(data);
    let whole = symbols.len() - symbols.len() % 4;
    if end && whole != symbols.len() {
        return None;
    }
    let groups = &symbols[..whole];
    // Padding ends a chunk's groups: none may follow it.
    if let Some(pad) = groups.iter().position(|&b| b == b'=') {
        let in_last_group = pad >= whole.saturating_sub(4);
        if !in_last_group || groups[pad..].iter().any(|&b| b != b'=') {
            return None;
        }
    }
    let mut out = vec![0u8; whole / 4 * 3];
    let decoded = match whole {
        0 => &out[..0],
        _ => engine::base64::base64_decode(groups, &mut out)?,
    };
    let decoded = Bytes::copy_from_slice(decoded);
    *pending = symbols[whole..].to_vec();
    Some(decoded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_bodies_decode_by_groups_across_chunks() {
        let mut pending = Vec::new();
        // Envoy's 5o: `AAAAA` | `AE=` | `YQ==`.
        assert_eq!(
            decode_text(&mut pending, b"AAAAA", false).unwrap(),
            &[0u8, 0, 0][..]
        );
        assert_eq!(
            decode_text(&mut pending, b"AE=", false).unwrap(),
            &[0u8, 1][..]
        );
        assert_eq!(decode_text(&mut pending, b"YQ==", true).unwrap(), &b"a"[..]);
        assert!(pending.is_empty());
        // Padded pieces in chunks of their own (5n, 5r).
        let mut p = Vec::new();
        assert_eq!(
            decode_text(&mut p, b"AAAAAAE=", false).unwrap(),
            &[0u8, 0, 0, 0, 1][..]
        );
        assert_eq!(decode_text(&mut p, b"YQ==", true).unwrap(), &b"a"[..]);
    }

    #[test]
    fn bad_text_bodies_are_refused() {
        for (body, end) in [
            (&b"!!!!"[..], true),
            (b"AAAAA", true),
            (b"AAAAAAVoZWxsbw", true),
            // Padding inside one chunk (5g, 5k).
            (b"AAAAAAE=YQ==", true),
            (b"AA==AAAA", false),
            // Newlines, the URL-safe alphabet (5h, 5i).
            (b"AAAA\nAAAA", true),
            (b"AA-_", true),
        ] {
            assert!(
                decode_text(&mut Vec::new(), body, end).is_none(),
                "{body:?}"
            );
        }
        assert_eq!(decode_text(&mut Vec::new(), b"", true).unwrap(), &b""[..]);
    }

    #[test]
    fn trailers_become_a_frame_and_text_answers_whole_frames() {
        let t = vec![
            (b"grpc-status".to_vec(), b"0".to_vec()),
            (b"grpc-message".to_vec(), b"".to_vec()),
            (b"x-t".to_vec(), b"a".to_vec()),
        ];
        let frame = trailer_frame(&t);
        assert_eq!(&frame[..5], &[0x80, 0, 0, 0, 0x25]);
        assert_eq!(
            &frame[5..],
            &b"grpc-status:0\r\ngrpc-message:\r\nx-t:a\r\n"[..]
        );
        // Envoy's 9c: three bytes wait; then two frames, each padded.
        let mut pending = BytesMut::from(&[0u8, 0, 0][..]);
        assert!(encode_whole_frames(&mut pending).is_empty());
        pending.extend_from_slice(b"\x00\x0bhello world\x00\x00\x00\x00\x032nd");
        assert_eq!(
            encode_whole_frames(&mut pending),
            "AAAAAAtoZWxsbyB3b3JsZA==AAAAAAMybmQ="
        );
        assert!(pending.is_empty());
    }
}
