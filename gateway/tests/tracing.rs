//! Tracing (`HttpConnectionManager.tracing`): the OpenTelemetry provider exporting OTLP over gRPC to a receiver in the test, and Zipkin JSON v2 over HTTP; W3C and B3 contexts carried upstream with the gateway's span as the parent, the sampling decision honoured and passed on, the route decorator as the span's name, and a collector that never answers costing requests nothing (spans past the shard's queue dropped and counted).

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use support::h1_backend::{H1Answer, H1Backend, H1Request};
use support::h1_client::*;
use support::otlp::{attr, hex, receiver, wait_spans};
use support::*;

fn gateway(
    tracing: &str,
    collector: &str,
    backend: SocketAddr,
) -> (gateway::GatewayHandle, SocketAddr, SocketAddr) {
    let routes = r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: /quiet }
                route: { cluster: backend }
                decorator: { operation: quietOp, propagate: false }
              - match: { prefix: / }
                route: { cluster: backend }
                decorator: { operation: routeToBackend }"#;
    let clusters = format!(
        "{collector}{}",
        support::yaml::h1_cluster("backend", backend)
    );
    let bootstrap =
        support::yaml::filters_bootstrap(tracing, "", routes, &clusters).expect("bootstrap");
    let gw = start(bootstrap, 1);
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    (gw, addr, admin)
}

fn otel(extra: &str) -> String {
    format!(
        r#"          tracing:
            provider:
              name: envoy.tracers.opentelemetry
              typed_config:
                "@type": type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig
                grpc_service: {{ envoy_grpc: {{ cluster_name: otel }}, timeout: 0.5s }}
                service_name: front-gateway
{extra}"#
    )
}

fn counter(admin: SocketAddr, outcome: &str) -> f64 {
    metric(
        admin,
        &format!("gateway_tracing_total{{outcome=\"{outcome}\"}}"),
    )
}

const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const PARENT: &str = "b7ad6b7169203331";

#[test]
fn an_otlp_receiver_gets_the_span_of_a_traced_request() {
    let (collector, got) = receiver(false);
    let be = H1Backend::start(|_| H1Answer::ok("upstream"));
    let (_gw, addr, admin) = gateway(
        &otel(""),
        &support::yaml::h2_cluster("otel", collector),
        be.addr(),
    );
    let traceparent = format!("00-{TRACE}-{PARENT}-01");
    let r = h1_get(
        addr,
        "example.com",
        "/orders?id=7",
        &format!("traceparent: {traceparent}\r\ntracestate: vendor=x\r\n"),
    );
    assert_eq!(r.status, 200);
    // Upstream: the same trace, the gateway's span as the parent.
    let up: H1Request = be.requests().pop().unwrap();
    let sent = up.field("traceparent").expect("traceparent").to_owned();
    let parts: Vec<&str> = sent.split('-').collect();
    assert_eq!(
        (parts[0], parts[1], parts[3]),
        ("00", TRACE, "01"),
        "{sent}"
    );
    assert_ne!(parts[2], PARENT);
    assert_eq!(up.field("tracestate"), Some("vendor=x"));
    // The ingress span's operation goes back to the client.
    assert_eq!(
        r.header("x-envoy-decorator-operation"),
        Some("routeToBackend")
    );
    assert_eq!(up.field("x-envoy-decorator-operation"), None);

    let spans = wait_spans(&got, 1);
    let (service, span) = &spans[0];
    assert_eq!(service, "front-gateway");
    assert_eq!(span.name, "routeToBackend");
    assert_eq!(hex(&span.trace_id), TRACE);
    assert_eq!(hex(&span.parent_span_id), PARENT);
    assert_eq!(hex(&span.span_id), parts[2]);
    assert_eq!(span.kind, 2, "SERVER");
    assert!(span.end_time_unix_nano >= span.start_time_unix_nano);
    assert_eq!(attr(span, "http.status_code").as_deref(), Some("200"));
    assert_eq!(attr(span, "http.method").as_deref(), Some("GET"));
    assert_eq!(
        attr(span, "http.url").as_deref(),
        Some("http://example.com/orders?id=7")
    );
    assert_eq!(attr(span, "upstream_cluster").as_deref(), Some("backend"));
    assert_eq!(counter(admin, "sampled"), 1.0);
    wait_until(Duration::from_secs(5), "export counted", || {
        counter(admin, "exported") == 1.0
    });
}

