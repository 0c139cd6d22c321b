//! v1 lines: the spec's forms, and every line Envoy refuses (fields, addresses, ports, unicast, length, CRLF).

use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV6};

use super::*;

#[test]
fn v1_tcp4_gives_both_addresses_and_leaves_the_payload() {
    let buf = b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\nGET / HTTP/1.1\r\n\r\n";
    let (h, n) = complete(buf);
    assert_eq!(h, v1_proxy(pair("192.168.0.1:56324", "192.168.0.11:443")));
    assert_eq!(&buf[n..], b"GET / HTTP/1.1\r\n\r\n");
    assert_eq!(header_len(buf), Ok(Some(n)));
}

#[test]
fn v1_tcp6_and_envoys_own_examples() {
    let (h, n) = complete(b"PROXY TCP6 1:2:3::4 5:6::7:8 65535 1234\r\nmore data");
    assert_eq!(n, 41);
    assert_eq!(h, v1_proxy(pair("[1:2:3::4]:65535", "[5:6::7:8]:1234")));
    let (h, _) = complete(b"PROXY TCP4 1.2.3.4 253.253.253.253 65535 1234\r\nmore data");
    assert_eq!(h, v1_proxy(pair("1.2.3.4:65535", "253.253.253.253:1234")));
    // The longest TCP6 line the spec lists: 104 bytes.
    let f = "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
    let line = format!("PROXY TCP6 {f} {f} 65535 65535\r\n");
    assert_eq!(line.len(), 104);
    let (h, n) = complete(line.as_bytes());
    assert_eq!(n, 104);
    assert_eq!(h.addresses.unwrap().0.port(), 65535);
}

#[test]
fn v1_unknown_keeps_the_connections_addresses_whatever_follows() {
    assert_eq!(complete(b"PROXY UNKNOWN\r\n"), (v1_proxy(None), 15));
    // The spec's worst case, 107 bytes: fields after UNKNOWN are ignored.
    let f = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
    let line = format!("PROXY UNKNOWN {f} {f} 65535 65535\r\n");
    assert_eq!(line.len(), V1_MAX_LEN);
    assert_eq!(complete(line.as_bytes()), (v1_proxy(None), 107));
    for ok in [
        &b"PROXY UNKNOWN garbage\r\n"[..],
        b"PROXY UNKNOWN  two  spaces  \r\n",
        b"PROXY UNKNOWN \xff\xfe\0\r\n",
        b"PROXY UNKNOWN \n\r\n",
        b"PROXY UNKNOWN\t \r\n",
    ] {
        assert_eq!(complete(ok).0, v1_proxy(None), "{ok:?}");
    }
    // UNKNOWN is a whole field: anything glued to it is another protocol.
    for bad in [
        &b"PROXY UNKNOWNX\r\n"[..],
        b"PROXY UNKNOWN\0\r\n",
        b"PROXY unknown\r\n",
    ] {
        assert!(matches!(refused(bad), Error::V1Syntax(_)), "{bad:?}");
    }
}

#[test]
fn v1_trailing_whitespace_before_the_crlf_is_dropped_as_envoy_does() {
    for ok in [
        &b"PROXY TCP4 1.2.3.4 5.6.7.8 80 443 \r\n"[..],
        b"PROXY TCP4 1.2.3.4 5.6.7.8 80 443\t\x0b\x0c\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 80 443\r\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 80 443\n\r\n",
    ] {
        let (h, n) = complete(ok);
        assert_eq!(h, v1_proxy(pair("1.2.3.4:80", "5.6.7.8:443")), "{ok:?}");
        assert_eq!(n, ok.len());
    }
}

// --- v1: what is refused ----------------------------------------------------

#[test]
fn v1_fields_are_separated_by_exactly_one_space() {
    for bad in [
        &b"PROXY  TCP4 1.2.3.4 5.6.7.8 80 443\r\n"[..],
        b"PROXY TCP4  1.2.3.4 5.6.7.8 80 443\r\n",
        b"PROXY TCP4 1.2.3.4  5.6.7.8 80 443\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8  80 443\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 80  443\r\n",
        b"PROXY TCP4\t1.2.3.4 5.6.7.8 80 443\r\n",
        b"PROXY TCP4 1.2.3.4\t5.6.7.8 80 443\r\n",
    ] {
        let e = refused(bad);
        assert!(
            matches!(e, Error::V1Syntax(_) | Error::V1BadAddress | Error::BadPort),
            "{bad:?}: {e:?}"
        );
        assert_eq!(e.version(), Some(Version::V1));
    }
}

