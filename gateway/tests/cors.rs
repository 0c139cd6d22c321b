//! The CORS filter (`envoy.filters.http.cors`): the policies of Envoy's own CORS example (its backend proxy), preflights answered or passed on, the fields a cross-origin response gets, route and virtual host policies read together, the legacy `cors` field, shadow mode, and the counters. Expected answers are Envoy 1.40's to the same bootstrap and requests.

mod support;

use std::net::SocketAddr;

use support::h1_backend::{H1Answer, H1Backend};
use support::h1_client::*;
use support::*;

/// The CORS example's backend proxy (envoyproxy/examples cors/backend),
/// with routes for the cases below, in front of one backend.
fn gateway(backend: SocketAddr) -> (gateway::GatewayHandle, SocketAddr, SocketAddr) {
    let routes = r#"            virtual_hosts:
            - name: www
              domains: ["*"]
              typed_per_filter_config:
                envoy.filters.http.cors:
                  "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy
                  allow_origin_string_match: [ { safe_regex: { regex: \* } } ]
                  allow_methods: "GET"
                  filter_enabled: { default_value: { numerator: 100, denominator: HUNDRED }, runtime_key: cors.www.enabled }
                  shadow_enabled: { default_value: { numerator: 0, denominator: HUNDRED }, runtime_key: cors.www.shadow_enabled }
              routes:
              - match: { prefix: /cors/open }
                route: { cluster: backend_service }
              - match: { prefix: /cors/disabled }
                route: { cluster: backend_service }
                typed_per_filter_config:
                  envoy.filters.http.cors:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy
                    filter_enabled: { default_value: { numerator: 0, denominator: HUNDRED } }
              - match: { prefix: /cors/restricted }
                route: { cluster: backend_service }
                typed_per_filter_config:
                  envoy.filters.http.cors:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy
                    allow_origin_string_match: [ { safe_regex: { regex: .*\.envoyproxy\.io } } ]
                    allow_methods: "GET"
              - match: { prefix: /cors/credentials }
                route: { cluster: backend_service }
                typed_per_filter_config:
                  envoy.filters.http.cors:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy
                    allow_origin_string_match: [ { exact: "https://app.example" } ]
                    allow_headers: "content-type,x-token"
                    expose_headers: "x-trace"
                    max_age: "600"
                    allow_credentials: true
                    forward_not_matching_preflights: false
              - match: { prefix: /cors/shadow }
                route: { cluster: backend_service }
                typed_per_filter_config:
                  envoy.filters.http.cors:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy
                    filter_enabled: { default_value: { numerator: 0, denominator: HUNDRED } }
                    shadow_enabled: { default_value: { numerator: 100, denominator: HUNDRED } }
              - match: { prefix: /cors/legacy }
                route:
                  cluster: backend_service
                  cors:
                    allow_origin_string_match: [ { prefix: "http://legacy." } ]
                    allow_methods: "PUT"
              - match: { prefix: /cors/star }
                route: { cluster: backend_service }
                typed_per_filter_config:
                  envoy.filters.http.cors:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy
                    allow_methods: "*"
                    allow_headers: "*"
              - match: { prefix: /cors/direct }
                direct_response: { status: 200, body: { inline_string: "direct" } }
              - match: { prefix: / }
                route: { cluster: backend_service }
            - name: legacy
              domains: ["legacy.test"]
              cors:
                allow_origin_string_match: [ { suffix: ".example" } ]
                allow_methods: "POST"
                max_age: "60"
              routes:
              - match: { prefix: /cors/legacy }
                route:
                  cluster: backend_service
                  cors:
                    allow_origin_string_match: [ { prefix: "http://legacy." } ]
                    allow_methods: "PUT"
              - match: { prefix: / }
                route: { cluster: backend_service }"#;
    let bootstrap = support::yaml::filters_bootstrap(
        "",
        r#"          - name: envoy.filters.http.cors
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"#,
        routes,
        &support::yaml::h1_cluster("backend_service", backend),
    )
    .expect("bootstrap");
    let gw = start(bootstrap, 1);
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    (gw, addr, admin)
}

