//! DNS answers (`dnswire`): arbitrary bytes parse without panicking, and what is accepted holds only addresses of the asked type; addresses written by the test server's builder parse back exactly, TTLs read as RFC 2181 says.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use dnswire::server::{response, Rr};
use dnswire::{parse_response, query, RecordType};
use libfuzzer_sys::fuzz_target;

const NAMES: [&str; 4] = ["web.example.com", "a", "Mixed.Case.Test.", "x-1.y_2.z"];

fuzz_target!(|data: &[u8]| {
    let Some((&mode, msg)) = data.split_first() else {
        return;
    };
    let rtype = if mode & 1 == 0 {
        RecordType::A
    } else {
        RecordType::Aaaa
    };
    let name = NAMES[usize::from(mode >> 1) % NAMES.len()];
    arbitrary_bytes(msg, name, rtype);
    round_trip(msg, name, rtype);
});

/// `msg` as the answer to a query whose id is its first two bytes (so that
/// the fuzzer reaches past the id check).
fn arbitrary_bytes(msg: &[u8], name: &str, rtype: RecordType) {
    let id = match msg {
        [a, b, ..] => u16::from_be_bytes([*a, *b]),
        _ => 0,
    };
    if let Ok(answer) = parse_response(msg, id, name, rtype) {
        for (ip, ttl) in &answer.addrs {
            assert_eq!(ip.is_ipv4(), rtype == RecordType::A, "{ip} for {rtype:?}");
            assert!(*ttl <= i32::MAX as u32);
        }
        // Each address takes at least its data and a record's fixed part.
        assert!(answer.addrs.len() * 14 <= msg.len());
    }
}

/// Addresses and TTLs drawn from `msg`, written as an answer to a real
/// query, parse back the same.
fn round_trip(msg: &[u8], name: &str, rtype: RecordType) {
    let width = if rtype == RecordType::A { 8 } else { 20 };
    let addrs: Vec<(IpAddr, u32)> = msg
        .chunks_exact(width)
        .take(24)
        .map(|c| {
            let (ip, ttl) = c.split_at(width - 4);
            let ip = match rtype {
                RecordType::A => IpAddr::V4(Ipv4Addr::new(ip[0], ip[1], ip[2], ip[3])),
                RecordType::Aaaa => {
                    let mut b = [0u8; 16];
                    b.copy_from_slice(ip);
                    IpAddr::V6(Ipv6Addr::from(b))
                }
            };
            (ip, u32::from_be_bytes([ttl[0], ttl[1], ttl[2], ttl[3]]))
        })
        .collect();
    let q = query(0x5a5a, name, rtype).expect("a valid name");
    let owner = name.trim_end_matches('.').to_ascii_lowercase();
    let answers: Vec<(String, Rr)> = addrs
        .iter()
        .map(|(ip, ttl)| (owner.clone(), Rr::Addr(*ip, *ttl)))
        .collect();
    let got = parse_response(&response(&q, 0, false, &answers), 0x5a5a, name, rtype)
        .expect("the builder's answer parses");
    let want: Vec<(IpAddr, u32)> = addrs
        .into_iter()
        .map(|(ip, ttl)| (ip, if ttl > i32::MAX as u32 { 0 } else { ttl }))
        .collect();
    assert_eq!(got.addrs, want);
}
