//! A route's `retry_policy` end to end: a 5xx, a refused connection and a status in `retriable_status_codes` are retried on another host (`previous_hosts`), `num_retries` bounds the attempts, a policy that does not name the failure passes it through, a request's body goes again whole (within the retry buffer; past it, no retry), the virtual host's policy applies to routes without one; and the fields not supported are refused by name.

mod support;

use std::io::Write;
use std::net::{SocketAddr, TcpListener};

use support::h1_backend::{H1Answer, H1Backend};
use support::h1_client::*;
use support::*;

/// A backend answering `status` to everything.
fn answering(status: u16) -> H1Backend {
    H1Backend::start(move |_| {
        H1Answer::raw(format!(
            "HTTP/1.1 {status} X\r\nx-status: {status}\r\ncontent-length: 0\r\n\r\n"
        ))
    })
}

/// An address nothing listens on (connections refused).
fn refusing() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// A gateway routing `/` to a cluster of `hosts` (round robin) with the
/// route's `retry_policy` (YAML flow mapping; empty: none) and the
/// virtual host's (`vh_policy`).
fn gateway(
    hosts: &[SocketAddr],
    policy: &str,
    vh_policy: &str,
) -> (gateway::GatewayHandle, SocketAddr) {
    gateway_with(hosts, policy, vh_policy, "")
}

/// [`gateway`] with `cluster_extra` (YAML lines at cluster-field
/// indentation) in cluster `web`.
fn gateway_with(
    hosts: &[SocketAddr],
    policy: &str,
    vh_policy: &str,
    cluster_extra: &str,
) -> (gateway::GatewayHandle, SocketAddr) {
    let endpoints: String = hosts
        .iter()
        .map(|a| {
            format!(
                "\n        - {}",
                support::yaml::endpoint(&a.ip().to_string(), a.port(), "")
            )
        })
        .collect();
    let route_policy = match policy {
        "" => String::new(),
        p => format!(", retry_policy: {p}"),
    };
    let vh_policy = match vh_policy {
        "" => String::new(),
        p if p.starts_with('{') => format!("\n              retry_policy: {p}"),
        fields => format!("\n              {fields}"),
    };
    let table = format!(
        r#"            virtual_hosts:
            - name: all
              domains: ["*"]{vh_policy}
              routes:
              - match: {{ prefix: / }}
                route: {{ cluster: web{route_policy} }}"#
    );
    let clusters = format!(
        r#"  - name: web
    connect_timeout: 1s{cluster_extra}
    load_assignment:
      cluster_name: web
      endpoints:
      - lb_endpoints:{endpoints}
"#
    );
    let b = support::yaml::route_table_bootstrap(&table, &clusters).expect("bootstrap");
    let gw = start(b, 1);
    let addr = gw.listener("ingress").expect("listener");
    (gw, addr)
}

fn get_status(addr: SocketAddr) -> u16 {
    let (mut s, mut r) = open(addr);
    s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    read_response(&mut r, false).status
}

const PREVIOUS_HOSTS: &str = "retry_host_predicate: [{ name: envoy.retry_host_predicates.previous_hosts, typed_config: { \"@type\": type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate } }], host_selection_retry_max_attempts: 5";

#[test]
fn a_5xx_is_retried_on_another_host() {
    let (bad, good) = (answering(503), answering(200));
    let policy = format!("{{ retry_on: 5xx, num_retries: 2, {PREVIOUS_HOSTS} }}");
    let (gw, addr) = gateway(&[bad.addr(), good.addr()], &policy, "");
    for _ in 0..10 {
        assert_eq!(get_status(addr), 200);
    }
    // Every request the bad host saw was retried on the good one.
    assert_eq!(good.requests().len(), 10);
    let admin = gw.admin_addr.expect("admin");
    assert_eq!(
        metric(admin, "gateway_upstream_rq_retry"),
        bad.requests().len() as f64
    );
    assert!(
        !bad.requests().is_empty(),
        "round robin sent some to the bad host"
    );
    assert_eq!(
        metric(admin, "gateway_upstream_rq_retry_success"),
        bad.requests().len() as f64
    );
}

