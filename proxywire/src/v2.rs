//! Version 2, the binary header: a 16-byte fixed part (signature, version and command, family and transport, length), then the address block and TLVs, judged as Envoy judges them.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use crate::{
    check_unicast, tlv, Command, Error, Header, Parsed, Transport, Version, V2_HEADER_LEN,
};

const CMD_LOCAL: u8 = 0x0;
const CMD_PROXY: u8 = 0x1;
/// Address families (the high nibble of byte 13). AF_UNSPEC (0) and
/// AF_UNIX (3, a 216-byte block of two 108-byte paths) exist in the spec,
/// but Envoy refuses both with PROXY and skips whatever LOCAL carries, so
/// neither is ever read.
const AF_INET: u8 = 0x1;
const AF_INET6: u8 = 0x2;
const INET_BLOCK: usize = 12;
const INET6_BLOCK: usize = 36;
/// Transports (the low nibble of byte 13).
const TRANSPORT_STREAM: u8 = 0x1;
const TRANSPORT_DGRAM: u8 = 0x2;

/// The header's whole length (16 + its length field) once the fixed part
/// is in, or the fixed part's fault: everything Envoy checks before it
/// has read further. `buf` starts with the signature.
pub(crate) fn header_len(buf: &[u8]) -> Result<Option<usize>, Error> {
    let Some(&[.., ver_cmd, fam, len_hi, len_lo]) = buf.get(..V2_HEADER_LEN) else {
        return Ok(None);
    };
    let len = u16::from_be_bytes([len_hi, len_lo]);
    let version = ver_cmd >> 4;
    if version != 2 {
        return Err(Error::V2Version(version));
    }
    match ver_cmd & 0x0f {
        // LOCAL: family, transport and length are not looked at, the
        // length's bytes are skipped (a health check's header need not
        // describe anything).
        CMD_LOCAL => {}
        CMD_PROXY => {
            let family = fam >> 4;
            let block = match family {
                AF_INET => INET_BLOCK,
                AF_INET6 => INET6_BLOCK,
                other => return Err(Error::V2Family(other)),
            };
            match fam & 0x0f {
                TRANSPORT_STREAM | TRANSPORT_DGRAM => {}
                other => return Err(Error::V2Transport(other)),
            }
            if usize::from(len) < block {
                return Err(Error::V2AddressesTooShort { family, len });
            }
        }
        other => return Err(Error::V2Command(other)),
    }
    Ok(Some(V2_HEADER_LEN + usize::from(len)))
}

/// One v2 header from the start of `buf`, which starts with the signature.
pub(crate) fn parse(buf: &[u8]) -> Result<Parsed, Error> {
    let Some(total) = header_len(buf)? else {
        return Ok(Parsed::Incomplete);
    };
    // Envoy waits for the whole header (TLVs included) before it judges
    // the addresses, and so does this: a lying length is Incomplete.
    let Some(header) = buf.get(..total) else {
        return Ok(Parsed::Incomplete);
    };
    let Some((fixed, rest)) = header.split_first_chunk::<V2_HEADER_LEN>() else {
        return Ok(Parsed::Incomplete);
    };
    let (ver_cmd, fam) = (fixed[12], fixed[13]);
    let transport = match fam & 0x0f {
        TRANSPORT_STREAM => Transport::Stream,
        TRANSPORT_DGRAM => Transport::Datagram,
        // UNSPEC, or for LOCAL anything (PROXY's was checked above).
        _ => Transport::Unspec,
    };
    if ver_cmd & 0x0f == CMD_LOCAL {
        return Ok(Parsed::Complete {
            header: Header {
                version: Version::V2,
                command: Command::Local,
                transport,
                addresses: None,
                tlvs: Vec::new(),
            },
            consumed: total,
        });
    }
    let (pair, tlvs) = addresses(fam >> 4, rest)?;
    check_unicast(Version::V2, pair)?;
    Ok(Parsed::Complete {
        header: Header {
            version: Version::V2,
            command: Command::Proxy,
            transport,
            addresses: Some(pair),
            tlvs: tlv::parse(tlvs)?,
        },
        consumed: total,
    })
}

/// The address block of an AF_INET or AF_INET6 header (`header_len`
/// checked the family and that the block fits) and the bytes after it.
fn addresses(family: u8, body: &[u8]) -> Result<((SocketAddr, SocketAddr), &[u8]), Error> {
    let too_short = || Error::V2AddressesTooShort {
        family,
        len: u16::try_from(body.len()).unwrap_or(u16::MAX),
    };
    let port = |b: &[u8]| u16::from_be_bytes([b[0], b[1]]);
    if family == AF_INET {
        let (b, rest) = body
            .split_first_chunk::<INET_BLOCK>()
            .ok_or_else(too_short)?;
        let src = Ipv4Addr::new(b[0], b[1], b[2], b[3]);
        let dst = Ipv4Addr::new(b[4], b[5], b[6], b[7]);
        let pair = (
            SocketAddr::V4(SocketAddrV4::new(src, port(&b[8..10]))),
            SocketAddr::V4(SocketAddrV4::new(dst, port(&b[10..12]))),
        );
        Ok((pair, rest))
    } else {
        let (b, rest) = body
            .split_first_chunk::<INET6_BLOCK>()
            .ok_or_else(too_short)?;
        let mut src = [0u8; 16];
        let mut dst = [0u8; 16];
        src.copy_from_slice(&b[..16]);
        dst.copy_from_slice(&b[16..32]);
        let pair = (
            SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(src),
                port(&b[32..34]),
                0,
                0,
            )),
            SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(dst),
                port(&b[34..36]),
                0,
                0,
            )),
        );
        Ok((pair, rest))
    }
}
