//! The rules on request and response heads: §8.3.1 requests, §8.5
//! CONNECT and RFC 8441 extended CONNECT, Host against `:authority`, §8.3.2
//! responses, content-length; and the error they give.

use super::*;
use crate::{ErrorCode, FrameError};

// --- §8.3.1 requests ------------------------------------------------------

#[test]
fn method_is_required_and_a_token() {
    assert_eq!(
        request(&[(b":scheme", b"https"), (b":path", b"/")]),
        Err(Malformed::MissingMethod)
    );
    for bad in [&b""[..], b"GE T", b"GET/1", b"G\xc3\xa9T"] {
        assert_eq!(
            request(&[(b":method", bad), (b":scheme", b"https"), (b":path", b"/")]),
            Err(Malformed::InvalidMethod),
            "{bad:?}"
        );
    }
    // Extension methods are fine.
    assert_eq!(
        request(&[
            (b":method", b"PURGE"),
            (b":scheme", b"https"),
            (b":path", b"/")
        ]),
        Ok(())
    );
}

#[test]
fn scheme_and_path_are_required_outside_connect() {
    assert_eq!(
        request(&[(b":method", b"GET"), (b":path", b"/")]),
        Err(Malformed::MissingScheme)
    );
    assert_eq!(
        request(&[(b":method", b"GET"), (b":scheme", b"https")]),
        Err(Malformed::MissingPath)
    );
    // :authority is not required outside CONNECT.
    assert_eq!(
        request(&[
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":path", b"/")
        ]),
        Ok(())
    );
}

#[test]
fn scheme_must_be_a_uri_scheme() {
    for bad in [&b""[..], b"1http", b"ht tp", b"http:", b"-x"] {
        assert_eq!(
            request(&[(b":method", b"GET"), (b":scheme", bad), (b":path", b"/")]),
            Err(Malformed::InvalidScheme),
            "{bad:?}"
        );
    }
    for good in [&b"http"[..], b"HTTPS", b"coap+tcp", b"a.b-c"] {
        assert_eq!(
            request(&[(b":method", b"GET"), (b":scheme", good), (b":path", b"/")]),
            Ok(()),
            "{good:?}"
        );
    }
}

fn path(scheme: &[u8], method: &[u8], path: &[u8]) -> Result<(), Malformed> {
    request(&[(b":method", method), (b":scheme", scheme), (b":path", path)])
}

#[test]
fn path_rules() {
    assert_eq!(path(b"https", b"GET", b""), Err(Malformed::EmptyPath));
    assert_eq!(path(b"foo", b"GET", b""), Err(Malformed::EmptyPath));
    // http(s): absolute path, or the asterisk of OPTIONS.
    assert_eq!(path(b"https", b"GET", b"/a?b=c"), Ok(()));
    assert_eq!(path(b"http", b"GET", b"a/b"), Err(Malformed::InvalidPath));
    assert_eq!(path(b"HTTPS", b"GET", b"a/b"), Err(Malformed::InvalidPath));
    assert_eq!(path(b"https", b"OPTIONS", b"*"), Ok(()));
    assert_eq!(path(b"https", b"OPTIONS", b"/"), Ok(()));
    assert_eq!(path(b"https", b"GET", b"*"), Err(Malformed::InvalidPath));
    assert_eq!(
        path(b"https", b"OPTIONS", b"**"),
        Err(Malformed::InvalidPath)
    );
    // Other schemes: anything non-empty.
    assert_eq!(path(b"urn", b"GET", b"isbn:123"), Ok(()));
    // Nothing that would break an HTTP/1.1 request line, for any scheme.
    for bad in [&b"/a b"[..], b"/a\tb", b"/a\x01", b"/\x7f", b"/x HTTP/1.1"] {
        assert_eq!(path(b"https", b"GET", bad), Err(Malformed::InvalidPath));
        assert_eq!(path(b"foo", b"GET", bad), Err(Malformed::InvalidPath));
    }
    // Raw UTF-8 and odd printable bytes are the backend's business.
    assert_eq!(path(b"https", b"GET", b"/caf\xc3\xa9/{x}|#"), Ok(()));
}

#[test]
fn authority_must_be_a_uri_authority() {
    let with = |scheme: &[u8], authority: &[u8]| {
        request(&[
            (b":method", b"GET"),
            (b":scheme", scheme),
            (b":authority", authority),
            (b":path", b"/"),
        ])
    };
    for good in [
        &b"example.com"[..],
        b"EXAMPLE.com:8443",
        b"[::1]:443",
        b"10.0.0.1",
        b"xn--caf-dma.example",
    ] {
        assert_eq!(with(b"https", good), Ok(()), "{good:?}");
    }
    for bad in [
        &b""[..],
        b"user@example.com",
        b"example.com/x",
        b"exa mple.com",
        b"example.com?",
        b"example.com#",
        b"ex\\ample.com",
        b"caf\xc3\xa9.example",
    ] {
        assert_eq!(
            with(b"https", bad),
            Err(Malformed::InvalidAuthority),
            "{bad:?}"
        );
    }
    assert_eq!(with(b"http", b"u:p@h"), Err(Malformed::InvalidAuthority));
    // Userinfo is only banned for http and https.
    assert_eq!(with(b"ftp", b"user@files.example"), Ok(()));
}

