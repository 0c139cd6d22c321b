use super::*;
use crate::tracing::context::TraceContext;

fn escaped(s: &str) -> String {
    let mut out = String::new();
    escape_json_into(&mut out, s);
    out
}

#[test]
fn json_escaping() {
    assert_eq!(escaped(""), "");
    assert_eq!(escaped("plain"), "plain");
    assert_eq!(escaped(r#"say "hi"\now"#), r#"say \"hi\"\\now"#);
    assert_eq!(escaped("a\nb\rc\td\u{8}e\u{c}f"), r"a\nb\rc\td\be\ff");
    assert_eq!(
        escaped("\u{0}\u{1}\u{1f}\u{7f}"),
        "\\u0000\\u0001\\u001f\u{7f}"
    );
    assert_eq!(
        escaped("caf\u{e9} \u{1f600} \u{4e2d}"),
        "caf\u{e9} \u{1f600} \u{4e2d}"
    );
    assert_eq!(escaped("x\u{2028}y\u{2029}"), "x\\u2028y\\u2029");
    assert_eq!(escaped("/</script>"), "/</script>");
}

fn local() -> LocalEndpoint<'static> {
    LocalEndpoint {
        service_name: "front-proxy",
        address: Some("10.0.0.5".parse().unwrap()),
        port: Some(10000),
    }
}

#[test]
fn server_span_as_envoy_writes_it() {
    let parent = TraceContext::root(0xa3ce929d0e0e4736, 0x00f067aa0ba902b7, true);
    let mut span = SpanRecord::new(
        &parent,
        "api.example.com",
        SpanKind::Server,
        1_700_000_000_123_456_789,
    );
    span.shared = true;
    span.set_attr(tags::HTTP_STATUS_CODE, "200");
    span.set_attr(tags::USER_AGENT, "a \"quoted\" agent\\");
    span.finish(1_700_000_000_124_456_000);
    let json = encode_json_v2(&[span], &local(), false);
    assert_eq!(
        json,
        concat!(
            r#"[{"traceId":"a3ce929d0e0e4736","id":"00f067aa0ba902b7","name":"api.example.com","#,
            r#""kind":"SERVER","timestamp":1700000000123456,"duration":999,"#,
            r#""localEndpoint":{"serviceName":"front-proxy","ipv4":"10.0.0.5","port":10000},"#,
            r#""tags":{"http.status_code":"200","user_agent":"a \"quoted\" agent\\"},"shared":true}]"#
        )
    );
}

#[test]
fn client_span_128bit_remote_and_typed_tags() {
    let parent = TraceContext::root(0x4bf92f3577b34da6a3ce929d0e0e4736, 1, true);
    let mut span = SpanRecord::new(
        &parent.child(2, true),
        "router backend egress",
        SpanKind::Client,
        3_000,
    );
    span.remote_address = Some("[2001:db8::1]:8443".parse().unwrap());
    span.set_attr("n", AttrValue::Int(-3));
    span.set_attr("b", AttrValue::Bool(false));
    span.error = true;
    span.finish(3_001);
    let ep = LocalEndpoint {
        service_name: "gw",
        address: Some("::1".parse().unwrap()),
        port: None,
    };
    let json = encode_json_v2(&[span], &ep, false);
    assert_eq!(
        json,
        concat!(
            r#"[{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","id":"0000000000000002","#,
            r#""parentId":"0000000000000001","name":"router backend egress","kind":"CLIENT","#,
            r#""timestamp":3,"duration":1,"localEndpoint":{"serviceName":"gw","ipv6":"::1"},"#,
            r#""remoteEndpoint":{"ipv6":"2001:db8::1","port":8443},"#,
            r#""tags":{"n":"-3","b":"false","error":"true"}}]"#
        )
    );
}

#[test]
fn batches_and_trace_id_width() {
    assert_eq!(encode_json_v2(&[], &local(), false), "[]");
    let ctx = TraceContext::root(5, 6, true);
    let a = SpanRecord::new(&ctx, "a", SpanKind::Server, 0);
    let b = SpanRecord::new(&ctx, "b", SpanKind::Server, 0);
    let ep = LocalEndpoint {
        service_name: "s",
        address: None,
        port: Some(0),
    };
    let json = encode_json_v2(&[a.clone(), b], &ep, true);
    assert!(json
        .starts_with(r#"[{"traceId":"00000000000000000000000000000005","id":"0000000000000006""#));
    assert!(json.contains(r#""localEndpoint":{"serviceName":"s"}}"#));
    assert_eq!(json.matches("},{").count(), 1);
    assert!(!json.contains("tags"));
    let narrow = encode_json_v2(&[a], &ep, false);
    assert!(narrow.starts_with(r#"[{"traceId":"0000000000000005""#));
}