#[test]
fn an_unsampled_context_is_passed_on_and_records_nothing() {
    let (collector, got) = receiver(false);
    let be = H1Backend::start(|_| H1Answer::ok("upstream"));
    let (_gw, addr, admin) = gateway(
        &otel(""),
        &support::yaml::h2_cluster("otel", collector),
        be.addr(),
    );
    let r = h1_get(
        addr,
        "example.com",
        "/quiet",
        &format!("traceparent: 00-{TRACE}-{PARENT}-00\r\n"),
    );
    assert_eq!(r.status, 200);
    let up = be.requests().pop().unwrap();
    let sent = up.field("traceparent").unwrap().to_owned();
    assert!(
        sent.starts_with(&format!("00-{TRACE}-")) && sent.ends_with("-00"),
        "{sent}"
    );
    // Not traced (and `propagate: false`).
    assert_eq!(r.header("x-envoy-decorator-operation"), None);
    assert_eq!(counter(admin, "not_sampled"), 1.0);
    std::thread::sleep(Duration::from_millis(1300));
    assert!(got.lock().unwrap().is_empty());
}

#[test]
fn sampling_starts_traces_where_none_came() {
    let (collector, got) = receiver(false);
    let be = H1Backend::start(|_| H1Answer::ok("upstream"));
    let none = "            random_sampling: { value: 0 }";
    let (_gw, addr, admin) = gateway(
        &otel(none),
        &support::yaml::h2_cluster("otel", collector),
        be.addr(),
    );
    // Random sampling 0: a new trace, not sampled, its decision passed on.
    assert_eq!(h1_get(addr, "example.com", "/", "").status, 200);
    let sent = be
        .requests()
        .pop()
        .unwrap()
        .field("traceparent")
        .unwrap()
        .to_owned();
    assert!(sent.ends_with("-00"), "{sent}");
    // A client's trace id asks for it (client_sampling 100).
    assert_eq!(
        h1_get(addr, "example.com", "/", "x-client-trace-id: abc\r\n").status,
        200
    );
    let sent = be
        .requests()
        .pop()
        .unwrap()
        .field("traceparent")
        .unwrap()
        .to_owned();
    assert!(sent.ends_with("-01"), "{sent}");
    let spans = wait_spans(&got, 1);
    assert_eq!(hex(&spans[0].1.trace_id), sent.split('-').nth(1).unwrap());
    assert!(spans[0].1.parent_span_id.is_empty());
    assert_eq!(
        attr(&spans[0].1, "guid:x-client-trace-id").as_deref(),
        Some("abc")
    );
    assert_eq!(
        (counter(admin, "sampled"), counter(admin, "not_sampled")),
        (1.0, 1.0)
    );
}

#[test]
fn zipkin_gets_json_spans_and_b3_goes_upstream() {
    let collector =
        H1Backend::start(|_| H1Answer::raw("HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n"));
    let be = H1Backend::start(|_| H1Answer::ok("upstream"));
    let tracing = r#"          tracing:
            provider:
              name: envoy.tracers.zipkin
              typed_config:
                "@type": type.googleapis.com/envoy.config.trace.v3.ZipkinConfig
                collector_cluster: zipkin
                collector_endpoint: "/api/v2/spans"
                shared_span_context: false
                collector_endpoint_version: HTTP_JSON"#;
    let (_gw, addr, admin) = gateway(
        tracing,
        &support::yaml::h1_cluster("zipkin", collector.addr()),
        be.addr(),
    );
    let b3 =
        "x-b3-traceid: 463ac35c9f6413ad\r\nx-b3-spanid: a2fb4a1d1a96d312\r\nx-b3-sampled: 1\r\n";
    assert_eq!(h1_get(addr, "example.com", "/", b3).status, 200);
    let up = be.requests().pop().unwrap();
    assert_eq!(up.field("x-b3-traceid"), Some("463ac35c9f6413ad"));
    assert_eq!(up.field("x-b3-parentspanid"), Some("a2fb4a1d1a96d312"));
    assert_eq!(up.field("x-b3-sampled"), Some("1"));
    let span_id = up.field("x-b3-spanid").unwrap().to_owned();
    assert_ne!(span_id, "a2fb4a1d1a96d312");
    wait_until(Duration::from_secs(10), "a Zipkin export", || {
        !collector.requests().is_empty()
    });
    let post = collector.requests().pop().unwrap();
    assert_eq!(
        (post.method.as_str(), post.target.as_str()),
        ("POST", "/api/v2/spans")
    );
    assert_eq!(post.field("content-type"), Some("application/json"));
    let json: serde_json::Value = serde_json::from_slice(&post.body).expect("JSON");
    let span = &json[0];
    assert_eq!(span["traceId"], "463ac35c9f6413ad");
    assert_eq!(span["id"], span_id.as_str());
    assert_eq!(span["parentId"], "a2fb4a1d1a96d312");
    assert_eq!(span["name"], "routeToBackend");
    assert_eq!(span["kind"], "SERVER");
    assert_eq!(span["tags"]["http.status_code"], "200");
    wait_until(Duration::from_secs(5), "export counted", || {
        counter(admin, "exported") == 1.0
    });
}

