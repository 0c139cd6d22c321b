//! Shared helpers, then what spans both versions: detection, incremental feeding (every prefix Incomplete, payload left alone), encodings byte for byte and encode → parse round trips, errors' versions; v1 and v2 each in their own module.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};

use super::*;

mod v1;
mod v2;

pub(super) fn sa(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

pub(super) fn pair(src: &str, dst: &str) -> Option<(SocketAddr, SocketAddr)> {
    Some((sa(src), sa(dst)))
}

/// A whole header; asserts it parsed and returns it with its length.
pub(super) fn complete(buf: &[u8]) -> (Header, usize) {
    match parse(buf) {
        Ok(Parsed::Complete { header, consumed }) => (header, consumed),
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(buf)),
    }
}

pub(super) fn refused(buf: &[u8]) -> Error {
    match parse(buf) {
        Err(e) => e,
        other => panic!("{:?} accepted: {other:?}", String::from_utf8_lossy(buf)),
    }
}

/// A v2 header: signature, the two bytes, the length of `body`, `body`.
pub(super) fn v2(ver_cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
    let mut h = V2_SIGNATURE.to_vec();
    h.extend_from_slice(&[ver_cmd, fam]);
    h.extend_from_slice(&u16::try_from(body.len()).unwrap().to_be_bytes());
    h.extend_from_slice(body);
    h
}

/// An IPv4 address block: 1.2.3.4:773 → 0.1.1.2:2 (Envoy's v2Basic).
pub(super) const INET_BLOCK: [u8; 12] = [1, 2, 3, 4, 0, 1, 1, 2, 3, 5, 0, 2];

/// An IPv6 address block: [1:2:3::4]:8 → [1:100:2::3]:2 (Envoy's v2BasicV6).
pub(super) fn inet6_block() -> Vec<u8> {
    let mut b = Ipv6Addr::new(1, 2, 3, 0, 0, 0, 0, 4).octets().to_vec();
    b.extend_from_slice(&Ipv6Addr::new(1, 0x100, 2, 0, 0, 0, 0, 3).octets());
    b.extend_from_slice(&[0, 8, 0, 2]);
    b
}

pub(super) fn v1_proxy(addresses: Option<(SocketAddr, SocketAddr)>) -> Header {
    Header {
        version: Version::V1,
        command: Command::Proxy,
        transport: if addresses.is_some() {
            Transport::Stream
        } else {
            Transport::Unspec
        },
        addresses,
        tlvs: vec![],
    }
}

// --- detect ------------------------------------------------------------

#[test]
fn detect_tells_the_versions_apart_from_their_first_bytes() {
    for n in 0..6 {
        assert_eq!(detect(&b"PROXY "[..n]), Detect::NeedMore, "{n}");
    }
    for n in 0..12 {
        assert_eq!(detect(&V2_SIGNATURE[..n]), Detect::NeedMore, "{n}");
    }
    assert_eq!(detect(b"PROXY "), Detect::V1);
    assert_eq!(detect(b"PROXY TCP4"), Detect::V1);
    assert_eq!(detect(&V2_SIGNATURE), Detect::V2);
    assert_eq!(detect(&v2(0x21, 0x11, &INET_BLOCK)), Detect::V2);
    for not in [
        &b"GET / HTTP/1.1\r\n"[..],
        b"proxy ",
        b"PROXX",
        b"PROXY\r\n",
        b"PROXY\t",
        b"\r\n\r\n\0\r\nQUIX",
        b"\r\r",
        b"\x16\x03\x01",
        b"PRI * HTTP/2.0",
    ] {
        assert_eq!(detect(not), Detect::NotProxy, "{not:?}");
        assert_eq!(parse(not), Err(Error::NotProxy));
        assert_eq!(header_len(not), Err(Error::NotProxy));
        assert_eq!(Error::NotProxy.version(), None);
    }
}

// --- feeding and lengths -----------------------------------------------------

/// Valid headers of every form, each followed by payload.
fn valid_headers() -> Vec<Vec<u8>> {
    let mut tlvs = INET_BLOCK.to_vec();
    tlvs.extend_from_slice(&[TLV_TYPE_ALPN, 0, 2, b'h', b'2', TLV_TYPE_NOOP, 0, 0]);
    let f = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
    let mut all = vec![
        b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n".to_vec(),
        b"PROXY TCP6 1:2:3::4 5:6::7:8 65535 1234\r\n".to_vec(),
        b"PROXY UNKNOWN\r\n".to_vec(),
        format!("PROXY UNKNOWN {f} {f} 65535 65535\r\n").into_bytes(),
        v2(0x21, 0x11, &INET_BLOCK),
        v2(0x21, 0x21, &inet6_block()),
        v2(0x21, 0x12, &tlvs),
        v2(0x20, 0x00, &[]),
        v2(0x20, 0x31, &[0; 216]),
    ];
    for h in &mut all {
        h.extend_from_slice(b"\r\n\r\n\0\r\nQUIT\nPROXY payload");
    }
    all
}

