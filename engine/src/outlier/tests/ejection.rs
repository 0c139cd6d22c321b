//! Tests of ejection time, un-ejection, multiplier decay, the sweep timer
//! and config / host changes.

use super::*;

#[test]
fn ejection_time_grows_with_multiplier_up_to_the_cap() {
    // base 10 s, max 25 s, sweeps every 10 s; host 0 fails whenever it
    // is flagged.
    let t0 = Instant::now();
    let c = OutlierDetection {
        base_ejection_time: 10 * SEC,
        max_ejection_time: 25 * SEC,
        consecutive_5xx: consecutive(5),
        ..config()
    };
    let mut d = detector(&c, 2, t0);
    let bad = flagged(0, true, false);
    let none = AHashMap::new();
    let at = |d: &mut ClusterOutlier, secs: u32, r: &AHashMap<HostId, HostReport>| {
        d.sweep(t0 + secs * SEC, r, &mut || 0)
    };

    // Ejection 1 at 10 s: 10 s out, back at 20 s.
    assert_eq!(at(&mut d, 10, &bad).ejected.len(), 1);
    assert_eq!(at(&mut d, 20, &none).unejected, [HostId(0)]);
    assert_eq!(d.host(HostId(0)).unwrap().multiplier, 1);
    // Ejection 2 at 30 s: 20 s out, still out at 40 s, back at 50 s.
    assert_eq!(at(&mut d, 30, &bad).ejected.len(), 1);
    assert_eq!(d.host(HostId(0)).unwrap().multiplier, 2);
    assert!(at(&mut d, 40, &none).unejected.is_empty());
    assert_eq!(at(&mut d, 50, &none).unejected, [HostId(0)]);
    // Ejection 3 at 60 s: min(30 s, 25 s) = 25 s, back at the first
    // sweep from 85 s on, 90 s.
    assert_eq!(at(&mut d, 60, &bad).ejected.len(), 1);
    assert_eq!(d.host(HostId(0)).unwrap().multiplier, 3);
    assert!(at(&mut d, 70, &none).unejected.is_empty());
    assert!(at(&mut d, 80, &none).unejected.is_empty());
    assert_eq!(at(&mut d, 90, &none).unejected, [HostId(0)]);
}

#[test]
fn ejection_time_cap_is_never_below_base() {
    // max_ejection_time below base: the cap is base (max(base, max)).
    let t0 = Instant::now();
    let c = OutlierDetection {
        base_ejection_time: 30 * SEC,
        max_ejection_time: 10 * SEC,
        consecutive_5xx: consecutive(5),
        ..config()
    };
    let mut d = detector(&c, 1, t0);
    d.sweep(t0 + 10 * SEC, &flagged(0, true, false), &mut || 0);
    let none = AHashMap::new();
    assert!(d
        .sweep(t0 + 20 * SEC, &none, &mut never())
        .unejected
        .is_empty());
    assert!(d
        .sweep(t0 + 30 * SEC, &none, &mut never())
        .unejected
        .is_empty());
    assert_eq!(
        d.sweep(t0 + 40 * SEC, &none, &mut never()).unejected,
        [HostId(0)]
    );
}

#[test]
fn unejection_happens_at_the_first_sweep_at_or_after_the_end() {
    let t0 = Instant::now();
    let c = OutlierDetection {
        consecutive_5xx: consecutive(5),
        ..config()
    };
    let mut d = detector(&c, 1, t0);
    d.sweep(t0 + 10 * SEC, &flagged(0, true, false), &mut || 0);
    let none = AHashMap::new();
    // base 30 s from 10 s: due at 40 s exactly.
    let just_before = t0 + 40 * SEC - Duration::from_millis(1);
    assert!(d
        .sweep(just_before, &none, &mut never())
        .unejected
        .is_empty());
    assert!(d.is_ejected(HostId(0)));
    assert_eq!(
        d.sweep(t0 + 40 * SEC, &none, &mut never()).unejected,
        [HostId(0)]
    );
    let host = d.host(HostId(0)).unwrap();
    assert_eq!(host.ejected_since, None);
    assert_eq!(
        host.reason,
        Some(EjectionReason::Consecutive5xx),
        "last reason kept"
    );
    assert!(ejected(&d).is_empty());
}