#[test]
fn a_retried_answers_body_never_reaches_the_client() {
    // The 503 and its body come in one segment: the body's events are
    // already on their way when the attempt is left.
    let bad = H1Backend::start(|_| {
        H1Answer::raw("HTTP/1.1 503 X\r\ncontent-length: 19\r\n\r\nno healthy upstream")
    });
    let good = H1Backend::start(|_| H1Answer::ok("from the good host"));
    let policy = format!("{{ retry_on: 5xx, num_retries: 1, {PREVIOUS_HOSTS} }}");
    let (_gw, addr) = gateway(&[bad.addr(), good.addr()], &policy, "");
    for _ in 0..6 {
        let (mut s, mut r) = open(addr);
        s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
        let resp = read_response(&mut r, false);
        assert_eq!(
            (resp.status, &resp.body[..]),
            (200, &b"from the good host"[..])
        );
    }
    assert!(!bad.requests().is_empty());
}

#[test]
fn connect_failures_and_listed_statuses_are_retried_when_named() {
    let good = answering(200);
    let policy = format!("{{ retry_on: \"connect-failure,retriable-status-codes\", retriable_status_codes: [418], num_retries: 3, {PREVIOUS_HOSTS} }}");
    let (_gw, addr) = gateway(&[refusing(), good.addr()], &policy, "");
    for _ in 0..6 {
        assert_eq!(get_status(addr), 200);
    }
    let teapot = answering(418);
    let (_gw2, addr2) = gateway(&[teapot.addr(), good.addr()], &policy, "");
    for _ in 0..6 {
        assert_eq!(get_status(addr2), 200);
    }
    // The same policy does not name 503: passed through.
    let bad = answering(503);
    let (_gw3, addr3) = gateway(&[bad.addr()], &policy, "");
    assert_eq!(get_status(addr3), 503);
    assert_eq!(bad.requests().len(), 1);
}

#[test]
fn attempts_are_counted_up_and_down_when_the_virtual_host_asks() {
    let (bad, good) = (answering(503), answering(200));
    let indent = "\n              ";
    let vh = format!(
        "include_request_attempt_count: true{indent}include_attempt_count_in_response: true{indent}retry_policy: {{ retry_on: 5xx, num_retries: 1, {PREVIOUS_HOSTS} }}"
    );
    let (_gw, addr) = gateway(&[bad.addr(), good.addr()], "", &vh);
    let mut counts = Vec::new();
    for _ in 0..4 {
        let (mut s, mut r) = open(addr);
        s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\nx-envoy-attempt-count: 9\r\n\r\n")
            .unwrap();
        let resp = read_response(&mut r, false);
        assert_eq!(resp.status, 200);
        counts.push(resp.header("x-envoy-attempt-count").unwrap().to_string());
    }
    // Each request the bad host saw was retried, and says so.
    let retried = counts.iter().filter(|c| *c == "2").count();
    assert_eq!(retried, bad.requests().len(), "{counts:?}");
    assert!(counts.iter().all(|c| c == "1" || c == "2"), "{counts:?}");
    // The client's value is replaced by the attempt's own.
    let seen = |b: &H1Backend| -> Vec<String> {
        b.requests()
            .iter()
            .map(|r| r.field("x-envoy-attempt-count").unwrap().to_string())
            .collect()
    };
    assert!(seen(&bad).iter().all(|c| c == "1"), "{:?}", seen(&bad));
    assert!(seen(&good).contains(&"2".to_string()), "{:?}", seen(&good));
    assert!(good.requests().iter().all(|r| r
        .fields
        .iter()
        .filter(|(n, _)| n == "x-envoy-attempt-count")
        .count()
        == 1));
}

