//! Header blocks decoded by h2wire's HPACK decoder and by the h2 crate's give the same fields or are both refused, block after block on one context (dynamic table, size settings).
//!
//! Input: blocks, each led by a control byte (bit 3: the decoding side's
//! SETTINGS_HEADER_TABLE_SIZE changes to `SIZES[bits 0..3]` before this
//! block, on both decoders alike) and a 16-bit little-endian length.
//!
//! Where the two may rightly differ, and how each case is settled:
//!
//! - h2 validates HTTP semantics while decoding (`h2::hpack::Header::new`:
//!   lowercase token names, pseudo-header names and values, status codes,
//!   UTF-8 authority and path, field value bytes). RFC 7541 has none of
//!   that: any octets are a field. h2wire leaves it to `message::check_*`
//!   (RFC 9113 §8). So when h2 refuses a block that h2wire decodes, one of
//!   the fields h2wire produced must fail `Header::new`, and the other way
//!   round such a field must make h2 refuse the block.
//! - RFC 7541 §4.2: after the decoder's limit went down, the next block
//!   MUST start with a dynamic table size update. h2 does not check that
//!   (lenient); h2wire refuses the block with `MissingSizeUpdate`.
//! - RFC 7541 §5.1 lets a decoder refuse integers past its own limits. h2
//!   refuses any with more than 4 continuation octets (`IntegerOverflow`,
//!   even for small, non-minimally encoded values); h2wire allows 5 and
//!   values up to 2^32 - 1.
//!
//! After either side refuses a block, its context is undefined (a
//! COMPRESSION_ERROR ends the connection), so the input stops there.
#![no_main]

use std::io::Cursor;
use std::ops::ControlFlow;

use bytes::{Bytes, BytesMut};
use h2::hpack::{Decoder as H2Decoder, DecoderError, Header};
use h2wire::hpack::{DecodeError, Decoder};
use libfuzzer_sys::fuzz_target;

/// SETTINGS_HEADER_TABLE_SIZE values a block may be preceded by.
const SIZES: [usize; 8] = [0, 1, 64, 100, 256, 4096, 8192, 65_536];
const MAX_BLOCKS: usize = 6;

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

fuzz_target!(|data: &[u8]| {
    let mut ours = Decoder::new(4096);
    let mut theirs = H2Decoder::new(4096);
    let mut rest = data;
    for _ in 0..MAX_BLOCKS {
        let Some((&op, tail)) = rest.split_first() else {
            return;
        };
        let (len, tail) = match tail {
            [a, b, tail @ ..] => (usize::from(u16::from_le_bytes([*a, *b])), tail),
            _ => (tail.len(), &[][..]),
        };
        let (block, tail) = tail.split_at(len.min(tail.len()));
        rest = tail;

        if op & 0x08 != 0 {
            let n = SIZES[usize::from(op & 7)];
            ours.set_max_table_size(n);
            theirs.queue_size_update(n);
        }
        if !same_block(&mut ours, &mut theirs, block) {
            return;
        }
    }
});

/// Decodes `block` with both; panics on a difference not explained above.
/// Returns whether both accepted it (and the contexts go on).
fn same_block(ours: &mut Decoder, theirs: &mut H2Decoder, block: &[u8]) -> bool {
    let mut our_fields: Fields = Vec::new();
    let our_result = ours.decode(block, usize::MAX, |f| {
        our_fields.push((f.name.to_vec(), f.value.to_vec()))
    });

    let mut their_fields: Fields = Vec::new();
    let mut src = BytesMut::from(block);
    let their_result = theirs.decode(&mut Cursor::new(&mut src), |h| {
        their_fields.push((h.name().as_slice().to_vec(), h.value_slice().to_vec()));
        ControlFlow::Continue(())
    });

    match (our_result, their_result) {
        (Ok(()), Ok(())) => {
            assert_eq!(our_fields, their_fields, "both decoded, differently");
            // Whatever h2 accepted passes its own field checks.
            assert!(our_fields.iter().all(h2_accepts));
            true
        }
        (Ok(()), Err(e)) => {
            let semantic = our_fields.iter().any(|f| !h2_accepts(f));
            assert!(
                semantic || e == DecoderError::IntegerOverflow,
                "h2 refused ({e:?}) a block h2wire decoded to {our_fields:?}"
            );
            // h2 stopped at the first field it refused: the fields before
            // it are the same.
            assert!(
                our_fields.starts_with(&their_fields),
                "h2 {their_fields:?} is no prefix of h2wire's {our_fields:?}"
            );
            false
        }
        (Err(e), Ok(())) => {
            assert_eq!(
                e,
                DecodeError::MissingSizeUpdate,
                "h2wire refused a block h2 decoded to {their_fields:?}"
            );
            false
        }
        (Err(_), Err(_)) => false,
    }
}

/// Whether h2's decoder would take the field: its semantic checks, beyond
/// what RFC 7541 asks.
fn h2_accepts((name, value): &(Vec<u8>, Vec<u8>)) -> bool {
    Header::new(Bytes::copy_from_slice(name), Bytes::copy_from_slice(value)).is_ok()
}
