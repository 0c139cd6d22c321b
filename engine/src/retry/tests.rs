//! Envoy's `retry_on` semantics (router filter docs, `x-envoy-retry-on`)
//! and its jittered back-off.

use super::*;

fn policy(on: &[&str]) -> RetryPolicy {
    let mut retry_on = RetryOn::default();
    for n in on {
        retry_on |= RetryOn::by_name(n).unwrap();
    }
    RetryPolicy {
        retry_on,
        num_retries: 1,
        per_try_timeout: None,
        retriable_status_codes: vec![418],
        base_interval: Duration::from_millis(25),
        max_interval: Duration::from_millis(250),
        previous_hosts: false,
        host_selection_max_attempts: 1,
        retriable_headers: Vec::new(),
        retriable_request_headers: Vec::new(),
        per_try_idle_timeout: None,
    }
}

fn status(s: u16) -> AttemptEnd {
    AttemptEnd::Response {
        status: s,
        grpc_status: None,
        headers: false,
    }
}

#[test]
fn each_condition_retries_what_envoy_says() {
    use AttemptEnd::*;
    let cases: [(&str, AttemptEnd, bool); 22] = [
        ("5xx", status(500), true),
        ("5xx", status(503), true),
        ("5xx", status(404), false),
        ("5xx", Reset, true),
        ("5xx", ConnectFailure, true),
        ("5xx", RefusedStream, true),
        ("gateway-error", status(502), true),
        ("gateway-error", status(504), true),
        ("gateway-error", status(500), false),
        ("gateway-error", Reset, true),
        ("reset", Reset, true),
        ("reset", status(503), false),
        ("reset", ConnectFailure, true),
        ("connect-failure", ConnectFailure, true),
        ("connect-failure", Reset, false),
        ("connect-failure", status(503), false),
        ("refused-stream", RefusedStream, true),
        ("refused-stream", Reset, false),
        ("retriable-4xx", status(409), true),
        ("retriable-4xx", status(404), false),
        ("retriable-status-codes", status(418), true),
        ("retriable-status-codes", status(503), false),
    ];
    for (on, end, want) in cases {
        assert_eq!(policy(&[on]).retries(end), want, "{on} on {end:?}");
    }
}

#[test]
fn grpc_conditions_read_the_grpc_status() {
    let grpc = |g| AttemptEnd::Response {
        status: 200,
        grpc_status: Some(g),
        headers: false,
    };
    let p = policy(&["unavailable", "cancelled"]);
    assert!(p.retries(grpc(14)) && p.retries(grpc(1)));
    assert!(!p.retries(grpc(13)) && !p.retries(grpc(0)));
    assert!(policy(&["internal"]).retries(grpc(13)));
    assert!(policy(&["deadline-exceeded"]).retries(grpc(4)));
    assert!(policy(&["resource-exhausted"]).retries(grpc(8)));
    // Istio's default: connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes
    let istio = policy(&[
        "connect-failure",
        "refused-stream",
        "unavailable",
        "cancelled",
        "retriable-status-codes",
    ]);
    assert!(!istio.retries(status(503)) && !istio.retries(AttemptEnd::Reset));
}

#[test]
fn back_off_is_fully_jittered_and_capped() {
    let p = policy(&["5xx"]);
    // Retry 1: [0, 25) ms; retry 2: [0, 75); retry 3: [0, 175); then capped at 250.
    for (n, upper) in [(1, 25), (2, 75), (3, 175), (4, 250), (20, 250)] {
        for r in [0u64, 1, 24, 74, 174, 1_000_003, u64::MAX] {
            let d = p.back_off(n, r).as_millis() as u64;
            assert!(
                d < upper.max(1) || (upper == 250 && d <= 250),
                "retry {n} random {r}: {d} ms"
            );
        }
    }
    assert_eq!(p.back_off(1, 30), Duration::from_millis(5));
    assert_eq!(p.back_off(2, 80), Duration::from_millis(5));
}