// --- §8.5 CONNECT and RFC 8441 extended CONNECT ---------------------------

#[test]
fn connect_names_only_an_authority() {
    let l = list(&[
        (b":method", b"CONNECT"),
        (b":authority", b"db.internal:5432"),
    ]);
    let head = check_request(&l).unwrap();
    assert_eq!(head.scheme, None);
    assert_eq!(head.path, None);
    assert_eq!(head.authority, Some(&b"db.internal:5432"[..]));

    assert_eq!(
        request(&[(b":method", b"CONNECT")]),
        Err(Malformed::ConnectWithoutAuthority)
    );
    assert_eq!(
        request(&[(b":method", b"CONNECT"), (b":authority", b"")]),
        Err(Malformed::InvalidAuthority)
    );
    assert_eq!(
        request(&[(b":method", b"CONNECT"), (b":authority", b"u@h:1")]),
        Err(Malformed::InvalidAuthority)
    );
    for extra in [(&b":scheme"[..], &b"https"[..]), (b":path", b"/")] {
        assert_eq!(
            request(&[(b":method", b"CONNECT"), (b":authority", b"h:1"), extra]),
            Err(Malformed::ConnectWithSchemeOrPath)
        );
    }
    // Methods are case-sensitive: "connect" is an ordinary method.
    assert_eq!(
        request(&[(b":method", b"connect"), (b":authority", b"h:1")]),
        Err(Malformed::MissingScheme)
    );
}

#[test]
fn extended_connect_needs_scheme_and_path() {
    let ws: [(&[u8], &[u8]); 5] = [
        (b":method", b"CONNECT"),
        (b":protocol", b"websocket"),
        (b":scheme", b"https"),
        (b":path", b"/chat"),
        (b":authority", b"example.com"),
    ];
    let l = list(&ws);
    let head = check_request(&l).unwrap();
    assert_eq!(head.protocol, Some(&b"websocket"[..]));
    assert_eq!(head.path, Some(&b"/chat"[..]));
    assert_eq!(request(&ws[..3]), Err(Malformed::MissingPath));
    assert_eq!(
        request(&[ws[0], ws[1], ws[3]]),
        Err(Malformed::MissingScheme)
    );
    // :authority stays optional, as for any other request.
    assert_eq!(request(&ws[..4]), Ok(()));
}

#[test]
fn protocol_only_with_connect() {
    let mut fields = GET.to_vec();
    fields.push((b":protocol", b"websocket"));
    assert_eq!(request(&fields), Err(Malformed::ProtocolWithoutConnect));
}

// --- Host and :authority --------------------------------------------------

fn host(scheme: &[u8], authority: &[u8], host: &[u8]) -> Result<(), Malformed> {
    request(&[
        (b":method", b"GET"),
        (b":scheme", scheme),
        (b":authority", authority),
        (b":path", b"/"),
        (b"host", host),
    ])
}

#[test]
fn host_must_name_the_same_origin_as_authority() {
    assert_eq!(host(b"https", b"example.com", b"example.com"), Ok(()));
    assert_eq!(host(b"https", b"Example.COM", b"example.com"), Ok(()));
    assert_eq!(host(b"https", b"example.com", b"example.com:443"), Ok(()));
    assert_eq!(host(b"https", b"example.com:443", b"example.com:"), Ok(()));
    assert_eq!(host(b"http", b"example.com:80", b"example.com"), Ok(()));
    assert_eq!(
        host(b"https", b"example.com:8443", b"example.com:8443"),
        Ok(())
    );
    assert_eq!(host(b"https", b"[::1]", b"[::1]:443"), Ok(()));
    // Different hosts, or ports that differ after normalization.
    for (scheme, authority, h) in [
        (&b"https"[..], &b"example.com"[..], &b"other.com"[..]),
        (b"https", b"example.com", b"example.com:8443"),
        (b"https", b"example.com", b"example.com:80"),
        (b"http", b"example.com", b"example.com:443"),
        (b"https", b"example.com:8443", b"example.com:443"),
        (b"foo", b"example.com:80", b"example.com"),
        (b"https", b"[::1]", b"[::2]"),
        (b"https", b"example.com", b"example.com.evil"),
    ] {
        assert_eq!(
            host(scheme, authority, h),
            Err(Malformed::HostMismatch),
            "{authority:?} vs {h:?}"
        );
    }
}

