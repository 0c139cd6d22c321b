//! The static table (RFC 7541 Appendix A) and the dynamic table (§2.3.2,
//! §4), whose entries share one byte buffer.

use std::collections::VecDeque;
use std::fmt;

/// What an entry costs beyond its name and value (§4.1).
pub const ENTRY_OVERHEAD: usize = 32;

/// SETTINGS_HEADER_TABLE_SIZE until a peer's SETTINGS say otherwise
/// (RFC 9113 §6.5.2).
pub const DEFAULT_TABLE_SIZE: usize = 4096;

/// Static table entries; HPACK index `i` (1-based) is `STATIC_TABLE[i - 1]`.
#[rustfmt::skip]
pub static STATIC_TABLE: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// Number of static entries; dynamic indexes start right after.
pub(crate) const STATIC_LEN: usize = STATIC_TABLE.len();

/// What the static table has for a field, by 1-based HPACK index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StaticMatch {
    None,
    /// An entry with this name (the first one) but another value.
    Name(usize),
    /// An entry with this name and value.
    Exact(usize),
}

/// Finds a field in the static table without hashing or allocating: the
/// `match`es compile to a switch on length and a few comparisons (a loop
/// over the values would call `memcmp` for each).
pub(crate) fn find_static(name: &[u8], value: &[u8]) -> StaticMatch {
    use StaticMatch::{Exact, Name};
    let index = match name {
        // Names with several static values.
        b":method" => {
            return match value {
                b"GET" => Exact(2),
                b"POST" => Exact(3),
                _ => Name(2),
            }
        }
        b":path" => {
            return match value {
                b"/" => Exact(4),
                b"/index.html" => Exact(5),
                _ => Name(4),
            }
        }
        b":scheme" => {
            return match value {
                b"http" => Exact(6),
                b"https" => Exact(7),
                _ => Name(6),
            }
        }
        b":status" => {
            return match value {
                b"200" => Exact(8),
                b"204" => Exact(9),
                b"206" => Exact(10),
                b"304" => Exact(11),
                b"400" => Exact(12),
                b"404" => Exact(13),
                b"500" => Exact(14),
                _ => Name(8),
            }
        }
        b"accept-encoding" => {
            return match value {
                b"gzip, deflate" => Exact(16),
                _ => Name(16),
            }
        }
        b":authority" => 1,
        b"accept-charset" => 15,
        b"accept-language" => 17,
        b"accept-ranges" => 18,
        b"accept" => 19,
        b"access-control-allow-origin" => 20,
        b"age" => 21,
        b"allow" => 22,
        b"authorization" => 23,
        b"cache-control" => 24,
        b"content-disposition" => 25,
        b"content-encoding" => 26,
        b"content-language" => 27,
        b"content-length" => 28,
        b"content-location" => 29,
        b"content-range" => 30,
        b"content-type" => 31,
        b"cookie" => 32,
        b"date" => 33,
        b"etag" => 34,
        b"expect" => 35,
        b"expires" => 36,
        b"from" => 37,
        b"host" => 38,
        b"if-match" => 39,
        b"if-modified-since" => 40,
        b"if-none-match" => 41,
        b"if-range" => 42,
        b"if-unmodified-since" => 43,
        b"last-modified" => 44,
        b"link" => 45,
        b"location" => 46,
        b"max-forwards" => 47,
        b"proxy-authenticate" => 48,
        b"proxy-authorization" => 49,
        b"range" => 50,
        b"referer" => 51,
        b"refresh" => 52,
        b"retry-after" => 53,
        b"server" => 54,
        b"set-cookie" => 55,
        b"strict-transport-security" => 56,
        b"transfer-encoding" => 57,
        b"user-agent" => 58,
        b"vary" => 59,
        b"via" => 60,
        b"www-authenticate" => 61,
        _ => return StaticMatch::None,
    };
    // The remaining entries all have an empty value.
    if value.is_empty() {
        Exact(index)
    } else {
        Name(index)
    }
}

