//! Header blocks decoded by h2wire's HPACK decoder and by the h2 crate's give the same fields or are both refused, block after block on one context (dynamic table, size settings); what decodes, h2wire's encoder re-encodes to blocks both decode back to the same fields.
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
//! After a side refuses a block, its context is undefined (a
//! COMPRESSION_ERROR ends the connection): the input stops there when it
//! is h2wire, and goes on with h2wire alone when only h2 refused.
//!
//! The fields of each block h2wire decodes then go through h2wire's
//! encoder (one context for the whole input, the same table size
//! settings) and must decode, with h2wire's decoder, to the same fields,
//! never-indexed flags included, and with h2's to the same names and
//! values (or be refused by h2 for the semantic reasons above, after which
//! h2's side of this round trip stops).
#![no_main]

use std::io::Cursor;
use std::ops::ControlFlow;

use bytes::{Bytes, BytesMut};
use h2::hpack::{Decoder as H2Decoder, DecoderError, Header};
use h2wire::hpack::{DecodeError, Decoder, Encoder};
use libfuzzer_sys::fuzz_target;

/// SETTINGS_HEADER_TABLE_SIZE values a block may be preceded by.
const SIZES: [usize; 8] = [0, 1, 64, 100, 256, 4096, 8192, 65_536];
const MAX_BLOCKS: usize = 6;

type Fields = Vec<(Vec<u8>, Vec<u8>)>;
/// Fields with their never-indexed flags.
type Flagged = Vec<(Vec<u8>, Vec<u8>, bool)>;

/// h2wire's encoder and the two decoders reading what it writes.
struct RoundTrip {
    encoder: Encoder,
    ours: Decoder,
    theirs: Option<H2Decoder>,
}

impl RoundTrip {
    fn set_max_table_size(&mut self, n: usize) {
        self.encoder.set_max_table_size(n);
        self.ours.set_max_table_size(n);
        if let Some(t) = &mut self.theirs {
            t.queue_size_update(n);
        }
    }

    fn check(&mut self, fields: &[(Vec<u8>, Vec<u8>, bool)]) {
        let mut block = BytesMut::new();
        self.encoder.begin_block(&mut block);
        for (name, value, never_index) in fields {
            self.encoder
                .encode_field(name, value, *never_index, &mut block);
        }
        let mut back = Vec::new();
        self.ours
            .decode(&block, usize::MAX, |f| {
                back.push((f.name.to_vec(), f.value.to_vec(), f.never_index))
            })
            .expect("h2wire decodes h2wire's encoding");
        assert_eq!(back, fields, "h2wire's encoding decodes to other fields");

        let Some(theirs) = &mut self.theirs else {
            return;
        };
        let mut got: Fields = Vec::new();
        let result = theirs.decode(&mut Cursor::new(&mut block), |h| {
            got.push((h.name().as_slice().to_vec(), h.value_slice().to_vec()));
            ControlFlow::Continue(())
        });
        let want: Fields = fields
            .iter()
            .map(|(n, v, _)| (n.clone(), v.clone()))
            .collect();
        if want.iter().all(h2_accepts) {
            assert_eq!(result, Ok(()), "h2 refused h2wire's encoding of {want:?}");
            assert_eq!(got, want, "h2 decoded h2wire's encoding to other fields");
        } else {
            assert!(result.is_err(), "h2 took fields it refuses: {want:?}");
            self.theirs = None;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut ours = Decoder::new(4096);
    let mut theirs = Some(H2Decoder::new(4096));
    let mut round_trip = RoundTrip {
        encoder: Encoder::new(),
        ours: Decoder::new(4096),
        theirs: Some(H2Decoder::new(4096)),
    };
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
            if let Some(t) = &mut theirs {
                t.queue_size_update(n);
            }
            round_trip.set_max_table_size(n);
        }
        let Some(fields) = same_block(&mut ours, &mut theirs, block) else {
            return;
        };
        round_trip.check(&fields);
    }
});

/// Decodes `block` with both; panics on a difference not explained above.
/// Returns the fields (never-indexed flags too) when h2wire decoded it
/// (its context goes on); drops h2's decoder when only h2 refused it, for
/// one of the reasons above.
fn same_block(ours: &mut Decoder, theirs: &mut Option<H2Decoder>, block: &[u8]) -> Option<Flagged> {
    let mut flagged = Vec::new();
    let our_result = ours.decode(block, usize::MAX, |f| {
        flagged.push((f.name.to_vec(), f.value.to_vec(), f.never_index))
    });
    let our_fields: Fields = flagged
        .iter()
        .map(|(n, v, _)| (n.clone(), v.clone()))
        .collect();
    let Some(h2) = theirs else {
        return our_result.ok().map(|()| flagged);
    };

    let mut their_fields: Fields = Vec::new();
    let mut src = BytesMut::from(block);
    let their_result = h2.decode(&mut Cursor::new(&mut src), |h| {
        their_fields.push((h.name().as_slice().to_vec(), h.value_slice().to_vec()));
        ControlFlow::Continue(())
    });

    match (our_result, their_result) {
        (Ok(()), Ok(())) => {
            assert_eq!(our_fields, their_fields, "both decoded, differently");
            // Whatever h2 accepted passes its own field checks.
            assert!(our_fields.iter().all(h2_accepts));
            Some(flagged)
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
            *theirs = None;
            Some(flagged)
        }
        (Err(e), Ok(())) => {
            assert_eq!(
                e,
                DecodeError::MissingSizeUpdate,
                "h2wire refused a block h2 decoded to {their_fields:?}"
            );
            None
        }
        (Err(_), Err(_)) => None,
    }
}

/// Whether h2's decoder would take the field: its semantic checks, beyond
/// what RFC 7541 asks.
fn h2_accepts((name, value): &(Vec<u8>, Vec<u8>)) -> bool {
    Header::new(Bytes::copy_from_slice(name), Bytes::copy_from_slice(value)).is_ok()
}
