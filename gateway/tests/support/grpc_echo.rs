//! A gRPC echo backend for the gRPC-Web and bridge tests (the `h2` crate, h2c): what each path answers is below; it records each request's fields and body.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

/// What the backend saw: each request's fields and body.
pub type Seen = Arc<Mutex<Vec<(Vec<(String, String)>, Vec<u8>)>>>;

/// A gRPC backend: `/test.Echo/Unary` echoes with initial metadata and
/// trailers; `/test.Echo/Fail` fails after its head (status 5);
/// `/test.Echo/Only` answers trailers-only (status 5); `/test.Echo/Stream`
/// sends the request three times; `/plain` answers 503 in text.
pub fn backend() -> (SocketAddr, Seen) {
    let seen: Seen = Arc::default();
    let s = Arc::clone(&seen);
    let addr = super::h2c_server::h2c_server(move |_, mut conn| {
        let seen = Arc::clone(&s);
        async move {
            while let Some(Ok((req, respond))) = conn.accept().await {
                glommio::spawn_local(serve(req, respond, Arc::clone(&seen))).detach();
            }
        }
    });
    (addr, seen)
}

async fn serve(
    req: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    seen: Seen,
) {
    let (parts, mut body) = req.into_parts();
    let mut buf = Vec::new();
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
        buf.extend_from_slice(&chunk);
    }
    let fields = parts
        .headers
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_owned()))
        .collect();
    seen.lock().unwrap().push((fields, buf.clone()));
    let head = |status: u16, ct: &str| {
        http::Response::builder()
            .status(status)
            .header("content-type", ct)
            .header("x-custom-header", "hv")
            .body(())
            .unwrap()
    };
    let trailers = |pairs: &[(&'static str, &str)]| {
        let mut t = http::HeaderMap::new();
        for (n, v) in pairs {
            t.append(*n, http::HeaderValue::from_str(v).unwrap());
        }
        t
    };
    match parts.uri.path() {
        "/test.Echo/Only" => {
            let mut only = head(200, "application/grpc");
            only.headers_mut()
                .insert("grpc-status", http::HeaderValue::from_static("5"));
            only.headers_mut().insert(
                "grpc-message",
                http::HeaderValue::from_static("failed here"),
            );
            let _ = respond.send_response(only, true);
        }
        "/plain" => {
            let Ok(mut s) = respond.send_response(head(503, "text/plain"), false) else {
                return;
            };
            let _ = s.send_data(Bytes::from_static(b"bad gw"), true);
        }
        "/native" => {
            // A backend that speaks gRPC-Web itself.
            let native = head(200, "application/grpc-web+proto");
            let Ok(mut s) = respond.send_response(native, false) else {
                return;
            };
            let _ = s.send_data(Bytes::from(buf.clone()), true);
        }
        "/test.Echo/NoTrailers" => {
            let Ok(mut s) = respond.send_response(head(200, "application/grpc"), false) else {
                return;
            };
            let _ = s.send_data(Bytes::from(buf.clone()), true);
        }
        path => {
            let Ok(mut s) = respond.send_response(head(200, "application/grpc"), false) else {
                return;
            };
            let copies = if path == "/test.Echo/Stream" { 3 } else { 1 };
            if path != "/test.Echo/Fail" {
                for _ in 0..copies {
                    let _ = s.send_data(Bytes::from(buf.clone()), false);
                }
            }
            let t = match path {
                "/test.Echo/Fail" => trailers(&[
                    ("grpc-status", "5"),
                    ("grpc-message", "not found: caf%C3%A9"),
                ]),
                _ => trailers(&[
                    ("grpc-status", "0"),
                    ("grpc-message", ""),
                    ("x-custom-trailer", "tv"),
                ]),
            };
            let _ = s.send_trailers(t);
        }
    }
}