/// Where an entry's bytes are: `off` is a position in the stream of all
/// bytes ever appended to the buffer (so compacting the buffer only moves
/// its base, not every entry), the name followed by the value.
#[derive(Debug, Clone, Copy)]
struct Entry {
    off: usize,
    name_len: u32,
    value_len: u32,
}

impl Entry {
    fn len(&self) -> usize {
        self.name_len as usize + self.value_len as usize
    }
}

/// The name of an entry to insert: bytes from elsewhere, or the name of an
/// entry already in this table (0 = newest).
#[derive(Debug, Clone, Copy)]
pub(crate) enum NameRef<'a> {
    Bytes(&'a [u8]),
    Entry(usize),
}

/// Below this much unused capacity the buffers are left alone, so a table
/// churning at its size does not reallocate.
const SHRINK_SLACK: usize = 256;

/// An HPACK dynamic table. Entries' bytes are appended to one `Vec<u8>` and
/// evicted from its front by moving a cursor; the evicted prefix is dropped
/// (one `memmove` of the live bytes) when the buffer would otherwise grow.
/// Buffers start empty and are given back when evictions leave most of them
/// unused, so an idle table costs about what its entries weigh.
///
/// Sizes are capped at 2^32 - 1, the most SETTINGS_HEADER_TABLE_SIZE or an
/// HPACK integer can say.
pub struct DynamicTable {
    bytes: Vec<u8>,
    /// Index in `bytes` of the oldest live byte; everything before is evicted.
    head: usize,
    /// Stream position of `bytes[0]`.
    base: usize,
    /// Newest first, as HPACK numbers them.
    entries: VecDeque<Entry>,
    /// Sum of entry sizes per §4.1.
    size: usize,
    max_size: usize,
}

impl DynamicTable {
    /// An empty table; allocates nothing.
    pub fn new(max_size: usize) -> Self {
        Self {
            bytes: Vec::new(),
            head: 0,
            base: 0,
            entries: VecDeque::new(),
            size: 0,
            max_size: max_size.min(u32::MAX as usize),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Current size per §4.1: 32 + name + value for each entry.
    pub fn size(&self) -> usize {
        self.size
    }

    pub fn max_size(&self) -> usize {
        self.max_size
    }

    /// Entry `i`'s name and value, 0 being the newest (HPACK index 62).
    #[inline]
    pub fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let e = self.entries.get(i)?;
        let start = self.index_of(e.off);
        let mid = start + e.name_len as usize;
        Some((
            &self.bytes[start..mid],
            &self.bytes[mid..mid + e.value_len as usize],
        ))
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.bytes.capacity() + self.entries.capacity() * std::mem::size_of::<Entry>()
    }

    /// Sets the maximum size, evicting the oldest entries to fit (§4.3).
    pub fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size.min(u32::MAX as usize);
        self.evict_to(self.max_size);
        self.trim();
    }

    /// Adds an entry (§4.4). One larger than the maximum size empties the
    /// table and is not added; returns whether it was added.
    pub fn insert(&mut self, name: &[u8], value: &[u8]) -> bool {
        self.insert_with(NameRef::Bytes(name), value)
    }