#[test]
fn multiplier_decays_by_one_per_sweep_while_not_ejected() {
    let t0 = Instant::now();
    let c = OutlierDetection {
        base_ejection_time: 10 * SEC,
        consecutive_5xx: consecutive(5),
        ..config()
    };
    let mut d = detector(&c, 1, t0);
    let bad = flagged(0, true, false);
    let none = AHashMap::new();
    d.sweep(t0 + 10 * SEC, &bad, &mut || 0); // multiplier 1, out till 20
    d.sweep(t0 + 20 * SEC, &none, &mut || 0); // back; no decay this sweep
    d.sweep(t0 + 30 * SEC, &bad, &mut || 0); // multiplier 2, out till 50
    let mult = |d: &ClusterOutlier| d.host(HostId(0)).unwrap().multiplier;
    d.sweep(t0 + 40 * SEC, &none, &mut never());
    assert_eq!(mult(&d), 2, "no decay while ejected");
    d.sweep(t0 + 50 * SEC, &none, &mut never());
    assert_eq!(
        mult(&d),
        2,
        "un-ejected by this sweep, after its decay step"
    );
    d.sweep(t0 + 60 * SEC, &none, &mut never());
    assert_eq!(mult(&d), 1);
    d.sweep(t0 + 70 * SEC, &none, &mut never());
    assert_eq!(mult(&d), 0);
    d.sweep(t0 + 80 * SEC, &none, &mut never());
    assert_eq!(mult(&d), 0);
    // Next ejection is back to base time.
    d.sweep(t0 + 90 * SEC, &bad, &mut || 0);
    assert_eq!(mult(&d), 1);
    assert_eq!(
        d.sweep(t0 + 100 * SEC, &none, &mut never()).unejected,
        [HostId(0)]
    );
}

#[test]
fn config_change_keeps_the_timer_start() {
    let t0 = Instant::now();
    let c = OutlierDetection {
        consecutive_5xx: consecutive(5),
        ..config()
    };
    let mut d = ClusterOutlier::new();
    assert_eq!(d.next_sweep(), None);
    d.update(Some(&c), &ids(2), t0);
    assert_eq!(d.next_sweep(), Some(t0 + 10 * SEC));

    // Mid-interval change to 6 s: timer_start + 6 s.
    let shorter = OutlierDetection {
        interval: 6 * SEC,
        ..c.clone()
    };
    d.update(Some(&shorter), &ids(2), t0 + 4 * SEC);
    assert_eq!(d.next_sweep(), Some(t0 + 6 * SEC));
    // To 3 s, already elapsed: due now, not in the past.
    let shortest = OutlierDetection {
        interval: 3 * SEC,
        ..c.clone()
    };
    d.update(Some(&shortest), &ids(2), t0 + 5 * SEC);
    assert_eq!(d.next_sweep(), Some(t0 + 5 * SEC));
    // A host update alone does not restart the timer either.
    d.update(Some(&shortest), &ids(3), t0 + 5 * SEC);
    assert_eq!(d.next_sweep(), Some(t0 + 5 * SEC));

    // A sweep restarts it.
    d.sweep(t0 + 5 * SEC, &AHashMap::new(), &mut never());
    assert_eq!(d.next_sweep(), Some(t0 + 8 * SEC));
    d.update(Some(&c), &ids(3), t0 + 7 * SEC);
    assert_eq!(d.next_sweep(), Some(t0 + 15 * SEC));
}

