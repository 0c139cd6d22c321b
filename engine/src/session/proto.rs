//! The `envoy.Cookie` protobuf wire format: tags, a strict parser and
//! varint / length-delimited readers (the encoder side is in the parent).

use std::net::SocketAddr;

use super::value::SessionValue;

/// Protobuf tag of `envoy.Cookie.address` (field 1, length-delimited).
pub(super) const TAG_ADDRESS: u8 = 0x0A;
/// Protobuf tag of `envoy.Cookie.expires` (field 2, varint).
pub(super) const TAG_EXPIRES: u8 = 0x10;

/// Envoy's `envoy.Cookie { string address = 1; int64 expires = 2; }`, parsed
/// strictly: the known fields must have their declared wire types, unknown
/// fields are skipped by protobuf rules, and every byte must be consumed.
pub(super) fn decode_envoy_proto(bytes: &[u8], now_unix_secs: u64) -> SessionValue {
    let Some(cookie) = parse_envoy_cookie(bytes) else {
        return SessionValue::Invalid;
    };
    let Ok(address) = cookie.address.parse::<SocketAddr>() else {
        return SessionValue::Invalid;
    };
    // Envoy compares `now > expires`: a cookie is still good during its
    // expiry second. 0 (absent) means the cookie never expires.
    if cookie.expires != 0 && i128::from(now_unix_secs) > i128::from(cookie.expires) {
        return SessionValue::Expired;
    }
    SessionValue::Valid {
        address,
        cluster: None,
    }
}

/// The fields of a parsed `envoy.Cookie`.
struct EnvoyCookie<'a> {
    address: &'a str,
    expires: i64,
}

/// Walks the protobuf fields of `bytes`; `None` on any malformation or an
/// empty address.
fn parse_envoy_cookie(bytes: &[u8]) -> Option<EnvoyCookie<'_>> {
    let mut cookie = EnvoyCookie {
        address: "",
        expires: 0,
    };
    let mut rest = bytes;
    while !rest.is_empty() {
        let key;
        (key, rest) = read_varint(rest)?;
        let (field, wire_type) = (key >> 3, key & 7);
        // Protobuf: a repeated scalar field's last occurrence wins.
        rest = match (field, wire_type) {
            (0, _) => return None,
            (1, 2) => {
                let (value, after) = read_len_delimited(rest)?;
                cookie.address = std::str::from_utf8(value).ok()?;
                after
            }
            // int64 travels as its two's-complement u64 bit pattern.
            (2, 0) => read_varint(rest).map(|(v, after)| {
                cookie.expires = v as i64;
                after
            })?,
            // A known field with a foreign wire type is corrupt, not unknown.
            (1, _) | (2, _) => return None,
            (_, _) => skip_field(wire_type, rest)?,
        };
    }
    (!cookie.address.is_empty()).then_some(cookie)
}

/// Skips an unknown field's payload; groups (wire types 3/4, deprecated)
/// and undefined wire types are rejected.
fn skip_field(wire_type: u64, bytes: &[u8]) -> Option<&[u8]> {
    match wire_type {
        0 => read_varint(bytes).map(|(_, rest)| rest),
        1 => bytes.get(8..),
        2 => read_len_delimited(bytes).map(|(_, rest)| rest),
        5 => bytes.get(4..),
        _ => None,
    }
}

/// A length-prefixed payload and what follows it.
fn read_len_delimited(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = read_varint(bytes)?;
    let len = usize::try_from(len).ok()?;
    (len <= rest.len()).then(|| rest.split_at(len))
}

/// A base-128 varint (at most 10 bytes, no bits beyond 64) and what follows.
fn read_varint(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        let chunk = u64::from(b & 0x7F);
        // The 10th byte may only carry the 64th bit.
        if i == 9 && chunk > 1 {
            return None;
        }
        value |= chunk << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, &bytes[i + 1..]));
        }
    }
    None
}
