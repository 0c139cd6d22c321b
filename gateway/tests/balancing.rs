//! Load-balancing policies, healthy panic and outlier detection end to end:
//! real gateway shards in front of real h2 demo backends (some made slow or
//! failing through `BackendOptions`), configured in code or through the
//! in-process ADS server.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use demo_backend::{BackendHandle, BackendOptions};
use engine::{ConsecutiveErrors, LbPolicy, OutlierDetection};
use support::control_plane::*;
use support::*;
use testsupport::resources::*;
use testsupport::{type_url, AdsServer};

const INTERVAL: Duration = Duration::from_millis(200);
const BASE_EJECTION: Duration = Duration::from_secs(1);

fn backend_opts(name: &str, f: impl FnOnce(&mut BackendOptions)) -> BackendHandle {
    let mut o = BackendOptions::new(name);
    f(&mut o);
    backend_with(o)
}

/// Outlier detection with only consecutive_5xx (5 in a row), sweeping every
/// [`INTERVAL`], ejecting for [`BASE_EJECTION`].
fn consecutive_5xx() -> OutlierDetection {
    OutlierDetection {
        interval: INTERVAL,
        base_ejection_time: BASE_EJECTION,
        max_ejection_time: Duration::from_secs(10),
        max_ejection_percent: 50,
        consecutive_5xx: Some(ConsecutiveErrors {
            threshold: 5,
            enforcement_percentage: 100,
        }),
        consecutive_gateway_failure: None,
        success_rate: None,
        failure_percentage: None,
        uneject_on_active_check: true,
    }
}

fn is_ejected(admin: SocketAddr, cluster: &str, host: SocketAddr) -> bool {
    host_status(admin, cluster, host)["ejected"] == true
}

/// The policy `/clusters` shows for `cluster`.
fn lb_policy(admin: SocketAddr, cluster: &str) -> String {
    let (_, body) = admin_get(admin, "/clusters?format=json");
    let v: serde_json::Value = serde_json::from_str(&body).expect("clusters JSON");
    v["cluster_statuses"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == cluster))
        .and_then(|c| c["lb_policy"].as_str())
        .unwrap_or_else(|| panic!("no cluster {cluster}: {body}"))
        .to_string()
}

/// Everything routed to EDS cluster `echo` (with `cluster_extra` YAML
/// fields) over `backends`, from the ADS server, on one shard.
fn ads_world(
    backends: &[SocketAddr],
    cluster_extra: &str,
) -> (AdsServer, gateway::GatewayHandle, SocketAddr) {
    support::control_plane::ads_world(backends, cluster_extra, &[], 1)
}

