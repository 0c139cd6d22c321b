//! A connection manager's tracing (`HttpConnectionManager.tracing`): its provider (OpenTelemetry over gRPC, or Zipkin JSON over HTTP), how requests are sampled, and what a span records.

use std::time::Duration;

use crate::tracing::{Propagation, SamplingConfig};

/// `tracing.provider`: where spans go and how the context travels.
#[derive(Debug, Clone, PartialEq)]
pub enum TraceProvider {
    /// `envoy.tracers.opentelemetry` (`OpenTelemetryConfig.grpc_service`):
    /// OTLP `TraceService/Export` to a cluster; W3C `traceparent`.
    OpenTelemetry {
        cluster: String,
        /// `envoy_grpc.authority` (empty: the cluster's name).
        authority: String,
        timeout: Duration,
        service_name: String,
    },
    /// `envoy.tracers.zipkin` (`ZipkinConfig`, `HTTP_JSON`): Zipkin v2
    /// JSON to `collector_endpoint` on a cluster; B3.
    Zipkin {
        cluster: String,
        endpoint: String,
        /// `collector_hostname` (empty: the cluster's name).
        hostname: String,
        trace_id_128bit: bool,
        /// `shared_span_context` (default true): the server span shares
        /// the client's id (Zipkin's RPC model).
        shared_span_context: bool,
        /// `trace_context_option`: B3, or B3 with W3C as well.
        propagation: Propagation,
    },
}

impl TraceProvider {
    /// The context's headers.
    pub fn propagation(&self) -> Propagation {
        match self {
            Self::OpenTelemetry { .. } => Propagation::W3c,
            Self::Zipkin { propagation, .. } => *propagation,
        }
    }

    pub fn cluster(&self) -> &str {
        match self {
            Self::OpenTelemetry { cluster, .. } | Self::Zipkin { cluster, .. } => cluster,
        }
    }
}

/// `HttpConnectionManager.tracing`, run as the first filter of its chain
/// (`HttpFilterConfig::Tracing`).
#[derive(Debug, Clone, PartialEq)]
pub struct Tracing {
    pub provider: TraceProvider,
    /// `random_sampling`, `client_sampling`, `overall_sampling`.
    pub sampling: SamplingConfig,
    /// `max_path_tag_length` (256).
    pub max_path_tag_length: usize,
    /// `custom_tags`, in order.
    pub custom_tags: Vec<CustomTag>,
    /// `spawn_upstream_span` (or the router's `start_child_span`): each
    /// upstream attempt of a traced request gets a client span of its own,
    /// a child of the request's, whose id goes upstream.
    pub spawn_upstream_span: bool,
}

/// A `custom_tags` entry: its tag and where its value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomTag {
    pub tag: String,
    pub value: CustomTagValue,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CustomTagValue {
    /// `literal`, or `environment` (read when the config is loaded, as
    /// Envoy reads it at start), or a `metadata` tag's `default_value`
    /// (the gateway writes no dynamic metadata): the same for every span.
    /// An empty value sets no tag.
    Fixed(String),
    /// `request_header`: the request's field, else `default_value`.
    RequestHeader { name: String, default_value: String },
}
