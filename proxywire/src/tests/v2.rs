//! v2 headers: INET, INET6, LOCAL, TLVs, and every fixed part, address and TLV Envoy refuses.

use std::net::{IpAddr, Ipv6Addr};

use super::*;

#[test]
fn v2_inet_stream_and_dgram() {
    let mut buf = v2(0x21, 0x11, &INET_BLOCK);
    buf.extend_from_slice(b"more data");
    let (h, n) = complete(&buf);
    assert_eq!(n, 28);
    assert_eq!(&buf[n..], b"more data");
    assert_eq!(
        h,
        Header {
            version: Version::V2,
            command: Command::Proxy,
            transport: Transport::Stream,
            addresses: pair("1.2.3.4:773", "0.1.1.2:2"),
            tlvs: vec![],
        }
    );
    assert_eq!(header_len(&buf), Ok(Some(28)));
    let (h, _) = complete(&v2(0x21, 0x12, &INET_BLOCK));
    assert_eq!(h.transport, Transport::Datagram);
}

#[test]
fn v2_inet6() {
    let mut buf = v2(0x21, 0x21, &inet6_block());
    buf.extend_from_slice(b"more data");
    let (h, n) = complete(&buf);
    assert_eq!(n, 52);
    assert_eq!(h.addresses, pair("[1:2:3::4]:8", "[1:100:2::3]:2"));
    assert_eq!(h.transport, Transport::Stream);
    assert_eq!(
        complete(&v2(0x21, 0x22, &inet6_block())).0.transport,
        Transport::Datagram
    );
}

#[test]
fn v2_local_keeps_the_connections_addresses_and_skips_its_bytes() {
    let local = |transport| Header {
        version: Version::V2,
        command: Command::Local,
        transport,
        addresses: None,
        tlvs: vec![],
    };
    let mut buf = v2(0x20, 0x00, &[]);
    buf.extend_from_slice(b"more data");
    assert_eq!(complete(&buf), (local(Transport::Unspec), 16));
    // Envoy's v2LocalConnectionExtension: one TLV, skipped unread.
    assert_eq!(
        complete(&v2(0x20, 0x00, &[0, 0, 1, 0xff])),
        (local(Transport::Unspec), 20)
    );
    // Nothing else of a LOCAL header is checked: addresses, any family or
    // transport, TLVs that overrun, a length too short for the family.
    assert_eq!(
        complete(&v2(0x20, 0x11, &INET_BLOCK)).0,
        local(Transport::Stream)
    );
    assert_eq!(
        complete(&v2(0x20, 0x22, &inet6_block())).0,
        local(Transport::Datagram)
    );
    assert_eq!(
        complete(&v2(0x20, 0x31, &[0; 216])).0,
        local(Transport::Stream)
    );
    assert_eq!(complete(&v2(0x20, 0xff, b"x")).0, local(Transport::Unspec));
    assert_eq!(
        complete(&v2(0x20, 0x11, &[1, 2])).0,
        local(Transport::Stream)
    );
    let (_, n) = complete(&v2(0x20, 0x00, &[0x20, 0xff, 0xff, 1]));
    assert_eq!(n, 20);
    let big = vec![0xab; 65535];
    assert_eq!(complete(&v2(0x20, 0x00, &big)).1, V2_MAX_LEN);
}

#[test]
fn v2_tlvs_come_in_order_and_are_not_interpreted() {
    let mut body = INET_BLOCK.to_vec();
    body.extend_from_slice(&[TLV_TYPE_ALPN, 0, 2, b'h', b'2']);
    body.extend_from_slice(&[TLV_TYPE_AUTHORITY, 0, 11]);
    body.extend_from_slice(b"example.com");
    // A CRC32C that is wrong (Envoy does not check it), NOOP padding, a
    // repeated type, an empty value, an SSL TLV with junk sub-TLVs.
    body.extend_from_slice(&[TLV_TYPE_CRC32C, 0, 4, 0xde, 0xad, 0xbe, 0xef]);
    body.extend_from_slice(&[TLV_TYPE_NOOP, 0, 3, 0, 0, 0]);
    body.extend_from_slice(&[TLV_TYPE_ALPN, 0, 8]);
    body.extend_from_slice(b"http/1.1");
    body.extend_from_slice(&[TLV_TYPE_SSL, 0, 2, 0xff, 0xff]);
    body.extend_from_slice(&[0xe0, 0, 0]);
    let (h, n) = complete(&v2(0x21, 0x11, &body));
    assert_eq!(n, 16 + body.len());
    let tlv = |kind, value: &[u8]| Tlv {
        kind,
        value: value.to_vec(),
    };
    assert_eq!(
        h.tlvs,
        [
            tlv(TLV_TYPE_ALPN, b"h2"),
            tlv(TLV_TYPE_AUTHORITY, b"example.com"),
            tlv(TLV_TYPE_CRC32C, &[0xde, 0xad, 0xbe, 0xef]),
            tlv(TLV_TYPE_NOOP, &[0, 0, 0]),
            tlv(TLV_TYPE_ALPN, b"http/1.1"),
            tlv(TLV_TYPE_SSL, &[0xff, 0xff]),
            tlv(0xe0, b""),
        ]
    );
    assert_eq!(
        [TLV_TYPE_UNIQUE_ID, TLV_TYPE_NETNS],
        [0x05, 0x30],
        "the spec's numbers"
    );
}

