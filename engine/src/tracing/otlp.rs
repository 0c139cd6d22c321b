//! OTLP trace export bodies: the protobuf subset of `ExportTraceServiceRequest`/`Response` we need.
//!
//! Field numbers follow opentelemetry-proto (`collector/trace/v1/trace_service.proto`,
//! `trace/v1/trace.proto`, `common/v1/common.proto`, `resource/v1/resource.proto`).
//! Fields we never set are left out of the structs; prost skips unknown
//! fields when decoding, so a collector's newer response still parses.

use prost::Message;

use super::span::{AttrValue, SpanKind, SpanRecord};

/// Scope name used when the caller has none of its own.
pub const DEFAULT_SCOPE_NAME: &str = "envoy";

#[derive(Clone, PartialEq, Message)]
pub struct ExportTraceServiceRequest {
    #[prost(message, repeated, tag = "1")]
    pub resource_spans: Vec<ResourceSpans>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ExportTraceServiceResponse {
    #[prost(message, optional, tag = "1")]
    pub partial_success: Option<ExportTracePartialSuccess>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ExportTracePartialSuccess {
    #[prost(int64, tag = "1")]
    pub rejected_spans: i64,
    #[prost(string, tag = "2")]
    pub error_message: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct ResourceSpans {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub scope_spans: Vec<ScopeSpans>,
    #[prost(string, tag = "3")]
    pub schema_url: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
    #[prost(uint32, tag = "2")]
    pub dropped_attributes_count: u32,
}

#[derive(Clone, PartialEq, Message)]
pub struct ScopeSpans {
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    #[prost(message, repeated, tag = "2")]
    pub spans: Vec<Span>,
    #[prost(string, tag = "3")]
    pub schema_url: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct InstrumentationScope {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub version: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct Span {
    /// 16 bytes, big-endian.
    #[prost(bytes = "vec", tag = "1")]
    pub trace_id: Vec<u8>,
    /// 8 bytes, big-endian.
    #[prost(bytes = "vec", tag = "2")]
    pub span_id: Vec<u8>,
    #[prost(string, tag = "3")]
    pub trace_state: String,
    /// Empty for a root span.
    #[prost(bytes = "vec", tag = "4")]
    pub parent_span_id: Vec<u8>,
    #[prost(string, tag = "5")]
    pub name: String,
    /// `Span.SpanKind`: see the `SPAN_KIND_*` constants.
    #[prost(int32, tag = "6")]
    pub kind: i32,
    #[prost(fixed64, tag = "7")]
    pub start_time_unix_nano: u64,
    #[prost(fixed64, tag = "8")]
    pub end_time_unix_nano: u64,
    #[prost(message, repeated, tag = "9")]
    pub attributes: Vec<KeyValue>,
    #[prost(message, optional, tag = "15")]
    pub status: Option<Status>,
    /// W3C trace flags (the low byte) and whether the parent is remote
    /// (`SPAN_FLAGS_*`).
    #[prost(fixed32, tag = "16")]
    pub flags: u32,
}

/// `SpanFlags`: the W3C sampled flag, and the two bits that say whether
/// the parent is remote (set by Envoy's driver, as by the OTel SDKs).
pub const SPAN_FLAGS_SAMPLED: u32 = 0x01;
pub const SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE: u32 = 0x100;
pub const SPAN_FLAGS_CONTEXT_IS_REMOTE: u32 = 0x200;

#[derive(Clone, PartialEq, Message)]
pub struct Status {
    #[prost(string, tag = "2")]
    pub message: String,
    /// `Status.StatusCode`: see the `STATUS_CODE_*` constants.
    #[prost(int32, tag = "3")]
    pub code: i32,
}

#[derive(Clone, PartialEq, Message)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

#[derive(Clone, PartialEq, Message)]
pub struct AnyValue {
    #[prost(oneof = "any_value::Value", tags = "1, 2, 3, 4, 7")]
    pub value: Option<any_value::Value>,
}

pub mod any_value {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        #[prost(string, tag = "1")]
        StringValue(String),
        #[prost(bool, tag = "2")]
        BoolValue(bool),
        #[prost(int64, tag = "3")]
        IntValue(i64),
        #[prost(double, tag = "4")]
        DoubleValue(f64),
        #[prost(bytes = "vec", tag = "7")]
        BytesValue(Vec<u8>),
    }
}

pub const SPAN_KIND_SERVER: i32 = 2;
pub const SPAN_KIND_CLIENT: i32 = 3;
pub const STATUS_CODE_UNSET: i32 = 0;
pub const STATUS_CODE_ERROR: i32 = 2;

/// Who is exporting: becomes the Resource and the InstrumentationScope.
#[derive(Debug, Clone, Copy)]
pub struct Exporter<'a> {
    /// `service.name` resource attribute (the provider's `service_name`).
    pub service_name: &'a str,
    pub scope_name: &'a str,
    /// The scope's version (empty: none).
    pub scope_version: &'a str,
    /// Further resource attributes (resource detectors' output), after `service.name`.
    pub resource_attributes: &'a [(Box<str>, AttrValue)],
}

fn key_value(key: &str, value: &AttrValue) -> KeyValue {
    let v = match value {
        AttrValue::Str(s) => any_value::Value::StringValue(s.to_string()),
        AttrValue::Int(i) => any_value::Value::IntValue(*i),
        AttrValue::Bool(b) => any_value::Value::BoolValue(*b),
    };
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(v) }),
    }
}

