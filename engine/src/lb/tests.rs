use super::*;
use crate::config::*;
use crate::host::HostRegistry;
use std::cell::Cell;
use std::net::SocketAddr;
use std::time::Duration;
use HealthStatus::*;

/// Host `i` listens on port `i + 1`.
fn build(policy: LbPolicy, threshold: u32, hosts: &[(u32, HealthStatus)]) -> ClusterSnapshot {
    let c = Cluster {
        name: "c".into(),
        connect_timeout: Duration::from_secs(1),
        lb_policy: policy,
        endpoints: hosts
            .iter()
            .enumerate()
            .map(|(i, (w, h))| Endpoint {
                address: SocketAddr::from(([127, 0, 0, 1], i as u16 + 1)),
                weight: *w,
                health: *h,
                hostname: String::new(),
                check: Default::default(),
                placement: Default::default(),
            })
            .collect(),
        eds: None,
        dns: None,
        http2: UpstreamHttp2::default(),
        upstream: Default::default(),
        outlier_detection: None,
        per_connection_buffer_limit_bytes: crate::DEFAULT_PER_CONNECTION_BUFFER_LIMIT,
        health_check: None,
        circuit_breakers: Default::default(),
        per_endpoint_stats: false,
        common_lb: CommonLb {
            healthy_panic_threshold: threshold,
            ..Default::default()
        },
    };
    ClusterSnapshot::build(Arc::new(c), &mut HostRegistry::new())
}

fn cluster(weights: &[(u16, u32, HealthStatus)]) -> ClusterSnapshot {
    let hosts: Vec<_> = weights.iter().map(|(_, w, h)| (*w, *h)).collect();
    let c = build(LbPolicy::RoundRobin, 50, &hosts);
    for (h, (p, ..)) in c.hosts.iter().zip(weights) {
        assert_eq!(h.address.port(), *p);
    }
    c
}

fn healthy(n: usize) -> Vec<(u32, HealthStatus)> {
    vec![(1, Healthy); n]
}

fn least(choice_count: u32, active_request_bias: f64) -> LbPolicy {
    LbPolicy::LeastRequest(LeastRequest {
        choice_count,
        active_request_bias,
    })
}

fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// An rng value that `below(_, n)` maps to `i`.
fn at(i: usize, n: usize) -> u64 {
    let r = ((i as u128) << 64) / n as u128 + 1;
    assert_eq!(below(r as u64, n), i);
    r as u64
}

fn none() -> EjectedSet {
    EjectedSet::default()
}

/// `n` picks from one `ClusterLb`, as ports.
fn run(
    lb: &mut ClusterLb,
    c: &ClusterSnapshot,
    ejected: &EjectedSet,
    active: impl Fn(HostId) -> u32,
    rng: &mut impl FnMut() -> u64,
    n: usize,
) -> Vec<u16> {
    (0..n)
        .map(|_| {
            lb.pick(c, ejected, &active, rng)
                .unwrap()
                .host
                .address
                .port()
        })
        .collect()
}

/// `run` on a new balancer with no host ejected.
fn fresh(
    c: &ClusterSnapshot,
    active: impl Fn(HostId) -> u32,
    rng: &mut impl FnMut() -> u64,
    n: usize,
) -> Vec<u16> {
    run(&mut ClusterLb::default(), c, &none(), active, rng, n)
}

/// How often each of ports `1..=hosts` occurs.
fn counts(ports: &[u16], hosts: usize) -> Vec<usize> {
    (1..=hosts as u16)
        .map(|p| ports.iter().filter(|q| **q == p).count())
        .collect()
}

fn ports(c: &ClusterSnapshot, n: usize) -> Vec<u16> {
    let mut st = RoundRobinState::default();
    (0..n)
        .map(|_| pick_round_robin(c, &mut st).unwrap().address.port())
        .collect()
}

#[test]
fn equal_weights_rotate_and_skip_unroutable() {
    let c = cluster(&[
        (1, 1, Healthy),
        (2, 1, Draining),
        (3, 1, Unknown),
        (4, 1, Unhealthy),
    ]);
    assert_eq!(ports(&c, 4), vec![1, 3, 1, 3]);
}

