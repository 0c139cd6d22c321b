//! HPACK decoding (RFC 7541 §3, §6): a header block into fields borrowed
//! from the block, the tables or one reused scratch buffer.

use super::error::DecodeError;
use super::table::{DynamicTable, NameRef, ENTRY_OVERHEAD, STATIC_LEN, STATIC_TABLE};
use super::{huffman, int};

/// A decoded header field. The slices live only for the `sink` call they
/// are passed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field<'a> {
    pub name: &'a [u8],
    pub value: &'a [u8],
    /// Sent as "never indexed" (§6.2.3): an intermediary re-encoding it must
    /// do the same.
    pub never_index: bool,
}

/// Scratch capacity kept between blocks; a block that needed more gives the
/// buffer back, so one huge Huffman-coded cookie does not pin its size on an
/// idle connection.
const SCRATCH_KEEP: usize = 4096;

/// The decoding side of one connection's HPACK context.
#[derive(Debug)]
pub struct Decoder {
    table: DynamicTable,
    /// The SETTINGS_HEADER_TABLE_SIZE the peer acknowledged: the most a size
    /// update may ask for.
    max_table_size: usize,
    /// Set when that setting went below the table's current maximum: the
    /// next block must open with a size update at most this.
    required_update: Option<usize>,
    /// Huffman-decoded strings of the field being decoded.
    scratch: Vec<u8>,
}

/// Where a decoded string is: a range of the block or of the scratch buffer.
#[derive(Debug, Clone, Copy)]
enum Str {
    Block(usize, usize),
    Scratch(usize, usize),
}

#[derive(Debug, Clone, Copy)]
enum Name {
    Static(&'static [u8]),
    /// Dynamic entry, 0 = newest.
    Dynamic(usize),
    Literal(Str),
}

/// The running header list size (RFC 9113 §6.5.2), which silences the sink
/// once past the limit.
struct ListSize {
    size: usize,
    max: usize,
    over: bool,
}

impl ListSize {
    #[inline]
    fn emit<F: FnMut(Field<'_>)>(
        &mut self,
        name: &[u8],
        value: &[u8],
        never_index: bool,
        sink: &mut F,
    ) {
        self.size = self
            .size
            .saturating_add(ENTRY_OVERHEAD + name.len() + value.len());
        self.over |= self.size > self.max;
        if !self.over {
            sink(Field {
                name,
                value,
                never_index,
            });
        }
    }
}

impl Decoder {
    /// A decoder whose dynamic table may grow to `max_table_size`, the
    /// SETTINGS_HEADER_TABLE_SIZE the peer's encoder is known to use: pass
    /// [`DEFAULT_TABLE_SIZE`](super::DEFAULT_TABLE_SIZE) at connection start
    /// and call [`set_max_table_size`](Self::set_max_table_size) once the
    /// peer acknowledges another value. Allocates nothing.
    pub fn new(max_table_size: usize) -> Self {
        Self {
            table: DynamicTable::new(max_table_size),
            max_table_size,
            required_update: None,
            scratch: Vec::new(),
        }
    }

    /// We changed our SETTINGS_HEADER_TABLE_SIZE (takes effect when the
    /// peer acks): size updates may go up to `n` from now on, and if `n` is
    /// below the table's current maximum the next block must start with a
    /// size update to at most the lowest such `n` (§4.2).
    pub fn set_max_table_size(&mut self, n: usize) {
        self.max_table_size = n;
        if n < self.table.max_size() {
            self.required_update = Some(self.required_update.map_or(n, |m| m.min(n)));
        }
    }

    /// Decodes one complete header block (HEADERS + CONTINUATION fragments
    /// already joined by the caller), calling `sink` per field in order.
    ///
    /// Past `max_list_size` (32 + name + value per field, RFC 9113 §6.5.2)
    /// the rest of the block is still decoded, to keep the dynamic table in
    /// step, but `sink` is no longer called and the result is
    /// [`DecodeError::HeaderListTooLarge`]; the connection stays usable.
    /// Any other error is a connection error: the table is then undefined.
    pub fn decode<F: FnMut(Field<'_>)>(
        &mut self,
        block: &[u8],
        max_list_size: usize,
        mut sink: F,
    ) -> Result<(), DecodeError> {
        let mut list = ListSize {
            size: 0,
            max: max_list_size,
            over: false,
        };
        let result = self.decode_fields(block, &mut list, &mut sink);
        self.scratch.clear();
        if self.scratch.capacity() > SCRATCH_KEEP {
            self.scratch = Vec::new();
        }
        result?;
        if list.over {
            return Err(DecodeError::HeaderListTooLarge);
        }
        Ok(())
    }

