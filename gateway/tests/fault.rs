//! The fault injection filter (`envoy.filters.http.fault`): aborts (HTTP, gRPC, asked for by headers) and delays for their share of requests, the matchers that pick requests, `max_active_faults` across the filter's routes, the access log's flags, and the counters. Expected answers are Envoy 1.40's to the same bootstrap and requests (recorded 2026-11-28).

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use support::h1_backend::{H1Answer, H1Backend};
use support::h1_client::*;
use support::*;

fn route(prefix: &str, fault: &str, extra: &str) -> String {
    format!(
        r#"
              - match: {{ prefix: {prefix} }}
                route: {{ cluster: backend{extra} }}
                typed_per_filter_config:
                  envoy.filters.http.fault: {{ "@type": type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault, {fault} }}"#
    )
}

const ALL: &str = "percentage: { numerator: 100, denominator: HUNDRED }";

fn gateway(
    backend: SocketAddr,
    log: &std::path::Path,
) -> (gateway::GatewayHandle, SocketAddr, SocketAddr) {
    let mut routes = String::new();
    for (prefix, fault, extra) in [
        ("/abort503", format!("abort: {{ http_status: 503, {ALL} }}"), ""),
        ("/abort50", "abort: { http_status: 500, percentage: { numerator: 50, denominator: HUNDRED } }".to_string(), ""),
        ("/abortnopct", "abort: { http_status: 502 }".to_string(), ""),
        ("/grpc", format!("abort: {{ grpc_status: 14, {ALL} }}"), ""),
        ("/delayabort", format!("delay: {{ fixed_delay: 0.3s, {ALL} }}, abort: {{ http_status: 429, {ALL} }}"), ""),
        ("/delaytimeout", format!("delay: {{ fixed_delay: 1.2s, {ALL} }}"), ", timeout: 0.6s"),
        ("/maxactive", format!("max_active_faults: 1, delay: {{ fixed_delay: 1.5s, {ALL} }}"), ""),
        ("/clustermiss", format!("upstream_cluster: other, abort: {{ http_status: 503, {ALL} }}"), ""),
        ("/clustermatch", format!("upstream_cluster: backend, abort: {{ http_status: 503, {ALL} }}"), ""),
        ("/hdrmatch", format!("headers: [ {{ name: x-fault, string_match: {{ exact: \"yes\" }} }} ], abort: {{ http_status: 503, {ALL} }}"), ""),
        ("/nodes", format!("downstream_nodes: [nodeA, nodeB], abort: {{ http_status: 503, {ALL} }}"), ""),
    ] {
        routes.push_str(&route(prefix, &fault, extra));
    }
    let table = format!(
        r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:{routes}
              - match: {{ prefix: / }}
                route: {{ cluster: backend }}"#
    );
    let hcm = format!(
        r#"          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: {}
              log_format: {{ text_format_source: {{ inline_string: "%REQ(:PATH)% %RESPONSE_CODE% %RESPONSE_FLAGS%\n" }} }}"#,
        log.display()
    );
    let bootstrap = support::yaml::filters_bootstrap(
        &hcm,
        &format!(
            r#"          - name: envoy.filters.http.fault
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault
              abort: {{ header_abort: {{}}, {ALL} }}
              delay: {{ header_delay: {{}}, {ALL} }}"#
        ),
        &table,
        &support::yaml::h1_cluster("backend", backend),
    )
    .expect("bootstrap");
    let gw = start(bootstrap, 2);
    let addr = gw.listener("ingress").expect("listener");
    let admin = gw.admin_addr.expect("admin");
    (gw, addr, admin)
}

