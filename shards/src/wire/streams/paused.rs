//! Phase 1's pauses: a paused stream's resume, and the request body's start gathered for a filter that paused for it.

use bytes::BytesMut;

use super::Streams;
use crate::http_filter::Resumed;
use crate::wire::body::Item;

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
    /// A stream paused for its body: once the filter's limit is reached,
    /// or the body is whole, the filter gets the body's start (copied:
    /// the chunks stay queued for upstream).
    pub(super) fn check_gathered(&mut self, stream: u32) {
        let Some(s) = self.table.get_mut(&stream) else {
            return;
        };
        let (Some(limit), Some((at, _))) = (s.gather, s.paused) else {
            return;
        };
        let limit = limit as usize;
        let mut held = 0usize;
        let mut ended = false;
        for item in s.req.iter() {
            match item {
                Item::Data { data, end, .. } => {
                    held += data.len();
                    ended |= *end;
                }
                Item::Trailers(_) => ended = true,
            }
        }
        if held < limit && !ended {
            return;
        }
        let mut body = BytesMut::with_capacity(held.min(limit));
        for item in s.req.iter() {
            if let Item::Data { data, .. } = item {
                let room = limit - body.len();
                body.extend_from_slice(&data[..data.len().min(room)]);
            }
        }
        let whole = ended && held <= limit;
        s.gather = None;
        s.paused = None;
        self.admit(stream, at as usize, false, Some((body.freeze(), whole)));
    }
}