#[test]
fn config_removal_unejects_and_stops_sweeps() {
    let t0 = Instant::now();
    let c = OutlierDetection {
        consecutive_5xx: consecutive(5),
        ..config()
    };
    for off in [None, Some(config())] {
        let mut d = detector(&c, 2, t0);
        d.sweep(t0 + 10 * SEC, &flagged(1, true, false), &mut || 0);
        assert_eq!(ejected(&d), [HostId(1)]);

        d.update(off.as_ref(), &ids(2), t0 + 12 * SEC);
        assert_eq!(d.next_sweep(), None);
        assert!(ejected(&d).is_empty() && !d.is_ejected(HostId(1)));
        assert_eq!(d.host(HostId(1)), Some(&HostOutlier::default()));
        // A sweep without config does nothing, even with flags.
        let out = d.sweep(t0 + 20 * SEC, &flagged(0, true, false), &mut never());
        assert_eq!(out, SweepOutcome::default());
        assert_eq!(d.next_sweep(), None);

        // Re-enabled: the timer starts afresh.
        d.update(Some(&c), &ids(2), t0 + 21 * SEC);
        assert_eq!(d.next_sweep(), Some(t0 + 31 * SEC));
    }
}

#[test]
fn host_removal_forgets_state() {
    let t0 = Instant::now();
    let c = OutlierDetection {
        consecutive_5xx: consecutive(5),
        ..config()
    };
    let mut d = detector(&c, 3, t0);
    d.sweep(t0 + 10 * SEC, &flagged(1, true, false), &mut || 0);
    assert!(d.is_ejected(HostId(1)));

    d.update(Some(&c), &[HostId(0), HostId(2)], t0 + 12 * SEC);
    assert!(!d.is_ejected(HostId(1)) && d.host(HostId(1)).is_none());
    assert!(ejected(&d).is_empty());
    // Reports of hosts that left are ignored.
    let out = d.sweep(t0 + 20 * SEC, &flagged(1, true, false), &mut never());
    assert_eq!(out, SweepOutcome::default());

    // Back (or the id recycled): a fresh host.
    d.update(Some(&c), &ids(3), t0 + 21 * SEC);
    assert_eq!(d.host(HostId(1)), Some(&HostOutlier::default()));
    assert_eq!(
        d.next_sweep(),
        Some(t0 + 30 * SEC),
        "host changes keep the timer"
    );
}

#[test]
fn ejection_reason_names() {
    let names: Vec<_> = EjectionReason::ALL.iter().map(|r| r.as_str()).collect();
    assert_eq!(
        names,
        [
            "consecutive_5xx",
            "consecutive_gateway_failure",
            "success_rate",
            "failure_percentage"
        ]
    );
}

#[test]
fn a_passing_active_check_ends_an_ejection_unless_switched_off() {
    let t0 = Instant::now();
    let c = OutlierDetection {
        base_ejection_time: 30 * SEC,
        consecutive_5xx: consecutive(5),
        ..config()
    };
    let mut d = detector(&c, 2, t0);
    assert!(!d.uneject_after_check(HostId(0)), "not ejected");
    d.sweep(t0 + 10 * SEC, &flagged(0, true, false), &mut || 0);
    assert_eq!(ejected(&d), [HostId(0)]);
    assert!(d.uneject_after_check(HostId(0)));
    assert!(ejected(&d).is_empty());
    assert!(!d.uneject_after_check(HostId(0)), "once");
    // The multiplier stays: the next ejection lasts twice as long.
    assert_eq!(d.host(HostId(0)).unwrap().multiplier, 1);
    d.sweep(t0 + 20 * SEC, &flagged(0, true, false), &mut || 0);
    assert_eq!(d.host(HostId(0)).unwrap().multiplier, 2);
    let none = AHashMap::new();
    assert!(d
        .sweep(t0 + 70 * SEC, &none, &mut || 0)
        .unejected
        .is_empty());
    assert_eq!(
        d.sweep(t0 + 80 * SEC, &none, &mut || 0).unejected,
        [HostId(0)]
    );

    // successful_active_health_check_uneject_host: false.
    let off = OutlierDetection {
        uneject_on_active_check: false,
        ..c
    };
    let mut d = detector(&off, 2, t0);
    d.sweep(t0 + 10 * SEC, &flagged(1, true, false), &mut || 0);
    assert!(!d.uneject_after_check(HostId(1)));
    assert_eq!(ejected(&d), [HostId(1)]);
}
