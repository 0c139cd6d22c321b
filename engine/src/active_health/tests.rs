//! The transitions and intervals of Envoy's health checker docs
//! (`config.core.v3.HealthCheck`), one rule per test.

use super::*;
use crate::config::{Checker, TcpCheck};

pub(crate) fn hc() -> HealthCheck {
    HealthCheck {
        timeout: Duration::from_secs(1),
        interval: Duration::from_secs(10),
        initial_jitter: Duration::ZERO,
        interval_jitter: Duration::ZERO,
        interval_jitter_percent: 0,
        unhealthy_threshold: 3,
        healthy_threshold: 2,
        reuse_connection: true,
        no_traffic_interval: Duration::from_secs(60),
        no_traffic_healthy_interval: Duration::from_secs(120),
        unhealthy_interval: Duration::from_secs(20),
        unhealthy_edge_interval: Duration::from_secs(5),
        healthy_edge_interval: Duration::from_secs(7),
        always_log_failures: false,
        always_log_success: false,
        tls_alpn: vec![],
        ignore_health_on_host_removal: false,
        close_connections_on_failure: false,
        checker: Checker::Tcp(TcpCheck {
            send: vec![],
            receive: vec![],
        }),
    }
}

const PASS: Outcome = Outcome::Passed { degraded: false };

#[test]
fn a_new_host_is_unhealthy_until_one_pass() {
    let c = hc();
    let mut h = HostHealth::new();
    assert!(!h.verdict().healthy && h.is_first());
    assert_eq!(h.on_outcome(PASS, &c), Transition::Changed);
    assert!(h.verdict().healthy, "one pass suffices at start-up");
    assert!(!h.is_first());
}

#[test]
fn a_new_host_that_fails_first_needs_the_healthy_threshold() {
    let c = hc();
    let mut h = HostHealth::new();
    assert_eq!(h.on_outcome(Outcome::Network, &c), Transition::Unchanged);
    assert_eq!(h.on_outcome(PASS, &c), Transition::Pending);
    assert!(!h.verdict().healthy);
    assert_eq!(h.on_outcome(PASS, &c), Transition::Changed);
    assert!(h.verdict().healthy);
}

#[test]
fn network_failures_count_to_the_unhealthy_threshold_and_a_pass_resets_them() {
    let c = hc();
    let mut h = HostHealth::resumed(Verdict {
        healthy: true,
        degraded: false,
        excluded: false,
    });
    assert_eq!(h.on_outcome(Outcome::Network, &c), Transition::Pending);
    assert_eq!(h.on_outcome(Outcome::Retriable, &c), Transition::Pending);
    assert_eq!(h.on_outcome(PASS, &c), Transition::Unchanged);
    assert_eq!(h.on_outcome(Outcome::Network, &c), Transition::Pending);
    assert_eq!(h.on_outcome(Outcome::Network, &c), Transition::Pending);
    assert!(h.verdict().healthy);
    assert_eq!(h.on_outcome(Outcome::Network, &c), Transition::Changed);
    assert!(!h.verdict().healthy);
}

#[test]
fn a_wrong_answer_fails_the_host_at_once() {
    let c = hc();
    let mut h = HostHealth::resumed(Verdict {
        healthy: true,
        degraded: false,
        excluded: false,
    });
    assert_eq!(h.on_outcome(Outcome::Active, &c), Transition::Changed);
    assert!(!h.verdict().healthy);
    // Passes in a row bring it back after healthy_threshold, not one.
    assert_eq!(h.on_outcome(PASS, &c), Transition::Pending);
    assert_eq!(h.on_outcome(Outcome::Network, &c), Transition::Unchanged);
    assert_eq!(h.on_outcome(PASS, &c), Transition::Pending);
    assert_eq!(h.on_outcome(PASS, &c), Transition::Changed);
}

#[test]
fn degradation_follows_every_pass() {
    let c = hc();
    let mut h = HostHealth::new();
    assert_eq!(
        h.on_outcome(Outcome::Passed { degraded: true }, &c),
        Transition::Changed
    );
    assert_eq!(
        h.verdict(),
        Verdict {
            healthy: true,
            degraded: true,
            excluded: false,
        }
    );
    assert_eq!(
        h.on_outcome(Outcome::Passed { degraded: true }, &c),
        Transition::Unchanged
    );
    assert_eq!(h.on_outcome(PASS, &c), Transition::Changed);
    assert!(!h.verdict().degraded);
}

#[test]
fn intervals_follow_traffic_the_result_and_pending_edges() {
    let c = hc();
    let mut zero = || 0;
    let s = Duration::from_secs;
    let (t, p) = (Transition::Unchanged, Transition::Pending);
    let next = |passed, tr, traffic, rng: &mut dyn FnMut() -> u64| {
        HostHealth::next_interval(&c, passed, tr, traffic, &mut || rng())
    };
    // No traffic yet: the healthy no-traffic interval only after a pass
    // that changes nothing pending.
    assert_eq!(next(true, t, false, &mut zero), s(120));
    assert_eq!(next(true, Transition::Changed, false, &mut zero), s(120));
    assert_eq!(next(true, p, false, &mut zero), s(60));
    assert_eq!(next(false, t, false, &mut zero), s(60));
    // With traffic: the edge intervals while a change is pending.
    assert_eq!(next(true, t, true, &mut zero), s(10));
    assert_eq!(next(true, p, true, &mut zero), s(7));
    assert_eq!(next(false, t, true, &mut zero), s(20));
    assert_eq!(next(false, Transition::Changed, true, &mut zero), s(20));
    assert_eq!(next(false, p, true, &mut zero), s(5));
}

