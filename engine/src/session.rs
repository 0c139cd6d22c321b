//! Stateful session codec (gRFC A55): cookie and header values, `set-cookie`, path match, overrides.
//!
//! Decoding reads every dialect a mixed fleet produces (Envoy's protobuf
//! cookie, the legacy `ip:port`, gRPC's `ip:port;cluster`) into a stack
//! buffer, so the per-request path does not allocate. Base64 is hand-written
//! here: it is a few lines, it must accept both alphabets and optional
//! padding at once, and it keeps the engine crate free of a dependency.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use crate::config::{SessionCookie, StatefulSession, StatefulSessionPerRoute};

/// Which form the gateway writes session cookie values in (it reads every form).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CookieFormat {
    /// Envoy's current format: base64 of the serialized `envoy.Cookie`
    /// protobuf message `{ string address = 1; int64 expires = 2; }`, expires
    /// in wall-clock UNIX seconds, only set when ttl > 0. Default, so a fleet
    /// mixing Envoy and this gateway shares sessions.
    #[default]
    Envoy,
    /// gRFC A55's plain form: base64("ip:port").
    Plain,
}

/// What a session cookie/header value decodes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionValue {
    /// A usable override host; `cluster` is set for gRPC's `ip:port;cluster` dialect.
    Valid {
        address: SocketAddr,
        cluster: Option<String>,
    },
    /// Undecodable (bad base64, bad protobuf, not an ip:port, empty).
    Invalid,
    /// Envoy format with `expires` != 0 and now > expires.
    Expired,
}

/// Largest decoded value accepted: far above any real address (an IPv6
/// socket address with scope id is < 64 bytes) plus a cluster name, and small
/// enough to live on the stack.
const MAX_DECODED: usize = 512;

/// Protobuf tag of `envoy.Cookie.address` (field 1, length-delimited).
const TAG_ADDRESS: u8 = 0x0A;
/// Protobuf tag of `envoy.Cookie.expires` (field 2, varint).
const TAG_EXPIRES: u8 = 0x10;

// ---------------------------------------------------------------------------
// Cookie header parsing and path matching.
// ---------------------------------------------------------------------------

/// Finds the first cookie called `name` across all `cookie` header field
/// values, in order (HTTP/2 splits cookies into several fields, RFC 9113
/// §8.2.3; a field may also hold several `a=b; c=d` pairs). Returns the raw
/// value bytes (still possibly quoted). Cookie names compare
/// case-sensitively; whitespace around pairs is skipped.
pub fn find_cookie<'a, I: IntoIterator<Item = &'a [u8]>>(
    cookie_fields: I,
    name: &str,
) -> Option<&'a [u8]> {
    let name = name.as_bytes();
    cookie_fields
        .into_iter()
        .flat_map(|field| field.split(|&b| b == b';'))
        .find_map(|pair| {
            // RFC 6265 §5.2: a pair without '=' is ignored, and whitespace
            // around the name and the value is not part of either.
            let eq = pair.iter().position(|&b| b == b'=')?;
            let (key, value) = (trim_ows(&pair[..eq]), trim_ows(&pair[eq + 1..]));
            (key == name).then_some(value)
        })
}

/// Strips HTTP optional whitespace (SP / HTAB) from both ends.
fn trim_ows(bytes: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = bytes.iter().position(|b| !is_ows(b)).unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !is_ows(b))
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

/// RFC 6265 §5.1.4 path-match of `request_path` (which may carry `?query`,
/// which is ignored) against `cookie_path`.
pub fn path_matches(cookie_path: &str, request_path: &str) -> bool {
    // Only the path component takes part; a fragment never reaches a proxy
    // but is cut the same way for safety.
    let end = request_path.find(['?', '#']).unwrap_or(request_path.len());
    let path = &request_path[..end];
    // An empty path is the root (RFC 3986 §6.2.3 normalisation).
    let path = if path.is_empty() { "/" } else { path };
    match path.strip_prefix(cookie_path) {
        None => false,
        Some(rest) => rest.is_empty() || cookie_path.ends_with('/') || rest.starts_with('/'),
    }
}

// ---------------------------------------------------------------------------
// Decoding.
// ---------------------------------------------------------------------------

/// Decodes a cookie value in any dialect in use: Envoy's current format
/// (base64 of the `envoy.Cookie` proto; `expires` enforced against
/// `now_unix_secs`), the legacy base64("ip:port"), gRPC's
/// base64("ip:port;cluster"); surrounding double quotes optional; base64
/// standard or URL-safe alphabet, padded or not.
pub fn decode_cookie_value(raw: &[u8], now_unix_secs: u64) -> SessionValue {
    // RFC 6265 allows a DQUOTE-wrapped cookie-value, and Envoy writes one.
    let unquoted = match raw {
        [b'"', inner @ .., b'"'] => inner,
        _ => raw,
    };
    decode_value(unquoted, now_unix_secs)
}