    /// The dynamic table's current size per §4.1.
    pub fn table_size(&self) -> usize {
        self.table.size()
    }

    /// The dynamic table, for diagnostics and tests.
    pub fn table(&self) -> &DynamicTable {
        &self.table
    }

    /// Heap bytes held: the dynamic table and the scratch buffer.
    pub fn memory_bytes(&self) -> usize {
        self.table.memory_bytes() + self.scratch.capacity()
    }

    fn decode_fields<F: FnMut(Field<'_>)>(
        &mut self,
        block: &[u8],
        list: &mut ListSize,
        sink: &mut F,
    ) -> Result<(), DecodeError> {
        let mut pos = 0;
        let mut at_start = true;
        while let Some(&first) = block.get(pos) {
            if first & 0b1110_0000 == 0b0010_0000 {
                if !at_start {
                    return Err(DecodeError::SizeUpdateNotAtStart);
                }
                self.size_update(block, &mut pos)?;
                continue;
            }
            if at_start {
                at_start = false;
                if self.required_update.is_some() {
                    return Err(DecodeError::MissingSizeUpdate);
                }
            }
            // Strings of the previous field are no longer borrowed.
            self.scratch.clear();
            if first & 0b1000_0000 != 0 {
                // Indexed (§6.1).
                let index = int::decode(block, &mut pos, 7)?;
                let (name, value) = self.lookup(index)?;
                list.emit(name, value, false, sink);
            } else if first & 0b0100_0000 != 0 {
                // Literal with incremental indexing (§6.2.1).
                let index = int::decode(block, &mut pos, 6)?;
                let name = self.read_name(block, &mut pos, index)?;
                let value = read_string(block, &mut pos, &mut self.scratch)?;
                self.insert_and_emit(block, name, value, list, sink);
            } else {
                // Literal without indexing or never indexed (§6.2.2, §6.2.3).
                let never_index = first & 0b0001_0000 != 0;
                let index = int::decode(block, &mut pos, 4)?;
                let name = self.read_name(block, &mut pos, index)?;
                let value = read_string(block, &mut pos, &mut self.scratch)?;
                let name = self.name_bytes(block, name);
                let value = str_bytes(block, &self.scratch, value);
                list.emit(name, value, never_index, sink);
            }
        }
        // An empty block (or one of size updates only) is no excuse either.
        if at_start && self.required_update.is_some() {
            return Err(DecodeError::MissingSizeUpdate);
        }
        Ok(())
    }

    /// Dynamic table size update (§6.3).
    fn size_update(&mut self, block: &[u8], pos: &mut usize) -> Result<(), DecodeError> {
        let n = int::decode(block, pos, 5)?;
        if n > self.max_table_size {
            return Err(DecodeError::SizeUpdateTooLarge);
        }
        if self.required_update.is_some_and(|m| n <= m) {
            self.required_update = None;
        }
        self.table.set_max_size(n);
        Ok(())
    }

    fn lookup(&self, index: usize) -> Result<(&[u8], &[u8]), DecodeError> {
        match index {
            0 => Err(DecodeError::InvalidIndex(0)),
            1..=STATIC_LEN => Ok(STATIC_TABLE[index - 1]),
            _ => self
                .table
                .get(index - STATIC_LEN - 1)
                .ok_or(DecodeError::InvalidIndex(index)),
        }
    }

    /// The name of a literal: indexed, or (index 0) a string that follows.
    fn read_name(
        &mut self,
        block: &[u8],
        pos: &mut usize,
        index: usize,
    ) -> Result<Name, DecodeError> {
        match index {
            0 => Ok(Name::Literal(read_string(block, pos, &mut self.scratch)?)),
            1..=STATIC_LEN => Ok(Name::Static(STATIC_TABLE[index - 1].0)),
            _ if index - STATIC_LEN - 1 < self.table.len() => {
                Ok(Name::Dynamic(index - STATIC_LEN - 1))
            }
            _ => Err(DecodeError::InvalidIndex(index)),
        }
    }

    fn name_bytes<'a>(&'a self, block: &'a [u8], name: Name) -> &'a [u8] {
        match name {
            Name::Static(n) => n,
            Name::Dynamic(i) => self.table.get(i).map_or(&[][..], |(n, _)| n),
            Name::Literal(s) => str_bytes(block, &self.scratch, s),
        }
    }

