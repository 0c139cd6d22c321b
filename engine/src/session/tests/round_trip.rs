//! Tests of known encodings, round trips and the decoded dialects.

use super::*;

// --- Known bytes -------------------------------------------------------

#[test]
fn envoy_cookie_known_bytes() {
    // 0A 0E "127.0.0.1:8080" 10 varint(1700000000 = 80 E2 CF AA 06),
    // base64-encoded by hand (and cross-checked with Python).
    let mut out = String::new();
    encode_cookie_value(
        addr("127.0.0.1:8080"),
        Duration::from_secs(1000),
        1_699_999_000,
        CookieFormat::Envoy,
        &mut out,
    );
    assert_eq!(out, "Cg4xMjcuMC4wLjE6ODA4MBCA4s+qBg==");
    assert_eq!(
        decode_cookie_value(b"Cg4xMjcuMC4wLjE6ODA4MBCA4s+qBg==", 1_700_000_000),
        valid("127.0.0.1:8080")
    );
}

#[test]
fn envoy_cookie_without_ttl_omits_expires() {
    assert_eq!(
        encode("127.0.0.1:8080", 0, CookieFormat::Envoy),
        "Cg4xMjcuMC4wLjE6ODA4MA=="
    );
    // Sub-second ttl counts as none (Envoy keeps whole seconds).
    let mut out = String::new();
    let ttl = Duration::from_millis(500);
    encode_cookie_value(
        addr("127.0.0.1:8080"),
        ttl,
        NOW,
        CookieFormat::Envoy,
        &mut out,
    );
    assert_eq!(out, "Cg4xMjcuMC4wLjE6ODA4MA==");
}

#[test]
fn plain_and_header_known_bytes() {
    assert_eq!(
        encode("127.0.0.1:8080", 60, CookieFormat::Plain),
        "MTI3LjAuMC4xOjgwODA="
    );
    assert_eq!(header_value(addr("127.0.0.1:8080")), "MTI3LjAuMC4xOjgwODA=");
    assert_eq!(header_value(addr("[::1]:80")), "Wzo6MV06ODA=");
}

#[test]
fn base64_encode_padding_lengths() {
    assert_eq!(b64(b""), "");
    assert_eq!(b64(b"f"), "Zg==");
    assert_eq!(b64(b"fo"), "Zm8=");
    assert_eq!(b64(b"foo"), "Zm9v");
    assert_eq!(b64(&[0xFB, 0xFF]), "+/8=");
}

// --- Round trips ---------------------------------------------------------

#[test]
fn round_trips_both_formats_v4_and_v6() {
    for a in [
        "10.0.0.1:8080",
        "[::1]:80",
        "[2001:db8::17]:65535",
        "0.0.0.0:1",
    ] {
        for format in [CookieFormat::Envoy, CookieFormat::Plain] {
            for ttl in [0, 3600] {
                let value = encode(a, ttl, format);
                assert_eq!(
                    decode_cookie_value(value.as_bytes(), NOW),
                    valid(a),
                    "{a} {format:?}"
                );
                let quoted = format!("\"{value}\"");
                assert_eq!(decode_cookie_value(quoted.as_bytes(), NOW), valid(a));
            }
        }
        assert_eq!(
            decode_header_value(header_value(addr(a)).as_bytes(), NOW),
            valid(a)
        );
    }
}

#[test]
fn round_trip_scoped_v6_in_envoy_format() {
    let a = SocketAddr::V6(std::net::SocketAddrV6::new(
        "fe80::1:2:3:4".parse().expect("v6"),
        443,
        0,
        4_294_967_295,
    ));
    let mut out = String::new();
    encode_cookie_value(
        a,
        Duration::from_secs(1),
        NOW,
        CookieFormat::Envoy,
        &mut out,
    );
    assert_eq!(
        decode_cookie_value(out.as_bytes(), NOW),
        SessionValue::Valid {
            address: a,
            cluster: None
        }
    );
}

// --- Dialects ------------------------------------------------------------

#[test]
fn legacy_plain_dialect() {
    assert_eq!(
        decode_cookie_value(b"MTI3LjAuMC4xOjgwODA=", NOW),
        valid("127.0.0.1:8080")
    );
    assert_eq!(decode_cookie_value(b"Wzo6MV06ODA=", NOW), valid("[::1]:80"));
}

#[test]
fn grpc_cluster_dialect() {
    // base64("10.0.0.1:80;cluster-a")
    assert_eq!(
        decode_cookie_value(b"MTAuMC4wLjE6ODA7Y2x1c3Rlci1h", NOW),
        SessionValue::Valid {
            address: addr("10.0.0.1:80"),
            cluster: Some("cluster-a".to_owned()),
        }
    );
    assert_eq!(
        decode_header_value(b64(b"[::1]:80;c").as_bytes(), NOW),
        SessionValue::Valid {
            address: addr("[::1]:80"),
            cluster: Some("c".to_owned()),
        }
    );
    assert_eq!(
        decode_cookie_value(b64(b"10.0.0.1:80;").as_bytes(), NOW),
        SessionValue::Invalid
    );
    assert_eq!(
        decode_cookie_value(b64(b"nope;c").as_bytes(), NOW),
        SessionValue::Invalid
    );
}

#[test]
fn quoted_values() {
    assert_eq!(
        decode_cookie_value(b"\"MTI3LjAuMC4xOjgwODA=\"", NOW),
        valid("127.0.0.1:8080")
    );
    // An unbalanced quote is not a quoted value.
    assert_eq!(
        decode_cookie_value(b"\"MTI3LjAuMC4xOjgwODA=", NOW),
        SessionValue::Invalid
    );
    assert_eq!(decode_cookie_value(b"\"", NOW), SessionValue::Invalid);
    assert_eq!(decode_cookie_value(b"\"\"", NOW), SessionValue::Invalid);
    // Header values are taken literally.
    assert_eq!(
        decode_header_value(b"\"MTI3LjAuMC4xOjgwODA=\"", NOW),
        SessionValue::Invalid
    );
}

#[test]
fn unpadded_and_url_safe_base64() {
    let now = 1_700_000_000;
    let want = valid("127.0.0.1:8080");
    assert_eq!(
        decode_cookie_value(b"Cg4xMjcuMC4wLjE6ODA4MBCA4s+qBg", now),
        want
    );
    assert_eq!(
        decode_cookie_value(b"Cg4xMjcuMC4wLjE6ODA4MBCA4s-qBg==", now),
        want
    );
    assert_eq!(
        decode_cookie_value(b"Cg4xMjcuMC4wLjE6ODA4MBCA4s-qBg", now),
        want
    );
    assert_eq!(decode_cookie_value(b"MTI3LjAuMC4xOjgwODA", now), want);
    // "/" vs "_" (symbol 63): bytes FB FF.
    let mut buf = [0u8; MAX_DECODED];
    assert_eq!(base64_decode(b"-_8", &mut buf), Some(&[0xFB, 0xFF][..]));
    assert_eq!(base64_decode(b"+/8=", &mut buf), Some(&[0xFB, 0xFF][..]));
}
