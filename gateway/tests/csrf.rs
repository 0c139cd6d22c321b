//! The CSRF filter (`envoy.filters.http.csrf`) on the bootstrap of Envoy's own CSRF example (its same-site proxy): state-changing requests from another origin refused with 403, the per-route policies (disabled, shadow, additional origins) over the virtual host's and the filter's, the source origin from `Origin` or `Referer`, and the counters. Expected answers are Envoy 1.40's to the same bootstrap and requests.

mod support;

use std::net::SocketAddr;

use support::h1_backend::{H1Answer, H1Backend};
use support::h1_client::*;
use support::*;

fn gateway(backend: SocketAddr) -> (gateway::GatewayHandle, SocketAddr, SocketAddr) {
    let enabled = "filter_enabled: { default_value: { numerator: 100, denominator: HUNDRED } }";
    let routes = format!(
        r#"            virtual_hosts:
            - name: www
              domains: ["*"]
              typed_per_filter_config:
                envoy.filters.http.cors:
                  "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy
                  allow_origin_string_match: [ {{ safe_regex: {{ regex: \* }} }} ]
                  {enabled}
                envoy.filters.http.csrf:
                  "@type": type.googleapis.com/envoy.extensions.filters.http.csrf.v3.CsrfPolicy
                  filter_enabled: {{ default_value: {{ numerator: 100, denominator: HUNDRED }}, runtime_key: csrf.www.enabled }}
                  shadow_enabled: {{ default_value: {{ numerator: 0, denominator: HUNDRED }}, runtime_key: csrf.www.shadow_enabled }}
              routes:
              - match: {{ prefix: /csrf/disabled }}
                route: {{ cluster: generic_service }}
                typed_per_filter_config:
                  envoy.filters.http.csrf:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.csrf.v3.CsrfPolicy
                    filter_enabled: {{ default_value: {{ numerator: 0, denominator: HUNDRED }} }}
              - match: {{ prefix: /csrf/shadow }}
                route: {{ cluster: generic_service }}
                typed_per_filter_config:
                  envoy.filters.http.csrf:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.csrf.v3.CsrfPolicy
                    filter_enabled: {{ default_value: {{ numerator: 0, denominator: HUNDRED }} }}
                    shadow_enabled: {{ default_value: {{ numerator: 100, denominator: HUNDRED }} }}
              - match: {{ prefix: /csrf/additional_origin }}
                route: {{ cluster: generic_service }}
                typed_per_filter_config:
                  envoy.filters.http.csrf:
                    "@type": type.googleapis.com/envoy.extensions.filters.http.csrf.v3.CsrfPolicy
                    {enabled}
                    additional_origins: [ {{ safe_regex: {{ regex: .* }} }} ]
              - match: {{ prefix: /csrf/off }}
                route: {{ cluster: generic_service }}
                typed_per_filter_config:
                  envoy.filters.http.csrf:
                    "@type": type.googleapis.com/envoy.config.route.v3.FilterConfig
                    disabled: true
              - match: {{ prefix: / }}
                route: {{ cluster: generic_service }}"#
    );
    let bootstrap = support::yaml::filters_bootstrap(
        "",
        r#"          - name: envoy.filters.http.cors
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors
          - name: envoy.filters.http.csrf
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.csrf.v3.CsrfPolicy
              filter_enabled: { default_value: { numerator: 0, denominator: HUNDRED } }"#,
        &routes,
        &support::yaml::h1_cluster("generic_service", backend),
    )
    .expect("bootstrap");
    let gw = start(bootstrap, 1);
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    (gw, addr, admin)
}

fn request(addr: SocketAddr, method: &str, host: &str, path: &str, extra: &str) -> Response {
    use std::io::Write;
    let (mut s, mut r) = open(addr);
    let req =
        format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\ncontent-length: 0\r\n{extra}\r\n");
    s.write_all(req.as_bytes()).unwrap();
    read_response(&mut r, false)
}

