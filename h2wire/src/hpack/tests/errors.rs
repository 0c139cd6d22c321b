//! Every way a block is refused, and what the decoder keeps afterwards.

use super::{decode, decode_limited, encode, hex, owned};
use crate::hpack::{DecodeError, Decoder, Encoder};
use crate::ErrorCode;

fn fresh(block: &[u8]) -> Result<Vec<super::Owned>, DecodeError> {
    decode(&mut Decoder::new(4096), block)
}

#[test]
fn truncated() {
    // An integer cut after its prefix, a string longer than the block, a
    // string length missing.
    assert_eq!(fresh(&[0xff]), Err(DecodeError::Truncated));
    assert_eq!(fresh(b"\x40\x05abc"), Err(DecodeError::Truncated));
    assert_eq!(fresh(&[0x04]), Err(DecodeError::Truncated));
    assert_eq!(
        fresh(&[0x04, 0x7f, 0xff, 0xff, 0xff, 0x0f]),
        Err(DecodeError::Truncated)
    );
}

#[test]
fn integer_overflow() {
    // Above 2^32 - 1.
    assert_eq!(
        fresh(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]),
        Err(DecodeError::IntegerOverflow)
    );
    // Six continuation octets.
    assert_eq!(
        fresh(&[0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00]),
        Err(DecodeError::IntegerOverflow)
    );
    // In a string length too.
    assert_eq!(
        fresh(&[0x04, 0x7f, 0xff, 0xff, 0xff, 0xff, 0x7f]),
        Err(DecodeError::IntegerOverflow)
    );
}

#[test]
fn invalid_index() {
    assert_eq!(fresh(&[0x80]), Err(DecodeError::InvalidIndex(0)));
    // 62 with an empty dynamic table, as a field and as a name.
    assert_eq!(fresh(&[0xbe]), Err(DecodeError::InvalidIndex(62)));
    assert_eq!(fresh(&[0x7e, 0x00]), Err(DecodeError::InvalidIndex(62)));
    assert_eq!(
        fresh(&[0x0f, 0x2f, 0x00]),
        Err(DecodeError::InvalidIndex(62))
    );
    assert_eq!(
        fresh(&[0x7f, 0x07, 0x00]),
        Err(DecodeError::InvalidIndex(70))
    );
    // With one entry, 62 works and 63 does not.
    let mut d = Decoder::new(4096);
    decode(&mut d, b"\x40\x01a\x01b").unwrap();
    assert_eq!(decode(&mut d, &[0xbe]).unwrap(), owned(&[("a", "b")]));
    assert_eq!(decode(&mut d, &[0xbf]), Err(DecodeError::InvalidIndex(63)));
}

#[test]
fn size_update_too_large() {
    // 4097 > 4096.
    assert_eq!(
        fresh(&[0x3f, 0xe2, 0x1f]),
        Err(DecodeError::SizeUpdateTooLarge)
    );
    assert_eq!(
        fresh(&[0x3f, 0xe1, 0x1f, 0x82]).unwrap(),
        owned(&[(":method", "GET")])
    );
    // After we lowered our setting, the old size is too large.
    let mut d = Decoder::new(4096);
    d.set_max_table_size(100);
    assert_eq!(
        decode(&mut d, &[0x3f, 0xe1, 0x1f]),
        Err(DecodeError::SizeUpdateTooLarge)
    );
}

#[test]
fn size_update_not_at_start() {
    assert_eq!(fresh(&[0x82, 0x20]), Err(DecodeError::SizeUpdateNotAtStart));
    // Several at the start are fine.
    assert_eq!(
        fresh(&[0x20, 0x3f, 0xe1, 0x1f, 0x20, 0x82]).unwrap(),
        owned(&[(":method", "GET")])
    );
}

#[test]
fn missing_size_update() {
    let mut d = Decoder::new(4096);
    d.set_max_table_size(100);
    assert_eq!(decode(&mut d, &[0x82]), Err(DecodeError::MissingSizeUpdate));
    assert_eq!(decode(&mut d, &[]), Err(DecodeError::MissingSizeUpdate));
    // An update that does not go low enough does not count.
    let mut d = Decoder::new(4096);
    d.set_max_table_size(0);
    d.set_max_table_size(4096);
    assert_eq!(
        decode(&mut d, &[0x3f, 0xe1, 0x1f, 0x82]),
        Err(DecodeError::MissingSizeUpdate)
    );
    // Down to the lowest then back up is what the encoder must send.
    let mut d = Decoder::new(4096);
    d.set_max_table_size(0);
    d.set_max_table_size(4096);
    assert_eq!(
        decode(&mut d, &[0x20, 0x3f, 0xe1, 0x1f, 0x82]).unwrap(),
        owned(&[(":method", "GET")])
    );
    // Once done, later blocks need none.
    assert_eq!(
        decode(&mut d, &[0x82]).unwrap(),
        owned(&[(":method", "GET")])
    );
    // Raising the setting, or lowering it to no less than the table's
    // current maximum, asks for nothing.
    let mut d = Decoder::new(1000);
    d.set_max_table_size(4096);
    d.set_max_table_size(1000);
    assert_eq!(
        decode(&mut d, &[0x82]).unwrap(),
        owned(&[(":method", "GET")])
    );
}

