//! Active health checks (`health_checks`) against hosts whose health
//! endpoints the test controls: HTTP/1.1 statuses, timeouts and headers,
//! the first round before the listeners serve, `health_check_config`
//! ports, TCP payloads and gRPC's `grpc.health.v1`.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use demo_backend::BackendOptions;
use support::health_server::{Answer, HealthServer};
use support::*;

const WAIT: Duration = Duration::from_secs(10);

/// A bootstrap: listener `ingress` routing to cluster `web` of the
/// backends, each checked on its `check_ports` entry, with `checker` (a
/// `*_health_check` field at the check's indentation).
fn bootstrap(
    backends: &[SocketAddr],
    check_ports: &[Option<u16>],
    checker: &str,
) -> engine::Bootstrap {
    bootstrap_every("0.05s", backends, check_ports, checker)
}

/// [`bootstrap`] with checks every `interval`.
fn bootstrap_every(
    interval: &str,
    backends: &[SocketAddr],
    check_ports: &[Option<u16>],
    checker: &str,
) -> engine::Bootstrap {
    let endpoints = backends
        .iter()
        .zip(check_ports)
        .map(|(b, p)| {
            let hc = p.map_or(String::new(), |p| {
                format!(", health_check_config: {{ port_value: {p} }}")
            });
            yaml::endpoint(&b.ip().to_string(), b.port(), &hc)
        })
        .collect::<Vec<_>>()
        .join(", ");
    yaml::web_bootstrap(
        "",
        &format!(
            r#"    health_checks:
    - timeout: 0.3s
      interval: {interval}
      no_traffic_interval: {interval}
      unhealthy_threshold: 2
      healthy_threshold: 2
{checker}
{}    load_assignment: {{ cluster_name: web, endpoints: [{{ lb_endpoints: [{endpoints}] }}] }}
"#,
            yaml::h2_options("")
        ),
    )
}

const HTTP_CHECK: &str = "      http_health_check: { path: /healthz }";

#[test]
fn http_checks_take_failing_hosts_out_and_bring_them_back() {
    let (b1, b2) = (backend("b1"), backend("b2"));
    let (h1, h2) = (HealthServer::start(), HealthServer::start());
    let gw = start(
        bootstrap(
            &[b1.addr(), b2.addr()],
            &[Some(h1.addr.port()), Some(h2.addr.port())],
            HTTP_CHECK,
        ),
        2,
    );
    let admin = gw.admin_addr.unwrap();
    let addr = gw.listener("ingress").unwrap();
    assert_eq!(answering(addr, 8), ["b1", "b2"]);

    // A wrong status: out at once (unhealthy_threshold is for failures
    // without an answer).
    h2.set(Answer::Status(503, vec![]));
    wait_answering(addr, &["b1"]);
    assert_eq!(
        metric(admin, "gateway_health_check_healthy{cluster=\"web\"}"),
        1.0
    );
    assert_eq!(
        host_status(admin, "web", b2.addr())["health_status"],
        "UNHEALTHY",
        "the admin shows the verdict"
    );

    // Back after healthy_threshold passes.
    h2.set(Answer::Status(200, vec![]));
    wait_answering(addr, &["b1", "b2"]);

    // No answer within the timeout: out after unhealthy_threshold.
    let network = "gateway_health_checks_total{cluster=\"web\",outcome=\"network_failure\"}";
    let before = metric(admin, network);
    h2.set(Answer::Hang);
    wait_answering(addr, &["b1"]);
    assert!(
        metric(admin, network) >= before + 2.0,
        "two timeouts counted"
    );

    // Envoy's checker's request: the path, the cluster as Host, its agent.
    let head = h1.heads.lock().unwrap()[0].to_ascii_lowercase();
    assert!(head.starts_with("get /healthz http/1.1\r\n"), "{head}");
    assert!(head.contains("host: web\r\n"), "{head}");
    assert!(head.contains("user-agent: envoy/hc\r\n"), "{head}");
    gw.shutdown();
}