#[test]
fn weighted_is_interleaved_and_proportional() {
    let c = cluster(&[(1, 5, Healthy), (2, 1, Healthy), (3, 1, Healthy)]);
    // Deadlines 1/5, 2/5, … for host 1 and 1 for hosts 2 and 3: the
    // light hosts come after host 1's fifth pick, not in a burst.
    assert_eq!(ports(&c, 7), vec![1, 1, 1, 1, 1, 2, 3]);
    let many = ports(&c, 7000);
    assert_eq!(counts(&many, 3), [5000, 1000, 1000]);
    // Never more than 5 picks of host 1 in a row once it runs steady.
    let longest = many.split(|p| *p != 1).map(<[u16]>::len).max().unwrap();
    assert!(longest <= 5, "{longest}");
}

#[test]
fn a_new_snapshot_restarts_the_schedule() {
    let a = cluster(&[(1, 3, Healthy), (2, 1, Healthy)]);
    let b = cluster(&[(1, 1, Healthy), (2, 3, Healthy)]);
    let mut st = RoundRobinState::default();
    for _ in 0..5 {
        pick_round_robin(&a, &mut st);
    }
    let picks: Vec<u16> = (0..4)
        .map(|_| pick_round_robin(&b, &mut st).unwrap().address.port())
        .collect();
    assert_eq!(picks.iter().filter(|p| **p == 2).count(), 3, "{picks:?}");
}

#[test]
fn no_routable_host() {
    let c = cluster(&[(1, 1, HealthStatus::Draining)]);
    assert!(pick_round_robin(&c, &mut RoundRobinState::default()).is_none());
}

#[test]
fn round_robin_starts_at_a_random_position_then_rotates_without_rng() {
    let c = build(LbPolicy::RoundRobin, 50, &healthy(4));
    let calls = Cell::new(0);
    let mut rng = || {
        calls.set(calls.get() + 1);
        at(2, 4)
    };
    let mut lb = ClusterLb::default();
    let got = run(&mut lb, &c, &none(), |_| 0, &mut rng, 6);
    assert_eq!(got, [3, 4, 1, 2, 3, 4]);
    assert_eq!(calls.get(), 1, "only the first build draws the start");
}

#[test]
fn weighted_round_robin_skips_a_random_number_of_initial_picks() {
    let c = build(
        LbPolicy::RoundRobin,
        50,
        &[(5, Healthy), (1, Healthy), (1, Healthy)],
    );
    let base = fresh(&c, |_| 0, &mut || 0, 9);
    assert_eq!(base[..7], [1, 1, 1, 1, 1, 2, 3]);
    // A shard whose rng says "skip 2" runs the same schedule 2 picks ahead.
    let mut lb = ClusterLb::default();
    let skipped = run(&mut lb, &c, &none(), |_| 0, &mut || at(2, 3), 7);
    assert_eq!(skipped, base[2..]);
    let many = run(&mut lb, &c, &none(), |_| 0, &mut || at(2, 3), 7000);
    assert_eq!(counts(&many, 3), [5000, 1000, 1000]);
}

#[test]
fn an_ejection_elsewhere_keeps_the_schedule_running() {
    let c = build(
        LbPolicy::RoundRobin,
        50,
        &[(5, Healthy), (1, Healthy), (1, Healthy)],
    );
    let mut lb = ClusterLb::default();
    let first = run(&mut lb, &c, &none(), |_| 0, &mut || 0, 3);
    // Epoch 1 ejects a host of some other cluster: same candidates here.
    let other = EjectedSet::new(1, [HostId(999)]);
    let rest = run(&mut lb, &c, &other, |_| 0, &mut || 0, 6);
    let all = [first, rest].concat();
    assert_eq!(all, fresh(&c, |_| 0, &mut || 0, 9));
}

#[test]
fn random_is_uniform_over_candidates_and_ignores_weights() {
    let c = build(
        LbPolicy::Random,
        50,
        &[
            (1, Healthy),
            (2, Healthy),
            (3, Healthy),
            (4, Healthy),
            (9, Unhealthy),
        ],
    );
    let mut rng = xorshift(0x2545_F491_4F6C_DD1D);
    let got = fresh(&c, |_| 0, &mut rng, 10_000);
    let n = counts(&got, 5);
    for k in &n[..4] {
        assert!((2300..2700).contains(k), "{n:?}");
    }
    assert_eq!(n[4], 0, "unhealthy host picked outside panic");
}

