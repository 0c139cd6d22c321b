//! What a finished stream leaves behind (phase 6 past the client's codec): its filters' `on_log`, its counters, its access log lines, and its outcome for outlier detection.

use std::time::Instant;

use engine::outlier::CallResult;

use super::ConnCx;
use crate::http_filter::{chain, StreamSummary};
use crate::wire::dstream::{DStream, Target};
use crate::wire::logging::LogState;
use crate::wire::pool::PoolRef;

impl ConnCx {
    /// Queues the stream's access log lines (`grpc_status`: its
    /// response's).
    pub(super) fn log(
        &self,
        l: &LogState,
        upstream: Option<(std::net::SocketAddr, &str)>,
        grpc_status: Option<u32>,
    ) {
        let cx = self;
        l.emit(
            &cx.logs,
            &cx.wire,
            cx.protocol,
            upstream,
            (cx.peer, cx.direct_peer),
            cx.sni.as_deref(),
            grpc_status,
        );
    }

    /// Gives back what an attempt held of its host and pool (a request in
    /// flight, the circuit breaker's request) as it is left for good: at
    /// the stream's end, a retry's new pick, a hedged attempt's end.
    pub(super) fn release_target(&self, t: &Target) {
        {
            let mut p = t.pool.borrow_mut();
            p.in_flight = p.in_flight.saturating_sub(1);
            p.budget.end_request();
        }
        self.wire.shard.stats.hosts.host(t.host).rq_active.dec();
    }

    /// Counts the stream's outcome for outlier detection.
    pub(super) fn record_outlier(&self, pool: &PoolRef, result: CallResult) {
        self.wire.record_outlier(pool, result);
    }
}

impl ConnCx {
    /// A finished stream in Envoy's series: its connection manager's
    /// (`downstream_rq_*`), and its cluster's answer (`upstream_rq_<code>`,
    /// `upstream_rq_time` from the request's end when an upstream answered).
    fn count_envoy_series(&self, s: &DStream, now: Instant) {
        if let Some(h) = &self.http {
            let h = &h.stats;
            h.downstream_rq_active.dec();
            // Envoy counts a health check's answer nowhere here (its
            // request and its time, yes).
            if let Some(status) = s.status.filter(|_| !s.health_check) {
                h.downstream_rq_completed.inc();
                h.downstream_rq_xx.record(status);
            }
            if s.flag == "NR" {
                h.no_route.inc();
            }
            h.downstream_rq_time
                .record(now.saturating_duration_since(s.started));
        }
        let (Some(t), Some(status)) = (&s.target, s.status) else {
            return;
        };
        let p = t.pool.borrow();
        p.cluster_stats.upstream_rq.record(status);
        if let (Some(_), Some(start)) = (s.served, s.req_end) {
            // To the upstream's last byte; a stream that ended without one
            // (reset, cut) at its end.
            let end = s.resp_end.unwrap_or(now);
            p.cluster_stats
                .upstream_rq_time
                .record(end.saturating_duration_since(start));
        }
    }

    /// Phase 6 for a stream out of its connection's table: its filters'
    /// `on_log`, then `give_back` (what it holds of the client's codec,
    /// given back by the caller that has the codec), the stats, the access
    /// log, the outcome for outlier detection. An upgraded stream is
    /// settled here by the tunnel's task, its connection's codec gone.
    pub(crate) fn settle(
        &self,
        stream: u32,
        mut s: DStream,
        now: Instant,
        give_back: impl FnOnce(&mut DStream),
    ) {
        self.wire
            .accounts
            .forget((self.inbox, stream), &mut s.account);
        if s.filtered {
            let (bytes_received, bytes_sent) = s
                .log
                .as_ref()
                .map_or((0, 0), |l| (l.bytes_received, l.bytes_sent));
            // Attempts still in flight (the answering one) end with the
            // stream.
            let upstream_spans = s
                .upstream_spans
                .take()
                .map(|mut spans| spans.take(now))
                .unwrap_or_default();
            let summary = StreamSummary {
                status: s.status,
                upstream: s.served_by(),
                flag: s.flag,
                bytes_received,
                bytes_sent,
                upstream_spans: &upstream_spans,
            };
            self.filters(&mut s, stream, now, false, |f, cx| {
                chain::log(f, cx, &summary)
            });
        }
        give_back(&mut s);
        self.count_envoy_series(&s, now);
        if let Some(l) = s.log.as_mut() {
            // A flag a filter set on a stream that went on (a fault's
            // delay), where nothing set one since.
            if l.flags.is_empty() {
                l.flags = s.flag;
            }
        }
        let stats = &self.wire.shard.stats;
        stats.downstream.rq_active.dec();
        let Some(t) = &s.target else {
            // Ended while a hedge's retry waited: its slot goes back to
            // the cluster it was taken from.
            let hedged = s.retries.as_ref().and_then(|r| r.hedged_from.as_ref());
            if let (true, Some(pool)) = (s.retry_slot, hedged) {
                pool.borrow().budget.end_retry();
            }
            if let Some(l) = &s.log {
                self.log(l, None, s.served.and_then(|(_, g)| g));
            }
            return;
        };
        self.release_target(t);
        if s.retry_slot {
            t.pool.borrow().budget.end_retry();
        }
        if let Some(l) = &s.log {
            let p = t.pool.borrow();
            self.log(
                l,
                Some((p.addr, p.cluster_name())),
                s.served.and_then(|(_, g)| g),
            );
        }
        // A client that went away is not the host's fault; the status it
        // had answered by then still counts (as Envoy counts it).
        let counted = s.between_attempts();
        let result = s
            .failed
            .filter(|_| !counted)
            .or_else(|| s.served.map(|(status, grpc)| s.answered(status, grpc)));
        if let Some(result) = result {
            self.record_outlier(&t.pool, result);
        }
    }
}