#[test]
fn the_csrf_example_answers_as_envoy() {
    let be = H1Backend::start(|_| H1Answer::ok("Success"));
    let (_gw, addr, admin) = gateway(be.addr());
    let example = "Origin: http://example.com\r\n";
    let post = |path: &str, extra: &str| request(addr, "POST", "localhost:10000", path, extra);

    let disabled = post("/csrf/disabled", example);
    assert_eq!(
        (disabled.status, &disabled.body[..]),
        (200, &b"Success"[..])
    );
    assert_eq!(
        disabled.header("access-control-allow-origin"),
        Some("http://example.com")
    );
    let shadow = post("/csrf/shadow", example);
    assert_eq!((shadow.status, &shadow.body[..]), (200, &b"Success"[..]));

    let enabled = post("/csrf/enabled", example);
    assert_eq!(enabled.status, 403);
    assert_eq!(enabled.body, b"Invalid origin");
    assert_eq!(enabled.header("content-type"), Some("text/plain"));
    // The CORS filter still marks the refusal readable by the origin.
    assert_eq!(
        enabled.header("access-control-allow-origin"),
        Some("http://example.com")
    );

    let additional = post("/csrf/additional_origin", example);
    assert_eq!(
        (additional.status, &additional.body[..]),
        (200, &b"Success"[..])
    );

    // Same origin: the Origin's host and port are the request's Host.
    let same = post("/csrf/enabled", "Origin: http://localhost:10000\r\n");
    assert_eq!(same.status, 200);
    // No Origin: the Referer's origin stands in.
    let referer = post(
        "/csrf/enabled",
        "Referer: http://localhost:10000/page?x=1\r\n",
    );
    assert_eq!(referer.status, 200);
    let missing = post("/csrf/enabled", "");
    assert_eq!(missing.status, 403);
    // Safe methods are never checked; a FilterConfig disables the filter.
    let get = request(addr, "GET", "localhost:10000", "/csrf/enabled", example);
    assert_eq!(get.status, 200);
    assert_eq!(post("/csrf/off", example).status, 200);
    for m in ["PUT", "DELETE", "PATCH"] {
        let r = request(addr, m, "localhost:10000", "/csrf/enabled", example);
        assert_eq!(r.status, 403, "{m}");
    }

    // An opaque origin is a missing one (Referer not read); a Referer
    // with a fragment is dropped; userinfo and the path are not the
    // origin.
    assert_eq!(
        post(
            "/csrf/enabled",
            "Origin: null\r\nReferer: http://localhost:10000/\r\n"
        )
        .status,
        403
    );
    assert_eq!(
        post("/csrf/enabled", "Referer: http://localhost:10000/#x\r\n").status,
        403
    );
    assert_eq!(
        post("/csrf/enabled", "Origin: http://u:p@localhost:10000\r\n").status,
        200
    );
    assert_eq!(
        post("/csrf/enabled", "Origin: http://localhost:10000#x\r\n").status,
        403
    );
    assert_eq!(
        post("/csrf/enabled", "Origin: http://LOCALHOST:10000\r\n").status,
        403
    );

    let (_, stats) = admin_get(admin, "/stats");
    // valid: additional, same, referer, userinfo; invalid: shadow,
    // enabled, the three methods, fragment, case; missing: three (none,
    // null, the dropped referer).
    for (outcome, n) in [
        ("request_valid", 4),
        ("request_invalid", 7),
        ("missing_source_origin", 3),
    ] {
        let line = format!("gateway_csrf_total{{outcome=\"{outcome}\"}} {n}\n");
        assert!(stats.contains(&line), "{line}: {stats}");
    }
    // Under Envoy's names too, per connection manager.
    let (_, text) = admin_get(admin, "/stats?filter=%5C.csrf%5C.");
    for line in [
        "http.ingress.csrf.request_valid: 4",
        "http.ingress.csrf.request_invalid: 7",
        "http.ingress.csrf.missing_source_origin: 3",
    ] {
        assert!(text.lines().any(|l| l == line), "{line}: {text}");
    }
}
