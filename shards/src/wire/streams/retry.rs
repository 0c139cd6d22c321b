//! A route's `retry_policy` on a stream: an attempt that failed in a way the policy retries (a response it names, a reset, no connection) is left before any of it reaches the client; the stream waits its back-off (in the connection's deadline scan), then goes again to a host the cluster's policy picks, avoiding those tried under `previous_hosts`.
//!
//! A stream goes again with its request head and its body as far as it
//! came (`replay.rs`, bounded by the route's `per_request_buffer_limit_bytes`
//! or the listener's buffer limit); one whose body passed that bound is
//! not retried, as Envoy does not retry past its buffer limit.

use std::rc::Rc;
use std::time::Instant;

use engine::outlier::CallResult;
use engine::retry::AttemptEnd;
use engine::RetryPolicy;

use super::{ConnCx, Streams};
use crate::local_reply::LocalReply;
use crate::wire::dstream::{DStream, Target};
use crate::wire::pool::PoolRef;

impl ConnCx {
    /// How an attempt whose answer's head is `head` ended, as its retry
    /// policy reads it (`retriable_headers` only when the policy lists
    /// some).
    pub(super) fn answer_end(
        &self,
        s: &DStream,
        head: &h2wire::message::HeaderList,
        status: u16,
        grpc_status: Option<u32>,
    ) -> AttemptEnd {
        let field = |n: &str| {
            head.get(n.as_bytes())
                .and_then(|v| std::str::from_utf8(v).ok())
        };
        let headers = s.retry_any_status
            && self
                .retry_policy(s)
                .is_some_and(|r| r.headers_retriable(field));
        AttemptEnd::Response {
            status,
            grpc_status,
            headers,
        }
    }

    /// The `retry_policy` of `s`: an internal client's headers' (made at
    /// its start), else its route's, from the config it keeps.
    pub(super) fn retry_policy<'a>(&'a self, s: &'a DStream) -> Option<&'a RetryPolicy> {
        if !s.retry_policy {
            return None;
        }
        if let Some(p) = &s.header_policy {
            return Some(p);
        }
        let hcm = self.hcm(s.snap.as_ref()?)?;
        let (_, route) = s.route?.get(&hcm.route_config)?;
        route.action.forward()?.retry_policy.as_ref()
    }
}

impl ConnCx {
    /// Whether `s`'s attempt that ended as `end` goes again (`None`: a
    /// hedge at its per-try timeout, which goes whatever the policy's
    /// `retry_on`). If so its next attempt is scheduled (after its
    /// back-off) and what is left to do is returned: leave the attempt on
    /// this pool, whose host's outlier detection counts this result.
    /// `None` when the policy does not retry it, its retries are spent, or
    /// the cluster's `max_retries` is.
    pub(super) fn retry_decision(
        &self,
        s: &mut DStream,
        end: Option<AttemptEnd>,
        now: Instant,
    ) -> Option<(PoolRef, CallResult)> {
        if s.resp_started || !s.can_resend() {
            return None;
        }
        let policy = self.retry_policy(s)?;
        if end.is_some_and(|end| !policy.retries(end)) {
            return None;
        }
        // `retriable_request_headers`: only a request one of them matches.
        let head = s.head.as_ref()?;
        let field = |n: &str| {
            head.get(n.as_bytes())
                .and_then(|v| std::str::from_utf8(v).ok())
        };
        if !policy.request_retriable(field) {
            return None;
        }
        let stats = &self.wire.shard.stats;
        let done = s.retries.as_ref().map_or(0, |r| r.done);
        if done >= policy.num_retries {
            stats.rq_retry_limit_exceeded.inc();
            if let Some(t) = &s.target {
                let p = t.pool.borrow();
                p.cluster_stats.upstream_rq_retry_limit_exceeded.inc();
            }
            if let Some(r) = s.retries.as_mut() {
                r.spent = true;
            }
            return None;
        }
        let wait = policy.back_off(done + 1, u64::from(self.wire.shard.random()));
        let target = s.target.as_ref()?;
        // Within the cluster's `max_retries` (one held per stream from its
        // first retry on).
        if !s.retry_slot {
            s.retry_slot = target.pool.borrow().budget.try_retry();
            if !s.retry_slot {
                stats.hosts.host(target.host).rq_retry_overflow.inc();
                let p = target.pool.borrow();
                p.cluster_stats.upstream_rq_retry_overflow.inc();
                return None;
            }
        }
        let (pool, host) = (Rc::clone(&target.pool), target.host);
        let retries = s.retries.get_or_insert_with(Box::default);
        retries.done += 1;
        retries.tried.push(host);
        retries.at = Some(now + wait);
        s.served = None;
        s.try_ends = None;
        s.try_idle_at = None;
        stats.rq_retry.inc();
        {
            let p = pool.borrow();
            p.cluster_stats.upstream_rq_retry.inc();
            if let Some(AttemptEnd::Response { status, .. }) = end {
                p.cluster_stats.retry_upstream_rq.record(status);
            }
        }
        let result = match end {
            Some(AttemptEnd::Response {
                status,
                grpc_status,
                ..
            }) => s.answered(status, grpc_status),
            Some(AttemptEnd::Reset | AttemptEnd::RefusedStream) => CallResult::Reset,
            Some(AttemptEnd::ConnectFailure) => CallResult::ConnectFailure,
            None => CallResult::Timeout,
        };
        Some((pool, result))
    }
}

