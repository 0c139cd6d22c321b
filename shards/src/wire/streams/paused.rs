//! Phase 1's pauses: a paused stream's resume, and the request body's start gathered for a filter that paused for it.

use super::Streams;
use crate::http_filter::Resumed;
use crate::wire::body::Item;
use crate::wire::dstream::Gather;

impl Streams {
    /// A paused stream's pause ended (`ticket` names it: a late or repeated
    /// resume finds nothing): the chain goes on after the filter that
    /// paused, or the stream gets that filter's reply.
    pub(super) fn resume(&mut self, stream: u32, ticket: u64, outcome: Resumed) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        let Some((at, _)) = s.paused.filter(|&(_, t)| t == ticket) else {
            return;
        };
        s.paused = None;
        match outcome {
            Resumed::Continue { edits, state } => {
                if !edits.is_empty() {
                    s.edits.get_or_insert_with(Default::default).extend(edits);
                }
                if let Some(state) = state {
                    let states = s.states.get_or_insert_with(Default::default);
                    if states.len() <= at as usize {
                        states.resize_with(at as usize + 1, || None);
                    }
                    states[at as usize] = Some(state);
                }
                self.admit(stream, at as usize + 1, false, None);
            }
            Resumed::Reply(reply) => self.fail_with(stream, *reply, None),
        }
    }
    /// A filter paused stream `stream` for its body, up to `limit`
    /// bytes: what came already (during an earlier pause) moves into the
    /// gathering buffer, its window given back; a request without a body
    /// has all of it.
    pub(super) fn start_gather(&mut self, stream: u32, limit: u32) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        let mut g = Box::new(Gather {
            limit,
            fin: s.bodyless,
            ..Gather::default()
        });
        let mut trailers = None;
        while let Some(item) = s.req.pop_front() {
            match item {
                Item::Data { data, end, credit } => {
                    g.buf.extend_from_slice(&data);
                    g.fin |= end;
                    self.conn.release(stream, credit);
                }
                t @ Item::Trailers(_) => {
                    g.trailers = true;
                    trailers = Some(t);
                }
            }
        }
        if let Some(t) = trailers {
            // After the body, which goes back into the queue first.
            s.req.push_back(t);
        }
        s.gather = Some(g);
        self.check_gathered(stream);
    }

    /// A stream paused for its body: once past the filter's limit, or at
    /// the body's end, the body goes back in the stream's queue (one
    /// chunk, ahead of any trailers) and the filter gets its first
    /// `limit` bytes, and whether that is all of it.
    pub(super) fn check_gathered(&mut self, stream: u32) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        let (Some(g), Some((at, _))) = (s.gather.as_ref(), s.paused) else {
            return;
        };
        let ended = g.fin || g.trailers;
        // Exactly `limit` bytes is whole only once the end says so.
        if g.buf.len() <= g.limit as usize && !ended {
            return;
        }
        let Some(g) = s.gather.take() else { return };
        let held = g.buf.len();
        let body = g.buf.freeze();
        if !body.is_empty() || g.fin {
            let item = Item::Data {
                data: body.clone(),
                end: g.fin,
                credit: 0,
            };
            // Ahead of trailers that came during the gathering.
            let trailers = match s.req.pop_front() {
                Some(t @ Item::Trailers(_)) => Some(t),
                Some(other) => {
                    s.req.push_back(other);
                    None
                }
                None => None,
            };
            s.req.push_back(item);
            if let Some(t) = trailers {
                s.req.push_back(t);
            }
            super::enqueue(&mut self.queued, s, stream);
        }
        let whole = ended && held <= g.limit as usize;
        let start = body.slice(..held.min(g.limit as usize));
        s.paused = None;
        self.admit(stream, at as usize, false, Some((start, whole)));
    }
}
