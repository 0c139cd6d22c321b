//! The stateful-session cookie/header codec: arbitrary values decode without panicking, whatever decodes re-encodes (every format) to the same value, and encode→decode round-trips for arbitrary socket addresses, ttls and clocks.
#![no_main]

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::time::Duration;

use engine::config::SessionCookie;
use engine::session::{
    decode_cookie_value, decode_header_value, encode_cookie_value, find_cookie, header_value,
    path_matches, set_cookie, CookieFormat, SessionValue,
};
use libfuzzer_sys::fuzz_target;

const NOWS: [u64; 4] = [0, 1_700_000_000, i64::MAX as u64, u64::MAX];

fuzz_target!(|data: &[u8]| {
    let Some((&mode, raw)) = data.split_first() else {
        return;
    };
    let now = NOWS[usize::from(mode & 3)];
    decoded_values_round_trip(raw, now);
    if let Some((address, ttl, now)) = address_from(raw) {
        encoded_values_decode(address, ttl, now);
    }
    cookie_headers(raw);
});

/// The same bytes as `cookie` fields (split at newlines) and as a cookie
/// path against a request path (split at the first tab).
fn cookie_headers(raw: &[u8]) {
    let fields: Vec<&[u8]> = raw.split(|&b| b == b'\n').collect();
    for name in ["GSESSION", "a", ""] {
        if let Some(value) = find_cookie(fields.iter().copied(), name) {
            // A slice of one of the fields, trimmed.
            let within = |f: &&[u8]| f.windows(value.len().max(1)).any(|w| w == value);
            assert!(value.is_empty() || fields.iter().any(within));
            assert!(!value.starts_with(b" ") && !value.ends_with(b" "));
            let _ = decode_cookie_value(value, 0);
        }
    }
    if let Ok(text) = std::str::from_utf8(raw) {
        let (cookie_path, request_path) = text.split_once('\t').unwrap_or((text, "/"));
        let matched = path_matches(cookie_path, request_path);
        // RFC 6265 §5.1.4: a path always matches itself.
        if !cookie_path.is_empty() && !cookie_path.contains(['?', '#']) {
            assert!(path_matches(cookie_path, cookie_path), "{cookie_path:?}");
        }
        let _ = matched;
    }
}

/// Arbitrary bytes as a cookie and as a header value.
fn decoded_values_round_trip(raw: &[u8], now: u64) {
    let cookie = decode_cookie_value(raw, now);
    let header = decode_header_value(raw, now);
    // Quotes are the only difference between the two.
    let mut quoted = Vec::with_capacity(raw.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(raw);
    quoted.push(b'"');
    assert_eq!(decode_cookie_value(&quoted, now), header);
    if !(raw.len() >= 2 && raw[0] == b'"' && raw[raw.len() - 1] == b'"') {
        assert_eq!(cookie, header);
    }

    let SessionValue::Valid { address, cluster } = cookie else {
        return;
    };
    let want = SessionValue::Valid {
        address,
        cluster: None,
    };
    for format in [CookieFormat::Envoy, CookieFormat::Plain] {
        let mut out = String::new();
        encode_cookie_value(address, Duration::ZERO, now, format, &mut out);
        assert_eq!(decode_cookie_value(out.as_bytes(), now), want, "{out}");
    }
    assert_eq!(
        decode_header_value(header_value(address).as_bytes(), now),
        want
    );
    // gRPC's `ip:port;cluster` dialect has no encoder of ours: base64 it
    // here, in both alphabets, padded or not.
    if let Some(cluster) = cluster {
        let text = format!("{address};{cluster}");
        for (url_safe, pad) in [(false, true), (true, false)] {
            let value = base64(text.as_bytes(), url_safe, pad);
            assert_eq!(
                decode_cookie_value(value.as_bytes(), now),
                SessionValue::Valid {
                    address,
                    cluster: Some(cluster.clone()),
                },
                "{text:?} as {value}"
            );
        }
    }
}

/// An address, a ttl and a clock from the input's bytes.
fn address_from(b: &[u8]) -> Option<(SocketAddr, Duration, u64)> {
    let (&[kind, p0, p1], rest) = b.split_first_chunk::<3>()?;
    let port = u16::from_be_bytes([p0, p1]);
    let (address, rest) = if kind & 1 == 0 {
        let (ip, rest) = rest.split_first_chunk::<4>()?;
        (
            SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(*ip), port)),
            rest,
        )
    } else {
        let (ip, rest) = rest.split_first_chunk::<16>()?;
        let (scope, rest) = rest.split_first_chunk::<4>()?;
        let scope = if kind & 2 == 0 {
            0
        } else {
            u32::from_be_bytes(*scope)
        };
        // Flow info is not part of the text form: it never round-trips.
        let v6 = SocketAddrV6::new(Ipv6Addr::from(*ip), port, 0, scope);
        (SocketAddr::V6(v6), rest)
    };
    let (ttl, rest) = rest.split_first_chunk::<8>()?;
    let (now, _) = rest.split_first_chunk::<8>()?;
    let ttl = match kind >> 2 {
        0 => Duration::ZERO,
        1 => Duration::from_millis(u64::from_be_bytes(*ttl) % 2000),
        2 => Duration::from_secs(u64::from_be_bytes(*ttl) % (400 * 86_400)),
        _ => Duration::from_secs(u64::from_be_bytes(*ttl)),
    };
    Some((address, ttl, u64::from_be_bytes(*now)))
}