#[test]
fn least_request_samples_without_replacement() {
    let c = build(least(2, 1.0), 50, &healthy(3));
    let active = |id: HostId| [9, 0, 0][c.hosts.iter().position(|h| h.id == id).unwrap()];
    // The rng always says "the first remaining slot": with replacement both
    // draws would be host 1 (9 active); without, the second is another host.
    let got = fresh(&c, active, &mut || 1, 100);
    assert!(got.iter().all(|p| *p == 2), "{got:?}");

    // Random samples: the busiest host never wins a pair of distinct hosts;
    // host 1 wins every pair it is in (2/3), host 2 the pair {2, 3} (1/3).
    let active = |id: HostId| [0, 1, 9][c.hosts.iter().position(|h| h.id == id).unwrap()];
    let mut rng = xorshift(7);
    let got = fresh(&c, active, &mut rng, 9000);
    let n = counts(&got, 3);
    assert_eq!(n[2], 0, "{n:?}");
    assert!((5700..6300).contains(&n[0]), "{n:?}");
}

#[test]
fn least_request_never_picks_the_same_host_twice_in_a_sample() {
    // 2 of 2 hosts: always the one with fewer active requests (sampling
    // with replacement would pick host 2 about a quarter of the time).
    for choices in [2, 10] {
        let c = build(least(choices, 1.0), 50, &healthy(2));
        let active = |id: HostId| if id == c.hosts[0].id { 1 } else { 4 };
        let mut rng = xorshift(11);
        let got = fresh(&c, active, &mut rng, 1000);
        assert!(got.iter().all(|p| *p == 1), "{got:?}");
    }
}

#[test]
fn least_request_scans_all_hosts_when_choices_cover_them() {
    for choices in [3, 5, 10] {
        let c = build(least(choices, 1.0), 50, &healthy(3));
        let active = |id: HostId| [3, 1, 2][c.hosts.iter().position(|h| h.id == id).unwrap()];
        let mut rng = xorshift(3);
        let got = fresh(&c, active, &mut rng, 300);
        assert!(got.iter().all(|p| *p == 2), "{got:?}");
        // Ties: the scan starts at a random host, so ties spread.
        let got = fresh(&c, |_| 0, &mut rng, 3000);
        let n = counts(&got, 3);
        assert!(n.iter().all(|k| (800..1200).contains(k)), "{n:?}");
        // The first minimum from the start wins: start at host 3.
        let tie = |id: HostId| u32::from(id == c.hosts[1].id);
        let got = fresh(&c, tie, &mut || at(2, 3), 5);
        assert_eq!(got, [3; 5]);
    }
}

#[test]
fn least_request_strongly_prefers_fewer_active_requests() {
    let c = build(least(2, 1.0), 50, &healthy(2));
    let active = |id: HostId| if id == c.hosts[0].id { 0 } else { 10 };
    let mut rng = xorshift(5);
    let got = fresh(&c, active, &mut rng, 1000);
    assert!(counts(&got, 2)[0] > 900, "{:?}", counts(&got, 2));

    // A frozen host (its requests never finish) among 8 fast ones gets one
    // request and then none: every sample holding it holds a free host too.
    let c = build(least(2, 1.0), 50, &healthy(8));
    let stuck = Cell::new(0u32);
    let active = |id: HostId| if id == c.hosts[0].id { stuck.get() } else { 0 };
    let mut lb = ClusterLb::default();
    for _ in 0..1000 {
        let pick = lb.pick(&c, &none(), active, &mut rng).unwrap();
        if pick.host.id == c.hosts[0].id {
            stuck.set(stuck.get() + 1);
        }
    }
    assert!(stuck.get() <= 1, "{}", stuck.get());
}

