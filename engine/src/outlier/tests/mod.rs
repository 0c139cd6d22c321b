//! Unit tests of outlier detection, and the helpers they share.

mod counters;
mod detectors;
mod ejection;

use std::time::{Duration, Instant};

use ahash::AHashMap;

use super::*;
use crate::config::{ConsecutiveErrors, FailurePercentageEjection, SuccessRateEjection};

const SEC: Duration = Duration::from_secs(1);

/// No detector, cap off: tests enable what they exercise.
fn config() -> OutlierDetection {
    OutlierDetection {
        interval: 10 * SEC,
        base_ejection_time: 30 * SEC,
        max_ejection_time: 300 * SEC,
        max_ejection_percent: 100,
        consecutive_5xx: None,
        consecutive_gateway_failure: None,
        success_rate: None,
        failure_percentage: None,
        uneject_on_active_check: true,
    }
}

fn consecutive(threshold: u32) -> Option<ConsecutiveErrors> {
    Some(ConsecutiveErrors {
        threshold,
        enforcement_percentage: 100,
    })
}

fn success_rate(stdev_factor: u32) -> Option<SuccessRateEjection> {
    Some(SuccessRateEjection {
        stdev_factor,
        enforcement_percentage: 100,
        minimum_hosts: 5,
        request_volume: 100,
    })
}

fn failure_percentage(threshold: u32) -> Option<FailurePercentageEjection> {
    Some(FailurePercentageEjection {
        threshold,
        enforcement_percentage: 100,
        minimum_hosts: 5,
        request_volume: 50,
    })
}

fn ids(n: u32) -> Vec<HostId> {
    (0..n).map(HostId).collect()
}

/// Reports of hosts 0, 1, ... with (success, failure) counts.
fn counts(c: &[(u64, u64)]) -> AHashMap<HostId, HostReport> {
    c.iter()
        .enumerate()
        .map(|(i, &(success, failure))| {
            let report = HostReport {
                success,
                failure,
                ..HostReport::default()
            };
            (HostId(i as u32), report)
        })
        .collect()
}

fn flagged(id: u32, consecutive_5xx: bool, gateway: bool) -> AHashMap<HostId, HostReport> {
    let report = HostReport {
        consecutive_5xx,
        consecutive_gateway_failure: gateway,
        ..HostReport::default()
    };
    [(HostId(id), report)].into_iter().collect()
}

/// An rng that returns `values` in order and fails the test on an
/// unexpected draw.
fn scripted(values: &[u32]) -> impl FnMut() -> u32 + '_ {
    let mut it = values.iter();
    move || *it.next().expect("unexpected rng draw")
}

fn never() -> impl FnMut() -> u32 {
    || panic!("unexpected rng draw")
}

fn detector(c: &OutlierDetection, hosts: u32, t0: Instant) -> ClusterOutlier {
    let mut d = ClusterOutlier::new();
    d.update(Some(c), &ids(hosts), t0);
    d
}

fn ejected(d: &ClusterOutlier) -> Vec<HostId> {
    d.ejected().collect()
}