#[test]
fn jitter_adds_below_its_bounds() {
    let mut c = hc();
    c.interval_jitter = Duration::from_millis(1000);
    c.interval_jitter_percent = 10;
    let mut max = || u64::MAX;
    let got = HostHealth::next_interval(&c, true, Transition::Unchanged, true, &mut max);
    // u64::MAX % 1000 = 615; % 1000 (10 % of 10 s) = 615.
    assert_eq!(got, Duration::from_millis(10_000 + 615 + 615));
    let mut n = 0u64;
    let mut seq = || {
        n += 7919;
        n
    };
    for _ in 0..100 {
        let d = HostHealth::next_interval(&c, true, Transition::Unchanged, true, &mut seq);
        assert!(d >= Duration::from_secs(10) && d < Duration::from_secs(12));
    }
    c.initial_jitter = Duration::from_millis(500);
    assert!(HostHealth::initial_delay(&c, &mut seq) < Duration::from_millis(500));
    c.initial_jitter = Duration::ZERO;
    assert_eq!(HostHealth::initial_delay(&c, &mut seq), Duration::ZERO);
}

#[test]
fn a_failed_check_comes_first_then_eds_status_then_degradation() {
    use HealthStatus::*;
    let ok = Some(Verdict {
        healthy: true,
        degraded: false,
        excluded: false,
    });
    let degraded = Some(Verdict {
        healthy: true,
        degraded: true,
        excluded: false,
    });
    let failed = Some(Verdict::default());
    assert_eq!(combined_status(Draining, ok), Draining);
    assert_eq!(
        combined_status(Draining, failed),
        Unhealthy,
        "a failed check first"
    );
    assert_eq!(combined_status(Timeout, failed), Unhealthy);
    assert_eq!(combined_status(Timeout, degraded), Timeout);
    assert_eq!(combined_status(Unhealthy, ok), Unhealthy);
    assert_eq!(combined_status(Healthy, failed), Unhealthy);
    assert_eq!(combined_status(Unknown, None), Unhealthy, "not checked yet");
    assert_eq!(combined_status(Healthy, degraded), Degraded);
    assert_eq!(combined_status(Unknown, ok), Unknown);
    assert_eq!(combined_status(Degraded, ok), Degraded);
}

#[test]
fn health_flags_read_as_envoys() {
    use HealthStatus::*;
    let done = |healthy, degraded| {
        ActiveCheck::Done(Verdict {
            healthy,
            degraded,
            excluded: false,
        })
    };
    assert_eq!(
        ActiveCheck::Off.envoy_flags(Unknown, false, false),
        "healthy"
    );
    assert_eq!(
        ActiveCheck::Off.envoy_flags(Healthy, false, false),
        "healthy"
    );
    assert_eq!(
        done(true, false).envoy_flags(Unknown, false, false),
        "healthy"
    );
    assert_eq!(
        ActiveCheck::Pending.envoy_flags(Unknown, false, false),
        "/failed_active_hc"
    );
    assert_eq!(
        ActiveCheck::PendingExcluded.envoy_flags(Unknown, false, false),
        "/failed_active_hc/pending_active_hc"
    );
    assert!(ActiveCheck::PendingExcluded.excluded() && !ActiveCheck::Pending.excluded());
    assert_eq!(
        done(false, false).envoy_flags(Healthy, false, false),
        "/failed_active_hc"
    );
    assert_eq!(
        done(true, true).envoy_flags(Healthy, false, false),
        "/degraded_active_hc"
    );
    assert_eq!(
        done(false, false).envoy_flags(Unhealthy, true, false),
        "/failed_active_hc/failed_outlier_check/failed_eds_health"
    );
    assert_eq!(
        ActiveCheck::Off.envoy_flags(Timeout, false, false),
        "/failed_eds_health"
    );
    assert_eq!(
        ActiveCheck::Off.envoy_flags(Degraded, false, false),
        "/degraded_eds_health"
    );
    assert_eq!(
        ActiveCheck::Off.envoy_flags(Draining, false, false),
        "/eds_status_draining"
    );
    assert_eq!(
        ActiveCheck::Off.envoy_flags(Healthy, true, false),
        "/failed_outlier_check"
    );
}

#[test]
fn the_immediate_fail_header_excludes_until_any_pass() {
    let c = HealthCheck {
        healthy_threshold: 2,
        ..hc()
    };
    let mut h = HostHealth::resumed(Verdict {
        healthy: true,
        degraded: false,
        excluded: false,
    });
    assert_eq!(
        h.on_outcome(Outcome::ImmediateFail, &c),
        Transition::Changed
    );
    assert!(!h.verdict().healthy && h.verdict().excluded);
    // Again while failed: nothing new.
    assert_eq!(
        h.on_outcome(Outcome::ImmediateFail, &c),
        Transition::Unchanged
    );
    // The first pass ends the exclusion, not yet the failure.
    assert_eq!(h.on_outcome(PASS, &c), Transition::Changed);
    assert!(!h.verdict().healthy && !h.verdict().excluded);
    assert_eq!(h.on_outcome(PASS, &c), Transition::Changed);
    assert!(h.verdict().healthy);
    // A failed host that then says the header is excluded too.
    assert_eq!(h.on_outcome(Outcome::Active, &c), Transition::Changed);
    assert_eq!(
        h.on_outcome(Outcome::ImmediateFail, &c),
        Transition::Changed
    );
    assert!(h.verdict().excluded);
    let flags = ActiveCheck::Done(h.verdict()).envoy_flags(HealthStatus::Healthy, false, false);
    assert_eq!(flags, "/failed_active_hc/excluded_via_immediate_hc_fail");
}