/// A backend that answers 200 after `delay`.
fn slow(delay: std::time::Duration) -> H1Backend {
    H1Backend::start(move |_| {
        std::thread::sleep(delay);
        H1Answer::raw("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
    })
}

#[test]
fn an_attempt_past_its_per_try_timeout_is_retried_or_ends_504() {
    use std::time::{Duration, Instant};
    let (stuck, good) = (slow(Duration::from_secs(3)), answering(200));
    let policy =
        format!("{{ retry_on: reset, per_try_timeout: 0.2s, num_retries: 1, {PREVIOUS_HOSTS} }}");
    let (gw, addr) = gateway(&[stuck.addr(), good.addr()], &policy, "");
    for _ in 0..2 {
        let t = Instant::now();
        assert_eq!(get_status(addr), 200);
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "not the stuck host's 3 s"
        );
    }
    // Round robin sends to the stuck host (a retry moves its cursor too).
    let admin = gw.admin_addr.expect("admin");
    let retries = metric(admin, "gateway_upstream_rq_retry");
    assert!((1.0..=2.0).contains(&retries), "{retries}");
    // A policy that does not retry resets: the attempt's timeout ends it.
    let (_gw2, addr2) = gateway(
        &[stuck.addr()],
        "{ retry_on: connect-failure, per_try_timeout: 0.2s }",
        "",
    );
    let t = Instant::now();
    assert_eq!(get_status(addr2), 504);
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "the per-try timeout, not the route's 15 s"
    );
}

#[test]
fn num_retries_bounds_the_attempts() {
    let bad = answering(503);
    let (gw, addr) = gateway(
        &[bad.addr()],
        "{ retry_on: gateway-error, num_retries: 2 }",
        "",
    );
    assert_eq!(get_status(addr), 503);
    assert_eq!(bad.requests().len(), 3, "the first attempt and two retries");
    let admin = gw.admin_addr.expect("admin");
    assert_eq!(metric(admin, "gateway_upstream_rq_retry"), 2.0);
    assert_eq!(
        metric(admin, "gateway_upstream_rq_retry_limit_exceeded"),
        1.0
    );
}

#[test]
fn a_retry_budget_bounds_retries_in_flight() {
    let bad = answering(503);
    let policy = "{ retry_on: gateway-error, num_retries: 2 }";
    // No share and no floor: no retry may go.
    let none = "\n    circuit_breakers: { thresholds: [ { retry_budget: { budget_percent: { value: 0 }, min_retry_concurrency: 0 } } ] }";
    let (gw, addr) = gateway_with(&[bad.addr()], policy, "", none);
    assert_eq!(get_status(addr), 503);
    assert_eq!(bad.requests().len(), 1, "no retry within the budget");
    let admin = gw.admin_addr.expect("admin");
    let series = format!(
        "gateway_upstream_rq_retry_overflow{{cluster=\"web\",host=\"{}\"}}",
        bad.addr()
    );
    assert_eq!(metric(admin, &series), 1.0);
    drop(gw);
    // Envoy's defaults (20 %, at least 3): one request's retries go.
    let defaults = "\n    circuit_breakers: { thresholds: [ { retry_budget: {} } ] }";
    let (_gw, addr) = gateway_with(&[bad.addr()], policy, "", defaults);
    assert_eq!(get_status(addr), 503);
    assert_eq!(
        bad.requests().len(),
        4,
        "then the first attempt and two retries"
    );
}

/// A backend answering `status` and echoing the body it got in
/// `x-body`.
fn answering_with_body(status: u16) -> H1Backend {
    H1Backend::start(move |r| {
        H1Answer::raw(format!(
            "HTTP/1.1 {status} X\r\nx-body: {}\r\ncontent-length: 0\r\n\r\n",
            String::from_utf8_lossy(&r.body)
        ))
    })
}

