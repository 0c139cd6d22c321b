//! v2's TLVs (a type byte, a 16-bit length, the value) after the address block: the well-known types, and the walk over them that Envoy makes.

use crate::{Error, Tlv};

/// Application-Layer Protocol Negotiation: the protocol the client
/// negotiated (e.g. "h2").
pub const TLV_TYPE_ALPN: u8 = 0x01;
/// The host name the client asked for (TLS SNI, say), UTF-8.
pub const TLV_TYPE_AUTHORITY: u8 = 0x02;
/// A CRC-32C of the whole header (this field zeroed). Not verified, as
/// Envoy does not verify it.
pub const TLV_TYPE_CRC32C: u8 = 0x03;
/// Padding, to be ignored (returned like any other TLV: Envoy does not
/// single it out either).
pub const TLV_TYPE_NOOP: u8 = 0x04;
/// An opaque id of the connection, at most 128 bytes by the spec (not
/// enforced: Envoy does not).
pub const TLV_TYPE_UNIQUE_ID: u8 = 0x05;
/// The client's TLS details: a flags byte, a 32-bit verify result, then
/// sub-TLVs (version, CN, cipher, ...), returned unparsed.
pub const TLV_TYPE_SSL: u8 = 0x20;
/// The network namespace the connection was accepted in, US-ASCII.
pub const TLV_TYPE_NETNS: u8 = 0x30;

/// Every TLV in `bytes`, which must be whole TLVs to the last byte: a
/// type byte with no room for its length, or a value longer than what is
/// left, is an overrun (Envoy refuses the header). A zero-length value is
/// fine, at the end too.
pub(crate) fn parse(mut bytes: &[u8]) -> Result<Vec<Tlv>, Error> {
    let mut tlvs = Vec::new();
    while let Some((&kind, after)) = bytes.split_first() {
        let (len, after) = after.split_first_chunk::<2>().ok_or(Error::V2TlvOverrun)?;
        let (value, after) = after
            .split_at_checked(usize::from(u16::from_be_bytes(*len)))
            .ok_or(Error::V2TlvOverrun)?;
        tlvs.push(Tlv {
            kind,
            value: value.to_vec(),
        });
        bytes = after;
    }
    Ok(tlvs)
}
