//! Every §8 rule, met and broken, on hand-built header lists.

use super::*;
use crate::hpack::{Decoder, Encoder};

fn list(fields: &[(&[u8], &[u8])]) -> HeaderList {
    let mut l = HeaderList::new();
    for (n, v) in fields {
        l.push(n, v, false);
    }
    l
}

const GET: [(&[u8], &[u8]); 4] = [
    (b":method", b"GET"),
    (b":scheme", b"https"),
    (b":authority", b"example.com"),
    (b":path", b"/"),
];

/// A GET with `extra` fields after the pseudo-headers.
fn get_with(extra: &[(&[u8], &[u8])]) -> Result<(), Malformed> {
    let mut fields = GET.to_vec();
    fields.extend_from_slice(extra);
    check_request(&list(&fields)).map(|_| ())
}

/// A request of exactly these fields.
fn request(fields: &[(&[u8], &[u8])]) -> Result<(), Malformed> {
    check_request(&list(fields)).map(|_| ())
}

fn response(fields: &[(&[u8], &[u8])]) -> Result<ResponseHead, Malformed> {
    check_response(&list(fields))
}

// --- whole messages -------------------------------------------------------

#[test]
fn a_plain_get_gives_its_pseudo_headers() {
    let l = list(&GET);
    let head = check_request(&l).unwrap();
    assert_eq!(
        head,
        RequestHead {
            method: b"GET",
            scheme: Some(b"https"),
            authority: Some(b"example.com"),
            path: Some(b"/"),
            protocol: None,
            content_length: None,
        }
    );
}

#[test]
fn a_list_from_the_hpack_decoder_checks_out() {
    // The pieces as the connection layer will use them.
    let mut enc = Encoder::new();
    let mut block = bytes::BytesMut::new();
    enc.begin_block(&mut block);
    let fields: [(&[u8], &[u8]); 6] = [
        (b":method", b"POST"),
        (b":scheme", b"https"),
        (b":path", b"/upload"),
        (b":authority", b"example.com"),
        (b"content-length", b"5"),
        (b"te", b"trailers"),
    ];
    for (n, v) in fields {
        enc.encode_field(n, v, false, &mut block);
    }
    let mut l = HeaderList::new();
    Decoder::new(4096)
        .decode(&block, 16 << 10, |f| l.push(f.name, f.value, f.never_index))
        .unwrap();
    let head = check_request(&l).unwrap();
    assert_eq!(head.method, b"POST");
    assert_eq!(head.content_length, Some(5));
}

// --- §8.2.1 field names and values ---------------------------------------

#[test]
fn names_must_be_lowercase() {
    assert_eq!(get_with(&[(b"X-Foo", b"1")]), Err(Malformed::UppercaseName));
    assert_eq!(
        request(&[(b":Method", b"GET")]),
        Err(Malformed::UppercaseName)
    );
    assert_eq!(get_with(&[(b"x-foo", b"1")]), Ok(()));
}

#[test]
fn names_must_be_tokens() {
    for bad in [
        &b""[..],
        b"x foo",
        b"x:foo",
        b"x\"foo",
        b"x/foo",
        b"x\x00foo",
        b"x\x7ffoo",
        b"x\xc3\xa9",
        b"x\tfoo",
    ] {
        assert_eq!(
            get_with(&[(bad, b"1")]),
            Err(Malformed::InvalidName),
            "{bad:?}"
        );
    }
    // Every tchar that is not uppercase.
    assert_eq!(get_with(&[(b"!#$%&'*+-.^_`|~09az", b"1")]), Ok(()));
    // Only one leading colon, and something after it.
    assert_eq!(request(&[(b"::path", b"/")]), Err(Malformed::InvalidName));
    assert_eq!(request(&[(b":", b"/")]), Err(Malformed::InvalidName));
}

#[test]
fn values_must_not_hold_nul_cr_or_lf() {
    for bad in [
        &b"a\x00b"[..],
        b"a\rb",
        b"a\nb",
        b"\n",
        b"a\r\nx-injected: 1",
    ] {
        assert_eq!(
            get_with(&[(b"x-foo", bad)]),
            Err(Malformed::InvalidValue),
            "{bad:?}"
        );
    }
    // Also in pseudo-header values.
    assert_eq!(
        request(&[(b":method", b"GET\r\n")]),
        Err(Malformed::InvalidValue)
    );
}

