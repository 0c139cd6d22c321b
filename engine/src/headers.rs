//! Header rules shared by the proxy: hop-by-hop stripping, `x-forwarded-for`,
//! and the HTTP → gRPC status mapping Envoy uses for local replies.

use std::fmt::Write;
use std::net::IpAddr;

/// Connection-specific headers that must not be forwarded (RFC 9110 §7.6.1;
/// RFC 9113 §8.2.2 forbids them in HTTP/2 altogether). `te` is handled by
/// [`keep_te`]. (`proxy-authorization` is end-to-end for a reverse proxy's
/// upstream and is forwarded, as Envoy does.)
pub const HOP_BY_HOP: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "http2-settings",
];

/// Whether `name` (lowercase, as HTTP/2 carries it) is in [`HOP_BY_HOP`].
/// Takes bytes: the wire path holds names as bytes, and a UTF-8 check per
/// forwarded field only to compare against ASCII constants showed up in
/// profiles (about 1 % of the proxy's CPU).
pub fn is_hop_by_hop(name: &[u8]) -> bool {
    // Slice equality compares lengths first: most names fail at once.
    HOP_BY_HOP.iter().any(|h| h.as_bytes() == name)
}

/// `te` may only carry `trailers` over HTTP/2 (gRPC sends `te: trailers`).
pub fn keep_te(value: &[u8]) -> bool {
    value.eq_ignore_ascii_case(b"trailers")
}

/// Where the `:` before an authority's port is (`host:80`, `[::1]:80`),
/// if it has a port: a bare IPv6 literal's colons are not.
pub fn port_colon(authority: &[u8]) -> Option<usize> {
    let colon = authority.iter().rposition(|&b| b == b':')?;
    let host = &authority[..colon];
    let bracketed = host.starts_with(b"[");
    (bracketed && host.ends_with(b"]") || !bracketed && !host.contains(&b':')).then_some(colon)
}

/// Value of `x-forwarded-for` after appending the downstream peer, as Envoy
/// does with `use_remote_address: true`: after a comma, no space (Envoy
/// 1.40 sends `1.2.3.4,10.0.0.1`).
pub fn append_forwarded_for(existing: Option<&str>, peer: IpAddr) -> String {
    let mut out = String::with_capacity(existing.map_or(0, |e| e.len() + 1) + 39);
    if let Some(e) = existing.filter(|e| !e.is_empty()) {
        out.push_str(e);
        out.push(',');
    }
    let _ = write!(out, "{peer}");
    out
}

/// An `x-request-id` as Envoy makes one: a UUID version 4 (RFC 9562
/// §5.4), lowercase, from 128 random bits (6 of them replaced by the
/// version and variant).
pub fn uuid_v4(random: u128) -> [u8; 36] {
    let bits = (random & !(0xF000u128 << 64) & !(0xC000u128 << 48))
        | (0x4000u128 << 64)
        | (0x8000u128 << 48);
    let bytes = bits.to_be_bytes();
    let mut out = [b'-'; 36];
    let mut at = 0;
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            at += 1;
        }
        out[at] = b"0123456789abcdef"[usize::from(b >> 4)];
        out[at + 1] = b"0123456789abcdef"[usize::from(b & 15)];
        at += 2;
    }
    out
}

/// gRPC status codes used by local replies.
pub mod grpc_status {
    pub const OK: u32 = 0;
    pub const UNKNOWN: u32 = 2;
    pub const DEADLINE_EXCEEDED: u32 = 4;
    pub const PERMISSION_DENIED: u32 = 7;
    pub const UNIMPLEMENTED: u32 = 12;
    pub const INTERNAL: u32 = 13;
    pub const UNAVAILABLE: u32 = 14;
    pub const UNAUTHENTICATED: u32 = 16;
}

/// Envoy's `Grpc::Utility::httpToGrpcStatus`, used when a local reply (or an
/// upstream HTTP error without `grpc-status`) answers a gRPC request.
pub fn http_to_grpc_status(http_status: u16) -> u32 {
    use grpc_status::*;
    match http_status {
        400 => INTERNAL,
        401 => UNAUTHENTICATED,
        403 => PERMISSION_DENIED,
        404 => UNIMPLEMENTED,
        429 | 502 | 503 | 504 => UNAVAILABLE,
        _ => UNKNOWN,
    }
}