#[test]
fn weighted_least_request_follows_weights_then_load() {
    let hosts = [(1, Healthy), (3, Healthy)];
    let picks = |bias: f64, loaded: u32, n: usize| {
        let c = build(least(2, bias), 50, &hosts);
        let active = |id: HostId| if id == c.hosts[1].id { loaded } else { 0 };
        counts(&fresh(&c, active, &mut || 0, n), 2)
    };
    // Equal load: plain weights, 1:3.
    assert_eq!(picks(1.0, 0, 4000), [1000, 3000]);
    // Host 2 has 5 active: 3 / 6 = 0.5 against 1, so host 1 gets 2/3.
    let n = picks(1.0, 5, 6000);
    assert!(n[0].abs_diff(4000) <= 2, "{n:?}");
    // Bias 0 ignores load.
    assert_eq!(picks(0.0, 5, 4000), [1000, 3000]);
    // Bias 2 (powf): 3 / 36 against 1, host 1 gets 12/13.
    let n = picks(2.0, 5, 13_000);
    assert!(n[0].abs_diff(12_000) <= 2, "{n:?}");
}

#[test]
fn weighted_least_request_reweighs_a_host_when_it_is_requeued() {
    let c = build(least(2, 1.0), 50, &[(1, Healthy), (3, Healthy)]);
    let load = Cell::new(0);
    let active = |id: HostId| if id == c.hosts[1].id { load.get() } else { 0 };
    let mut lb = ClusterLb::default();
    let before = run(&mut lb, &c, &none(), active, &mut || 0, 400);
    assert_eq!(counts(&before, 2), [100, 300]);
    // Host 2 gets loaded without any rebuild: its next re-queues stretch.
    load.set(5);
    let after = run(&mut lb, &c, &none(), active, &mut || 0, 600);
    let n = counts(&after, 2);
    assert!(n[0].abs_diff(400) <= 5, "{n:?}");
}

#[test]
fn ejected_hosts_are_skipped_and_a_new_epoch_rebuilds() {
    let c = build(LbPolicy::RoundRobin, 50, &healthy(3));
    let mut lb = ClusterLb::default();
    let ejected = EjectedSet::new(1, [c.hosts[1].id]);
    let got = run(&mut lb, &c, &ejected, |_| 0, &mut || 0, 4);
    assert_eq!(got, [1, 3, 1, 3]);
    // Lists are cached by epoch: same epoch, still the old lists.
    let got = run(&mut lb, &c, &EjectedSet::new(1, []), |_| 0, &mut || 0, 2);
    assert_eq!(got, [1, 3]);
    // A new epoch brings host 2 back (the cursor carries on).
    let got = run(&mut lb, &c, &EjectedSet::new(2, []), |_| 0, &mut || 0, 3);
    assert_eq!(counts(&got, 3), [1, 1, 1]);

    for policy in [LbPolicy::Random, least(2, 1.0), least(3, 1.0)] {
        let c = build(policy, 50, &healthy(4));
        let ejected = EjectedSet::new(1, [c.hosts[2].id]);
        let mut rng = xorshift(9);
        let got = run(
            &mut ClusterLb::default(),
            &c,
            &ejected,
            |_| 0,
            &mut rng,
            500,
        );
        let n = counts(&got, 4);
        assert!(
            n[2] == 0 && n.iter().filter(|k| **k > 0).count() == 3,
            "{policy:?} {n:?}"
        );
    }
}

fn policies() -> [LbPolicy; 5] {
    [
        LbPolicy::RoundRobin,
        LbPolicy::Random,
        least(2, 1.0),
        least(10, 1.0),
        least(2, 0.5),
    ]
}

#[test]
fn draining_hosts_are_never_picked_even_in_panic() {
    for weights in [[1, 1, 1, 1], [4, 1, 2, 3]] {
        for policy in policies() {
            let health = [Draining, Unhealthy, Timeout, Unhealthy];
            let hosts: Vec<_> = weights.into_iter().zip(health).collect();
            let c = build(policy, 50, &hosts);
            let mut lb = ClusterLb::default();
            let mut rng = xorshift(13);
            for _ in 0..300 {
                let pick = lb.pick(&c, &none(), |_| 0, &mut rng).unwrap();
                assert!(pick.panic);
                assert_ne!(pick.host.health, Draining, "{policy:?}");
            }
            let c = build(policy, 50, &[(1, Draining), (2, Draining)]);
            assert!(lb.pick(&c, &none(), |_| 0, &mut rng).is_none());
        }
    }
}

