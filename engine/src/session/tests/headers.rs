//! Tests of cookie lookup, path matching, `set-cookie` and A39 overrides.

use super::*;

// --- find_cookie ---------------------------------------------------------

#[test]
fn find_cookie_across_fields_first_wins() {
    let fields: [&[u8]; 3] = [b"a=1; b=2", b"session=first", b"session=second; c=3"];
    assert_eq!(find_cookie(fields, "session"), Some(&b"first"[..]));
    assert_eq!(find_cookie(fields, "c"), Some(&b"3"[..]));
    assert_eq!(find_cookie(fields, "b"), Some(&b"2"[..]));
    assert_eq!(find_cookie(fields, "d"), None);
    let within: [&[u8]; 1] = [b"s=1; s=2"];
    assert_eq!(find_cookie(within, "s"), Some(&b"1"[..]));
    assert_eq!(find_cookie(std::iter::empty::<&[u8]>(), "s"), None);
}

#[test]
fn find_cookie_names_are_exact_and_case_sensitive() {
    let fields: [&[u8]; 2] = [b"session=long; Sess=upper", b"sess=short"];
    assert_eq!(find_cookie(fields, "sess"), Some(&b"short"[..]));
    assert_eq!(find_cookie(fields, "session"), Some(&b"long"[..]));
    assert_eq!(find_cookie(fields, "Sess"), Some(&b"upper"[..]));
    assert_eq!(find_cookie(fields, "ses"), None);
    assert_eq!(find_cookie(fields, "sessions"), None);
}

#[test]
fn find_cookie_skips_whitespace_and_empty_pairs() {
    let fields: [&[u8]; 3] = [b";; ;", b"  flag ;  x = \"quoted\"  ;", b"\ty=\t; z=a=b"];
    assert_eq!(find_cookie(fields, "x"), Some(&b"\"quoted\""[..]));
    assert_eq!(find_cookie(fields, "y"), Some(&b""[..]));
    // only the first '=' separates name and value
    assert_eq!(find_cookie(fields, "z"), Some(&b"a=b"[..]));
    // a pair without '=' is no cookie
    assert_eq!(find_cookie(fields, "flag"), None);
    assert_eq!(find_cookie(fields, ""), None);
}

#[test]
fn find_cookie_then_decode() {
    let fields: [&[u8]; 2] = [b"other=x", b"GCLB=\"MTI3LjAuMC4xOjgwODA=\"; z=1"];
    let raw = find_cookie(fields, "GCLB").expect("present");
    assert_eq!(decode_cookie_value(raw, NOW), valid("127.0.0.1:8080"));
}

// --- path_matches --------------------------------------------------------

#[test]
fn root_path_matches_everything() {
    for p in ["/", "/a", "/a/b?c=d", "/?x", ""] {
        assert!(path_matches("/", p), "{p}");
    }
    assert!(!path_matches("/", "*"));
}

#[test]
fn path_without_trailing_slash() {
    assert!(path_matches("/foo", "/foo"));
    assert!(path_matches("/foo", "/foo/"));
    assert!(path_matches("/foo", "/foo/bar"));
    assert!(path_matches("/foo", "/foo?x"));
    assert!(path_matches("/foo", "/foo?x=/bar"));
    assert!(!path_matches("/foo", "/foobar"));
    assert!(!path_matches("/foo", "/fo"));
    assert!(!path_matches("/foo", "/"));
    assert!(!path_matches("/foo", "/Foo"));
    assert!(!path_matches("/foo", "/bar/foo"));
    assert!(!path_matches("/foo", "/x?/foo"));
}

#[test]
fn path_with_trailing_slash() {
    assert!(path_matches("/foo/", "/foo/bar"));
    assert!(path_matches("/foo/", "/foo/"));
    assert!(!path_matches("/foo/", "/foo"));
    assert!(!path_matches("/foo/", "/foo?x/"));
    assert!(path_matches(
        "/Package1.Service2/",
        "/Package1.Service2/Method"
    ));
    assert!(!path_matches(
        "/Package1.Service2",
        "/Package2.Service1/Method3"
    ));
}

// --- set_cookie ----------------------------------------------------------

fn cookie(ttl: u64, path: Option<&str>) -> SessionCookie {
    SessionCookie {
        name: "global-session-cookie".to_owned(),
        ttl: Duration::from_secs(ttl),
        path: path.map(str::to_owned),
    }
}

