//! `Cluster.circuit_breakers` → `engine::CircuitBreakers`, Envoy's
//! defaults filled in.

use engine::{CircuitBreakers, CircuitThresholds};

use super::common::reject_set;
use crate::error::{Error, Path, Result};
use crate::pb::envoy::config::cluster::v3 as pb;
use crate::pb::envoy::config::core::v3::RoutingPriority;

/// Validates `circuit_breakers`: one `thresholds` entry per priority,
/// `per_host_thresholds` with only `max_connections` (as Envoy allows).
/// `track_remaining` is accepted (the gateway's `/stats` always show what
/// is held); `retry_budget` on `thresholds`, not on `per_host_thresholds`.
pub fn circuit_breakers(c: Option<&pb::CircuitBreakers>, path: &Path) -> Result<CircuitBreakers> {
    let Some(c) = c else {
        return Ok(CircuitBreakers::default());
    };
    let mut out = CircuitBreakers::default();
    let mut seen = [false; 2];
    for (i, t) in c.thresholds.iter().enumerate() {
        let tpath = path.field("thresholds").index(i);
        let (slot, p) = match RoutingPriority::try_from(t.priority) {
            Ok(RoutingPriority::Default) => (&mut out.default, 0),
            Ok(RoutingPriority::High) => (&mut out.high, 1),
            Err(_) => {
                return Err(Error::invalid(
                    tpath.field("priority"),
                    format!("unknown value {}", t.priority),
                ))
            }
        };
        if std::mem::replace(&mut seen[p], true) {
            return Err(Error::invalid(
                tpath.field("priority"),
                "a second thresholds entry for this priority",
            ));
        }
        let d = CircuitThresholds::default();
        *slot = CircuitThresholds {
            max_connections: t.max_connections.unwrap_or(d.max_connections),
            max_pending_requests: t.max_pending_requests.unwrap_or(d.max_pending_requests),
            max_requests: t.max_requests.unwrap_or(d.max_requests),
            max_retries: t.max_retries.unwrap_or(d.max_retries),
            max_connection_pools: t.max_connection_pools,
            retry_budget: match &t.retry_budget {
                Some(b) => Some(retry_budget(b, &tpath.field("retry_budget"))?),
                None => None,
            },
        };
    }
    for (i, t) in c.per_host_thresholds.iter().enumerate() {
        let tpath = path.field("per_host_thresholds").index(i);
        reject_set!(
            tpath,
            t,
            max_pending_requests,
            max_requests,
            max_retries,
            retry_budget,
            max_connection_pools
        );
        if t.priority != RoutingPriority::Default as i32 {
            // Only routes of priority DEFAULT exist here.
            continue;
        }
        out.per_host_max_connections = t.max_connections;
    }
    Ok(out)
}

/// `retry_budget`, Envoy's defaults (20 %, at least 3) filled in.
fn retry_budget(
    b: &pb::circuit_breakers::thresholds::RetryBudget,
    path: &Path,
) -> Result<engine::RetryBudget> {
    let percent = b.budget_percent.as_ref().map_or(20.0, |p| p.value);
    if !(0.0..=100.0).contains(&percent) {
        return Err(Error::invalid(
            path.field("budget_percent").field("value"),
            format!("{percent} is not within 0..=100"),
        ));
    }
    Ok(engine::RetryBudget {
        basis_points: (percent * 100.0).round() as u32,
        min_concurrency: b.min_retry_concurrency.unwrap_or(3),
    })
}
