//! HAProxy's PROXY protocol, v1 (a text line) and v2 (binary), sans-I/O: parse the header a load balancer puts before a connection's first byte, accepting and refusing what Envoy's `envoy.filters.listener.proxy_protocol` does, and encode headers for upstream connections.
//!
//! [`detect`] tells from the first bytes whether a header is there at all
//! (what `allow_requests_without_proxy_protocol` needs), [`parse`] reads
//! one from the start of a buffer (saying how many bytes it took, so the
//! payload behind it is untouched), and [`header_len`] gives a reader that
//! peeks the length to take before the whole header is in. Nothing here
//! does I/O or keeps state: a caller feeds what it has read so far and
//! calls again with more after [`Parsed::Incomplete`]. Every rule has a
//! deterministic test (`src/tests.rs`) and the parser is fuzzed
//! (`fuzz/fuzz_targets/proxy_header.rs`).

// What Envoy does, and so what this crate does. Read in Envoy's
// source/extensions/filters/listener/proxy_protocol/proxy_protocol.{h,cc},
// source/extensions/common/proxy_protocol/proxy_protocol_header.h,
// source/common/network/utility.cc (parseInternetAddressAndPortNoThrow),
// source/common/network/address_impl.h (isUnicastAddress) and
// source/common/common/utility.cc (StringUtil::rtrim, WhitespaceChars);
// tests in test/extensions/filters/listener/proxy_protocol/. (The newest
// copy within reach: the filter with `disallowed_versions` and per-version
// stats; its parsing rules have been the same for years.)
//
// Which version:
// - A header starts with "PROXY " (v1) or the 12-byte v2 signature. With
//   `allow_requests_without_proxy_protocol`, Envoy compares only as many
//   bytes as it has, so a connection is "not PROXY" as soon as its bytes
//   stop being a prefix of both (`detect`). Without it, 16 bytes that are
//   neither are refused.
// - Counters: a failure after the v2 signature counts as v2's `error`; a
//   v1 failure only once a CRLF was found (Envoy settles on v1 there), so a
//   line without CRLF in the limit counts as `not_found_disallowed`, like a
//   connection that is not PROXY at all (`Error::version`). (Envoy also
//   settles on v1 for a CRLF in the first 16 bytes of a connection that is
//   not PROXY, "GET /\r\n" say, and counts a v1 error; here that is
//   NotProxy from its first bytes on.)
//
// v1:
// - The line ends at the first CRLF (a lone CR or LF is part of it). Envoy
//   allows 108 bytes with the CRLF (its MAX_PROXY_PROTO_LEN_V1); the spec
//   says 107. We keep the spec's 107 (`V1_MAX_LEN`), so a 108-byte line,
//   which needs fields no sender writes (padded ports, UNKNOWN's free
//   text), is refused here and accepted by Envoy.
// - Trailing whitespace (space, \t, \f, \v, \n, \r) before the CRLF is
//   dropped, then the line is split at every single space, empty fields
//   kept: a doubled space makes an empty field, which fails.
// - "PROXY", then the protocol. "UNKNOWN": accepted whatever follows, and
//   the connection's own addresses stand. Otherwise exactly six fields, the
//   protocol TCP4 or TCP6 (case-sensitive).
// - TCP4 addresses: inet_pton(AF_INET), four decimal octets without leading
//   zeros. TCP6: getaddrinfo(AF_INET6, AI_NUMERICHOST): IPv6 text (a dotted
//   IPv4 tail included), an optional numeric "%scope"; never IPv4 text.
// - Ports: absl::SimpleAtoi into 64 bits, then at most 65535: leading zeros,
//   one leading '+' and surrounding whitespace (\t etc.; a space already
//   split the field) are accepted, '-' is not.
// v1 and v2 PROXY:
// - Both addresses must be unicast (Ip::isUnicastAddress): IPv4 not
//   0.0.0.0, 255.255.255.255 or 224.0.0.0/4; IPv6 not :: or ff00::/8.
//   (The spec's own example line "PROXY TCP4 255.255.255.255 ..." fails.)
// v2:
// - The version nibble must be 2.
// - LOCAL (command 0): nothing else in the header is checked (family,
//   transport, length); its length's bytes are skipped without reading TLVs
//   and the connection's addresses stand.
// - Any other command: the family must be AF_INET (1) or AF_INET6 (2) (so
//   AF_UNSPEC and AF_UNIX with PROXY are refused, though the spec asks
//   receivers to accept them and keep the connection's addresses); the
//   length must hold the address block (12 or 36 bytes); the command must
//   then be PROXY (1) and the transport STREAM (1) or DGRAM (2).
// - The header is 16 + length bytes, at most 65551: Envoy grows its peek
//   buffer to the length, with no smaller cap.
// - The bytes after the address block are TLVs (type, 16-bit length,
//   value), each of which must fit whole; one that runs past the end is an
//   error. No type is special: CRC32C is not verified, SSL not looked into.

