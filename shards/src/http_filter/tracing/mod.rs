//! Tracing (the connection manager's `tracing`, run as the first filter of its chain): each request's trace context is read from its headers (W3C `traceparent` for OpenTelemetry, B3 for Zipkin), sampled as Envoy samples it, handed on upstream with the gateway's own span as the parent, and, when sampled, the gateway's span is recorded at the stream's end and queued for export (`export.rs`).
//!
//! The decision travels even when a request is not sampled (its headers
//! say so), so the next hops agree. A malformed context header records
//! nothing and is passed on as it came, as Envoy does. Recording costs a
//! sampled request one span record; an unsampled one a few header edits.

mod export;
mod upstream;

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use engine::tracing::span::{self, RequestTags, ResponseTags};
use engine::tracing::{
    self as trace, AttrValue, SamplingInput, SpanKind, SpanRecord, TraceContext,
};
use engine::{CustomTagValue, TraceProvider, Tracing};

use super::{FilterCx, Flow, HttpFilter, RequestFlow, RequestHead, ResponseHead, StreamSummary};

/// A tag's value is cut there (a client's fields are in the tags: a span
/// queued per request must stay small); `http.url` has its own bound.
const MAX_TAG: usize = 256;

/// Cuts string tags past [`MAX_TAG`] bytes, at a character boundary.
fn cut_long_tags(record: &mut SpanRecord) {
    for (key, value) in record.attributes.iter_mut() {
        if let AttrValue::Str(s) = value {
            if s.len() > MAX_TAG && &**key != span::tags::HTTP_URL {
                let mut end = MAX_TAG;
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                *s = s[..end].into();
            }
        }
    }
}

pub(crate) use export::Exporters;
pub(crate) use upstream::{AttemptFailure, UpstreamSpans};

/// A sampled stream's span, until it ends.
struct Traced {
    record: SpanRecord,
    started: Instant,
}

fn nonzero(mut draw: impl FnMut() -> u64) -> u64 {
    loop {
        let v = draw();
        if v != 0 {
            return v;
        }
    }
}

