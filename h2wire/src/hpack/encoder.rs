//! HPACK encoding (RFC 7541 §6): fields into a header block, indexing what
//! is likely to repeat.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use ahash::RandomState;
use bytes::BytesMut;

use super::table::{
    find_static, DynamicTable, StaticMatch, DEFAULT_TABLE_SIZE, ENTRY_OVERHEAD, STATIC_LEN,
};
use super::{huffman, int};

/// The largest dynamic table we keep whatever the peer allows: memory per
/// connection is what a gateway with many idle connections runs out of.
const MAX_TABLE_CAP: usize = DEFAULT_TABLE_SIZE;

/// Field or name hash → insertion number. The keys are already hashes
/// (seeded per encoder), so the map uses them as they are instead of
/// hashing them a second time.
type ByHash = HashMap<u64, u64, BuildHasherDefault<KeyIsHash>>;

/// The `Hasher` of a `u64` key that is itself a good hash.
#[derive(Default)]
struct KeyIsHash(u64);

impl Hasher for KeyIsHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys come here; anything else still hashes correctly.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
}

/// Fields whose value is new in every message (request and trace ids):
/// indexing each would only evict entries that do repeat. The first one
/// is indexed, so that its name is in the table; the next are literals
/// naming that entry, left out of the table.
fn unique_per_message(name: &[u8]) -> bool {
    matches!(
        name,
        b"x-request-id" | b"traceparent" | b"x-b3-traceid" | b"x-b3-spanid" | b"x-amzn-trace-id"
    )
}

/// The encoding side of one connection's HPACK context.
///
/// Strategy: an exact static match, then an exact dynamic match, is sent
/// indexed; anything else is a literal, naming a static or dynamic entry
/// when one has the name, added to the table unless it is sensitive
/// (`never_index`), larger than 3/4 of the table, or the table is off.
/// Strings are Huffman-coded when that is strictly shorter.
#[derive(Debug)]
pub struct Encoder {
    table: DynamicTable,
    /// Size updates owed at the start of the next block: the lowest maximum
    /// since the last block, and the latest (§4.2).
    pending: Option<(usize, usize)>,
    hasher: RandomState,
    /// Hash of (name, value) → insertion number of the newest such entry.
    by_field: ByHash,
    /// Hash of name → insertion number of the newest entry with that name.
    by_name: ByHash,
    /// (field hash, name hash) of each table entry, newest first, to unmap
    /// entries as they are evicted.
    hashes: VecDeque<(u64, u64)>,
    /// Entries ever inserted; entry `n` (0-based) has HPACK index
    /// 62 + (inserted - 1 - n) while it lives.
    inserted: u64,
    huffman: bool,
}

impl Default for Encoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Encoder {
    /// An encoder with the protocol's default 4096-byte table (until the
    /// peer's SETTINGS say otherwise). Allocates nothing.
    pub fn new() -> Self {
        Self {
            table: DynamicTable::new(DEFAULT_TABLE_SIZE),
            pending: None,
            hasher: RandomState::new(),
            by_field: ByHash::default(),
            by_name: ByHash::default(),
            hashes: VecDeque::new(),
            inserted: 0,
            huffman: true,
        }
    }

    /// The peer's SETTINGS_HEADER_TABLE_SIZE; we use `min(n, 4096)`. The
    /// change is announced at the start of the next block; if the size went
    /// down then up since the last block, both the lowest and the final
    /// size are (§4.2).
    pub fn set_max_table_size(&mut self, n: usize) {
        let n = n.min(MAX_TABLE_CAP);
        self.pending = match self.pending {
            None if n == self.table.max_size() => None,
            None => Some((n, n)),
            Some((low, _)) => Some((low.min(n), n)),
        };
    }

    /// Starts a header block: writes pending size updates. Must be called
    /// before the block's first field.
    pub fn begin_block(&mut self, dst: &mut BytesMut) {
        let Some((low, last)) = self.pending.take() else {
            return;
        };
        if low < last && low < self.table.max_size() {
            int::encode(low, 5, 0b0010_0000, dst);
            self.resize(low);
        }
        int::encode(last, 5, 0b0010_0000, dst);
        self.resize(last);
    }

