//! Body items waiting to cross a proxied stream one way (data chunks, trailers), in a queue that allocates only past the first.

use std::collections::VecDeque;

use bytes::Bytes;
use h2wire::message::HeaderList;

/// A body chunk waiting for window on the side it goes to, or the trailers
/// that end it.
pub enum Item {
    Data(Bytes, bool),
    Trailers(Vec<(Vec<u8>, Vec<u8>)>),
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
            Item::Data(d, _) => d.len() as u32,
            Item::Trailers(_) => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: u8) -> Item {
        Item::Data(Bytes::from(vec![n]), false)
    }

    fn first_byte(item: Option<Item>) -> Option<u8> {
        match item? {
            Item::Data(d, _) => d.first().copied(),
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