#[test]
fn the_first_round_ends_before_the_listeners_serve() {
    let (b1, b2) = (backend("b1"), backend("b2"));
    let (h1, h2) = (HealthServer::start(), HealthServer::start());
    h2.set(Answer::Status(503, vec![]));
    let gw = start(
        bootstrap(
            &[b1.addr(), b2.addr()],
            &[Some(h1.addr.port()), Some(h2.addr.port())],
            HTTP_CHECK,
        ),
        1,
    );
    // No request reaches the failing host, not even the first.
    assert_eq!(answering(gw.listener("ingress").unwrap(), 8), ["b1"]);
    assert_eq!(b2.requests(), 0);
    gw.shutdown();
}

#[test]
fn immediate_fail_retriable_statuses_headers_and_host_names() {
    let (b1, b2) = (backend("b1"), backend("b2"));
    let (h1, h2) = (HealthServer::start(), HealthServer::start());
    let checker = r#"      http_health_check:
        path: /ready
        host: svc.example
        retriable_statuses: [{ start: 429, end: 430 }]
        request_headers_to_add: [{ header: { key: x-probe, value: gw } }]
        request_headers_to_remove: [user-agent]"#;
    let gw = start(
        bootstrap(
            &[b1.addr(), b2.addr()],
            &[Some(h1.addr.port()), Some(h2.addr.port())],
            checker,
        ),
        1,
    );
    let addr = gw.listener("ingress").unwrap();
    assert_eq!(answering(addr, 8), ["b1", "b2"]);
    let head = h1.heads.lock().unwrap()[0].to_ascii_lowercase();
    assert!(head.starts_with("get /ready http/1.1\r\n"), "{head}");
    assert!(head.contains("host: svc.example\r\n"), "{head}");
    assert!(head.contains("x-probe: gw\r\n"), "{head}");
    assert!(!head.contains("user-agent"), "{head}");

    // The immediate-fail header on an expected status is ignored…
    h2.set(Answer::Status(
        200,
        vec![("x-envoy-immediate-health-check-fail", "true")],
    ));
    let seen = h2.checks();
    wait_until(WAIT, "more checks", || h2.checks() >= seen + 3);
    assert_eq!(answering(addr, 8), ["b1", "b2"]);
    // …and on a retriable one fails the host at once; a retriable status
    // alone needs unhealthy_threshold in a row.
    h2.set(Answer::Status(
        429,
        vec![("x-envoy-immediate-health-check-fail", "true")],
    ));
    wait_answering(addr, &["b1"]);
    h2.set(Answer::Status(200, vec![]));
    wait_answering(addr, &["b1", "b2"]);
    h2.set(Answer::Status(429, vec![]));
    wait_answering(addr, &["b1"]);
    gw.shutdown();
}

