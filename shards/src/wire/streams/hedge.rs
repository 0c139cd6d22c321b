//! `hedge_on_per_try_timeout`: an attempt past its per-try timeout stays in flight beside the retry it makes, and the first attempt to answer well is the stream's answer; an error from one is dropped while another may still answer.
//!
//! Each attempt is keyed where its answer is routed (its pool's routes,
//! the connection's inbox): the first by the stream's id, those after a
//! hedge by an alias ([`ALIAS_BIT`]). The newest attempt is the stream's
//! own (`target`, `up`); those hedges left in flight are its `earlier`.
//! As in Envoy, every hedged attempt stays in flight (at most
//! `num_retries` + 1), an attempt that was hedged is never retried
//! itself, and the route timeout ends them all.

use std::rc::Rc;

use engine::outlier::CallResult;
use h2wire::conn::ClientEvent;

use super::reply::{grpc_status, status_of};
use super::{touch, upstream, Streams};
use crate::wire::body::queued;
use crate::wire::dstream::{DStream, Earlier, ALIAS_BIT};
use crate::wire::inbox::Delivered;

impl Streams {
    /// A new alias for an attempt of `stream`.
    fn new_alias(&mut self, stream: u32) -> u32 {
        loop {
            let alias = ALIAS_BIT | self.next_alias;
            self.next_alias = (self.next_alias + 1) & !ALIAS_BIT;
            if let std::collections::hash_map::Entry::Vacant(v) = self.aliases.entry(alias) {
                v.insert(stream);
                return alias;
            }
        }
    }

    /// Leaves an attempt a hedge left in flight: cancelled upstream
    /// (`answered`: its head came), its hold given back, `result` counted
    /// for its host's outlier detection.
    fn leave(&mut self, e: Earlier, answered: bool, result: Option<CallResult>) {
        let Earlier {
            key, target, up, ..
        } = e;
        {
            let mut p = target.pool.borrow_mut();
            p.cancel(up, answered, 0);
            p.unroute(up);
        }
        touch(&mut self.touched, &target.pool, up.slot);
        self.graveyard.push((key, Rc::clone(&target.pool), up));
        if key & ALIAS_BIT != 0 {
            self.aliases.remove(&key);
        }
        self.cx.release_target(&target);
        if let Some(result) = result {
            self.cx.record_outlier(&target.pool, result);
        }
    }