#[test]
fn a_request_body_goes_again_whole_on_a_retry() {
    let (bad, good) = (answering_with_body(503), answering_with_body(200));
    let policy = format!("{{ retry_on: 5xx, num_retries: 2, {PREVIOUS_HOSTS} }}");
    let (gw, addr) = gateway(&[bad.addr(), good.addr()], &policy, "");
    for _ in 0..4 {
        let (mut s, mut r) = open(addr);
        s.write_all(b"POST / HTTP/1.1\r\nHost: a\r\ncontent-length: 5\r\n\r\nhello")
            .unwrap();
        let resp = read_response(&mut r, false);
        assert_eq!((resp.status, resp.header("x-body")), (200, Some("hello")));
    }
    // A chunked body, in pieces: the retry gets all of it.
    let (mut s, mut r) = open(addr);
    s.write_all(b"POST / HTTP/1.1\r\nHost: a\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n")
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    s.write_all(b"4\r\ndefg\r\n0\r\n\r\n").unwrap();
    let resp = read_response(&mut r, false);
    assert_eq!((resp.status, resp.header("x-body")), (200, Some("abcdefg")));
    assert!(bad
        .requests()
        .iter()
        .all(|r| r.body == b"hello" || r.body == b"abcdefg"));
    assert!(stats(&gw).contains("gateway_upstream_rq_retry_body_overflow 0"));
}

#[test]
fn a_body_past_the_retry_buffer_is_not_retried() {
    let bad = answering_with_body(503);
    let vh = "per_request_buffer_limit_bytes: 4";
    let (gw, addr) = gateway(&[bad.addr()], "{ retry_on: 5xx, num_retries: 2 }", vh);
    let (mut s, mut r) = open(addr);
    s.write_all(b"POST / HTTP/1.1\r\nHost: a\r\ncontent-length: 5\r\n\r\nhello")
        .unwrap();
    assert_eq!(read_response(&mut r, false).status, 503);
    assert_eq!(bad.requests().len(), 1);
    wait_stat(&gw, "gateway_upstream_rq_retry_body_overflow 1");
    // Within it: retried.
    let (mut s, mut r) = open(addr);
    s.write_all(b"POST / HTTP/1.1\r\nHost: a\r\ncontent-length: 4\r\n\r\nhell")
        .unwrap();
    assert_eq!(read_response(&mut r, false).status, 503);
    assert_eq!(bad.requests().len(), 4);
}

#[test]
fn an_http2_body_with_trailers_goes_again_after_a_refused_connection() {
    let good = H1Backend::start(|r| {
        H1Answer::raw(format!(
            "HTTP/1.1 200 OK\r\nx-len: {}\r\ncontent-length: 0\r\n\r\n",
            r.body.len()
        ))
    });
    let policy = format!("{{ retry_on: connect-failure, num_retries: 3, {PREVIOUS_HOSTS} }}");
    let (_gw, addr) = gateway(&[refusing(), good.addr()], &policy, "");
    for _ in 0..4 {
        let reply = client(move || async move {
            let c = connect(addr).await;
            let body = bytes::Bytes::from(vec![b'q'; 100_000]);
            let mut t = http::HeaderMap::new();
            t.insert("x-t", "1".parse().unwrap());
            request(&c, "POST", "/", &[], Some(body), Some(t))
                .await
                .unwrap()
        });
        assert_eq!(reply.status.as_u16(), 200);
        assert_eq!(reply.headers.get("x-len").unwrap(), "100000");
    }
}

#[test]
fn the_virtual_hosts_policy_applies_to_routes_without_one() {
    let (bad, good) = (answering(503), answering(200));
    let policy = format!("{{ retry_on: 5xx, num_retries: 1, {PREVIOUS_HOSTS} }}");
    let (_gw, addr) = gateway(&[bad.addr(), good.addr()], "", &policy);
    for _ in 0..4 {
        assert_eq!(get_status(addr), 200);
    }
}