/// A TCP health endpoint: answers each `ping` with `reply`.
fn tcp_health(reply: &'static [u8]) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut conn in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buf = [0u8; 64];
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0 || conn.write_all(reply).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn tcp_checks_send_and_expect_payloads() {
    let (b1, b2) = (backend("b1"), backend("b2"));
    let good = tcp_health(b"xxpong");
    let bad = tcp_health(b"nope");
    // "ping" out, "pong" expected anywhere in what comes back.
    let checker =
        "      tcp_health_check: { send: { text: \"70696e67\" }, receive: [{ text: \"706f6e67\" }] }";
    let gw = start(
        bootstrap(
            &[b1.addr(), b2.addr()],
            &[Some(good.port()), Some(bad.port())],
            checker,
        ),
        1,
    );
    let admin = gw.admin_addr.unwrap();
    assert_eq!(answering(gw.listener("ingress").unwrap(), 8), ["b1"]);
    // The right answer kept coming on one connection.
    wait_until(WAIT, "passing checks", || {
        metric(
            admin,
            "gateway_health_checks_total{cluster=\"web\",outcome=\"success\"}",
        ) >= 5.0
    });
    gw.shutdown();
}

#[test]
fn grpc_checks_want_serving() {
    let b1 = backend("b1");
    let mut opts = BackendOptions::new("b2");
    opts.grpc_status = Some(14); // UNAVAILABLE
    let b2 = backend_with(opts);
    let checker = "      grpc_health_check: { service_name: web.v1 }";
    let gw = start(
        bootstrap(&[b1.addr(), b2.addr()], &[None, None], checker),
        1,
    );
    assert_eq!(answering(gw.listener("ingress").unwrap(), 8), ["b1"]);
    gw.shutdown();
}

#[test]
fn http_checks_over_http2_judge_status_and_headers() {
    // b2 answers 503 with the immediate-fail header, b3 200 with
    // x-envoy-degraded (still routable), b1 plain 200; all over h2c.
    let b1 = backend("b1");
    let mut opts = BackendOptions::new("b2");
    opts.status = Some(503);
    opts.response_headers = vec![("x-envoy-immediate-health-check-fail".into(), "true".into())];
    let b2 = backend_with(opts);
    let mut opts = BackendOptions::new("b3");
    opts.response_headers = vec![("x-envoy-degraded".into(), "true".into())];
    let b3 = backend_with(opts);
    let checker = "      http_health_check: { path: /healthz, codec_client_type: HTTP2 }";
    let gw = start(
        bootstrap(
            &[b1.addr(), b2.addr(), b3.addr()],
            &[None, None, None],
            checker,
        ),
        1,
    );
    let admin = gw.admin_addr.unwrap();
    let mut answers = answering(gw.listener("ingress").unwrap(), 12);
    answers.sort();
    assert_eq!(answers, ["b1", "b3"]);
    let (_, clusters) = admin_get(admin, "/clusters");
    assert!(
        clusters.contains(&format!(
            "web::{}::health_flags::/failed_active_hc/excluded_via_immediate_hc_fail\n",
            b2.addr()
        )),
        "{clusters}"
    );
    assert!(
        clusters.contains(&format!(
            "web::{}::health_flags::/degraded_active_hc",
            b3.addr()
        )),
        "{clusters}"
    );
    // Checks kept coming on one connection per host.
    wait_until(WAIT, "passing checks", || {
        metric(
            admin,
            "gateway_health_checks_total{cluster=\"web\",outcome=\"success\"}",
        ) >= 10.0
    });
    // Envoy's gauges: b1 and b3 pass (b3 degraded), b2 fails.
    let gauge = |s: &str| {
        envoy_metric(
            admin,
            &format!("envoy_cluster_health_check_{s}{{envoy_cluster_name=\"web\"}}"),
        )
    };
    assert_eq!((gauge("healthy"), gauge("degraded")), (2.0, 1.0));
    gw.shutdown();
}

#[test]
fn a_proxied_response_with_the_immediate_fail_header_fails_the_host_at_once() {
    // b1 passes its checks but says x-envoy-immediate-health-check-fail on
    // proxied responses (a backend Envoy after /healthcheck/fail does).
    // Checks every 60 s: only the header can take b1 out before the test
    // ends, and nothing brings it back meanwhile.
    let mut opts = BackendOptions::new("b1");
    opts.response_headers = vec![("x-envoy-immediate-health-check-fail".into(), "true".into())];
    let (b1, b2) = (backend_with(opts), backend("b2"));
    let (h1, h2) = (HealthServer::start(), HealthServer::start());
    let gw = start(
        bootstrap_every(
            "60s",
            &[b1.addr(), b2.addr()],
            &[Some(h1.addr.port()), Some(h2.addr.port())],
            HTTP_CHECK,
        ),
        2,
    );
    let admin = gw.admin_addr.unwrap();
    let addr = gw.listener("ingress").unwrap();
    // Both passed their first check; b1's first answer carries the header.
    assert_eq!(answering(addr, 4), ["b1", "b2"]);
    wait_answering(addr, &["b2"]);
    let (_, clusters) = admin_get(admin, "/clusters");
    assert!(
        clusters.contains(&format!(
            "web::{}::health_flags::/failed_active_hc/excluded_via_immediate_hc_fail\n",
            b1.addr()
        )),
        "{clusters}"
    );
    assert!(
        clusters.contains(&format!("web::{}::health_flags::healthy", b2.addr())),
        "{clusters}"
    );
    assert_eq!(h1.checks(), 1, "no check took it out");
    let counted = format!(
        "gateway_upstream_rq_immediate_hc_fail{{cluster=\"web\",host=\"{}\"}}",
        b1.addr()
    );
    assert!(metric(admin, &counted) >= 1.0);
    // Envoy's passive failure, on the cluster's health check series.
    let passive = "envoy_cluster_health_check_passive_failure{envoy_cluster_name=\"web\"}";
    assert!(envoy_metric(admin, passive) >= 1.0);
    let verify = "envoy_cluster_health_check_verify_cluster{envoy_cluster_name=\"web\"}";
    assert_eq!(envoy_metric(admin, verify), 0.0);
    gw.shutdown();
}

/// An h2c health endpoint that answers one check per connection, 200, then
/// closes it (as a server's idle timeout or connection age would).
fn one_check_per_connection() -> SocketAddr {
    support::h2c_server::h2c_server(|_, mut conn| async move {
        if let Some(Ok((_req, mut respond))) = conn.accept().await {
            let _ = respond.send_response(http::Response::new(()), true);
        }
        // Let the answer go out, then drop the connection.
        let _ = futures_lite::future::or(async { while conn.accept().await.is_some() {} }, async {
            glommio::timer::sleep(Duration::from_millis(5)).await;
        })
        .await;
    })
}

#[test]
fn a_kept_http2_connection_the_server_closed_is_replaced_without_a_failure() {
    let b1 = backend("b1");
    let checks = one_check_per_connection();
    let checker = "      http_health_check: { path: /healthz, codec_client_type: HTTP2 }";
    let gw = start(bootstrap(&[b1.addr()], &[Some(checks.port())], checker), 1);
    let admin = gw.admin_addr.unwrap();
    let total = |outcome: &str| checks_total(admin, outcome);
    wait_until(WAIT, "passing checks", || total("success") >= 8.0);
    assert_eq!(total("network_failure"), 0.0);
    assert_eq!(total("failure"), 0.0);
    assert_eq!(answering(gw.listener("ingress").unwrap(), 4), ["b1"]);
    gw.shutdown();
}

#[test]
fn a_kept_http1_connection_the_server_closed_is_replaced_without_a_failure() {
    let b1 = backend("b1");
    let h1 = HealthServer::start();
    h1.set(Answer::CloseAfter);
    let gw = start(
        bootstrap(&[b1.addr()], &[Some(h1.addr.port())], HTTP_CHECK),
        1,
    );
    let admin = gw.admin_addr.unwrap();
    let total = |outcome: &str| checks_total(admin, outcome);
    wait_until(WAIT, "passing checks", || total("success") >= 8.0);
    assert_eq!(total("network_failure"), 0.0);
    assert_eq!(total("failure"), 0.0);
    gw.shutdown();
}

#[test]
fn a_passing_check_ends_an_outlier_ejection_unless_switched_off() {
    // b1 answers proxied requests 503 but passes its checks (every 0.2 s):
    // consecutive_5xx ejects it for a minute, and with Envoy's default
    // (`successful_active_health_check_uneject_host: true`) its next
    // passing check brings it back long before that.
    for uneject in [true, false] {
        let mut opts = BackendOptions::new("b1");
        opts.status = Some(503);
        let (b1, b2) = (backend_with(opts), backend("b2"));
        let (h1, h2) = (HealthServer::start(), HealthServer::start());
        let checker = format!(
            "{HTTP_CHECK}\n    outlier_detection: {{ consecutive_5xx: 2, interval: 0.05s, \
             base_ejection_time: 60s, max_ejection_percent: 50, \
             successful_active_health_check_uneject_host: {uneject} }}"
        );
        let gw = start(
            bootstrap_every(
                "0.2s",
                &[b1.addr(), b2.addr()],
                &[Some(h1.addr.port()), Some(h2.addr.port())],
                &checker,
            ),
            1,
        );
        let admin = gw.admin_addr.unwrap();
        let addr = gw.listener("ingress").unwrap();
        let ejected = || host_status(admin, "web", b1.addr())["ejected"] == true;
        let by_check = "gateway_outlier_unejections_total{cause=\"active_health_check\"}";
        wait_until(WAIT, "b1 ejected", || {
            get_n(addr, "/", 4);
            ejected()
        });
        if uneject {
            wait_until(Duration::from_secs(2), "b1 back after a check", || {
                !ejected()
            });
            assert!(metric(admin, by_check) >= 1.0);
        } else {
            // Several passing checks later it is still out.
            let checks = h1.checks();
            wait_until(WAIT, "three more checks", || h1.checks() >= checks + 3);
            assert!(ejected());
            assert_eq!(metric(admin, by_check), 0.0);
        }
        assert_eq!(
            metric(admin, "gateway_outlier_unejections_total{cause=\"timer\"}"),
            0.0
        );
        gw.shutdown();
    }
}

/// Cluster `web`: one HTTP/1.1 host over TLS (SNI `hc.example`, `tls`
/// more fields of its UpstreamTlsContext), checked every 0.1 s with
/// `checker`.
fn tls_bootstrap(host: SocketAddr, tls: &str, checker: &str) -> engine::Bootstrap {
    yaml::web_bootstrap(
        "",
        &format!(
            r#"    health_checks:
    - timeout: 1s
      interval: 0.1s
      no_traffic_interval: 0.1s
      unhealthy_threshold: 1
      healthy_threshold: 1
{checker}
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: hc.example
{tls}
    load_assignment: {{ cluster_name: web, endpoints: [{{ lb_endpoints: [{}] }}] }}
"#,
            yaml::endpoint(&host.ip().to_string(), host.port(), "")
        ),
    )
}

/// Waits until `/clusters` shows `host`'s health flags as `flags`.
fn wait_flags(admin: SocketAddr, host: SocketAddr, flags: &str) {
    let line = format!("web::{host}::health_flags::{flags}\n");
    wait_until(WAIT, &line, || {
        admin_get(admin, "/clusters").1.contains(&line)
    });
}

/// Cluster `web`'s checks that ended with `outcome`.
fn checks_total(admin: SocketAddr, outcome: &str) -> f64 {
    let series = format!("gateway_health_checks_total{{cluster=\"web\",outcome=\"{outcome}\"}}");
    metric(admin, &series)
}

/// Waits until `host`'s checks failed on the network twice and it shows
/// as failing.
fn failing(admin: SocketAddr, host: SocketAddr) {
    wait_until(WAIT, "failed checks", || {
        checks_total(admin, "network_failure") >= 2.0
    });
    wait_flags(admin, host, "/failed_active_hc");
}

#[test]
fn checks_go_over_the_cluster_s_tls_with_its_validation_and_the_check_s_alpn() {
    use support::h1_backend::{H1Answer, H1Backend};
    use support::tls_client::{cert, server_config};
    let (good, other) = (cert(&["backend.internal"]), cert(&["other.internal"]));
    let trusting = |c: &support::tls_client::Cert| {
        format!(
            "        common_tls_context: {{ validation_context: {{ trusted_ca: {{ inline_string: {:?} }} }} }}",
            c.pem.0
        )
    };
    let b = H1Backend::start_with(Some(server_config(&good, &["http/1.1"])), |r| {
        H1Answer::ok(if r.target == "/healthz" { "ok" } else { "app" })
    });

    // Trusted: checks arrive over TLS with the cluster's SNI, and pass.
    let gw = start(tls_bootstrap(b.addr(), &trusting(&good), HTTP_CHECK), 1);
    let admin = gw.admin_addr.unwrap();
    wait_flags(admin, b.addr(), "healthy");
    let checks: Vec<_> = b
        .requests()
        .into_iter()
        .filter(|r| r.target == "/healthz")
        .collect();
    assert!(!checks.is_empty());
    assert!(checks
        .iter()
        .all(|r| r.sni.as_deref() == Some("hc.example")));
    assert_eq!(checks[0].field("host"), Some("web"));
    gw.shutdown();

    // A chain that does not lead to trusted_ca: every check fails, and
    // none reaches the backend.
    let before = b.requests().len();
    let gw = start(tls_bootstrap(b.addr(), &trusting(&other), HTTP_CHECK), 1);
    failing(gw.admin_addr.unwrap(), b.addr());
    assert_eq!(b.requests().len(), before);
    gw.shutdown();

    // A backend that speaks only its own ALPN protocol: the context's
    // `alpn_protocols` (http/1.1) fails the handshake; the check's
    // `tls_options.alpn_protocols` passes it.
    let picky = H1Backend::start_with(Some(server_config(&good, &["hc-proto"])), |_| {
        H1Answer::ok("ok")
    });
    let h1_alpn = "        common_tls_context: { alpn_protocols: [http/1.1] }";
    let gw = start(tls_bootstrap(picky.addr(), h1_alpn, HTTP_CHECK), 1);
    failing(gw.admin_addr.unwrap(), picky.addr());
    gw.shutdown();
    // An HTTP/2 cluster (its pools offer `h2`) checked over HTTP/1.1: the
    // checks offer no ALPN, as Envoy's, so an HTTP/1.1-only server takes
    // them (offering the pools' `h2` would fail every handshake).
    let h2_cluster = format!("{HTTP_CHECK}\n{}", yaml::h2_options(""));
    let gw = start(tls_bootstrap(b.addr(), "", &h2_cluster), 1);
    wait_flags(gw.admin_addr.unwrap(), b.addr(), "healthy");
    gw.shutdown();

    let with_alpn = format!("{HTTP_CHECK}\n      tls_options: {{ alpn_protocols: [hc-proto] }}");
    let gw = start(tls_bootstrap(picky.addr(), h1_alpn, &with_alpn), 1);
    wait_flags(gw.admin_addr.unwrap(), picky.addr(), "healthy");
    gw.shutdown();
}

#[test]
fn close_connections_on_host_health_failure_closes_a_failed_host_s_connections() {
    for close in [true, false] {
        let (b1, b2) = (backend("b1"), backend("b2"));
        let (h1, h2) = (HealthServer::start(), HealthServer::start());
        let checker =
            format!("{HTTP_CHECK}\n    close_connections_on_host_health_failure: {close}");
        let gw = start(
            bootstrap(
                &[b1.addr(), b2.addr()],
                &[Some(h1.addr.port()), Some(h2.addr.port())],
                &checker,
            ),
            1,
        );
        let (admin, addr) = (gw.admin_addr.unwrap(), gw.listener("ingress").unwrap());
        assert_eq!(answering(addr, 4), ["b1", "b2"]);
        let active = format!(
            "gateway_upstream_cx_active{{cluster=\"web\",host=\"{}\"}}",
            b1.addr()
        );
        assert_eq!(metric(admin, &active), 1.0);
        h1.set(Answer::Status(503, vec![]));
        wait_answering(addr, &["b2"]);
        if close {
            wait_until(WAIT, "b1's connection closed", || {
                metric(admin, &active) == 0.0
            });
        } else {
            // Several failed checks later the connection is still there.
            let checks = h1.checks();
            wait_until(WAIT, "more checks", || h1.checks() >= checks + 3);
            assert_eq!(metric(admin, &active), 1.0);
        }
        gw.shutdown();
    }
}
