//! PROXY protocol headers (`proxywire`): arbitrary bytes parse without panicking, and a header that parses ends at `consumed` (within the bytes, never earlier: every shorter prefix is Incomplete), agrees with `detect` and `header_len`, and re-encoded (v2: command, addresses, TLVs; v1: addresses) parses back the same; addresses and TLVs drawn from the same bytes, encoded in both versions, parse back as written (a mixed pair v4-mapped) or are refused only for not being unicast.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};

use libfuzzer_sys::fuzz_target;
use proxywire::{
    detect, encode_v1, encode_v2, header_len, parse, Command, Detect, Error, Header, Parsed, Tlv,
    Transport, Version,
};

fuzz_target!(|data: &[u8]| {
    arbitrary_bytes(data);
    round_trip(data);
});

fn arbitrary_bytes(data: &[u8]) {
    let parsed = parse(data);
    let len = header_len(data);
    let detected = detect(data);
    assert_eq!(
        parsed == Err(Error::NotProxy),
        detected == Detect::NotProxy,
        "{parsed:?} {detected:?}"
    );
    match &parsed {
        Ok(Parsed::Complete { header, consumed }) => {
            let consumed = *consumed;
            assert!(consumed <= data.len());
            assert_eq!(len, Ok(Some(consumed)));
            let want = match header.version {
                Version::V1 => Detect::V1,
                Version::V2 => Detect::V2,
            };
            assert_eq!(detected, want);
            for cut in 0..consumed {
                assert_eq!(parse(&data[..cut]), Ok(Parsed::Incomplete), "at {cut}");
            }
            assert_eq!(parse(&data[..consumed]), parsed);
            reencode(header);
        }
        Ok(Parsed::Incomplete) => {
            assert_ne!(detected, Detect::NotProxy);
            match len {
                Ok(None) => {}
                Ok(Some(n)) => assert!(n > data.len(), "{n} of {}", data.len()),
                Err(e) => panic!("header_len {e:?} where parse waits"),
            }
        }
        Err(e) => {
            // header_len refuses only what parse refuses first; where it
            // knows the length, parse refused the whole header.
            match len {
                Err(le) => assert_eq!(&le, e),
                Ok(Some(n)) => assert!(n <= data.len()),
                Ok(None) => panic!("parse {e:?} where header_len waits"),
            }
        }
    }
}

/// A parsed header written again parses to itself, but for what the
/// encoders do not carry: v2's transport (STREAM with addresses, UNSPEC
/// without) and v1's scope ids.
fn reencode(header: &Header) {
    let mut out = Vec::new();
    let mut want = header.clone();
    match header.version {
        Version::V2 => {
            encode_v2(header.command, header.addresses, &header.tlvs, &mut out);
            want.transport = match header.command {
                Command::Proxy => Transport::Stream,
                Command::Local => Transport::Unspec,
            };
        }
        Version::V1 => {
            encode_v1(header.addresses, &mut out);
            want.addresses = header.addresses.map(|(s, d)| (unscoped(s), unscoped(d)));
        }
    }
    assert_eq!(
        parse(&out),
        Ok(Parsed::Complete {
            header: want,
            consumed: out.len()
        })
    );
}

fn unscoped(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V6(a) => SocketAddr::V6(SocketAddrV6::new(*a.ip(), a.port(), 0, 0)),
        a => a,
    }
}