fn log_file() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    std::env::temp_dir().join(format!(
        "gw-fault-{}-{}.log",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

#[test]
fn aborts_as_envoy() {
    let be = H1Backend::start(|_| H1Answer::ok("ok"));
    let log = log_file();
    let (_gw, addr, admin) = gateway(be.addr(), &log);
    let r = h1_get(addr, "x", "/abort503", "");
    assert_eq!(r.status, 503);
    assert_eq!(r.body, b"fault filter abort");
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert_eq!(r.header("content-length"), Some("18"));
    // No percentage: never.
    assert_eq!(h1_get(addr, "x", "/abortnopct", "").status, 200);
    // Half of them, within what chance allows for 1000 tries.
    let aborted = (0..1000)
        .filter(|_| h1_get(addr, "x", "/abort50", "").status == 500)
        .count();
    assert!((420..=580).contains(&aborted), "{aborted}");
    // Matchers.
    assert_eq!(h1_get(addr, "x", "/clustermiss", "").status, 200);
    assert_eq!(h1_get(addr, "x", "/clustermatch", "").status, 503);
    assert_eq!(h1_get(addr, "x", "/hdrmatch", "").status, 200);
    assert_eq!(
        h1_get(addr, "x", "/hdrmatch", "x-fault: yes\r\n").status,
        503
    );
    assert_eq!(h1_get(addr, "x", "/nodes", "").status, 200);
    assert_eq!(
        h1_get(
            addr,
            "x",
            "/nodes",
            "x-envoy-downstream-service-node: nodeB\r\n"
        )
        .status,
        503
    );
    assert_eq!(
        h1_get(
            addr,
            "x",
            "/nodes",
            "x-envoy-downstream-service-node: nodeC\r\n"
        )
        .status,
        200
    );
    // Asked for by the request (the filter's own config).
    let hdr = |v: &str| {
        h1_get(
            addr,
            "x",
            "/",
            &format!("x-envoy-fault-abort-request: {v}\r\n"),
        )
    };
    let teapot = hdr("418");
    assert_eq!(
        (teapot.status, &teapot.body[..]),
        (418, &b"fault filter abort"[..])
    );
    for ignored in ["199", "600", "abc"] {
        assert_eq!(hdr(ignored).status, 200, "{ignored}");
    }
    assert_eq!(
        h1_get(
            addr,
            "x",
            "/",
            "x-envoy-fault-abort-request: 503\r\nx-envoy-fault-abort-request-percentage: 0\r\n"
        )
        .status,
        200
    );
    // The backend saw none of the aborted requests.
    assert!(be
        .requests()
        .iter()
        .all(|r| !r.target.starts_with("/abort503") && !r.target.starts_with("/clustermatch")));

    let (_, stats) = admin_get(admin, "/stats");
    let line = format!(
        "gateway_fault_total{{outcome=\"aborts_injected\"}} {}\n",
        aborted + 5
    );
    assert!(stats.contains(&line), "{line}: {stats}");
    assert!(stats.contains("gateway_fault_active 0\n"), "{stats}");
    let hcm = "{envoy_http_conn_manager_prefix=\"ingress\"}";
    let envoy = format!("envoy_http_fault_aborts_injected{hcm}");
    assert_eq!(envoy_metric(admin, &envoy), (aborted + 5) as f64);
    assert_eq!(
        envoy_metric(admin, &format!("envoy_http_fault_active_faults{hcm}")),
        0.0
    );
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(logged.contains("/abort503 503 FI\n"), "{logged}");
    let _ = std::fs::remove_file(&log);
}

#[test]
fn grpc_requests_get_the_grpc_status() {
    let be = H1Backend::start(|_| H1Answer::ok("ok"));
    let log = log_file();
    let (_gw, addr, _) = gateway(be.addr(), &log);
    let (fixed, mapped, asked, plain) = client(move || async move {
        let c = connect(addr).await;
        let grpc = [("content-type", "application/grpc")];
        let fixed = get(&c, "/grpc", &grpc).await.unwrap();
        let mapped = get(&c, "/abort503", &grpc).await.unwrap();
        let asked = get(
            &c,
            "/",
            &[
                ("content-type", "application/grpc"),
                ("x-envoy-fault-abort-grpc-request", "7"),
            ],
        )
        .await
        .unwrap();
        let plain = get(&c, "/grpc", &[]).await.unwrap();
        (fixed, mapped, asked, plain)
    });
    for (r, code) in [(&fixed, "14"), (&mapped, "14"), (&asked, "7")] {
        assert_eq!(r.status, 200);
        assert_eq!(r.grpc_status(), Some(code));
        assert_eq!(r.header("grpc-message"), Some("fault filter abort"));
        assert_eq!(r.header("content-type"), Some("application/grpc"));
    }
    // A gRPC abort of a request that is not gRPC: a plain 200.
    assert_eq!(
        (plain.status.as_u16(), &plain.body[..]),
        (200, &b"fault filter abort"[..])
    );
    let _ = std::fs::remove_file(&log);
}

#[test]
fn delays_hold_the_request_then_it_goes_on() {
    let be = H1Backend::start(|_| H1Answer::ok("ok"));
    let log = log_file();
    let (_gw, addr, admin) = gateway(be.addr(), &log);
    let t = Instant::now();
    let r = h1_get(addr, "x", "/", "x-envoy-fault-delay-request: 300\r\n");
    assert_eq!((r.status, &r.body[..]), (200, &b"ok"[..]));
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
    // Delay then abort.
    let t = Instant::now();
    let r = h1_get(addr, "x", "/delayabort", "");
    assert_eq!(r.status, 429);
    assert!(t.elapsed() >= Duration::from_millis(300));
    // The route's timeout starts after the delay (Envoy's).
    let r = h1_get(addr, "x", "/delaytimeout", "");
    assert_eq!(r.status, 200);
    // max_active_faults: while one delay is in flight, the next request
    // passes untouched and at once.
    let held = std::thread::spawn(move || {
        let t = Instant::now();
        let r = h1_get(addr, "x", "/maxactive", "");
        (r.status, t.elapsed())
    });
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let passed = h1_get(addr, "x", "/maxactive", "");
    assert_eq!(passed.status, 200);
    assert!(
        t.elapsed() < Duration::from_millis(1000),
        "{:?}",
        t.elapsed()
    );
    let (status, took) = held.join().unwrap();
    assert_eq!(status, 200);
    assert!(took >= Duration::from_millis(1500), "{took:?}");

    let (_, stats) = admin_get(admin, "/stats");
    for line in [
        "gateway_fault_total{outcome=\"delays_injected\"} 4\n",
        "gateway_fault_total{outcome=\"faults_overflow\"} 1\n",
        "gateway_fault_active 0\n",
    ] {
        assert!(stats.contains(line), "{line}: {stats}");
    }
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(logged.contains("/ 200 DI\n"), "{logged}");
    assert!(logged.contains("/delayabort 429 DI,FI\n"), "{logged}");
    let _ = std::fs::remove_file(&log);
}

#[test]
fn bad_faults_are_refused_by_name() {
    let bad = |fault: &str| {
        support::yaml::filters_bootstrap(
            "",
            &format!(
                r#"          - name: envoy.filters.http.fault
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault
              {fault}"#
            ),
            &support::yaml::one_route("s", ""),
            &support::yaml::h1_cluster("s", "127.0.0.1:1".parse().unwrap()),
        )
        .expect_err("refused")
        .to_string()
    };
    let e = bad("abort: { http_status: 600 }");
    assert!(
        e.contains("abort.http_status: 600 is not a status in 200..=599"),
        "{e}"
    );
    let e = bad("delay: { fixed_delay: 0s }");
    assert!(e.contains("delay.fixed_delay"), "{e}");
    let e = bad("response_rate_limit: { fixed_limit: { limit_kbps: 1 } }");
    assert!(e.contains("response_rate_limit: not supported"), "{e}");
}
