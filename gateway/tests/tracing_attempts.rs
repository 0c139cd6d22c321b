//! Upstream spans (`tracing.spawn_upstream_span`, or the router's `start_child_span`): each attempt of a traced request (the first, each retry, each hedge) is a client span, a child of the request's span, whose id is the parent the host sees; retries, refused connections and hedges tagged as Envoy 1.40 tags them (`retry.count`, `error.reason`, `canceled`, the attempt's own `response_flags`).

mod support;

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use engine::tracing::otlp::Span;
use support::h1_backend::{H1Answer, H1Backend};
use support::h1_client::*;
use support::otlp::{attr, hex, receiver, wait_spans};
use support::*;

const SERVER: i32 = 2;
const CLIENT: i32 = 3;
const STATUS_ERROR: i32 = 2;

/// A gateway tracing to an OTLP receiver (`extra`: more of `tracing`),
/// routing `/` to `backend` under `route_extra` (the route's further
/// fields) and `vh_extra` (its virtual host's).
fn gateway(
    tracing_extra: &str,
    route_extra: &str,
    vh_extra: &str,
    collector: SocketAddr,
    backend: SocketAddr,
) -> (gateway::GatewayHandle, SocketAddr) {
    let tracing = format!(
        r#"          tracing:
            provider:
              name: envoy.tracers.opentelemetry
              typed_config:
                "@type": type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig
                grpc_service: {{ envoy_grpc: {{ cluster_name: otel }}, timeout: 0.5s }}
                service_name: front-gateway
{tracing_extra}"#
    );
    let routes = format!(
        r#"            virtual_hosts:
            - name: all
              domains: ["*"]
{vh_extra}
              routes:
              - match: {{ prefix: / }}
                route: {{ cluster: backend{route_extra} }}"#
    );
    let clusters = format!(
        "{}{}",
        support::yaml::h2_cluster("otel", collector),
        support::yaml::h1_cluster("backend", backend)
    );
    let bootstrap =
        support::yaml::filters_bootstrap(&tracing, "", &routes, &clusters).expect("bootstrap");
    let gw = start(bootstrap, 1);
    let addr = gw.listener("ingress").expect("listener");
    (gw, addr)
}

/// The request's span and its attempts' spans (in the order they
/// started), checked to be one trace with the request's span as every
/// attempt's parent.
fn split(spans: Vec<Span>) -> (Span, Vec<Span>) {
    let (mut servers, mut clients): (Vec<Span>, Vec<Span>) =
        spans.into_iter().partition(|s| s.kind == SERVER);
    assert_eq!(servers.len(), 1, "one request span");
    let server = servers.pop().unwrap();
    clients.sort_by_key(|s| s.start_time_unix_nano);
    for c in &clients {
        assert_eq!(c.kind, CLIENT);
        assert_eq!(c.name, "router backend egress");
        assert_eq!(c.trace_id, server.trace_id);
        assert_eq!(c.parent_span_id, server.span_id);
        assert!(c.start_time_unix_nano >= server.start_time_unix_nano);
        assert!(c.end_time_unix_nano <= server.end_time_unix_nano + 50_000_000);
    }
    (server, clients)
}

fn status(span: &Span) -> Option<i32> {
    span.status.as_ref().map(|s| s.code)
}