impl HttpFilter for Arc<Tracing> {
    fn on_request_headers(&self, cx: &mut FilterCx<'_>, head: &mut RequestHead<'_>) -> RequestFlow {
        let propagation = self.provider.propagation();
        let Ok(extracted) = trace::extract(propagation, |name| head.get(name.as_bytes())) else {
            return RequestFlow::Continue;
        };
        let input = SamplingInput {
            parent_sampled: extracted.sampled(),
            // Not taken from a client: see docs/http-filters.md.
            force_trace: false,
            client_trace_id: head.get(b"x-client-trace-id").is_some(),
            health_check: false,
        };
        let shard = cx.shard;
        let sampled = trace::decide(&self.sampling, &input, &mut || shard.random_u64()).traced();
        let span_id = nonzero(|| shard.random_u64());
        let (shared, trace_id_128bit) = match &self.provider {
            TraceProvider::Zipkin {
                shared_span_context,
                trace_id_128bit,
                ..
            } => (*shared_span_context, *trace_id_128bit),
            TraceProvider::OpenTelemetry { .. } => (false, true),
        };
        let ctx = match extracted.parent() {
            // Zipkin's shared span: the server side of the client's span.
            Some(parent) if shared => parent.shared(sampled),
            Some(parent) => parent.child(span_id, sampled),
            None => {
                let high = u128::from(shard.random_u64()) << 64;
                let trace_id = match trace_id_128bit {
                    true => high | u128::from(nonzero(|| shard.random_u64())),
                    false => u128::from(nonzero(|| shard.random_u64())),
                };
                TraceContext::root(trace_id, span_id, sampled)
            }
        };
        trace::inject(propagation, &ctx, trace_id_128bit, |name, value| {
            // Names and values are the tracer's: valid fields.
            let _ = head.set(name.as_bytes(), value.as_bytes());
        });
        let decorator = cx.route.and_then(|r| r.decorator.as_ref());
        if !sampled {
            cx.shard.stats.tracing.not_sampled.inc();
            return RequestFlow::Continue;
        }
        cx.shard.stats.tracing.sampled.inc();
        // Its span's `request_size` and `response_size`.
        cx.count_sizes();
        let host = head.get(b":authority").unwrap_or_default();
        let zipkin = matches!(self.provider, TraceProvider::Zipkin { .. });
        let name = span::operation_name(
            decorator.map(|d| d.operation.as_str()),
            false,
            &String::from_utf8_lossy(host),
            zipkin,
        );
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let mut record = SpanRecord::new(&ctx, &name, SpanKind::Server, since.as_nanos() as u64);
        // Zipkin's server side of the client's own span.
        record.shared = shared && extracted.parent().is_some();
        record.remote_parent = extracted.parent().is_some();
        // The node has no zone of its own here (Envoy's is its locality's).
        span::tag_local(&mut record, &cx.snapshot.node.id, "");
        let peer = cx.conn.peer.ip().to_string();
        let tags = RequestTags {
            method: head.get(b":method").unwrap_or_default(),
            scheme: head.get(b":scheme").unwrap_or(cx.conn.scheme),
            host,
            path: head.get(b":path"),
            request_id: head.get(b"x-request-id"),
            client_trace_id: head.get(b"x-client-trace-id"),
            downstream_cluster: head.get(b"x-envoy-downstream-service-cluster"),
            user_agent: head.get(b"user-agent"),
            protocol: cx.conn.protocol,
            peer_address: &peer,
            max_path_tag_length: self.max_path_tag_length,
        };
        span::tag_request(&mut record, &tags);
        let mut custom: Vec<(Box<str>, AttrValue)> = Vec::new();
        for t in &self.custom_tags {
            let value = match &t.value {
                CustomTagValue::Fixed(v) => v.as_str(),
                CustomTagValue::RequestHeader {
                    name,
                    default_value,
                } => match head.get(name.as_bytes()).map(std::str::from_utf8) {
                    Some(Ok(v)) => v,
                    _ => default_value.as_str(),
                },
            };
            if !value.is_empty() {
                custom.push((t.tag.as_str().into(), AttrValue::from(value)));
            }
        }
        for (tag, value) in &custom {
            record.set_attr(tag, value.clone());
        }
        cut_long_tags(&mut record);
        // As cut on the request's span.
        for (tag, value) in custom.iter_mut() {
            if let Some(cut) = record.attr(tag) {
                *value = cut.clone();
            }
        }
        if self.spawn_upstream_span {
            // Each attempt's span is the host's parent: the request's
            // context written above is replaced as each goes.
            let spans = UpstreamSpans::new(
                propagation,
                trace_id_128bit,
                ctx,
                custom,
                record.start_unix_nanos,
                cx.now,
            );
            *cx.upstream_spans = Some(Box::new(spans));
        }
        cx.set_state(Traced {
            record,
            started: cx.now,
        });
        RequestFlow::Continue
    }

    fn on_response_headers(&self, cx: &mut FilterCx<'_>, head: &mut ResponseHead<'_>) -> Flow {
        // An ingress span's operation goes back to the client (Envoy's
        // `decorator.propagate`), for a traced request.
        if cx.state::<Traced>().is_some() {
            let decorator = cx.route.and_then(|r| r.decorator.as_ref());
            if let Some(d) = decorator.filter(|d| d.propagate) {
                let _ = head.set(b"x-envoy-decorator-operation", d.operation.as_bytes());
            }
        }
        Flow::Continue
    }

    fn on_log(&self, cx: &FilterCx<'_>, summary: &StreamSummary) {
        let Some(t) = cx.state_ref::<Traced>() else {
            return;
        };
        // The attempts' spans first: they ended first.
        for attempt in summary.upstream_spans {
            export::queue(cx, &self.provider, attempt.clone());
        }
        let mut record = t.record.clone();
        let cluster = match cx.route.and_then(|r| r.action.forward()).map(|f| &f.target) {
            Some(engine::ClusterTarget::Cluster(name)) => Some(name.as_str()),
            _ => None,
        };
        let tags = ResponseTags {
            status: summary.status,
            bytes_received: summary.bytes_received,
            bytes_sent: summary.bytes_sent,
            response_flags: if summary.flag.is_empty() {
                "-"
            } else {
                summary.flag
            },
            upstream_cluster: cluster,
            upstream_cluster_observability_name: None,
        };
        span::tag_response(&mut record, &tags);
        let took = cx.now.saturating_duration_since(t.started);
        record.finish(record.start_unix_nanos + took.as_nanos() as u64);
        export::queue(cx, &self.provider, record);
    }
}