#[test]
fn huffman_errors() {
    // ":path" without indexing, value Huffman-coded.
    let with_value = |v: &[u8]| {
        let mut b = vec![0x04, 0x80 | v.len() as u8];
        b.extend_from_slice(v);
        fresh(&b)
    };
    assert_eq!(with_value(&[0xff; 4]), Err(DecodeError::HuffmanEos));
    assert_eq!(
        with_value(&[0x1f, 0xff]),
        Err(DecodeError::HuffmanPaddingTooLong)
    );
    assert_eq!(with_value(&[0x06]), Err(DecodeError::HuffmanBadPadding));
    // In a literal name too.
    assert_eq!(
        fresh(&[0x00, 0x81, 0x00, 0x00]),
        Err(DecodeError::HuffmanBadPadding)
    );
    assert_eq!(
        with_value(&[0x00, 0xff]).unwrap(),
        owned(&[(":path", "0a")])
    );
}

#[test]
fn error_codes() {
    assert_eq!(DecodeError::HuffmanEos.code(), ErrorCode::COMPRESSION_ERROR);
    assert_eq!(
        DecodeError::InvalidIndex(0).code(),
        ErrorCode::COMPRESSION_ERROR
    );
    assert_eq!(
        DecodeError::HeaderListTooLarge.code(),
        ErrorCode::PROTOCOL_ERROR
    );
    assert_eq!(
        DecodeError::InvalidIndex(70).to_string(),
        "index 70 is in neither the static nor the dynamic table"
    );
}

#[test]
fn header_list_too_large_keeps_the_table_in_step() {
    let fields = owned(&[
        (":method", "GET"),
        ("x-first", "1"),
        ("x-big", &"b".repeat(200)),
        ("x-after", "2"),
    ]);
    let mut e = Encoder::new();
    let mut d = Decoder::new(4096);
    let block = encode(&mut e, &fields);
    // 42 + 40 fit in 100; x-big does not, and nothing after it is passed on.
    assert_eq!(
        decode_limited(&mut d, &block, 100),
        Err(DecodeError::HeaderListTooLarge)
    );
    let mut seen = Vec::new();
    let mut d2 = Decoder::new(4096);
    let res = d2.decode(&block, 100, |f| seen.push(f.name.to_vec()));
    assert_eq!(res, Err(DecodeError::HeaderListTooLarge));
    assert_eq!(seen, [b":method".to_vec(), b"x-first".to_vec()]);
    // The oversized block's entries were inserted: the next block indexes
    // them and decodes.
    assert_eq!(d.table_size(), e.table().size());
    let again = encode(&mut e, &fields[1..]);
    assert_eq!(again.to_vec(), [0xc0, 0xbf, 0xbe]);
    assert_eq!(decode(&mut d, &again).unwrap(), fields[1..]);
    // Exactly at the limit is fine.
    let mut d3 = Decoder::new(4096);
    assert_eq!(
        decode_limited(&mut d3, &hex("82"), 42).unwrap(),
        owned(&[(":method", "GET")])
    );
    assert_eq!(
        decode_limited(&mut Decoder::new(4096), &hex("82"), 41),
        Err(DecodeError::HeaderListTooLarge)
    );
}

#[test]
fn name_of_an_entry_evicted_by_its_own_insertion() {
    // §4.4: table max 80 holding "custom-key: v" (43); a literal with
    // indexing names it (index 62) and, at 64 bytes, evicts it.
    let mut block = vec![0x3f, 0x31, 0x40, 0x0a];
    block.extend_from_slice(b"custom-key\x01v\x7e\x16");
    block.extend_from_slice(&[b'w'; 22]);
    let mut d = Decoder::new(4096);
    let value = "w".repeat(22);
    assert_eq!(
        decode(&mut d, &block).unwrap(),
        owned(&[("custom-key", "v"), ("custom-key", &value)])
    );
    assert_eq!(d.table().len(), 1);
    assert_eq!(
        d.table().get(0),
        Some((&b"custom-key"[..], value.as_bytes()))
    );
    assert_eq!(d.table_size(), 64);
}

#[test]
fn memory_goes_back_when_the_table_shrinks() {
    let mut d = Decoder::new(4096);
    // Fill the table with 101-byte literal entries (no Huffman).
    for i in 0..60 {
        let mut block = vec![0x40, 0x08];
        block.extend_from_slice(format!("x-h{i:05}").as_bytes());
        block.push(61);
        block.extend_from_slice(&[b'v'; 61]);
        decode(&mut d, &block).unwrap();
    }
    assert!(d.table_size() > 4000 && d.table_size() <= 4096);
    let full = d.memory_bytes();
    assert!((2500..=8192).contains(&full), "{full}");
    d.set_max_table_size(0);
    decode(&mut d, &[0x20]).unwrap();
    assert_eq!(d.table_size(), 0);
    assert_eq!(d.memory_bytes(), 0);
}

#[test]
fn large_scratch_is_not_kept() {
    let mut d = Decoder::new(4096);
    let mut e = Encoder::new();
    // A 6000-byte Huffman-coded value (not indexed: too large).
    let fields = owned(&[("x-big", &"a".repeat(6000))]);
    let block = encode(&mut e, &fields);
    assert_eq!(decode(&mut d, &block).unwrap(), fields);
    assert_eq!(d.memory_bytes(), 0);
    // A small one keeps its scratch for the next block.
    let fields = owned(&[("x-small", "aaaaaaaaaa")]);
    let block = encode(&mut e, &fields);
    decode(&mut d, &block).unwrap();
    assert!(d.memory_bytes() < 256, "{}", d.memory_bytes());
}