#[test]
fn every_prefix_of_a_valid_header_is_incomplete() {
    for buf in valid_headers() {
        let (want, n) = complete(&buf);
        for cut in 0..n {
            assert_eq!(
                parse(&buf[..cut]),
                Ok(Parsed::Incomplete),
                "{buf:?} at {cut}"
            );
            let len = header_len(&buf[..cut]).unwrap();
            assert!(len.is_none() || len == Some(n), "{len:?} at {cut}");
            assert_ne!(detect(&buf[..cut]), Detect::NotProxy);
        }
        // Exactly the header, and the header with any payload after it.
        for end in n..=buf.len() {
            assert_eq!(complete(&buf[..end]), (want.clone(), n));
        }
        assert_eq!(header_len(&buf[..n]), Ok(Some(n)));
    }
}

#[test]
fn byte_by_byte_feeding_completes_once_at_the_headers_end() {
    for buf in valid_headers() {
        let mut fed = Vec::new();
        let mut done = None;
        for &b in &buf {
            fed.push(b);
            if let Ok(Parsed::Complete { consumed, .. }) = parse(&fed) {
                done = Some((fed.len(), consumed));
                break;
            }
        }
        let (at, consumed) = done.unwrap();
        assert_eq!(at, consumed);
    }
}

// --- encoding ----------------------------------------------------------------

#[test]
fn encodings_byte_for_byte() {
    let mut out = Vec::new();
    encode_v1(pair("192.168.0.1:56324", "192.168.0.11:443"), &mut out);
    assert_eq!(out, b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n");
    out.clear();
    encode_v1(None, &mut out);
    assert_eq!(out, b"PROXY UNKNOWN\r\n");
    out.clear();
    encode_v1(pair("[1:2:3::4]:1", "[::1]:2"), &mut out);
    assert_eq!(out, b"PROXY TCP6 1:2:3::4 ::1 1 2\r\n");
    out.clear();
    encode_v2(
        Command::Proxy,
        pair("1.2.3.4:773", "0.1.1.2:2"),
        &[],
        &mut out,
    );
    assert_eq!(out, v2(0x21, 0x11, &INET_BLOCK));
    out.clear();
    encode_v2(
        Command::Proxy,
        pair("[1:2:3::4]:8", "[1:100:2::3]:2"),
        &[],
        &mut out,
    );
    assert_eq!(out, v2(0x21, 0x21, &inet6_block()));
    out.clear();
    encode_v2(Command::Local, None, &[], &mut out);
    assert_eq!(out, v2(0x20, 0x00, &[]));
    // Appends: what was in `out` stays.
    let mut out = b"x".to_vec();
    let tlv = Tlv {
        kind: TLV_TYPE_AUTHORITY,
        value: b"a.b".to_vec(),
    };
    encode_v2(
        Command::Proxy,
        pair("1.2.3.4:773", "0.1.1.2:2"),
        &[tlv],
        &mut out,
    );
    let mut body = INET_BLOCK.to_vec();
    body.extend_from_slice(&[2, 0, 3, b'a', b'.', b'b']);
    assert_eq!(out[0], b'x');
    assert_eq!(out[1..], v2(0x21, 0x11, &body));
}

#[test]
fn a_mixed_pair_is_written_as_ipv6_with_the_v4_side_mapped() {
    let mixed = pair("10.0.0.1:1000", "[2001:db8::1]:443");
    let mapped = pair("[::ffff:10.0.0.1]:1000", "[2001:db8::1]:443");
    let mut out = Vec::new();
    encode_v1(mixed, &mut out);
    assert_eq!(out, b"PROXY TCP6 ::ffff:10.0.0.1 2001:db8::1 1000 443\r\n");
    assert_eq!(complete(&out).0.addresses, mapped);
    out.clear();
    encode_v2(
        Command::Proxy,
        pair("[2001:db8::1]:443", "10.0.0.1:1000"),
        &[],
        &mut out,
    );
    assert_eq!(&out[12..14], &[0x21, 0x21]);
    assert_eq!(
        complete(&out).0.addresses,
        pair("[2001:db8::1]:443", "[::ffff:10.0.0.1]:1000")
    );
}

#[test]
fn round_trips_for_many_address_pairs() {
    let v4s = [
        "1.2.3.4",
        "10.0.0.1",
        "127.0.0.1",
        "192.168.255.254",
        "240.1.2.3",
        "0.0.0.1",
    ];
    let v6s = [
        "::1",
        "2001:db8::1",
        "fe80::1:2:3:4",
        "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        "::ffff:1.2.3.4",
        "1:0:0:1::",
        "64:ff9b::a00:1",
    ];
    let ports = [0u16, 1, 80, 443, 8080, 65535];
    let mut addrs = Vec::new();
    for (i, ip) in v4s.iter().chain(&v6s).enumerate() {
        let ip: IpAddr = ip.parse().unwrap();
        addrs.push(SocketAddr::new(ip, ports[i % ports.len()]));
    }
    let tlvs = [
        Tlv {
            kind: TLV_TYPE_UNIQUE_ID,
            value: (0..128).collect(),
        },
        Tlv {
            kind: TLV_TYPE_NETNS,
            value: vec![],
        },
    ];
    let map = |a: SocketAddr, other: SocketAddr| match (a, other) {
        (SocketAddr::V4(v4), SocketAddr::V6(_)) => {
            SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port())
        }
        _ => a,
    };
    let mut count = 0;
    for &src in &addrs {
        for &dst in &addrs {
            let want = Some((map(src, dst), map(dst, src)));
            let mut out = Vec::new();
            encode_v1(Some((src, dst)), &mut out);
            let (h, n) = complete(&out);
            assert_eq!((h, n), (v1_proxy(want), out.len()));
            assert!(out.len() <= 104);

            for tlvs in [&tlvs[..], &[]] {
                out.clear();
                encode_v2(Command::Proxy, Some((src, dst)), tlvs, &mut out);
                let (h, n) = complete(&out);
                assert_eq!(n, out.len());
                assert_eq!(
                    h,
                    Header {
                        version: Version::V2,
                        command: Command::Proxy,
                        transport: Transport::Stream,
                        addresses: want,
                        tlvs: tlvs.to_vec(),
                    }
                );
                out.clear();
                encode_v2(Command::Local, Some((src, dst)), tlvs, &mut out);
                let (h, n) = complete(&out);
                assert_eq!(
                    (h.command, h.addresses, h.tlvs, n),
                    (Command::Local, None, vec![], out.len())
                );
            }
            count += 1;
        }
    }
    assert_eq!(count, 169);
    // Scope ids are not written (neither version has a place for them).
    let scoped = SocketAddr::V6(SocketAddrV6::new("fe80::1".parse().unwrap(), 9, 7, 3));
    let mut out = Vec::new();
    encode_v1(Some((scoped, scoped)), &mut out);
    assert_eq!(out, b"PROXY TCP6 fe80::1 fe80::1 9 9\r\n");
}

