//! A finished span as the exporters see it, and the tags Envoy's HTTP tracer puts on it.

use std::net::SocketAddr;

use super::context::TraceContext;

/// Envoy's tag names (`Tracing::Tags`).
pub mod tags {
    pub const COMPONENT: &str = "component";
    pub const PROXY: &str = "proxy";
    pub const NODE_ID: &str = "node_id";
    pub const ZONE: &str = "zone";
    pub const GUID_X_REQUEST_ID: &str = "guid:x-request-id";
    pub const GUID_X_CLIENT_TRACE_ID: &str = "guid:x-client-trace-id";
    pub const HTTP_URL: &str = "http.url";
    pub const HTTP_METHOD: &str = "http.method";
    pub const HTTP_PROTOCOL: &str = "http.protocol";
    pub const HTTP_STATUS_CODE: &str = "http.status_code";
    pub const DOWNSTREAM_CLUSTER: &str = "downstream_cluster";
    pub const USER_AGENT: &str = "user_agent";
    pub const PEER_ADDRESS: &str = "peer.address";
    pub const REQUEST_SIZE: &str = "request_size";
    pub const RESPONSE_SIZE: &str = "response_size";
    pub const RESPONSE_FLAGS: &str = "response_flags";
    pub const UPSTREAM_CLUSTER: &str = "upstream_cluster";
    pub const UPSTREAM_CLUSTER_NAME: &str = "upstream_cluster.name";
    pub const UPSTREAM_ADDRESS: &str = "upstream_address";
    pub const ERROR: &str = "error";
    pub const ERROR_REASON: &str = "error.reason";
    pub const CANCELED: &str = "canceled";
    pub const RETRY_COUNT: &str = "retry.count";
    pub const TRUE: &str = "true";
}

/// Envoy's default `max_path_tag_length` for `http.url`.
pub const DEFAULT_MAX_PATH_TAG_LENGTH: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// The downstream (ingress) span.
    Server,
    /// An upstream (egress) span.
    Client,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttrValue {
    Str(Box<str>),
    Int(i64),
    Bool(bool),
}

impl From<&str> for AttrValue {
    fn from(s: &str) -> Self {
        AttrValue::Str(s.into())
    }
}

impl From<String> for AttrValue {
    fn from(s: String) -> Self {
        AttrValue::Str(s.into())
    }
}

/// Header values may hold obs-text; tags must be UTF-8 for both exporters.
fn lossy(v: &[u8]) -> AttrValue {
    AttrValue::Str(String::from_utf8_lossy(v).into())
}

/// One finished span. Times are unix nanoseconds supplied by the caller's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanRecord {
    pub trace_id: u128,
    pub span_id: u64,
    pub parent_span_id: Option<u64>,
    pub name: Box<str>,
    pub kind: SpanKind,
    pub start_unix_nanos: u64,
    pub duration_nanos: u64,
    /// HTTP status sent downstream (or received, for a client span); 0 when
    /// no response was produced, as Envoy's `http.status_code` tag says.
    pub status_code: u16,
    pub error: bool,
    /// Zipkin: the server span reuses the client's span id (B3 shared span).
    pub shared: bool,
    /// Its parent came from the request's headers (another process's
    /// span), not from this gateway.
    pub remote_parent: bool,
    /// W3C `tracestate` of the span's context, for OTLP.
    pub trace_state: Option<Box<str>>,
    /// Zipkin `remoteEndpoint`; Envoy itself leaves it out.
    pub remote_address: Option<SocketAddr>,
    pub attributes: Vec<(Box<str>, AttrValue)>,
}

impl SpanRecord {
    pub fn new(ctx: &TraceContext, name: &str, kind: SpanKind, start_unix_nanos: u64) -> Self {
        Self {
            trace_id: ctx.trace_id,
            span_id: ctx.span_id,
            parent_span_id: ctx.parent_span_id,
            name: name.into(),
            kind,
            start_unix_nanos,
            duration_nanos: 0,
            status_code: 0,
            error: false,
            shared: false,
            remote_parent: false,
            trace_state: ctx.tracestate.clone(),
            remote_address: None,
            attributes: Vec::new(),
        }
    }

    /// Sets a tag, replacing an earlier value like Envoy's `setTag` does for
    /// Zipkin (a map); keeps one entry per key for OTLP too.
    pub fn set_attr(&mut self, key: &str, value: impl Into<AttrValue>) {
        let value = value.into();
        match self.attributes.iter_mut().find(|(k, _)| &**k == key) {
            Some((_, v)) => *v = value,
            None => self.attributes.push((key.into(), value)),
        }
    }