#[test]
fn draining_hosts_do_not_count_toward_panic() {
    // 1 healthy of 2 non-draining hosts is 50%: no panic (1 of 4 would be).
    let c = build(
        LbPolicy::RoundRobin,
        50,
        &[(1, Draining), (1, Draining), (1, Healthy), (1, Unhealthy)],
    );
    let mut lb = ClusterLb::default();
    for _ in 0..4 {
        let pick = lb.pick(&c, &none(), |_| 0, &mut || 0).unwrap();
        assert_eq!((pick.host.address.port(), pick.panic), (3, false));
    }
}

#[test]
fn panic_threshold_math() {
    let panics = |threshold: u32, health: &[HealthStatus]| {
        let hosts: Vec<_> = health.iter().map(|h| (1, *h)).collect();
        let c = build(LbPolicy::RoundRobin, threshold, &hosts);
        let mut lb = ClusterLb::default();
        let picks: Vec<_> = (0..health.len() * 2)
            .map(|_| lb.pick(&c, &none(), |_| 0, &mut || 0).unwrap())
            .collect();
        let panic = picks[0].panic;
        assert!(picks.iter().all(|p| p.panic == panic));
        // In panic every host is used, otherwise only the healthy ones.
        let used = picks
            .iter()
            .map(|p| p.host.address.port())
            .collect::<Vec<_>>();
        let n = counts(&used, health.len());
        for (k, h) in n.iter().zip(health) {
            assert_eq!(*k > 0, panic || h.is_routable(), "{n:?}");
        }
        panic
    };
    assert!(panics(50, &[Healthy, Unhealthy, Unhealthy]));
    assert!(!panics(50, &[Healthy, Healthy, Unhealthy]));
    assert!(
        !panics(50, &[Healthy, Unhealthy]),
        "exactly 50% is not panic"
    );
    assert!(panics(51, &[Healthy, Unhealthy]));
    assert!(panics(100, &[Healthy, Healthy, Timeout]));
    // 3 of 4 healthy: 140 % × 3/4 ≥ 100 %, fully available, so no panic
    // whatever the threshold (Envoy's overprovisioning).
    assert!(!panics(100, &[Healthy, Healthy, Degraded, Timeout]));
    assert!(!panics(100, &[Healthy, Unknown, Degraded]));
    assert!(!panics(
        0,
        &[Healthy, Unhealthy, Unhealthy, Timeout, Unhealthy]
    ));
    assert!(!panics(101, &[Healthy; 3]), "capped at 100%");

    // Threshold 0 never panics: everything ejected leaves nothing to pick.
    let c = build(LbPolicy::RoundRobin, 0, &healthy(2));
    let all = EjectedSet::new(1, c.hosts.iter().map(|h| h.id));
    assert!(ClusterLb::default()
        .pick(&c, &all, |_| 0, &mut || 0)
        .is_none());
}

#[test]
fn everything_ejected_panics_onto_an_ejected_host() {
    for policy in policies() {
        let c = build(
            policy,
            CommonLb::default().healthy_panic_threshold,
            &healthy(3),
        );
        let all = EjectedSet::new(4, c.hosts.iter().map(|h| h.id));
        let mut lb = ClusterLb::default();
        let mut rng = xorshift(17);
        let pick = lb.pick(&c, &all, |_| 0, &mut rng).unwrap();
        assert!(pick.panic && all.contains(pick.host.id), "{policy:?}");
        // Un-ejecting ends the panic.
        let pick = lb
            .pick(&c, &EjectedSet::new(5, []), |_| 0, &mut rng)
            .unwrap();
        assert!(!pick.panic);
    }
}

#[test]
fn no_host_at_all() {
    for policy in policies() {
        let c = build(policy, 50, &[]);
        let mut lb = ClusterLb::default();
        assert!(lb.pick(&c, &none(), |_| 0, &mut || 0).is_none());
    }
}

#[test]
fn a_single_candidate_needs_no_randomness() {
    for policy in policies() {
        let c = build(policy, 50, &[(1, Unhealthy), (1, Healthy)]);
        let mut rng = || -> u64 { panic!("rng used for one candidate") };
        let pick = ClusterLb::default()
            .pick(&c, &none(), |_| 0, &mut rng)
            .unwrap();
        assert_eq!((pick.host.address.port(), pick.panic), (2, false));
    }
}
