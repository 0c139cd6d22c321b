//! `hedge_policy.hedge_on_per_try_timeout` end to end: an attempt past its per-try timeout stays in flight beside the retry it makes, the first answer the policy keeps wins (the earlier attempt's or the hedge's), an error from one attempt is dropped while the other may still answer, an attempt with no retry left goes on to its answer rather than ending 504, a body goes whole with each attempt, an internal client's `x-envoy-hedge-on-per-try-timeout` turns it on and off; and the fields Envoy does not implement are refused.

mod support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::h1_backend::{H1Answer, H1Backend};
use support::h1_client::*;
use support::*;

/// A backend whose `n`th request (from 0) waits `script[n].0` ms, then
/// answers status `script[n].1` with body `script[n].2` (the last entry
/// for any later request).
fn scripted(script: &'static [(u64, u16, &'static str)]) -> H1Backend {
    let n = Arc::new(AtomicUsize::new(0));
    H1Backend::start(move |_| {
        let i = n.fetch_add(1, Ordering::SeqCst).min(script.len() - 1);
        let (wait, status, body) = script[i];
        std::thread::sleep(Duration::from_millis(wait));
        H1Answer::raw(format!(
            "HTTP/1.1 {status} X\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ))
    })
}

/// A gateway routing `/` to `host` with the route's `retry_policy`
/// (`policy`) and `route_extra` (more route-action fields), the virtual
/// host's `vh_extra` fields, and `hcm` lines in the connection manager.
fn gateway(
    host: SocketAddr,
    policy: &str,
    route_extra: &str,
    vh_extra: &str,
    hcm: &str,
) -> Result<(gateway::GatewayHandle, SocketAddr), xds::Error> {
    let table = format!(
        r#"            virtual_hosts:
            - name: all
              domains: ["*"]
              include_request_attempt_count: true
              include_attempt_count_in_response: true{vh_extra}
              routes:
              - match: {{ prefix: / }}
                route: {{ cluster: web, timeout: 5s, retry_policy: {policy}{route_extra} }}"#
    );
    let clusters = support::yaml::h1_cluster("web", host);
    let b = support::yaml::hcm_bootstrap(hcm, &table, &clusters)?;
    let gw = start(b, 1);
    let addr = gw.listener("ingress").expect("listener");
    Ok((gw, addr))
}

const POLICY: &str = "{ retry_on: 5xx, num_retries: 1, per_try_timeout: 0.2s }";
const HEDGE: &str = ", hedge_policy: { hedge_on_per_try_timeout: true }";

/// A GET through `addr` with `fields`: the response and how long it took.
fn timed_get(addr: SocketAddr, fields: &str) -> (Response, Duration) {
    let t = Instant::now();
    let resp = h1_get(addr, "h", "/", fields);
    (resp, t.elapsed())
}

#[test]
fn the_earlier_attempt_s_answer_wins_when_it_comes_first() {
    // The first attempt answers at 600 ms, its hedge (sent at 200 ms) at
    // 1.5 s: the first answer comes through, the hedge is cancelled.
    let b = scripted(&[(600, 200, "first"), (1500, 200, "hedge")]);
    let (gw, addr) = gateway(b.addr(), POLICY, HEDGE, "", "").expect("valid");
    let (resp, took) = timed_get(addr, "");
    assert_eq!((resp.status, &resp.body[..]), (200, &b"first"[..]));
    assert!(took < Duration::from_millis(1200), "{took:?}");
    // Two attempts went, the second said so; the answer counts both.
    let seen = b.requests();
    assert_eq!(seen.len(), 2);
    let counts: Vec<_> = seen
        .iter()
        .map(|r| r.field("x-envoy-attempt-count"))
        .collect();
    assert_eq!(counts, [Some("1"), Some("2")]);
    assert_eq!(resp.header("x-envoy-attempt-count"), Some("2"));
    // A hedging attempt may take the whole route timeout (Envoy's router
    // says so); the hedge, what is left of it.
    let expected = |r: &support::h1_backend::H1Request| -> u64 {
        let v = r.field("x-envoy-expected-rq-timeout-ms").expect("set");
        v.parse().expect("a number")
    };
    assert_eq!(expected(&seen[0]), 5000);
    assert!((4000..5000).contains(&expected(&seen[1])), "{seen:?}");
    let admin = gw.admin_addr.expect("admin");
    assert_eq!(metric(admin, "gateway_upstream_rq_hedged"), 1.0);
    // Envoy's counter of per-try timeouts leaves hedged attempts out.
    assert_eq!(metric(admin, "gateway_upstream_rq_per_try_timeout"), 0.0);
    assert_eq!(metric(admin, "gateway_upstream_rq_retry"), 1.0);
    // The first attempt's answer: no retry succeeded (Envoy's count).
    assert_eq!(metric(admin, "gateway_upstream_rq_retry_success"), 0.0);
    // The hedge passed its own per-try timeout too (at about 425 ms),
    // with no retry left.
    assert_eq!(
        metric(admin, "gateway_upstream_rq_retry_limit_exceeded"),
        1.0
    );

    // Without the hedge policy the first attempt is left at its per-try
    // timeout: the retry's answer is the one.
    let b = scripted(&[(600, 200, "first"), (50, 200, "retry")]);
    let (_gw, addr) = gateway(b.addr(), POLICY, "", "", "").expect("valid");
    let (resp, _) = timed_get(addr, "");
    assert_eq!((resp.status, &resp.body[..]), (200, &b"retry"[..]));
    // Without hedging an attempt has its per-try timeout.
    let seen = b.requests();
    assert_eq!(expected(&seen[0]), 200);
    assert_eq!(expected(&seen[1]), 200);
}

#[test]
fn the_hedge_s_answer_wins_when_it_comes_first() {
    let b = scripted(&[(3000, 200, "first"), (100, 200, "hedge")]);
    let (gw, addr) = gateway(b.addr(), POLICY, HEDGE, "", "").expect("valid");
    let (resp, took) = timed_get(addr, "");
    assert_eq!((resp.status, &resp.body[..]), (200, &b"hedge"[..]));
    assert!(took < Duration::from_millis(1500), "{took:?}");
    let admin = gw.admin_addr.expect("admin");
    assert_eq!(metric(admin, "gateway_upstream_rq_retry_success"), 1.0);
}

#[test]
fn with_no_retry_left_the_attempts_go_on_to_their_answer() {
    // Both attempts pass their per-try timeouts; the hedge's finds no
    // retry left. Neither is ended: the first answers at 900 ms, within
    // the route's 5 s (without hedging, that would be a 504 at 200 ms).
    let b = scripted(&[(900, 200, "first"), (3000, 200, "hedge")]);
    let (gw, addr) = gateway(b.addr(), POLICY, HEDGE, "", "").expect("valid");
    let (resp, took) = timed_get(addr, "");
    assert_eq!((resp.status, &resp.body[..]), (200, &b"first"[..]));
    assert!(took >= Duration::from_millis(850), "{took:?}");
    assert_eq!(b.requests().len(), 2);
    let admin = gw.admin_addr.expect("admin");
    assert_eq!(metric(admin, "gateway_upstream_rq_hedged"), 1.0);
}

#[test]
fn an_error_from_one_attempt_waits_for_the_other() {
    // The first attempt fails (503) after its hedge went: dropped, the
    // hedge's answer is awaited.
    let b = scripted(&[(400, 503, "first failed"), (600, 200, "hedge")]);
    let (_gw, addr) = gateway(b.addr(), POLICY, HEDGE, "", "").expect("valid");
    let (resp, _) = timed_get(addr, "");
    assert_eq!((resp.status, &resp.body[..]), (200, &b"hedge"[..]));

    // The hedge fails at once with no retry left: the first attempt's
    // answer is awaited.
    let b = scripted(&[(800, 200, "first"), (0, 503, "hedge failed")]);
    let (_gw, addr) = gateway(b.addr(), POLICY, HEDGE, "", "").expect("valid");
    let (resp, _) = timed_get(addr, "");
    assert_eq!((resp.status, &resp.body[..]), (200, &b"first"[..]));

    // Both fail: the last error is the answer.
    let b = scripted(&[(400, 503, "first failed"), (600, 502, "hedge failed")]);
    let (_gw, addr) = gateway(b.addr(), POLICY, HEDGE, "", "").expect("valid");
    let (resp, _) = timed_get(addr, "");
    assert_eq!((resp.status, &resp.body[..]), (502, &b"hedge failed"[..]));
}

#[test]
fn every_hedged_attempt_stays_in_flight() {
    // Envoy 1.40's run: the first attempt answers at 1 s; its hedge fails
    // at once with retries left and is retried as usual; that retry's
    // per-try timeout hedges again. The first attempt, still in flight,
    // answers first.
    let b = scripted(&[
        (1000, 200, "1"),
        (0, 503, "2"),
        (3000, 200, "3"),
        (3000, 200, "4"),
    ]);
    let policy = "{ retry_on: 5xx, num_retries: 3, per_try_timeout: 0.2s }";
    let (gw, addr) = gateway(b.addr(), policy, HEDGE, "", "").expect("valid");
    let (resp, took) = timed_get(addr, "");
    assert_eq!((resp.status, &resp.body[..]), (200, &b"1"[..]));
    assert!(took < Duration::from_millis(2000), "{took:?}");
    assert_eq!(b.requests().len(), 4);
    let admin = gw.admin_addr.expect("admin");
    assert_eq!(metric(admin, "gateway_upstream_rq_retry"), 3.0);
    assert_eq!(metric(admin, "gateway_upstream_rq_hedged"), 2.0);
}

#[test]
fn hedges_chain_up_to_num_retries() {
    // Three retries: a hedge at each per-try timeout (200 ms, then 200 ms
    // after each hedge went), the fourth attempt answers first.
    let b = scripted(&[
        (3000, 200, "1"),
        (3000, 200, "2"),
        (3000, 200, "3"),
        (100, 200, "4"),
    ]);
    let policy = "{ retry_on: 5xx, num_retries: 3, per_try_timeout: 0.2s }";
    let (gw, addr) = gateway(b.addr(), policy, HEDGE, "", "").expect("valid");
    let (resp, took) = timed_get(addr, "");
    assert_eq!((resp.status, &resp.body[..]), (200, &b"4"[..]));
    assert!(took < Duration::from_millis(2000), "{took:?}");
    assert_eq!(b.requests().len(), 4);
    assert_eq!(resp.header("x-envoy-attempt-count"), Some("4"));
    let admin = gw.admin_addr.expect("admin");
    assert_eq!(metric(admin, "gateway_upstream_rq_hedged"), 3.0);
}

#[test]
fn a_hedged_request_s_body_goes_whole_with_each_attempt() {
    let n = Arc::new(AtomicUsize::new(0));
    let b = H1Backend::start(move |r| {
        let first = n.fetch_add(1, Ordering::SeqCst) == 0;
        std::thread::sleep(Duration::from_millis(if first { 2000 } else { 0 }));
        H1Answer::raw(format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{}",
            r.body.len(),
            String::from_utf8_lossy(&r.body)
        ))
    });
    let (_gw, addr) = gateway(b.addr(), POLICY, HEDGE, "", "").expect("valid");
    let resp = h1_post(addr, "h", "/", "", b"hedged body");
    assert_eq!((resp.status, &resp.body[..]), (200, &b"hedged body"[..]));
    let bodies: Vec<_> = b.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies, [b"hedged body".to_vec(), b"hedged body".to_vec()]);
}

