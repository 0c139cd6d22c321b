use super::*;

fn headers<'a>(list: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a [u8]> + 'a {
    move |name| {
        list.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_bytes())
    }
}

fn collect(f: impl FnOnce(&mut dyn FnMut(&'static str, &str))) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    f(&mut |n, v| out.push((n, v.to_owned())));
    out
}

const TRACE: u128 = 0x4bf92f3577b34da6a3ce929d0e0e4736;
const SPAN: u64 = 0x00f067aa0ba902b7;

// The W3C Trace Context spec's own example (§3.2.2.5 / §3.2.4).
#[test]
fn w3c_spec_example() {
    let ctx =
        parse_traceparent(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
    assert_eq!(ctx.trace_id, TRACE);
    assert_eq!(ctx.span_id, SPAN);
    assert_eq!(ctx.sampled, Some(true));
    assert_eq!(ctx.parent_span_id, None);
    let ctx =
        parse_traceparent(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").unwrap();
    assert_eq!(ctx.sampled, Some(false));
    // Unknown flag bits are ignored; only bit 0 is "sampled".
    let ctx =
        parse_traceparent(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09").unwrap();
    assert_eq!(ctx.sampled, Some(true));
    let ctx =
        parse_traceparent(b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-fe").unwrap();
    assert_eq!(ctx.sampled, Some(false));
    // Optional whitespace around the value (W3C test suite, OWS handling).
    assert!(
        parse_traceparent(b" \t00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\t ").is_ok()
    );
}

#[test]
fn w3c_invalid_traceparents() {
    for bad in [
        // all-zero ids
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        // version ff is forbidden
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        // uppercase hex (HEXDIGLC only)
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
        "0A-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",
        // version 00 must be exactly 55 bytes
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        // too short / wrong field widths
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
        "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e47366-0f067aa0ba902b7-01",
        // wrong delimiters, non-hex
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
        "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ".0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "",
        "00",
    ] {
        assert!(
            parse_traceparent(bad.as_bytes()).is_err(),
            "{bad:?} accepted"
        );
    }
    // Non-UTF-8 and odd bytes never panic.
    assert!(parse_traceparent(&[0xff; 55]).is_err());
    assert!(parse_traceparent(&[b'-'; 80]).is_err());
}

// Versioning of traceparent: a higher version may carry more fields after a
// '-', and is parsed by the version-00 layout.
#[test]
fn w3c_future_versions() {
    let ctx = parse_traceparent(
        b"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-will-be-like",
    )
    .unwrap();
    assert_eq!(
        (ctx.trace_id, ctx.span_id, ctx.sampled),
        (TRACE, SPAN, Some(true))
    );
    assert!(parse_traceparent(b"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").is_ok());
    assert!(parse_traceparent(
        b"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01.what-the-future-will-not-be-like"
    )
    .is_err());
    assert!(parse_traceparent(b"cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7").is_err());
}

#[test]
fn tracestate_carried_when_sane() {
    assert_eq!(
        parse_tracestate(b"rojo=00f067aa0ba902b7,congo=t61rcWkgMzE").as_deref(),
        Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
    );
    assert_eq!(
        parse_tracestate(b" foo=1 , ,bar=2 ").as_deref(),
        Some("foo=1 , ,bar=2")
    );
    assert_eq!(parse_tracestate(b""), None);
    assert_eq!(parse_tracestate(b"novalue"), None);
    assert_eq!(parse_tracestate(b"=v"), None);
    assert_eq!(parse_tracestate(b"k=v\x01"), None);
    assert_eq!(parse_tracestate("k=\u{e9}".as_bytes()), None);
    let long = format!("k={}", "a".repeat(MAX_TRACESTATE_LEN - 2));
    assert!(parse_tracestate(long.as_bytes()).is_some());
    let too_long = format!("k={}", "a".repeat(MAX_TRACESTATE_LEN - 1));
    assert_eq!(parse_tracestate(too_long.as_bytes()), None);
    let members: Vec<String> = (0..33).map(|i| format!("k{i}=v")).collect();
    assert_eq!(parse_tracestate(members.join(",").as_bytes()), None);
    assert!(parse_tracestate(members[..32].join(",").as_bytes()).is_some());
}

#[test]
fn w3c_extract_and_inject() {
    let h = [
        (
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ),
        ("tracestate", "congo=t61rcWkgMzE"),
    ];
    let got = extract(Propagation::W3c, headers(&h)).unwrap();
    let parent = got.parent().unwrap();
    assert_eq!(parent.tracestate.as_deref(), Some("congo=t61rcWkgMzE"));
    let child = parent.child(0x53995c3f42cd8ad8, true);
    let out = collect(|set| inject(Propagation::W3c, &child, false, set));
    assert_eq!(
        out,
        [
            (
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-53995c3f42cd8ad8-01".to_owned()
            ),
            ("tracestate", "congo=t61rcWkgMzE".to_owned()),
        ]
    );
    let unsampled = TraceContext::root(1, 2, false);
    assert_eq!(
        hex::as_str(&format_traceparent(&unsampled)),
        "00-00000000000000000000000000000001-0000000000000002-00"
    );
    // tracestate without traceparent is discarded; a bad traceparent is an error.
    assert_eq!(
        extract(Propagation::W3c, headers(&[("tracestate", "a=b")])),
        Ok(Extracted::None)
    );
    assert!(extract(Propagation::W3c, headers(&[("traceparent", "00-xyz")])).is_err());
    // The OTel provider ignores B3.
    assert_eq!(
        extract(Propagation::W3c, headers(&[("b3", "1")])),
        Ok(Extracted::None)
    );
}

// Examples from the openzipkin/b3-propagation README.
#[test]
fn b3_multi_spec_examples() {
    let h = [
        ("x-b3-traceid", "80f198ee56343ba864fe8b2a57d3eff7"),
        ("x-b3-parentspanid", "05e3ac9a4f6e3b90"),
        ("x-b3-spanid", "e457b5a2e4d86bd1"),
        ("x-b3-sampled", "1"),
    ];
    let ctx = extract(Propagation::B3, headers(&h))
        .unwrap()
        .parent()
        .cloned()
        .unwrap();
    assert_eq!(ctx.trace_id, 0x80f198ee56343ba864fe8b2a57d3eff7);
    assert_eq!(ctx.span_id, 0xe457b5a2e4d86bd1);
    assert_eq!(ctx.parent_span_id, Some(0x05e3ac9a4f6e3b90));
    assert_eq!((ctx.sampled, ctx.debug), (Some(true), false));

    // 64-bit trace id, uppercase accepted, deferred decision.
    let h = [
        ("x-b3-traceid", "A3CE929D0E0E4736"),
        ("x-b3-spanid", "00F067AA0BA902B7"),
    ];
    let ctx = extract_b3(headers(&h)).unwrap().parent().cloned().unwrap();
    assert_eq!(
        (ctx.trace_id, ctx.span_id, ctx.sampled),
        (0xa3ce929d0e0e4736, SPAN, None)
    );

    for (value, sampled) in [
        ("0", false),
        ("false", false),
        ("true", true),
        ("d", true),
        ("yes", false),
    ] {
        let h = [
            ("x-b3-traceid", "a3ce929d0e0e4736"),
            ("x-b3-spanid", "00f067aa0ba902b7"),
            ("x-b3-sampled", value),
        ];
        assert_eq!(
            extract_b3(headers(&h)).unwrap().sampled(),
            Some(sampled),
            "{value}"
        );
    }
    // Debug implies accept, even against x-b3-sampled: 0.
    let h = [
        ("x-b3-traceid", "a3ce929d0e0e4736"),
        ("x-b3-spanid", "00f067aa0ba902b7"),
        ("x-b3-flags", "1"),
        ("x-b3-sampled", "0"),
    ];
    let ctx = extract_b3(headers(&h)).unwrap().parent().cloned().unwrap();
    assert_eq!((ctx.sampled, ctx.debug), (Some(true), true));
    // Sampling alone, or half a context: a decision without ids.
    assert_eq!(
        extract_b3(headers(&[("x-b3-sampled", "0")])),
        Ok(Extracted::Sampling {
            sampled: false,
            debug: false
        })
    );
    assert_eq!(
        extract_b3(headers(&[("x-b3-flags", "1")])),
        Ok(Extracted::Sampling {
            sampled: true,
            debug: true
        })
    );
    assert_eq!(
        extract_b3(headers(&[("x-b3-traceid", "a3ce929d0e0e4736")])),
        Ok(Extracted::None)
    );
    // Empty parent is tolerated (Envoy), bad ids are errors.
    let h = [
        ("x-b3-traceid", "a3ce929d0e0e4736"),
        ("x-b3-spanid", "00f067aa0ba902b7"),
        ("x-b3-parentspanid", ""),
    ];
    assert_eq!(
        extract_b3(headers(&h))
            .unwrap()
            .parent()
            .unwrap()
            .parent_span_id,
        None
    );
    for (name, value) in [
        ("x-b3-traceid", "a3ce929d0e0e473"),
        ("x-b3-traceid", "0000000000000000"),
        ("x-b3-traceid", "a3ce929d0e0e4736a3ce929d0e0e47"),
        ("x-b3-spanid", "00f067aa0ba902bz"),
        ("x-b3-spanid", "0000000000000000"),
        ("x-b3-parentspanid", "123"),
    ] {
        let mut h = vec![
            ("x-b3-traceid", "a3ce929d0e0e4736"),
            ("x-b3-spanid", "00f067aa0ba902b7"),
        ];
        h.retain(|(n, _)| *n != name);
        h.push((name, value));
        assert_eq!(
            extract_b3(headers(&h)),
            Err(ContextError::B3Multi(name)),
            "{name}: {value}"
        );
    }
}

#[test]
fn b3_single_spec_examples() {
    let got =
        parse_b3_single(b"80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1-05e3ac9a4f6e3b90")
            .unwrap();
    let ctx = got.parent().unwrap();
    assert_eq!(ctx.trace_id, 0x80f198ee56343ba864fe8b2a57d3eff7);
    assert_eq!(ctx.span_id, 0xe457b5a2e4d86bd1);
    assert_eq!(ctx.parent_span_id, Some(0x05e3ac9a4f6e3b90));
    assert_eq!(ctx.sampled, Some(true));
    let ctx = parse_b3_single(b"a3ce929d0e0e4736-00f067aa0ba902b7")
        .unwrap()
        .parent()
        .cloned()
        .unwrap();
    assert_eq!(
        (ctx.trace_id, ctx.sampled, ctx.parent_span_id),
        (0xa3ce929d0e0e4736, None, None)
    );
    let ctx = parse_b3_single(b"a3ce929d0e0e4736-00f067aa0ba902b7-d")
        .unwrap()
        .parent()
        .cloned()
        .unwrap();
    assert_eq!((ctx.sampled, ctx.debug), (Some(true), true));
    let ctx = parse_b3_single(b"a3ce929d0e0e4736-00f067aa0ba902b7-0").unwrap();
    assert_eq!(ctx.sampled(), Some(false));
    assert_eq!(
        parse_b3_single(b"0"),
        Ok(Extracted::Sampling {
            sampled: false,
            debug: false
        })
    );
    assert_eq!(
        parse_b3_single(b"1"),
        Ok(Extracted::Sampling {
            sampled: true,
            debug: false
        })
    );
    assert_eq!(
        parse_b3_single(b"d"),
        Ok(Extracted::Sampling {
            sampled: true,
            debug: true
        })
    );
    for bad in [
        "",
        "2",
        "true",
        "a3ce929d0e0e4736",
        "a3ce929d0e0e4736-",
        "a3ce929d0e0e4736-00f067aa0ba902b7-",
        "a3ce929d0e0e4736-00f067aa0ba902b7-2",
        "a3ce929d0e0e4736-00f067aa0ba902b7-11",
        "a3ce929d0e0e4736-00f067aa0ba902b7-1-",
        "a3ce929d0e0e4736-00f067aa0ba902b7-1-05e3ac9a4f6e3b9",
        "a3ce929d0e0e4736-00f067aa0ba902b7-1-05e3ac9a4f6e3b90-x",
        "a3ce929d0e0e473-00f067aa0ba902b7",
        "0000000000000000-00f067aa0ba902b7",
        "a3ce929d0e0e4736-0000000000000000",
    ] {
        assert!(parse_b3_single(bad.as_bytes()).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn zipkin_precedence() {
    // b3 single wins over x-b3-* (Envoy's extractor reads it first).
    let h = [
        ("b3", "0"),
        ("x-b3-traceid", "a3ce929d0e0e4736"),
        ("x-b3-spanid", "00f067aa0ba902b7"),
    ];
    assert_eq!(
        extract(Propagation::B3, headers(&h)),
        Ok(Extracted::Sampling {
            sampled: false,
            debug: false
        })
    );
    let tp = (
        "traceparent",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    );
    assert_eq!(
        extract(Propagation::B3, headers(&[tp])),
        Ok(Extracted::None)
    );
    let got = extract(Propagation::B3WithW3c, headers(&[tp])).unwrap();
    assert_eq!(got.parent().unwrap().trace_id, TRACE);
    let h = [tp, ("x-b3-sampled", "0")];
    assert_eq!(
        extract(Propagation::B3WithW3c, headers(&h))
            .unwrap()
            .sampled(),
        Some(false)
    );
}

#[test]
fn b3_inject_as_envoy_zipkin() {
    let parent = TraceContext::root(0xa3ce929d0e0e4736, 0x00f067aa0ba902b7, true);
    let child = parent.child(0x1111111111111111, true);
    let out = collect(|set| inject(Propagation::B3, &child, false, set));
    let want = [
        ("x-b3-traceid", "a3ce929d0e0e4736"),
        ("x-b3-spanid", "1111111111111111"),
        ("x-b3-parentspanid", "00f067aa0ba902b7"),
        ("x-b3-sampled", "1"),
    ];
    assert_eq!(out, want.map(|(n, v)| (n, v.to_owned())));
    let shared = child.shared(false);
    assert_eq!(
        (shared.span_id, shared.parent_span_id, shared.sampled),
        (child.span_id, child.parent_span_id, Some(false))
    );
    let out = collect(|set| inject_b3(&child, true, set));
    assert_eq!(out[0].1, "0000000000000000a3ce929d0e0e4736");
    let wide = TraceContext::root(TRACE, SPAN, false);
    let out = collect(|set| inject(Propagation::B3WithW3c, &wide, false, set));
    let want = [
        ("x-b3-traceid", "4bf92f3577b34da6a3ce929d0e0e4736"),
        ("x-b3-spanid", "00f067aa0ba902b7"),
        ("x-b3-sampled", "0"),
        (
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
        ),
    ];
    assert_eq!(out, want.map(|(n, v)| (n, v.to_owned())));
}

/// Deterministic garbage near the valid shapes: parsers must return, not panic.
#[test]
fn arbitrary_bytes_never_panic() {
    const ALPHABET: &[u8] = b"0123456789abcdefABCDEF-- \t\xff\xc3d=,";
    let mut state: u64 = 0x9e3779b97f4a7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..20_000 {
        let len = (next() % 90) as usize;
        let value: Vec<u8> = (0..len)
            .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
            .collect();
        let _ = parse_traceparent(&value);
        let _ = parse_tracestate(&value);
        let _ = parse_b3_single(&value);
        let get = |name: &str| (name != B3).then_some(value.as_slice());
        let _ = extract(Propagation::B3WithW3c, get);
    }
}
