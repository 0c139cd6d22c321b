//! The lifecycle's rules on a clock we move by hand.

use super::*;
use crate::drain::{DrainStrategy, QUIET};

fn limits() -> Limits {
    Limits {
        idle_timeout: Some(Duration::from_secs(3600)),
        drain_timeout: Duration::from_secs(5),
        headers_timeout: None,
        max_connection_duration: None,
        max_requests: None,
        delayed_close: Duration::from_secs(1),
    }
}

fn handshaken() -> ConnState {
    ConnState {
        handshaken: true,
        ..ConnState::default()
    }
}

fn busy() -> ConnState {
    ConnState {
        busy: true,
        requests: 1,
        handshaken: true,
        ..ConnState::default()
    }
}

const S: Duration = Duration::from_secs(1);

#[test]
fn a_busy_connection_scans_and_a_quiet_scan_arms_the_idle_timeout() {
    let t0 = Instant::now();
    let mut lc = Lifecycle::new(limits(), t0, false);
    assert_eq!(lc.next(t0, &busy(), true), Next::Serve);
    assert_eq!(lc.arm(t0, &busy()), Arm::Set(DEADLINE_SCAN));
    assert!(lc.scanning());
    assert_eq!(lc.arm(t0, &busy()), Arm::Keep, "armed once, not per turn");
    let t1 = t0 + DEADLINE_SCAN;
    assert_eq!(lc.on_timer(t1, &busy()), Fired::Scan);
    assert_eq!(lc.arm(t1, &busy()), Arm::Set(DEADLINE_SCAN));
    // The streams ended: the scan timer stands until it fires once quiet.
    assert_eq!(lc.arm(t1, &handshaken()), Arm::Keep);
    let t2 = t1 + DEADLINE_SCAN;
    assert_eq!(lc.on_timer(t2, &handshaken()), Fired::Quiet);
    assert_eq!(
        lc.arm(t2, &handshaken()),
        Arm::Set(Duration::from_secs(3600))
    );
    assert!(!lc.scanning());
    // The next stream scans again.
    assert_eq!(lc.arm(t2, &busy()), Arm::Set(DEADLINE_SCAN));
}

#[test]
fn the_idle_timeout_sends_a_goaway_and_closes_the_idle_connection() {
    let t0 = Instant::now();
    let mut lc = Lifecycle::new(limits(), t0, false);
    assert_eq!(
        lc.arm(t0, &handshaken()),
        Arm::Set(Duration::from_secs(3600))
    );
    let t1 = t0 + Duration::from_secs(3600);
    assert_eq!(lc.on_timer(t1, &handshaken()), Fired::Idle);
    assert_eq!(
        lc.next(t1, &handshaken(), true),
        Next::Close { go_away: false }
    );
}

#[test]
fn no_handshake_within_the_handshake_timeout_closes() {
    let t0 = Instant::now();
    let mut lc = Lifecycle::new(limits(), t0, false);
    let fresh = ConnState::default();
    assert_eq!(lc.arm(t0, &fresh), Arm::Set(HANDSHAKE_TIMEOUT));
    assert_eq!(
        lc.on_timer(t0 + HANDSHAKE_TIMEOUT, &fresh),
        Fired::HandshakeTimeout
    );
    // A handshake that came: the idle timeout governs next.
    let mut lc = Lifecycle::new(limits(), t0, false);
    assert_eq!(lc.arm(t0, &fresh), Arm::Set(HANDSHAKE_TIMEOUT));
    assert_eq!(lc.on_timer(t0 + S, &handshaken()), Fired::Recheck);
    assert_eq!(
        lc.arm(t0 + S, &handshaken()),
        Arm::Set(Duration::from_secs(3600))
    );
    // A shorter idle timeout bounds the handshake too.
    let short = Limits {
        idle_timeout: Some(S),
        ..limits()
    };
    let mut lc = Lifecycle::new(short, t0, false);
    assert_eq!(lc.arm(t0, &fresh), Arm::Set(S));
}

#[test]
fn a_connection_lives_its_max_connection_duration_then_drains() {
    let t0 = Instant::now();
    let lived = Limits {
        max_connection_duration: Some(Duration::from_secs(60)),
        ..limits()
    };
    let mut lc = Lifecycle::new(lived, t0, false);
    // Idle, it wakes at its lifetime's end rather than the idle timeout.
    assert_eq!(lc.arm(t0, &handshaken()), Arm::Set(Duration::from_secs(60)));
    let end = t0 + Duration::from_secs(60);
    assert_eq!(lc.on_timer(end, &handshaken()), Fired::Recheck);
    assert_eq!(lc.next(end, &busy(), true), Next::GoAway(GoAway::LivedOut));
    // Its streams get drain_timeout, and it closes once they are done.
    assert_eq!(lc.next(end, &busy(), true), Next::Serve);
    assert_eq!(
        lc.next(end + 5 * S, &busy(), true),
        Next::Close { go_away: false }
    );
    assert_eq!(
        lc.next(end + S, &handshaken(), true),
        Next::Close { go_away: false }
    );
}

#[test]
fn max_requests_per_connection_drains_after_the_last_request() {
    let t0 = Instant::now();
    let served = Limits {
        max_requests: Some(2),
        ..limits()
    };
    let mut lc = Lifecycle::new(served, t0, false);
    assert_eq!(lc.next(t0, &busy(), true), Next::Serve);
    let two = ConnState {
        requests: 2,
        ..busy()
    };
    assert_eq!(lc.next(t0, &two, true), Next::GoAway(GoAway::ServedOut));
    assert_eq!(lc.next(t0, &two, true), Next::Serve);
}