#[test]
fn values_must_not_start_or_end_with_whitespace() {
    for bad in [&b" a"[..], b"a ", b"\ta", b"a\t", b" ", b"\t"] {
        assert_eq!(
            get_with(&[(b"x-foo", bad)]),
            Err(Malformed::ValueWhitespace),
            "{bad:?}"
        );
    }
    // Inside is fine, and so are empty values and obs-text; other control
    // characters pass (the RFC's minimum, see check_value).
    for good in [&b"a b\tc"[..], b"", b"caf\xc3\xa9", b"a\x01b"] {
        assert_eq!(get_with(&[(b"x-foo", good)]), Ok(()), "{good:?}");
    }
}

// --- §8.3 pseudo-header fields --------------------------------------------

#[test]
fn pseudo_headers_come_first() {
    assert_eq!(
        request(&[
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b"accept", b"*/*"),
            (b":path", b"/"),
        ]),
        Err(Malformed::PseudoAfterRegular)
    );
    assert_eq!(
        response(&[(b"server", b"x"), (b":status", b"200")]),
        Err(Malformed::PseudoAfterRegular)
    );
}

#[test]
fn unknown_pseudo_headers_are_refused() {
    assert_eq!(
        get_with(&[]).and(request(&[(b":method", b"GET"), (b":foo", b"x")])),
        Err(Malformed::UnknownPseudo)
    );
    assert_eq!(
        response(&[(b":status", b"200"), (b":reason", b"OK")]),
        Err(Malformed::UnknownPseudo)
    );
}

#[test]
fn pseudo_headers_appear_once() {
    let mut fields = GET.to_vec();
    fields.push((b":path", b"/again"));
    assert_eq!(request(&fields), Err(Malformed::DuplicatePseudo));
    assert_eq!(
        response(&[(b":status", b"200"), (b":status", b"200")]),
        Err(Malformed::DuplicatePseudo)
    );
}

#[test]
fn request_and_response_pseudo_headers_stay_on_their_side() {
    let mut fields = GET.to_vec();
    fields.push((b":status", b"200"));
    assert_eq!(request(&fields), Err(Malformed::ResponsePseudoInRequest));
    for name in [
        &b":method"[..],
        b":scheme",
        b":authority",
        b":path",
        b":protocol",
    ] {
        assert_eq!(
            response(&[(b":status", b"200"), (name, b"x")]),
            Err(Malformed::RequestPseudoInResponse),
            "{name:?}"
        );
    }
}

#[test]
fn trailers_hold_regular_fields_only() {
    assert_eq!(
        check_trailers(&list(&[(b"grpc-status", b"0"), (b"x-sum", b"abc")])),
        Ok(())
    );
    assert_eq!(check_trailers(&HeaderList::new()), Ok(()));
    for name in [&b":status"[..], b":path", b":foo"] {
        assert_eq!(
            check_trailers(&list(&[(name, b"1")])),
            Err(Malformed::PseudoInTrailers),
            "{name:?}"
        );
    }
    assert_eq!(
        check_trailers(&list(&[(b"X-Sum", b"1")])),
        Err(Malformed::UppercaseName)
    );
    assert_eq!(
        check_trailers(&list(&[(b"x-sum", b"1\n")])),
        Err(Malformed::InvalidValue)
    );
}

// --- §8.2.2 connection-specific fields ------------------------------------

#[test]
fn connection_specific_fields_are_refused_everywhere() {
    for name in [
        &b"connection"[..],
        b"proxy-connection",
        b"keep-alive",
        b"transfer-encoding",
        b"upgrade",
    ] {
        let field = [(name, &b"x"[..])];
        assert_eq!(get_with(&field), Err(Malformed::ConnectionSpecific));
        assert_eq!(
            response(&[(b":status", b"200"), field[0]]),
            Err(Malformed::ConnectionSpecific)
        );
        assert_eq!(
            check_trailers(&list(&field)),
            Err(Malformed::ConnectionSpecific)
        );
    }
    // Names that merely start the same way are ordinary.
    assert_eq!(get_with(&[(b"connection-id", b"1")]), Ok(()));
}

#[test]
fn te_may_only_say_trailers() {
    assert_eq!(get_with(&[(b"te", b"trailers")]), Ok(()));
    assert_eq!(
        get_with(&[(b"te", b"Trailers")]),
        Ok(()),
        "tokens are caseless"
    );
    for bad in [&b"gzip"[..], b"trailers, gzip", b"trailers;q=1", b""] {
        assert_eq!(
            get_with(&[(b"te", bad)]),
            Err(Malformed::TeNotTrailers),
            "{bad:?}"
        );
    }
}

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

