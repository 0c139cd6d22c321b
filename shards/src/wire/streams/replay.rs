//! A retryable request's body kept for its next attempt: the chunks (and trailers) that went to the router, shared not copied, up to the route's `per_request_buffer_limit_bytes` (at most the listener's `per_connection_buffer_limit_bytes`, which applies when it is unset), as Envoy buffers them; past it the request is not retried.

use crate::local_reply::LocalReply;
use crate::wire::body::{queued, Item, ItemQueue};
use crate::wire::dstream::DStream;

use super::Streams;

/// What a stream's retries would send again.
#[derive(Default)]
pub(crate) struct Replay {
    items: Vec<Item>,
    bytes: usize,
    limit: usize,
    /// The body passed the limit: what was kept is gone, and the stream
    /// will not go again.
    lost: bool,
}

impl DStream {
    /// The stream can go again on a new upstream stream: it holds its
    /// head, and its body (if any went) is all kept.
    pub(super) fn can_resend(&self) -> bool {
        self.head.is_some() && !self.body_gone && !self.replay.as_ref().is_some_and(|r| r.lost)
    }

    /// Its head stays past the first body byte upstream: a retry may
    /// send both again.
    pub(super) fn keeps_head(&self) -> bool {
        self.replay.as_ref().is_some_and(|r| !r.lost)
    }
}

impl Streams {
    /// Keeps `item` (a chunk or the trailers, as the router passed it)
    /// for a stream whose retry policy may send its body again.
    pub(super) fn keep_for_retry(&mut self, stream: u32, item: &Item) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        if !s.retry_policy || s.resp_started || s.target.is_none() {
            return;
        }
        if s.replay.is_none() {
            let limit = self.cx.listener.per_connection_buffer_limit_bytes;
            let route = s.snap.as_ref().and_then(|snap| {
                let hcm = self.cx.hcm(snap)?;
                let (_, route) = s.route?.get(&hcm.route_config)?;
                route.action.forward()?.per_request_buffer_limit
            });
            s.replay = Some(Box::new(Replay {
                limit: route.map_or(limit, |r| r.min(limit)) as usize,
                ..Replay::default()
            }));
        }
        let Some(r) = s.replay.as_mut().filter(|r| !r.lost) else {
            return;
        };
        let len = match item {
            Item::Data { data, .. } => data.len(),
            Item::Trailers(_) => 0,
        };
        r.bytes += len;
        if r.bytes > r.limit {
            // Envoy's `retry_or_shadow_abandoned`: no retry from here on.
            **r = Replay {
                lost: true,
                ..Replay::default()
            };
            let stats = &self.cx.wire.shard.stats.downstream;
            stats.rq_retry_body_overflow.inc();
            if s.up.is_none() && s.attempts > 0 {
                // A retry is pending (back-off, or a wait for a
                // connection): it can no longer be made. Envoy answers at
                // once, as here.
                self.fail(stream, LocalReply::RetryBufferExceeded);
            }
            return;
        }
        // Kept with its credit as it came (a filter may have resized it):
        // what a rewind moves along is what the client is owed.
        r.items.push(item.clone());
    }

    /// The chunks that came before the router (a filter paused the
    /// stream), kept once it passed it.
    pub(super) fn keep_held_for_retry(&mut self, stream: u32) {
        let Some(s) = self.table.get(&stream) else {
            return;
        };
        let held: Vec<Item> = s.req.iter().map(Item::share).collect();
        for item in &held {
            self.keep_for_retry(stream, item);
        }
    }
}

/// A new attempt's body: every kept item again, from the first. What the
/// client is still owed for the items not yet sent (their credit) moves to
/// the same bytes in the new queue, counted from its end, so the client's
/// window opens as those bytes go, as before. Whether there is a body to
/// send.
pub(super) fn rewind(s: &mut DStream) -> bool {
    let Some(r) = s.replay.as_ref().filter(|r| !r.lost && !r.items.is_empty()) else {
        return false;
    };
    let mut owed = queued(&s.req);
    let mut items = r.items.clone();
    for item in items.iter_mut().rev() {
        if let Item::Data { credit, .. } = item {
            let give = (*credit).min(owed);
            owed -= give;
            *credit = give;
        }
    }
    let mut q = ItemQueue::default();
    for item in items {
        q.push_back(item);
    }
    s.req = q;
    true
}
