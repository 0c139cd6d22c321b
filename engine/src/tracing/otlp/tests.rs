use super::*;
use crate::tracing::context::TraceContext;

const EXPORTER: Exporter<'static> = Exporter {
    service_name: "s",
    scope_name: DEFAULT_SCOPE_NAME,
    scope_version: "",
    resource_attributes: &[],
};

fn tiny() -> SpanRecord {
    let mut span = SpanRecord::new(&TraceContext::root(1, 2, true), "a", SpanKind::Server, 1);
    span.finish(2);
    span
}

/// Hand-assembled from the proto field numbers and wire types.
#[rustfmt::skip]
const GOLDEN: &[u8] = &[
    0x0a, 0x5d,                                     // 1 resource_spans, 93 bytes
      0x0a, 0x15,                                   //   1 resource, 21
        0x0a, 0x13,                                 //     1 attributes, 19
          0x0a, 0x0c, b's', b'e', b'r', b'v', b'i', b'c', b'e', b'.', b'n', b'a', b'm', b'e',
          0x12, 0x03, 0x0a, 0x01, b's',             //       2 value { 1 string_value "s" }
      0x12, 0x44,                                   //   2 scope_spans, 68
        0x0a, 0x07, 0x0a, 0x05, b'e', b'n', b'v', b'o', b'y', // 1 scope { 1 name }
        0x12, 0x39,                                 //     2 spans, 57
          0x0a, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, // 1 trace_id
          0x12, 0x08, 0, 0, 0, 0, 0, 0, 0, 2,       //       2 span_id
          0x2a, 0x01, b'a',                         //       5 name
          0x30, 0x02,                               //       6 kind SERVER (varint)
          0x39, 1, 0, 0, 0, 0, 0, 0, 0,             //       7 start, fixed64 LE
          0x41, 2, 0, 0, 0, 0, 0, 0, 0,             //       8 end, fixed64 LE
          0x85, 0x01, 0x01, 0x01, 0, 0,             //      16 flags 0x101, fixed32 LE
];

#[test]
fn golden_bytes_for_one_span() {
    assert_eq!(encode_export_request(&[tiny()], &EXPORTER), GOLDEN);
}

/// Envoy's OpenTelemetry driver: the status follows `http.status_code`
/// (a 5xx, or a 4xx on a client span), not the `error` tag.
#[test]
fn the_status_follows_the_http_status_as_envoys_driver_sets_it() {
    let ctx = TraceContext::root(1, 2, true);
    let status = |kind, code: u16, error: bool| {
        let mut span = SpanRecord::new(&ctx, "x", kind, 0);
        span.status_code = code;
        span.error = error;
        let bytes = encode_export_request(&[span], &EXPORTER);
        let req = ExportTraceServiceRequest::decode(bytes.as_slice()).unwrap();
        req.resource_spans[0].scope_spans[0].spans[0]
            .status
            .as_ref()
            .map(|s| s.code)
    };
    assert_eq!(status(SpanKind::Server, 503, true), Some(STATUS_CODE_ERROR));
    assert_eq!(status(SpanKind::Server, 404, false), None);
    assert_eq!(
        status(SpanKind::Client, 404, false),
        Some(STATUS_CODE_ERROR)
    );
    assert_eq!(status(SpanKind::Client, 0, true), None);
    assert_eq!(status(SpanKind::Server, 0, true), None);
    assert_eq!(status(SpanKind::Client, 200, false), None);
}

/// Envoy 1.40 exports 257 (sampled, parent local or none) and 769 (the
/// parent came in the request's `traceparent`).
#[test]
fn the_flags_say_sampled_and_whether_the_parent_is_remote() {
    let ctx = TraceContext::root(1, 2, true);
    let flags = |remote: bool| {
        let mut span = SpanRecord::new(&ctx, "x", SpanKind::Server, 0);
        span.remote_parent = remote;
        let bytes = encode_export_request(&[span], &EXPORTER);
        let req = ExportTraceServiceRequest::decode(bytes.as_slice()).unwrap();
        req.resource_spans[0].scope_spans[0].spans[0].flags
    };
    assert_eq!(flags(false), 257);
    assert_eq!(flags(true), 769);
}

