//! Fixed-width hex for trace and span ids, without allocating per request.

fn digit(b: u8, upper_ok: bool) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' if upper_ok => Some(b - b'A' + 10),
        _ => None,
    }
}

/// At most 32 digits, none missing; a sign or `0x` is never accepted
/// (unlike `u128::from_str_radix`, which takes a leading `+`).
fn parse(v: &[u8], upper_ok: bool) -> Option<u128> {
    if v.is_empty() || v.len() > 32 {
        return None;
    }
    v.iter().try_fold(0u128, |acc, &b| {
        Some(acc << 4 | u128::from(digit(b, upper_ok)?))
    })
}

/// W3C: lowercase only.
pub(crate) fn lower_u64(v: &[u8]) -> Option<u64> {
    if v.len() > 16 {
        return None;
    }
    parse(v, false).map(|x| x as u64)
}

pub(crate) fn lower_u128(v: &[u8]) -> Option<u128> {
    parse(v, false)
}

/// B3: either case, as Envoy's `strtoull`-based parser accepts.
pub(crate) fn any_u64(v: &[u8]) -> Option<u64> {
    if v.len() > 16 {
        return None;
    }
    parse(v, true).map(|x| x as u64)
}

pub(crate) fn any_u128(v: &[u8]) -> Option<u128> {
    parse(v, true)
}

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Writes `out.len()` lowercase digits of the low bits of `x`, zero padded.
fn write(out: &mut [u8], mut x: u128) {
    for b in out.iter_mut().rev() {
        *b = DIGITS[(x & 0xf) as usize];
        x >>= 4;
    }
}

/// 16 digits into `out[..16]`.
pub(crate) fn write_u64(out: &mut [u8], x: u64) {
    write(&mut out[..16], u128::from(x));
}

/// 32 digits into `out[..32]`.
pub(crate) fn write_u128(out: &mut [u8], x: u128) {
    write(&mut out[..32], x);
}

/// What the writers produced is ASCII, so this never fails in practice.
pub(crate) fn as_str(v: &[u8]) -> &str {
    std::str::from_utf8(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_write() {
        assert_eq!(lower_u64(b"00f067aa0ba902b7"), Some(0x00f067aa0ba902b7));
        assert_eq!(lower_u64(b"00F067AA0BA902B7"), None);
        assert_eq!(any_u64(b"00F067AA0BA902B7"), Some(0x00f067aa0ba902b7));
        assert_eq!(any_u64(b"+0f067aa0ba902b7"), None);
        assert_eq!(any_u64(b""), None);
        assert_eq!(any_u64(b"00f067aa0ba902b70"), None);
        assert_eq!(
            lower_u128(b"ffffffffffffffffffffffffffffffff"),
            Some(u128::MAX)
        );
        let mut buf = [0u8; 32];
        write_u128(&mut buf, 0x4bf92f3577b34da6a3ce929d0e0e4736);
        assert_eq!(as_str(&buf), "4bf92f3577b34da6a3ce929d0e0e4736");
        write_u64(&mut buf, 1);
        assert_eq!(as_str(&buf[..16]), "0000000000000001");
    }
}
