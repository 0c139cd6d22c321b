//! Each case below is a request Envoy 1.40 answered on the same redirect
//! (recorded side by side, 2026-11-27): host, `x-forwarded-proto`, path →
//! `location`.

use super::*;
use crate::config::PathMatch;
use regex::Regex;

fn redirect() -> Redirect {
    Redirect {
        status: 301,
        ..SELF
    }
}

fn prefix(p: &str) -> RouteMatch {
    RouteMatch::new(PathMatch::Prefix(p.into()))
}

fn at(r: &Redirect, m: &RouteMatch, host: &str, proto: &str, path: &str) -> String {
    let request = RedirectRequest {
        authority: host,
        path,
        forwarded_proto: proto,
    };
    redirect_location(r, m, &request)
}

fn https() -> Redirect {
    Redirect {
        scheme: Some("https".into()),
        ..redirect()
    }
}

#[test]
fn https_redirect_drops_only_the_old_schemes_default_port() {
    let (r, m, p) = (https(), prefix("/"), "/https/a/b?x=1");
    let cases = [
        ("example.com", "http", "https://example.com/https/a/b?x=1"),
        (
            "example.com:80",
            "http",
            "https://example.com/https/a/b?x=1",
        ),
        (
            "example.com:8080",
            "http",
            "https://example.com:8080/https/a/b?x=1",
        ),
        // :443 is not http's default: kept.
        (
            "example.com:443",
            "http",
            "https://example.com:443/https/a/b?x=1",
        ),
        (
            "example.com:443",
            "https",
            "https://example.com:443/https/a/b?x=1",
        ),
        // Already https by its forwarded proto: no scheme change, :80 kept.
        (
            "example.com:80",
            "https",
            "https://example.com:80/https/a/b?x=1",
        ),
        ("[::1]:80", "http", "https://[::1]/https/a/b?x=1"),
        ("[::1]", "http", "https://[::1]/https/a/b?x=1"),
        ("[::1]:8080", "http", "https://[::1]:8080/https/a/b?x=1"),
        (
            "EXAMPLE.com:80",
            "http",
            "https://EXAMPLE.com/https/a/b?x=1",
        ),
        ("e.com:", "http", "https://e.com:/https/a/b?x=1"),
    ];
    for (host, proto, want) in cases {
        assert_eq!(at(&r, &m, host, proto, p), want, "{host} {proto}");
    }
}

#[test]
fn scheme_redirect_strips_by_the_requests_scheme() {
    let m = prefix("/");
    let to = |s: &str| Redirect {
        scheme: Some(s.into()),
        ..redirect()
    };
    let cases = [
        ("ftp", "example.com:80", "http", "ftp://example.com/a?x=1"),
        (
            "http",
            "example.com:80",
            "http",
            "http://example.com:80/a?x=1",
        ),
        (
            "http",
            "example.com:443",
            "http",
            "http://example.com:443/a?x=1",
        ),
        (
            "http",
            "example.com:443",
            "https",
            "http://example.com/a?x=1",
        ),
        (
            "ftp",
            "example.com:8080",
            "http",
            "ftp://example.com:8080/a?x=1",
        ),
    ];
    for (scheme, host, proto, want) in cases {
        assert_eq!(at(&to(scheme), &m, host, proto, "/a?x=1"), want);
    }
}

#[test]
fn host_and_port_redirects() {
    let m = prefix("/");
    let host = |h: &str, port: Option<u16>| Redirect {
        host: Some(h.into()),
        port,
        ..redirect()
    };
    let r = host("new.example.com", None);
    for h in ["example.com", "example.com:8080", "example.com:80"] {
        assert_eq!(
            at(&r, &m, h, "http", "/host/a?x=1"),
            "http://new.example.com/host/a?x=1"
        );
    }
    let r = host("new.example.com:9000", None);
    assert_eq!(
        at(&r, &m, "e:1", "http", "/a"),
        "http://new.example.com:9000/a"
    );
    // The port is appended as it is, even after a host with one.
    let r = host("h.example:99", Some(8443));
    assert_eq!(
        at(&r, &m, "e", "http", "/a/x?q=1"),
        "http://h.example:99:8443/a/x?q=1"
    );
    let port = |p| Redirect {
        port: Some(p),
        ..redirect()
    };
    let cases = [
        (8443, "example.com", "http://example.com:8443/a?x=1"),
        (8443, "example.com:8080", "http://example.com:8443/a?x=1"),
        (8443, "[::1]:8080", "http://[::1]:8443/a?x=1"),
        (8443, "[::1]", "http://[::1]:8443/a?x=1"),
        // A scheme's default port is not elided.
        (80, "example.com:80", "http://example.com:80/a?x=1"),
        (443, "example.com", "http://example.com:443/a?x=1"),
    ];
    for (p, h, want) in cases {
        assert_eq!(at(&port(p), &m, h, "http", "/a?x=1"), want);
    }
    let r = Redirect {
        port: Some(443),
        ..https()
    };
    assert_eq!(
        at(&r, &m, "example.com:80", "http", "/a"),
        "https://example.com:443/a"
    );
}

