//! The fault injection filter (Envoy's `envoy.filters.http.fault`): for a share of the requests it matches, a delay before the request goes on (the stream paused on a timer) and/or an abort answered here, fixed or asked for by the request's `x-envoy-fault-*` fields, bounded by `max_active_faults` across shards.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use engine::{AbortKind, DelayKind, Fault, Fraction, PerRoute, RouteAction};

use super::{FilterCx, HttpFilter, Reply, RequestFlow, RequestHead};
use crate::stats::filters::OwnedBoth;
use crate::stats::FaultStats;

const DELAY_HEADER: &[u8] = b"x-envoy-fault-delay-request";
const DELAY_PERCENT_HEADER: &[u8] = b"x-envoy-fault-delay-request-percentage";
const ABORT_HEADER: &[u8] = b"x-envoy-fault-abort-request";
const ABORT_GRPC_HEADER: &[u8] = b"x-envoy-fault-abort-grpc-request";
const ABORT_PERCENT_HEADER: &[u8] = b"x-envoy-fault-abort-request-percentage";
const NODE_HEADER: &str = "x-envoy-downstream-service-node";

/// The stream holds one of the filter's active faults until it ends (its
/// state dropped), counted in the filter's gauge and the shard's; and its
/// delay's timer, cancelled with it (a stream that ends while delayed
/// leaves no task behind).
struct Active(
    Arc<AtomicU64>,
    OwnedBoth<FaultStats>,
    Option<glommio::Task<()>>,
);

fn number<T: std::str::FromStr>(v: Option<&[u8]>) -> Option<T> {
    std::str::from_utf8(v?).ok()?.trim().parse().ok()
}

/// The share a header-driven fault applies to: the request's
/// `…-percentage` (a numerator over the config's denominator), capped at
/// the config's.
fn share(config: Fraction, header: Option<&[u8]>) -> Fraction {
    match number::<u32>(header) {
        Some(n) => Fraction {
            numerator: n.min(config.numerator),
            ..config
        },
        None => config,
    }
}

/// Whether the fault applies to this request at all.
fn matches(f: &Fault, cx: &FilterCx<'_>, head: &RequestHead<'_>) -> bool {
    if let Some(cluster) = &f.upstream_cluster {
        let routed = match cx.route.map(|r| &r.action) {
            Some(RouteAction::Forward(a)) => match &a.target {
                engine::ClusterTarget::Cluster(c) => Some(c.as_bytes()),
                engine::ClusterTarget::Header(h) => head.get(h.as_bytes()),
                engine::ClusterTarget::Weighted(_) => None,
            },
            _ => None,
        };
        if routed != Some(cluster.as_bytes()) {
            return false;
        }
    }
    if !f.headers.iter().all(|m| head.matches(m)) {
        return false;
    }
    if !f.downstream_nodes.is_empty() {
        let node = head
            .get(NODE_HEADER.as_bytes())
            .and_then(|v| std::str::from_utf8(v).ok());
        let Some(node) = node else {
            return false;
        };
        if !f.downstream_nodes.iter().any(|n| n == node) {
            return false;
        }
    }
    true
}

/// The delay this request gets, if any.
fn delay(f: &Fault, cx: &FilterCx<'_>, head: &RequestHead<'_>) -> Option<Duration> {
    let d = f.delay?;
    let (duration, share) = match d.kind {
        DelayKind::Fixed(t) => (t, d.percentage),
        DelayKind::Header => {
            let ms = number::<u64>(head.get(DELAY_HEADER)).filter(|&ms| ms > 0)?;
            (
                Duration::from_millis(ms),
                share(d.percentage, head.get(DELAY_PERCENT_HEADER)),
            )
        }
    };
    share.includes(cx.shard.random_u64()).then_some(duration)
}

/// The abort this request gets, if any: (HTTP status, gRPC status).
fn abort(f: &Fault, cx: &FilterCx<'_>, head: &RequestHead<'_>) -> Option<(u16, Option<u32>)> {
    let a = f.abort?;
    let (answer, share) = match a.kind {
        AbortKind::Http(status) => ((status, None), a.percentage),
        AbortKind::Grpc(code) => ((200, Some(code)), a.percentage),
        AbortKind::Header => {
            let http = number::<u16>(head.get(ABORT_HEADER)).filter(|s| (200..600).contains(s));
            let answer = match http {
                Some(status) => (status, None),
                None => (200, Some(number::<u32>(head.get(ABORT_GRPC_HEADER))?)),
            };
            (answer, share(a.percentage, head.get(ABORT_PERCENT_HEADER)))
        }
    };
    share.includes(cx.shard.random_u64()).then_some(answer)
}

/// The abort's reply: `fault filter abort`; a gRPC request gets its
/// status (a gRPC abort of another request is a plain 200).
fn abort_reply(
    (status, grpc): (u16, Option<u32>),
    grpc_request: bool,
    flag: &'static str,
) -> Reply {
    let mut reply = Reply::new(status, "fault filter abort", flag);
    if grpc_request {
        reply.grpc_status = grpc;
    }
    reply
}

impl HttpFilter for Fault {
    fn on_request_headers(&self, cx: &mut FilterCx<'_>, head: &mut RequestHead<'_>) -> RequestFlow {
        let config = match cx.route.and_then(|r| r.per_filter.fault.as_ref()) {
            Some(PerRoute::Disabled) => return RequestFlow::Continue,
            Some(PerRoute::Override(f)) => &**f,
            None => self,
        };
        if !matches(config, cx, head) {
            return RequestFlow::Continue;
        }
        let delay = delay(config, cx, head);
        let abort = abort(config, cx, head);
        if delay.is_none() && abort.is_none() {
            return RequestFlow::Continue;
        }
        let stats = cx.counters::<FaultStats>();
        // The filter's gauge, whichever config decided (Envoy's).
        let active = &self.active;
        let max = config.max_active_faults.map_or(u64::MAX, u64::from);
        // Checked and taken as one step: shards racing for the last slot
        // cannot both have it.
        let taken = active.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n < max).then_some(n + 1)
        });
        if taken.is_err() {
            stats.inc(|s| &s.faults_overflow);
            return RequestFlow::Continue;
        }
        stats.inc(|s| &s.active);
        // Kept by the stream's state, for the gauge's end.
        let counted = cx.owned_counters::<FaultStats>();
        cx.set_state(Active(Arc::clone(active), counted, None));
        let grpc = cx.grpc;
        let Some(delay) = delay else {
            stats.inc(|s| &s.aborts_injected);
            return RequestFlow::Reply(abort_reply(abort.unwrap_or((503, None)), grpc, "FI"));
        };
        stats.inc(|s| &s.delays_injected);
        if abort.is_some() {
            stats.inc(|s| &s.aborts_injected);
        }
        cx.set_flag("DI");
        let resume = cx.pause();
        let timer = glommio::spawn_local(async move {
            glommio::timer::sleep(delay).await;
            match abort {
                Some(a) => resume.reply(abort_reply(a, grpc, "DI,FI")),
                None => resume.resume(),
            }
        });
        if let Some(state) = cx.state::<Active>() {
            state.2 = Some(timer);
        }
        RequestFlow::Pause
    }
}

/// Gives the stream's active fault back when its state goes (the stream
/// ended, however it ended).
impl Drop for Active {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
        self.1.get().dec(|s| &s.active);
    }
}