#[test]
fn host_alone_is_fine_but_once_and_well_formed() {
    let no_authority = |h: &[(&[u8], &[u8])]| {
        let mut fields: Vec<(&[u8], &[u8])> = vec![
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":path", b"/"),
        ];
        fields.extend_from_slice(h);
        request(&fields)
    };
    assert_eq!(no_authority(&[(b"host", b"example.com")]), Ok(()));
    assert_eq!(
        no_authority(&[(b"host", b"a.example"), (b"host", b"b.example")]),
        Err(Malformed::DuplicateHost)
    );
    assert_eq!(
        no_authority(&[(b"host", b"a.example"), (b"host", b"a.example")]),
        Err(Malformed::DuplicateHost)
    );
    for bad in [&b""[..], b"user@example.com", b"example.com/x", b"a b"] {
        assert_eq!(
            no_authority(&[(b"host", bad)]),
            Err(Malformed::InvalidHost),
            "{bad:?}"
        );
    }
    // A response's host field is nobody's business.
    assert!(response(&[(b":status", b"200"), (b"host", b"a"), (b"host", b"b")]).is_ok());
}

// --- §8.3.2 responses -----------------------------------------------------

#[test]
fn status_is_three_digits_from_100_to_599() {
    for (raw, n) in [
        (&b"100"[..], 100),
        (b"200", 200),
        (b"404", 404),
        (b"599", 599),
    ] {
        let head = response(&[(b":status", raw)]).unwrap();
        assert_eq!(head.status, n);
        assert_eq!(head.is_informational(), n < 200);
    }
    assert_eq!(response(&[]), Err(Malformed::MissingStatus));
    assert_eq!(
        response(&[(b"server", b"x")]),
        Err(Malformed::MissingStatus)
    );
    for bad in [
        &b""[..],
        b"99",
        b"099",
        b"600",
        b"999",
        b"2000",
        b"20a",
        b"+20",
        b"2 0",
    ] {
        assert_eq!(
            response(&[(b":status", bad)]),
            Err(Malformed::InvalidStatus),
            "{bad:?}"
        );
    }
}

// --- content-length -------------------------------------------------------

#[test]
fn content_length_values_must_be_digits_and_agree() {
    let cl = |values: &[&[u8]]| {
        let fields: Vec<(&[u8], &[u8])> = values
            .iter()
            .map(|v| (&b"content-length"[..], *v))
            .collect();
        content_length(&list(&fields))
    };
    assert_eq!(cl(&[]), Ok(None));
    assert_eq!(cl(&[b"0"]), Ok(Some(0)));
    assert_eq!(cl(&[b"1234"]), Ok(Some(1234)));
    assert_eq!(cl(&[b"42", b"42"]), Ok(Some(42)));
    assert_eq!(cl(&[b"18446744073709551615"]), Ok(Some(u64::MAX)));
    assert_eq!(
        cl(&[b"42", b"43"]),
        Err(Malformed::ConflictingContentLength)
    );
    // Byte for byte, not by value.
    assert_eq!(
        cl(&[b"42", b"042"]),
        Err(Malformed::ConflictingContentLength)
    );
    for bad in [
        &b""[..],
        b"-1",
        b"+1",
        b"1.0",
        b"0x10",
        b"42, 42",
        b"18446744073709551616",
    ] {
        assert_eq!(cl(&[bad]), Err(Malformed::InvalidContentLength), "{bad:?}");
    }
}

#[test]
fn heads_carry_the_content_length() {
    let mut fields = GET.to_vec();
    fields.push((b"content-length", b"10"));
    assert_eq!(
        check_request(&list(&fields)).unwrap().content_length,
        Some(10)
    );
    fields.push((b"content-length", b"11"));
    assert_eq!(
        check_request(&list(&fields)),
        Err(Malformed::ConflictingContentLength)
    );
    let r = response(&[(b":status", b"200"), (b"content-length", b"7")]).unwrap();
    assert_eq!(r.content_length, Some(7));
    assert_eq!(
        response(&[(b":status", b"200"), (b"content-length", b"x")]),
        Err(Malformed::InvalidContentLength)
    );
}

// --- the error itself -----------------------------------------------------

#[test]
fn malformed_is_a_protocol_error_stream_reset() {
    let m = Malformed::HostMismatch;
    assert_eq!(m.code(), ErrorCode::PROTOCOL_ERROR);
    assert_eq!(
        m.to_frame_error(5),
        FrameError::Stream {
            stream: 5,
            code: ErrorCode::PROTOCOL_ERROR,
            reason: "host header field differs from :authority",
        }
    );
    assert_eq!(
        m.to_string(),
        "malformed message: host header field differs from :authority"
    );
}