#[test]
fn tlvs_past_the_16_bit_length_are_left_out() {
    let big = |n: usize| Tlv {
        kind: 0xe1,
        value: vec![1; n],
    };
    let fits = [big(40000), big(25480), big(1)];
    let mut out = Vec::new();
    encode_v2(
        Command::Proxy,
        pair("1.2.3.4:1", "5.6.7.8:2"),
        &fits,
        &mut out,
    );
    // 12 + 40003 + 25483 = 65498; the 1-byte one (4 bytes) would still
    // fit too: 65502.
    let (h, n) = complete(&out);
    assert_eq!((h.tlvs.len(), n), (3, 16 + 65502));
    let over = [big(40000), big(25521), big(1)];
    out.clear();
    encode_v2(
        Command::Proxy,
        pair("1.2.3.4:1", "5.6.7.8:2"),
        &over,
        &mut out,
    );
    let (h, n) = complete(&out);
    assert_eq!((h.tlvs.len(), n), (1, 16 + 12 + 40003));
    out.clear();
    encode_v2(
        Command::Proxy,
        pair("1.2.3.4:1", "5.6.7.8:2"),
        &[big(70000)],
        &mut out,
    );
    assert_eq!(complete(&out).0.tlvs, []);
}

#[test]
fn errors_say_which_version_failed() {
    let v1_errors = [
        Error::V1Syntax("x"),
        Error::V1BadAddress,
        Error::V1FamilyMismatch,
        Error::BadPort,
    ];
    for e in v1_errors {
        assert_eq!(e.version(), Some(Version::V1));
        assert!(e.to_string().starts_with("PROXY v1: "), "{e}");
    }
    let e = Error::NotUnicast {
        version: Version::V2,
        addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    };
    assert_eq!(e.to_string(), "PROXY v2: 0.0.0.0 is not a unicast address");
    assert_eq!(
        Error::V2AddressesTooShort { family: 1, len: 11 }.to_string(),
        "PROXY v2: length 11 is shorter than family 1's address block"
    );
}
