//! The retry policy's finer conditions, as Envoy 1.40 decides them on the same bootstraps and requests (recorded side by side): `retriable_headers` with `retry_on: retriable-headers` (`:status` included, range ends exclusive, the last answer passed on unchanged when retries run out), `retriable_request_headers` gating every retry, and `per_try_idle_timeout` (from the request's end and between the answer's bytes; retried before the answer began as a reset is, never after).

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::h1_backend::{H1Answer, H1Backend};
use support::h1_client::*;
use support::*;

/// A gateway routing `/` to `backend` with `policy` as the route's
/// `retry_policy`.
fn gateway(backend: SocketAddr, policy: &str) -> (gateway::GatewayHandle, SocketAddr) {
    let table = format!(
        r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{ prefix: / }}
                route: {{ cluster: web, timeout: 5s, retry_policy: {policy} }}"#
    );
    let clusters = format!(
        "  - name: web\n    connect_timeout: 1s\n    load_assignment:\n      cluster_name: web\n      endpoints:\n      - lb_endpoints:\n        - {}\n",
        support::yaml::endpoint(&backend.ip().to_string(), backend.port(), "")
    );
    let b = support::yaml::route_table_bootstrap(&table, &clusters).expect("bootstrap");
    let gw = start(b, 1);
    let addr = gw.listener("ingress").expect("listener");
    (gw, addr)
}

/// A backend giving the `n`th request (0, 1, …) `answers[n]` (the last
/// one again past the list).
fn scripted(answers: &'static [&'static str]) -> H1Backend {
    let n = AtomicU32::new(0);
    H1Backend::start(move |_| {
        let i = (n.fetch_add(1, Ordering::Relaxed) as usize).min(answers.len() - 1);
        H1Answer::raw(answers[i])
    })
}

fn send(addr: SocketAddr, raw: &str) -> Response {
    let (mut s, mut r) = open(addr);
    s.write_all(raw.as_bytes()).unwrap();
    read_response(&mut r, false)
}

const GET: &str = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
const RETRY_ME: &str = "HTTP/1.1 200 OK\r\nx-retry-me: yes\r\ncontent-length: 5\r\n\r\nfirst";
const PLAIN: &str = "HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nsecond";

#[test]
fn an_answer_a_retriable_header_matches_is_retried() {
    let policy = "{ retry_on: retriable-headers, num_retries: 2, retriable_headers: [{ name: x-retry-me, string_match: { exact: 'yes' } }] }";
    let b = scripted(&[RETRY_ME, PLAIN]);
    let (_gw, addr) = gateway(b.addr(), policy);
    let r = send(addr, GET);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"second"[..]));
    assert_eq!(r.header("x-retry-me"), None);
    assert_eq!(b.requests().len(), 2);
}

#[test]
fn retriable_headers_need_their_condition() {
    let policy = "{ retry_on: 5xx, retriable_headers: [{ name: x-retry-me, string_match: { exact: 'yes' } }] }";
    let b = scripted(&[RETRY_ME, PLAIN]);
    let (_gw, addr) = gateway(b.addr(), policy);
    let r = send(addr, GET);
    assert_eq!((r.status, r.header("x-retry-me")), (200, Some("yes")));
    assert_eq!(b.requests().len(), 1);
}

#[test]
fn status_matchers_see_the_answer_s_status_and_ranges_end_before_their_end() {
    const TEAPOT: &str = "HTTP/1.1 418 X\r\ncontent-length: 0\r\n\r\n";
    for (matcher, attempts) in [
        ("string_match: { exact: '418' }", 2),
        ("range_match: { start: 400, end: 500 }", 2),
        ("range_match: { start: 400, end: 418 }", 1),
    ] {
        let policy = format!(
            "{{ retry_on: retriable-headers, retriable_headers: [{{ name: ':status', {matcher} }}] }}"
        );
        let b = scripted(&[TEAPOT, PLAIN]);
        let (_gw, addr) = gateway(b.addr(), &policy);
        let want = if attempts == 2 { 200 } else { 418 };
        assert_eq!(send(addr, GET).status, want, "{matcher}");
        assert_eq!(b.requests().len(), attempts, "{matcher}");
    }
}

#[test]
fn when_retries_run_out_the_last_answer_goes_as_it_came() {
    const ONE: &str =
        "HTTP/1.1 200 OK\r\nx-retry-me: yes\r\nx-n: 1\r\ncontent-length: 5\r\n\r\nfirst";
    const TWO: &str =
        "HTTP/1.1 200 OK\r\nx-retry-me: yes\r\nx-n: 2\r\ncontent-length: 6\r\n\r\nsecond";
    let policy =
        "{ retry_on: retriable-headers, num_retries: 1, retriable_headers: [{ name: x-retry-me, present_match: true }] }";
    let b = scripted(&[ONE, TWO]);
    let (gw, addr) = gateway(b.addr(), policy);
    let r = send(addr, GET);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"second"[..]));
    assert_eq!(
        (r.header("x-retry-me"), r.header("x-n")),
        (Some("yes"), Some("2"))
    );
    wait_stat(&gw, "gateway_upstream_rq_retry_limit_exceeded 1");
}

