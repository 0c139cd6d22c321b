//! Tests of the shard-side counters, reports and call classification.

use super::*;

#[test]
fn grpc_to_http_table() {
    let table = [
        200, 499, 500, 400, 504, 404, 409, 403, 429, 400, 409, 400, 501, 500, 503, 500, 401,
    ];
    for (code, http) in table.into_iter().enumerate() {
        assert_eq!(grpc_to_http(code as u32), http, "grpc status {code}");
    }
    assert_eq!(grpc_to_http(17), 500);
    assert_eq!(grpc_to_http(u32::MAX), 500);
}

#[test]
fn call_result_classification() {
    assert_eq!(CallResult::ConnectFailure.http_status(), 503);
    assert_eq!(CallResult::Reset.http_status(), 503);
    assert_eq!(CallResult::Timeout.http_status(), 504);
    assert_eq!(CallResult::Status(418).http_status(), 418);
    for r in [
        CallResult::ConnectFailure,
        CallResult::Reset,
        CallResult::Timeout,
        CallResult::Status(502),
        CallResult::Status(503),
        CallResult::Status(504),
    ] {
        assert!(r.is_failure() && r.is_gateway_failure(), "{r:?}");
    }
    for s in [500, 501, 505, 599] {
        let r = CallResult::Status(s);
        assert!(r.is_failure() && !r.is_gateway_failure(), "{s}");
    }
    for s in [0, 200, 404, 499, 600, 999] {
        let r = CallResult::Status(s);
        assert!(!r.is_failure() && !r.is_gateway_failure(), "{s}");
    }
}

#[test]
fn five_503_trip_consecutive_5xx_and_a_success_resets_the_streak() {
    let c = OutlierDetection {
        consecutive_5xx: consecutive(5),
        ..config()
    };
    let mut h = HostCounters::default();
    for _ in 0..4 {
        h.record(CallResult::Status(503), &c);
    }
    h.record(CallResult::Status(200), &c);
    for _ in 0..4 {
        h.record(CallResult::Status(503), &c);
    }
    let r = h.take();
    assert_eq!((r.success, r.failure), (1, 8));
    assert!(!r.consecutive_5xx, "a 200 in between restarts the streak");

    // The streak carries over the take: 4 before, 1 after.
    h.record(CallResult::Status(500), &c);
    let r = h.take();
    assert!(r.consecutive_5xx);
    assert_eq!((r.success, r.failure), (0, 1), "a fresh bucket per take");
    assert!(h.take().is_empty(), "flags are handed over once");

    // A tripped streak restarts from 0: four more do not trip again.
    for _ in 0..4 {
        h.record(CallResult::Reset, &c);
    }
    assert!(!h.take().consecutive_5xx);
}

#[test]
fn gateway_failures_are_502_503_504_and_local_origin_errors() {
    let c = OutlierDetection {
        consecutive_gateway_failure: consecutive(3),
        ..config()
    };
    let mut h = HostCounters::default();
    h.record(CallResult::Status(502), &c);
    h.record(CallResult::Status(504), &c);
    h.record(CallResult::Status(500), &c);
    h.record(CallResult::Status(503), &c);
    h.record(CallResult::Status(501), &c);
    let r = h.take();
    assert!(
        !r.consecutive_gateway_failure,
        "500 and 501 break the streak"
    );
    assert!(!r.consecutive_5xx, "no consecutive_5xx detector configured");
    assert_eq!(r.failure, 5);

    h.record(CallResult::ConnectFailure, &c);
    h.record(CallResult::Reset, &c);
    h.record(CallResult::Timeout, &c);
    assert!(h.take().consecutive_gateway_failure);

    // 500s count for consecutive_5xx but not for gateway failures.
    let c = OutlierDetection {
        consecutive_5xx: consecutive(3),
        ..c
    };
    for _ in 0..3 {
        h.record(CallResult::Status(500), &c);
    }
    let r = h.take();
    assert!(r.consecutive_5xx && !r.consecutive_gateway_failure);

    h.record(CallResult::Timeout, &c);
    h.reset();
    h.record(CallResult::Timeout, &c);
    h.record(CallResult::Timeout, &c);
    assert!(
        h.take()
            == HostReport {
                failure: 2,
                ..HostReport::default()
            }
    );
}

#[test]
fn report_merge_and_emptiness() {
    let mut a = HostReport {
        success: 3,
        failure: 1,
        consecutive_5xx: true,
        consecutive_gateway_failure: false,
    };
    a.merge(&HostReport {
        success: 2,
        failure: 4,
        consecutive_5xx: false,
        consecutive_gateway_failure: true,
    });
    assert_eq!(
        a,
        HostReport {
            success: 5,
            failure: 5,
            consecutive_5xx: true,
            consecutive_gateway_failure: true,
        }
    );
    assert!(HostReport::default().is_empty());
    assert!(!a.is_empty());
    assert!(!HostReport {
        consecutive_gateway_failure: true,
        ..HostReport::default()
    }
    .is_empty());
}
