//! The HPACK Huffman code (RFC 7541 §5.2, Appendix B).
//!
//! The code is canonical, so the bit lengths below are all it takes: codes,
//! the by-length decoding tables and a 10-bit lookup table are derived from
//! them by `const fn` at compile time. Decoding reads the input 8 bytes at
//! a time and looks up the next 10 bits once per symbol; only codes longer
//! than that (control bytes, bytes above 0x7f, a few rare punctuation
//! marks) walk the per-length limits.

use bytes::{BufMut, BytesMut};

use super::error::DecodeError;

/// End of string, never valid inside a string (its prefix is the padding).
const EOS: u16 = 256;
const MAX_LEN: usize = 30;

/// Code length in bits of each symbol, 0..=255 then EOS (Appendix B).
#[rustfmt::skip]
const LEN: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, //   0
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, //  16
     6, 10, 10, 12, 13,  6,  8, 11, 10, 10,  8, 11,  8,  6,  6,  6, //  32 ' '
     5,  5,  5,  6,  6,  6,  6,  6,  6,  6,  7,  8, 15,  6, 12, 10, //  48 '0'
    13,  6,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7, //  64 '@'
     7,  7,  7,  7,  7,  7,  7,  7,  8,  7,  8, 13, 19, 13, 14,  6, //  80 'P'
    15,  5,  6,  5,  6,  5,  6,  6,  6,  5,  7,  7,  6,  6,  6,  5, //  96 '`'
     6,  7,  6,  5,  5,  6,  7,  7,  7,  7,  7, 15, 11, 14, 13, 28, // 112 'p'
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, // 128
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, // 144
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, // 160
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, // 176
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, // 192
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, // 208
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, // 224
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, // 240
    30,                                                             // EOS
];

/// How many symbols have each length.
const fn count_lengths() -> [u32; MAX_LEN + 1] {
    let mut count = [0; MAX_LEN + 1];
    let mut s = 0;
    while s < LEN.len() {
        count[LEN[s] as usize] += 1;
        s += 1;
    }
    count
}

/// The first (smallest) code of each length: canonical codes of one length
/// are consecutive, and each length starts where the shorter ones ended,
/// shifted left by one.
const fn first_codes() -> [u32; MAX_LEN + 1] {
    let count = count_lengths();
    let mut first = [0; MAX_LEN + 1];
    let mut len = 2;
    while len <= MAX_LEN {
        first[len] = (first[len - 1] + count[len - 1]) << 1;
        len += 1;
    }
    first
}

/// One past the last code of each length: an `len`-bit prefix below this is
/// a complete code (it cannot be below `FIRST[len]`, shorter codes having
/// been ruled out first).
const fn limits() -> [u32; MAX_LEN + 1] {
    let count = count_lengths();
    let mut limit = first_codes();
    let mut len = 0;
    while len <= MAX_LEN {
        limit[len] += count[len];
        len += 1;
    }
    limit
}

/// Each symbol's code, right-aligned: symbols of one length take that
/// length's codes in symbol order.
const fn codes() -> [u32; 257] {
    let mut next = first_codes();
    let mut code = [0; 257];
    let mut s = 0;
    while s < LEN.len() {
        let len = LEN[s] as usize;
        code[s] = next[len];
        next[len] += 1;
        s += 1;
    }
    code
}

/// Symbols ordered by (length, symbol) — the order of their codes — and
/// where each length starts in that order.
const fn sorted() -> ([u16; 257], [u16; MAX_LEN + 1]) {
    let mut syms = [0; 257];
    let mut start = [0; MAX_LEN + 1];
    let mut n = 0;
    let mut len = 1;
    while len <= MAX_LEN {
        start[len] = n as u16;
        let mut s = 0;
        while s < LEN.len() {
            if LEN[s] as usize == len {
                syms[n] = s as u16;
                n += 1;
            }
            s += 1;
        }
        len += 1;
    }
    (syms, start)
}