use std::fmt;
use std::net::SocketAddr;

mod encode;
mod tlv;
mod v1;
mod v2;

pub use encode::{encode_v1, encode_v2};
pub use tlv::{
    TLV_TYPE_ALPN, TLV_TYPE_AUTHORITY, TLV_TYPE_CRC32C, TLV_TYPE_NETNS, TLV_TYPE_NOOP,
    TLV_TYPE_SSL, TLV_TYPE_UNIQUE_ID,
};

/// The longest v1 line, CRLF included (the spec's; Envoy allows one byte
/// more, see the notes atop this file).
pub const V1_MAX_LEN: usize = 107;
/// What every v2 header starts with.
pub const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// A v2 header's fixed part: signature, version and command, family and
/// transport, length.
pub const V2_HEADER_LEN: usize = 16;
/// The longest v2 header: the fixed part and the most a 16-bit length
/// announces.
pub const V2_MAX_LEN: usize = V2_HEADER_LEN + u16::MAX as usize;

/// v1's signature.
const V1_SIGNATURE: &[u8] = b"PROXY ";

/// The protocol version of a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    V1,
    V2,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Version::V1 => "v1",
            Version::V2 => "v2",
        })
    }
}

/// What the header asks for: v2's LOCAL (a connection the proxy made on
/// its own, a health check: its own addresses stand) or PROXY. v1 is
/// always PROXY.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    Local,
    Proxy,
}

/// The proxied connection's transport: v1's TCP4/TCP6 and v2's STREAM are
/// `Stream`, v2's DGRAM `Datagram`; v1's UNKNOWN and v2's UNSPEC (and, for
/// LOCAL, which Envoy does not check, any undefined value) `Unspec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    Stream,
    Datagram,
    Unspec,
}

/// One v2 TLV, as it came (see the `TLV_TYPE_*` constants for the
/// well-known kinds).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tlv {
    pub kind: u8,
    pub value: Vec<u8>,
}

/// A parsed header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub version: Version,
    pub command: Command,
    pub transport: Transport,
    /// Source and destination the header states; None for LOCAL, v1
    /// UNKNOWN, AF_UNSPEC and AF_UNIX (the connection's own addresses
    /// stand, as in Envoy). (AF_UNSPEC and AF_UNIX only ever parse with
    /// LOCAL: Envoy refuses them with PROXY.) A v1 TCP6 address may carry
    /// a numeric scope id; nothing else sets one, nor a flow label.
    pub addresses: Option<(SocketAddr, SocketAddr)>,
    /// v2's TLVs in the order sent, repeats kept (empty for v1 and for
    /// LOCAL, whose TLVs Envoy skips unread).
    pub tlvs: Vec<Tlv>,
}

/// What the first bytes of a connection are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detect {
    /// Every byte so far is a prefix of one of the signatures (none yet).
    NeedMore,
    V1,
    V2,
    NotProxy,
}

/// Looks at the first bytes only: enough to tell v1 ("PROXY "), v2
/// (signature) or neither; NeedMore while a prefix of either signature.
pub fn detect(buf: &[u8]) -> Detect {
    if buf.starts_with(V1_SIGNATURE) {
        Detect::V1
    } else if buf.starts_with(&V2_SIGNATURE) {
        Detect::V2
    } else if V1_SIGNATURE.starts_with(buf) || V2_SIGNATURE.starts_with(buf) {
        Detect::NeedMore
    } else {
        Detect::NotProxy
    }
}

/// What [`parse`] made of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// A valid start of a header; call again with more bytes.
    Incomplete,
    /// A whole header, `consumed` bytes from the buffer's start (what
    /// follows is the connection's payload).
    Complete { header: Header, consumed: usize },
}