#[test]
fn the_virtual_host_s_hedge_policy_and_an_internal_client_s_header() {
    let internal = "          use_remote_address: true\n          internal_address_config: { cidr_ranges: [ { address_prefix: 127.0.0.0, prefix_len: 8 } ] }";
    let vh = "\n              hedge_policy: { hedge_on_per_try_timeout: true }";
    let script: &[(u64, u16, &str)] = &[(600, 200, "first"), (1500, 200, "hedge")];
    // The virtual host's policy, for a route without one.
    let b = scripted(script);
    let (_gw, addr) = gateway(b.addr(), POLICY, "", vh, "").expect("valid");
    assert_eq!(timed_get(addr, "").0.body, b"first");
    // An internal client's "false" turns it off: the first attempt is
    // left at its per-try timeout, the retry passes its own (504)...
    let b = scripted(script);
    let (_gw, addr) = gateway(b.addr(), POLICY, "", vh, internal).expect("valid");
    let off = "x-envoy-hedge-on-per-try-timeout: false\r\n";
    assert_eq!(timed_get(addr, off).0.status, 504);
    // ... and "true" on where the route has no hedge policy.
    let b = scripted(script);
    let (_gw, addr) = gateway(b.addr(), POLICY, "", "", internal).expect("valid");
    let on = "x-envoy-hedge-on-per-try-timeout: true\r\n";
    assert_eq!(timed_get(addr, on).0.body, b"first");
    // Not from an external client, and never sent on.
    let b = scripted(script);
    let edge = "          use_remote_address: true";
    let (_gw, addr) = gateway(b.addr(), POLICY, "", "", edge).expect("valid");
    assert_eq!(timed_get(addr, on).0.status, 504);
    assert!(b
        .requests()
        .iter()
        .all(|r| r.field("x-envoy-hedge-on-per-try-timeout").is_none()));
}

#[test]
fn what_envoy_does_not_implement_is_refused_by_name() {
    let b = scripted(&[(0, 200, "")]);
    for (policy, field) in [
        ("{ initial_requests: 2 }", "initial_requests"),
        (
            "{ additional_request_chance: { numerator: 5 } }",
            "additional_request_chance",
        ),
        ("{ initial_requests: 0 }", "initial_requests"),
    ] {
        let extra = format!(", hedge_policy: {policy}");
        let err = match gateway(b.addr(), POLICY, &extra, "", "") {
            Ok(_) => panic!("{policy} accepted"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(&format!("hedge_policy.{field}")), "{err}");
    }
    // Their no-op values are Envoy's defaults.
    let fine =
        ", hedge_policy: { initial_requests: 1, additional_request_chance: { numerator: 0 } }";
    assert!(gateway(b.addr(), POLICY, fine, "", "").is_ok());
}