#[test]
fn unsupported_retry_fields_are_refused_by_name() {
    let refused = |policy: &str| {
        let table = format!(
            r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{ prefix: / }}
                route: {{ cluster: web, retry_policy: {policy} }}"#
        );
        let clusters = "  - name: web\n    load_assignment: { cluster_name: web }\n";
        support::yaml::route_table_bootstrap(&table, clusters)
            .expect_err("refused")
            .to_string()
    };
    let e = refused("{ retry_on: 5xx, retry_priority: { name: x } }");
    assert!(
        e.contains("retry_policy.retry_priority") && e.contains("not supported"),
        "{e}"
    );
    let e = refused("{ retry_on: \"5xx,bogus\" }");
    assert!(
        e.contains("retry_policy.retry_on") && e.contains("bogus"),
        "{e}"
    );
    let e = refused("{ retry_on: envoy-ratelimited }");
    assert!(e.contains("retry_on") && e.contains("not supported"), "{e}");
    let e = refused("{ retry_on: retriable-headers, retriable_headers: [{ name: '' }] }");
    assert!(e.contains("retriable_headers[0].name"), "{e}");
    let e = refused("{ retry_on: 5xx, retry_host_predicate: [{ name: envoy.retry_host_predicates.omit_canary_hosts }] }");
    assert!(
        e.contains("retry_host_predicate[0]") && e.contains("omit_canary_hosts"),
        "{e}"
    );
    let e = refused("{ retry_on: 5xx, retriable_status_codes: [99] }");
    assert!(e.contains("retriable_status_codes[0]"), "{e}");
    let e = refused("{ retry_on: 5xx, retry_back_off: { base_interval: 1s, max_interval: 0.5s } }");
    assert!(e.contains("retry_back_off.max_interval"), "{e}");
}

#[test]
fn a_body_that_passes_the_retry_buffer_during_the_back_off_is_never_sent_in_part() {
    use std::io::Read;
    // Answers 503 as soon as a head is in, then reads the body: each
    // request's body as it came.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr_b = l.local_addr().unwrap();
    let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = bodies.clone();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut c = c;
                let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(2)));
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                let at = loop {
                    if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                        break at + 4;
                    }
                    match c.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                };
                let _ = c.write_all(b"HTTP/1.1 503 X\r\ncontent-length: 0\r\n\r\n");
                while got.len() - at < 300 {
                    match c.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                seen.lock().unwrap().push(got[at..].to_vec());
            });
        }
    });
    let policy = "{ retry_on: 5xx, num_retries: 2, retry_back_off: { base_interval: 0.2s } }";
    let vh = "per_request_buffer_limit_bytes: 100";
    let (gw, addr) = gateway(&[addr_b], policy, vh);
    let (mut s, mut r) = open(addr);
    s.write_all(b"POST / HTTP/1.1\r\nHost: a\r\ncontent-length: 300\r\n\r\n")
        .unwrap();
    s.write_all(&[b'a'; 50]).unwrap();
    // The 503 comes and a retry is due within its back-off; the rest of
    // the body passes the buffer before or after it went.
    std::thread::sleep(std::time::Duration::from_millis(100));
    s.write_all(&[b'b'; 250]).unwrap();
    // Either the retry went first (its 503 is the answer: no attempt can
    // follow it) or it could not be made (507 at once, as Envoy answers);
    // never a request sent again with part of its body.
    let resp = read_response(&mut r, false);
    match resp.status {
        503 => {}
        507 => assert_eq!(
            resp.body,
            b"exceeded request buffer limit while retrying upstream"
        ),
        other => panic!("{other}"),
    }
    wait_stat(&gw, "gateway_upstream_rq_retry_body_overflow 1");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let bodies = bodies.lock().unwrap().clone();
    assert!(
        !bodies.is_empty() && bodies.len() <= 2,
        "{} attempts",
        bodies.len()
    );
    // Each attempt got the body from its start (an attempt answered
    // early may have less of it), never a part from its middle.
    let mut whole = vec![b'a'; 50];
    whole.extend_from_slice(&[b'b'; 250]);
    for body in &bodies {
        assert!(
            whole.starts_with(body),
            "a body not from its start: {body:?}"
        );
    }
}

