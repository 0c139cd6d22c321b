//! The §8 checks as first written, one plain loop per rule: the oracle the
//! optimized ones in `check.rs` are held to (`tests.rs`, randomized lists).
//! Test-only; keep it simple rather than fast.

use super::head::{RequestHead, ResponseHead};
use super::list::HeaderList;
use super::malformed::Malformed;

/// Which section of a message a list is: the rules differ for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Request,
    Response,
    Trailers,
}

/// What the pass over the fields found: the pseudo-headers and the few
/// regular fields that take part in later rules.
#[derive(Default)]
struct Scan<'a> {
    method: Option<&'a [u8]>,
    scheme: Option<&'a [u8]>,
    authority: Option<&'a [u8]>,
    path: Option<&'a [u8]>,
    protocol: Option<&'a [u8]>,
    status: Option<&'a [u8]>,
    host: Option<&'a [u8]>,
    content_length: Option<ContentLength<'a>>,
}

/// The first content-length seen: its value, and its bytes for comparing
/// the others against.
#[derive(Clone, Copy)]
struct ContentLength<'a> {
    value: u64,
    raw: &'a [u8],
}

/// Checks a request header list (§8.1.1, §8.2, §8.3.1, §8.5, RFC 8441 §4)
/// and returns its pseudo-headers.
///
/// `:protocol` is accepted on CONNECT whatever our settings say: it is
/// legal only once we have sent SETTINGS_ENABLE_CONNECT_PROTOCOL = 1, which
/// the connection layer knows and this function does not.
pub fn check_request(list: &HeaderList) -> Result<RequestHead<'_>, Malformed> {
    let s = scan(list, Section::Request)?;
    let method = s.method.ok_or(Malformed::MissingMethod)?;
    if method.is_empty() || !all_in(method, TOKEN) {
        return Err(Malformed::InvalidMethod);
    }
    // Methods are case-sensitive (RFC 9110 §9.1): "connect" is not CONNECT.
    let connect = method == b"CONNECT";
    if s.protocol.is_some() && !connect {
        return Err(Malformed::ProtocolWithoutConnect);
    }
    // §8.3.1 bans userinfo in http and https authorities.
    let no_userinfo = if connect && s.protocol.is_none() {
        // A plain CONNECT names only where to connect (§8.5).
        if s.scheme.is_some() || s.path.is_some() {
            return Err(Malformed::ConnectWithSchemeOrPath);
        }
        if s.authority.is_none() {
            return Err(Malformed::ConnectWithoutAuthority);
        }
        // Nor has host:port any room for it.
        true
    } else {
        // Everything else, extended CONNECT included (RFC 8441 §4).
        let scheme = s.scheme.ok_or(Malformed::MissingScheme)?;
        let path = s.path.ok_or(Malformed::MissingPath)?;
        check_scheme(scheme)?;
        let http = is_http(scheme);
        check_path(path, http, method == b"OPTIONS")?;
        http
    };
    if let Some(authority) = s.authority {
        check_authority(authority, no_userinfo, Malformed::InvalidAuthority)?;
    }
    if let Some(host) = s.host {
        // A Host field has no userinfo in any scheme (RFC 9110 §7.2).
        check_authority(host, true, Malformed::InvalidHost)?;
        if let Some(authority) = s.authority {
            if !same_origin(authority, host, s.scheme) {
                return Err(Malformed::HostMismatch);
            }
        }
    }
    Ok(RequestHead {
        method,
        scheme: s.scheme,
        authority: s.authority,
        path: s.path,
        protocol: s.protocol,
        content_length: s.content_length.map(|c| c.value),
    })
}

/// Checks a response header list (§8.1.1, §8.2, §8.3.2) and returns its
/// status. Whether a 1xx may come here, and what a 101 means (HTTP/2 has
/// no protocol switch, §8.6), is for the caller.
pub fn check_response(list: &HeaderList) -> Result<ResponseHead, Malformed> {
    let s = scan(list, Section::Response)?;
    let status = s.status.ok_or(Malformed::MissingStatus)?;
    let status = match *status {
        [a @ b'1'..=b'5', b @ b'0'..=b'9', c @ b'0'..=b'9'] => {
            u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0')
        }
        _ => return Err(Malformed::InvalidStatus),
    };
    Ok(ResponseHead {
        status,
        content_length: s.content_length.map(|c| c.value),
    })
}

/// Checks a trailer section (§8.1, §8.2, §8.3): regular fields only. That
/// it came with END_STREAM is the stream layer's to check.
pub fn check_trailers(list: &HeaderList) -> Result<(), Malformed> {
    scan(list, Section::Trailers).map(|_| ())
}

