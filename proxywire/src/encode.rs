//! Headers written for upstream connections: a v1 line or a v2 binary header for a pair of addresses, in the form the parser reads back.

use std::net::{SocketAddr, SocketAddrV6};

use crate::{Command, Tlv, V2_SIGNATURE};

/// A pair of one family, as both versions need: the v4 side of a mixed
/// pair becomes its v4-mapped IPv6 form (::ffff:a.b.c.d), which names the
/// same IPv4 endpoint (a dual-stack socket sees IPv4 peers so), where
/// falling back to UNKNOWN/UNSPEC would lose both addresses.
fn v6(addr: SocketAddr) -> SocketAddrV6 {
    match addr {
        SocketAddr::V6(a) => a,
        SocketAddr::V4(a) => SocketAddrV6::new(a.ip().to_ipv6_mapped(), a.port(), 0, 0),
    }
}

/// Appends a v1 line: `PROXY TCP4 ...` for two IPv4 addresses, `PROXY
/// TCP6 ...` for two IPv6 ones or a mixed pair (v4 mapped, see above), or
/// `PROXY UNKNOWN\r\n` for None (the receiver keeps the connection's own
/// addresses). Scope ids and flow labels are not written: v1 has no
/// place for them. At most 104 bytes.
pub fn encode_v1(addresses: Option<(SocketAddr, SocketAddr)>, out: &mut Vec<u8>) {
    let line = match addresses {
        None => String::from("PROXY UNKNOWN\r\n"),
        Some((SocketAddr::V4(s), SocketAddr::V4(d))) => format!(
            "PROXY TCP4 {} {} {} {}\r\n",
            s.ip(),
            d.ip(),
            s.port(),
            d.port()
        ),
        Some((s, d)) => {
            let (s, d) = (v6(s), v6(d));
            format!(
                "PROXY TCP6 {} {} {} {}\r\n",
                s.ip(),
                d.ip(),
                s.port(),
                d.port()
            )
        }
    };
    out.extend_from_slice(line.as_bytes());
}

/// Appends a v2 header: `command`, the addresses as AF_INET (two IPv4),
/// AF_INET6 (two IPv6, or a mixed pair with the v4 side mapped, see
/// above) or, for None, AF_UNSPEC with no address block; the transport
/// STREAM with addresses (the gateway proxies TCP), UNSPEC without. Then
/// `tlvs` in order, as many as fit the 16-bit length: the first that
/// would take it past 65535 (or whose value is longer than that) is left
/// out with all after it. With LOCAL, the addresses and TLVs are written
/// all the same; a receiver (this parser, Envoy) ignores them.
pub fn encode_v2(
    command: Command,
    addresses: Option<(SocketAddr, SocketAddr)>,
    tlvs: &[Tlv],
    out: &mut Vec<u8>,
) {
    let mut body = Vec::new();
    let family_transport = match addresses {
        None => 0x00,
        Some((SocketAddr::V4(s), SocketAddr::V4(d))) => {
            body.extend_from_slice(&s.ip().octets());
            body.extend_from_slice(&d.ip().octets());
            body.extend_from_slice(&s.port().to_be_bytes());
            body.extend_from_slice(&d.port().to_be_bytes());
            0x11
        }
        Some((s, d)) => {
            let (s, d) = (v6(s), v6(d));
            body.extend_from_slice(&s.ip().octets());
            body.extend_from_slice(&d.ip().octets());
            body.extend_from_slice(&s.port().to_be_bytes());
            body.extend_from_slice(&d.port().to_be_bytes());
            0x21
        }
    };
    for tlv in tlvs {
        let Ok(len) = u16::try_from(tlv.value.len()) else {
            break;
        };
        if body.len() + 3 + tlv.value.len() > usize::from(u16::MAX) {
            break;
        }
        body.push(tlv.kind);
        body.extend_from_slice(&len.to_be_bytes());
        body.extend_from_slice(&tlv.value);
    }
    let command = match command {
        Command::Local => 0x0,
        Command::Proxy => 0x1,
    };
    out.extend_from_slice(&V2_SIGNATURE);
    out.push(0x20 | command);
    out.push(family_transport);
    // The loop above kept the body within 65535 bytes.
    out.extend_from_slice(&u16::try_from(body.len()).unwrap_or(u16::MAX).to_be_bytes());
    out.extend_from_slice(&body);
}
