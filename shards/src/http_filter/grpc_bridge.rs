//! The gRPC HTTP/1.1 bridge (Envoy's `envoy.filters.http.grpc_http1_bridge`): a gRPC request from an HTTP/1.1 client, which cannot read trailers, gets the answer's `grpc-status` and `grpc-message` in the head instead: the answer is held to its end (`FilterCx::hold_response`), a non-zero status makes it 503, and it goes with its length. With `upgrade_protobuf_to_grpc`, an `application/x-protobuf` request is framed as one gRPC message upstream and its answer's message unframed.
//!
//! As Envoy 1.40 does it (recorded side by side; `docs/http-filters.md`):
//! only HTTP/1.x requests with `content-type: application/grpc` or
//! `application/grpc+proto` are bridged (the request itself goes as it
//! came, no `te` added); HTTP/2 passes untouched; an answer without
//! trailers, or a trailers-only one, passes as it is.

use bytes::Bytes;

use super::{FilterCx, Flow, HttpFilter, Reply, RequestFlow, RequestHead, ResponseHead, Trailers};

/// The filter and its one setting.
pub struct GrpcHttp1Bridge {
    pub upgrade: bool,
}

/// The most of a protobuf request body framed whole (it is gathered;
/// Envoy's default buffer limit).
const MAX_UPGRADED_BODY: u32 = 1 << 20;

/// A bridged stream.
struct Bridged {
    /// Framed upstream from `application/x-protobuf`: unframe the answer.
    upgraded: bool,
    /// Upgraded: the request body (one chunk, gathered) is to be framed.
    frame: bool,
    /// The answer is held.
    held: bool,
}

fn is_http1(cx: &FilterCx<'_>) -> bool {
    cx.conn.protocol.starts_with("HTTP/1")
}

impl HttpFilter for GrpcHttp1Bridge {
    fn on_request_headers(&self, cx: &mut FilterCx<'_>, head: &mut RequestHead<'_>) -> RequestFlow {
        if !is_http1(cx) {
            return RequestFlow::Continue;
        }
        let ct = head.get(b"content-type").unwrap_or_default();
        // Envoy's: `application/grpc`, or `application/grpc+` anything.
        let grpc = ct == b"application/grpc" || ct.starts_with(b"application/grpc+");
        match ct {
            _ if grpc => {
                cx.set_state(Bridged {
                    upgraded: false,
                    frame: false,
                    held: false,
                });
                RequestFlow::Continue
            }
            b"application/x-protobuf" if self.upgrade => {
                let _ = head.set(b"content-type", b"application/grpc");
                let _ = head.remove(b"content-length");
                cx.set_state(Bridged {
                    upgraded: true,
                    frame: false,
                    held: false,
                });
                if head.end_stream() {
                    // No body: none is framed (as Envoy).
                    return RequestFlow::Continue;
                }
                // The frame's prefix says the message's length: the body
                // comes whole first.
                cx.pause_for_body(MAX_UPGRADED_BODY);
                RequestFlow::Pause
            }
            _ => RequestFlow::Continue,
        }
    }

    fn on_request_body_gathered(
        &self,
        cx: &mut FilterCx<'_>,
        _head: &mut RequestHead<'_>,
        body: Bytes,
        whole: bool,
    ) -> RequestFlow {
        if !whole {
            return RequestFlow::Reply(Reply::new(413, "Payload Too Large", ""));
        }
        if let Some(b) = cx.state::<Bridged>() {
            b.frame = !body.is_empty();
        }
        RequestFlow::Continue
    }

    fn on_request_body(&self, cx: &mut FilterCx<'_>, data: &mut Bytes, _end: bool) -> Flow {
        // The gathered body is one chunk: its prefix goes in front, with
        // its length as the filters before left it (a decompressor's).
        let frame = cx
            .state::<Bridged>()
            .is_some_and(|b| std::mem::take(&mut b.frame));
        if frame {
            *data = super::call::grpc_frame(data);
        }
        Flow::Continue
    }

    fn on_response_headers(&self, cx: &mut FilterCx<'_>, head: &mut ResponseHead<'_>) -> Flow {
        let grpc = head
            .get(b"content-type")
            .is_some_and(engine::headers::is_grpc_content_type);
        let Some(b) = cx.state::<Bridged>() else {
            return Flow::Continue;
        };
        if head.is_local() || !grpc || head.end_stream() {
            // A trailers-only answer has its status where the client
            // reads it; another passes as it is.
            return Flow::Continue;
        }
        b.held = true;
        cx.hold_response();
        Flow::Continue
    }

    fn on_response_trailers(&self, cx: &mut FilterCx<'_>, trailers: &mut Trailers) -> Flow {
        let Some(upgraded) = cx.state::<Bridged>().filter(|b| b.held).map(|b| b.upgraded) else {
            return Flow::Continue;
        };
        let Some(held) = cx.held_response() else {
            return Flow::Continue;
        };
        let field = |name: &[u8]| {
            trailers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        let status = field(b"grpc-status");
        if let Some(s) = &status {
            let _ = held.set(b"grpc-status", s);
            // Read as a number, as Envoy reads it.
            let ok = std::str::from_utf8(s)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
                == Some(0);
            if !ok {
                held.set_status(503);
            }
        }
        if let Some(m) = field(b"grpc-message") {
            let _ = held.set(b"grpc-message", &m);
        }
        if upgraded {
            // Its one message, unframed.
            let body = held.body_mut();
            if body.len() >= 5 {
                let _ = body.split_to(5);
            }
        }
        trailers.clear();
        Flow::Continue
    }
}