/// The message's content-length, if it has one, for the stream layer to
/// hold the DATA against (§8.1.1). Several fields are accepted when they
/// are byte for byte the same (RFC 9110 §8.6 lets a recipient either
/// reject such a list or collapse it); a comma-separated list in one field
/// is rejected, which that section also allows.
pub fn content_length(list: &HeaderList) -> Result<Option<u64>, Malformed> {
    let mut found = None;
    for value in list.get_all(b"content-length") {
        found = Some(merge_content_length(found, value)?);
    }
    Ok(found.map(|c| c.value))
}

/// One pass over the fields: everything that can be checked field by field.
fn scan(list: &HeaderList, section: Section) -> Result<Scan<'_>, Malformed> {
    let mut s = Scan::default();
    let mut regular_seen = false;
    for (name, value, _) in list.iter() {
        check_value(value)?;
        if let Some(pseudo) = name.strip_prefix(b":") {
            check_name(pseudo)?;
            if section == Section::Trailers {
                return Err(Malformed::PseudoInTrailers);
            }
            if regular_seen {
                return Err(Malformed::PseudoAfterRegular);
            }
            let slot = pseudo_slot(&mut s, pseudo, section)?;
            if slot.replace(value).is_some() {
                return Err(Malformed::DuplicatePseudo);
            }
            continue;
        }
        check_name(name)?;
        regular_seen = true;
        match name {
            b"connection" | b"proxy-connection" | b"keep-alive" | b"transfer-encoding"
            | b"upgrade" => return Err(Malformed::ConnectionSpecific),
            // "trailers" is a token, and tokens compare case-insensitively.
            b"te" if !value.eq_ignore_ascii_case(b"trailers") => {
                return Err(Malformed::TeNotTrailers)
            }
            // Two Host lines leave the target ambiguous (RFC 9110 §7.2).
            b"host" if section == Section::Request => {
                if s.host.is_some() {
                    return Err(Malformed::DuplicateHost);
                }
                s.host = Some(value);
            }
            b"content-length" => {
                s.content_length = Some(merge_content_length(s.content_length, value)?);
            }
            _ => {}
        }
    }
    Ok(s)
}

/// Where a pseudo-header's value goes, or why it may not appear (§8.3).
fn pseudo_slot<'s, 'a>(
    s: &'s mut Scan<'a>,
    pseudo: &[u8],
    section: Section,
) -> Result<&'s mut Option<&'a [u8]>, Malformed> {
    let request = section == Section::Request;
    Ok(match pseudo {
        b"method" if request => &mut s.method,
        b"scheme" if request => &mut s.scheme,
        b"authority" if request => &mut s.authority,
        b"path" if request => &mut s.path,
        b"protocol" if request => &mut s.protocol,
        b"status" if !request => &mut s.status,
        b"method" | b"scheme" | b"authority" | b"path" | b"protocol" => {
            return Err(Malformed::RequestPseudoInResponse)
        }
        b"status" => return Err(Malformed::ResponsePseudoInRequest),
        _ => return Err(Malformed::UnknownPseudo),
    })
}

/// §8.2.1, and RFC 9110 §5.1's token grammar, which the RFC's minimum
/// (no controls, space, uppercase, DEL, non-ASCII, or colon) falls inside:
/// names that are not tokens become unparseable or ambiguous once
/// forwarded over HTTP/1.1.
fn check_name(name: &[u8]) -> Result<(), Malformed> {
    if name.is_empty() {
        return Err(Malformed::InvalidName);
    }
    match name.iter().find(|&&b| CLASS[usize::from(b)] & NAME == 0) {
        None => Ok(()),
        Some(b) if b.is_ascii_uppercase() => Err(Malformed::UppercaseName),
        Some(_) => Err(Malformed::InvalidName),
    }
}

/// §8.2.1's minimum for values. Other control characters are let through:
/// RFC 9110 §5.5 only says a recipient should not trust them, and NUL, CR
/// and LF are the ones that split or end a line when forwarded.
fn check_value(value: &[u8]) -> Result<(), Malformed> {
    if value.iter().any(|&b| matches!(b, 0 | b'\n' | b'\r')) {
        return Err(Malformed::InvalidValue);
    }
    match (value.first(), value.last()) {
        (Some(b' ' | b'\t'), _) | (_, Some(b' ' | b'\t')) => Err(Malformed::ValueWhitespace),
        _ => Ok(()),
    }
}

/// RFC 3986 §3.1: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
fn check_scheme(scheme: &[u8]) -> Result<(), Malformed> {
    match scheme.split_first() {
        Some((first, rest))
            if first.is_ascii_alphabetic()
                && rest
                    .iter()
                    .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')) =>
        {
            Ok(())
        }
        _ => Err(Malformed::InvalidScheme),
    }
}

/// Schemes compare case-insensitively (RFC 3986 §3.1): "HTTPS" is https
/// and gets the same path rules.
fn is_http(scheme: &[u8]) -> bool {
    scheme.eq_ignore_ascii_case(b"http") || scheme.eq_ignore_ascii_case(b"https")
}