    pub fn attr(&self, key: &str) -> Option<&AttrValue> {
        self.attributes
            .iter()
            .find(|(k, _)| &**k == key)
            .map(|(_, v)| v)
    }

    /// Saturates rather than panicking if the caller's clock went backwards.
    pub fn finish(&mut self, end_unix_nanos: u64) {
        self.duration_nanos = end_unix_nanos.saturating_sub(self.start_unix_nanos);
    }

    pub fn end_unix_nanos(&self) -> u64 {
        self.start_unix_nanos.saturating_add(self.duration_nanos)
    }
}

/// The span name. A route `decorator.operation` (or a trusted
/// `x-envoy-decorator-operation`) wins. Otherwise Envoy's tracer names the
/// downstream span `ingress` (HCM traffic direction inbound/unspecified) or
/// `egress <host>` (outbound), and the Zipkin driver ignores that name and
/// uses the `:authority` instead. Upstream spans: see [`upstream_operation_name`].
pub fn operation_name(decorator: Option<&str>, egress: bool, host: &str, zipkin: bool) -> String {
    match decorator {
        Some(op) if !op.is_empty() => op.to_owned(),
        _ if zipkin => host.to_owned(),
        _ if egress => format!("egress {host}"),
        _ => "ingress".to_owned(),
    }
}

/// The router's child span name: `router <cluster observability name> egress`.
pub fn upstream_operation_name(cluster: &str) -> String {
    format!("router {cluster} egress")
}

/// `http.url` as Envoy builds it: `<x-forwarded-proto>://<host><path>` with
/// the path (the original one if a rewrite happened) cut to `max_path_len`.
pub fn build_url(scheme: &[u8], host: &[u8], path: &[u8], max_path_len: usize) -> String {
    let path = &path[..path.len().min(max_path_len)];
    let mut url = String::with_capacity(scheme.len() + 3 + host.len() + path.len());
    url.push_str(&String::from_utf8_lossy(scheme));
    url.push_str("://");
    url.push_str(&String::from_utf8_lossy(host));
    url.push_str(&String::from_utf8_lossy(path));
    url
}

/// Request facts for the downstream span; header-sourced fields are raw bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestTags<'a> {
    pub method: &'a [u8],
    /// `x-forwarded-proto` (set by the HCM before tracing).
    pub scheme: &'a [u8],
    pub host: &'a [u8],
    /// `x-envoy-original-path` if present, else `:path`.
    pub path: Option<&'a [u8]>,
    pub request_id: Option<&'a [u8]>,
    pub client_trace_id: Option<&'a [u8]>,
    /// `x-envoy-downstream-service-cluster`.
    pub downstream_cluster: Option<&'a [u8]>,
    pub user_agent: Option<&'a [u8]>,
    /// `HTTP/1.0`, `HTTP/1.1`, `HTTP/2`, `HTTP/3`.
    pub protocol: &'a str,
    /// The direct remote address, IP only (no port), as Envoy tags it.
    pub peer_address: &'a str,
    pub max_path_tag_length: usize,
}

/// The pre-response tags of Envoy's `finalizeDownstreamSpan`.
pub fn tag_request(span: &mut SpanRecord, r: &RequestTags<'_>) {
    if let Some(id) = r.request_id {
        span.set_attr(tags::GUID_X_REQUEST_ID, lossy(id));
    }
    let url = match r.path {
        Some(path) => build_url(r.scheme, r.host, path, r.max_path_tag_length),
        None => String::new(),
    };
    span.set_attr(tags::HTTP_URL, url);
    span.set_attr(tags::HTTP_METHOD, lossy(r.method));
    span.set_attr(
        tags::DOWNSTREAM_CLUSTER,
        lossy(r.downstream_cluster.unwrap_or(b"-")),
    );
    span.set_attr(tags::USER_AGENT, lossy(r.user_agent.unwrap_or(b"-")));
    span.set_attr(tags::HTTP_PROTOCOL, r.protocol);
    span.set_attr(tags::PEER_ADDRESS, r.peer_address);
    if let Some(id) = r.client_trace_id {
        span.set_attr(tags::GUID_X_CLIENT_TRACE_ID, lossy(id));
    }
}