#[test]
fn failing_host_is_ejected_within_three_intervals_and_returns_after_base_ejection_time() {
    let (b1, b2) = (backend("b1"), backend("b2"));
    let bad = backend_opts("bad", |o| o.status = Some(503));
    let addrs = [b1.addr(), b2.addr(), bad.addr()];
    let c = cluster_with("c", &addrs, |c| {
        c.outlier_detection = Some(consecutive_5xx())
    });
    let session = cookie_session("sess", Some("/"), false);
    // Two shards: each counts its own requests, the control shard sweeps
    // their sums and pushes the ejection to both.
    let gw = start(session_bootstrap(c, Some(session)), 2);
    let (addr, admin) = (gw.listener("ingress").unwrap(), gw.admin_addr.unwrap());

    let load = Load::start(addr, 4, "/", &[]);
    let took = wait_until(3 * INTERVAL, "ejection", || {
        is_ejected(admin, "c", bad.addr())
    });
    let ejected_at = Instant::now();
    let host = host_status(admin, "c", bad.addr());
    assert_eq!(host["ejection"]["reason"], "consecutive_5xx", "{host}");
    assert_eq!(metric(admin, "gateway_outlier_ejections_active"), 1.0);
    let series = "gateway_outlier_ejections_total{algorithm=\"consecutive_5xx\",enforced=\"true\"}";
    assert_eq!(metric(admin, series), 1.0);
    // And under Envoy's names, for this cluster.
    for (name, v) in [
        ("ejections_active", 1.0),
        ("ejections_detected_consecutive_5xx", 1.0),
        ("ejections_enforced_consecutive_5xx", 1.0),
        ("ejections_enforced_total", 1.0),
        ("ejections_consecutive_5xx", 1.0),
        ("ejections_total", 1.0),
        ("ejections_overflow", 0.0),
        ("ejections_enforced_success_rate", 0.0),
    ] {
        let series = format!("envoy_cluster_outlier_detection_{name}{{envoy_cluster_name=\"c\"}}");
        assert_eq!(envoy_metric(admin, &series), v, "{series}");
    }
    assert!(load.count("bad 503") >= 5, "{:?}", load.counts());

    // Ejected: no more requests reach it (the set reaches the shard right
    // after the admin view; allow it a moment), the others serve them all.
    std::thread::sleep(Duration::from_millis(50));
    let (bad_before, good_before) = (bad.requests(), load.count("b1") + load.count("b2"));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(bad.requests(), bad_before, "an ejected host got requests");
    assert!(load.count("b1") + load.count("b2") > good_before + 20);
    assert!(
        is_ejected(admin, "c", bad.addr()),
        "ejected for base_ejection_time"
    );

    // A session pinned to the ejected host moves to a serving one.
    let pair = cookie_for("sess", bad.addr());
    let r = get_replies(addr, "/", &[("cookie", pair.as_str())], 1).remove(0);
    assert_eq!(r.status, 200, "{r:?}");
    let set = r.set_cookie().expect("the session moves");
    assert_ne!(cookie_host(&cookie_pair(set)), bad.addr());
    let series = "gateway_session_override{outcome=\"host_ejected\"}";
    assert_eq!(metric(admin, series), 1.0);

    // Back after base_ejection_time (un-ejection waits for a sweep).
    wait_until(BASE_EJECTION + 2 * INTERVAL, "un-ejection", || {
        !is_ejected(admin, "c", bad.addr())
    });
    let out_for = ejected_at.elapsed();
    assert!(
        out_for >= BASE_EJECTION - INTERVAL / 2,
        "un-ejected after {out_for:?}"
    );
    assert_eq!(
        metric(admin, "gateway_outlier_unejections_total{cause=\"timer\"}"),
        1.0
    );
    // ... and it receives traffic again (and, still failing, is soon ejected
    // again).
    let n = bad.requests();
    wait_until(
        Duration::from_secs(1),
        "traffic to the returned host",
        || bad.requests() > n,
    );
    let series = "gateway_outlier_ejections_total{algorithm=\"consecutive_5xx\",enforced=\"true\"}";
    wait_until(3 * INTERVAL, "second ejection", || {
        metric(admin, series) == 2.0
    });
    let seen = load.stop();
    assert!(
        seen.keys()
            .all(|k| ["b1", "b2", "bad 503"].contains(&k.as_str())),
        "{seen:?}"
    );
    println!("ejected {took:?} after the first request, out for {out_for:?}: {seen:?}");
    gw.shutdown();
}

#[test]
fn grpc_trailers_only_unavailable_counts_as_a_failure_not_found_does_not() {
    let good = backend("good");
    let unavailable = backend_opts("unavailable", |o| o.grpc_status = Some(14));
    let not_found = backend_opts("not_found", |o| o.grpc_status = Some(5));
    let other = backend("other");
    let addrs = [
        good.addr(),
        unavailable.addr(),
        not_found.addr(),
        other.addr(),
    ];
    let c = cluster_with("c", &addrs, |c| {
        c.outlier_detection = Some(consecutive_5xx())
    });
    let gw = start(session_bootstrap(c, None), 1);
    let (addr, admin) = (gw.listener("ingress").unwrap(), gw.admin_addr.unwrap());

    let grpc = [("content-type", "application/grpc"), ("te", "trailers")];
    let load = Load::start_with(addr, 4, "POST", "/pkg.Svc/Call", &grpc);
    // UNAVAILABLE is 503 to outlier detection (Envoy's grpcToHttpStatus).
    wait_until(3 * INTERVAL, "ejection", || {
        is_ejected(admin, "c", unavailable.addr())
    });
    // NOT_FOUND is 404: not a failure, never ejected (max_ejection_percent
    // 50 of 4 hosts would allow it).
    std::thread::sleep(3 * INTERVAL);
    assert!(!is_ejected(admin, "c", not_found.addr()));
    assert!(load.count("not_found") > 20, "{:?}", load.counts());
    assert_eq!(metric(admin, "gateway_outlier_ejections_active"), 1.0);
    let seen = load.stop();
    assert!(seen.keys().all(|k| !k.contains(' ')), "{seen:?}");
    gw.shutdown();
}

