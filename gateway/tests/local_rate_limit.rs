//! The local rate limit filter (`envoy.filters.http.local_ratelimit`): the bucket of Envoy's own example (3 tokens / 30 s: 429, `x-ratelimit-*`, the added field), descriptors from route and virtual host actions with their own buckets and values met as they come, not enforced, gRPC, per connection, and one limit for the gateway as a whole across shards. Expected answers are Envoy 1.40's to the same bootstrap and requests (recorded 2026-11-28).

mod support;

use std::net::SocketAddr;

use support::h1_backend::{H1Answer, H1Backend};
use support::h1_client::*;
use support::*;

const FILTER_HEAD: &str = r#"          - name: envoy.filters.http.local_ratelimit
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit
              stat_prefix: http_local_rate_limiter
              filter_enabled: { runtime_key: local_rate_limit_enabled, default_value: { numerator: 100, denominator: HUNDRED } }
              filter_enforced: { runtime_key: local_rate_limit_enforced, default_value: { numerator: 100, denominator: HUNDRED } }
              enable_x_ratelimit_headers: DRAFT_VERSION_03
"#;

fn start_with(
    filter_fields: &str,
    routes: &str,
    backend: SocketAddr,
    shards: usize,
) -> (gateway::GatewayHandle, SocketAddr, SocketAddr) {
    let bootstrap = support::yaml::filters_bootstrap(
        "",
        &format!("{FILTER_HEAD}{filter_fields}"),
        routes,
        &support::yaml::h1_cluster("backend", backend),
    )
    .expect("bootstrap");
    let gw = start(bootstrap, shards);
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    (gw, addr, admin)
}

fn quota(r: &Response) -> (u16, Option<&str>, Option<&str>, Option<&str>) {
    (
        r.status,
        r.header("x-ratelimit-limit"),
        r.header("x-ratelimit-remaining"),
        r.header("x-ratelimit-reset"),
    )
}

#[test]
fn the_example_bucket_answers_as_envoy() {
    let be = H1Backend::start(|_| H1Answer::ok("ok"));
    let (_gw, addr, admin) = start_with(
        r#"              token_bucket: { max_tokens: 3, tokens_per_fill: 3, fill_interval: 30s }
              response_headers_to_add:
              - append_action: OVERWRITE_IF_EXISTS_OR_ADD
                header: { key: x-local-rate-limit, value: 'true' }"#,
        &support::yaml::one_route("backend", ""),
        be.addr(),
        1,
    );
    let got: Vec<Response> = (0..4).map(|_| h1_get(addr, "x", "/", "")).collect();
    assert_eq!(quota(&got[0]), (200, Some("3"), Some("2"), Some("0")));
    assert_eq!(quota(&got[1]), (200, Some("3"), Some("1"), Some("0")));
    assert_eq!(quota(&got[2]), (200, Some("3"), Some("0"), Some("10")));
    assert_eq!(quota(&got[3]), (429, Some("3"), Some("0"), Some("10")));
    assert_eq!(got[3].body, b"local_rate_limited");
    assert_eq!(got[3].header("content-type"), Some("text/plain"));
    assert_eq!(got[3].header("x-local-rate-limit"), Some("true"));
    // The response field is added to refusals only.
    assert_eq!(got[0].header("x-local-rate-limit"), None);
    assert_eq!(be.requests().len(), 3);
    let (_, stats) = admin_get(admin, "/stats");
    for line in [
        "gateway_local_rate_limit_total{outcome=\"ok\"} 3\n",
        "gateway_local_rate_limit_total{outcome=\"rate_limited\"} 1\n",
        "gateway_local_rate_limit_total{outcome=\"enforced\"} 1\n",
    ] {
        assert!(stats.contains(line), "{line}: {stats}");
    }
    // Envoy's: under the filter's stat_prefix, not the manager's.
    let prefix = "{envoy_local_http_ratelimit_prefix=\"http_local_rate_limiter\"}";
    for (series, v) in [
        ("ok", 3.0),
        ("rate_limited", 1.0),
        ("enforced", 1.0),
        ("enabled", 4.0),
    ] {
        let series = format!("envoy_http_local_rate_limit_{series}{prefix}");
        assert_eq!(envoy_metric(admin, &series), v, "{series}");
    }
}