// --- the optimized checks against the plain ones --------------------------

/// Random lists from pieces that sit on the rules' edges (pseudo-headers
/// known, unknown and misspelled, connection-specific names, values with
/// NUL/CR/LF/whitespace/DEL/'@'/high bytes at either end or inside, short
/// and long): `check_*` must give exactly what `reference` gives, the same
/// error for the same list included.
#[test]
fn the_checks_agree_with_the_reference_on_random_lists() {
    use super::reference;
    const NAMES: &[&[u8]] = &[
        b":method",
        b":scheme",
        b":authority",
        b":path",
        b":protocol",
        b":status",
        b":foo",
        b":Method",
        b":",
        b"::path",
        b":meth",
        b":pathx",
        b"",
        b"accept",
        b"x-Foo",
        b"X",
        b"host",
        b"te",
        b"connection",
        b"upgrade",
        b"keep-alive",
        b"transfer-encoding",
        b"proxy-connection",
        b"content-length",
        b"a b",
        b"x:y",
        b"x\x00",
        b"\xff",
        b"user-agent",
    ];
    const VALUES: &[&[u8]] = &[
        b"",
        b" x",
        b"x ",
        b"\t",
        b"GET",
        b"CONNECT",
        b"OPTIONS",
        b"connect",
        b"G T",
        b"http",
        b"https",
        b"HTTPS",
        b"foo+bar.1",
        b"1foo",
        b"/",
        b"*",
        b"a/b",
        b"/a b",
        b"/\x7f",
        b"/\x80",
        b"example.com",
        b"Example.COM:80",
        b"u:p@h",
        b"[::1]:443",
        b"[::1]",
        b"example.com:",
        b"example.com:443",
        b"trailers",
        b"TRAILERS",
        b"12",
        b"012",
        b"1,2",
        b"99999999999999999999",
        b"200",
        b"599",
        b"600",
        b"99",
        b"websocket",
        b"/index.html?q=1&r=2#x",
    ];
    const BYTES: &[u8] = b"\x00\n\r\t \x7f\x80\xff@:%[]/*aAzZ09-._~,;=!#$&'()+^`|\"<>?";
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut rnd = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let piece = |pieces: &[&[u8]], rnd: &mut dyn FnMut(usize) -> usize| -> Vec<u8> {
        match rnd(4) {
            // A random string, long enough for several words at times.
            0 => (0..rnd(24)).map(|_| BYTES[rnd(BYTES.len())]).collect(),
            // A known piece with one byte replaced.
            1 => {
                let mut p = pieces[rnd(pieces.len())].to_vec();
                if !p.is_empty() {
                    let at = rnd(p.len());
                    p[at] = BYTES[rnd(BYTES.len())];
                }
                p
            }
            _ => pieces[rnd(pieces.len())].to_vec(),
        }
    };
    let mut checked = 0;
    for round in 0..200_000 {
        let mut fields = Vec::new();
        // Mostly a valid request or response to start from, so that the
        // later rules are reached too.
        match rnd(3) {
            0 => fields.extend(GET.iter().map(|(n, v)| (n.to_vec(), v.to_vec()))),
            1 => fields.push((b":status".to_vec(), b"200".to_vec())),
            _ => {}
        }
        for _ in 0..rnd(5) {
            let name = piece(NAMES, &mut rnd);
            let value = piece(VALUES, &mut rnd);
            let at = rnd(fields.len() + 1);
            fields.insert(at, (name, value));
        }
        if !fields.is_empty() && rnd(3) == 0 {
            // A valid list with one value broken.
            let i = rnd(fields.len());
            fields[i].1 = piece(VALUES, &mut rnd);
        }
        let mut l = HeaderList::new();
        for (n, v) in &fields {
            l.push(n, v, false);
        }
        let shown = || format!("round {round}: {fields:?}");
        assert_eq!(
            check_request(&l),
            reference::check_request(&l),
            "{}",
            shown()
        );
        assert_eq!(
            check_response(&l),
            reference::check_response(&l),
            "{}",
            shown()
        );
        assert_eq!(
            check_trailers(&l),
            reference::check_trailers(&l),
            "{}",
            shown()
        );
        assert_eq!(
            content_length(&l),
            reference::content_length(&l),
            "{}",
            shown()
        );
        checked += usize::from(check_request(&l).is_ok() || check_response(&l).is_ok());
    }
    // Enough of them pass for the later rules to be exercised.
    assert!(checked > 1000, "only {checked} lists passed");
}
