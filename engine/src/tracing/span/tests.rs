use super::*;

fn span() -> SpanRecord {
    let ctx = TraceContext::root(7, 9, true).child(11, true);
    SpanRecord::new(&ctx, "ingress", SpanKind::Server, 1_000)
}

fn s(v: &str) -> Option<AttrValue> {
    Some(AttrValue::Str(v.into()))
}

#[test]
fn record_from_context() {
    let mut sp = span();
    assert_eq!(
        (sp.trace_id, sp.span_id, sp.parent_span_id),
        (7, 11, Some(9))
    );
    sp.finish(4_500);
    assert_eq!((sp.duration_nanos, sp.end_unix_nanos()), (3_500, 4_500));
    sp.finish(10); // clock went backwards
    assert_eq!(sp.duration_nanos, 0);
    sp.set_attr("k", "a");
    sp.set_attr("k", AttrValue::Int(3));
    assert_eq!(sp.attributes, vec![("k".into(), AttrValue::Int(3))]);
}

#[test]
fn operation_names() {
    assert_eq!(
        operation_name(Some("getUser"), false, "a.example", false),
        "getUser"
    );
    assert_eq!(
        operation_name(Some("getUser"), false, "a.example", true),
        "getUser"
    );
    assert_eq!(
        operation_name(Some(""), false, "a.example", false),
        "ingress"
    );
    assert_eq!(
        operation_name(None, true, "a.example", false),
        "egress a.example"
    );
    assert_eq!(operation_name(None, false, "a.example", true), "a.example");
    assert_eq!(upstream_operation_name("backend"), "router backend egress");
}

#[test]
fn request_tags_as_envoy() {
    let mut sp = span();
    let req = RequestTags {
        method: b"GET",
        scheme: b"https",
        host: b"api.example.com",
        path: Some(b"/users/42?x=1"),
        request_id: Some(b"a6b2d1b6-6a1f-4d3b-9d7d-3c0b3e3a9c4e"),
        client_trace_id: None,
        downstream_cluster: None,
        user_agent: Some(b"curl/8.0 \xff"),
        protocol: "HTTP/1.1",
        peer_address: "10.0.0.1",
        max_path_tag_length: 6,
    };
    tag_request(&mut sp, &req);
    assert_eq!(get(&sp, tags::HTTP_URL), s("https://api.example.com/users"));
    assert_eq!(get(&sp, tags::HTTP_METHOD), s("GET"));
    assert_eq!(
        get(&sp, tags::GUID_X_REQUEST_ID),
        s("a6b2d1b6-6a1f-4d3b-9d7d-3c0b3e3a9c4e")
    );
    assert_eq!(get(&sp, tags::DOWNSTREAM_CLUSTER), s("-"));
    assert_eq!(get(&sp, tags::USER_AGENT), s("curl/8.0 \u{fffd}"));
    assert_eq!(get(&sp, tags::HTTP_PROTOCOL), s("HTTP/1.1"));
    assert_eq!(get(&sp, tags::PEER_ADDRESS), s("10.0.0.1"));
    assert_eq!(get(&sp, tags::GUID_X_CLIENT_TRACE_ID), None);
    let mut no_path = span();
    tag_request(&mut no_path, &RequestTags { path: None, ..req });
    assert_eq!(get(&no_path, tags::HTTP_URL), s(""));
}