#[test]
fn round_trip() {
    let parent = TraceContext::root(0x4bf92f3577b34da6a3ce929d0e0e4736, 0x00f067aa0ba902b7, true);
    let mut ctx = parent.child(0x1122334455667788, true);
    ctx.tracestate = Some("congo=t61rcWkgMzE".into());
    let mut server = SpanRecord::new(&ctx, "ingress", SpanKind::Server, 1_700_000_000_000_000_000);
    server.set_attr("http.status_code", "503");
    server.set_attr("n", AttrValue::Int(-5));
    server.set_attr("b", AttrValue::Bool(true));
    server.status_code = 503;
    server.error = true;
    server.finish(1_700_000_000_250_000_000);
    let client = SpanRecord::new(&ctx.child(9, true), "router x egress", SpanKind::Client, 5);

    let extra = [("host.name".into(), AttrValue::from("gw-1"))];
    let exporter = Exporter {
        resource_attributes: &extra,
        ..EXPORTER
    };
    let bytes = encode_export_request(&[server, client], &exporter);
    let req = ExportTraceServiceRequest::decode(bytes.as_slice()).unwrap();
    assert_eq!(req, export_request(&[], &exporter).clone_with_spans(&req));
    let rs = &req.resource_spans[0];
    let attrs = &rs.resource.as_ref().unwrap().attributes;
    assert_eq!(attrs[0].key, "service.name");
    assert_eq!(attrs[1].key, "host.name");
    let spans = &rs.scope_spans[0].spans;
    assert_eq!(rs.scope_spans[0].scope.as_ref().unwrap().name, "envoy");
    assert_eq!(spans.len(), 2);
    let s = &spans[0];
    assert_eq!(s.trace_id, hex16("4bf92f3577b34da6a3ce929d0e0e4736"));
    assert_eq!(s.span_id, [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]);
    assert_eq!(s.parent_span_id, 0x00f067aa0ba902b7u64.to_be_bytes());
    assert_eq!(s.trace_state, "congo=t61rcWkgMzE");
    assert_eq!(s.kind, SPAN_KIND_SERVER);
    assert_eq!(s.end_time_unix_nano - s.start_time_unix_nano, 250_000_000);
    assert_eq!(s.status.as_ref().map(|st| st.code), Some(STATUS_CODE_ERROR));
    let value = |i: usize| s.attributes[i].value.clone().and_then(|v| v.value);
    assert_eq!(value(0), Some(any_value::Value::StringValue("503".into())));
    assert_eq!(value(1), Some(any_value::Value::IntValue(-5)));
    assert_eq!(value(2), Some(any_value::Value::BoolValue(true)));
    assert_eq!(spans[1].kind, SPAN_KIND_CLIENT);
    assert_eq!(spans[1].status, None);
    assert_eq!(spans[1].parent_span_id, 0x1122334455667788u64.to_be_bytes());
}

fn hex16(s: &str) -> Vec<u8> {
    u128::from_str_radix(s, 16).unwrap().to_be_bytes().to_vec()
}

impl ExportTraceServiceRequest {
    /// The request with `other`'s spans spliced in, to compare the envelope.
    fn clone_with_spans(mut self, other: &Self) -> Self {
        self.resource_spans[0].scope_spans[0].spans =
            other.resource_spans[0].scope_spans[0].spans.clone();
        self
    }
}

#[test]
fn response_partial_success_and_unknown_fields() {
    assert_eq!(decode_export_response(&[]).unwrap().rejected_spans(), 0);
    #[rustfmt::skip]
    let body = [
        0x0a, 0x07,                   // 1 partial_success, 7 bytes
          0x08, 0x03,                 //   1 rejected_spans = 3
          0x12, 0x03, b'b', b'a', b'd', // 2 error_message
        0xa0, 0x06, 0x01,             // unknown field 100 (varint)
        0x1a, 0x02, 0xff, 0xfe,       // unknown field 3 (bytes)
    ];
    let resp = decode_export_response(&body).unwrap();
    assert_eq!(resp.rejected_spans(), 3);
    assert_eq!(resp.partial_success.unwrap().error_message, "bad");
    assert!(decode_export_response(&[0x0a, 0x05, 0x08]).is_err());
    assert!(decode_export_response(&[0xff; 12]).is_err());
}