impl Streams {
    /// [`ConnCx::retry_decision`] for a stream in the table, and the
    /// attempt left if it goes again.
    pub(super) fn retry_after(&mut self, stream: u32, end: AttemptEnd, now: Instant) -> bool {
        let Some(s) = self.table.get_mut(&stream) else {
            return false;
        };
        match self.cx.retry_decision(s, Some(end), now) {
            Some((pool, result)) => {
                self.leave_attempt(stream, &pool, result, false);
                true
            }
            None => false,
        }
    }

    /// Leaves the failed attempt of a stream that goes again (`answered`:
    /// its response head came); its host's outlier detection counts
    /// `result`.
    pub(super) fn leave_attempt(
        &mut self,
        stream: u32,
        pool: &PoolRef,
        result: CallResult,
        answered: bool,
    ) {
        self.detach(stream, answered);
        self.cx.record_outlier(pool, result);
    }

    /// The attempt in flight passed its `per_try_timeout`: a hedging
    /// stream sends another beside it (`hedge.rs`); otherwise it is
    /// retried as a reset would be (Envoy's), else the stream ends 504.
    pub(super) fn try_timed_out(&mut self, stream: u32) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        s.try_ends = None;
        self.span_timed_out(stream, false);
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        if s.hedging {
            return self.hedge(stream);
        }
        // Envoy's counter leaves hedged attempts out.
        self.cx.wire.shard.stats.rq_per_try_timeout.inc();
        if let Some(t) = self.table.get(&stream).and_then(|s| s.target.as_ref()) {
            t.pool
                .borrow()
                .cluster_stats
                .upstream_rq_per_try_timeout
                .inc();
        }
        if !self.retry_after(stream, AttemptEnd::Reset, self.now) {
            self.timed_out(stream);
        }
    }

    /// The attempt in flight sent nothing for its `per_try_idle_timeout`:
    /// before its answer began it is retried as a reset would be (Envoy's
    /// `5xx`, `gateway-error`, `reset`), else the stream ends 504; an
    /// answer that began is cut off.
    pub(super) fn try_idled_out(&mut self, stream: u32) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        s.try_idle_at = None;
        let started = s.resp_started;
        self.span_timed_out(stream, true);
        let stats = &self.cx.wire.shard.stats.downstream;
        stats.rq_per_try_idle_timeout.inc();
        if started
            || !(self.retry_after(stream, AttemptEnd::Reset, self.now)
                || self.yield_to_earlier(stream, Some(CallResult::Timeout), false))
        {
            self.fail(stream, LocalReply::UpstreamTimeout);
        }
    }

    /// A retried stream's back-off is over: a host, then the attempt.
    pub(super) fn retry_now(&mut self, stream: u32) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        if let Some(r) = s.retries.as_mut() {
            r.at = None;
        }
        let picked = match s.can_resend() {
            true => self.retarget(stream),
            // The body passed the retry buffer during the back-off: what
            // went before is gone, so there is no whole request to send.
            false => Err(LocalReply::RetryBufferExceeded),
        };
        match picked {
            Ok(()) => self.open_upstream(stream),
            // The attempt a hedge left may still answer.
            Err(_) if self.yield_to_earlier(stream, None, false) => {}
            Err(reply) => self.fail(stream, reply),
        }
    }

    /// Moves `stream` to a host the cluster's policy picks now (up to
    /// `host_selection_retry_max_attempts` picks to avoid the hosts tried
    /// under `previous_hosts`; the last pick otherwise).
    fn retarget(&mut self, stream: u32) -> Result<(), LocalReply> {
        let cx = &self.cx;
        let wire = &cx.wire;
        let shard = &wire.shard;
        let Some(s) = self.table.get_mut(&stream) else {
            return Ok(());
        };
        let Some(snap) = s.snap.as_ref().map(Rc::clone) else {
            return Err(LocalReply::UpstreamReset);
        };
        // The last attempt's pool: its hold given back, unless a hedge
        // left it in flight.
        let last = match s.target.take() {
            Some(old) => {
                cx.release_target(&old);
                old.pool
            }
            None => match s.retries.as_ref().and_then(|r| r.hedged_from.clone()) {
                Some(pool) => pool,
                None => return Err(LocalReply::UpstreamReset),
            },
        };
        let picked = (|| {
            let Some(cluster) = snap.cluster(last.borrow().cluster_name()) else {
                shard.stats.rq_unknown_cluster.inc();
                return Err(LocalReply::UnknownCluster);
            };
            let (avoid, attempts) = match cx.retry_policy(s) {
                Some(p) if p.previous_hosts => (true, p.host_selection_max_attempts),
                _ => (false, 1),
            };
            let tried = s.retries.as_ref().map(|r| &r.tried[..]).unwrap_or(&[]);
            let mut pick = None;
            // Envoy's count is of picks again after the first.
            for _ in 0..=attempts {
                let Some(p) = shard.pick_host(cluster, |id| wire.in_flight(id), None) else {
                    break;
                };
                let fresh = !avoid || !tried.contains(&p.host.id);
                pick = Some(p);
                if fresh {
                    break;
                }
            }
            let Some(pick) = pick else {
                shard.stats.rq_no_healthy_upstream.inc();
                return Err(LocalReply::NoHealthyUpstream);
            };
            let client = (cx.peer, cx.local, &*cx.tlvs);
            match wire.pool_for(pick.host, cluster, client) {
                Some(pool) if pool.borrow().budget.try_request() => Ok((pick.host.id, pool)),
                _ => {
                    shard
                        .stats
                        .hosts
                        .host(pick.host.id)
                        .rq_pending_overflow
                        .inc();
                    Err(LocalReply::Overflow)
                }
            }
        })();
        let (host, pool) = match picked {
            Ok(p) => p,
            Err(reply) => {
                // No target to give the retry's slot back with at the end.
                if std::mem::take(&mut s.retry_slot) {
                    last.borrow().budget.end_retry();
                }
                return Err(reply);
            }
        };
        let host_stats = shard.stats.hosts.host(host);
        pool.borrow_mut().in_flight += 1;
        host_stats.rq_total.inc();
        host_stats.rq_active.inc();
        s.target = Some(Target { host, pool });
        Ok(())
    }
}