    /// [`insert`](Self::insert) with a name that may be an entry's of this
    /// table, one the insertion may itself evict (§4.4). The caller checks
    /// that `NameRef::Entry` is in range. If the new entry is too large the
    /// table empties: a caller still needing a table name copies it first.
    pub(crate) fn insert_with(&mut self, name: NameRef<'_>, value: &[u8]) -> bool {
        let name_len = match name {
            NameRef::Bytes(n) => n.len(),
            NameRef::Entry(i) => self.entries[i].name_len as usize,
        };
        let entry_size = ENTRY_OVERHEAD + name_len + value.len();
        if entry_size > self.max_size {
            self.clear();
            return false;
        }
        // Room for the bytes first: compacting keeps every live entry, so a
        // `NameRef::Entry` still resolves below.
        self.reserve(name_len + value.len());
        let off = self.base.wrapping_add(self.bytes.len());
        match name {
            NameRef::Bytes(n) => self.bytes.extend_from_slice(n),
            NameRef::Entry(i) => {
                let start = self.index_of(self.entries[i].off);
                self.bytes.extend_from_within(start..start + name_len);
            }
        }
        self.bytes.extend_from_slice(value);
        // Evict only now that the name is copied: it may be an evicted
        // entry's. Evicted bytes stay in the buffer until the next compaction.
        self.evict_to(self.max_size - entry_size);
        self.entries.push_front(Entry {
            off,
            name_len: name_len as u32,
            value_len: value.len() as u32,
        });
        self.size += entry_size;
        self.trim();
        true
    }

    /// Drops every entry and gives the buffers back.
    pub fn clear(&mut self) {
        self.bytes = Vec::new();
        self.entries = VecDeque::new();
        self.head = 0;
        self.base = 0;
        self.size = 0;
    }

    fn index_of(&self, off: usize) -> usize {
        off.wrapping_sub(self.base)
    }

    fn evict_to(&mut self, target: usize) {
        while self.size > target {
            let Some(e) = self.entries.pop_back() else {
                break;
            };
            self.size -= ENTRY_OVERHEAD + e.len();
            self.head = self.index_of(e.off) + e.len();
        }
    }

    fn reserve(&mut self, extra: usize) {
        if self.bytes.capacity() - self.bytes.len() >= extra {
            return;
        }
        // Drop the evicted prefix before growing, so the buffer grows with
        // live content only.
        self.compact();
        self.bytes.reserve(extra);
    }

    fn compact(&mut self) {
        if self.head > 0 {
            self.bytes.drain(..self.head);
            self.base = self.base.wrapping_add(self.head);
            self.head = 0;
        }
    }

    /// Gives memory back once most of it is unused (evictions, a smaller
    /// maximum); the slack keeps a table churning at its size from
    /// reallocating.
    fn trim(&mut self) {
        if self.entries.is_empty() {
            self.clear();
            return;
        }
        let live = self.bytes.len() - self.head;
        if self.bytes.capacity() > 2 * live + SHRINK_SLACK {
            self.compact();
            self.bytes.shrink_to(live + live / 2);
        }
        let n = self.entries.len();
        if self.entries.capacity() > 2 * n + 8 {
            self.entries.shrink_to(n + n / 2);
        }
    }
}