/// §8.3.1. Beyond the RFC's text, no control character, space or DEL
/// anywhere: a request line rebuilt from this path for an HTTP/1.1 backend
/// must stay one request line.
fn check_path(path: &[u8], http: bool, options: bool) -> Result<(), Malformed> {
    if path.is_empty() {
        return Err(Malformed::EmptyPath);
    }
    if path.iter().any(|&b| b <= b' ' || b == 0x7f) {
        return Err(Malformed::InvalidPath);
    }
    if http && !path.starts_with(b"/") && !(options && path == b"*") {
        return Err(Malformed::InvalidPath);
    }
    Ok(())
}

/// An authority (or Host value) must be non-empty — an http(s) URI has a
/// host (RFC 9110 §4.2) and CONNECT needs one — and made of the characters
/// RFC 3986 §3.2 allows. `no_userinfo`: §8.3.1 forbids userinfo for http
/// and https. Routing happens on this value, so nothing odd gets past.
fn check_authority(a: &[u8], no_userinfo: bool, err: Malformed) -> Result<(), Malformed> {
    if a.is_empty() || !all_in(a, AUTHORITY) || (no_userinfo && a.contains(&b'@')) {
        return Err(err);
    }
    Ok(())
}

/// Whether Host names the same origin as `:authority` under RFC 3986
/// §6.2.3 scheme-based normalization, which §8.3.1 requires of proxies:
/// hosts compare case-insensitively, an empty port is no port, and so is
/// the scheme's default port. Percent-encoded hosts are compared as they
/// are (a host needing them is rare enough to be rejected for it).
fn same_origin(authority: &[u8], host: &[u8], scheme: Option<&[u8]>) -> bool {
    let default_port: &[u8] = match scheme {
        Some(s) if s.eq_ignore_ascii_case(b"http") => b"80",
        Some(s) if s.eq_ignore_ascii_case(b"https") => b"443",
        _ => b"",
    };
    let is_default = |p: &[u8]| p.is_empty() || p == default_port;
    let (ah, ap) = split_host_port(strip_userinfo(authority));
    let (hh, hp) = split_host_port(host);
    ah.eq_ignore_ascii_case(hh) && (ap == hp || (is_default(ap) && is_default(hp)))
}

fn strip_userinfo(a: &[u8]) -> &[u8] {
    match a.iter().rposition(|&b| b == b'@') {
        Some(i) => &a[i + 1..],
        None => a,
    }
}

/// `host[:port]`, the host possibly a bracketed IPv6 literal whose colons
/// are not port separators.
fn split_host_port(a: &[u8]) -> (&[u8], &[u8]) {
    let host_end = match a.first() {
        Some(b'[') => a.iter().position(|&b| b == b']').map_or(a.len(), |i| i + 1),
        _ => 0,
    };
    match a[host_end..].iter().rposition(|&b| b == b':') {
        Some(i) => (&a[..host_end + i], &a[host_end + i + 1..]),
        None => (a, &[]),
    }
}

/// Adds one content-length value to what the earlier ones said.
fn merge_content_length<'a>(
    seen: Option<ContentLength<'a>>,
    raw: &'a [u8],
) -> Result<ContentLength<'a>, Malformed> {
    match seen {
        Some(c) if c.raw == raw => Ok(c),
        Some(_) => Err(Malformed::ConflictingContentLength),
        None => Ok(ContentLength {
            value: parse_decimal(raw).ok_or(Malformed::InvalidContentLength)?,
            raw,
        }),
    }
}

/// 1*DIGIT into a u64; None if empty, not all digits, or too large.
fn parse_decimal(raw: &[u8]) -> Option<u64> {
    if raw.is_empty() {
        return None;
    }
    raw.iter().try_fold(0u64, |n, &b| {
        let digit = b.checked_sub(b'0').filter(|d| *d <= 9)?;
        n.checked_mul(10)?.checked_add(u64::from(digit))
    })
}

fn all_in(bytes: &[u8], class: u8) -> bool {
    bytes.iter().all(|&b| CLASS[usize::from(b)] & class != 0)
}

/// Character classes, one lookup per byte.
const TOKEN: u8 = 1;
/// A token character that is not uppercase: what a field name may hold.
const NAME: u8 = 2;
/// RFC 3986 §3.2: unreserved, pct-encoded, sub-delims, ":", "@", "[", "]".
const AUTHORITY: u8 = 4;

static CLASS: [u8; 256] = classes();

const fn classes() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        let mut c = 0;
        // RFC 9110 §5.6.2 tchar.
        if b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            )
        {
            c |= TOKEN;
            if !b.is_ascii_uppercase() {
                c |= NAME;
            }
        }
        if b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'%'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
                    | b':'
                    | b'@'
                    | b'['
                    | b']'
            )
        {
            c |= AUTHORITY;
        }
        t[i] = c;
        i += 1;
    }
    t
}
