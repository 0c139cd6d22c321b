//! Phase 4, forward: body bytes between two HTTP/2 connections under both sides' flow control, moving what waits for window across and growing the windows of responses that flow.

use bytes::Bytes;
use h2wire::conn::{ClientConn, ServerConn};

use super::body::{Item, ItemQueue};
use super::codec::DownCodec;
use super::downstream::DownConn;
use super::outbuf::Admit;
use super::upcodec::UpCodec;

/// Either side, seen as where bytes go (`send_*`) or where they came
/// from (`release`).
pub trait Side {
    fn send_data(&mut self, stream: u32, data: &mut Bytes, end: bool) -> usize;
    fn send_trailers(&mut self, stream: u32, t: &[(Vec<u8>, Vec<u8>)]);
    fn release(&mut self, stream: u32, n: u32);
}

macro_rules! side {
    ($t:ty) => {
        impl Side for $t {
            fn send_data(&mut self, stream: u32, data: &mut Bytes, end: bool) -> usize {
                <$t>::send_data(self, stream, data, end).unwrap_or(0)
            }
            fn send_trailers(&mut self, stream: u32, t: &[(Vec<u8>, Vec<u8>)]) {
                let _ = <$t>::send_trailers(self, stream, t.iter().map(|(n, v)| (&n[..], &v[..])));
            }
            fn release(&mut self, stream: u32, n: u32) {
                <$t>::release(self, stream, n)
            }
        }
    };
}
side!(ServerConn);
side!(DownCodec);
side!(UpCodec);
// The bare HTTP/2 client, for benches that drive `h2wire` directly.
side!(ClientConn);

/// The side of a connection that is gone: it takes nothing and has
/// nothing to release.
struct Gone;

impl Side for Gone {
    fn send_data(&mut self, _: u32, _: &mut Bytes, _: bool) -> usize {
        0
    }
    fn send_trailers(&mut self, _: u32, _: &[(Vec<u8>, Vec<u8>)]) {}
    fn release(&mut self, _: u32, _: u32) {}
}

/// What one [`drain`] moved.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Drained {
    /// Body bytes that went across.
    pub moved: u32,
    /// The end of the body (END_STREAM or trailers) went out.
    pub ended: bool,
}

/// Sends what `queue` holds on `to`'s stream, releasing it on `from`'s.
pub fn drain(
    queue: &mut ItemQueue,
    to: &mut impl Side,
    to_stream: u32,
    from: &mut impl Side,
    from_stream: u32,
) -> Drained {
    let mut out = Drained::default();
    while let Some(item) = queue.front_mut() {
        match item {
            Item::Data(data, end) => {
                let end = *end;
                let sent = to.send_data(to_stream, data, end);
                if sent > 0 {
                    from.release(from_stream, sent as u32);
                    out.moved += sent as u32;
                }
                if !data.is_empty() {
                    return out; // out of window: WindowOpen brings us back
                }
                queue.pop_front();
                if end {
                    out.ended = true;
                    return out;
                }
            }
            Item::Trailers(t) => {
                to.send_trailers(to_stream, t);
                queue.pop_front();
                out.ended = true;
                return out;
            }
        }
    }
    out
}

impl DownConn {
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
    /// ([`grant_size`]).
    pub(super) fn forward(&mut self) {
        if self.queued.is_empty() {
            return;
        }
        // Inline: a turn rarely ends more streams than this, and a heap
        // `Vec` here was an allocation per turn that ended any.
        let mut done = smallvec::SmallVec::<[u32; 32]>::new();
        let now = self.now;
        let budget = self.out.limit();
        let stats = &self.wire.shard.stats.downstream;
        let mut queued = std::mem::take(&mut self.queued);
        queued.retain(|&stream| {
            // Finished streams leave their id behind: dropped here.
            let Some(s) = self.streams.get_mut(&stream) else {
                return false;
            };
            if s.req.is_empty() && s.resp.is_empty() {
                s.queued = false;
                return false;
            }
            let Some(up) = s.up else { return true };
            if !s.req.is_empty() && !s.bodyless {
                // The body starts upstream: a refusal can no longer be
                // resent (the bytes are not kept), so the head goes back.
                if let Some(head) = s.head.take() {
                    self.conn.recycle(head);
                }
            }
            let mut p = s.pool.borrow_mut();
            let windows = p.stream_windows();
            let send_request = !s.req.is_empty() && p.takes_request_data(up);
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
                if let Some(l) = s.log.as_mut() {
                    l.bytes_received += u64::from(d.moved);
                }
                moved |= d.moved > 0 || d.ended;
                if d.ended {
                    s.deadline = s.timeout.map(|t| now + t);
                }
            }
            // Only bytes that moved count as activity: a stream stuck
            // behind a client that reads nothing idles out.
            if moved {
                s.active_at = now;
            }
            drop(p);
            let pool = std::rc::Rc::clone(&s.pool);
            if !self
                .touched
                .iter()
                .any(|(q, slot)| *slot == up.slot && std::rc::Rc::ptr_eq(q, &pool))
            {
                self.touched.push((pool, up.slot));
            }
            s.queued = !(s.req.is_empty() && s.resp.is_empty());
            s.queued
        });
        // Nothing can queue while the list is out (the closure holds the
        // streams); putting it back keeps its allocation.
        self.queued = queued;
        for stream in done {
            self.finish(stream);
        }
    }
}

/// More response window for a stream whose client took all it had: as much
/// again as it has (doubling, like TCP's slow start, so a long download
/// soon runs at the cluster's full window), never past `max` (the
/// cluster's `initial_stream_window_size`) nor past what the downstream
/// connection's budget has left. With the initial windows, that bounds what
/// a connection's unread responses can hold.
pub fn grant_size(granted: u32, (initial, max): (u32, u32), budget_left: u32) -> u32 {
    let have = initial.saturating_add(granted);
    have.min(max.saturating_sub(have)).min(budget_left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_double_the_window_up_to_the_cluster_s_and_the_budget() {
        let w = (16, 256);
        assert_eq!(grant_size(0, w, 1000), 16);
        assert_eq!(grant_size(16, w, 1000), 32);
        assert_eq!(grant_size(48, w, 1000), 64);
        assert_eq!(grant_size(112, w, 1000), 128);
        assert_eq!(grant_size(240, w, 1000), 0, "at the cluster's window");
        assert_eq!(grant_size(48, w, 10), 10, "the budget's rest");
        assert_eq!(grant_size(0, w, 0), 0);
        // A cluster window below our initial one: never grown.
        assert_eq!(grant_size(0, (16, 16), 1000), 0);
    }
}
