//! Tests of the sweep's detectors: success rate, failure percentage,
//! consecutive errors, the enforcement draw and the ejection cap.

use super::*;

#[test]
fn success_rate_threshold_is_mean_minus_factor_times_population_stdev() {
    // Rates 1, 1, 1, 1, 0.5: mean 0.9, population stdev 0.2.
    // Factor 1.9: threshold 0.52, host 4 is an outlier. Factor 2.1:
    // threshold 0.48, it is not. (A sample stdev, 0.2236, would give
    // 0.475 with factor 1.9 and eject nobody.)
    let reports = counts(&[(100, 0), (100, 0), (100, 0), (100, 0), (50, 50)]);
    let t0 = Instant::now();
    let c = OutlierDetection {
        success_rate: success_rate(1900),
        ..config()
    };
    let mut d = detector(&c, 5, t0);
    let out = d.sweep(t0 + 10 * SEC, &reports, &mut scripted(&[0]));
    assert_eq!(out.ejected, [(HostId(4), EjectionReason::SuccessRate)]);
    assert!(out.not_enforced.is_empty() && out.unejected.is_empty());
    let host = d.host(HostId(4)).unwrap();
    assert_eq!(host.ejected_since, Some(t0 + 10 * SEC));
    assert_eq!(host.reason, Some(EjectionReason::SuccessRate));
    assert_eq!(host.multiplier, 1);
    assert_eq!(host.success_rate, Some(0.5));
    assert_eq!(d.host(HostId(0)).unwrap().success_rate, Some(1.0));

    let c = OutlierDetection {
        success_rate: success_rate(2100),
        ..config()
    };
    let mut d = detector(&c, 5, t0);
    let out = d.sweep(t0 + 10 * SEC, &reports, &mut never());
    assert_eq!(out, SweepOutcome::default());
    assert!(ejected(&d).is_empty());
}

#[test]
fn success_rate_ignores_spread_free_rates() {
    // Three hosts at 0.1: stdev 0, so the threshold is the mean (an ulp
    // above 0.1 here: 0.30000000000000004 / 3) less a deviation at least
    // as large; outliers are strictly below it, so nobody is one.
    let reports = counts(&[(10, 90), (10, 90), (10, 90)]);
    let t0 = Instant::now();
    let c = OutlierDetection {
        success_rate: Some(SuccessRateEjection {
            minimum_hosts: 3,
            ..success_rate(1900).unwrap()
        }),
        ..config()
    };
    let mut d = detector(&c, 3, t0);
    assert_eq!(
        d.sweep(t0 + 10 * SEC, &reports, &mut never()),
        SweepOutcome::default()
    );
}

#[test]
fn success_rate_request_volume_gate() {
    let t0 = Instant::now();
    let c = OutlierDetection {
        success_rate: success_rate(1900),
        ..config()
    };
    // Host 4 fails all of its 99 requests: below request_volume 100, it
    // is neither judged nor part of the statistics (counted, rates
    // 1,1,1,1,0,1 would give threshold 0.124 and eject it).
    let mut d = detector(&c, 6, t0);
    let low = counts(&[(100, 0), (100, 0), (100, 0), (100, 0), (0, 99), (100, 0)]);
    assert_eq!(
        d.sweep(t0 + 10 * SEC, &low, &mut never()),
        SweepOutcome::default()
    );
    assert_eq!(d.host(HostId(4)).unwrap().success_rate, Some(0.0));

    // At 100 requests it counts: rates 1,1,1,1,0,1, mean 0.833, stdev
    // 0.373, threshold 0.124.
    let enough = counts(&[(100, 0), (100, 0), (100, 0), (100, 0), (0, 100), (100, 0)]);
    let out = d.sweep(t0 + 20 * SEC, &enough, &mut scripted(&[0]));
    assert_eq!(out.ejected, [(HostId(4), EjectionReason::SuccessRate)]);
}

#[test]
fn success_rate_minimum_hosts_gate() {
    // Rates 1,1,1,1,0: mean 0.8, stdev 0.4, threshold 0.04.
    let reports = counts(&[(100, 0), (100, 0), (100, 0), (100, 0), (0, 100)]);
    let t0 = Instant::now();
    let with_minimum = |minimum_hosts| OutlierDetection {
        success_rate: Some(SuccessRateEjection {
            minimum_hosts,
            ..success_rate(1900).unwrap()
        }),
        ..config()
    };
    // Six hosts, five with volume: minimum 6 is not met (the idle host
    // does not count).
    let mut d = detector(&with_minimum(6), 6, t0);
    assert_eq!(
        d.sweep(t0 + 10 * SEC, &reports, &mut never()),
        SweepOutcome::default()
    );
    let mut d = detector(&with_minimum(5), 6, t0);
    let out = d.sweep(t0 + 10 * SEC, &reports, &mut scripted(&[0]));
    assert_eq!(out.ejected, [(HostId(4), EjectionReason::SuccessRate)]);
    assert_eq!(d.host(HostId(5)).unwrap().success_rate, None);
}