#[test]
fn path_redirect_and_strip_query() {
    let m = prefix("/");
    let path = |p: &str, strip| Redirect {
        path: RedirectPath::Path {
            path: p.into(),
            has_query: p.contains('?'),
        },
        strip_query: strip,
        ..redirect()
    };
    let h = "example.com";
    assert_eq!(
        at(&path("/new", false), &m, h, "http", "/p/a"),
        "http://example.com/new"
    );
    assert_eq!(
        at(&path("/new", false), &m, h, "http", "/p/a?x=1"),
        "http://example.com/new?x=1"
    );
    assert_eq!(
        at(&path("/new", true), &m, h, "http", "/p/a?x=1"),
        "http://example.com/new"
    );
    // Its own query replaces the request's, and survives strip_query.
    assert_eq!(
        at(&path("/new?y=2", false), &m, h, "http", "/p?x=1"),
        "http://example.com/new?y=2"
    );
    assert_eq!(
        at(&path("/new?y=2", true), &m, h, "http", "/p?x=1"),
        "http://example.com/new?y=2"
    );
    assert_eq!(
        at(&path("/new?", false), &m, h, "http", "/a?x=1"),
        "http://example.com/new?"
    );
    // A path without its leading slash gets one.
    assert_eq!(
        at(&path("new", false), &m, h, "http", "/a?x=1"),
        "http://example.com/new?x=1"
    );
    let strip = Redirect {
        strip_query: true,
        ..redirect()
    };
    assert_eq!(
        at(&strip, &m, "example.com:8080", "http", "/s/a?x=1&y=2"),
        "http://example.com:8080/s/a"
    );
    // An empty redirect points at the request itself.
    assert_eq!(
        at(&redirect(), &m, "example.com:8080", "http", "/zz?q=1"),
        "http://example.com:8080/zz?q=1"
    );
}

#[test]
fn prefix_rewrite_concatenates_as_envoy_does() {
    let rw = |p: &str| Redirect {
        path: RedirectPath::Prefix(p.into()),
        ..redirect()
    };
    let cases = [
        ("/old/", "/new/", "/old/x?q=1", "/new/x?q=1"),
        ("/old", "/", "/oldx", "/x"),
        ("/old", "/", "/old/x", "//x"),
        ("/old", "/", "/old", "/"),
        ("/old", "/", "/old?q=1", "/?q=1"),
        ("/old", "/new/", "/old/x", "/new//x"),
        ("/old/", "/new", "/old/x/y?q=1", "/newx/y?q=1"),
        ("/", "/v2/", "/?q=1", "/v2/?q=1"),
        ("/nb", "b", "/nbx/y", "/bx/y"),
    ];
    for (matched, new, path, want) in cases {
        let got = at(&rw(new), &prefix(matched), "h", "http", path);
        assert_eq!(
            got,
            format!("http://h{want}"),
            "{matched} -> {new} on {path}"
        );
    }
    // Case-insensitive matches: the matched text is replaced, whatever its case.
    let m = RouteMatch {
        case_sensitive: false,
        ..prefix("/OLD")
    };
    assert_eq!(at(&rw("/new"), &m, "h", "http", "/OlD/x"), "http://h/new/x");
    // `path` and `safe_regex` matches: the whole path, the query kept.
    let exact = RouteMatch {
        path: PathMatch::Path("/exact/p".into()),
        ..prefix("/")
    };
    assert_eq!(
        at(&rw("/other"), &exact, "h", "http", "/exact/p?z=1"),
        "http://h/other?z=1"
    );
    let re = RouteMatch {
        path: PathMatch::Regex(Regex::new("^(?:/rx/.*)$").unwrap()),
        ..prefix("/")
    };
    assert_eq!(at(&rw("/z"), &re, "h", "http", "/rx/abc"), "http://h/z");
    let all = Redirect {
        scheme: Some("https".into()),
        host: Some("h.example".into()),
        port: Some(9443),
        path: RedirectPath::Prefix("/new".into()),
        strip_query: true,
        status: 307,
    };
    assert_eq!(
        at(&all, &prefix("/old"), "e", "http", "/old/x?q=1"),
        "https://h.example:9443/new/x"
    );
}

#[test]
fn regex_rewrite_replaces_every_match_in_the_path_only() {
    // Substitutions are stored in the regex crate's syntax (`${1}`).
    let rw = |pattern: &str, sub: &str| Redirect {
        path: RedirectPath::Regex {
            pattern: Regex::new(pattern).unwrap(),
            substitution: sub.into(),
        },
        ..redirect()
    };
    let m = prefix("/");
    let r = rw(r"^/r/(\d+)/(.*)$", "/s/${2}/${1}");
    assert_eq!(
        at(&r, &m, "example.com", "http", "/r/123/foo/bar?x=1"),
        "http://example.com/s/foo/bar/123?x=1"
    );
    // No match: the path as it was, still redirected.
    assert_eq!(
        at(&r, &m, "example.com", "http", "/r/abc/foo?x=1"),
        "http://example.com/r/abc/foo?x=1"
    );
    assert_eq!(
        at(&rw("o", "0"), &m, "r1", "http", "/foo/boo?o=o"),
        "http://r1/f00/b00?o=o"
    );
    // The query follows whatever the substitution made (two `?`, as Envoy).
    let r = rw("^/(.*)$", "/x/${1}?added=1");
    assert_eq!(
        at(&r, &m, "r2", "http", "/a/b?q=1"),
        "http://r2/x/a/b?added=1?q=1"
    );
}