/// Bits looked up at once; all codes of printable ASCII but a handful fit.
const FAST_BITS: u32 = 10;

/// For each `FAST_BITS`-bit window: `len << 8 | symbol` of the code it
/// starts with, or 0 when that code is longer than the window.
const fn fast_table() -> [u16; 1 << FAST_BITS] {
    let code = codes();
    let mut table = [0; 1 << FAST_BITS];
    let mut s = 0;
    while s < 256 {
        let len = LEN[s] as u32;
        if len <= FAST_BITS {
            let lo = (code[s] << (FAST_BITS - len)) as usize;
            let hi = ((code[s] + 1) << (FAST_BITS - len)) as usize;
            let mut i = lo;
            while i < hi {
                table[i] = ((len as u16) << 8) | s as u16;
                i += 1;
            }
        }
        s += 1;
    }
    table
}

static CODE: [u32; 257] = codes();
static FIRST: [u32; MAX_LEN + 1] = first_codes();
static LIMIT: [u32; MAX_LEN + 1] = limits();
static SORTED: ([u16; 257], [u16; MAX_LEN + 1]) = sorted();
static FAST: [u16; 1 << FAST_BITS] = fast_table();

/// Length in bytes of `src` Huffman-coded, padding included.
pub fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src.iter().map(|&b| usize::from(LEN[usize::from(b)])).sum();
    bits.div_ceil(8)
}

/// Appends `src` Huffman-coded to `dst`, padded with the high bits of EOS.
pub fn encode(src: &[u8], dst: &mut BytesMut) {
    // Codes are packed into the low end of `acc` and written out 32 bits at
    // a time: under 32 bits are pending before a code of at most 30 is
    // added, so 64 bits always hold them.
    let mut acc: u64 = 0;
    let mut pending: u32 = 0;
    for &b in src {
        let len = u32::from(LEN[usize::from(b)]);
        acc = (acc << len) | u64::from(CODE[usize::from(b)]);
        pending += len;
        if pending >= 32 {
            pending -= 32;
            dst.put_u32((acc >> pending) as u32);
        }
    }
    // Pad to the byte boundary with ones, the high bits of EOS.
    let pad = pending.wrapping_neg() & 7;
    acc = (acc << pad) | ((1 << pad) - 1);
    pending += pad;
    while pending >= 8 {
        pending -= 8;
        dst.put_u8((acc >> pending) as u8);
    }
}

/// Appends the Huffman-decoded `src` to `dst`. Refuses EOS inside the
/// string and padding that is longer than 7 bits or not all ones (§5.2);
/// `dst` is left as it was then.
pub fn decode(src: &[u8], dst: &mut Vec<u8>) -> Result<(), DecodeError> {
    // Codes are at least 5 bits long, so this is all the room output needs.
    // Writing into a slice rather than pushing keeps the output position in
    // a register.
    let start = dst.len();
    dst.resize(start + src.len() * 8 / 5, 0);
    match decode_into(src, &mut dst[start..]) {
        Ok(n) => {
            dst.truncate(start + n);
            Ok(())
        }
        Err(e) => {
            dst.truncate(start);
            Err(e)
        }
    }
}

