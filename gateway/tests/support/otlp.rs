//! An OTLP/gRPC trace receiver (`TraceService/Export`) on port 0, keeping the spans it gets, and readers of those spans.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use engine::tracing::otlp::{
    any_value, ExportTraceServiceRequest, ExportTraceServiceResponse, Span,
};
use prost::Message;

use super::wait_until;

/// Spans an OTLP receiver got, with each export's service name.
pub type Received = Arc<Mutex<Vec<(String, Span)>>>;

/// An OTLP/gRPC receiver (`TraceService/Export`); `hang`: it never
/// answers.
pub fn receiver(hang: bool) -> (SocketAddr, Received) {
    let got: Received = Arc::default();
    let g = Arc::clone(&got);
    let addr = super::h2c_server::h2c_server(move |_, mut conn| {
        let got = Arc::clone(&g);
        async move {
            while let Some(Ok((req, respond))) = conn.accept().await {
                glommio::spawn_local(export(req, respond, Arc::clone(&got), hang)).detach();
            }
        }
    });
    (addr, got)
}

async fn export(
    req: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
    got: Received,
    hang: bool,
) {
    let (parts, mut body) = req.into_parts();
    assert_eq!(
        parts.uri.path(),
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
    );
    let mut buf = Vec::new();
    while let Some(Ok(chunk)) = body.data().await {
        let _ = body.flow_control().release_capacity(chunk.len());
        buf.extend_from_slice(&chunk);
    }
    if hang {
        glommio::timer::sleep(Duration::from_secs(30)).await;
        return;
    }
    let export = ExportTraceServiceRequest::decode(&buf[5..]).expect("an export");
    for rs in export.resource_spans {
        let service = rs
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                any_value::Value::StringValue(s) => Some(s.clone()),
                _ => None,
            })
            .unwrap_or_default();
        for ss in rs.scope_spans {
            for span in ss.spans {
                got.lock().unwrap().push((service.clone(), span));
            }
        }
    }
    let head = http::Response::builder()
        .status(200)
        .header("content-type", "application/grpc")
        .body(())
        .unwrap();
    let Ok(mut s) = respond.send_response(head, false) else {
        return;
    };
    let message = ExportTraceServiceResponse::default().encode_to_vec();
    let mut framed = vec![0];
    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
    framed.extend_from_slice(&message);
    let _ = s.send_data(Bytes::from(framed), false);
    let mut t = http::HeaderMap::new();
    t.insert("grpc-status", http::HeaderValue::from_static("0"));
    let _ = s.send_trailers(t);
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn attr(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
            any_value::Value::StringValue(s) => Some(s.clone()),
            other => Some(format!("{other:?}")),
        })
}

pub fn wait_spans(got: &Received, n: usize) -> Vec<(String, Span)> {
    wait_until(Duration::from_secs(10), "spans exported", || {
        got.lock().unwrap().len() >= n
    });
    got.lock().unwrap().clone()
}