/// A message as `grpc-message` carries it: percent-encoded outside
/// printable ASCII, and `%` itself (the gRPC HTTP/2 spec); with
/// `escape_tilde`, `~` too (as Envoy's gRPC-Web filter writes it).
pub fn grpc_message(body: &[u8], escape_tilde: bool) -> std::borrow::Cow<'_, [u8]> {
    let last = if escape_tilde { 0x7e } else { 0x7f };
    let plain = |b: u8| (0x20..last).contains(&b) && b != b'%';
    if body.iter().all(|&b| plain(b)) {
        return std::borrow::Cow::Borrowed(body);
    }
    let mut out = Vec::with_capacity(body.len() + 8);
    for &b in body {
        if plain(b) {
            out.push(b);
        } else {
            let _ = write!(Hex(&mut out), "%{b:02X}");
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `fmt::Write` into bytes.
struct Hex<'a>(&'a mut Vec<u8>);

impl Write for Hex<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// Whether a `content-type` value denotes gRPC (`application/grpc`,
/// `application/grpc+proto`, `application/grpc-web` is not gRPC here).
pub fn is_grpc_content_type(value: &[u8]) -> bool {
    const G: &[u8] = b"application/grpc";
    value.len() >= G.len()
        && value[..G.len()].eq_ignore_ascii_case(G)
        && matches!(value.get(G.len()), None | Some(b'+') | Some(b';'))
}

/// A `grpc-timeout` value (gRPC over HTTP/2: 1 to 8 digits and a unit,
/// `H`, `M`, `S`, `m`, `u` or `n`); `None` when malformed.
pub fn parse_grpc_timeout(value: &[u8]) -> Option<std::time::Duration> {
    use std::time::Duration;
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn grpc_messages_are_percent_encoded() {
        assert_eq!(&grpc_message(b"no route", false)[..], b"no route");
        assert_eq!(
            &grpc_message(b" 404 NR /nope\n", false)[..],
            b" 404 NR /nope%0A"
        );
        let cafe = "50% caf\u{e9} ~".as_bytes();
        assert_eq!(&grpc_message(cafe, false)[..], b"50%25 caf%C3%A9 ~");
        // Envoy's gRPC-Web filter: `~` too.
        assert_eq!(&grpc_message(cafe, true)[..], b"50%25 caf%C3%A9 %7E");
    }

    #[test]
    fn grpc_timeouts_parse_by_unit() {
        use std::time::Duration;
        assert_eq!(
            parse_grpc_timeout(b"100m"),
            Some(Duration::from_millis(100))
        );
        assert_eq!(parse_grpc_timeout(b"2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse_grpc_timeout(b"1H"), Some(Duration::from_secs(3600)));
        assert_eq!(
            parse_grpc_timeout(b"99999999n"),
            Some(Duration::from_nanos(99_999_999))
        );
        for bad in [&b""[..], b"m", b"123456789m", b"10x", b"-1S", b"1.5S"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad:?}");
        }
    }

    use super::*;

    #[test]
    fn hop_by_hop_and_te() {
        assert!(is_hop_by_hop(b"connection"));
        assert!(is_hop_by_hop(b"transfer-encoding"));
        assert!(!is_hop_by_hop(b"content-type"));
        assert!(keep_te(b"Trailers"));
        assert!(!keep_te(b"gzip"));
    }

    #[test]
    fn forwarded_for_appends() {
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(append_forwarded_for(None, ip), "10.0.0.1");
        assert_eq!(append_forwarded_for(Some(""), ip), "10.0.0.1");
        assert_eq!(
            append_forwarded_for(Some("1.2.3.4"), ip),
            "1.2.3.4,10.0.0.1"
        );
        let v6: IpAddr = "::1".parse().unwrap();
        assert_eq!(append_forwarded_for(None, v6), "::1");
    }

    #[test]
    fn grpc_mapping_and_content_type() {
        assert_eq!(http_to_grpc_status(503), grpc_status::UNAVAILABLE);
        assert_eq!(http_to_grpc_status(504), grpc_status::UNAVAILABLE);
        assert_eq!(http_to_grpc_status(404), grpc_status::UNIMPLEMENTED);
        assert_eq!(http_to_grpc_status(500), grpc_status::UNKNOWN);
        assert!(is_grpc_content_type(b"application/grpc"));
        assert!(is_grpc_content_type(b"application/grpc+proto"));
        assert!(!is_grpc_content_type(b"application/grpc-web"));
        assert!(!is_grpc_content_type(b"application/json"));
    }

    #[test]
    fn ports_are_found_after_the_host() {
        assert_eq!(port_colon(b"example.com:80"), Some(11));
        assert_eq!(port_colon(b"example.com"), None);
        assert_eq!(port_colon(b"[::1]:443"), Some(5));
        assert_eq!(port_colon(b"[::1]"), None);
        assert_eq!(port_colon(b"::1"), None);
    }

    #[test]
    fn request_ids_are_uuid_v4() {
        let id = uuid_v4(0);
        assert_eq!(&id, b"00000000-0000-4000-8000-000000000000");
        let id = uuid_v4(u128::MAX);
        assert_eq!(&id, b"ffffffff-ffff-4fff-bfff-ffffffffffff");
        let id = uuid_v4(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        assert_eq!(&id, b"01234567-89ab-4def-8123-456789abcdef");
    }
}
