//! One header block's fields, packed in a reusable byte arena.

use std::cell::RefCell;

/// Arena sizes kept across [`HeaderList::clear`]. Ordinary requests fit
/// well within both, so a warm list never allocates; a list that needed
/// more (a 60 KiB cookie) gives its buffers back rather than pin that size
/// on a connection that may sit idle for minutes.
const BYTES_KEEP: usize = 16 << 10;
const FIELDS_KEEP: usize = 128;

/// Lists a thread keeps for reuse ([`HeaderList::pooled`]). A shard is one
/// thread, so this is a shard-wide pool: it covers a burst of requests on
/// any of its connections (a client multiplexing 32 requests takes 32 lists
/// at once), where a per-connection pool would allocate for each burst or
/// pin lists on idle connections.
///
/// A proxy holds each request's list until its response head arrives (a
/// refused stream is resent from it), so under load the lists out at once
/// number about the streams in flight, and a burst of responses recycles
/// hundreds in one turn. A pool smaller than that frees lists only to
/// allocate them again a turn later: with 512 streams in flight and a cap
/// of 64 that churn was 6 % of a proxy's CPU. So the pool may grow to
/// `POOL_MAX` (at most about 1.3 MiB per thread), and the driver gives the
/// surplus back with [`HeaderList::trim_pool`] when its connections go
/// quiet.
const POOL_MAX: usize = 1024;

/// What [`HeaderList::trim_pool`] keeps on a thread with no streams: a
/// burst of ordinary size allocates nothing (about 90 KiB).
const POOL_KEEP: usize = 64;

thread_local! {
    static POOL: RefCell<Vec<HeaderList>> = const { RefCell::new(Vec::new()) };
}

/// The fields of one header block, in order, with every name and value in
/// one byte arena. Reused between streams: [`clear`](Self::clear) keeps the
/// capacity, so pushing a field costs a copy and no allocation.
///
/// Names are compared byte for byte: HTTP/2 names are lowercase, and a
/// list that passed the `check_*` functions holds no other kind.
#[derive(Debug, Clone, Default)]
pub struct HeaderList {
    /// Names and values back to back: field `i` starts where field `i - 1`
    /// ends.
    bytes: Vec<u8>,
    fields: Vec<Entry>,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    name_end: usize,
    value_end: usize,
    never_index: bool,
}

impl HeaderList {
    /// An empty list. Allocates nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty list with room for `bytes` of names and values and `fields`
    /// fields: a new list that grows field by field reallocates several
    /// times per request.
    pub fn with_capacity(bytes: usize, fields: usize) -> Self {
        Self {
            bytes: Vec::with_capacity(bytes),
            fields: Vec::with_capacity(fields),
        }
    }

    /// A list for a new header block, sized for a typical request or
    /// response head (a browser's is 0.5–1 KiB): one allocation each for
    /// bytes and fields instead of a reallocation every few fields.
    pub fn for_block() -> Self {
        Self::with_capacity(1024, 16)
    }

    /// A list from this thread's pool, empty with its buffers kept, or a
    /// new one as [`for_block`](Self::for_block) makes.
    pub fn pooled() -> Self {
        POOL.try_with(|p| p.borrow_mut().pop())
            .ok()
            .flatten()
            .unwrap_or_else(Self::for_block)
    }

    /// Clears the list and keeps it in this thread's pool for
    /// [`pooled`](Self::pooled), unless the pool is full or the list gave
    /// its buffers back on clearing (a new list is sized better).
    pub fn recycle(mut self) {
        self.clear();
        if self.bytes.capacity() == 0 || self.fields.capacity() == 0 {
            return;
        }
        // A thread being torn down has no pool left: the list is dropped.
        let _ = POOL.try_with(|p| {
            let mut p = p.borrow_mut();
            if p.len() < POOL_MAX {
                p.push(self);
            }
        });
    }

    /// Drops pooled lists beyond `POOL_KEEP + in_use` on this thread:
    /// for a driver whose connection went quiet, with `in_use` the streams
    /// its thread still has in flight (each may hand a list back soon).
    pub fn trim_pool(in_use: usize) {
        let keep = POOL_KEEP.saturating_add(in_use).min(POOL_MAX);
        let _ = POOL.try_with(|p| {
            let mut p = p.borrow_mut();
            if p.len() > keep {
                p.truncate(keep);
                p.shrink_to(keep);
            }
        });
    }