/// Routes with `rate_limits` actions over the filter's descriptors.
const DESCRIBED: &str = r#"            virtual_hosts:
            - name: vh
              domains: ["*"]
              rate_limits: [ { actions: [ { generic_key: { descriptor_key: vh_key, descriptor_value: vh } } ] } ]
              routes:
              - match: { prefix: /d/hdr }
                route:
                  cluster: backend
                  rate_limits: [ { actions: [ { request_headers: { header_name: x-client-id, descriptor_key: client_id } } ] } ]
              - match: { prefix: /d/user }
                route:
                  cluster: backend
                  rate_limits: [ { actions: [ { request_headers: { header_name: x-user, descriptor_key: user } } ] } ]
              - match: { prefix: /d/none }
                route: { cluster: backend }"#;

const DESCRIPTORS: &str = r#"              token_bucket: { max_tokens: 5, tokens_per_fill: 5, fill_interval: 60s }
              descriptors:
              - { entries: [ { key: client_id, value: foo } ], token_bucket: { max_tokens: 2, tokens_per_fill: 2, fill_interval: 60s } }
              - { entries: [ { key: client_id, value: bar } ], token_bucket: { max_tokens: 3, tokens_per_fill: 3, fill_interval: 60s } }
              - { entries: [ { key: vh_key, value: vh } ], token_bucket: { max_tokens: 8, tokens_per_fill: 8, fill_interval: 60s } }
              - { entries: [ { key: user } ], token_bucket: { max_tokens: 1, tokens_per_fill: 1, fill_interval: 60s } }"#;

#[test]
fn descriptors_pick_their_buckets() {
    let be = H1Backend::start(|_| H1Answer::ok("ok"));
    let (_gw, addr, _) = start_with(
        &format!("{DESCRIPTORS}\n              always_consume_default_token_bucket: false"),
        DESCRIBED,
        be.addr(),
        1,
    );
    let foo: Vec<u16> = (0..3)
        .map(|_| h1_get(addr, "x", "/d/hdr", "x-client-id: foo\r\n").status)
        .collect();
    assert_eq!(foo, [200, 200, 429]);
    let r = h1_get(addr, "x", "/d/hdr", "x-client-id: bar\r\n");
    assert_eq!(quota(&r), (200, Some("3"), Some("2"), Some("0")));
    // A value no descriptor has: the default bucket.
    let r = h1_get(addr, "x", "/d/hdr", "x-client-id: baz\r\n");
    assert_eq!(quota(&r), (200, Some("5"), Some("4"), Some("0")));
    // The virtual host's actions, for a route without its own.
    let r = h1_get(addr, "x", "/d/none", "");
    assert_eq!(quota(&r), (200, Some("8"), Some("7"), Some("0")));
    // A descriptor without a value: a bucket per value, as they come.
    for user in ["alice", "bob", "carol"] {
        let extra = format!("x-user: {user}\r\n");
        assert_eq!(h1_get(addr, "x", "/d/user", &extra).status, 200, "{user}");
        assert_eq!(h1_get(addr, "x", "/d/user", &extra).status, 429, "{user}");
    }
    // A thousand clients more cost no more memory (a fixed table), and
    // each still gets its own bucket.
    let admitted = (0..1000)
        .filter(|i| h1_get(addr, "x", "/d/user", &format!("x-user: u{i}\r\n")).status == 200)
        .count();
    assert!(admitted >= 990, "{admitted}");
}