#[test]
fn retriable_request_headers_gate_every_retry() {
    const UNAVAILABLE: &str = "HTTP/1.1 503 X\r\ncontent-length: 7\r\n\r\nunavail";
    const OK: &str = "HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nok2";
    let policy = "{ retry_on: 5xx, num_retries: 2, retriable_request_headers: [{ name: ':method', string_match: { exact: GET } }, { name: x-allow-retry, present_match: true }] }";
    for (request, status) in [
        (GET, 200),
        (
            "POST / HTTP/1.1\r\nHost: a\r\ncontent-length: 2\r\n\r\nhi",
            503,
        ),
        ("HEAD / HTTP/1.1\r\nHost: a\r\n\r\n", 503),
        // An empty value is present.
        (
            "POST / HTTP/1.1\r\nHost: a\r\nx-allow-retry:\r\ncontent-length: 2\r\n\r\nhi",
            200,
        ),
    ] {
        let b = scripted(&[UNAVAILABLE, OK]);
        let (_gw, addr) = gateway(b.addr(), policy);
        let (mut s, mut r) = open(addr);
        s.write_all(request.as_bytes()).unwrap();
        let head = request.starts_with("HEAD");
        assert_eq!(read_response(&mut r, head).status, status, "{request}");
    }
}

/// A backend that accepts and never answers, for `hang` attempts, then
/// answers 200 (`None`: never).
fn hanging(hang: Option<u32>) -> (SocketAddr, Arc<AtomicU32>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let seen = Arc::new(AtomicU32::new(0));
    let count = seen.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in l.incoming().flatten() {
            let n = count.fetch_add(1, Ordering::Relaxed);
            if hang.is_some_and(|h| n >= h) {
                let mut c = c;
                std::thread::spawn(move || {
                    let mut buf = [0u8; 1024];
                    let _ = c.read(&mut buf);
                    let _ = c.write_all(PLAIN.as_bytes());
                    std::thread::sleep(Duration::from_secs(2));
                });
            } else {
                held.push(c);
            }
        }
    });
    (addr, seen)
}

#[test]
fn an_attempt_that_sends_nothing_for_its_idle_timeout_is_retried_as_a_reset() {
    let policy = "{ retry_on: 5xx, num_retries: 2, per_try_idle_timeout: 0.3s }";
    // Never answers: every attempt idles out, then 504.
    let (addr_b, seen) = hanging(None);
    let (gw, addr) = gateway(addr_b, policy);
    let t = Instant::now();
    let r = send(addr, GET);
    assert_eq!(
        (r.status, r.body.as_slice()),
        (504, &b"upstream request timeout"[..])
    );
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "three attempts of 0.3 s"
    );
    assert_eq!(seen.load(Ordering::Relaxed), 3);
    wait_stat(&gw, "gateway_upstream_rq_per_try_idle_timeout 3");
    // The first hangs, the second answers.
    let (addr_b, seen) = hanging(Some(1));
    let (_gw, addr) = gateway(addr_b, policy);
    assert_eq!(send(addr, GET).status, 200);
    assert_eq!(seen.load(Ordering::Relaxed), 2);
    // A condition that does not take resets: 504 at once.
    let (addr_b, seen) = hanging(Some(1));
    let (_gw, addr) = gateway(
        addr_b,
        "{ retry_on: connect-failure, per_try_idle_timeout: 0.3s }",
    );
    assert_eq!(send(addr, GET).status, 504);
    assert_eq!(seen.load(Ordering::Relaxed), 1);
}

#[test]
fn an_answer_that_stalls_after_its_head_is_cut_off_not_retried() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr_b = l.local_addr().unwrap();
    let seen = Arc::new(AtomicU32::new(0));
    let count = seen.clone();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            count.fetch_add(1, Ordering::Relaxed);
            std::thread::spawn(move || {
                let mut buf = [0u8; 1024];
                let _ = c.read(&mut buf);
                let _ = c.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n12345");
                std::thread::sleep(Duration::from_secs(3));
            });
        }
    });
    let policy = "{ retry_on: 5xx, num_retries: 2, per_try_idle_timeout: 0.3s }";
    let (gw, addr) = gateway(addr_b, policy);
    let (mut s, mut r) = open(addr);
    s.write_all(GET.as_bytes()).unwrap();
    assert_eq!(line(&mut r), "HTTP/1.1 200 OK");
    // The rest of the head, then 5 of the 10 body bytes, then the close.
    let mut rest = Vec::new();
    let _ = r.read_to_end(&mut rest);
    assert!(
        rest.ends_with(b"\r\n\r\n12345"),
        "{}",
        String::from_utf8_lossy(&rest)
    );
    assert_eq!(seen.load(Ordering::Relaxed), 1);
    wait_stat(&gw, "gateway_upstream_rq_per_try_idle_timeout 1");
}