    /// Lists in this thread's pool now.
    pub fn pool_len() -> usize {
        POOL.try_with(|p| p.borrow().len()).unwrap_or(0)
    }

    /// Empties the list for the next block, keeping its buffers unless they
    /// grew past what an ordinary block needs.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.fields.clear();
        if self.bytes.capacity() > BYTES_KEEP {
            self.bytes = Vec::new();
        }
        if self.fields.capacity() > FIELDS_KEEP {
            self.fields = Vec::new();
        }
    }

    /// Appends a field, as given to an HPACK decoder's sink.
    pub fn push(&mut self, name: &[u8], value: &[u8], never_index: bool) {
        self.bytes.extend_from_slice(name);
        let name_end = self.bytes.len();
        self.bytes.extend_from_slice(value);
        self.fields.push(Entry {
            name_end,
            value_end: self.bytes.len(),
            never_index,
        });
    }

    pub fn len(&self) -> usize {
        self.fields.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// `(name, value, never_index)` in block order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8], bool)> + '_ {
        let mut start = 0;
        self.fields.iter().map(move |e| {
            let name = &self.bytes[start..e.name_end];
            let value = &self.bytes[e.name_end..e.value_end];
            start = e.value_end;
            (name, value, e.never_index)
        })
    }

    /// The value of the first field called `name`.
    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.iter().find(|&(n, _, _)| n == name).map(|(_, v, _)| v)
    }

    /// The value of pseudo-header `name` (`:protocol`), looking only at
    /// the pseudo-headers, which come first in a checked message (RFC
    /// 9113 §8.3): a few fields, not the whole list.
    pub fn pseudo(&self, name: &[u8]) -> Option<&[u8]> {
        self.iter()
            .take_while(|(n, _, _)| n.first() == Some(&b':'))
            .find(|&(n, _, _)| n == name)
            .map(|(_, v, _)| v)
    }

    /// The values of every field called `name`, in block order.
    pub fn get_all<'a>(&'a self, name: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.iter()
            .filter(move |&(n, _, _)| n == name)
            .map(|(_, v, _)| v)
    }

    /// Heap bytes held by the arena and the field index.
    pub fn memory_bytes(&self) -> usize {
        self.bytes.capacity() + self.fields.capacity() * std::mem::size_of::<Entry>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typical(list: &mut HeaderList) {
        list.push(b":method", b"GET", false);
        list.push(b":scheme", b"https", false);
        list.push(b":authority", b"example.com", false);
        list.push(b":path", b"/index.html?q=1", false);
        list.push(b"accept", b"*/*", false);
        list.push(b"cookie", b"a=b", true);
        list.push(b"cookie", b"c=d", true);
        list.push(b"user-agent", &[b'u'; 120], false);
    }

    #[test]
    fn fields_come_back_in_order() {
        let mut l = HeaderList::new();
        assert!(l.is_empty());
        assert_eq!(l.memory_bytes(), 0);
        typical(&mut l);
        assert_eq!(l.len(), 8);
        let v: Vec<_> = l.iter().take(2).collect();
        assert_eq!(
            v,
            [
                (&b":method"[..], &b"GET"[..], false),
                (&b":scheme"[..], &b"https"[..], false)
            ]
        );
        assert_eq!(l.iter().nth(5), Some((&b"cookie"[..], &b"a=b"[..], true)));
    }

    #[test]
    fn get_finds_the_first_and_get_all_every_match() {
        let mut l = HeaderList::new();
        typical(&mut l);
        assert_eq!(l.get(b"cookie"), Some(&b"a=b"[..]));
        assert_eq!(l.get(b":path"), Some(&b"/index.html?q=1"[..]));
        assert_eq!(l.get(b"Cookie"), None, "names compare exactly");
        assert_eq!(l.pseudo(b":path"), Some(&b"/index.html?q=1"[..]));
        assert_eq!(l.pseudo(b"cookie"), None, "only pseudo-headers");
        assert_eq!(l.get(b"absent"), None);
        let all: Vec<_> = l.get_all(b"cookie").collect();
        assert_eq!(all, [&b"a=b"[..], &b"c=d"[..]]);
        assert_eq!(l.get_all(b"absent").count(), 0);
    }

    #[test]
    fn empty_names_and_values_keep_their_places() {
        let mut l = HeaderList::new();
        l.push(b"", b"", false);
        l.push(b"x", b"", false);
        l.push(b"", b"y", false);
        let v: Vec<_> = l.iter().map(|(n, v, _)| (n, v)).collect();
        assert_eq!(v, [(&b""[..], &b""[..]), (b"x", b""), (b"", b"y")]);
    }

    #[test]
    fn reuse_allocates_nothing_after_warm_up() {
        let mut l = HeaderList::new();
        typical(&mut l);
        l.clear();
        typical(&mut l);
        let (bytes, fields) = (l.bytes.capacity(), l.fields.capacity());
        for _ in 0..100 {
            l.clear();
            assert!(l.is_empty());
            typical(&mut l);
            assert_eq!(l.bytes.capacity(), bytes);
            assert_eq!(l.fields.capacity(), fields);
        }
    }

    #[test]
    fn a_huge_list_gives_its_buffers_back_on_clear() {
        let mut l = HeaderList::new();
        l.push(b"cookie", &vec![b'c'; 60 << 10], false);
        for _ in 0..200 {
            l.push(b"x", b"y", false);
        }
        assert!(l.memory_bytes() > 60 << 10);
        l.clear();
        assert_eq!(l.memory_bytes(), 0);
        // An ordinary list keeps its buffers.
        typical(&mut l);
        let held = l.memory_bytes();
        l.clear();
        assert_eq!(l.memory_bytes(), held);
    }

    #[test]
    fn trimming_keeps_room_for_the_streams_in_flight() {
        // Tests run on their own threads: this pool is this test's.
        let lists = |n: usize| -> Vec<_> {
            (0..n)
                .map(|_| {
                    let mut l = HeaderList::pooled();
                    typical(&mut l);
                    l
                })
                .collect()
        };
        // A burst of 600 lists all come back: the pool covers it.
        for l in lists(600) {
            l.recycle();
        }
        assert_eq!(HeaderList::pool_len(), 600);
        // With 100 streams still in flight, room for them stays.
        HeaderList::trim_pool(100);
        assert_eq!(HeaderList::pool_len(), POOL_KEEP + 100);
        // Quiet: the ordinary keep; trimming again changes nothing.
        HeaderList::trim_pool(0);
        assert_eq!(HeaderList::pool_len(), POOL_KEEP);
        HeaderList::trim_pool(0);
        assert_eq!(HeaderList::pool_len(), POOL_KEEP);
        // Never past POOL_MAX, however many come back.
        for l in lists(POOL_MAX + 50) {
            l.recycle();
        }
        assert_eq!(HeaderList::pool_len(), POOL_MAX);
        HeaderList::trim_pool(usize::MAX);
        assert_eq!(HeaderList::pool_len(), POOL_MAX);
    }

    #[test]
    fn recycled_lists_come_back_from_the_pool() {
        // Tests run on their own threads: this pool is this test's.
        let pooled = || POOL.with(|p| p.borrow().len());
        let mut held: Vec<_> = (0..POOL_MAX + 8).map(|_| HeaderList::pooled()).collect();
        for l in &mut held {
            typical(l);
        }
        let sizes: Vec<_> = held.iter().map(HeaderList::memory_bytes).collect();
        for l in held {
            l.recycle();
        }
        // The pool keeps POOL_MAX, empty, buffers and all.
        assert_eq!(pooled(), POOL_MAX);
        let again: Vec<_> = (0..POOL_MAX).map(|_| HeaderList::pooled()).collect();
        assert_eq!(pooled(), 0);
        for (l, size) in again.iter().zip(sizes) {
            assert!(l.is_empty());
            assert_eq!(l.memory_bytes(), size);
        }
        // A list that gave its buffers back is not kept.
        let mut huge = HeaderList::pooled();
        huge.push(b"cookie", &vec![b'c'; 60 << 10], false);
        huge.recycle();
        assert_eq!(pooled(), 0);
        drop(again);
        assert_eq!(pooled(), 0, "dropped lists do not come back");
    }
}