#[test]
fn not_enforced_grpc_and_per_connection() {
    let be = H1Backend::start(|_| H1Answer::ok("ok"));
    let routes = r#"            virtual_hosts:
            - name: vh
              domains: ["*"]
              routes:
              - match: { prefix: /notenforced }
                route: { cluster: backend }
                typed_per_filter_config:
                  envoy.filters.http.local_ratelimit:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit
                    stat_prefix: ne_rl
                    token_bucket: { max_tokens: 1, tokens_per_fill: 1, fill_interval: 60s }
                    filter_enabled: { default_value: { numerator: 100, denominator: HUNDRED } }
                    filter_enforced: { default_value: { numerator: 0, denominator: HUNDRED } }
                    request_headers_to_add_when_not_enforced: [ { header: { key: x-local-ratelimited, value: 'true' } } ]
              - match: { prefix: / }
                route: { cluster: backend }"#;
    let (_gw, addr, _) = start_with(
        r#"              token_bucket: { max_tokens: 1, tokens_per_fill: 1, fill_interval: 60s }
              local_rate_limit_per_downstream_connection: true"#,
        routes,
        be.addr(),
        1,
    );
    assert_eq!(h1_get(addr, "x", "/notenforced", "").status, 200);
    let marked = h1_get(addr, "x", "/notenforced", "");
    assert_eq!(marked.status, 200);
    let seen = be.requests();
    let last = seen.last().expect("a request");
    assert_eq!(last.field("x-local-ratelimited"), Some("true"));
    assert_eq!(seen[0].field("x-local-ratelimited"), None);

    // Per connection: one token each, a new connection has its own.
    let (statuses, grpc) = client(move || async move {
        let c = connect(addr).await;
        let a = get(&c, "/", &[]).await.unwrap().status.as_u16();
        let b = get(&c, "/", &[]).await.unwrap().status.as_u16();
        let c2 = connect(addr).await;
        let grpc = get(&c2, "/", &[("content-type", "application/grpc")])
            .await
            .unwrap();
        let refused = get(&c2, "/", &[("content-type", "application/grpc")])
            .await
            .unwrap();
        (
            (a, b, grpc.status.as_u16()),
            (
                refused.status.as_u16(),
                refused.grpc_status().map(str::to_owned),
            ),
        )
    });
    assert_eq!(statuses, (200, 429, 200));
    assert_eq!(grpc, (200, Some("14".to_owned())));
}

/// Two shards, one bucket: the gateway as a whole admits the limit, not
/// a limit per shard.
#[test]
fn one_limit_across_shards() {
    let be = H1Backend::start(|_| H1Answer::ok("ok"));
    let (_gw, addr, _) = start_with(
        "              token_bucket: { max_tokens: 10, tokens_per_fill: 1, fill_interval: 3600s }",
        &support::yaml::one_route("backend", ""),
        be.addr(),
        2,
    );
    // Connections of their own, spread over the shards by the kernel.
    let admitted: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(move || {
                    (0..10)
                        .filter(|_| h1_get(addr, "x", "/", "").status == 200)
                        .count()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(admitted, 10);
}

#[test]
fn bad_limits_are_refused_by_name() {
    let bad = |fields: &str| {
        support::yaml::filters_bootstrap(
            "",
            &format!("{FILTER_HEAD}{fields}"),
            &support::yaml::one_route("s", ""),
            &support::yaml::h1_cluster("s", "127.0.0.1:1".parse().unwrap()),
        )
        .expect_err("refused")
        .to_string()
    };
    let e = bad("              token_bucket: { max_tokens: 0, fill_interval: 1s }");
    assert!(
        e.contains("token_bucket.max_tokens: must be greater than 0"),
        "{e}"
    );
    let e = bad("              token_bucket: { max_tokens: 1 }");
    assert!(e.contains("token_bucket.fill_interval: required"), "{e}");
    let e =
        bad("              rate_limits: [ { actions: [ { metadata: { descriptor_key: k } } ] } ]");
    assert!(
        e.contains("rate_limits[0].actions[0].metadata: not supported"),
        "{e}"
    );
}