/// Decodes `src` into `out`, which has room for it; returns the length.
fn decode_into(src: &[u8], out: &mut [u8]) -> Result<usize, DecodeError> {
    let mut n = 0;
    // Unread bits, left-aligned.
    let mut acc: u64 = 0;
    let mut avail: u32 = 0;
    let mut next = 0;
    // Bulk: load 8 bytes at once, claim the whole ones that fit, and decode
    // while 30 bits (the longest code) are there, so no symbol needs an
    // end-of-input check. Bits of a byte loaded but not claimed sit where
    // that byte goes, so loading it again ORs in the same bits.
    while let Some(word) = src.get(next..).and_then(|s| s.first_chunk::<8>()) {
        acc |= u64::from_be_bytes(*word) >> avail;
        let take = (63 - avail) / 8;
        next += take as usize;
        avail += take * 8;
        while avail >= MAX_LEN as u32 {
            let (sym, len) = lookup(acc);
            if sym == EOS {
                return Err(DecodeError::HuffmanEos);
            }
            out[n] = sym as u8;
            n += 1;
            acc <<= len;
            avail -= len;
        }
    }
    // Tail, a byte at a time; past the input the bits are zero.
    loop {
        while avail <= 56 {
            let Some(&b) = src.get(next) else { break };
            acc |= u64::from(b) << (56 - avail);
            avail += 8;
            next += 1;
        }
        if avail == 0 {
            return Ok(n);
        }
        let (sym, len) = lookup(acc);
        if len > avail {
            // Input is exhausted (a refill leaves more than 56 bits otherwise)
            // and what remains is no complete code: it must be padding.
            break;
        }
        if sym == EOS {
            return Err(DecodeError::HuffmanEos);
        }
        out[n] = sym as u8;
        n += 1;
        acc <<= len;
        avail -= len;
    }
    if avail > 7 {
        return Err(DecodeError::HuffmanPaddingTooLong);
    }
    if acc >> (64 - avail) != (1 << avail) - 1 {
        return Err(DecodeError::HuffmanBadPadding);
    }
    Ok(n)
}

