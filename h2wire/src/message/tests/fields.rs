//! Whole messages, and the rules on fields: §8.2.1 names and values, §8.3
//! pseudo-header fields, §8.2.2 connection-specific fields.

use super::*;
use crate::hpack::{Decoder, Encoder};

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