fn encoded_values_decode(address: SocketAddr, ttl: Duration, now: u64) {
    let valid = SessionValue::Valid {
        address,
        cluster: None,
    };
    let secs = ttl.as_secs();
    for format in [CookieFormat::Envoy, CookieFormat::Plain] {
        let mut out = String::new();
        encode_cookie_value(address, ttl, now, format, &mut out);
        let expires = format == CookieFormat::Envoy && secs > 0;
        // Expiry is capped at i64::MAX (the proto's int64): a clock past
        // that has every cookie with a ttl expired at once.
        let want = if expires && now > i64::MAX as u64 {
            SessionValue::Expired
        } else {
            valid.clone()
        };
        assert_eq!(decode_cookie_value(out.as_bytes(), now), want, "{out}");
        assert_eq!(decode_header_value(out.as_bytes(), now), want, "{out}");
        if expires {
            // Good through the expiry second, expired right after it.
            let expiry = now.saturating_add(secs).min(i64::MAX as u64);
            if expiry >= now {
                let at = decode_cookie_value(out.as_bytes(), expiry);
                assert_eq!(at, valid, "{out} at its expiry");
            }
            if expiry < u64::MAX {
                let after = decode_cookie_value(out.as_bytes(), expiry + 1);
                assert_eq!(after, SessionValue::Expired, "{out} after its expiry");
            }
        }

        // The whole set-cookie header, read back as a browser returns it.
        let cookie = SessionCookie {
            name: "GSESSION".into(),
            ttl,
            path: Some("/app".into()),
        };
        let header = set_cookie(&cookie, address, now, format);
        let pair = header.split(';').next().unwrap();
        let fields = [&b"other=1"[..], pair.as_bytes()];
        let value = find_cookie(fields, "GSESSION").expect("our cookie is found");
        assert_eq!(decode_cookie_value(value, now), want, "{header}");
    }
    assert_eq!(
        decode_header_value(header_value(address).as_bytes(), now),
        valid
    );
}

fn base64(bytes: &[u8], url_safe: bool, pad: bool) -> String {
    let alphabet: &[u8; 64] = if url_safe {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    } else {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    };
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = (b(0) << 16) | (b(1) << 8) | b(2);
        for i in 0..=chunk.len() {
            out.push(char::from(alphabet[(n >> (18 - 6 * i) & 63) as usize]));
        }
        if pad {
            for _ in chunk.len()..3 {
                out.push('=');
            }
        }
    }
    out
}
