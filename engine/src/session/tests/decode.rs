//! Tests of expiry, protobuf parsing and the rejection of malformed values.

use super::*;

// --- Expiry --------------------------------------------------------------

#[test]
fn expiry_is_enforced() {
    let value = b64(&proto(
        b"127.0.0.1:8080",
        Some(&[0x80, 0xE2, 0xCF, 0xAA, 0x06]),
    ));
    let v = value.as_bytes();
    assert_eq!(
        decode_cookie_value(v, 1_699_999_999),
        valid("127.0.0.1:8080")
    );
    // Envoy expires strictly after the `expires` second.
    assert_eq!(
        decode_cookie_value(v, 1_700_000_000),
        valid("127.0.0.1:8080")
    );
    assert_eq!(decode_cookie_value(v, 1_700_000_001), SessionValue::Expired);
    assert_eq!(decode_header_value(v, 1_700_000_001), SessionValue::Expired);
}

#[test]
fn expires_zero_or_absent_never_expires() {
    let absent = b64(&proto(b"127.0.0.1:8080", None));
    let zero = b64(&proto(b"127.0.0.1:8080", Some(&[0x00])));
    for v in [absent, zero] {
        assert_eq!(
            decode_cookie_value(v.as_bytes(), u64::MAX),
            valid("127.0.0.1:8080")
        );
    }
}

#[test]
fn negative_expires_is_expired() {
    // int64 -1: ten-byte varint of 0xFFFF_FFFF_FFFF_FFFF.
    let minus_one = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01];
    let v = b64(&proto(b"127.0.0.1:8080", Some(&minus_one)));
    assert_eq!(decode_cookie_value(v.as_bytes(), 0), SessionValue::Expired);
}

#[test]
fn encoded_ttl_round_trips_through_expiry() {
    let v = encode("10.0.0.1:80", 60, CookieFormat::Envoy);
    assert_eq!(
        decode_cookie_value(v.as_bytes(), NOW + 60),
        valid("10.0.0.1:80")
    );
    assert_eq!(
        decode_cookie_value(v.as_bytes(), NOW + 61),
        SessionValue::Expired
    );
    // The plain form carries no expiry.
    let v = encode("10.0.0.1:80", 60, CookieFormat::Plain);
    assert_eq!(
        decode_cookie_value(v.as_bytes(), u64::MAX),
        valid("10.0.0.1:80")
    );
}

#[test]
fn expires_saturates_instead_of_wrapping() {
    let mut out = String::new();
    let ttl = Duration::from_secs(u64::MAX);
    encode_cookie_value(addr("10.0.0.1:80"), ttl, NOW, CookieFormat::Envoy, &mut out);
    assert_eq!(
        decode_cookie_value(out.as_bytes(), u64::MAX - 1),
        SessionValue::Expired
    );
    assert_eq!(
        decode_cookie_value(out.as_bytes(), i64::MAX as u64),
        valid("10.0.0.1:80")
    );
}

// --- Proto parsing -------------------------------------------------------

#[test]
fn proto_unknown_fields_are_skipped_and_last_wins() {
    let mut p = proto(b"10.0.0.9:1", None);
    // field 3 varint, field 4 fixed64, field 5 len-delimited, field 6 fixed32
    p.extend_from_slice(&[0x18, 0x96, 0x01]);
    p.extend_from_slice(&[0x21, 1, 2, 3, 4, 5, 6, 7, 8]);
    p.extend_from_slice(&[0x2A, 0x02, b'h', b'i']);
    p.extend_from_slice(&[0x35, 1, 2, 3, 4]);
    // a second address: the last occurrence wins
    p.extend_from_slice(&proto(b"10.0.0.1:2", None));
    assert_eq!(
        decode_cookie_value(b64(&p).as_bytes(), NOW),
        valid("10.0.0.1:2")
    );
    // expires first, then address, is still the proto form
    let mut p = vec![TAG_EXPIRES, 0x00];
    p.extend_from_slice(&proto(b"10.0.0.1:2", None));
    assert_eq!(
        decode_cookie_value(b64(&p).as_bytes(), NOW),
        valid("10.0.0.1:2")
    );
}