/// `mode` (the first byte): bit 0 the source is IPv6, bit 1 the
/// destination, bit 2 no addresses, bit 3 LOCAL; then the addresses
/// (4 or 16 bytes and a port each, zeros where the bytes run out), then
/// TLVs (a type byte, a length byte, up to that many value bytes).
fn round_trip(data: &[u8]) {
    let Some((&mode, mut rest)) = data.split_first() else {
        return;
    };
    let src = take_addr(mode & 1 != 0, &mut rest);
    let dst = take_addr(mode & 2 != 0, &mut rest);
    let addresses = (mode & 4 == 0).then_some((src, dst));
    let command = if mode & 8 == 0 {
        Command::Proxy
    } else {
        Command::Local
    };
    // TLVs at most 1.5 times the bytes they come from: 40000 keep the
    // header under v2's 65535-byte length, so the encoder drops none.
    rest = &rest[..rest.len().min(40_000)];
    let mut tlvs = Vec::new();
    while let [kind, len, tail @ ..] = rest {
        let (value, after) = tail.split_at(usize::from(*len).min(tail.len()));
        tlvs.push(Tlv {
            kind: *kind,
            value: value.to_vec(),
        });
        rest = after;
    }
    // What both versions write for a mixed pair: the v4 side mapped.
    let written = addresses.map(|(s, d)| match (s, d) {
        (SocketAddr::V4(_), SocketAddr::V4(_)) | (SocketAddr::V6(_), SocketAddr::V6(_)) => (s, d),
        _ => (mapped(s), mapped(d)),
    });
    let refusal = |version| {
        let (s, d) = written?;
        [s.ip(), d.ip()]
            .into_iter()
            .find(|ip| !unicast(*ip))
            .map(|addr| Error::NotUnicast { version, addr })
    };

    let mut out = Vec::new();
    encode_v2(command, addresses, &tlvs, &mut out);
    let want = match (command, refusal(Version::V2)) {
        (Command::Local, _) => Ok(Header {
            version: Version::V2,
            command,
            transport: if addresses.is_some() {
                Transport::Stream
            } else {
                Transport::Unspec
            },
            addresses: None,
            tlvs: vec![],
        }),
        (Command::Proxy, Some(e)) => Err(e),
        // PROXY without addresses is AF_UNSPEC, which Envoy refuses.
        (Command::Proxy, None) if written.is_none() => Err(Error::V2Family(0)),
        (Command::Proxy, None) => Ok(Header {
            version: Version::V2,
            command,
            transport: Transport::Stream,
            addresses: written,
            tlvs,
        }),
    };
    assert_eq!(
        parse(&out),
        want.map(|header| Parsed::Complete {
            header,
            consumed: out.len()
        })
    );

    out.clear();
    encode_v1(addresses, &mut out);
    assert!(out.len() <= proxywire::V1_MAX_LEN);
    let want = match refusal(Version::V1) {
        Some(e) => Err(e),
        None => Ok(Parsed::Complete {
            header: Header {
                version: Version::V1,
                command: Command::Proxy,
                transport: if written.is_some() {
                    Transport::Stream
                } else {
                    Transport::Unspec
                },
                addresses: written,
                tlvs: vec![],
            },
            consumed: out.len(),
        }),
    };
    assert_eq!(parse(&out), want);
}

fn take_addr(v6: bool, rest: &mut &[u8]) -> SocketAddr {
    let mut b = [0u8; 18];
    let n = if v6 { 18 } else { 6 };
    let got = rest.len().min(n);
    b[..got].copy_from_slice(&rest[..got]);
    *rest = &rest[got..];
    if v6 {
        let mut ip = [0u8; 16];
        ip.copy_from_slice(&b[..16]);
        SocketAddr::new(
            IpAddr::V6(Ipv6Addr::from(ip)),
            u16::from_be_bytes([b[16], b[17]]),
        )
    } else {
        SocketAddr::new(
            IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3])),
            u16::from_be_bytes([b[4], b[5]]),
        )
    }
}

fn mapped(a: SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V4(v4) => SocketAddr::new(IpAddr::V6(v4.ip().to_ipv6_mapped()), v4.port()),
        a => a,
    }
}

/// Envoy's isUnicastAddress: not the any address, not IPv4's broadcast,
/// not multicast.
fn unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => !(a.is_unspecified() || a.is_broadcast() || a.is_multicast()),
        IpAddr::V6(a) => !(a.is_unspecified() || a.is_multicast()),
    }
}
