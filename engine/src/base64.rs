//! Hand-written base64: standard padded encoding, decoding of either
//! alphabet with optional padding (session cookies, WebSocket keys).

const BASE64_STANDARD: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Appends the standard, padded base64 of `bytes` (what Envoy writes).
pub fn base64_encode(bytes: &[u8], out: &mut String) {
    let sym = |i: u32| char::from(BASE64_STANDARD[(i & 63) as usize]);
    for chunk in bytes.chunks(3) {
        let b = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = (b(0) << 16) | (b(1) << 8) | b(2);
        out.push(sym(n >> 18));
        out.push(sym(n >> 12));
        out.push(if chunk.len() > 1 { sym(n >> 6) } else { '=' });
        out.push(if chunk.len() > 2 { sym(n) } else { '=' });
    }
}

/// The 6-bit value of a base64 symbol in either the standard or the
/// URL-safe alphabet (their only difference is symbols 62 and 63).
fn base64_symbol(c: u8) -> Option<u32> {
    let v = match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' | b'-' => 62,
        b'/' | b'_' => 63,
        _ => return None,
    };
    Some(u32::from(v))
}

/// Decodes base64 (either alphabet, padded or not) into `buf`. `None` for a
/// bad symbol, bad padding, non-zero trailing bits (a non-canonical
/// encoding, which no encoder writes) or output longer than `buf`.
pub fn base64_decode<'b>(input: &[u8], buf: &'b mut [u8]) -> Option<&'b [u8]> {
    let symbols = strip_padding(input)?;
    // Reject before decoding when the output cannot fit (or a lone
    // trailing symbol, which encodes no whole byte).
    let decoded_len = symbols.len() / 4 * 3 + (symbols.len() % 4).saturating_sub(1);
    if symbols.len() % 4 == 1 || decoded_len > buf.len() {
        return None;
    }
    let mut len = 0;
    for chunk in symbols.chunks(4) {
        let mut n = 0u32;
        for &c in chunk {
            n = (n << 6) | base64_symbol(c)?;
        }
        // Left-align a short final chunk to 24 bits; its unused low bits
        // must be zero for a canonical encoding.
        let bits = 6 * chunk.len() as u32;
        let out_len = chunk.len() - 1;
        if n & ((1 << (bits - 8 * out_len as u32)) - 1) != 0 {
            return None;
        }
        let n = n << (24 - bits);
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        buf.get_mut(len..len + out_len)?
            .copy_from_slice(&bytes[..out_len]);
        len += out_len;
    }
    Some(&buf[..len])
}

/// The symbols of a base64 text without its padding; padding, when present,
/// must make the text a multiple of 4 and be at most 2 `=`.
fn strip_padding(input: &[u8]) -> Option<&[u8]> {
    let pad = input.iter().rev().take_while(|&&b| b == b'=').count();
    if pad == 0 {
        return Some(input);
    }
    // `& 3`: a multiple of 4 (`is_multiple_of` is newer than our MSRV).
    (pad <= 2 && input.len() & 3 == 0).then(|| &input[..input.len() - pad])
}
