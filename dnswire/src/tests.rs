//! Queries and responses byte for byte, CNAME chains, compression, and what is refused.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::server::{question, response, Rr};
use super::*;

fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

#[test]
fn a_query_is_one_question_with_recursion_desired() {
    let q = query(0x1234, "Backend.Example.com.", RecordType::A).unwrap();
    assert_eq!(
        q,
        [
            0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, //
            7, b'b', b'a', b'c', b'k', b'e', b'n', b'd', //
            7, b'e', b'x', b'a', b'm', b'p', b'l', b'e', //
            3, b'c', b'o', b'm', 0, //
            0, 1, 0, 1,
        ]
    );
    let q6 = query(1, "a", RecordType::Aaaa).unwrap();
    assert_eq!(&q6[q6.len() - 4..], &[0, 28, 0, 1]);
    assert_eq!(
        question(&q).unwrap(),
        (0x1234, "backend.example.com".into(), 1)
    );
}

#[test]
fn names_that_are_not_host_names_are_refused() {
    for bad in ["", ".", "a..b", "a b", &"x".repeat(64), &"a.".repeat(128)] {
        assert!(query(1, bad, RecordType::A).is_err(), "{bad:?}");
    }
    assert!(query(1, &format!("{}.example", "x".repeat(63)), RecordType::A).is_ok());
}

#[test]
fn addresses_and_ttls_come_back_in_order() {
    let q = query(7, "svc.local", RecordType::A).unwrap();
    let m = response(
        &q,
        0,
        false,
        &[
            ("svc.local".into(), Rr::Addr(v4(10, 0, 0, 1), 30)),
            ("svc.local".into(), Rr::Addr(v4(10, 0, 0, 2), 60)),
        ],
    );
    let a = parse_response(&m, 7, "svc.local", RecordType::A).unwrap();
    assert_eq!(a.rcode, Rcode::NoError);
    assert!(!a.truncated);
    assert_eq!(a.addrs, vec![(v4(10, 0, 0, 1), 30), (v4(10, 0, 0, 2), 60)]);
}

#[test]
fn cname_chains_are_followed_from_the_asked_name() {
    let q = query(9, "www.example", RecordType::Aaaa).unwrap();
    let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
    let m = response(
        &q,
        0,
        false,
        &[
            // Out of order on purpose, plus a stranger's record.
            ("edge.example".into(), Rr::Addr(v6, 5)),
            ("www.example".into(), Rr::Cname("cdn.example".into(), 100)),
            ("cdn.example".into(), Rr::Cname("edge.example".into(), 100)),
            ("other.example".into(), Rr::Addr(v6, 5)),
        ],
    );
    let a = parse_response(&m, 9, "www.example", RecordType::Aaaa).unwrap();
    assert_eq!(
        a.addrs,
        vec![(v6, 5)],
        "the alias chain's address, not the stranger's"
    );
}

#[test]
fn errors_and_truncation_are_reported_as_they_came() {
    let q = query(3, "gone.example", RecordType::A).unwrap();
    let nx = response(&q, 3, false, &[]);
    let a = parse_response(&nx, 3, "gone.example", RecordType::A).unwrap();
    assert_eq!((a.rcode, a.addrs.len()), (Rcode::NxDomain, 0));
    let tc = response(&q, 0, true, &[]);
    assert!(
        parse_response(&tc, 3, "gone.example", RecordType::A)
            .unwrap()
            .truncated
    );
    // A truncated response cut inside its answers keeps what is whole.
    let full = response(
        &q,
        0,
        true,
        &[
            ("gone.example".into(), Rr::Addr(v4(1, 2, 3, 4), 1)),
            ("gone.example".into(), Rr::Addr(v4(1, 2, 3, 5), 1)),
        ],
    );
    let cut = &full[..full.len() - 3];
    let a = parse_response(cut, 3, "gone.example", RecordType::A).unwrap();
    assert_eq!(a.addrs, vec![(v4(1, 2, 3, 4), 1)]);
}

#[test]
fn responses_to_other_queries_and_malformed_ones_are_refused() {
    let q = query(5, "a.example", RecordType::A).unwrap();
    let ok = response(
        &q,
        0,
        false,
        &[("a.example".into(), Rr::Addr(v4(1, 1, 1, 1), 1))],
    );
    assert_eq!(
        parse_response(&ok, 6, "a.example", RecordType::A),
        Err(DnsError::Mismatch),
        "another id"
    );
    assert_eq!(
        parse_response(&ok, 5, "b.example", RecordType::A),
        Err(DnsError::Mismatch),
        "another name"
    );
    assert_eq!(
        parse_response(&ok, 5, "a.example", RecordType::Aaaa),
        Err(DnsError::Mismatch),
        "another type"
    );
    assert_eq!(
        parse_response(&q, 5, "a.example", RecordType::A),
        Err(DnsError::NotResponse),
        "a query"
    );
    assert_eq!(
        parse_response(&ok[..20], 5, "a.example", RecordType::A),
        Err(DnsError::Short)
    );
    // A compression pointer to itself loops.
    let mut looped = ok.clone();
    let at = looped.len() - 16; // the answer's owner (a pointer to the question)
    looped[at] = 0xc0;
    looped[at + 1] = at as u8;
    assert_eq!(
        parse_response(&looped, 5, "a.example", RecordType::A),
        Err(DnsError::BadNameInResponse)
    );
    // An A record whose data is not four bytes.
    let mut bad = ok.clone();
    let len_at = bad.len() - 6;
    bad[len_at + 1] = 3;
    bad.pop();
    assert_eq!(
        parse_response(&bad, 5, "a.example", RecordType::A),
        Err(DnsError::BadRecord)
    );
}

#[test]
fn a_ttl_with_its_top_bit_set_reads_as_zero() {
    let q = query(2, "t.example", RecordType::A).unwrap();
    let m = response(
        &q,
        0,
        false,
        &[("t.example".into(), Rr::Addr(v4(9, 9, 9, 9), 0x8000_0001))],
    );
    let a = parse_response(&m, 2, "t.example", RecordType::A).unwrap();
    assert_eq!(a.addrs, vec![(v4(9, 9, 9, 9), 0)]);
}