fn backend() -> H1Backend {
    H1Backend::start(|r| {
        H1Answer::raw(format!(
            "HTTP/1.1 200 OK\r\ncontent-length: 7\r\nx-method: {}\r\n\r\nSuccess",
            r.method
        ))
    })
}

fn options(addr: SocketAddr, path: &str, extra: &str) -> Response {
    use std::io::Write;
    let (mut s, mut r) = open(addr);
    let req = format!("OPTIONS {path} HTTP/1.1\r\nHost: x\r\n{extra}\r\n");
    s.write_all(req.as_bytes()).unwrap();
    read_response(&mut r, false)
}

/// The checks of the example's verify.sh, plus the preflight its page
/// makes.
#[test]
fn the_cors_example_answers_as_envoy() {
    let be = backend();
    let (_gw, addr, _) = gateway(be.addr());
    let example = "Origin: http://example.com\r\n";

    let disabled = h1_get(addr, "x", "/cors/disabled", example);
    assert_eq!(
        (disabled.status, &disabled.body[..]),
        (200, &b"Success"[..])
    );
    assert_eq!(disabled.header("access-control-allow-origin"), None);

    let open_ = h1_get(addr, "x", "/cors/open", example);
    assert_eq!(open_.status, 200);
    assert_eq!(
        open_.header("access-control-allow-origin"),
        Some("http://example.com")
    );

    let restricted = h1_get(addr, "x", "/cors/restricted", example);
    assert_eq!(
        (restricted.status, &restricted.body[..]),
        (200, &b"Success"[..])
    );
    assert_eq!(restricted.header("access-control-allow-origin"), None);
    let foo = h1_get(
        addr,
        "x",
        "/cors/restricted",
        "Origin: http://foo.envoyproxy.io\r\n",
    );
    assert_eq!(
        foo.header("access-control-allow-origin"),
        Some("http://foo.envoyproxy.io")
    );

    // A request with a body (its head given back once the body went
    // upstream) still gets the fields.
    let posted = h1_post(addr, "x", "/cors/open", example, &[b'x'; 70_000]);
    assert_eq!(posted.status, 200);
    assert_eq!(
        posted.header("access-control-allow-origin"),
        Some("http://example.com")
    );

    // Without Origin nothing is added.
    let plain = h1_get(addr, "x", "/cors/open", "");
    assert_eq!(plain.header("access-control-allow-origin"), None);

    // The preflight is answered here: the backend never sees it.
    let before = be.requests().len();
    let pre = options(
        addr,
        "/cors/open",
        "Origin: http://example.com\r\nAccess-Control-Request-Method: GET\r\n",
    );
    assert_eq!(pre.status, 200);
    assert_eq!(
        pre.header("access-control-allow-origin"),
        Some("http://example.com")
    );
    assert_eq!(pre.header("access-control-allow-methods"), Some("GET"));
    assert_eq!(pre.header("access-control-allow-credentials"), None);
    assert!(pre.body.is_empty());
    assert_eq!(be.requests().len(), before);

    // An OPTIONS without Access-Control-Request-Method is no preflight:
    // it goes on, and its response gets the origin.
    let not_pre = options(addr, "/cors/open", example);
    assert_eq!(not_pre.header("x-method"), Some("OPTIONS"));
    assert_eq!(
        not_pre.header("access-control-allow-origin"),
        Some("http://example.com")
    );
}

