//! Version 1, the text line (`PROXY TCP4|TCP6 src dst sport dport` or `PROXY UNKNOWN ...`, then CRLF), read field by field as Envoy reads it.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use crate::{check_unicast, Command, Error, Header, Parsed, Transport, Version, V1_MAX_LEN};

/// What Envoy trims off the line's end (StringUtil::WhitespaceChars) and
/// what absl::SimpleAtoi skips around a number: the same six bytes.
/// (Rust's `is_ascii_whitespace` leaves out \v, so it is not used.)
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// The line's length with its CRLF (the first CRLF in the buffer), None
/// while a CRLF may still come within [`V1_MAX_LEN`].
pub(crate) fn line_len(buf: &[u8]) -> Result<Option<usize>, Error> {
    // A CRLF whose LF is past the limit ends a line that is too long, so
    // only the first V1_MAX_LEN bytes are searched.
    let window = &buf[..buf.len().min(V1_MAX_LEN)];
    match window.windows(2).position(|w| w == b"\r\n") {
        Some(cr) => Ok(Some(cr + 2)),
        None if buf.len() >= V1_MAX_LEN => Err(Error::V1TooLong),
        None => Ok(None),
    }
}

/// One v1 header from the start of `buf`, which starts with "PROXY ".
pub(crate) fn parse(buf: &[u8]) -> Result<Parsed, Error> {
    let Some(len) = line_len(buf)? else {
        return Ok(Parsed::Incomplete);
    };
    let header = parse_line(&buf[..len])?;
    Ok(Parsed::Complete {
        header,
        consumed: len,
    })
}

/// The line, CRLF included.
fn parse_line(line: &[u8]) -> Result<Header, Error> {
    let end = line
        .iter()
        .rposition(|&b| !is_space(b))
        .map_or(0, |i| i + 1);
    // Split at every single space, empty fields kept: "a  b" is three
    // fields, the middle one empty, as in Envoy (which then fails on it).
    let mut fields = line[..end].split(|&b| b == b' ');
    if fields.next() != Some(b"PROXY".as_slice()) {
        return Err(Error::V1Syntax("the line does not start with \"PROXY \""));
    }
    let Some(protocol) = fields.next() else {
        return Err(Error::V1Syntax("no protocol after PROXY"));
    };
    let v6 = match protocol {
        // Whatever follows UNKNOWN is ignored, and the connection keeps
        // its own addresses (the spec's "real connection's parameters").
        b"UNKNOWN" => {
            return Ok(Header {
                version: Version::V1,
                command: Command::Proxy,
                transport: Transport::Unspec,
                addresses: None,
                tlvs: Vec::new(),
            })
        }
        b"TCP4" => false,
        b"TCP6" => true,
        _ => return Err(Error::V1Syntax("the protocol is not TCP4, TCP6 or UNKNOWN")),
    };
    let (Some(src), Some(dst), Some(src_port), Some(dst_port), None) = (
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
    ) else {
        return Err(Error::V1Syntax(
            "TCP4 and TCP6 take exactly four fields: two addresses, two ports",
        ));
    };
    let (src, dst) = (address(src, v6)?, address(dst, v6)?);
    let (src_port, dst_port) = (port(src_port)?, port(dst_port)?);
    let pair = (src.with_port(src_port), dst.with_port(dst_port));
    check_unicast(Version::V1, pair)?;
    Ok(Header {
        version: Version::V1,
        command: Command::Proxy,
        transport: Transport::Stream,
        addresses: Some(pair),
        tlvs: Vec::new(),
    })
}

/// An address field, before its port is known.
enum Addr {
    V4(Ipv4Addr),
    V6(Ipv6Addr, u32),
}

impl Addr {
    fn with_port(self, port: u16) -> SocketAddr {
        match self {
            Addr::V4(ip) => SocketAddr::V4(SocketAddrV4::new(ip, port)),
            Addr::V6(ip, scope) => SocketAddr::V6(SocketAddrV6::new(ip, port, 0, scope)),
        }
    }
}

/// TCP4's field as inet_pton(AF_INET) reads it (Rust's parser is as
/// strict: four decimal octets, no leading zeros), TCP6's as getaddrinfo
/// with AI_NUMERICHOST reads it: IPv6 text and a numeric scope id. An
/// address of the other family is told apart only for a clearer error.
fn address(field: &[u8], v6: bool) -> Result<Addr, Error> {
    let Ok(text) = std::str::from_utf8(field) else {
        return Err(Error::V1BadAddress);
    };
    let as_v4 = text.parse::<Ipv4Addr>().ok();
    let as_v6 = ipv6(text);
    match (v6, as_v4, as_v6) {
        (false, Some(ip), _) => Ok(Addr::V4(ip)),
        (true, _, Some((ip, scope))) => Ok(Addr::V6(ip, scope)),
        (false, None, Some(_)) | (true, Some(_), None) => Err(Error::V1FamilyMismatch),
        _ => Err(Error::V1BadAddress),
    }
}

/// IPv6 text with an optional "%scope". glibc takes an interface name
/// there too, but only one the host has; a number is the same everywhere,
/// so only numbers are taken (all digits, at most 2³²−1, as glibc's
/// strtoull check).
fn ipv6(text: &str) -> Option<(Ipv6Addr, u32)> {
    let (ip, scope) = match text.split_once('%') {
        Some((ip, scope)) => {
            if scope.is_empty() || !scope.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            (ip, scope.parse::<u32>().ok()?)
        }
        None => (text, 0),
    };
    Some((ip.parse().ok()?, scope))
}

/// A port as absl::SimpleAtoi reads it into 64 bits, then at most 65535:
/// whitespace around it and one '+' before it are skipped, leading zeros
/// are fine, a '-' is not (even "-0").
fn port(field: &[u8]) -> Result<u16, Error> {
    let start = field
        .iter()
        .position(|&b| !is_space(b))
        .unwrap_or(field.len());
    let end = field
        .iter()
        .rposition(|&b| !is_space(b))
        .map_or(start, |i| i + 1);
    let text = &field[start..end.max(start)];
    let digits = text.strip_prefix(b"+").unwrap_or(text);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(Error::BadPort);
    }
    let mut value: u32 = 0;
    for d in digits {
        value = value * 10 + u32::from(d - b'0');
        // Stopping at the first digit past the range keeps `value` small
        // whatever the number of digits.
        if value > u32::from(u16::MAX) {
            return Err(Error::BadPort);
        }
    }
    u16::try_from(value).map_err(|_| Error::BadPort)
}