    /// Adds a literal to the table and hands the field on from there.
    fn insert_and_emit<F: FnMut(Field<'_>)>(
        &mut self,
        block: &[u8],
        mut name: Name,
        value: Str,
        list: &mut ListSize,
        sink: &mut F,
    ) {
        let name_len = self.name_bytes(block, name).len();
        let value_len = str_bytes(block, &self.scratch, value).len();
        if ENTRY_OVERHEAD + name_len + value_len > self.table.max_size() {
            // Too large to index: the table empties and nothing is added
            // (§4.4). A name living in the table is saved first.
            if let Name::Dynamic(i) = name {
                let start = self.scratch.len();
                if let Some((n, _)) = self.table.get(i) {
                    self.scratch.extend_from_slice(n);
                }
                name = Name::Literal(Str::Scratch(start, self.scratch.len()));
            }
            self.table.clear();
            let name = self.name_bytes(block, name);
            list.emit(name, str_bytes(block, &self.scratch, value), false, sink);
            return;
        }
        let value_bytes = str_bytes(block, &self.scratch, value);
        let name_ref = match name {
            Name::Static(n) => NameRef::Bytes(n),
            Name::Dynamic(i) => NameRef::Entry(i),
            Name::Literal(s) => NameRef::Bytes(str_bytes(block, &self.scratch, s)),
        };
        self.table.insert_with(name_ref, value_bytes);
        if let Some((name, value)) = self.table.get(0) {
            list.emit(name, value, false, sink);
        }
    }
}

/// Reads a string literal (§5.2); a Huffman-coded one is decoded onto the
/// end of `scratch`.
fn read_string(block: &[u8], pos: &mut usize, scratch: &mut Vec<u8>) -> Result<Str, DecodeError> {
    let huffman = block.get(*pos).ok_or(DecodeError::Truncated)? & 0x80 != 0;
    let len = int::decode(block, pos, 7)?;
    let start = *pos;
    let end = match start.checked_add(len) {
        Some(end) if end <= block.len() => end,
        _ => return Err(DecodeError::Truncated),
    };
    *pos = end;
    if !huffman {
        return Ok(Str::Block(start, end));
    }
    let from = scratch.len();
    huffman::decode(&block[start..end], scratch)?;
    Ok(Str::Scratch(from, scratch.len()))
}

fn str_bytes<'a>(block: &'a [u8], scratch: &'a [u8], s: Str) -> &'a [u8] {
    match s {
        Str::Block(a, b) => &block[a..b],
        Str::Scratch(a, b) => &scratch[a..b],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(
        d: &mut Decoder,
        block: &[u8],
    ) -> Result<Vec<(String, String, bool)>, DecodeError> {
        let mut out = Vec::new();
        d.decode(block, usize::MAX, |f| {
            out.push((
                String::from_utf8_lossy(f.name).into_owned(),
                String::from_utf8_lossy(f.value).into_owned(),
                f.never_index,
            ))
        })
        .map(|()| out)
    }

    #[test]
    fn allocates_nothing_until_needed() {
        let mut d = Decoder::new(4096);
        assert_eq!(d.memory_bytes(), 0);
        // Indexed static fields and plain literals without indexing borrow
        // from the static table and the block.
        let f = decode_all(&mut d, b"\x82\x04\x0c/sample/path").unwrap();
        assert_eq!(f[1], (":path".into(), "/sample/path".into(), false));
        assert_eq!(d.memory_bytes(), 0);
    }

    #[test]
    fn huffman_name_and_value_both_stay_valid() {
        // C.4.3's last field: both strings Huffman-coded, not indexed here.
        let block = [
            0x00, 0x88, 0x25, 0xa8, 0x49, 0xe9, 0x5b, 0xa9, 0x7d, 0x7f, 0x89, 0x25, 0xa8, 0x49,
            0xe9, 0x5b, 0xb8, 0xe8, 0xb4, 0xbf,
        ];
        let mut d = Decoder::new(4096);
        assert_eq!(
            decode_all(&mut d, &block).unwrap(),
            [("custom-key".into(), "custom-value".into(), false)]
        );
        assert_eq!(d.table_size(), 0);
    }

    #[test]
    fn too_large_literal_with_a_dynamic_name_keeps_its_name() {
        let mut d = Decoder::new(4096);
        // Table max 60; insert "custom-key: v" (43).
        let mut block = vec![0x3f, 0x1d, 0x40, 0x0a];
        block.extend_from_slice(b"custom-key\x01v");
        // Literal with indexing, name = index 62, value 30 bytes: 72 > 60.
        block.extend_from_slice(&[0x7e, 30]);
        block.extend_from_slice(&[b'z'; 30]);
        let f = decode_all(&mut d, &block).unwrap();
        assert_eq!(f[1], ("custom-key".into(), "z".repeat(30), false));
        assert_eq!(d.table_size(), 0);
        assert!(d.table().is_empty());
    }
}