#[test]
fn v1_protocol_and_field_count() {
    for bad in [
        &b"PROXY \r\n"[..],
        b"PROXY TCP4\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 80\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 80 443 x\r\n",
        b"PROXY TCP4 1.2.3.4 5.6.7.8 80 443 \t x\r\n",
        b"PROXY tcp4 1.2.3.4 5.6.7.8 80 443\r\n",
        b"PROXY TCP5 1.2.3.4 5.6.7.8 80 443\r\n",
        b"PROXY UDP4 1.2.3.4 5.6.7.8 80 443\r\n",
        b"PROXY TCP 1.2.3.4 5.6.7.8 80 443\r\n",
        b"PROXY FOO\r\n",
    ] {
        let e = refused(bad);
        assert!(matches!(e, Error::V1Syntax(_)), "{bad:?}: {e:?}");
        assert!(!e.to_string().is_empty());
    }
}

#[test]
fn v1_addresses_are_strict_text_of_the_protocols_family() {
    let line = |proto: &str, src: &str| format!("PROXY {proto} {src} 10.0.0.1 80 443\r\n");
    let line6 = |src: &str| format!("PROXY TCP6 {src} ::2 80 443\r\n");
    for bad in [
        "1.2.3",
        "1.2.3.4.5",
        "1.2.3.256",
        "01.2.3.4",
        "1.2.3.04",
        "0x1.2.3.4",
        "1.2.3.4/8",
        "localhost",
        "1.2.3.4:80",
        "",
    ] {
        assert_eq!(
            refused(line("TCP4", bad).as_bytes()),
            Error::V1BadAddress,
            "{bad}"
        );
    }
    for bad in [
        "1::2::3",
        "12345::1",
        ":::1",
        "g::1",
        "[::1]",
        "::1%",
        "fe80::1%eth0",
        "::1%1x",
        "::1%4294967296",
    ] {
        assert_eq!(refused(line6(bad).as_bytes()), Error::V1BadAddress, "{bad}");
    }
    assert_eq!(
        refused(line("TCP4", "::1").as_bytes()),
        Error::V1FamilyMismatch
    );
    assert_eq!(
        refused(line6("1.2.3.4").as_bytes()),
        Error::V1FamilyMismatch
    );
    assert_eq!(
        refused(b"PROXY TCP4 1.2.3.4 ::1 80 443\r\n"),
        Error::V1FamilyMismatch
    );
    assert_eq!(
        refused(b"PROXY TCP6 ::1 1.2.3.4 80 443\r\n"),
        Error::V1FamilyMismatch
    );
    assert_eq!(
        refused(b"PROXY TCP4 1.2.\xff.4 5.6.7.8 80 443\r\n"),
        Error::V1BadAddress
    );
}

#[test]
fn v1_tcp6_takes_what_getaddrinfo_takes() {
    let src = |text: &str| {
        let line = format!("PROXY TCP6 {text} ::2 80 443\r\n");
        complete(line.as_bytes()).0.addresses.unwrap().0
    };
    // A dotted IPv4 tail and v4-mapped forms stay IPv6, as in Envoy.
    assert_eq!(src("::ffff:1.2.3.4"), sa("[::ffff:1.2.3.4]:80"));
    assert_eq!(src("1:2:3:4:5:6:7.8.9.10"), sa("[1:2:3:4:5:6:708:90a]:80"));
    assert_eq!(src("0001:02::0003"), sa("[1:2::3]:80"));
    assert_eq!(src("FE80::AB"), sa("[fe80::ab]:80"));
    // A numeric scope id is kept; a name (host-dependent) is not taken.
    assert_eq!(
        src("fe80::1%2"),
        SocketAddr::V6(SocketAddrV6::new("fe80::1".parse().unwrap(), 80, 0, 2))
    );
    assert_eq!(
        src("fe80::1%4294967295"),
        SocketAddr::V6(SocketAddrV6::new(
            "fe80::1".parse().unwrap(),
            80,
            0,
            u32::MAX
        ))
    );
}

#[test]
fn v1_ports_as_absl_simpleatoi_reads_them() {
    let ports = |sport: &str, dport: &str| {
        let line = format!("PROXY TCP4 1.2.3.4 5.6.7.8 {sport} {dport}\r\n");
        parse(line.as_bytes()).map(|p| match p {
            Parsed::Complete { header, .. } => {
                let (s, d) = header.addresses.unwrap();
                (s.port(), d.port())
            }
            Parsed::Incomplete => panic!("incomplete"),
        })
    };
    assert_eq!(ports("0", "65535"), Ok((0, 65535)));
    // Envoy takes leading zeros, a '+' and whitespace around the digits.
    assert_eq!(ports("080", "0000000000000000000443"), Ok((80, 443)));
    assert_eq!(ports("+80", "\t443"), Ok((80, 443)));
    assert_eq!(ports("80\x0b", "443\t"), Ok((80, 443)));
    for bad in [
        "65536",
        "99999999999999999999999",
        "-1",
        "-0",
        "+",
        "++1",
        "+-1",
        "0x50",
        "8O",
        "1.5",
        "１",
        "+\t1",
        "1\x002",
    ] {
        assert_eq!(ports(bad, "443"), Err(Error::BadPort), "{bad:?}");
        assert_eq!(ports("80", bad), Err(Error::BadPort), "{bad:?}");
    }
    // A source port of only whitespace is a field with no digits; as the
    // destination port it would be trimmed off the line's end with it.
    assert_eq!(ports("\t", "443"), Err(Error::BadPort));
    assert!(matches!(ports("80", "\t"), Err(Error::V1Syntax(_))));
    assert_eq!(Error::BadPort.version(), Some(Version::V1));
}