/// The symbol whose code starts `acc` (left-aligned), and the code's length.
/// Since the code is complete (Kraft sum exactly 1), every 30-bit window
/// starts with some code; zero bits past the input may complete one that
/// the caller then finds longer than what it has.
#[inline]
fn lookup(acc: u64) -> (u16, u32) {
    let fast = FAST[(acc >> (64 - FAST_BITS)) as usize];
    if fast != 0 {
        return (fast & 0xff, u32::from(fast >> 8));
    }
    let (syms, start) = &SORTED;
    let mut len = FAST_BITS as usize + 1;
    loop {
        let code = (acc >> (64 - len)) as u32;
        if code < LIMIT[len] || len == MAX_LEN {
            let i = usize::from(start[len]) + (code - FIRST[len]) as usize;
            return (syms[i], len as u32);
        }
        len += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(s: &[u8]) -> Vec<u8> {
        let mut b = BytesMut::new();
        encode(s, &mut b);
        assert_eq!(b.len(), encoded_len(s));
        b.to_vec()
    }

    fn dec(s: &[u8]) -> Result<Vec<u8>, DecodeError> {
        let mut v = Vec::new();
        decode(s, &mut v).map(|()| v)
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        s.chunks(2)
            .map(|c| u8::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap())
            .collect()
    }

    #[test]
    fn code_is_complete() {
        // Kraft sum of exactly 1: no bit string is left undecodable.
        let sum: u64 = LEN.iter().map(|&l| 1u64 << (MAX_LEN - l as usize)).sum();
        assert_eq!(sum, 1 << MAX_LEN);
    }

    #[test]
    fn derived_codes_match_appendix_b() {
        #[rustfmt::skip]
        let spots: [(usize, u32, u8); 27] = [
            (0, 0x1ff8, 13), (1, 0x7fffd8, 23), (9, 0xffffea, 24), (10, 0x3ffffffc, 30),
            (22, 0x3ffffffe, 30), (31, 0xffffffb, 28), (32, 0x14, 6), (39, 0x7fa, 11),
            (47, 0x18, 6), (48, 0x0, 5), (60, 0x7ffc, 15), (92, 0x7fff0, 19),
            (94, 0x3ffc, 14), (116, 0x9, 5), (122, 0x7b, 7), (127, 0xffffffc, 28),
            (128, 0xfffe6, 20), (153, 0x1fffdc, 21), (195, 0x7fff1, 19), (199, 0x1ffffec, 25),
            (203, 0x7ffffde, 27), (220, 0xffffffd, 28), (236, 0xfffff4, 24), (249, 0xffffffe, 28),
            (254, 0x7fffff0, 27), (255, 0x3ffffee, 26), (256, 0x3fffffff, 30),
        ];
        for (sym, code, len) in spots {
            assert_eq!((CODE[sym], LEN[sym]), (code, len), "symbol {sym}");
        }
    }

    #[test]
    fn rfc_strings() {
        let cases = [
            ("www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
            ("no-cache", "a8eb 1064 9cbf"),
            ("custom-key", "25a8 49e9 5ba9 7d7f"),
            ("custom-value", "25a8 49e9 5bb8 e8b4 bf"),
            ("302", "6402"),
            ("307", "640e ff"),
            ("private", "aec3 771a 4b"),
            ("Mon, 21 Oct 2013 20:13:21 GMT", "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff"),
            ("https://www.example.com", "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3"),
            ("gzip", "9bd9 ab"),
            (
                "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
                "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
            ),
        ];
        for (plain, coded) in cases {
            assert_eq!(enc(plain.as_bytes()), hex(coded), "{plain}");
            assert_eq!(dec(&hex(coded)).unwrap(), plain.as_bytes(), "{plain}");
        }
    }

    #[test]
    fn every_byte_round_trips() {
        let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        assert_eq!(dec(&enc(&all)).unwrap(), all);
        for b in 0..=255u8 {
            for n in 1..=9 {
                let s = vec![b; n];
                assert_eq!(dec(&enc(&s)).unwrap(), s, "{b:#x} x{n}");
            }
        }
        assert_eq!(dec(&[]).unwrap(), b"");
    }

    #[test]
    fn appends_to_what_is_there() {
        let mut v = b"ab".to_vec();
        decode(&hex("6402"), &mut v).unwrap();
        assert_eq!(v, b"ab302");
    }

    #[test]
    fn refuses_eos_inside_a_string() {
        // EOS alone: 30 ones and 2 more.
        assert_eq!(dec(&[0xff; 4]), Err(DecodeError::HuffmanEos));
        // 'a' (00011), EOS, then 5 bits of valid padding.
        assert_eq!(
            dec(&[0x1f, 0xff, 0xff, 0xff, 0xff]),
            Err(DecodeError::HuffmanEos)
        );
        // Deep in a long string (the 8-bytes-at-a-time path); what `dst`
        // held is left alone.
        let mut s = enc(&[b'a'; 16]);
        assert_eq!(s.len(), 10);
        s.extend_from_slice(&[0xff; 4]);
        s.extend_from_slice(&enc(&[b'a'; 16]));
        let mut out = b"kept".to_vec();
        assert_eq!(decode(&s, &mut out), Err(DecodeError::HuffmanEos));
        assert_eq!(out, b"kept");
    }

    #[test]
    fn refuses_long_or_wrong_padding() {
        // Eight 'a's end on a byte boundary; a whole byte of ones after is
        // 8 bits of padding.
        let mut s = enc(b"aaaaaaaa");
        assert_eq!(s.len(), 5);
        s.push(0xff);
        assert_eq!(dec(&s), Err(DecodeError::HuffmanPaddingTooLong));
        // 'a' then 11 ones.
        assert_eq!(dec(&[0x1f, 0xff]), Err(DecodeError::HuffmanPaddingTooLong));
        // A lone 0xff: 8 ones, no symbol.
        assert_eq!(dec(&[0xff]), Err(DecodeError::HuffmanPaddingTooLong));
        // '0' (00000) padded with zeros, or with 110.
        assert_eq!(dec(&[0x00]), Err(DecodeError::HuffmanBadPadding));
        assert_eq!(dec(&[0x06]), Err(DecodeError::HuffmanBadPadding));
        // Valid 7 bits of padding: '0' then 'a' (10 bits) and 6 ones.
        assert_eq!(dec(&[0x00, 0xff]), Ok(b"0a".to_vec()));
    }
}