#[test]
fn credentials_exposed_headers_and_refused_preflights() {
    let be = backend();
    let (_gw, addr, admin) = gateway(be.addr());
    let app = "Origin: https://app.example\r\n";
    let simple = h1_get(addr, "x", "/cors/credentials", app);
    assert_eq!(
        simple.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert_eq!(
        simple.header("access-control-allow-credentials"),
        Some("true")
    );
    assert_eq!(
        simple.header("access-control-expose-headers"),
        Some("x-trace")
    );

    let pre = options(
        addr,
        "/cors/credentials",
        "Origin: https://app.example\r\nAccess-Control-Request-Method: POST\r\n",
    );
    assert_eq!(pre.status, 200);
    assert_eq!(pre.header("access-control-allow-credentials"), Some("true"));
    assert_eq!(
        pre.header("access-control-allow-headers"),
        Some("content-type,x-token")
    );
    assert_eq!(pre.header("access-control-max-age"), Some("600"));
    // Methods are not set on the route: the virtual host's apply.
    assert_eq!(pre.header("access-control-allow-methods"), Some("GET"));
    // Envoy's own response hook adds the exposed headers to its
    // preflight answer too.
    assert_eq!(pre.header("access-control-expose-headers"), Some("x-trace"));
    let order: Vec<&str> = pre.headers.iter().map(|(n, _)| n.as_str()).collect();
    let acao = order
        .iter()
        .position(|n| *n == "access-control-allow-origin");
    let acam = order
        .iter()
        .position(|n| *n == "access-control-allow-methods");
    let aceh = order
        .iter()
        .position(|n| *n == "access-control-expose-headers");
    assert!(acao < acam && acam < aceh, "{order:?}");

    // forward_not_matching_preflights: false refuses a preflight from an
    // origin the policy does not take, without asking the backend.
    let before = be.requests().len();
    let refused = options(
        addr,
        "/cors/credentials",
        "Origin: https://evil.example\r\nAccess-Control-Request-Method: POST\r\n",
    );
    // Answered here, without the origin's fields (Envoy's 200, not a
    // refusal: the browser then refuses the cross-origin request).
    assert_eq!(refused.status, 200);
    assert_eq!(refused.header("access-control-allow-origin"), None);
    assert_eq!(refused.header("access-control-expose-headers"), None);
    assert_eq!(
        refused.header("access-control-allow-credentials"),
        Some("true")
    );
    assert_eq!(be.requests().len(), before);
    // Elsewhere (the default) it goes to the backend.
    let forwarded = options(
        addr,
        "/cors/restricted",
        "Origin: http://example.com\r\nAccess-Control-Request-Method: GET\r\n",
    );
    assert_eq!(forwarded.header("x-method"), Some("OPTIONS"));
    assert_eq!(forwarded.header("access-control-allow-origin"), None);

    let (_, stats) = admin_get(admin, "/stats");
    assert!(
        stats.contains("gateway_cors_total{outcome=\"origin_valid\"} 2"),
        "{stats}"
    );
    assert!(
        stats.contains("gateway_cors_total{outcome=\"origin_invalid\"} 2"),
        "{stats}"
    );
    // Under Envoy's names too, per connection manager, as Envoy's CORS
    // example reads them (`/stats?filter=ingress_http`).
    let (_, text) = admin_get(admin, "/stats?filter=ingress%5C.cors");
    assert!(text.contains("http.ingress.cors.origin_valid: 2"), "{text}");
    assert!(
        text.contains("http.ingress.cors.origin_invalid: 2"),
        "{text}"
    );
    let (_, prom) = admin_get(admin, "/stats/prometheus?filter=cors");
    assert!(
        prom.contains("envoy_http_cors_origin_valid{envoy_http_conn_manager_prefix=\"ingress\"} 2"),
        "{prom}"
    );
}

#[test]
fn shadow_legacy_and_local_replies() {
    let be = backend();
    let (_gw, addr, admin) = gateway(be.addr());
    // Shadow: judged and counted, nothing added, the preflight forwarded.
    let shadow = options(
        addr,
        "/cors/shadow",
        "Origin: http://example.com\r\nAccess-Control-Request-Method: GET\r\n",
    );
    assert_eq!(shadow.header("x-method"), Some("OPTIONS"));
    assert_eq!(shadow.header("access-control-allow-origin"), None);
    let (_, stats) = admin_get(admin, "/stats");
    assert!(
        stats.contains("gateway_cors_total{outcome=\"origin_valid\"} 1"),
        "{stats}"
    );

    // The legacy `cors` fields, route action's over virtual host's, field
    // by field, where no typed policy is.
    let legacy_options = |path: &str, origin: &str| {
        use std::io::Write;
        let (mut s, mut r) = open(addr);
        let req = format!(
            "OPTIONS {path} HTTP/1.1\r\nHost: legacy.test\r\nOrigin: {origin}\r\nAccess-Control-Request-Method: PUT\r\n\r\n"
        );
        s.write_all(req.as_bytes()).unwrap();
        read_response(&mut r, false)
    };
    let legacy = legacy_options("/cors/legacy", "http://legacy.example");
    assert_eq!(legacy.status, 200);
    assert_eq!(legacy.header("access-control-allow-methods"), Some("PUT"));
    assert_eq!(legacy.header("access-control-max-age"), Some("60"));
    // The route's origins replace the virtual host's.
    let other = legacy_options("/cors/legacy", "http://other.example");
    assert_eq!(other.header("x-method"), Some("OPTIONS"));
    let vhost = legacy_options("/elsewhere", "http://other.example");
    assert_eq!(vhost.header("access-control-allow-methods"), Some("POST"));
    // Beside a typed policy the legacy field is not read at all: the
    // virtual host's typed policy answers.
    let hidden = options(
        addr,
        "/cors/legacy",
        "Origin: http://legacy.example\r\nAccess-Control-Request-Method: PUT\r\n",
    );
    assert_eq!(hidden.header("access-control-allow-methods"), Some("GET"));

    // A route that answers itself is left alone (Envoy's filter needs a
    // route entry), preflights included.
    let direct = h1_get(addr, "x", "/cors/direct", "Origin: http://example.com\r\n");
    assert_eq!(direct.body, b"direct");
    assert_eq!(direct.header("access-control-allow-origin"), None);
    let pre = options(
        addr,
        "/cors/direct",
        "Origin: http://example.com\r\nAccess-Control-Request-Method: GET\r\n",
    );
    assert_eq!(pre.body, b"direct");
}

/// `*` in allow_methods / allow_headers echoes what the preflight asks.
#[test]
fn stars_echo_the_preflight() {
    let be = backend();
    let (_gw, addr, _) = gateway(be.addr());
    let pre = options(
        addr,
        "/cors/star",
        "Origin: http://a.example\r\nAccess-Control-Request-Method: PATCH\r\nAccess-Control-Request-Headers: x-one, x-two\r\n",
    );
    assert_eq!(pre.status, 200);
    assert_eq!(pre.header("access-control-allow-methods"), Some("PATCH"));
    assert_eq!(
        pre.header("access-control-allow-headers"),
        Some("x-one, x-two")
    );
    let bare = options(
        addr,
        "/cors/star",
        "Origin: http://a.example\r\nAccess-Control-Request-Method: PATCH\r\n",
    );
    assert_eq!(bare.header("access-control-allow-headers"), Some(""));
}

#[test]
fn bad_policies_are_refused_by_name() {
    let bad = |policy: &str| {
        let routes = format!(
            r#"            virtual_hosts:
            - name: www
              domains: ["*"]
              typed_per_filter_config:
                envoy.filters.http.cors:
                  "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy
                  {policy}
              routes:
              - match: {{ prefix: / }}
                direct_response: {{ status: 200 }}"#
        );
        support::yaml::filters_bootstrap(
            "",
            r#"          - name: envoy.filters.http.cors
            typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors }"#,
            &routes,
            "",
        )
        .expect_err("refused")
        .to_string()
    };
    let e = bad(r#"allow_origin_string_match: [ { safe_regex: { regex: "(" } } ]"#);
    assert!(e.contains("allow_origin_string_match[0]"), "{e}");
    let e = bad(r#"filter_enabled: { default_value: { numerator: 1, denominator: 7 } }"#);
    assert!(e.contains("filter_enabled"), "{e}");
}