#[test]
fn garbage_is_invalid() {
    let invalid = |v: &[u8]| decode_cookie_value(v, NOW) == SessionValue::Invalid;
    // bad base64: bad symbol, lone symbol, bad padding, non-canonical tail
    assert!(invalid(b"MTI3LjAu*C4xOjgwODA="));
    assert!(invalid(b"M"));
    assert!(invalid(b"MTI3LjAuMC4xOjgwODA=="));
    assert!(invalid(b"MTI3LjAuMC4xOjgwODA==="));
    assert!(invalid(b"MT=3LjAuMC4xOjgwODA="));
    assert!(invalid(b"MTI3LjAuMC4xOjgwODB="));
    assert!(invalid(b"Zh=="));
    assert!(invalid(b" MTI3LjAuMC4xOjgwODA="));
    // empty
    assert!(invalid(b""));
    assert!(invalid(b"\"\""));
    // not an address
    assert!(invalid(b64(b"not-an-addr").as_bytes()));
    assert!(invalid(b64(b"10.0.0.1").as_bytes()));
    assert!(invalid(b64(b"10.0.0.1:99999").as_bytes()));
    assert!(invalid(b64(b"::1:80").as_bytes()));
    assert!(invalid(b64(b"10.0.0.1:80\n").as_bytes()));
    assert!(invalid(b64(&[0xFF, 0xFE]).as_bytes()));
}

#[test]
fn bad_protos_are_invalid() {
    let invalid = |p: &[u8]| decode_cookie_value(b64(p).as_bytes(), NOW) == SessionValue::Invalid;
    // empty address, with and without expires
    assert!(invalid(&[TAG_ADDRESS, 0x00]));
    assert!(invalid(&[TAG_ADDRESS, 0x00, TAG_EXPIRES, 0x01]));
    assert!(invalid(&[TAG_EXPIRES, 0x01]));
    // address not an ip:port
    assert!(invalid(&proto(b"not-an-addr", None)));
    assert!(invalid(&proto(b"10.0.0.1:80;c", None)));
    // truncated: length past the end, varint cut, tag only
    let full = proto(b"127.0.0.1:8080", Some(&[0x80, 0xE2, 0xCF, 0xAA, 0x06]));
    assert!(invalid(&full[..full.len() - 1]));
    assert!(invalid(&full[..10]));
    assert!(invalid(&full[..full.len() - 5]));
    // after a good address: address field with a varint wire type,
    // expires with a len-delimited one, a group, field 0
    let good = proto(b"10.0.0.1:2", None);
    assert!(!invalid(&good));
    for tail in [
        &[0x08, 0x01][..],
        &[0x12, 0x00],
        &[0x1B],
        &[0x02, 0x00],
        &[0x1F],
    ] {
        assert!(invalid(&[good.as_slice(), tail].concat()), "{tail:?}");
    }
    // an 11-byte varint and a 10th byte beyond 64 bits
    let mut long = proto(b"10.0.0.1:2", None);
    long.push(TAG_EXPIRES);
    long.extend_from_slice(&[0xFF; 9]);
    long.extend_from_slice(&[0x81, 0x00]);
    assert!(invalid(&long));
    let mut wide = proto(b"10.0.0.1:2", None);
    wide.push(TAG_EXPIRES);
    wide.extend_from_slice(&[0xFF; 9]);
    wide.push(0x02);
    assert!(invalid(&wide));
    // address not UTF-8
    assert!(invalid(&[TAG_ADDRESS, 0x02, 0xFF, 0xFE]));
}

#[test]
fn oversize_is_invalid() {
    // A decoded value that fills the buffer exactly is accepted ...
    let mut text = b"10.0.0.1:80;".to_vec();
    text.resize(MAX_DECODED, b'c');
    let fits = decode_cookie_value(b64(&text).as_bytes(), NOW);
    assert!(
        matches!(fits, SessionValue::Valid { cluster: Some(c), .. } if c.len() == MAX_DECODED - 12)
    );
    // ... one byte more is not, padded or not.
    text.push(b'c');
    let encoded = b64(&text);
    assert_eq!(
        decode_cookie_value(encoded.as_bytes(), NOW),
        SessionValue::Invalid
    );
    let unpadded = encoded.trim_end_matches('=');
    assert_eq!(
        decode_cookie_value(unpadded.as_bytes(), NOW),
        SessionValue::Invalid
    );
    assert_eq!(
        decode_cookie_value(&[b'A'; 4096], NOW),
        SessionValue::Invalid
    );
}
