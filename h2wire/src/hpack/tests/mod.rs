//! Tests across the HPACK module: RFC 7541 Appendix C, wire compatibility
//! with the `h2` crate, and every way a block can be refused.

mod errors;
mod h2_compat;
mod rfc;

use bytes::BytesMut;

use super::{DecodeError, Decoder, Encoder};

/// A field as tests compare them.
type Owned = (Vec<u8>, Vec<u8>, bool);

fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| b.is_ascii_hexdigit()).collect();
    digits
        .chunks(2)
        .map(|c| u8::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap())
        .collect()
}

fn decode(d: &mut Decoder, block: &[u8]) -> Result<Vec<Owned>, DecodeError> {
    decode_limited(d, block, usize::MAX)
}

fn decode_limited(
    d: &mut Decoder,
    block: &[u8],
    max_list_size: usize,
) -> Result<Vec<Owned>, DecodeError> {
    let mut out = Vec::new();
    let res = d.decode(block, max_list_size, |f| {
        out.push((f.name.to_vec(), f.value.to_vec(), f.never_index))
    });
    res.map(|()| out)
}

fn encode(e: &mut Encoder, fields: &[Owned]) -> BytesMut {
    let mut dst = BytesMut::new();
    e.begin_block(&mut dst);
    for (n, v, never) in fields {
        e.encode_field(n, v, *never, &mut dst);
    }
    dst
}

fn owned(fields: &[(&str, &str)]) -> Vec<Owned> {
    fields
        .iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec(), false))
        .collect()
}
