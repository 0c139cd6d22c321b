//! Spans on their way to a collector, off the data path: per shard and provider a bounded queue, sent in batches as the shard's own calls (OTLP `TraceService/Export` over gRPC, or Zipkin v2 JSON over HTTP) to the collector's cluster, one batch in flight at a time. A collector that is slow or gone costs the shard at most the queue: spans past it are dropped and counted, requests never wait.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use engine::tracing::{otlp, zipkin, AttrValue, SpanRecord};
use engine::TraceProvider;

use crate::http_filter::call::{grpc_frame, CallOutcome, CallRequest, Calls};
use crate::http_filter::FilterCx;
use crate::stats::ShardStats;

/// Spans a shard holds for one provider, at most.
pub const MAX_QUEUED_SPANS: usize = 4096;
/// Spans one export carries, at most.
const BATCH: usize = 512;
/// A queue this long is sent at once (Envoy's `min_flush_spans`).
const MIN_FLUSH_SPANS: usize = 5;
/// A shorter one waits at most this long (Envoy's is 5 s).
const FLUSH_INTERVAL: Duration = Duration::from_secs(1);
/// How long a Zipkin export may take (Envoy's collector client's).
const ZIPKIN_TIMEOUT: Duration = Duration::from_secs(5);
/// An export's answer is read up to this (its body says nothing we use).
const MAX_ANSWER: usize = 64 * 1024;

/// A shard's exporters, one per provider config.
#[derive(Default)]
pub(crate) struct Exporters(Vec<Rc<RefCell<Exporter>>>);

/// One provider's queue on one shard.
pub(crate) struct Exporter {
    provider: TraceProvider,
    /// The node's cluster: Zipkin's service name.
    service: String,
    queue: Vec<SpanRecord>,
    in_flight: bool,
    timer: bool,
    calls: Rc<dyn Calls>,
    stats: Arc<ShardStats>,
}

/// Queues a finished span for `provider`'s collector.
pub(super) fn queue(cx: &FilterCx<'_>, provider: &TraceProvider, record: SpanRecord) {
    let stats = &cx.shard.stats.tracing;
    let exporter = {
        let mut all = cx.shard.span_exporters.borrow_mut();
        let found = all.0.iter().find(|e| e.borrow().provider == *provider);
        match found {
            Some(e) => Rc::clone(e),
            None => {
                let e = Rc::new(RefCell::new(Exporter {
                    provider: provider.clone(),
                    service: cx.snapshot.node.cluster.clone(),
                    queue: Vec::new(),
                    in_flight: false,
                    timer: false,
                    calls: cx.calls.handle(),
                    stats: Arc::clone(&cx.shard.stats),
                }));
                all.0.push(Rc::clone(&e));
                e
            }
        }
    };
    let mut e = exporter.borrow_mut();
    if e.queue.len() >= MAX_QUEUED_SPANS {
        stats.dropped.inc();
        return;
    }
    e.queue.push(record);
    let (due, timer) = (e.queue.len() >= MIN_FLUSH_SPANS, e.timer);
    drop(e);
    if due {
        flush(&exporter);
    } else if !timer {
        exporter.borrow_mut().timer = true;
        glommio::spawn_local(tick(Rc::clone(&exporter))).detach();
    }
}

/// Sends what waits every [`FLUSH_INTERVAL`] until nothing does.
async fn tick(exporter: Rc<RefCell<Exporter>>) {
    loop {
        glommio::timer::sleep(FLUSH_INTERVAL).await;
        flush(&exporter);
        let mut e = exporter.borrow_mut();
        if e.queue.is_empty() {
            e.timer = false;
            return;
        }
    }
}