/// Closed-loop load, 8 in flight, for `run`: replies per backend.
fn spread(addr: SocketAddr, run: Duration) -> (u64, u64) {
    let load = Load::start(addr, 8, "/", &[]);
    std::thread::sleep(run);
    let seen = load.stop();
    assert!(seen.keys().all(|k| k == "fast" || k == "slow"), "{seen:?}");
    let get = |k: &str| seen.get(k).copied().unwrap_or(0);
    (get("fast"), get("slow"))
}

#[test]
fn least_request_sends_a_slow_backend_less_than_half_the_traffic_of_a_fast_one() {
    let fast = backend("fast");
    let slow = backend_opts("slow", |o| o.delay = Duration::from_millis(200));
    // LEAST_REQUEST from xDS.
    let (_server, gw, addr) = ads_world(&[fast.addr(), slow.addr()], "lb_policy: LEAST_REQUEST");
    let admin = gw.admin_addr.unwrap();
    assert_eq!(lb_policy(admin, "echo"), "LEAST_REQUEST");

    let (f, s) = spread(addr, Duration::from_secs(2));
    println!("least request: fast {f}, slow {s}");
    assert!(s > 0, "the slow backend still gets some");
    assert!(s * 2 < f, "fast {f}, slow {s}");
    let picks = metric(admin, "gateway_lb_picks_total{policy=\"least_request\"}");
    assert_eq!(picks, (f + s) as f64);
    gw.shutdown();
}

#[test]
fn round_robin_control_splits_evenly_between_slow_and_fast() {
    // The same load as above under round robin: each backend gets every
    // other pick, slow or not.
    let fast = backend("fast");
    let slow = backend_opts("slow", |o| o.delay = Duration::from_millis(200));
    let c = cluster_with("c", &[fast.addr(), slow.addr()], |c| {
        c.lb_policy = LbPolicy::RoundRobin
    });
    let gw = start(session_bootstrap(c, None), 1);
    let (f, s) = spread(gw.listener("ingress").unwrap(), Duration::from_secs(1));
    println!("round robin: fast {f}, slow {s}");
    assert!(s > 10 && f.abs_diff(s) <= 2, "fast {f}, slow {s}");
    gw.shutdown();
}

#[test]
fn random_policy_from_xds_uses_every_backend() {
    let bs = [backend("b1"), backend("b2"), backend("b3")];
    let addrs: Vec<SocketAddr> = bs.iter().map(BackendHandle::addr).collect();
    let (_server, gw, addr) = ads_world(&addrs, "lb_policy: RANDOM");
    let replies = get_replies(addr, "/", &[], 300);
    for name in ["b1", "b2", "b3"] {
        let n = replies.iter().filter(|r| r.backend() == name).count();
        // Binomial(300, 1/3): mean 100, sd ~8.2.
        assert!((50..=150).contains(&n), "{name}: {n}");
    }
    let admin = gw.admin_addr.unwrap();
    assert_eq!(
        metric(admin, "gateway_lb_picks_total{policy=\"random\"}"),
        300.0
    );
    gw.shutdown();
}

#[test]
fn healthy_panic_threshold_spreads_over_unhealthy_hosts_unless_disabled() {
    let bs = [backend("ok"), backend("sick1"), backend("sick2")];
    let addrs: Vec<SocketAddr> = bs.iter().map(BackendHandle::addr).collect();
    let (server, gw, addr) = ads_world(&addrs, "");
    let health = [
        (addrs[0], HealthStatus::Healthy),
        (addrs[1], HealthStatus::Unhealthy),
        (addrs[2], HealthStatus::Unhealthy),
    ];
    push(
        &server,
        type_url::ENDPOINT,
        "e2",
        vec![cla_health("echo", &health)],
    );
    let served = |n| -> std::collections::BTreeSet<String> {
        get_replies(addr, "/", &[], n)
            .iter()
            .map(|r| r.backend().to_string())
            .collect()
    };
    // 1 healthy of 3 is below the default 50 %: panic, every host serves.
    assert_eq!(served(30).len(), 3);
    let admin = gw.admin_addr.unwrap();
    assert_eq!(metric(admin, "gateway_lb_healthy_panic_total"), 30.0);

    // healthy_panic_threshold 0 disables panic: only the healthy host.
    push(
        &server,
        type_url::CLUSTER,
        "c2",
        vec![eds_cluster_with(
            "echo",
            "common_lb_config: { healthy_panic_threshold: { value: 0 } }",
        )],
    );
    assert_eq!(served(30), ["ok".to_string()].into());
    assert_eq!(metric(admin, "gateway_lb_healthy_panic_total"), 30.0);
    gw.shutdown();
}

