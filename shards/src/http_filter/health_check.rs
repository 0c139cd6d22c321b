//! The health check filter (Envoy's `envoy.filters.http.health_check`): a request its matchers take is a load balancer's health check, answered here (200, or 503 when the gateway is failing its health checks or a cluster has too few healthy hosts) or passed on to the upstream, once per `cache_time` with the others answered from its status.

use std::sync::atomic::Ordering;

use engine::HealthCheckFilter;

use super::{FilterCx, Flow, HttpFilter, Reply, RequestFlow, RequestHead, ResponseHead};
use crate::stats::filters::Both;
use crate::stats::HealthCheckStats;

const CLUSTER_HEADER: &[u8] = b"x-envoy-upstream-healthchecked-cluster";
const FAIL_HEADER: &[u8] = b"x-envoy-immediate-health-check-fail";

/// What the filter made of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// A health check answered here: its reply carries the fields.
    Answered,
    /// A health check passed on: its response gets the cluster field,
    /// and its status goes to the cache.
    Forwarded,
}

fn is_health_check(f: &HealthCheckFilter, head: &RequestHead<'_>) -> bool {
    f.headers.iter().all(|m| head.matches(m))
}

/// The status the gateway answers a health check with, by its clusters'
/// health, counted.
fn by_clusters(f: &HealthCheckFilter, cx: &FilterCx<'_>, stats: Both<'_, HealthCheckStats>) -> u16 {
    for (name, min) in &f.min_healthy {
        let Some(cluster) = cx.snapshot.cluster(name) else {
            stats.inc(|s| &s.failed_cluster_not_found);
            return 503;
        };
        let total = cluster.hosts.len();
        if total == 0 {
            if *min > 0.0 {
                stats.inc(|s| &s.failed_cluster_empty);
                return 503;
            }
            continue;
        }
        let healthy = cluster
            .hosts
            .iter()
            .filter(|h| {
                matches!(
                    h.health,
                    engine::HealthStatus::Healthy | engine::HealthStatus::Unknown
                ) && !h.excluded()
            })
            .count();
        if (healthy as f64) < total as f64 * min / 100.0 {
            stats.inc(|s| &s.failed_cluster_unhealthy);
            return 503;
        }
    }
    200
}

fn reply(status: u16, cx: &FilterCx<'_>, failing: bool) -> Reply {
    let flag = if (200..300).contains(&status) {
        ""
    } else {
        "LH"
    };
    let mut reply = Reply::new(status, "", flag);
    let _ = reply
        .fields
        .append(CLUSTER_HEADER, cx.snapshot.node.cluster.as_bytes());
    if failing {
        let _ = reply.fields.append(FAIL_HEADER, b"true");
    }
    reply
}

impl HttpFilter for HealthCheckFilter {
    fn on_request_headers(&self, cx: &mut FilterCx<'_>, head: &mut RequestHead<'_>) -> RequestFlow {
        if !is_health_check(self, head) {
            return RequestFlow::Continue;
        }
        // Answered here or passed on, it is a health check (Envoy's
        // stream info says so either way).
        *cx.health_check = true;
        let stats = cx.counters::<HealthCheckStats>();
        let failing = cx.shard.health_failed();
        if failing {
            // Being taken out of rotation: every check fails at once.
            stats.inc(|s| &s.request_total);
            stats.inc(|s| &s.failed);
            cx.set_state(Check::Answered);
            return RequestFlow::Reply(reply(503, cx, true));
        }
        if self.pass_through {
            if let Some(period) = self.cache_time {
                let cache = &self.cache;
                let now = (cx.now.saturating_duration_since(cache.born).as_nanos()
                    / period.as_nanos().max(1)) as u64
                    + 1;
                // Periods only move forward: a connection whose clock
                // reading is older cannot take a period back.
                let first = cache.period.fetch_max(now, Ordering::Relaxed) < now;
                let status = cache.status.load(Ordering::Relaxed) as u16;
                if !first && status != 0 {
                    stats.inc(|s| &s.cached_response);
                    cx.set_state(Check::Answered);
                    return RequestFlow::Reply(reply(status, cx, false));
                }
            }
            cx.set_state(Check::Forwarded);
            return RequestFlow::Continue;
        }
        stats.inc(|s| &s.request_total);
        let status = by_clusters(self, cx, stats);
        match status {
            200 => stats.inc(|s| &s.ok),
            _ => stats.inc(|s| &s.failed),
        }
        cx.set_state(Check::Answered);
        RequestFlow::Reply(reply(status, cx, false))
    }

    fn on_response_headers(&self, cx: &mut FilterCx<'_>, head: &mut ResponseHead<'_>) -> Flow {
        match cx.state::<Check>().copied() {
            Some(Check::Answered) => {}
            Some(Check::Forwarded) => {
                let _ = head.append(CLUSTER_HEADER, cx.snapshot.node.cluster.as_bytes());
                if self.cache_time.is_some() && !head.is_local() {
                    self.cache
                        .status
                        .store(u32::from(head.status()), Ordering::Relaxed);
                }
                if cx.shard.health_failed() {
                    let _ = head.append(FAIL_HEADER, b"true");
                }
            }
            // Any other request, while the gateway fails its checks, says
            // so to whoever routes to it (Envoy's).
            None if cx.shard.health_failed() => {
                let _ = head.append(FAIL_HEADER, b"true");
            }
            None => {}
        }
        Flow::Continue
    }
}
