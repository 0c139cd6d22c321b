//! Distributed tracing for the HCM `tracing` block (Envoy's OpenTelemetry and Zipkin providers).
//!
//! Pure logic: no I/O, no clock, no RNG. Ids, draws and timestamps come in
//! as parameters so every step is deterministic under test.
//!
//! How the data path uses the pieces, per request on its own core:
//!
//! 1. **Extract** ([`context::extract`]): read the provider's propagation
//!    headers through a lookup closure, giving [`Extracted`]: nothing, a bare
//!    sampling decision (`b3: 0`), or a remote parent [`TraceContext`]. A
//!    malformed header is an error, on which Envoy records no span at all.
//! 2. **Decide** ([`sampling::decide`]): fold the parent's flag, health
//!    check, `x-client-trace-id`, trusted `x-envoy-force-trace` and the
//!    three HCM percentages into a [`Decision`].
//! 3. **Inject** ([`context::inject`]): give the gateway's span a context
//!    (`TraceContext::child` of the parent, or `TraceContext::root`) and
//!    write it into the upstream request, so the next hop sees the
//!    gateway's span as its parent. Headers are written even for an
//!    unsampled request, carrying the "not sampled" decision onwards.
//! 4. **Record** ([`span`]): on a sampled request build a [`SpanRecord`],
//!    tag it as Envoy does (`tag_local`, `tag_request`, `tag_response`) and
//!    `finish` it when the stream ends.
//! 5. **Export**, off the data path: the core hands finished records to a
//!    batcher, which turns a batch into an OTLP protobuf body
//!    ([`otlp::encode_export_request`]) or a Zipkin v2 JSON body
//!    ([`zipkin::encode_json_v2`]) and sends it to the collector cluster;
//!    [`otlp::decode_export_response`] reads the collector's answer.

mod hex;

pub mod context;
pub mod otlp;
pub mod sampling;
pub mod span;
pub mod zipkin;

pub use context::{extract, inject, ContextError, Extracted, Propagation, TraceContext};
pub use otlp::{decode_export_response, encode_export_request, Exporter, OtlpError};
pub use sampling::{decide, Decision, SamplingConfig, SamplingInput};
pub use span::{AttrValue, RequestTags, ResponseTags, SpanKind, SpanRecord};
pub use zipkin::{encode_json_v2, escape_json_into, LocalEndpoint};