#[test]
fn ejected_hosts_are_left_out_of_success_rate_statistics() {
    // Host 0 is ejected by consecutive_5xx in step (a) of this sweep.
    // Without it, rates 1,1,1,1,0.5 give threshold 0.52 and host 5 is an
    // outlier; with it (0,1,1,1,1,0.5: threshold 0.024) it would not be.
    let t0 = Instant::now();
    let c = OutlierDetection {
        consecutive_5xx: consecutive(5),
        success_rate: success_rate(1900),
        ..config()
    };
    let mut d = detector(&c, 6, t0);
    let mut reports = counts(&[(0, 100), (100, 0), (100, 0), (100, 0), (100, 0), (50, 50)]);
    reports.get_mut(&HostId(0)).unwrap().consecutive_5xx = true;
    let out = d.sweep(t0 + 10 * SEC, &reports, &mut scripted(&[0, 0]));
    assert_eq!(
        out.ejected,
        [
            (HostId(0), EjectionReason::Consecutive5xx),
            (HostId(5), EjectionReason::SuccessRate),
        ]
    );
}

#[test]
fn failure_percentage_threshold_is_inclusive() {
    let t0 = Instant::now();
    let c = OutlierDetection {
        failure_percentage: failure_percentage(50),
        ..config()
    };
    let mut d = detector(&c, 5, t0);
    // Host 0: exactly 50% failures, ejected (>=). Host 1: 49%, stays.
    // Host 2: 100% but only 49 requests (< request_volume 50), stays.
    let reports = counts(&[(50, 50), (51, 49), (0, 49), (50, 0)]);
    let out = d.sweep(t0 + 10 * SEC, &reports, &mut scripted(&[0]));
    assert_eq!(
        out.ejected,
        [(HostId(0), EjectionReason::FailurePercentage)]
    );
    assert!(out.not_enforced.is_empty());
    assert_eq!(ejected(&d), [HostId(0)]);
}

#[test]
fn failure_percentage_minimum_hosts_counts_every_host() {
    let t0 = Instant::now();
    let c = OutlierDetection {
        failure_percentage: failure_percentage(85),
        ..config()
    };
    // Five hosts, only one with traffic: A50 counts all five.
    let mut d = detector(&c, 5, t0);
    let reports = counts(&[(0, 100)]);
    let out = d.sweep(t0 + 10 * SEC, &reports, &mut scripted(&[0]));
    assert_eq!(
        out.ejected,
        [(HostId(0), EjectionReason::FailurePercentage)]
    );
    // Four hosts: below minimum_hosts 5, nothing happens.
    let mut d = detector(&c, 4, t0);
    assert_eq!(
        d.sweep(t0 + 10 * SEC, &reports, &mut never()),
        SweepOutcome::default()
    );
}

#[test]
fn enforcement_percentage_draw() {
    let t0 = Instant::now();
    let c = OutlierDetection {
        failure_percentage: Some(FailurePercentageEjection {
            enforcement_percentage: 50,
            ..failure_percentage(85).unwrap()
        }),
        ..config()
    };
    let reports = counts(&[(0, 100)]);
    let mut d = detector(&c, 5, t0);
    // 50 % 100 = 50 is not below 50: detected, not enforced.
    let out = d.sweep(t0 + 10 * SEC, &reports, &mut scripted(&[50]));
    assert!(out.ejected.is_empty());
    assert_eq!(
        out.not_enforced,
        [(HostId(0), EjectionReason::FailurePercentage)]
    );
    assert!(!d.is_ejected(HostId(0)));
    assert_eq!(d.host(HostId(0)).unwrap().multiplier, 0);
    // 49 is: ejected. The draw is taken modulo 100 (149 -> 49).
    let out = d.sweep(t0 + 20 * SEC, &reports, &mut scripted(&[149]));
    assert_eq!(
        out.ejected,
        [(HostId(0), EjectionReason::FailurePercentage)]
    );
    assert!(d.is_ejected(HostId(0)));
}

#[test]
fn max_ejection_percent_always_allows_one() {
    let t0 = Instant::now();
    let c = OutlierDetection {
        max_ejection_percent: 10,
        failure_percentage: Some(FailurePercentageEjection {
            minimum_hosts: 3,
            ..failure_percentage(85).unwrap()
        }),
        ..config()
    };
    let mut d = detector(&c, 3, t0);
    let all_failing = counts(&[(0, 100), (0, 100), (0, 100)]);
    // 0 of 3 ejected is not above 10%: one goes; 1 of 3 is: the others
    // are detected but overflow the cap, without a draw.
    let out = d.sweep(t0 + 10 * SEC, &all_failing, &mut scripted(&[0]));
    assert_eq!(
        out.ejected,
        [(HostId(0), EjectionReason::FailurePercentage)]
    );
    assert_eq!(
        out.overflow,
        [
            (HostId(1), EjectionReason::FailurePercentage),
            (HostId(2), EjectionReason::FailurePercentage),
        ]
    );
    assert!(out.not_enforced.is_empty());
    // Ejections from earlier sweeps count toward the cap.
    let out = d.sweep(t0 + 20 * SEC, &all_failing, &mut never());
    assert!(out.ejected.is_empty());
    assert_eq!(out.overflow.len(), 2);

    // 0% still lets one through.
    let c = OutlierDetection {
        max_ejection_percent: 0,
        ..c
    };
    let mut d = detector(&c, 3, t0);
    let out = d.sweep(t0 + 10 * SEC, &all_failing, &mut scripted(&[0]));
    assert_eq!(out.ejected.len(), 1);
}

