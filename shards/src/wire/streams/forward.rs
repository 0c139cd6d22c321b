//! Phase 4, forward: body bytes between the two connections of each stream with items queued, under both sides' flow control, growing the windows of responses that flow.

use crate::wire::body::{drain, grant_size, Gone};
use crate::wire::outbuf::Admit;

use super::{touch, Streams};

impl Streams {
    /// Moves queued body chunks across as far as the windows allow,
    /// releasing each on the side it came from once the other side took it.
    /// Visits only the streams in `queued` (not every stream of the
    /// connection, each turn); one whose window is shut stays there and is
    /// tried again next turn.
    ///
    /// Response data goes to the client only while the connection's
    /// unwritten output is under `per_connection_buffer_limit_bytes`
    /// ([`super::outbuf`]): past it the data waits here unreleased, so its
    /// upstream windows stay shut and the backend stops sending. A stream
    /// whose client took everything it had is granted more upstream window
    /// ([`grant_size`]). Returns the streams whose response ended, for
    /// the caller to finish.
    pub(super) fn forward(&mut self) -> smallvec::SmallVec<[u32; 32]> {
        let mut done = smallvec::SmallVec::<[u32; 32]>::new();
        if self.queued.is_empty() {
            return done;
        }
        // Inline: a turn rarely ends more streams than this, and a heap
        // `Vec` here was an allocation per turn that ended any.
        let now = self.now;
        let budget = self.out.limit();
        let stats = &self.cx.wire.shard.stats.downstream;
        let cx = &self.cx;
        let mut queued = std::mem::take(&mut self.queued);
        queued.retain(|&stream| {
            // Finished streams leave their id behind: dropped here.
            let Some(s) = self.table.get_mut(&stream) else {
                return false;
            };
            if s.req.is_empty() && s.resp.is_empty() {
                s.queued = false;
                cx.charge(stream, s);
                return false;
            }
            // What came this turn, for streams that cannot move it yet.
            cx.charge(stream, s);
            let (Some(up), Some(target)) = (s.up, s.target.as_ref()) else {
                return true;
            };
            // (A tunnel's bytes start at its answer: its head stays until
            // then, for a resend on a lost connection.)
            let started = !s.upgrade || s.resp_started;
            if !s.req.is_empty() && !s.bodyless && !s.keeps_head() && started {
                // The body starts upstream: a refusal can no longer be
                // resent (the bytes are not kept), so the head goes back,
                // unless a local reply may still read it.
                if s.reply_needs_head {
                    s.body_gone = true;
                } else if let Some(head) = s.head.take() {
                    self.conn.recycle(head);
                }
            }
            let pool = std::rc::Rc::clone(&target.pool);
            let mut p = pool.borrow_mut();
            let windows = p.stream_windows();
            // A tunnel's bytes wait for its 101: before it, or after a
            // refusal, they would reach the backend as HTTP (a request
            // smuggled past the routes and filters).
            let send_request =
                !s.req.is_empty() && (!s.upgrade || s.resp_started) && p.takes_request_data(up);
            // A connection gone after the response ended (an HTTP/1.1
            // body that ran to the close) still has its last bytes here:
            // they go on, with nothing to release them to.
            let mut conn = p.conn(up);
            if conn.is_none() && s.resp.is_empty() {
                return true;
            }
            let mut moved = false;
            if !s.resp.is_empty() {
                match self.out.admit() {
                    Admit::Room => {
                        let d = match conn.as_deref_mut() {
                            Some(c) => drain(&mut s.resp, &mut self.conn, stream, c, up.stream),
                            None => drain(&mut s.resp, &mut self.conn, stream, &mut Gone, 0),
                        };
                        self.out.note_sent(d.moved);
                        if let Some(l) = s.log.as_mut() {
                            l.bytes_sent += u64::from(d.moved);
                        }
                        moved |= d.moved > 0 || d.ended;
                        if d.ended {
                            done.push(stream);
                        } else if d.moved > 0 && s.resp.is_empty() {
                            // Grants and unwritten output share the budget.
                            let held = self.granted as usize + self.out.bytes();
                            let left = (budget as usize).saturating_sub(held) as u32;
                            let give = grant_size(s.granted, windows, left);
                            let granted = give > 0
                                && conn
                                    .as_deref_mut()
                                    .is_some_and(|c| c.grant(up.stream, give));
                            if granted {
                                s.granted += give;
                                self.granted += give;
                            }
                        }
                    }
                    Admit::Full(first) => {
                        if first {
                            stats.flow_control_paused_reading_total.inc();
                        }
                    }
                }
            }
            if let Some(conn) = conn.filter(|_| send_request) {
                let d = drain(&mut s.req, conn, up.stream, &mut self.conn, stream);
                p.sent_request_data(up, d.moved);
                moved |= d.moved > 0 || d.ended;
                if d.ended {
                    // The route timeout runs once, from the request's
                    // first end: a retry that sends it again does not
                    // start it over.
                    if s.deadline.is_none() && !s.upgrade {
                        s.deadline = s.timeout.map(|t| now + t);
                    }
                    // This attempt's timers start with its request's end.
                    s.try_idle_at = s.try_idle.map(|t| now + t);
                    if s.up.is_some() && !s.resp_started {
                        s.try_ends = s.per_try.map(|t| now + t);
                    }
                }
            }
            // Only bytes that moved count as activity: a stream stuck
            // behind a client that reads nothing idles out.
            if moved {
                s.active_at = now;
            }
            drop(p);
            touch(&mut self.touched, &pool, up.slot);
            if moved {
                cx.charge(stream, s);
            }
            s.queued = !(s.req.is_empty() && s.resp.is_empty());
            s.queued
        });
        // Nothing can queue while the list is out (the closure holds the
        // streams); putting it back keeps its allocation.
        self.queued = queued;
        done
    }
}
