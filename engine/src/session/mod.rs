//! Stateful session codec (gRFC A55): cookie and header values, `set-cookie`, path match, overrides.
//!
//! Decoding reads every dialect a mixed fleet produces (Envoy's protobuf
//! cookie, the legacy `ip:port`, gRPC's `ip:port;cluster`) into a stack
//! buffer, so the per-request path does not allocate. Base64 is hand-written
//! here: it is a few lines, it must accept both alphabets and optional
//! padding at once, and it keeps the engine crate free of a dependency.

mod proto;
mod stack_buf;
#[cfg(test)]
mod tests;
mod value;

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use crate::config::{SessionCookie, StatefulSession, StatefulSessionPerRoute};

use crate::base64::{base64_decode, base64_encode};
use proto::{decode_envoy_proto, TAG_ADDRESS, TAG_EXPIRES};
use stack_buf::StackBuf;
pub use value::SessionValue;
use value::MAX_DECODED;

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

// ---------------------------------------------------------------------------
// Encoding.
// ---------------------------------------------------------------------------

/// Appends the base64 cookie value for `address` in `format` to `out`
/// (Envoy format: expires = now + ttl when ttl has whole seconds, else the
/// field is omitted; the address string is `SocketAddr`'s Display, e.g.
/// `"10.0.0.1:8080"` or `"[::1]:80"`).
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