#[test]
fn response_tags_and_error() {
    let mut sp = span();
    let resp = ResponseTags {
        status: Some(200),
        bytes_received: 12,
        bytes_sent: 345,
        response_flags: "-",
        upstream_cluster: Some("backend"),
        upstream_cluster_observability_name: None,
    };
    tag_response(&mut sp, &resp);
    let order: Vec<&str> = sp.attributes.iter().map(|(k, _)| &**k).collect();
    // Envoy 1.40's export order.
    assert_eq!(
        order,
        [
            "request_size",
            "response_size",
            "component",
            "upstream_cluster",
            "upstream_cluster.name",
            "http.status_code",
            "response_flags"
        ]
    );
    assert_eq!(get(&sp, tags::HTTP_STATUS_CODE), s("200"));
    assert_eq!(get(&sp, tags::REQUEST_SIZE), s("12"));
    assert_eq!(get(&sp, tags::RESPONSE_SIZE), s("345"));
    assert_eq!(get(&sp, tags::RESPONSE_FLAGS), s("-"));
    assert_eq!(get(&sp, tags::COMPONENT), s("proxy"));
    assert_eq!(get(&sp, tags::UPSTREAM_CLUSTER), s("backend"));
    assert_eq!(get(&sp, tags::UPSTREAM_CLUSTER_NAME), s("backend"));
    assert_eq!(get(&sp, tags::UPSTREAM_ADDRESS), None);
    assert_eq!(get(&sp, tags::PEER_ADDRESS), None);
    assert_eq!(get(&sp, tags::ERROR), None);
    assert!(!sp.error);

    for (status, error) in [
        (Some(404), false),
        (Some(499), false),
        (Some(500), true),
        (Some(503), true),
        (Some(600), false),
        (None, true),
    ] {
        let mut sp = span();
        tag_response(&mut sp, &ResponseTags { status, ..resp });
        assert_eq!(sp.error, error, "{status:?}");
        assert_eq!(get(&sp, tags::ERROR), if error { s("true") } else { None });
        assert_eq!(sp.status_code, status.unwrap_or(0));
    }
    let mut none = span();
    tag_response(
        &mut none,
        &ResponseTags {
            status: None,
            ..resp
        },
    );
    assert_eq!(get(&none, tags::HTTP_STATUS_CODE), s("0"));

    let mut local = span();
    tag_local(&mut local, "node-1", "zone-a");
    assert_eq!(get(&local, tags::NODE_ID), s("node-1"));
    assert_eq!(get(&local, tags::ZONE), s("zone-a"));
}

fn get(span: &SpanRecord, key: &str) -> Option<AttrValue> {
    span.attr(key).cloned()
}

fn keys(span: &SpanRecord) -> Vec<&str> {
    span.attributes.iter().map(|(k, _)| &**k).collect()
}

/// Envoy 1.40's attempt spans, as exported: an answered attempt, a
/// retried one left before its answer ended, and a connect failure.
#[test]
fn upstream_tags_as_envoy_sets_them() {
    let mut ok = span();
    let answered = UpstreamTags {
        status: Some(200),
        protocol: "HTTP/1.1",
        upstream_cluster: "backend",
        upstream_address: "127.0.0.1:45569",
        response_flags: "-",
        reset_reason: None,
        canceled: false,
    };
    tag_upstream(&mut ok, &answered);
    assert_eq!(
        keys(&ok),
        [
            "http.protocol",
            "upstream_address",
            "peer.address",
            "component",
            "upstream_cluster",
            "upstream_cluster.name",
            "http.status_code",
            "response_flags"
        ]
    );
    assert_eq!(get(&ok, "peer.address"), s("127.0.0.1:45569"));
    assert!(!ok.error);

    let mut retried = span();
    retried.set_attr(tags::RETRY_COUNT, "1");
    let left = UpstreamTags {
        status: Some(503),
        canceled: true,
        ..answered
    };
    tag_upstream(&mut retried, &left);
    assert_eq!(
        keys(&retried)[..3],
        ["retry.count", "canceled", "http.protocol"]
    );
    assert_eq!(keys(&retried).last(), Some(&"error"));
    assert_eq!(get(&retried, "http.status_code"), s("503"));
    assert!(retried.error);

    let mut refused = span();
    let failed = UpstreamTags {
        status: None,
        protocol: "-",
        response_flags: "UF",
        reset_reason: Some("remote connection failure"),
        ..answered
    };
    tag_upstream(&mut refused, &failed);
    assert_eq!(
        keys(&refused)[..3],
        ["error", "error.reason", "http.protocol"]
    );
    assert_eq!(
        get(&refused, "error.reason"),
        s("remote connection failure")
    );
    assert_eq!(get(&refused, "http.status_code"), s("0"));
    assert_eq!(get(&refused, "response_flags"), s("UF"));
    assert_eq!(refused.status_code, 0);
    assert!(refused.error);
}