/// Decodes a header-state value (Envoy's `HeaderBasedSessionState`: base64
/// of "ip:port"; the Envoy proto and gRPC forms are accepted the same way as
/// cookies). Quotes are not stripped: header values carry none.
pub fn decode_header_value(raw: &[u8], now_unix_secs: u64) -> SessionValue {
    decode_value(raw, now_unix_secs)
}

/// Base64-decodes into a stack buffer, then picks the dialect by the first
/// byte: a protobuf `envoy.Cookie` starts with a field tag (0x0A or 0x10,
/// both control characters), an address text never does.
fn decode_value(encoded: &[u8], now_unix_secs: u64) -> SessionValue {
    let mut buf = [0u8; MAX_DECODED];
    let Some(bytes) = base64_decode(encoded, &mut buf) else {
        return SessionValue::Invalid;
    };
    match bytes.first() {
        None => SessionValue::Invalid,
        Some(&TAG_ADDRESS) | Some(&TAG_EXPIRES) => decode_envoy_proto(bytes, now_unix_secs),
        Some(_) => decode_text(bytes),
    }
}

/// The legacy `ip:port` and gRPC's `ip:port;cluster` forms.
fn decode_text(bytes: &[u8]) -> SessionValue {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return SessionValue::Invalid;
    };
    let (addr, cluster) = match text.split_once(';') {
        None => (text, None),
        // An empty cluster name matches no cluster: rather than widen it to
        // "any cluster" (None), reject the value.
        Some((_, "")) => return SessionValue::Invalid,
        Some((addr, cluster)) => (addr, Some(cluster)),
    };
    match addr.parse::<SocketAddr>() {
        Ok(address) => SessionValue::Valid {
            address,
            cluster: cluster.map(str::to_owned),
        },
        Err(_) => SessionValue::Invalid,
    }
}

/// Envoy's `envoy.Cookie { string address = 1; int64 expires = 2; }`, parsed
/// strictly: the known fields must have their declared wire types, unknown
/// fields are skipped by protobuf rules, and every byte must be consumed.
fn decode_envoy_proto(bytes: &[u8], now_unix_secs: u64) -> SessionValue {
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

// ---------------------------------------------------------------------------
// Encoding.
// ---------------------------------------------------------------------------

/// Appends the base64 cookie value for `address` in `format` to `out`
/// (Envoy format: expires = now + ttl when ttl has whole seconds, else the
/// field is omitted; the address string is `SocketAddr`'s Display, e.g.
/// "10.0.0.1:8080" or "[::1]:80").
pub fn encode_cookie_value(
    address: SocketAddr,
    ttl: Duration,
    now_unix_secs: u64,
    format: CookieFormat,
    out: &mut String,
) {
    let mut text = StackBuf::new();
    // Cannot fail: the longest SocketAddr text is ~65 bytes (see StackBuf).
    let _ = write!(text, "{address}");
    match format {
        CookieFormat::Plain => base64_encode(text.as_bytes(), out),
        CookieFormat::Envoy => {
            let mut proto = StackBuf::new();
            proto.push(TAG_ADDRESS);
            proto.push_varint(text.as_bytes().len() as u64);
            proto.extend(text.as_bytes());
            // Envoy keeps ttl in whole seconds: a sub-second ttl is 0, so
            // no expiry, exactly like the missing `Max-Age`.
            if ttl.as_secs() > 0 {
                let expires = now_unix_secs
                    .saturating_add(ttl.as_secs())
                    .min(i64::MAX as u64);
                proto.push(TAG_EXPIRES);
                proto.push_varint(expires);
            }
            base64_encode(proto.as_bytes(), out);
        }
    }
}

/// The full `set-cookie` header value, exactly in Envoy's shape:
/// `NAME="VALUE"; Max-Age=SECS; Path=PATH; HttpOnly`: `Max-Age` only when
/// ttl has whole seconds, `Path` only when the cookie has a path.
pub fn set_cookie(
    cookie: &SessionCookie,
    address: SocketAddr,
    now_unix_secs: u64,
    format: CookieFormat,
) -> String {
    let mut out = String::with_capacity(cookie.name.len() + 128);
    out.push_str(&cookie.name);
    out.push_str("=\"");
    encode_cookie_value(address, cookie.ttl, now_unix_secs, format, &mut out);
    out.push('"');
    // `Max-Age=0` would delete the cookie at once, so a sub-second ttl gets
    // no attribute at all (a session cookie), as in Envoy.
    let max_age = cookie.ttl.as_secs();
    if max_age > 0 {
        let _ = write!(out, "; Max-Age={max_age}");
    }
    if let Some(path) = &cookie.path {
        out.push_str("; Path=");
        out.push_str(path);
    }
    out.push_str("; HttpOnly");
    out
}

/// The header-state response value: base64("ip:port") (standard alphabet,
/// padded), as Envoy's `HeaderBasedSessionState` writes it.
pub fn header_value(address: SocketAddr) -> String {
    let mut text = StackBuf::new();
    let _ = write!(text, "{address}");
    let mut out = String::with_capacity(text.as_bytes().len().div_ceil(3) * 4);
    base64_encode(text.as_bytes(), &mut out);
    out
}

/// A fixed stack buffer for the encoders: 128 bytes hold the longest
/// `SocketAddr` text ("[" + 45-char IPv6 + "%" + 10-digit scope + "]:" +
/// 5-digit port = 65) plus the proto framing (2 + 1 + 10 bytes).
struct StackBuf {
    buf: [u8; 128],
    len: usize,
}

impl StackBuf {
    fn new() -> Self {
        StackBuf {
            buf: [0; 128],
            len: 0,
        }
    }

    fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Appends all of `bytes`, or nothing when they do not fit.
    fn extend(&mut self, bytes: &[u8]) -> bool {
        let end = self.len + bytes.len();
        let Some(dst) = self.buf.get_mut(self.len..end) else {
            debug_assert!(false, "StackBuf overflow");
            return false;
        };
        dst.copy_from_slice(bytes);
        self.len = end;
        true
    }

    fn push(&mut self, byte: u8) {
        self.extend(&[byte]);
    }

    fn push_varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.push((value as u8 & 0x7F) | 0x80);
            value >>= 7;
        }
        self.push(value as u8);
    }
}