#[test]
fn the_per_try_timeout_runs_from_the_request_s_end() {
    use std::time::Duration;
    // Answers as soon as the body is in: an upload slower than the
    // per-try timeout still gets its answer, as through Envoy (the
    // attempt's timer starts with the request's end).
    let b = answering_with_body(200);
    // A condition that does not retry a timed-out attempt: it would end
    // the request 504 mid-upload.
    let policy = "{ retry_on: connect-failure, per_try_timeout: 0.3s }";
    let (_gw, addr) = gateway(&[b.addr()], policy, "");
    let (mut s, mut r) = open(addr);
    s.write_all(b"POST / HTTP/1.1\r\nHost: a\r\ncontent-length: 6\r\n\r\nabc")
        .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    s.write_all(b"def").unwrap();
    let resp = read_response(&mut r, false);
    assert_eq!((resp.status, resp.header("x-body")), (200, Some("abcdef")));
}

/// A backend that reads each request and closes without answering.
fn closing() -> H1Backend {
    H1Backend::start(|_| H1Answer::raw("").closing())
}

#[test]
fn failures_say_the_latest_reason_and_urx_once_retries_ran_out() {
    // Envoy 1.40's bodies and flags, side by side on the same cases:
    // the connection closed before an answer is 503 `connection
    // termination` (UC); a malformed answer 502 `protocol error` (UPE);
    // after retries the body says "retried and the latest", the flag URX.
    let dir = std::env::temp_dir().join(format!("gw-retry-flags-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("access.log");
    let access_log = format!(
        r#"          access_log: [{{ name: envoy.access_loggers.file, typed_config: {{ "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog, path: {}, log_format: {{ text_format_source: {{ inline_string: "%RESPONSE_CODE% %RESPONSE_FLAGS%\n" }} }} }} }}]"#,
        log.display()
    );
    let (closer, garbage) = (
        closing(),
        H1Backend::start(|_| H1Answer::raw("HTTP/1.1 abc\r\n\r\n")),
    );
    let reason = "upstream connect error or disconnect/reset before headers. ";
    let cases = [
        (&closer, "", 503, "reset reason: connection termination"),
        (
            &closer,
            "{ retry_on: reset, num_retries: 1 }",
            503,
            "retried and the latest reset reason: connection termination",
        ),
        (&garbage, "", 502, "reset reason: protocol error"),
        (
            &garbage,
            "{ retry_on: reset, num_retries: 1 }",
            502,
            "retried and the latest reset reason: protocol error",
        ),
    ];
    for (backend, policy, status, body) in cases {
        let route_policy = match policy {
            "" => String::new(),
            p => format!(", retry_policy: {p}"),
        };
        let table = support::yaml::one_route("web", &route_policy);
        let clusters = support::yaml::h1_cluster("web", backend.addr());
        let b = support::yaml::hcm_bootstrap(&access_log, &table, &clusters).expect("bootstrap");
        let gw = start(b, 1);
        let addr = gw.listener("ingress").expect("listener");
        // POST: not sent again without a policy (a GET would be, once).
        let resp = h1_post(addr, "a", "/", "", b"x");
        assert_eq!(resp.status, status, "{policy}");
        assert_eq!(
            String::from_utf8_lossy(&resp.body),
            format!("{reason}{body}")
        );
        gw.shutdown();
    }
    let flags: Vec<String> = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(flags, ["503 UC", "503 URX,UC", "502 UPE", "502 URX,UPE"]);
    std::fs::remove_dir_all(&dir).ok();
}