#[test]
fn invalid_outlier_detection_is_nacked_and_the_previous_cluster_keeps_serving() {
    let b1 = backend("b1");
    let good = "lb_policy: LEAST_REQUEST\noutlier_detection: { interval: 1s, consecutive_5xx: 3 }";
    let (server, gw, addr) = ads_world(&[b1.addr()], good);
    let admin = gw.admin_addr.unwrap();

    let cases = [
        (
            "outlier_detection: { max_ejection_percent: 101 }",
            "outlier_detection.max_ejection_percent",
        ),
        (
            "outlier_detection: { interval: 0s }",
            "outlier_detection.interval",
        ),
        (
            "common_lb_config: { healthy_panic_threshold: { value: 101 } }",
            "common_lb_config.healthy_panic_threshold",
        ),
    ];
    for (i, (bad, field)) in cases.into_iter().enumerate() {
        let version = format!("bad{i}");
        server.set(
            type_url::CLUSTER,
            &version,
            vec![eds_cluster_with("echo", bad)],
        );
        let nack = server.wait_for(WAIT, |r| {
            r.type_url == type_url::CLUSTER
                && r.error_detail
                    .as_ref()
                    .is_some_and(|(_, m)| m.contains(field))
        });
        assert_eq!(nack.version_info, "c1", "NACK names the version in use");
        let (code, message) = nack.error_detail.unwrap();
        assert_eq!(code, 3, "INVALID_ARGUMENT");
        assert!(message.starts_with("clusters[echo]."), "{message}");

        // The previous cluster keeps serving, policy and all.
        let replies = get_n(addr, "/", 3);
        assert!(
            replies.iter().all(|(s, b)| *s == 200 && b == "b1"),
            "{replies:?}"
        );
        assert_eq!(lb_policy(admin, "echo"), "LEAST_REQUEST");
    }
    let (_, dump) = admin_get(admin, "/config_dump");
    let dump: serde_json::Value = serde_json::from_str(&dump).unwrap();
    assert_eq!(dump["dynamic_active"]["clusters"][0]["version_info"], "c1");
    gw.shutdown();
}

#[test]
fn outlier_counts_from_before_detection_was_turned_back_on_are_dropped() {
    let good = backend("good");
    let bad = backend_opts("bad", |o| o.status = Some(503));
    let addrs = [good.addr(), bad.addr()];
    let with = |od: Option<OutlierDetection>| {
        session_bootstrap(
            cluster_with("c", &addrs, |c| c.outlier_detection = od),
            None,
        )
    };
    // Detection on, but sweeping too rarely to act within the test.
    let slow_sweeps = OutlierDetection {
        interval: Duration::from_secs(30),
        ..consecutive_5xx()
    };
    let gw = start(with(Some(slow_sweeps)), 1);
    let (addr, admin) = (gw.listener("ingress").unwrap(), gw.admin_addr.unwrap());
    // `bad` fails 10 in a row: its consecutive_5xx streak trips.
    let replies = get_n(addr, "/", 20);
    assert_eq!(replies.iter().filter(|(s, _)| *s == 503).count(), 10);

    // Off, then on again: A50 starts the timer afresh and resets the call
    // counters, so what happened before cannot eject anyone.
    gw.reload(with(None)).expect("reload");
    gw.reload(with(Some(consecutive_5xx()))).expect("reload");
    std::thread::sleep(3 * INTERVAL);
    assert!(
        !is_ejected(admin, "c", bad.addr()),
        "ejected on stale counts"
    );
    let series = "gateway_outlier_ejections_total{algorithm=\"consecutive_5xx\",enforced=\"true\"}";
    assert_eq!(metric(admin, series), 0.0);

    // Fresh failures still eject it.
    let load = Load::start(addr, 2, "/", &[]);
    wait_until(3 * INTERVAL, "ejection", || {
        is_ejected(admin, "c", bad.addr())
    });
    drop(load);
    gw.shutdown();
}