impl std::fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.extend(s.as_bytes()) {
            Ok(())
        } else {
            Err(std::fmt::Error)
        }
    }
}

// ---------------------------------------------------------------------------
// Base64.
// ---------------------------------------------------------------------------

const BASE64_STANDARD: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Appends the standard, padded base64 of `bytes` (what Envoy writes).
fn base64_encode(bytes: &[u8], out: &mut String) {
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
fn base64_decode<'b>(input: &[u8], buf: &'b mut [u8; MAX_DECODED]) -> Option<&'b [u8]> {
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

// ---------------------------------------------------------------------------
// gRFC A39 filter config overrides.
// ---------------------------------------------------------------------------

/// gRFC A39 filter-config override: the route's `typed_per_filter_config`
/// wins over the virtual host's, which wins over the listener's filter
/// config. Per-route config only applies when the listener has the filter
/// (`listener` is Some), as in Envoy. `Disabled` turns the filter off.
/// Returns the effective config, or None when the filter is off / absent /
/// has no `session_state`.
pub fn effective<'a>(
    listener: Option<&'a StatefulSession>,
    vhost: Option<&'a StatefulSessionPerRoute>,
    route: Option<&'a StatefulSessionPerRoute>,
) -> Option<&'a StatefulSession> {
    let listener = listener?;
    let config = match route.or(vhost) {
        None => listener,
        Some(StatefulSessionPerRoute::Disabled) => return None,
        Some(StatefulSessionPerRoute::Override(config)) => config,
    };
    config.session_state.is_some().then_some(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{SessionHeader, SessionState};

    const NOW: u64 = 1_699_999_000;

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("test address")
    }

    fn valid(s: &str) -> SessionValue {
        SessionValue::Valid {
            address: addr(s),
            cluster: None,
        }
    }

    fn encode(address: &str, ttl: u64, format: CookieFormat) -> String {
        let mut out = String::new();
        encode_cookie_value(
            addr(address),
            Duration::from_secs(ttl),
            NOW,
            format,
            &mut out,
        );
        out
    }

    fn b64(bytes: &[u8]) -> String {
        let mut out = String::new();
        base64_encode(bytes, &mut out);
        out
    }

    /// Hand-built `envoy.Cookie` bytes, independent of the encoder.
    fn proto(address: &[u8], expires: Option<&[u8]>) -> Vec<u8> {
        let mut p = vec![TAG_ADDRESS, address.len() as u8];
        p.extend_from_slice(address);
        if let Some(varint) = expires {
            p.push(TAG_EXPIRES);
            p.extend_from_slice(varint);
        }
        p
    }

    // --- Known bytes -------------------------------------------------------

    #[test]
    fn envoy_cookie_known_bytes() {
        // 0A 0E "127.0.0.1:8080" 10 varint(1700000000 = 80 E2 CF AA 06),
        // base64-encoded by hand (and cross-checked with Python).
        let mut out = String::new();
        encode_cookie_value(
            addr("127.0.0.1:8080"),
            Duration::from_secs(1000),
            1_699_999_000,
            CookieFormat::Envoy,
            &mut out,
        );
        assert_eq!(out, "Cg4xMjcuMC4wLjE6ODA4MBCA4s+qBg==");
        assert_eq!(
            decode_cookie_value(b"Cg4xMjcuMC4wLjE6ODA4MBCA4s+qBg==", 1_700_000_000),
            valid("127.0.0.1:8080")
        );
    }

    #[test]
    fn envoy_cookie_without_ttl_omits_expires() {
        assert_eq!(
            encode("127.0.0.1:8080", 0, CookieFormat::Envoy),
            "Cg4xMjcuMC4wLjE6ODA4MA=="
        );
        // Sub-second ttl counts as none (Envoy keeps whole seconds).
        let mut out = String::new();
        let ttl = Duration::from_millis(500);
        encode_cookie_value(
            addr("127.0.0.1:8080"),
            ttl,
            NOW,
            CookieFormat::Envoy,
            &mut out,
        );
        assert_eq!(out, "Cg4xMjcuMC4wLjE6ODA4MA==");
    }

    #[test]
    fn plain_and_header_known_bytes() {
        assert_eq!(
            encode("127.0.0.1:8080", 60, CookieFormat::Plain),
            "MTI3LjAuMC4xOjgwODA="
        );
        assert_eq!(header_value(addr("127.0.0.1:8080")), "MTI3LjAuMC4xOjgwODA=");
        assert_eq!(header_value(addr("[::1]:80")), "Wzo6MV06ODA=");
    }

    #[test]
    fn base64_encode_padding_lengths() {
        assert_eq!(b64(b""), "");
        assert_eq!(b64(b"f"), "Zg==");
        assert_eq!(b64(b"fo"), "Zm8=");
        assert_eq!(b64(b"foo"), "Zm9v");
        assert_eq!(b64(&[0xFB, 0xFF]), "+/8=");
    }

    // --- Round trips ---------------------------------------------------------

    #[test]
    fn round_trips_both_formats_v4_and_v6() {
        for a in [
            "10.0.0.1:8080",
            "[::1]:80",
            "[2001:db8::17]:65535",
            "0.0.0.0:1",
        ] {
            for format in [CookieFormat::Envoy, CookieFormat::Plain] {
                for ttl in [0, 3600] {
                    let value = encode(a, ttl, format);
                    assert_eq!(
                        decode_cookie_value(value.as_bytes(), NOW),
                        valid(a),
                        "{a} {format:?}"
                    );
                    let quoted = format!("\"{value}\"");
                    assert_eq!(decode_cookie_value(quoted.as_bytes(), NOW), valid(a));
                }
            }
            assert_eq!(
                decode_header_value(header_value(addr(a)).as_bytes(), NOW),
                valid(a)
            );
        }
    }

    #[test]
    fn round_trip_scoped_v6_in_envoy_format() {
        let a = SocketAddr::V6(std::net::SocketAddrV6::new(
            "fe80::1:2:3:4".parse().expect("v6"),
            443,
            0,
            4_294_967_295,
        ));
        let mut out = String::new();
        encode_cookie_value(
            a,
            Duration::from_secs(1),
            NOW,
            CookieFormat::Envoy,
            &mut out,
        );
        assert_eq!(
            decode_cookie_value(out.as_bytes(), NOW),
            SessionValue::Valid {
                address: a,
                cluster: None
            }
        );
    }

    // --- Dialects ------------------------------------------------------------

    #[test]
    fn legacy_plain_dialect() {
        assert_eq!(
            decode_cookie_value(b"MTI3LjAuMC4xOjgwODA=", NOW),
            valid("127.0.0.1:8080")
        );
        assert_eq!(decode_cookie_value(b"Wzo6MV06ODA=", NOW), valid("[::1]:80"));
    }

    #[test]
    fn grpc_cluster_dialect() {
        // base64("10.0.0.1:80;cluster-a")
        assert_eq!(
            decode_cookie_value(b"MTAuMC4wLjE6ODA7Y2x1c3Rlci1h", NOW),
            SessionValue::Valid {
                address: addr("10.0.0.1:80"),
                cluster: Some("cluster-a".to_owned()),
            }
        );
        assert_eq!(
            decode_header_value(b64(b"[::1]:80;c").as_bytes(), NOW),
            SessionValue::Valid {
                address: addr("[::1]:80"),
                cluster: Some("c".to_owned()),
            }
        );
        assert_eq!(
            decode_cookie_value(b64(b"10.0.0.1:80;").as_bytes(), NOW),
            SessionValue::Invalid
        );
        assert_eq!(
            decode_cookie_value(b64(b"nope;c").as_bytes(), NOW),
            SessionValue::Invalid
        );
    }

    #[test]
    fn quoted_values() {
        assert_eq!(
            decode_cookie_value(b"\"MTI3LjAuMC4xOjgwODA=\"", NOW),
            valid("127.0.0.1:8080")
        );
        // An unbalanced quote is not a quoted value.
        assert_eq!(
            decode_cookie_value(b"\"MTI3LjAuMC4xOjgwODA=", NOW),
            SessionValue::Invalid
        );
        assert_eq!(decode_cookie_value(b"\"", NOW), SessionValue::Invalid);
        assert_eq!(decode_cookie_value(b"\"\"", NOW), SessionValue::Invalid);
        // Header values are taken literally.
        assert_eq!(
            decode_header_value(b"\"MTI3LjAuMC4xOjgwODA=\"", NOW),
            SessionValue::Invalid
        );
    }

    #[test]
    fn unpadded_and_url_safe_base64() {
        let now = 1_700_000_000;
        let want = valid("127.0.0.1:8080");
        assert_eq!(
            decode_cookie_value(b"Cg4xMjcuMC4wLjE6ODA4MBCA4s+qBg", now),
            want
        );
        assert_eq!(
            decode_cookie_value(b"Cg4xMjcuMC4wLjE6ODA4MBCA4s-qBg==", now),
            want
        );
        assert_eq!(
            decode_cookie_value(b"Cg4xMjcuMC4wLjE6ODA4MBCA4s-qBg", now),
            want
        );
        assert_eq!(decode_cookie_value(b"MTI3LjAuMC4xOjgwODA", now), want);
        // "/" vs "_" (symbol 63): bytes FB FF.
        let mut buf = [0u8; MAX_DECODED];
        assert_eq!(base64_decode(b"-_8", &mut buf), Some(&[0xFB, 0xFF][..]));
        assert_eq!(base64_decode(b"+/8=", &mut buf), Some(&[0xFB, 0xFF][..]));
    }

    // --- Expiry --------------------------------------------------------------

    #[test]
    fn expiry_is_enforced() {
        let value = b64(&proto(
            b"127.0.0.1:8080",
            Some(&[0x80, 0xE2, 0xCF, 0xAA, 0x06]),
        ));
        let v = value.as_bytes();
        assert_eq!(
            decode_cookie_value(v, 1_699_999_999),
            valid("127.0.0.1:8080")
        );
        // Envoy expires strictly after the `expires` second.
        assert_eq!(
            decode_cookie_value(v, 1_700_000_000),
            valid("127.0.0.1:8080")
        );
        assert_eq!(decode_cookie_value(v, 1_700_000_001), SessionValue::Expired);
        assert_eq!(decode_header_value(v, 1_700_000_001), SessionValue::Expired);
    }

    #[test]
    fn expires_zero_or_absent_never_expires() {
        let absent = b64(&proto(b"127.0.0.1:8080", None));
        let zero = b64(&proto(b"127.0.0.1:8080", Some(&[0x00])));
        for v in [absent, zero] {
            assert_eq!(
                decode_cookie_value(v.as_bytes(), u64::MAX),
                valid("127.0.0.1:8080")
            );
        }
    }

    #[test]
    fn negative_expires_is_expired() {
        // int64 -1: ten-byte varint of 0xFFFF_FFFF_FFFF_FFFF.
        let minus_one = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01];
        let v = b64(&proto(b"127.0.0.1:8080", Some(&minus_one)));
        assert_eq!(decode_cookie_value(v.as_bytes(), 0), SessionValue::Expired);
    }

    #[test]
    fn encoded_ttl_round_trips_through_expiry() {
        let v = encode("10.0.0.1:80", 60, CookieFormat::Envoy);
        assert_eq!(
            decode_cookie_value(v.as_bytes(), NOW + 60),
            valid("10.0.0.1:80")
        );
        assert_eq!(
            decode_cookie_value(v.as_bytes(), NOW + 61),
            SessionValue::Expired
        );
        // The plain form carries no expiry.
        let v = encode("10.0.0.1:80", 60, CookieFormat::Plain);
        assert_eq!(
            decode_cookie_value(v.as_bytes(), u64::MAX),
            valid("10.0.0.1:80")
        );
    }

    #[test]
    fn expires_saturates_instead_of_wrapping() {
        let mut out = String::new();
        let ttl = Duration::from_secs(u64::MAX);
        encode_cookie_value(addr("10.0.0.1:80"), ttl, NOW, CookieFormat::Envoy, &mut out);
        assert_eq!(
            decode_cookie_value(out.as_bytes(), u64::MAX - 1),
            SessionValue::Expired
        );
        assert_eq!(
            decode_cookie_value(out.as_bytes(), i64::MAX as u64),
            valid("10.0.0.1:80")
        );
    }

    // --- Proto parsing -------------------------------------------------------

    #[test]
    fn proto_unknown_fields_are_skipped_and_last_wins() {
        let mut p = proto(b"10.0.0.9:1", None);
        // field 3 varint, field 4 fixed64, field 5 len-delimited, field 6 fixed32
        p.extend_from_slice(&[0x18, 0x96, 0x01]);
        p.extend_from_slice(&[0x21, 1, 2, 3, 4, 5, 6, 7, 8]);
        p.extend_from_slice(&[0x2A, 0x02, b'h', b'i']);
        p.extend_from_slice(&[0x35, 1, 2, 3, 4]);
        // a second address: the last occurrence wins
        p.extend_from_slice(&proto(b"10.0.0.1:2", None));
        assert_eq!(
            decode_cookie_value(b64(&p).as_bytes(), NOW),
            valid("10.0.0.1:2")
        );
        // expires first, then address, is still the proto form
        let mut p = vec![TAG_EXPIRES, 0x00];
        p.extend_from_slice(&proto(b"10.0.0.1:2", None));
        assert_eq!(
            decode_cookie_value(b64(&p).as_bytes(), NOW),
            valid("10.0.0.1:2")
        );
    }

    #[test]
    fn garbage_is_invalid() {
        let invalid = |v: &[u8]| decode_cookie_value(v, NOW) == SessionValue::Invalid;
        // bad base64: bad symbol, lone symbol, bad padding, non-canonical tail
        assert!(invalid(b"MTI3LjAu*C4xOjgwODA="));
        assert!(invalid(b"M"));
        assert!(invalid(b"MTI3LjAuMC4xOjgwODA=="));
        assert!(invalid(b"MTI3LjAuMC4xOjgwODA==="));
        assert!(invalid(b"MT=3LjAuMC4xOjgwODA="));
        assert!(invalid(b"MTI3LjAuMC4xOjgwODB="));
        assert!(invalid(b"Zh=="));
        assert!(invalid(b" MTI3LjAuMC4xOjgwODA="));
        // empty
        assert!(invalid(b""));
        assert!(invalid(b"\"\""));
        // not an address
        assert!(invalid(b64(b"not-an-addr").as_bytes()));
        assert!(invalid(b64(b"10.0.0.1").as_bytes()));
        assert!(invalid(b64(b"10.0.0.1:99999").as_bytes()));
        assert!(invalid(b64(b"::1:80").as_bytes()));
        assert!(invalid(b64(b"10.0.0.1:80\n").as_bytes()));
        assert!(invalid(b64(&[0xFF, 0xFE]).as_bytes()));
    }

    #[test]
    fn bad_protos_are_invalid() {
        let invalid =
            |p: &[u8]| decode_cookie_value(b64(p).as_bytes(), NOW) == SessionValue::Invalid;
        // empty address, with and without expires
        assert!(invalid(&[TAG_ADDRESS, 0x00]));
        assert!(invalid(&[TAG_ADDRESS, 0x00, TAG_EXPIRES, 0x01]));
        assert!(invalid(&[TAG_EXPIRES, 0x01]));
        // address not an ip:port
        assert!(invalid(&proto(b"not-an-addr", None)));
        assert!(invalid(&proto(b"10.0.0.1:80;c", None)));
        // truncated: length past the end, varint cut, tag only
        let full = proto(b"127.0.0.1:8080", Some(&[0x80, 0xE2, 0xCF, 0xAA, 0x06]));
        assert!(invalid(&full[..full.len() - 1]));
        assert!(invalid(&full[..10]));
        assert!(invalid(&full[..full.len() - 5]));
        // after a good address: address field with a varint wire type,
        // expires with a len-delimited one, a group, field 0
        let good = proto(b"10.0.0.1:2", None);
        assert!(!invalid(&good));
        for tail in [
            &[0x08, 0x01][..],
            &[0x12, 0x00],
            &[0x1B],
            &[0x02, 0x00],
            &[0x1F],
        ] {
            assert!(invalid(&[good.as_slice(), tail].concat()), "{tail:?}");
        }
        // an 11-byte varint and a 10th byte beyond 64 bits
        let mut long = proto(b"10.0.0.1:2", None);
        long.extend_from_slice(&[
            TAG_EXPIRES,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0x81,
            0x00,
        ]);
        assert!(invalid(&long));
        let mut wide = proto(b"10.0.0.1:2", None);
        wide.extend_from_slice(&[
            TAG_EXPIRES,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0xFF,
            0x02,
        ]);
        assert!(invalid(&wide));
        // address not UTF-8
        assert!(invalid(&[TAG_ADDRESS, 0x02, 0xFF, 0xFE]));
    }

    #[test]
    fn oversize_is_invalid() {
        // A decoded value that fills the buffer exactly is accepted ...
        let mut text = b"10.0.0.1:80;".to_vec();
        text.resize(MAX_DECODED, b'c');
        let fits = decode_cookie_value(b64(&text).as_bytes(), NOW);
        assert!(
            matches!(fits, SessionValue::Valid { cluster: Some(c), .. } if c.len() == MAX_DECODED - 12)
        );
        // ... one byte more is not, padded or not.
        text.push(b'c');
        let encoded = b64(&text);
        assert_eq!(
            decode_cookie_value(encoded.as_bytes(), NOW),
            SessionValue::Invalid
        );
        let unpadded = encoded.trim_end_matches('=');
        assert_eq!(
            decode_cookie_value(unpadded.as_bytes(), NOW),
            SessionValue::Invalid
        );
        assert_eq!(
            decode_cookie_value(&[b'A'; 4096], NOW),
            SessionValue::Invalid
        );
    }

    // --- find_cookie ---------------------------------------------------------

    #[test]
    fn find_cookie_across_fields_first_wins() {
        let fields: [&[u8]; 3] = [b"a=1; b=2", b"session=first", b"session=second; c=3"];
        assert_eq!(find_cookie(fields, "session"), Some(&b"first"[..]));
        assert_eq!(find_cookie(fields, "c"), Some(&b"3"[..]));
        assert_eq!(find_cookie(fields, "b"), Some(&b"2"[..]));
        assert_eq!(find_cookie(fields, "d"), None);
        let within: [&[u8]; 1] = [b"s=1; s=2"];
        assert_eq!(find_cookie(within, "s"), Some(&b"1"[..]));
        assert_eq!(find_cookie(std::iter::empty::<&[u8]>(), "s"), None);
    }

    #[test]
    fn find_cookie_names_are_exact_and_case_sensitive() {
        let fields: [&[u8]; 2] = [b"session=long; Sess=upper", b"sess=short"];
        assert_eq!(find_cookie(fields, "sess"), Some(&b"short"[..]));
        assert_eq!(find_cookie(fields, "session"), Some(&b"long"[..]));
        assert_eq!(find_cookie(fields, "Sess"), Some(&b"upper"[..]));
        assert_eq!(find_cookie(fields, "ses"), None);
        assert_eq!(find_cookie(fields, "sessions"), None);
    }

    #[test]
    fn find_cookie_skips_whitespace_and_empty_pairs() {
        let fields: [&[u8]; 3] = [b";; ;", b"  flag ;  x = \"quoted\"  ;", b"\ty=\t; z=a=b"];
        assert_eq!(find_cookie(fields, "x"), Some(&b"\"quoted\""[..]));
        assert_eq!(find_cookie(fields, "y"), Some(&b""[..]));
        // only the first '=' separates name and value
        assert_eq!(find_cookie(fields, "z"), Some(&b"a=b"[..]));
        // a pair without '=' is no cookie
        assert_eq!(find_cookie(fields, "flag"), None);
        assert_eq!(find_cookie(fields, ""), None);
    }

    #[test]
    fn find_cookie_then_decode() {
        let fields: [&[u8]; 2] = [b"other=x", b"GCLB=\"MTI3LjAuMC4xOjgwODA=\"; z=1"];
        let raw = find_cookie(fields, "GCLB").expect("present");
        assert_eq!(decode_cookie_value(raw, NOW), valid("127.0.0.1:8080"));
    }

    // --- path_matches --------------------------------------------------------

    #[test]
    fn root_path_matches_everything() {
        for p in ["/", "/a", "/a/b?c=d", "/?x", ""] {
            assert!(path_matches("/", p), "{p}");
        }
        assert!(!path_matches("/", "*"));
    }

    #[test]
    fn path_without_trailing_slash() {
        assert!(path_matches("/foo", "/foo"));
        assert!(path_matches("/foo", "/foo/"));
        assert!(path_matches("/foo", "/foo/bar"));
        assert!(path_matches("/foo", "/foo?x"));
        assert!(path_matches("/foo", "/foo?x=/bar"));
        assert!(!path_matches("/foo", "/foobar"));
        assert!(!path_matches("/foo", "/fo"));
        assert!(!path_matches("/foo", "/"));
        assert!(!path_matches("/foo", "/Foo"));
        assert!(!path_matches("/foo", "/bar/foo"));
        assert!(!path_matches("/foo", "/x?/foo"));
    }

    #[test]
    fn path_with_trailing_slash() {
        assert!(path_matches("/foo/", "/foo/bar"));
        assert!(path_matches("/foo/", "/foo/"));
        assert!(!path_matches("/foo/", "/foo"));
        assert!(!path_matches("/foo/", "/foo?x/"));
        assert!(path_matches(
            "/Package1.Service2/",
            "/Package1.Service2/Method"
        ));
        assert!(!path_matches(
            "/Package1.Service2",
            "/Package2.Service1/Method3"
        ));
    }

    // --- set_cookie ----------------------------------------------------------

    fn cookie(ttl: u64, path: Option<&str>) -> SessionCookie {
        SessionCookie {
            name: "global-session-cookie".to_owned(),
            ttl: Duration::from_secs(ttl),
            path: path.map(str::to_owned),
        }
    }

    #[test]
    fn set_cookie_exact_strings() {
        let a = addr("127.0.0.1:8080");
        assert_eq!(
            set_cookie(&cookie(1000, Some("/svc")), a, 1_699_999_000, CookieFormat::Envoy),
            "global-session-cookie=\"Cg4xMjcuMC4wLjE6ODA4MBCA4s+qBg==\"; Max-Age=1000; Path=/svc; HttpOnly"
        );
        assert_eq!(
            set_cookie(&cookie(0, None), a, NOW, CookieFormat::Envoy),
            "global-session-cookie=\"Cg4xMjcuMC4wLjE6ODA4MA==\"; HttpOnly"
        );
        assert_eq!(
            set_cookie(&cookie(60, None), a, NOW, CookieFormat::Plain),
            "global-session-cookie=\"MTI3LjAuMC4xOjgwODA=\"; Max-Age=60; HttpOnly"
        );
        assert_eq!(
            set_cookie(
                &cookie(0, Some("/")),
                addr("[::1]:80"),
                NOW,
                CookieFormat::Plain
            ),
            "global-session-cookie=\"Wzo6MV06ODA=\"; Path=/; HttpOnly"
        );
        let mut sub_second = cookie(0, None);
        sub_second.ttl = Duration::from_millis(999);
        assert_eq!(
            set_cookie(&sub_second, a, NOW, CookieFormat::Plain),
            "global-session-cookie=\"MTI3LjAuMC4xOjgwODA=\"; HttpOnly"
        );
    }

    #[test]
    fn set_cookie_value_round_trips_through_find_cookie() {
        let header = set_cookie(
            &cookie(30, Some("/a")),
            addr("[::1]:80"),
            NOW,
            CookieFormat::Envoy,
        );
        // A client echoes back NAME=VALUE (the part before the attributes).
        let pair = header.split(';').next().expect("pair");
        let raw = find_cookie([pair.as_bytes()], "global-session-cookie").expect("cookie");
        assert_eq!(decode_cookie_value(raw, NOW + 30), valid("[::1]:80"));
        assert_eq!(decode_cookie_value(raw, NOW + 31), SessionValue::Expired);
    }

    // --- effective -----------------------------------------------------------

    fn ss(name: &str) -> StatefulSession {
        StatefulSession {
            session_state: Some(SessionState::Header(SessionHeader {
                name: name.to_owned(),
            })),
            strict: false,
            strict_not_found_status: 503,
        }
    }

    fn name_of(config: Option<&StatefulSession>) -> Option<&str> {
        match config?.session_state.as_ref()? {
            SessionState::Header(h) => Some(&h.name),
            SessionState::Cookie(c) => Some(&c.name),
        }
    }

    #[test]
    fn effective_merge_matrix() {
        let l = ss("listener");
        let v = StatefulSessionPerRoute::Override(ss("vhost"));
        let r = StatefulSessionPerRoute::Override(ss("route"));
        let off = StatefulSessionPerRoute::Disabled;
        // (listener, vhost, route, expected effective config's name)
        type Case<'a> = (
            Option<&'a StatefulSession>,
            Option<&'a StatefulSessionPerRoute>,
            Option<&'a StatefulSessionPerRoute>,
            Option<&'a str>,
        );
        let cases: [Case<'_>; 12] = [
            (Some(&l), None, None, Some("listener")),
            (Some(&l), Some(&v), None, Some("vhost")),
            (Some(&l), None, Some(&r), Some("route")),
            (Some(&l), Some(&v), Some(&r), Some("route")),
            (Some(&l), Some(&off), None, None),
            (Some(&l), None, Some(&off), None),
            (Some(&l), Some(&v), Some(&off), None),
            // a route override re-enables what the vhost disabled
            (Some(&l), Some(&off), Some(&r), Some("route")),
            // no filter on the listener: per-route config is ignored
            (None, None, None, None),
            (None, Some(&v), None, None),
            (None, None, Some(&r), None),
            (None, Some(&v), Some(&r), None),
        ];
        for (i, (listener, vhost, route, want)) in cases.into_iter().enumerate() {
            assert_eq!(name_of(effective(listener, vhost, route)), want, "case {i}");
        }
    }

    #[test]
    fn effective_without_session_state_is_off() {
        let empty = StatefulSession {
            session_state: None,
            strict: true,
            strict_not_found_status: 503,
        };
        let l = ss("listener");
        let empty_override = StatefulSessionPerRoute::Override(empty.clone());
        assert_eq!(effective(Some(&empty), None, None), None);
        assert_eq!(effective(Some(&l), None, Some(&empty_override)), None);
        assert_eq!(effective(Some(&l), Some(&empty_override), None), None);
        let r = StatefulSessionPerRoute::Override(ss("route"));
        assert_eq!(
            name_of(effective(Some(&empty), None, Some(&r))),
            Some("route")
        );
        // the returned reference is the route's own config (strict etc. carried)
        assert!(std::ptr::eq(
            effective(Some(&l), None, Some(&r)).expect("on"),
            match &r {
                StatefulSessionPerRoute::Override(c) => c,
                StatefulSessionPerRoute::Disabled => unreachable!(),
            }
        ));
    }
}