#[test]
fn max_ejection_percent_is_checked_before_each_ejection() {
    // 50% of 4: at 2 of 4 (50%, not above 50%) a third may still go;
    // at 3 of 4 the fourth may not. This is A50's rule verbatim.
    let t0 = Instant::now();
    let c = OutlierDetection {
        max_ejection_percent: 50,
        failure_percentage: Some(FailurePercentageEjection {
            minimum_hosts: 4,
            ..failure_percentage(85).unwrap()
        }),
        ..config()
    };
    let mut d = detector(&c, 4, t0);
    let all_failing = counts(&[(0, 100), (0, 100), (0, 100), (0, 100)]);
    let out = d.sweep(t0 + 10 * SEC, &all_failing, &mut scripted(&[0, 0, 0]));
    assert_eq!(out.ejected.len(), 3);
    assert_eq!(
        out.overflow,
        [(HostId(3), EjectionReason::FailurePercentage)]
    );
}

#[test]
fn consecutive_flags_from_counters_eject() {
    let t0 = Instant::now();
    let c = OutlierDetection {
        consecutive_5xx: consecutive(5),
        consecutive_gateway_failure: consecutive(5),
        ..config()
    };
    // Two shards: 3 and 2 errors do not add up (streaks are per shard).
    let mut shard_a = HostCounters::default();
    let mut shard_b = HostCounters::default();
    for _ in 0..3 {
        shard_a.record(CallResult::Status(500), &c);
    }
    for _ in 0..2 {
        shard_b.record(CallResult::Status(500), &c);
    }
    let mut report = shard_a.take();
    report.merge(&shard_b.take());
    assert!(!report.consecutive_5xx);

    let mut d = detector(&c, 3, t0);
    for _ in 0..5 {
        shard_a.record(CallResult::Status(500), &c);
    }
    let mut reports = AHashMap::new();
    reports.insert(HostId(1), shard_a.take());
    for _ in 0..5 {
        shard_b.record(CallResult::Timeout, &c);
    }
    reports.insert(HostId(2), shard_b.take());
    let out = d.sweep(t0 + 10 * SEC, &reports, &mut scripted(&[0, 0]));
    // A gateway streak is also a 5xx streak; the gateway detector acts
    // first, as in Envoy.
    assert_eq!(
        out.ejected,
        [
            (HostId(1), EjectionReason::Consecutive5xx),
            (HostId(2), EjectionReason::ConsecutiveGatewayFailure),
        ]
    );

    // Already ejected: skipped, no draw.
    let out = d.sweep(t0 + 20 * SEC, &flagged(1, true, true), &mut never());
    assert_eq!(out, SweepOutcome::default());
}

#[test]
fn gateway_detector_not_enforced_falls_back_to_5xx() {
    let t0 = Instant::now();
    let c = OutlierDetection {
        consecutive_5xx: Some(ConsecutiveErrors {
            threshold: 5,
            enforcement_percentage: 50,
        }),
        consecutive_gateway_failure: Some(ConsecutiveErrors {
            threshold: 5,
            enforcement_percentage: 10,
        }),
        ..config()
    };
    let mut d = detector(&c, 1, t0);
    let out = d.sweep(
        t0 + 10 * SEC,
        &flagged(0, true, true),
        &mut scripted(&[10, 50]),
    );
    assert_eq!(
        out.not_enforced,
        [
            (HostId(0), EjectionReason::ConsecutiveGatewayFailure),
            (HostId(0), EjectionReason::Consecutive5xx),
        ]
    );
    let out = d.sweep(
        t0 + 20 * SEC,
        &flagged(0, true, true),
        &mut scripted(&[10, 49]),
    );
    assert_eq!(out.ejected, [(HostId(0), EjectionReason::Consecutive5xx)]);

    // A flag whose detector is off is ignored.
    let c = OutlierDetection {
        consecutive_gateway_failure: None,
        ..c
    };
    let mut d = detector(&c, 1, t0);
    let out = d.sweep(t0 + 10 * SEC, &flagged(0, false, true), &mut never());
    assert_eq!(out, SweepOutcome::default());
}

#[test]
fn a_reason_indexes_its_place_in_all() {
    for (i, r) in EjectionReason::ALL.iter().enumerate() {
        assert_eq!(r.index(), i);
    }
}