#[test]
fn each_retry_is_a_client_span_whose_id_the_host_sees() {
    let (collector, got) = receiver(false);
    let n = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&n);
    // 503 (whole, no body), 503, then 200.
    let be = H1Backend::start(move |_| match seen.fetch_add(1, Ordering::SeqCst) {
        0 | 1 => H1Answer::raw("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n"),
        _ => H1Answer::ok("upstream"),
    });
    let (_gw, addr) = gateway(
        "            spawn_upstream_span: true\n",
        ", retry_policy: { retry_on: 5xx, num_retries: 2 }",
        "",
        collector,
        be.addr(),
    );
    assert_eq!(h1_get(addr, "example.com", "/", "").status, 200);
    let spans = wait_spans(&got, 4).into_iter().map(|(_, s)| s).collect();
    let (server, attempts) = split(spans);
    assert_eq!(attempts.len(), 3);
    assert_eq!(attr(&server, "http.status_code").as_deref(), Some("200"));
    assert_eq!(attr(&server, "retry.count"), None);
    // Its sizes, though the connection manager keeps no access log; the
    // host is its attempts' tag.
    assert_eq!(attr(&server, "response_size").as_deref(), Some("8"));
    assert_eq!(attr(&server, "upstream_address"), None);
    assert_eq!(server.flags, 257);
    // Each attempt's own id is the parent its host saw.
    let sent: Vec<String> = be
        .requests()
        .iter()
        .map(|r| r.field("traceparent").expect("traceparent").to_owned())
        .collect();
    assert_eq!(sent.len(), 3);
    for (i, (span, tp)) in attempts.iter().zip(&sent).enumerate() {
        let parts: Vec<&str> = tp.split('-').collect();
        assert_eq!(parts[1], hex(&server.trace_id), "{tp}");
        assert_eq!(parts[2], hex(&span.span_id), "attempt {}: {tp}", i + 1);
        assert_eq!(parts[3], "01");
        let count = (i > 0).then(|| i.to_string());
        assert_eq!(attr(span, "retry.count"), count);
        assert_eq!(attr(span, "upstream_address"), Some(be.addr().to_string()));
        assert_eq!(attr(span, "peer.address"), Some(be.addr().to_string()));
        assert_eq!(attr(span, "http.protocol").as_deref(), Some("HTTP/1.1"));
        assert_eq!(attr(span, "upstream_cluster").as_deref(), Some("backend"));
        assert_eq!(attr(span, "response_flags").as_deref(), Some("-"));
        // Whole answers: left, not cancelled.
        assert_eq!(attr(span, "canceled"), None);
        assert_eq!(attr(span, "node_id"), None);
    }
    for span in &attempts[..2] {
        assert_eq!(attr(span, "http.status_code").as_deref(), Some("503"));
        assert_eq!(attr(span, "error").as_deref(), Some("true"));
        assert_eq!(status(span), Some(STATUS_ERROR));
    }
    assert_eq!(
        attr(&attempts[2], "http.status_code").as_deref(),
        Some("200")
    );
    assert_eq!(attr(&attempts[2], "error"), None);
    assert_eq!(status(&attempts[2]), None);
}

#[test]
fn a_refused_connection_is_an_attempt_span_with_its_reason() {
    let (collector, got) = receiver(false);
    // Nothing listens there.
    let refusing = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (_gw, addr) = gateway(
        "            spawn_upstream_span: true\n",
        ", retry_policy: { retry_on: connect-failure, num_retries: 1 }",
        "",
        collector,
        refusing,
    );
    assert_eq!(h1_get(addr, "example.com", "/", "").status, 503);
    let spans = wait_spans(&got, 3).into_iter().map(|(_, s)| s).collect();
    let (server, attempts) = split(spans);
    assert_eq!(attempts.len(), 2);
    assert_eq!(attr(&server, "http.status_code").as_deref(), Some("503"));
    for (i, span) in attempts.iter().enumerate() {
        let count = (i > 0).then(|| i.to_string());
        assert_eq!(attr(span, "retry.count"), count);
        assert_eq!(attr(span, "error").as_deref(), Some("true"));
        assert_eq!(
            attr(span, "error.reason").as_deref(),
            Some("remote connection failure")
        );
        assert_eq!(attr(span, "response_flags").as_deref(), Some("UF"));
        assert_eq!(attr(span, "http.status_code").as_deref(), Some("0"));
        assert_eq!(attr(span, "canceled"), None);
        // No answer: the status stays unset, as Envoy's driver leaves it.
        assert_eq!(status(span), None);
    }
}