/// Parses one header from the start of `buf` (v1 or v2 by [`detect`]);
/// Incomplete while more bytes are needed (never beyond the max sizes: a
/// v1 line longer than 107 bytes without CRLF is an error, not
/// Incomplete); an error for anything Envoy would reject, and NotProxy
/// input is an error variant too (the caller decides, via detect, whether
/// missing PROXY is allowed).
///
/// A v2 header whose fixed part Envoy refuses is an error as soon as its
/// 16 bytes are in; everything else (addresses, TLVs) is judged once the
/// whole header is.
pub fn parse(buf: &[u8]) -> Result<Parsed, Error> {
    match detect(buf) {
        Detect::NeedMore => Ok(Parsed::Incomplete),
        Detect::NotProxy => Err(Error::NotProxy),
        Detect::V1 => v1::parse(buf),
        Detect::V2 => v2::parse(buf),
    }
}

/// For a reader that peeks: the exact length of the header at the start
/// of buf if knowable yet (v2: 16 + len field; v1: position of CRLF + 2),
/// else None. Errors are those [`parse`] would give for the same bytes
/// before looking past the v1 line's end or v2's fixed part (a v1 line
/// too long, a v2 version, command, family, transport or length Envoy
/// refuses), so a reader does not wait for the rest of a doomed header.
pub fn header_len(buf: &[u8]) -> Result<Option<usize>, Error> {
    match detect(buf) {
        Detect::NeedMore => Ok(None),
        Detect::NotProxy => Err(Error::NotProxy),
        Detect::V1 => v1::line_len(buf),
        Detect::V2 => v2::header_len(buf),
    }
}

/// Why a header is refused.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum Error {
    #[error(
        "not a PROXY protocol header: the first bytes are neither \"PROXY \" nor the v2 signature"
    )]
    NotProxy,
    #[error("PROXY v1: no CRLF within the first {V1_MAX_LEN} bytes")]
    V1TooLong,
    #[error("PROXY v1: {0}")]
    V1Syntax(&'static str),
    #[error("PROXY v1: an address is not valid IPv4 or IPv6 text")]
    V1BadAddress,
    #[error("PROXY v1: an address is not of the protocol's family (TCP4 takes IPv4, TCP6 IPv6)")]
    V1FamilyMismatch,
    #[error("PROXY v1: a port is not a decimal number from 0 to 65535")]
    BadPort,
    #[error("PROXY v2: version {0} (only 2 exists)")]
    V2Version(u8),
    #[error("PROXY v2: command {0} (only LOCAL, 0, and PROXY, 1, exist)")]
    V2Command(u8),
    #[error(
        "PROXY v2: address family {0} with PROXY (Envoy takes only AF_INET, 1, and AF_INET6, 2)"
    )]
    V2Family(u8),
    #[error("PROXY v2: transport {0} with PROXY (Envoy takes only STREAM, 1, and DGRAM, 2)")]
    V2Transport(u8),
    #[error("PROXY v2: length {len} is shorter than family {family}'s address block")]
    V2AddressesTooShort { family: u8, len: u16 },
    #[error("PROXY v2: a TLV runs past the end of the header")]
    V2TlvOverrun,
    #[error("PROXY {version}: {addr} is not a unicast address")]
    NotUnicast {
        version: Version,
        addr: std::net::IpAddr,
    },
}

impl Error {
    /// Which version's parse failed, as Envoy counts it (its per-version
    /// `error` counters); None where Envoy had not settled on a version:
    /// bytes that are not PROXY, and a v1 line with no CRLF in the limit
    /// (both `not_found_disallowed` in Envoy).
    pub fn version(&self) -> Option<Version> {
        match self {
            Error::NotProxy | Error::V1TooLong => None,
            Error::V1Syntax(_) | Error::V1BadAddress | Error::V1FamilyMismatch | Error::BadPort => {
                Some(Version::V1)
            }
            Error::V2Version(_)
            | Error::V2Command(_)
            | Error::V2Family(_)
            | Error::V2Transport(_)
            | Error::V2AddressesTooShort { .. }
            | Error::V2TlvOverrun => Some(Version::V2),
            Error::NotUnicast { version, .. } => Some(*version),
        }
    }
}

/// Envoy's `isUnicastAddress`, which both versions' PROXY addresses must
/// pass: not the any address, not IPv4's broadcast, not multicast.
fn check_unicast(version: Version, pair: (SocketAddr, SocketAddr)) -> Result<(), Error> {
    for addr in [pair.0.ip(), pair.1.ip()] {
        let unicast = match addr {
            std::net::IpAddr::V4(a) => {
                !a.is_unspecified() && !a.is_broadcast() && !a.is_multicast()
            }
            std::net::IpAddr::V6(a) => !a.is_unspecified() && !a.is_multicast(),
        };
        if !unicast {
            return Err(Error::NotUnicast { version, addr });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