#[test]
fn v2_a_tlv_that_overruns_the_header_is_refused() {
    for tail in [
        &[0x01][..],
        &[0x01, 0x00],
        &[0x01, 0x00, 0x01],
        &[0x01, 0x00, 0x05, b'a', b'b'],
        &[0x01, 0xff, 0xff, 0],
        &[0x01, 0x00, 0x00, 0x02],
    ] {
        let mut body = INET_BLOCK.to_vec();
        body.extend_from_slice(tail);
        assert_eq!(
            refused(&v2(0x21, 0x11, &body)),
            Error::V2TlvOverrun,
            "{tail:?}"
        );
        let mut body = inet6_block();
        body.extend_from_slice(tail);
        assert_eq!(
            refused(&v2(0x21, 0x21, &body)),
            Error::V2TlvOverrun,
            "{tail:?}"
        );
    }
    assert_eq!(Error::V2TlvOverrun.version(), Some(Version::V2));
}

// --- v2: what is refused ------------------------------------------------------

#[test]
fn v2_fixed_part_refusals_come_with_its_16_bytes() {
    let cases: [(u8, u8, u16, Error); 12] = [
        (0x11, 0x11, 12, Error::V2Version(1)),
        (0x31, 0x11, 12, Error::V2Version(3)),
        (0x01, 0x11, 12, Error::V2Version(0)),
        (0x22, 0x11, 12, Error::V2Command(2)),
        (0x23, 0x1f, 12, Error::V2Command(3)),
        (0x2f, 0x11, 12, Error::V2Command(15)),
        // PROXY over AF_UNSPEC or AF_UNIX: Envoy refuses both.
        (0x21, 0x00, 0, Error::V2Family(0)),
        (0x21, 0x31, 216, Error::V2Family(3)),
        (0x21, 0x41, 12, Error::V2Family(4)),
        (0x21, 0x10, 12, Error::V2Transport(0)),
        (0x21, 0x13, 12, Error::V2Transport(3)),
        (
            0x21,
            0x11,
            11,
            Error::V2AddressesTooShort { family: 1, len: 11 },
        ),
    ];
    for (ver_cmd, fam, len, want) in cases {
        let mut fixed = V2_SIGNATURE.to_vec();
        fixed.extend_from_slice(&[ver_cmd, fam]);
        fixed.extend_from_slice(&len.to_be_bytes());
        for n in 0..16 {
            assert_eq!(parse(&fixed[..n]), Ok(Parsed::Incomplete));
        }
        assert_eq!(parse(&fixed), Err(want.clone()), "{ver_cmd:#x} {fam:#x}");
        assert_eq!(header_len(&fixed), Err(want.clone()));
        assert_eq!(want.version(), Some(Version::V2));
    }
    assert_eq!(
        refused(&v2(0x21, 0x21, &inet6_block()[..35])),
        Error::V2AddressesTooShort { family: 2, len: 35 }
    );
    // Envoy's v2ShortV4: an AF_INET6 family byte with a 4-byte length.
    assert_eq!(
        refused(&v2(0x21, 0x21, &[0, 8, 0, 2])),
        Error::V2AddressesTooShort { family: 2, len: 4 }
    );
    // Envoy's V2AF_UNIX, a PROXY AF_UNIX with a short block.
    assert_eq!(refused(&v2(0x21, 0x32, &[0; 20])), Error::V2Family(3));
}

#[test]
fn v2_addresses_must_be_unicast() {
    for (src, dst) in [
        ([0, 0, 0, 0], [10, 0, 0, 1]),
        ([10, 0, 0, 1], [255, 255, 255, 255]),
        ([224, 0, 0, 5], [10, 0, 0, 1]),
    ] {
        let mut body = src.to_vec();
        body.extend_from_slice(&dst);
        body.extend_from_slice(&[0, 1, 0, 2]);
        let e = refused(&v2(0x21, 0x11, &body));
        assert!(
            matches!(
                e,
                Error::NotUnicast {
                    version: Version::V2,
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(e.version(), Some(Version::V2));
    }
    let mut body = [0u8; 36];
    body[15] = 1;
    assert_eq!(
        refused(&v2(0x21, 0x21, &body)),
        Error::NotUnicast {
            version: Version::V2,
            addr: IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        }
    );
    body[16] = 0xff;
    body[31] = 1;
    body[0] = 0x20;
    assert!(matches!(
        refused(&v2(0x21, 0x21, &body)),
        Error::NotUnicast { .. }
    ));
}

#[test]
fn v2_a_lying_length_waits_for_its_bytes() {
    // The length says 1000: the header is not over after the addresses.
    let mut buf = V2_SIGNATURE.to_vec();
    buf.extend_from_slice(&[0x21, 0x11, 0x03, 0xe8]);
    buf.extend_from_slice(&INET_BLOCK);
    buf.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
    assert_eq!(parse(&buf), Ok(Parsed::Incomplete));
    assert_eq!(header_len(&buf), Ok(Some(1016)));
    // And when the bytes come, they are TLVs: the payload was not.
    buf.resize(1016, 0);
    assert_eq!(refused(&buf), Error::V2TlvOverrun);
    // The largest header there is: 65535 bytes after the fixed part.
    let mut body = INET_BLOCK.to_vec();
    body.extend_from_slice(&[0xee, 0xff, 0xf0]);
    body.resize(65535, 7);
    let (h, n) = complete(&v2(0x21, 0x11, &body));
    assert_eq!(
        (n, h.tlvs.len(), h.tlvs[0].value.len()),
        (V2_MAX_LEN, 1, 65520)
    );
}
