//! Body items waiting to cross a proxied stream one way (data chunks, trailers), in a queue that allocates only past the first, and how they cross: sent on one side as far as its windows allow, released on the other.

use std::collections::VecDeque;

use bytes::Bytes;
use h2wire::conn::{ClientConn, ServerConn};
use h2wire::message::HeaderList;

use super::codec::DownCodec;
use super::upcodec::UpCodec;

/// A body chunk waiting for window on the side it goes to, or the trailers
/// that end it.
#[derive(Clone)]
pub enum Item {
    Data {
        data: Bytes,
        /// The last chunk (END_STREAM).
        end: bool,
        /// Bytes still to release on the side it came from: its length as
        /// it came, which a filter that changed the chunk (compression)
        /// does not change. Released as the chunk goes, the rest when all
        /// of it went, so flow control counts what the sender sent.
        credit: u32,
    },
    Trailers(Vec<(Vec<u8>, Vec<u8>)>),
}

impl Item {
    /// A chunk as it came.
    pub fn data(data: Bytes, end: bool) -> Self {
        let credit = data.len() as u32;
        Self::Data { data, end, credit }
    }

    /// The same item for another receiver (a mirror's copy): the chunk's
    /// bytes shared, its own credit.
    pub fn share(&self) -> Self {
        match self {
            Self::Data { data, end, .. } => Self::data(data.clone(), *end),
            Self::Trailers(t) => Self::Trailers(t.clone()),
        }
    }
}

/// A stream's items waiting one way, oldest first. Almost every stream
/// queues at most one at a time (a response body in one DATA frame), so
/// the first waits inline and only a second allocates: a `VecDeque` per
/// stream was the gateway's most frequent allocation (one per response).
#[derive(Default)]
pub struct ItemQueue {
    /// The oldest item; `None` only when `rest` is empty too.
    front: Option<Item>,
    rest: VecDeque<Item>,
}

impl ItemQueue {
    pub fn push_back(&mut self, item: Item) {
        if self.front.is_none() {
            self.front = Some(item);
        } else {
            self.rest.push_back(item);
        }
    }

    pub fn front_mut(&mut self) -> Option<&mut Item> {
        self.front.as_mut()
    }

    pub fn pop_front(&mut self) -> Option<Item> {
        let item = self.front.take();
        self.front = self.rest.pop_front();
        item
    }

    pub fn is_empty(&self) -> bool {
        self.front.is_none()
    }

    pub fn clear(&mut self) {
        self.front = None;
        self.rest.clear();
    }

    pub fn iter(&self) -> impl Iterator<Item = &Item> {
        self.front.iter().chain(self.rest.iter())
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Item> {
        self.front.iter_mut().chain(self.rest.iter_mut())
    }
}

/// The regular fields of a trailer section, owned (they wait in a queue
/// after their header list went back to its connection).
pub fn owned(list: &HeaderList) -> Vec<(Vec<u8>, Vec<u8>)> {
    list.iter()
        .filter(|(n, _, _)| n.first() != Some(&b':'))
        .map(|(n, v, _)| (n.to_vec(), v.to_vec()))
        .collect()
}

/// Body bytes waiting in `q`: what must be released on the side they came
/// from when the stream ends before they went out.
pub fn queued(q: &ItemQueue) -> u32 {
    q.iter()
        .map(|i| match i {
            Item::Data { credit, .. } => *credit,
            Item::Trailers(_) => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: u8) -> Item {
        Item::data(Bytes::from(vec![n]), false)
    }

    fn first_byte(item: Option<Item>) -> Option<u8> {
        match item? {
            Item::Data { data, .. } => data.first().copied(),
            Item::Trailers(_) => None,
        }
    }

    #[test]
    fn the_queue_is_first_in_first_out_across_inline_and_spilled_items() {
        let mut q = ItemQueue::default();
        assert!(q.is_empty());
        q.push_back(data(1));
        q.push_back(data(2));
        q.push_back(data(3));
        assert_eq!(queued(&q), 3);
        assert_eq!(first_byte(q.pop_front()), Some(1));
        q.push_back(data(4));
        let order: Vec<u8> = std::iter::from_fn(|| first_byte(q.pop_front())).collect();
        assert_eq!(order, [2, 3, 4]);
        assert!(q.is_empty());
        assert!(q.pop_front().is_none());
        q.push_back(data(5));
        q.push_back(data(6));
        q.clear();
        assert!(q.is_empty());
        assert_eq!(queued(&q), 0);
    }
}

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
pub(crate) struct Gone;

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
            Item::Data { data, end, credit } => {
                let end = *end;
                let sent = to.send_data(to_stream, data, end) as u32;
                let give = sent.min(*credit);
                if give > 0 {
                    from.release(from_stream, give);
                    *credit -= give;
                }
                out.moved += sent;
                if !data.is_empty() {
                    return out; // out of window: WindowOpen brings us back
                }
                // All of it went: what it still owes its sender goes too.
                if *credit > 0 {
                    from.release(from_stream, std::mem::take(credit));
                }
                queue.pop_front();
                if end {
                    out.ended = true;
                    return out;
                }
            }
            Item::Trailers(t) if t.is_empty() => {
                // None left (a filter took them into the body, as
                // gRPC-Web's frame): the body just ends, with an empty
                // DATA frame on HTTP/2 as Envoy's (an empty trailer
                // block trips some clients, WebKit's).
                to.send_data(to_stream, &mut Bytes::new(), true);
                queue.pop_front();
                out.ended = true;
                return out;
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
mod grant_tests {
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