#[test]
fn a_hedged_attempt_that_loses_is_cancelled_after_its_per_try_timeout() {
    let (collector, got) = receiver(false);
    let n = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&n);
    let be = H1Backend::start(move |_| {
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1500));
        }
        H1Answer::ok("upstream")
    });
    let (_gw, addr) = gateway(
        "            spawn_upstream_span: true\n",
        ", retry_policy: { retry_on: 5xx, num_retries: 1, per_try_timeout: 0.3s }",
        "              hedge_policy: { hedge_on_per_try_timeout: true }",
        collector,
        be.addr(),
    );
    assert_eq!(h1_get(addr, "example.com", "/", "").status, 200);
    let spans = wait_spans(&got, 3).into_iter().map(|(_, s)| s).collect();
    let (_, attempts) = split(spans);
    assert_eq!(attempts.len(), 2);
    let (loser, winner) = (&attempts[0], &attempts[1]);
    assert_eq!(attr(loser, "canceled").as_deref(), Some("true"));
    assert_eq!(attr(loser, "response_flags").as_deref(), Some("UT"));
    assert_eq!(attr(loser, "http.status_code").as_deref(), Some("0"));
    assert_eq!(attr(loser, "error").as_deref(), Some("true"));
    // It ran past its per-try timeout, to the winner's answer.
    let ran = loser.end_time_unix_nano - loser.start_time_unix_nano;
    assert!(ran >= 300_000_000, "{ran} ns");
    assert_eq!(attr(winner, "retry.count").as_deref(), Some("1"));
    assert_eq!(attr(winner, "http.status_code").as_deref(), Some("200"));
    assert_eq!(attr(winner, "canceled"), None);
    assert!(winner.start_time_unix_nano >= loser.start_time_unix_nano + 300_000_000);
}

#[test]
fn without_spawn_upstream_span_the_host_sees_the_request_span() {
    let (collector, got) = receiver(false);
    let be = H1Backend::start(|_| H1Answer::ok("upstream"));
    let (_gw, addr) = gateway("", "", "", collector, be.addr());
    assert_eq!(h1_get(addr, "example.com", "/", "").status, 200);
    wait_spans(&got, 1);
    // Give a stray attempt span the time to come, were there one.
    std::thread::sleep(Duration::from_millis(1200));
    let spans: Vec<Span> = got.lock().unwrap().iter().map(|(_, s)| s.clone()).collect();
    assert_eq!(spans.len(), 1, "{spans:?}");
    let server = &spans[0];
    let tp = be.requests()[0].field("traceparent").unwrap().to_owned();
    assert_eq!(tp.split('-').nth(2), Some(hex(&server.span_id).as_str()));
}

#[test]
fn the_routers_start_child_span_spawns_them_in_zipkin_too() {
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
                collector_endpoint_version: HTTP_JSON"#;
    let routes = r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: { prefix: / }
                route: { cluster: backend }"#;
    let clusters = format!(
        "{}{}",
        support::yaml::h1_cluster("zipkin", collector.addr()),
        support::yaml::h1_cluster("backend", be.addr())
    );
    let router = r#"          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
              start_child_span: true
"#;
    let yaml = support::yaml::filters_yaml(tracing, "", routes, &clusters)
        .replace("          - name: envoy.filters.http.router\n", router);
    let bootstrap =
        xds::bootstrap::from_str(&yaml, xds::bootstrap::Format::Yaml).expect("bootstrap");
    let gw = start(bootstrap, 1);
    let addr = gw.listener("ingress").expect("listener");
    assert_eq!(h1_get(addr, "example.com", "/", "").status, 200);
    let up = be.requests().pop().unwrap();
    let (span_id, parent) = (
        up.field("x-b3-spanid").unwrap().to_owned(),
        up.field("x-b3-parentspanid").expect("a parent").to_owned(),
    );
    wait_until(Duration::from_secs(10), "a Zipkin export", || {
        !collector.requests().is_empty()
    });
    let post = collector.requests().pop().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&post.body).expect("JSON");
    let spans: HashMap<String, &serde_json::Value> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["kind"].as_str().unwrap().to_owned(), s))
        .collect();
    let (server, client) = (spans["SERVER"], spans["CLIENT"]);
    assert_eq!(client["id"], span_id.as_str());
    assert_eq!(client["parentId"], parent.as_str());
    assert_eq!(server["id"], parent.as_str());
    assert_eq!(client["name"], "router backend egress");
    assert_eq!(client["tags"]["http.status_code"], "200");
    assert_eq!(client.get("shared"), None);
}