impl fmt::Debug for DynamicTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynamicTable")
            .field("len", &self.len())
            .field("size", &self.size)
            .field("max_size", &self.max_size)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_static_agrees_with_the_table() {
        for (i, (name, value)) in STATIC_TABLE.iter().enumerate() {
            assert_eq!(find_static(name, value), StaticMatch::Exact(i + 1), "{i}");
            let first = STATIC_TABLE.iter().position(|(n, _)| n == name).unwrap() + 1;
            assert_eq!(find_static(name, b"\x01other"), StaticMatch::Name(first));
        }
        assert_eq!(find_static(b"x-custom", b""), StaticMatch::None);
        assert_eq!(find_static(b"Accept", b""), StaticMatch::None);
    }

    fn entries(t: &DynamicTable) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..t.len())
            .map(|i| {
                let (n, v) = t.get(i).unwrap();
                (n.to_vec(), v.to_vec())
            })
            .collect()
    }

    #[test]
    fn accounts_sizes_and_evicts_oldest_first() {
        let mut t = DynamicTable::new(120);
        assert_eq!(t.memory_bytes(), 0);
        assert!(t.insert(b"a", b"1")); // 34
        assert!(t.insert(b"bb", b"22")); // 36
        assert!(t.insert(b"ccc", b"333")); // 38
        assert_eq!(t.size(), 108);
        assert!(t.insert(b"d", b"")); // 33: evicts "a"
        assert_eq!(t.size(), 107);
        assert_eq!(
            entries(&t),
            [
                (b"d".to_vec(), vec![]),
                (b"ccc".to_vec(), b"333".to_vec()),
                (b"bb".to_vec(), b"22".to_vec())
            ]
        );
        t.set_max_size(40);
        assert_eq!(entries(&t), [(b"d".to_vec(), vec![])]);
        assert_eq!(t.size(), 33);
        t.set_max_size(0);
        assert!(t.is_empty());
        assert_eq!(t.size(), 0);
        assert_eq!(t.memory_bytes(), 0);
    }

    #[test]
    fn too_large_an_entry_empties_the_table() {
        let mut t = DynamicTable::new(64);
        assert!(t.insert(b"a", b"1"));
        // 32 + 33 = 65 > 64.
        assert!(!t.insert(&[b'x'; 33], b""));
        assert!(t.is_empty());
        assert_eq!(t.size(), 0);
        // Exactly the maximum fits.
        assert!(t.insert(&[b'x'; 32], b""));
        assert_eq!(t.size(), 64);
    }

    #[test]
    fn name_of_an_entry_the_insertion_evicts() {
        // §4.4: the new entry names the only entry, which must go to make
        // room; the name survives.
        let mut t = DynamicTable::new(80);
        assert!(t.insert(b"custom-key", b"v")); // 43
        assert!(t.insert_with(NameRef::Entry(0), &[b'w'; 22])); // 64
        assert_eq!(entries(&t), [(b"custom-key".to_vec(), vec![b'w'; 22])]);
        assert_eq!(t.size(), 64);
    }

    #[test]
    fn stays_correct_through_compactions_and_shrinks() {
        // Against a naive model, with sizes changing now and then.
        let mut t = DynamicTable::new(4096);
        let mut model: VecDeque<(Vec<u8>, Vec<u8>)> = VecDeque::new();
        let mut max = 4096;
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for round in 0..5000 {
            if round % 700 == 699 {
                max = [0, 100, 4096, 1000, 300][rnd(5) as usize];
                t.set_max_size(max);
                let mut size: usize = model.iter().map(|(n, v)| 32 + n.len() + v.len()).sum();
                while size > max {
                    let (n, v) = model.pop_back().unwrap();
                    size -= 32 + n.len() + v.len();
                }
            }
            let reuse = !model.is_empty() && rnd(3) == 0;
            let name = if reuse {
                let i = rnd(model.len() as u64) as usize;
                let n = model[i].0.clone();
                let value = vec![b'a' + (round % 26) as u8; rnd(200) as usize];
                assert_eq!(
                    t.insert_with(NameRef::Entry(i), &value),
                    32 + n.len() + value.len() <= max
                );
                (n, value)
            } else {
                let n = vec![b'n' + (round % 7) as u8; 1 + rnd(20) as usize];
                let value = vec![b'0' + (round % 10) as u8; rnd(300) as usize];
                assert_eq!(t.insert(&n, &value), 32 + n.len() + value.len() <= max);
                (n, value)
            };
            if 32 + name.0.len() + name.1.len() > max {
                model.clear();
            } else {
                model.push_front(name);
            }
            let mut size: usize = model.iter().map(|(n, v)| 32 + n.len() + v.len()).sum();
            while size > max {
                let (n, v) = model.pop_back().unwrap();
                size -= 32 + n.len() + v.len();
            }
            assert_eq!(t.size(), size);
            assert_eq!(entries(&t), Vec::from(model.clone()), "round {round}");
            let live: usize = model.iter().map(|(n, v)| n.len() + v.len()).sum();
            assert!(
                t.bytes.capacity() <= 2 * (live + 600) + SHRINK_SLACK,
                "round {round}: capacity {} for {live} live bytes",
                t.bytes.capacity()
            );
        }
    }
}