/// Sends the oldest batch, unless one is in flight.
fn flush(exporter: &Rc<RefCell<Exporter>>) {
    let mut e = exporter.borrow_mut();
    if e.in_flight || e.queue.is_empty() {
        return;
    }
    let n = e.queue.len().min(BATCH);
    let batch: Vec<SpanRecord> = e.queue.drain(..n).collect();
    let req = request(&e.provider, &e.service, &batch);
    let calls = Rc::clone(&e.calls);
    let stats = Arc::clone(&e.stats);
    e.in_flight = true;
    drop(e);
    let zipkin = matches!(exporter.borrow().provider, TraceProvider::Zipkin { .. });
    let again = Rc::clone(exporter);
    let done = Box::new(move |outcome: CallOutcome| {
        let delivered = match outcome {
            Ok(a) if zipkin => (200..300).contains(&a.status),
            Ok(a) => {
                let status = a.trailers.as_ref().and_then(|t| t.get(b"grpc-status"));
                a.status == 200 && status.or_else(|| a.head.get(b"grpc-status")) == Some(b"0")
            }
            Err(_) => false,
        };
        match delivered {
            true => stats.tracing.exported.add(n as u64),
            false => stats.tracing.export_failed.add(n as u64),
        }
        again.borrow_mut().in_flight = false;
        if again.borrow().queue.len() >= MIN_FLUSH_SPANS {
            flush(&again);
        }
    });
    if calls.call(req, done).is_err() {
        exporter.borrow_mut().in_flight = false;
        exporter.borrow().stats.tracing.export_failed.add(n as u64);
    }
}

/// What the resource says of the tracer, as Envoy's does of itself
/// (`telemetry.sdk.*`: its name, build and language).
const SDK_NAME: &str = "gateway";
const SDK_VERSION: &str = env!("CARGO_PKG_VERSION");

fn sdk_attributes() -> [(Box<str>, AttrValue); 3] {
    [
        ("telemetry.sdk.name".into(), AttrValue::from(SDK_NAME)),
        ("telemetry.sdk.version".into(), AttrValue::from(SDK_VERSION)),
        ("telemetry.sdk.language".into(), AttrValue::from("rust")),
    ]
}

/// The export of `batch` to `provider`'s collector.
fn request(provider: &TraceProvider, service: &str, batch: &[SpanRecord]) -> CallRequest {
    match provider {
        TraceProvider::OpenTelemetry {
            cluster,
            authority,
            timeout,
            service_name,
        } => {
            let exporter = otlp::Exporter {
                service_name,
                scope_name: otlp::DEFAULT_SCOPE_NAME,
                scope_version: SDK_VERSION,
                resource_attributes: &sdk_attributes(),
            };
            let body = grpc_frame(&otlp::encode_export_request(batch, &exporter));
            let authority = if authority.is_empty() {
                cluster
            } else {
                authority
            };
            // gRPC's timeout has at most 8 digits.
            let ms = format!("{}m", timeout.as_millis().min(99_999_999));
            CallRequest {
                cluster: cluster.as_str().into(),
                method: b"POST"[..].into(),
                authority: authority.as_bytes().into(),
                path: b"/opentelemetry.proto.collector.trace.v1.TraceService/Export"[..].into(),
                fields: vec![
                    (b"content-type"[..].into(), b"application/grpc"[..].into()),
                    (b"te"[..].into(), b"trailers"[..].into()),
                    (b"grpc-timeout"[..].into(), ms.into_bytes().into()),
                ],
                body,
                timeout: *timeout,
                max_answer_bytes: MAX_ANSWER,
            }
        }
        TraceProvider::Zipkin {
            cluster,
            endpoint,
            hostname,
            trace_id_128bit,
            ..
        } => {
            let local = zipkin::LocalEndpoint {
                service_name: service,
                address: None,
                port: None,
            };
            let json = zipkin::encode_json_v2(batch, &local, *trace_id_128bit);
            let host = if hostname.is_empty() {
                cluster
            } else {
                hostname
            };
            CallRequest {
                cluster: cluster.as_str().into(),
                method: b"POST"[..].into(),
                authority: host.as_bytes().into(),
                path: endpoint.as_bytes().into(),
                fields: vec![(b"content-type"[..].into(), b"application/json"[..].into())],
                body: Bytes::from(json),
                timeout: ZIPKIN_TIMEOUT,
                max_answer_bytes: MAX_ANSWER,
            }
        }
    }
}