    /// Appends one field. `name` is expected in lowercase (HTTP/2 requires
    /// it; normalizing is the caller's job). `never_index` marks a sensitive
    /// field (credentials, cookies with secrets): it is never added to or
    /// matched against the tables' values, and is sent so that
    /// intermediaries keep it out of theirs too (§6.2.3, §7.1.3).
    pub fn encode_field(
        &mut self,
        name: &[u8],
        value: &[u8],
        never_index: bool,
        dst: &mut BytesMut,
    ) {
        let statik = find_static(name, value);
        let mut field_hash = 0;
        // A value new in every message is never in the table: no lookup.
        let unique = unique_per_message(name);
        if !never_index && !unique {
            if let StaticMatch::Exact(i) = statik {
                int::encode(i, 7, 0b1000_0000, dst);
                return;
            }
            field_hash = self.hasher.hash_one((name, value));
            if let Some(i) = self.find_dynamic(&self.by_field, field_hash, |n, v| {
                same(n, name) && same(v, value)
            }) {
                int::encode(STATIC_LEN + 1 + i, 7, 0b1000_0000, dst);
                return;
            }
        }
        let mut name_hash = None;
        let name_index = match statik {
            StaticMatch::Exact(i) | StaticMatch::Name(i) => i,
            StaticMatch::None => {
                let h = self.hasher.hash_one(name);
                name_hash = Some(h);
                self.find_dynamic(&self.by_name, h, |n, _| same(n, name))
                    .map_or(0, |i| STATIC_LEN + 1 + i)
            }
        };
        let size = ENTRY_OVERHEAD + name.len() + value.len();
        let max = self.table.max_size();
        if never_index {
            self.literal(name_index, 4, 0b0001_0000, name, value, dst);
        } else if max == 0 || size * 4 > max * 3 || (unique && name_index != 0) {
            // Would flush most of the table for one field that may not repeat.
            self.literal(name_index, 4, 0b0000_0000, name, value, dst);
        } else {
            self.literal(name_index, 6, 0b0100_0000, name, value, dst);
            let name_hash = name_hash.unwrap_or_else(|| self.hasher.hash_one(name));
            if unique {
                // Not computed above: this entry is findable like any.
                field_hash = self.hasher.hash_one((name, value));
            }
            self.insert(name, value, field_hash, name_hash);
        }
    }

    /// Heap bytes held (the map sizes are estimates).
    pub fn memory_bytes(&self) -> usize {
        // hashbrown: one control byte per bucket besides the (u64, u64) slot.
        let map_bucket = std::mem::size_of::<(u64, u64)>() + 1;
        self.table.memory_bytes()
            + (self.by_field.capacity() + self.by_name.capacity()) * map_bucket
            + self.hashes.capacity() * std::mem::size_of::<(u64, u64)>()
    }

    /// The dynamic table, for diagnostics and tests.
    pub fn table(&self) -> &DynamicTable {
        &self.table
    }

    #[cfg(test)]
    pub(crate) fn set_huffman(&mut self, on: bool) {
        self.huffman = on;
    }

    /// Looks `hash` up in `map` and checks the entry, since hashes collide;
    /// returns its 0-based dynamic index.
    fn find_dynamic(
        &self,
        map: &ByHash,
        hash: u64,
        matches: impl Fn(&[u8], &[u8]) -> bool,
    ) -> Option<usize> {
        let n = *map.get(&hash)?;
        let i = usize::try_from(self.inserted.checked_sub(n + 1)?).ok()?;
        let (name, value) = self.table.get(i)?;
        matches(name, value).then_some(i)
    }

    fn literal(
        &self,
        name_index: usize,
        prefix: u8,
        flags: u8,
        name: &[u8],
        value: &[u8],
        dst: &mut BytesMut,
    ) {
        int::encode(name_index, prefix, flags, dst);
        if name_index == 0 {
            self.string(name, dst);
        }
        self.string(value, dst);
    }

    fn string(&self, s: &[u8], dst: &mut BytesMut) {
        let coded = huffman::encoded_len(s);
        if self.huffman && coded < s.len() {
            int::encode(coded, 7, 0b1000_0000, dst);
            huffman::encode(s, dst);
        } else {
            int::encode(s.len(), 7, 0, dst);
            dst.extend_from_slice(s);
        }
    }