fn to_otlp(span: &SpanRecord) -> Span {
    Span {
        trace_id: span.trace_id.to_be_bytes().to_vec(),
        span_id: span.span_id.to_be_bytes().to_vec(),
        trace_state: span.trace_state.as_deref().unwrap_or_default().to_owned(),
        parent_span_id: span
            .parent_span_id
            .map(|p| p.to_be_bytes().to_vec())
            .unwrap_or_default(),
        name: span.name.to_string(),
        kind: match span.kind {
            SpanKind::Server => SPAN_KIND_SERVER,
            SpanKind::Client => SPAN_KIND_CLIENT,
        },
        start_time_unix_nano: span.start_unix_nanos,
        end_time_unix_nano: span.end_unix_nanos(),
        attributes: span
            .attributes
            .iter()
            .map(|(k, v)| key_value(k, v))
            .collect(),
        // Leaving the status out means UNSET. Envoy's driver derives the
        // status from `http.status_code` alone (not the `error` tag): a 5xx,
        // or a 4xx on a client span, is ERROR; no answer (0) stays UNSET.
        status: status_error(span).then(|| Status {
            message: String::new(),
            code: STATUS_CODE_ERROR,
        }),
        // Exported spans are sampled ones.
        flags: SPAN_FLAGS_SAMPLED
            | SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE
            | if span.remote_parent {
                SPAN_FLAGS_CONTEXT_IS_REMOTE
            } else {
                0
            },
    }
}

fn status_error(span: &SpanRecord) -> bool {
    match span.kind {
        SpanKind::Server => span.status_code >= 500,
        SpanKind::Client => span.status_code >= 400,
    }
}

/// One ResourceSpans holding one ScopeSpans with all the spans.
pub fn export_request(spans: &[SpanRecord], exporter: &Exporter<'_>) -> ExportTraceServiceRequest {
    let mut attributes = Vec::with_capacity(1 + exporter.resource_attributes.len());
    attributes.push(key_value(
        "service.name",
        &AttrValue::Str(exporter.service_name.into()),
    ));
    attributes.extend(
        exporter
            .resource_attributes
            .iter()
            .map(|(k, v)| key_value(k, v)),
    );
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes,
                dropped_attributes_count: 0,
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: exporter.scope_name.to_owned(),
                    version: exporter.scope_version.to_owned(),
                }),
                spans: spans.iter().map(to_otlp).collect(),
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

/// The body of an OTLP/HTTP `POST /v1/traces` (or a gRPC `Export` message).
pub fn encode_export_request(spans: &[SpanRecord], exporter: &Exporter<'_>) -> Vec<u8> {
    export_request(spans, exporter).encode_to_vec()
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed ExportTraceServiceResponse: {0}")]
pub struct OtlpError(String);

/// Parses a collector's answer; an empty body is full success.
pub fn decode_export_response(body: &[u8]) -> Result<ExportTraceServiceResponse, OtlpError> {
    ExportTraceServiceResponse::decode(body).map_err(|e| OtlpError(e.to_string()))
}

impl ExportTraceServiceResponse {
    /// Spans the collector says it dropped (0 on full success).
    pub fn rejected_spans(&self) -> i64 {
        self.partial_success
            .as_ref()
            .map_or(0, |p| p.rejected_spans)
    }
}

#[cfg(test)]
mod tests;