#[test]
fn a_reset_flood_is_told_to_calm_down_and_closed_within_a_second() {
    let t0 = Instant::now();
    let mut lc = Lifecycle::new(limits(), t0, false);
    let flooding = ConnState {
        flooded: true,
        ..busy()
    };
    assert_eq!(lc.next(t0, &flooding, true), Next::GoAway(GoAway::Flood));
    assert_eq!(lc.next(t0, &flooding, true), Next::Serve);
    assert_eq!(
        lc.next(t0 + HARD_CLOSE_AFTER, &flooding, true),
        Next::Close { go_away: false }
    );
}

#[test]
fn a_head_that_trickles_in_times_out() {
    let t0 = Instant::now();
    let timed = Limits {
        headers_timeout: Some(Duration::from_secs(2)),
        ..limits()
    };
    let mut lc = Lifecycle::new(timed, t0, false);
    assert!(lc.times_heads());
    assert_eq!(
        lc.arm(t0, &handshaken()),
        Arm::Set(Duration::from_secs(3600))
    );
    // Part of a head came: the idle timer is armed again to include it.
    lc.on_input(t0 + S, true);
    assert_eq!(
        lc.arm(t0 + S, &handshaken()),
        Arm::Set(Duration::from_secs(2))
    );
    assert_eq!(lc.on_timer(t0 + 3 * S, &handshaken()), Fired::HeadTimeout);
    // A head that completed in time leaves no deadline behind.
    let mut lc = Lifecycle::new(timed, t0, false);
    lc.on_input(t0, true);
    lc.on_input(t0 + S, false);
    assert_eq!(
        lc.arm(t0 + S, &handshaken()),
        Arm::Set(Duration::from_secs(3600))
    );
}

fn gradual(secs: u64) -> DrainOptions {
    DrainOptions {
        time: Duration::from_secs(secs),
        strategy: DrainStrategy::Gradual,
    }
}

#[test]
fn in_a_drain_an_idle_connection_closes_and_a_busy_one_is_told_at_its_place() {
    let t0 = Instant::now();
    let mut idle = Lifecycle::new(limits(), t0, false);
    assert!(idle.takes_drain());
    idle.start_drain(t0 + QUIET, gradual(600), 0.5);
    assert!(!idle.takes_drain());
    assert_eq!(
        idle.next(t0 + QUIET, &handshaken(), true),
        Next::Close { go_away: true }
    );

    let mut lc = Lifecycle::new(limits(), t0, false);
    lc.start_drain(t0, gradual(600), 0.5);
    assert_eq!(lc.next(t0, &busy(), true), Next::Serve);
    // Its place: half of (600 s − drain_timeout).
    let place = t0 + Duration::from_millis(297_500);
    assert_eq!(lc.next(place, &busy(), true), Next::Notice);
    assert_eq!(lc.next(place, &busy(), true), Next::Serve);
    assert_eq!(
        lc.next(place + 5 * S, &busy(), true),
        Next::GoAway(GoAway::Drain)
    );
    // Closed once its streams are done, at the drain's end at the latest.
    assert_eq!(lc.next(place + 6 * S, &busy(), true), Next::Serve);
    assert_eq!(
        lc.next(t0 + Duration::from_secs(600), &busy(), true),
        Next::Close { go_away: false }
    );
}

#[test]
fn with_no_drain_timeout_the_final_goaway_waits_for_a_later_turn() {
    let t0 = Instant::now();
    let zero = Limits {
        drain_timeout: Duration::ZERO,
        ..limits()
    };
    let mut lc = Lifecycle::new(zero, t0, false);
    lc.start_drain(t0, gradual(600), 0.0);
    assert_eq!(lc.next(t0, &busy(), true), Next::Notice);
    // Asked again in the same turn, after the notice went out.
    assert_eq!(lc.next(t0, &busy(), false), Next::Serve);
    assert_eq!(lc.next(t0, &busy(), true), Next::GoAway(GoAway::Drain));
}

#[test]
fn an_http1_connection_is_told_by_connection_close() {
    let t0 = Instant::now();
    let mut lc = Lifecycle::new(limits(), t0, false);
    lc.start_drain(t0, gradual(600), 0.0);
    let h1 = ConnState {
        is_h1: true,
        ..busy()
    };
    assert_eq!(lc.next(t0, &h1, true), Next::GoAway(GoAway::Drain));
    assert_eq!(lc.next(t0, &h1, true), Next::Serve);
}

#[test]
fn a_connection_opened_into_a_drain_waits_for_its_first_request() {
    let t0 = Instant::now();
    let mut lc = Lifecycle::new(limits(), t0, true);
    assert!(!lc.spreads(false));
    lc.start_drain(t0, gradual(10), 0.0);
    let later = t0 + 2 * QUIET;
    assert_eq!(lc.next(later, &handshaken(), true), Next::Serve);
    // Idle, it still closes at the drain's end.
    assert_eq!(
        lc.arm(later, &handshaken()),
        Arm::Set(Duration::from_secs(8))
    );
}

#[test]
fn a_failed_health_check_drains_without_a_spread() {
    let lc = Lifecycle::new(limits(), Instant::now(), false);
    assert!(lc.spreads(false));
    assert!(!lc.spreads(true));
}

#[test]
fn the_open_guard_counts_a_connection_while_it_lives() {
    let gauge = Counter::default();
    {
        let _open = Open::new(&gauge);
        assert_eq!(gauge.get(), 1);
    }
    assert_eq!(gauge.get(), 0);
}