    fn insert(&mut self, name: &[u8], value: &[u8], field_hash: u64, name_hash: u64) {
        // The caller checked the entry fits, so it is added.
        self.table.insert(name, value);
        self.forget_evicted(1);
        self.by_field.insert(field_hash, self.inserted);
        self.by_name.insert(name_hash, self.inserted);
        self.hashes.push_front((field_hash, name_hash));
        self.inserted += 1;
    }

    fn resize(&mut self, max: usize) {
        self.table.set_max_size(max);
        self.forget_evicted(0);
    }

    /// Unmaps entries the table evicted; `added` entries were just inserted
    /// and are not in `hashes` yet. A map slot pointing at a newer entry
    /// with the same key stays: older ones always go first.
    fn forget_evicted(&mut self, added: usize) {
        while self.hashes.len() + added > self.table.len() {
            let n = self.inserted - self.hashes.len() as u64;
            let Some((field_hash, name_hash)) = self.hashes.pop_back() else {
                break;
            };
            if self.by_field.get(&field_hash) == Some(&n) {
                self.by_field.remove(&field_hash);
            }
            if self.by_name.get(&name_hash) == Some(&n) {
                self.by_name.remove(&name_hash);
            }
        }
        if self.hashes.is_empty() {
            // Give the memory back with the table's.
            self.by_field = ByHash::default();
            self.by_name = ByHash::default();
            self.hashes = VecDeque::new();
        } else if self.hashes.capacity() > 2 * self.hashes.len() + 8 {
            let keep = self.hashes.len() * 3 / 2;
            self.hashes.shrink_to(keep);
            self.by_field.shrink_to(keep);
            self.by_name.shrink_to(keep);
        }
    }
}