    /// [`Self::leave`] for the attempt of `stream` keyed `key`.
    fn drop_earlier(&mut self, stream: u32, key: u32, answered: bool, result: Option<CallResult>) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        if let Some(at) = s.earlier.iter().position(|e| e.key == key) {
            let e = s.earlier.swap_remove(at);
            if let Some(spans) = s.upstream_spans.as_deref_mut() {
                spans.end(key, self.now);
            }
            self.leave(e, answered, result);
        }
    }

    /// An answer went out: the attempts hedges left are of no more use
    /// (Envoy resets them then).
    pub(super) fn drop_all_earlier(&mut self, stream: u32) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        // Raced and lost, as a hedge means to: not the early resets a
        // connection's reset budget is for.
        let earlier = std::mem::take(&mut s.earlier);
        if let Some(spans) = s.upstream_spans.as_deref_mut() {
            for e in &earlier {
                spans.end(e.key, self.now);
            }
        }
        for e in earlier {
            self.leave(e, true, None);
        }
    }

    /// A stream out of the table at its end lets go of its attempts'
    /// keys: those hedges left (cancelled), and its own alias (its own
    /// attempt is left by then).
    pub(super) fn let_go_attempts(&mut self, s: &mut DStream) {
        let earlier = std::mem::take(&mut s.earlier);
        if let Some(spans) = s.upstream_spans.as_deref_mut() {
            for e in &earlier {
                spans.end(e.key, self.now);
            }
        }
        for e in earlier {
            self.leave(e, false, None);
        }
        if s.alias != 0 {
            self.aliases.remove(&std::mem::take(&mut s.alias));
        }
    }

    /// The attempt in flight passed its per-try timeout, and the stream
    /// hedges: the attempt counts as a timeout for its host and stays in
    /// flight. Another goes after the retry back-off while the policy and
    /// the cluster's `max_retries` allow one, whatever the policy's
    /// `retry_on` (Envoy's); otherwise the attempts go on, under the route
    /// timeout.
    pub(super) fn hedge(&mut self, stream: u32) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        let Some(pool) = s.up.and(s.target.as_ref()).map(|t| Rc::clone(&t.pool)) else {
            return;
        };
        self.cx.record_outlier(&pool, CallResult::Timeout);
        if self.cx.retry_decision(s, None, self.now).is_none() {
            return;
        }
        self.cx.wire.shard.stats.rq_hedged.inc();
        let alias = self.new_alias(stream);
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        if let (Some(target), Some(up)) = (s.target.take(), s.up.take()) {
            if let Some(r) = s.retries.as_mut() {
                r.hedged_from = Some(Rc::clone(&target.pool));
            }
            let key = s.key(stream);
            // The retry made counts it: the one left is the one before.
            let nth = s.attempt() - 1;
            s.earlier.push(Earlier {
                key,
                nth,
                target,
                up,
            });
            s.alias = alias;
        }
    }

    /// What came for `key`, an attempt a hedge left in flight. A
    /// response head its policy would not retry makes it the stream's
    /// attempt (the others left); one it would retry is dropped with the
    /// attempt, as is a reset or a lost connection: another attempt may
    /// still answer well.
    pub(super) fn on_earlier(&mut self, stream: u32, key: u32, what: Delivered) {
        let Some(s) = self.table.get(&stream) else {
            return;
        };
        let Some(from) = s
            .earlier
            .iter()
            .find(|e| e.key == key)
            .map(|e| (Rc::clone(&e.target.pool), e.up))
        else {
            return;
        };
        let ev = match what {
            Delivered::Event(ev) => ev,
            Delivered::ConnectFailed => {
                let failed = Some(CallResult::ConnectFailure);
                return self.drop_earlier(stream, key, false, failed);
            }
            Delivered::ConnectionLost => {
                return self.drop_earlier(stream, key, false, Some(CallResult::Reset))
            }
            Delivered::Retry | Delivered::Resume(_) | Delivered::OverloadReset => return,
        };
        match ev {
            ClientEvent::Response {
                ref head,
                informational: false,
                ..
            } => {
                let status = status_of(head);
                let grpc = grpc_status(head).filter(|_| s.grpc);
                let end = self.cx.answer_end(s, head, status, grpc);
                let retried = self.cx.retry_policy(s).is_some_and(|p| p.retries(end));
                if retried {
                    let result = s.answered(status, grpc);
                    if let ClientEvent::Response { head, .. } = ev {
                        upstream::recycle(Some(from), head);
                    }
                    return self.drop_earlier(stream, key, true, Some(result));
                }
                self.promote(stream, key);
                // Its answer, as the stream's own attempt's.
                self.on_upstream(stream, ev);
            }
            ClientEvent::Response { head, .. } => upstream::recycle(Some(from), head),
            ClientEvent::Data { data, .. } => {
                // No body comes before a head; its window goes back.
                if let Some(c) = from.0.borrow_mut().conn(from.1) {
                    c.release(from.1.stream, data.len() as u32);
                }
            }
            ClientEvent::Reset { .. }
            | ClientEvent::TooLarge { .. }
            | ClientEvent::Broken { .. } => {
                self.drop_earlier(stream, key, false, Some(CallResult::Reset))
            }
            _ => {}
        }
    }

    /// The stream's own attempt failed and none follows: the latest
    /// attempt a hedge left in flight, if any, becomes its attempt (Envoy
    /// answers nothing while another attempt may still answer). The
    /// failed one is left (`answered`: its head came) and `result` counted
    /// for its host.
    pub(super) fn yield_to_earlier(
        &mut self,
        stream: u32,
        result: Option<CallResult>,
        answered: bool,
    ) -> bool {
        let Some(s) = self.table.get(&stream).filter(|s| !s.resp_started) else {
            return false;
        };
        let Some(key) = s.earlier.last().map(|e| e.key) else {
            return false;
        };
        if let (Some(t), Some(result)) = (&s.target, result) {
            let pool = Rc::clone(&t.pool);
            self.cx.record_outlier(&pool, result);
        }
        self.detach(stream, answered);
        self.promote(stream, key);
        true
    }

    /// The attempt `key` a hedge left becomes the stream's own: the
    /// stream's own is cancelled (or its pending retry dropped) and its
    /// hold given back.
    fn promote(&mut self, stream: u32, key: u32) {
        self.detach_upstream(stream);
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        let Some(at) = s.earlier.iter().position(|e| e.key == key) else {
            return;
        };
        let Earlier {
            key,
            nth,
            target,
            up,
        } = s.earlier.swap_remove(at);
        if let Some(r) = s.retries.as_mut() {
            r.at = None;
            r.first_answers = nth == 1;
        }
        if let Some(t) = s.target.take() {
            self.cx.release_target(&t);
        }
        // The newer attempt's copy of the body, if it was still going: the
        // earlier one had it whole. What the client is owed goes back.
        self.conn.release(stream, queued(&s.req));
        s.req.clear();
        s.target = Some(target);
        s.up = Some(up);
        let left = std::mem::replace(&mut s.alias, if key & ALIAS_BIT != 0 { key } else { 0 });
        // Its per-try timeout went by already; its idle timeout starts
        // over. A dropped answer's status is not its.
        s.try_ends = None;
        s.try_idle_at = s.try_idle.map(|d| self.now + d);
        s.served = None;
        if left != 0 {
            self.aliases.remove(&left);
        }
    }
}