/// Facts known when the stream ends.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResponseTags<'a> {
    /// `None` when no response was sent (e.g. the downstream reset).
    pub status: Option<u16>,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    /// Envoy's short response flags (`UH`, `UF,URX`, or `-`).
    pub response_flags: &'a str,
    pub upstream_cluster: Option<&'a str>,
    /// The cluster's `alt_stat_name`/observability name, when it has one.
    pub upstream_cluster_observability_name: Option<&'a str>,
}

/// The request span's end: `request_size`, `response_size` and Envoy's
/// `setCommonTags`, in the order Envoy 1.40 exports them. Envoy's `setTag`
/// only takes strings, so numbers and `error` are written as strings here
/// too: an OTLP or Zipkin backend sees the same attribute types as behind
/// Envoy. The host is an attempt's tag ([`tag_upstream`]), not the
/// request span's, as in Envoy.
pub fn tag_response(span: &mut SpanRecord, r: &ResponseTags<'_>) {
    span.set_attr(tags::REQUEST_SIZE, r.bytes_received.to_string());
    span.set_attr(tags::RESPONSE_SIZE, r.bytes_sent.to_string());
    span.set_attr(tags::COMPONENT, tags::PROXY);
    if let Some(cluster) = r.upstream_cluster {
        span.set_attr(tags::UPSTREAM_CLUSTER, cluster);
        let name = r.upstream_cluster_observability_name.unwrap_or(cluster);
        span.set_attr(tags::UPSTREAM_CLUSTER_NAME, name);
    }
    let status = r.status.unwrap_or(0);
    span.status_code = status;
    span.set_attr(tags::HTTP_STATUS_CODE, status.to_string());
    span.set_attr(tags::RESPONSE_FLAGS, r.response_flags);
    // No response at all counts as an error, like a 5xx.
    if r.status.is_none_or(|s| (500..600).contains(&s)) {
        span.error = true;
        span.set_attr(tags::ERROR, tags::TRUE);
    }
}

/// What an upstream attempt's span says when it ends.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamTags<'a> {
    /// Its response's status, if its head came.
    pub status: Option<u16>,
    /// The attempt's HTTP protocol, `-` where no connection carried it.
    pub protocol: &'a str,
    pub upstream_cluster: &'a str,
    /// The host's `ip:port`.
    pub upstream_address: &'a str,
    /// The attempt's own flags (`UF`, `UT` for its per-try timeout, `SI`
    /// …; `-`): a stream's (`URX`, `DC`) are the request span's.
    pub response_flags: &'a str,
    /// Why the upstream failed it (Envoy's reset reason text).
    pub reset_reason: Option<&'a str>,
    /// The gateway left it before its answer was whole.
    pub canceled: bool,
}

/// An upstream attempt's tags, in the order Envoy's router and
/// `finalizeUpstreamSpan` set them: a reset's or a cancel's first (set as
/// they happen), then the protocol, the host, the cluster and the answer.
/// Strings throughout, as [`tag_response`]'s.
pub fn tag_upstream(span: &mut SpanRecord, t: &UpstreamTags<'_>) {
    if let Some(reason) = t.reset_reason {
        span.set_attr(tags::ERROR, tags::TRUE);
        span.set_attr(tags::ERROR_REASON, reason);
    }
    if t.canceled {
        span.set_attr(tags::CANCELED, tags::TRUE);
    }
    span.set_attr(tags::HTTP_PROTOCOL, t.protocol);
    span.set_attr(tags::UPSTREAM_ADDRESS, t.upstream_address);
    span.set_attr(tags::PEER_ADDRESS, t.upstream_address);
    span.set_attr(tags::COMPONENT, tags::PROXY);
    span.set_attr(tags::UPSTREAM_CLUSTER, t.upstream_cluster);
    span.set_attr(tags::UPSTREAM_CLUSTER_NAME, t.upstream_cluster);
    let status = t.status.unwrap_or(0);
    span.status_code = status;
    span.set_attr(tags::HTTP_STATUS_CODE, status.to_string());
    span.set_attr(tags::RESPONSE_FLAGS, t.response_flags);
    if t.status.is_none_or(|s| (500..600).contains(&s)) || t.reset_reason.is_some() {
        span.error = true;
        span.set_attr(tags::ERROR, tags::TRUE);
    }
}

/// Tags every span gets when started (Envoy's `TracerImpl::startSpan`).
pub fn tag_local(span: &mut SpanRecord, node_id: &str, zone: &str) {
    span.set_attr(tags::NODE_ID, node_id);
    span.set_attr(tags::ZONE, zone);
}

#[cfg(test)]
mod tests;