#[test]
fn v1_addresses_must_be_unicast() {
    for (src, dst) in [
        ("0.0.0.0", "10.0.0.1"),
        ("10.0.0.1", "0.0.0.0"),
        ("255.255.255.255", "10.0.0.1"),
        ("224.0.0.1", "10.0.0.1"),
        ("239.255.255.255", "10.0.0.1"),
    ] {
        let line = format!("PROXY TCP4 {src} {dst} 1 2\r\n");
        let e = refused(line.as_bytes());
        assert!(
            matches!(
                e,
                Error::NotUnicast {
                    version: Version::V1,
                    ..
                }
            ),
            "{line}"
        );
        assert_eq!(e.version(), Some(Version::V1));
    }
    // The spec's own longest TCP4 example is all broadcast: Envoy refuses it.
    let e = refused(b"PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n");
    assert_eq!(
        e,
        Error::NotUnicast {
            version: Version::V1,
            addr: IpAddr::V4(Ipv4Addr::BROADCAST)
        }
    );
    // So is the spec's longest TCP6 example: ffff:... is multicast.
    let f = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
    let line = format!("PROXY TCP6 {f} {f} 65535 65535\r\n");
    assert!(matches!(refused(line.as_bytes()), Error::NotUnicast { .. }));
    for (src, dst) in [("::", "::1"), ("::1", "ff02::1"), ("ff00::", "::1")] {
        let line = format!("PROXY TCP6 {src} {dst} 1 2\r\n");
        assert!(
            matches!(refused(line.as_bytes()), Error::NotUnicast { .. }),
            "{line}"
        );
    }
    // Class E and loopback are unicast; so is a v4-mapped multicast (IPv6,
    // and not ff00::/8).
    for line in [
        &b"PROXY TCP4 240.0.0.1 127.0.0.1 1 2\r\n"[..],
        b"PROXY TCP4 223.255.255.255 0.0.0.1 1 2\r\n",
        b"PROXY TCP6 ::ffff:224.0.0.1 ::ffff:0.0.0.0 1 2\r\n",
    ] {
        complete(line);
    }
}

#[test]
fn v1_line_length_is_at_most_107_bytes_with_its_crlf() {
    let unknown = |len: usize| {
        let mut l = b"PROXY UNKNOWN ".to_vec();
        l.resize(len - 2, b'x');
        l.extend_from_slice(b"\r\n");
        l
    };
    assert_eq!(complete(&unknown(107)).1, 107);
    // Envoy's limit is 108 (MAX_PROXY_PROTO_LEN_V1); we keep the spec's.
    assert_eq!(refused(&unknown(108)), Error::V1TooLong);
    assert_eq!(refused(&unknown(200)), Error::V1TooLong);
    // No CRLF: Incomplete up to 106 bytes, an error from 107 on (a CRLF
    // after them would make a line over the limit).
    let mut open = b"PROXY UNKNOWN ".to_vec();
    open.resize(106, b'x');
    assert_eq!(parse(&open), Ok(Parsed::Incomplete));
    assert_eq!(header_len(&open), Ok(None));
    open[105] = b'\r';
    assert_eq!(parse(&open), Ok(Parsed::Incomplete));
    open.push(b'x');
    assert_eq!(refused(&open), Error::V1TooLong);
    assert_eq!(header_len(&open), Err(Error::V1TooLong));
    // Envoy had not settled on v1 then: not counted as a v1 error.
    assert_eq!(Error::V1TooLong.version(), None);
}

#[test]
fn v1_needs_a_crlf_not_a_lone_cr_or_lf() {
    assert_eq!(parse(b"PROXY UNKNOWN\n"), Ok(Parsed::Incomplete));
    assert_eq!(parse(b"PROXY UNKNOWN\r"), Ok(Parsed::Incomplete));
    assert_eq!(parse(b"PROXY UNKNOWN\n\n\n"), Ok(Parsed::Incomplete));
    // A lone LF stays inside the line, glued to its field.
    assert!(matches!(
        refused(b"PROXY UNKNOWN\nGET / HTTP/1.1\r\n"),
        Error::V1Syntax(_)
    ));
    assert_eq!(
        refused(b"PROXY TCP4 1.2.3.4\n 5.6.7.8 80 443\r\n"),
        Error::V1BadAddress
    );
    // The first CRLF ends the line; what follows is payload.
    let (h, n) = complete(b"PROXY UNKNOWN\r\nPROXY TCP4 x\r\n");
    assert_eq!((h, n), (v1_proxy(None), 15));
}