#[test]
fn a_collector_that_never_answers_costs_requests_nothing() {
    let (collector, _got) = receiver(true);
    let be = H1Backend::start(|_| H1Answer::ok("upstream"));
    // Exports that wait long on it.
    let patient = otel("").replace("timeout: 0.5s", "timeout: 30s");
    let (_gw, addr, admin) = gateway(
        &patient,
        &support::yaml::h2_cluster("otel", collector),
        be.addr(),
    );
    let n = 4200;
    let started = Instant::now();
    let replies = send_n(
        addr,
        "GET",
        "/",
        &[("traceparent", &format!("00-{TRACE}-{PARENT}-01"))],
        n,
    );
    assert!(replies.iter().all(|r| r.status == 200));
    let took = started.elapsed();
    // The first batch waits on the collector; the queue holds 4096 more;
    // the rest are dropped, counted.
    assert_eq!(counter(admin, "sampled"), n as f64);
    let dropped = counter(admin, "dropped");
    assert!(dropped > 0.0 && dropped <= (n - 4096) as f64, "{dropped}");
    assert!(took < Duration::from_secs(60), "{took:?}");
}

#[test]
fn custom_tags_go_on_each_span() {
    let (collector, got) = receiver(false);
    let be = H1Backend::start(|_| H1Answer::ok("upstream"));
    // As Istio writes them (its metadata tags find no metadata here:
    // their default, as Envoy's with none).
    let tags = r#"            custom_tags:
            - { tag: istio.mesh_id, literal: { value: cluster.local } }
            - { tag: tenant, request_header: { name: X-Tenant, default_value: none } }
            - { tag: region, request_header: { name: x-region, default_value: eu } }
            - { tag: home, environment: { name: GATEWAY_TEST_UNSET_VARIABLE, default_value: unset } }
            - { tag: istio.authorization.dry_run.allow_policy.name, metadata: { kind: { request: {} }, metadata_key: { key: envoy.filters.http.rbac, path: [ { key: shadow_effective_policy_id } ] }, default_value: none } }"#;
    let (_gw, addr, _admin) = gateway(
        &otel(tags),
        &support::yaml::h2_cluster("otel", collector),
        be.addr(),
    );
    let r = h1_get(
        addr,
        "example.com",
        "/",
        &format!("traceparent: 00-{TRACE}-{PARENT}-01\r\nx-tenant: blue\r\n"),
    );
    assert_eq!(r.status, 200);
    let spans = wait_spans(&got, 1);
    let span = &spans[0].1;
    assert_eq!(
        attr(span, "istio.mesh_id").as_deref(),
        Some("cluster.local")
    );
    assert_eq!(attr(span, "tenant").as_deref(), Some("blue"));
    assert_eq!(attr(span, "region").as_deref(), Some("eu"));
    assert_eq!(attr(span, "home").as_deref(), Some("unset"));
    assert_eq!(
        attr(span, "istio.authorization.dry_run.allow_policy.name").as_deref(),
        Some("none")
    );
}