#[test]
fn set_cookie_exact_strings() {
    let a = addr("127.0.0.1:8080");
    assert_eq!(
        set_cookie(&cookie(1000, Some("/svc")), a, 1_699_999_000, CookieFormat::Envoy),
        "global-session-cookie=\"Cg4xMjcuMC4wLjE6ODA4MBCA4s+qBg==\"; Max-Age=1000; Path=/svc; HttpOnly"
    );
    assert_eq!(
        set_cookie(&cookie(0, None), a, NOW, CookieFormat::Envoy),
        "global-session-cookie=\"Cg4xMjcuMC4wLjE6ODA4MA==\"; HttpOnly"
    );
    assert_eq!(
        set_cookie(&cookie(60, None), a, NOW, CookieFormat::Plain),
        "global-session-cookie=\"MTI3LjAuMC4xOjgwODA=\"; Max-Age=60; HttpOnly"
    );
    assert_eq!(
        set_cookie(
            &cookie(0, Some("/")),
            addr("[::1]:80"),
            NOW,
            CookieFormat::Plain
        ),
        "global-session-cookie=\"Wzo6MV06ODA=\"; Path=/; HttpOnly"
    );
    let mut sub_second = cookie(0, None);
    sub_second.ttl = Duration::from_millis(999);
    assert_eq!(
        set_cookie(&sub_second, a, NOW, CookieFormat::Plain),
        "global-session-cookie=\"MTI3LjAuMC4xOjgwODA=\"; HttpOnly"
    );
}

#[test]
fn set_cookie_value_round_trips_through_find_cookie() {
    let header = set_cookie(
        &cookie(30, Some("/a")),
        addr("[::1]:80"),
        NOW,
        CookieFormat::Envoy,
    );
    // A client echoes back NAME=VALUE (the part before the attributes).
    let pair = header.split(';').next().expect("pair");
    let raw = find_cookie([pair.as_bytes()], "global-session-cookie").expect("cookie");
    assert_eq!(decode_cookie_value(raw, NOW + 30), valid("[::1]:80"));
    assert_eq!(decode_cookie_value(raw, NOW + 31), SessionValue::Expired);
}

// --- effective -----------------------------------------------------------

fn ss(name: &str) -> StatefulSession {
    StatefulSession {
        session_state: Some(SessionState::Header(SessionHeader {
            name: name.to_owned(),
        })),
        strict: false,
        strict_not_found_status: 503,
    }
}

fn name_of(config: Option<&StatefulSession>) -> Option<&str> {
    match config?.session_state.as_ref()? {
        SessionState::Header(h) => Some(&h.name),
        SessionState::Cookie(c) => Some(&c.name),
    }
}

#[test]
fn effective_merge_matrix() {
    let l = ss("listener");
    let v = StatefulSessionPerRoute::Override(ss("vhost"));
    let r = StatefulSessionPerRoute::Override(ss("route"));
    let off = StatefulSessionPerRoute::Disabled;
    // (listener, vhost, route, expected effective config's name)
    type Case<'a> = (
        Option<&'a StatefulSession>,
        Option<&'a StatefulSessionPerRoute>,
        Option<&'a StatefulSessionPerRoute>,
        Option<&'a str>,
    );
    let cases: [Case<'_>; 12] = [
        (Some(&l), None, None, Some("listener")),
        (Some(&l), Some(&v), None, Some("vhost")),
        (Some(&l), None, Some(&r), Some("route")),
        (Some(&l), Some(&v), Some(&r), Some("route")),
        (Some(&l), Some(&off), None, None),
        (Some(&l), None, Some(&off), None),
        (Some(&l), Some(&v), Some(&off), None),
        // a route override re-enables what the vhost disabled
        (Some(&l), Some(&off), Some(&r), Some("route")),
        // no filter on the listener: per-route config is ignored
        (None, None, None, None),
        (None, Some(&v), None, None),
        (None, None, Some(&r), None),
        (None, Some(&v), Some(&r), None),
    ];
    for (i, (listener, vhost, route, want)) in cases.into_iter().enumerate() {
        assert_eq!(name_of(effective(listener, vhost, route)), want, "case {i}");
    }
}

#[test]
fn effective_without_session_state_is_off() {
    let empty = StatefulSession {
        session_state: None,
        strict: true,
        strict_not_found_status: 503,
    };
    let l = ss("listener");
    let empty_override = StatefulSessionPerRoute::Override(empty.clone());
    assert_eq!(effective(Some(&empty), None, None), None);
    assert_eq!(effective(Some(&l), None, Some(&empty_override)), None);
    assert_eq!(effective(Some(&l), Some(&empty_override), None), None);
    let r = StatefulSessionPerRoute::Override(ss("route"));
    assert_eq!(
        name_of(effective(Some(&empty), None, Some(&r))),
        Some("route")
    );
    // the returned reference is the route's own config (strict etc. carried)
    assert!(std::ptr::eq(
        effective(Some(&l), None, Some(&r)).expect("on"),
        match &r {
            StatefulSessionPerRoute::Override(c) => c,
            StatefulSessionPerRoute::Disabled => unreachable!(),
        }
    ));
}
