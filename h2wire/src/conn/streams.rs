//! The streams a connection knows: their state and windows, in a map that shrinks back when they end.

use std::collections::HashMap;

use ahash::RandomState;

use crate::stream_state::StreamState;
use crate::window::{RecvWindow, Window};

/// One open (or half-closed) stream the application knows about.
#[derive(Debug)]
pub(super) struct Stream {
    pub state: StreamState,
    /// What we may still send (the peer's window for us).
    pub send: Window,
    /// What the peer may still send, and what to give back when.
    pub recv: RecvWindow,
    /// The peer's declared content-length minus the DATA received so far
    /// (§8.1.1).
    pub content_left: Option<u64>,
    /// The final (not 1xx) response head went out (server) or came in
    /// (client): further HEADERS are trailers.
    pub head_done: bool,
    /// Client: the request was HEAD, so the response has no body whatever
    /// its content-length says (RFC 9110 §9.3.2).
    pub head_request: bool,
}

/// Map capacity never given back (hashbrown's smallest table holds 3): a
/// few streams at a time is the common case.
const KEEP_CAPACITY: usize = 3;

/// Map capacity a stream removal does not give back (hashbrown's 64-bucket
/// table). A client that keeps a few dozen streams in flight empties and
/// refills its map every few turns when responses come in batches;
/// shrinking on each drop and growing again cost a rehash and an
/// allocation every time. [`StreamMap::shrink`], when the connection goes
/// quiet, gives this back.
const BURST_KEEP: usize = 56;

/// Streams by id. A hash map rather than a slab indexed by id: client ids
/// grow without bound, and the map's memory follows the live count.
#[derive(Debug)]
pub(super) struct StreamMap {
    map: HashMap<u32, Stream, RandomState>,
    /// The capacity of the table as allocated. `capacity()` is not that:
    /// hashbrown counts a removed entry's tombstone against it until the
    /// next rehash, so it drops (by chance, with the hash seed) while the
    /// allocation stays. The table only grows on insert and is only
    /// replaced in `shrink_to`, and right after either it has no
    /// tombstones.
    allocated: usize,
}

impl StreamMap {
    pub fn new() -> Self {
        Self {
            map: HashMap::with_hasher(RandomState::new()),
            allocated: 0,
        }
    }

    pub fn get_mut(&mut self, id: u32) -> Option<&mut Stream> {
        self.map.get_mut(&id)
    }

    pub fn get(&self, id: u32) -> Option<&Stream> {
        self.map.get(&id)
    }

    pub fn contains(&self, id: u32) -> bool {
        self.map.contains_key(&id)
    }

    pub fn insert(&mut self, id: u32, s: Stream) {
        self.map.insert(id, s);
        self.allocated = self.allocated.max(self.map.capacity());
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut Stream)> {
        self.map.iter_mut().map(|(&id, s)| (id, s))
    }

    pub fn remove(&mut self, id: u32) -> Option<Stream> {
        let s = self.map.remove(&id);
        let (len, cap) = (self.map.len(), self.allocated);
        // Shrinking costs a rehash, so only on a big drop from a big
        // table: amortized over the removals that led to it.
        if cap > BURST_KEEP && len * 4 < cap {
            self.shrink_to(len * 2);
        }
        s
    }

    /// Gives back what a burst left, keeping room for a few streams so
    /// that one request at a time never reallocates.
    pub fn shrink(&mut self) {
        self.shrink_to(self.map.len().max(KEEP_CAPACITY));
    }

    /// Moves the streams into a fresh table for `min` or more, if that is
    /// smaller than the current one. (`HashMap::shrink_to` may keep the
    /// table, tombstones and all, and would leave `allocated` unknown.)
    fn shrink_to(&mut self, min: usize) {
        let want = min.max(self.map.len());
        let mut fresh = HashMap::with_capacity_and_hasher(want, self.map.hasher().clone());
        if fresh.capacity() >= self.allocated {
            return;
        }
        fresh.extend(self.map.drain());
        self.map = fresh;
        self.allocated = self.map.capacity();
    }

    /// Removes the stream if both sides are done with it.
    pub fn remove_if_closed(&mut self, id: u32) {
        if self.map.get(&id).is_some_and(|s| s.state.is_closed()) {
            self.remove(id);
        }
    }

    pub fn memory_bytes(&self) -> usize {
        Self::bytes_for(self.allocated)
    }

    /// What a map keeps between bursts at most, until `shrink`.
    #[cfg(test)]
    pub fn burst_keep_bytes() -> usize {
        Self::bytes_for(BURST_KEEP)
    }

    fn bytes_for(capacity: usize) -> usize {
        // hashbrown: one control byte per bucket besides the slot.
        capacity * (std::mem::size_of::<(u32, Stream)>() + 1)
    }
}

/// How many streams we reset are remembered after they leave the map.
const RESET_MEMORY: usize = 16;

/// Ids of the streams we reset most recently. Their HEADERS may still be in
/// flight (trailers sent before the peer saw our RST_STREAM), and those
/// must be decoded and dropped rather than taken for a stream id reused.
/// A fixed ring: remembering every reset stream would grow without bound.
#[derive(Debug, Default)]
pub(super) struct ResetRing {
    ids: [u32; RESET_MEMORY],
    next: usize,
}

impl ResetRing {
    pub fn push(&mut self, id: u32) {
        self.ids[self.next] = id;
        self.next = (self.next + 1) % RESET_MEMORY;
    }

    pub fn contains(&self, id: u32) -> bool {
        id != 0 && self.ids.contains(&id)
    }
}