/// `a == b`, without a call to `memcmp` for the short strings header
/// fields mostly are: two overlapping loads of each, up to 16 bytes.
#[inline(always)]
fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| {
        let mut w = [0; 8];
        w.copy_from_slice(&s[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let half = |s: &[u8], at: usize| {
        let mut h = [0; 4];
        h.copy_from_slice(&s[at..at + 4]);
        u32::from_le_bytes(h)
    };
    match n {
        0..=3 => a.iter().zip(b).all(|(x, y)| x == y),
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hpack::Decoder;

    fn encode(e: &mut Encoder, fields: &[(&str, &str, bool)]) -> Vec<u8> {
        let mut dst = BytesMut::new();
        e.begin_block(&mut dst);
        for (n, v, never) in fields {
            e.encode_field(n.as_bytes(), v.as_bytes(), *never, &mut dst);
        }
        dst.to_vec()
    }

    #[test]
    fn same_is_equality() {
        for n in 0..40 {
            let a: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(37)).collect();
            assert!(same(&a, &a.clone()));
            for at in 0..n {
                let mut b = a.clone();
                b[at] ^= 0x20;
                assert!(!same(&a, &b), "{n} {at}");
            }
            assert!(!same(&a, &a[..n.saturating_sub(1)]) || n == 0);
        }
    }

    #[test]
    fn indexes_repeats_and_forgets_evicted_entries() {
        let mut e = Encoder::new();
        e.set_huffman(false);
        let first = encode(&mut e, &[("x-a", "1", false)]);
        assert_eq!(first, b"\x40\x03x-a\x011");
        // Exact dynamic match, then a dynamic name with another value.
        assert_eq!(encode(&mut e, &[("x-a", "1", false)]), [0xbe]);
        assert_eq!(encode(&mut e, &[("x-a", "2", false)]), b"\x7e\x012");
        // Shrink the table to one entry: "x-a: 1" goes.
        e.set_max_table_size(50);
        assert_eq!(encode(&mut e, &[]), [0x3f, 0x13]);
        assert_eq!(encode(&mut e, &[("x-a", "1", false)]), b"\x7e\x011");
        assert_eq!(encode(&mut e, &[("x-a", "1", false)]), [0xbe]);
        assert_eq!(e.table().len(), 1);
        assert_eq!(
            (e.by_field.len(), e.by_name.len(), e.hashes.len()),
            (1, 1, 1)
        );
    }

    #[test]
    fn request_ids_stay_out_of_the_table() {
        let mut e = Encoder::new();
        let first = encode(&mut e, &[("x-request-id", "a", false)]);
        // Indexed once (01xxxxxx), for its name.
        assert_eq!(first[0] & 0xc0, 0x40);
        let second = encode(&mut e, &[("x-request-id", "b", false)]);
        let third = encode(&mut e, &[("x-request-id", "b", false)]);
        // Then literals without indexing (0000xxxx) naming that entry
        // (index 62), never indexed themselves.
        assert_eq!(second[0], 0x0f);
        assert_eq!(second, third);
    }

    #[test]
    fn never_indexed_fields_stay_out_of_the_table() {
        let mut e = Encoder::new();
        e.set_huffman(false);
        assert_eq!(
            encode(&mut e, &[("authorization", "", true)]),
            [0x1f, 0x08, 0x00]
        );
        assert_eq!(
            encode(&mut e, &[("x-secret", "s", true)]),
            b"\x10\x08x-secret\x01s"
        );
        assert!(e.table().is_empty());
        // Even an indexed copy of the same field is not matched.
        encode(&mut e, &[("x-secret", "s", false)]);
        assert_eq!(encode(&mut e, &[("x-secret", "s", true)]), b"\x1f\x2f\x01s");
    }

    #[test]
    fn large_fields_and_a_zero_table_are_not_indexed() {
        let mut e = Encoder::new();
        e.set_huffman(false);
        // 32 + 1 + 3040 = 3073 > 3072.
        let big = "v".repeat(3040);
        let block = encode(&mut e, &[("x", &big, false)]);
        assert_eq!(block[0], 0x00);
        assert!(e.table().is_empty());
        let ok = "v".repeat(3039);
        assert_eq!(encode(&mut e, &[("x", &ok, false)])[0], 0x40);
        e.set_max_table_size(0);
        assert_eq!(
            encode(&mut e, &[("x-a", "1", false)]),
            b"\x20\x00\x03x-a\x011"
        );
        assert_eq!(e.memory_bytes(), 0);
    }

    #[test]
    fn size_updates_between_blocks() {
        let mut e = Encoder::new();
        // Unchanged: nothing to say.
        e.set_max_table_size(4096);
        assert_eq!(encode(&mut e, &[]), b"");
        // Down then up: the lowest, then the final one.
        e.set_max_table_size(0);
        e.set_max_table_size(8192);
        assert_eq!(encode(&mut e, &[]), [0x20, 0x3f, 0xe1, 0x1f]);
        // Down twice: only the final one.
        e.set_max_table_size(1000);
        e.set_max_table_size(100);
        assert_eq!(encode(&mut e, &[]), [0x3f, 0x45]);
        // Up then down, ending above the current size: the final one only.
        e.set_max_table_size(300);
        e.set_max_table_size(200);
        assert_eq!(encode(&mut e, &[]), [0x3f, 0xa9, 0x01]);
        assert_eq!(e.table().max_size(), 200);
    }

    #[test]
    fn stays_in_step_with_a_decoder_through_evictions() {
        let mut e = Encoder::new();
        let mut d = Decoder::new(4096);
        for round in 0..400usize {
            if round % 100 == 50 {
                let n = [0, 300, 4096][round / 100 % 3];
                e.set_max_table_size(n);
                d.set_max_table_size(n);
            }
            let fields: Vec<(String, String)> = (0..8)
                .map(|k| {
                    (
                        format!("x-h{}", (round + k) % 13),
                        format!("v{}", (round * 7 + k) % 29),
                    )
                })
                .collect();
            let mut dst = BytesMut::new();
            e.begin_block(&mut dst);
            for (n, v) in &fields {
                e.encode_field(n.as_bytes(), v.as_bytes(), false, &mut dst);
            }
            let mut got = Vec::new();
            d.decode(&dst, usize::MAX, |f| {
                got.push((f.name.to_vec(), f.value.to_vec()))
            })
            .unwrap();
            let want: Vec<_> = fields
                .iter()
                .map(|(n, v)| (n.clone().into_bytes(), v.clone().into_bytes()))
                .collect();
            assert_eq!(got, want, "round {round}");
            assert_eq!(e.table().size(), d.table_size());
            assert_eq!(e.hashes.len(), e.table().len());
            assert!(e.by_field.len() <= e.table().len() && e.by_name.len() <= e.table().len());
        }
    }
}
