//! HPACK prefixed integers (RFC 7541 §5.1).

use bytes::{BufMut, BytesMut};

use super::error::DecodeError;

/// Continuation octets after the prefix: 5 carry 35 bits, enough for any
/// value up to 2^32 - 1 with room for a non-minimal encoding, and a peer
/// padding integers with 0x80 octets cannot make us loop.
const MAX_CONTINUATION: usize = 5;

/// Reads an integer whose first octet, at `*pos`, keeps `prefix_bits` low
/// bits for it, and moves `*pos` past it. Values above 2^32 - 1 are refused:
/// nothing in HTTP/2 needs more, and it keeps `usize` arithmetic on the
/// result safe on every platform.
pub(crate) fn decode(buf: &[u8], pos: &mut usize, prefix_bits: u8) -> Result<usize, DecodeError> {
    let max_prefix = ((1u16 << prefix_bits) - 1) as u8;
    let first = *buf.get(*pos).ok_or(DecodeError::Truncated)?;
    *pos += 1;
    let prefix = first & max_prefix;
    if prefix < max_prefix {
        return Ok(usize::from(prefix));
    }
    let mut value = u64::from(max_prefix);
    let mut shift = 0;
    for _ in 0..MAX_CONTINUATION {
        let b = *buf.get(*pos).ok_or(DecodeError::Truncated)?;
        *pos += 1;
        value += u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return match u32::try_from(value) {
                Ok(v) => Ok(v as usize),
                Err(_) => Err(DecodeError::IntegerOverflow),
            };
        }
        shift += 7;
    }
    Err(DecodeError::IntegerOverflow)
}

/// Writes `value` with a `prefix_bits` prefix; `flags` fills the first
/// octet's high bits (the representation's pattern).
pub(crate) fn encode(value: usize, prefix_bits: u8, flags: u8, dst: &mut BytesMut) {
    let max_prefix = usize::from((1u16 << prefix_bits) - 1);
    if value < max_prefix {
        dst.put_u8(flags | value as u8);
        return;
    }
    dst.put_u8(flags | max_prefix as u8);
    let mut rest = value - max_prefix;
    while rest >= 0x80 {
        dst.put_u8(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    dst.put_u8(rest as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(value: usize, prefix: u8, flags: u8) -> Vec<u8> {
        let mut b = BytesMut::new();
        encode(value, prefix, flags, &mut b);
        b.to_vec()
    }

    fn dec(buf: &[u8], prefix: u8) -> Result<(usize, usize), DecodeError> {
        let mut pos = 0;
        decode(buf, &mut pos, prefix).map(|v| (v, pos))
    }

    // RFC 7541 C.1.1–C.1.3.
    #[test]
    fn rfc_c1_examples() {
        assert_eq!(enc(10, 5, 0), [0b0000_1010]);
        assert_eq!(enc(10, 5, 0b1110_0000), [0b1110_1010]);
        assert_eq!(dec(&[0b1110_1010], 5), Ok((10, 1)));
        assert_eq!(enc(1337, 5, 0), [0b0001_1111, 0b1001_1010, 0b0000_1010]);
        assert_eq!(
            dec(&[0b1111_1111, 0b1001_1010, 0b0000_1010], 5),
            Ok((1337, 3))
        );
        assert_eq!(enc(42, 8, 0), [42]);
        assert_eq!(dec(&[42], 8), Ok((42, 1)));
    }

    #[test]
    fn round_trips_at_every_prefix_and_boundary() {
        for prefix in 1..=8u8 {
            let max = (1usize << prefix) - 1;
            for v in [
                0,
                1,
                max - 1,
                max,
                max + 1,
                max + 127,
                max + 128,
                1 << 20,
                u32::MAX as usize,
            ] {
                let bytes = enc(v, prefix, 0);
                assert_eq!(
                    dec(&bytes, prefix),
                    Ok((v, bytes.len())),
                    "{v} on {prefix} bits"
                );
            }
        }
    }

    #[test]
    fn refuses_truncated_and_overflowing_integers() {
        assert_eq!(dec(&[], 5), Err(DecodeError::Truncated));
        assert_eq!(dec(&[0x1f], 5), Err(DecodeError::Truncated));
        assert_eq!(dec(&[0x1f, 0x80], 5), Err(DecodeError::Truncated));
        // 2^32 exactly: one past the largest accepted value.
        let mut big = BytesMut::new();
        encode(u32::MAX as usize + 1, 5, 0, &mut big);
        assert_eq!(dec(&big, 5), Err(DecodeError::IntegerOverflow));
        // Zero-valued continuation octets forever: refused after five.
        assert_eq!(
            dec(&[0x1f, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00], 5),
            Err(DecodeError::IntegerOverflow)
        );
        assert_eq!(dec(&[0x1f, 0x80, 0x80, 0x80, 0x80, 0x00], 5), Ok((31, 6)));
    }
}
